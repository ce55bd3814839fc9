"""The reliability suite, in four parts.

- Faults: a training whose target and optimizer both answer through an OpenAI-compatible
  endpoint on 127.0.0.1 that fails a seeded share of requests (429 with Retry-After, 500, hangs
  past the client's timeout, connection resets, malformed bodies, bogus truncations) ends
  exactly as the same training through a clean endpoint, and no fault is scored or journaled.
- Kills: ``kill -9`` of a real ``skillgrad train`` at seeded instants, each resumed by the same
  command, ends as the uninterrupted run does.
- Bad inputs: the corpus in ``fixtures/bad_inputs/corpus.yaml`` (configs, data files, skill
  files, command lines, optimizer replies, file-system states), each refused in one line with
  a non-zero exit and no traceback, leaving any run directory as it was and readable.
- Escapes: every escape from the code sandbox in ``test_sandbox_escapes.py`` (a UNIX socket
  outside its folder through Python's socket module, ctypes and a child interpreter; a process
  in its own session left to outlive the run, ended normally and at the timeout; a fork bomb; a
  device node; a workbook handed back as a link to an outside file), each refused.

``SKILLGRAD_HEAVY_RELIABILITY=1`` adds a 50% fault rate and raises the kills from 20 to 100.
Run with ``-s`` to see what the suite measured (printed when the module ends). The kill and
bad-input subprocesses run three at a time; each case is still its own test.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import toy
import yaml
from conftest import toy_config
from test_resume import comparable
from test_sandbox_escapes import ESCAPES, unavailable

from skillgrad.config import load_config
from skillgrad.testing import FakeOpenAIServer, Fault
from skillgrad.trainer import build_trainer

HEAVY = os.environ.get("SKILLGRAD_HEAVY_RELIABILITY") == "1"
TESTS = Path(__file__).resolve().parent
WORKERS = 3  # subprocesses at a time: they mostly wait (on start-up, on the scripted delay)


@dataclass
class Tally:
    """What the suite measured; printed at the end of the module (seen with ``-s``)."""

    faults: Counter[str] = field(default_factory=Counter)
    fault_runs: list[str] = field(default_factory=list)
    kill_scopes: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    not_one_line: list[str] = field(default_factory=list)
    escapes_tried: list[str] = field(default_factory=list)
    escapes_refused: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        injected = sum(self.faults.values())
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items()))
        scopes = ", ".join(f"{k} {n}" for k, n in sorted(self.kill_scopes.items()))
        kinds_refused = ", ".join(f"{k} {n}" for k, n in sorted(self.refused.items()))
        refused = sum(self.refused.values())
        return [
            f"faults: {injected} injected and {injected} survived ({kinds}) in "
            f"{len(self.fault_runs)} runs ({'; '.join(self.fault_runs)})",
            f"kills: {sum(self.kill_scopes.values())} kill -9 at seeded instants, each resumed "
            f"to the uninterrupted run's result (killed in: {scopes})",
            f"bad inputs: {refused + len(self.not_one_line)} refused with no traceback, "
            f"{refused} of them in one line ({kinds_refused}); "
            f"{len(self.not_one_line)} in more lines",
            f"escapes: {len(self.escapes_tried)} tried, {len(self.escapes_refused)} refused "
            f"({'; '.join(self.escapes_refused)})",
        ]


TALLY = Tally()


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    print("\n" + "\n".join(f"reliability {line}" for line in TALLY.lines()))


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "200"}


def cli(*args: str, cwd: Path, preexec: Callable[[], None] | None = None
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skillgrad.cli", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=120, preexec_fn=preexec)


def journal_lines(run: Path) -> int:
    """Model calls answered so far, over every scope of the run."""
    return sum(p.read_bytes().count(b"\n") for p in run.glob("**/calls.jsonl"))


def captured(job: Callable[[], Any]) -> Any:
    """The job's result, or the exception it raised (re-raised by the test that reads it)."""
    try:
        return job()
    except Exception as exc:  # noqa: BLE001 - belongs to one case; its test raises it
        return exc


