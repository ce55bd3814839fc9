"""The spreadsheet environment: seeded generation, splits, tools, the checker both ways for
every template, scored failures with reasons, and a short training run with scripted models."""

from __future__ import annotations

import datetime as dt
import io
import json
import re
from pathlib import Path
from typing import Any

import openpyxl
import pytest
from e2e import one_epoch, rule_optimizer, train_end_to_end
from pydantic import ValidationError

from skillgrad.envs.base import EnvCommon
from skillgrad.envs.spreadsheet import SpreadsheetEnvironment, SpreadsheetOptions
from skillgrad.envs.spreadsheet.checker import check_workbook, same_value
from skillgrad.envs.spreadsheet.templates import TEMPLATE_NAMES, apply_solution, generate
from skillgrad.envs.spreadsheet.workbook import WorkbookSession
from skillgrad.errors import ConfigError
from skillgrad.models.messages import ChatRequest, Completion
from skillgrad.models.scripted import ScriptedModel

ENV_NAME = "skillgrad.envs.spreadsheet:SpreadsheetEnvironment"
WRITE_RULE = "Write every target cell with write_cells before you answer."


@pytest.fixture(scope="module")
def env() -> SpreadsheetEnvironment:
    return SpreadsheetEnvironment.create(EnvCommon(name=ENV_NAME), SpreadsheetOptions(), Path("."))


def test_default_splits_are_36_12_12_and_deterministic(env: SpreadsheetEnvironment) -> None:
    sizes = {s: len(env.tasks(s)) for s in ("train", "val", "test")}
    assert sizes == {"train": 36, "val": 12, "test": 12}
    # Generation depends on (template, seed) only, so a shorter run is a prefix of this one.
    again = SpreadsheetEnvironment.create(EnvCommon(name=ENV_NAME), SpreadsheetOptions(count=16),
                                          Path("."))
    first = {t.id: t for s in ("train", "val", "test") for t in env.tasks(s)}
    for task in (t for s in ("train", "val", "test") for t in again.tasks(s)):
        assert task == first[task.id]
        assert _cells(again.generated(task).workbook) == _cells(env.generated(task).workbook)
    groups = {s: {t.group for t in env.tasks(s)} for s in ("train", "val", "test")}
    assert not (groups["train"] & groups["test"] or groups["val"] & groups["test"])
    for split in ("train", "val", "test"):  # stratified: every template in every split
        assert {t.metadata["template"] for t in env.tasks(split)} == set(TEMPLATE_NAMES)
    other = SpreadsheetEnvironment.create(EnvCommon(name=ENV_NAME),
                                          SpreadsheetOptions(count=16, seed=1), Path("."))
    assert {t.prompt for t in other.tasks("train")} != {t.prompt for t in env.tasks("train")}


def _cells(workbook: bytes) -> list[tuple[str, str, Any]]:
    wb = openpyxl.load_workbook(io.BytesIO(workbook))
    return [(ws.title, c.coordinate, c.value) for ws in wb.worksheets for row in ws.iter_rows()
            for c in row]


@pytest.mark.parametrize("template", TEMPLATE_NAMES)
def test_reference_solution_scores_one_and_untouched_or_wrong_scores_zero(
    tmp_path: Path, template: Any
) -> None:
    for seed in range(2):
        task = generate(template, seed)
        assert _cells(generate(template, seed).workbook) == _cells(task.workbook)
        solved = tmp_path / "solved.xlsx"
        solved.write_bytes(apply_solution(task))
        right = check_workbook(solved, task.targets, 1e-6)
        assert (right.hard, right.soft, right.reason()) == (1.0, 1.0, "")
        untouched = tmp_path / "untouched.xlsx"
        untouched.write_bytes(task.workbook)
        assert check_workbook(untouched, task.targets, 1e-6).hard == 0.0
        # Off by one in the first non-header target: a wrong value is caught and named.
        wb = openpyxl.load_workbook(solved)
        ref = next(r for r, v in task.targets.items() if isinstance(v, (int, float, dt.date))
                   or (isinstance(v, str) and not r.endswith("1")))
        sheet, cell = ref.split("!")
        wb[sheet][cell] = "wrong"
        wrong_path = tmp_path / "wrong.xlsx"
        wb.save(wrong_path)
        wrong = check_workbook(wrong_path, task.targets, 1e-6)
        assert wrong.hard == 0.0 and 0 < wrong.soft < 1
        assert f"{ref} expected" in wrong.reason() and "got 'wrong'" in wrong.reason()


