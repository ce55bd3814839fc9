"""The Copilot CLI, OpenCode and Gemini CLI session adapters, on stores built from the fixtures
in tests/fixtures/sleep (their SQLite databases from the SQL scripts there)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

import pytest
from canary import CANARY, planted, strings

from skillgrad.sleep.scrub import Scrubber
from skillgrad.traces.base import Adapter, SessionFormatError
from skillgrad.traces.copilot import CopilotAdapter
from skillgrad.traces.gemini import GeminiAdapter
from skillgrad.traces.opencode import OpenCodeAdapter
from skillgrad.traces.sessions import Session

FIXTURES = Path(__file__).parent / "fixtures" / "sleep"
UTC = timezone.utc
SHOP = Path("/home/dev/shop")
NO_COPY = "database is locked, and it cannot be copied"

COPILOT_MAIN = "4b1e6f0a-2c3d-4e5f-8a9b-0c1d2e3f4a5b"
COPILOT_HEADLESS = "9d8c7b6a-5f4e-4d3c-9b2a-1f0e9d8c7b6a"
COPILOT_DB_ONLY = "c3f1a2b4-0000-4000-8000-00000000000d"
COPILOT_SUB = f"{COPILOT_MAIN}:toolu_vrtx_01TaskInspector"
OC_MAIN = "ses_01JN4ZK8A0SHOPVATROUNDING"
OC_SUB = "ses_01JN4ZM2B0SHOPSUBAGENT001"
OC_LEGACY = "ses_01HZ9Y0LEGACYBLOGDRAFTS01"
GEM_MAIN = "5d2e0c1a-7b3f-4c2d-9e8f-a1b2c3d4e5f6"
GEM_SUB = "8c9d0e1f-2a3b-4c5d-8e7f-90a1b2c3d4e5"
GEM_CHECKPOINT = "e1f2a3b4-c5d6-4e7f-8a9b-0c1d2e3f4a5b"
GEM_LEGACY = "0a1b2c3d-4e5f-4a6b-8c7d-e8f9a0b1c2d3"


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)  # type: ignore[misc]


def build_db(script: Path, db: Path, wal: bool = False) -> Path:
    con = sqlite3.connect(db)
    if wal:
        con.execute("PRAGMA journal_mode=WAL")
    con.executescript(script.read_text(encoding="utf-8"))
    con.commit()
    con.close()
    return db


@contextmanager
def locked(db: Path) -> Iterator[sqlite3.Connection]:
    """Another process's exclusive lock on ``db``, as a writer mid-transaction holds it."""
    con = sqlite3.connect(db, isolation_level=None)
    con.execute("PRAGMA locking_mode=EXCLUSIVE")
    con.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(sqlite3.OperationalError, match="locked"):  # the lock is real
            probe = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0)
            probe.execute("SELECT count(*) FROM sqlite_master").fetchall()
        yield con
    finally:
        con.execute("ROLLBACK")
        con.close()


def read_store(adapter: Adapter, store: Path) -> list[Session]:
    return [s for source in adapter.sources(store) for s in adapter.read(source)]


def by_id(sessions: list[Session]) -> dict[str, Session]:
    ids = [s.id for s in sessions]
    assert len(ids) == len(set(ids)), f"a session was read twice: {ids}"
    return {s.id: s for s in sessions}


def shape(session: Session) -> list[tuple[str, str, bool, list[str]]]:
    return [(t.role, t.text, t.interrupt, [c.name for c in t.tool_calls]) for t in session.turns]


@pytest.fixture
def copilot_home(tmp_path: Path) -> Path:
    home = tmp_path / ".copilot"
    shutil.copytree(FIXTURES / "copilot" / "home", home)
    build_db(FIXTURES / "copilot" / "session-store.sql", home / "session-store.db")
    return home


@pytest.fixture
def opencode_store(tmp_path: Path) -> Path:
    store = tmp_path / "opencode"
    shutil.copytree(FIXTURES / "opencode" / "storage", store / "storage")
    build_db(FIXTURES / "opencode" / "opencode.sql", store / "opencode.db")
    return store


@pytest.fixture
def gemini_store(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES / "gemini" / "home", tmp_path / "home")
    return tmp_path / "home" / ".gemini"


# ------------------------------------------------------------------------------- Copilot CLI


def test_copilot_stores_follow_copilot_home(tmp_path: Path) -> None:
    adapter = CopilotAdapter()
    assert adapter.stores({}, tmp_path) == [tmp_path / ".copilot"]
    assert adapter.stores({"COPILOT_HOME": "/srv/cp"}, tmp_path) == [Path("/srv/cp")]


