"""Schedule: the edit budget per step, the text analogue of a learning-rate schedule.

Like nanoGPT's ``get_lr(it)``, the budget is a pure function of the step.
"""

from __future__ import annotations

import math


def edit_budget(step: int, total_steps: int, start: int, end: int, kind: str) -> int:
    """Edits allowed at 0-based ``step`` of ``total_steps``, decaying from ``start`` to ``end``."""
    # Checked first, so that an unknown kind fails even on a one-step run.
    if kind not in ("constant", "linear", "cosine"):
        raise ValueError(f"unknown schedule {kind!r} (allowed: constant, linear, cosine)")
    if kind == "constant" or total_steps <= 1:
        return start
    t = min(max(step, 0), total_steps - 1) / (total_steps - 1)
    if kind == "linear":
        value = start + (end - start) * t
    else:
        value = end + 0.5 * (start - end) * (1 + math.cos(math.pi * t))
    return max(min(start, end), min(max(start, end), round(value)))
