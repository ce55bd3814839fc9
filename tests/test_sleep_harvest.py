"""Harvest of Claude Code and Codex sessions: each pitfall of their formats (SLEEP_NOTES §1.1,
§1.2), the project match, incremental checkpoints, files still being written, skillgrad's own
runs, unreadable files, and a canary secret that must reach nothing the harvest returns or
writes. The fixtures (tests/fixtures/sleep/) are written from the documented formats; their
README says what each file holds."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from skillgrad.agentskills import AGENTS
from skillgrad.errors import ConfigError, DataError
from skillgrad.redact import REDACTED
from skillgrad.sleep.harvest.harvester import (
    BEFORE_WINDOW,
    NO_CWD,
    OUTSIDE,
    OWN_RUN,
    SEEN,
    STILL_WRITING,
    SUB_AGENT,
    UNCHANGED,
    UNREADABLE,
    Harvester,
)
from skillgrad.sleep.scrub import Scrubber
from skillgrad.traces.base import SessionFormatError
from skillgrad.traces.claude_code import ClaudeCodeAdapter
from skillgrad.traces.codex import CodexAdapter
from skillgrad.traces.read import read_jsonl, utc
from skillgrad.traces.registry import ADAPTERS, adapters
from skillgrad.traces.sessions import REPLAY_MARKER, Session, ToolCall, Turn

FIXTURES = Path(__file__).parent / "fixtures" / "sleep"
CANARY = "sk-ant-canary-0123456789abcdef"
PROJECT = Path("/home/dev/shop")
NOW = datetime(2026, 3, 6, tzinfo=timezone.utc)
WRITTEN = datetime(2026, 3, 5, tzinfo=timezone.utc)  # every fixture's mtime in a copy

S1 = "5d2e1c8a-0b7f-4e2a-9c31-7f0d2a4b6e91"  # the main Claude Code session
C1 = "0195f3a2-1b2c-7d4e-9f00-5a6b7c8d9e0f"  # the main Codex session


def read_all(adapter: Any, store: Path) -> dict[str, Session]:
    out = {}
    for source in adapter.sources(store):
        try:
            for session in adapter.read(source):
                out[session.id] = session
        except SessionFormatError:
            continue
    return out


@pytest.fixture(scope="module")
def claude() -> dict[str, Session]:
    return read_all(ClaudeCodeAdapter(), FIXTURES / "claude_code" / "projects")


@pytest.fixture(scope="module")
def codex() -> dict[str, Session]:
    return read_all(CodexAdapter(), FIXTURES / "codex")


def texts(session: Session, role: str = "user") -> list[str]:
    return [t.text for t in session.turns if t.role == role and not t.interrupt]


# -- Claude Code --------------------------------------------------------------------------

def test_claude_stores_follow_claude_config_dir(tmp_path: Path) -> None:
    adapter = ClaudeCodeAdapter()
    assert adapter.stores({}, tmp_path) == [tmp_path / ".claude" / "projects"]
    assert adapter.stores({"CLAUDE_CONFIG_DIR": "/opt/claude"}, tmp_path) == \
        [Path("/opt/claude/projects")]


def test_claude_sources_include_both_sub_agent_layouts() -> None:
    store = FIXTURES / "claude_code" / "projects"
    names = [p.relative_to(store).as_posix() for p in ClaudeCodeAdapter().sources(store)]
    assert f"-home-dev-shop/{S1}.jsonl" in names
    assert f"-home-dev-shop/{S1}/subagents/agent-a96cf8a5.jsonl" in names
    assert "-home-dev-shop/agent-3f1b2c4d.jsonl" in names
    assert names == [p.relative_to(store).as_posix() for p in ClaudeCodeAdapter().sources(store)]


def test_claude_prompts_are_only_what_the_person_typed(claude: dict[str, Session]) -> None:
    s = claude[S1]
    prompts = [t.text for t in s.prompts]
    assert len(prompts) == 4
    assert prompts[0].startswith("why does the tax test fail?")
    # A rejected tool call's reason is the person's words too.
    assert prompts[1].startswith("run only the tax tests")
    assert prompts[2].startswith("[image]\nthe receipt still shows 0.01 off")
    assert prompts[3].startswith("now run the whole suite once")
    everything = "\n".join(t.text for t in s.turns)
    for injected in ("Base directory for this skill",  # isMeta
                     "This session is being continued",  # isCompactSummary
                     "<command-name>", "<local-command-stdout>",  # wrappers
                     "Launching skill",  # a tool result
                     "API Error"):  # written by Claude Code in the agent's place
        assert injected not in everything


def test_claude_interrupt_marks_a_turn(claude: dict[str, Session]) -> None:
    s = claude[S1]
    interrupts = [i for i, t in enumerate(s.turns) if t.interrupt]
    assert len(interrupts) == 1
    before = s.turns[interrupts[0] - 1]
    assert before.tool_calls[0].name == "Bash" and before.tool_calls[0].is_error
    api = claude["7a1d3e5f-2b4c-4d6e-8f0a-1b2c3d4e5f60"]
    assert [t.interrupt for t in api.turns if t.role == "user"] == [False, True, False]
    assert api.turns[1].text == ""


def test_claude_one_response_over_several_lines_is_one_turn(claude: dict[str, Session]) -> None:
    s = claude[S1]
    assistant = [t for t in s.turns if t.role == "assistant"]
    # msg_01: thinking, text and a tool call on three lines.
    assert assistant[0].text == "Let me run the failing test."
    assert [c.name for c in assistant[0].tool_calls] == ["Bash"]
    # msg_02: a chunk repeating the text so far is not written twice.
    assert assistant[1].text.startswith("The rounding mode is wrong. I'll load")
    assert assistant[1].text.count("The rounding mode is wrong.") == 1
    # msg_03: two tool calls on two lines, their results in the opposite order.
    assert [c.name for c in assistant[2].tool_calls] == ["Edit", "Read"]
    assert all("thinking" not in t.text and "do not echo" not in t.text for t in s.turns)


def test_claude_tool_calls_joined_to_results_by_id(claude: dict[str, Session]) -> None:
    calls = {c.id: c for c in claude[S1].tool_calls}
    first = calls["toolu_01"]
    assert first.is_error and first.exit_code == 1 and "1 failed" in (first.output or "")
    assert isinstance(first.arguments, dict) and first.command is not None
    assert "RATE = Decimal" in (calls["toolu_04"].output or "")  # came back before toolu_03
    assert calls["toolu_03"].output.startswith("The file /home/dev/shop/src/tax.py")  # type: ignore[union-attr]
    # An empty result block: the output is toolUseResult's stdout; success means exit 0.
    passed = calls["toolu_07"]
    assert passed.output is not None and "1 passed" in passed.output
    assert passed.exit_code == 0 and not passed.is_error
    assert "All 214 tests passed" in (calls["toolu_11"].output or "")  # Task: text blocks
    assert calls["toolu_05"].is_error  # MultiEdit that found nothing to replace


def test_claude_follows_the_newest_branch_across_a_compaction(claude: dict[str, Session]) -> None:
    s = claude[S1]
    everything = "\n".join(t.text for t in s.turns) + str([c.arguments for c in s.tool_calls])
    assert "ABANDONED" not in everything and "CHANGELOG" not in everything
    # Before and after the compact boundary, one conversation.
    assert texts(s)[0].startswith("why does the tax test fail?")
    assert texts(s)[-1].startswith("now run the whole suite once")
    assert texts(s, "assistant")[-1].startswith("All 214 tests pass.")
    assert s.meta["compactions"] == 1 and s.meta["commands"] == ["/compact"]


def test_claude_summary_kept_only_when_its_leaf_is_in_the_file(
        claude: dict[str, Session]) -> None:
    assert claude[S1].meta["title"].startswith("Fix VAT rounding")
    assert "c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f" not in claude  # a file of summaries only


def test_claude_skills_and_files_changed(claude: dict[str, Session]) -> None:
    s = claude[S1]
    assert s.skills == ("tax-rules",)
    # Edit and Write on the kept branch; not the failed MultiEdit, not the rewound Write, never
    # the file-history-snapshot keys.
    assert s.files_changed == ("/home/dev/shop/src/tax.py", "/home/dev/shop/tests/test_receipt.py")


def test_claude_session_fields(claude: dict[str, Session]) -> None:
    s = claude[S1]
    assert (s.agent, s.id, s.cwd, s.git_branch) == ("claude_code", S1, PROJECT, "fix-tax")
    assert s.model == "claude-sonnet-4-5-20250929"  # not <synthetic>
    assert s.started is not None and s.ended is not None
    assert s.started.utcoffset() == timedelta(0) and s.started < s.ended
    assert s.started == datetime(2026, 3, 2, 8, 15, 1, 937000, tzinfo=timezone.utc)
    assert not s.headless and not s.sidechain and s.parent_id is None
    assert claude["a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"].headless  # entrypoint sdk-cli


def test_claude_sub_agents_are_sidechains_of_their_parent(claude: dict[str, Session]) -> None:
    new = claude["agent-a96cf8a5"]
    assert new.sidechain and new.parent_id == S1 and new.model == "claude-haiku-4-5-20251001"
    old = claude["agent-3f1b2c4d"]
    assert old.sidechain and old.parent_id == "2b4f6a80-3c1d-4e5f-8a9b-0c1d2e3f4a5b"
    assert texts(old) == [f"Find every caller of round_vat ({CANARY})"]


def test_claude_malformed_and_truncated_files_raise_one_line() -> None:
    folder = FIXTURES / "claude_code" / "projects" / "-home-dev-shop"
    with pytest.raises(SessionFormatError, match=r"^malformed: line 2 is not JSON$"):
        list(ClaudeCodeAdapter().read(folder / "d4e5f6a7-b8c9-4d0e-9f1a-2b3c4d5e6f7a.jsonl"))
    with pytest.raises(SessionFormatError, match=r"^truncated: the last line \(2\) is cut off$"):
        list(ClaudeCodeAdapter().read(folder / "e5f6a7b8-c9d0-4e1f-8a2b-3c4d5e6f7a8b.jsonl"))


# -- Codex --------------------------------------------------------------------------------

def test_codex_reads_live_and_archived_sessions(tmp_path: Path) -> None:
    adapter = CodexAdapter()
    assert adapter.stores({}, tmp_path) == [tmp_path / ".codex"]
    assert adapter.stores({"CODEX_HOME": "/srv/codex"}, tmp_path) == [Path("/srv/codex")]
    sources = [p.relative_to(FIXTURES / "codex").parts[0]
               for p in adapter.sources(FIXTURES / "codex")]
    assert sources.count("sessions") == 7 and sources.count("archived_sessions") == 2


def test_codex_prompts_leave_out_injected_context(codex: dict[str, Session]) -> None:
    s = codex[C1]
    assert [t.text for t in s.prompts] == [
        f"why does the tax test fail? the staging key is {CANARY}",
        "continue", "continue",  # typed twice, a reply between: two prompts
        "run the linter too",
        f"add a docstring to round_vat ({CANARY})",  # the IDE preamble cut off
    ]
    everything = "\n".join(t.text for t in s.turns)
    for injected in ("AGENTS.md", "<environment_context>", "<permissions instructions>",
                     "<turn_aborted>", "Summary so far", "REPLACEMENT", "Running the tax test"):
        assert injected not in everything
    archived = codex["0195e0a1-3333-7444-8555-666677778888"]
    assert [t.text for t in archived.prompts] == [f"bump the version to 1.4.0 ({CANARY})"]


def test_codex_mirrored_messages_counted_once(codex: dict[str, Session]) -> None:
    replies = [r for r in texts(codex[C1], "assistant") if r]  # not the calls-only turns
    assert [r for r in replies if r.startswith("VAT is rounded")] != []
    assert len(replies) == len(set(replies))  # each mirror pair once, either order
    assert sum(r.startswith("Nothing left to do") for r in replies) == 2


def test_codex_tool_calls_outputs_and_exit_codes(codex: dict[str, Session]) -> None:
    calls = {c.id: c for c in codex[C1].tool_calls}
    shell = calls["call_A"]
    assert shell.arguments["workdir"] == "/home/dev/shop"  # type: ignore[index]
    assert shell.command is not None and shell.command.startswith("bash -lc")
    assert shell.exit_code == 1 and shell.is_error and "1 failed" in (shell.output or "")
    assert calls["call_B"].name == "apply_patch" and isinstance(calls["call_B"].arguments, str)
    assert calls["call_B"].exit_code == 0 and not calls["call_B"].is_error
    assert calls["call_D"].exit_code == 0 and "214 passed" in (calls["call_D"].output or "")
    assert calls["call_E"].arguments.startswith('{"command"')  # type: ignore[union-attr]
    assert calls["call_E"].exit_code == 0  # from the "Exit code: 0" header
    assert calls["call_X"].is_error


def test_codex_interrupt_rollback_and_compaction(codex: dict[str, Session]) -> None:
    s = codex[C1]
    interrupts = [i for i, t in enumerate(s.turns) if t.interrupt]
    assert len(interrupts) == 1 and s.turns[interrupts[0] - 1].tool_calls[0].exit_code == 1
    everything = "\n".join(t.text for t in s.turns) + str([c.arguments for c in s.tool_calls])
    assert "WITHDRAWN" not in everything and "VAT_RATE" not in everything
    assert s.meta["rollbacks"] == 1 and s.meta["compactions"] == 1


def test_codex_files_changed_from_patches(codex: dict[str, Session]) -> None:
    # apply_patch as a custom tool, through the shell and as a function; not the failed patch,
    # not the one withdrawn by the rollback.
    assert codex[C1].files_changed == ("src/tax.py", "tests/test_rounding.py")


def test_codex_session_fields(codex: dict[str, Session]) -> None:
    s = codex[C1]
    assert (s.agent, s.cwd, s.git_branch, s.model) == ("codex", PROJECT, "fix-tax",
                                                        "gpt-5-codex")
    assert s.git_commit is not None and s.git_commit.startswith("9f3e2d1")
    assert s.started == datetime(2026, 3, 2, 9, 0, 0, 120000, tzinfo=timezone.utc)
    assert not s.headless and s.parent_id is None
    fork = codex["0195f3c4-7a8b-7c9d-8e0f-1a2b3c4d5e6f"]
    assert fork.parent_id == C1 and fork.meta["forked"]  # the first session_meta wins
    assert fork.cwd == PROJECT and fork.meta["cwds"] == ["/home/dev/shop", "/home/dev/shop/web"]
    assert fork.model == "gpt-5.1-codex"
    sub = codex["0195f3a9-0000-7000-8000-00000000a001"]
    assert sub.sidechain and sub.parent_id == C1
    assert codex["0195e0a1-3333-7444-8555-666677778888"].headless  # codex exec


def test_codex_before_the_envelope(codex: dict[str, Session]) -> None:
    old = codex["6a1f2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b"]
    assert old.cwd == PROJECT  # from its environment block
    assert texts(old) == [f"explain the rates module ({CANARY})"]
    assert texts(old, "assistant") == ["It maps regions to VAT rates."]
    assert old.git_commit == "1a2b3c4"


def test_codex_malformed_and_truncated_files_raise_one_line() -> None:
    day = FIXTURES / "codex" / "sessions" / "2026" / "03" / "04"
    with pytest.raises(SessionFormatError, match=r"^malformed: line 4 is not JSON$"):
        list(CodexAdapter().read(next(day.glob("*0195f4e1*"))))
    with pytest.raises(SessionFormatError, match=r"^truncated: the last line \(8\) is cut off$"):
        list(CodexAdapter().read(next(day.glob("*0195f4f2*"))))


# -- the harvester ------------------------------------------------------------------------

def copy_stores(tmp_path: Path) -> dict[str, str]:
    """Both fixture stores copied, every file's mtime one day before NOW."""
    environ = {}
    for name, var in (("claude_code", "CLAUDE_CONFIG_DIR"), ("codex", "CODEX_HOME")):
        target = tmp_path / "stores" / name
        shutil.copytree(FIXTURES / name, target)
        for path in target.rglob("*.jsonl"):
            os.utime(path, (WRITTEN.timestamp(), WRITTEN.timestamp()))
        environ[var] = str(target)
    return environ


