"""Where rollouts run: in this process (threads, :mod:`skillgrad.parallel`) or on a Ray cluster
(:mod:`skillgrad.execution.ray_workers`): the data-parallel workers of the forward pass.

Either way the model calls go through this process's client layer (its per-endpoint limits,
metering, budget, cache and journal), so a cluster never exceeds an endpoint's concurrency, a
run resumes and replays from its journal the same way, and its results equal local execution's.
The target model itself may run in the workers (each loads it once): the client layer here
still decides each call, and only the answering happens there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from skillgrad.envs.base import Environment
from skillgrad.models.base import ChatModel

Backend = Literal["local", "ray"]


@dataclass(frozen=True)
class ModelSpec:
    """How to make a model where it runs: a backend class, its options, and the folder its
    relative paths are read from."""

    backend: Any
    options: Any
    base_dir: Path

    def create(self) -> ChatModel:
        model: ChatModel = self.backend.create(self.options, self.base_dir)
        return model


@dataclass(frozen=True)
class ExecutionSettings:
    """``execution:`` as the executor needs it (see the config's ExecutionSection).

    ``target_on_workers``: the target model each Ray worker makes once and answers its own
    episodes' calls with (``execution.ray_target: workers``); None: the calls are answered here.
    """

    backend: Backend = "local"
    workers: int = 1  # rollouts in flight at once
    ray_address: str | None = None
    ray_cpus_per_worker: float = 1.0
    ray_start_timeout: float = 120.0
    ray_runtime_env: dict[str, Any] = field(default_factory=dict)
    target_on_workers: ModelSpec | None = None


@contextmanager
def rollout_environment(env: Environment, settings: ExecutionSettings) -> Iterator[Environment]:
    """The environment whose ``rollout`` runs where ``settings`` say: ``env`` itself, or a view
    of it whose rollouts run on Ray workers (started here, stopped on leaving)."""
    if settings.backend == "local":
        yield env
        return
    from skillgrad.execution.ray_workers import ray_environment  # the ray extra

    with ray_environment(env, settings) as remote:
        yield remote
