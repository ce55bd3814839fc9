"""Build the objects a run needs (environment, model clients, trainer) from a config."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from skillgrad import registry
from skillgrad.callbacks import TrainerCallback
from skillgrad.config import ResolvedConfig
from skillgrad.envs.base import EnvCommon, Environment
from skillgrad.errors import ConfigError
from skillgrad.models.client import ModelClient
from skillgrad.rundir import RunDir
from skillgrad.trainer import Trainer


def build_environment(resolved: ResolvedConfig) -> Environment:
    env = resolved.config.env
    env_cls = registry.environment_class(env.name)
    common = EnvCommon.model_validate({k: getattr(env, k) for k in EnvCommon.model_fields})
    environment: Environment = env_cls.create(common, resolved.env_options, resolved.base_dir)
    return environment


def build_client(resolved: ResolvedConfig, role: str) -> ModelClient:
    spec = getattr(resolved.config.model, role)
    if spec is None:
        allowed = ", ".join(registry.backend_names())
        raise ConfigError(
            f"model.{role}: no backend configured (set model.{role}.backend; allowed: {allowed})"
        )
    backend = registry.backend_class(spec.backend, key=f"model.{role}.backend")
    model = backend.create(resolved.role_options[role], resolved.base_dir)
    return ModelClient(model, role, concurrency=spec.concurrency, max_retries=spec.max_retries,
                       retry_base_delay=spec.retry_base_delay)


def build_trainer(
    resolved: ResolvedConfig,
    out: Path,
    *,
    callbacks: Sequence[TrainerCallback] = (),
    allow_config_change: bool = False,
) -> Trainer:
    env = build_environment(resolved)
    return Trainer(resolved, env, build_client(resolved, "target"),
                   build_client(resolved, "optimizer"), RunDir(out), callbacks=callbacks,
                   allow_config_change=allow_config_change)
