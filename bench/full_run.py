"""A whole training run against its critical-path bound.

A complete training (three epochs of two steps, slow update and meta skill on) runs against
one loopback OpenAI-compatible endpoint (``skillgrad.testing.FakeOpenAIServer``, in a process
of its own, as a real endpoint would be) that takes a fixed 100 ms per request and serves both
roles through the real ``openai_compatible`` backend and ``ModelClient``. The target is the
library's scripted reader (it knows the gold answers of the selection and test tasks and of
half the training tasks, and phrases them loosely until the skill has its two format rules);
the optimizer is the library's scripted optimizer, whose analyst proposes the reader's format
rules and, once they are in, a new harmless rule at every step. So every step proposes and
the gate both accepts (the format rules) and rejects (the harmless rules, the slow updates).
Both roles share the endpoint's concurrency limit C; rollouts run on C threads, analysts and
merges on ``gradient.analyst_workers`` (4). The run is made once per C and must end with the
same skills and decisions at every C.

    python bench/full_run.py [--concurrency 1 4 16] [--latency 0.1] [--epochs 3]

Every attempt sent to the endpoint is recorded through the client's observer: its role,
stage and kind, the journal of its scope (the initial evaluation, a step, an epoch's update,
the final evaluation) and the fan-out items it ran in (``skillgrad.parallel.frames``). The
bound is computed from that call graph alone, each call taking the endpoint's latency L:

    bound = sum over scopes of  sum over the scope's phases of  T(phase)

Scopes run one after the other: each starts from the skills the one before checkpointed (a
step's rollouts use the skill its predecessor's gate chose). Inside a scope the calls form
units, a fan-out (the rollouts of a batch, the analysts of a step, the merges of one level)
or a call made on its own (the final merge, rank, learning rate, meta skill, slow update), in
the order the scope makes them. Each unit waits for the one before, because its input is the
other's output (reflect reads the batch's rollouts, a merge level the level below, the
ranking the merged edits, the learning rate the ranking, the gate the candidate, the slow
update the meta skill's new notes), except that consecutive units of a stage whose inputs are
all known at once form one phase: the longitudinal rollouts of the previous and the current
skill, the gate's selection evaluations (the current and the candidate skill), the test
evaluations of the initial, best and final skill. Two waits are kept that are coarser than
the data strictly needs: reflect waits for the whole batch's rollouts and a merge level for
the whole level below (a minibatch's analysts need only its own tasks, a merge group only its
own patches once those before it are known). With rollout workers = C the first costs this
run nothing, the endpoint being full until the batch's last round; the second could save a
round where the analysts' last round leaves slots free. Nor are the failure and the success
analysts' merges credited with overlapping (this run's success analysts propose nothing).

    T(phase) = L x max( ceil(n_e / C_e) for each endpoint e,   n_e calls on it, C_e its limit
                        S(jobs, w),                            w the phase's threads
                        the longest job )

A job is one item of a fan-out, its calls in sequence (an analyst asked again after a refused
proposal is one job of two calls); a call on its own is a job. w is the threads the phase's
fan-outs were given (``execution.rollout_workers``, ``gradient.analyst_workers``; the most of
them when units share a phase); S(jobs, w) is the sum of the ceil(J / w) shortest of its J
jobs' lengths, since some thread runs at least that many of them one after the other
(ceil(J / w) for jobs of one call). The bound counts no time outside the endpoint: wall / bound
is the trainer's own work, the client layer, the SDK and any barrier the implementation keeps
beyond these. "endpoint ms / call" is the endpoint's own mean time per request (its body read
to its answer sent, L and its HTTP handling), and the column after it wall against the bound's
rounds at that time per round.

The second table splits the wall time of the largest C: per stage, the calls, the bound and
the span its phases took (first call sent to last answer), and the time with no call in
flight between phases (the trainer's own work: mostly run-directory writes).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from skillgrad import parallel
from skillgrad.models.base import ChatModel
from skillgrad.models.client import CallTiming, ModelClient
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.testing import (
    FakeOpenAIServer,
    http_responder,
    make_reader,
    reader_failures,
    scripted_optimizer,
)

SKILL = "# Company facts\n\nAnswer the question about the company from its description.\n"
FOUNDERS = ("Ilse Fenthorpe", "Marek Odell", "Ruth Calloway", "Tomas Brink", "Ada Quill")
TOWNS = ("Falwell", "Selby", "Orrin", "Maddox", "Kestrel Bay")
SIZES = {"train": 16, "val": 8, "test": 8}
# Phases whose consecutive units may run at once (see the module docstring).
TOGETHER = frozenset({"longitudinal", "eval_val", "eval_test"})


# ----------------------------------------------------------------------------- the world


def record(split: str, i: int) -> dict[str, Any]:
    """One QA record about a made-up company."""
    name = f"{split.capitalize()} Works {i}"
    year, staff = 1850 + (i * 7) % 170, 10 + (i * 37) % 9000
    founder, town = FOUNDERS[i % len(FOUNDERS)], TOWNS[(i // 5) % len(TOWNS)]
    context = (f"{name} is a maker of kitchen ceramics founded in {year} by {founder} in the "
               f"town of {town}, where it employs {staff} people.")
    kind, question, answer = (
        ("year", f"In what year was {name} founded?", str(year)),
        ("name", f"Who founded {name}?", founder),
        ("count", f"How many people does {name} employ?", str(staff)),
    )[i % 3]
    return {"id": f"{split}-{i:03d}", "question": question, "answer": [answer],
            "context": context, "kind": kind}


def write_world(folder: Path) -> Path:
    """The data set, the initial skill and ``gold.jsonl``, what the reader knows: every
    selection and test task, and the even training tasks (the odd ones fail whatever the
    skill says, so every step has failures to reflect on). Returns the gold file."""
    data = folder / "data"
    data.mkdir(parents=True)
    known = []
    for split, n in SIZES.items():
        rows = [record(split, i) for i in range(n)]
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        known += [r for i, r in enumerate(rows) if split != "train" or i % 2 == 0]
    (folder / "gold.jsonl").write_text("".join(json.dumps(r) + "\n" for r in known))
    (folder / "skill.md").write_text(SKILL)
    return folder / "gold.jsonl"


def analyst(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    """The reader's analyst; once it has nothing left to propose, a harmless rule named after
    the failures shown, so that every step has a new candidate for the gate."""
    out = reader_failures(skill, tasks, prompt)
    if out["edits"]:
        return out
    tag = hashlib.sha1(tasks.encode()).hexdigest()[:8]
    return {"reasoning": "the answers were not in the reader's memory", "edits": [
        {"op": "append", "anchor": "", "content": f"Check the answer once more (note {tag}).",
         "support": 1, "rationale": "a second look"}]}


def serve(conn: Connection, gold: str, latency: float) -> None:
    """The endpoint's process: serve until told to stop; asked, hand over the (start, end) of
    each request answered since the last time."""
    responder = http_responder(make_reader(gold, Path(gold).parent), scripted_optimizer(analyst))
    with FakeOpenAIServer(responder=responder, latency=latency) as server:
        conn.send(server.url)
        while conn.recv() == "served":
            conn.send(server.take_served())


class Endpoint:
    """The loopback endpoint in a process of its own (its HTTP handling then does not compete
    with the trainer for the interpreter lock, as a real endpoint's would not)."""

    def __init__(self, gold: Path, latency: float) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, theirs = context.Pipe()
        self._process = context.Process(target=serve, args=(theirs, str(gold), latency),
                                        daemon=True)
        self._process.start()
        self.url: str = self._conn.recv()

    def served(self) -> list[tuple[float, float]]:
        """(start, end) of each request answered since the last call."""
        self._conn.send("served")
        found: list[tuple[float, float]] = self._conn.recv()
        return found

    def stop(self) -> None:
        self._conn.send("stop")
        self._process.join(10)


def write_config(folder: Path, url: str, concurrency: int, epochs: int) -> Path:
    role = {"backend": "openai_compatible", "base_url": url, "model": "fake",
            "concurrency": concurrency, "max_retries": 0, "timeout": 60}
    cfg = {
        "model": {"target": role, "optimizer": role},
        "env": {"name": "qa", "split_mode": "split_dir", "split_dir": "data",
                "skill_init": "skill.md"},
        "train": {"num_epochs": epochs, "batch_size": 8, "steps_per_epoch": 2, "seed": 5},
        "gradient": {"minibatch_size": 2, "merge_batch_size": 2, "analyst_workers": 4},
        "optimizer": {"learning_rate": 1, "min_learning_rate": 1, "lr_scheduler": "constant",
                      "use_slow_update": True, "use_meta_skill": True,
                      "slow_update_samples": 8},
        "evaluation": {"gate_test": "strict"},
        "execution": {"rollout_workers": concurrency},
    }
    path = folder / f"config-c{concurrency}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


# ----------------------------------------------------------------------------- the call graph


@dataclass(frozen=True)
class Call:
    """One recorded attempt. ``frames``: the fan-out items it ran in, outermost first, each
    (fan-out id, threads of that fan-out, item index); ``scope``: its journal's folder."""

    scope: str
    stage: str
    endpoint: str
    frames: tuple[tuple[int, int, int], ...] = ()
    kind: str | None = None
    started: float = 0.0
    ended: float = 0.0


class Recorder:
    """The clients' observer: every attempt with the fan-out frames it ran in."""

    def __init__(self, run_dir: Path, endpoints: dict[str, str]) -> None:
        self.run_dir = run_dir
        self.endpoints = endpoints  # role -> endpoint
        self.timings: list[tuple[CallTiming, tuple[parallel.Frame, ...]]] = []
        self._lock = threading.Lock()

    def __call__(self, timing: CallTiming) -> None:
        here = parallel.frames()
        with self._lock:
            self.timings.append((timing, here))

    def calls(self) -> list[Call]:
        ids: dict[int, int] = {}  # id(FanOut) -> its number; the recorded frames keep it alive
        out = []
        for t, frames in sorted(self.timings, key=lambda x: x[0].started):
            scope = str(t.journal.parent.relative_to(self.run_dir)) if t.journal else "-"
            keys = tuple((ids.setdefault(id(f.fan_out), len(ids)), f.fan_out.workers, f.index)
                         for f in frames)
            out.append(Call(scope, t.stage, self.endpoints[t.role], keys, t.kind, t.started,
                            t.ended))
        return out


# ----------------------------------------------------------------------------- the bound


@dataclass
class Phase:
    """Calls the semantics let run at once (see the module docstring)."""

    scope: str
    stage: str
    calls: list[Call] = field(default_factory=list)
    rounds: int = 0  # the bound of the phase, in calls of latency L one after the other

    @property
    def span(self) -> float:
        return max(c.ended for c in self.calls) - min(c.started for c in self.calls)


def units(calls: Sequence[Call], depth: int = 0) -> list[list[Call]]:
    """``calls`` (of one scope, or of one job) as units in the order they were made: the calls
    of one fan-out at this depth together, and each call made outside one alone."""
    out: list[list[Call]] = []
    where: dict[int, list[Call]] = {}
    for call in sorted(calls, key=lambda c: c.started):
        if len(call.frames) <= depth:
            out.append([call])
            continue
        fan = call.frames[depth][0]
        if fan not in where:
            where[fan] = []
            out.append(where[fan])
        where[fan].append(call)
    return out


def jobs(unit: Sequence[Call], depth: int) -> list[list[Call]]:
    """The items of a fan-out unit (calls grouped by their item index), or the one call."""
    if len(unit[0].frames) <= depth:
        return [list(unit)]
    by_item: dict[int, list[Call]] = {}
    for call in unit:
        by_item.setdefault(call.frames[depth][2], []).append(call)
    return list(by_item.values())


def job_rounds(job: Sequence[Call], depth: int) -> int:
    """A job's length in calls one after the other: its own calls in sequence, a fan-out it
    ran inside it as that fan-out's bound on its own threads."""
    if all(len(c.frames) <= depth + 1 for c in job):
        return len(job)
    return sum(phase_rounds([u], depth + 1, {}) for u in units(job, depth + 1))


def phase_rounds(group: Sequence[Sequence[Call]], depth: int, limits: dict[str, int]) -> int:
    """T(phase) / L for the units of ``group`` (the module docstring's formula)."""
    lengths: list[int] = []
    threads = 1
    for unit in group:
        found = jobs(unit, depth)
        lengths += [job_rounds(j, depth) for j in found]
        if len(unit[0].frames) > depth:
            threads = max(threads, unit[0].frames[depth][1])
    by_endpoint: dict[str, int] = {}
    for unit in group:
        for call in unit:
            by_endpoint[call.endpoint] = by_endpoint.get(call.endpoint, 0) + 1
    endpoint = max((math.ceil(n / limits[e]) for e, n in by_endpoint.items() if e in limits),
                   default=0)
    per_thread = math.ceil(len(lengths) / threads)
    return max(endpoint, sum(sorted(lengths)[:per_thread]), max(lengths))


def phases(calls: Sequence[Call], limits: dict[str, int]) -> list[Phase]:
    """The run's phases, scope by scope in the order the scopes ran, each with its bound."""
    scopes: dict[str, list[Call]] = {}
    for call in sorted(calls, key=lambda c: c.started):
        scopes.setdefault(call.scope, []).append(call)
    out: list[Phase] = []
    for scope, inside in scopes.items():
        groups: list[list[list[Call]]] = []
        for unit in units(inside):
            stage = unit[0].stage
            if groups and stage in TOGETHER and groups[-1][0][0].stage == stage:
                groups[-1].append(unit)
            else:
                groups.append([unit])
        for group in groups:
            out.append(Phase(scope, group[0][0].stage, [c for u in group for c in u],
                             phase_rounds(group, 0, limits)))
    return out


def bound(calls: Sequence[Call], latency: float, limits: dict[str, int]) -> float:
    """The critical-path bound of the run whose calls are ``calls``, in seconds."""
    return latency * sum(p.rounds for p in phases(calls, limits))


# ----------------------------------------------------------------------------- the run


@dataclass
class Measured:
    wall: float
    calls: list[Call]
    phases: list[Phase]
    bound: float
    served: float  # the endpoint's mean time per request (body read to answer sent)
    outcome: dict[str, Any]

    @property
    def rounds(self) -> int:
        return sum(p.rounds for p in self.phases)


def run(folder: Path, endpoint: Endpoint, concurrency: int, epochs: int,
        latency: float) -> Measured:
    from skillgrad.config import load_config
    from skillgrad.trainer import build_trainer

    url, out = endpoint.url, folder / f"run-c{concurrency}"
    trainer = build_trainer(load_config(write_config(folder, url, concurrency, epochs)), out)
    recorder = Recorder(out, {"target": url, "optimizer": url})
    clients: list[ModelClient] = [trainer.target, trainer.optimizer]
    for client in clients:
        warm_up(client.model, concurrency)
        client.observer = recorder
    endpoint.served()  # not the warm-up's
    started = time.perf_counter()
    trainer.fit()
    wall = time.perf_counter() - started
    served = endpoint.served()
    calls = recorder.calls()
    limits = {url: concurrency}
    if len(served) != len(calls):
        raise SystemExit(f"the endpoint answered {len(served)} requests, the clients saw "
                         f"{len(calls)}")
    return Measured(wall, calls, phases(calls, limits), bound(calls, latency, limits),
                    sum(end - start for start, end in served) / len(served), outcome(out))


def warm_up(model: ChatModel, concurrency: int) -> None:
    """Open the backend's ``concurrency`` connections before the run, as a server that has
    been up a while has them (straight to the backend: no journal, meter or observer sees it)."""
    hello = ChatRequest(messages=(Message(role="user", content="Question: warm-up"),),
                        max_tokens=8)
    parallel.fan_out(lambda _i: model.complete(hello), range(concurrency), concurrency, "warm")


def outcome(run_dir: Path) -> dict[str, Any]:
    """What must not depend on the concurrency: the skills, every decision, the scores."""
    checkpoint = json.loads((run_dir / "checkpoint.json").read_text())
    decisions = [json.loads(p.read_text())["decision"]
                 for p in sorted((run_dir / "steps").glob("*/record.json"))]
    slow = [json.loads(p.read_text())["slow_update"]["decision"]
            for p in sorted((run_dir / "epochs").glob("*/epoch_update.json"))]
    return {"best": (run_dir / "best_skill.md").read_text(),
            "current": (run_dir / "current_skill.md").read_text(),
            "decisions": decisions, "slow_updates": slow,
            "scores": checkpoint.get("scores"), "meta_skill": checkpoint.get("meta_skill")}


def decisions_text(result: dict[str, Any]) -> str:
    def counted(decisions: list[str]) -> str:
        return ", ".join(f"{decisions.count(d)} {d}" for d in sorted(set(decisions)))

    return (f"steps {counted(result['decisions'])}; slow updates "
            f"{counted(result['slow_updates'])}")


def breakdown(measured: Measured, latency: float) -> Table:
    """Per stage: calls, bound, span of its phases; and the time between phases."""
    table = Table(title="where the time goes (largest concurrency)")
    for col in ("stage", "calls", "bound s", "span s", "span / bound"):
        table.add_column(col, justify="right")
    rows: dict[str, list[float]] = {}
    for p in measured.phases:
        row = rows.setdefault(p.stage, [0, 0.0, 0.0])
        row[0] += len(p.calls)
        row[1] += p.rounds * latency
        row[2] += p.span
    for stage, (n, b, s) in rows.items():
        table.add_row(stage, str(int(n)), f"{b:.2f}", f"{s:.2f}", f"{s / b:.3f}")
    between = measured.wall - sum(p.span for p in measured.phases)
    table.add_row("between phases", "", "", f"{between:.2f}", "")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    table = Table(title=f"full run: {args.epochs} epochs of 2 steps, slow update and meta skill, "
                  f"one loopback endpoint with {args.latency * 1000:.0f} ms per request")
    for col in ("concurrency", "calls", "rounds", "wall s", "bound s", "wall / bound",
                "endpoint ms / call", "wall / (rounds x that)"):
        table.add_column(col, justify="right")
    results: list[Measured] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        endpoint = Endpoint(write_world(folder), args.latency)
        try:
            for c in args.concurrency:
                m = run(folder, endpoint, c, args.epochs, args.latency)
                results.append(m)
                table.add_row(str(c), str(len(m.calls)), str(m.rounds), f"{m.wall:.2f}",
                              f"{m.bound:.2f}", f"{m.wall / m.bound:.3f}",
                              f"{m.served * 1000:.1f}", f"{m.wall / (m.rounds * m.served):.3f}")
        finally:
            endpoint.stop()
    console = Console(width=120)
    console.print(table)
    if any(r.outcome != results[0].outcome for r in results):
        raise SystemExit("the runs at different concurrency ended differently")
    console.print(f"every run: {decisions_text(results[0].outcome)}; the same skills and scores")
    console.print(breakdown(results[-1], args.latency))


if __name__ == "__main__":
    main()
