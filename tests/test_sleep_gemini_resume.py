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
