"""The ``spreadsheetbench`` environment: SpreadsheetBench in its published layouts.

In deep-learning terms it is a data set plus a loss, read from the user's copy of
RUCKBReasoning/SpreadsheetBench. Each item (``id``, ``instruction``, ``instruction_type``,
``answer_position``; ``answer_sheet`` and ``spreadsheet_path`` optional) names a task folder,
``spreadsheet_path`` (default ``spreadsheet/<id>``), which holds the item's test cases in one of
the three namings of the releases:

* ``<n>_<id>_input.xlsx`` with ``<n>_<id>_answer.xlsx`` (the original release);
* ``<n>_<id>_init.xlsx`` with ``<n>_<id>_golden.xlsx`` (SpreadsheetBench Verified);
* ``initial.xlsx`` with ``golden.xlsx``, one case, read only when the folder has no numbered
  case (Verified, unnumbered).

The items are read in one of two ways:

* ``split_mode: ratio`` (SpreadsheetBench's own layout): ``data_path`` is the folder holding
  ``dataset.json``, or the item file itself, and is split by item;
* ``split_mode: split_dir`` (SkillOpt's layout, ``data/spreadsheetbench_split``): the folder
  holds ``train/``, ``val/`` and ``test/``, each with an ``items.json`` array of items (a
  split folder's .json files are all read, in name order; SkillOpt reads only the first).

``spreadsheet_path`` is relative to ``data_root`` when it is set, else to the folder of the file
that lists the item. SpreadsheetBench's own layout needs only ``data_path``; SkillOpt's needs
``data_root`` too (its ``data/spreadsheetbench_verified_400``), since its split files live
apart from the workbooks. An absolute ``spreadsheet_path`` is used as it is.

Each test case is one task (an item's cases share its split group). The target gets the
instruction and works on the input workbook with the same tools as ``spreadsheet``; the loss
compares the cells named by ``answer_position`` (``A1:B3``, ``Sheet1!A1``, ``'My Sheet'!C2:C9``
or several of these separated by commas; a range without a sheet belongs to ``answer_sheet``
or else the first sheet) with the answer workbook's stored values.
"""

from __future__ import annotations

import logging
import re
import zipfile
from pathlib import Path
from typing import Any, ClassVar, Literal

import openpyxl
from openpyxl.utils import get_column_letter, range_boundaries
from pydantic import Field

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions, Split
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

log = logging.getLogger(__name__)

REQUIRED = ("id", "instruction", "instruction_type", "answer_position")
MAX_TARGET_CELLS = 20000
# (input suffix, answer suffix) of the numbered test cases, in the order their cases are listed.
NAMINGS = (("_input.xlsx", "_answer.xlsx"), ("_init.xlsx", "_golden.xlsx"))
# The one unnumbered case of a folder that has no numbered case.
BARE_CASE = ("initial.xlsx", "golden.xlsx")


class SpreadsheetBenchOptions(WorkbookOptions):
    """The ``env:`` keys of ``spreadsheetbench``."""

    data_path: Path | None = Field(None, description="split_mode ratio: the dataset folder "
                                   "(holding dataset.json) or the item file itself")
    data_root: Path | None = Field(None, description="the folder each item's spreadsheet_path "
                                   "is relative to; unset: the folder of the file listing the "
                                   "item (SkillOpt's split_dir layout needs it)")
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
    """Reads an item file into tasks, one per test case, checking that the files exist.

    ``root`` is the folder ``spreadsheet_path`` is relative to (``env.data_root``); without
    it, the item file's own folder."""

    def __init__(self, cases: str, root: Path | None = None) -> None:
        self.cases = cases
        self.root = root

    def __call__(self, path: Path) -> list[Task]:
        path = Path(path)
        if path.is_dir():
            path = path / "dataset.json"
        tasks: list[Task] = []
        for where, item in located_records(path):
            item_id, folder = self._item(where, item, path.parent)
            found = find_test_cases(folder)
            if not found:
                hint = ("" if self.root is not None or folder.exists() else
                        "; if the workbooks live elsewhere, set env.data_root to the folder "
                        "spreadsheet_path is relative to")
                raise DataError(f"{where}: item {item_id}: no test cases in {folder} (looked "
                                f"for <n>_<id>_input.xlsx + <n>_<id>_answer.xlsx, "
                                f"<n>_<id>_init.xlsx + <n>_<id>_golden.xlsx, or initial.xlsx "
                                f"+ golden.xlsx){hint}")
            for case, input_path, answer_path in (found[:1] if self.cases == "first" else found):
                tasks.append(Task(
                    id=f"{item_id}#{case}", prompt=str(item["instruction"]).strip(),
                    group=item_id,
                    reference={"input": str(input_path), "answer": str(answer_path),
                               "answer_position": str(item["answer_position"]),
                               "answer_sheet": item.get("answer_sheet") or None},
                    metadata={"instruction_type": str(item["instruction_type"]),
                              "case": case, "where": where}))
        return tasks

    def _item(self, where: str, item: dict[str, Any], beside: Path) -> tuple[str, Path]:
        """The item's id and task folder, after checking its fields."""
        missing = [k for k in REQUIRED if not isinstance(item.get(k), (str, int))
                   or isinstance(item.get(k), bool)]
        if missing:
            raise DataError(f"{where}: missing {', '.join(missing)} (a string or number "
                            "each)")
        empty = [k for k in ("id", "instruction") if not str(item[k]).strip()]
        if empty:
            raise DataError(f"{where}: empty {', '.join(empty)}")
        item_id = str(item["id"]).strip()
        for key in ("spreadsheet_path", "answer_sheet"):
            if item.get(key) is not None and not isinstance(item[key], str):
                raise DataError(f"{where}: item {item_id}: {key} must be a string, got "
                                f"{type(item[key]).__name__}")
        try:
            parse_answer_position(str(item["answer_position"]))
        except ValueError as exc:
            raise DataError(f"{where}: item {item_id}: {exc}") from None
        relative = Path(item.get("spreadsheet_path") or f"spreadsheet/{item_id}").expanduser()
        return item_id, resolve_path(relative, self.root if self.root is not None else beside)


