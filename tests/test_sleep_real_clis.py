"""The harvest adapters on session logs written by the real agent CLIs (tests/fixtures/sleep/
real, recorded by tools/record_agent_sessions.py; its README says which versions and how),
and the night report's table on a request they recorded."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from skillgrad.sleep.cycle import report_markdown
from skillgrad.sleep.mine import heuristic_task, occurrences
from skillgrad.traces.claude_code import ClaudeCodeAdapter
from skillgrad.traces.codex import CodexAdapter
from skillgrad.traces.copilot import CopilotAdapter
from skillgrad.traces.gemini import GeminiAdapter
from skillgrad.traces.opencode import OpenCodeAdapter
from skillgrad.traces.sessions import Session

REAL = Path(__file__).parent / "fixtures" / "sleep" / "real"
QUESTION = "How many files are in this folder?"
TWO_LINES = "How many files are in this folder?\nList them | one per line."


def sessions(adapter: CodexAdapter | CopilotAdapter | GeminiAdapter | OpenCodeAdapter
             | ClaudeCodeAdapter, store: Path) -> list[Session]:
    found = [s for source in adapter.sources(store) for s in adapter.read(source)]
    assert found, f"no session under {store}"
    return found


def opencode_store(tmp_path: Path) -> Path:
    """OpenCode's database, built from the SQL text of the one the CLI wrote."""
    store = tmp_path / "opencode"
    store.mkdir()
    with sqlite3.connect(store / "opencode.db") as db:
        db.executescript((REAL / "opencode/.local/share/opencode/opencode.sql").read_text())
    return store


def test_a_codex_skill_named_as_dollar_name_is_credited_and_is_not_a_prompt() -> None:
    [session] = sessions(CodexAdapter(), REAL / "codex" / "codex")
    assert session.skills == ("count-files",)
    assert [t.text for t in session.prompts] == [f"$count-files {QUESTION}"]
    assert not any("<skill>" in t.text for t in session.turns)
    [occurrence] = occurrences(session)
    assert heuristic_task([occurrence], "work").skill == "count-files"


@pytest.mark.parametrize("agent", ["copilot", "gemini"])
def test_shell_exit_codes_are_read(agent: str) -> None:
    """Two commands in one turn: ``ls`` (exit 0), ``ls missing.txt`` (exit 2)."""
    adapter, store = ((CopilotAdapter(), REAL / "copilot" / ".copilot") if agent == "copilot"
                      else (GeminiAdapter(), REAL / "gemini" / ".gemini"))
    [session] = sessions(adapter, store)
    calls = session.tool_calls
    assert [(c.command, c.exit_code) for c in calls] == [("ls", 0), ("ls missing.txt", 2)]
    assert [o.outcome for o in occurrences(session)] == ["failed"]  # the last command's


def test_gemini_tool_output_is_read_without_its_untrusted_context_wrapper() -> None:
    [session] = sessions(GeminiAdapter(), REAL / "gemini" / ".gemini")
    outputs = [c.output or "" for c in session.tool_calls]
    assert outputs[0].startswith("Output: a.txt\nb.txt\n")
    assert not any("untrusted_context" in o for o in outputs)


def test_an_opencode_run_request_is_read_without_the_quotes_the_cli_stored(
        tmp_path: Path) -> None:
    with sqlite3.connect(":memory:") as db:
        db.executescript((REAL / "opencode/.local/share/opencode/opencode.sql").read_text())
        [raw] = [json.loads(r[0])["text"] for r in db.execute(
            "SELECT part.data FROM part JOIN message ON part.message_id = message.id "
            "WHERE json_extract(message.data, '$.role') = 'user'")]
    assert raw == f'"{TWO_LINES}"'  # what the CLI wrote
    [session] = sessions(OpenCodeAdapter(), opencode_store(tmp_path))
    assert [t.text for t in session.prompts] == [TWO_LINES]
    [occurrence] = occurrences(session)
    assert heuristic_task([occurrence], "work").intent == TWO_LINES


def test_a_request_of_several_lines_keeps_the_report_table_whole() -> None:
    [session] = sessions(ClaudeCodeAdapter(), REAL / "claude" / "claude" / "projects")
    [occurrence] = occurrences(session)
    task = heuristic_task([occurrence], "work")
    assert task.intent == TWO_LINES
    skill = {"skill": "files", "status": "trained", "reason": None, "selection_before": None,
             "selection_after": None, "changed": False, "accepted": [],
             "tasks": [{"id": task.id, "split": "train", "before": 0.5, "after": 1.0,
                        "intent": task.intent}]}
    text = report_markdown({"night": "n1", "harvested_sessions": 1, "skipped": {},
                            "miner": "heuristic", "notes": [], "tasks": 1, "test": "none",
                            "skills": [skill]})
    table = text[text.index("| task |"):].splitlines()
    assert len(table) == 3  # header, rule, one row
    cells = re.split(r"(?<!\\)\|", table[2])[1:-1]
    assert [c.strip() for c in cells] == [
        task.id, "train", "0.50", "1.00",
        r"How many files are in this folder? List them \| one per line."]


@pytest.mark.parametrize(("path", "pattern", "version"), [
    ("codex", r'"cli_version":"([^"]+)"', "0.169.1"),
    ("claude", r'"version":"([^"]+)"', "2.1.197"),
    ("copilot", r'"copilotVersion":"([^"]+)"', "1.0.102"),
    ("opencode", r"'(\d+\.\d+\.\d+)'", "1.18.33"),
])
def test_the_fixtures_were_written_by_the_versions_the_readme_names(
        path: str, pattern: str, version: str) -> None:
    texts = [p.read_text() for p in (REAL / path).rglob("*") if p.is_file()]
    assert {m for t in texts for m in re.findall(pattern, t)} == {version}
    assert f"{version}" in (REAL / "README.md").read_text()


@pytest.mark.parametrize(("stored", "read"), [
    (f'"{TWO_LINES}"', TWO_LINES),
    ('"fix the bug" now', "fix the bug now"),  # opencode run "fix the bug" now
    ('"say \\"hi there\\""', 'say "hi there"'),  # a quote inside is stored as \"
    ('fix "the bug"', 'fix "the bug"'),  # not the form run stores: typed as it is
    ('"one"', '"one"'),  # run quotes only an argument holding a space
    ('"open', '"open'),
])
def test_only_the_quoting_of_opencode_run_is_taken_off(stored: str, read: str) -> None:
    from skillgrad.traces.opencode import _run_prompt

    assert _run_prompt(stored) == read


def test_a_report_cell_keeps_a_backslash_before_a_pipe_from_escaping_it() -> None:
    from skillgrad.sleep.cycle import _cell

    assert _cell("a \\| b\n\tc", 70) == "a \\\\\\| b c"
