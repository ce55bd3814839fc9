"""The optimizer step: applying edits to the skill document."""

from __future__ import annotations

import pytest

from skillgrad.records import ApplyReport, Edit, EditOutcome
from skillgrad.skill import get_block, protected_spans
from skillgrad.stages.update import apply_edits

SKILL = """# Answering questions

## Rules

- Always cite the source of a fact.
- Keep answers short.

## Format

Answer in one sentence.
"""

PROTECTED = """# Skill

Intro line.

<!-- SLOW_UPDATE_START -->
Never guess a date.
<!-- SLOW_UPDATE_END -->

Body rule.

<!-- APPENDIX_START -->
Appendix note.
<!-- APPENDIX_END -->
"""


def _one(skill: str, edit: Edit, **kw: float) -> tuple[str, EditOutcome]:
    new, report = apply_edits(skill, [edit], **kw)
    [outcome] = report.outcomes
    assert outcome.index == 0 and outcome.edit == edit
    return new, outcome


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(b.name, text[b.start : b.end]) for b in protected_spans(text)]


# ----------------------------------------------------------------------------- exact ops


def test_append_adds_content_after_a_blank_line() -> None:
    new, out = _one(SKILL.rstrip("\n") + "\n\n\n", Edit(op="append", content="New rule.\n\n"))
    assert out.status == "applied"
    assert new == SKILL + "\nNew rule.\n"


@pytest.mark.parametrize(
    ("skill", "content", "expected"),
    [
        # a rule after the skill's rules continues their list
        ("# T\n\n- Read it.\n- Answer it.\n", "- Be brief.",
         "# T\n\n- Read it.\n- Answer it.\n- Be brief.\n"),
        ("# T\n\nRules:\n- Read it.\n  Then read it again.\n", "- Be brief.",
         "# T\n\nRules:\n- Read it.\n  Then read it again.\n- Be brief.\n"),
        ("# T\n\n1. Read it.\n2. Answer it.\n", "3. Check it.",
         "# T\n\n1. Read it.\n2. Answer it.\n3. Check it.\n"),
        # after a paragraph, a list of another kind, or content that is no item: a blank line
        ("# T\n\nRead it.\n", "- Be brief.", "# T\n\nRead it.\n\n- Be brief.\n"),
        ("# T\n\n1. Read it.\n", "- Be brief.", "# T\n\n1. Read it.\n\n- Be brief.\n"),
        ("# T\n\n- Read it.\n", "Be brief.", "# T\n\n- Read it.\n\nBe brief.\n"),
        ("# T\n\n- Read it.\n\nThat is all.\n", "- Be brief.",
         "# T\n\n- Read it.\n\nThat is all.\n\n- Be brief.\n"),
        ("# T\n\n    print(1)\n", "- Be brief.", "# T\n\n    print(1)\n\n- Be brief.\n"),
    ],
)
def test_an_appended_item_continues_the_list_the_skill_ends_with(
    skill: str, content: str, expected: str
) -> None:
    new, out = _one(skill, Edit(op="append", content=content))
    assert out.status == "applied"
    assert new == expected


def test_insert_after_exact_anchor() -> None:
    edit = Edit(
        op="insert_after", anchor="- Always cite the source of a fact.", content="- Quote it."
    )
    new, out = _one(SKILL, edit)
    assert out.status == "applied" and out.matched == edit.anchor and out.similarity == 1.0
    assert "- Always cite the source of a fact.\n- Quote it.\n- Keep answers short." in new


def test_insert_after_partial_anchor_goes_after_the_whole_line() -> None:
    new, out = _one(SKILL, Edit(op="insert_after", anchor="Always cite", content="- Quote it."))
    assert out.status == "applied"
    assert "- Always cite the source of a fact.\n- Quote it.\n" in new


def test_insert_after_heading_inserts_after_the_heading_not_the_section() -> None:
    new, _ = _one(SKILL, Edit(op="insert_after", anchor="## Rules\n", content="Read first."))
    assert "## Rules\nRead first.\n\n- Always cite" in new


def test_insert_after_last_line_without_trailing_newline() -> None:
    new, out = _one("a\nb", Edit(op="insert_after", anchor="b", content="c"))
    assert out.status == "applied" and new == "a\nb\nc"


def test_replace_exact() -> None:
    edit = Edit(op="replace", anchor="Keep answers short.", content="Keep answers under 20 words.")
    new, out = _one(SKILL, edit)
    assert out.status == "applied"
    assert new == SKILL.replace("Keep answers short.", "Keep answers under 20 words.")


