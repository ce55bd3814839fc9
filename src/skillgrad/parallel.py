"""Fan-out of independent model calls (the rollouts of a batch, the analysts of a step, the
merges of one level), in order, on a bounded number of threads.

Calls that are waiting for an answer written by someone else (the handoff backend) do not stop
their siblings: every call of the fan-out gets the chance to say what it needs, and the waits
are reported together, so one round of answers covers the whole stage. Any other error stops
the fan-out and propagates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from skillgrad.errors import AnswersPending

T = TypeVar("T")
R = TypeVar("R")


def fan_out(fn: Callable[[T], R], items: Sequence[T], workers: int, name: str) -> list[R]:
    """``[fn(x) for x in items]`` on up to ``workers`` threads; results in item order."""
    pending: list[AnswersPending] = []

    def run(item: T) -> R | None:
        try:
            return fn(item)
        except AnswersPending as exc:
            pending.append(exc)
            return None

    if workers <= 1 or len(items) <= 1:
        results = [run(x) for x in items]
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name) as pool:
            results = list(pool.map(run, items))
    if pending:
        raise AnswersPending.combine(pending)
    return results  # type: ignore[return-value]  # no None is left once nothing is pending
