"""SkillOpt's ``train``, ``gradient``, ``optimizer`` and ``evaluation`` keys.

Most have the same name and meaning here and are carried over. The rest, with SkillOpt 0.2.0's
meaning (its ``skillopt/engine/trainer.py``, ``optimizer/`` and ``evaluation/gate.py``):

* ``gradient.max_analyst_rounds`` and ``optimizer.meta_learning_rate`` are read by SkillOpt
  and never used;
* ``lr_scheduler: autonomous`` lifts the edit budget (999), i.e. every merged edit is applied;
* ``lr_control_mode: none`` budgets exactly like ``fixed`` outside whole-document rewrites,
  and ``autonomous`` lets the optimizer keep up to every ranked edit (no ceiling);
* the aliases SkillOpt accepts for the update mode, the learning-rate mode and the pair policy;
* ``use_gate`` is off only for a literal ``false``;
* ``slow_update_gate_with_selection: false`` writes the slow update in without validation,
  which skillgrad never does (every change goes through the gate).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from skillgrad.skillopt.notes import CompatNote

if TYPE_CHECKING:
    from skillgrad.skillopt.work import Work

SKILLOPT_ONLY = frozenset({
    "gradient.max_analyst_rounds",
    "optimizer.meta_learning_rate",
    "optimizer.slow_update_gate_with_selection",
})

# SkillOpt's completion limit of every optimizer call (not a key there).
OPTIMIZER_MAX_TOKENS = 16384
# Its edit budget under lr_scheduler: autonomous, and the ceiling of lr_control_mode:
# autonomous (both: no limit).
NO_LIMIT = 999

_UPDATE_MODES = {
    "patch": "patch", "edits": "patch",
    "rewrite_from_suggestions": "rewrite_from_suggestions", "rewrite": "rewrite_from_suggestions",
    "suggestions": "rewrite_from_suggestions",
    "rewrite_suggestions": "rewrite_from_suggestions",
    "full_rewrite_minibatch": "full_rewrite_minibatch", "full_rewrite": "full_rewrite_minibatch",
    "minibatch_full_rewrite": "full_rewrite_minibatch",
    "skill_rewrite_minibatch": "full_rewrite_minibatch",
}
_LR_MODES = {
    "fixed": "fixed", "manual": "fixed", "scheduler": "fixed", "scheduled": "fixed",
    "autonomous": "autonomous", "auto": "autonomous", "optimizer": "autonomous",
    "none": "none", "off": "none", "no_lr": "none",
}
_PAIR_POLICIES = {
    "mixed": "mixed", "default": "mixed", "random": "mixed", "all": "mixed",
    "changed": "changed", "change": "changed", "delta": "changed", "10_01": "changed",
    "01_10": "changed",
    "unchanged": "unchanged", "stable": "unchanged", "same": "unchanged", "00_11": "unchanged",
}


def translate(work: Work) -> None:
    _unused(work)
    _aliases(work)
    _learning_rate(work)
    _gate(work)
    if not work.has("optimizer.max_tokens"):
        work.put("optimizer.max_tokens", OPTIMIZER_MAX_TOKENS,
                 "SkillOpt's completion limit of every optimizer call")
    for key in ("train.train_size", "evaluation.sel_env_num", "evaluation.test_env_num"):
        if work.peek(key) == "":
            work.note(key, "inert", "empty: all")


def _unused(work: Work) -> None:
    for key in ("gradient.max_analyst_rounds", "optimizer.meta_learning_rate"):
        if work.has(key):
            work.note(key, "inert", "SkillOpt 0.2.0 reads it but nothing uses it")
    if work.has("optimizer.slow_update_gate_with_selection"):
        gated = work.peek("optimizer.slow_update_gate_with_selection")
        if gated is True:
            work.note("optimizer.slow_update_gate_with_selection", "inert",
                      "skillgrad gates every slow update, as asked")
        else:
            work.note("optimizer.slow_update_gate_with_selection", "differs",
                      "skillgrad gates every slow update on the selection split; SkillOpt "
                      "writes it in unvalidated when this is false")


def _alias(work: Work, key: str, table: dict[str, str]) -> None:
    value = work.peek(key)
    if isinstance(value, str) and value.strip().lower() in table:
        canonical = table[value.strip().lower()]
        if canonical != value:
            work.keep(key, canonical)


def _aliases(work: Work) -> None:
    _alias(work, "optimizer.skill_update_mode", _UPDATE_MODES)
    _alias(work, "optimizer.lr_control_mode", _LR_MODES)
    _alias(work, "optimizer.longitudinal_pair_policy", _PAIR_POLICIES)
    source = work.peek("optimizer.skill_aware_appendix_source")
    if isinstance(source, str) and source not in ("both", "failure_only"):
        work.keep("optimizer.skill_aware_appendix_source", "both")  # SkillOpt: anything else
    metric = work.peek("evaluation.gate_metric")
    if isinstance(metric, str):
        work.keep("evaluation.gate_metric", metric.strip().lower())


def _learning_rate(work: Work) -> None:
    scheduler = work.peek("optimizer.lr_scheduler")
    mode = work.out.get("optimizer.lr_control_mode", work.peek("optimizer.lr_control_mode"))
    if mode == "none":
        work.keep("optimizer.lr_control_mode", "fixed")
        work.notes.append(CompatNote("optimizer.lr_control_mode",
                                     work.at("optimizer.lr_control_mode"), "mapped",
                                     "none budgets like fixed in SkillOpt 0.2.0",
                                     "optimizer.lr_control_mode: fixed"))
        mode = "fixed"
    if scheduler == "autonomous":
        work.take("optimizer.lr_scheduler")
        if mode in (None, "fixed"):
            work.put("optimizer.lr_control_mode", "none",
                     "lr_scheduler: autonomous lifts the edit budget: every merged edit",
                     source="optimizer.lr_scheduler")
    if mode == "autonomous" and not work.has("optimizer.lr_ceiling"):
        work.put("optimizer.lr_ceiling", NO_LIMIT,
                 "SkillOpt's autonomous learning rate has no ceiling",
                 source="optimizer.lr_control_mode")


def _gate(work: Work) -> None:
    use = work.peek("evaluation.use_gate")
    if work.has("evaluation.use_gate") and not isinstance(use, bool):
        work.keep("evaluation.use_gate", use is not False)  # SkillOpt: only false turns it off
    if not work.has("evaluation.gate_test"):
        work.notes.append(CompatNote(
            "evaluation.gate_test", "", "differs",
            "skillgrad's honest gate (paired bootstrap, alpha 0.05) decides; SkillOpt's "
            "accepts any higher mean: set evaluation.gate_test: strict for that"))