def test_copilot_sources_are_event_logs_then_the_store(copilot_home: Path) -> None:
    state = copilot_home / "session-state"
    # the old one-file copy of the first session is left out: its folder supersedes it
    assert list(CopilotAdapter().sources(copilot_home)) == [
        state / COPILOT_MAIN / "events.jsonl", state / COPILOT_HEADLESS / "events.jsonl",
        copilot_home / "session-store.db"]


def test_copilot_event_log_joins_tools_and_marks_what_the_person_did_not_type(
        copilot_home: Path) -> None:
    s = by_id(read_store(CopilotAdapter(), copilot_home))[COPILOT_MAIN]
    assert shape(s) == [
        ("user", f"why does the tax test fail? my key is {CANARY}", False, []),
        # the skill's injected text (source skill-pdf) is not a prompt
        ("assistant", f"Running the tests with {CANARY} exported.", False,
         ["bash", "edit", "view", "create"]),
        ("assistant", "", False, ["task"]),
        ("assistant", "", False, ["bash"]),  # a command the person ran themselves
        ("user", "now run the whole suite", False, []),
        ("assistant", "", False, ["bash"]),
        ("user", "", True, []),  # abort
        # the autopilot continuation is not the person's
        ("assistant", "Stopped. The VAT test passes now.", False, []),
    ]
    bash, edit, _, create = s.turns[1].tool_calls
    assert bash.id == "call_bash_1" and bash.command is not None and "pytest -q" in bash.command
    assert bash.exit_code == 1 and bash.is_error and bash.output is not None
    assert "FAILED tests/test_tax.py::test_vat" in bash.output
    assert bash.time == at(2026, 3, 2, 8, 15, 6, 10000)  # when it started
    assert not edit.is_error and edit.output == "File /home/dev/shop/tax.py updated."
    assert create.is_error and create.output == "Permission denied: /etc/shop.conf"
    assert s.turns[2].tool_calls[0].output == "VAT is rounded in tax.py line 12."
    own = s.turns[3].tool_calls[0]
    assert own.exit_code == 0 and own.time == at(2026, 3, 2, 8, 15, 20)  # epoch ms
    pending = s.turns[5].tool_calls[0]
    assert pending.output is None and not pending.is_error  # the abort came first
    assert s.turns[1].time == at(2026, 3, 2, 8, 15, 6)  # written with a +01:00 offset
    assert s.started == at(2026, 3, 2, 8, 15, 0, 100000)  # written without a zone
    assert s.ended == at(2026, 3, 2, 8, 17, 5)
    assert s.cwd == SHOP and s.git_branch == "fix-tax" and s.git_commit == "9f3e2d1"
    assert s.skills == ("python-testing",)
    # the edit and the files the shutdown names; the failed create changed nothing
    assert s.files_changed == ("/home/dev/shop/tax.py", "/home/dev/shop/tests/test_tax.py")
    assert s.model == "gpt-5" and not s.headless and not s.sidechain
    assert s.meta["repository"] == "dev/shop"


def test_copilot_sub_agent_is_a_sidechain_session(copilot_home: Path) -> None:
    sub = by_id(read_store(CopilotAdapter(), copilot_home))[COPILOT_SUB]
    assert sub.sidechain and sub.parent_id == COPILOT_MAIN and sub.cwd == SHOP
    assert [t.role for t in sub.turns] == ["assistant", "assistant"]
    assert sub.turns[0].tool_calls[0].output == "tax.py:12: return round(x, 1)"
    assert sub.meta == {"agent": "explore"} and sub.model == "claude-haiku-4.5"


def test_copilot_headless_run_is_flagged(copilot_home: Path) -> None:
    sessions = by_id(read_store(CopilotAdapter(), copilot_home))
    assert sessions[COPILOT_HEADLESS].headless
    assert not sessions[COPILOT_MAIN].headless


