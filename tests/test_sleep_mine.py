"""Mining, judging and replaying: sessions into recurring, checkable tasks; an answer scored
by rule checks first and a rubric judge second; the tasks as an environment the trainer runs."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from skillgrad.errors import DataError, ModelError
from skillgrad.models.messages import ChatRequest
from skillgrad.models.scripted import ScriptedModel
from skillgrad.sleep import judge as judging
from skillgrad.sleep.mine import cluster, mine, occurrences
from skillgrad.sleep.tasks import Check, SleepTask, TasksFile, read_tasks, split_of, task_id
from skillgrad.traces.sessions import Session, ToolCall, Turn

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=timezone.utc)


def shell(command: str, code: int, n: int = 0) -> ToolCall:
    return ToolCall(id=f"c{n}", name="Bash", arguments={"command": command}, output="...",
                    exit_code=code)


def edit(path: str) -> ToolCall:
    return ToolCall(id=f"e-{path}", name="Edit", arguments={"file_path": path}, output="ok")


def session(sid: str, turns: list[Turn], day: int = 0, skills: tuple[str, ...] = ()) -> Session:
    return Session(agent="claude_code", id=sid, source=Path(f"/logs/{sid}.jsonl"),
                   turns=tuple(turns), cwd=Path("/home/dev/shop"),
                   started=T0 + timedelta(days=day), skills=skills)


def user(text: str, **kw: Any) -> Turn:
    return Turn(role="user", text=text, **kw)


def agent(text: str = "", *calls: ToolCall) -> Turn:
    return Turn(role="assistant", text=text, tool_calls=calls)


RECURRING = [
    session("s1", [user("fix the failing tax rounding test in the invoice module"),
                   agent("", shell("pytest -q tests/test_tax.py", 1)),
                   agent("", edit("/home/dev/shop/shop/tax.py"),
                         shell("pytest -q tests/test_tax.py", 0, 2)),
                   agent("Fixed rounding in shop/tax.py; tests pass.")], day=0,
            skills=("shop-dev",)),
    session("s2", [user("the tax rounding test in the invoice module fails again, fix it"),
                   agent("Try rounding half up."),
                   user("no, fix the tax rounding test in the invoice module properly"),
                   agent("", edit("/home/dev/shop/shop/tax.py"), shell("pytest -q", 0)),
                   agent("Done: shop/tax.py rounds per line.")], day=1, skills=("shop-dev",)),
    session("s3", [user("please fix the failing tax rounding test of the invoice module"),
                   agent("Looking.", shell("pytest -q tests/test_tax.py", 1)),
                   user("[interrupted]", interrupt=True)], day=2),
    session("s4", [user("ok"), agent("Sure."),
                   user("write a changelog entry for the release notes of version two"),
                   agent("Added to CHANGELOG.md", edit("/home/dev/shop/CHANGELOG.md"))], day=2),
]


def test_outcomes_come_from_the_log_not_from_wording() -> None:
    found = {(o.session.id, o.index): o for s in RECURRING for o in occurrences(s)}
    assert found[("s1", 0)].outcome == "satisfied"  # the last test run passed
    assert found[("s2", 0)].outcome == "corrected"  # the next prompt asks the same again
    assert found[("s2", 2)].outcome == "satisfied"
    assert found[("s3", 0)].outcome == "interrupted"
    assert ("s4", 0) not in found  # "ok" is no request of its own
    assert found[("s1", 0)].files == ["/home/dev/shop/shop/tax.py"]
    assert found[("s1", 0)].commands[-1] == ("pytest -q tests/test_tax.py", 0)


def test_recurring_requests_become_tasks_with_checks_rubric_and_evidence() -> None:
    tasks = mine(RECURRING, "/home/dev/shop", min_occurrences=2)
    assert tasks.miner == "heuristic" and len(tasks.tasks) == 1  # the changelog came once
    task = tasks.tasks[0]
    assert task.occurrences == 4 and task.skill == "shop-dev"
    assert {e.session for e in task.evidence} == {"s1", "s2", "s3"}
    assert Check(op="mentions_file", arg="tax.py") in task.checks
    assert Check(op="no_refusal") in task.checks
    assert "tests/test_tax.py" in (task.rubric or "") or "pytest -q" in (task.rubric or "")
    assert "corrected, interrupted or failed" in (task.rubric or "")
    assert task.id == task_id(task.intent, "/home/dev/shop")
    assert len(cluster(o for s in RECURRING for o in occurrences(s))) == 2


def test_the_llm_miner_writes_the_task_and_the_heuristic_stands_in_when_it_cannot() -> None:
    good = {"intent": "Fix the failing tax rounding test.", "checks": [
        {"op": "contains", "arg": "tax.py"}], "rubric": "Names the file and the fix.",
        "checkable": True}
    tasks = mine(RECURRING, "/p", model=ScriptedModel(replies=[json.dumps(good)]))
    assert tasks.tasks[0].miner == "llm" and tasks.tasks[0].intent == good["intent"]
    assert tasks.notes == []
    broken = ScriptedModel(replies=["not json", "still not json"])
    tasks = mine(RECURRING, "/p", model=broken)
    assert tasks.tasks[0].miner == "heuristic"
    assert tasks.notes and "heuristic task stands in" in tasks.notes[0]


def test_a_mined_check_the_agent_s_own_satisfied_work_fails_is_left_out() -> None:
    """A small miner writes the request's own words as a check ("contains 'the tax rounding
    test in the invoice module'"): the replies the user was content with fail it."""
    echo = {"intent": "Fix the failing tax rounding test.", "checks": [
        {"op": "contains", "arg": "tax.py"},
        {"op": "contains", "arg": "the tax rounding test in the invoice module"},
        {"op": "command_passes", "arg": "pytest -q"}], "rubric": "Names the file.",
        "checkable": True}
    tasks = mine(RECURRING, "/p", model=ScriptedModel(replies=[json.dumps(echo)]))
    task = tasks.tasks[0]
    assert task.miner == "llm"
    assert [(c.op, c.arg) for c in task.checks] == [("contains", "tax.py"),
                                                    ("command_passes", "pytest -q")]
    assert tasks.notes == [f"{task.id}: left out the miner's checks that the agent's own "
                           "satisfied replies fail: contains 'the tax rounding test in the "
                           "invoice module'"]
    only = {**echo, "checks": echo["checks"][1:2]}
    tasks = mine(RECURRING, "/p", model=ScriptedModel(replies=[json.dumps(only)]))
    assert tasks.tasks[0].miner == "heuristic"
    assert "heuristic task stands in: every check of the miner fails" in tasks.notes[0]


