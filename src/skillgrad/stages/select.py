"""Select: gradient clipping and the learning rate. Merged edits (or revision suggestions) are
ranked by the optimizer and cut to the step's budget.

The budget comes from the learning-rate controller:

* ``fixed``: the schedule's budget for this step (``schedule.edit_budget``);
* ``autonomous``: the optimizer reads the ranked items and decides how many to apply, with its
  reasoning and confidence, clamped to ``[0, ceiling]``. A reply that does not parse falls back
  to the schedule's budget (never to zero), and the fallback is recorded;
* ``none``: no bound; everything merged is applied, in order of support.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, field_validator

from skillgrad import prompts
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.records import Edit, RateDecision, Selection, StepRecord, Suggestion
from skillgrad.stages.render import render_edits

Item = Edit | Suggestion


class RankReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    order: list[int]


class RateReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    confidence: float | None = None
    n_edits: int

    @field_validator("confidence", mode="before")
    @classmethod
    def _unit(cls, v: object) -> float | None:
        try:
            return min(1.0, max(0.0, float(v)))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class SelectSettings:
    mode: str = "fixed"  # fixed | autonomous | none
    ceiling: int = 4
    kind: str = "edits"  # how the prompts name the items
    rejected_text: str = ""
    meta: str = ""
    history: str = ""
    max_tokens: int | None = None
    temperature: float | None = None


def by_support(items: Sequence[Item]) -> tuple[Item, ...]:
    return tuple(sorted(items, key=lambda e: -e.support))


def select(
    items: Sequence[Item], budget: int, skill: str, model: ChatModel, settings: SelectSettings
) -> Selection:
    """Rank ``items`` and keep as many as the learning-rate controller allows."""
    items = tuple(items)
    if settings.mode == "none":
        ranked = by_support(items)
        rate = RateDecision(mode="none", schedule_budget=budget, applied=len(ranked),
                            reasoning="no edit budget: every merged item is applied")
        return Selection(budget=len(ranked), ranked=ranked, kept=ranked, rate=rate,
                         reasoning="ordered by support")
    cut = settings.ceiling if settings.mode == "autonomous" else budget
    ranking = rank(items, cut, skill, model, settings)
    if settings.mode == "fixed":
        rate = RateDecision(mode="fixed", schedule_budget=budget,
                            applied=min(budget, len(ranking.ranked)))
        return ranking.model_copy(update={"kept": ranking.ranked[:budget], "rate": rate})
    rate = decide_rate(ranking.ranked[:cut], budget, skill, model, settings)
    return ranking.model_copy(update={"budget": rate.applied, "rate": rate,
                                      "kept": ranking.ranked[: rate.applied]})


def rank(
    items: tuple[Item, ...], budget: int, skill: str, model: ChatModel, settings: SelectSettings
) -> Selection:
    """Order ``items`` best first. With no more items than ``budget`` no call is made."""
    if len(items) <= budget:
        ranked = by_support(items)
        return Selection(budget=budget, ranked=ranked, kept=ranked,
                         reasoning=f"all {settings.kind} fit the budget; ordered by support")
    text = prompts.render("rank", budget=str(budget), count=str(len(items)), skill=skill,
                          edits=render_edits(items), rejected=settings.rejected_text,
                          meta=settings.meta, kind=settings.kind)
    reply = ask_json(model, [Message(role="user", content=text)], RankReply,
                     kind="rank", max_tokens=settings.max_tokens, temperature=settings.temperature)
    if reply.value is None:
        ranked = by_support(items)
        return Selection(budget=budget, ranked=ranked, kept=ranked[:budget], raw=reply.raw,
                         error=f"ranking unusable ({reply.error}); ordered by support instead")
    order: list[int] = []
    for n in reply.value.order:
        if 1 <= n <= len(items) and n - 1 not in order:
            order.append(n - 1)
    rest = [i for i in sorted(range(len(items)), key=lambda i: -items[i].support) if i not in order]
    ranked = tuple(items[i] for i in order + rest)
    return Selection(budget=budget, ranked=ranked, kept=ranked[:budget],
                     reasoning=reply.value.reasoning)


def decide_rate(
    ranked: tuple[Item, ...], budget: int, skill: str, model: ChatModel, settings: SelectSettings
) -> RateDecision:
    """The autonomous learning rate: how many of ``ranked`` (best first) to apply."""
    ceiling = settings.ceiling
    if not ranked:
        return RateDecision(mode="autonomous", schedule_budget=budget, applied=0,
                            ceiling=ceiling, reasoning="nothing to apply")
    text = prompts.render(
        "learning_rate", kind=settings.kind, schedule_budget=str(min(budget, ceiling)),
        ceiling=str(min(ceiling, len(ranked))), skill=skill, meta=settings.meta,
        rejected=settings.rejected_text, history=settings.history or "(first step)",
        count=str(len(ranked)), edits=render_edits(ranked),
    )
    reply = ask_json(model, [Message(role="user", content=text)], RateReply,
                     kind="learning_rate", max_tokens=settings.max_tokens, temperature=settings.temperature)
    if reply.value is None:
        fallback = min(budget, ceiling, len(ranked))
        return RateDecision(mode="autonomous", schedule_budget=budget, applied=fallback,
                            ceiling=ceiling, error=f"learning-rate reply unusable "
                            f"({reply.error}); applied the schedule's budget {fallback}")
    wanted = reply.value.n_edits
    applied = min(max(wanted, 0), ceiling, len(ranked))
    note = "" if applied == wanted else f" (asked for {wanted}; clamped to {applied})"
    return RateDecision(mode="autonomous", schedule_budget=budget, applied=applied,
                        ceiling=ceiling, confidence=reply.value.confidence,
                        reasoning=reply.value.reasoning + note)


def render_history(history: Sequence[StepRecord], last: int = 5) -> str:
    """The last steps as the learning-rate controller sees them."""
    lines = []
    for r in history[-last:]:
        gain = ("" if r.candidate_score is None or r.current_score is None
                else f" ({r.candidate_score - r.current_score:+.3f})")
        lines.append(f"- step {r.global_step}: applied {r.n_applied + r.n_fuzzy} of "
                     f"{r.n_selected} selected -> {r.decision}{gain}")
    return "\n".join(lines)
