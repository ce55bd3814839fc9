"""A run's model usage as plain data: calls, tokens, time, cost and attempts per role and per
stage, read from a serialised :class:`~skillgrad.models.client.Meter` (what ``summary.json``,
``skillgrad show`` and the dashboard report)."""

from __future__ import annotations

from typing import Any

from skillgrad.models.client import ATTEMPT_KINDS, Meter


def model_usage(meter: dict[str, Any]) -> dict[str, Any]:
    """Calls and tokens per role (totals, then per stage) from a serialised meter."""
    m = Meter.from_json(meter)
    out: dict[str, Any] = {}
    for role, stages in m.stages.items():
        total = m.totals(role)
        out[role] = {
            "calls": total.calls,
            "prompt_tokens": total.prompt_tokens,
            "completion_tokens": total.completion_tokens,
            "seconds": round(total.seconds, 3),
            "cost": round(total.cost, 6),
            "cached": total.cached,
            "retries": total.retries,
            "errors": total.errors,
            "attempts": ordered_attempts(total.attempts),
            "cut_off_dropped": total.cut_off_dropped,
            "stages": {s: _stage_usage(c) for s, c in stages.items()},
        }
    return out


def _stage_usage(counts: Any) -> dict[str, Any]:
    return {k: (round(v, 3) if isinstance(v, float) else
                ordered_attempts(v) if isinstance(v, dict) else v)
            for k, v in vars(counts).items()}


def ordered_attempts(attempts: dict[str, int]) -> dict[str, int]:
    """Attempt counts by outcome, in the order of ATTEMPT_KINDS (other kinds after them)."""
    order = {kind: i for i, kind in enumerate(ATTEMPT_KINDS)}
    return dict(sorted(attempts.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
