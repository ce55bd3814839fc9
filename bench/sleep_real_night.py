"""One Sleep night on sessions the real agent CLIs wrote.

1. The coding environment's ``ledger`` repository, at its commit, becomes a git repository in
   ``OUT/project`` (:func:`skillgrad.envs.coding.tasks.repository`).
2. Each chosen agent CLI (Codex, Claude Code, Gemini CLI, OpenCode, Copilot CLI) runs headless
   in that project, several times, with its own HOME under ``OUT/homes/<cli>``, against
   ``skillgrad serve`` with a scripted model, all inside ``unshare -rn`` (loopback only:
   nothing leaves the machine; see ``tests/test_serve_agents.py``). The requests are ones a
   user repeats, worded a little differently from session to session and spread over the
   CLIs: run the test suite, "run the tests", add a CHANGELOG line under Unreleased, what
   ``format_cents`` returns for 1234, which functions ``ledger/money.py`` exports. The
   scripted model runs each request's command through the CLI's own shell tool and answers
   from its output. Two sessions go wrong first (the amount passed as dollars, the line put
   under the last release) and the user corrects the agent in a second turn of the same
   session (the CLI's own resume: ``codex exec resume --last``, ``gemini --resume latest``).
3. One night (:func:`skillgrad.sleep.cycle.run_night`) runs over the project with the harvest
   reading only those homes (each agent's own variable: ``CODEX_HOME``,
   ``CLAUDE_CONFIG_DIR``, ``GEMINI_CLI_HOME``, ``XDG_DATA_HOME``, ``COPILOT_HOME``; HOME an
   empty folder). ``--scripted``: stand-in target and optimizer (a night of seconds); without
   it the embedded model in both roles, text-mode replay.
4. The report: sessions written and harvested per CLI, the tasks mined (request,
   occurrences, checks, side of the split), each training step (edits proposed, refused,
   applied; the gate's decision) and what was staged (the diff), or why nothing was. It is
   printed and written to ``OUT/report.json``.

    export SKILLGRAD_AGENT_CLIS=$(printf '%s/node_modules/.bin:' .agent-clis/*)
    python bench/sleep_real_night.py --clis "$SKILLGRAD_AGENT_CLIS" --out /tmp/srn --scripted
    python bench/sleep_real_night.py --clis "$SKILLGRAD_AGENT_CLIS" --out /tmp/srn-embedded

``OUT`` must be empty or a folder this script made before (it is emptied first).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
MODULE = Path(__file__).stem  # the scripted models' functions are imported by this name
MARKER = ".sleep_real_night"
PORT = 8400
RUN_TIMEOUT = 300  # seconds one CLI run may take (a loaded machine: node starts slowly)
CLI_ORDER = ("codex", "claude", "gemini", "opencode", "copilot")
# Where each CLI keeps its sessions, as the variable its harvest adapter reads
# (skillgrad.traces.*.stores); None: Gemini CLI's store is $GEMINI_CLI_HOME/.gemini, and the
# CLI writes it under its HOME.
STORE_VARIABLE = {"codex": "CODEX_HOME", "claude": "CLAUDE_CONFIG_DIR", "gemini": None,
                  "opencode": "XDG_DATA_HOME", "copilot": "COPILOT_HOME"}


# -- what the user asks, and what the scripted agent does -----------------------------------

@dataclass(frozen=True)
class Play:
    """What the scripted agent does for a request: its shell commands, one call at a time,
    then an answer written from the last one's output (``{out}``: its gist)."""

    commands: tuple[str, ...]
    answer: str
    gist: str = "last"  # which part of the output the answer quotes: last | unittest | all


TESTS = Play(("python3 -m unittest",), "I ran `python3 -m unittest`: {out}.", "unittest")
SHOW_CHANGELOG = "sed -n 1,9p CHANGELOG.md"
ENTRY = "- Fixed split_evenly: the amounts now add up to the total."