def harvester(tmp_path: Path, environ: dict[str, str], project: Path = PROJECT,
              **kwargs: Any) -> Harvester:
    kwargs.setdefault("now", NOW)
    return Harvester(project, adapters(["claude_code", "codex"]), state_dir=tmp_path / "state",
                     scrubber=Scrubber(), environ=environ, home=tmp_path / "home", **kwargs)


def ids(sessions: Any) -> set[str]:
    return {s.id for s in sessions}


KEPT = {S1, "7a1d3e5f-2b4c-4d6e-8f0a-1b2c3d4e5f60", "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d",
        C1, "0195f3c4-7a8b-7c9d-8e0f-1a2b3c4d5e6f", "0195e0a1-3333-7444-8555-666677778888",
        "6a1f2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b"}
# Sub-agents' conversations: part of the session that started them, never sessions of their own.
SUB_AGENTS = {"agent-a96cf8a5", "agent-3f1b2c4d", "0195f3a9-0000-7000-8000-00000000a001"}


def test_harvest_keeps_the_project_and_says_why_the_rest_is_left_out(tmp_path: Path) -> None:
    result = harvester(tmp_path, copy_stores(tmp_path)).harvest()
    assert ids(result.sessions) == KEPT
    assert result.skip_counts == {OUTSIDE: 3, OWN_RUN: 3, NO_CWD: 1, UNREADABLE: 4,
                                  SUB_AGENT: 3}
    left = {(s.session_id, s.reason) for s in result.skipped if s.session_id}
    assert {i for i, reason in left if reason == SUB_AGENT} == SUB_AGENTS
    assert ("4e5f6a7b-8c9d-4e0f-a1b2-c3d4e5f6a7b8", OUTSIDE) in left  # the home folder
    assert ("6c7d8e9f-0a1b-4c2d-9e3f-4a5b6c7d8e9f", OUTSIDE) in left  # /home/dev/shopping
    assert ("0195f4d0-2222-7333-8444-555566667777", OUTSIDE) in left  # codex, home folder
    assert ("b2c3d4e5-f6a7-4b8c-9d0e-1f2a3b4c5d6e", NO_CWD) in left
    own = {s.session_id for s in result.skipped if s.reason == OWN_RUN}
    assert own == {"8d9e0f1a-2b3c-4d4e-8f5a-6b7c8d9e0f1a",  # a skillgrad-replay folder
                   "9b7c0e1f-3d2a-4b5c-8d6e-7f8a9b0c1d2e",  # [skillgrad-replay] prompt
                   "0195f3b0-1111-7222-8333-444455556666"}  # the same, codex exec
    details = sorted(s.detail for s in result.skipped if s.reason == UNREADABLE)
    assert details == ["malformed: line 2 is not JSON", "malformed: line 4 is not JSON",
                       "truncated: the last line (2) is cut off",
                       "truncated: the last line (8) is cut off"]


