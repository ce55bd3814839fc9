"""Real agent CLIs against ``skillgrad serve``, offline: each CLI and the server run together in
a network namespace of their own (``unshare -rn``: loopback only, nothing leaves the machine),
with every update and telemetry switch off. The scripted model calls the agent's shell tool,
then answers once it sees the tool's output; the CLI must finish with that answer, its own
session log must hold the call, and the server's journal both calls under the rollout's tag.

Behind an explicit flag: ``SKILLGRAD_AGENT_CLIS`` lists folders (``:``-separated) holding the
``codex``, ``claude``, ``gemini``, ``opencode`` and ``copilot`` executables (``npm install --prefix DIR @openai/codex``
puts one in ``DIR/node_modules/.bin``). A CLI not found there is skipped.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import pytest

FOLDERS = os.environ.get("SKILLGRAD_AGENT_CLIS", "")
ANSWER = "The folder holds 2 files: a.txt and b.txt."
QUESTION = "How many files are in this folder?"


@dataclass(frozen=True)
class Agent:
    """How to run one CLI headless against a base URL, and where it logs its session."""

    binary: str
    tool: str  # its shell tool, and the arguments the scripted model calls it with
    arguments: dict[str, str]
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path under HOME -> text; {url} set
    session_glob: str = ""  # under HOME


AGENTS = {
    "codex": Agent(
        "codex", "exec_command", {"cmd": "ls"},
        ("exec", "--skip-git-repo-check", "--json", QUESTION),
        env={"CODEX_HOME": "{home}/codex", "SKILLGRAD_KEY": "dummy"},
        files={"codex/config.toml": (
            'model = "skillgrad"\nmodel_provider = "skillgrad"\n'
            "check_for_update_on_startup = false\n[model_providers.skillgrad]\n"
            'name = "skillgrad"\nbase_url = "{url}/v1"\nenv_key = "SKILLGRAD_KEY"\n'
            'wire_api = "responses"\n[analytics]\nenabled = false\n'
            "[feedback]\nenabled = false\n")},
        session_glob="codex/sessions/*/*/*/rollout-*.jsonl"),
    "claude": Agent(
        "claude", "Bash", {"command": "ls", "description": "List files"},
        ("-p", QUESTION, "--output-format", "json", "--allowedTools", "Bash"),
        env={"ANTHROPIC_BASE_URL": "{url}", "ANTHROPIC_API_KEY": "dummy",
             "CLAUDE_CONFIG_DIR": "{home}/claude", "DISABLE_AUTOUPDATER": "1",
             "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
             "DISABLE_ERROR_REPORTING": "1"},
        session_glob="claude/projects/*/*.jsonl"),
    "gemini": Agent(
        "gemini", "run_shell_command", {"command": "ls"},
        ("-p", QUESTION, "-m", "skillgrad", "--approval-mode", "yolo",
         "--output-format", "json"),
        env={"GOOGLE_GEMINI_BASE_URL": "{url}", "GEMINI_API_KEY": "dummy",
             "GEMINI_CLI_TRUST_WORKSPACE": "true"},
        files={".gemini/settings.json": json.dumps({
            "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "security": {"auth": {"selectedType": "gemini-api-key"}}})},
        session_glob=".gemini/tmp/*/chats/session-*.jsonl"),
    "opencode": Agent(
        "opencode", "bash", {"command": "ls", "description": "List files"},
        ("run", QUESTION, "-m", "skillgrad/skillgrad"),
        env={"XDG_CONFIG_HOME": "{home}/.config", "XDG_DATA_HOME": "{home}/.local/share",
             "XDG_CACHE_HOME": "{home}/.cache", "XDG_STATE_HOME": "{home}/.local/state",
             "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"},
        files={".config/opencode/opencode.json": json.dumps({
            "provider": {"skillgrad": {
                "npm": "@ai-sdk/openai-compatible", "name": "skillgrad",
                "options": {"baseURL": "{url}/v1", "apiKey": "dummy"},
                "models": {"skillgrad": {"name": "skillgrad"}}}},
            "model": "skillgrad/skillgrad", "autoupdate": False, "share": "disabled"})},
        session_glob=".local/share/opencode/opencode.db"),
    "copilot": Agent(
        "copilot", "bash", {"command": "ls", "description": "List files"},
        ("-p", QUESTION, "--allow-all-tools"),
        env={"COPILOT_HOME": "{home}/.copilot", "COPILOT_OFFLINE": "true",
             "COPILOT_PROVIDER_BASE_URL": "{url}/v1", "COPILOT_PROVIDER_API_KEY": "dummy",
             "COPILOT_MODEL": "skillgrad"},
        session_glob=".copilot/session-state/*/events.jsonl"),
}


def _binary(name: str) -> str:
    """The CLI's executable; a skip when it is not there, a failure instead where
    ``SKILLGRAD_REQUIRE_AGENT_CLIS=1`` (.ci/run) says the CLIs must run."""
    required = os.environ.get("SKILLGRAD_REQUIRE_AGENT_CLIS") == "1"
    missing = pytest.fail if required else pytest.skip
    if not FOLDERS:
        missing("SKILLGRAD_AGENT_CLIS is not set (real agent CLIs run only when asked)")
    found = shutil.which(name, path=FOLDERS)
    if found is None:
        missing(f"{name} is not in SKILLGRAD_AGENT_CLIS")
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0:
        missing("unshare -rn is not allowed here")
    assert found is not None
    return found


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_a_real_agent_cli_runs_a_tool_through_skillgrad_serve(name: str, tmp_path: Path) -> None:
    agent, binary = AGENTS[name], _binary(name)
    home, work, record = tmp_path / "home", tmp_path / "work", tmp_path / "calls"
    work.mkdir()
    for file in ("a.txt", "b.txt"):
        (work / file).write_text("x")
    config = tmp_path / "serve.yaml"
    config.write_text(json.dumps({"model": {"target": {
        "backend": "scripted", "rules": [{"when": "[tool]", "reply": ANSWER},
                                         {"when": "title generator", "reply": "Files"}],
        "default": {"tool_calls": [{"name": agent.tool, "arguments": agent.arguments}]}}}}))
    url = f"http://127.0.0.1:8400/r/{name}-1"
    for path, text in agent.files.items():
        (home / path).parent.mkdir(parents=True, exist_ok=True)
        (home / path).write_text(text.replace("{url}", url))
    env = {k: v.replace("{url}", url).replace("{home}", str(home)) for k, v in agent.env.items()}
    serve = shlex.join([sys.executable, "-m", "skillgrad.cli", "serve", str(config),
                        "--port", "8400", "--record", str(record)])
    script = f"""
        ip link set lo up
        {serve} > {tmp_path}/serve.out 2> {tmp_path}/serve.err & server=$!
        for i in $(seq 100); do grep -q serving {tmp_path}/serve.out && break; sleep 0.2; done
        cd {shlex.quote(str(work))} && git init -q
        timeout 170 {shlex.join([binary, *agent.argv])} < /dev/null; status=$?
        kill -INT $server; wait $server
        exit $status
    """
    proc = subprocess.run(["unshare", "-rn", "bash", "-c", script], capture_output=True,
                          text=True, timeout=240, env={**os.environ, "HOME": str(home), **env})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ANSWER in proc.stdout
    logs = list(home.glob(agent.session_glob))
    assert logs, f"no session log under {home}"
    session = "\n".join(_session_text(log) for log in logs)
    assert agent.tool in session and "a.txt" in session  # the call and its output
    calls = [json.loads(line) for line in
             (record / f"{name}-1" / "calls.jsonl").read_text().splitlines()]
    turns = [c for c in calls if c["request"]["tools"]]  # (OpenCode also asks for a title)
    assert [bool(c["completion"]["tool_calls"]) for c in turns] == [True, False]
    assert turns[1]["request"]["messages"][-1]["role"] == "tool"


def _session_text(log: Path) -> str:
    """A session log as text: JSON lines, or an SQLite store's dump (OpenCode's)."""
    if log.suffix != ".db":
        return log.read_text()
    with closing(sqlite3.connect(log)) as db:
        return "\n".join(db.iterdump())
