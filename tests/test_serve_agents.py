"""Real agent CLIs against ``skillgrad serve``, offline: each CLI and the server run together in
a network namespace of their own (``unshare -rn``: loopback only, nothing leaves the machine),
with every update and telemetry switch off. The scripted model calls the agent's shell tool,
then answers once it sees the tool's output; the CLI must finish with that answer, its own
session log must hold the call, and the server's journal both calls under the rollout's tag.

Behind an explicit flag: ``SKILLGRAD_AGENT_CLIS`` names where the CLIs are (tests/agentcli.py).
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import agentcli
import pytest

from skillgrad.models.agent_clis import AGENT_CLIS

ANSWER = "The folder holds 2 files: a.txt and b.txt."
QUESTION = "How many files are in this folder?"


@pytest.mark.parametrize("name", sorted(AGENT_CLIS))
def test_a_real_agent_cli_runs_a_tool_through_skillgrad_serve(name: str, tmp_path: Path) -> None:
    agent = AGENT_CLIS[name]
    binary = agentcli.binary(agent.binary)
    home, work, record = tmp_path / "home", tmp_path / "work", tmp_path / "calls"
    work.mkdir()
    for file in ("a.txt", "b.txt"):
        (work / file).write_text("x")
    config = tmp_path / "serve.yaml"
    config.write_text(json.dumps({"model": {"target": {
        "backend": "scripted", "rules": [{"when": "[tool]", "reply": ANSWER},
                                         {"when": "title generator", "reply": "Files"}],
        "default": {"tool_calls": [agent.shell_call("ls")]},
        "delay": 1.0}}}))  # over --keepalive: each answer comes after SSE comments
    env = agent.prepare(home, f"http://127.0.0.1:8400/r/{name}-1")
    serve = shlex.join([sys.executable, "-m", "skillgrad.cli", "serve", str(config),
                        "--port", "8400", "--record", str(record),
                        "--keepalive", "0.3"])
    script = f"""
        ip link set lo up
        {serve} > {tmp_path}/serve.out 2> {tmp_path}/serve.err & server=$!
        for i in $(seq 100); do grep -q serving {tmp_path}/serve.out && break; sleep 0.2; done
        cd {shlex.quote(str(work))} && git init -q
        timeout 170 {shlex.join(agent.command(binary, QUESTION))} < /dev/null; status=$?
        kill -INT $server; wait $server
        exit $status
    """
    proc = subprocess.run(["unshare", "-rn", "bash", "-c", script], capture_output=True,
                          text=True, timeout=240, env={**os.environ, **env})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert ANSWER in proc.stdout
    logs = agent.session_files(home)
    assert logs, f"no session log under {home}"
    session = "\n".join(_session_text(log) for log in logs)
    assert agent.shell_tool in session and "a.txt" in session  # the call and its output
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
