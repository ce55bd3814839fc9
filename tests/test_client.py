"""The model client: retries, metering, reasoning-block stripping and the call journal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skillgrad.errors import FatalModelError, ModelError, TransientModelError
from skillgrad.models.client import CallJournal, Meter, ModelClient, StageMeter, strip_think
from skillgrad.models.messages import ChatRequest, Completion, Message, Usage
from skillgrad.models.scripted import ScriptedModel


def request(text: str = "hello") -> ChatRequest:
    return ChatRequest(messages=(Message(role="user", content=text),))


def ok(text: str = "ok", prompt: int = 3, completion: int = 2) -> Completion:
    return Completion(text=text, usage=Usage(prompt_tokens=prompt, completion_tokens=completion))


class Flaky:
    """Raises the queued errors first, then answers."""

    def __init__(self, *errors: Exception, reply: Completion | None = None) -> None:
        self.errors = list(errors)
        self.reply = reply or ok()
        self.calls = 0

    def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.reply


def client(model: object, **kwargs: object) -> tuple[ModelClient, list[float]]:
    delays: list[float] = []
    kwargs.setdefault("max_retries", 3)
    kwargs.setdefault("retry_base_delay", 1.0)
    return ModelClient(model, "target", sleep=delays.append, **kwargs), delays  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- retries


def test_transient_errors_are_retried_with_exponential_backoff() -> None:
    model = Flaky(TransientModelError("503"), TransientModelError("503"), reply=ok("fine"))
    c, delays = client(model, retry_base_delay=0.5)
    assert c.call(request(), stage="rollout").text == "fine"
    assert model.calls == 3
    assert len(delays) == 2
    # base * 2**attempt, times a jitter factor in [1, 2)
    assert 0.5 <= delays[0] < 1.0
    assert 1.0 <= delays[1] < 2.0
    entry = c.meter.entry("target", "rollout")
    assert (entry.calls, entry.retries, entry.errors) == (1, 2, 2)


def test_retry_after_is_honoured_exactly() -> None:
    model = Flaky(TransientModelError("429", retry_after=7.5), TransientModelError("429", 0.0))
    c, delays = client(model)
    c.call(request(), stage="s")
    assert delays == [7.5, 0.0]


def test_fatal_errors_are_not_retried() -> None:
    model = Flaky(FatalModelError("401 bad key"))
    c, delays = client(model)
    with pytest.raises(FatalModelError, match="bad key"):
        c.call(request(), stage="s")
    assert model.calls == 1
    assert delays == []
    entry = c.meter.entry("target", "s")
    assert (entry.calls, entry.errors, entry.retries) == (0, 1, 0)


def test_exhausted_retries_raise_model_error() -> None:
    model = Flaky(*[TransientModelError("timeout") for _ in range(10)])
    c, delays = client(model, max_retries=2)
    with pytest.raises(ModelError, match="after 3 attempts: timeout") as info:
        c.call(request(), stage="s")
    assert not isinstance(info.value, TransientModelError)  # the caller sees a final failure
    assert model.calls == 3
    assert len(delays) == 2
    entry = c.meter.entry("target", "s")
    assert (entry.calls, entry.errors, entry.retries) == (0, 3, 2)


def test_zero_retries_fails_at_once() -> None:
    model = Flaky(TransientModelError("503"))
    c, delays = client(model, max_retries=0)
    with pytest.raises(ModelError):
        c.call(request(), stage="s")
    assert (model.calls, delays) == (1, [])


# ----------------------------------------------------------------------------- metering


def test_meter_counts_per_role_and_stage() -> None:
    meter = Meter()
    target = ModelClient(ScriptedModel(default=ok(prompt=10, completion=4)), "target", meter=meter)
    optimizer = ModelClient(ScriptedModel(default=ok(prompt=100, completion=50)), "optimizer",
                            meter=meter)
    rollout = target.for_stage("rollout")
    rollout.complete(request("a"))
    rollout.complete(request("b"))
    target.call(request("c"), stage="eval")
    optimizer.for_stage("reflect").complete(request("d"))
    r = meter.entry("target", "rollout")
    assert (r.calls, r.prompt_tokens, r.completion_tokens) == (2, 20, 8)
    assert meter.entry("target", "eval").calls == 1
    assert meter.totals("target").calls == 3
    assert meter.totals("target").prompt_tokens == 30
    assert meter.totals("optimizer").completion_tokens == 50
    assert meter.totals().calls == 4
    assert set(meter.stages) == {"target", "optimizer"}


def test_meter_json_roundtrip() -> None:
    meter = Meter()
    meter.record("target", "rollout", calls=2, prompt_tokens=10, seconds=1.5)
    meter.record("optimizer", "merge", calls=1, retries=3, errors=1, replayed=1)
    data = json.loads(json.dumps(meter.to_json()))
    back = Meter.from_json(data)
    assert back == meter
    assert back.entry("optimizer", "merge") == StageMeter(calls=1, retries=3, errors=1, replayed=1)
    assert back.totals().calls == 3


# ----------------------------------------------------------------------------- think blocks


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>hmm\nlong</think>\nParis", "Paris"),
        ("<THINK>x</THINK>answer", "answer"),
        ("a<think>x</think>b<think>y</think>c", "abc"),
        ("<think>never closed", ""),
        ("no tags  ", "no tags  "),
    ],
)
def test_strip_think(text: str, expected: str) -> None:
    assert strip_think(text) == expected


def test_client_strips_think_from_replies() -> None:
    c, _ = client(ScriptedModel(["<think>reasoning</think> 42"]))
    assert c.call(request(), stage="s").text == "42"


# ----------------------------------------------------------------------------- journal


def test_calls_are_journaled_and_replayed(tmp_path: Path) -> None:
    path = tmp_path / "scope" / "calls.jsonl"
    first_model = ScriptedModel(["one", "two"])
    first, _ = client(first_model)
    first.journal = CallJournal(path)
    assert first.call(request("a"), stage="s").text == "one"
    assert first.call(request("b"), stage="s").text == "two"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [e["completion"]["text"] for e in lines] == ["one", "two"]
    assert lines[0]["stage"] == "s" and lines[0]["role"] == "target"

    model = ScriptedModel()  # would raise if asked
    second, _ = client(model)
    second.journal = CallJournal(path)
    assert len(second.journal) == 2
    assert second.call(request("b"), stage="s").text == "two"
    assert second.call(request("a"), stage="s").text == "one"
    assert not model.calls
    entry = second.meter.entry("target", "s")
    assert (entry.calls, entry.replayed) == (2, 2)
    assert entry.completion_tokens == first.meter.entry("target", "s").completion_tokens


def test_identical_requests_replay_in_occurrence_order(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    first, _ = client(ScriptedModel(["r1", "r2"]))
    first.journal = CallJournal(path)
    assert [first.call(request(), stage="s").text for _ in range(2)] == ["r1", "r2"]

    model = ScriptedModel(["r3"])
    second, _ = client(model)
    second.journal = CallJournal(path)
    texts = [second.call(request(), stage="s").text for _ in range(3)]
    assert texts == ["r1", "r2", "r3"]  # the third occurrence is new and is asked
    assert len(model.calls) == 1
    assert len(CallJournal(path)) == 3


def test_journal_key_includes_the_role(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    target, _ = client(ScriptedModel(["from target"]))
    target.journal = CallJournal(path)
    target.call(request(), stage="s")
    optimizer = ModelClient(ScriptedModel(["from optimizer"]), "optimizer")
    optimizer.journal = CallJournal(path)
    assert optimizer.call(request(), stage="s").text == "from optimizer"


def journal_killed_mid_second_line(path: Path, replies: list[str]) -> None:
    """Record calls "a" and "b", then cut the file as if killed while writing the second."""
    first, _ = client(ScriptedModel(replies))
    first.journal = CallJournal(path)
    first.call(request("a"), stage="s")
    first.call(request("b"), stage="s")
    text = path.read_text()
    path.write_text(text[: len(text) - 25])


def test_truncated_last_line_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    journal_killed_mid_second_line(path, ["kept", "lost"])

    journal = CallJournal(path)
    assert len(journal) == 1
    second, _ = client(ScriptedModel(["asked again"]))
    second.journal = journal
    assert second.call(request("a"), stage="s").text == "kept"
    assert second.call(request("b"), stage="s").text == "asked again"


def test_record_after_a_truncated_line_survives_the_next_resume(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    journal_killed_mid_second_line(path, ["a1", "b1"])

    resumed, _ = client(ScriptedModel(["b2"]))
    resumed.journal = CallJournal(path)
    assert resumed.call(request("b"), stage="s").text == "b2"

    model = ScriptedModel()
    again, _ = client(model)
    again.journal = CallJournal(path)
    assert again.call(request("a"), stage="s").text == "a1"
    assert again.call(request("b"), stage="s").text == "b2"
    assert not model.calls
    assert all(json.loads(line) for line in path.read_text().splitlines())


def test_failures_are_never_journaled(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    c, _ = client(Flaky(FatalModelError("boom")))
    c.journal = CallJournal(path)
    with pytest.raises(FatalModelError):
        c.call(request(), stage="s")
    assert not path.exists() or path.read_text() == ""

    c2, _ = client(Flaky(*[TransientModelError("503")] * 5), max_retries=1)
    c2.journal = CallJournal(path)
    with pytest.raises(ModelError):
        c2.call(request(), stage="s")
    assert not path.exists() or path.read_text() == ""


def test_journal_stores_the_stripped_reply(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    c, _ = client(ScriptedModel(["<think>x</think>yes"]))
    c.journal = CallJournal(path)
    c.call(request(), stage="s")
    replay, _ = client(ScriptedModel())
    replay.journal = CallJournal(path)
    assert replay.call(request(), stage="s").text == "yes"