def test_checks_then_rubric_and_an_unreadable_verdict_is_never_a_score() -> None:
    task = SleepTask(id="t", intent="fix it", checks=[Check(op="mentions_file", arg="tax.py"),
                                                      Check(op="no_refusal")],
                     rubric="Names the file.")
    assert judging.score(task, "Changed tax.py.", None) == (1.0, 1.0, "")
    hard, soft, reason = judging.score(task, "I can't do that.", None)
    assert hard == 0.0 and soft == 0.0 and "mentions_file 'tax.py'" in reason
    judge = ScriptedModel(replies=[json.dumps({"score": 0.5, "reason": "vague"})])
    hard, soft, reason = judging.score(task, "Changed tax.py.", judge)
    assert (hard, soft) == (0.0, 0.75) and "judge 0.50" in reason
    with pytest.raises(ModelError, match="could not be read"):
        judging.score(task, "Changed tax.py.", ScriptedModel(replies=["??", "??"]))


def test_splits_are_stable_and_disjoint() -> None:
    tasks = [SleepTask(id=f"t{i}", intent=f"request {i}") for i in range(200)]
    first = {t.id: split_of(t, 34) for t in tasks}
    assert first == {t.id: split_of(t, 34) for t in reversed(tasks)}
    assert 40 < sum(v == "val" for v in first.values()) < 100


def test_a_bad_tasks_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.json"
    path.write_text('{"version": 1, "project": "p", "created": "2026-03-02T00:00:00Z", '
                    '"tasks": [{"id": "t", "intent": ""}]}')
    with pytest.raises(DataError, match=r"tasks.json: tasks.0.intent: String should have at "):
        read_tasks(path)
    path.write_text("{")
    with pytest.raises(DataError, match=r"tasks.json: not JSON \(line 1"):
        read_tasks(path)


def test_the_tasks_train_a_skill_behind_the_gate(tmp_path: Path) -> None:
    from skillgrad.config import validate
    from skillgrad.sleep.tasks import write_tasks
    from skillgrad.trainer import build_trainer

    tasks = [SleepTask(id=f"t{i}", intent=f"fix the bug in module{i}.py",
                       checks=[Check(op="mentions_file", arg=f"module{i}.py")])
             for i in range(12)]
    write_tasks(tmp_path / "tasks.json", TasksFile(project="p", created=T0, tasks=tasks))

    def target(request: ChatRequest) -> str:
        skill, prompt = request.messages[0].text(), request.messages[1].text()
        name = prompt.split()[-1]
        return f"Changed {name}" if "Begin with the path of the file you change." in skill \
            else "Fixed it."

    def optimizer(request: ChatRequest) -> str:
        return json.dumps({"edits": [{"op": "append", "content":
                                      "- Begin with the path of the file you change."}],
                           "reasoning": "r"})

    raw = {"model": {"target": {"backend": "scripted", "function": f"{__name__}:_target"},
                     "optimizer": {"backend": "scripted", "function": f"{__name__}:_optimizer"}},
           "train": {"num_epochs": 1, "batch_size": 4, "steps_per_epoch": 1},
           "gradient": {"minibatch_size": 4, "failure_only": True},
           "evaluation": {"gate_no_regression": True, "eval_test": False},
           "env": {"name": "sleep", "tasks_path": str(tmp_path / "tasks.json")}}
    global _target, _optimizer
    _target, _optimizer = target, optimizer
    summary = build_trainer(validate(raw, {}, tmp_path), tmp_path / "run").fit()
    assert summary["selection"]["initial"] == 0.0 and summary["selection"]["best"] == 1.0
    assert "- Begin with the path of the file you change." in (
        tmp_path / "run" / "best_skill.md").read_text()


def _target(request: ChatRequest) -> str:  # replaced in the test above
    raise AssertionError


def _optimizer(request: ChatRequest) -> str:  # replaced in the test above
    raise AssertionError
