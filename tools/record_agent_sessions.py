"""Record real agent CLI session logs as harvest fixtures.

Each agent CLI runs headless against ``skillgrad serve`` (a scripted model: it calls the
agent's shell tool once, then answers when it sees the tool's output) inside ``unshare -rn``
(loopback only, nothing leaves the machine), in a scratch HOME and config folder with every
update and telemetry switch off. The session files the CLI wrote are then copied into
``tests/fixtures/sleep/real/<scenario>/`` under the same relative path as under the scratch HOME,
so an adapter reads them as it reads a real store. Paths are kept as the CLI wrote them (the
adapters read the working directory from them).

    python tools/record_agent_sessions.py --clis /tmp/clis/codex/node_modules/.bin:... \
        [--only codex,gemini-tools] [--out tests/fixtures/sleep/real]

Scenarios (one CLI run each):

* codex: a skill ``count-files`` installed in ``$CODEX_HOME/skills``, invoked as
  ``$count-files ...`` (Codex injects the skill's text as a user-role message);
* copilot, gemini: two shell commands in one turn, one that succeeds (``ls``) and one that
  fails (``ls missing.txt``), in a one-line request;
* opencode: ``opencode run "<request>"`` with a request of two lines;
* claude: a shell command that succeeds, in a request of two lines;
* <agent>-tools (each of the five): the model works in steps, one tool turn each: it loads a
  skill ``count-files`` (placed in the CLI's user skill folder) through the CLI's own skill
  tool (Codex, which has none, reads its ``SKILL.md`` with its shell tool), writes
  ``notes.txt`` with the CLI's own write tool (Codex: an ``apply_patch`` run through its shell
  tool), runs ``cat notes.txt`` (exit 0) and then ``ls missing.txt`` (exit 2), and answers.
  The request, the written text and so the ``cat`` output, and the answer hold a redaction
  canary (a fake key). ``codex-tools`` runs with ``--sandbox workspace-write``;
  ``codex-read-only`` is the same in codex exec's default read-only sandbox (the patch is
  rejected);
* <agent>-failed-edit (each of the five): one edit the CLI's own edit tool refuses (Codex: an
  ``apply_patch`` updating a file that is not there; Claude Code ``Edit``, Gemini
  ``replace``, OpenCode ``edit``: a text a.txt does not hold; Copilot ``create`` of a.txt,
  which exists), then an answer;
* <agent>-subagent (each of the five): the model starts a sub-agent through the CLI's own tool
  (Agent, invoke_agent, task, spawn_agent then wait_agent); the sub-agent runs ``ls`` and
  answers (Gemini's by calling complete_task), then the model answers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
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
CANARY = "sk-ant-canary-0123456789abcdef"  # a fake key, as tests/test_sleep_adapters.py plants
NOTE = f"2 files; key {CANARY}\n"  # what the -tools scenarios write into notes.txt
SUB_MARKER = "[sub-agent]"  # the -subagent scenarios' task for the sub-agent starts with it
SUB_TASK = f"{SUB_MARKER} List the files in this folder."
SUB_ANSWER = "a.txt and b.txt"


@dataclass(frozen=True)
class Scenario:
    """What one recording asks of a CLI: the request, the extra files under HOME (a skill),
    and whether the model also runs a command that fails. ``steps``, when given, replaces the
    one tool turn: the model makes each step's calls in turn, one turn per step (``{work}`` in
    an argument is the working directory), then answers ``answer``. ``agent``: the CLI, when
    the scenario's name is not the agent's; ``args``: added after the preset's arguments."""

    prompt: str
    files: dict[str, str] = field(default_factory=dict)
    failing: bool = False
    agent: str = ""
    args: tuple[str, ...] = ()
    steps: tuple[tuple[dict[str, object], ...], ...] = ()
    answer: str = ANSWER
    sub_steps: tuple[tuple[dict[str, object], ...], ...] | None = None  # a sub-agent's
    sessions: tuple[str, ...] = ()  # globs under HOME of session files beyond the preset's

    def tool_calls(self, agent: AgentCLI) -> list[dict[str, object]]:
        calls = [agent.shell_call("ls")]
        if self.failing:
            calls.append(agent.shell_call("ls missing.txt"))
        return calls