def _changelog_edit(heading: str) -> tuple[str, str]:
    """Put :data:`ENTRY` under the line ``heading`` of CHANGELOG.md (GNU sed), then show it."""
    pattern = heading.replace(".", "\\.")
    return f"sed -i 's/^{pattern}$/&\\n\\n{ENTRY}/' CHANGELOG.md", SHOW_CHANGELOG


def _cents(value: str) -> tuple[str]:
    code = f"from ledger.money import format_cents; print(format_cents({value}))"
    return (f"python3 -c {shlex.quote(code)}",)


CHANGELOG = Play(_changelog_edit("## Unreleased"),
                 "Added the line under `## Unreleased` in CHANGELOG.md:\n{out}", "all")
CHANGELOG_WRONG = Play(_changelog_edit("## 0.4.0 (2024-03-18)"),
                       "Added the line to CHANGELOG.md:\n{out}", "all")
CENTS = Play(_cents("1234"), "`format_cents(1234)` returns `{out}`: 1234 is an amount in "
             "integer cents.")
CENTS_WRONG = Play(_cents("12.34"), "format_cents takes an amount in dollars; with 12.34 it "
                   "says: {out}")
EXPORTS = Play(("grep -n __all__ ledger/money.py",), "ledger/money.py exports: {out}")

# Each request's wording -> what the agent does. No wording is a part of another (the agent
# finds the latest request by its wording).
PLAYS: dict[str, Play] = {
    "run the test suite and tell me if it passes": TESTS,
    "please run the whole test suite and tell me whether it passes": TESTS,
    "can you run the test suite and tell me if everything passes?": TESTS,
    "please run the tests": TESTS,
    "Run the tests.": TESTS,
    "add a CHANGELOG.md line under Unreleased for the split_evenly rounding fix":
        CHANGELOG_WRONG,
    "no, that went under 0.4.0: add the line to CHANGELOG.md under Unreleased for the "
    "split_evenly rounding fix": CHANGELOG,
    "add a line to CHANGELOG.md under Unreleased for the split_evenly rounding fix": CHANGELOG,
    "please add a CHANGELOG.md entry under Unreleased about the split_evenly rounding fix":
        CHANGELOG,
    "what does format_cents return for 1234 cents? run it to check": CENTS_WRONG,
    "no, that's wrong: what does format_cents return for 1234 cents?": CENTS,
    "what does format_cents return for 1234?": CENTS,
    "list the public functions in ledger/money.py": EXPORTS,
    "which functions does ledger/money.py export?": EXPORTS,
}


@dataclass(frozen=True)
class Planned:
    """One session: a CLI and its prompts (the second one, if any, in the same session,
    through the CLI's resume)."""

    cli: str
    prompts: tuple[str, ...]


# The sessions in the order they run (their start times order the miner's occurrences: a
# request's wording is taken from its latest satisfied occurrence). Five recurring requests,
# each asked two to four times across the CLIs; two sessions are corrected in a second turn.
PLAN: tuple[Planned, ...] = (
    Planned("gemini", ("add a CHANGELOG.md line under Unreleased for the split_evenly rounding "
                       "fix", "no, that went under 0.4.0: add the line to CHANGELOG.md under "
                       "Unreleased for the split_evenly rounding fix")),
    Planned("codex", ("what does format_cents return for 1234 cents? run it to check",
                      "no, that's wrong: what does format_cents return for 1234 cents?")),
    Planned("claude", ("please run the tests",)),
    Planned("opencode", ("run the test suite and tell me if it passes",)),
    Planned("copilot", ("list the public functions in ledger/money.py",)),
    Planned("codex", ("please run the whole test suite and tell me whether it passes",)),
    Planned("gemini", ("what does format_cents return for 1234?",)),
    Planned("claude", ("add a line to CHANGELOG.md under Unreleased for the split_evenly "
                       "rounding fix",)),
    Planned("opencode", ("which functions does ledger/money.py export?",)),
    Planned("copilot", ("can you run the test suite and tell me if everything passes?",)),
    Planned("claude", ("Run the tests.",)),
    Planned("copilot", ("please add a CHANGELOG.md entry under Unreleased about the "
                        "split_evenly rounding fix",)),
    Planned("codex", ("what does format_cents return for 1234?",)),
)


