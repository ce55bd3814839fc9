"""Scoring answers that may be numbers: the loss function of the document-QA environments.

Text answers are scored as in SQuAD (:mod:`skillgrad.envs.scoring`): ``hard`` is normalised
exact match, ``soft`` is token F1. A gold answer that is a number (or several), possibly with a
currency sign, thousands separators, ``%`` or a scale word ("12.5 million"), is scored by value:

* a predicted number matches a gold number when ``|p - g| <= max(tolerance * |g|, u / 2)``,
  where ``u`` is one unit of the gold's last written decimal place (gold ``12.3`` accepts
  ``12.34``; gold ``4,512`` accepts ``4512.4``), compared as written or after applying both
  scale words (``4.5 million`` matches ``4,500,000``); a ``%`` sign is not needed;
* a gold that looks like a year (bare digits 1800-2100: no separator, currency, unit or
  decimals) must be matched exactly: 1987 and 1988 are different answers at any tolerance;
* ``soft`` is the F1 of matched numbers (1.0 when the one gold number is matched, even inside a
  sentence); ``hard`` also needs the answer to be only the value: the same count of numbers,
  all matched, and no words besides units, currency and words of the gold answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from skillgrad.envs.scoring import exact_match, normalize_answer, token_f1

_SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "mm": 1e6,
           "billion": 1e9, "bn": 1e9, "b": 1e9, "trillion": 1e12, "tn": 1e12}
_NUMBER = re.compile(
    r"(?<![\w.])(?P<sign>[-\u2212\u2013+])?\s*(?P<cur>us\$|\$|€|£|¥)?\s*"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)(?!\d|[.,]\d)"
    r"(?:\s*(?P<pct>%|percent\b|per cent\b)|\s*(?P<scale>thousand|trillion|billion|million"
    r"|mn|bn|tn|mm|k|m|b)s?\b)?",
    re.IGNORECASE)
_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty".split())}
_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
               "eighty": 80, "ninety": 90, "hundred": 100})
_UNIT_WORDS = frozenset(
    "usd dollar dollars us eur euro euros gbp pound pounds percent per cent pct thousand "
    "thousands million millions billion billions trillion trillions k m mn bn b tn mm "
    "points point pp".split())
_TEXT_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Number:
    """A number as written in an answer."""

    value: float
    scale: float = 1.0
    decimals: int = 0
    percent: bool = False
    plain: bool = True  # bare digits: no currency sign, no thousands separator

    @property
    def scaled(self) -> float:
        return self.value * self.scale

    def looks_like_year(self) -> bool:
        return (self.plain and self.decimals == 0 and self.scale == 1.0 and not self.percent
                and 1800 <= self.value <= 2100)


def parse_numbers(text: str) -> list[Number]:
    """Every number in ``text``: digits (with thousands separators), or a number word."""
    found: list[Number] = []
    for match in _NUMBER.finditer(text):
        raw = match.group("num").replace(",", "")
        value = float(raw)
        if match.group("sign") in ("-", "\u2212", "\u2013"):
            value = -value
        scale_word = (match.group("scale") or "").lower()
        decimals = len(raw.split(".", 1)[1]) if "." in raw else 0
        found.append(Number(value, _SCALES.get(scale_word, 1.0), decimals,
                            bool(match.group("pct")),
                            plain=not match.group("cur") and "," not in match.group("num")))
    if not found:
        # Number words only when there are no digits ("three" in a SQuAD span).
        found = [Number(float(_WORDS[w])) for w in _TEXT_WORD.findall(text.lower())
                 if w in _WORDS]
    return found


def leftover_words(text: str) -> list[str]:
    """The words of ``text`` that are neither numbers nor units."""
    stripped = _NUMBER.sub(" ", text.lower())
    return [w for w in _TEXT_WORD.findall(stripped) if w not in _UNIT_WORDS and w not in _WORDS]


def is_numeric(gold: str) -> bool:
    """A gold answer is scored by value when it holds numbers and no other words."""
    return bool(parse_numbers(gold)) and not leftover_words(gold)


def numbers_match(pred: Number, gold: Number, tolerance: float) -> bool:
    if gold.looks_like_year():
        return pred.value == gold.value and pred.scale == 1.0
    slack = max(tolerance * abs(gold.value), 0.5 * 10.0 ** -gold.decimals)
    if abs(pred.value - gold.value) <= slack * (1 + 1e-9):
        return True
    scaled_slack = max(tolerance * abs(gold.scaled), 0.5 * 10.0 ** -gold.decimals * gold.scale)
    return abs(pred.scaled - gold.scaled) <= scaled_slack * (1 + 1e-9)


@dataclass(frozen=True)
class Verdict:
    """How one answer scored and, when it missed, a note on why (for the optimizer)."""

    hard: float
    soft: float
    note: str = ""


def score_answer(answer: str, golds: Sequence[str], tolerance: float) -> Verdict:
    """The best verdict of ``answer`` against any of ``golds`` (see the module docstring)."""
    verdicts = [(_score_number(answer, g, tolerance) if is_numeric(g) else _score_text(answer, g))
                for g in golds]
    return max(verdicts, key=lambda v: (v.hard, v.soft), default=Verdict(0.0, 0.0, "no gold"))


def _score_text(answer: str, gold: str) -> Verdict:
    hard = exact_match(answer, [gold])
    soft = token_f1(answer, [gold])
    note = ""
    if hard < 1.0:
        said, want = normalize_answer(answer), normalize_answer(gold)
        note = ("the answer contains the gold answer plus extra words; scoring is exact match, "
                "so give only the answer" if want and want in said else "")
    return Verdict(hard, soft, note)


def _score_number(answer: str, gold: str, tolerance: float) -> Verdict:
    want = parse_numbers(gold)
    said = parse_numbers(answer)
    if not any(w.looks_like_year() for w in want):
        # Years next to the value ("in 2023 it was 4,512") do not count against it.
        said = [n for n in said if not n.looks_like_year()] or said
    if not said:
        return Verdict(0.0, 0.0, f"the answer has no number; the gold is a number ({gold})")
    matched = _matched(said, want, tolerance)
    precision, recall = matched / len(said), matched / len(want)
    soft = 0.0 if not matched else 2 * precision * recall / (precision + recall)
    extra = [w for w in leftover_words(answer) if w not in set(leftover_words(gold))]
    if matched == len(want) == len(parse_numbers(answer)) and not extra:
        return Verdict(1.0, 1.0)
    if matched == len(want):
        note = (f"the value is right but the answer has extra words ({' '.join(extra[:6])}); "
                "give only the value" if extra else
                "the value is right but the answer has extra numbers; give only the value")
        return Verdict(0.0, soft, note)
    closest = min(said, key=lambda n: abs(n.value - want[0].value))
    off = (abs(closest.value - want[0].value) / abs(want[0].value) * 100
           if want[0].value else float("inf"))
    note = (f"the number {_show(closest)} is off from the gold {gold} by {off:.3g}% "
            f"(tolerance {tolerance * 100:g}%)" if len(want) == 1 else
            f"{matched} of the {len(want)} gold numbers were found")
    return Verdict(0.0, soft, note)


def _matched(said: Iterable[Number], want: Sequence[Number], tolerance: float) -> int:
    pool = list(said)
    count = 0
    for gold in want:
        hit = next((p for p in pool if numbers_match(p, gold, tolerance)), None)
        if hit is not None:
            pool.remove(hit)
            count += 1
    return count


def _show(number: Number) -> str:
    text = (f"{number.value:.0f}" if number.looks_like_year()
            else f"{number.value:,.{number.decimals}f}")
    return text + ("%" if number.percent else "")
