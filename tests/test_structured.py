"""Structured (JSON) replies: tolerant extraction and the one repair retry of ``ask_json``
(runaway and cut-off replies: test_runaway.py)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from skillgrad.models.ask_json import ask_json, extract_json, parse_as
from skillgrad.models.messages import Completion, Message
from skillgrad.models.scripted import ScriptedModel


class Answer(BaseModel):
    reasoning: str
    order: list[int]


GOOD = '{"reasoning": "r", "order": [2, 1]}'
ASK = [Message(role="user", content="Rank the edits.")]


# ----------------------------------------------------------------------------- extract_json


def test_plain_json() -> None:
    assert extract_json(GOOD) == {"reasoning": "r", "order": [2, 1]}


def test_fenced_json() -> None:
    text = 'Here you go:\n```json\n{"a": 1, "b": [true, null]}\n```\nDone.'
    assert extract_json(text) == {"a": 1, "b": [True, None]}


def test_fence_without_language() -> None:
    assert extract_json('```\n{"a": 2}\n```') == {"a": 2}


def test_prose_wrapped_json() -> None:
    text = 'Sure! The result is {"a": {"b": 1}} and that is all.'
    assert extract_json(text) == {"a": {"b": 1}}


def test_latex_whose_backslash_was_read_as_an_escape_is_restored() -> None:
    # What a model writes: single backslashes, so "\boxed" is a JSON backspace + "oxed".
    text = r'{"rules": ["Give \boxed{x}; \frac{a}{b}, 3 \times 4 \text{cm}, a \neq b \right)"]}'
    assert extract_json(text) == {"rules": [
        "Give \\boxed{x}; \\frac{a}{b}, 3 \\times 4 \\text{cm}, a \\neq b \\right)"]}
    # Escapes that are meant stay what JSON says they are.
    assert extract_json(r'{"a": "one\ntwo\tthree\nuse \\boxed{y}"}') == {
        "a": "one\ntwo\tthree\nuse \\boxed{y}"}
    # The repaired path too (a trailing comma).
    assert extract_json(r'{"rules": ["\boxed{z}",],}') == {"rules": ["\\boxed{z}"]}


def test_trailing_commas_are_repaired() -> None:
    text = 'Result: {"edits": [{"op": "append"},], "reasoning": "x",} thanks'
    assert extract_json(text) == {"edits": [{"op": "append"}], "reasoning": "x"}


@pytest.mark.parametrize("text", ["no json here", "", "the answer is 3"])
def test_no_json_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="no JSON object"):
        extract_json(text)


def test_parse_as_names_the_bad_field() -> None:
    with pytest.raises(ValueError, match="order"):
        parse_as('{"reasoning": "r", "order": "first"}', Answer)
    assert parse_as(GOOD, Answer) == Answer(reasoning="r", order=[2, 1])


# ----------------------------------------------------------------------------- ask_json


def test_valid_first_reply() -> None:
    model = ScriptedModel([GOOD])
    reply = ask_json(model, ASK, Answer, kind="test", max_tokens=100, temperature=0.3)
    assert reply.value == Answer(reasoning="r", order=[2, 1])
    assert reply.attempts == 1
    assert reply.error is None
    assert reply.raw == GOOD
    [request] = model.calls
    assert request.json_schema == Answer.model_json_schema()
    assert request.max_tokens == 100
    assert request.temperature == 0.3
    assert request.messages == tuple(ASK)


def test_invalid_then_valid_retries_with_the_error_shown() -> None:
    first = '{"reasoning": "r", "order": "oops"}'
    model = ScriptedModel([first, "```json\n" + GOOD + "\n```"])
    reply = ask_json(model, ASK, Answer, kind="test")
    assert reply.value == Answer(reasoning="r", order=[2, 1])
    assert reply.attempts == 2
    assert len(model.calls) == 2
    second = model.calls[1]
    assert second.json_schema == Answer.model_json_schema()
    assert second.messages[0] == ASK[0]
    assert second.messages[1] == Message(role="assistant", content=first)
    retry_text = second.messages[2].text()
    assert second.messages[2].role == "user"
    assert "order" in retry_text  # the parse error names the bad field
    assert "could not be used" in retry_text


def test_retry_message_carries_the_no_json_error() -> None:
    model = ScriptedModel(["I refuse.", GOOD])
    reply = ask_json(model, ASK, Answer, kind="test")
    assert reply.attempts == 2
    assert "no JSON object" in model.calls[1].messages[-1].text()
    assert model.calls[1].messages[-2].text() == "I refuse."


def test_invalid_twice_keeps_error_and_raw() -> None:
    model = ScriptedModel(["nothing", "still nothing"])
    reply = ask_json(model, ASK, Answer, kind="test")
    assert reply.value is None
    assert reply.attempts == 2
    assert reply.raw == "still nothing"
    assert reply.error is not None and "no JSON object" in reply.error
    assert len(model.calls) == 2  # exactly one repair retry


def test_truncated_reply_is_never_adopted() -> None:
    cut = Completion(text=GOOD, finish_reason="length")  # parses, but was cut off
    model = ScriptedModel([cut, cut])  # retried once (see test_runaway.py), cut off again
    reply = ask_json(model, ASK, Answer, kind="test")
    assert reply.value is None
    assert reply.raw == GOOD
    assert reply.attempts == 2
    assert reply.error is not None and "cut off" in reply.error


def test_truncated_repair_reply_is_not_adopted() -> None:
    model = ScriptedModel(["nope", Completion(text=GOOD, finish_reason="length")])
    reply = ask_json(model, ASK, Answer, kind="test")
    assert reply.value is None
    assert reply.attempts == 2
    assert reply.error is not None and "cut off" in reply.error


def test_caller_messages_are_not_mutated() -> None:
    messages = list(ASK)
    ask_json(ScriptedModel(["bad", GOOD]), messages, Answer, kind="test")
    assert messages == ASK
