"""The reply shapes of the optimizer's edit and suggestion calls, and the JSON schemas they are
asked in. Reflect, aggregate and the appendix read them; they are the wire format of the
textual gradient.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from skillgrad.models.ask_json import strict_schema
from skillgrad.records import Edit, EditOp, SuggestionType
from skillgrad.skill import editable_lines
from skillgrad.stages.hygiene import unfinished_quote
from skillgrad.words import cased


def as_support(v: object) -> int:
    """A support count as a model writes it ("3", 3.0, null): at least 1."""
    try:
        return max(1, int(v))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 1


class EditReply(BaseModel):
    """One edit as the optimizer writes it (lenient about extra keys)."""

    model_config = ConfigDict(extra="ignore")

    # Key order matters to a model that writes keys in schema order (a grammar-constrained one
    # does): it states the failure pattern, then the instruction that addresses it, and only
    # then decides how and where in the skill it goes.
    rationale: str = ""
    content: str = ""
    op: EditOp = "append"
    anchor: str = ""
    support: int = 1

    @field_validator("support", mode="before")
    @classmethod
    def _support(cls, v: object) -> int:
        return as_support(v)

    def to_edit(self) -> Edit:
        return Edit(**self.model_dump())


class PatternReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    pattern: str = ""
    kind: Literal["SKILL_DEFECT", "EXECUTION_LAPSE"] = "SKILL_DEFECT"


class PatchReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    edits: list[EditReply] = []


# The most characters of a rules reply's "difference" (one sentence, the prompt asks) and of
# each of its rules (one instruction).
DIFFERENCE_CHARS = 600
RULE_CHARS = 300
_SENTENCE = re.compile(r"[.!?](?=\s|$)")


def _cut_at_bound(rule: str) -> str:
    """A rule that stopped at :data:`RULE_CHARS` (a grammar-constrained model's bound), as far
    as its last whole sentence: "If the unit symbol is present but not in the correct pos" is
    no instruction. Any other rule as it is."""
    if len(rule) != RULE_CHARS:
        return rule
    ends = [m.end() for m in _SENTENCE.finditer(rule)]
    return rule[: ends[-1]] if ends else rule


class RulesReply(BaseModel):
    """``proposal_form: rules``: how the failed replies differ from the expected answers, and
    plain rules that would close the gap. Each rule becomes an appended bullet."""

    model_config = ConfigDict(extra="ignore")

    # Bounds the schema states and the reply is not checked against: a grammar-constrained
    # model closes the string there and goes on, where a small one had repeated a sentence to
    # the token limit and lost the reply (9 of 60 rules replies on the unit-conversion set);
    # an endpoint that does not enforce them ignores them.
    difference: str = Field("", json_schema_extra={"maxLength": DIFFERENCE_CHARS})
    rules: list[str] = Field([], json_schema_extra={"items": {"type": "string",
                                                              "maxLength": RULE_CHARS}})

    @property
    def reasoning(self) -> str:
        return self.difference

    def whole_rules(self) -> list[str]:
        """The rules written, each cut back to its last whole sentence where it stopped at the
        bound."""
        return [_cut_at_bound(r) for r in self.rules if r.strip()]

    def to_edits(self, support: int) -> list[Edit]:
        return [rule_edit(piece, support, self.difference)
                for r in self.whole_rules() for piece in split_rules(r) if piece.strip()]


# A small model sometimes writes several rules as one string that holds a quoted list, with the
# list's closing brackets after it ("Reply with 'a', 'b']}"): found by that quote-and-bracket
# end (or a bracket-and-quote start), cut at each quote-comma-quote.
_DEBRIS_END = re.compile(r"""['"]\s*[\]}][\]}\s'"]*$""")
_DEBRIS_START = re.compile(r"""^\s*[\[{]+\s*['"]""")
_ITEM_SEP = re.compile(r"""['"]\s*,\s*['"]""")


def split_rules(rule: str) -> list[str]:
    """``rule`` as the rules it holds: itself, or the items of a quoted list written into it,
    each without the quotes and brackets around it."""
    text = rule.strip()
    if not (_DEBRIS_END.search(text) or _DEBRIS_START.match(text)):
        return [text]
    text = _DEBRIS_END.sub("", _DEBRIS_START.sub("", text))
    return [p.strip().strip("'\"").strip() for p in _ITEM_SEP.split(text) if p.strip()]


# The rules prompt calls the reference "the expected answer"; the agent only knows its answer.
_EXPECTED = re.compile(r"\b(?:(?:the|an) )?expected (answers?)\b", re.I)
# Of anything else ("the expected product attributes", a reference of a multi-turn task), what
# the agent knows is what its request asks for.
_EXPECTED_OTHER = re.compile(r"\b(the|an?) expected (?=\w)", re.I)


# A rule's last sentence that stops on a word or number, with no mark to end it; and a rule
# that is a line to write as it stands ("Answer: <number> grams"), whose end a full stop would
# change.
_ENDS_ON_WORD = re.compile(r"[^\W_]$")
_LABEL_LINE = re.compile(r"^[A-Za-z]+:\s")


# A rule written as an order to edit the skill: "Add '- Use the unit symbol.'", "Append the
# line: \"- Reply with ...\"". The bullet it quotes is the rule.
_WRAPPED = re.compile(
    r"^(?:add|append|insert|include)\s+(?:(?:the|this|a|one)\s+(?:new\s+)?"
    r"(?:rule|line|instruction|bullet)\s*:?\s*)?(['\"`])-\s*(?P<rule>.+)\1\s*\.?$", re.I)


def rule_edit(rule: str, support: int, rationale: str = "") -> Edit:
    """A plain rule as the edit it deterministically becomes: one bullet at the skill's end,
    with the prompt's "expected answer" put in the agent's words ("the answer"), and any
    other "expected" thing in the request's ("the requested product attributes"). A rule
    that orders the bullet added ("Add '- ...'") is the bullet it quotes. A rule that ends on
    a word ends its sentence, as a person writes it ("- Remove the quotes from the reply."),
    unless it is a line to write as it stands ("- Answer: <number> grams") or stops
    mid-sentence (:func:`~skillgrad.stages.hygiene.unfinished_quote`: "If the question names a
    unit, use" is refused as it was written)."""
    text = " ".join(rule.split()).removeprefix("- ").strip()
    wrapped = _WRAPPED.match(text)
    text = wrapped.group("rule").strip() if wrapped else text
    text = _EXPECTED.sub(lambda m: cased("the " + m.group(1).lower(), m.group(0)), text)
    text = _EXPECTED_OTHER.sub(lambda m: cased(
        "the requested " if m.group(1).lower() == "the" else "a requested ", m.group(0)), text)
    if (_ENDS_ON_WORD.search(text) and not _LABEL_LINE.match(text)
            and unfinished_quote(text) is None):
        text += "."
    return Edit(op="append", content=f"- {text}", support=support, rationale=rationale)


def rules_schema(max_rules: int) -> dict[str, Any]:
    schema = strict_schema(RulesReply.model_json_schema())
    schema["properties"]["rules"]["maxItems"] = max_rules
    return schema


class AwareReply(BaseModel):
    """What skill-aware reflection adds to an analyst's reply."""

    patterns: list[PatternReply] = []
    reminders: list[str] = []


# AwareReply first among the bases puts its keys last in the schema: a model writing keys in
# schema order gives its reasoning and edits before its reminders.
class AwarePatchReply(AwareReply, PatchReply):
    pass


class PackageEditReply(EditReply):
    """An edit of a skill package: ``file`` names the file it changes or creates ("": the
    file its anchor is in, SKILL.md for an append)."""

    file: str = ""


class PackagePatchReply(PatchReply):
    edits: list[PackageEditReply] = []  # type: ignore[assignment]


class AwarePackagePatchReply(AwareReply, PackagePatchReply):
    pass


PACKAGE_SHAPES: dict[type[BaseModel], type[BaseModel]] = {
    PatchReply: PackagePatchReply, AwarePatchReply: AwarePackagePatchReply}


class SuggestionReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    type: SuggestionType
    rationale: str = ""
    description: str
    support: int = 1

    @field_validator("support", mode="before")
    @classmethod
    def _support(cls, v: object) -> int:
        return as_support(v)


class SuggestionsReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    suggestions: list[SuggestionReply] = []


class AwareSuggestionsReply(AwareReply, SuggestionsReply):
    pass


def patch_schema(skill: str, max_edits: int, shape: type[BaseModel] = PatchReply) -> dict[str, Any]:
    """The JSON schema an optimizer's patch is asked in: every key required, at most
    ``max_edits`` edits, and each anchor one of the skill's editable lines (or empty).

    Endpoints with structured output (the embedded model's grammar) then cannot propose an
    anchor that is not in the skill, a mistake small models make often.
    """
    schema = strict_schema(shape.model_json_schema())
    schema["properties"]["edits"]["maxItems"] = max_edits
    # A package's file lines separate its files: no edit anchors on one.
    anchors = ["", *(line for line in editable_lines(skill)
                     if not line.startswith("<!-- skillgrad:file "))]
    edit = "PackageEditReply" if "PackageEditReply" in schema["$defs"] else "EditReply"
    schema["$defs"][edit]["properties"]["anchor"] = {"type": "string", "enum": anchors}
    _limit_reminders(schema)
    return schema


def suggestions_schema(max_items: int, shape: type[BaseModel]) -> dict[str, Any]:
    schema = strict_schema(shape.model_json_schema())
    schema["properties"]["suggestions"]["maxItems"] = max_items
    _limit_reminders(schema)
    return schema


def _limit_reminders(schema: dict[str, Any]) -> None:
    if "reminders" in schema["properties"]:
        schema["properties"]["reminders"]["maxItems"] = MAX_REMINDERS_PER_CALL


MAX_REMINDERS_PER_CALL = 4
AWARE_REPLY = (', "patterns": [{"pattern": "<a pattern in the tasks>", "kind": '
               '"<SKILL_DEFECT|EXECUTION_LAPSE>"}], "reminders": ["<a one-sentence reminder of '
               'an existing rule the agent did not follow>"]')
