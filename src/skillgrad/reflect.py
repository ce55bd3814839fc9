"""Reflect: the backward pass. The optimizer model reads scored trajectories in minibatches and
proposes changes to the skill (a textual gradient).

Results are shuffled into minibatches; each minibatch gets a failure-analyst call over its failed
trajectories and a success-analyst call over its solved ones (unless ``failure_only``), all run
concurrently. The analyst sees patterns across a minibatch, never one task at a time.

What an analyst proposes depends on the update mode: edits (``patch``), typed revision
suggestions (``rewrite_from_suggestions``), or, in ``full_rewrite_minibatch``, one call per
minibatch over all its tasks that writes a complete new document. With skill-aware reflection
the analysts also classify each failure pattern: a SKILL_DEFECT becomes an edit, an
EXECUTION_LAPSE a short reminder for the protected appendix.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator

from skillgrad import prompts
from skillgrad.models.base import ChatModel
from skillgrad.parallel import fan_out
from skillgrad.records import (
    Edit,
    EditOp,
    Message,
    Patch,
    RejectedStep,
    RolloutResult,
    Suggestion,
    SuggestionType,
)
from skillgrad.skill import editable_lines
from skillgrad.structured import ask_json, strict_schema

Mode = Literal["patch", "rewrite_from_suggestions", "full_rewrite_minibatch"]


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
    # then looks for where in the skill it goes.
    op: EditOp
    rationale: str = ""
    content: str = ""
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


class AwareReply(BaseModel):
    """What skill-aware reflection adds to an analyst's reply."""

    patterns: list[PatternReply] = []
    reminders: list[str] = []


# AwareReply first among the bases puts its keys last in the schema: a model writing keys in
# schema order gives its reasoning and edits before its reminders.
class AwarePatchReply(AwareReply, PatchReply):
    pass


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
    anchors = ["", *editable_lines(skill)]
    schema["$defs"]["EditReply"]["properties"]["anchor"] = {"type": "string", "enum": anchors}
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


@dataclass(frozen=True)
class ReflectSettings:
    """``meta``: the optimizer's notes (rendered, or ""); ``constraints``: extra rules for the
    analysts, one "- ..." line each (the size cap); ``skill_aware`` and ``reminders_from``:
    skill-aware reflection and which analysts may write reminders."""

    minibatch_size: int = 8
    workers: int = 4
    failure_only: bool = False
    max_trajectory_chars: int = 4000
    max_edits: int = 8
    max_tokens: int | None = None
    temperature: float | None = None
    mode: Mode = "patch"
    skill_aware: bool = False
    reminders_from: Literal["both", "failure_only"] = "both"
    meta: str = ""
    constraints: str = ""
    rewrite_max_tokens: int | None = None


def minibatches(
    results: Sequence[RolloutResult], size: int, rng: random.Random
) -> list[list[RolloutResult]]:
    shuffled = list(results)
    rng.shuffle(shuffled)
    return [shuffled[i : i + size] for i in range(0, len(shuffled), size)]


def reflect(
    results: Sequence[RolloutResult],
    skill: str,
    model: ChatModel,
    settings: ReflectSettings,
    rng: random.Random,
    rejected: Sequence[RejectedStep] = (),
) -> list[Patch]:
    """One patch per analyst call, in a deterministic order (minibatch, then failure/success).

    In ``full_rewrite_minibatch`` mode there is one call per minibatch, over all its tasks,
    and each patch carries a whole document (or the reason there is none)."""
    jobs: list[tuple[int, Literal["failure", "success", "merged"], list[RolloutResult]]] = []
    for i, batch in enumerate(minibatches(results, settings.minibatch_size, rng)):
        if settings.mode == "full_rewrite_minibatch":
            jobs.append((i, "merged", batch))
            continue
        failed = [r for r in batch if not r.success]
        solved = [r for r in batch if r.success]
        if failed:
            jobs.append((i, "failure", failed))
        if solved and not settings.failure_only:
            jobs.append((i, "success", solved))
    rejected_text = render_rejected(rejected)

    def run(job: tuple[int, Literal["failure", "success", "merged"], list[RolloutResult]]) -> Patch:
        index, kind, batch = job
        if kind == "merged":
            return propose_document(batch, skill, model, settings, rejected_text, index)
        return analyse(kind, batch, skill, model, settings, rejected_text, index)

    return fan_out(run, jobs, settings.workers, "reflect")