def test_the_home_folder_feeds_no_project_and_a_subfolder_feeds_its_own(tmp_path: Path) -> None:
    environ = copy_stores(tmp_path)
    home = harvester(tmp_path, environ, project=Path("/home/dev")).harvest()
    # As the project, the home folder is matched by everything below it ...
    assert "4e5f6a7b-8c9d-4e0f-a1b2-c3d4e5f6a7b8" in ids(home.sessions)
    # ... but a session there is never part of a project below it.
    api = harvester(tmp_path, environ, project=Path("/home/dev/shop/api")).harvest()
    assert ids(api.sessions) == {"7a1d3e5f-2b4c-4d6e-8f0a-1b2c3d4e5f60"}


def test_project_match_resolves_symlinks(tmp_path: Path) -> None:
    real = tmp_path / "real" / "shop"
    (real / "api").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    store = tmp_path / "claude" / "projects" / "x"
    store.mkdir(parents=True)
    for name, cwd in (("a", link / "shop" / "api"), ("b", real), ("c", tmp_path / "real")):
        line = {"type": "user", "uuid": "u1", "parentUuid": None, "cwd": str(cwd),
                "timestamp": "2026-03-01T10:00:00Z",
                "message": {"role": "user", "content": f"prompt {name}"}}
        (store / f"{name}.jsonl").write_text(json.dumps(line) + "\n")
        os.utime(store / f"{name}.jsonl", (WRITTEN.timestamp(),) * 2)
    h = Harvester(link / "shop", [ClaudeCodeAdapter()], state_dir=tmp_path / "state",
                  scrubber=Scrubber(), environ={"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")},
                  home=tmp_path, now=NOW)
    assert ids(h.harvest().sessions) == {"a", "b"}


