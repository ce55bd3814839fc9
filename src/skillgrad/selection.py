"""Select: gradient clipping. Merged edits are ranked by the optimizer and cut to the step's
edit budget (the text learning rate)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from skillgrad import prompts
from skillgrad.models.base import ChatModel
from skillgrad.records import Edit, Message, Patch, Selection
from skillgrad.reflect import render_edits
from skillgrad.structured import ask_json


class RankReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    order: list[int]


def by_support(edits: tuple[Edit, ...]) -> tuple[Edit, ...]:
    return tuple(sorted(edits, key=lambda e: -e.support))


def select(
    merged: Patch,
    budget: int,
    skill: str,
    model: ChatModel,
    *,
    rejected_text: str = "",
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> Selection:
    """Rank and cut. With no more edits than the budget no ranking call is made."""
    edits = merged.edits
    if len(edits) <= budget:
        ranked = by_support(edits)
        return Selection(budget=budget, ranked=ranked, kept=ranked,
                         reasoning="all edits fit the budget; ordered by support")
    text = prompts.render("rank", budget=str(budget), count=str(len(edits)), skill=skill,
                          edits=render_edits(edits), rejected=rejected_text)
    reply = ask_json(model, [Message(role="user", content=text)], RankReply,
                     max_tokens=max_tokens, temperature=temperature)
    if reply.value is None:
        ranked = by_support(edits)
        return Selection(budget=budget, ranked=ranked, kept=ranked[:budget], raw=reply.raw,
                         error=f"ranking unusable ({reply.error}); ordered by support instead")
    order: list[int] = []
    for n in reply.value.order:
        if 1 <= n <= len(edits) and n - 1 not in order:
            order.append(n - 1)
    rest = [i for i in sorted(range(len(edits)), key=lambda i: -edits[i].support) if i not in order]
    ranked = tuple(edits[i] for i in order + rest)
    return Selection(budget=budget, ranked=ranked, kept=ranked[:budget],
                     reasoning=reply.value.reasoning)
