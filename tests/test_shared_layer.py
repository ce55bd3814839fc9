"""The shared layer behind every backend, at unit level: cost metering, budgets, the response
cache, endpoint concurrency limits, reasoning-block stripping, and recordings for --replay."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from skillgrad.errors import (
    ConfigError,
    DataError,
    FatalModelError,
    ModelError,
    RunStopped,
    TransientModelError,
)
from skillgrad.models.accounting import Budget, BudgetExhausted, Prices
from skillgrad.models.client import CallJournal, EndpointLimits, Meter, ModelClient
from skillgrad.models.messages import ChatRequest, Completion, Message, Usage
from skillgrad.models.scripted import ScriptedModel
from skillgrad.models.store import Recording, ReplayModel, ResponseCache


def request(text: str = "hello") -> ChatRequest:
    return ChatRequest(messages=(Message(role="user", content=text),))


def ok(text: str = "ok", prompt: int = 10, completion: int = 5) -> Completion:
    return Completion(text=text, usage=Usage(prompt_tokens=prompt, completion_tokens=completion))


def make(model: object, role: str = "target", **kwargs: object) -> ModelClient:
    kwargs.setdefault("sleep", lambda _s: None)
    return ModelClient(model, role, **kwargs)  # type: ignore[arg-type]


class Fails:
    """Raises ``error`` on every call; counts calls. Has a cache identity."""

    identity = "fails|v1"

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.calls = 0

    def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        raise self.error


def scripted(*replies: object, identity: str | None = "scripted|toy", **kw: object) -> ScriptedModel:
    """A scripted model; with an ``identity`` its answers may be cached."""
    model = ScriptedModel(list(replies), **kw)  # type: ignore[arg-type]
    if identity is not None:
        model.identity = identity  # type: ignore[attr-defined]
    return model


# ----------------------------------------------------------------------------- cost metering


def test_cost_is_metered_from_prices_per_million_tokens() -> None:
    prices = Prices(prompt=2.5, completion=10.0)
    model = ScriptedModel(rules=[
        {"when": "big", "reply": ok(prompt=400_000, completion=50_000)},
        {"when": "small", "reply": ok(prompt=200_000, completion=0)},
    ])
    c = make(model, prices=prices)
    c.call(request("big"), stage="reflect")
    c.call(request("small"), stage="select")
    assert c.meter.entry("target", "reflect").cost == 1.5  # 0.4 * 2.5 + 0.05 * 10
    assert c.meter.entry("target", "select").cost == 0.5
    total = c.meter.totals("target")
    assert (total.cost, total.prompt_tokens, total.completion_tokens) == (2.0, 600_000, 50_000)
    assert Prices(prompt=3, completion=15).cost(1_000_000, 2_000_000) == 33.0


def test_without_prices_no_cost_is_metered() -> None:
    c = make(ScriptedModel(default=ok(prompt=10**6, completion=10**6)))
    c.call(request(), stage="s")
    assert c.meter.entry("target", "s").cost == 0.0
    assert c.meter.entry("target", "s").prompt_tokens == 10**6


def test_cost_survives_the_meter_json_roundtrip() -> None:
    c = make(ScriptedModel(default=ok(prompt=500_000, completion=0)), prices=Prices(prompt=1.0))
    c.call(request(), stage="s")
    again = Meter.from_json(json.loads(json.dumps(c.meter.to_json())))
    assert again.entry("target", "s").cost == 0.5


# ----------------------------------------------------------------------------- budgets


def test_call_budget_stops_before_the_next_call() -> None:
    model = ScriptedModel(default=ok())
    c = make(model, budget=Budget(calls=3))
    for i in range(3):
        c.call(request(str(i)), stage="s")
    with pytest.raises(BudgetExhausted, match=r"model\.target\.budget\.calls") as info:
        c.call(request("3"), stage="s")
    assert isinstance(info.value, RunStopped)
    assert len(model.calls) == 3
    with pytest.raises(BudgetExhausted):  # and it stays exhausted
        c.call(request("4"), stage="s")
    assert len(model.calls) == 3
    assert c.meter.totals("target").calls == 3


def test_token_budget_counts_prompt_and_completion_tokens() -> None:
    model = ScriptedModel(default=ok(prompt=10, completion=5))  # 15 tokens a call
    c = make(model, role="optimizer", budget=Budget(tokens=40))
    for i in range(3):  # 0, 15, 30 used before each: all below 40
        c.call(request(str(i)), stage="s")
    with pytest.raises(BudgetExhausted, match=r"model\.optimizer\.budget\.tokens"):
        c.call(request("3"), stage="s")  # 45 used
    assert len(model.calls) == 3


def test_cost_budget_stops_when_the_spend_reaches_it() -> None:
    model = ScriptedModel(default=ok(prompt=250_000, completion=125_000))  # 0.25 + 0.5 = 0.75
    c = make(model, budget=Budget(cost=1.5), prices=Prices(prompt=1.0, completion=4.0))
    c.call(request("a"), stage="s")
    c.call(request("b"), stage="s")
    assert c.meter.totals("target").cost == 1.5
    with pytest.raises(BudgetExhausted, match=r"model\.target\.budget\.cost"):
        c.call(request("c"), stage="s")
    assert len(model.calls) == 2


def test_a_budget_counts_only_its_own_role() -> None:
    meter = Meter()
    target = make(ScriptedModel(default=ok()), budget=Budget(calls=1), meter=meter)
    optimizer = make(ScriptedModel(default=ok()), role="optimizer", meter=meter)
    for i in range(5):
        optimizer.call(request(str(i)), stage="reflect")
    target.call(request(), stage="rollout")  # the optimizer's five calls are not the target's
    with pytest.raises(BudgetExhausted, match="target"):
        target.call(request("again"), stage="rollout")


def test_journaled_calls_are_served_without_the_model_even_over_budget(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    first = make(ScriptedModel(["one", "two"]))
    first.journal = CallJournal(path)
    first.call(request("a"), stage="s")
    first.call(request("b"), stage="s")

    model = ScriptedModel()  # raises if asked
    resumed = make(model, budget=Budget(calls=0))  # nothing fresh may be asked
    resumed.journal = CallJournal(path)
    assert resumed.call(request("a"), stage="s").text == "one"
    assert resumed.call(request("b"), stage="s").text == "two"
    assert not model.calls
    entry = resumed.meter.entry("target", "s")
    assert (entry.calls, entry.replayed) == (2, 2)
    with pytest.raises(BudgetExhausted):
        resumed.call(request("c"), stage="s")
    assert not model.calls


def test_concurrent_callers_do_not_overrun_a_call_budget() -> None:
    """The budget is checked before the call but metered after it: callers on threads must
    not all pass the check while the first calls are still in flight."""
    model = ScriptedModel(default=ok(), delay=0.02)
    c = make(model, budget=Budget(calls=2), concurrency=8)
    outcomes: list[str] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        try:
            c.call(request(str(i)), stage="s")
            result = "ok"
        except BudgetExhausted:
            result = "stopped"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(model.calls) == 2
    assert sorted(outcomes) == ["ok"] * 2 + ["stopped"] * 6


def test_a_failed_call_does_not_use_up_the_call_budget() -> None:
    model = Fails(FatalModelError("400 bad request"))
    c = make(model, budget=Budget(calls=1))
    with pytest.raises(FatalModelError):
        c.call(request(), stage="s")
    with pytest.raises(FatalModelError):  # still allowed to try: nothing was answered
        c.call(request(), stage="s")
    assert model.calls == 2


# ----------------------------------------------------------------------------- response cache


def test_a_repeated_request_is_served_from_the_cache(tmp_path: Path) -> None:
    model = scripted(ok("first", prompt=30, completion=7), ok("second"))
    c = make(model, cache=ResponseCache(tmp_path), prices=Prices(prompt=1.0, completion=1.0))
    assert c.call(request("q"), stage="s").text == "first"
    assert c.call(request("q"), stage="s").text == "first"
    assert len(model.calls) == 1
    e = c.meter.entry("target", "s")
    assert (e.calls, e.cached, e.prompt_tokens, e.completion_tokens) == (2, 1, 30, 7)
    assert e.cost == pytest.approx(37 / 1e6)  # the cached answer cost nothing
    assert len(list(tmp_path.rglob("*.json"))) == 1
    # a different request is asked
    assert c.call(request("other"), stage="s").text == "second"
    assert len(model.calls) == 2


def test_cache_entries_survive_a_new_process(tmp_path: Path) -> None:
    first = make(scripted("answer", identity="m|1"), cache=ResponseCache(tmp_path))
    first.call(request("q"), stage="s")

    model = scripted(identity="m|1")  # raises if asked
    second = make(model, cache=ResponseCache(tmp_path))
    assert second.call(request("q"), stage="s").text == "answer"
    assert not model.calls
    assert second.meter.entry("target", "s").cached == 1


def test_the_cache_is_keyed_by_model_identity(tmp_path: Path) -> None:
    make(scripted("from m1", identity="m|1"), cache=ResponseCache(tmp_path)).call(
        request("q"), stage="s")
    other = scripted("from m2", identity="m|2")
    assert make(other, cache=ResponseCache(tmp_path)).call(request("q"), stage="s").text == "from m2"
    assert len(other.calls) == 1


def test_cache_hits_do_not_use_up_a_call_budget(tmp_path: Path) -> None:
    model = scripted(default=ok())
    c = make(model, cache=ResponseCache(tmp_path), budget=Budget(calls=1))
    c.call(request("q"), stage="s")
    for _ in range(3):
        c.call(request("q"), stage="s")
    with pytest.raises(BudgetExhausted):
        c.call(request("new"), stage="s")
    assert len(model.calls) == 1


@pytest.mark.parametrize("error, raised", [
    (TransientModelError("503"), ModelError),
    (FatalModelError("401 bad key"), FatalModelError),
])
def test_failures_are_never_cached(tmp_path: Path, error: Exception, raised: type) -> None:
    failing = Fails(error)
    c = make(failing, cache=ResponseCache(tmp_path), max_retries=2)
    with pytest.raises(raised):
        c.call(request("q"), stage="s")
    assert failing.calls == (3 if isinstance(error, TransientModelError) else 1)
    assert list(tmp_path.rglob("*.json")) == []
    # the same identity answering later is asked, not served a cached failure
    good = scripted("fine", identity=Fails.identity)
    assert make(good, cache=ResponseCache(tmp_path)).call(request("q"), stage="s").text == "fine"
    assert len(good.calls) == 1


def test_a_model_without_identity_cannot_be_cached(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"model\.optimizer\.cache"):
        make(ScriptedModel(["x"]), role="optimizer", cache=ResponseCache(tmp_path))


def test_the_cache_stores_the_stripped_reply(tmp_path: Path) -> None:
    model = scripted("<think>long reasoning</think>\n42")
    c = make(model, cache=ResponseCache(tmp_path))
    assert c.call(request(), stage="s").text == "42"
    assert c.call(request(), stage="s").text == "42"
    stored = json.loads(next(tmp_path.rglob("*.json")).read_text())
    assert stored["completion"]["text"] == "42"


def test_an_unreadable_cache_entry_is_a_miss(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    model = scripted("fresh", identity="m|1")
    key = cache.key("m|1", request())
    cache.put(key, ok("stale"))
    next(tmp_path.rglob("*.json")).write_text("{half")
    assert make(model, cache=cache).call(request(), stage="s").text == "fresh"


# ----------------------------------------------------------------------------- reasoning blocks


@pytest.mark.parametrize("raw, text", [
    ("<think>why</think>Answer: 4", "Answer: 4"),
    ("<THINK>\nmulti\nline\n</THINK>\n\nAnswer: 4", "Answer: 4"),
    ("<think>never closed", ""),
    ("no reasoning here", "no reasoning here"),
])
def test_reasoning_blocks_are_stripped(raw: str, text: str) -> None:
    assert make(ScriptedModel([raw])).call(request(), stage="s").text == text


# ----------------------------------------------------------------------------- endpoint limits


class Tracker:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0


class Tracked:
    """Counts calls in flight across every model sharing ``tracker``. (A ScriptedModel ``fn``
    runs under the model's own lock, so the tracking is done here, outside it.)"""

    def __init__(self, tracker: Tracker) -> None:
        self.tracker = tracker
        self.inner = ScriptedModel(default="ok")

    def complete(self, request: ChatRequest) -> Completion:
        with self.tracker.lock:
            self.tracker.now += 1
            self.tracker.peak = max(self.tracker.peak, self.tracker.now)
        try:
            time.sleep(0.02)
            return self.inner.complete(request)
        finally:
            with self.tracker.lock:
                self.tracker.now -= 1


def run_on_threads(clients: list[ModelClient], per_client: int = 8) -> None:
    threads = [threading.Thread(target=c.call, args=(request(f"{n}-{i}"),), kwargs={"stage": "s"})
               for n, c in enumerate(clients) for i in range(per_client)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_clients_of_one_endpoint_share_its_concurrency_limit() -> None:
    limits = EndpointLimits()
    limits.declare("http://host/v1", 2)
    limits.declare("http://host/v1", 2)
    tracker = Tracker()
    clients = [make(Tracked(tracker), role=role, concurrency=8,
                    limit=limits.semaphore("http://host/v1"))
               for role in ("target", "optimizer")]
    run_on_threads(clients)
    assert tracker.peak == 2
    assert sum(c.meter.totals().calls for c in clients) == 16


def test_separate_endpoints_do_not_limit_each_other() -> None:
    # the control for the test above: the tracker does see more than two calls in flight
    limits = EndpointLimits()
    limits.declare("a", 2)
    limits.declare("b", 2)
    tracker = Tracker()
    clients = [make(Tracked(tracker), limit=limits.semaphore(ep)) for ep in ("a", "b")]
    run_on_threads(clients)
    assert tracker.peak > 2


def test_a_client_without_a_shared_limit_uses_its_own_concurrency() -> None:
    tracker = Tracker()
    run_on_threads([make(Tracked(tracker), concurrency=3)])
    assert tracker.peak == 3


def test_the_smallest_declared_limit_wins() -> None:
    limits = EndpointLimits()
    for n in (4, 2, 3):
        limits.declare("ep", n)
    limits.declare("other", 5)
    assert (limits.limit("ep"), limits.limit("other"), limits.limit("undeclared")) == (2, 5, 1)
    sem = limits.semaphore("ep")
    assert sem is limits.semaphore("ep")
    assert sem.acquire(blocking=False) and sem.acquire(blocking=False)
    assert not sem.acquire(blocking=False)
    with pytest.raises(RuntimeError, match="declared after"):
        limits.declare("ep", 1)


# ----------------------------------------------------------------------------- recording / replay


def record_run(run_dir: Path) -> None:
    """A run directory with two scopes of journaled calls."""
    target = make(ScriptedModel(["t1", "t2", "t3"]))
    optimizer = make(ScriptedModel(["o1"]), role="optimizer")
    target.journal = optimizer.journal = CallJournal(run_dir / "init" / "calls.jsonl")
    target.call(request("same"), stage="eval_val")
    target.call(request("same"), stage="eval_val")
    target.journal = optimizer.journal = CallJournal(run_dir / "steps" / "e01-s001" / "calls.jsonl")
    target.call(request("other"), stage="rollout")
    optimizer.call(request("same"), stage="reflect")


def test_a_recording_answers_in_order_per_request_and_role(tmp_path: Path) -> None:
    record_run(tmp_path / "run")
    rec = Recording(tmp_path / "run")
    assert len(rec) == 4
    target, optimizer = ReplayModel(rec, "target"), ReplayModel(rec, "optimizer")
    assert optimizer.complete(request("same")).text == "o1"  # the role is part of the key
    assert target.complete(request("other")).text == "t3"
    assert target.complete(request("same")).text == "t1"
    assert target.complete(request("same")).text == "t2"
    with pytest.raises(FatalModelError, match=r"replay of .*run: the target model .*asked again"):
        target.complete(request("same"))
    with pytest.raises(FatalModelError, match=r"never asked .*differ from the recorded run"):
        target.complete(request("unknown"))
    with pytest.raises(FatalModelError, match="the optimizer model"):
        optimizer.complete(request("other"))


def test_replay_through_a_client_meters_the_recorded_usage(tmp_path: Path) -> None:
    record_run(tmp_path / "run")
    replay = ReplayModel(Recording(tmp_path / "run"), "target")
    assert replay.identity.startswith("replay|") and replay.endpoint == "replay:target"
    c = make(replay, max_retries=3)
    assert c.call(request("other"), stage="rollout").text == "t3"
    e = c.meter.entry("target", "rollout")
    assert e.calls == 1 and e.completion_tokens == 1 and e.prompt_tokens > 0
    with pytest.raises(FatalModelError):  # fatal: not retried
        c.call(request("unknown"), stage="rollout")
    assert c.meter.entry("target", "rollout").retries == 0


def test_a_recording_skips_unreadable_lines_and_needs_calls(tmp_path: Path) -> None:
    record_run(tmp_path / "run")
    with (tmp_path / "run" / "init" / "calls.jsonl").open("a") as fh:
        fh.write('{"key": "abc", "role": "tar')
    assert len(Recording(tmp_path / "run")) == 4
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no recorded calls"):
        Recording(tmp_path / "empty")
