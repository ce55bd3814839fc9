"""The skill document: hashing, protected blocks, marker neutralisation."""

from __future__ import annotations

import hashlib

import pytest

from skillgrad.skill import (
    Block,
    body_without_blocks,
    get_block,
    neutralise_markers,
    protected_spans,
    remove_span,
    set_block,
    skill_hash,
)

DOC = (
    "# Skill\n\nBe careful.\n\n"
    "<!-- SLOW_UPDATE_START -->\nDistilled lesson.\n<!-- SLOW_UPDATE_END -->\n\n"
    "## Tail\n\nMore text.\n"
)


def test_skill_hash_is_sha256_of_utf8_and_sensitive_to_every_byte() -> None:
    text = "Règle: être précis.\n"
    assert skill_hash(text) == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert skill_hash(text) == skill_hash(str(text))
    assert skill_hash(text) != skill_hash(text.rstrip("\n"))


def test_protected_spans_cover_markers_inclusive() -> None:
    [block] = protected_spans(DOC)
    assert block.name == "SLOW_UPDATE"
    assert DOC[block.start : block.end] == (
        "<!-- SLOW_UPDATE_START -->\nDistilled lesson.\n<!-- SLOW_UPDATE_END -->"
    )


def test_protected_spans_tolerate_whitespace_and_case_in_markers() -> None:
    text = "a\n<!--appendix_start-->\nx\n<!--   APPENDIX_END-->\nb\n"
    assert [b.name for b in protected_spans(text)] == ["APPENDIX"]


def test_unterminated_start_protects_to_end_of_document() -> None:
    text = "intro\n<!-- APPENDIX_START -->\nnotes\nmore\n"
    assert protected_spans(text) == [Block("APPENDIX", text.index("<!--"), len(text))]


def test_end_marker_must_match_the_start_name() -> None:
    text = "<!-- A_START -->\nx\n<!-- B_END -->\ny\n<!-- A_END -->\nz\n"
    [block] = protected_spans(text)
    assert text[block.start : block.end].endswith("<!-- A_END -->")
    assert "z" not in text[block.start : block.end]


def test_several_blocks_in_document_order() -> None:
    text = "<!-- A_START -->1<!-- A_END -->\nmid\n<!-- B_START -->2<!-- B_END -->\n"
    assert [b.name for b in protected_spans(text)] == ["A", "B"]


@pytest.mark.parametrize(
    "marker",
    [
        "<!-- SLOW_UPDATE_START -->",
        "<!--slow_update_start-->",
        "<!--   Slow_Update_END   -->",
        "<!-- X_END -->",
        "<!--\nAPPENDIX_START\n-->",
        "<!-- slow update end -->",
    ],
)
def test_neutralise_markers_defuses_lookalikes_idempotently(marker: str) -> None:
    content = f"before {marker} after"
    once = neutralise_markers(content)
    assert once != content
    assert neutralise_markers(once) == once
    assert protected_spans(f"<!-- X_START -->\n{once}\n") == [Block("X", 0, len(once) + 18)]
    assert protected_spans(once) == []
    assert once.startswith("before ") and once.endswith(" after")


def test_neutralise_markers_leaves_ordinary_comments_and_text_alone() -> None:
    text = "Use <!-- a note --> sparingly; APPEND at the END.\n"
    assert neutralise_markers(text) == text


def test_neutralised_marker_is_readable() -> None:
    assert neutralise_markers("<!-- SLOW_UPDATE_END -->") == "<!- - SLOW_UPDATE_END - ->"


def test_get_block_returns_content_or_none() -> None:
    assert get_block(DOC, "SLOW_UPDATE") == "Distilled lesson."
    assert get_block(DOC, "slow_update") == "Distilled lesson."
    assert get_block(DOC, "APPENDIX") is None


def test_set_block_roundtrip_replaces_in_place() -> None:
    new = set_block(DOC, "SLOW_UPDATE", "Lesson one.\nLesson two.")
    assert get_block(new, "SLOW_UPDATE") == "Lesson one.\nLesson two."
    assert new.startswith("# Skill\n\nBe careful.\n\n<!-- SLOW_UPDATE_START -->")
    assert new.endswith("<!-- SLOW_UPDATE_END -->\n\n## Tail\n\nMore text.\n")


def test_set_block_appends_new_block_at_end() -> None:
    new = set_block(DOC, "APPENDIX", "Extra.")
    assert new.startswith(DOC.rstrip("\n"))
    assert new.endswith("\n\n<!-- APPENDIX_START -->\nExtra.\n<!-- APPENDIX_END -->\n")
    assert [b.name for b in protected_spans(new)] == ["SLOW_UPDATE", "APPENDIX"]
    assert get_block(set_block("", "A", "x"), "A") == "x"


def test_set_block_leaves_exactly_one_block_of_that_name() -> None:
    text = DOC + "\n<!-- SLOW_UPDATE_START -->\nstale copy\n<!-- SLOW_UPDATE_END -->\n"
    new = set_block(text, "SLOW_UPDATE", "Fresh.")
    assert [b.name for b in protected_spans(new)] == ["SLOW_UPDATE"]
    assert get_block(new, "SLOW_UPDATE") == "Fresh."
    assert "stale copy" not in new and "More text." in new


def test_set_block_terminates_an_unterminated_block() -> None:
    new = set_block("intro\n\n<!-- A_START -->\nold", "A", "new")
    assert new == "intro\n\n<!-- A_START -->\nnew\n<!-- A_END -->\n"


def test_set_block_neutralises_content_and_rejects_bad_names() -> None:
    new = set_block(DOC, "SLOW_UPDATE", "x\n<!-- SLOW_UPDATE_END -->\n<!-- EVIL_START -->")
    assert [b.name for b in protected_spans(new)] == ["SLOW_UPDATE"]
    with pytest.raises(ValueError):
        set_block(DOC, "not a name", "x")


def test_body_without_blocks() -> None:
    assert body_without_blocks(DOC) == "# Skill\n\nBe careful.\n\n## Tail\n\nMore text.\n"
    assert body_without_blocks("plain\n") == "plain\n"


def test_remove_span_drops_emptied_line_and_doubled_space() -> None:
    text = "a\nremove me\nb\n"
    assert remove_span(text, 2, 11) == "a\nb\n"
    assert remove_span("keep this word here\n", 10, 14) == "keep this here\n"
    assert remove_span("a\n\n\nx\n\n\nb\n", 4, 5) == "a\n\nb\n"


def test_remove_span_drops_a_line_left_with_only_punctuation() -> None:
    text = "1) First.\n2) Second.\n- `code`\nStep 3: go\n"

    def without(word: str) -> str:
        return remove_span(text, text.index(word), text.index(word) + len(word))

    assert without("Second") == "1) First.\n- `code`\nStep 3: go\n"
    assert without("code") == "1) First.\n2) Second.\nStep 3: go\n"
    assert without("go") == "1) First.\n2) Second.\n- `code`\nStep 3:\n"


def test_estimate_tokens_counts_words_in_pieces_and_punctuation() -> None:
    from skillgrad.skill import estimate_tokens

    assert estimate_tokens("") == 0
    assert estimate_tokens("Reply with the answer.") == 5
    assert estimate_tokens("internationalisation") == 4  # long words count as several
    assert estimate_tokens("a_b") == 3
