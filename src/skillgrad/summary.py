"""The run summary (``summary.json``): scores and deltas, decisions per epoch, the optimizer
replies that could not be used, time and model usage per stage and role (every attempt a model
was sent, by outcome: answered, each kind of transient failure, fatal)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from skillgrad.config import ResolvedConfig
from skillgrad.models.usage import model_usage
from skillgrad.records import EvalScore
from skillgrad.settings import gate_rule
from skillgrad.stages.gate import GateRule


def _score(s: EvalScore | None) -> dict[str, Any] | None:
    if s is None:
        return None
    out: dict[str, Any] = {"hard": s.hard, "soft": s.soft, "n": s.n}
    if s.skill_loads is not None:  # an agent target: how often it loaded the skill
        out["skill_loaded"] = list(s.skill_loads)
    return out


def build_summary(
    state: Any, resolved: ResolvedConfig, test: dict[str, EvalScore], version: str,
    rule: GateRule | None = None,
) -> dict[str, Any]:
    cfg = resolved.config
    ev = cfg.evaluation
    metric = ev.gate_metric

    def val(digest: str) -> float | None:
        s = state.score("val", digest)
        return None if s is None else s.metric(metric, ev.gate_mixed_weight)

    rule = rule or gate_rule(cfg)
    per_epoch: dict[str, Counter[str]] = {}
    for rec in state.history:
        per_epoch.setdefault(str(rec.epoch), Counter())[rec.decision] += 1
    o = cfg.optimizer
    test_scores = {k: _score(v) for k, v in test.items()}
    deltas = {}
    if "initial" in test:
        for name in ("best", "final"):
            if name in test:
                deltas[name] = {
                    "hard": test[name].hard - test["initial"].hard,
                    "soft": test[name].soft - test["initial"].soft,
                }
    return {
        "skillgrad_version": version,
        "env": cfg.env.name,
        "gate": {
            "use_gate": ev.use_gate,
            "metric": metric,
            "mixed_weight": ev.gate_mixed_weight if metric == "mixed" else None,
            "rule": rule.describe(),
            "test": ev.gate_test,
            "alpha": ev.gate_alpha if ev.gate_test != "strict" else None,
            "min_margin": ev.gate_min_margin,
            "density_bonus_weight": ev.density_bonus_weight or None,
            "second_look": {"tasks": ev.gate_second_look, "below": ev.gate_second_look_below,
                            "alpha": ev.gate_second_look_alpha} if ev.gate_second_look else None,
        },
        "update": {
            "mode": o.skill_update_mode,
            "lr_control": o.lr_control_mode,
            "accumulation": cfg.train.accumulation,
            "max_skill_tokens": o.max_skill_tokens,
            "rate_fallbacks": sum(1 for r in state.history if r.rate and r.rate.error),
            "reminders_added": sum(r.n_reminders for r in state.history),
        },
        "epoch_updates": [_epoch_update(u) for u in state.epoch_updates],
        "steps": len(state.history),
        "epochs": state.num_epochs,
        "best_step": state.best_step,
        "skills": {"initial": state.initial_hash, "best": state.best_hash,
                   "final": state.current_hash},
        "selection": {"initial": val(state.initial_hash), "best": val(state.best_hash),
                      "final": val(state.current_hash)},
        "test": test_scores,
        "test_delta": deltas,
        "decisions_per_epoch": {e: dict(c) for e, c in sorted(per_epoch.items())},
        "edits": {
            "proposed": sum(r.n_proposed for r in state.history),
            "selected": sum(r.n_selected for r in state.history),
            "applied": sum(r.n_applied for r in state.history),
            "applied_fuzzy": sum(r.n_fuzzy for r in state.history),
            "skipped": sum(r.n_skipped for r in state.history),
            "parse_errors": sum(r.n_parse_errors for r in state.history),
            "unusable_steps": sum(1 for r in state.history if r.unusable),
        },
        "wall_seconds": round(state.wall_seconds, 3),
        "stage_seconds": state.stage_seconds,
        "models": model_usage(state.meter),
    }


def _epoch_update(u: Any) -> dict[str, Any]:
    slow = u.slow_update
    return {
        "epoch": u.epoch,
        "pairs": u.pairs.model_dump(),
        "meta_skill_updated": u.meta_skill_updated,
        "slow_update": None if slow is None else {
            "decision": slow.decision, "candidate": slow.candidate, "current": slow.current,
            "reason": slow.reason},
        "error": u.error,
    }
