"""Added rules held against the skill and against each other: one that says again what a
part of the skill says, or its opposite, is left out; one that says the skill's lines again
beside a clause of its own is cut to that clause; of one reply's rules that restate each other,
the first is kept. Each outcome is a line for the patch's record and the step line. The
analysts' rules pass these checks (:mod:`skillgrad.stages.reflect`), and so do the rules a merge
writes in their place (:mod:`skillgrad.stages.candidate`).

What counts as saying a part again (:func:`restated_part`, :func:`own_clauses`,
:func:`contradicted_part`) is read from the words of the two texts alone, each as its stem
(:func:`~skillgrad.words.stem`: "what it knows" says "what you know" again), with no evidence
of the step: the skill is the only thing a rule is held against here, where
:mod:`skillgrad.stages.hygiene` holds it against what the optimizer was shown."""

from __future__ import annotations

import re
from collections.abc import Sequence

from skillgrad.records import Edit, Suggestion
from skillgrad.skill import LIST_ITEM, instructions
from skillgrad.stages.hygiene import LEAD, SENTENCE_END, leans_back
from skillgrad.stages.render import one_line
from skillgrad.words import stem, stems, words

# The share of each other's content words two rules hold when one restates the other.
RESTATED = 0.6

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


def restates(text: str, other: str, share: float = RESTATED) -> bool:
    """Whether ``text`` says what ``other`` says in nearly its words: each holds at least
    ``share`` of the other's content words. "If the reply has extra words, remove them."
    restates "If the reply has extra words, leave them out."; a rule that adds a condition
    ("... when the question asks for seconds") does not restate the rule without it."""
    mine, theirs = stems(text), stems(other)
    if not mine or not theirs:
        return mine == theirs
    common = len(mine & theirs)
    return common >= share * len(mine) and common >= share * len(theirs)


# Words that turn what a sentence says into its opposite: two texts that differ in them do not
# say the same thing, however many other words they share ("search with the price" / "never
# search with the price").
_NEGATIONS = frozenset({"no", "not", "never", "without", "nothing", "none", "avoid", "dont"})
# A rule restates a part of the skill only when it has this many content words: "Reply with
# the answer" beside "Reply with the answer only" says too little to tell.
RESTATED_MIN_WORDS = 3
# The opener the analysts' prompt asks a rule to start with, which says nothing of its own.
# So is a label of replying before what the rule says ("Reply with: Read the question ...").
_OPENER = re.compile(r"^\W*(?:before you (?:answer|reply)\s*,?|"
                     r"(?:reply|answer|respond)(?:\s+with)?\s*:)\s*", re.I)
_CLAUSE_END = re.compile(r"\s*[,;:()]\s*")
# Words that urge without saying what to do: "Always end your reply with ..." and "Before you
# answer, ensure you read the question ..." say the skill's "End your reply with ..." and "Read
# the question ..." again.
_URGING = re.compile(r"\b(?:(?:make|be)\s+sure(?:\s+(?:to|that))?|ensure(?:\s+that)?|always|"
                     r"remember\s+to|please)\b", re.I)


def _said(text: str) -> set[str]:
    """The content words of what ``text`` asks for, without the opener or words that urge, and
    without negations (which :func:`_negated` reads apart)."""
    return (stems(_URGING.sub(" ", _OPENER.sub("", text)).replace("'", ""))
            - _NEGATIONS - _ADDING)


# Words that add nothing to what a rule asks for: "read both the question and the context"
# says "read the question and the context" again.
_ADDING = frozenset({"both", "also"})


def _negated(text: str) -> bool:
    return bool(set(words(text.replace("'", ""))) & _NEGATIONS)


# A rule that opens with a condition: the condition, and what it asks for then.
_CONDITIONED = re.compile(r"^\W*(?:before you (?:answer|reply)\s*,\s*)?"
                          r"(?:if|when|whenever|where)\b([^,;]*)[,;]\s*(.+)$", re.I)


def _negated_beside(text: str, part: str) -> bool:
    """Whether ``text`` says the opposite of what ``part`` says in its words, as far as
    negation goes. A negation only in the text's condition is the part's "otherwise": "If the
    context is not given, rely on what you know." says the second half of "Use the context when
    one is given; otherwise rely on what you know." again. "Do not use the context when one is
    given" negates what it asks for, and reads negated."""
    found = _CONDITIONED.match(text)
    if (found and "otherwise" in words(part.lower()) and _negated(found[1])
            and not _negated(found[2])):
        return False
    return _negated(text)


