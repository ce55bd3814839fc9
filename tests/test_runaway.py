"""Runaway replies (one sentence repeated until the token limit): the detector, and how
``ask_json`` retries them differently and never adopts them."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from pydantic import BaseModel

import skillgrad
from skillgrad.models.ask_json import RETRY_TEMPERATURE, ask_json, find_runaway, is_runaway
from skillgrad.models.messages import Completion, Message
from skillgrad.models.scripted import ScriptedModel
from skillgrad.stages.replies import PatchReply
from skillgrad.stages.rewrite import ask_document

PACKAGE = Path(skillgrad.__file__).parent
LOOPED = "The agent's answer contains extra words. "

# What the embedded Qwen2.5-Coder-1.5B analyst wrote when it looped: the reasoning repeats one
# sentence until max_tokens cuts the reply off.
RUNAWAY = ('{"reasoning": "The shared failure pattern is that the answers are too long. '
           + LOOPED * 40)
# The same loop, but the model stopped by itself: the reply parses.
RUNAWAY_CLOSED = json.dumps({"reasoning": LOOPED * 40, "edits": []})

# A real reply of the same model (not a runaway): one long phrase said three times.
QWEN_REPLY = json.dumps({
    "reasoning": "The shared failure pattern is that the agent does not correctly answer the "
                 "question without extra words or the gold answer plus extra words, and scoring "
                 "is exact match, so only the answer alone counts (token F1 0.33).",
    "edits": [{"op": "replace",
               "rationale": "The agent should answer the question without extra words or the "
                            "gold answer plus extra words, and scoring is exact match, so only "
                            "the answer alone counts (token F1 0.33).",
               "content": "Answer the question without extra words or the gold answer plus "
                          "extra words, and scoring is exact match, so only the answer alone "
                          "counts (token F1 0.33)",
               "anchor": "Answer the question without extra words or the gold answer plus "
                         "extra words, and scoring is exact match, so only the answer alone "
                         "counts (token F1 0.33)",
               "support": 1}],
})

FOUR_EDITS = {
    "reasoning": "Answers carry extra words; the scorer wants the bare value.",
    "edits": [
        {"op": "append", "anchor": "", "support": 7,
         "content": "Answer the question with the bare value only, no extra words.",
         "rationale": "Seven answers added words such as 'probably'."},
        {"op": "replace", "anchor": "Answer the question about the item.", "support": 4,
         "content": "Answer the question about the item with its exact value.",
         "rationale": "The answer must match the gold value exactly."},
        {"op": "append", "anchor": "", "support": 2,
         "content": "Answer the question in the unit the context uses.",
         "rationale": "Two answers converted units."},
        {"op": "append", "anchor": "", "support": 1,
         "content": "Answer the question even when the context is long; never reply 'unknown'.",
         "rationale": "One answer gave up."},
    ],
}
GOOD_PATCH = json.dumps(FOUR_EDITS)


# ----------------------------------------------------------------------------- the detector


def _mixed_loop() -> str:
    rng = random.Random(1)
    phrases = ["The agent adds extra words.", "The answer is too long.",
               "The gold answer is short."]
    return '{"reasoning": "' + " ".join(rng.choice(phrases) for _ in range(80))


EDIT = ('{"op": "append", "anchor": "", "content": "Answer with the bare value.", '
        '"rationale": "The agent adds words.", "support": 3}, ')
POSITIVES = {
    "sentence until the token limit": RUNAWAY,
    "sentence, reply closed": RUNAWAY_CLOSED,
    "one phrase": '{"reasoning": "the answer is ' + "very " * 300,
    "a paragraph": '{"document": "' + ("When the question asks for a year, reply with the "
                                       "four digit year only and never add words such as "
                                       "probably, because the scorer compares the whole "
                                       "reply with the gold answer. ") * 12,
    "counting up": '{"reasoning": "' + "".join(
        f"Step {i}: check that the answer has no extra words. " for i in range(1, 60)),
    "a few phrases in varying order": _mixed_loop(),
    "the same edit object": '{"reasoning": "x", "edits": [' + EDIT * 25,
    "whitespace": '{"reasoning": "ok", "edits": [' + " " * 2000,
    "escaped newlines": '{"document": "# Skill' + "\\n" * 500,
}


@pytest.mark.parametrize("text", POSITIVES.values(), ids=POSITIVES.keys())
def test_runaways_are_flagged(text: str) -> None:
    assert is_runaway(text)
    assert find_runaway(text)


def test_the_description_names_the_repeated_sentence_and_count() -> None:
    assert find_runaway(RUNAWAY) == "\"The agent's answer contains extra words.\" repeated 40 times"
    assert find_runaway(RUNAWAY_CLOSED) == find_runaway(RUNAWAY)
    assert "'The gold answer is short'" in (find_runaway(_mixed_loop()) or "")
    assert find_runaway(POSITIVES["whitespace"]) == "whitespace repeated 2000 times"


def test_a_loop_after_a_long_honest_start_is_found() -> None:
    start = json.dumps(FOUR_EDITS)[:-2]  # a full patch, then the last rationale loops
    assert find_runaway(start + " " + LOOPED * 30) is not None


NEGATIVES = {
    "four distinct edits sharing words": GOOD_PATCH,
    "four edits, pretty-printed": json.dumps(FOUR_EDITS, indent=2),
    "a real Qwen reply saying one phrase three times": QWEN_REPLY,
    "twelve templated edits": json.dumps({"reasoning": "r", "edits": [
        {"op": "append", "anchor": "", "support": 2,
         "content": f"When the question asks for the {k} of an item, answer with the {k} only.",
         "rationale": f"Answers about the {k} had extra words."}
        for k in ["color", "year", "size", "owner", "price", "weight", "origin", "material",
                  "shape", "maker", "age", "height"]]}),
    "a ranking": json.dumps({"reasoning": "by support", "order": list(range(1, 60))}),
    "numbered rules": json.dumps({"document": "\n".join(
        f"{i}. Rule {i}: answer with the bare {k}." for i, k in enumerate(
            ["year", "color", "name", "unit", "date", "size", "city"], 1))}),
    "a sentence four times in a row": json.dumps({"reasoning": LOOPED * 4, "edits": []}),
    "a short echo": '{"reasoning": "no, no, no, no, no, no, no.", "edits": []}',
    "a markdown table": json.dumps({"document": "| a | b |\n|---|---|\n" + "".join(
        f"| {i} | {i * i} |\n" for i in range(30))}),
    "empty": "",
}


@pytest.mark.parametrize("text", NEGATIVES.values(), ids=NEGATIVES.keys())
def test_honest_replies_are_not_flagged(text: str) -> None:
    assert find_runaway(text) is None
    assert not is_runaway(text)


SHIPPED = sorted([*PACKAGE.glob("prompts/*.md"),
                  *(PACKAGE / "envs" / env / "skill.md"
                    for env in ("qa", "math", "mcq", "docvqa", "household", "spreadsheet"))])


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_shipped_documents_are_not_flagged(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert find_runaway(text) is None
    assert find_runaway(json.dumps({"document": text})) is None  # as a rewrite reply


# ----------------------------------------------------------------------------- ask_json


class Answer(BaseModel):
    reasoning: str
    order: list[int]


GOOD = '{"reasoning": "r", "order": [2, 1]}'
ASK = [Message(role="user", content="Rank the edits.")]


def cut(text: str) -> Completion:
    return Completion(text=text, finish_reason="length")


def test_a_runaway_is_retried_differently_and_the_good_reply_kept() -> None:
    model = ScriptedModel([cut(RUNAWAY), GOOD_PATCH])
    reply = ask_json(model, ASK, PatchReply, kind="test", max_tokens=300, temperature=0.0)
    assert reply.value is not None and len(reply.value.edits) == 4
    assert (reply.attempts, reply.error, reply.raw) == (2, None, GOOD_PATCH)
    assert reply.retried is not None and reply.retried.startswith("runaway (repeated text)")
    first, second = model.calls
    assert first.temperature == 0.0
    assert second.temperature == RETRY_TEMPERATURE  # a greedy loop is not replayed exactly
    assert (second.max_tokens, second.json_schema, second.kind) == (300, first.json_schema, "test")
    assert second.messages[0] == ASK[0]
    shown, note = second.messages[1], second.messages[2]
    assert shown.role == "assistant" and note.role == "user"
    assert shown.text().count(LOOPED.strip()) <= 1  # the loop is not fed back
    assert len(shown.text()) <= 420 and shown.text().endswith("[...]")
    assert "repeated itself" in note.text() and "extra words" in note.text()
    assert "write each point once" in note.text().lower()
    assert "only the JSON object" in note.text()


@pytest.mark.parametrize("temperature, retry", [(None, RETRY_TEMPERATURE), (0.2, RETRY_TEMPERATURE),
                                                (1.0, 1.0)])
def test_the_retry_temperature_is_raised_never_lowered(temperature: float | None,
                                                       retry: float) -> None:
    model = ScriptedModel([cut(RUNAWAY), GOOD])
    assert ask_json(model, ASK, Answer, kind="test", temperature=temperature).value is not None
    assert [c.temperature for c in model.calls] == [temperature, retry]


def test_a_runaway_twice_is_lost_loudly() -> None:
    second = cut('{"reasoning": "' + LOOPED * 50)
    model = ScriptedModel([cut(RUNAWAY), second])
    reply = ask_json(model, ASK, Answer, kind="test", max_tokens=300)
    assert reply.value is None and reply.attempts == 2 and len(model.calls) == 2
    assert reply.raw == second.text
    assert reply.error == ("runaway (repeated text): \"The agent's answer contains extra words.\" "
                           "repeated 50 times until the token limit")


def test_a_runaway_that_parses_is_not_adopted() -> None:
    model = ScriptedModel([RUNAWAY_CLOSED, GOOD_PATCH])
    reply = ask_json(model, ASK, PatchReply, kind="test")
    assert reply.raw == GOOD_PATCH and reply.attempts == 2
    model = ScriptedModel([RUNAWAY_CLOSED, RUNAWAY_CLOSED])
    reply = ask_json(model, ASK, PatchReply, kind="test")
    assert reply.value is None and reply.error is not None
    assert reply.error.startswith("runaway (repeated text)")
    assert "token limit" not in reply.error  # it was not cut off


def test_a_truncated_reply_is_retried_and_never_adopted() -> None:
    model = ScriptedModel([cut(GOOD), GOOD])  # parses, but was cut off
    reply = ask_json(model, ASK, Answer, kind="test", max_tokens=100, temperature=0.0)
    assert reply.value == Answer(reasoning="r", order=[2, 1]) and reply.attempts == 2
    assert reply.retried == "reply was cut off at the token limit (100 tokens)"
    note = model.calls[1].messages[-1].text()
    assert "cut off at the token limit (100 tokens)" in note and "only the JSON object" in note
    assert model.calls[1].temperature == RETRY_TEMPERATURE


def test_truncated_twice_is_lost_and_says_so() -> None:
    model = ScriptedModel([cut('{"reasoning": "a long'), cut('{"reasoning": "longer')])
    reply = ask_json(model, ASK, Answer, kind="test")
    assert reply.value is None and reply.attempts == 2
    assert reply.error == "reply was cut off at the token limit"


def test_the_first_problem_is_named_when_the_second_differs() -> None:
    reply = ask_json(ScriptedModel([cut(RUNAWAY), "no json"]), ASK, Answer, kind="test")
    assert reply.error is not None and "no JSON object" in reply.error
    assert reply.error.endswith("the first reply ran away (repeated text)")
    reply = ask_json(ScriptedModel([cut(GOOD), RUNAWAY_CLOSED]), ASK, Answer, kind="test")
    assert reply.error is not None and reply.error.startswith("runaway (repeated text)")
    assert reply.error.endswith("the first reply was too long")


def test_a_runaway_after_a_repair_retry_is_not_adopted() -> None:
    model = ScriptedModel(["no json", RUNAWAY_CLOSED])
    reply = ask_json(model, ASK, PatchReply, kind="test", temperature=0.0)
    assert reply.value is None and len(model.calls) == 2  # still at most one retry
    assert reply.error is not None and reply.error.startswith("runaway (repeated text)")
    assert reply.retried is not None and "no JSON object" in reply.retried
    assert model.calls[1].temperature == 0.0  # a repair retry keeps the temperature


def test_a_normal_reply_is_one_call() -> None:
    model = ScriptedModel([GOOD_PATCH])
    reply = ask_json(model, ASK, PatchReply, kind="test", temperature=0.0)
    assert (reply.attempts, reply.error, reply.retried) == (1, None, None)
    assert len(model.calls) == 1


def test_the_retry_is_deterministic() -> None:
    runs = []
    for _ in range(2):
        model = ScriptedModel([cut(RUNAWAY), GOOD])
        ask_json(model, ASK, Answer, kind="test", temperature=0.0)
        runs.append([c.identity() for c in model.calls])
    assert runs[0] == runs[1]


def test_a_runaway_rewrite_is_refused_as_a_runaway() -> None:
    loop = cut('{"document": "# Skill\\n\\n' + "- Answer with the bare value.\\n" * 40)
    result = ask_document(ScriptedModel([loop, loop]), "rewrite it", kind="rewrite",
                          max_tokens=100, temperature=0.0)
    assert result.document is None and result.error is not None
    assert result.error.startswith("runaway (repeated text): '- Answer with the bare value.'")


def test_the_rules_reply_states_a_bound_on_its_difference_and_parses_past_it() -> None:
    """The 1.5B analyst looped inside "difference" to the token limit and lost its rules; the
    schema bounds that sentence, which a grammar-constrained model obeys and an endpoint that
    does not enforce it ignores. What comes back longer still parses."""
    from skillgrad.stages.replies import DIFFERENCE_CHARS, RULE_CHARS, RulesReply, rules_schema

    schema = rules_schema(3)
    assert schema["properties"]["difference"]["maxLength"] == DIFFERENCE_CHARS
    assert schema["properties"]["rules"]["items"] == {"type": "string", "maxLength": RULE_CHARS}
    assert schema["required"] == ["difference", "rules"]
    long = RulesReply.model_validate({"difference": LOOPED * 40, "rules": ["- Be brief."]})
    assert long.difference == LOOPED * 40 and long.rules == ["- Be brief."]
    grammar = pytest.importorskip("llama_cpp.llama_grammar")
    gbnf = grammar.json_schema_to_gbnf(json.dumps(schema))
    assert gbnf.count("char") > DIFFERENCE_CHARS  # the bound is in the grammar, not dropped
    grammar.LlamaGrammar.from_string(gbnf, verbose=False)


def test_a_rule_stopped_at_its_bound_keeps_its_whole_sentences() -> None:
    """A rule of the embedded analyst ran on ("If the unit symbol is present but not in the
    correct position, move it ... If the unit symbol is present but not in the correct
    order, ..."); stopped at the bound, it is kept as far as its last whole sentence. A rule
    of any other length is kept as written (an endpoint that ignores the bound)."""
    from skillgrad.stages.replies import RULE_CHARS, RulesReply

    first = ("Before you answer, make sure to include the unit symbol 'mL' for millilitres, 's' "
             "for seconds and 'min' for minutes. If the unit symbol is missing, add it to the "
             "end of the answer.")
    runaway = (first + " If the unit symbol is present but not in the correct position, move "
               "it to the correct position." * 10)[:RULE_CHARS]
    assert not runaway.endswith(".")
    reply = RulesReply(difference="no unit symbol", rules=[runaway, "Be brief. Or"])
    kept = reply.whole_rules()
    assert kept[0].startswith(first) and kept[0].endswith("position.") and len(kept[0]) < RULE_CHARS
    assert kept[1] == "Be brief. Or"
    long = first * 3
    assert RulesReply(rules=[long]).whole_rules() == [long]
    assert [e.content for e in reply.to_edits(1)][0] == f"- {kept[0]}"
