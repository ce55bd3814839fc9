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

from skillgrad.envs.base import Environment
from skillgrad.execution.settings import Backend, ExecutionSettings, ModelSpec

__all__ = ["Backend", "ExecutionSettings", "ModelSpec", "rollout_environment"]


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