def skill_parts(skill: str) -> list[str]:
    """The skill's instructions (:func:`~skillgrad.skill.instructions`, each joined onto one
    line, without its bullet or number), each of their sentences, and each clause of three
    content words or more: the parts a new rule may say again."""
    parts = [LIST_ITEM.sub("", " ".join(line.strip() for line in item.splitlines()))
             for item in instructions(skill)]
    sentences = [x.strip() for p in parts for x in SENTENCE_END.split(p)]
    clauses = [x.strip() for p in sentences for x in _CLAUSE_END.split(p)
               if len(stems(x)) >= RESTATED_MIN_WORDS]
    return list(dict.fromkeys(x for x in (*parts, *sentences, *clauses) if x))


def restated_part(text: str, skill: str) -> str | None:
    """The part of ``skill`` that ``text`` says again, or None: one that holds all the text's
    content words (at least three, after an opening "Before you answer,"; one in ten may be
    missing). Two texts that differ in one word of their few say different things
    ("Rule year: ..." beside "Rule color: ..."), and a text with a negation the part lacks, or
    the other way round, says something else (:func:`contradicted_part`). A text of several
    sentences, each of which says a part again, says those parts again (they are given joined
    by "; "): an analyst wrote the skill's three lines back as one rule. So does a sentence
    whose clauses, split at ";", each say a part again, or are a few of one part's words
    ("otherwise rely on what you know"): two of the skill's lines joined into one."""
    whole = _holding_part(text, skill, opposite=False) or _run_of_part(text, skill)
    if whole is not None:
        return whole
    parts: list[str] = []
    for sentence in (x for x in SENTENCE_END.split(text.strip()) if x.strip()):
        said = _restated_sentence(sentence, skill)
        if said is None:
            return None
        parts += said
    return "; ".join(dict.fromkeys(parts)) if parts else None


def _run_of_part(text: str, skill: str) -> str | None:
    """The part of ``skill`` that holds all of ``text``'s words (two or more), in its order, as
    one run, with the part's negation or without as the part is: too few content words to
    restate a part by :func:`_holding_part`, but nothing the part does not say ("- Answer:
    <your answer>", the form of the skill's answer line)."""
    mine = [stem(w) for w in words(_OPENER.sub("", LIST_ITEM.sub("", text.strip())))]
    if len(mine) < 2:
        return None
    run = f" {' '.join(mine)} "
    return next((part for part in skill_parts(skill)
                 if run in f" {' '.join(stem(w) for w in words(part))} "
                 and _negated(part) == _negated(text)),
                None)


def _restated_sentence(sentence: str, skill: str) -> list[str] | None:
    """The parts of ``skill`` that ``sentence`` says again, whole or clause by clause
    (:func:`clauses`; each a part, a few of one part's words, or only words of the skill's
    lines, and at least one a part or most of each line it takes words from); None when it
    says more. "Read the question and the context carefully and end your reply with 'Answer:
    <your answer>'." says two of the skill's lines again in one clause."""
    whole = _holding_part(sentence, skill, opposite=False)
    if whole is not None:
        return [whole]
    parts: list[str] = []
    holds = False
    for _, clause in clauses(sentence):
        said = _clause_said(clause, skill)
        if not said:
            return None
        mine = _said(clause)
        holds = (holds or _holding_part(clause, skill, opposite=False) is not None
                 or all(len(stems(x) & mine) >= RESTATED * len(stems(x))
                        for x in said))
        parts += said
    return parts if holds else None


# A clause that leads into the next one and says nothing alone: a condition ("if the question
# asks for grams, ..."), "for" before a kind ("for seconds, ..."), an example's opener.
_LEADS_IN = re.compile(r"^\W*(?:if|when|whenever|unless|where|whether|in\s+case|for|otherwise|"
                       r"before|after|once|while|as|because|since|e\.g\.)\b", re.I)


def clauses(sentence: str, *, commas: bool = True) -> list[tuple[str, str]]:
    """``sentence`` split at ";" and at ", " into clauses, each with the separator before it
    ("" for the first); a clause that leads into the next ("if ...", "for seconds", "Before
    you answer", "On the results page": a condition, or a piece of two content words or fewer
    before a comma) stays with it, so a condition is never parted from what it conditions."""
    out: list[tuple[str, str]] = []
    for part in (x for x in re.split(r"\s*;\s*", sentence.strip()) if x):
        glue = False
        pieces = re.split(r",\s+", part) if commas else [part]
        for k, piece in enumerate(x for x in pieces if x.strip()):
            if glue:
                out[-1] = (out[-1][0], f"{out[-1][1]}, {piece}")
            else:
                out.append(("" if not out else "; " if k == 0 else ", ", piece))
            glue = bool(_LEADS_IN.match(piece)) or len(_said(piece)) < RESTATED_MIN_WORDS
    return out


def _part_within(clause: str, skill: str) -> str | None:
    """The part of ``skill`` whose words hold all of ``clause``'s, where the clause is too short
    to restate a part on its own (with the part's negation, or without as the part is)."""
    mine = _said(clause)
    if len(mine) >= RESTATED_MIN_WORDS:
        return None
    return next((part for part in skill_parts(skill)
                 if mine <= stems(part) and _negated(part) == _negated(clause)), None)


