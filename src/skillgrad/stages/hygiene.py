"""Skill hygiene: regularisation. Text that would teach the target facts instead of a procedure
is refused before any rollout, so it never costs a gate evaluation and never becomes the skill.

A skill has to transfer to tasks it has not seen. Text proposed for it is refused when it

* **quotes a training item**: a gold answer of a task the optimizer was shown, a run of words
  from one task's input (its question, its context, a tool's output), a run of words only
  the agent's reply to one task holds (a phrase it built from that item's specifics), or two
  of one task's own names and numbers (capitalised words and numbers of two digits or more
  that one task group holds, or few), however they are worded around, or one of them set in
  quotes as the value to write;
* **makes one task's question a rule for all**: a thing a rule with no condition presumes
  every task has ("the date") that only the question of one task (or of fewer than half of
  them) asks about, where those tasks' answers are of a shape few of the batch's share ("Reply
  with just the date" in a batch where one question asks for a date); the same rule that says
  when it applies ("If the question asks for a date, ...") is kept;
* **makes one request's form a rule for all**: a form written in placeholders ("DD/MM/YYYY")
  that only some of the step's requests ask for, where others ask for another; it is given
  the form each task asks for in its place ("the format the task asks for (DD/MM/YYYY or
  YYYY-MM-DD)"), the condition that separates the requests, and kept;
* **echoes the scorer's feedback**: a run of words from the failure reasons the optimizer read
  (a shorter run when it holds a word only the scorer uses), or a word of evaluation ("gold",
  "F1", "scoring") that the feedback uses and the agent never sees;
* **copies the prompt's scaffolding**: a run of words most task inputs share (the template the
  environment wraps tasks in), or a run of the optimizer's own instructions (its prompt
  templates' fixed text: "if they miss part of it, say what to include");
* **repeats what was refused**: a run of words of a text refused earlier, which the rejected
  buffer shows the optimizer (so a refusal is not undone by proposing it again later): the
  words that got it refused, with those around them, not the rest of it; a training item's
  own words that got it refused, alone;
* **stops mid-sentence**: ends on a comma, an article, a conjunction, a bare verb or a label's
  colon; what it finished before its last sentence goes on if it is clean (such a refusal
  does not bind later texts: finished, the same words are the rule meant; a piece that also
  quotes is refused for the quote, which does).

Words the current skill already holds are its own and never count. Only what the optimizer
was shown is evidence: the step's rollouts and the gold answers of their tasks. Everything here
works on words, with no knowledge of any environment.
(Over the house limit of ~400 lines: every rule reads the same evidence, the words of what
the optimizer was shown, through the same word runs; kept together, a rule added later sees
how the others count a quote. What needs no evidence, a rule that says the skill again, is
in :mod:`skillgrad.stages.restated`.)
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import Any, Literal

from skillgrad import prompts
from skillgrad.records import Edit, Refused, RejectedStep, RolloutResult, Suggestion, Task
from skillgrad.skill import LIST_ITEM
from skillgrad.stages.relation import compare_reply
from skillgrad.words import FUNCTION_WORDS, cased, content_words, words

# A run of this many words shared with one task's input quotes it; fewer may be common phrasing.
INSTANCE_RUN = 6
# A run of this many words that only the inputs of one group of tasks hold (one entity, one
# question template), with a word no other task's input has: that group's wording.
GROUP_RUN = 3
# Feedback is phrased in the words rules are phrased in: a quote must be longer to count.
FEEDBACK_RUN = 7
# Or: this share of a text's words lies in shorter shared runs (a paraphrase stitched together).
COVERAGE_RUN = 4
COVERAGE_SHARE = 0.5
# Or: a run this long, with three content words, holds a word of the scorer's own (one in no
# task input and not in the skill, such as "gold"): the agent cannot act on what only the
# scorer sees.
SCORER_RUN = 5
# Words of evaluation, not of any task: one the feedback uses and the agent never sees (in no
# task input, reply or the skill) is an echo of the scorer wherever it stands ("the gold
# answer", "keep token F1 high"): the agent cannot act on what only the scorer knows.
SCORER_TERMS = frozenset({"gold", "f1", "scorer", "scoring", "groundtruth"})
# A text that names this many of one task's own names and numbers describes that item.
ITEM_NAMES = 2
# A gold answer counts as a specific fact when it has this many characters after normalisation
# (or is a number of two digits or more) and is the answer of at most this share of the tasks
# shown ("yes", "B" or "0" answer many tasks and name no instance).
MIN_ANSWER_CHARS = 3
MAX_ANSWER_SHARE = 0.25
# A run of words shared by at least this share of the task inputs is scaffolding, not an item.
SCAFFOLD_SHARE = 0.5

# The shared function words plus quantifiers, modals, the remaining pronouns and a few adverbs.
_STOP = FUNCTION_WORDS | frozenset("""all any each else every her here his may might must one
such than their them there too us very without""".split())
# Words that answer a question of a kind, not a fact of one task: "reply with yes or no only"
# names no instance, however few of the step's questions are answered "yes".
_POLAR = frozenset("yes no true false".split())
# Prepositions and adverbs that may follow a noun: "the question before you reply" names no
# thing called "before".
_AFTER_NOUN = frozenset("""about above after again against along before behind below beside
between beyond during first here instead later now once only out over then there through
under until""".split())

REFUSED = "refused before rollout"  # how a refusal's reason begins, wherever it is recorded

Kind = Literal["instance", "answer", "names", "reply", "feedback", "scaffolding",
               "instructions", "refused", "unseen", "analysis", "group", "about", "narrow",
               "value", "form", "unfinished"]

# What the agent never sees, spoken of as if it did: the reference its reply is scored against
# ("compare your reply with the answer", "if your reply is incorrect"), and the words of
# skillgrad's own failure analysis ("shares 1 word with the expected answer"). The optimizer
# reads replies beside expected answers; a rule it writes in those terms is one the agent
# cannot follow.
_ANSWER = (r"(?:the|an|any|each|every)\s+(?:expected\s+|correct\s+|gold\s+|reference\s+|"
           r"right\s+|exact\s+)?answers?\b")
# The agent's reply as a noun ("your reply", "the response"): "Reply with the answer" is an
# instruction, "compare your reply with the answer" a comparison with the unseen reference.
# ("the agent's reply": the optimizer's view of the agent, written as if to someone else.)
_REPLY = (r"\b(?:your|the|its|each|every|(?:the\s+)?(?:agent|assistant|model)'s)\s+"
          r"(?:reply|replies|response|responses|output|answer|answers)\b")
_UNSEEN: tuple[re.Pattern[str], ...] = (
    re.compile(_REPLY + r"[^.;:!?]{0,80}?\b(?:with|than|to|as|match(?:es)?|equals?|"
               r"contains?|includes?)\s+(?:(?!only\b|just\b)\w+\s+){0,2}?" + _ANSWER,
               re.IGNORECASE),  # "contains only the answer" is a form, not a comparison
    re.compile(r"\bif\s+(?:your|the|its)\s+(?:reply|response|answer|output)\s+(?:is|was)\s+"
               r"(?:not\s+)?(?:incorrect|wrong|correct|right)\b", re.IGNORECASE),
    # The reference set beside the reply the other way round ("check the answer and the
    # agent's reply for differences").
    re.compile(_ANSWER + r"\s+(?:and|with|to|against|versus|vs\.?)\s+" + _REPLY, re.IGNORECASE),
    # A part of the reply held against the answer ("check if the units match the answer"): the
    # answer it is to match is the reference ("matches the answer you worked out" is not).
    re.compile(r"\bmatch(?:es|ing)?\s+(?:with\s+)?" + _ANSWER + r"(?!\s+(?:that\s+)?you\b)",
               re.IGNORECASE),
    # ... and its form or its words ("matches the exact form and content of the answer", "match
    # those of the answer", "follows the form of the answer").
    re.compile(r"\b(?:match(?:es|ing)?|follow(?:s|ing)?)\s+(?:with\s+)?"
               r"(?:(?:the|its)\s+(?:[\w-]+\s+){0,5}?|(?:those|that)\s+)of\s+" + _ANSWER
               + r"(?!\s+(?:that\s+)?(?:you|the\s+(?:question|task|request))\b)", re.IGNORECASE),
    # What the answer says, as the source of the reply ("the exact number of vowels as stated
    # in the answer"): the answer it is to be read from is the reference.
    re.compile(r"\b(?:stated|given|shown|written|listed|found|mentioned)\s+in\s+" + _ANSWER
               + r"(?!\s+(?:that\s+)?you\b)", re.IGNORECASE),
    # The reply judged against what is expected of it ("make sure the answer is exactly as
    # expected"): the expectation is the reference the agent never sees.
    re.compile(r"\b(?:reply|replies|response|output|answer|answers)\s+(?:is|are|looks?)\s+"
               r"(?:exactly\s+|precisely\s+)?(?:as|what\s+is|what's)\s+expected\b",
               re.IGNORECASE),
    # The words of the reply held against those of the answer ("remove any words that are in
    # the reply but not in the answer"), either way round.
    re.compile(r"\b(?:the|your)\s+(?:reply|response|output)\s+but\s+not\s+(?:in\s+)?"
               + _ANSWER, re.IGNORECASE),
    re.compile(r"\bnot\s+(?:in\s+)?" + _ANSWER + r"\s+(?:but|and)\s+(?:are\s+|is\s+)?in\s+"
               r"(?:the|your)\s+(?:reply|response|output)\b", re.IGNORECASE),
    # ... and with the answer reworded into the reply ("include any words that are not in the
    # reply but are in the reply"): which words a reply lacks is known only beside the
    # reference ("add the unit if it is not in your reply" is a check of the reply itself).
    re.compile(r"\b(?:words?|anything|information|details?)\s+(?:that\s+|which\s+)?(?:are|is)"
               r"\s+not\s+(?:yet\s+)?in\s+(?:the|your)\s+(?:reply|response|output)\b",
               re.IGNORECASE),
    # An expected answer named by its value ("Reply with 'no' for the 'Yes' answer"): which
    # answer is expected is what the agent is asked to find, not something it is told.
    re.compile(r"\bthe\s+[\"'“‘][^\"'”’\n]{1,40}[\"'”’]\s+"
               r"(?:expected\s+|correct\s+|gold\s+|right\s+)?answers?\b", re.IGNORECASE),
    # The numbers the analysts' prompts give the tasks they show ("### Task 3"), and those the
    # merge's prompt gives the proposals ("### Proposal 2"), however cased ("for task 1 and 2").
    re.compile(r"\b(?:tasks?|proposals?)\s+#?\d+(?:\s*(?:,|and|or)\s*(?:(?:tasks?|proposals?)\s+)?"
               r"#?\d+)*\b", re.IGNORECASE),
)
# The reply cut down to the answer ("limit your reply to the answer", "keep the answer line to
# the answer itself"): a form the agent can follow, not its reply held against the reference
# ("limit your reply to the expected answer" still speaks of the reference).
_LIMITED = re.compile(r"\b(?:limit|keep|restrict|reduce|shorten|trim|cut|confine|pare)s?\s+"
                      + _REPLY + r"(?:\s+line)?\s+(?:down\s+)?to\s+(?:the|an)\s+"
                      r"(?:correct\s+|right\s+|exact\s+)?answer\b", re.IGNORECASE)
# A line about the agent, in the third person ("If the agent does not open an item, say
# ..."): the coach's view of the agent, not an instruction the agent reads as its own.
_ABOUT = re.compile(
    r"\b(?:if|when|unless|whether|once|until|before|after)\s+the\s+(?:agent|assistant)\b(?!')"
    r"|\b(?:if|when|unless|whether|once|until|before|after)\s+the\s+(?:agent|assistant)'s\s+"
    r"(?:reply|replies|response|output|answer)\b"
    # ... and its reply, wherever it is named ("Ensure the agent's reply contains ...").
    r"|\bthe\s+(?:agent|assistant)'s\s+(?:reply|replies|response|output|answer)\b"
    r"|\bthe\s+(?:agent|assistant)\s+(?:should|must|does|did|is|was|has|had|will|can|"
    r"cannot|needs?|fails?|tries|tried|never|always|sees?|saw|knows?|knew|gets?|got|"
    r"writes?|wrote|repl(?:y|ies|ied)|answer(?:s|ed)|uses?|used|calls?|called|reads?|"
    r"follows?|followed|gives?|gave|provides?|provided|includes?|included|makes?|made|"
    r"keeps?|kept|takes?|took|checks?|checked|returns?|returned|outputs?|responds?|"
    r"responded|understands?|understood|may|might|could|would|shall|ought)\b"
    # ... and the coach's wish for it ("Ensure that the agent ...", "Make sure the assistant").
    r"|\b(?:ensure|make\s+sure|see\s+to\s+it)\s+(?:that\s+)?the\s+(?:agent|assistant)\b",
    re.IGNORECASE)
_ANALYSIS = re.compile(
    r"\bshares?\s+(?:\d+|no|some|one|two|three)\s+words?\s+with\b|\bplus\s+\d+\s+more\s+"
    r"words?\b|\bexcept\s+for\s+case\s+or\s+punctuation\b|\bis\s+part\s+of\s+an?\s+"
    r"(?:expected\s+)?answer\b|\bword\s+for\s+word\s+but\s+for\b|\bwhere\s+it\s+expects\b"
    # The labels the analysts' task accounts are written with ("Its answer, as read from the
    # reply: ...", "Its 3 turns before the reply: ...").
    r"|\bas\s+read\s+from\s+(?:the|its|your)\s+reply\b|\bturns\s+before\s+the\s+reply\b",
    re.IGNORECASE)

# Where a sentence cannot stop: on a comma, semicolon or dash ("Reply with the number, "), on a
# word that needs a word after it (an article, a possessive, a conjunction: "end the reply with
# a"), on a clause that is one bare verb needing an object ("If the units are correct, use"),
# or on a colon after a lowercase word or the line's first ("- rulie:"; "Finish with ANSWER:"
# names a literal). A colon ends a heading ("## Steps:"), which the lines after it complete.
_DANGLING_MARK = re.compile(r"[,;\-\u2013\u2014]\s*$")
_DANGLING_WORD = frozenset("""a an the your its their our my and or but nor if because unless
whether although than""".split())
_BARE_VERB = re.compile(r"(?:^|[,;:]\s*)(?:then\s+|and\s+)?(?:use|include|put|give|make|add|"
                        r"mention|provide|replace|insert|enter|write|state|follow)\s*\.?$",
                        re.IGNORECASE)
_LAST_WORD = re.compile(r"([A-Za-z]+)\s*\.?$")
_LABEL_COLON = re.compile(r"(?:^|\s)(?P<word>[^\s:]+):\s*$")


def unfinished_quote(text: str) -> Quote | None:
    """The end of ``text`` where its last line stops mid-sentence (``None``: it ends where a
    sentence can). A small model's string sometimes closes before its rule does; a rule that
    stops at "use" or "with a" is no instruction."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or lines[-1].lstrip().startswith("#"):
        return None
    line = lines[-1]
    marker = LIST_ITEM.match(line)
    body = line[marker.end():] if marker else line
    body = body.strip()
    if not body:
        return None
    tail = " ".join(body.split()[-4:])
    label = _LABEL_COLON.search(body)
    if label is not None:
        word = label.group("word")
        first = label.start("word") == 0
        if first or not (word[:1].isupper() or word.isupper()):
            return Quote("unfinished", tail)
        return None
    last = _LAST_WORD.search(body)
    if (_DANGLING_MARK.search(body) or _BARE_VERB.search(body)
            or (last is not None and last.group(1).lower() in _DANGLING_WORD)):
        return Quote("unfinished", tail)
    return None


