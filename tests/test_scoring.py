"""SQuAD-style scoring: lenient extraction, strict content."""

from __future__ import annotations

import pytest

from skillgrad.envs.scoring import exact_match, extract_final_answer, normalize_answer, token_f1


@pytest.mark.parametrize(
    ("text", "normalized"),
    [
        ("The Eiffel Tower!", "eiffel tower"),
        ("  a  quick,  brown   fox ", "quick brown fox"),
        ("An apple-pie", "applepie"),
        ("26,100", "26100"),
        ("Theatre", "theatre"),  # articles only as whole words
    ],
)
def test_normalize_answer(text: str, normalized: str) -> None:
    assert normalize_answer(text) == normalized


def test_exact_match_takes_best_gold() -> None:
    assert exact_match("the Denver Broncos", ["Denver Broncos", "Broncos"]) == 1.0
    assert exact_match("Broncos.", ["Denver Broncos", "Broncos"]) == 1.0
    assert exact_match("Denver", ["Denver Broncos", "Broncos"]) == 0.0
    assert exact_match("The company was founded in 1987.", ["1987"]) == 0.0
    assert exact_match("anything", []) == 0.0


def test_token_f1() -> None:
    assert token_f1("Denver Broncos", ["Denver Broncos"]) == 1.0
    # pred {denver}, gold {denver, broncos}: precision 1, recall 0.5
    assert token_f1("Denver", ["Denver Broncos"]) == pytest.approx(2 / 3)
    assert token_f1("founded in 1987", ["1987", "in 1987"]) == pytest.approx(0.8)
    assert token_f1("Paris", ["London"]) == 0.0
    assert token_f1("", ["London"]) == 0.0
    assert token_f1("the", ["a"]) == 1.0  # both normalise to nothing


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("Answer: Paris", "Paris"),
        ("Let me think.\nThe city is big.\nFinal answer: **Paris**.", "Paris"),
        ("answer: London\nanswer: Paris", "Paris"),
        ('**Answer:** "1987"', "1987"),
        ("**Final Answer**: `42`", "42"),
        ("## Answer:\nIlse Fenthorpe", "Ilse Fenthorpe"),
        ("  The company was founded in 1987.  ", "The company was founded in 1987"),
        ("\u201cyes\u201d", "yes"),
        ("Paris", "Paris"),
        ("Answer: The answer is Paris.", "The answer is Paris"),
        ("The answer: is not a marker", "The answer: is not a marker"),
        ("", ""),
        ("Answer:", ""),
    ],
)
def test_extract_final_answer(reply: str, answer: str) -> None:
    assert extract_final_answer(reply) == answer
