"""Score one skill on one split, outside training (``skillgrad eval``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillgrad.build import build_environment
from skillgrad.clients import build_client
from skillgrad.config import ResolvedConfig
from skillgrad.errors import DataError, RunDirError
from skillgrad.execution import rollout_environment
from skillgrad.models.client import CallJournal
from skillgrad.models.usage import model_usage
from skillgrad.rundir import WorkDir
from skillgrad.settings import execution_settings, split_cap
from skillgrad.skill import skill_hash
from skillgrad.stages.rollout import rollout, score
from skillgrad.version import __version__


def evaluate_skill(
    resolved: ResolvedConfig,
    skill: str | None,
    split: str,
    out: Path,
    *,
    on_result: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Roll the skill out on the tasks of ``split`` a run would use (its cap:
    ``train.train_size``, ``evaluation.sel_env_num`` or ``test_env_num``) and write
    ``eval_summary.json``.

    ``skill`` None scores the skill a training run would start from (``env.skill_init``, else
    the environment's shipped one); ``""`` scores no skill at all, the baseline. Model calls
    are journaled in ``out``, so an interrupted evaluation resumes for free."""
    if out.exists() and not out.is_dir():
        raise RunDirError(f"{out}: is a file, not a folder for the evaluation; use another --out")
    env = build_environment(resolved)
    if skill is None:
        skill = env.initial_skill()
    tasks = env.tasks(split)  # type: ignore[arg-type]
    if not tasks:
        raise DataError(f"the {split} split is empty")
    cap = split_cap(resolved.config, split)
    tasks = tasks[:cap] if cap else tasks
    client = build_client(resolved, "target")
    folder = WorkDir(out)
    journal = CallJournal(folder.calls_path)
    started = time.monotonic()
    with rollout_environment(env, execution_settings(resolved)) as where:
        results = rollout(where, tasks, skill, client.for_stage(f"eval_{split}", journal),
                          workers=resolved.config.execution.rollout_workers,
                          on_result=on_result)
    result = score(results, split, skill_hash(skill))
    folder.rollouts(results)
    summary = {
        "skillgrad_version": __version__,
        "env": resolved.config.env.name,
        "split": split,
        "skill_hash": result.skill_hash,
        "n": result.n,
        "hard": result.hard,
        "soft": result.soft,
        "failures": [{"task_id": r.task_id, "reason": r.reason} for r in results if not r.success],
        "wall_seconds": round(time.monotonic() - started, 3),
        "models": model_usage(client.meter.to_json()),
    }
    folder.eval_summary(summary)
    return summary