def resume_command(cli: str, binary: str, prompt: str) -> list[str]:
    """A second turn of the CLI's latest session in this folder, headless."""
    from skillgrad.models.agent_clis import AGENT_CLIS

    if cli == "codex":
        return [binary, "exec", "resume", "--last", "--skip-git-repo-check", "--json", prompt]
    extra = {"claude": ["--continue"], "gemini": ["--resume", "latest"],
             "opencode": ["--continue"], "copilot": ["--continue"]}[cli]
    return AGENT_CLIS[cli].command(binary, prompt) + extra


# -- the scripted models --------------------------------------------------------------------

_NOISE = re.compile(r"(?i)(exit code|wall time|process exited|process group pgid|chunk id|"
                    r"original token count|command:)")


def _gist(output: str, how: str) -> str:
    """What a command printed, without the wrapping each CLI puts around a tool's output
    (Gemini's ``<untrusted_context>`` and ``Output:``, Codex's and Copilot's status lines)."""
    lines = []
    for line in output.splitlines():
        line = re.sub(r"(?i)^output:\s*", "", line.strip())
        if line and not _NOISE.match(line) and not (line.startswith("<") and line.endswith(">")):
            lines.append(line)
    if how == "unittest":
        ran = next((ln for ln in lines if re.match(r"Ran \d+ tests?", ln)), None)
        verdict = next((ln for ln in reversed(lines) if ln.startswith(("OK", "FAILED"))), None)
        if ran and verdict:
            return f"{ran}, {verdict}" + (" (the suite passes)" if verdict.startswith("OK")
                                           else " (the suite fails)")
    if how == "all":
        return "\n".join(lines[-9:])
    return lines[-1] if lines else "(no output)"


def agent_reply(request: Any) -> Any:
    """The model behind ``skillgrad serve`` while the CLIs write their sessions: the latest
    known request in the conversation gets its command through the CLI's shell tool; once the
    tool's output is back, the answer is written from it. A request that offers no tools (a
    title) gets a title."""
    from skillgrad.models.agent_clis import AGENT_CLIS

    if not request.tools:
        return "Ledger maintenance"
    messages = list(request.messages)
    latest, play = -1, None
    for index, message in enumerate(messages):
        if message.role != "user":
            continue
        found = [p for p in PLAYS if p in message.text()]
        if found:
            latest, play = index, PLAYS[max(found, key=len)]
    if play is None:
        return "I could not tell what you asked; please say it again."
    outputs = [m.text() for m in messages[latest + 1:] if m.role == "tool"]
    if len(outputs) >= len(play.commands):
        return play.answer.format(out=_gist(outputs[-1], play.gist))
    command = play.commands[len(outputs)]
    names = {t.get("name") or (t.get("function") or {}).get("name") for t in request.tools}
    agent = next((a for a in AGENT_CLIS.values() if a.shell_tool in names), None)
    if agent is None:
        return f"Run `{command}` to see."
    return {"tool_calls": [agent.shell_call(command)]}


HELPFUL = ("- Run the command that answers the request (`python3 -m unittest`, "
           "`python3 -c ...`, `grep`) and quote its output; amounts of money are integer "
           "cents; changelog lines go under `## Unreleased`.")


def night_target(request: Any) -> str:
    """The night's stand-in target: vague unless its skill says to run and quote."""
    skill, prompt = request.messages[0].text(), request.messages[-1].text()
    if "quote its output" not in skill:
        return "Sure, that is done."
    low = prompt.lower()
    if "changelog" in low:
        return (f"Added `{ENTRY}` under `## Unreleased` in CHANGELOG.md; "
                f"`{SHOW_CHANGELOG}` shows it there.")
    if "format_cents" in low:
        return "`python3 -c 'from ledger.money import format_cents; print(format_cents(1234))'` " \
               "prints `$12.34`: format_cents takes integer cents."
    if "money.py" in low:
        return ("`grep -n __all__ ledger/money.py` lists apply_discount, format_cents, "
                "parse_amount and split_evenly.")
    if "test" in low:
        return "I ran `python3 -m unittest`: Ran 18 tests, OK (the suite passes)."
    return "I ran the command that answers it and quoted its output."


