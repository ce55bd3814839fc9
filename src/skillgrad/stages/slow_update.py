"""Slow update: the epoch-level step (like a slow-weights / lookahead update over the fast,
per-step edits).

From the second epoch on, the skill at the start of the previous epoch and the skill now are
rolled out on the same sample of training tasks. The pairs are sorted into improved, regressed,
persistent failure and stable success; the optimizer reads them (all, only the changed, or only
the unchanged ones, as ``longitudinal_pair_policy`` says) and writes longitudinal guidance into
the protected ``SLOW_UPDATE`` block, replacing the previous guidance. The trainer gates the
result like any other candidate.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from skillgrad import prompts
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.records import PairCounts, RolloutResult, Task
from skillgrad.skill import set_block
from skillgrad.stages.render import clip_middle, render_trajectory

BLOCK = "SLOW_UPDATE"
PAIRS_SHOWN = 8  # pairs the guidance call reads at most
PairKind = Literal["improved", "regressed", "persistent_failure", "stable_success"]
SHOWN: dict[str, tuple[PairKind, ...]] = {
    "mixed": ("regressed", "improved", "persistent_failure", "stable_success"),
    "changed": ("regressed", "improved"),
    "unchanged": ("persistent_failure", "stable_success"),
}


class GuidanceReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    guidance: str = ""


@dataclass(frozen=True)
class Pair:
    """One task done with the previous and the current epoch's skill."""

    task_id: str
    kind: PairKind
    previous: RolloutResult
    current: RolloutResult


def sample_tasks(tasks: Sequence[Task], n: int, seed: int, epoch: int) -> list[Task]:
    """The training tasks compared before ``epoch``: a seeded sample, in split order."""
    picked = sorted(random.Random(f"slow:{seed}:{epoch}").sample(range(len(tasks)),
                                                                  min(n, len(tasks))))
    return [tasks[i] for i in picked]


def pair_up(previous: Sequence[RolloutResult], current: Sequence[RolloutResult]) -> list[Pair]:
    pairs = []
    for before, after in zip(previous, current, strict=True):
        if before.success and after.success:
            kind: PairKind = "stable_success"
        elif after.success:
            kind = "improved"
        elif before.success:
            kind = "regressed"
        else:
            kind = "persistent_failure"
        pairs.append(Pair(before.task_id, kind, before, after))
    return pairs


def count(pairs: Sequence[Pair]) -> PairCounts:
    totals = {k: sum(1 for p in pairs if p.kind == k) for k in SHOWN["mixed"]}
    return PairCounts(**totals)


def render_counts(counts: PairCounts) -> str:
    return (f"improved {counts.improved}, regressed {counts.regressed}, persistent failure "
            f"{counts.persistent_failure}, stable success {counts.stable_success}")


def render_pairs(pairs: Sequence[Pair], policy: str, max_chars: int,
                 limit: int = PAIRS_SHOWN) -> str:
    """The pairs the policy shows, the most informative kinds first, at most ``limit``."""
    shown = [p for kind in SHOWN[policy] for p in pairs if p.kind == kind][:limit]
    if not shown:
        return "(no pairs of the kinds shown)"
    half = max(200, max_chars // 2)
    blocks = []
    for n, p in enumerate(shown, 1):
        before = clip_middle(render_trajectory(p.previous, half, n), half)
        after = clip_middle(render_trajectory(p.current, half, n), half)
        blocks.append(f"### Pair {n}: {p.kind.replace('_', ' ')} (task {p.task_id})\n"
                      f"Before:\n{before}\nNow:\n{after}")
    return "\n".join(blocks)


def shown_count(pairs: Sequence[Pair], policy: str) -> int:
    return sum(1 for p in pairs if p.kind in SHOWN[policy])


def write_guidance(
    previous_skill: str,
    skill: str,
    pairs: Sequence[Pair],
    policy: str,
    model: ChatModel,
    *,
    meta: str = "",
    constraints: str = "",
    max_chars: int = 4000,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> tuple[str | None, str, str | None]:
    """(the candidate skill with new guidance or ``None``, the guidance, the reason for none)."""
    if shown_count(pairs, policy) == 0:
        return None, "", f"no {policy} pairs to learn from"
    text = prompts.render(
        "slow_update", previous=previous_skill, skill=skill, meta=meta,
        counts=render_counts(count(pairs)), shown=str(min(PAIRS_SHOWN, shown_count(pairs, policy))),
        pairs=render_pairs(pairs, policy, max_chars), constraints=constraints,
    )
    reply = ask_json(model, [Message(role="user", content=text)], GuidanceReply,
                     kind="slow_update", max_tokens=max_tokens, temperature=temperature)
    if reply.value is None:
        return None, "", f"guidance reply unusable ({reply.error})"
    guidance = reply.value.guidance.strip()
    if not guidance:
        return None, "", "the optimizer wrote no guidance"
    return set_block(skill, BLOCK, guidance), guidance, None
