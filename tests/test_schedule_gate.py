"""The edit-budget schedule (learning rate) and the validation gate."""

from __future__ import annotations

import pytest

from skillgrad.records import EvalScore
from skillgrad.stages.gate import GateRule, decide
from skillgrad.stages.schedule import edit_budget

# ----------------------------------------------------------------------------- schedule


def budgets(total: int, start: int, end: int, kind: str) -> list[int]:
    return [edit_budget(step, total, start, end, kind) for step in range(total)]


def test_constant_is_start_everywhere() -> None:
    assert budgets(5, 4, 2, "constant") == [4, 4, 4, 4, 4]


def test_linear_endpoints_and_midpoint() -> None:
    assert budgets(5, 8, 0, "linear") == [8, 6, 4, 2, 0]


def test_cosine_reference_schedule() -> None:
    # 4 -> 2 over 5 steps: 4, 3.71, 3, 2.29, 2 rounded.
    assert budgets(5, 4, 2, "cosine") == [4, 4, 3, 2, 2]


@pytest.mark.parametrize("kind", ["linear", "cosine"])
def test_decay_hits_endpoints_and_is_monotone(kind: str) -> None:
    values = budgets(37, 20, 3, kind)
    assert values[0] == 20
    assert values[-1] == 3
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))
    assert all(3 <= v <= 20 for v in values)


def test_cosine_decays_slower_than_linear_early() -> None:
    # Cosine stays near the start longer than linear does.
    assert edit_budget(2, 11, 20, 0, "cosine") > edit_budget(2, 11, 20, 0, "linear")


def test_steps_outside_the_range_are_clamped() -> None:
    assert edit_budget(-3, 5, 4, 2, "linear") == 4
    assert edit_budget(99, 5, 4, 2, "linear") == 2


@pytest.mark.parametrize("kind", ["constant", "linear", "cosine"])
def test_single_step_run_uses_start(kind: str) -> None:
    assert edit_budget(0, 1, 4, 2, kind) == 4


def test_increasing_schedule_is_supported() -> None:
    assert budgets(3, 1, 5, "linear") == [1, 3, 5]


@pytest.mark.parametrize("total", [1, 5])
def test_unknown_kind_raises(total: int) -> None:
    with pytest.raises(ValueError, match="unknown schedule 'exp'"):
        edit_budget(0, total, 4, 2, "exp")


# ----------------------------------------------------------------------------- gate


def score(hard: float, soft: float | None = None) -> EvalScore:
    return EvalScore(split="val", skill_hash="h", n=10, hard=hard,
                     soft=hard if soft is None else soft)


def test_better_than_best_is_new_best() -> None:
    d = decide(score(0.7), score(0.5), score(0.6), GateRule(metric="hard"))
    assert d.decision == "accept_new_best"
    assert (d.candidate, d.current, d.best) == (0.7, 0.5, 0.6)
    assert d.gated is True
    assert d.metric == "hard"


def test_better_than_current_only_is_accept() -> None:
    d = decide(score(0.55), score(0.5), score(0.6), GateRule(metric="hard"))
    assert d.decision == "accept"
    assert "current" in d.reason


def test_worse_is_rejected() -> None:
    d = decide(score(0.4), score(0.5), score(0.6), GateRule(metric="hard"))
    assert d.decision == "reject"


def test_ties_are_rejected() -> None:
    d = decide(score(0.5), score(0.5), score(0.5), GateRule(metric="hard"))
    assert d.decision == "reject"


def test_tie_with_best_but_above_current_is_plain_accept() -> None:
    d = decide(score(0.6), score(0.5), score(0.6), GateRule(metric="hard"))
    assert d.decision == "accept"


def test_gate_off_adopts_a_worse_candidate_and_says_so() -> None:
    d = decide(score(0.4), score(0.5), score(0.6), GateRule(metric="hard", use_gate=False))
    assert d.decision == "accept"
    assert d.gated is False
    assert "gate off" in d.reason