def night_optimizer(request: Any) -> Any:
    """The night's stand-in optimizer: the miner keeps the heuristic draft and asks for the
    command's output in its rubric; the judge wants a command and its result; the analyst
    proposes :data:`HELPFUL`."""
    prompt = request.messages[-1].text()
    if request.kind == "sleep_mine":
        draft = json.loads(prompt.split("## Draft", 1)[1].split("## What to write", 1)[0])
        return {"intent": draft["intent"], "checks": draft["checks"], "checkable": True,
                "rubric": (draft.get("rubric") or "") + " A good answer names the command it "
                "ran and quotes what it printed."}
    if request.kind == "sleep_judge":
        answer = prompt.rsplit("## Answer", 1)[1]
        shown = "`" in answer and any(w in answer for w in ("python3", "grep", "sed"))
        return {"score": 1.0 if shown else 0.2,
                "reason": "names the command and its output" if shown
                else "says it is done without showing how"}
    return {"reasoning": "the answers say the work is done but never show the command or "
            "its output", "edits": [{"op": "append", "content": HELPFUL}]}


SCRIPTED_MODELS = {"target": {"backend": "scripted", "function": f"{MODULE}:night_target"},
                   "optimizer": {"backend": "scripted",
                                 "function": f"{MODULE}:night_optimizer"}}


# -- 1. the project -------------------------------------------------------------------------

def make_project(out: Path) -> tuple[Path, str]:
    """The ``ledger`` repository at its commit, as ``out/project``."""
    from skillgrad.envs.coding.tasks import (
        REPOS_FILE,
        TASKS_FILE,
        read_repos,
        read_tasks,
        repository,
    )
    from skillgrad.envs.data import package_file

    data = package_file("skillgrad.envs.coding", "data")
    commit = next(t.commit for t in read_tasks(data / TASKS_FILE) if t.repo == "ledger")
    made = repository("ledger", read_repos(data / REPOS_FILE)["ledger"], commit, out / "build")
    project = out / "project"
    made.rename(project)
    shutil.rmtree(out / "build", ignore_errors=True)
    return project, commit


# -- 2. the sessions (inside unshare -rn) ---------------------------------------------------

@dataclass
class Turned:
    """One CLI run: a session's first prompt or its resumed second turn."""

    cli: str
    session: int
    turn: int
    prompt: str
    rc: int | None = None
    seconds: float = 0.0
    answered: bool = False  # the scripted answer's opening is in what the CLI printed
    error: str = ""


