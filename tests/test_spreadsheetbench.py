"""The spreadsheetbench loader: SpreadsheetBench's published layout (written here by the test),
answer_position parsing, scoring against the answer workbooks, and bad data."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import openpyxl
import pytest
import yaml

from skillgrad.build import build_environment
from skillgrad.config import load_config
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


# ----------------------------------------------------------------------------- SkillOpt's layout

SKILLOPT = Path(__file__).parent / "fixtures" / "skillopt" / "spreadsheetbench"
SPLIT_DIR = Path("data/spreadsheetbench_split")
DATA_ROOT = Path("data/spreadsheetbench_verified_400")


def _skillopt_env(base_dir: Path = SKILLOPT, **options: Any) -> SpreadsheetBenchEnvironment:
    """The env as SkillOpt's config names it, relative to ``base_dir`` (its checkout)."""
    common = EnvCommon(name=NAME, split_mode="split_dir", split_dir=SPLIT_DIR)
    return SpreadsheetBenchEnvironment.create(
        common, SpreadsheetBenchOptions(**{"data_root": DATA_ROOT, **options}), base_dir)


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(SKILLOPT / "data", tmp_path / "data")
    return tmp_path


def test_skillopt_split_dir_reads_every_workbook_naming() -> None:
    env = _skillopt_env()
    tasks = {s: env.tasks(s) for s in ("train", "val", "test")}
    assert {s: [t.id for t in ts] for s, ts in tasks.items()} == {
        "train": ["101#1", "101#2", "57-3#1", "57-3#2"], "val": ["202#1"], "test": ["303#1"]}
    files = {t.id: (Path(t.reference["input"]), Path(t.reference["answer"]))
             for ts in tasks.values() for t in ts}
    root = SKILLOPT / DATA_ROOT / "spreadsheet"
    assert files["101#2"] == (root / "101" / "2_101_input.xlsx", root / "101" / "2_101_answer.xlsx")
    assert files["57-3#1"] == (root / "57-3" / "1_57-3_init.xlsx",
                               root / "57-3" / "1_57-3_golden.xlsx")
    assert files["202#1"] == (root / "202" / "initial.xlsx", root / "202" / "golden.xlsx")
    # Item 303 has no spreadsheet_path: spreadsheet/<id> under the data root.
    assert files["303#1"][0] == root / "303" / "1_303_input.xlsx"
    assert tasks["train"][2].metadata["instruction_type"] == "Sheet-Level Manipulation"
    assert tasks["train"][2].reference["answer_position"] == "'Sum Sheet'!C2:C4"
    assert sum(len(_skillopt_env(cases="first").tasks(s)) for s in tasks) == 4


def test_a_scripted_rollout_scores_each_naming() -> None:
    env = _skillopt_env()
    for task in (env.tasks("train")[1], env.tasks("train")[3], env.tasks("val")[0]):
        targets = expected_cells(task)
        assert len(targets) == 3, targets
        sheet = next(iter(targets)).rsplit("!", 1)[0]
        cells = {f"{sheet}!C{r}": f"=A{r}+B{r}" for r in (2, 3, 4)}
        right = env.rollout(task, env.initial_skill(), ScriptedModel(
            [f"ACTION: write_cells {json.dumps({'cells': cells})}", "ANSWER: done"]))
        assert (right.hard, right.soft, right.reason) == (1.0, 1.0, ""), (task.id, right.reason)
    wrong = env.rollout(task, env.initial_skill(), ScriptedModel(
        [f"ACTION: write_cells {json.dumps({'cells': {f'{sheet}!C2': '=A2+B2'}})}",
         "ANSWER: done"]))
    assert wrong.hard == 0.0 and wrong.soft == pytest.approx(1 / 3)
    assert "2 of 3 target cells wrong" in wrong.reason


