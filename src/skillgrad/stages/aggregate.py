"""Aggregate: gradient accumulation. Patches from many minibatches are merged level by level
in groups of ``merge_batch_size`` (the groups of one level in parallel), failure and success
patches separately, then one final merge that favours failure fixes.

No proposal is lost to the merge:

* Plain rules (``proposal_form: rules``) are merged as rules: the merge writes text only, and
  each merged rule becomes an appended bullet, so it cannot invent an op or an anchor. It is
  shown the requests each proposal was written from and asked to turn rules that contradict
  each other into one rule with the condition that separates them. A rule of the inputs that
  no merged rule covers (most of its content words in one merged rule) is put back.
* An edit whose op or anchor the merge changed into one that cannot be applied (an anchor that
  is empty or not in the skill) gets back the op and anchor of the proposal it came from.

Both repairs are recorded in the merged patch (``repaired``), and so in the step's folder.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillgrad import prompts
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.package import is_package
from skillgrad.parallel import fan_out
from skillgrad.records import Edit, Patch
from skillgrad.stages.render import one_line, render_edits
from skillgrad.stages.replies import (
    PACKAGE_SHAPES,
    PatchReply,
    RulesReply,
    patch_schema,
    rule_edit,
    rules_schema,
)
from skillgrad.stages.update import apply_edits
from skillgrad.words import content_words

COVERED = 0.6  # the share of a rule's content words one merged rule must hold to cover it
_EXAMPLES, _EXAMPLE_CHARS = 2, 200  # requests shown with each proposal in a rules merge


@dataclass(frozen=True)
class MergeSettings:
    merge_batch_size: int = 8
    workers: int = 4
    max_edits: int = 8
    max_tokens: int | None = None
    temperature: float | None = None
    meta: str = ""
    form: str = "edits"  # gradient.proposal_form: "rules" merges plain rules as rules


@dataclass
class Aggregation:
    """The merged patch plus every intermediate merge, for the run directory."""

    merged: Patch
    levels: list[list[Patch]] = field(default_factory=list)


def aggregate(
    patches: Sequence[Patch], skill: str, model: ChatModel, settings: MergeSettings,
    requests: Mapping[str, str] | None = None,
) -> Aggregation:
    """``requests``: each task's request by id, shown with the rules a merge of rules merges."""
    usable = [p for p in patches if p.edits]
    levels: list[list[Patch]] = []
    failure = _merge_family([p for p in usable if p.source == "failure"], "failed", skill, model,
                            settings, levels, requests or {})
    success = _merge_family([p for p in usable if p.source == "success"], "solved", skill, model,
                            settings, levels, requests or {})
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
    levels: list[list[Patch]], requests: Mapping[str, str],
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
            if _all_rules(group, settings):
                return _merge_rules(group, kind, skill, model, settings, requests)
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
    shape = PACKAGE_SHAPES[PatchReply] if is_package(skill) else PatchReply
    reply = ask_json(model, [Message(role="user", content=text)], shape, kind=kind,
                     max_tokens=settings.max_tokens, temperature=settings.temperature,
                     schema=patch_schema(skill, settings.max_edits, shape))
    source = inputs[0].source if len({p.source for p in inputs}) == 1 else "merged"
    if reply.value is None:
        # Recorded fallback: the inputs are kept, concatenated without duplicates.
        return Patch(source=source, edits=concatenate(inputs), raw=reply.raw,
                     error=f"merge reply unusable ({reply.error}); inputs kept unmerged",
                     tasks=_tasks(inputs))
    value: Any = reply.value
    edits, repaired = _restore_ops([e.to_edit() for e in value.edits], inputs, skill)
    return Patch(source=source, reasoning=value.reasoning, edits=tuple(edits),
                 tasks=_tasks(inputs), repaired=tuple(repaired))


def _all_rules(group: Sequence[Patch], settings: MergeSettings) -> bool:
    return settings.form == "rules" and all(e.op == "append" for p in group for e in p.edits)


