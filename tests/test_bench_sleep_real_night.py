"""bench/sleep_real_night.py: its scripted agent, its plan of sessions (what the miner finds in
them), and, where the real agent CLIs are installed (``SKILLGRAD_AGENT_CLIS``), a scripted night
on sessions three of them write."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType

import agentcli

from skillgrad.models.agent_clis import AGENT_CLIS
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.sleep.mine import mine
from skillgrad.sleep.tasks import split_of
from skillgrad.traces.sessions import Session, ToolCall, Turn

ROOT = Path(__file__).resolve().parents[1]


def bench() -> ModuleType:
    if "sleep_real_night" not in sys.modules:
        spec = importlib.util.spec_from_file_location("sleep_real_night",
                                                      ROOT / "bench" / "sleep_real_night.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["sleep_real_night"] = module  # the scripted models' functions live here
        spec.loader.exec_module(module)
    return sys.modules["sleep_real_night"]


def request(cli: str, *messages: Message, tools: bool = True) -> ChatRequest:
    shell = AGENT_CLIS[cli].shell_tool
    return ChatRequest(messages=(Message(role="system", content="You are an agent."), *messages),
                       tools=({"type": "function", "function": {"name": shell}},) if tools
                       else None)


def test_the_agent_runs_each_command_through_the_cli_shell_tool_then_answers() -> None:
    m = bench()
    ask = Message(role="user", content="add a line to CHANGELOG.md under Unreleased for the "
                  "split_evenly rounding fix")
    first = m.agent_reply(request("codex", ask))
    assert first == {"tool_calls": [AGENT_CLIS["codex"].shell_call(m.CHANGELOG.commands[0])]}
    edited = Message(role="tool", content="Output: (empty)", tool_call_id="c1")
    second = m.agent_reply(request("codex", ask, edited))
    assert second == {"tool_calls": [AGENT_CLIS["codex"].shell_call(m.SHOW_CHANGELOG)]}
    shown = Message(role="tool", content="<untrusted_context>\nOutput: # Changelog\n\n"
                    "## Unreleased\n\n" + m.ENTRY + "\n</untrusted_context>", tool_call_id="c2")
    answer = m.agent_reply(request("codex", ask, edited, shown))
    assert answer.startswith("Added the line under `## Unreleased`") and m.ENTRY in answer
    assert "untrusted_context" not in answer


def test_a_resumed_session_answers_its_latest_request_and_a_title_needs_no_tool() -> None:
    m = bench()
    wrong = Message(role="user", content="what does format_cents return for 1234 cents? run it "
                    "to check")
    fix = Message(role="user", content="no, that's wrong: what does format_cents return for "
                  "1234 cents?")
    done = [wrong, Message(role="tool", content="ValueError", tool_call_id="a"),
            Message(role="assistant", content="format_cents takes dollars")]
    reply = m.agent_reply(request("gemini", *done, fix))
    assert reply == {"tool_calls": [AGENT_CLIS["gemini"].shell_call(m.CENTS.commands[0])]}
    answered = m.agent_reply(request("gemini", *done, fix, Message(
        role="tool", content="<untrusted_context>\nOutput: $12.34\nProcess Group PGID: 7\n"
        "</untrusted_context>", tool_call_id="b")))
    assert answered.startswith("`format_cents(1234)` returns `$12.34`")
    assert m.agent_reply(request("opencode", fix, tools=False)) == "Ledger maintenance"


def plan_sessions() -> list[Session]:
    """The plan's sessions as the harvest would read them: each command's exit code as the
    scripted agent's commands give it (the dollars one fails)."""
    m = bench()
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    sessions = []
    for n, planned in enumerate(m.PLAN):
        turns = []
        for prompt in planned.prompts:
            play = m.PLAYS[prompt]
            calls = tuple(ToolCall(id=f"{n}-{k}", name="shell", arguments={"command": c},
                                   output="", exit_code=1 if play is m.CENTS_WRONG else 0)
                          for k, c in enumerate(play.commands))
            turns += [Turn("user", prompt), Turn("assistant", "", tool_calls=calls),
                      Turn("assistant", "done")]
        sessions.append(Session(agent=AGENT_CLIS[planned.cli].agent,  # type: ignore[arg-type]
                                id=f"s{n}",
                                source=Path(f"/s{n}"), turns=tuple(turns),
                                cwd=Path("/w/project"), started=start + timedelta(minutes=n),
                                git_commit="c" * 40))
    return sessions


def test_the_plan_gives_five_recurring_tasks_on_both_sides_of_the_split() -> None:
    tasks = mine(plan_sessions(), "/w/project").tasks
    assert sorted(t.occurrences for t in tasks) == [2, 2, 3, 4, 4]
    assert {t.intent for t in tasks} == {
        "please add a CHANGELOG.md entry under Unreleased about the split_evenly rounding fix",
        "what does format_cents return for 1234?",
        "can you run the test suite and tell me if everything passes?",
        "which functions does ledger/money.py export?", "Run the tests."}
    corrected = [t for t in tasks if any(e.outcome == "corrected" for e in t.evidence)]
    assert len(corrected) == 2
    assert Counter(split_of(t, 34) for t in tasks) == {"train": 3, "val": 2}
    assert all(len({e.agent for e in t.evidence}) >= 1 for t in tasks)


def test_a_scripted_night_on_sessions_three_real_clis_wrote(tmp_path: Path) -> None:
    binaries = [agentcli.binary(name) for name in ("codex", "claude", "copilot")]
    assert all(binaries)
    m = bench()
    out = tmp_path / "night"
    report = m.main(["--clis", agentcli.FOLDERS, "--out", str(out), "--scripted",
                     "--only", "codex,claude,copilot"])
    assert [r for r in report["runs"] if r["rc"] != 0] == []
    sessions = report["sessions"]
    assert sessions["written"] == sessions["harvested"] == {"codex": 3, "claude": 3,
                                                            "copilot": 3}
    assert len(report["tasks"]) == 4
    [run] = report["training"]
    assert run["status"] == "trained" and run["steps"][0]["decision"].startswith("accept")
    [diff] = report["staged"]["diffs"].values()
    assert m.HELPFUL in diff
    assert json.loads((out / "report.json").read_text())["night"] == report["night"]
