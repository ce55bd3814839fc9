"""``skillgrad train --dry-run``: what a run will ask of its models, before it asks anything.

The plan counts, from the config and the environment's tasks (read, never rolled out), the
most calls each stage can make and their tokens: prompts estimated from the skill and the
tasks' text without a tokenizer (:func:`~skillgrad.skill.estimate_tokens`), completions at
their limit. Real runs use fewer: a step whose batch is all solved reflects less, a skipped
step validates nothing, and a skill already scored is not scored again. With ``prices`` on a
role the plan also gives the most it can cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from skillgrad.config import ResolvedConfig
from skillgrad.envs.base import Environment
from skillgrad.records import Task
from skillgrad.settings import resamples, split_cap
from skillgrad.skill import estimate_tokens
from skillgrad.stages.judge import JudgeSettings
from skillgrad.state import steps_per_epoch

# A reply the environment does not bound (its own max_tokens) is counted at this many tokens.
DEFAULT_REPLY = 512
# What an optimizer prompt holds besides the trajectories it is shown (its template, the skill).
OPTIMIZER_OVERHEAD = 800
JUDGE_REPLY = JudgeSettings().max_tokens or DEFAULT_REPLY


@dataclass
class Line:
    role: str
    stage: str
    calls: int
    prompt_tokens: int
    completion_tokens: int


@dataclass
class Plan:
    lines: list[Line] = field(default_factory=list)
    steps: int = 0
    splits: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, role: str, stage: str, calls: int, prompt: int, completion: int) -> None:
        if calls > 0:
            self.lines.append(Line(role, stage, calls, calls * prompt, calls * completion))

    def totals(self, role: str) -> tuple[int, int, int]:
        mine = [x for x in self.lines if x.role == role]
        return (sum(x.calls for x in mine), sum(x.prompt_tokens for x in mine),
                sum(x.completion_tokens for x in mine))


def plan_run(resolved: ResolvedConfig, env: Environment) -> Plan:
    """The most a training run of ``resolved`` over ``env`` will ask of its models."""
    cfg = resolved.config
    tasks = {split: _capped(env.tasks(split), split_cap(cfg, split))
             for split in ("train", "val", "test")}
    plan = Plan(splits={k: len(v) for k, v in tasks.items()})
    skill = estimate_tokens(env.initial_skill())
    reply = int(getattr(resolved.env_options, "max_tokens", DEFAULT_REPLY) or DEFAULT_REPLY)
    t, g, o = cfg.train, cfg.gradient, cfg.optimizer
    per_epoch = steps_per_epoch(len(tasks["train"]), t.batch_size * t.accumulation,
                                t.steps_per_epoch)
    plan.steps = per_epoch * t.num_epochs
    batch = min(t.batch_size, len(tasks["train"])) * t.accumulation

    def prompt(split: str) -> int:
        items = tasks[split] or tasks["train"]
        mean = sum(estimate_tokens(x.prompt) for x in items) / max(1, len(items))
        return skill + math.ceil(mean)

    n_val = len(tasks["val"])
    plan.add("target", "eval_val", n_val * (1 + plan.steps), prompt("val"), reply)
    plan.add("target", "rollout", batch * plan.steps, prompt("train"), reply)
    candidates = g.proposals + g.line_ablations + int(g.skill_ablation)
    # A step whose proposals made no new skill samples these once more; the first ones were
    # not rolled out then, so the screen's count holds them.
    sampled = g.proposals + len(resamples(cfg)) if g.proposals > 1 else 1
    if candidates > 1:
        # with drop_riders, about: each added rule, and each sentence of a rule of two, left
        # out in turn, one fewer each round
        pieces = 2 * o.learning_rate
        riders = pieces * (pieces + 1) // 2 - 1 if g.drop_riders else 0
        # a second look: the tied candidates and the current skill on as many more tasks
        second = min(g.tie_break, candidates) + 1 if g.tie_break else 0
        plan.add("target", "screen", batch * (candidates + riders + second) * plan.steps,
                 prompt("train"), reply)
    looks = min(cfg.evaluation.gate_second_look, len(tasks["train"]))
    if looks:  # at most once a step: the candidate and the current skill on unseen tasks
        plan.add("target", "second_look", 2 * looks * plan.steps, prompt("train"), reply)
    analysts = math.ceil(batch / g.minibatch_size) * (1 if g.failure_only else 2)
    shown = min(g.max_trajectory_chars // 4, reply + prompt("train")) * g.minibatch_size
    if g.failure_judge:  # at most one review per rollout, of the failed ones
        plan.add("optimizer", "judge", batch * plan.steps, OPTIMIZER_OVERHEAD + min(
            g.max_trajectory_chars // 4, reply + prompt("train")), JUDGE_REPLY)
    plan.add("optimizer", "reflect", analysts * sampled * plan.steps,
             OPTIMIZER_OVERHEAD + skill + shown, o.max_tokens)
    merges = max(0, analysts - 1)
    plan.add("optimizer", "aggregate", merges * sampled * plan.steps,
             OPTIMIZER_OVERHEAD + skill + o.max_tokens * min(analysts, g.merge_batch_size),
             o.max_tokens)
    plan.add("optimizer", "select", sampled * plan.steps,
             OPTIMIZER_OVERHEAD + skill + o.max_tokens, o.max_tokens)
    if o.use_slow_update and t.num_epochs > 1:
        epochs = t.num_epochs - 1
        plan.add("target", "slow_update", 2 * o.slow_update_samples * epochs, prompt("train"),
                 reply)
        plan.add("optimizer", "slow_update", epochs, OPTIMIZER_OVERHEAD + skill + 2 * reply *
                 o.slow_update_samples, o.max_tokens)
        plan.add("target", "eval_val", n_val * epochs, prompt("val"), reply)
    if o.use_meta_skill:
        plan.add("optimizer", "meta_skill", t.num_epochs, OPTIMIZER_OVERHEAD + skill,
                 o.max_tokens)
    if cfg.evaluation.eval_test:
        plan.add("target", "eval_test", 3 * len(tasks["test"]), prompt("test"), reply)
    turns = getattr(resolved.env_options, "max_turns", 1)
    if isinstance(turns, int) and turns > 1:
        plan.notes.append(f"each task may take up to {turns} target calls (env.max_turns); "
                          "counted here as one")
    return plan


def _capped(tasks: list[Task], cap: int | None) -> list[Task]:
    return tasks if cap is None else tasks[:cap]


def cost(resolved: ResolvedConfig, plan: Plan, role: str) -> float | None:
    prices = getattr(resolved.config.model, role).prices
    if prices is None:
        return None
    _, prompt, completion = plan.totals(role)
    return prices.cost(prompt, completion)


def time_bound(plan: Plan, role: str, speed: tuple[float, float]) -> float:
    """The most seconds ``role``'s planned calls take at ``speed`` (prompt and generated
    tokens per second): every prompt evaluated whole and every reply at its limit. A run takes
    less: replies end early, and a prompt whose skill prefix a context holds evaluates only
    the rest."""
    _, prompt, completion = plan.totals(role)
    return prompt / speed[0] + completion / speed[1]


def as_rows(resolved: ResolvedConfig, plan: Plan) -> list[dict[str, Any]]:
    rows = [{"role": x.role, "stage": x.stage, "calls": x.calls,
             "prompt_tokens": x.prompt_tokens, "completion_tokens": x.completion_tokens}
            for x in plan.lines]
    for role in ("target", "optimizer"):
        calls, prompt, completion = plan.totals(role)
        rows.append({"role": role, "stage": "total", "calls": calls, "prompt_tokens": prompt,
                     "completion_tokens": completion, "cost": cost(resolved, plan, role)})
    return rows
