"""Whole-document rewrites: what a reply must look like before it may reach the gate."""

from __future__ import annotations

import pytest

from skillgrad.models.scripted import ScriptedModel
from skillgrad.records import Completion, Patch, Suggestion
from skillgrad.rewrite import (
    check_protected,
    extract_document,
    fold_suggestions,
    rewrite_document,
    validate_rewrite,
)

SKILL = ("# Skill\n\nAnswer briefly.\n\n<!-- SLOW_UPDATE_START -->\n- Keep it short.\n"
         "<!-- SLOW_UPDATE_END -->\n")


def reply(text: str, finish: str = "stop") -> Completion:
    return Completion(text=text, finish_reason=finish)


@pytest.mark.parametrize("text, document", [
    ("Here it is:\n<skill>\n# New\n\nDo it.\n</skill>\nDone.", "# New\n\nDo it.\n"),
    ("```markdown\n# New\n```", "# New\n"),
    ("# New\nplain", "# New\nplain\n"),
])
def test_the_document_is_taken_from_tags_a_fence_or_the_whole_reply(text: str, document: str) -> None:
    assert extract_document(reply(text)) == (document, None)


@pytest.mark.parametrize("text, finish, reason", [
    ("<skill>\n# New\n\nDo", "length", "cut off at the token limit"),
    ("<skill>\n# New\n\nDo it.", "stop", "never closes it"),
    ("<skill>\n  \n</skill>", "stop", "rewrite is empty"),
    ("", "stop", "rewrite is empty"),
])
def test_unusable_replies_are_refused_with_a_reason(text: str, finish: str, reason: str) -> None:
    document, error = extract_document(reply(text, finish))
    assert document is None and error is not None and reason in error


def test_protected_blocks_must_survive_verbatim() -> None:
    body = SKILL.replace("Answer briefly.", "Answer in one word.")
    assert check_protected(SKILL, body) is None
    dropped = "# Skill\n\nAnswer briefly.\n"
    assert check_protected(SKILL, dropped) == "rewrite drops protected block SLOW_UPDATE"
    altered = SKILL.replace("Keep it short.", "Keep it long.")
    assert check_protected(SKILL, altered) == "rewrite alters protected block SLOW_UPDATE"
    added = SKILL + "<!-- APPENDIX_START -->\nx\n<!-- APPENDIX_END -->\n"
    assert check_protected(SKILL, added) == "rewrite adds protected block APPENDIX"
    assert validate_rewrite(SKILL, SKILL, None) == "rewrite is identical to the current skill"


def test_rewrite_call_carries_out_the_suggestions_or_is_refused() -> None:
    good = SKILL.replace("Answer briefly.", "Answer briefly.\nGive digits only.")
    model = ScriptedModel([f"<skill>\n{good}</skill>", "<skill>\n# Skill\n</skill>"])
    kept = [Suggestion(type="add_rule", description="Give digits only.")]
    ok = rewrite_document(SKILL, kept, model)
    assert ok.document == good and ok.error is None
    prompt = model.calls[0].messages[0].text()
    assert "Give digits only." in prompt and "exactly, character for" in prompt
    bad = rewrite_document(SKILL, kept, model)
    assert bad.document is None and bad.error == "rewrite drops protected block SLOW_UPDATE"
    assert bad.raw == "<skill>\n# Skill\n</skill>"


def test_suggestions_fold_by_type_and_wording_failures_first() -> None:
    a = Suggestion(type="add_rule", description="Give digits only.", support=2)
    b = Suggestion(type="add_rule", description="give digits ONLY", support=3)
    c = Suggestion(type="compress", description="Shorten the intro.")
    folded = fold_suggestions([Patch(source="success", suggestions=(c,)),
                               Patch(source="failure", suggestions=(a, b))])
    assert [s.type for s in folded] == ["add_rule", "compress"]
    assert folded[0].support == 5 and folded[0].description == "Give digits only."
