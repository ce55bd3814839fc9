"""Added rules held against the skill and against each other: one that says again what a
part of the skill says, or its opposite, is left out; one that says the skill's lines again
beside a clause of its own is cut to that clause; of one reply's rules that restate each other,
the first is kept. Each outcome is a line for the patch's record and the step line. The
analysts' rules pass these checks (:mod:`skillgrad.stages.reflect`), and so do the rules a merge
writes in their place (:mod:`skillgrad.stages.candidate`)."""

from __future__ import annotations

from collections.abc import Sequence

from skillgrad.records import Edit, Suggestion
from skillgrad.stages.hygiene import (
    CONTRADICTS,
    contradicted_part,
    own_clauses,
    restated_part,
    restates,
)
from skillgrad.stages.render import one_line

# The reasons an added rule that says again what the skill says, or says its opposite, is
# left out (a skill that says both is one no person would ship; the screen's line ablation is
# what takes a rule of the skill out).
SAID = "the skill already says it"
OPPOSITE = "the skill says the opposite"


def first_of_each(items: Sequence[Edit | Suggestion]) -> tuple[list[Edit | Suggestion],
                                                                  list[str]]:
    """The items of one reply less those that restate an earlier one (:func:`restates`), and a
    line for each left out."""
    out: list[Edit | Suggestion] = []
    said: list[str] = []
    for item in items:
        twin = next((k for k in out if restates(text_of(item), text_of(k))), None)
        if twin is None:
            out.append(item)
        elif text_of(item) != text_of(twin):
            said.append(left_out(item, "the same reply's", quoted_text(text_of(twin))))
    return out, said


# What the line that reports an added rule cut to its own clauses says after the skill's
# lines it said again ("... says the skill's '<lines>' again; kept only '<rule>'").
CUT_TO = "again; kept only"


def cut_to_own(items: Sequence[Edit | Suggestion], skill: str
               ) -> tuple[list[Edit | Suggestion], list[str]]:
    """``items`` with each added rule that says lines of ``skill`` again beside a clause of its
    own cut to its own clauses (:func:`own_clauses`), and a line for each cut."""
    out: list[Edit | Suggestion] = []
    lines: list[str] = []
    for item in items:
        own = (own_clauses(item.content, skill)
               if isinstance(item, Edit) and item.op in ("append", "insert_after") else None)
        if own is None or not isinstance(item, Edit):
            out.append(item)
            continue
        rest, said = own
        lines.append(f"{quoted_text(item.content)} says the skill's {quoted_text(said)} {CUT_TO} "
                     f"{quoted_text(rest)}")
        out.append(item.model_copy(update={"content": rest}))
    return out, lines


def quoted_text(text: str) -> str:
    return repr(one_line(text, 120))


def left_out(item: Edit | Suggestion, whose: str, quoted: str, verb: str = "restates") -> str:
    """The line that says ``item`` was left out as a restatement of ``whose`` ``quoted`` (or
    as what ``verb`` says it does to it)."""
    return f"{quoted_text(text_of(item))} {verb} {whose} {quoted}; left out"


def left_out_by_skill(items: Sequence[Edit | Suggestion], skill: str
                      ) -> tuple[list[Edit | Suggestion], list[str]]:
    """``items`` less the added rules that say again what a part of ``skill`` says, or its
    opposite, and a line for each left out: the check an analyst's rules pass, for the rules a
    merge wrote in their place."""
    kept: list[Edit | Suggestion] = []
    lines: list[str] = []
    for item in items:
        against = against_skill(item, skill)
        if against is None:
            kept.append(item)
        else:
            lines.append(against[1])
    return kept, lines

def against_skill(item: Edit | Suggestion, skill: str) -> tuple[str, str] | None:
    """Why an added rule is left out, and the line the patch keeps of it: the part of the skill
    it says again, or the opposite of (None for a rule that says neither, and for other edits,
    which change a part in place)."""
    if not (isinstance(item, Edit) and item.op in ("append", "insert_after")):
        return None
    reason, verb, part = SAID, "restates", restated_part(item.content, skill)
    if part is None:
        reason, verb, part = OPPOSITE, CONTRADICTS, contradicted_part(item.content, skill)
    if part is None:
        return None
    quoted = quoted_text(part)
    return f"{reason}: {quoted}", left_out(item, "the skill's", quoted, verb)


def text_of(item: Edit | Suggestion) -> str:
    return item.description if isinstance(item, Suggestion) else item.content
