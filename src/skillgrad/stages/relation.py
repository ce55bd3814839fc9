"""How a reply relates to the answers expected of it, worked out from the text alone, for the
failure analysis the rules form shows its analysts (:func:`compare_reply`): it holds one plus
more words, is part of one, matches one but for case and punctuation or for how some words
are written, or shares some or none of their words.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from difflib import SequenceMatcher

# A word, or a number written with thousands separators ("21,000"), which counts as the
# number without them: the scorers drop punctuation, so "21,000" is "21000" to them too.
_WORD = re.compile(r"\d{1,3}(?:,\d{3})+(?!\d)|\w+")
# How alike two words must be (difflib's ratio) to count as one word written two ways:
# "3" and "03" are 0.67 alike, "color" and "colour" 0.91, "12" and "13" only 0.5.
NEAR_WORD = 0.6
# The most words on one side of a place where a reply and an answer differ that the relation
# shows: "'grams' where it expects 'g'", not half a sentence missing.
SHOWN_WORDS = 3


def _words(text: str) -> list[str]:
    return [w.replace(",", "") for w in _WORD.findall(text.lower())]


def _inside(part: list[str], whole: list[str]) -> bool:
    return any(whole[i:i + len(part)] == part for i in range(len(whole) - len(part) + 1))


def compare_reply(reply: str, expected: Sequence[str]) -> tuple[str, str]:
    """How a reply relates to the answers expected of it, from the text alone: (the kind, as
    "replies <kind>" reads, and the sentence for this reply); ("", "") when nothing is
    expected. It holds one plus more words, is part of one, matches one but for case and
    punctuation, or shares some or none of their words."""
    got = _words(reply)
    wanted = [w for w in (_words(e) for e in expected) if w]
    if not wanted:
        return "", ""
    if not got:
        return "are empty", "is empty"
    if got in wanted:
        return ("match an expected answer except for case or punctuation",
                "matches an expected answer except for case or punctuation")
    holds = [w for w in wanted if _inside(w, got)]
    if holds:
        extra = len(got) - max(len(w) for w in holds)
        return ("contain an expected answer plus more words",
                f"contains an expected answer plus {extra} more word{'s' * (extra != 1)}")
    within = [w for w in wanted if _inside(got, w)]
    if within:
        short = min(len(w) for w in within) - len(got)
        return ("are part of an expected answer, but shorter",
                f"is part of an expected answer, {_count(short)} short")
    near = _near_words(got, wanted)
    if near:
        return ("match an expected answer word for word but for some characters",
                f"matches an expected answer word for word but for characters: {near}")
    shared, closest = max((len(set(got) & set(w)), w) for w in wanted)
    if shared == 0:
        kind = "share no word with any expected answer"
        said = "shares no word with any expected answer"
        # Word beside word, where the reply has as many as an answer of several: "'240' where
        # it expects '2400', 'minutes' where it expects 'min'" shows a unit written out.
        same = next((w for w in wanted if len(w) == len(got) > 1), None)
        differing = _differing(got, same) if same else ""
    else:
        kind = "share some words with an expected answer but differ"
        said = f"shares {_count(shared)} with an expected answer but differs"
        differing = _differing(got, closest)
    return kind, said + (f": {differing}" if differing else "")


def _differing(got: list[str], wanted: list[str]) -> str:
    """Where the words of ``got`` and ``wanted`` differ, aligned on those they share (and
    word beside word where as many differ): "'grams' where it expects 'g'", "'of' extra",
    "'city' missing"; "" where more than three places differ or one differs in more than
    :data:`SHOWN_WORDS` words on a side (a long answer set beside a short reply), which the
    reply and the answer shown above it say better. (:func:`_edit` walks the same kind of
    opcodes over the characters of one word, naming where in the word each change stands; the
    two share no phrasing, so each keeps its own loop.)"""
    out = []
    ops = SequenceMatcher(None, got, wanted, autojunk=False).get_opcodes()
    changed = [o for o in ops if o[0] != "equal"]
    if len(changed) > 3 or any(max(i2 - i1, j2 - j1) > SHOWN_WORDS
                               for _, i1, i2, j1, j2 in changed):
        return ""
    for op, i1, i2, j1, j2 in ops:
        mine, theirs = " ".join(got[i1:i2]), " ".join(wanted[j1:j2])
        if op == "replace" and i2 - i1 == j2 - j1:  # word beside word
            out += [f"'{g}' where it expects '{e}'"
                    for g, e in zip(got[i1:i2], wanted[j1:j2], strict=True)]
        elif op == "replace":
            out.append(f"'{mine}' where it expects '{theirs}'")
        elif op == "delete":
            out.append(f"'{mine}' extra")
        elif op == "insert":
            out.append(f"'{theirs}' missing")
    return ", ".join(out)


def _near_words(got: list[str], wanted: list[list[str]]) -> str:
    """Where ``got`` has as many words as an expected answer and each word that differs is
    nearly that answer's word, with the same numbers in it (a zero, a letter or two more or
    fewer: "3" for "03", "color" for "colour", "10th" for "10"), those words as "'3' where it
    expects '03'" (at most three); "" otherwise. The difference is then in how a word is
    written, which a word count does not show."""
    for w in wanted:
        if len(w) != len(got):
            continue
        pairs = [(g, e) for g, e in zip(got, w, strict=True) if g != e]
        if pairs and all(SequenceMatcher(None, g, e).ratio() >= NEAR_WORD
                         and _numbers(g) == _numbers(e) for g, e in pairs):
            shown = ", ".join(f"'{g}' where it expects '{e}' ({_edit(g, e)})"
                              for g, e in pairs[:3])
            return shown + (f" and {len(pairs) - 3} more" if len(pairs) > 3 else "")
    return ""


def _numbers(word: str) -> list[int]:
    """The numbers a word holds: "03" and "3" hold the same, "1999" and "1998" do not (another
    number is another answer, not the same one written another way)."""
    return [int(n) for n in re.findall(r"\d+", word)]


def _edit(got: str, wanted: str) -> str:
    """What ``got`` would need to become ``wanted``, in characters: "'0' missing at the
    start", "'u' missing", "'s' extra at the end", "'c' in place of 'k'"."""
    out = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, got, wanted).get_opcodes():
        # (an insert has i1 == i2: its place in ``got``)
        where = " at the start" if i1 == 0 else " at the end" if i2 == len(got) else ""
        if op == "insert":
            out.append(f"'{wanted[j1:j2]}' missing{where}")
        elif op == "delete":
            out.append(f"'{got[i1:i2]}' extra{where}")
        elif op == "replace":
            out.append(f"'{got[i1:i2]}' in place of '{wanted[j1:j2]}'")
    return ", ".join(out)