def _runs(seq: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)}


def _holds(seq: Sequence[str], run: Sequence[str]) -> bool:
    """Whether ``seq`` holds the words of ``run`` one after another."""
    return tuple(run) in _runs(seq, len(run))


def _content(run: Iterable[str]) -> int:
    return sum(1 for w in run if w not in _STOP)


def _new_runs(mine: Sequence[str], own: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """The runs of ``n`` words of ``mine`` that the skill (``own``) does not hold, each with
    two content words at least: the runs that may quote something."""
    return {r for r in _runs(mine, n) - _runs(own, n) if _content(r) >= 2}


def _in_order(mine: Sequence[str], runs: set[tuple[str, ...]], n: int) -> list[int]:
    """The positions in ``mine`` where one of ``runs`` (of ``n`` words) starts, in order."""
    return [i for i in range(len(mine) - n + 1) if tuple(mine[i : i + n]) in runs]


# Why a text was refused, by kind ("{where}": the training item's id, where there is one).
_REASONS: dict[str, str] = {
    "instance": "quotes training item{where}",
    "answer": "quotes the gold answer of training item{where}",
    "reply": "quotes the agent's reply to training item{where}",
    "names": "names the specifics of training item{where}",
    "feedback": "copies the scorer's feedback",
    "scaffolding": "copies the task prompt's scaffolding",
    "instructions": "copies the optimizer prompt's own instructions",
    "refused": "repeats text refused earlier",
    "group": "quotes what only one group of training items says (such as{where})",
    "unseen": "speaks of what the agent never sees",
    "analysis": "echoes skillgrad's failure analysis",
    "about": "speaks about the agent instead of to it",
    "narrow": "makes a word only the question of training item{where} asks about a rule for "
              "every task (say when it applies)",
    "value": "makes a value only the answers of training item{where} and its kind hold a rule "
             "for every task (say when it applies)",
    "form": "makes a form that training item{where} asks for a rule for every task, where other "
            "tasks ask for another (say when it applies, or follow the form each task asks for)",
    "unfinished": "stops mid-sentence",
}
# The reasons' own words, which an analyst told why its rule was refused may write back into a
# rule ("... without making any value only the answers of training item 'unit-050' and its kind
# hold a rule for every task"): checked as the optimizer's prompts are.
REASON_TEXTS = tuple(t.replace("{where}", "\n") for t in _REASONS.values())


@dataclass(frozen=True)
class Quote:
    """Why a text was refused: what kind of thing it copies, from which task, and the words."""

    kind: Kind
    quoted: str
    task_id: str | None = None

    def reason(self) -> str:
        where = f" {self.task_id!r}" if self.task_id else ""
        return f"{_REASONS[self.kind].format(where=where)}: {self.quoted!r}"


@dataclass(frozen=True)
class Evidence:
    """What the optimizer was shown: each task's input words (its system message, its
    requests and tool results), gold answers, the agent's reply
    words, failure reasons; ``groups``, the group of each task that has one (tasks about one
    document, entity or room); ``instructions``, the words of the optimizer's own prompts;
    ``questions``, the words of each task's questions (the sentences of its requests that end
    in a question mark); ``shapes``, the shapes of each task's gold answers
    (:func:`answer_shape`)."""

    inputs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    answers: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    feedback: tuple[tuple[str, ...], ...] = ()
    # Texts refused earlier, as (words, n): a run of n of those words repeats the refusal.
    refused: tuple[tuple[tuple[str, ...], int], ...] = ()
    replies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    names: Mapping[str, frozenset[str]] = field(default_factory=dict)
    groups: Mapping[str, str] = field(default_factory=dict)
    instructions: tuple[tuple[str, ...], ...] = ()
    questions: Mapping[str, frozenset[str]] = field(default_factory=dict)
    shapes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    forms: Mapping[str, frozenset[tuple[str, ...]]] = field(default_factory=dict)
    form_texts: Mapping[tuple[str, ...], str] = field(default_factory=dict)
    # The answer read from each task's reply, where it holds a number (a time, a date, a sum):
    # a value of that task, as its gold answer is.
    read: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # The words of a training item that got a text refused earlier (:func:`quoted_alone`),
    # which repeat that refusal alone wherever they stand: a gold answer refused in "Reply with
    # 'An architect'." is not written back in "Reply with the answer in the context, which is
    # 'An architect'." once the rejected buffer has shown it.
    refused_alone: tuple[tuple[str, ...], ...] = ()
    # The things each task's requests introduce at the start of a sentence ("A meeting began
    # at ..."): what that task is about.
    introduced: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The word counts the failure analysis shows beside the replies ("contains an expected
    # answer plus 4 more words", "shares 2 words with ..."), as digits.
    counted: frozenset[str] = frozenset()
    # The words each task's requests set in quotes (:func:`_quoted_names`), which its names
    # hold too.
    quoted: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # The numbers each task's inputs hold only as a field of a time, a date or a decimal ("45"
    # of "10:45"), and those composites, as words: a composite is one name of its task.
    fields: Mapping[str, frozenset[str]] = field(default_factory=dict)
    composites: Mapping[str, frozenset[tuple[str, ...]]] = field(default_factory=dict)

    @classmethod
    def of(cls, results: Sequence[RolloutResult], tasks: Mapping[str, Task] | None = None,
           refused: Sequence[RefusedText] = (),
           instructions: Sequence[str] | None = None,
           system: bool = True) -> Evidence:
        """The evidence of a step's rollouts (``tasks`` by id supply the gold answers;
        ``refused``: texts refused earlier that the optimizer is shown again, each alone or
        with the words that got it refused (:func:`_refused_runs`), and whether those words
        repeat it alone (:func:`quoted_alone`);
        ``instructions``: the optimizer's prompts, by default skillgrad's templates;
        ``system``: whether the system messages count as input, which is right when they hold
        the skill the quotes are checked against, and wrong when they hold other skills, as the
        rollouts of a whole run do)."""
        inputs: dict[str, tuple[str, ...]] = {}
        answers: dict[str, tuple[str, ...]] = {}
        replies: dict[str, tuple[str, ...]] = {}
        names: dict[str, frozenset[str]] = {}
        quoted: dict[str, frozenset[str]] = {}
        fields: dict[str, frozenset[str]] = {}
        composites: dict[str, frozenset[tuple[str, ...]]] = {}
        groups: dict[str, str] = {}
        questions: dict[str, frozenset[str]] = {}
        shapes: dict[str, frozenset[str]] = {}
        forms: dict[str, frozenset[tuple[str, ...]]] = {}
        form_texts: dict[tuple[str, ...], str] = {}
        read: dict[str, tuple[str, ...]] = {}
        introduced: dict[str, frozenset[str]] = {}
        counted: set[str] = set()
        feedback = []
        # The system message too: what every task tells the agent after its skill (the tools
        # and how to call them) is scaffolding, which a rule need not copy.
        roles = ("system", "user", "tool") if system else ("user", "tool")
        for r in results:
            shown = " \n ".join(m.text() for m in r.messages if m.role in roles)
            inputs[r.task_id] = tuple(words(shown))
            composites[r.task_id] = frozenset(tuple(words(x)) for x in _COMPOSITE.findall(shown))
            fields[r.task_id] = (frozenset(w for c in composites[r.task_id] for w in c)
                                 - {n for x in _ALONE_NUMBER.findall(shown) for n in words(x)})
            quoted[r.task_id] = _quoted_names(m.text() for m in r.messages if m.role == "user")
            spans = [f for m in r.messages if m.role == "user" for f in _form_spans(m.text())]
            # The capitalised word of a form ("Month" in "Month D, YYYY") is a placeholder.
            placeholders = {w for f, _ in spans for w in f}
            names[r.task_id] = (frozenset(_names(shown)) - placeholders) | quoted[r.task_id]
            questions[r.task_id] = frozenset(w for m in r.messages if m.role == "user"
                                             for q in _QUESTION.findall(m.text())
                                             for w in words(q))
            introduced[r.task_id] = frozenset(
                w.lower() for m in r.messages if m.role == "user"
                for x in _INTRODUCED.finditer(m.text()) for w in x.groups() if w)
            forms[r.task_id] = frozenset(f for f, _ in spans)
            for f, raw in spans:
                form_texts.setdefault(f, raw)
            replies[r.task_id] = tuple(words(" \n ".join(
                m.text() for m in r.messages if m.role == "assistant")))
            if any(c.isdigit() for c in r.answer):
                read[r.task_id] = (" ".join(words(r.answer)),)
            if r.reason:
                feedback.append(tuple(words(r.reason)))
            task = (tasks or {}).get(r.task_id)
            if task is not None:
                answers[r.task_id] = tuple(" ".join(words(a)) for a in _strings(task.reference))
                shapes[r.task_id] = frozenset(answer_shape(a) for a in _strings(task.reference))
                counted |= set(_COUNTED.findall(compare_reply(r.answer,
                                                              _strings(task.reference))[1]))
                if task.group is not None:
                    groups[r.task_id] = task.group
        if instructions is None:
            instructions = (*prompts.fixed_texts(), *REASON_TEXTS)
        alone = tuple(tuple(words(t[1])) for t in refused
                      if not isinstance(t, str) and len(t) > 2 and t[2] and words(t[1]))
        return cls(inputs, answers, tuple(feedback),
                   tuple(r for t in refused for r in _refused_runs(t)),
                   replies, names, groups, tuple(tuple(words(t)) for t in instructions),
                   questions, shapes, forms, form_texts, read, alone, introduced,
                   frozenset(counted), quoted, fields, composites)

    def __bool__(self) -> bool:
        return bool(self.inputs or self.answers or self.feedback or self.refused or self.replies
                    or self.instructions)

    @cached_property
    def instruction_words(self) -> frozenset[str]:
        """The words of the optimizer's own prompts: the vocabulary rules are written in."""
        return frozenset(w for text in self.instructions for w in text)

    @cached_property
    def input_counts(self) -> dict[str, int]:
        """In how many tasks' inputs each word is, counted once for the checks that ask."""
        return _task_counts(self.inputs.values())


# A number that stands alone, not as a field of a time, a date or a decimal (a full stop after
# it ends a sentence); and such a composite ("10:45", "2024-05-01", "2.45").
_ALONE_NUMBER = re.compile(r"(?<![\d:./,-])\d(?:[\d,_]*\d)?(?![\d:/-]|[.,]\d)")
_COMPOSITE = re.compile(r"(?<![\d:./-])\d+(?:[:./-]\d+)+")
# A count of words, as the failure analysis writes one ("plus 4 more words", "2 words short").
_COUNTED = re.compile(r"\b(\d+)\s+(?:more\s+)?words?\b")
# ... and as a rule fixes one, which a bound before or after it ("at most 5 words", "5 words or
# fewer") does not: a limit a person sets, not a count read from the analysis.
_FIXED_COUNT = re.compile(r"(?<!at most )(?<!up to )(?<!no more than )(?<!fewer than )"
                          r"(?<!less than )(?<!under )(?<!within )" + _COUNTED.pattern
                          + r"(?!\s+or\s+(?:fewer|less))", re.I)
# A thing a sentence begins with, introduced, in its first two words: "A meeting began at
# 11:55:12 ...", "A phone call started at ..." (the call as much as the phone).
_INTRODUCED = re.compile(r"(?:^|[.!?:]\s+|\n\s*)(?:A|An)\s+([a-z]+)(?:\s+([a-z]+))?")
# A question: a sentence (or line) that ends in a question mark.
_QUESTION = re.compile(r"[^.?!\n]*\?")
# A rule that says when it applies: a condition anywhere in it ("For a question that asks
# when, ...", "A question that says ... wants ..." are ones too), a label before a colon
# ("Dates: ...", "Rule year: ..."), or "for" before the kind it names ("For a date, ...").
_CONDITION = re.compile(r"\b(?:if|when|whenever|unless|where|whether|in\s+case|"
                        r"(?:for\s+)?(?:(?:a|an|any|each|every)\s+(?:question|task|request)|"
                        r"(?:questions|tasks|requests))\s+(?:that|which)(?!\s+(?:you|we|i)\b))\b",
                        re.I)
_LABEL = re.compile(r"^\s*(?:[-*+]|\d+[.)])?\s*([^:.!?\n]{1,40}):(?=\s|$)")  # not "HH:MM"
# What follows a condition up to the end of its clause ("if the question asks for grams"), and
# the words of a condition that name no kind of task: "if you know it", "when possible".
_CONDITION_CLAUSE = re.compile(_CONDITION.pattern + r"([^,;.!?\n]*)", re.I)
_VACUOUS = frozenset("know known sure unsure certain possible needed need necessary applicable "
                     "appropriate relevant required available present able can any".split())
# A verb of checking before "if" or "whether": what follows is what to check, not when the rule
# applies ("check if the time format is 'HH:MM:SS'" fixes that format for every task).
_CHECKING = re.compile(r"\b(?:check|checks|checking|verify|see|confirm|determine|ensure|test|"
                       r"make\s+sure|find\s+out|ask\s+yourself)\s*$", re.I)


_IF_WHETHER = re.compile(r"(?:if|whether)\b", re.I)


def _conditions(text: str, pattern: re.Pattern[str] = _CONDITION_CLAUSE) -> list[re.Match[str]]:
    """The conditions of ``text`` (matches of ``pattern``), without an "if" or "whether" that
    says what to check ("check if ...", "verify whether ...")."""
    return [m for m in pattern.finditer(text)
            if not (_IF_WHETHER.match(m.group(0)) and _CHECKING.search(text[: m.start()]))]


def asked_in_condition(text: str) -> list[tuple[str, ...]]:
    """The words of each condition of ``text`` that say what the request asks for, after the
    words that point at it: "the number only" in "When the question asks for the number only,
    reply with the number alone"; and the words of a clause before a pointer that ends it
    ("write the unit symbol" in "Write the unit symbol the question asks for"). Words the
    questions of one group hold are, there, the condition that tells those questions from the
    others, not a copy of them."""
    out: list[tuple[str, ...]] = []
    for m in _conditions(text):
        pointed = _POINTED.search(m.group(0))
        if pointed is not None:
            out.append(tuple(words(m.group(0)[pointed.end():])))
    out += [tuple(words(m.group(1))) for m in _POINTED_AFTER.finditer(text)]
    return [x for x in out if x]


# A thing named and then left to the request ("Write the unit symbol the question asks for
# (...)"): the words before the pointer, in its clause, say what the request asks for, as a
# condition's do.
_POINTED_AFTER = re.compile(
    r"([^,;:.!?\n()]*?)\s+(?:that\s+|which\s+)?(?:the|each|a|your)\s+"
    r"(?:question|task|request|prompt)\s+(?:asks?|names?|specifies|wants|requests|requires|"
    r"uses|gives|says|states)"
    r"(?:\s+for)?\s*(?=$|[,;:.!?\n(])", re.I)


def _says_when(text: str) -> bool:
    """Whether ``text`` has a condition that names something (a kind of question, a word of
    the task: "If the question asks for grams, ..."; not "... if you know it"), or a clause
    that begins with a form ("In 'Month D, YYYY', ...")."""
    return (any(content_words(m.group(1)) - _VACUOUS for m in _conditions(text))
            or any(_IN_FORM.search(x) for x in SENTENCE_END.split(text)))

_FOR = re.compile(r"\bfor\s+((?:[a-z]+\s+){0,2}[a-z]+)", re.I)
# ... or a purpose a sentence begins with ("To add N days to a date, ..."): what it is for.
_PURPOSE = re.compile(r"(?:^|[.!?;:]\s+|\n)[\s*+\-]*to\s+([^,;.!?\n]{1,60}),", re.I)
# A thing a rule presumes every task has: the word after "the" or a possessive, or after one
# word more ("just the date", "the full date", "your final answer"). "a year", "each date" are
# whatever such thing a task holds: "Write a year as its four digits" applies where one is.
_NAMED = re.compile(r"\b(?:the|its|their|your)\s+((?:[a-z]+\s+)?[a-z]+)", re.I)
# The words every question is asked with, and the nouns that sort things into kinds ("what
# kind of boat" asks about a boat; "two entities of the same kind" names no task's thing).
_ASKING = frozenset("what which who whom whose when where why how kind type sort".split())
# A form written with placeholders: capitals ("YYYY", "HH", "D"; not the words "A" and "I"),
# joined by punctuation or a space, with a capitalised word before them ("Month D, YYYY").
_CAPS = r"(?:(?![AI]\b)[A-Z]{1,6}\b)"
_FORM = re.compile(rf"(?:\b[A-Z][a-z]+[ ]+(?={_CAPS}))?\b{_CAPS}(?:(?:[/:.\-]|,?[ ]+){_CAPS})*")
# A sentence that leaves the form to the request ("the format the question asks for").
_REQUEST = re.compile(r"\b(?:question|task|request|prompt|instruction)s?\b", re.I)
_POINTED = re.compile(
    r"\b(?:question|task|request|prompt|instruction)s?\s+(?:\w+\s+){0,2}?(?:asks?|asked|"
    r"names?|named|specif(?:y|ies|ied)|gives?|given|wants?|says?|states?|requests?|requires?)\b"
    r"|\b(?:requested|given|specified|stated|named|required)\s+(?:format|form)s?\b"
    r"|\b(?:format|form)s?\s+(?:asked\s+for|requested|given|specified|named|required)\b"
    r"|\b(?:format|form)s?\s+(?:in|of|from)\s+the\s+(?:question|task|request|prompt)\b", re.I)
_NAME = re.compile(r"(?<![\w.])(?:[A-Z][a-z]+|\d[\d,_]*\d)(?![\w])")
_STARTS = re.compile(r"(?:^|[.!?:;]\s+|\n\s*)([A-Z][a-z]+)")


def _names(text: str) -> set[str]:
    """The words of ``text`` that name things: capitalised words that do not begin a sentence
    or a line, and numbers of two digits or more (normalised as :func:`words` does)."""
    starts = {m.start(1) for m in _STARTS.finditer(text)}
    return {words(m.group())[0] for m in _NAME.finditer(text)
            if m.start() not in starts and words(m.group())}


def _quoted_names(requests: Iterable[str]) -> frozenset[str]:
    """The words a task's requests set in quotes, a word or two at a time ("the letter 'e' in
    the word 'beginning'"): what the task is about, named as a name is, whatever its case."""
    return frozenset(w for text in requests for v in _quoted_values(text) if len(v) <= 2
                     for w in v)


def _strings(reference: Any) -> list[str]:
    """The strings (and numbers) inside a task's reference, however the environment nests it."""
    if isinstance(reference, bool) or reference is None:
        return []
    if isinstance(reference, (str, int, float)):
        return [str(reference)]
    if isinstance(reference, Mapping):
        return [s for v in reference.values() for s in _strings(v)]
    if isinstance(reference, (list, tuple, set)):
        return [s for v in reference for s in _strings(v)]
    return []


def unseen_quote(text: str, skill: str = "") -> Quote | None:
    """A phrase of ``text`` that speaks of what the agent never sees (its reply compared with
    the expected answer, whether its reply is correct), that echoes the failure analysis's
    relation words, or that speaks about the agent in the third person; None when there is
    none, or the skill already says it."""
    checks: tuple[tuple[Kind, tuple[re.Pattern[str], ...]], ...] = (
        ("analysis", (_ANALYSIS,)), ("unseen", _UNSEEN), ("about", (_ABOUT,)))
    limited = [m.span() for m in _LIMITED.finditer(text)]
    for kind, patterns in checks:
        for pattern in patterns:
            for found in pattern.finditer(text):
                if any(a <= found.start() and found.end() <= b for a, b in limited):
                    continue
                if found.group(0).lower() not in skill.lower():
                    return Quote(kind, found.group(0))
                break
    return None


def find_quote(text: str, evidence: Evidence, skill: str = "") -> Quote | None:
    """The first thing ``text`` must not carry into a skill, or ``None`` when it is clean.

    Runs of words that ``skill`` (the current document) already contains are exempt."""
    if not text.strip():
        return None
    unseen = unseen_quote(text, skill)
    if unseen is not None or not evidence:
        return unseen
    mine = words(text)
    own = words(skill)
    asked = asked_in_condition(text)
    return (_answer_quote(mine, own, evidence) or _input_quote(mine, own, evidence, asked)
            or _group_quote(text, mine, own, evidence, asked)
            or _names_quote(text, mine, own, evidence)
            or _quantity_quote(mine, own, evidence)
            or _reply_quote(mine, own, evidence) or _feedback_quote(mine, own, evidence)
            or _refused_quote(mine, own, evidence) or _instructions_quote(mine, own, evidence)
            or _narrow_quote(text, mine, own, evidence) or _introduced_quote(text, own, evidence)
            or _value_quote(text, own, evidence)
            or _form_quote(text, skill, evidence) or _count_quote(text, skill, evidence)
            or _read_quote(mine, own, evidence) or _answer_line_quote(text, evidence))


def _instructions_quote(mine: list[str], own: list[str], evidence: Evidence) -> Quote | None:
    """A run of the optimizer prompt's own words (two of them content words) in the text."""
    runs = _new_runs(mine, own, INSTANCE_RUN)
    hits = _in_order(mine, runs & _instruction_runs(evidence.instructions), INSTANCE_RUN)
    if not hits:
        return None
    quoted = _longest(mine, hits[0], INSTANCE_RUN, list(evidence.instructions))
    return Quote("instructions", quoted)


@cache
def _instruction_runs(instructions: tuple[tuple[str, ...], ...]) -> frozenset[tuple[str, ...]]:
    return frozenset(r for seq in instructions for r in _runs(seq, INSTANCE_RUN))


# The reasons of refusals for words of a training item (its input, gold answer, reply, or
# what only its group says): those words alone repeat the refusal wherever they stand.
_ITEM_WORDS = re.compile(
    rf"^{REFUSED}: (?:quotes (?:the gold answer of |the agent's reply to )?training item|names "
    r"the specifics of training item|quotes what only one group of training items says)")


def quoted_alone(reason: str) -> bool:
    """Whether a refusal with this reason was for a training item's own words, which a later
    text repeats by holding them alone (not one that went on repaired without them)."""
    return bool(_ITEM_WORDS.match(reason)) and "; the rule went on with" not in reason


RefusedText = str | tuple[str, str] | tuple[str, str, bool]


def binds(reason: str) -> bool:
    """Whether a refusal with this reason keeps a later text from repeating the refused one.
    One refused for stopping mid-sentence does not: the same words finished are the rule its
    analyst meant."""
    return reason.startswith(REFUSED) and not reason.startswith(
        f"{REFUSED}: {_REASONS['unfinished']}")


def refused_texts(rejected: Iterable[RejectedStep]) -> list[RefusedText]:
    """What of the rejected buffer a later text must not repeat (:meth:`Evidence.of`'s
    ``refused``): each text refused before rollout for a reason that :func:`binds`, with the
    words that got it refused, and whether those words repeat it alone."""
    return [(e.description if isinstance(e, Suggestion) else e.content, r.quoted,
             quoted_alone(r.note))
            for r in rejected if binds(r.note) for e in r.edits]


def _refused_runs(refused: RefusedText) -> list[tuple[tuple[str, ...], int]]:
    """What of a text refused earlier a later text must not repeat, as (words, n) pairs (a run
    of n of those words repeats it): where the words that got it refused are known and found in
    it, each stretch of it that holds them whole, with the words around them to make at least
    five ("ensure the reply ends with the answer's format", refused for "the reply ends with
    the answer", is not repeated by "ensure the reply ends with the format the task asks for");
    otherwise any five words of it in a row. (With a third value true, the words that got it
    refused repeat it alone too: :attr:`Evidence.refused_alone`.)"""
    text, quoted = (refused, "") if isinstance(refused, str) else refused[:2]
    seq, bad = words(text), words(quoted)
    spans = [(i, len(bad)) for i in range(len(seq) - len(bad) + 1)
             if bad and seq[i : i + len(bad)] == bad]
    if not spans:  # names refused together ("2024, 20"): each where it stands
        spans = [(i, 1) for i, w in enumerate(seq) if w in bad]
    if not spans:
        return [(tuple(seq), SCORER_RUN)]
    out = []
    for i, k in spans:
        n = max(SCORER_RUN, k)
        for start in range(max(0, i + k - n), min(i, len(seq) - n) + 1):
            out.append((tuple(seq[start : start + n]), n))
    return out


def _refused_quote(mine: list[str], own: list[str], evidence: Evidence) -> Quote | None:
    for seq, n in evidence.refused:
        hits = _in_order(mine, _new_runs(mine, own, n) & _runs(seq, n), n)
        if hits:
            return Quote("refused", _longest(mine, hits[0], n, [seq]))
    for seq in evidence.refused_alone:
        if _content(seq) and _in_order(mine, {seq} - _runs(own, len(seq)), len(seq)):
            return Quote("refused", " ".join(seq))
    return None


def _read_quote(mine: list[str], own: list[str], evidence: Evidence) -> Quote | None:
    """A value the agent answered one task with ("19:09:52", "3:40"), whole, as a gold answer
    is refused: "Reply with 'Answer: 19:09:52'" holds that task's reply, not a rule."""
    found = _answer_quote(mine, own, evidence, evidence.read)
    return Quote("reply", found.quoted, found.task_id) if found is not None else None


# An answer line set in quotes with a value in it ("Reply with 'Answer: 2'"), not a placeholder.
_ANSWER_LINE = re.compile(r"^\s*answer\s*:\s*([^<>\s][^<>]*)$", re.I)


def _answer_line_quote(text: str, evidence: Evidence) -> Quote | None:
    """An answer line in quotes that gives, as the value to write, the gold answer of fewer
    than half the step's tasks, or the answer read from their replies, however short: a
    letter-counting analyst's "Reply with 'Answer: 2' before you answer" fixes two of its six
    tasks' count for every task. One given as an example ("e.g. 'Answer: 2'") passes, as do a
    value no task of the step has and one most of them share. So does a rule that is only such
    a line ("- Answer: 4")."""
    n_tasks = len(evidence.inputs)
    for before, quoted in [*_quotations(text), ("", LIST_ITEM.sub("", text.strip()))]:
        line = _ANSWER_LINE.match(quoted)
        if line is None or _EXAMPLE.search(before):
            continue
        value = " ".join(words(line.group(1)))
        sources: tuple[tuple[Kind, Mapping[str, tuple[str, ...]]], ...] = (
            ("answer", evidence.answers), ("reply", evidence.read))
        for kind, values in sources:
            held = [i for i, vs in values.items() if value in vs]
            if value and 0 < len(held) < SCAFFOLD_SHARE * n_tasks:
                return Quote(kind, value, held[0])
    return None


def _answer_quote(mine: list[str], own: list[str], evidence: Evidence,
                  answers: Mapping[str, tuple[str, ...]] | None = None) -> Quote | None:
    """A gold answer of one task (or ``answers``), whole, unless it is short, shared by many
    tasks, only function words or polar answers ("yes", "false"), the skill's, or one word
    of the optimizer's own prompts: a document question answered "words" names no fact in
    "reply with the few words of the section that answer the question"."""
    answers = evidence.answers if answers is None else answers
    joined, own_joined = f" {' '.join(mine)} ", f" {' '.join(own)} "
    vocabulary = evidence.instruction_words
    counts: dict[str, int] = {}
    for golds in answers.values():
        for g in set(golds):
            counts[g] = counts.get(g, 0) + 1
    limit = max(1, int(MAX_ANSWER_SHARE * max(1, len(answers))))
    for task_id, golds in answers.items():
        for g in golds:
            short = len(g.replace(" ", "")) < MIN_ANSWER_CHARS and not (
                g.isdigit() and len(g) >= 2)  # "14" names an instance, "a" does not
            if (short or counts[g] > limit or all(w in _STOP or w in _POLAR for w in g.split())
                    or (g in vocabulary and not g.isdigit())):
                continue
            if f" {g} " in joined and f" {g} " not in own_joined:
                return Quote("answer", g, task_id)
    return None


def _holders(mine: list[str], own: list[str],
             sources: Mapping[str, tuple[str, ...]]) -> dict[tuple[str, ...], list[str]]:
    """Each run of ``INSTANCE_RUN`` words of ``mine`` (with two content words, not the skill's
    own) that some of ``sources`` hold, with the ids of those that hold it."""
    runs = _new_runs(mine, own, INSTANCE_RUN)
    holders: dict[tuple[str, ...], list[str]] = {}
    for task_id, seq in sources.items() if runs else ():
        for r in runs & _runs(seq, INSTANCE_RUN):
            holders.setdefault(r, []).append(task_id)
    return holders


def _task_counts(per_task: Iterable[Iterable[str]]) -> dict[str, int]:
    """In how many of the tasks each word is."""
    counts: dict[str, int] = {}
    for found in per_task:
        for w in set(found):
            counts[w] = counts.get(w, 0) + 1
    return counts


def _unseen_terms(evidence: Evidence, own: Iterable[str]) -> set[str]:
    """The words of evaluation the feedback uses that the agent never sees (in no task input,
    no reply, not in the skill)."""
    said = set().union(*map(set, evidence.feedback))
    seen = set(own).union(*map(set, evidence.inputs.values()),
                          *map(set, evidence.replies.values()))
    return set(SCORER_TERMS & said - seen)


def _input_quote(mine: list[str], own: list[str], evidence: Evidence,
                 asked: Sequence[tuple[str, ...]] = ()) -> Quote | None:
    """A run of :data:`INSTANCE_RUN` words that a task's input holds: one task's words, or the
    scaffolding where half the tasks hold it. A run inside a condition's request words
    (``asked``, :func:`asked_in_condition`) is the condition (:func:`_asked_only`)."""
    holders = {r: ids for r, ids in _holders(mine, own, evidence.inputs).items()
               if not _asked_only(r, [w for w in r if w not in _STOP], ids, asked, evidence)}
    if not holders:
        return None
    n_tasks = len(evidence.inputs)
    start = _in_order(mine, set(holders), INSTANCE_RUN)[0]
    ids = holders[tuple(mine[start : start + INSTANCE_RUN])]
    quoted = _longest(mine, start, INSTANCE_RUN, [evidence.inputs[i] for i in ids])
    if n_tasks >= 2 and len(ids) >= SCAFFOLD_SHARE * n_tasks:
        return Quote("scaffolding", quoted)
    return Quote("instance", quoted, ids[0])


def _group_quote(text: str, mine: list[str], own: list[str], evidence: Evidence,
                 asked: Sequence[tuple[str, ...]] = ()) -> Quote | None:
    """A run of :data:`GROUP_RUN` words that the inputs of two or more tasks hold, but fewer
    than the scaffolding share, and whose content word no other task's input has: the wording
    of one group of tasks (the tasks about one entity, or of one question template), an
    instance fact like one task's words. "Include the full duration of the call in seconds"
    quotes the template of the questions about calls; "the format the question asks for"
    quotes none. Three words of one task's input, two of which no other task's input has
    ("while researching wheatgrass juicers"), are that task's: shorter than an instance run,
    and as much that item's. So is a run with a number of two digits or more that few tasks'
    inputs hold ("longer than 113"). A run inside a form written in placeholders ("Month D,
    YYYY") is that form's, which :func:`_form_quote` judges. So is a run inside the words a
    condition says the request asks for (``asked``, :func:`asked_in_condition`), where the questions of
    the tasks that hold it do not hold its marking words: the condition that tells one group
    of requests from the others is said in their words ("When the question asks for the number
    only, ..."), where "When the question asks for the duration of the call, ..." names what
    the questions about calls are about."""
    n_tasks = len(evidence.inputs)
    if n_tasks < 3:
        return None
    counts = evidence.input_counts
    runs = {r for r in _runs(mine, GROUP_RUN) - _runs(own, GROUP_RUN) if _content(r) >= 1}
    runs -= {r for form in _forms(text) for r in _runs(form, GROUP_RUN)}
    if not runs:
        return None
    holders: dict[tuple[str, ...], list[str]] = {}
    for task_id, seq in evidence.inputs.items():
        for r in runs & _runs(seq, GROUP_RUN):
            holders.setdefault(r, []).append(task_id)
    own_words = set(own)
    for start in _in_order(mine, set(holders), GROUP_RUN):
        run = tuple(mine[start : start + GROUP_RUN])
        ids = holders[run]
        if not len(ids) < SCAFFOLD_SHARE * n_tasks:
            continue
        if any(w.isdigit() and len(w) >= 2 and w not in own_words for w in run):
            # A number with the words around it, as few tasks say it: their fact
            # ("longer than 113", of one question about one ship).
            return Quote("instance" if len(ids) == 1 else "group", " ".join(run), ids[0])
        marks = [w for w in run if w not in _STOP and w not in own_words and not w.isdigit()
                 and len(w) > 2 and counts.get(w, 0) == len(ids)]
        if _asked_only(run, marks, ids, asked, evidence) or not set(marks) - _REPLYING:
            continue
        if len(ids) == 1 and len([w for w in marks if len(w) > 4]) >= 2:
            return Quote("instance", " ".join(run), ids[0])  # two long words of one task's
        if len(ids) >= 2 and marks:  # a word only these tasks' inputs have
            return Quote("group", " ".join(run), ids[0])
    return None


# The verbs a request asks for its reply with: a group's "Write the date in ..." makes "Write
# the date in the format the question names" no more that group's than "Reply with" would.
_REPLYING = frozenset("""write reply give answer state respond return output express put
provide enter type say""".split())


def _asked_only(run: tuple[str, ...], marks: Iterable[str], ids: Sequence[str],
                asked: Iterable[tuple[str, ...]], evidence: Evidence) -> bool:
    """Whether ``run``, which the inputs of tasks ``ids`` hold, lies in words a condition says
    the request asks for, and its ``marks`` are in none of those tasks' questions: the words
    of what they ask for (their form), not of what they are about."""
    return (any(_holds(seq, run) for seq in asked)
            and not any(set(marks) & evidence.questions.get(i, frozenset()) for i in ids))


def _narrow_quote(text: str, mine: list[str], own: list[str],
                  evidence: Evidence) -> Quote | None:
    """A rule with no condition that names (after "the", "your", ...) a thing only the questions
    of fewer than half of the step's tasks ask about, which no other task's input has, where
    the answers of those tasks are of a shape fewer than half of the step's answers share: one
    kind of question's answer made a rule for every task. "Reply with just the date, without
    any additional information" was written from one date question (its answer "4 May 1921")
    among questions about a colour, a river, a count and a year; the agent obeys it on every
    question. "Give the number alone" from the one math question that says "number" names
    what every answer of the batch is, and passes. So does the rule that says when it applies
    ("If the question asks for a date, ..."), and a word the skill already holds."""
    n_tasks = len(evidence.inputs)
    if n_tasks < 3 or not evidence.questions or _says_when(text) or _LABEL.match(text):
        return None
    own_words = set(own)
    # "the question names": the request pointed at, not a thing called "names".
    named = [w for w in dict.fromkeys(w for found in _NAMED.findall(_POINTED.sub(" ", text))
                                      for w in words(found))
             if w not in _STOP and w not in _AFTER_NOUN and w not in _ASKING
             and w not in own_words and not w.isdigit()
             and len(w) > 2]
    if not named:  # most rules name nothing a question asks about: no input counted
        return None
    counts = evidence.input_counts
    narrow: list[tuple[str, str]] = []
    for w in named:
        asking = [i for i, q in evidence.questions.items() if w in q]
        if (asking and len(asking) < SCAFFOLD_SHARE * n_tasks
                and counts.get(w, 0) == len(asking) and _rare_shape(asking, evidence)):
            narrow.append((w, asking[0]))
    kinds = {w for found in (*_FOR.findall(text), *_PURPOSE.findall(text))
             for w in words(found)}
    if not narrow or any(w in kinds for w, _ in narrow):  # "For a date, ..." says when
        return None
    return Quote("narrow", *narrow[0])


# The one word after "the" or a possessive. Not :data:`_NAMED`, whose second word would take
# the article of the next thing ("the time the train arrived" gives "time the", not "train").
_THE = re.compile(r"\b(?:the|its|their|your)\s+([a-z]+)", re.I)


def _count_quote(text: str, skill: str, evidence: Evidence) -> Quote | None:
    """A count of words that a rule fixes ("make sure that your reply only contains 4 words")
    where the failure analysis shows that count beside a reply ("its reply contains an
    expected answer plus 4 more words"): the analysis echoed as a rule, which the quickstart's
    gate accepted over "Reply with the answer only". A limit ("at most 5 words", "5 words or
    fewer") and a count the skill gives pass."""
    for m in _FIXED_COUNT.finditer(text):
        if m.group(1) in evidence.counted and m.group(0).lower() not in skill.lower():
            return Quote("analysis", m.group(0))
    return None


def _introduced_quote(text: str, own: list[str], evidence: Evidence) -> Quote | None:
    """A rule with no condition that names ("the", a possessive) a thing that fewer than half
    of the step's tasks introduce, a sentence of their requests beginning with it ("A meeting
    began at 11:55:12 ..."), where no other task's input has the word: that task's entity, or
    one group's, made a rule for every task. "Reply with the duration of the meeting in the
    format the task asks for" was screened on a times set where one question of six is about
    a meeting; "the phone call" is the calls' template. A word some passage has ("... for a
    time, the parliament ..."), a thing the tasks name with "the" ("the number"), one the
    skill names, and the rule that says when it applies ("When the question is about a
    meeting, ...") pass."""
    n_tasks = len(evidence.inputs)
    if n_tasks < 3 or _says_when(text):
        return None
    own_words = set(own)
    counts = evidence.input_counts
    for found in _THE.findall(text):
        w = found.lower()
        if w in _STOP or w in own_words or w.isdigit() or len(w) < 3:
            continue
        holders = [i for i, things in evidence.introduced.items() if w in things]
        if holders and counts.get(w, 0) == len(holders) < SCAFFOLD_SHARE * n_tasks:
            return Quote("names" if len(holders) == 1 else "group", w, holders[0])
    return None


# A quoted value given as an example of a kind, not as what to write: "such as 'km'".
_EXAMPLE = re.compile(r"(?:\be\.g\.|\b(?:such\s+as|for\s+(?:example|instance)|like)\b)[^.;!?]*$",
                      re.I)


def _value_quote(text: str, own: list[str], evidence: Evidence) -> Quote | None:
    """A rule with no condition that sets in quotes, as a value to write, a word that only the
    gold answers of fewer than half of the step's tasks hold and no task's input has: one kind
    of answer's value made a rule for every task. "Before you answer, include the unit symbol
    'g'." was written from the questions that convert to grams, among conversions to metres,
    seconds and numbers alone. The rule that says when it applies ("If the question asks for
    grams, ...", "Use 'mL' for millilitres", where the inputs of those tasks say
    "millilitres"), a value given as an example ("symbols such as 'g' or 'km'"), and both
    answers of a kind of question ("answer 'yes' or 'no' in lower case") pass."""
    answered = {i: {w for a in golds for w in a.split()} for i, golds in evidence.answers.items()}
    label = _LABEL.match(text)  # "Grams: ..." says when; "Reply with 'Answer: ..." does not
    if (len(answered) < 3 or _says_when(text)
            or (label and not any(q in label.group(1) for q in "'\"`‘“"))):
        return None
    given = [w for before, quoted in [*_quotations(text), *_bracketed(text)]
             if not _EXAMPLE.search(before) for w in words(quoted)]
    counts = evidence.input_counts
    own_words = set(own)
    kinds = {k for found in _FOR.findall(text) for k in words(found)} - _STOP
    # Both answers of a kind of question ("answer 'yes' or 'no'") name that kind, not a value.
    polar = set(given) & _POLAR if len(set(given) & _POLAR) >= 2 else set()
    for w in dict.fromkeys(given):
        if w in _STOP or w in own_words or w.isdigit() or counts.get(w, 0) or w in polar:
            continue
        holders = [i for i, ws in answered.items() if w in ws]
        if not holders or len(holders) >= SCAFFOLD_SHARE * len(answered):
            continue
        if any(kinds & set(evidence.inputs.get(i, ())) for i in holders):  # "for millilitres"
            continue
        return Quote("value", w, holders[0])
    return None


def _capital_forms(text: str, evidence: Evidence) -> str:
    """``text`` with each form the step's requests name, where written in small letters
    ("in the format hh:mm"), in their capitals ("HH:MM"): the same form, which a small model
    writes either way, and which the placeholders are only told by in capitals."""
    for raw in sorted(set(evidence.form_texts.values()), key=len, reverse=True):
        pattern = re.compile(rf"(?<![\w/:.\-]){re.escape(raw)}(?![\w/:\-])", re.IGNORECASE)
        text = pattern.sub(raw.replace("\\", "\\\\"), text)
    return text


def _form_quote(text: str, skill: str, evidence: Evidence) -> Quote | None:
    """A sentence that fixes one form (a run of placeholders written in capitals,
    "DD/MM/YYYY", "HH:MM:SS", "Month D, YYYY") which the requests of some of the step's tasks
    name while others name another with some of its placeholders: one request's form made a
    rule for every task, where the form belongs to each task. "Reply in HH:MM:SS" written from
    a batch whose questions ask for HH:MM:SS or HH:MM is right for some of them only. A
    sentence whose condition names the form or the request ("If the question asks for
    HH:MM:SS, ..."; not "... and specifies the month if not"), that points to the request ("the
    format the question asks for, such as ..."), a text that names two of the forms asked for
    ("HH:MM or HH:MM:SS"), a sentence that names two forms, asked for or not
    (:func:`_lists_forms`), and the one form the skill fixes, pass."""
    text = _capital_forms(text, evidence)
    label = _LABEL.match(text)  # "DD/MM/YYYY questions: ..." says when; "Dates: ..." does not
    if len(evidence.forms) < 2 or (label and (_forms(label.group(1))
                                              or _REQUEST.search(label.group(1)))):
        return None
    asked = set().union(*evidence.forms.values())
    sentences = SENTENCE_END.split(text)
    forms = {f for sentence in sentences for f in _asked_forms(sentence, asked)}
    if len(forms) != 1:  # none asked for, or several: alternatives named, not one fixed
        return None
    form = next(iter(forms))
    # The skill's own form, fixed there already; not one it lists among others ("the format
    # the task asks for (DD/MM/YYYY or YYYY-MM-DD)"), which fixes none.
    if _asked_forms(skill, asked) == {form}:
        return None
    holders = [i for i, named in evidence.forms.items() if form in named]
    others = [i for i, named in evidence.forms.items()
              if form not in named and any(set(form) & set(f) for f in named)]
    if not (holders and others):
        return None
    fixed = any(form in _asked_forms(sentence, asked) and not _scoped(sentence)
                and not _lists_forms(sentence, asked)
                and not _pointed_before(sentence, form, asked)
                and not set(form) & {w for found in _FOR.findall(sentence) for w in words(found)}
                for sentence in sentences)
    return Quote("form", " ".join(form), holders[0]) if fixed else None


def _pointed_before(sentence: str, form: tuple[str, ...], asked: set[tuple[str, ...]]) -> bool:
    """Whether ``sentence`` leaves ``form`` to the request: it points to the request ("the
    format the question asks for") in the clause that names the form, or in one before it
    ("the format the question asks for, such as YYYY-MM-DD"). A pointer after it says what the
    fixed form is meant to do ("use the format HH:MM:SS, so the answer matches the requested
    form") and fixes it all the same."""
    parts = re.split(r"[,;]\s+|:\s+", sentence)
    pointing = [k for k, part in enumerate(parts) if _POINTED.search(part)]
    naming = [k for k, part in enumerate(parts) if form in _asked_forms(part, asked)]
    return any(p <= f for p in pointing for f in naming)


def _lists_forms(sentence: str, asked: set[tuple[str, ...]]) -> bool:
    """Whether ``sentence`` names two forms or more, whether or not the step's requests ask
    for each ("Write the month with two digits in DD/MM/YYYY and YYYY-MM-DD", where none asks
    for the first): alternatives, not one form fixed. A form named as what not to write ("Use
    DD/MM/YYYY, not MM/DD/YYYY") is none."""
    named: set[tuple[str, ...]] = set()
    for run, m in _form_matches(sentence):
        if not _NOT_THIS.search(sentence[: m.start()]):
            named |= _asked_in(run, asked) or {run}
    return len(named) >= 2


# What comes before a form named as what not to write.
_NOT_THIS = re.compile(r"\b(?:not|never|no|instead\s+of|rather\s+than|than|avoid)\s+"
                       r"(?:the\s+|a\s+)?(?:format\s+|form\s+)?[\"'`‘“]?$", re.I)


def _asked_forms(sentence: str, asked: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """The forms of ``sentence`` that are among the ``asked`` ones: in each run of
    placeholders, from the left, the longest asked form that starts there ("Use YYYY-MM-DD" holds
    YYYY-MM-DD; "DD/MM/YYYY, YYYY-MM-DD" holds two; "HH:MM:SS" holds HH:MM:SS, not HH:MM)."""
    return {f for run in _forms(sentence) for f in _asked_in(run, asked)}


def _asked_in(run: tuple[str, ...], asked: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """The ``asked`` forms one run of placeholders holds (:func:`_asked_forms`)."""
    found: set[tuple[str, ...]] = set()
    i = 0
    while i < len(run):
        here = [run[i:j] for j in range(len(run), i, -1) if run[i:j] in asked]
        if here:
            found.add(here[0])
            i += len(here[0])
        else:
            i += 1
    return found


def _scoped(sentence: str) -> bool:
    """Whether a condition of ``sentence`` names a form or the request ("If the question asks
    for DD/MM/YYYY", "when the task gives a format"): one that says when a form applies. So
    does a form a clause begins with ("In DD/MM/YYYY, the day comes first"), and a form that a
    thing is given in ("Read a date given as DD/MM/YYYY day first"): what
    the rule reads, not what it writes."""
    given = _GIVEN_FORM.search(sentence)
    if (given and not set(words(sentence[: given.start()])) & _REPLYING) or _IN_FORM.search(
            sentence):
        return True
    for m in _conditions(sentence, _CONDITION):
        clause = re.split(r"[,;.]\s", sentence[m.start():] + " ", maxsplit=1)[0]
        if _forms(clause) or _REQUEST.search(clause):
            return True
    return False


# A thing of any task given in a form: "a date given as DD/MM/YYYY" (not "the answer given as",
# nor "Reply with a date given as ...", where a verb of replying before it makes it the reply's).
_GIVEN_FORM = re.compile(rf"\b(?:a|an|any|each|every)\s+[a-z]+\s+(?:that\s+(?:is|are)\s+)?"
                         rf"(?:given|provided|supplied)\s+(?:as|in)\s+"
                         rf"(?:the\s+form\s+)?['\"‘“]?{_FORM.pattern}", re.I)


# A form a clause begins with, as its scope: "In 'Month D, YYYY', spell the month in full",
# "Never swap day and month: in DD/MM/YYYY, the day comes first" (not "Write the date in
# DD/MM/YYYY, then ...", where the form is what to write).
_IN_FORM = re.compile(rf"(?:^[\s*+\-\d.)]*|[:;]\s+)(?i:in|for)\s+(?:(?i:the)\s+)?"
                      rf"(?:(?i:format|form)\s+)?[\"'‘“`]?{_FORM.pattern}[\"'’”`]?\s*,")


def _forms(sentence: str) -> set[tuple[str, ...]]:
    """The runs of placeholders a sentence holds: words written in capitals ("YYYY", "D";
    "A" and "I" are words), with what joins them ("/", ":", "-", a comma, one capitalised word
    such as "Month" before them), as words (see :func:`_form_spans`)."""
    return {f for f, _ in _form_spans(sentence)}


def _form_spans(text: str) -> list[tuple[tuple[str, ...], str]]:
    """Each form of :func:`_forms` in ``text`` with its text as written: two placeholders at
    least, one of two letters or more ("HH:MM", "Month D, YYYY"; not "B, C", not "USD")."""
    return [(f, m.group(0).rstrip(", ")) for f, m in _form_matches(text)]


def _form_matches(text: str) -> list[tuple[tuple[str, ...], re.Match[str]]]:
    """The matches of :data:`_FORM` in ``text`` that are forms (:func:`_form_spans`), each with
    its words."""
    found = [(tuple(words(m.group(0))), m) for m in _FORM.finditer(text)]
    return [(f, m) for f, m in found if len(f) >= 2 and any(len(w) >= 2 for w in f)]


# The words around a form that name it a form ("in the format X", "in 'X' format").
_FORM_SLOT = re.compile(rf"(?P<open>\()?(?i:\b(?:the\s+|a\s+)?(?:format|form)\s+(?:of\s+)?)?"
                        rf"['\"‘“]?(?P<form>{_FORM.pattern})['\"’”]?"
                        rf"(?i:\s+(?:format|form)\b)?(?P<close>\))?")


def _pointed_form(text: str, quote: Quote, evidence: Evidence) -> str | None:
    """``text`` with the one form it fixed for every task (``quote``) replaced by the form each
    task asks for, with the forms the step's requests name as examples ("Reply in HH:MM:SS"
    becomes "Reply in the format the task asks for (HH:MM:SS or HH:MM)"): the condition that
    separates the requests, from their own words. None when fewer than two forms are known."""
    form = tuple(quote.quoted.split())
    alike = list(dict.fromkeys(raw for f, raw in evidence.form_texts.items() if set(f) & set(form)))
    if form not in evidence.form_texts or len(alike) < 2:
        return None
    alike = alike[:3]
    listed = ", ".join(alike[:-1]) + " or " + alike[-1]
    text = _capital_forms(text, evidence)

    def point(m: re.Match[str]) -> str:
        raw = m.group("form")
        named = tuple(words(raw))
        if named == form:
            lead = ""
        elif named[1:] == form:  # a capitalised word before the form ("Use YYYY-MM-DD"): kept
            lead = raw.split()[0] + " "
        else:
            return m.group(0)
        if m.group("open") and m.group("close"):  # "the correct format (DD/MM/YYYY)"
            return f"({lead}the format the task asks for: {listed})"
        trail = m.group(0)[len(m.group(0).rstrip(", )")):]  # what the form's match took after it
        return f"{m.group('open') or ''}{lead}the format the task asks for ({listed}){trail}"

    text = _BEFORE_POINTED.sub("", _FORM_SLOT.sub(point, text))
    text = _FORMAT_AS_POINTED.sub(
        lambda m: cased(f"write {m[1] + ' ' if m[1] else ''}in ", m[0]), text)
    return _AS_POINTED.sub(lambda m: cased("in ", m[0]), text)


# An article, and the words that qualify a format, before the format the task asks for where it
# replaced a form: "Use the correct HH:MM:SS format" is not "Use the correct the format ...".
# So is a format the form was given as an example or a likeness of: "Use a time format such as
# HH:MM:SS" and "Use the same format as HH:MM:SS" are not "... format such as the format ...".
_QUALIFYING = (r"(?:correct|right|proper|exact|same|specific|required|requested|appropriate|"
               r"standard|given|expected|following)")
_BEFORE_POINTED = re.compile(
    rf"\b(?:the|a|an|this|that)\s+(?:{_QUALIFYING}\s+)*(?=the format the task asks for\b)|"
    rf"\b(?:(?:the|a|an|this|that)\s+(?:{_QUALIFYING}\s+)*(?:[a-z]+\s+)?formats?|formats),?\s+"
    rf"(?:such\s+)?as\s+(?=the format the task asks for\b)", re.I)


# What a sentence said before the form it fixed, which reads wrong before the format the task
# asks for: "the date is formatted as DD/MM/YYYY" is "the date is in the format ...", not
# "formatted as the format ...", and "write the time as hh:mm" is "write the time in the format
# ...", as "format it as hh:mm" is "write it in the format ...". "Such as" gives an example and
# "the same as" compares: both stay.
_FORMAT_AS_POINTED = re.compile(r"\bformat\s+(?:(it|them|(?:the|your|each|every)\s+[a-z]+)\s+)?"
                                r"(?:as|in|like|to)\s+(?=the format the task asks for\b)", re.I)
_AS_POINTED = re.compile(r"\b(?:formatted\s+(?:as|in|like|to)|(?<!such\s)(?<!same\s)(?:as|like))"
                         r"\s+(?=the format the task asks for\b)", re.I)


def _rare_shape(asking: Sequence[str], evidence: Evidence) -> bool:
    """Whether the answers of the ``asking`` tasks have a shape (digits, capitalised or other
    words, in order) that fewer than half of the tasks with answers share; True when no answer
    is known."""
    shaped = {i: s for i, s in evidence.shapes.items() if s}
    if not shaped:
        return True
    theirs = set().union(*(shaped.get(i, frozenset()) for i in asking))
    sharing = sum(1 for s in shaped.values() if s & theirs)
    return sharing < SCAFFOLD_SHARE * len(shaped)


def answer_shape(answer: str) -> str:
    """A gold answer's shape: per word, ``9`` for a number, ``A`` for a capitalised word, ``a``
    for another, runs of one collapsed ("4 May 1921" is ``9A9``, "Ilse Fenthorpe" ``A``)."""
    marks = ["9" if any(c.isdigit() for c in w) else "A" if w[:1].isupper() else "a"
             for w in re.findall(r"[^\W_]+(?:[.,:/'-][^\W_]+)*", answer)]
    return "".join(m for k, m in enumerate(marks) if k == 0 or m != marks[k - 1])


_QUOTED = re.compile(r"['\"`‘“]([^'\"`’”\n]{1,40})['\"`’”]")


def _quotations(text: str) -> list[tuple[str, str]]:
    """What a text sets in quotes, each with the text before it; an apostrophe inside a word
    ("don't", "the agent's") opens no quote."""
    spaced = _unapostrophed(text)
    return [(spaced[: m.start()], m.group(1)) for m in _QUOTED.finditer(spaced)]


def _unapostrophed(text: str) -> str:
    """``text`` without the apostrophes inside words, which open no quote."""
    return re.sub(r"(?<=\w)['’](?=\w)", "", text)


# A short value set in brackets: "use the unit symbol (mm)".
_BRACKETED = re.compile(r"\(([^()\n]{1,15})\)")


def _bracketed(text: str) -> list[tuple[str, str]]:
    """What a text sets in brackets, where it is a word or two, each with the text before it."""
    return [(text[: m.start() + 1] + m.group(1), m.group(1)) for m in _BRACKETED.finditer(text)
            if len(m.group(1).split()) <= 2]


# One word in quotes, also inside a longer quote: "when answering 'How many vowels are in the
# word 'saddle'?" sets 'saddle' in quotes as the question it copies did.
_QUOTED_WORD = re.compile(r"(?<!\w)['\"`‘“](\w[\w-]*)['\"`’”](?!\w)")


def _quoted_values(text: str) -> tuple[tuple[str, ...], ...]:
    """What a text sets in quotes ("starts with 'rotterdam'"), each value as :func:`words` has
    it, and each word in quotes of its own inside a longer quote."""
    spaced = _unapostrophed(text)
    found = [tuple(words(quoted)) for _, quoted in _quotations(text)]
    found += [tuple(words(m.group(1))) for m in _QUOTED_WORD.finditer(spaced)]
    return tuple(dict.fromkeys(v for v in found if v))


def _names_quote(text: str, mine: list[str], own: list[str], evidence: Evidence) -> Quote | None:
    """Two or more names or numbers of one task in the text, each held by one of the step's
    task groups only or by fewer than half of them; or one, set in quotes as a value to write
    ("make sure the answer starts with 'rotterdam'", from the two questions about one city's
    passage). Tasks about one entity, all naming it, are one group: its name is still that
    item's, however many of the step's tasks hold it. A value in quotes is the task's only
    where its input holds the value whole: the example "`03:05`, not `3:5`" holds the "03" and
    "05" of a time in some question, and is no time of any. Nor is a form some request asks
    for ("When the format is 'Month D, YYYY', ..."): whether it may be a rule for every task is
    :func:`_form_quote`'s to say."""
    if not evidence.names:
        return None
    forms = set().union(*evidence.forms.values())
    values = tuple(v for v in _quoted_values(text) if v not in forms)
    outside = set(words(_QUOTED.sub(" ", _unapostrophed(text))))
    # A word some request sets in quotes is held by a group wherever its inputs hold it, in
    # quotes or not: the letter 'e' that one question quotes, every vowel question lists.
    in_quotes = set().union(*evidence.quoted.values())
    by_group: dict[str, set[str]] = {}
    for task_id, found in evidence.names.items():
        by_group.setdefault(evidence.groups.get(task_id, f"task:{task_id}"), set()).update(
            found, in_quotes.intersection(evidence.inputs.get(task_id, ())))
    held = _task_counts(by_group.values())
    common = max(2.0, SCAFFOLD_SHARE * len(by_group))  # held by this many groups: scaffolding
    mine_set, own_set = set(mine), set(own)
    shared = Counter(c for found in evidence.composites.values() for c in found)
    mine_composites = {tuple(words(x)) for x in _COMPOSITE.findall(text)}
    for task_id, found in evidence.names.items():
        whole = {w for v in values if _holds_whole(v, task_id, evidence) for w in v}
        named = sorted(w for w in found & mine_set - own_set - _STOP
                       if held[w] < common and (w in outside or w in whole))
        # A field of a time or a date counts as a name only with its composite: "12 PM = 12,
        # 3 PM = 15" names no time of a task that says "12:00:40".
        alone = [w for w in named if w not in evidence.fields.get(task_id, ())]
        times = [c for c in evidence.composites.get(task_id, ())
                 if shared[c] < common and c in mine_composites and not _holds(own, c)]
        if times or len(alone) >= ITEM_NAMES or set(named) & whole:
            quoted = " ".join(times[0]) if times else ", ".join(sorted(named, key=mine.index))
            return Quote("names", quoted, task_id)
    return None


def _holds_whole(value: tuple[str, ...], task_id: str, evidence: Evidence) -> bool:
    """Whether the inputs of ``task_id`` hold ``value`` whole: a time or a date as one of
    theirs (`00:10` is no value of a task that says "12:00:10"), other values as a run of
    their words."""
    if len(value) >= 2 and all(w.isdigit() for w in value) and task_id in evidence.composites:
        return value in evidence.composites[task_id]
    return _holds(evidence.inputs.get(task_id, ()), value)


def _quantity_quote(mine: list[str], own: list[str], evidence: Evidence) -> Quote | None:
    """A number with the word after it ("6 km", "5 t") as one task's input has them, and fewer
    than half of the step's tasks: that task's quantity. A unit-conversion analyst wrote
    "Reply with the exact number of kilograms in 5 t." and "Convert 6 km to metres by
    multiplying the number by 1000." from two questions of its batch; a number of one digit
    is no name, and a run of two words is no quote, so neither check refused them."""
    n_tasks = len(evidence.inputs)
    pairs = {(a, b) for a, b in zip(mine, mine[1:], strict=False)
             if a.isdigit() and not b.isdigit() and b not in FUNCTION_WORDS}
    pairs -= set(zip(own, own[1:], strict=False))
    if not pairs or n_tasks < 2:
        return None
    bigrams = {i: set(zip(seq, seq[1:], strict=False)) for i, seq in evidence.inputs.items()}
    for pair in sorted(pairs, key=lambda p: mine.index(p[0])):
        holders = [i for i, held in bigrams.items() if pair in held]
        if holders and len(holders) < SCAFFOLD_SHARE * n_tasks:
            return Quote("instance", " ".join(pair), holders[0])
    return None


def _reply_quote(mine: list[str], own: list[str], evidence: Evidence) -> Quote | None:
    """A run of words the agent wrote in its reply to one task (or a few: fewer than the
    scaffolding share) that holds a word of that task's own input. What most replies share is
    the agent's usual phrasing, and a run of only general words is a general rule."""
    holders = _holders(mine, own, evidence.replies)
    if not holders:
        return None
    n_tasks = len(evidence.replies)
    shared = evidence.input_counts  # in how many task inputs each word is
    common = {w for w, n in shared.items() if n >= 2 and n >= SCAFFOLD_SHARE * len(evidence.inputs)}

    def of_item(run: tuple[str, ...], task_id: str) -> bool:
        item = set(evidence.inputs.get(task_id, ())) - common - _STOP - set(own)
        return any(w in item for w in run)

    specific = {r for r, ids in holders.items()
                if (n_tasks < 2 or len(ids) < SCAFFOLD_SHARE * n_tasks)
                and any(of_item(r, i) for i in ids)}
    if not specific:
        return None
    start = _in_order(mine, specific, INSTANCE_RUN)[0]
    ids = holders[tuple(mine[start : start + INSTANCE_RUN])]
    return Quote("reply", _longest(mine, start, INSTANCE_RUN, [evidence.replies[i] for i in ids]),
                 ids[0])


def _feedback_quote(mine: list[str], own: list[str], evidence: Evidence) -> Quote | None:
    if not evidence.feedback:
        return None
    long_runs = _runs(mine, FEEDBACK_RUN) - _runs(own, FEEDBACK_RUN)
    said: set[tuple[str, ...]] = set()
    for seq in evidence.feedback:
        said |= _runs(seq, FEEDBACK_RUN)
    hits = _in_order(mine, long_runs & said, FEEDBACK_RUN)
    if hits:
        return Quote("feedback", _longest(mine, hits[0], FEEDBACK_RUN, list(evidence.feedback)))
    seen = set(own).union(*map(set, evidence.inputs.values()))
    scorer_runs: set[tuple[str, ...]] = set()
    for seq in evidence.feedback:
        scorer_runs |= {r for r in _runs(seq, SCORER_RUN)
                        if _content(r) >= 3 and any(w not in seen and not w.isdigit() for w in r)}
    hits = _in_order(mine, scorer_runs - _runs(own, SCORER_RUN), SCORER_RUN)
    if hits:
        return Quote("feedback", _longest(mine, hits[0], SCORER_RUN, list(evidence.feedback)))
    terms = _unseen_terms(evidence, own)
    jargon = [w for w in mine if w in terms]
    if jargon:
        return Quote("feedback", jargon[0])
    short: set[tuple[str, ...]] = set()
    for seq in evidence.feedback:
        short |= _runs(seq, COVERAGE_RUN)
    own_short = _runs(own, COVERAGE_RUN)
    covered = [False] * len(mine)
    for i in range(len(mine) - COVERAGE_RUN + 1):
        run = tuple(mine[i : i + COVERAGE_RUN])
        if run in short and run not in own_short and _content(run) >= 2:
            covered[i : i + COVERAGE_RUN] = [True] * COVERAGE_RUN
    if len(mine) >= 2 * COVERAGE_RUN and sum(covered) >= COVERAGE_SHARE * len(mine):
        shown = " ".join(w for w, c in zip(mine, covered, strict=True) if c)
        return Quote("feedback", shown)
    return None


def _longest(mine: list[str], start: int, n: int, sources: list[tuple[str, ...]]) -> str:
    """The ``n`` words of ``mine`` from ``start``, extended while some source holds them."""
    end = start + n
    texts = [f" {' '.join(s)} " for s in sources]
    while end < len(mine) and any(f" {' '.join(mine[start:end + 1])} " in t for t in texts):
        end += 1
    return " ".join(mine[start:end])


def added_text(old: str, new: str) -> str:
    """The lines of ``new`` that ``old`` does not have (what a rewrite adds)."""
    have = set(old.splitlines())
    return "\n".join(line for line in new.splitlines() if line not in have)


NO_EVIDENCE = Evidence()
"""Nothing was shown: every text is clean (stages called outside a training step)."""


# Where a sentence ends: after ".", "!" or "?" before a capital, a quote or a bracket (not
# after "e.g." or "i.e."), and at a line break.
SENTENCE_END = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<=[.!?])\s+(?=[A-Z\"'`‘“(\[])|\n+")
LEAD = re.compile(r"^(?:instead|also|additionally|then|so|therefore|thus|and)\s*,?\s+", re.I)


@dataclass(frozen=True)
class Cleaned:
    """A text after hygiene: ``clean`` is what may go into the skill (``None``: nothing),
    ``removed`` the sentences left out, each with the quote that refused it, and ``repaired``
    the parts of ``clean``'s sentences dropped or given the task's form in their place (a word
    of evaluation, a form one request asks for), each with its quote."""

    clean: str | None
    removed: tuple[tuple[str, Quote], ...] = ()
    repaired: tuple[tuple[str, Quote], ...] = ()


def clean_text(text: str, evidence: Evidence, skill: str = "") -> Cleaned:
    """``text`` sentence by sentence: the sentences that quote what the optimizer was shown are
    left out and the rest kept, so that a sound instruction is not lost with a pasted verdict
    beside it. Nothing is kept when what remains is under three words. A text refused only for a
    word of evaluation that qualifies the next word ("the gold answer") keeps its instruction
    without that word, and says so; one that fixes a form one request asks for keeps it with
    the form each task asks for in its place (:func:`_pointed_form`). A text that stops
    mid-sentence keeps what comes before its last sentence (or its last ';'), if that is
    finished and clean (:func:`_finished_part`)."""
    unfinished = unfinished_quote(text)
    if unfinished is not None:
        return _finished_part(text, unfinished, evidence, skill)
    whole = find_quote(text, evidence, skill)
    if whole is None:
        return Cleaned(text)
    repaired = _repaired(text, whole, evidence, skill)
    if repaired is not None:
        return repaired
    return _by_sentence(text, whole, evidence, skill)


_PIECE_END = re.compile(r"(?<=[.!?;])\s+")


def _finished_part(text: str, unfinished: Quote, evidence: Evidence, skill: str) -> Cleaned:
    """``text`` without the sentence (or ';' clause) it stops in, cleaned as any text is; or
    nothing, where what comes before is under three words or unfinished too."""
    lines = text.rstrip().splitlines()
    marker = LIST_ITEM.match(lines[-1])
    head = marker.group(0) if marker else ""
    pieces = _PIECE_END.split(lines[-1][len(head):].strip())
    before = " ".join(pieces[:-1]).strip()
    if before.endswith(";"):
        before = before[:-1].rstrip() + "."
    rest = "\n".join([*lines[:-1], head + before] if before else lines[:-1])
    if len(words(rest)) < 3 or unfinished_quote(rest) is not None:
        return Cleaned(None, ((text, find_quote(text, evidence, skill) or unfinished),))
    kept = clean_text(rest, evidence, skill)
    cut = (head + pieces[-1]).strip() if before else lines[-1].strip()
    # A piece that quotes a training item or the scorer is refused for that, which binds later
    # texts and tells the analyst more than where it stopped.
    why = find_quote(cut, evidence, skill) or unfinished
    return Cleaned(kept.clean, ((cut, why), *kept.removed), kept.repaired)


def _repaired(text: str, quote: Quote, evidence: Evidence, skill: str) -> Cleaned | None:
    """``text`` refused only for a word of evaluation: without that word where it qualifies the
    next one; or only for a form one request asks for made a rule for every task: with the
    form each task asks for in its place (:func:`_pointed_form`); if nothing else is wrong with
    it then (None: it cannot be repaired so)."""
    # A form one request names, copied with its words ("in the format YYYY-MM-DD"), is
    # refused as a quote of that request first; with the form each task asks for in its place,
    # it may quote nothing.
    form = quote if quote.kind == "form" else _form_quote(text, skill, evidence)
    if form is not None:
        pointed = _pointed_form(text, form, evidence)
        if pointed is not None and find_quote(pointed, evidence, skill) is None:
            return Cleaned(pointed, repaired=((evidence.form_texts[tuple(form.quoted.split())],
                                               form),))
    if quote.kind != "feedback" or quote.quoted not in SCORER_TERMS:
        return None
    fixed, dropped = _drop_scorer_words(text, evidence, skill)
    if not dropped or find_quote(fixed, evidence, skill) is not None:
        return None
    return Cleaned(fixed, repaired=dropped)


def _drop_scorer_words(text: str, evidence: Evidence,
                       skill: str) -> tuple[str, tuple[tuple[str, Quote], ...]]:
    """``text`` without the words of evaluation the agent never sees where they qualify the
    word after them, and each word dropped with why."""
    dropped: list[tuple[str, Quote]] = []
    for term in sorted(_unseen_terms(evidence, words(skill))):
        pattern = re.compile(rf"\b{re.escape(term)}\s+(?=[^\W\d_])", re.IGNORECASE)
        if pattern.search(text):
            text = pattern.sub("", text)
            dropped.append((term, Quote("feedback", term)))
    return text, tuple(dropped)


# A sentence that leans on the one before it: an example of it (or one in quotes or brackets),
# what to do otherwise, one that begins with a word pointing back ("It", "This"), or one that
# points back to a thing the sentence before named ("Reply with only those words."; not one
# its own sentence goes on to say: "those that ...", "leave them out", "such as"). It goes
# with the sentence it leans on, and is never a rule alone. A sentence that only begins with
# a word of sequence ("Instead, reply with ...") stands alone without it (:data:`LEAD`); one
# that points back after it ("Instead, it should ...") does not (:func:`leans_back`).
LEANS_BACK = re.compile(
    r"^[\"'`‘“(\[]"
    r"|^\W*(?:for\s+(?:example|instance)|e\.g\.|i\.e\.|otherwise|else|this|that|these|those|"
    r"it|its|they|them|such|here|except|in\s+(?:that|this|such|either|both)\s+cases?|"
    r"if\s+(?:not|so))\b"
    r"|\b(?:those|these)\s+[a-z]+\b(?!\s+(?:that|which|who|whose|where|of|in|from|with|you|"
    r"the)\b)", re.I)


def leans_back(sentence: str) -> bool:
    """Whether ``sentence`` leans on the one before it (:data:`LEANS_BACK`), also after a word
    of sequence it begins with ("Instead, it should use ...")."""
    return bool(LEANS_BACK.search(sentence) or LEANS_BACK.search(LEAD.sub("", sentence)))


def _by_sentence(text: str, whole: Quote, evidence: Evidence, skill: str) -> Cleaned:
    marker = LIST_ITEM.match(text)  # a bullet or number stays with what is kept of its item
    head, body = (marker.group(0).lstrip(), text[marker.end():]) if marker else ("", text)
    sentences = [s for s in SENTENCE_END.split(body.strip()) if s.strip()]
    kept: list[str] = []
    removed: list[tuple[str, Quote]] = []
    repaired: list[tuple[str, Quote]] = []
    dropped: Quote | None = None  # the reason the sentence before was removed
    for sentence in sentences:
        quote = find_quote(sentence, evidence, skill)
        if quote is None and dropped is not None and leans_back(sentence):
            quote = dropped  # "Reply with only those words." after the one that said which
        fixed = _repaired(sentence, quote, evidence, skill) if quote is not None else None
        dropped = None
        if quote is None:
            kept.append(sentence)
        elif fixed is not None and fixed.clean is not None:
            kept.append(fixed.clean)
            repaired.extend(fixed.repaired)
        else:
            removed.append((sentence, quote))
            dropped = quote
    if not removed and not repaired:  # the quote spans sentences: nothing to keep apart from it
        return Cleaned(None, ((text, whole),))
    rest = " ".join(kept).strip()
    rest = LEAD.sub("", rest)
    rest = rest[:1].upper() + rest[1:]
    if len(words(rest)) < 3 or find_quote(rest, evidence, skill) is not None:
        return Cleaned(None, ((text, whole),))
    return Cleaned(head + rest, tuple(removed), tuple(repaired))


def distinct(refused: Iterable[Refused]) -> list[Refused]:
    """Each refused text once (the first refusal of it): an analyst asked once more, or
    another minibatch's, often writes the same rule again."""
    seen: set[str] = set()
    out = []
    for r in refused:
        said = r.item.description if isinstance(r.item, Suggestion) else r.item.content
        if said not in seen:
            seen.add(said)
            out.append(r)
    return out


def clean_items(
    items: Sequence[Edit | Suggestion], evidence: Evidence, skill: str = ""
) -> tuple[list[Edit | Suggestion], list[Refused]]:
    """Edits or suggestions after :func:`clean_text`: those that may go into the skill (trimmed of
    the sentences that quote), and what was refused, with why."""
    kept: list[Edit | Suggestion] = []
    refused: list[Refused] = []
    for item in items:
        is_edit = isinstance(item, Edit)
        field_name = "content" if is_edit else "description"
        result = clean_text(getattr(item, field_name), evidence, skill)
        for part, quote in result.removed:
            cut = item.model_copy(update={field_name: part})
            refused.append(Refused(item=cut, reason=f"{REFUSED}: {quote.reason()}",
                                   quoted=quote.quoted))
        for part, quote in result.repaired:
            cut = item.model_copy(update={field_name: part})
            went_on = ("the format the task asks for in its place" if quote.kind == "form"
                       else "without it")
            refused.append(Refused(item=cut, repaired=True, quoted=quote.quoted, reason=(
                f"{REFUSED}: {quote.reason()}; the rule went on with {went_on}")))
        if result.clean is not None:
            kept.append(item.model_copy(update={field_name: result.clean}))
    return kept, refused
