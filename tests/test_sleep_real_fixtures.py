"""The harvest adapters, and the agent backend's trace reader, on the ``<agent>-tools`` session
logs that the real agent CLIs wrote (tests/fixtures/sleep/real, recorded by
tools/record_agent_sessions.py; its README says which versions and how).

In each, the scripted model loaded the skill ``count-files`` placed in the CLI's user skill
folder through the CLI's own skill tool (Codex, which has none, read its SKILL.md with its
shell tool), wrote ``notes.txt`` with the CLI's own write tool (Codex: ``apply_patch`` through
its shell tool), ran ``cat notes.txt`` (exit 0) and ``ls missing.txt`` (exit 2), one tool turn
each, and answered. The request, the written text (so the ``cat`` output) and the answer hold
a fake key, the redaction canary. ``codex-read-only`` is the same run in Codex's default
read-only sandbox: the patch is rejected and nothing is written. ``<agent>-subagent``: the
model starts a sub-agent through the CLI's own tool, which runs ``ls``. ``<agent>-failed-edit``:
one edit the CLI's own edit tool refuses.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
from canary import CANARY, planted, strings

from skillgrad.models.agent_clis import AGENT_CLIS
from skillgrad.models.agent_trace import read_trace
from skillgrad.sleep.mine import occurrences
from skillgrad.sleep.scrub import Scrubber
from skillgrad.traces.base import Adapter
from skillgrad.traces.claude_code import ClaudeCodeAdapter
from skillgrad.traces.codex import CodexAdapter
from skillgrad.traces.copilot import CopilotAdapter
from skillgrad.traces.gemini import GeminiAdapter
from skillgrad.traces.opencode import OpenCodeAdapter
from skillgrad.traces.sessions import Session, ToolCall

REAL = Path(__file__).parent / "fixtures" / "sleep" / "real"
SKILL = "count-files"
SKILL_BODY = "Run `ls` and count the lines it prints."
NOTE = f"2 files; key {CANARY}"
REQUEST = f"How many files are in this folder? Note the count in notes.txt. My key is {CANARY}."
ANSWER = ("The folder holds 2 files: a.txt and b.txt. notes.txt holds the count and the key "
          f"{CANARY}.")
AGENTS = ["claude", "codex", "copilot", "gemini", "opencode"]
# The CLI's own tools the model called: the skill tool, the write tool.
TOOLS = {"claude": ("Skill", "Write"), "codex": ("exec_command", "exec_command"),
         "copilot": ("skill", "create"), "gemini": ("activate_skill", "write_file"),
         "opencode": ("skill", "write")}
SHELL = {name: AGENT_CLIS[name].shell_tool for name in AGENTS}
PATTERNS = {"codex": r'"cli_version":"([^"]+)"', "claude": r'"version":"([^"]+)"',
            "copilot": r'"copilotVersion":"([^"]+)"', "opencode": r"'(\d+\.\d+\.\d+)'"}
VERSIONS = {"claude": "2.1.197", "codex": "0.169.1", "copilot": "1.0.102",
            "gemini": "0.61.0", "opencode": "1.18.33"}


def home(scenario: str, tmp_path: Path) -> Path:
    """The scenario's scratch HOME as the CLI left it; OpenCode's database is built (in
    ``tmp_path``) from the SQL text it is stored as."""
    folder = REAL / scenario
    if not scenario.startswith("opencode"):
        return folder
    data = tmp_path / ".local" / "share" / "opencode"
    data.mkdir(parents=True)
    with sqlite3.connect(data / "opencode.db") as db:
        db.executescript((folder / ".local/share/opencode/opencode.sql").read_text())
    return tmp_path


def environ(agent: str, at: Path) -> dict[str, str]:
    """The CLI's own variables that name its store under the HOME ``at``, as the recorder set
    them (agent_clis.AGENT_CLIS)."""
    return {
        "codex": {"CODEX_HOME": str(at / "codex")},
        "claude": {"CLAUDE_CONFIG_DIR": str(at / "claude")},
        "copilot": {"COPILOT_HOME": str(at / ".copilot")},
        "gemini": {},
        "opencode": {"XDG_DATA_HOME": str(at / ".local" / "share")},
    }[agent]


ADAPTERS: dict[str, Adapter] = {
    "claude": ClaudeCodeAdapter(), "codex": CodexAdapter(), "copilot": CopilotAdapter(),
    "gemini": GeminiAdapter(), "opencode": OpenCodeAdapter()}


def read_all(agent: str, scenario: str, tmp_path: Path) -> list[Session]:
    """The sessions of a recording, read as harvest reads them: every store the adapter
    names for the CLI's variables, every source in it."""
    at = home(scenario, tmp_path)
    adapter = ADAPTERS[agent]
    return [s for store in adapter.stores(environ(agent, at), at)
            for source in adapter.sources(store) for s in adapter.read(source)]


