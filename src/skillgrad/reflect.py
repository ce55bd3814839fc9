"""Reflect: the backward pass. The optimizer model reads scored trajectories in minibatches and
proposes edits to the skill (a textual gradient).

Results are shuffled into minibatches; each minibatch gets a failure-analyst call over its failed
trajectories and a success-analyst call over its solved ones (unless ``failure_only``), all run
concurrently. The analyst sees patterns across a minibatch, never one task at a time.
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
from skillgrad.records import Edit, EditOp, Message, Patch, RejectedStep, RolloutResult
from skillgrad.skill import editable_lines
from skillgrad.structured import ask_json, strict_schema


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
        try:
            return max(1, int(v))  # type: ignore[call-overload]
        except (TypeError, ValueError):
            return 1

    def to_edit(self) -> Edit:
        return Edit(**self.model_dump())


class PatchReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    edits: list[EditReply] = []


def patch_schema(skill: str, max_edits: int) -> dict[str, Any]:
    """The JSON schema an optimizer's patch is asked in: every key required, at most
    ``max_edits`` edits, and each anchor one of the skill's editable lines (or empty).

    Endpoints with structured output (the embedded model's grammar) then cannot propose an
    anchor that is not in the skill, a mistake small models make often.
    """
    schema = strict_schema(PatchReply.model_json_schema())
    schema["properties"]["edits"]["maxItems"] = max_edits
    anchors = ["", *editable_lines(skill)]
    schema["$defs"]["EditReply"]["properties"]["anchor"] = {"type": "string", "enum": anchors}
    return schema


@dataclass(frozen=True)
class ReflectSettings:
    minibatch_size: int = 8
    workers: int = 4
    failure_only: bool = False
    max_trajectory_chars: int = 4000
    max_edits: int = 8
    max_tokens: int | None = None
    temperature: float | None = None


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
    """One patch per analyst call, in a deterministic order (minibatch, then failure/success)."""
    jobs: list[tuple[int, Literal["failure", "success"], list[RolloutResult]]] = []
    for i, batch in enumerate(minibatches(results, settings.minibatch_size, rng)):
        failed = [r for r in batch if not r.success]
        solved = [r for r in batch if r.success]
        if failed:
            jobs.append((i, "failure", failed))
        if solved and not settings.failure_only:
            jobs.append((i, "success", solved))
    rejected_text = render_rejected(rejected)

    def run(job: tuple[int, Literal["failure", "success"], list[RolloutResult]]) -> Patch:
        index, kind, batch = job
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
    prompt = prompts.render(
        f"analyst_{kind}",
        skill=skill,
        rejected=rejected_text,
        count=str(len(batch)),
        trajectories="\n".join(
            render_trajectory(r, settings.max_trajectory_chars, n) for n, r in enumerate(batch, 1)
        ),
        max_edits=str(settings.max_edits),
    )
    reply = ask_json(
        model, [Message(role="user", content=prompt)], PatchReply,
        max_tokens=settings.max_tokens, temperature=settings.temperature,
        schema=patch_schema(skill, settings.max_edits),
    )
    if reply.value is None:
        return Patch(source=kind, error=reply.error, raw=reply.raw, minibatch=index)
    return Patch(
        source=kind,
        reasoning=reply.value.reasoning,
        edits=tuple(e.to_edit() for e in reply.value.edits),
        minibatch=index,
    )


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
    lines = ["", "## Edits already tried this epoch and rejected by validation (do not repeat)"]
    for r in rejected:
        for e in r.edits:
            anchor = f" after/at {e.anchor!r}" if e.anchor else ""
            lines.append(f"- {e.op}{anchor}: {e.content!r} (score change {r.delta:+.3f})")
    return "\n".join(lines) + "\n"


def render_edits(edits: Sequence[Edit]) -> str:
    out = []
    for n, e in enumerate(edits, 1):
        anchor = f"\n   anchor: {e.anchor!r}" if e.anchor else ""
        out.append(f"{n}. [{e.op}] support {e.support}{anchor}\n   content: {e.content!r}"
                   + (f"\n   rationale: {e.rationale}" if e.rationale else ""))
    return "\n".join(out) if out else "(none)"