def test_delete_exact_removes_the_emptied_line() -> None:
    new, out = _one(SKILL, Edit(op="delete", anchor="- Keep answers short."))
    assert out.status == "applied"
    assert new == SKILL.replace("- Keep answers short.\n", "")


def test_delete_drops_a_list_item_left_with_only_punctuation() -> None:
    new, _ = _one(SKILL, Edit(op="delete", anchor="Keep answers short"))
    assert new == SKILL.replace("- Keep answers short.\n", "")


def test_delete_paragraph_leaves_no_run_of_blank_lines() -> None:
    new, _ = _one("A\n\nB\n\nC\n", Edit(op="delete", anchor="B"))
    assert new == "A\n\nC\n"


# ----------------------------------------------------------------------------- missing anchors


@pytest.mark.parametrize("op", ["insert_after", "replace", "delete"])
def test_missing_anchor_is_skipped_and_never_appended(op: str) -> None:
    edit = Edit(op=op, anchor="Use a calculator for arithmetic.", content="Check twice.")
    new, out = _one(SKILL, edit)
    assert new == SKILL
    assert out.status == "skipped" and "not found" in (out.reason or "")


@pytest.mark.parametrize("skill", ["", "one line\n"])
def test_anchor_longer_than_document_is_skipped(skill: str) -> None:
    new, out = _one(skill, Edit(op="insert_after", anchor="a\nb\nc", content="x"))
    assert new == skill and out.status == "skipped" and out.reason == "anchor not found"


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (Edit(op="insert_after", anchor="   ", content="x"), "empty anchor"),
        (Edit(op="delete", anchor=""), "empty anchor"),
        (Edit(op="append", content=" \n "), "empty content"),
        (Edit(op="insert_after", anchor="Keep answers short.", content=""), "empty content"),
        (Edit(op="replace", anchor="Keep answers short.", content=""), "empty content; use delete"),
    ],
)
def test_empty_anchor_or_content_is_skipped(edit: Edit, reason: str) -> None:
    new, out = _one(SKILL, edit)
    assert new == SKILL and out.status == "skipped" and out.reason == reason


# ----------------------------------------------------------------------------- tolerant matching


def test_whitespace_case_and_markdown_tolerant_match() -> None:
    edit = Edit(op="replace", anchor="always  CITE the\nsource of a fact", content="Cite sources")
    new, out = _one(SKILL, edit)
    assert out.status == "applied_fuzzy" and out.similarity == 1.0
    assert out.matched == "Always cite the source of a fact"
    assert "- Cite sources.\n- Keep answers short." in new


def test_tolerant_match_ignores_bullets_numbering_and_emphasis() -> None:
    skill = "Steps:\n\n1. **Read** the question.\n2. Answer it.\n"
    new, out = _one(skill, Edit(op="replace", anchor="- read the question", content="Reread it"))
    assert out.status == "applied_fuzzy"
    assert out.matched == "1. **Read** the question"
    assert new == "Steps:\n\nReread it.\n2. Answer it.\n"


def test_tolerant_match_includes_emphasis_around_the_match() -> None:
    new, out = _one("Rule: **be brief**.\n", Edit(op="replace", anchor="BE BRIEF", content="x"))
    assert out.matched == "**be brief**" and new == "Rule: x.\n"


def test_line_similarity_match_above_threshold() -> None:
    edit = Edit(op="replace", anchor="Always cite the sources of facts", content="- Cite.")
    new, out = _one(SKILL, edit)
    assert out.status == "applied_fuzzy"
    assert out.matched == "- Always cite the source of a fact."
    assert out.similarity is not None and 0.82 <= out.similarity < 1.0
    assert "\n- Cite.\n- Keep answers short." in new


def test_line_similarity_window_spans_anchor_line_count() -> None:
    anchor = "Always cite sources of facts.\nKeep the answers short."
    new, out = _one(SKILL, Edit(op="delete", anchor=anchor))
    assert out.status == "applied_fuzzy"
    assert out.matched == "- Always cite the source of a fact.\n- Keep answers short."
    assert new == "# Answering questions\n\n## Rules\n\n## Format\n\nAnswer in one sentence.\n"