def session(agent: str, tmp_path: Path, scenario: str = "") -> Session:
    """The one session of a recording (``<agent>-tools`` unless named)."""
    scenario = scenario or f"{agent}-tools"
    found = read_all(agent, scenario, tmp_path)
    assert len(found) == 1, f"{scenario}: {len(found)} sessions"
    return found[0]


def shell_calls(s: Session) -> list[ToolCall]:
    return [c for c in s.tool_calls if c.command in ("cat notes.txt", "ls missing.txt")]


@pytest.mark.parametrize("agent", AGENTS)
def test_the_request_and_the_answer_are_read_and_injected_skill_text_is_no_prompt(
        agent: str, tmp_path: Path) -> None:
    s = session(agent, tmp_path)
    assert [t.text for t in s.prompts] == [REQUEST]  # Claude and Copilot inject the skill's
    assert s.turns[-1].role == "assistant"  # text as a user-role message: not a prompt
    assert s.turns[-1].text == ANSWER
    assert s.cwd == Path(f"/tmp/sgrec/{agent}-tools/work")
    assert [c.name for c in s.tool_calls] == [*TOOLS[agent], SHELL[agent], SHELL[agent]]


@pytest.mark.parametrize("agent", ["claude", "copilot", "gemini", "opencode"])
def test_a_skill_loaded_through_the_clis_skill_tool_is_credited(agent: str,
                                                                 tmp_path: Path) -> None:
    s = session(agent, tmp_path)
    assert s.skills == (SKILL,)
    skill_call = s.tool_calls[0]
    assert skill_call.name == TOOLS[agent][0]
    assert skill_call.output  # what the CLI answered the call with
    if agent in ("gemini", "opencode"):  # these hand the skill's text back as the result
        assert SKILL_BODY in skill_call.output


def test_codex_reads_the_skill_by_shell_and_the_call_names_its_skill_md(
        tmp_path: Path) -> None:
    """Codex has no skill tool: nothing credits the skill in ``Session.skills`` (that is for
    ``$name``, the <skill> message), but the call that read SKILL.md names it, which is
    what the agent backend (agent_trace._opens) counts as a load."""
    s = session("codex", tmp_path)
    assert s.skills == ()
    first = s.tool_calls[0]
    assert first.command == f'cat "$CODEX_HOME/skills/{SKILL}/SKILL.md"'
    assert f"{SKILL}/SKILL.md" in (first.command or "")
    assert first.exit_code == 0 and SKILL_BODY in (first.output or "")


@pytest.mark.parametrize("agent", AGENTS)
def test_the_agent_backend_reads_the_skill_as_loaded_and_the_file_as_changed(
        agent: str, tmp_path: Path) -> None:
    at = home(f"{agent}-tools", tmp_path)
    trace = read_trace(AGENT_CLIS[agent], at, environ(agent, at), SKILL, loadable=True)
    assert trace.skill_loaded is True
    written = "notes.txt" if agent == "codex" else f"/tmp/sgrec/{agent}-tools/work/notes.txt"
    assert trace.files_changed == (written,)
    tool_results = [str(m.content) for m in trace.messages if m.role == "tool"]
    assert len(tool_results) == 4
    assert any(m.startswith("[exit code 2]\n") for m in tool_results)


