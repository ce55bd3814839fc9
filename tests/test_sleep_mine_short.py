"""Mining: a short request typed again and again becomes a task while short chatter does not;
a task's commit comes from its occurrences, never HEAD where any of them recorded one."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from skillgrad.sleep.mine import mine
from skillgrad.traces.sessions import Session, ToolCall, Turn

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=timezone.utc)


def pytest_call(code: int) -> ToolCall:
    return ToolCall(id="c1", name="Bash", arguments={"command": "pytest -q"}, output="...",
                    exit_code=code)


def edit(path: str) -> ToolCall:
    return ToolCall(id="e1", name="Edit", arguments={"file_path": path}, output="ok")


def session(sid: str, turns: list[Turn], day: int, commit: str | None = None) -> Session:
    return Session(agent="claude_code", id=sid, source=Path(f"/logs/{sid}.jsonl"),
                   turns=tuple(turns), cwd=Path("/home/dev/shop"),
                   started=T0 + timedelta(days=day), git_commit=commit)


WORDINGS = ["please run the tests", "Please run the tests.", "run the tests please",
            "please, run the tests!", "PLEASE RUN THE TESTS"]


def test_a_short_request_asked_ten_times_is_a_task_and_short_chatter_is_not() -> None:
    sessions = []
    for n in range(10):
        sessions.append(session(f"s{n}", [
            Turn(role="user", text=WORDINGS[n % len(WORDINGS)]),
            Turn(role="assistant", text="", tool_calls=(pytest_call(1 if n % 3 == 0 else 0),)),
            Turn(role="assistant", text="Ran them."),
            Turn(role="user", text="thanks"),
            Turn(role="assistant", text="You're welcome."),
            Turn(role="user", text="fix it"),
            Turn(role="assistant", text="", tool_calls=(edit("/home/dev/shop/a.py"),)),
            Turn(role="user", text="looks good"),
            Turn(role="assistant", text="Glad to hear."),
        ], day=n))
    tasks = mine(sessions, "/home/dev/shop").tasks
    assert len(tasks) == 1, [t.intent for t in tasks]
    task = tasks[0]
    assert task.occurrences == 10
    assert task.intent.lower().strip(".!").replace(",", "").startswith(("please run", "run"))
    assert any(c.op == "command_passes" and c.arg == "pytest -q" for c in task.checks)


def test_a_short_request_does_not_swallow_a_longer_one_or_a_different_short_one() -> None:
    sessions = [session(f"s{n}", [
        Turn(role="user", text=text),
        Turn(role="assistant", text="", tool_calls=(pytest_call(0),))], day=n)
        for n, text in enumerate(["run the tests", "run the tests",
                                  "run the slow integration tests for billing",
                                  "run the linter", "run the linter"])]
    tasks = mine(sessions, "/home/dev/shop").tasks
    assert sorted((t.intent, t.occurrences) for t in tasks) == [("run the linter", 2),
                                                                 ("run the tests", 2)]


def _recurring(commits: list[str | None]) -> list[Session]:
    out = []
    for n, commit in enumerate(commits):
        out.append(session(f"s{n}", [
            Turn(role="user", text="fix the failing tax rounding test in the invoice module"),
            Turn(role="assistant", text="", tool_calls=(edit("/home/dev/shop/tax.py"),
                                                        pytest_call(0))),
            Turn(role="assistant", text="Fixed.")], day=n, commit=commit))
    return out


def test_the_commit_comes_from_the_occurrences_not_only_the_chosen_one() -> None:
    # The latest (chosen) occurrence's session recorded no commit: the task is replayed at
    # the latest one that did, not at HEAD.
    tasks = mine(_recurring(["aaa111", "bbb222", None]), "/home/dev/shop").tasks
    assert [t.commit for t in tasks] == ["bbb222"]
    # The chosen occurrence's own commit wins where it has one.
    tasks = mine(_recurring([None, "aaa111", "ccc333"]), "/home/dev/shop").tasks
    assert [t.commit for t in tasks] == ["ccc333"]
    # A satisfied occurrence's commit before one whose work failed.
    sessions = _recurring(["aaa111", None])
    failing = session("s9", [
        Turn(role="user", text="fix the failing tax rounding test in the invoice module"),
        Turn(role="assistant", text="", tool_calls=(pytest_call(1),))], day=9, commit="fff999")
    tasks = mine([*sessions, failing], "/home/dev/shop").tasks
    assert [t.commit for t in tasks] == ["aaa111"]
