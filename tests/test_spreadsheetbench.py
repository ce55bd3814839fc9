"""The spreadsheetbench loader: SpreadsheetBench's published layout (written here by the test),
answer_position parsing, scoring against the answer workbooks, and bad data."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from skillgrad.envs.base import EnvCommon
from skillgrad.envs.spreadsheet.spreadsheetbench import (
    SpreadsheetBenchEnvironment,
    SpreadsheetBenchOptions,
    expected_cells,
    parse_answer_position,
)
from skillgrad.errors import ConfigError, DataError
from skillgrad.models.scripted import ScriptedModel

NAME = "skillgrad.envs.spreadsheet:SpreadsheetBenchEnvironment"
# (answer_position, sheet of the answer cells) per item; item 2 names two sheets.
POSITIONS = ["C2:C4", "Data!C2:C4", "'My, Sheet'!C2:C4", "'My, Sheet'!C2:C3,'My, Sheet'!C4",
             "C2:C4"]


def _book(path: Path, sheet: str, rows: list[list[Any]], extra: bool = False) -> None:
    wb = openpyxl.Workbook()
    ws = wb.active
    assert ws is not None
    ws.title = sheet
    for row in rows:
        ws.append(row)
    if extra:
        wb.create_sheet("Notes")["A1"] = "keep"
    wb.save(path)


def write_layout(root: Path, items: int = 5, cases: int = 3) -> Path:
    """SpreadsheetBench's layout: dataset.json and spreadsheet/<id>/<n>_<id>_{input,answer}.xlsx
    where the answer workbook has C = A + B."""
    dataset = []
    for i in range(items):
        item_id = f"{100 + i}-{i}"
        sheet = "My, Sheet" if "My" in POSITIONS[i] else "Data"
        folder = root / "spreadsheet" / item_id
        folder.mkdir(parents=True)
        for n in range(1, cases + 1):
            rows = [["A", "B", "Sum"], *[[n * r + i, r, None] for r in range(1, 4)]]
            _book(folder / f"{n}_{item_id}_input.xlsx", sheet, rows, extra=True)
            solved = [rows[0], *[[a, b, a + b] for a, b, _ in rows[1:]]]
            _book(folder / f"{n}_{item_id}_answer.xlsx", sheet, solved, extra=True)
        dataset.append({"id": item_id, "instruction": "Fill C2:C4 with column A plus column B.",
                        "spreadsheet_path": f"spreadsheet/{item_id}",
                        "instruction_type": "Cell-Level Manipulation",
                        "answer_position": POSITIONS[i], "answer_sheet": sheet})
    (root / "dataset.json").write_text(json.dumps(dataset))
    return root


@pytest.fixture()
def layout(tmp_path: Path) -> Path:
    return write_layout(tmp_path / "sample_data")


def _env(path: Path, **options: Any) -> SpreadsheetBenchEnvironment:
    return SpreadsheetBenchEnvironment.create(
        EnvCommon(name=NAME), SpreadsheetBenchOptions(data_path=path, **options), Path("."))


def test_loads_one_task_per_test_case_with_items_kept_in_one_split(layout: Path) -> None:
    env = _env(layout)
    tasks = {s: env.tasks(s) for s in ("train", "val", "test")}
    assert sum(len(t) for t in tasks.values()) == 15 and all(tasks.values())
    groups = {s: {t.group for t in ts} for s, ts in tasks.items()}
    assert not (groups["train"] & groups["val"] or groups["train"] & groups["test"]
                or groups["val"] & groups["test"])
    task = tasks["test"][0]
    assert task.id.endswith(("#1", "#2", "#3")) and task.metadata["instruction_type"]
    first = _env(layout / "dataset.json", cases="first")
    assert sum(len(first.tasks(s)) for s in ("train", "val", "test")) == 5


def test_parse_answer_position() -> None:
    assert parse_answer_position("'My, Sheet'!A1:B2,C5") == [("My, Sheet", "A1:B2"),
                                                              (None, "C5")]
    assert parse_answer_position("Sheet1!D:D") == [("Sheet1", "D:D")]
    with pytest.raises(ValueError):
        parse_answer_position("Sheet1!not a range")


@pytest.mark.parametrize("item", range(5))
def test_right_workbook_scores_one_and_untouched_zero(layout: Path, item: int) -> None:
    env = _env(layout)
    task = next(t for s in ("train", "val", "test") for t in env.tasks(s)
                if t.group == f"{100 + item}-{item}")
    targets = expected_cells(task)
    assert len(targets) == 3 and all(isinstance(v, int) for v in targets.values())
    # Formulas for two cells, a value for the third: both count.
    sheet = next(iter(targets)).rsplit("!", 1)[0]
    cells = {f"{sheet}!C2": "=A2+B2", f"{sheet}!C3": "=A3+B3",
             f"{sheet}!C4": targets[f"{sheet}!C4"]}
    right = env.rollout(task, env.initial_skill(), ScriptedModel(
        [f"ACTION: write_cells {json.dumps({'cells': cells})}", "ANSWER: done"]))
    assert (right.hard, right.soft, right.reason) == (1.0, 1.0, ""), right.reason
    assert "Answer cells: " in right.messages[1].text()
    untouched = env.rollout(task, env.initial_skill(), ScriptedModel(["ANSWER: done"]))
    assert untouched.hard == 0.0 and untouched.soft == 0.0
    assert "3 of 3 target cells wrong" in untouched.reason and "got empty" in untouched.reason


def test_corrupt_workbook_is_one_data_error_naming_the_file(layout: Path) -> None:
    bad = layout / "spreadsheet" / "102-2" / "2_102-2_input.xlsx"
    bad.write_bytes(os.urandom(2048))
    with pytest.raises(DataError) as info:
        _env(layout)
    assert str(bad) in str(info.value) and "\n" not in str(info.value)


def test_damaged_zip_is_a_data_error_at_rollout(layout: Path) -> None:
    env = _env(layout)
    task = env.tasks("train")[0]
    Path(task.reference["answer"]).write_bytes(b"PK\x05\x06" + b"\x00" * 18)  # empty zip
    with pytest.raises(DataError, match=r"_answer\.xlsx: cannot be read as an \.xlsx workbook"):
        env.rollout(task, env.initial_skill(), ScriptedModel(["ANSWER: done"]))


@pytest.mark.parametrize(("change", "problem"), [
    (lambda d: d[0].pop("answer_position"), "record 1: missing answer_position"),
    (lambda d: d[1].update(answer_position="Data!??"), "item 101-1: answer_position part"),
    (lambda d: d[2].update(spreadsheet_path="spreadsheet/nowhere"), "no test cases"),
])
def test_bad_dataset_entries_name_the_problem(layout: Path, change: Any, problem: str) -> None:
    data = json.loads((layout / "dataset.json").read_text())
    change(data)
    (layout / "dataset.json").write_text(json.dumps(data))
    with pytest.raises(DataError, match=problem):
        _env(layout)


def test_unknown_answer_sheet_and_missing_data_path(layout: Path) -> None:
    data = json.loads((layout / "dataset.json").read_text())
    for item in data:
        item["answer_position"] = "Elsewhere!C2:C4"
    (layout / "dataset.json").write_text(json.dumps(data))
    env = _env(layout)
    with pytest.raises(DataError, match="names sheet 'Elsewhere'"):
        expected_cells(env.tasks("test")[0])
    with pytest.raises(ConfigError, match="needs env.data_path"):
        SpreadsheetBenchEnvironment.create(EnvCommon(name=NAME), SpreadsheetBenchOptions(),
                                           Path("."))