def test_comparison_rules() -> None:
    assert same_value(10.0, 10.0000000001, 1e-6) and not same_value(10.0, 10.01, 1e-6)
    assert same_value(10.0, "10", 1e-6) and same_value(" Anna Lee ", "Anna Lee", 1e-6)
    assert not same_value("anna lee", "Anna Lee", 1e-6)
    day = dt.date(2024, 3, 5)
    assert same_value(day, dt.datetime(2024, 3, 5), 0) and same_value(day, 45356, 0)
    assert same_value(day, "2024-03-05", 0) and not same_value(day, 45357, 0)
    assert same_value(None, "  ", 0) and not same_value(None, 0, 0) and not same_value(0, None, 0)


def test_reason_is_capped_and_states_the_tolerance(tmp_path: Path) -> None:
    task = generate("delete_rows", 1)
    path = tmp_path / "w.xlsx"
    path.write_bytes(task.workbook)
    targets = {f"Stock!C{r}": float(r) for r in range(1, 21)}
    result = check_workbook(path, targets, 0.01)
    assert result.soft == 0.0 and "20 of 20 target cells wrong (numbers within 0.01" in \
        result.reason()
    assert result.reason().count("expected") == 6 and result.reason().endswith("and 14 more")
    near = check_workbook(path, {"Stock!B1": "Qty ", "Stock!A1": "Item"}, 0.01)
    assert near.hard == 1.0


def test_tools_read_write_formulas_and_rows(tmp_path: Path) -> None:
    task = generate("derived_column", 0)
    path = tmp_path / "w.xlsx"
    path.write_bytes(task.workbook)
    session = WorkbookSession(path, SpreadsheetOptions(read_max_cells=8))
    assert session.list_sheets().startswith("Orders: A1:C")
    grid = session.read_range("Orders!A1:C9")
    assert grid.splitlines()[1] == " | A | B | C" and "1 | Item |" in grid
    assert "first 8 cells of the range" in grid and len(grid.splitlines()) == 4
    out = session.write_cells({"D2": "=B2*C2", "Orders!E2": "2024-01-05", "F2": "12.5"})
    ws = openpyxl.load_workbook(io.BytesIO(task.workbook))["Orders"]
    assert f"Orders!D2={ws['B2'].value * ws['C2'].value:.10g} (=B2*C2)" in out
    assert session.wb["Orders"]["E2"].value == dt.datetime(2024, 1, 5)
    assert session.wb["Orders"]["F2"].value == 12.5
    bad = session.write_cells({"G2": "=VLOKUP(1)"})
    assert "#NAME?" in bad
    session.delete_rows("orders", 2, 1)
    assert session.wb["Orders"]["D2"].value is None  # the written row moved out


@pytest.mark.parametrize("call", [
    'ACTION: read_range {"range": "Nowhere!A1:B2"}',
    'ACTION: write_cells {"cells": {"not a cell": 1}}',
    'ACTION: write_cells {"cells": 5}',
    'ACTION: read_range {"range": "Orders!A1:??"}',
])
def test_bad_tool_calls_are_observations(env: SpreadsheetEnvironment, call: str) -> None:
    task = env.tasks("val")[0]
    model = ScriptedModel([call, "ANSWER: done"])
    result = env.rollout(task, env.initial_skill(), model)
    observation = result.messages[3].text()
    assert observation.startswith("OBSERVATION:\nerror:")
    assert result.hard == 0.0 and "tool call(s) failed" in result.reason


def _write_all(task_targets: dict[str, Any]) -> str:
    return f"ACTION: write_cells {json.dumps({'cells': task_targets})}"


def test_agent_that_writes_the_targets_succeeds(env: SpreadsheetEnvironment) -> None:
    for task in env.tasks("test"):
        if task.metadata["template"] in ("delete_rows", "sort_rows", "filter_rows",
                                         "date_arithmetic"):
            model = ScriptedModel([_write_all(task.reference["targets"]), "ANSWER: done"])
            result = env.rollout(task, env.initial_skill(), model)
            assert (result.hard, result.soft, result.reason) == (1.0, 1.0, ""), task.id
            assert result.turns == 2 and result.metadata["tools"] == ["write_cells"]


