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

ANSWER = "The folder holds 2 files: a.txt and b.txt."
QUESTION = "How many files are in this folder?"
TWO_LINES = "How many files are in this folder?\nList them | one per line."
SKILL = "count-files"
SKILL_TEXT = (f"---\nname: {SKILL}\ndescription: Count the files in a folder.\n---\n\n"
              "Run `ls` and count the lines it prints.\n")
PORT = 8400


@dataclass(frozen=True)
class Agent:
    binary: str
    tool: str
    arguments: dict[str, str]
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # path under HOME -> text; {url} set
    keep: tuple[str, ...] = ()  # globs under HOME: the session files to copy
    failing: bool = False  # the model also runs a command that fails (ls of a missing file)

    def tool_calls(self) -> list[dict[str, object]]:
        calls: list[dict[str, object]] = [{"name": self.tool, "arguments": self.arguments}]
        if self.failing:
            key = "cmd" if "cmd" in self.arguments else "command"
            calls.append({"name": self.tool,
                          "arguments": {**self.arguments, key: "ls missing.txt"}})
        return calls


AGENTS = {
    "codex": Agent(
        "codex", "exec_command", {"cmd": "ls"},
        ("exec", "--skip-git-repo-check", "--json", f"${SKILL} {QUESTION}"),
        env={"CODEX_HOME": "{home}/codex", "SKILLGRAD_KEY": "dummy"},
        files={"codex/config.toml": (
            'model = "skillgrad"\nmodel_provider = "skillgrad"\n'
            "check_for_update_on_startup = false\n[model_providers.skillgrad]\n"
            'name = "skillgrad"\nbase_url = "{url}/v1"\nenv_key = "SKILLGRAD_KEY"\n'
            'wire_api = "responses"\n[analytics]\nenabled = false\n'
            "[feedback]\nenabled = false\n"),
            f"codex/skills/{SKILL}/SKILL.md": SKILL_TEXT},
        keep=("codex/sessions/*/*/*/rollout-*.jsonl",)),
    "claude": Agent(
        "claude", "Bash", {"command": "ls", "description": "List files"},
        ("-p", TWO_LINES, "--output-format", "json", "--allowedTools", "Bash"),
        env={"ANTHROPIC_BASE_URL": "{url}", "ANTHROPIC_API_KEY": "dummy",
             "CLAUDE_CONFIG_DIR": "{home}/claude", "DISABLE_AUTOUPDATER": "1",
             "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
             "DISABLE_ERROR_REPORTING": "1"},
        keep=("claude/projects/*/*.jsonl",)),
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
        keep=(".gemini/tmp/*/chats/session-*.jsonl", ".gemini/tmp/*/.project_root",
              ".gemini/projects.json"), failing=True),
    "opencode": Agent(
        "opencode", "bash", {"command": "ls", "description": "List files"},
        ("run", TWO_LINES, "-m", "skillgrad/skillgrad"),
        env={"XDG_CONFIG_HOME": "{home}/.config", "XDG_DATA_HOME": "{home}/.local/share",
             "XDG_CACHE_HOME": "{home}/.cache", "XDG_STATE_HOME": "{home}/.local/state",
             "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"},
        files={".config/opencode/opencode.json": json.dumps({
            "provider": {"skillgrad": {
                "npm": "@ai-sdk/openai-compatible", "name": "skillgrad",
                "options": {"baseURL": "{url}/v1", "apiKey": "dummy"},
                "models": {"skillgrad": {"name": "skillgrad"}}}},
            "model": "skillgrad/skillgrad", "autoupdate": False, "share": "disabled"})},
        keep=(".local/share/opencode/opencode.db", ".local/share/opencode/storage/**/*")),
    "copilot": Agent(
        "copilot", "bash", {"command": "ls", "description": "List files"},
        ("-p", QUESTION, "--allow-all-tools"),
        env={"COPILOT_HOME": "{home}/.copilot", "COPILOT_OFFLINE": "true",
             "COPILOT_PROVIDER_BASE_URL": "{url}/v1", "COPILOT_PROVIDER_API_KEY": "dummy",
             "COPILOT_MODEL": "skillgrad"},
        keep=(".copilot/session-state/*/events.jsonl",), failing=True),
}


def record(name: str, binary: str, out: Path, scratch: Path) -> list[Path]:
    """Run one CLI against the scripted server; copy its session files into ``out/name``."""
    agent = AGENTS[name]
    # Short, fixed paths: they are what the CLI writes into its logs.
    home, work = scratch / "home", scratch / "work"
    work.mkdir(parents=True)
    for file in ("a.txt", "b.txt"):
        (work / file).write_text("x")
    config = scratch / "serve.yaml"
    config.write_text(json.dumps({"model": {"target": {
        "backend": "scripted", "rules": [{"when": "[tool]", "reply": ANSWER},
                                         {"when": "title generator", "reply": "Files"}],
        "default": {"tool_calls": agent.tool_calls()}}}}))
    url = f"http://127.0.0.1:{PORT}/r/{name}-1"
    for relative, text in agent.files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(text.replace("{url}", url))
    env = {k: v.replace("{url}", url).replace("{home}", str(home)) for k, v in agent.env.items()}
    serve = shlex.join([sys.executable, "-m", "skillgrad.cli", "serve", str(config),
                        "--port", str(PORT)])
    script = f"""
        ip link set lo up
        {serve} > {scratch}/serve.out 2> {scratch}/serve.err & server=$!
        for i in $(seq 100); do grep -q serving {scratch}/serve.out && break; sleep 0.2; done
        cd {shlex.quote(str(work))} && git init -q
        timeout 170 {shlex.join([binary, *agent.argv])} < /dev/null; status=$?
        kill -INT $server; wait $server
        exit $status
    """
    proc = subprocess.run(["unshare", "-rn", "bash", "-c", script], capture_output=True,
                          text=True, timeout=240, env={**os.environ, "HOME": str(home), **env})
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n"
                         f"{proc.stderr[-2000:]}")
    target = out / name
    if target.exists():
        shutil.rmtree(target)
    copied = []
    for pattern in agent.keep:
        for path in sorted(home.glob(pattern)):
            if not path.is_file() or path.name.endswith(("-wal", "-shm")):
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
    parser.add_argument("--only", default=",".join(AGENTS), help="agents, ','-separated")
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/sleep/real"))
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/sgrec"),
                        help="scratch folder (emptied first; its paths appear in the logs)")
    args = parser.parse_args()
    for name in args.only.split(","):
        binary = shutil.which(AGENTS[name].binary, path=args.clis)
        if binary is None:
            raise SystemExit(f"{name}: not found in {args.clis}")
        scratch = args.scratch / name
        if scratch.exists():
            shutil.rmtree(scratch)
        files = record(name, binary, args.out.resolve(), scratch)
        print(f"{name} {version(binary)}: " + ", ".join(str(f) for f in files))


if __name__ == "__main__":
    main()