@pytest.mark.parametrize("agent", AGENTS)
def test_the_file_the_clis_write_tool_wrote_is_in_files_changed(agent: str,
                                                                 tmp_path: Path) -> None:
    s = session(agent, tmp_path)
    write = s.tool_calls[1]
    assert write.name == TOOLS[agent][1] and not write.is_error
    # Codex names the file as its patch does, relative to the working directory.
    written = "notes.txt" if agent == "codex" else f"/tmp/sgrec/{agent}-tools/work/notes.txt"
    assert s.files_changed == (written,)
    assert write.output  # the write tool's own report


@pytest.mark.parametrize("agent", AGENTS)
def test_shell_exit_codes_and_outputs_are_read(agent: str, tmp_path: Path) -> None:
    s = session(agent, tmp_path)
    calls = shell_calls(s)
    assert [(c.command, c.exit_code) for c in calls] == [("cat notes.txt", 0),
                                                          ("ls missing.txt", 2)]
    assert NOTE in (calls[0].output or "")
    assert "missing.txt" in (calls[1].output or "")
    assert all(c.output is not None for c in s.tool_calls)
    [occurrence] = occurrences(s)
    assert occurrence.outcome == "failed"  # the last command's
    assert occurrence.commands[-2:] == [("cat notes.txt", 0), ("ls missing.txt", 2)]


@pytest.mark.parametrize("agent", AGENTS)
def test_scrubbing_leaves_the_canary_in_no_field(agent: str, tmp_path: Path) -> None:
    s = session(agent, tmp_path)
    assert planted(s) == {"user", "assistant", "arguments", "output"}
    clean = Scrubber().record(s)
    assert not [t for t in strings(clean) if CANARY in t]


@pytest.mark.parametrize("agent", AGENTS)
def test_the_fixtures_were_written_by_the_versions_the_readme_names(agent: str) -> None:
    version = VERSIONS[agent]
    readme = (REAL / "README.md").read_text().splitlines()
    scenarios = sorted(p.name for p in REAL.glob(f"{agent}-*") if p.name != "gemini-resume")
    assert {f"{agent}-tools", f"{agent}-subagent", f"{agent}-failed-edit"} <= set(scenarios)
    for scenario in scenarios:
        if agent in PATTERNS:  # a Gemini CLI chat file does not say which version wrote it
            texts = [p.read_text() for p in (REAL / scenario).rglob("*") if p.is_file()]
            assert {m for t in texts for m in re.findall(PATTERNS[agent], t)} == {version}
        row = [line for line in readme if f"`{scenario}/" in line]
        assert len(row) == 1 and version in row[0], scenario


def test_codex_a_patch_its_read_only_sandbox_rejected_changes_no_file(
        tmp_path: Path) -> None:
    s = session("codex", tmp_path, "codex-read-only")
    patch = s.tool_calls[1]
    assert (patch.output or "").startswith("patch rejected")
    assert [(c.command, c.exit_code) for c in shell_calls(s)] == [("cat notes.txt", 1),
                                                                  ("ls missing.txt", 2)]
    assert all(c.is_error for c in shell_calls(s))  # a command that exits non-zero failed
    assert s.files_changed == ()


def test_codex_an_apply_patch_through_the_shell_reads_exit_code_0(tmp_path: Path) -> None:
    s = session("codex", tmp_path)
    patch = s.tool_calls[1]
    assert "*** Add File: notes.txt" in (patch.command or "")
    assert "Success. Updated the following files" in (patch.output or "")
    assert patch.exit_code == 0