def _merge_rules(group: list[Patch], kind: str, skill: str, model: ChatModel,
                 settings: MergeSettings, requests: Mapping[str, str]) -> Patch:
    """Plain rules merged as rules: text in, text out, every merged rule an appended bullet;
    a rule of the inputs that no merged rule covers is put back."""
    blocks = []
    for n, p in enumerate(group, 1):
        shown = [_tail(requests[t]) for t in p.tasks if t in requests][:_EXAMPLES]
        examples = "".join(f"\n   request: {r!r}" for r in shown)
        rules = "\n".join(f"- {e.content.removeprefix('- ')} (support {e.support})"
                          for e in p.edits)
        blocks.append(f"### Proposal {n}\nreasoning: {p.reasoning}{examples}\n{rules}")
    text = prompts.render("merge_rules", kind=kind, skill=skill, meta=settings.meta,
                          proposals="\n\n".join(blocks), max_edits=str(settings.max_edits))
    reply = ask_json(model, [Message(role="user", content=text)], RulesReply, kind="merge_rules",
                     max_tokens=settings.max_tokens, temperature=settings.temperature,
                     schema=rules_schema(settings.max_edits))
    source = group[0].source if len({p.source for p in group}) == 1 else "merged"
    inputs = concatenate(group)
    if reply.value is None:
        return Patch(source=source, edits=inputs, raw=reply.raw, tasks=_tasks(group),
                     error=f"merge reply unusable ({reply.error}); inputs kept unmerged")
    merged = [rule_edit(r, 1) for r in reply.value.whole_rules()]
    supports = [0] * len(merged)
    repaired: list[str] = []
    kept: list[Edit] = []
    for e in inputs:
        at = _covering(e.content, [m.content for m in merged])
        if at is None:
            kept.append(e)
            repaired.append(f"rule {one_line(e.content, 120)!r}: left out by the merge, kept")
        else:
            supports[at] += e.support
    edits = [m.model_copy(update={"support": max(s, 1)}) for m, s in zip(merged, supports,
                                                                          strict=True)]
    return Patch(source=source, reasoning=reply.value.reasoning, edits=tuple(edits + kept),
                 tasks=_tasks(group), repaired=tuple(repaired))


def _covering(rule: str, merged: Sequence[str]) -> int | None:
    """The merged rule that holds most of ``rule``'s content words (at least :data:`COVERED`
    of them), or None."""
    mine = content_words(rule)
    if not mine:
        return 0 if merged else None
    best, at = 0.0, None
    for i, other in enumerate(merged):
        share = len(mine & content_words(other)) / len(mine)
        if share > best:
            best, at = share, i
    return at if best >= COVERED else None


def _restore_ops(edits: list[Edit], inputs: Sequence[Patch], skill: str
                 ) -> tuple[list[Edit], list[str]]:
    """Merged edits whose anchor cannot be found (empty, or not in ``skill``) given back the
    op and anchor of the input edit they came from (the one whose content they hold most of);
    those with none such are left to the update, which reports them."""
    originals = [e for p in inputs for e in p.edits]
    out, repaired = [], []
    for e in edits:
        if not e.file and any(o.file for o in originals):  # a package: the file it came for
            at = _covering(e.content, [o.content for o in originals]) if e.content else None
            if at is not None and originals[at].file:
                e = e.model_copy(update={"file": originals[at].file})
                repaired.append(f"edit {one_line(e.content, 120)!r}: the file the merge left "
                                f"out restored to the proposal's {e.file}")
        if e.op == "append" or _placeable(e, skill):
            out.append(e)
            continue
        at = _covering(e.content, [o.content for o in originals]) if e.content else None
        source = originals[at] if at is not None else None
        if source is None or (source.op != "append" and not _placeable(source, skill)):
            out.append(e)
            continue
        out.append(e.model_copy(update={"op": source.op, "anchor": source.anchor}))
        was = f"{e.op} with {'an empty anchor' if not e.anchor.strip() else 'an anchor not in the skill'}"
        repaired.append(f"edit {one_line(e.content, 120)!r}: the merge's {was} restored to the "
                        f"proposal's {source.op}")
    return out, repaired


def _placeable(edit: Edit, skill: str) -> bool:
    """Whether ``edit``'s anchor is found in ``skill`` as the update finds anchors."""
    if not edit.anchor.strip():
        return False
    outcome = apply_edits(skill, [edit])[1].outcomes[0]
    return not (outcome.status == "skipped" and "anchor" in (outcome.reason or ""))


def _tasks(patches: Sequence[Patch]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(t for p in patches for t in p.tasks))


def _tail(text: str, limit: int = _EXAMPLE_CHARS) -> str:
    """The end of a request (where its question usually is), on one line."""
    text = " ".join(text.split())
    return text if len(text) <= limit else "…" + text[1 - limit:]


def concatenate(patches: Sequence[Patch]) -> tuple[Edit, ...]:
    """All edits of ``patches``; exact duplicates folded into one with summed support."""
    seen: dict[tuple[str, str, str, str], Edit] = {}
    for p in patches:
        for e in p.edits:
            key = (e.op, e.anchor.strip(), e.content.strip(), e.file)
            if key in seen:
                seen[key] = seen[key].model_copy(update={"support": seen[key].support + e.support})
            else:
                seen[key] = e
    return tuple(seen.values())