def in_parallel(jobs: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """Each job's result or exception (see :func:`captured`), ``WORKERS`` jobs at a time."""
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = {name: pool.submit(captured, job) for name, job in jobs.items()}
        return {name: f.result() for name, f in futures.items()}


def result_of(results: dict[str, Any], name: str) -> Any:
    found = results[name]
    if isinstance(found, BaseException):
        raise found
    return found


# ============================================================================= faults

FAULT_SEED = 20240611
FAULT_RATES = (0.3, 0.5) if HEAVY else (0.3,)
KINDS = ("429", "500", "hang", "reset", "malformed", "bogus truncation")
CLIENT_TIMEOUT = 0.5  # seconds; what a hang costs
HANG = 3.0  # longer than the client waits
RETRY_AFTER = 0.01
# A call fails for good only after max_retries + 1 faults in a row: at 50%, one in 8192.
MAX_RETRIES = 12
MALFORMED = (
    '{"id": "chatcmpl-broken", "choices": [',  # cut off
    "",
    "<html>502 Bad Gateway</html>",
    '{"choices": []}',
    "[1, 2]",
    '{"choices": [{"index": 0, "message": null}]}',
)


class SeededFaults:
    """Chooses a fault for a share ``rate`` of requests. Each request's body and the number of
    times it was sent before decide (through a hash, with ``seed``), so the same requests fail
    whatever order concurrent calls arrive in. A bogus truncation is the start of the real
    reply (4 to 7 characters) with ``finish_reason: length`` and 1 completion token, though the
    request allows 64 or more."""

    def __init__(self, rate: float, seed: int) -> None:
        self.rate, self.seed = rate, seed
        self.injected: Counter[str] = Counter()
        self.never_scored: set[str] = set(MALFORMED)  # texts no rollout or journal may hold
        self.truncated_limits: list[int] = []  # the max_tokens of each truncated request
        self._sent: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Fault | None:
        identity = json.dumps(body, sort_keys=True)
        with self._lock:
            attempt = self._sent[identity]
            self._sent[identity] += 1
        draw = random.Random(hashlib.sha256(f"{self.seed}:{attempt}:{identity}".encode()).digest())
        if draw.random() >= self.rate:
            return None
        kind = draw.choice(KINDS)
        with self._lock:
            self.injected[kind] += 1
        if kind == "429":
            return Fault.status(429, "slow down", retry_after=RETRY_AFTER)
        if kind == "500":
            return Fault.status(500, "internal error")
        if kind == "hang":
            return Fault.hang(HANG)
        if kind == "reset":
            return Fault.reset()
        if kind == "malformed":
            return Fault.malformed(draw.choice(MALFORMED))
        cut = toy.http_responder(body)[: draw.randint(4, 7)]
        with self._lock:
            self.never_scored.add(cut)
            self.truncated_limits.append(int(body.get("max_tokens") or 0))
        return Fault.bogus_truncation(cut, completion_tokens=1)


def http_run(folder: Path, faults: SeededFaults | None) -> tuple[dict[str, Any], int]:
    """The toy training with both roles on one loopback endpoint: its summary and the number
    of requests the endpoint received."""
    folder.mkdir()
    with FakeOpenAIServer(responder=toy.http_responder, faults=faults) as server:
        role = {"backend": "openai_compatible", "base_url": server.url, "model": "toy",
                "concurrency": 4, "retry_base_delay": 0.0, "max_retries": MAX_RETRIES,
                "timeout": CLIENT_TIMEOUT}
        cfg = toy_config(folder, model={"target": role, "optimizer": role},
                         execution={"rollout_workers": 4})
        summary = build_trainer(load_config(cfg), folder / "run").fit()
        return summary, len(server.requests)


def outcome(run: Path) -> dict[str, Any]:
    """What must not depend on the endpoint's faults: the best skill, the summary's scores,
    the step history, every per-task score of every evaluation, and every journaled call."""
    state = json.loads((run / "checkpoint.json").read_text())
    calls = sorted(json.dumps([e["key"], e["completion"]], sort_keys=True)
                   for p in run.glob("**/calls.jsonl")
                   for e in map(json.loads, p.read_text().splitlines()))
    return {**comparable(run), "per_task": state["scores"], "calls": calls}


def scored_answers(run: Path) -> list[str]:
    return [json.loads(line)["answer"] for p in run.glob("**/rollouts.jsonl")
            for line in p.read_text().splitlines()]


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], int]:
    folder = tmp_path_factory.mktemp("clean") / "http"
    summary, requests = http_run(folder, None)
    # A toy world where training learns: the best skill beats the initial one on test.
    assert summary["test"]["best"]["hard"] > summary["test"]["initial"]["hard"]
    assert summary["models"]["target"]["retries"] == summary["models"]["optimizer"]["retries"] == 0
    return outcome(folder / "run"), requests