def test_unchanged_sources_are_not_read_again(tmp_path: Path) -> None:
    environ = copy_stores(tmp_path)
    assert ids(harvester(tmp_path, environ).harvest().sessions) == KEPT
    again = harvester(tmp_path, environ).harvest()
    assert again.sessions == ()
    assert again.skip_counts == {UNCHANGED: 18, UNREADABLE: 4}  # unreadable: tried each night


def test_a_grown_source_yields_only_sessions_that_are_new_or_grew(tmp_path: Path) -> None:
    environ = copy_stores(tmp_path)
    harvester(tmp_path, environ).harvest()
    store = Path(environ["CLAUDE_CONFIG_DIR"]) / "projects"
    main = store / "-home-dev-shop" / f"{S1}.jsonl"
    line = {"type": "user", "uuid": "u99", "parentUuid": "a19", "cwd": "/home/dev/shop",
            "sessionId": S1, "timestamp": "2026-03-05T09:00:00.000Z",
            "message": {"role": "user", "content": "one more thing: update the docs"}}
    with main.open("a") as fh:
        fh.write(json.dumps(line) + "\n")
    # A source that grew by a record that is no turn: read again, its session not kept again.
    api = store / "-home-dev-shop-api" / "7a1d3e5f-2b4c-4d6e-8f0a-1b2c3d4e5f60.jsonl"
    with api.open("a") as fh:
        fh.write(json.dumps({"type": "mode", "mode": "normal"}) + "\n")
    for path in (main, api):
        os.utime(path, (WRITTEN.timestamp() + 3600,) * 2)
    result = harvester(tmp_path, environ).harvest()
    assert ids(result.sessions) == {S1}
    assert result.sessions[0].prompts[-1].text == "one more thing: update the docs"
    assert (api, SEEN) in {(s.source, s.reason) for s in result.skipped}