# -- sub-agents: the model starts one through the CLI's own tool (Claude Code's Agent, Gemini
# CLI's invoke_agent, OpenCode's and Copilot's task, Codex's spawn_agent then wait_agent); the
# sub-agent runs ``ls`` and answers (Gemini's by calling complete_task).
SUB_TASK = "[sub-agent] List the files in this folder."
SPAWN = {"claude": "Agent", "codex": "spawn_agent", "copilot": "task",
         "gemini": "invoke_agent", "opencode": "task"}


def sub_sessions(agent: str, tmp_path: Path) -> tuple[Session, Session]:
    """The main session and its sub-agent's, of a ``<agent>-subagent`` recording."""
    found = read_all(agent, f"{agent}-subagent", tmp_path)
    main = [s for s in found if not s.sidechain]
    sub = [s for s in found if s.sidechain]
    assert len(main) == 1 and len(sub) == 1, f"{agent}-subagent: {len(main)} + {len(sub)}"
    return main[0], sub[0]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_sub_agent_the_cli_started_is_a_sidechain_of_its_session(agent: str,
                                                                  tmp_path: Path) -> None:
    main, sub = sub_sessions(agent, tmp_path)
    assert main.parent_id is None and sub.parent_id == main.id
    assert main.cwd == sub.cwd == Path(f"/tmp/sgrec/{agent}-subagent/work")
    spawn = main.tool_calls[0]
    assert spawn.name == SPAWN[agent] and SUB_TASK in str(spawn.arguments)
    assert "a.txt and b.txt" in str([c.output for c in main.tool_calls])  # its answer came back
    assert main.turns[-1].text == ANSWER.split(" notes.txt")[0]
    [ls] = [c for c in sub.tool_calls if c.command == "ls"]
    assert ls.exit_code == 0 and "a.txt\nb.txt" in (ls.output or "")
    assert occurrences(sub) == []  # its task was written by the agent that started it
    # Copilot records the task as a user.message of source agent-<parent id>: another
    # agent's words, which its adapter leaves out of the prompts.
    assert [t.text for t in sub.prompts] == ([] if agent == "copilot" else [SUB_TASK])


@pytest.mark.parametrize("agent", [a for a in AGENTS if a != "codex"])
def test_the_main_session_of_a_sub_agent_run_has_one_prompt(agent: str,
                                                            tmp_path: Path) -> None:
    main, _ = sub_sessions(agent, tmp_path)
    assert [t.text for t in main.prompts] == ["How many files are in this folder?"]


def test_codex_a_sub_agents_notification_is_no_prompt(tmp_path: Path) -> None:
    main, _ = sub_sessions("codex", tmp_path)
    assert [t.text for t in main.prompts] == ["How many files are in this folder?"]


# -- an edit the CLI's own edit tool refused (``<agent>-failed-edit``): Claude Code's Edit of a
# file not read first, Gemini's replace and OpenCode's edit of a text a.txt does not hold,
# Copilot's create of a.txt, which exists; Codex's apply_patch of a file that is not there.
EDIT = {"claude": "Edit", "codex": "exec_command", "copilot": "create", "gemini": "replace",
        "opencode": "edit"}
REFUSED = {"claude": "File has not been read yet", "codex": "apply_patch verification failed",
           "copilot": "Path already exists", "gemini": "Could not find an exact match",
           "opencode": "Could not find oldString"}


@pytest.mark.parametrize("agent", [a for a in AGENTS if a != "codex"])
def test_an_edit_the_cli_refused_is_an_error_and_changes_no_file(agent: str,
                                                                 tmp_path: Path) -> None:
    s = session(agent, tmp_path, f"{agent}-failed-edit")
    [call] = s.tool_calls
    assert call.name == EDIT[agent] and REFUSED[agent] in (call.output or "")
    assert call.is_error
    assert s.files_changed == ()


def test_codex_a_patch_that_failed_to_apply_is_an_error_and_changes_no_file(
        tmp_path: Path) -> None:
    s = session("codex", tmp_path, "codex-failed-edit")
    [call] = s.tool_calls
    assert REFUSED["codex"] in (call.output or "")
    assert s.files_changed == ()
    assert call.is_error