def test_gate_off_still_reports_a_new_best() -> None:
    d = decide(score(0.9), score(0.5), score(0.6), GateRule(metric="hard", use_gate=False))
    assert d.decision == "accept_new_best"
    assert d.gated is False


def test_soft_metric_is_used() -> None:
    # Worse on hard, better on soft: the metric decides.
    cand, cur = score(0.1, 0.9), score(0.5, 0.5)
    assert decide(cand, cur, cur, GateRule(metric="soft")).decision == "accept_new_best"
    assert decide(cand, cur, cur, GateRule(metric="hard")).decision == "reject"


def test_mixed_metric_weights_hard_and_soft() -> None:
    cand = score(0.5, 1.0)
    cur = score(0.7, 0.7)
    # weight 0.25: 0.75*0.5 + 0.25*1.0 = 0.625 < 0.7
    d = decide(cand, cur, cur, GateRule(metric="mixed", mixed_weight=0.25))
    assert d.decision == "reject"
    assert d.candidate == pytest.approx(0.625)
    assert d.current == pytest.approx(0.7)
    # weight 0.75: 0.25*0.5 + 0.75*1.0 = 0.875 > 0.7
    d = decide(cand, cur, cur, GateRule(metric="mixed", mixed_weight=0.75))
    assert d.decision == "accept_new_best"
    assert d.candidate == pytest.approx(0.875)


def test_unknown_metric_raises() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        decide(score(0.5), score(0.5), score(0.5), GateRule(metric="f1"))


# ----------------------------------------------------------------------------- honest gate


def paired(values: list[float], digest: str) -> EvalScore:
    return EvalScore(split="val", skill_hash=digest, n=len(values),
                     hard=sum(values) / len(values), soft=sum(values) / len(values),
                     per_task={f"t{i}": (v, v) for i, v in enumerate(values)})


ONE_TASK_BETTER = (paired([1, 0, 0, 0, 0, 0, 0, 0, 0, 0], "cand"), paired([0] * 10, "cur"))


def test_honest_gate_rejects_a_one_task_improvement_the_strict_gate_accepts() -> None:
    cand, cur = ONE_TASK_BETTER
    assert decide(cand, cur, cur, GateRule()).decision == "accept_new_best"
    for test in ("sign", "bootstrap"):
        d = decide(cand, cur, cur, GateRule(test=test, alpha=0.05))
        assert d.decision == "reject", test
        assert d.p_value is not None and d.p_value > 0.05
        assert "not significant" in d.reason and "1 tasks better, 0 worse" in d.reason
        assert test in d.rule or "bootstrap" in d.rule


def test_honest_gate_accepts_a_consistent_improvement() -> None:
    cand = paired([1, 1, 1, 1, 1, 1, 0, 1, 0, 0], "cand")
    cur = paired([0, 0, 0, 0, 0, 0, 0, 1, 0, 0], "cur")
    d = decide(cand, cur, cur, GateRule(test="sign"))
    assert d.decision == "accept_new_best"
    assert d.p_value == pytest.approx(1 / 64)  # six wins, no loss
    boot = decide(cand, cur, cur, GateRule(test="bootstrap", bootstrap_samples=500))
    assert boot.decision == "accept_new_best" and boot.p_value is not None and boot.p_value < 0.05
    # seeded: the same comparison gives the same p-value
    again = decide(cand, cur, cur, GateRule(test="bootstrap", bootstrap_samples=500))
    assert again.p_value == boot.p_value


def test_the_margin_accepts_a_large_enough_mean_gain_alone_or_instead_of_a_test() -> None:
    cand, cur = ONE_TASK_BETTER  # mean gain 0.1
    assert decide(cand, cur, cur, GateRule(min_margin=0.1)).decision == "accept_new_best"
    assert decide(cand, cur, cur, GateRule(min_margin=0.2)).decision == "reject"
    either = decide(cand, cur, cur, GateRule(test="sign", min_margin=0.05))
    assert either.decision == "accept_new_best" and "margin" in either.reason