def test_a_moved_codex_session_is_not_harvested_twice(tmp_path: Path) -> None:
    environ = copy_stores(tmp_path)
    harvester(tmp_path, environ).harvest()
    home = Path(environ["CODEX_HOME"])
    live = next((home / "sessions").rglob(f"*{C1}.jsonl"))
    archived = home / "archived_sessions" / live.name
    live.rename(archived)  # codex archives a session
    result = harvester(tmp_path, environ).harvest()
    assert result.sessions == ()
    assert (archived, SEEN) in {(s.source, s.reason) for s in result.skipped}


def test_checkpoint_is_json_with_utc_times_written_atomically(tmp_path: Path) -> None:
    environ = copy_stores(tmp_path)
    h = harvester(tmp_path, environ)
    h.harvest()
    data = json.loads(h.checkpoint_path.read_text())
    assert data["version"] == 1 and data["project"] == str(PROJECT)
    entry = data["sources"][str(Path(environ["CLAUDE_CONFIG_DIR"]) / "projects" /
                                "-home-dev-shop" / f"{S1}.jsonl")]
    assert entry["mtime"] == "2026-03-05T00:00:00+00:00" and entry["agent"] == "claude_code"
    session = data["sessions"][f"claude_code:{S1}"]
    assert session["ended"] == "2026-03-02T08:20:33.221000+00:00" and session["turns"] == 16
    assert [p.name for p in h.checkpoint_path.parent.iterdir()] == [h.checkpoint_path.name]
    h.checkpoint_path.write_text("{not json")
    with pytest.raises(DataError, match="not a harvest checkpoint"):
        harvester(tmp_path, environ).harvest()