def test_without_data_root_the_error_says_to_set_it() -> None:
    with pytest.raises(DataError) as info:
        _skillopt_env(data_root=None)
    message = str(info.value)
    assert message.startswith(f"{SKILLOPT / SPLIT_DIR / 'train' / 'items.json'}: record 1: "
                              "item 101: no test cases in ")
    assert "set env.data_root" in message and "\n" not in message
    with pytest.raises(DataError, match=r"nowhere: env.data_root is not a folder"):
        _skillopt_env(data_root=Path("nowhere"))


def test_data_root_also_serves_a_dataset_json_split_by_ratio(tmp_path: Path) -> None:
    items = [item for s in ("train", "val", "test")
             for item in json.loads((SKILLOPT / SPLIT_DIR / s / "items.json").read_text())]
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "dataset.json").write_text(json.dumps(items))
    env = SpreadsheetBenchEnvironment.create(
        EnvCommon(name=NAME, split_ratio=(0.5, 0.25, 0.25)),
        SpreadsheetBenchOptions(data_path=Path("meta"), data_root=SKILLOPT / DATA_ROOT), tmp_path)
    ids = sorted(t.id for s in ("train", "val", "test") for t in env.tasks(s))
    assert ids == ["101#1", "101#2", "202#1", "303#1", "57-3#1", "57-3#2"]


@pytest.mark.parametrize(("change", "problem"), [
    (lambda d: d[1].update(spreadsheet_path=["spreadsheet/57-3"]),
     r"record 2: item 57-3: spreadsheet_path must be a string, got list"),
    (lambda d: d[0].update(instruction="  "), r"record 1: empty instruction"),
    (lambda d: d[0].pop("instruction_type"), r"record 1: missing instruction_type"),
    (lambda d: d[1].update(id="303"), r"test/items.json: record 1: item 303 is listed again "
     r"\(first at .*train/items.json: record 2\)"),
])
def test_bad_skillopt_items_name_the_file_and_record(tmp_path: Path, change: Any,
                                                     problem: str) -> None:
    base = _copy(tmp_path)
    items_file = base / SPLIT_DIR / "train" / "items.json"
    data = json.loads(items_file.read_text())
    change(data)
    if data[1]["id"] == "303":  # same item twice: point at the folder that exists
        data[1]["spreadsheet_path"] = "spreadsheet/303"
    items_file.write_text(json.dumps(data))
    with pytest.raises(DataError, match=problem) as info:
        _skillopt_env(base)
    assert "\n" not in str(info.value)


def test_case_numbering_rules(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    base = _copy(tmp_path)
    folder = base / DATA_ROOT / "spreadsheet" / "101"
    # A numbered case hides the bare pair, and an input without its answer is skipped, aloud.
    for name in ("initial.xlsx", "golden.xlsx", "3_101_input.xlsx"):
        shutil.copy(folder / "1_101_input.xlsx", folder / name)
    with caplog.at_level(logging.WARNING):
        env = _skillopt_env(base)
    assert [t.id for t in env.tasks("train")[:2]] == ["101#1", "101#2"]
    assert "3_101_input.xlsx: no 3_101_answer.xlsx beside it" in caplog.text
    # Two cases numbered 2 (one per naming) cannot both be task 101#2.
    shutil.copy(folder / "2_101_input.xlsx", folder / "2_101_init.xlsx")
    shutil.copy(folder / "2_101_answer.xlsx", folder / "2_101_golden.xlsx")
    with pytest.raises(DataError, match=r"101: two test cases numbered 2 \(2_101_input.xlsx "
                       r"and 2_101_init.xlsx\)"):
        _skillopt_env(base)


def test_skillopt_keys_in_a_config_resolve_against_its_folder(tmp_path: Path) -> None:
    base = _copy(tmp_path / "checkout")
    config = {"env": {"name": NAME, "split_mode": "split_dir", "split_dir": str(SPLIT_DIR),
                      "data_root": str(DATA_ROOT)}}
    (base / "c.yaml").write_text(yaml.safe_dump(config))
    env = build_environment(load_config(base / "c.yaml"))
    assert isinstance(env, SpreadsheetBenchEnvironment)
    assert Path(env.tasks("val")[0].reference["input"]) == (
        base / DATA_ROOT / "spreadsheet" / "202" / "initial.xlsx")
