"""The shipped test doubles answer optimizer calls by their kind, never by prompt wording."""

from __future__ import annotations

import pytest

from skillgrad import prompts
from skillgrad.errors import ScriptExhausted
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.testing import kind_of_prompt, reader_optimizer


def _request(text: str, kind: str | None) -> ChatRequest:
    return ChatRequest(messages=(Message(role="user", content=text),), kind=kind)


def test_a_call_without_a_known_kind_is_refused_loudly() -> None:
    for kind in (None, "no_such_call"):
        with pytest.raises(ScriptExhausted, match="no answer for a call of kind"):
            reader_optimizer(_request("Rank these", kind))


def test_the_rank_answer_follows_the_kind_not_the_wording() -> None:
    """A rank prompt reworded beyond recognition still gets a rank answer."""
    text = ("Put these in order.\n<skill>\nAnswer.\n</skill>\n"
            "1. [append] support 2\n   content: 'a'\n2. [append] support 1\n   content: 'b'\n")
    reply = reader_optimizer(_request(text, "rank"))
    assert set(reply) >= {"order"}


def test_kind_of_prompt_reads_the_templates_themselves() -> None:
    opening = prompts.template("rank").split("{{", 1)[0]
    assert kind_of_prompt(opening + "anything") == "rank"
    with pytest.raises(ScriptExhausted):
        kind_of_prompt("Hello there")
