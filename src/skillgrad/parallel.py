"""Fan-out of independent model calls (the rollouts of a batch, the analysts of a step, the
merges of one level), in order, on a bounded number of threads.

Calls that are waiting for an answer written by someone else (the handoff backend) do not stop
their siblings: every call of the fan-out gets the chance to say what it needs, and the waits
are reported together, so one round of answers covers the whole stage. Any other error stops
the fan-out and propagates.

Code running inside a fan-out can ask :func:`frames` which fan-outs it runs in, and as which
item: an observer of model calls tells the siblings of one fan-out from calls in sequence by
it. The frames change nothing a fan-out computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from skillgrad.errors import AnswersPending

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True, eq=False)
class FanOut:
    """One call of :func:`fan_out` (equal only to itself): its name, how many items it had and
    the threads it was given (fewer run when there are fewer items)."""

    name: str
    items: int
    workers: int


@dataclass(frozen=True)
class Frame:
    """Item ``index`` of ``fan_out``."""

    fan_out: FanOut
    index: int


_FRAMES: ContextVar[tuple[Frame, ...]] = ContextVar("skillgrad_fan_out_frames", default=())


def frames() -> tuple[Frame, ...]:
    """The fan-outs the calling code runs inside, the outermost first; ``()`` outside any."""
    return _FRAMES.get()


def fan_out(fn: Callable[[T], R], items: Sequence[T], workers: int, name: str) -> list[R]:
    """``[fn(x) for x in items]`` on up to ``workers`` threads; results in item order."""
    pending: list[AnswersPending] = []
    threads = 1 if workers <= 1 or len(items) <= 1 else min(workers, len(items))
    here, outer = FanOut(name, len(items), max(workers, 1)), _FRAMES.get()

    def run(index: int, item: T) -> R | None:
        token = _FRAMES.set((*outer, Frame(here, index)))
        try:
            return fn(item)
        except AnswersPending as exc:
            pending.append(exc)
            return None
        finally:
            _FRAMES.reset(token)

    if threads == 1:
        results = [run(i, x) for i, x in enumerate(items)]
    else:
        with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name) as pool:
            results = list(pool.map(run, range(len(items)), items))
    if pending:
        raise AnswersPending.combine(pending)
    return results  # type: ignore[return-value]  # no None is left once nothing is pending