def test_a_source_still_being_written_waits_for_the_next_harvest(tmp_path: Path) -> None:
    environ = copy_stores(tmp_path)
    main = Path(environ["CLAUDE_CONFIG_DIR"]) / "projects" / "-home-dev-shop" / f"{S1}.jsonl"
    os.utime(main, (NOW.timestamp() - 20,) * 2)
    first = harvester(tmp_path, environ, settle_seconds=60).harvest()
    assert S1 not in ids(first.sessions)
    assert [s.source for s in first.skipped if s.reason == STILL_WRITING] == [main]
    later = harvester(tmp_path, environ, now=NOW + timedelta(minutes=5)).harvest()
    assert ids(later.sessions) == {S1}


def test_since_bounds_the_window(tmp_path: Path) -> None:
    environ = copy_stores(tmp_path)
    since = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)
    result = harvester(tmp_path, environ, since=since).harvest()
    assert ids(result.sessions) == {C1, "0195f3c4-7a8b-7c9d-8e0f-1a2b3c4d5e6f",
                                    "a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d"}
    assert result.skip_counts[BEFORE_WINDOW] == 4  # sub-agents count as such, wherever
    # A wider window later reads again what the narrower one left out.
    wider = harvester(tmp_path, environ).harvest()
    assert ids(wider.sessions) == KEPT - ids(result.sessions)
    with pytest.raises(ConfigError, match="timezone-aware"):
        harvester(tmp_path, environ, since=datetime(2026, 3, 2))


