"""Gate: validation. A candidate skill is kept only if it scores better than the current one on
the held-out selection split (early stopping's check, applied to every update).

The strict rule accepts any improvement of the mean. On a small, noisy selection split that
accepts noise: one task flipping from wrong to right is "better". The honest rule looks at the
paired per-task differences instead and accepts only when a sign test or a paired bootstrap
finds the gain significant at ``alpha``, or when the mean gain reaches a stated margin.

A candidate the honest test finds ahead but not significantly so (its p-value above ``alpha``
and at most ``second_look_below``) can get a second look: it and the current skill are scored
on training tasks no analyst of the run has seen yet, and the paired gains of both sets
together must pass the same test at a stricter level. The level is set, under a normal
approximation, so that the second look adds at most ``second_look_alpha`` to the chance that a
candidate without any real gain is accepted (:func:`second_look_level`).

An optional density bonus adds ``weight`` times the share of directive words (MUST, ALWAYS,
NEVER, VERIFY, ...) outside protected blocks to each skill's score, favouring skills written
as firm instructions. It is off by default.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from statistics import NormalDist

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
    second_look: int = 0  # unseen training tasks for a second look (0: none)
    second_look_below: float = 0.25
    second_look_alpha: float = 0.01

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
        if self.second_look:
            text += (f"; a gain with p <= {self.second_look_below:g} gets a second look at "
                     f"{self.second_look} training tasks no analyst has seen, both sets together "
                     f"at the level that adds at most {self.second_look_alpha:g} false accepts")
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
    common = sorted(set(candidate.per_task) & set(current.per_task))
    return [_metric(candidate.per_task[t], rule) - _metric(current.per_task[t], rule)
            for t in common]


def _metric(pair: tuple[float, float], rule: GateRule) -> float:
    """One task's (hard, soft) as the rule's metric."""
    hard, soft = pair
    w = rule.mixed_weight
    return {"hard": hard, "soft": soft}.get(rule.metric, (1 - w) * hard + w * soft)


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
    p = _p_value(gains, rule, f"gate:{rule.seed}:{candidate.skill_hash}:{current.skill_hash}")
    extra["p_value"] = p
    wins, losses = sum(g > 0 for g in gains), sum(g < 0 for g in gains)
    detail = f"{wins} tasks better, {losses} worse, {rule.test} p = {p:.4f}"
    if p <= rule.alpha:
        return True, f"significant gain {mean:+.4f} ({detail} <= {rule.alpha:g})", extra
    return False, f"gain {mean:+.4f} not significant ({detail} > {rule.alpha:g})", extra


def _p_value(gains: list[float], rule: GateRule, seed: str) -> float:
    """The one-sided p-value of the paired ``gains`` under the rule's test (a bootstrap
    resamples with ``seed``, so a decision made again comes out the same)."""
    if rule.test == "sign":
        return sign_test_p(gains)
    return bootstrap_p(gains, rule.bootstrap_samples, random.Random(seed))


def second_look_due(first: GateDecision, candidate: EvalScore, rule: GateRule) -> bool:
    """Whether a rejected candidate gets a second look: the honest test found it ahead on
    selection, with a p-value above ``alpha`` and at most ``second_look_below`` (not one
    rejected for a regression, or never loaded by the agent)."""
    return (rule.use_gate and rule.second_look > 0 and first.decision == "reject"
            and first.p_value is not None and (first.mean_gain or 0.0) > 0
            and rule.alpha < first.p_value <= rule.second_look_below
            and never_loaded(candidate) is None)


def second_look_level(n_first: int, n_second: int, alpha: float, below: float,
                      spend: float) -> float:
    """The level the pooled test of a second look is held to.

    Under the null (the candidate no better), the first look's statistic Z1 and the second
    set's Z2 are independent standard normals, and the pooled statistic is
    ``(sqrt(n1) Z1 + sqrt(n2) Z2) / sqrt(n1 + n2)``. The second look accepts when Z1 fell
    between the first look's bounds (p in (alpha, below]) and the pooled statistic reaches
    ``t``; ``t`` is chosen so that this happens with probability ``spend``. The first look's
    own chance, alpha, is unchanged: together at most ``alpha + spend``."""
    normal = NormalDist()
    z_low, z_high = normal.inv_cdf(1 - below), normal.inv_cdf(1 - alpha)
    root1, root2, root = math.sqrt(n_first), math.sqrt(n_second), math.sqrt(n_first + n_second)

    def chance(t: float) -> float:  # Simpson's rule over the first look's continuation band
        steps = 200
        width = (z_high - z_low) / steps
        total = 0.0
        for i in range(steps + 1):
            z = z_low + i * width
            weight = 1 if i in (0, steps) else (4 if i % 2 else 2)
            total += weight * normal.pdf(z) * (1 - normal.cdf((t * root - z * root1) / root2))
        return total * width / 3

    low, high = -10.0, 10.0
    if chance(low) <= spend:
        return 1 - normal.cdf(low)
    for _ in range(60):
        middle = (low + high) / 2
        if chance(middle) > spend:
            low = middle
        else:
            high = middle
    return 1 - normal.cdf(high)


def second_look(
    first: GateDecision,
    candidate: EvalScore,
    current: EvalScore,
    more: EvalScore,
    more_current: EvalScore,
    rule: GateRule,
    *,
    density: tuple[float, float] = (0.0, 0.0),
) -> GateDecision:
    """The gate's decision after a second look: ``first`` (a rejection
    :func:`second_look_due`) made again on the selection tasks (``candidate``, ``current``)
    and the unseen training tasks (``more``, ``more_current``) together, at
    :func:`second_look_level`. ``density``: the candidate's and the current skill's."""
    bonus = rule.density_weight * (density[0] - density[1])
    first_gains = [g + bonus for g in paired_gains(candidate, current, rule)]
    new = [g + bonus for g in paired_gains(more, more_current, rule)]
    if not new:
        return first.model_copy(update={"reason": f"{first.reason}; the second look scored "
                                                  "no task both skills were rolled out on"})
    level = second_look_level(len(first_gains), len(new), rule.alpha, rule.second_look_below,
                              rule.second_look_alpha)
    gains = first_gains + new
    mean = sum(gains) / len(gains)
    p = _p_value(gains, rule,
                 f"second look:{rule.seed}:{candidate.skill_hash}:{current.skill_hash}")
    better, worse = sum(g > 0 for g in new), sum(g < 0 for g in new)
    common = sorted(set(more.per_task) & set(more_current.per_task))
    look: dict[str, object] = {
        "tasks": len(new), "candidate": rule.value(more, density[0]),
        "current": rule.value(more_current, density[1]), "better": better, "worse": worse,
        "mean_gain": mean, "p_value": p, "level": level,
        "per_task": {t: {"candidate": list(more.per_task[t]),
                         "current": list(more_current.per_task[t])} for t in common}}
    head = (f"{first.reason}; a second look at {len(new)} training tasks no analyst has seen: "
            f"{better} better, {worse} worse ({look['candidate']:.3f} against "
            f"{look['current']:.3f})")
    n = len(gains)
    if mean <= 0 or p > level:
        why = (f"mean gain {mean:+.4f}" if mean <= 0 else
               f"{rule.test} p = {p:.4f} > {level:.4f}")
        return first.model_copy(update={"reason": f"{head}; the {n} together do not pass "
                                                  f"({why})", "second_look": look})
    reason = f"{head}; the {n} together pass ({rule.test} p = {p:.4f} <= {level:.4f})"
    if rule.no_regression:
        worse_ones = len(_regressed(candidate, current, rule)) + worse
        if worse_ones:
            return first.model_copy(update={"reason": (
                f"{reason}, but {worse_ones} of them got worse (no regression allowed)"),
                "second_look": look})
    c, b = first.candidate, first.best
    if c is not None and b is not None and c > b:
        return first.model_copy(update={"decision": "accept_new_best", "second_look": look,
                                        "reason": f"{reason}; {c:.4f} > best {b:.4f}"})
    return first.model_copy(update={"decision": "accept", "reason": reason,
                                    "second_look": look})