def number_widths(reply: str, expected: Sequence[str]) -> list[tuple[str, str]]:
    """The numbers ``reply`` writes with another count of digits than an expected answer
    writes the same number ("3" where it expects "03", "7" for "007", "05" for "5"), as (the
    reply's, the expected) pairs: the numbers of each are paired in order when the two hold as
    many, and the expected answer that pairs most is taken. A width is a form a question may
    want, which a word-for-word comparison misses when another number differs too ("1:41:38"
    for "01:40:58")."""
    got = re.findall(r"\d+", reply)
    best: list[tuple[str, str]] = []
    for answer in expected:
        wanted = re.findall(r"\d+", answer)
        if len(wanted) != len(got):
            continue
        pairs = [(g, e) for g, e in zip(got, wanted, strict=True) if g != e and int(g) == int(e)]
        if len(pairs) > len(best):
            best = pairs
    return best


def widths_line(pairs: Sequence[Sequence[tuple[str, str]]], n_replies: int) -> str:
    """One line over a batch's :func:`number_widths` ("3 of 5 replies write a number with
    fewer digits than the expected answer: '3' for '03', '1' for '01' (the expected answers
    write these numbers with 2 digits)"), for each way round that more than one reply shares;
    "" when none does. Counted over the batch, a width reads as the form it is rather than as
    one task's slip."""
    out = []
    for fewer, word in ((True, "fewer"), (False, "more")):
        replies = [[(g, e) for g, e in p if (len(g) < len(e)) == fewer] for p in pairs]
        replies = [p for p in replies if p]
        if len(replies) < 2:
            continue
        shown = list(dict.fromkeys(f"'{g}' for '{e}'" for p in replies for g, e in p))[:2]
        widths = {len(e) for p in replies for _, e in p}
        width = widths.pop() if len(widths) == 1 else 0
        digits = (f" (the expected answers write these numbers with {width} "
                  f"digit{'s' * (width != 1)})" if width else "")
        out.append(f"{len(replies)} of {n_replies} replies write a number with {word} digits "
                   f"than the expected answer: {', '.join(shown)}{digits}")
    return "".join(f"- {line}\n" for line in out)


def _count(n: int) -> str:
    return "1 word" if n == 1 else f"{n} words"