def test_copilot_store_is_read_only_for_sessions_without_an_event_log(copilot_home: Path) -> None:
    sessions = by_id(read_store(CopilotAdapter(), copilot_home))
    assert sessions[COPILOT_MAIN].source.name == "events.jsonl"  # not the store's copy
    db_only = [s for s in sessions.values() if s.source.name == "session-store.db"]
    assert [s.id for s in db_only] == [COPILOT_DB_ONLY]
    s = db_only[0]
    assert [(t.role, t.time) for t in s.turns] == [  # by turn_index, not by row
        ("user", at(2026, 3, 1, 10, 0, 0, 500000)),  # epoch milliseconds, as text
        ("assistant", at(2026, 3, 1, 10, 0, 0, 500000)),
        ("user", at(2026, 3, 1, 10, 5)),  # ISO with an offset
        ("assistant", at(2026, 3, 1, 10, 5)),
    ]
    assert s.turns[0].text.startswith("write docs for key rotation")
    assert s.started == at(2026, 3, 1, 10)  # SQLite datetime('now'): no zone, UTC
    assert s.ended == at(2026, 3, 1, 10, 13, 20)  # epoch seconds
    # written by create and edit; the file it only viewed is not a change
    assert s.files_changed == ("/home/dev/shop/docs/rotation.md", "/home/dev/shop/README.md")
    assert s.cwd == SHOP and s.git_branch == "docs"


def test_copilot_locked_store_is_read_from_a_copy(copilot_home: Path, tmp_path: Path) -> None:
    db = copilot_home / "session-store.db"
    with locked(db):
        assert [s.id for s in CopilotAdapter().read(db)] == [COPILOT_DB_ONLY]
        stuck = CopilotAdapter(scratch=tmp_path / "no-such-folder")
        with pytest.raises(SessionFormatError, match=NO_COPY) as err:
            list(stuck.read(db))
    assert str(db) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(("folder", "problem"), [("malformed", "line 3 is not JSON"),
                                                 ("truncated", "last line (4) is cut off")])
