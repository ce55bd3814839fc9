"""Rollout: the forward pass. The frozen target model does a batch of tasks with the skill.

One skill version's tasks run back to back, so a local backend can reuse the processed skill
prefix. A model failure propagates (it is never a score); a wrong answer is a scored result. A
task too large for the target's context window is neither: its refusal propagates too, naming
the task, and no environment's input is cut to make it fit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from skillgrad.envs.base import Environment, traced_rollout
from skillgrad.models.base import ChatModel
from skillgrad.models.limits import PromptTooLarge
from skillgrad.parallel import fan_out
from skillgrad.records import EvalScore, RolloutResult, Task


def rollout(
    env: Environment,
    tasks: Sequence[Task],
    skill: str,
    model: ChatModel,
    *,
    workers: int = 1,
    on_result: Callable[[RolloutResult], None] | None = None,
) -> list[RolloutResult]:
    """Roll out every task with ``skill``; results come back in task order."""

    def one(task: Task) -> RolloutResult:
        try:
            result = traced_rollout(env, task, skill, model)
        except PromptTooLarge as exc:
            raise exc.at(task=task.id) from exc
        if result.task_id != task.id:
            raise RuntimeError(f"environment returned task {result.task_id!r} for {task.id!r}")
        if on_result is not None:
            on_result(result)
        return result

    return fan_out(one, tasks, workers, "rollout")


def score(results: Sequence[RolloutResult], split: str, skill_hash: str) -> EvalScore:
    """Mean hard and soft score of a set of results."""
    n = len(results)
    return EvalScore(
        split=split,
        skill_hash=skill_hash,
        n=n,
        hard=sum(r.hard for r in results) / n if n else 0.0,
        soft=sum(r.soft for r in results) / n if n else 0.0,
        per_task={r.task_id: (r.hard, r.soft) for r in results},
        skill_loads=skill_loads(results),
        body_on_load=any(isinstance(r.metadata.get("agent"), dict)
                         and r.metadata["agent"].get("placement") == "skill" for r in results),
    )


def references_read(results: Sequence[RolloutResult]) -> dict[str, int] | None:
    """For a skill package whose files the agent could open (an agent target, or the read
    tool of an environment with tools): of the rollouts (``"rollouts"``), how many opened each
    file beside SKILL.md (by path; 0: never read). None otherwise."""
    seen = [r.metadata["references_read"] for r in results
            if isinstance(r.metadata.get("references_read"), dict)]
    if not seen:
        return None
    counts = {"rollouts": len(seen)}
    for read in seen:
        for path, opened in read.items():
            counts[path] = counts.get(path, 0) + bool(opened)
    return counts


def skill_choices(results: Sequence[RolloutResult]) -> list[tuple[RolloutResult, bool]]:
    """The rollouts where loading the skill was the agent's choice, each with whether it did
    (none with no agent target, or with the skill in its memory file)."""
    return [(r, bool(r.metadata["agent"]["skill_loaded"])) for r in results
            if isinstance(r.metadata.get("agent"), dict)
            and r.metadata["agent"].get("skill_loaded") is not None]


def skill_loads(results: Sequence[RolloutResult]) -> tuple[int, int] | None:
    """(rollouts that loaded the skill, rollouts where loading was the agent's choice), or
    None where no rollout's agent chose."""
    seen = skill_choices(results)
    return (sum(loaded for _, loaded in seen), len(seen)) if seen else None