def _clean_environ(bench_dir: Path) -> dict[str, str]:
    """The environment the CLIs and the server start from: no agent's own variables (no run
    may read or write the user's real agent folders) and this folder importable (the
    server's scripted model)."""
    from skillgrad.models.agent_clis import AGENT_CLIS

    drop = {k for a in AGENT_CLIS.values() for k in a.env} | {
        "HOME", "GEMINI_CLI_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME",
        "XDG_STATE_HOME", "OPENAI_API_KEY", "OPENAI_BASE_URL", "GEMINI_API_KEY",
        "GOOGLE_API_KEY", "ANTHROPIC_AUTH_TOKEN", "GH_TOKEN", "GITHUB_TOKEN"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join([str(bench_dir), *filter(None, [
        os.environ.get("PYTHONPATH")])])
    return env


def produce_sessions(plan_file: Path) -> None:
    """Run inside ``unshare -rn``: loopback up, ``skillgrad serve`` with :func:`agent_reply`,
    then every planned session, one CLI run at a time, in the project; the results as JSON."""
    from skillgrad.models.agent_clis import AGENT_CLIS

    plan = json.loads(plan_file.read_text())
    out, project = Path(plan["out"]), Path(plan["project"])
    base = _clean_environ(Path(plan["bench"]))
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    config = out / "serve.yaml"
    config.write_text(json.dumps({"model": {"target": {
        "backend": "scripted", "function": f"{MODULE}:agent_reply"}}}))
    log = out / "logs"
    log.mkdir(exist_ok=True)
    with open(log / "serve.out", "w") as sout, open(log / "serve.err", "w") as serr:
        server = subprocess.Popen(
            [sys.executable, "-m", "skillgrad.cli", "serve", str(config), "--port", str(PORT),
             "--record", str(out / "serve-calls")], stdout=sout, stderr=serr,
            env={**base, "HOME": str(out / "homes" / "serve")})
    try:
        for _ in range(300):
            if "serving" in (log / "serve.out").read_text() or server.poll() is not None:
                break
            time.sleep(0.2)
        if server.poll() is not None:
            raise SystemExit(f"skillgrad serve stopped: {(log / 'serve.err').read_text()}")
        versions = {}
        for cli, binary in plan["binaries"].items():
            home = out / "homes" / cli
            env = {**base, **AGENT_CLIS[cli].prepare(home, f"http://127.0.0.1:{PORT}/r/{cli}"),
                   "PWD": str(project)}
            versions[cli] = _version(binary, env, project)
        results = []
        for number, (cli, prompts) in enumerate(plan["sessions"], 1):
            agent, binary = AGENT_CLIS[cli], plan["binaries"][cli]
            home = out / "homes" / cli
            env = {**base, **agent.prepare(home, f"http://127.0.0.1:{PORT}/r/{cli}"),
                   "PWD": str(project)}  # (OpenCode takes its folder from $PWD)
            for turn, prompt in enumerate(prompts, 1):
                argv = (agent.command(binary, prompt) if turn == 1
                        else resume_command(cli, binary, prompt))
                results.append(_run(cli, number, turn, prompt, argv, env, project, log))
            # The next session starts from the commit's files again (an edit is not kept).
            subprocess.run(["git", "checkout", "-q", "--", "."], cwd=project, check=False)
        (out / "sessions.json").write_text(json.dumps({
            "versions": versions, "runs": [asdict(r) for r in results]}, indent=1) + "\n")
    finally:
        server.send_signal(2)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


def _version(binary: str, env: dict[str, str], cwd: Path) -> str:
    try:
        proc = subprocess.run([binary, "--version"], capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        return "?"
    text = (proc.stdout or proc.stderr).strip().splitlines()
    return text[0] if proc.returncode == 0 and text else "?"


def _run(cli: str, number: int, turn: int, prompt: str, argv: list[str], env: dict[str, str],
         project: Path, log: Path) -> Turned:
    result = Turned(cli, number, turn, prompt)
    start = time.monotonic()
    name = f"{number:02d}-{turn}-{cli}"
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                              stdin=subprocess.DEVNULL, env=env, cwd=project)
        result.rc = proc.returncode
        (log / f"{name}.out").write_text(proc.stdout)
        (log / f"{name}.err").write_text(proc.stderr)
        literal = max(re.split(r"\{out\}|`|\n", PLAYS[prompt].answer), key=len).strip()
        result.answered = literal in proc.stdout
        if proc.returncode != 0:
            result.error = (proc.stderr.strip() or proc.stdout.strip())[-600:]
    except subprocess.TimeoutExpired:
        result.error = f"timed out after {RUN_TIMEOUT} s"
    result.seconds = round(time.monotonic() - start, 1)
    return result


def write_sessions(out: Path, project: Path, binaries: dict[str, str],
                   plan: Sequence[Planned]) -> dict[str, Any]:
    """Every planned session, through :func:`produce_sessions` in a network namespace of its
    own; what each run did."""
    plan_file = out / "plan.json"
    plan_file.write_text(json.dumps({
        "out": str(out), "project": str(project), "bench": str(HERE), "binaries": binaries,
        "sessions": [(p.cli, list(p.prompts)) for p in plan]}, indent=1) + "\n")
    proc = subprocess.run(["unshare", "-rn", sys.executable, str(Path(__file__).resolve()),
                           "--inner", str(plan_file)], capture_output=True, text=True,
                          env={**_clean_environ(HERE), "PWD": str(project)}, cwd=project, timeout=RUN_TIMEOUT * (len(plan) + 3))
    if proc.returncode != 0 or not (out / "sessions.json").exists():
        raise SystemExit(f"writing the sessions failed ({proc.returncode}):\n"
                         f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads((out / "sessions.json").read_text())


# -- 3. the night ---------------------------------------------------------------------------

def harvest_environ(out: Path, clis: Sequence[str]) -> dict[str, str]:
    """The variables that point each agent's harvest adapter at this run's home for it, and
    nowhere else."""
    from skillgrad.models.agent_clis import AGENT_CLIS

    environ: dict[str, str] = {}
    for cli in clis:
        home = out / "homes" / cli
        variable = STORE_VARIABLE[cli]
        if variable is None:
            environ["GEMINI_CLI_HOME"] = str(home)
        else:
            environ[variable] = AGENT_CLIS[cli].env[variable].replace("{home}", str(home))
    return environ


def sleep_config(clis: Sequence[str], scripted: bool, miner: str) -> dict[str, Any]:
    from skillgrad.models.agent_clis import AGENT_CLIS

    config: dict[str, Any] = {"sleep": {
        "agents": sorted({AGENT_CLIS[c].agent for c in clis}),
        "settle_seconds": 0,  # the sessions were written a moment ago, and are finished
        "miner": miner}}
    if scripted:
        config["model"] = SCRIPTED_MODELS
    return config


def run_the_night(out: Path, project: Path, clis: Sequence[str], scripted: bool,
                  miner: str) -> Any:
    from skillgrad.sleep.cycle import run_night

    folder = project / ".skillgrad" / "sleep"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(json.dumps(sleep_config(clis, scripted, miner),
                                                   indent=1) + "\n")
    empty_home = out / "homes" / "user"
    empty_home.mkdir(parents=True, exist_ok=True)
    return run_night(project, environ=harvest_environ(out, clis), home=empty_home)


# -- 4. the report --------------------------------------------------------------------------

def night_report(out: Path, project: Path, result: Any, clis: Sequence[str],
                 runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    from skillgrad.envs.workspace import describe
    from skillgrad.models.agent_clis import AGENT_CLIS
    from skillgrad.sleep.archive import Archive
    from skillgrad.sleep.night import skill_run, slug
    from skillgrad.sleep.tasks import split_of

    folder = project / ".skillgrad" / "sleep"
    by_session: dict[int, list[dict[str, Any]]] = {}
    for r in runs:
        by_session.setdefault(r["session"], []).append(r)
    completed = Counter(turns[0]["cli"] for turns in by_session.values()
                        if all(t["rc"] == 0 for t in turns))
    written = {c: completed.get(c, 0) for c in clis}
    archived: Counter[str] = Counter(s.agent for s in Archive(folder / "archive").sessions())
    by_agent = {AGENT_CLIS[c].agent: c for c in clis}
    harvested = {c: archived.get(AGENT_CLIS[c].agent, 0) for c in clis}
    harvested.update({a: n for a, n in archived.items() if a not in by_agent})
    section_val = _val_percent(folder)
    tasks = []
    for task in result.tasks.tasks:
        tasks.append({
            "id": task.id, "intent": task.intent, "occurrences": task.occurrences,
            "outcomes": dict(Counter(e.outcome for e in task.evidence)),
            "clis": dict(Counter(by_agent.get(e.agent, e.agent) for e in task.evidence)),
            "checks": [describe(c) for c in task.checks], "rubric": task.rubric,
            "split": split_of(task, section_val), "miner": task.miner,
            "skill": task.skill, "commit": task.commit})
    training = []
    work = folder / "work" / result.night / "skills"
    for run in result.runs:
        steps = []
        run_dir = skill_run(work / slug(run.name), run.name)
        for step in run_dir.step_dirs():
            record = step.read_record() or {}
            gate = step.read_gate() or {}
            steps.append({"step": step.path.name, "proposed": record.get("n_proposed"),
                          "refused": record.get("n_refused"),
                          "applied": record.get("n_applied"),
                          "changes": record.get("changes", []),
                          "decision": gate.get("decision", record.get("decision")),
                          "gate": gate.get("reason", record.get("reason", ""))})
        selection = run.summary.get("selection", {})
        training.append({"skill": run.name, "kind": run.kind, "status": run.status,
                         "reason": run.reason, "target": str(run.target) if run.target else None,
                         "tasks": len(run.tasks),
                         "selection_before": selection.get("initial"),
                         "selection_after": selection.get("best"),
                         "steps": steps, "accepted": run.accepted,
                         "changed": run.proposed is not None})
    staged: dict[str, Any] = {"night": str(result.staged) if result.staged else None,
                              "diffs": {}}
    if result.staged is not None:
        for diff in sorted((result.staged / "diffs").glob("*.diff")):
            staged["diffs"][diff.name] = diff.read_text(encoding="utf-8")
    else:
        staged["why_not"] = _why_nothing(training, tasks)
    return {"night": result.night, "project": str(project),
            "sessions": {"written": written, "harvested": harvested,
                         "harvested_total": result.harvested, "skipped": result.skipped},
            "tasks": tasks, "miner": result.tasks.miner, "miner_notes": result.tasks.notes,
            "training": training, "staged": staged}


def _val_percent(folder: Path) -> int:
    from skillgrad.sleep.night import load_sleep_config

    return load_sleep_config(folder / "config.yaml")[1].val_percent


def _why_nothing(training: list[dict[str, Any]], tasks: list[dict[str, Any]]) -> str:
    if not tasks:
        return "no recurring, checkable request was mined"
    reasons = []
    for run in training:
        if run["status"] != "trained":
            reasons.append(f"{run['skill']}: {run['status']} ({run['reason']})")
        elif not run["steps"]:
            reasons.append(f"{run['skill']}: no training step ran")
        else:
            gates = "; ".join(f"{s['step']} {s['decision']}: {s['gate']}" for s in run["steps"])
            reasons.append(f"{run['skill']}: the gate kept the skill ({gates})")
    return " | ".join(reasons) or "no skill was trained"


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def print_report(report: dict[str, Any], say: Callable[[str], None] = print) -> None:
    s = report["sessions"]
    say(f"# A Sleep night on real agent sessions ({report['mode']})")
    say(f"project: {report['project']} (ledger at {report['commit'][:12]})")
    say("CLIs: " + ", ".join(f"{c} {v}" for c, v in report["versions"].items()))
    runs = report["runs"]
    failed = [r for r in runs if r["rc"] != 0]
    say(f"CLI runs: {len(runs)} ({sum(r['turn'] == 2 for r in runs)} resumed second turns), "
        f"{len(failed)} failed, {report['seconds']['sessions']:.0f} s")
    for r in failed:
        say(f"  FAILED {r['cli']} session {r['session']} turn {r['turn']}: rc {r['rc']}: "
            f"{r['error'][-200:]}")
    say("sessions completed / harvested per CLI: " + ", ".join(
        f"{c} {s['written'].get(c, 0)}/{s['harvested'].get(c, 0)}" for c in report["clis"])
        + f" (harvested {s['harvested_total']}"
        + (f"; skipped: {s['skipped']}" if s["skipped"] else "") + ")")
    say(f"tasks mined: {len(report['tasks'])} (miner: {report['miner']})")
    for t in report["tasks"]:
        say(f"  - [{t['split']}] {t['intent']!r} x{t['occurrences']} "
            f"({', '.join(f'{k} {v}' for k, v in t['outcomes'].items())}; "
            f"from {', '.join(f'{k} {v}' for k, v in t['clis'].items())}); "
            f"checks: {', '.join(_short(c) for c in t['checks']) or 'none'}; "
            f"miner: {t['miner']}")
    for note in report["miner_notes"]:
        say(f"  note: {note}")
    for run in report["training"]:
        before, after = run["selection_before"], run["selection_after"]
        score = (f", selection {before:.3f} -> {after:.3f}" if before is not None
                 and after is not None else "")
        say(f"skill {run['skill']} ({run['kind']}, {run['tasks']} tasks): {run['status']}"
            + (f": {run['reason']}" if run["reason"] else "") + score)
        for st in run["steps"]:
            say(f"  step {st['step']}: edits proposed {st['proposed']}, refused "
                f"{st['refused']}, applied {st['applied']}; gate: {st['decision']}: "
                f"{st['gate']}")
            for change in st["changes"]:
                say(f"    {change[:160]}")
    staged = report["staged"]
    if staged["night"]:
        say(f"staged: {staged['night']}")
        for name, diff in staged["diffs"].items():
            say(f"--- {name}")
            say(diff.rstrip())
    else:
        say(f"nothing staged: {staged['why_not']}")
    say("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in report["seconds"].items()))


# -- main -----------------------------------------------------------------------------------

def _prepare_out(out: Path) -> None:
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).exists():
            raise SystemExit(f"{out}: not empty, and not a folder this script made; "
                             "give an empty or new folder")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("made by bench/sleep_real_night.py; emptied on the next run\n")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clis", required=True, help="folders holding the CLIs, ':'-separated")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scripted", action="store_true",
                        help="stand-in target and optimizer (default: the embedded model)")
    parser.add_argument("--only", default=",".join(CLI_ORDER), help="CLIs, ','-separated")
    parser.add_argument("--miner", choices=("llm", "heuristic"), default="llm",
                        help="sleep.miner (default llm, sleep's own default)")
    args = parser.parse_args(argv)
    if str(HERE) not in sys.path:  # the scripted models' functions: MODULE:night_*
        sys.path.insert(0, str(HERE))
    wanted = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = [c for c in wanted if c not in CLI_ORDER]
    if unknown:
        raise SystemExit(f"unknown CLI {unknown[0]!r} (known: {', '.join(CLI_ORDER)})")
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0:
        raise SystemExit("unshare -rn is not allowed here: the CLIs must run offline")
    from skillgrad.models.agent_clis import AGENT_CLIS

    binaries = {}
    for cli in wanted:
        found = shutil.which(AGENT_CLIS[cli].binary, path=args.clis)
        if found is None:
            print(f"{cli}: not found in --clis; left out", file=sys.stderr)
        else:
            binaries[cli] = found
    if not binaries:
        raise SystemExit("no CLI found in --clis")
    clis = [c for c in CLI_ORDER if c in binaries]
    plan = [p for p in PLAN if p.cli in binaries]
    out = args.out.expanduser().resolve()
    _prepare_out(out)
    started = time.monotonic()
    project, commit = make_project(out)
    t_project = time.monotonic()
    sessions = write_sessions(out, project, binaries, plan)
    t_sessions = time.monotonic()
    result = run_the_night(out, project, clis, args.scripted, args.miner)
    t_night = time.monotonic()
    report = {"mode": "scripted" if args.scripted else "embedded", "commit": commit,
              "clis": clis, "versions": sessions["versions"], "runs": sessions["runs"],
              **night_report(out, project, result, clis, sessions["runs"])}
    report["seconds"] = {"project": t_project - started, "sessions": t_sessions - t_project,
                         "night": t_night - t_sessions, "total": t_night - started}
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print_report(report)
    print(f"report: {out / 'report.json'}")
    return report


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--inner":
        produce_sessions(Path(sys.argv[2]))
    else:
        main()