def test_iteration_streams_and_checkpoints_what_was_taken(tmp_path: Path) -> None:
    environ = copy_stores(tmp_path)
    h = harvester(tmp_path, environ)
    taken = []
    for session in h.iter_sessions():
        taken.append(session.id)
        if len(taken) == 3:
            break
    assert h.checkpoint_path.exists()
    rest = harvester(tmp_path, environ).harvest()
    # The sources fully taken are not read again; the one in progress is, so nothing is lost.
    assert ids(rest.sessions) | set(taken) == KEPT
    assert len(ids(rest.sessions) & set(taken)) == 1


def test_preview_lists_stores_and_sources_without_writing(tmp_path: Path) -> None:
    environ = copy_stores(tmp_path)
    h = Harvester(PROJECT, adapters(["claude_code", "codex"]), state_dir=tmp_path / "state",
                  scrubber=Scrubber(), environ={"CODEX_HOME": environ["CODEX_HOME"]},
                  home=tmp_path / "home", now=NOW)
    preview = h.preview()
    assert [(s.agent, s.exists) for s in preview.stores] == [("claude_code", False),
                                                            ("codex", True)]
    assert preview.stores[0].path == tmp_path / "home" / ".claude" / "projects"
    by_name = {s.path.name: s for s in preview.sources}
    assert by_name[f"rollout-2026-03-02T09-00-00-{C1}.jsonl"].sessions == 1
    assert by_name["rollout-2026-03-04T08-00-00-0195f4d0-2222-7333-8444-555566667777.jsonl"] \
        .sessions == 0
    assert sum(s.status == UNREADABLE for s in preview.sources) == 2
    assert preview.sessions == 4  # the sub-agent's conversation is not a session
    assert not h.checkpoint_path.exists()
    assert len(h.harvest().sessions) == 4


def test_a_canary_secret_reaches_no_session_field_and_no_checkpoint(tmp_path: Path) -> None:
    environ = copy_stores(tmp_path)
    raw: list[Session] = []
    for adapter in (ClaudeCodeAdapter(), CodexAdapter()):
        raw += read_all(adapter, adapter.stores(environ, tmp_path)[0]).values()
    # The canary is planted in every kind of text the sessions carry ...
    planted = {"prompt": [t.text for s in raw for t in s.prompts],
               "reply": [t.text for s in raw for t in s.turns if t.role == "assistant"],
               "arguments": [json.dumps(c.arguments) for s in raw for c in s.tool_calls],
               "output": [c.output or "" for s in raw for c in s.tool_calls],
               "title": [str(s.meta.get("title", "")) for s in raw],
               "branch": [s.git_branch or "" for s in raw]}
    for field, values in planted.items():
        assert any(CANARY in v for v in values), field
    # ... and none of it comes out of a harvest, nor into its checkpoint.
    h = harvester(tmp_path, environ)
    result = h.harvest()
    assert len(result.sessions) == len(KEPT)
    dumped = json.dumps([dataclasses.asdict(s) for s in result.sessions], default=str)
    assert "sk-ant-canary" not in dumped and REDACTED in dumped
    assert "sk-ant-canary" not in json.dumps([dataclasses.asdict(s) for s in result.skipped],
                                             default=str)
    assert "sk-ant-canary" not in h.checkpoint_path.read_text()


# -- the adapter registry and the shared readers -----------------------------------------