@pytest.mark.parametrize("rate", FAULT_RATES, ids=lambda r: f"{r:.0%}")
def test_a_run_through_a_faulty_endpoint_ends_as_a_clean_one(
        clean: tuple[dict[str, Any], int], tmp_path: Path, rate: float) -> None:
    expected, clean_requests = clean
    faults = SeededFaults(rate, FAULT_SEED)
    summary, requests = http_run(tmp_path / "faulty", faults)
    run = tmp_path / "faulty" / "run"
    injected = sum(faults.injected.values())
    assert set(faults.injected) == set(KINDS) and injected >= 0.8 * rate * clean_requests
    assert min(faults.truncated_limits) >= 64  # 1 completion token of 64 or more: bogus
    # Every fault cost one retry and one request, and nothing else did.
    retries = sum(summary["models"][r]["retries"] for r in ("target", "optimizer"))
    assert (retries, requests) == (injected, clean_requests + injected)
    # No fault was scored or journaled, and the run ended as the clean one did.
    assert not faults.never_scored & set(scored_answers(run))
    journaled = [json.loads(c)[1] for c in outcome(run)["calls"]]
    assert not [c for c in journaled if c["text"] in faults.never_scored]
    assert not [c for c in journaled if c["finish_reason"] == "length"]
    assert outcome(run) == expected
    TALLY.faults.update(faults.injected)
    TALLY.fault_runs.append(f"{rate:.0%}: {injected} of {requests} requests")


# ============================================================================= kills

KILLS = 100 if HEAVY else 20
KILL_SEED = 7
DELAY = 0.003  # seconds per scripted call, so that the run spends its time inside stages


def kill_config(folder: Path) -> Path:
    model = {role: {"backend": "scripted", "function": f"toy:{role}", "delay": DELAY}
             for role in ("target", "optimizer")}
    return toy_config(folder, model=model, train={"num_epochs": 2, "batch_size": 100,
                                                   "steps_per_epoch": 2, "seed": 7})


def scope_of(run: Path, answered: int) -> str:
    """Where a run that had answered ``answered`` calls was (the initial evaluation, a step,
    the final evaluation), from the order in which ``run`` wrote its journals."""
    for path in sorted(run.glob("**/calls.jsonl"), key=lambda p: p.stat().st_mtime_ns):
        answered -= path.read_bytes().count(b"\n")
        if answered < 0:
            return str(path.parent.relative_to(run))
    return "after the last call"


def instant(i: int, total: int) -> tuple[int, float]:
    """The ``i``-th kill's instant: once this many calls are answered, after a pause of up to
    two calls' delay. Stratified (one in each 1/KILLS of the run), so they cover all of it; the
    last leaves a few calls and the summary still to do."""
    draw = random.Random(f"{KILL_SEED}:{i}")
    return 1 + int((i + draw.random()) * (total - 3) / KILLS), draw.uniform(0, 2 * DELAY)


@dataclass(frozen=True)
class Killed:
    answered: int  # calls journaled when the kill landed
    status: int | None  # the killed process's exit status
    finished_anyway: bool  # summary.json was there after the kill
    resumed: subprocess.CompletedProcess[str]
    result: dict[str, Any] | None


def kill_and_resume(cfg: Path, out: Path, i: int, total: int) -> Killed:
    answered, pause = instant(i, total)
    args = ["train", str(cfg), "--out", str(out)]
    proc = subprocess.Popen([sys.executable, "-m", "skillgrad.cli", *args], env=_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while journal_lines(out) < answered and proc.poll() is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"the run made no progress towards {answered} calls")
            time.sleep(0.002)
        time.sleep(pause)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        status = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    killed_at = journal_lines(out)
    finished = (out / "summary.json").exists()
    resumed = cli(*args, cwd=out.parent)
    result = comparable(out) if resumed.returncode == 0 else None
    return Killed(killed_at, status, finished, resumed, result)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], int]:
    folder = tmp_path_factory.mktemp("kills")
    cfg = kill_config(folder)
    done = cli("train", str(cfg), "--out", "reference", cwd=folder)
    assert done.returncode == 0, done.stderr
    run = folder / "reference"
    expected = comparable(run)
    assert [r["decision"] for r in expected["history"]].count("accept_new_best") >= 2
    return cfg, expected, journal_lines(run)


