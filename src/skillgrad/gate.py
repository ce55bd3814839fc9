"""Gate: validation. A candidate skill is kept only if it scores strictly better than the
current one on the held-out selection split."""

from __future__ import annotations

from skillgrad.records import EvalScore, GateDecision


def decide(
    candidate: EvalScore,
    current: EvalScore,
    best: EvalScore,
    *,
    metric: str,
    mixed_weight: float = 0.5,
    use_gate: bool = True,
) -> GateDecision:
    """accept_new_best if better than current and best; accept if only better than current;
    reject otherwise. With the gate off every candidate is adopted, and the decision says so."""
    c = candidate.metric(metric, mixed_weight)
    cur = current.metric(metric, mixed_weight)
    b = best.metric(metric, mixed_weight)
    common = {"metric": metric, "candidate": c, "current": cur, "best": b, "gated": use_gate}
    if c > b:
        return GateDecision(decision="accept_new_best", reason=f"{c:.4f} > best {b:.4f}", **common)
    if c > cur:
        return GateDecision(decision="accept", reason=f"{c:.4f} > current {cur:.4f}", **common)
    if not use_gate:
        return GateDecision(
            decision="accept", reason=f"gate off: adopted although {c:.4f} <= {cur:.4f}", **common
        )
    return GateDecision(decision="reject", reason=f"{c:.4f} <= current {cur:.4f}", **common)
