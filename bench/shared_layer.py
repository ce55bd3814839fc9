"""Overhead of the shared model layer (SDK, retries wrapper, limits, metering, journal).

A rollout stage of N tasks runs against a loopback OpenAI-compatible endpoint that takes a
fixed 100 ms per request, through the real ``openai_compatible`` backend and ``ModelClient``,
with the endpoint's concurrency limit set to C and C rollout workers. The bound set by the
concurrency limit is ceil(N / C) x 100 ms (rounds of C calls); wall / bound is the layer's
overhead, and (wall - bound) / rounds its cost per round.

    python bench/shared_layer.py [--tasks 64] [--latency 0.1] [--concurrency 1 4 16]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from skillgrad.envs.qa import QAEnvironment
from skillgrad.models.client import CallJournal, ModelClient
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.models.openai_compat import OpenAICompatibleBackend, OpenAICompatibleOptions
from skillgrad.records import Task
from skillgrad.stages.rollout import rollout
from skillgrad.testing import FakeOpenAIServer


def tasks(n: int) -> list[Task]:
    return [Task(id=f"t{i}", prompt=f"Context:\nItem {i} costs {i * 3} coins.\n\nQuestion: "
                 f"What does item {i} cost?", reference={"answers": [str(i * 3)]})
            for i in range(n)]


def run(n: int, latency: float, concurrency: int, journal_dir: Path) -> tuple[float, float]:
    batch = tasks(n)
    env = QAEnvironment({"train": batch})

    def responder(body: dict) -> str:  # type: ignore[type-arg]
        question = body["messages"][-1]["content"]
        return str(int(question.split("item ")[-1].split(" ")[0]) * 3)

    with FakeOpenAIServer(responder=responder, latency=latency) as server:
        options = OpenAICompatibleOptions(base_url=server.url, model="fake", timeout=30)
        model = OpenAICompatibleBackend.create(options, Path("."))
        client = ModelClient(model, "target", concurrency=concurrency, max_retries=0)
        # A fresh journal: an earlier run's would answer every call without the endpoint.
        client.journal = CallJournal(Path(tempfile.mkdtemp(dir=journal_dir)) / "calls.jsonl")
        model.complete(_warm(batch[0]))  # connection and SDK warm-up, not timed
        started = time.perf_counter()
        results = rollout(env, batch, "Answer with the number only.",
                          client.for_stage("rollout"), workers=concurrency)
        wall = time.perf_counter() - started
    assert all(r.hard == 1.0 for r in results), "the loopback answers should all be right"
    return wall, math.ceil(n / concurrency) * latency


def _warm(task: Task) -> ChatRequest:
    return ChatRequest(messages=(Message(role="user", content=task.prompt),), max_tokens=8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    args = parser.parse_args()
    table = Table(title=f"shared layer: {args.tasks} rollouts, loopback endpoint with "
                  f"{args.latency * 1000:.0f} ms per request")
    for col in ("concurrency", "wall s", "bound s", "wall / bound", "overhead per round ms"):
        table.add_column(col, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        for c in args.concurrency:
            wall, bound = run(args.tasks, args.latency, c, Path(tmp))
            per_call = (wall - bound) / math.ceil(args.tasks / c) * 1000
            table.add_row(str(c), f"{wall:.2f}", f"{bound:.2f}", f"{wall / bound:.3f}",
                          f"{per_call:.1f}")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