def test_sign_test_ignores_ties_and_counts_losses() -> None:
    from skillgrad.stages.gate import sign_test_p

    assert sign_test_p([0, 0, 0]) == 1.0
    assert sign_test_p([1, 1, 1]) == pytest.approx(1 / 8)
    assert sign_test_p([1, 1, 1, -1, 0]) == pytest.approx(5 / 16)


def test_density_bonus_favours_directive_wording_outside_protected_blocks() -> None:
    from skillgrad.stages.gate import directive_density

    firm = "You MUST give the number. NEVER add units. ALWAYS verify the sum."
    soft_words = "You could give the number. Try not to add units. Consider the sum."
    assert directive_density(firm) > 0.25 and directive_density(soft_words) == 0.0
    hidden = "Give it.\n<!-- APPENDIX_START -->\nMUST MUST MUST\n<!-- APPENDIX_END -->\n"
    assert directive_density(hidden) == 0.0
    same = paired([0.5] * 4, "x")
    rule = GateRule(density_weight=0.1)
    d = decide(same, same, same, rule, density=(directive_density(firm), 0.0, 0.0))
    assert d.decision == "accept_new_best" and d.bonus and d.bonus > 0
    assert "density" in rule.describe()
    assert decide(same, same, same, GateRule(), density=(0.5, 0.0, 0.0)).decision == "reject"


# ----------------------------------------------------------------------------- the default gate


def _paired(gains: dict[int, float], n: int = 20, base: float = 0.43) -> tuple[EvalScore, EvalScore]:
    """A current and a candidate score on ``n`` tasks, the candidate better by ``gains[i]``."""
    cur = {f"t{i}": (0.0, base) for i in range(n)}
    cand = {t: (0.0, base + gains.get(i, 0.0)) for i, t in enumerate(cur)}

    def make(per: dict[str, tuple[float, float]], digest: str) -> EvalScore:
        return EvalScore(split="val", skill_hash=digest, n=n, hard=0.0,
                         soft=sum(s for _, s in per.values()) / n, per_task=per)

    return make(cand, "cand"), make(cur, "cur")


def _default_rule(**evaluation: object) -> GateRule:
    from skillgrad.config import SkillgradConfig
    from skillgrad.settings import gate_rule

    return gate_rule(SkillgradConfig.model_validate(
        {"evaluation": {"gate_metric": "soft", **evaluation}}))


def test_the_default_gate_does_not_take_noise_for_progress() -> None:
    """+0.018 F1 on 20 items (three tasks a little better, two a little worse) is noise."""
    cand, cur = _paired({0: 0.2, 1: 0.2, 2: 0.2, 3: -0.12, 4: -0.12})
    assert abs((cand.soft - cur.soft) - 0.018) < 1e-9
    d = decide(cand, cur, cur, _default_rule())
    assert d.decision == "reject" and "not significant" in d.reason
    # SkillOpt's strict gate, by name, takes any higher mean.
    assert decide(cand, cur, cur, _default_rule(gate_test="strict")).decision == (
        "accept_new_best")


def test_the_default_gate_takes_a_real_gain() -> None:
    cand, cur = _paired({i: 0.5 for i in range(7)})
    d = decide(cand, cur, cur, _default_rule())
    assert d.decision == "accept_new_best" and d.p_value is not None and d.p_value <= 0.05


def test_no_regression_rejects_a_significant_gain_that_loses_one_task() -> None:
    cand = paired([1, 1, 1, 1, 1, 1, 1, 0, 1, 1], "cand")
    cur = paired([0, 0, 0, 0, 0, 0, 0, 1, 0, 0], "cur")  # t7: right before, wrong after
    assert decide(cand, cur, cur, GateRule(test="sign")).decision == "accept_new_best"
    d = decide(cand, cur, cur, GateRule(test="sign", no_regression=True))
    assert d.decision == "reject" and "1 selection task got worse (t7; no regression" in d.reason
    assert "no selection task worse" in d.rule
    clean = paired([1, 1, 1, 1, 1, 1, 1, 1, 1, 1], "clean")
    assert decide(clean, cur, cur, GateRule(test="sign", no_regression=True)).decision == (
        "accept_new_best")
