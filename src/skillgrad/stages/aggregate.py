"""Aggregate: gradient accumulation. Patches from many minibatches are merged level by level
in groups of ``merge_batch_size`` (the groups of one level in parallel), failure and success
patches separately, then one final merge that favours failure fixes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from skillgrad import prompts
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.parallel import fan_out
from skillgrad.records import Edit, Patch
from skillgrad.stages.render import render_edits
from skillgrad.stages.replies import PatchReply, patch_schema


@dataclass(frozen=True)
class MergeSettings:
    merge_batch_size: int = 8
    workers: int = 4
    max_edits: int = 8
    max_tokens: int | None = None
    temperature: float | None = None
    meta: str = ""


@dataclass
class Aggregation:
    """The merged patch plus every intermediate merge, for the run directory."""

    merged: Patch
    levels: list[list[Patch]] = field(default_factory=list)


def aggregate(
    patches: Sequence[Patch], skill: str, model: ChatModel, settings: MergeSettings
) -> Aggregation:
    usable = [p for p in patches if p.edits]
    levels: list[list[Patch]] = []
    failure = _merge_family([p for p in usable if p.source == "failure"], "failed", skill, model,
                            settings, levels)
    success = _merge_family([p for p in usable if p.source == "success"], "solved", skill, model,
                            settings, levels)
    if failure is None and success is None:
        return Aggregation(Patch(source="merged", reasoning="no usable proposals"), levels)
    if failure is None or success is None:
        only = failure or success
        assert only is not None
        return Aggregation(only.model_copy(update={"source": "merged"}), levels)
    text = prompts.render(
        "merge_final", skill=skill, meta=settings.meta, failure=render_edits(failure.edits),
        success=render_edits(success.edits), max_edits=str(settings.max_edits),
    )
    final = _ask_merge("merge_final", text, [failure, success], skill, model, settings)
    levels.append([final])
    return Aggregation(final, levels)


def _merge_family(
    patches: list[Patch], kind: str, skill: str, model: ChatModel, settings: MergeSettings,
    levels: list[list[Patch]],
) -> Patch | None:
    if not patches:
        return None
    current = patches
    while len(current) > 1:
        groups = [current[i : i + settings.merge_batch_size]
                  for i in range(0, len(current), settings.merge_batch_size)]

        def merge(group: list[Patch]) -> Patch:
            if len(group) == 1:
                return group[0]
            proposals = "\n\n".join(
                f"### Proposal {n}\nreasoning: {p.reasoning}\n{render_edits(p.edits)}"
                for n, p in enumerate(group, 1)
            )
            text = prompts.render("merge", kind=kind, skill=skill, meta=settings.meta,
                                  proposals=proposals,
                                  max_edits=str(settings.max_edits))
            return _ask_merge("merge", text, group, skill, model, settings)

        current = fan_out(merge, groups, settings.workers, "merge")
        levels.append(current)
    return current[0]


def _ask_merge(
    kind: str, text: str, inputs: list[Patch], skill: str, model: ChatModel, settings: MergeSettings
) -> Patch:
    reply = ask_json(model, [Message(role="user", content=text)], PatchReply, kind=kind,
                     max_tokens=settings.max_tokens, temperature=settings.temperature,
                     schema=patch_schema(skill, settings.max_edits))
    source = inputs[0].source if len({p.source for p in inputs}) == 1 else "merged"
    if reply.value is None:
        # Recorded fallback: the inputs are kept, concatenated without duplicates.
        return Patch(source=source, edits=concatenate(inputs), raw=reply.raw,
                     error=f"merge reply unusable ({reply.error}); inputs kept unmerged")
    return Patch(source=source, reasoning=reply.value.reasoning,
                 edits=tuple(e.to_edit() for e in reply.value.edits))


def concatenate(patches: Sequence[Patch]) -> tuple[Edit, ...]:
    """All edits of ``patches``; exact duplicates folded into one with summed support."""
    seen: dict[tuple[str, str, str], Edit] = {}
    for p in patches:
        for e in p.edits:
            key = (e.op, e.anchor.strip(), e.content.strip())
            if key in seen:
                seen[key] = seen[key].model_copy(update={"support": seen[key].support + e.support})
            else:
                seen[key] = e
    return tuple(seen.values())
