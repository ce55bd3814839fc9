"""The ``spreadsheetbench`` environment: SpreadsheetBench in its published layout.

In deep-learning terms it is a data set plus a loss, read from the user's copy of
RUCKBReasoning/SpreadsheetBench::

    <data_path>/dataset.json                 list of items: id, instruction, spreadsheet_path,
                                             instruction_type, answer_position (answer_sheet,
                                             data_position optional)
    <data_path>/<spreadsheet_path>/<n>_<id>_input.xlsx   test case n: the workbook to edit
    <data_path>/<spreadsheet_path>/<n>_<id>_answer.xlsx  test case n: the expected workbook

Each test case is one task (an item's cases share its split group). The target gets the
instruction and works on the input workbook with the same tools as ``spreadsheet``; the loss
compares the cells named by ``answer_position`` (``A1:B3``, ``Sheet1!A1``, ``'My Sheet'!C2:C9``
or several of these separated by commas; a range without a sheet belongs to ``answer_sheet``
or else the first sheet) with the answer workbook's stored values.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Any, ClassVar, Literal

import openpyxl
from openpyxl.utils import get_column_letter, range_boundaries
from pydantic import Field

from skillgrad.envs.base import EnvCommon, EnvOptions
from skillgrad.envs.data import (
    SplitTasksMixin,
    load_splits,
    located_records,
    resolve_path,
    skill_file,
)
from skillgrad.envs.spreadsheet.checker import qualified
from skillgrad.envs.spreadsheet.workbook import (
    WorkbookOptions,
    check_python_tool,
    run_workbook_episode,
    sheet_summary,
    workbook_reason,
)
from skillgrad.errors import ConfigError, DataError
from skillgrad.models.base import ChatModel
from skillgrad.records import RolloutResult, Task

REQUIRED = ("id", "instruction", "spreadsheet_path", "instruction_type", "answer_position")
MAX_TARGET_CELLS = 20000


class SpreadsheetBenchOptions(WorkbookOptions):
    """The ``env:`` keys of ``spreadsheetbench``."""

    data_path: Path | None = Field(None, description="the dataset folder (holding dataset.json) "
                                   "or the dataset.json file itself")
    cases: Literal["all", "first"] = Field("all", description="test cases per item as tasks")
    # SpreadsheetBench's own checker rounds numbers to 2 decimals before comparing.
    tolerance: float = Field(0.005, ge=0.0, description="relative and absolute tolerance")


def _sheet_of(part: str) -> tuple[str | None, str]:
    sheet, bang, box = part.strip().rpartition("!")
    if not bang:
        return None, box.strip().strip("'")
    return sheet.strip().strip("'").replace("''", "'"), box.strip().strip("'")


def parse_answer_position(position: str) -> list[tuple[str | None, str]]:
    """``"'S 1'!A1:B2,C5"`` -> ``[("S 1", "A1:B2"), (None, "C5")]``; commas inside quoted sheet
    names do not split. Raises :class:`ValueError` for an empty or malformed position."""
    parts, current, quoted = [], "", False
    for ch in position:
        if ch == "'":
            quoted = not quoted
        if ch == "," and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    out = [_sheet_of(p) for p in parts if p.strip()]
    if not out:
        raise ValueError("answer_position is empty")
    for _, box in out:
        if not re.fullmatch(r"\$?[A-Za-z]{0,3}\$?\d*(:\$?[A-Za-z]{0,3}\$?\d*)?", box) or not box:
            raise ValueError(f"answer_position part {box!r} is not a cell or range")
    return out


class _Loader:
    """Reads dataset.json into tasks, one per test case, checking that the files exist."""

    def __init__(self, cases: str) -> None:
        self.cases = cases

    def __call__(self, path: Path) -> list[Task]:
        path = Path(path)
        if path.is_dir():
            path = path / "dataset.json"
        root = path.parent
        tasks: list[Task] = []
        for where, item in located_records(path):
            missing = [k for k in REQUIRED if not isinstance(item.get(k), (str, int))]
            if missing:
                raise DataError(f"{where}: missing {', '.join(missing)}")
            item_id = str(item["id"])
            try:
                parse_answer_position(str(item["answer_position"]))
            except ValueError as exc:
                raise DataError(f"{path}: item {item_id}: {exc}") from None
            folder = root / str(item["spreadsheet_path"])
            found = _test_cases(folder, item_id)
            if not found:
                raise DataError(f"{folder}: no test cases <n>_{item_id}_input.xlsx with a "
                                f"matching <n>_{item_id}_answer.xlsx (item {item_id} of {path})")
            for n, (input_path, answer_path) in (found[:1] if self.cases == "first" else found):
                tasks.append(Task(
                    id=f"{item_id}#{n}", prompt=str(item["instruction"]).strip(), group=item_id,
                    reference={"input": str(input_path), "answer": str(answer_path),
                               "answer_position": str(item["answer_position"]),
                               "answer_sheet": item.get("answer_sheet")},
                    metadata={"instruction_type": str(item["instruction_type"]), "case": n}))
        return tasks


def _test_cases(folder: Path, item_id: str) -> list[tuple[int, tuple[Path, Path]]]:
    if not folder.is_dir():
        return []
    pattern = re.compile(rf"^(\d+)_{re.escape(item_id)}_input\.xlsx$")
    found = []
    for p in sorted(folder.iterdir()):
        match = pattern.match(p.name)
        answer = folder / f"{match.group(1)}_{item_id}_answer.xlsx" if match else None
        if match and answer is not None and answer.is_file():
            for f in (p, answer):
                if not zipfile.is_zipfile(f):
                    raise DataError(f"{f}: not an .xlsx workbook (not a zip archive)")
            found.append((int(match.group(1)), (p, answer)))
    return sorted(found)


def _open(path: Path, data_only: bool = False) -> openpyxl.Workbook:
    try:
        return openpyxl.load_workbook(path, data_only=data_only)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    # openpyxl raises many kinds of errors for a damaged file; each is one bad-data line.
    except Exception as exc:  # noqa: BLE001
        raise DataError(f"{path}: cannot be read as an .xlsx workbook "
                        f"({type(exc).__name__})") from None


def expected_cells(task: Task) -> dict[str, Any]:
    """Target cell -> stored value of the answer workbook, for ``answer_position``."""
    ref = task.reference
    answer_path = Path(ref["answer"])
    wb = _open(answer_path, data_only=True)
    default = ref.get("answer_sheet") or wb.sheetnames[0]
    targets: dict[str, Any] = {}
    for sheet, box in parse_answer_position(ref["answer_position"]):
        sheet = sheet or default
        if sheet not in wb.sheetnames:
            raise DataError(f"{answer_path}: answer_position names sheet {sheet!r}, which the "
                            f"answer workbook does not have ({', '.join(wb.sheetnames)})")
        ws = wb[sheet]
        min_col, min_row, max_col, max_row = range_boundaries(box.upper())
        # Whole columns or rows (A:A, 3:3) stop at the answer sheet's used area.
        for r in range(min_row or 1, (max_row or ws.max_row) + 1):
            for c in range(min_col or 1, (max_col or ws.max_column) + 1):
                cell = f"{get_column_letter(c)}{r}"
                targets[qualified(sheet, cell)] = ws[cell].value
                if len(targets) > MAX_TARGET_CELLS:
                    raise DataError(f"{answer_path}: answer_position {ref['answer_position']!r} "
                                    f"covers more than {MAX_TARGET_CELLS} cells")
    return targets


class SpreadsheetBenchEnvironment(SplitTasksMixin[SpreadsheetBenchOptions]):
    """SpreadsheetBench items as workbook-editing tasks; built with :meth:`create`."""

    SKILL_PACKAGE = "skillgrad.envs.spreadsheet"
    Options: ClassVar[type[EnvOptions]] = SpreadsheetBenchOptions

    @classmethod
    def create(cls, common: EnvCommon, options: Any,
               base_dir: Path) -> SpreadsheetBenchEnvironment:
        if options.data_path is None and common.split_mode == "ratio":
            raise ConfigError("env spreadsheetbench needs env.data_path: the SpreadsheetBench "
                              "folder holding dataset.json")
        check_python_tool(options)
        data_path = resolve_path(options.data_path, base_dir) if options.data_path else None
        splits = load_splits(common, data_path, base_dir, _Loader(options.cases),
                             lambda t: t.group)
        return cls(splits, options, skill_file(common, base_dir))

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        input_path = Path(task.reference["input"])
        targets = expected_cells(task)
        sheets = sheet_summary(_open(input_path))
        prompt = (f"Task: {task.prompt}\nAnswer cells: {task.reference['answer_position']}\n"
                  f"Sheets: {sheets}\nWhen the workbook is done, reply ANSWER: done")
        outcome = run_workbook_episode(model, skill, prompt, input_path.read_bytes(), targets,
                                       self.options)
        episode = outcome.episode
        return RolloutResult(
            task_id=task.id, messages=episode.messages, answer=episode.answer or "",
            hard=outcome.check.hard, soft=outcome.check.soft, reason=workbook_reason(outcome),
            turns=episode.turns, usage=episode.usage,
            metadata={"instruction_type": task.metadata.get("instruction_type"),
                      "wrong_cells": len(outcome.check.wrong),
                      "tools": [a.tool for a in episode.actions]})