def _clause_said(clause: str, skill: str) -> list[str]:
    """The lines of ``skill`` that ``clause`` says again (empty: it says something of its own):
    one part it restates, the part it holds a few words of, or, for a clause that joins the
    words of several lines ("read the question and the context carefully and use the context
    when one is given"), every line it takes words from, where it has no word, and no negation,
    that the skill's lines lack."""
    part = _holding_part(clause, skill, opposite=False) or _part_within(clause, skill)
    if part is not None:
        return [part]
    mine = _said(clause)
    lines = [LIST_ITEM.sub("", " ".join(x.strip() for x in item.splitlines()))
             for item in instructions(skill)]
    if (len(mine) < RESTATED_MIN_WORDS or not lines
            or not mine <= set().union(*(stems(x) for x in lines))
            or (_negated(clause) and not any(_negated(x) for x in lines))):
        return []
    said: list[str] = []  # the lines it takes the most words from, until all are covered
    while mine:
        line = max(lines, key=lambda x: len(stems(x) & mine))
        said.append(line)
        mine = mine - stems(line)
    return [x for x in lines if x in said]


def own_clauses(text: str, skill: str) -> tuple[str, str] | None:
    """``text`` cut to the clauses (:func:`clauses`, split at ";" only) that say something
    ``skill`` does not, and
    the skill's lines the others say again, joined by "; "; None where no clause says a line
    again, none says anything new, or what is new is under three content words. A units
    analyst wrote the skill's three lines back as one rule with a clause of its own among them
    ("read the question and the context carefully and use the context when one is given;
    otherwise rely on what you know; use the unit symbol in your reply; end your reply with a
    line of the form ..."), which the gate accepted: a rule that is mostly the skill again.
    A sentence kept that leans on the one before (:func:`~skillgrad.stages.hygiene.leans_back`:
    "Then, it should use what it knows ...") keeps that one whole: it is no rule alone."""
    marker = LIST_ITEM.match(text)
    head, body = (marker.group(0).lstrip(), text[marker.end():]) if marker else ("", text)
    sentences = [x.strip() for x in SENTENCE_END.split(body.strip()) if x.strip()]
    cuts = [_own_part(sentence, skill) for sentence in sentences]
    for k in range(1, len(sentences)):
        if cuts[k][0] and cuts[k - 1][0] != sentences[k - 1] and leans_back(sentences[k]):
            cuts[k - 1] = (sentences[k - 1], [])
    kept = [mine for mine, _ in cuts if mine]
    said = [part for _, parts in cuts for part in parts]
    rest = LEAD.sub("", " ".join(kept))
    if not said or not kept or len(stems(rest)) < RESTATED_MIN_WORDS:
        return None
    return head + rest[:1].upper() + rest[1:], "; ".join(dict.fromkeys(said))


def _own_part(sentence: str, skill: str) -> tuple[str, list[str]]:
    """What of ``sentence`` says something ``skill`` does not ("" for nothing), and the skill's
    lines the rest says again. A clause of its own that leans on one cut ("...; otherwise rely
    on what it knows") keeps the sentence whole."""
    mine = ""
    said: list[str] = []
    # Only at ";": steps joined by commas ("Search first, then read the section the search
    # points to, then answer.") may add their order to the lines they say again.
    parts: list[str] = []
    for sep, clause in clauses(sentence, commas=False):
        cut, parts = bool(parts), _clause_said(clause, skill)
        if not parts and cut and leans_back(clause):
            return sentence, []
        said += parts
        if not parts:
            mine += (sep if mine else "") + clause
    # ``parts``: the last clause's, which ends the sentence where it was cut.
    return (mine.rstrip(",;: ") + "." if mine and parts else mine), said


# The verb of the line that reports an added rule left out as the opposite of a part of the
# skill ("'<rule>' contradicts the skill's '<part>'; left out").
CONTRADICTS = "contradicts"


def contradicted_part(text: str, skill: str) -> str | None:
    """The part of ``skill`` that ``text`` says the opposite of, or None: one that holds all the
    text's content words but its negation, as :func:`restated_part` finds them, where one of the
    two is negated and the other is not. "Do not remove any extra words from the reply." beside
    the skill's "Remove any extra words from the reply."; a rule that adds a condition ("When
    the question asks for units, do not remove them") makes an exception, not the opposite."""
    return _holding_part(text, skill, opposite=True)


def _holding_part(text: str, skill: str, *, opposite: bool) -> str | None:
    mine = _said(text)
    if len(mine) < RESTATED_MIN_WORDS:
        return None
    for part in skill_parts(skill):
        if (_negated(part) != _negated_beside(text, part)) != opposite:
            continue
        if len(mine - stems(part)) <= len(mine) // 10:
            return part
    return None
