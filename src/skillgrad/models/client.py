"""The shared layer every backend sits behind: the prompt-size guard, retries with backoff, a
concurrency limit per endpoint, metering (calls, tokens, latency, cost, every attempt by its
outcome), budgets, a response cache, and a journal of completed calls.

The journal is what makes a run resumable at any instant: every successful call is appended to
the journal of the current scope (one step, the initial evaluation, the final evaluation)
before its answer is used. When a killed run resumes a step, calls already answered are served
from the journal, so nothing is asked twice and the same replies lead to the same skills.
Failures are never journaled: an infrastructure error is never cached as a result.

A client's optional ``observer`` is told the timing of every attempt sent to its model
(:class:`CallTiming`): what a benchmark of the run's call graph reads. It sees no journaled or
cached answer and changes nothing a call returns or records.
(Over the house limit of ~400 lines: the client layer's parts (meter, journal, limits,
retries) each act on every call, and a call's path through them reads in one module.)
"""

from __future__ import annotations

import json
import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from skillgrad.errors import ConfigError, ModelError, TransientModelError
from skillgrad.files import naming_error
from skillgrad.models.accounting import Budget, BudgetExhausted, Prices
from skillgrad.models.base import ChatModel
from skillgrad.models.limits import PromptTooLarge, check_prompt
from skillgrad.models.messages import ChatRequest, Completion, Usage
from skillgrad.models.store import ResponseCache, request_key

log = logging.getLogger(__name__)

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


def strip_think(text: str) -> str:
    """Remove reasoning blocks (``<think>...</think>``) that reasoning models emit."""
    return _THINK.sub("", text).strip() if "<think>" in text.lower() else text


# ----------------------------------------------------------------------------- metering


# The outcomes an attempt is counted under: answered, a transient failure by its kind (see
# TransientModelError), or a fatal one. Summaries list them in this order.
ATTEMPT_KINDS = ("ok", "rate_limit", "server_error", "timeout", "connection", "bad_reply",
                 "bogus_truncation", "transient", "fatal")


@dataclass
class StageMeter:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cost: float = 0.0
    retries: int = 0
    errors: int = 0
    replayed: int = 0  # served from the journal of a resumed step (paid for before)
    cached: int = 0  # served from the response cache (free: no tokens or cost counted)
    cut_off_dropped: int = 0  # JSON replies given up because they were cut off (ask_json)
    # Every attempt sent to the model, by outcome (ATTEMPT_KINDS): what the endpoint saw.
    attempts: dict[str, int] = field(default_factory=dict)

    def add(self, other: StageMeter) -> None:
        for f in fields(self):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if isinstance(mine, dict):
                for kind, n in theirs.items():
                    mine[kind] = mine.get(kind, 0) + n
            else:
                setattr(self, f.name, mine + theirs)