def test_adapters_are_named_by_import_path_and_loaded_on_demand() -> None:
    assert tuple(ADAPTERS) == AGENTS
    assert all(":" in path for path in ADAPTERS.values())
    loaded = adapters(["codex", "claude_code", "codex"])
    assert [a.agent for a in loaded] == ["codex", "claude_code"]
    with pytest.raises(ConfigError, match="unknown agent 'cursor'.*claude_code, codex, copilot"):
        adapters(["cursor"])


def test_utc_reads_the_time_formats_agents_write() -> None:
    expected = datetime(2026, 3, 2, 8, 15, 4, 210000, tzinfo=timezone.utc)
    assert utc("2026-03-02T08:15:04.210Z") == expected
    assert utc("2026-03-02T09:15:04.21+01:00") == expected
    assert utc("2026-03-02T08:15:04.210000123Z") == expected  # nanoseconds
    assert utc("2026-03-02T08:15:04.210") == expected  # no zone: UTC
    assert utc(int(expected.timestamp() * 1000)) == expected  # epoch milliseconds
    assert utc(expected.timestamp()) == expected
    bad: Any
    for bad in (None, "", "yesterday", True, {}):
        assert utc(bad) is None


def test_read_jsonl_streams_and_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a":1}\n\n{"b":2}')  # a complete last line without its newline
    assert list(read_jsonl(path)) == [(1, {"a": 1}), (3, {"b": 2})]
    path.write_bytes(b'{"a":1}\n[1,2]\n')
    with pytest.raises(SessionFormatError, match="line 2 is not a JSON object"):
        list(read_jsonl(path))
    path.write_bytes(b'{"a":"\xff"}\n')
    with pytest.raises(SessionFormatError, match="line 1 is not JSON"):
        list(read_jsonl(path))


def test_a_lone_surrogate_is_read_as_a_replacement_character(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b'{"a":"x\\ud800","b":["\\uDC00"],"c":"\\ud83d\\ude00","d":"\\\\ud800"}\n')
    # Lone halves replaced; a pair is the one character it encodes; an escaped backslash
    # followed by "ud800" is text, left as it is.
    assert list(read_jsonl(path)) == [(1, {"a": "x\ufffd", "b": ["\ufffd"], "c": "\U0001f600",
                                           "d": "\\ud800"})]


def test_session_records_hold_no_lone_surrogate_whoever_makes_them() -> None:
    call = ToolCall("c1", "Bash", {"command": ["echo", "\udfff"]}, output="out \ud800")
    turn = Turn("user", "fix it \ud800", tool_calls=(call,))
    session = Session("codex", "s1", Path("x.jsonl"), (turn,), git_branch="b\ud800",
                      skills=("s\ud800",), meta={"title": "t\ud800"})
    dumped = json.dumps(dataclasses.asdict(session), default=str, ensure_ascii=False)
    dumped.encode("utf-8")  # no surrogate left to refuse
    assert turn.text == "fix it \ufffd" and call.arguments == {"command": ["echo", "\ufffd"]}
    assert (call.output, session.git_branch, session.skills, session.meta["title"]) == (
        "out \ufffd", "b\ufffd", ("s\ufffd",), "t\ufffd")


def test_a_lone_surrogate_in_a_working_directory_is_harvested(tmp_path: Path) -> None:
    store = tmp_path / "claude" / "projects" / "x"
    store.mkdir(parents=True)
    line = {"type": "user", "uuid": "u1", "parentUuid": None,
            "cwd": "/home/dev/shop/caf\ud800", "timestamp": "2026-03-01T10:00:00Z",
            "message": {"role": "user", "content": "why does the tax test fail?"}}
    (store / "s.jsonl").write_text(json.dumps(line) + "\n")
    os.utime(store / "s.jsonl", (WRITTEN.timestamp(),) * 2)
    h = Harvester(PROJECT, [ClaudeCodeAdapter()], state_dir=tmp_path / "state",
                  scrubber=Scrubber(), environ={"CLAUDE_CONFIG_DIR": str(tmp_path / "claude")},
                  home=tmp_path, now=NOW)
    (session,) = h.harvest().sessions
    assert session.cwd == PROJECT / "caf\ufffd"


def test_replay_marker_is_the_folder_prefix_skillgrad_runs_in() -> None:
    assert REPLAY_MARKER == "skillgrad-replay"