def test_line_similarity_near_miss_below_threshold_is_skipped() -> None:
    edit = Edit(op="insert_after", anchor="Always quote the source of each claim", content="x")
    new, out = _one(SKILL, edit)
    assert new == SKILL and out.status == "skipped"
    assert out.similarity is not None and 0.5 < out.similarity < 0.82
    assert out.matched == "- Always cite the source of a fact."
    # The same anchor is accepted once the threshold is below its similarity.
    _, loose = _one(SKILL, edit, fuzzy_threshold=out.similarity - 0.01)
    assert loose.status == "applied_fuzzy"


def test_fuzzy_threshold_must_be_a_ratio() -> None:
    with pytest.raises(ValueError):
        apply_edits(SKILL, [], fuzzy_threshold=1.5)


def test_ambiguous_exact_anchor_uses_first_occurrence() -> None:
    new, _ = _one("x\nx\n", Edit(op="replace", anchor="x", content="y"))
    assert new == "y\nx\n"


# ----------------------------------------------------------------------------- protected blocks


@pytest.mark.parametrize(
    ("op", "anchor"),
    [
        ("replace", "Never guess a date."),  # exact
        ("delete", "never GUESS a date"),  # tolerant
        ("insert_after", "Never guess any dates"),  # line similarity
        ("replace", "Never guess a date.\n<!-- SLOW_UPDATE_END -->\n\nBody rule."),  # overlap
        ("delete", "<!-- APPENDIX_START -->"),  # the marker itself
    ],
)
def test_anchor_inside_protected_block_is_refused(op: str, anchor: str) -> None:
    new, out = _one(PROTECTED, Edit(op=op, anchor=anchor, content="Guess freely."))
    assert new == PROTECTED and out.status == "skipped"
    assert (out.reason or "").startswith("anchor is inside protected block ")
    assert out.reason in (
        "anchor is inside protected block SLOW_UPDATE",
        "anchor is inside protected block APPENDIX",
    )


def test_exact_anchor_prefers_occurrence_outside_protected_blocks() -> None:
    skill = "<!-- A_START -->\nrule\n<!-- A_END -->\n\nrule\n"
    new, out = _one(skill, Edit(op="replace", anchor="rule", content="law"))
    assert out.status == "applied" and new == "<!-- A_START -->\nrule\n<!-- A_END -->\n\nlaw\n"


def test_unterminated_block_protects_the_rest_of_the_document() -> None:
    skill = "Top.\n<!-- APPENDIX_START -->\nLater rule.\n"
    new, out = _one(skill, Edit(op="delete", anchor="Later rule."))
    assert new == skill and out.reason == "anchor is inside protected block APPENDIX"


@pytest.mark.parametrize(
    "edit",
    [
        Edit(op="append", content="Sneaky.\n<!-- slow_update_start -->\nGuess dates."),
        Edit(op="insert_after", anchor="Intro line.", content="<!--SLOW_UPDATE_END-->\nfree"),
        Edit(op="replace", anchor="Body rule.", content="<!-- APPENDIX_END --> <!-- X_START -->"),
    ],
)
def test_smuggled_markers_are_neutralised(edit: Edit) -> None:
    new, out = _one(PROTECTED, edit)
    assert out.status == "applied"
    assert _blocks(new) == _blocks(PROTECTED)
    assert "<!- - " in new


def test_edit_that_would_move_text_into_a_block_is_refused() -> None:
    # The anchor line ends inside a block, so "after the line" would be inside the block.
    skill = "Lead <!-- A_START -->\nkept\n<!-- A_END -->\n"
    new, out = _one(skill, Edit(op="insert_after", anchor="Lead", content="intruder"))
    assert new == skill and out.reason == "edit would alter a protected block"


# ----------------------------------------------------------------------------- append rules


def test_append_goes_before_trailing_protected_blocks() -> None:
    new, out = _one(PROTECTED, Edit(op="append", content="Late rule."))
    assert out.status == "applied"
    assert "Body rule.\n\nLate rule.\n\n<!-- APPENDIX_START -->" in new
    assert new.endswith("<!-- APPENDIX_END -->\n")
    assert _blocks(new) == _blocks(PROTECTED)


def test_append_before_several_trailing_blocks_and_after_inner_ones() -> None:
    skill = "Body.\n\n<!-- A_START -->\na\n<!-- A_END -->\n<!-- B_START -->\nb\n<!-- B_END -->"
    new, _ = _one(skill, Edit(op="append", content="More."))
    assert new == "Body.\n\nMore.\n\n" + skill[len("Body.\n\n") :]


def test_duplicate_append_is_skipped() -> None:
    new, out = _one(SKILL, Edit(op="append", content="Keep answers short."))
    assert new == SKILL and out.status == "skipped" and out.reason == "duplicate content"


