"""Gate: validation. A candidate skill is kept only if it scores better than the current one on
the held-out selection split (early stopping's check, applied to every update).

The strict rule accepts any improvement of the mean. On a small, noisy selection split that
accepts noise: one task flipping from wrong to right is "better". The honest rule looks at the
paired per-task differences instead and accepts only when a sign test or a paired bootstrap
finds the gain significant at ``alpha``, or when the mean gain reaches a stated margin.

An optional density bonus adds ``weight`` times the share of directive words (MUST, ALWAYS,
NEVER, VERIFY, ...) outside protected blocks to each skill's score, favouring skills written
as firm instructions. It is off by default.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from skillgrad.records import EvalScore, GateDecision
from skillgrad.skill import body_without_blocks

DIRECTIVES = frozenset({"must", "always", "never", "verify", "ensure", "avoid"})
_WORD_RE = re.compile(r"[A-Za-z]+(?:'[a-z]+)?")


@dataclass(frozen=True)
class GateRule:
    """How a candidate is judged: the metric, the honest test and the density bonus."""

    metric: str = "hard"
    mixed_weight: float = 0.5
    use_gate: bool = True
    test: str = "strict"  # strict | sign | bootstrap
    alpha: float = 0.05
    min_margin: float | None = None
    bootstrap_samples: int = 2000
    density_weight: float = 0.0
    seed: int = 0
    no_regression: bool = False  # also reject when any selection task gets worse

    def describe(self) -> str:
        """The rule in words, as the summary states it."""
        if not self.use_gate:
            return "GATE OFF: every candidate adopted"
        parts = []
        if self.test != "strict":
            name = "one-sided sign test" if self.test == "sign" else (
                f"paired bootstrap ({self.bootstrap_samples} resamples)")
            parts.append(f"the paired per-task gain passes a {name} at alpha {self.alpha:g}")
        if self.min_margin is not None:
            parts.append(f"the mean gain is at least {self.min_margin:g}")
        rule = " or ".join(parts) if parts else "strictly better than current"
        text = f"{rule} on the selection split ({self.metric})"
        if self.density_weight:
            text += f", plus a directive-density bonus of weight {self.density_weight:g}"
        if self.no_regression:
            text += ", and no selection task worse"
        return text

    def value(self, score: EvalScore, density: float = 0.0) -> float:
        """A skill's gate score: its metric plus the density bonus."""
        return score.metric(self.metric, self.mixed_weight) + self.density_weight * density

    @property
    def honest(self) -> bool:
        return self.use_gate and (self.test != "strict" or self.min_margin is not None)


def directive_density(skill: str) -> float:
    """Share of the words outside protected blocks that are directive words."""
    words = _WORD_RE.findall(body_without_blocks(skill))
    if not words:
        return 0.0
    return sum(1 for w in words if w.lower() in DIRECTIVES) / len(words)


def sign_test_p(gains: list[float]) -> float:
    """One-sided exact sign test: P(at least this many wins | wins and losses equally likely).
    Ties carry no information and are dropped."""
    wins = sum(1 for g in gains if g > 0)
    losses = sum(1 for g in gains if g < 0)
    n = wins + losses
    if n == 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(wins, n + 1)) / 2**n


def bootstrap_p(gains: list[float], samples: int, rng: random.Random) -> float:
    """Share of bootstrap resamples of the paired gains whose mean is not positive."""
    if not gains:
        return 1.0
    n = len(gains)
    bad = 0
    for _ in range(samples):
        if sum(gains[rng.randrange(n)] for _ in range(n)) <= 0:
            bad += 1
    return bad / samples


def paired_gains(candidate: EvalScore, current: EvalScore, rule: GateRule) -> list[float]:
    """Per-task metric differences on the tasks both skills were scored on."""
    w = rule.mixed_weight

    def metric(pair: tuple[float, float]) -> float:
        hard, soft = pair
        return {"hard": hard, "soft": soft}.get(rule.metric, (1 - w) * hard + w * soft)

    common = sorted(set(candidate.per_task) & set(current.per_task))
    return [metric(candidate.per_task[t]) - metric(current.per_task[t]) for t in common]


