"""Sub-agents' conversations are part of the session that started them: never sessions of
their own, and what the parent agent asked them is never mined as the user's request.

The stores are copies of the fixtures (tests/fixtures/sleep/): Claude Code's sub-agents in both
layouts (``<session>/subagents/agent-<id>.jsonl`` and the older ``agent-<id>.jsonl`` beside the
sessions, every record ``isSidechain: true``) and a Codex rollout whose ``session_meta.source``
is ``{"subagent": {"thread_spawn": {"parent_thread_id": ...}}}``. Each sub-agent is copied once
more (another id; the Codex copy with the ``{"subagent": "review"}`` source of a review
sub-agent), so that what it was asked recurs, as it does when a parent starts the same kind of
sub-agent twice: recurring, it would be a task if it were taken for the user's words."""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

from skillgrad.sleep.harvest.harvester import Harvester
from skillgrad.sleep.mine import mine
from skillgrad.sleep.scrub import Scrubber
from skillgrad.traces.claude_code import ClaudeCodeAdapter
from skillgrad.traces.registry import adapters

FIXTURES = Path(__file__).parent / "fixtures" / "sleep"
PROJECT = Path("/home/dev/shop")
NOW = datetime(2026, 3, 6, tzinfo=timezone.utc)
WRITTEN = datetime(2026, 3, 5, tzinfo=timezone.utc)
S1 = "5d2e1c8a-0b7f-4e2a-9c31-7f0d2a4b6e91"  # Claude Code: the parent of agent-a96cf8a5
C1 = "0195f3a2-1b2c-7d4e-9f00-5a6b7c8d9e0f"  # Codex: the parent of 0195f3a9-...
CODEX_SUB = "0195f3a9-0000-7000-8000-00000000a001"
CODEX_REVIEW = "0195f3a9-0000-7000-8000-00000000a002"
SUB_AGENTS = {"agent-a96cf8a5", "agent-a96cf8a6", "agent-3f1b2c4d", "agent-3f1b2c4e",
              CODEX_SUB, CODEX_REVIEW}
# What the parents asked their sub-agents (the first record of each sub-agent's file).
ASKED = ("Run the full test suite and report failures", "Find every caller of round_vat",
         "Review the VAT patch for regressions")


def _stores(tmp_path: Path) -> dict[str, str]:
    environ = {}
    for name, var in (("claude_code", "CLAUDE_CONFIG_DIR"), ("codex", "CODEX_HOME")):
        shutil.copytree(FIXTURES / name, tmp_path / name)
        environ[var] = str(tmp_path / name)
    shop = tmp_path / "claude_code" / "projects" / "-home-dev-shop"
    new = shop / S1 / "subagents" / "agent-a96cf8a5.jsonl"
    shutil.copy(new, new.with_name("agent-a96cf8a6.jsonl"))
    shutil.copy(shop / "agent-3f1b2c4d.jsonl", shop / "agent-3f1b2c4e.jsonl")
    day = tmp_path / "codex" / "sessions" / "2026" / "03" / "02"
    sub = next(day.glob(f"*{CODEX_SUB}.jsonl"))
    lines = sub.read_text().splitlines()
    meta = json.loads(lines[0])
    meta["payload"]["id"] = CODEX_REVIEW
    meta["payload"]["source"] = {"subagent": "review"}
    (day / sub.name.replace(CODEX_SUB, CODEX_REVIEW)).write_text(
        "\n".join([json.dumps(meta), *lines[1:]]) + "\n")
    for path in tmp_path.rglob("*.jsonl"):
        os.utime(path, (WRITTEN.timestamp(), WRITTEN.timestamp()))
    return environ


def _harvester(tmp_path: Path, environ: dict[str, str]) -> Harvester:
    return Harvester(PROJECT, adapters(["claude_code", "codex"]), state_dir=tmp_path / "state",
                     scrubber=Scrubber(), environ=environ, home=tmp_path / "home", now=NOW)


def test_a_sub_agent_is_no_session_of_its_own(tmp_path: Path) -> None:
    result = _harvester(tmp_path, _stores(tmp_path)).harvest()
    kept = {s.id for s in result.sessions}
    assert {S1, C1} <= kept  # the parents are
    assert not kept & SUB_AGENTS
    reasons = {s.session_id: s.reason for s in result.skipped if s.session_id in SUB_AGENTS}
    assert set(reasons) == SUB_AGENTS
    assert all("sub-agent" in r for r in reasons.values()), reasons
    assert all(not s.sidechain for s in result.sessions)


def test_what_a_sub_agent_was_asked_is_never_mined_as_a_request(tmp_path: Path) -> None:
    sessions = _harvester(tmp_path, _stores(tmp_path)).harvest().sessions
    tasks = mine(sessions, str(PROJECT), min_occurrences=2)
    intents = [t.intent for t in tasks.tasks]
    assert not [i for i in intents if i.startswith(ASKED)], intents
    seen = {e.session for t in tasks.tasks for e in t.evidence}
    assert not seen & SUB_AGENTS


def test_sub_agents_an_earlier_harvest_archived_are_not_mined_either(tmp_path: Path) -> None:
    # Read straight from the adapter, as a harvest before this rule kept them.
    _stores(tmp_path)
    adapter = ClaudeCodeAdapter()
    shop = tmp_path / "claude_code" / "projects" / "-home-dev-shop"
    sessions = [s for path in sorted(shop.rglob("agent-*.jsonl")) for s in adapter.read(path)]
    assert len(sessions) == 4 and all(s.sidechain for s in sessions)
    assert mine(sessions, str(PROJECT), min_occurrences=2).tasks == []


def test_sidechain_records_inside_a_session_file_are_not_its_turns(tmp_path: Path) -> None:
    # A session file that also holds its sub-agent's records (isSidechain: true, a root of
    # their own): the session is the parent's conversation, without them.
    shop = FIXTURES / "claude_code" / "projects" / "-home-dev-shop"
    mixed = tmp_path / f"{S1}.jsonl"
    mixed.write_text((shop / f"{S1}.jsonl").read_text()
                     + (shop / S1 / "subagents" / "agent-a96cf8a5.jsonl").read_text())
    (session,) = ClaudeCodeAdapter().read(mixed)
    assert session.id == S1 and not session.sidechain
    assert not [t for t in session.prompts if t.text.startswith(ASKED)]
