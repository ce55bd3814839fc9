"""Aggregate: gradient accumulation. Patches from many minibatches are merged level by level
in groups of ``merge_batch_size`` (the groups of one level in parallel), failure and success
patches separately, then one final merge that favours failure fixes. The families are merged
only as far as needed: once the patches of both fit in one group, the final merge reads them
all, so a step whose patches fit in one group makes one merge call, not three.

A merge prompt shows the proposals, not the skill: every analyst of the step read the skill
already, and a merge only folds their edits, keeping their anchors; the reply's schema still
allows only the skill's own lines as anchors.
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
    failure = [p for p in usable if p.source == "failure"]
    success = [p for p in usable if p.source == "success"]
    if not failure and not success:
        return Aggregation(Patch(source="merged", reasoning="no usable proposals"), levels)
    if not failure or not success:
        family, kind = (failure, "failed") if failure else (success, "solved")
        while len(family) > 1:
            family = _merge_level(family, kind, skill, model, settings, levels)
        return Aggregation(family[0].model_copy(update={"source": "merged"}), levels)
    # merge_batch_size >= 2, so this ends by the time each family is down to one patch.
    while len(failure) + len(success) > settings.merge_batch_size:
        if len(failure) > 1:
            failure = _merge_level(failure, "failed", skill, model, settings, levels)
        if len(success) > 1 and len(failure) + len(success) > settings.merge_batch_size:
            success = _merge_level(success, "solved", skill, model, settings, levels)
    text = prompts.render(
        "merge_final", meta=settings.meta, failure=_proposals(failure),
        success=_proposals(success), max_edits=str(settings.max_edits),
    )
    final = _ask_merge("merge_final", text, [*failure, *success], skill, model, settings)
    levels.append([final])
    return Aggregation(final, levels)


def _merge_level(
    patches: list[Patch], kind: str, skill: str, model: ChatModel, settings: MergeSettings,
    levels: list[list[Patch]],
) -> list[Patch]:
    """One level of a family's merge: its patches in groups of ``merge_batch_size``, each group
    merged into one patch (the groups in parallel; a group of one is kept as it is)."""
    groups = [patches[i : i + settings.merge_batch_size]
              for i in range(0, len(patches), settings.merge_batch_size)]

    def merge(group: list[Patch]) -> Patch:
        if len(group) == 1:
            return group[0]
        text = prompts.render("merge", kind=kind, meta=settings.meta,
                              proposals=_proposals(group), max_edits=str(settings.max_edits))
        return _ask_merge("merge", text, group, skill, model, settings)

    merged = fan_out(merge, groups, settings.workers, "merge")
    levels.append(merged)
    return merged


def _proposals(patches: Sequence[Patch]) -> str:
    """Patches as a merge reads them: one patch as its edits, several as numbered proposals
    with their reasoning."""
    if len(patches) == 1:
        return render_edits(patches[0].edits)
    return "\n\n".join(f"### Proposal {n}\nreasoning: {p.reasoning}\n{render_edits(p.edits)}"
                       for n, p in enumerate(patches, 1))


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