def decide(
    candidate: EvalScore,
    current: EvalScore,
    best: EvalScore,
    rule: GateRule,
    *,
    density: tuple[float, float, float] = (0.0, 0.0, 0.0),
) -> GateDecision:
    """accept_new_best if the rule accepts against current and the candidate beats best;
    accept if the rule accepts against current only; reject otherwise. With the gate off every
    candidate is adopted, and the decision says so.

    ``density``: the directive density of the candidate, current and best skill."""
    bonus = [rule.density_weight * d for d in density]
    c, cur, b = (rule.value(s, d) for s, d in zip((candidate, current, best), density, strict=True))
    common = {"metric": rule.metric, "candidate": c, "current": cur, "best": b,
              "gated": rule.use_gate, "rule": rule.describe(),
              "bonus": bonus[0] - bonus[1] if rule.density_weight else None}
    passed, why, extra = _judge(candidate, current, rule, c - cur, bonus[0] - bonus[1])
    unloaded = never_loaded(candidate)
    if unloaded:
        passed, why = False, unloaded
    if passed and rule.use_gate and rule.no_regression:
        worse = _regressed(candidate, current, rule)
        if worse:
            passed, why = False, (f"{why}, but {len(worse)} selection "
                                  f"task{'s' if len(worse) > 1 else ''} got worse "
                                  f"({', '.join(worse[:3])}{', ...' if len(worse) > 3 else ''}; "
                                  "no regression allowed)")
    if passed and c > b:
        return GateDecision(decision="accept_new_best", reason=f"{why}; {c:.4f} > best {b:.4f}",
                            **common, **extra)
    if passed:
        return GateDecision(decision="accept", reason=why, **common, **extra)
    if not rule.use_gate:
        return GateDecision(decision="accept", reason=f"gate off: adopted although {why}",
                            **common, **extra)
    return GateDecision(decision="reject", reason=why, **common, **extra)


def never_loaded(candidate: EvalScore) -> str | None:
    """Why a candidate cannot be judged, when an agent target never loaded it on any
    selection task: its score is then the agent's without any skill, whatever it says, so it
    neither passes nor ties. None when it was loaded at least once (or loading is not the
    agent's choice)."""
    if not candidate.body_on_load or candidate.skill_loads is None or \
            candidate.skill_loads[0] > 0:
        return None
    n = candidate.skill_loads[1]
    return (f"the agent never loaded the candidate skill on the {n} selection task"
            f"{'s' if n != 1 else ''}, so its score is not the skill's (its description decides "
            "whether an agent loads it)")


def _regressed(candidate: EvalScore, current: EvalScore, rule: GateRule) -> list[str]:
    """The selection tasks on which the candidate scores lower than the current skill."""
    common = sorted(set(candidate.per_task) & set(current.per_task))
    gains = paired_gains(candidate, current, rule)
    return [task for task, gain in zip(common, gains, strict=True) if gain < -1e-12]


def _judge(
    candidate: EvalScore, current: EvalScore, rule: GateRule, gain: float, bonus_gain: float
) -> tuple[bool, str, dict[str, float]]:
    if not rule.honest:
        if gain > 0:
            return True, f"{gain:+.4f} over current", {}
        return False, f"{gain:+.4f} over current (not strictly better)", {}
    gains = [g + bonus_gain for g in paired_gains(candidate, current, rule)]
    mean = sum(gains) / len(gains) if gains else gain
    extra: dict[str, float] = {"mean_gain": mean}
    if mean <= 0:
        return False, f"mean paired gain {mean:+.4f} is not positive", extra
    if rule.min_margin is not None and mean >= rule.min_margin - 1e-12:
        return True, f"mean paired gain {mean:+.4f} >= margin {rule.min_margin:g}", extra
    if rule.test == "strict":
        return False, f"mean paired gain {mean:+.4f} < margin {rule.min_margin:g}", extra
    if rule.test == "sign":
        p = sign_test_p(gains)
    else:
        seed = f"gate:{rule.seed}:{candidate.skill_hash}:{current.skill_hash}"
        p = bootstrap_p(gains, rule.bootstrap_samples, random.Random(seed))
    extra["p_value"] = p
    wins, losses = sum(g > 0 for g in gains), sum(g < 0 for g in gains)
    detail = f"{wins} tasks better, {losses} worse, {rule.test} p = {p:.4f}"
    if p <= rule.alpha:
        return True, f"significant gain {mean:+.4f} ({detail} <= {rule.alpha:g})", extra
    return False, f"gain {mean:+.4f} not significant ({detail} > {rule.alpha:g})", extra