_CODEX_CALLS = (
    AGENT_CLIS["codex"].shell_call(f'cat "$CODEX_HOME/skills/{SKILL}/SKILL.md"'),
    AGENT_CLIS["codex"].shell_call(
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: notes.txt\n"
        + "".join(f"+{line}\n" for line in NOTE.splitlines()) + "*** End Patch\nEOF\n"))


def _tools(agent: str, skill_call: dict[str, object], write_call: dict[str, object],
           files: dict[str, str] | None = None, args: tuple[str, ...] = ()) -> Scenario:
    """The ``<agent>-tools`` scenario: load the skill, write notes.txt, ``cat`` it, fail."""
    cli = AGENT_CLIS[agent]
    return Scenario(
        f"{QUESTION} Note the count in notes.txt. My key is {CANARY}.", agent=agent, args=args,
        files={f"{cli.skills}/{SKILL}/SKILL.md": SKILL_TEXT, **(files or {})},
        steps=((skill_call,), (write_call,), (cli.shell_call("cat notes.txt"),),
               (cli.shell_call("ls missing.txt"),)),
        answer=f"{ANSWER} notes.txt holds the count and the key {CANARY}.")


# Where a sub-agent's session lies when it is a file of its own the preset's globs miss.
SUB_SESSIONS = {"claude": ("claude/projects/*/*/subagents/agent-*",),
                "gemini": (".gemini/tmp/*/chats/*/*.jsonl",)}


def _subagent(agent: str, *calls: dict[str, object],
              finish: dict[str, object] | None = None) -> Scenario:
    """The ``<agent>-subagent`` scenario: start a sub-agent (each of ``calls`` a step), which
    runs ``ls`` and answers (with the ``finish`` call, where the sub-agent must end so); then
    answer."""
    return Scenario(QUESTION, agent=agent, steps=tuple((c,) for c in calls),
                    sub_steps=((AGENT_CLIS[agent].shell_call("ls"),),
                               *([(finish,)] if finish else [])),
                    sessions=SUB_SESSIONS.get(agent, ()))


def _failed_edit(agent: str, call: dict[str, object], files: dict[str, str] | None = None,
                 args: tuple[str, ...] = ()) -> Scenario:
    """The ``<agent>-failed-edit`` scenario: one edit the CLI's edit tool refuses (a file or
    a text that is not there, a file that is), then an answer."""
    return Scenario("Replace missing with y in a.txt.", agent=agent, files=files or {},
                    args=args, steps=((call,),), answer="The edit failed: nothing changed.")


