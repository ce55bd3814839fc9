"""Record real agent CLI session logs as harvest fixtures.

Each agent CLI runs headless against ``skillgrad serve`` (a scripted model: it calls the
agent's shell tool once, then answers when it sees the tool's output) inside ``unshare -rn``
(loopback only, nothing leaves the machine), in a scratch HOME and config folder with every
update and telemetry switch off. The session files the CLI wrote are then copied into
``tests/fixtures/sleep/real/<agent>/`` under the same relative path as under the scratch HOME,
so an adapter reads them as it reads a real store. Paths are kept as the CLI wrote them (the
adapters read the working directory from them).

    python tools/record_agent_sessions.py --clis /tmp/clis/codex/node_modules/.bin:... \
        [--only codex,gemini] [--out tests/fixtures/sleep/real]

Scenarios (one CLI run each):

* codex: a skill ``count-files`` installed in ``$CODEX_HOME/skills``, invoked as
  ``$count-files ...`` (Codex injects the skill's text as a user-role message);
* copilot, gemini: two shell commands in one turn, one that succeeds (``ls``) and one that
  fails (``ls missing.txt``), in a one-line request;
* opencode: ``opencode run "<request>"`` with a request of two lines;
* claude: a shell command that succeeds, in a request of two lines.
"""

from __future__ import annotations

import argparse
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

from skillgrad.models.agent_clis import AGENT_CLIS, AgentCLI

ANSWER = "The folder holds 2 files: a.txt and b.txt."
QUESTION = "How many files are in this folder?"
TWO_LINES = "How many files are in this folder?\nList them | one per line."
SKILL = "count-files"
SKILL_TEXT = (f"---\nname: {SKILL}\ndescription: Count the files in a folder.\n---\n\n"
              "Run `ls` and count the lines it prints.\n")
PORT = 8400


@dataclass(frozen=True)
class Scenario:
    """What one recording asks of a CLI: the request, the extra files under HOME (a skill),
    and whether the model also runs a command that fails."""

    prompt: str
    files: dict[str, str] = field(default_factory=dict)
    failing: bool = False

    def tool_calls(self, agent: AgentCLI) -> list[dict[str, object]]:
        calls = [agent.shell_call("ls")]
        if self.failing:
            calls.append(agent.shell_call("ls missing.txt"))
        return calls


SCENARIOS = {
    "codex": Scenario(f"${SKILL} {QUESTION}", files={f"codex/skills/{SKILL}/SKILL.md": SKILL_TEXT}),
    "claude": Scenario(TWO_LINES),
    "gemini": Scenario(QUESTION, failing=True),
    "opencode": Scenario(TWO_LINES),
    "copilot": Scenario(QUESTION, failing=True),
}


def record(name: str, binary: str, out: Path, scratch: Path) -> list[Path]:
    """Run one CLI against the scripted server; copy its session files into ``out/name``."""
    agent, scenario = AGENT_CLIS[name], SCENARIOS[name]
    # Short, fixed paths: they are what the CLI writes into its logs.
    home, work = scratch / "home", scratch / "work"
    work.mkdir(parents=True)
    for file in ("a.txt", "b.txt"):
        (work / file).write_text("x")
    config = scratch / "serve.yaml"
    config.write_text(json.dumps({"model": {"target": {
        "backend": "scripted", "rules": [{"when": "[tool]", "reply": ANSWER},
                                         {"when": "title generator", "reply": "Files"}],
        "default": {"tool_calls": scenario.tool_calls(agent)}}}}))
    env = agent.prepare(home, f"http://127.0.0.1:{PORT}/r/{name}-1")
    for relative, text in scenario.files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(text)
    serve = shlex.join([sys.executable, "-m", "skillgrad.cli", "serve", str(config),
                        "--port", str(PORT)])
    script = f"""
        ip link set lo up
        {serve} > {scratch}/serve.out 2> {scratch}/serve.err & server=$!
        for i in $(seq 100); do grep -q serving {scratch}/serve.out && break; sleep 0.2; done
        cd {shlex.quote(str(work))} && git init -q
        timeout 170 {shlex.join(agent.command(binary, scenario.prompt))} < /dev/null; status=$?
        kill -INT $server; wait $server
        exit $status
    """
    proc = subprocess.run(["unshare", "-rn", "bash", "-c", script], capture_output=True,
                          text=True, timeout=240, env={**os.environ, **env})
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                         f"{proc.stderr[-2000:]}")
    target = out / name
    if target.exists():
        shutil.rmtree(target)
    copied = []
    for path in agent.session_files(home):
        if path.name.endswith(("-wal", "-shm")):
            continue
        dest = target / path.relative_to(home)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".db":  # as SQL text (its write-ahead log included)
            dest = dest.with_suffix(".sql")
            with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
                dest.write_text("\n".join(db.iterdump()) + "\n", encoding="utf-8")
        else:
            shutil.copy2(path, dest)
        copied.append(dest)
    if not copied:
        raise SystemExit(f"{name}: no session files under {home}")
    return copied


def version(binary: str) -> str:
    proc = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    return (proc.stdout or proc.stderr).strip().splitlines()[0] if proc.returncode == 0 else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clis", required=True, help="folders holding the CLIs, ':'-separated")
    parser.add_argument("--only", default=",".join(SCENARIOS), help="agents, ','-separated")
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/sleep/real"))
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/sgrec"),
                        help="scratch folder (emptied first; its paths appear in the logs)")
    args = parser.parse_args()
    for name in args.only.split(","):
        binary = shutil.which(AGENT_CLIS[name].binary, path=args.clis)
        if binary is None:
            raise SystemExit(f"{name}: not found in {args.clis}")
        scratch = args.scratch / name
        if scratch.exists():
            shutil.rmtree(scratch)
        files = record(name, binary, args.out.resolve(), scratch)
        print(f"{name} {version(binary)}: " + ", ".join(str(f) for f in files))


if __name__ == "__main__":
    main()
