"""``execution:`` as the executor needs it: where rollouts run, how many at once, and how a
Ray worker makes the target model it answers with."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

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