def find_test_cases(folder: Path) -> list[tuple[str, Path, Path]]:
    """The test cases of a task folder as ``(case, input, answer)``: every
    ``<n>_..._input.xlsx`` with its ``_answer.xlsx``, then every ``<n>_..._init.xlsx`` with
    its ``_golden.xlsx`` (``<n>`` is the name up to the first underscore, each kind in
    natural order of it); when there is none, ``initial.xlsx`` with ``golden.xlsx`` as case
    1. An input without its answer is skipped with a warning; two cases with one number, or
    a file that is not a zip archive, is a :class:`DataError`."""
    if not folder.is_dir():
        return []
    names = {p.name for p in folder.iterdir() if p.is_file()}
    found: list[tuple[str, Path, Path]] = []
    for input_suffix, answer_suffix in NAMINGS:
        kind = []
        for name in sorted(names):
            case = name.split("_", 1)[0]
            if not name.endswith(input_suffix) or not case or len(name) <= len(input_suffix):
                continue
            answer = name[: -len(input_suffix)] + answer_suffix
            if answer not in names:
                log.warning("%s: no %s beside it; this test case is skipped", folder / name,
                            answer)
                continue
            kind.append((case, folder / name, folder / answer))
        found += sorted(kind, key=lambda c: (_natural(c[0]), c[1].name))
    if not found and all(n in names for n in BARE_CASE):
        found = [("1", folder / BARE_CASE[0], folder / BARE_CASE[1])]
    seen: dict[str, Path] = {}
    for case, input_path, answer_path in found:
        if seen.setdefault(case, input_path) != input_path:
            raise DataError(f"{folder}: two test cases numbered {case} ({seen[case].name} and "
                            f"{input_path.name}); rename one")
        for f in (input_path, answer_path):
            if not zipfile.is_zipfile(f):
                raise DataError(f"{f}: not an .xlsx workbook (not a zip archive)")
    return found


def _natural(case: str) -> tuple[int, int, str]:
    """Sort key: numbered cases by number, then any others by name."""
    return (0, int(case), "") if case.isdigit() else (1, 0, case)


def _check_unique_items(splits: dict[Split, list[Task]]) -> None:
    """An item listed twice would give two tasks one id (and, across splits, would score
    what training saw)."""
    seen: dict[str, Task] = {}
    for split in SPLITS:
        for task in splits[split]:
            first = seen.setdefault(task.id, task)
            if first is not task:
                raise DataError(f"{task.metadata['where']}: item {task.group} is listed again "
                                f"(first at {first.metadata['where']}); item ids must be "
                                "unique")


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
                              "folder holding dataset.json (or, with split_mode: split_dir, "
                              "env.split_dir: the folder holding train/, val/ and test/)")
        check_python_tool(options)
        root = None
        if options.data_root is not None:
            root = resolve_path(options.data_root, base_dir)
            if not root.is_dir():
                raise DataError(f"{root}: env.data_root is not a folder (it holds the task "
                                "folders each item's spreadsheet_path names)")
        data_path = resolve_path(options.data_path, base_dir) if options.data_path else None
        splits = load_splits(common, data_path, base_dir, _Loader(options.cases, root),
                             lambda t: t.group)
        _check_unique_items(splits)
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