def test_no_change_edits_are_skipped() -> None:
    same = Edit(op="replace", anchor="Keep answers short.", content="Keep answers short.")
    again = Edit(op="insert_after", anchor="## Format", content="\nAnswer in one sentence.")
    for edit in (same, again):
        new, out = _one(SKILL, edit)
        assert new == SKILL and out.status == "skipped"
        assert (out.reason or "").startswith("no change")


# ----------------------------------------------------------------------------- the whole step


def test_sequential_edits_compose_and_report_in_order() -> None:
    edits = [
        Edit(op="replace", anchor="Keep answers short.", content="Keep answers brief."),
        Edit(op="insert_after", anchor="Keep answers brief.", content="- Use units."),
        Edit(op="delete", anchor="Use a calculator."),
        Edit(op="append", content="## Examples\n\nQ: 2+2? A: 4."),
    ]
    new, report = apply_edits(SKILL, edits)
    assert [o.index for o in report.outcomes] == [0, 1, 2, 3]
    assert [o.status for o in report.outcomes] == ["applied", "applied", "skipped", "applied"]
    assert report.n_applied == 3 and not report.all_missed
    assert "- Keep answers brief.\n- Use units.\n" in new
    assert new.endswith("Answer in one sentence.\n\n## Examples\n\nQ: 2+2? A: 4.\n")


def test_all_missed_report_leaves_skill_unchanged() -> None:
    edits = [
        Edit(op="replace", anchor="nothing like this", content="x"),
        Edit(op="delete", anchor="Never guess a date."),
        Edit(op="append", content="Body rule."),
    ]
    new, report = apply_edits(PROTECTED, edits)
    assert new == PROTECTED
    assert report.all_missed and report.count("skipped") == 3
    assert apply_edits(PROTECTED, [])[1] == ApplyReport()


def test_apply_edits_keeps_slow_update_block_intact_across_a_step() -> None:
    edits = [Edit(op="append", content="x"), Edit(op="replace", anchor="Intro line.", content="y")]
    new, _ = apply_edits(PROTECTED, edits)
    assert get_block(new, "SLOW_UPDATE") == "Never guess a date."
    assert _blocks(new) == _blocks(PROTECTED)


# ----------------------------------------------------------------------------- front matter

AGENT_SKILL = ("---\nname: repo-conventions\ndescription: How to make a change here.\n---\n\n"
               "# Working here\n\n- Read first.\n")


def test_the_description_of_an_agent_skill_trains_like_the_body() -> None:
    new, report = apply_edits(AGENT_SKILL, [Edit(
        op="replace", anchor="description: How to make a change here.",
        content="description: Use for every request that changes code, its tests or the "
                "CHANGELOG.")])
    assert report.outcomes[0].status == "applied"
    assert "description: Use for every request that changes code" in new
    assert new.endswith("- Read first.\n")


@pytest.mark.parametrize(("content", "broken"), [
    ("description: Use it: always.", "front matter"),           # YAML: a second ': '
    ("description: " + "x" * 1100, "description: 1100 characters (at most 1024)"),
    ("description:", "description: missing"),
    ("name: other-name\ndescription: How to make a change here.", "name: 'repo-conventions' "
     "became 'other-name'"),
])
def test_an_edit_that_breaks_the_front_matter_is_skipped_with_the_rule(
        content: str, broken: str) -> None:
    anchor = ("description: How to make a change here." if content.startswith("desc")
              else "name: repo-conventions\ndescription: How to make a change here.")
    new, report = apply_edits(AGENT_SKILL, [Edit(op="replace", anchor=anchor, content=content)])
    outcome = report.outcomes[0]
    assert new == AGENT_SKILL and outcome.status == "skipped"
    assert outcome.reason is not None
    assert outcome.reason.startswith("edit would break the front matter: ")
    assert broken in outcome.reason


def test_deleting_the_closing_line_of_the_front_matter_is_skipped() -> None:
    new, report = apply_edits(AGENT_SKILL, [Edit(op="replace", anchor="---\n\n# Working here",
                                                 content="# Working here")])
    assert new == AGENT_SKILL
    assert "never closed" in (report.outcomes[0].reason or "")


def test_a_skill_without_front_matter_is_free_text() -> None:
    text = "---\n\nA rule under a rule line.\n"  # a horizontal rule, no front matter
    new, report = apply_edits(text, [Edit(op="append", content="- Another rule.")])
    assert report.outcomes[0].status == "applied" and new.endswith("- Another rule.\n")