@dataclass
class Meter:
    """Calls and tokens per (role, stage). Part of the checkpoint, so totals survive resume."""

    stages: dict[str, dict[str, StageMeter]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def entry(self, role: str, stage: str) -> StageMeter:
        return self.stages.setdefault(role, {}).setdefault(stage, StageMeter())

    def record(self, role: str, stage: str, **counts: float) -> None:
        with self._lock:
            e = self.entry(role, stage)
            for name, value in counts.items():
                if not isinstance(getattr(e, name, None), (int, float)):
                    raise ValueError(f"meter: no count named {name!r}")
                setattr(e, name, getattr(e, name) + value)

    def attempt(self, role: str, stage: str, kind: str) -> None:
        """Count one attempt sent to the model and its outcome (one of ATTEMPT_KINDS)."""
        with self._lock:
            attempts = self.entry(role, stage).attempts
            attempts[kind] = attempts.get(kind, 0) + 1

    def totals(self, role: str | None = None) -> StageMeter:
        total = StageMeter()
        for r, stages in self.stages.items():
            if role is None or r == role:
                for e in stages.values():
                    total.add(e)
        return total

    def to_json(self) -> dict[str, Any]:
        return {r: {s: {**vars(e), "attempts": dict(e.attempts)} for s, e in st.items()}
                for r, st in self.stages.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Meter:
        return cls({r: {s: StageMeter(**e) for s, e in st.items()} for r, st in data.items()})


# ----------------------------------------------------------------------------- journal


class CallJournal:
    """Append-only record of completed calls in one scope, keyed by request and occurrence.

    A half-written last line (the process was killed mid-write) is dropped on load.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._recorded: dict[str, list[Completion]] = {}
        self._served: dict[str, int] = {}
        self._roles: dict[str, str] = {}
        if path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) < len(data):
            # Drop the half-written last line now; otherwise the next record would be appended
            # to it, making that record unreadable on the next resume.
            log.warning("%s: dropping a truncated last journal line", self.path)
            with self.path.open("r+b") as fh:
                fh.truncate(len(complete))
        for line in complete.decode("utf-8").splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                log.warning("%s: ignoring a truncated journal line", self.path)
                continue
            completion = Completion.model_validate(entry["completion"])
            self._recorded.setdefault(entry["key"], []).append(completion)
            self._roles[entry["key"]] = str(entry.get("role", ""))

    def __len__(self) -> int:
        return sum(len(v) for v in self._recorded.values())

    def unserved(self, role: str) -> int:
        """Recorded calls of ``role`` not replayed yet: paid for before, and (as long as the
        run repeats itself) about to be replayed."""
        with self._lock:
            return sum(len(done) - self._served.get(key, 0)
                       for key, done in self._recorded.items() if self._roles.get(key) == role)

    def lookup(self, key: str) -> Completion | None:
        """The next recorded answer to this request, if the journal has one left."""
        with self._lock:
            n = self._served.get(key, 0)
            recorded = self._recorded.get(key, [])
            if n >= len(recorded):
                return None
            self._served[key] = n + 1
            return recorded[n]

    def record(self, key: str, entry: dict[str, Any], completion: Completion) -> None:
        line = json.dumps({"key": key, **entry, "completion": completion.model_dump(mode="json")})
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
            except OSError as exc:  # a full disk names no file: say which one
                raise naming_error(exc, self.path) from exc
            self._recorded.setdefault(key, []).append(completion)
            self._served[key] = self._served.get(key, 0) + 1


# ----------------------------------------------------------------------------- observer


@dataclass(frozen=True)
class CallTiming:
    """One attempt sent to a model, as a client's observer is told it: the role, the stage
    it is metered under, the request's kind, the journal of its scope (``None``: none), when
    it took a slot of the endpoint's concurrency limit and when its answer or error came back
    (:func:`time.perf_counter` seconds), and its outcome (one of :data:`ATTEMPT_KINDS`)."""

    role: str
    stage: str
    kind: str | None
    journal: Path | None
    started: float
    ended: float
    outcome: str


CallObserver = Callable[[CallTiming], None]
"""Called in the calling thread after each attempt, outside the endpoint's limit; it must
return quickly and never raise."""


# ----------------------------------------------------------------------------- client


class ModelClient:
    """One role's model behind the prompt-size guard, retries, a concurrency limit, metering,
    a budget, a response cache and the journal.

    ``limit`` is the semaphore of the model's endpoint; pass the same one to every client of
    one endpoint so that they share it (see :class:`EndpointLimits`). The model's window is its
    ``context_tokens`` attribute, named in errors by its ``context_key`` option; a model
    without one gets the hard cap on characters (:mod:`skillgrad.models.limits`).
    ``observer`` (also settable later as the attribute) is told every attempt's timing.
    """

    def __init__(
        self,
        model: ChatModel,
        role: str,
        *,
        concurrency: int = 1,
        max_retries: int = 4,
        retry_base_delay: float = 1.0,
        meter: Meter | None = None,
        sleep: Callable[[float], None] = time.sleep,
        limit: threading.Semaphore | None = None,
        budget: Budget | None = None,
        prices: Prices | None = None,
        cache: ResponseCache | None = None,
        observer: CallObserver | None = None,
    ) -> None:
        self.model = model
        self.role = role
        self.max_retries = max_retries
        self.retry_base_delay = retry_base_delay
        self.meter = meter if meter is not None else Meter()
        self.journal: CallJournal | None = None
        self.budget = budget
        self.prices = prices
        self.cache = cache
        self.observer = observer
        self._identity: str | None = getattr(model, "identity", None)
        if cache is not None and self._identity is None:
            raise ConfigError(f"model.{role}.cache: the {type(model).__name__} backend has no "
                              "stable identity, so its answers cannot be cached")
        self._limit = limit or threading.Semaphore(concurrency)
        self._sleep = sleep
        self._jitter = random.Random()
        self._budget_lock = threading.Lock()
        self._in_flight = 0  # fresh calls that passed the budget check and are not metered yet

    def for_stage(self, stage: str, journal: CallJournal | None = None) -> StageModel:
        """A :class:`ChatModel` view of this client that meters its calls under ``stage`` and
        journals them in ``journal`` (default: the client's own ``journal``)."""
        return StageModel(self, stage, journal)

    def call(
        self, request: ChatRequest, *, stage: str, journal: CallJournal | None = None
    ) -> Completion:
        self._check_size(request, stage)
        key = request_key(self.role, request)
        journal = journal if journal is not None else self.journal
        if journal is not None:
            journaled = journal.lookup(key)
            if journaled is not None:
                self._meter(stage, journaled.usage, 0.0, replayed=1)
                return journaled
        cache_key = self.cache.key(self._identity or "", request) if self.cache else None
        cached = self.cache.get(cache_key) if self.cache and cache_key else None
        if cached is not None:
            self.meter.record(self.role, stage, calls=1, cached=1)
            completion, seconds = cached, 0.0
        else:
            self._check_budget(journal)
            try:
                started = time.monotonic()
                completion = self._call_with_retries(request, stage, journal)
                seconds = time.monotonic() - started
                completion = completion.model_copy(update={"text": strip_think(completion.text)})
                self._meter(stage, completion.usage, seconds)
            finally:
                self._release_budget()
            if self.cache and cache_key:
                self.cache.put(cache_key, completion)
        if journal is not None:
            entry = {"role": self.role, "stage": stage, "seconds": round(seconds, 3),
                     "request": request.model_dump(mode="json")}
            journal.record(key, entry, completion)
        return completion

    def _check_size(self, request: ChatRequest, stage: str) -> None:
        """Refuse a request that cannot fit the model's window before anything else: checked
        for journaled and cached answers too, so a run behaves the same with or without them."""
        try:
            check_prompt(request, getattr(self.model, "context_tokens", None),
                         getattr(self.model, "count_tokens", None))
        except PromptTooLarge as exc:
            raise self._located(exc, stage) from None

    def _located(self, exc: PromptTooLarge, stage: str) -> PromptTooLarge:
        key = getattr(self.model, "context_key", None)
        return exc.at(role=self.role, stage=stage,
                      setting=f"model.{self.role}.{key}" if key else None)

    def _check_budget(self, journal: CallJournal | None) -> None:
        if self.budget is None:
            return
        with self._budget_lock:
            # Calls in flight count as made: concurrent callers must not all pass the check
            # before the first answers are metered. (Their tokens and cost are not known yet.)
            # So do journaled calls a concurrent sibling has not replayed yet: otherwise a
            # resumed step could spend, in a race, what the replay is about to count.
            t = self.meter.totals(self.role)
            waiting = journal.unserved(self.role) if journal is not None else 0
            over = self.budget.exceeded(t.calls - t.cached + self._in_flight + waiting,
                                        t.prompt_tokens + t.completion_tokens, t.cost)
            if over is None:
                self._in_flight += 1
        if over is not None:
            raise BudgetExhausted(
                f"the {self.role} model's budget ran out (model.{self.role}.budget.{over}); "
                f"raise it to continue"
            )

    def _release_budget(self) -> None:
        if self.budget is not None:
            with self._budget_lock:
                self._in_flight -= 1

    def _call_with_retries(
        self, request: ChatRequest, stage: str, journal: CallJournal | None = None
    ) -> Completion:
        attempt = 0
        while True:
            try:
                completion = self._attempt(request, stage, journal)
                self.meter.attempt(self.role, stage, "ok")
                return completion
            except TransientModelError as exc:
                self.meter.record(self.role, stage, errors=1)
                self.meter.attempt(self.role, stage, exc.kind)
                if attempt >= self.max_retries:
                    raise ModelError(
                        f"{self.role} model failed after {attempt + 1} attempts: {exc}"
                    ) from exc
                delay = exc.retry_after
                if delay is None:
                    delay = self.retry_base_delay * (2**attempt) * (1 + self._jitter.random())
                log.warning("%s model: %s; retry %d in %.1fs", self.role, exc, attempt + 1, delay)
                self.meter.record(self.role, stage, retries=1)
                self._sleep(delay)
                attempt += 1
            except PromptTooLarge as exc:  # the backend's own count (its tokenizer) refused it
                self.meter.record(self.role, stage, errors=1)
                raise self._located(exc, stage) from None
            except ModelError:
                self.meter.record(self.role, stage, errors=1)
                self.meter.attempt(self.role, stage, "fatal")
                raise

    def _attempt(self, request: ChatRequest, stage: str, journal: CallJournal | None) -> Completion:
        """One attempt, holding a slot of the endpoint's limit; timed for the observer."""
        observer = self.observer
        if observer is None:
            with self._limit:
                return self.model.complete(request)
        outcome = "fatal"
        started = ended = time.perf_counter()
        try:
            with self._limit:
                started = time.perf_counter()
                try:
                    completion = self.model.complete(request)
                finally:
                    ended = time.perf_counter()
            outcome = "ok"
            return completion
        except TransientModelError as exc:
            outcome = exc.kind
            raise
        finally:
            observer(CallTiming(self.role, stage, request.kind,
                                journal.path if journal is not None else None, started, ended,
                                outcome))

    def _meter(self, stage: str, usage: Usage, seconds: float, replayed: int = 0) -> None:
        cost = self.prices.cost(usage.prompt_tokens, usage.completion_tokens) if self.prices else 0.0
        self.meter.record(
            self.role, stage, calls=1, prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens, seconds=seconds, cost=cost,
            replayed=replayed,
        )


class EndpointLimits:
    """One concurrency semaphore per endpoint, shared by every client (role, stage) that calls
    it. Declare every client's limit first; an endpoint declared with different limits gets
    the smallest."""

    def __init__(self) -> None:
        self._wanted: dict[str, int] = {}
        self._made: dict[str, threading.Semaphore] = {}

    def declare(self, endpoint: str, concurrency: int) -> None:
        if endpoint in self._made:
            raise RuntimeError(f"endpoint {endpoint}: declared after its semaphore was made")
        self._wanted[endpoint] = min(concurrency, self._wanted.get(endpoint, concurrency))

    def semaphore(self, endpoint: str) -> threading.Semaphore:
        if endpoint not in self._made:
            self._made[endpoint] = threading.Semaphore(self._wanted.get(endpoint, 1))
        return self._made[endpoint]

    def limit(self, endpoint: str) -> int:
        return self._wanted.get(endpoint, 1)


@dataclass(frozen=True)
class StageModel:
    """A client bound to one stage; satisfies the :class:`ChatModel` protocol."""

    client: ModelClient
    stage: str
    journal: CallJournal | None = None

    def complete(self, request: ChatRequest) -> Completion:
        return self.client.call(request, stage=self.stage, journal=self.journal)

    def count_outcome(self, name: str) -> None:
        """Count what became of a reply (``cut_off_dropped``: see
        :class:`~skillgrad.models.base.Metered`) under this stage."""
        self.client.meter.record(self.client.role, self.stage, **{name: 1})