def test_copilot_bad_event_log_is_one_line_naming_file_and_line(folder: str,
                                                                problem: str) -> None:
    path = FIXTURES / "copilot" / "bad" / folder / "events.jsonl"
    with pytest.raises(SessionFormatError) as err:
        list(CopilotAdapter().read(path))
    message = str(err.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message


def test_copilot_a_time_that_is_no_time_is_an_error(tmp_path: Path) -> None:
    log = tmp_path / "s1" / "events.jsonl"
    log.parent.mkdir()
    log.write_text('{"type": "session.start", "timestamp": "2026-03-02T08:15:00Z", "data": '
                   '{"sessionId": "s1", "context": {"cwd": "/home/dev/shop"}}}\n'
                   '{"type": "user.message", "timestamp": "yesterday", '
                   '"data": {"content": "hi"}}\n', encoding="utf-8")
    with pytest.raises(SessionFormatError) as err:
        list(CopilotAdapter().read(log))
    assert str(err.value) == (f"{log}: line 2: timestamp: 'yesterday' is not an ISO time or "
                              "epoch seconds or milliseconds")


# ---------------------------------------------------------------------------------- OpenCode


def test_opencode_stores_follow_xdg_data_home(tmp_path: Path) -> None:
    adapter = OpenCodeAdapter()
    assert adapter.stores({}, tmp_path) == [tmp_path / ".local" / "share" / "opencode"]
    assert adapter.stores({"XDG_DATA_HOME": "/data"}, tmp_path) == [Path("/data/opencode")]


def test_opencode_database_session_keeps_only_the_conversation(opencode_store: Path) -> None:
    s = by_id(list(OpenCodeAdapter().read(opencode_store / "opencode.db")))[OC_MAIN]
    assert shape(s) == [
        # the synthetic part (the engine's note of a file read) is not the person's text
        ("user", f"why does the tax test fail? key {CANARY}", False, []),
        ("assistant", f"Running the test; {CANARY} stays out of logs.", False,
         ["bash", "edit", "write"]),
        # the compaction request and its summary are gone; so is the ignored part
        ("user", "now run the whole suite", False, []),
        ("assistant", "", False, ["bash"]),
        ("user", "", True, []),  # MessageAbortedError
        # the undone exchange (session.revert) is gone
    ]
    bash, edit, write = s.turns[1].tool_calls
    assert bash.id == "toolu_bash_1" and bash.exit_code == 1 and bash.is_error  # exited 1
    assert bash.output is not None and bash.output.startswith("F\nFAILED")
    assert bash.time == at(2026, 3, 2, 8, 15, 6)
    assert edit.arguments == {"filePath": "/home/dev/shop/tax.py", "oldString": "round(x, 1)",
                              "newString": "round(x, 2)"}
    assert write.is_error and write.output is not None and "permission denied" in write.output
    assert s.turns[3].tool_calls[0].output is None  # still running when aborted
    assert s.turns[4].time == at(2026, 3, 2, 8, 16, 30)  # when the aborted reply ended
    # the edit and the patch; the failed write changed nothing
    assert s.files_changed == ("/home/dev/shop/tax.py", "/home/dev/shop/tests/test_tax.py")
    assert s.started == at(2026, 3, 2, 8, 15) and s.ended == at(2026, 3, 2, 8, 16, 42)
    assert s.cwd == SHOP and s.model == "claude-sonnet-4-5" and not s.sidechain
    assert s.meta == {"title": f"Fix VAT rounding ({CANARY})"}


def test_opencode_sub_session_is_a_sidechain(opencode_store: Path) -> None:
    sub = by_id(list(OpenCodeAdapter().read(opencode_store / "opencode.db")))[OC_SUB]
    assert sub.sidechain and sub.parent_id == OC_MAIN
    assert sub.skills == ("python-testing",)
    assert shape(sub) == [("user", "Find where VAT is rounded.", False, []),
                          ("assistant", "VAT is rounded in tax.py line 12.", False, ["skill"])]


def test_opencode_json_storage_is_read_after_the_database_without_repeats(
        opencode_store: Path) -> None:
    sessions = by_id(read_store(OpenCodeAdapter(), opencode_store))
    assert list(sessions) == [OC_MAIN, OC_SUB, OC_LEGACY]
    assert sessions[OC_MAIN].source.name == "opencode.db"  # the JSON copy was not read
    legacy = sessions[OC_LEGACY]
    assert legacy.source.name == f"{OC_LEGACY}.json" and legacy.cwd == Path("/home/dev/blog")
    assert [t.role for t in legacy.turns] == ["user", "assistant"]  # by time
    assert legacy.turns[1].tool_calls[0].output == f"notes mentioning {CANARY}"
    assert legacy.started == at(2026, 1, 1, 10)


def test_opencode_json_storage_alone_is_read(opencode_store: Path) -> None:
    (opencode_store / "opencode.db").unlink()
    sessions = by_id(read_store(OpenCodeAdapter(), opencode_store))
    assert list(sessions) == [OC_MAIN, OC_LEGACY]
    assert sessions[OC_MAIN].meta["title"] == "STALE JSON COPY"
    assert shape(sessions[OC_MAIN])[0] == ("user", f"why does the tax test fail? key {CANARY}",
                                           False, [])


def test_opencode_locked_database_is_read_from_a_copy_with_its_log(opencode_store: Path,
                                                                   tmp_path: Path) -> None:
    db = opencode_store / "opencode.db"
    db.unlink()
    build_db(FIXTURES / "opencode" / "opencode.sql", db, wal=True)
    with locked(db) as writer:
        # committed into the write-ahead log before the lock: the copy must see it
        writer.execute("INSERT INTO session (id, project_id, slug, directory, title, version,"
                       " time_created, time_updated) VALUES ('ses_NEW', 'a1b2c3d4e5f6', 's',"
                       " '/home/dev/shop', 'new', '1.2.6', 1772440000000, 1772440000000)")
        writer.execute("COMMIT")
        writer.execute("BEGIN EXCLUSIVE")
        writer.execute("UPDATE session SET title = 'uncommitted' WHERE id = 'ses_NEW'")
        assert (opencode_store / "opencode.db-wal").stat().st_size > 0
        sessions = by_id(list(OpenCodeAdapter().read(db)))
        assert set(sessions) == {OC_MAIN, OC_SUB, "ses_NEW"}
        assert sessions["ses_NEW"].meta["title"] == "new"
        with pytest.raises(SessionFormatError, match=NO_COPY):
            list(OpenCodeAdapter(scratch=tmp_path / "no-such-folder").read(db))


def test_opencode_bad_sources_are_one_line_errors(tmp_path: Path) -> None:
    db = build_db(FIXTURES / "opencode" / "bad" / "malformed.sql", tmp_path / "opencode.db")
    with pytest.raises(SessionFormatError) as err:
        list(OpenCodeAdapter().read(db))
    assert str(err.value).startswith(f"{db}: message msg_BAD1: invalid JSON")
    truncated = (FIXTURES / "opencode" / "bad" / "truncated" / "storage" / "session" / "global"
                 / "ses_TRUNC.json")
    with pytest.raises(SessionFormatError) as err:
        list(OpenCodeAdapter().read(truncated))
    assert str(err.value) == f"{truncated}: truncated: the JSON stops at line 5, unfinished"
    garbage = tmp_path / "garbage" / "opencode.db"
    garbage.parent.mkdir()
    garbage.write_bytes(b"not a database at all, just text" * 64)
    with pytest.raises(SessionFormatError, match="not a readable SQLite database") as err:
        list(OpenCodeAdapter().read(garbage))
    assert str(err.value).startswith(f"{garbage}: ") and "\n" not in str(err.value)


# -------------------------------------------------------------------------------- Gemini CLI


def test_gemini_stores_follow_gemini_cli_home(tmp_path: Path) -> None:
    adapter = GeminiAdapter()
    assert adapter.stores({}, tmp_path) == [tmp_path / ".gemini"]
    assert adapter.stores({"GEMINI_CLI_HOME": "/g"}, tmp_path) == [Path("/g/.gemini")]


def test_gemini_sources_leave_out_a_resumed_legacy_copy(gemini_store: Path) -> None:
    names = [p.name for p in GeminiAdapter().sources(gemini_store)]
    assert f"session-2026-03-04T11-00-{GEM_CHECKPOINT[:8]}.jsonl" in names
    assert f"session-2026-03-04T11-00-{GEM_CHECKPOINT[:8]}.json" not in names  # its .jsonl won
    assert f"session-2026-01-10T09-00-{GEM_LEGACY[:8]}.json" in names  # never resumed
    assert f"{GEM_SUB}.jsonl" in names and len(names) == 6


def test_gemini_session_applies_replacements_set_and_rewind(gemini_store: Path) -> None:
    s = by_id(read_store(GeminiAdapter(), gemini_store))[GEM_MAIN]
    assert shape(s) == [
        # what the person typed (displayContent), not the expanded @file content
        ("user", f"why does the tax test fail? @tax.py key {CANARY}", False, []),
        # the second g1 line replaced the first in place; the thought is not text
        ("assistant", f"Running the test with {CANARY} unset.", False,
         ["run_shell_command", "replace", "write_file", "activate_skill"]),
        # tool results as user messages, /stats, <session_context> and the info notice are
        # not prompts; the rewound exchange is gone
        ("user", "now run the whole suite", False, []),
        ("assistant", "", False, ["run_shell_command"]),
        ("user", "", True, []),  # one interrupt: the cancelled call and "Request cancelled."
        # the compression summary and the model's acknowledgement are gone
        ("user", "thanks, that's all", False, []),
        ("assistant", "You're welcome.", False, []),
    ]
    shell, edit, write, skill = s.turns[1].tool_calls
    assert shell.exit_code == 1 and shell.is_error and shell.output is not None
    assert shell.output.startswith("Output: F") and shell.time == at(2026, 3, 2, 8, 15, 6, 100000)
    assert edit.output is not None and edit.output.startswith("Successfully modified")
    assert write.is_error and write.output is not None and "Permission denied" in write.output
    # recorded without a result: joined to the user message that carried it back
    assert skill.output is not None and "python-testing" in skill.output
    assert s.files_changed == ("/home/dev/shop/tax.py",)  # the failed write changed nothing
    assert s.skills == ("python-testing",) and s.model == "gemini-2.5-flash"
    assert s.started == at(2026, 3, 2, 8, 15) and s.ended == at(2026, 3, 2, 8, 21, 2, 500000)
    assert s.meta == {"summary": f"Fix VAT rounding ({CANARY})"}  # from $set
    assert s.cwd == SHOP and not s.sidechain and s.parent_id is None  # from .project_root


def test_gemini_checkpoint_replaces_the_conversation(gemini_store: Path) -> None:
    s = by_id(read_store(GeminiAdapter(), gemini_store))[GEM_CHECKPOINT]
    assert shape(s) == [("user", "add type hints to tax.py", False, []),
                        ("assistant", "Added hints.", False, []),
                        ("user", "and run mypy", False, [])]
    assert s.source.suffix == ".jsonl" and s.ended == at(2026, 3, 4, 11, 0, 6)


def test_gemini_legacy_json_in_a_hash_folder_finds_its_root(gemini_store: Path) -> None:
    s = by_id(read_store(GeminiAdapter(), gemini_store))[GEM_LEGACY]
    assert s.source.suffix == ".json" and s.cwd == Path("/home/dev/blog")  # sha256 of the root
    assert [t.role for t in s.turns] == ["user", "assistant"]
    assert s.turns[1].tool_calls[0].output == f"notes mentioning {CANARY}"


def test_gemini_sub_agent_is_a_sidechain_of_its_parent(gemini_store: Path) -> None:
    sub = by_id(read_store(GeminiAdapter(), gemini_store))[GEM_SUB]
    assert sub.sidechain and sub.parent_id == GEM_MAIN and sub.cwd == SHOP
    assert shape(sub) == [("user", "Find where VAT is rounded.", False, []),
                          ("assistant", "tax.py line 12.", False, [])]


def test_gemini_root_from_the_registry_or_none(gemini_store: Path) -> None:
    sessions = by_id(read_store(GeminiAdapter(), gemini_store))
    assert sessions["77777777-7777-4777-8777-777777777777"].cwd == Path("/home/dev/api")
    assert sessions["f00df00d-0000-4000-8000-000000000000"].cwd is None
    (gemini_store / "projects.json").write_text('{"projects": ', encoding="utf-8")
    source = next(GeminiAdapter().sources(gemini_store))
    with pytest.raises(SessionFormatError, match="projects.json: line 1: invalid JSON"):
        list(GeminiAdapter().read(source))


@pytest.mark.parametrize(("name", "problem"), [("10-00-malforme", "line 3 is not JSON"),
                                               ("10-01-truncate", "last line (3) is cut off")])
def test_gemini_bad_session_file_is_one_line_naming_file_and_line(name: str,
                                                                   problem: str) -> None:
    path = (FIXTURES / "gemini" / "bad" / ".gemini" / "tmp" / "shop" / "chats"
            / f"session-2026-03-05T{name}.jsonl")
    with pytest.raises(SessionFormatError) as err:
        list(GeminiAdapter().read(path))
    message = str(err.value)
    assert message.startswith(f"{path}: ") and problem in message and "\n" not in message


# ------------------------------------------------------------------------------ all three


@pytest.fixture
def every_session(copilot_home: Path, opencode_store: Path,
                  gemini_store: Path) -> dict[str, list[Session]]:
    return {"copilot": read_store(CopilotAdapter(), copilot_home),
            "opencode": read_store(OpenCodeAdapter(), opencode_store),
            "gemini": read_store(GeminiAdapter(), gemini_store)}


@pytest.mark.parametrize("agent", ["copilot", "opencode", "gemini"])
def test_scrubbing_leaves_the_canary_in_no_field(agent: str,
                                                 every_session: dict[str, list[Session]]) -> None:
    sessions = every_session[agent]
    assert set().union(*(planted(s) for s in sessions)) == {
        "user", "assistant", "arguments", "output", "meta"}
    scrubber = Scrubber()
    for session in sessions:
        clean = scrubber.record(session)
        leaked = [s for s in strings(clean) if CANARY in s]
        assert not leaked, f"{agent} {session.id}: {leaked}"


@pytest.mark.parametrize("agent", ["copilot", "opencode", "gemini"])
def test_every_time_is_aware_utc(agent: str, every_session: dict[str, list[Session]]) -> None:
    times = []
    for s in every_session[agent]:
        times += [s.started, s.ended]
        for turn in s.turns:
            times += [turn.time, *(c.time for c in turn.tool_calls)]
    stamped = [t for t in times if t is not None]
    assert len(stamped) > 10
    assert all(isinstance(t, datetime) and t.utcoffset() is not None
               and t.utcoffset().total_seconds() == 0 for t in stamped)  # type: ignore[union-attr]


def test_the_harvester_keeps_no_sub_agent_as_a_session(tmp_path: Path, copilot_home: Path,
                                                        opencode_store: Path,
                                                        gemini_store: Path) -> None:
    from skillgrad.sleep.harvest.harvester import SUB_AGENT, Harvester

    environ = {"COPILOT_HOME": str(copilot_home), "XDG_DATA_HOME": str(opencode_store.parent),
               "GEMINI_CLI_HOME": str(gemini_store.parent)}
    result = Harvester(SHOP, [CopilotAdapter(), OpenCodeAdapter(), GeminiAdapter()],
                       state_dir=tmp_path / "state", scrubber=Scrubber(), environ=environ,
                       home=tmp_path / "home", settle_seconds=0).harvest()
    kept = {s.id for s in result.sessions}
    assert {COPILOT_MAIN, OC_MAIN, GEM_MAIN} <= kept
    left = {s.session_id for s in result.skipped if s.reason == SUB_AGENT}
    assert {COPILOT_SUB, OC_SUB, GEM_SUB} <= left and not left & kept
