"""Prices and budgets of one model role.

Cost is metered when per-token prices are configured. A budget caps what a role may spend in
one run: calls, tokens (prompt + completion) or cost. It is checked before every fresh call
(answers served from the journal of a resumed step, the response cache or a recording were
already paid for, or cost nothing), so a run stops cleanly at the first call that would
exceed it, and a larger budget lets the same command continue.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from skillgrad.errors import RunStopped


class Prices(BaseModel):
    """Prices per million tokens, in the currency of your bill."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prompt: float = Field(0.0, ge=0.0, description="per million prompt tokens")
    completion: float = Field(0.0, ge=0.0, description="per million completion tokens")

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1e6


class Budget(BaseModel):
    """Limits on one role's spending in one run; unset means unlimited."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    calls: int | None = Field(None, ge=0)
    tokens: int | None = Field(None, ge=0, description="prompt + completion tokens")
    cost: float | None = Field(None, ge=0.0, description="needs prices")

    def exceeded(self, calls: int, tokens: int, cost: float) -> str | None:
        """The name, limit and use of the first exhausted budget, or None."""
        if self.calls is not None and calls >= self.calls:
            return f"calls: {self.calls} allowed, {calls} made"
        if self.tokens is not None and tokens >= self.tokens:
            return f"tokens: {self.tokens} allowed, {tokens} used"
        if self.cost is not None and cost >= self.cost:
            return f"cost: {self.cost:g} allowed, {cost:.4f} spent"
        return None


class BudgetExhausted(RunStopped):
    """A role's budget ran out; the run stopped cleanly and resumes with a larger one."""