def analyse(
    kind: Literal["failure", "success"],
    batch: Sequence[RolloutResult],
    skill: str,
    model: ChatModel,
    settings: ReflectSettings,
    rejected_text: str,
    index: int,
) -> Patch:
    aware = settings.skill_aware and (kind == "failure" or settings.reminders_from == "both")
    suggest = settings.mode == "rewrite_from_suggestions"
    prompt = prompts.render(
        f"suggest_{kind}" if suggest else f"analyst_{kind}",
        skill=skill,
        meta=settings.meta,
        rejected=rejected_text,
        count=str(len(batch)),
        trajectories=render_trajectories(batch, settings.max_trajectory_chars),
        max_edits=str(settings.max_edits),
        constraints=settings.constraints,
        aware=prompts.render(f"skill_aware_{kind}") if aware else "",
        aware_reply=AWARE_REPLY if aware else "",
    )
    messages = [Message(role="user", content=prompt)]
    if suggest:
        shape: type[BaseModel] = AwareSuggestionsReply if aware else SuggestionsReply
        schema = suggestions_schema(settings.max_edits, shape)
    else:
        shape = AwarePatchReply if aware else PatchReply
        schema = patch_schema(skill, settings.max_edits, shape)
    reply = ask_json(model, messages, shape, max_tokens=settings.max_tokens,
                     temperature=settings.temperature, schema=schema)
    if reply.value is None:
        return Patch(source=kind, error=reply.error, raw=reply.raw, minibatch=index)
    value: Any = reply.value
    reminders = tuple(r.strip() for r in getattr(value, "reminders", []) if r.strip())
    reasoning = value.reasoning
    patterns = getattr(value, "patterns", [])
    if patterns:
        reasoning += "\n" + "\n".join(f"[{p.kind}] {p.pattern}" for p in patterns)
    if suggest:
        return Patch(source=kind, reasoning=reasoning, reminders=reminders, minibatch=index,
                     suggestions=tuple(Suggestion(**s.model_dump()) for s in value.suggestions))
    return Patch(source=kind, reasoning=reasoning, reminders=reminders, minibatch=index,
                 edits=tuple(e.to_edit() for e in value.edits))


def propose_document(
    batch: Sequence[RolloutResult],
    skill: str,
    model: ChatModel,
    settings: ReflectSettings,
    rejected_text: str,
    index: int,
) -> Patch:
    """``full_rewrite_minibatch``: one call writes a complete new skill from a minibatch."""
    from skillgrad.rewrite import ask_document, prompt_parts  # rewrite imports this module

    body, blocks = prompt_parts(skill)
    prompt = prompts.render(
        "rewrite_minibatch", skill=body, blocks=blocks, meta=settings.meta, rejected=rejected_text,
        count=str(len(batch)),
        trajectories=render_trajectories(batch, settings.max_trajectory_chars),
        constraints=settings.constraints,
    )
    result = ask_document(model, prompt, temperature=settings.temperature,
                          max_tokens=settings.rewrite_max_tokens or settings.max_tokens)
    return Patch(source="merged", document=result.document, error=result.error, minibatch=index,
                 raw=result.raw if result.error else None,
                 reasoning=f"whole document from minibatch {index}")


def render_trajectories(batch: Sequence[RolloutResult], max_chars: int) -> str:
    return "\n".join(render_trajectory(r, max_chars, n) for n, r in enumerate(batch, 1))


def render_trajectory(result: RolloutResult, max_chars: int, number: int) -> str:
    """A trajectory as the optimizer sees it, without the skill (shown once, above)."""
    lines = []
    for msg in result.messages:
        if msg.role == "system":
            continue
        text = msg.text()
        if msg.tool_calls:
            text += "\n(tool calls: " + ", ".join(str(c) for c in msg.tool_calls) + ")"
        lines.append(f"[{msg.role}] {text}")
    body = clip_middle("\n".join(lines), max_chars)
    # The verdict follows the answer it judges: read in order, the failure explains itself.
    verdict = "solved" if result.success else f"FAILED: {result.reason or 'wrong answer'}"
    return (
        f"### Task {number} (id {result.task_id}; hard {result.hard:.2f}, soft {result.soft:.2f})"
        f"\n{body}\nResult: {verdict}\n"
    )


def clip_middle(text: str, max_chars: int) -> str:
    """Keep the informative head and tail of a long text and say how much was cut."""
    if len(text) <= max_chars:
        return text
    head = int(max_chars * 0.6)
    tail = max_chars - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


def render_rejected(rejected: Sequence[RejectedStep]) -> str:
    if not rejected:
        return ""
    lines = ["", "## Changes already tried this epoch and rejected by validation (do not repeat)"]
    for r in rejected:
        change = "no score" if r.delta is None else f"score change {r.delta:+.3f}"
        why = f"{r.note}; {change}" if r.note else change
        for e in r.edits:
            if isinstance(e, Suggestion):
                lines.append(f"- {e.type}: {e.description!r} ({why})")
            else:
                anchor = f" after/at {e.anchor!r}" if e.anchor else ""
                lines.append(f"- {e.op}{anchor}: {e.content!r} ({why})")
        for text in r.reminders:
            lines.append(f"- reminder: {text!r} ({why})")
        if not r.edits and not r.reminders:
            lines.append(f"- {why}")
    return "\n".join(lines) + "\n"


def render_meta(meta: str) -> str:
    """The optimizer's notes as a prompt section ("" when there are none)."""
    if not meta.strip():
        return ""
    return ("\n## Your notes from earlier epochs (optimizer memory; the agent never sees them)\n"
            f"{meta.strip()}\n")


def render_edits(edits: Sequence[Edit | Suggestion]) -> str:
    out = []
    for n, e in enumerate(edits, 1):
        if isinstance(e, Suggestion):
            out.append(f"{n}. [{e.type}] support {e.support}\n   description: {e.description!r}"
                       + (f"\n   rationale: {e.rationale}" if e.rationale else ""))
            continue
        anchor = f"\n   anchor: {e.anchor!r}" if e.anchor else ""
        out.append(f"{n}. [{e.op}] support {e.support}{anchor}\n   content: {e.content!r}"
                   + (f"\n   rationale: {e.rationale}" if e.rationale else ""))
    return "\n".join(out) if out else "(none)"