SCENARIOS = {
    "codex": Scenario(f"${SKILL} {QUESTION}", files={f"codex/skills/{SKILL}/SKILL.md": SKILL_TEXT}),
    "claude": Scenario(TWO_LINES),
    "gemini": Scenario(QUESTION, failing=True),
    "opencode": Scenario(TWO_LINES),
    "copilot": Scenario(QUESTION, failing=True),
    # Codex has no skill tool and, for a model it has no metadata for, no apply_patch tool:
    # it reads SKILL.md with its shell tool, and writes with apply_patch run through it;
    # codex exec's sandbox is read-only unless told otherwise (codex-read-only: as it is).
    "codex-tools": _tools("codex", *_CODEX_CALLS, args=("--sandbox", "workspace-write")),
    "codex-read-only": _tools("codex", *_CODEX_CALLS),
    "claude-tools": _tools(
        "claude", {"name": "Skill", "arguments": {"skill": SKILL}},
        {"name": "Write", "arguments": {"file_path": "{work}/notes.txt", "content": NOTE}},
        # claude -p asks before a write; the preset allows Bash only
        files={"claude/settings.json": json.dumps({"permissions": {"allow": ["Write"]}})}),
    "gemini-tools": _tools(
        "gemini", {"name": "activate_skill", "arguments": {"name": SKILL}},
        {"name": "write_file", "arguments": {"file_path": "{work}/notes.txt", "content": NOTE}}),
    "opencode-tools": _tools(
        "opencode", {"name": "skill", "arguments": {"name": SKILL}},
        {"name": "write", "arguments": {"filePath": "{work}/notes.txt", "content": NOTE}}),
    "copilot-tools": _tools(
        "copilot", {"name": "skill", "arguments": {"skill": SKILL}},
        {"name": "create", "arguments": {"path": "{work}/notes.txt", "file_text": NOTE}}),
    # A sub-agent started through the CLI's own tool; it runs ``ls`` and answers.
    "claude-subagent": _subagent("claude", {"name": "Agent", "arguments": {
        "description": "List the files", "prompt": SUB_TASK,
        "subagent_type": "general-purpose"}}),
    "gemini-subagent": _subagent(
        "gemini", {"name": "invoke_agent", "arguments": {"agent_name": "generalist",
                                                         "prompt": SUB_TASK}},
        # Gemini CLI's sub-agents finish only by calling complete_task
        finish={"name": "complete_task", "arguments": {"result": {"response": SUB_ANSWER}}}),
    "opencode-subagent": _subagent("opencode", {"name": "task", "arguments": {
        "description": "List the files", "prompt": SUB_TASK, "subagent_type": "general"}}),
    "copilot-subagent": _subagent("copilot", {"name": "task", "arguments": {
        "description": "List the files", "prompt": SUB_TASK, "agent_type": "general-purpose",
        "name": "lister"}}),
    "codex-subagent": _subagent(
        "codex", {"name": "spawn_agent", "arguments": {"message": SUB_TASK}},
        {"name": "wait_agent", "arguments": {"targets": ["{agent_id}"], "timeout_ms": 60000}}),
    # An edit the CLI's own edit tool refuses: its result is an error, and no file changed.
    "codex-failed-edit": _failed_edit("codex", AGENT_CLIS["codex"].shell_call(
        "apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: missing.txt\n@@\n-x\n+y\n"
        "*** End Patch\nEOF\n"), args=("--sandbox", "workspace-write")),
    "claude-failed-edit": _failed_edit("claude", {"name": "Edit", "arguments": {
        "file_path": "{work}/a.txt", "old_string": "missing", "new_string": "y"}},
        files={"claude/settings.json": json.dumps({"permissions": {"allow": ["Edit"]}})}),
    "gemini-failed-edit": _failed_edit("gemini", {"name": "replace", "arguments": {
        "file_path": "{work}/a.txt", "instruction": "Replace missing with y.",
        "old_string": "missing", "new_string": "y"}}),
    "opencode-failed-edit": _failed_edit("opencode", {"name": "edit", "arguments": {
        "filePath": "{work}/a.txt", "oldString": "missing", "newString": "y"}}),
    "copilot-failed-edit": _failed_edit("copilot", {"name": "create", "arguments": {
        "path": "{work}/a.txt", "file_text": "y"}}),  # create: the file must not exist
}


def stepper(steps: list[list[dict[str, object]]], answer: str,
            sub_steps: list[list[dict[str, object]]] | None = None, sub_answer: str = "",
            base_dir: Path | None = None) -> object:
    """The scripted model of a scenario in steps (``skillgrad serve`` imports it by name): a
    request with tools gets the calls of the step after the tool turns it already holds, then
    ``answer``; one without (a title, a summary) falls through to the config's rules. A
    sub-agent's conversation (a user message of it holds ``SUB_MARKER``) goes through
    ``sub_steps`` and ``sub_answer`` the same way. ``{agent_id}`` in a step's arguments is the
    agent id the latest tool result names (Codex's ``spawn_agent`` answers with one)."""
    from skillgrad.models.messages import ChatRequest

    def reply(request: ChatRequest) -> object:
        if not request.tools:
            return None
        messages = list(request.messages)
        plan, last = steps, answer
        marked = [i for i, m in enumerate(messages)
                  if m.role == "user" and SUB_MARKER in m.text()]
        if sub_steps is not None and marked:
            messages, plan, last = messages[marked[0]:], sub_steps, sub_answer
        done = sum(1 for m in messages if m.role == "assistant" and m.tool_calls)
        if done >= len(plan):
            return last
        results = [m.text() for m in messages if m.role == "tool"]
        found = re.search(r'"?agent_id"?\s*[:=]\s*"?([\w-]+)', results[-1]) if results else None
        calls = json.loads(json.dumps(plan[done]).replace(
            "{agent_id}", found.group(1) if found else "{agent_id}"))
        return {"tool_calls": calls}

    return reply


