"""Whole-document rewrites: what a reply must look like before it may reach the gate."""

from __future__ import annotations

import pytest

from skillgrad.models.messages import Completion
from skillgrad.models.scripted import ScriptedModel
from skillgrad.records import Patch, Suggestion
from skillgrad.stages.rewrite import (
    RewriteResult,
    ask_document,
    check_protected,
    fold_suggestions,
    rewrite_document,
    settle,
)

SKILL = ("# Skill\n\nAnswer briefly.\n\n<!-- SLOW_UPDATE_START -->\n- Keep it short.\n"
         "<!-- SLOW_UPDATE_END -->\n")


def ask(*replies: object) -> RewriteResult:
    return ask_document(ScriptedModel(list(replies)), "rewrite it", kind="rewrite", max_tokens=100,
                        temperature=0.0)


def test_the_document_comes_as_json_and_ends_with_one_newline() -> None:
    assert ask({"document": "# New\n\nDo it.\n\n"}) == RewriteResult(
        "# New\n\nDo it.\n", None, '{"document": "# New\\n\\nDo it.\\n\\n"}')
    # prose around the object is tolerated
    assert ask('Sure! {"document": "# New"} Done.').document == "# New\n"


@pytest.mark.parametrize("replies, reason", [
    ([Completion(text='{"document": "# New\\n\\nDo', finish_reason="length")] * 2,
     "cut off at the token limit"),
    ([{"document": "  \n"}], "rewrite is empty"),
    (["no JSON here", "still none"], "not valid JSON"),
])
def test_unusable_replies_are_refused_with_a_reason(replies: list[object], reason: str) -> None:
    result = ask(*replies)
    assert result.document is None and result.error is not None and reason in result.error
    assert result.raw


def test_protected_blocks_must_survive_verbatim() -> None:
    body = SKILL.replace("Answer briefly.", "Answer in one word.")
    assert check_protected(SKILL, body) is None
    dropped = "# Skill\n\nAnswer briefly.\n"
    assert check_protected(SKILL, dropped) == "rewrite drops protected block SLOW_UPDATE"
    altered = SKILL.replace("Keep it short.", "Keep it long.")
    assert check_protected(SKILL, altered) == "rewrite alters protected block SLOW_UPDATE"
    added = SKILL + "<!-- APPENDIX_START -->\nx\n<!-- APPENDIX_END -->\n"
    assert check_protected(SKILL, added) == "rewrite adds protected block APPENDIX"
    assert settle(SKILL, SKILL, None) == (None, "rewrite is identical to the current skill")


def test_a_reply_without_blocks_is_the_text_outside_them() -> None:
    two = SKILL + "\n<!-- APPENDIX_START -->\n- Read twice.\n<!-- APPENDIX_END -->\n"
    body = "# Skill\n\nAnswer in one word.\n"
    candidate, refusal = settle(two, body, None)
    assert refusal is None and candidate is not None
    assert candidate.startswith(body) and candidate.endswith(two[two.index("<!-- SLOW"):])
    # writing the blocks back itself is fine as long as all of them are exact
    assert settle(two, two.replace("briefly", "in one word"), None)[1] is None
    one_lost = two.replace("<!-- SLOW_UPDATE_START -->\n- Keep it short.\n<!-- SLOW_UPDATE_END -->",
                           "")
    assert settle(two, one_lost, None) == (None, "rewrite drops protected block SLOW_UPDATE")
    assert settle(two, None, "rewrite is empty") == (None, "rewrite is empty")


def test_rewrite_call_carries_out_the_suggestions_or_is_refused() -> None:
    body = "# Skill\n\nAnswer briefly.\nGive digits only."
    altered = SKILL.replace("Keep it short.", "Keep it very short.")
    model = ScriptedModel([{"document": body}, {"document": altered}])
    kept = [Suggestion(type="add_rule", description="Give digits only.")]
    ok = rewrite_document(SKILL, kept, model)
    assert ok.document == SKILL.replace("Answer briefly.", "Answer briefly.\nGive digits only.")
    assert ok.error is None
    prompt = model.calls[0].messages[0].text()
    assert "Give digits only." in prompt and "## Protected blocks" in prompt
    assert prompt.index("Answer briefly.") < prompt.index("## Protected blocks")
    bad = rewrite_document(SKILL, kept, model)
    assert bad.document is None and bad.error == "rewrite alters protected block SLOW_UPDATE"
    assert bad.raw and "very short" in bad.raw


def test_suggestions_fold_by_type_and_wording_failures_first() -> None:
    a = Suggestion(type="add_rule", description="Give digits only.", support=2)
    b = Suggestion(type="add_rule", description="give digits ONLY", support=3)
    c = Suggestion(type="compress", description="Shorten the intro.")
    folded = fold_suggestions([Patch(source="success", suggestions=(c,)),
                               Patch(source="failure", suggestions=(a, b))])
    assert [s.type for s in folded] == ["add_rule", "compress"]
    assert folded[0].support == 5 and folded[0].description == "Give digits only."


def test_the_skill_tags_of_the_prompt_are_not_part_of_the_document() -> None:
    assert ask({"document": "<skill>\n# New\n</skill>"}).document == "# New\n"
