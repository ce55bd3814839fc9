"""Model replies that are not answers, and requests that cannot be answered: a cut-off reply far
below its limit is a transport fault (retried, never scored, cached or journaled), a JSON reply
cut off at its limit gets room to finish before it is dropped and counted, an optimizer that
never replies usably stops the run, every attempt is counted by its outcome, and a prompt too
large for the model's window is refused before it is sent."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import toy
import yaml
from conftest import toy_config
from pydantic import BaseModel

from skillgrad.cli.report import print_summary
from skillgrad.config import load_config
from skillgrad.errors import ModelError
from skillgrad.models.ask_json import RETRY_MAX_TOKENS, ask_json
from skillgrad.models.client import CallJournal, ModelClient
from skillgrad.models.embedded import EmbeddedBackend, EmbeddedOptions
from skillgrad.models.limits import MAX_PROMPT_CHARS, PromptTooLarge, bogus_truncation
from skillgrad.models.messages import ChatRequest, Completion, Message, Usage
from skillgrad.models.openai_compat import OpenAICompatibleBackend, OpenAICompatibleOptions
from skillgrad.models.scripted import ScriptedModel
from skillgrad.models.store import ResponseCache
from skillgrad.models.usage import model_usage
from skillgrad.testing import FakeOpenAIServer, Fault
from skillgrad.trainer import OptimizerUnusable, build_trainer


def ask(text: str = "hello there", **fields: Any) -> ChatRequest:
    return ChatRequest(messages=(Message(role="user", content=text),), **fields)


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        yield srv


def http_client(server: FakeOpenAIServer, tmp_path: Path | None = None,
                **options: Any) -> ModelClient:
    """A client of the ``openai_compatible`` backend on ``server``, retrying at once."""
    model = OpenAICompatibleBackend.create(
        OpenAICompatibleOptions(base_url=server.url, model="m", **options), Path("."))
    cache = ResponseCache(tmp_path / "cache") if tmp_path is not None else None
    return ModelClient(model, "target", max_retries=3, retry_base_delay=0.0, sleep=lambda _: None,
                       cache=cache)


# ----------------------------------------------------------------------------- cut-off replies


def test_a_bogus_truncation_is_retried_and_never_scored_cached_or_journaled(
        server: FakeOpenAIServer, tmp_path: Path) -> None:
    """A reply cut off after 1 token of 64 is what a broken proxy sends, not the model's
    answer: the client asks again, and only the real answer is returned, cached and
    journaled."""
    server.push(Fault.bogus_truncation("The", completion_tokens=1))
    client = http_client(server, tmp_path)
    journal = CallJournal(tmp_path / "calls.jsonl")
    out = client.call(ask(max_tokens=64), stage="rollout", journal=journal)
    assert (out.text, out.finish_reason) == ("hello there", "stop")
    assert len(server.requests) == 2
    entry = client.meter.entry("target", "rollout")
    assert entry.attempts == {"bogus_truncation": 1, "ok": 1} and entry.retries == 1
    recorded = [json.loads(line)["completion"] for line in
                (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [c["text"] for c in recorded] == ["hello there"]
    cached = [json.loads(p.read_text())["completion"]["text"]
              for p in (tmp_path / "cache").rglob("*.json")]
    assert cached == ["hello there"]


def test_bogus_truncations_to_the_end_stop_with_the_kind_named(server: FakeOpenAIServer,
                                                               tmp_path: Path) -> None:
    server.push(*[Fault.bogus_truncation()] * 4)
    client = http_client(server, tmp_path)
    journal = CallJournal(tmp_path / "calls.jsonl")
    with pytest.raises(ModelError, match="after 4 attempts.*cut off at the token limit after "
                                         "1 of 64 tokens"):
        client.call(ask(max_tokens=64), stage="rollout", journal=journal)
    assert len(server.requests) == 4 and not (tmp_path / "calls.jsonl").exists()
    assert not list((tmp_path / "cache").rglob("*.json"))


@pytest.mark.parametrize("fault, request_fields", [
    pytest.param(Fault.truncated("The answer is forty-two", completion_tokens=40),
                 {"max_tokens": 64}, id="at-the-limit"),
    pytest.param(Fault.truncated("The", completion_tokens=1), {}, id="no-limit-sent"),
])
def test_a_genuine_cut_is_the_models_answer(server: FakeOpenAIServer, fault: Fault,
                                            request_fields: dict[str, Any]) -> None:
    server.push(fault)
    out = http_client(server).call(ask(**request_fields), stage="rollout")
    assert out.truncated and out.text == fault.reply and len(server.requests) == 1


def test_a_cut_without_reported_usage_is_taken_at_its_word(server: FakeOpenAIServer) -> None:
    def no_usage(body: dict[str, Any]) -> dict[str, Any]:
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "length",
                             "message": {"role": "assistant", "content": "The"}}]}

    server.responder = no_usage
    out = http_client(server).call(ask(max_tokens=64), stage="rollout")
    assert out.truncated and len(server.requests) == 1


def test_what_counts_as_far_below_the_limit() -> None:
    assert bogus_truncation(1, 64) is not None
    assert bogus_truncation(31, 64) is not None and bogus_truncation(32, 64) is None
    assert bogus_truncation(None, 64) is None and bogus_truncation(1, None) is None
    # The window, not the limit, ended the reply: prompt and reply fill it.
    assert bogus_truncation(10, 64, prompt_tokens=4080, context_tokens=4096) is None
    assert bogus_truncation(10, 64, prompt_tokens=1000, context_tokens=4096) is not None


class Answer(BaseModel):
    reasoning: str
    order: list[int]


GOOD = '{"reasoning": "r", "order": [2, 1]}'
RANK = [Message(role="user", content="Rank the edits.")]


def cut(text: str, tokens: int = 0) -> Completion:
    return Completion(text=text, finish_reason="length", usage=Usage(completion_tokens=tokens))


@pytest.mark.parametrize("limit, room", [(100, 200), (6000, RETRY_MAX_TOKENS),
                                         (RETRY_MAX_TOKENS, RETRY_MAX_TOKENS), (None, 1000)])
def test_a_cut_off_json_reply_is_asked_again_with_room_to_finish(limit: int | None,
                                                                 room: int) -> None:
    model = ScriptedModel([cut('{"reasoning": "a long', tokens=500), GOOD])
    reply = ask_json(model, RANK, Answer, kind="rank", max_tokens=limit)
    assert reply.value is not None and reply.attempts == 2
    assert [c.max_tokens for c in model.calls] == [limit, room]
    note = model.calls[1].messages[-1].text()
    assert (f"This time you have {room} tokens." in note) == (room != limit)


def test_a_json_reply_cut_off_twice_is_dropped_and_counted() -> None:
    model = ScriptedModel([cut('{"reasoning": "a long'), cut('{"reasoning": "a longer')])
    client = ModelClient(model, "optimizer")
    reply = ask_json(client.for_stage("select"), RANK, Answer, kind="rank", max_tokens=100)
    assert reply.value is None
    assert reply.error == "reply was cut off at the token limit (200 tokens)"
    assert client.meter.entry("optimizer", "select").cut_off_dropped == 1
    usage = model_usage(client.meter.to_json())["optimizer"]
    assert usage["cut_off_dropped"] == 1 and usage["attempts"] == {"ok": 2}
    # A reply that could not be parsed is not a cut-off one.
    other = ModelClient(ScriptedModel(["no json", "still none"]), "optimizer")
    ask_json(other.for_stage("select"), RANK, Answer, kind="rank", max_tokens=100)
    assert other.meter.entry("optimizer", "select").cut_off_dropped == 0


# ----------------------------------------------------------------------------- unusable optimizer


def garbage_config(folder: Path, **optimizer: Any) -> Path:
    return toy_config(folder, model={"target": {"backend": "scripted", "function": "toy:target"},
                                     "optimizer": {"backend": "scripted", "default": "garbage"}},
                      optimizer={"learning_rate": 1, "min_learning_rate": 1,
                                 "lr_scheduler": "constant", **optimizer})


def test_an_optimizer_that_never_replies_usably_stops_the_run_resumably(toy_dir: Path) -> None:
    """Every analyst reply is garbage: after optimizer.max_unusable_steps (3) such steps the
    run stops with the checkpoint of the third, saying what came back; the same command runs
    one more step and stops again; a working optimizer then finishes the run."""
    cfg = garbage_config(toy_dir)
    run = toy_dir / "run"
    with pytest.raises(OptimizerUnusable) as stopped:
        build_trainer(load_config(cfg), run).fit()
    message = str(stopped.value)
    assert "no usable reply in 3 steps in a row (global steps 1-3, 24 analyst replies" in message
    assert "optimizer.max_unusable_steps: 3" in message
    assert "the reply contains no JSON object; the reply began 'garbage'" in message
    history = json.loads((run / "checkpoint.json").read_text())["history"]
    assert len(history) == 3 and all(r["unusable"] and r["decision"] == "skip" for r in history)
    assert "stopped" in (run / "events.jsonl").read_text()
    with pytest.raises(OptimizerUnusable, match="in 4 steps in a row"):
        build_trainer(load_config(cfg), run).fit()
    data = yaml.safe_load(cfg.read_text())
    data["model"]["optimizer"] = {"backend": "scripted", "function": "toy:optimizer"}
    cfg.write_text(yaml.safe_dump(data))
    summary = build_trainer(load_config(cfg), run, allow_config_change=True).fit()
    assert summary["steps"] == 6 and summary["edits"]["unusable_steps"] == 4
    assert summary["edits"]["parse_errors"] == 32


def test_the_cli_stops_with_exit_code_3_and_show_counts_the_unusable_replies(
        toy_dir: Path) -> None:
    cfg = garbage_config(toy_dir)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "COLUMNS": "200"}
    proc = subprocess.run([sys.executable, "-m", "skillgrad.cli", "train", str(cfg), "--out",
                           "run"], cwd=toy_dir, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 3, proc.stderr
    first, hint = proc.stderr.strip().splitlines()[-2:]
    assert first.startswith("error: stopped: the optimizer gave no usable reply in 3 steps")
    assert "is intact; resume with: skillgrad train" in hint


def test_the_end_of_run_printout_and_show_count_what_could_not_be_used(
        toy_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = garbage_config(toy_dir, max_unusable_steps=None)
    run = toy_dir / "run"
    summary = build_trainer(load_config(cfg), run).fit()  # never stops: rc 0, 6 steps
    assert summary["steps"] == 6 and summary["edits"]["unusable_steps"] == 6
    capsys.readouterr()
    print_summary(summary, run)
    printed = capsys.readouterr().out
    assert "optimizer: 50 analyst replies could not be used (parse errors); 6 steps without a " \
           "usable reply" in printed
    assert "optimizer: 100 calls" in printed and "100 attempts (100 ok)" in printed
    (run / "summary.json").unlink()  # as while it trains, or after a stop
    from skillgrad.cli.runs import show_command

    show_command(run)
    shown = " ".join(capsys.readouterr().out.split())  # show wraps its lines at 80 columns
    assert "50 analyst replies could not be used" in shown
    assert "the last (step 6): reply is not valid JSON of the expected shape" in shown


# ----------------------------------------------------------------------------- attempt counts


def test_every_attempt_is_counted_by_kind_and_equals_what_the_endpoint_saw(
        toy_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    faults = [Fault.status(429, "slow down"), Fault.status(500), Fault.status(503),
              Fault.malformed(), Fault.bogus_truncation(), Fault.hang(1.5)]
    with FakeOpenAIServer(responder=toy.http_responder) as server:
        role = {"backend": "openai_compatible", "base_url": server.url, "model": "toy",
                "retry_base_delay": 0.0, "timeout": 1.0, "max_retries": 8}
        cfg = toy_config(toy_dir, model={"target": role, "optimizer": role})
        server.push(*faults)
        summary = build_trainer(load_config(cfg), toy_dir / "run").fit()
        seen = len(server.requests)
    models = summary["models"]
    attempts: dict[str, int] = {}
    for usage in models.values():
        for kind, n in usage["attempts"].items():
            attempts[kind] = attempts.get(kind, 0) + n
    assert sum(attempts.values()) == seen
    assert {k: v for k, v in attempts.items() if k != "ok"} == {
        "rate_limit": 1, "server_error": 2, "timeout": 1, "bad_reply": 1, "bogus_truncation": 1}
    assert attempts["ok"] == sum(u["calls"] - u["cached"] for u in models.values())
    assert sum(u["retries"] for u in models.values()) == len(faults)
    capsys.readouterr()
    print_summary(summary, toy_dir / "run")
    printed = capsys.readouterr().out
    target = models["target"]["attempts"]
    assert f"{sum(target.values())} attempts ({target['ok']} ok, 1 rate limit, 2 server error, " \
           "1 timeout, 1 bad reply, 1 bogus truncation)" in printed


def test_a_connection_failure_and_a_fatal_reply_are_counted_too(server: FakeOpenAIServer) -> None:
    dead = OpenAICompatibleBackend.create(
        OpenAICompatibleOptions(base_url="http://127.0.0.1:9/v1", model="m"), Path("."))
    client = ModelClient(dead, "target", max_retries=1, retry_base_delay=0.0,
                         sleep=lambda _: None)
    with pytest.raises(ModelError, match="connection failed"):
        client.call(ask(), stage="rollout")
    assert client.meter.entry("target", "rollout").attempts == {"connection": 2}
    server.push(Fault.status(400, "bad request"))
    fatal = http_client(server)
    with pytest.raises(ModelError, match="HTTP 400"):
        fatal.call(ask(), stage="rollout")
    assert fatal.meter.entry("target", "rollout").attempts == {"fatal": 1}


# ----------------------------------------------------------------------------- prompt size


def test_an_oversized_task_is_refused_before_it_is_sent(toy_dir: Path) -> None:
    """A question far beyond the target's window (the qa environment cuts long contexts, not
    questions) stops the run naming the task, the stage, the size and the limit; it never
    reaches the endpoint, is never scored and never journaled."""
    huge = " ".join(f"word{i}" for i in range(20_000))
    toy.write_data(toy_dir)
    rows = [json.loads(line) for line in (toy_dir / "toy.jsonl").read_text().splitlines()]
    rows[0]["question"] += " " + huge
    with FakeOpenAIServer(responder=toy.http_responder) as server:
        role = {"backend": "openai_compatible", "base_url": server.url, "model": "toy",
                "retry_base_delay": 0.0, "context_tokens": 4096}
        cfg = toy_config(toy_dir, model={"target": role, "optimizer": role})
        (toy_dir / "toy.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        with pytest.raises(PromptTooLarge) as refused:
            build_trainer(load_config(cfg), toy_dir / "run").fit()
        sent = [json.dumps(body) for body in server.requests]
    message = str(refused.value)
    assert message.startswith("the target model's prompt for task 't001' (stage ")
    assert "tokens (estimated), over its context window of 4,096 tokens " \
           "(model.target.context_tokens); refused, not sent" in message
    assert refused.value.size > 20_000
    assert not [body for body in sent if "word19999" in body]
    stored = [p.read_text() for p in (toy_dir / "run").rglob("*.jsonl")]
    assert not [text for text in stored if "word19999" in text]


def test_without_a_window_only_the_character_cap_applies(server: FakeOpenAIServer) -> None:
    client = http_client(server)
    assert client.call(ask("x" * 100_000), stage="rollout").text == "x" * 100_000
    with pytest.raises(PromptTooLarge) as refused:
        client.call(ask("x" * (MAX_PROMPT_CHARS + 1)), stage="eval_test")
    assert str(refused.value) == (
        "the target model's prompt (stage eval_test) is 4,000,001 characters, over the cap of "
        "4,000,000 characters on a prompt to a model whose context window is not known (set "
        "model.target.context_tokens to its window); refused, not sent")
    assert len(server.requests) == 1
    scripted = ScriptedModel(default="ok")
    with pytest.raises(PromptTooLarge, match=r"characters on a prompt .* not known; refused"):
        ModelClient(scripted, "optimizer").call(ask("x" * (MAX_PROMPT_CHARS + 1)), stage="s")
    assert not scripted.calls


@pytest.fixture
def counting_llama(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> tuple[Any, list[Any]]:
    """An embedded model (n_ctx 256) on a stand-in for llama.cpp whose tokenizer makes one
    token of every word, and which refuses, as llama.cpp does, a prompt over its window."""
    calls: list[dict[str, Any]] = []

    class CountingLlama:
        def __init__(self, **kwargs: Any) -> None:
            self.n_ctx = kwargs["n_ctx"]

        def tokenize(self, text: bytes, add_bos: bool = False, special: bool = False) -> list[int]:
            return list(range(len(text.split())))

        def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
            calls.append(kwargs)
            words = sum(len(m["content"].split()) for m in kwargs["messages"])
            if words >= self.n_ctx:
                raise ValueError(f"Requested tokens ({words}) exceed context window of "
                                 f"{self.n_ctx}")
            return {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}

    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=CountingLlama))
    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"GGUF")
    model = EmbeddedBackend.create(EmbeddedOptions(model_path=weights, n_ctx=256), Path("."))
    return ModelClient(model, "target"), calls


def test_the_embedded_window_is_n_ctx_counted_with_its_own_tokenizer(
        counting_llama: tuple[ModelClient, list[Any]]) -> None:
    client, calls = counting_llama
    # 200 words in pieces the estimate counts as 2 each: over the window by the estimate,
    # within it by the model's own count, so it is sent.
    fits = " ".join(["abcdefghijkl"] * 200)
    assert client.call(ask(fits), stage="rollout").text == "ok" and len(calls) == 1
    with pytest.raises(PromptTooLarge) as refused:
        client.call(ask(" ".join(["abcdefghijkl"] * 245)), stage="rollout")
    assert "is 261 tokens, over its context window of 256 tokens (model.target.n_ctx)" in str(
        refused.value)
    assert len(calls) == 1  # never reached the model


def test_what_llama_cpp_refuses_itself_is_the_same_refusal(
        counting_llama: tuple[ModelClient, list[Any]]) -> None:
    client, calls = counting_llama
    # Within the window by the client's count (the template's tokens aside), over it by the
    # model's: llama.cpp's own refusal reads like the client's.
    client.model.count_tokens = lambda text: 1  # type: ignore[attr-defined]
    with pytest.raises(PromptTooLarge) as refused:
        client.call(ask(" ".join(["w"] * 300)), stage="reflect")
    assert str(refused.value) == (
        "the target model's prompt (stage reflect) is 300 tokens, over its context window of "
        "256 tokens (model.target.n_ctx); refused, not sent")
    assert client.meter.entry("target", "reflect").attempts == {}