def record(name: str, binary: str, out: Path, scratch: Path) -> list[Path]:
    """Run one scenario's CLI against the scripted server; copy its session files into
    ``out/name``."""
    scenario = SCENARIOS[name]
    agent = AGENT_CLIS[scenario.agent or name]
    # Short, fixed paths: they are what the CLI writes into its logs.
    home, work = scratch / "home", scratch / "work"
    work.mkdir(parents=True)
    for file in ("a.txt", "b.txt"):
        (work / file).write_text("x")
    config = scratch / "serve.yaml"
    if scenario.steps:
        steps = json.loads(json.dumps([list(s) for s in scenario.steps])
                           .replace("{work}", str(work)))
        function_args: dict[str, object] = {"steps": steps, "answer": scenario.answer}
        if scenario.sub_steps is not None:
            function_args |= {"sub_steps": [list(s) for s in scenario.sub_steps],
                              "sub_answer": SUB_ANSWER}
        model = {"backend": "scripted", "function": "record_agent_sessions:stepper",
                 "function_args": function_args,
                 "rules": [{"when": "title generator", "reply": "Files"}],
                 "default": scenario.answer}
    else:
        model = {
            "backend": "scripted", "rules": [{"when": "[tool]", "reply": ANSWER},
                                             {"when": "title generator", "reply": "Files"}],
            "default": {"tool_calls": scenario.tool_calls(agent)}}
    config.write_text(json.dumps({"model": {"target": model}}))
    env = agent.prepare(home, f"http://127.0.0.1:{PORT}/r/{name}-1")
    for relative, text in scenario.files.items():
        (home / relative).parent.mkdir(parents=True, exist_ok=True)
        (home / relative).write_text(text)
    serve = "PYTHONPATH=" + shlex.quote(str(Path(__file__).resolve().parent)) + " " + \
        shlex.join([sys.executable, "-m", "skillgrad.cli", "serve", str(config),
                    "--port", str(PORT), "--record", str(scratch / "calls")])
    script = f"""
        ip link set lo up
        {serve} > {scratch}/serve.out 2> {scratch}/serve.err & server=$!
        for i in $(seq 100); do grep -q serving {scratch}/serve.out && break; sleep 0.2; done
        cd {shlex.quote(str(work))} && git init -q
        timeout 170 {shlex.join([*agent.command(binary, scenario.prompt), *scenario.args])} < /dev/null; status=$?
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
    extra = [p for pattern in scenario.sessions for p in sorted(home.glob(pattern))
             if p.is_file()]
    for path in [*agent.session_files(home), *extra]:
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
    parser.add_argument("--only", default=",".join(SCENARIOS),
                        help="scenarios (an agent's name, or <agent>-tools), ','-separated")
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/sleep/real"))
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/sgrec"),
                        help="scratch folder (emptied first; its paths appear in the logs)")
    args = parser.parse_args()
    for name in args.only.split(","):
        binary = shutil.which(AGENT_CLIS[SCENARIOS[name].agent or name].binary, path=args.clis)
        if binary is None:
            raise SystemExit(f"{name}: not found in {args.clis}")
        scratch = args.scratch / name
        if scratch.exists():
            shutil.rmtree(scratch)
        files = record(name, binary, args.out.resolve(), scratch)
        print(f"{name} {version(binary)}: " + ", ".join(str(f) for f in files))


if __name__ == "__main__":
    main()
