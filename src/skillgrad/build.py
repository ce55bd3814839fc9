"""Build a run's environment from a config, its task ids checked. Model clients are built by
:mod:`skillgrad.clients`, the trainer by :func:`skillgrad.trainer.build_trainer`."""

from __future__ import annotations

from skillgrad.config import ResolvedConfig
from skillgrad.envs.base import SPLITS, EnvCommon, Environment, Split
from skillgrad.errors import DataError


def build_environment(resolved: ResolvedConfig) -> Environment:
    """The environment of the config, with its task ids checked for repeats."""
    env = resolved.config.env
    common = EnvCommon.model_validate({k: getattr(env, k) for k in EnvCommon.model_fields})
    environment: Environment = resolved.env_class.create(common, resolved.env_options,
                                                         resolved.base_dir)
    check_task_ids(environment, env.name)
    return environment


def check_task_ids(environment: Environment, name: str) -> None:
    """Refuse an environment whose task ids repeat, within a split or across splits: scores,
    the gate's paired test, the rollout cache and resume are all keyed by task id, so a repeat
    would silently merge two tasks (or leak a training task into the test)."""
    seen: dict[str, Split] = {}
    for split in SPLITS:
        for task in environment.tasks(split):
            if task.id in seen:
                raise DataError(
                    f"env {name}: task id {task.id!r} is in the {seen[task.id]} split and again "
                    f"in {split}; task ids must be unique")
            seen[task.id] = split