def test_an_agent_that_does_nothing_gets_a_scored_failure_with_reasons(
    env: SpreadsheetEnvironment,
) -> None:
    task = next(t for t in env.tasks("val") if t.metadata["template"] != "filter_rows")
    result = env.rollout(task, env.initial_skill(), ScriptedModel(["ANSWER: done"]))
    assert result.hard == 0.0 and result.soft < 1.0
    assert re.search(r"\d+ of \d+ target cells wrong \(numbers within 1e-06", result.reason)
    assert "expected" in result.reason and "the agent changed no cell" in result.reason
    looping = env.rollout(task, env.initial_skill(), ScriptedModel(
        default='ACTION: list_sheets {}'))
    assert looping.turns == 8 and "no answer within 8 turns" in looping.reason


def test_native_tool_mode_and_python_tool(env: SpreadsheetEnvironment) -> None:
    from skillgrad.sandbox import confinement

    if not confinement().abi:  # the python tool refuses to run unconfined (tests/test_sandbox.py)
        pytest.skip(f"model-written code cannot be confined here: {confinement().problem}")
    task = next(t for t in env.tasks("train") if t.metadata["template"] == "delete_rows")
    options = SpreadsheetOptions(tool_mode="native", python_tool=True)
    native = SpreadsheetEnvironment({s: env.tasks(s) for s in ("train", "val", "test")},
                                    env._generated, options)
    code = ("import openpyxl\nwb = openpyxl.load_workbook('workbook.xlsx')\nws = wb['Stock']\n"
            "for r in range(ws.max_row, 1, -1):\n"
            "    if ws.cell(r, 2).value == 0:\n        ws.delete_rows(r)\n"
            "wb.save('workbook.xlsx')\nprint('rows left', ws.max_row)")
    call = {"id": "c1", "type": "function",
            "function": {"name": "python", "arguments": json.dumps({"code": code})}}
    model = ScriptedModel([Completion(text="", tool_calls=[call]), Completion(text="done")])
    result = native.rollout(task, native.initial_skill(), model)
    assert result.hard == 1.0, result.reason
    assert "rows left" in result.messages[3].text() and "reloaded" in result.messages[3].text()
    assert any(t["function"]["name"] == "python" for t in model.calls[0].tools or ())


def test_options_are_checked() -> None:
    with pytest.raises(ValidationError):
        SpreadsheetOptions(templates=("not_a_template",))  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        SpreadsheetOptions(colour="red")  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="split_mode must be 'ratio'"):
        SpreadsheetEnvironment.create(EnvCommon(name=ENV_NAME, split_mode="split_dir"),
                                      SpreadsheetOptions(), Path("."))
    small = SpreadsheetEnvironment.create(EnvCommon(name=ENV_NAME), SpreadsheetOptions(
        count=6, templates=("lookup",)), Path("."))
    assert {t.metadata["template"] for t in small.tasks("train")} == {"lookup"}


# ----------------------------------------------------------------------------- a training run

ORACLE: dict[str, dict[str, Any]] = {}


def _first_read(prompt: str) -> str:
    sheet = re.search(r"Sheets: (\S+) \(", prompt)
    assert sheet is not None
    return f"{sheet.group(1)}!A1:C12"


def spreadsheet_target(request: ChatRequest) -> str:
    """Only when the skill says so: reads the first sheet, then writes the target cells it
    knows for that data (the oracle is keyed by what the read showed); otherwise it just
    says it is done."""
    skill = request.messages[0].text()
    last = request.messages[-1].text()
    if WRITE_RULE not in skill:
        return "ANSWER: done"
    if len(request.messages) == 2:
        return f"ACTION: read_range {json.dumps({'range': _first_read(last)})}"
    grid = last.removeprefix("OBSERVATION:\n")
    return _write_all(ORACLE[grid]) if grid in ORACLE else "ANSWER: done"


spreadsheet_optimizer = rule_optimizer(WRITE_RULE, support=4, cue="the agent changed no cell")


def test_one_epoch_of_training_learns_to_write_cells(tmp_path: Path,
                                                     env: SpreadsheetEnvironment) -> None:
    tasks = [t for s in ("train", "val", "test") for t in env.tasks(s)]  # count 60 covers 40
    for task in tasks:
        path = tmp_path / f"{task.id}.xlsx"
        path.write_bytes(env.generated(task).workbook)
        grid = WorkbookSession(path, env.options).read_range(_first_read(task.prompt))
        ORACLE[grid] = task.reference["targets"]
    assert len(ORACLE) == len(tasks)  # every workbook's data is its own
    config = one_epoch({"name": ENV_NAME, "count": 40}, 6,  # 24/8/8
                       steps_per_epoch=1, eval_tasks=8)
    train_end_to_end(tmp_path, config, target="test_spreadsheet:spreadsheet_target",
                     optimizer="test_spreadsheet:spreadsheet_optimizer", rule=WRITE_RULE)
