"""An agent skill's description, retrained when the agent seldom loaded the skill
(skillgrad.stages.trigger); the whole loop with a real CLI is tests/test_agent_trigger_train.py."""

from __future__ import annotations

import json

from skillgrad.agentskills import parse_skill
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.models.scripted import ScriptedModel
from skillgrad.records import RolloutResult
from skillgrad.stages.hygiene import Evidence
from skillgrad.stages.trigger import retrain_trigger

SKILL = ("---\nname: ledger-rules\ndescription: >-\n  Notes kept\n  for later.\n---\n\n"
         "# Changing the ledger package\n\n- Amounts are integer cents.\n")


def _result(task: str, request: str, loaded: bool | None) -> RolloutResult:
    agent = {"cli": "opencode", "skill_loaded": loaded} if loaded is not None else None
    return RolloutResult(
        task_id=task, answer="done", hard=0.0, soft=0.0,
        messages=(Message(role="system", content=SKILL), Message(role="user", content=request)),
        metadata={"agent": agent} if agent else {})


RESULTS = [_result("t1", "Add a function that sums the refunds of the ledger.", False),
           _result("t2", "Rename the balance helper of the ledger.", False),
           _result("t3", "Add a test for the overdraft check.", True)]


def _model(description: str) -> tuple[ScriptedModel, list[ChatRequest]]:
    asked: list[ChatRequest] = []

    def reply(request: ChatRequest) -> str:
        asked.append(request)
        return json.dumps({"description": description})
    return ScriptedModel(fn=reply), asked


def test_a_skill_loaded_on_under_half_the_tasks_gets_a_new_description() -> None:
    model, asked = _model("Conventions of the ledger package. Use for any change to it.")
    made = retrain_trigger(SKILL, RESULTS, model, Evidence.of(RESULTS))
    assert made is not None and made.outcome is not None
    assert made.outcome.status == "applied"
    front, body, _ = parse_skill(made.candidate, "skill")
    assert front == {"name": "ledger-rules",
                     "description": "Conventions of the ledger package. Use for any change to it."}
    assert body == parse_skill(SKILL, "skill")[1]  # the body is untouched
    assert made.note.startswith("loaded 1/3; description rewritten: Conventions of")
    prompt = " ".join(asked[0].messages[0].text().split())
    assert "for 1 of the last 3" in prompt and "Notes kept for later." in prompt
    assert "sums the refunds" in prompt and "overdraft" not in prompt  # the unloaded ones only
    assert asked[0].kind == "trigger"


def test_no_call_where_the_agent_loaded_it_often_or_never_chose() -> None:
    model, asked = _model("x")
    often = [_result("a", "one", True), _result("b", "two", False)]
    assert retrain_trigger(SKILL, often, model, Evidence.of(often)) is None
    memory = [_result("a", "one", None)]  # the skill in the memory file: no choice to load
    assert retrain_trigger(SKILL, memory, model, Evidence.of(memory)) is None
    assert asked == []


def test_a_description_that_quotes_a_training_request_is_refused() -> None:
    model, _ = _model("Use to add a function that sums the refunds of the ledger.")
    made = retrain_trigger(SKILL, RESULTS, model, Evidence.of(RESULTS))
    assert made is not None and made.candidate == SKILL
    assert made.outcome is not None and made.outcome.status == "refused"
    assert "quotes training item 't1'" in made.note


def test_a_description_past_the_format_s_limit_is_skipped_with_the_rule() -> None:
    words = ["ledger", "cents", "refunds", "tests", "balances", "amounts", "changes", "files"]
    model, _ = _model(" ".join(f"{words[i % 8]}{chr(97 + i % 26)}{i}" for i in range(110)))
    made = retrain_trigger(SKILL, RESULTS, model, Evidence.of(RESULTS))
    assert made is not None and made.candidate == SKILL
    assert "at most 1024" in made.note and made.description is None


def test_without_front_matter_there_is_no_description_to_train() -> None:
    model, asked = _model("x")
    plain = "# Changing the ledger package\n\n- Amounts are integer cents.\n"
    made = retrain_trigger(plain, RESULTS, model, Evidence.of(RESULTS))
    assert made is not None and made.candidate == plain and asked == []
    assert "no front matter" in made.note


def test_an_unusable_reply_is_said() -> None:
    made = retrain_trigger(SKILL, RESULTS, ScriptedModel(default="not json"),
                           Evidence.of(RESULTS))
    assert made is not None and made.candidate == SKILL
    assert "could not be used" in made.note