@pytest.fixture(scope="module")
def kills(uninterrupted: tuple[Path, dict[str, Any], int],
          tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cfg, _, total = uninterrupted
    base = tmp_path_factory.mktemp("killed")

    def job(i: int) -> Callable[[], Killed]:
        return lambda: kill_and_resume(cfg, base / f"run{i:03d}", i, total)

    return in_parallel({str(i): job(i) for i in range(KILLS)})


@pytest.mark.parametrize("i", range(KILLS))
def test_kill_9_at_a_seeded_instant_then_resume(
        uninterrupted: tuple[Path, dict[str, Any], int], kills: dict[str, Any], i: int) -> None:
    cfg, expected, _ = uninterrupted
    killed: Killed = result_of(kills, str(i))
    assert killed.status == -signal.SIGKILL, f"the run ended before its instant ({killed})"
    assert not killed.finished_anyway
    assert killed.resumed.returncode == 0, killed.resumed.stderr
    assert killed.result == expected
    TALLY.kill_scopes[scope_of(cfg.parent / "reference", killed.answered)] += 1


def test_the_kill_instants_cover_the_whole_run(
        uninterrupted: tuple[Path, dict[str, Any], int]) -> None:
    """Every scope of the run (the initial evaluation, each step, the final evaluation) holds
    an instant: the kills are not bunched in one stage."""
    cfg, _, total = uninterrupted
    run = cfg.parent / "reference"
    scopes = {str(p.parent.relative_to(run)) for p in run.glob("**/calls.jsonl")}
    hit = {scope_of(run, instant(i, total)[0]) for i in range(KILLS)}
    assert len(scopes) >= 6 and hit == scopes, sorted(scopes - hit)


# ============================================================================= bad inputs

CORPUS = yaml.safe_load((TESTS / "fixtures" / "bad_inputs" / "corpus.yaml").read_text())
PR_CAPBSET_DROP = 24
BYPASS_PERMISSIONS = (1, 2, 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER


class NotOneLine(AssertionError):
    """The refusal was right, but stderr held more than its one error line (and, for a run that
    stopped, the line saying how to resume)."""


def _respect_permissions() -> None:
    """In a child run as root: drop the capabilities that bypass file permissions."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in BYPASS_PERMISSIONS:
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _can_respect_permissions() -> bool:
    try:
        subprocess.run(["true"], preexec_fn=_respect_permissions, check=True)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def _chmod_tree(root: Path, mode: int) -> None:
    for folder in [root, *(p for p in root.rglob("*") if p.is_dir())]:
        folder.chmod(mode)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` but the lock (which holds the PID of its last holder)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "run.lock"}


@dataclass(frozen=True)
class Refusal:
    proc: subprocess.CompletedProcess[str]
    run_before: dict[str, bytes]
    run_after: dict[str, bytes]
    shown: subprocess.CompletedProcess[str] | None  # `show` of the run it left, if any
    new_run: dict[str, Any] | None  # the checkpoint of a run the command started


def refuse(case: dict[str, Any], base: Path, folder: Path) -> Refusal:
    """Runs one case in ``folder`` (made from ``base``: config, data, skill, finished run)."""
    folder.mkdir()
    for name in ("config.yaml", "common.yaml", "toy.jsonl", "toy_skill.md"):
        shutil.copy(base / name, folder / name)
    if case.get("run"):
        shutil.copytree(base / "run", folder / "run")
    for name, content in (case.get("files") or {}).items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())
    make_the_rest(case, folder)
    before = snapshot(folder / "run")
    read_only = case.get("read_only")
    if read_only:
        (folder / read_only).mkdir(exist_ok=True)
        _chmod_tree(folder / read_only, 0o555)
    try:
        proc = cli(*case["args"], cwd=folder,
                   preexec=_respect_permissions if read_only else None)
    finally:
        if read_only:
            _chmod_tree(folder / read_only, 0o755)
    args = case["args"]
    out = folder / args[args.index("--out") + 1] if "--out" in args else None
    shown: subprocess.CompletedProcess[str] | None = None
    if case.get("run"):
        shown = cli("show", "run", cwd=folder)
    elif case.get("stops") and out is not None:
        shown = cli("show", str(out), cwd=folder)
    checkpoint = out / "checkpoint.json" if out is not None and args[0] == "train" else None
    new_run = (json.loads(checkpoint.read_text()) if checkpoint and checkpoint.is_file()
               and not case.get("run") else None)
    return Refusal(proc, before, snapshot(folder / "run"), shown, new_run)


def make_the_rest(case: dict[str, Any], folder: Path) -> None:
    """What a case's ``files`` cannot hold: deep nesting, JSON keys set in a file that is
    there, named pipes and symbolic links (see the corpus's header)."""
    for name, (text, depth) in (case.get("nested") or {}).items():
        (folder / name).write_text(text.replace("NEST", "[" * depth + "]" * depth))
    for name, keys in (case.get("patch") or {}).items():
        data = json.loads((folder / name).read_text())
        (folder / name).write_text(json.dumps({**data, **keys}, indent=2))
    for name in case.get("fifos") or []:
        os.mkfifo(folder / name)
    for name, target in (case.get("links") or {}).items():
        path = folder / name
        if os.path.lexists(path):
            path.unlink()
        path.symlink_to(target)


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("bad")
    cfg = toy_config(base, train={"num_epochs": 1, "steps_per_epoch": 2, "batch_size": 100,
                                  "seed": 7})
    common = yaml.safe_load(cfg.read_text())
    del common["model"]
    (base / "common.yaml").write_text(yaml.safe_dump(common))
    done = cli("train", "config.yaml", "--out", "run", cwd=base)
    assert done.returncode == 0, done.stderr
    folders = tmp_path_factory.mktemp("cases")

    def job(case: dict[str, Any]) -> Callable[[], Refusal]:
        return lambda: refuse(case, base, folders / case["id"])

    # A child that drops capabilities runs code between fork and exec, which is only safe
    # while no other thread runs: those cases go first, one at a time.
    confined = [c for c in CORPUS if c.get("read_only")] if _can_respect_permissions() else []
    found = {c["id"]: captured(job(c)) for c in confined}
    return {**found, **in_parallel({c["id"]: job(c) for c in CORPUS if not c.get("read_only")})}


def check_error_lines(proc: subprocess.CompletedProcess[str], case: dict[str, Any]) -> None:
    """One error line saying what it should, and nothing else on stderr; for a run that
    started and stopped, its progress lines, the error line, and the line saying how to
    resume. Raises :class:`NotOneLine` when only the number of lines is wrong."""
    assert case["says"] in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    if case.get("stops"):
        ok = (len(errors) == 1 and len(lines) == errors[0] + 2
              and "resume with: skillgrad train" in lines[-1])
    else:
        ok = errors == [0] and len(lines) == 1
    if not ok or case["says"] not in lines[errors[0]]:
        TALLY.not_one_line.append(case["id"])
        raise NotOneLine(f"stderr is not {'two lines' if case.get('stops') else 'one line'}: "
                         f"{proc.stderr[-2000:]!r}")
    TALLY.refused[case["id"].split("-")[0]] += 1


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in CORPUS])
def test_a_bad_input_is_refused_in_one_line(case: dict[str, Any], refusals: dict[str, Any]
                                            ) -> None:
    if case["id"] not in refusals:
        pytest.skip("running as root and cannot drop CAP_DAC_OVERRIDE")
    found: Refusal = result_of(refusals, case["id"])
    proc = found.proc
    assert proc.returncode == case.get("code", 2), proc.stderr
    assert "Traceback" not in proc.stderr
    assert found.run_after == found.run_before  # a run directory there before is unchanged
    if found.shown is not None and case.get("show") == "refuses":
        assert found.shown.returncode == 2 and case["says"] in found.shown.stderr
    elif found.shown is not None:
        assert found.shown.returncode == 0, found.shown.stderr
        assert "best step: 0" in found.shown.stdout or case.get("run"), found.shown.stdout
    if case.get("stops"):  # a run that stopped kept the initial skill, and says why
        assert found.new_run is not None
        assert found.new_run["best_hash"] == found.new_run["initial_hash"]
    else:
        assert found.new_run is None  # refused before any run began
    check_error_lines(proc, case)


def test_the_corpus_holds_every_kind_of_bad_input() -> None:
    ids = [c["id"] for c in CORPUS]
    kinds = Counter(i.split("-")[0] for i in ids)
    assert len(ids) == len(set(ids)) and len(ids) >= 40
    assert set(kinds) == {"config", "data", "skill", "cli", "reply", "fs"}
    assert min(kinds.values()) >= 6, kinds
    assert all(c["says"] and set(c) <= {"id", "args", "says", "files", "code", "stops", "run",
                                        "read_only", "show", "links", "fifos", "nested",
                                        "patch"} for c in CORPUS)


# ============================================================================= escapes


@pytest.mark.parametrize("name", list(ESCAPES))
def test_an_escape_from_the_code_sandbox_is_refused(name: str, tmp_path: Path) -> None:
    reason = unavailable(name)
    if reason:
        pytest.skip(reason)
    TALLY.escapes_tried.append(name)
    attempt = ESCAPES[name](tmp_path)
    if attempt.refused:
        TALLY.escapes_refused.append(name)
    assert attempt.refused, attempt.evidence
