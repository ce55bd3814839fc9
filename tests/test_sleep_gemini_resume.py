"""Gemini CLI's resume stub: ``gemini --resume`` leaves a file in which nothing was said (the
resumed session's header and injected context, recorded by the real CLI in tests/fixtures/
sleep/real/gemini-resume); it is read as no session, never a skip that recurs every night."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from skillgrad.sleep.harvest.harvester import Harvester
from skillgrad.sleep.scrub import Scrubber
from skillgrad.traces.base import SessionFormatError
from skillgrad.traces.gemini import GeminiAdapter

FIXTURE = Path(__file__).parent / "fixtures" / "sleep" / "real" / "gemini-resume"
PROJECT = Path("/tmp/sgrec/gemini-resume/work")  # as the CLI wrote it
CHATS = Path(".gemini/tmp/work/chats")
RESUMED = "session-2026-12-02T11-19-298bbaac.jsonl"
STUB = "session-2026-12-02T11-20-298bbaac.jsonl"


def harvester(home: Path, now: datetime) -> Harvester:
    return Harvester(PROJECT, [GeminiAdapter()], state_dir=home / "state", scrubber=Scrubber(),
                     environ={"GEMINI_CLI_HOME": str(home)}, home=home, now=now)


def test_the_resume_stub_is_no_session_and_no_skip_on_any_night(tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(FIXTURE, home)
    now = datetime.now(timezone.utc) + timedelta(hours=1)
    first = harvester(home, now).harvest()
    [session] = first.sessions
    assert session.id == "298bbaac-4ba4-40b7-a2b4-7a3392c1946e"
    assert [t.text for t in session.prompts] == ["How many files are in this folder?",
                                                 "And how many are text files?"]
    assert first.skipped == ()
    assert list(GeminiAdapter().read(home / CHATS / STUB)) == []
    second = harvester(home, now + timedelta(days=1)).harvest()
    assert second.sessions == ()
    assert {s.reason for s in second.skipped} <= {"unchanged since the last harvest"}


HEADER = {"sessionId": "11111111-2222-3333-4444-555555555555", "projectHash": "ab" * 32,
          "startTime": "2026-12-02T11:20:27.324Z", "lastUpdated": "2026-12-02T11:20:27.324Z",
          "kind": "main"}


@pytest.mark.parametrize("text", [
    json.dumps(HEADER) + "\n",  # a header alone
    json.dumps({"$set": {"lastUpdated": "2026-12-02T11:20:27.324Z"}}) + "\n",  # metadata alone
    json.dumps(HEADER)[:70],  # a header cut off mid-line
], ids=["header", "metadata", "unfinished-header"])
def test_hand_made_stubs_are_no_session(tmp_path: Path, text: str) -> None:
    chats = tmp_path / CHATS
    chats.mkdir(parents=True)
    stub = chats / STUB
    stub.write_text(text)
    assert list(GeminiAdapter().read(stub)) == []


def test_a_cut_off_line_after_messages_is_still_unreadable(tmp_path: Path) -> None:
    chats = tmp_path / CHATS
    chats.mkdir(parents=True)
    broken = chats / RESUMED
    broken.write_text(json.dumps(HEADER) + "\n" + '{"id": "m1", "type": "user", "cont')
    with pytest.raises(SessionFormatError, match="truncated"):
        list(GeminiAdapter().read(broken))


def test_a_resumed_session_keeps_each_call_s_own_result_and_exit_code() -> None:
    """On resume Gemini CLI rewrites the history: each call's result holds every sibling's
    response, and (in a longer history) the calls stand only as ``functionCall`` parts. Each
    call reads its own output and exit code (ls: 0, ls missing.txt: 2)."""
    [session] = GeminiAdapter().read(FIXTURE / CHATS / RESUMED)
    calls = [(c.command, c.exit_code) for c in session.tool_calls]
    assert calls[:2] == [("ls", 0), ("ls missing.txt", 2)]
    assert "a.txt" in (session.tool_calls[0].output or "")
    assert "missing.txt" not in (session.tool_calls[0].output or "")


def test_calls_written_only_as_function_call_parts_are_read(tmp_path: Path) -> None:
    """The rewritten history of a longer resumed session (Gemini CLI 0.61): assistant messages
    carry their calls as ``functionCall`` parts only, the responses as user messages."""
    header = {"sessionId": "s1", "projectHash": "p", "startTime": "2026-12-02T13:16:36Z",
              "kind": "main"}
    call = {"id": "c1", "name": "run_shell_command", "args": {"command": "python3 -m unittest"}}
    history = [
        {"id": "u1", "timestamp": "2026-12-02T13:16:45Z", "type": "user",
         "content": [{"text": "run the tests"}]},
        {"id": "g1", "timestamp": "2026-12-02T13:16:46Z", "type": "gemini",
         "content": [{"functionCall": call}]},
        {"id": "g1_response", "timestamp": "2026-12-02T13:16:47Z", "type": "user",
         "content": [{"functionResponse": {"id": "c1", "name": "run_shell_command", "response": {
             "output": "<untrusted_context>\nOutput: OK\nProcess Group PGID: 1\n"
                       "</untrusted_context>"}}}]},
        {"id": "g2", "timestamp": "2026-12-02T13:16:48Z", "type": "gemini",
         "content": [{"text": "The tests pass."}]}]
    path = tmp_path / ".gemini" / "tmp" / "work" / "chats" / "session-2026-12-02T13-16-s1.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(json.dumps(r) for r in (header, {"$set": {"messages": history}}))
                    + "\n")
    [session] = GeminiAdapter().read(path)
    [only] = session.tool_calls
    assert (only.command, only.exit_code, only.output) == ("python3 -m unittest", 0,
                                                            "Output: OK\nProcess Group PGID: 1")
