"""From the config to the settings each stage is handed: the one place where config keys are
translated into stage arguments (the stages themselves never read the config).

``context`` is what the optimizer is shown besides the trajectories, which changes as training
goes on: its notes (the meta skill), the rejected buffer and the step history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillgrad.config import ResolvedConfig, SkillgradConfig
from skillgrad.execution import ExecutionSettings, ModelSpec
from skillgrad.records import RejectedStep, StepRecord
from skillgrad.stages.aggregate import MergeSettings
from skillgrad.stages.candidate import CandidateSettings, size_note
from skillgrad.stages.gate import GateRule
from skillgrad.stages.judge import JudgeSettings
from skillgrad.stages.reflect import ReflectSettings
from skillgrad.stages.render import render_meta, render_rejected
from skillgrad.stages.schedule import edit_budget
from skillgrad.stages.select import SelectSettings, render_history


@dataclass(frozen=True)
class OptimizerContext:
    """What later optimizer calls read of the run so far."""

    meta_skill: str = ""
    rejected: Sequence[RejectedStep] = ()
    history: Sequence[StepRecord] = ()


def sampling(cfg: SkillgradConfig) -> dict[str, Any]:
    """The completion limit and temperature of optimizer calls."""
    return {"max_tokens": cfg.optimizer.max_tokens, "temperature": cfg.optimizer.temperature}


def execution_settings(resolved: ResolvedConfig) -> ExecutionSettings:
    e = resolved.config.execution
    target = None
    if e.ray_target == "workers":
        target = ModelSpec(resolved.backend_classes["target"], resolved.role_options["target"],
                           resolved.base_dir)
    return ExecutionSettings(
        backend=e.backend, workers=e.ray_workers or e.rollout_workers, ray_address=e.ray_address,
        ray_cpus_per_worker=e.ray_cpus_per_worker, ray_start_timeout=e.ray_start_timeout,
        ray_runtime_env=dict(e.ray_runtime_env), target_on_workers=target)


def split_cap(cfg: SkillgradConfig, split: str) -> int | None:
    """How many of a split's tasks a run uses (None: all): ``train.train_size``,
    ``evaluation.sel_env_num``, ``evaluation.test_env_num``."""
    return {"train": cfg.train.train_size, "val": cfg.evaluation.sel_env_num,
            "test": cfg.evaluation.test_env_num}[split]


def max_edits_per_call(cfg: SkillgradConfig) -> int:
    """The most edits one analyst or merge call may propose."""
    cap = cfg.gradient.max_edits_per_call
    return cap if cap is not None else max(2, 2 * cfg.optimizer.learning_rate)


def step_budget(cfg: SkillgradConfig, global_step: int, total_steps: int) -> int:
    """The edit budget (text learning rate) of 0-based ``global_step``."""
    o = cfg.optimizer
    return edit_budget(global_step, total_steps, o.learning_rate, o.min_learning_rate,
                       o.lr_scheduler)


def meta_text(cfg: SkillgradConfig, context: OptimizerContext) -> str:
    return render_meta(context.meta_skill) if cfg.optimizer.use_meta_skill else ""


def rejected(cfg: SkillgradConfig, context: OptimizerContext) -> Sequence[RejectedStep]:
    """The rejected buffer as optimizer calls see it (empty when the buffer is off)."""
    return context.rejected if cfg.optimizer.use_rejected_buffer else []


def sample_temperature(cfg: SkillgradConfig, sample: int) -> float:
    """The analysts' temperature for proposal ``sample`` of a step: the configured one for the
    first; for each other, 0.2 hotter than the one before, from at least 0.7, so that a model
    with a fixed sampling seed (the embedded one) still writes a different reply each time."""
    base = cfg.optimizer.temperature
    return base if sample == 0 else round(max(base, 0.5) + 0.2 * sample, 3)


# The hottest a proposal sampled once more is asked at: hotter, a small model's reply is
# seldom JSON, and an OpenAI-compatible endpoint refuses above 2.
MAX_RESAMPLE_TEMPERATURE = 1.5


def resamples(cfg: SkillgradConfig) -> list[int]:
    """The proposals a step samples once more when none of its ``gradient.proposals`` made a
    new skill: as many again, numbered on, those whose temperature is at most
    :data:`MAX_RESAMPLE_TEMPERATURE` (with 3 proposals from 0: 3, 4, 5 at 1.1, 1.3, 1.5)."""
    n = cfg.gradient.proposals
    return [k for k in range(n, 2 * n)
            if sample_temperature(cfg, k) <= MAX_RESAMPLE_TEMPERATURE + 1e-9]


def judge_settings(resolved: ResolvedConfig) -> JudgeSettings:
    """The outcome-blind reviewer's settings (``gradient.failure_judge``): it reads as much of
    an episode as an analyst does, with the analysts' workers and temperature, and knows
    whether the environment gives the agent more than one turn (``env.max_turns``)."""
    g, o = resolved.config.gradient, resolved.config.optimizer
    turns = getattr(resolved.env_options, "max_turns", 1)
    return JudgeSettings(workers=g.analyst_workers, max_episode_chars=g.max_trajectory_chars,
                         temperature=o.temperature, multi_turn=isinstance(turns, int)
                         and turns > 1)


def reflect_settings(cfg: SkillgradConfig, skill: str, context: OptimizerContext,
                     sample: int = 0) -> ReflectSettings:
    """The reflect settings of proposal ``sample`` of a step (``gradient.proposals``)."""
    g, o = cfg.gradient, cfg.optimizer
    return ReflectSettings(
        minibatch_size=g.minibatch_size, workers=g.analyst_workers,
        failure_only=g.failure_only, max_trajectory_chars=g.max_trajectory_chars,
        max_edits=max_edits_per_call(cfg), max_tokens=o.max_tokens,
        temperature=sample_temperature(cfg, sample), form=g.proposal_form,
        mode=o.skill_update_mode, skill_aware=o.use_skill_aware_reflection,
        reminders_from=o.skill_aware_appendix_source, meta=meta_text(cfg, context),
        constraints=size_note(skill, o.max_skill_tokens),
        rewrite_max_tokens=o.rewrite_max_tokens,
    )


def runs_scripts(cfg: SkillgradConfig) -> bool:
    """Whether the rollouts can run a skill package's scripts, so that a change to one is
    exercised: an agent target, which gets the package as its folder (in any environment,
    the coding one included). Every other target reads the scripts as text."""
    return cfg.model.target.backend == "agent"


def candidate_settings(
    cfg: SkillgradConfig, skill: str, context: OptimizerContext
) -> CandidateSettings:
    g, o = cfg.gradient, cfg.optimizer
    meta = meta_text(cfg, context)
    kind = "suggestions" if o.skill_update_mode == "rewrite_from_suggestions" else "edits"
    return CandidateSettings(
        mode=o.skill_update_mode,
        merge=MergeSettings(merge_batch_size=g.merge_batch_size, workers=g.analyst_workers,
                            max_edits=max_edits_per_call(cfg), meta=meta,
                            form=g.proposal_form, **sampling(cfg)),
        select=SelectSettings(mode=o.lr_control_mode, ceiling=o.ceiling, kind=kind,
                              rejected_text=render_rejected(rejected(cfg, context)),
                              meta=meta, history=render_history(context.history),
                              **sampling(cfg)),
        fuzzy_threshold=o.fuzzy_threshold, scripts=runs_scripts(cfg),
        skill_aware=o.use_skill_aware_reflection,
        reminders_from=o.skill_aware_appendix_source,
        consolidate_threshold=o.skill_aware_consolidate_threshold, meta=meta,
        constraints=size_note(skill, o.max_skill_tokens),
        rewrite_max_tokens=o.rewrite_max_tokens, max_skill_tokens=o.max_skill_tokens,
        train_description=o.train_description, **sampling(cfg),
    )


def gate_rule(cfg: SkillgradConfig) -> GateRule:
    ev = cfg.evaluation
    return GateRule(metric=ev.gate_metric, mixed_weight=ev.gate_mixed_weight,
                    use_gate=ev.use_gate, test=ev.gate_test, alpha=ev.gate_alpha,
                    min_margin=ev.gate_min_margin, bootstrap_samples=ev.gate_bootstrap_samples,
                    density_weight=ev.density_bonus_weight, seed=cfg.train.seed,
                    no_regression=ev.gate_no_regression, second_look=ev.gate_second_look,
                    second_look_below=ev.gate_second_look_below,
                    second_look_alpha=ev.gate_second_look_alpha)
