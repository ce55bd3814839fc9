"""Build the objects a run needs (environment, model clients, trainer) from a config."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from skillgrad.callbacks import TrainerCallback
from skillgrad.config import ResolvedConfig
from skillgrad.envs.base import SPLITS, EnvCommon, Environment, Split
from skillgrad.errors import DataError
from skillgrad.models.base import ChatModel
from skillgrad.models.client import EndpointLimits, Meter, ModelClient
from skillgrad.models.store import Recording, ReplayModel, ResponseCache
from skillgrad.models.weights import home_dir
from skillgrad.records import RejectedStep
from skillgrad.rundir import RunDir
from skillgrad.tracking import tracker_callbacks
from skillgrad.trainer import Trainer

ROLES = ("target", "optimizer")


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


def build_clients(
    resolved: ResolvedConfig, *, replay: Path | None = None, roles: Sequence[str] = ROLES
) -> dict[str, ModelClient]:
    """One client per role. Clients of one endpoint share its concurrency limit; with
    ``replay`` every answer comes from that run directory's recorded calls instead."""
    recording = Recording(replay) if replay is not None else None
    models: dict[str, ChatModel] = {}
    limits = EndpointLimits()
    meter = Meter()  # one meter for the run: calls and tokens per role and stage
    execution = resolved.config.execution
    for role in roles:
        spec = getattr(resolved.config.model, role)
        concurrency = spec.concurrency
        if recording is not None:
            models[role] = ReplayModel(recording, role)
        elif role == "target" and execution.ray_target == "workers":
            # Each worker answers with its own copy of the model, one call at a time.
            from skillgrad.execution.ray_workers import RayWorkerModel

            models[role] = RayWorkerModel(endpoint=f"ray-workers:{role}")
            concurrency = execution.ray_workers or execution.rollout_workers
        else:
            backend = resolved.backend_classes[role]
            models[role] = backend.create(resolved.role_options[role], resolved.base_dir)
        limits.declare(_endpoint(models[role], role), concurrency)
    clients = {}
    for role, model in models.items():
        spec = getattr(resolved.config.model, role)
        cache = None
        if spec.cache and recording is None:
            folder = spec.cache_dir or home_dir() / "responses"
            cache = ResponseCache(folder if folder.is_absolute() else resolved.base_dir / folder)
        clients[role] = ModelClient(
            model, role, max_retries=spec.max_retries, retry_base_delay=spec.retry_base_delay,
            limit=limits.semaphore(_endpoint(model, role)), budget=spec.budget,
            prices=spec.prices, cache=cache, meter=meter,
        )
    return clients


def build_client(resolved: ResolvedConfig, role: str) -> ModelClient:
    """The client of one role (for commands that need only the target)."""
    return build_clients(resolved, roles=(role,))[role]


def _endpoint(model: ChatModel, role: str) -> str:
    endpoint = getattr(model, "endpoint", None)
    return str(endpoint) if endpoint else f"{role}:{id(model)}"


def build_trainer(
    resolved: ResolvedConfig,
    out: Path,
    *,
    callbacks: Sequence[TrainerCallback] = (),
    allow_config_change: bool = False,
    replay: Path | None = None,
    prior_rejected: Sequence[RejectedStep] = (),
) -> Trainer:
    """``prior_rejected``: changes an earlier run rejected, shown to the optimizer from the
    start (a sleep night carries the last night's over). The trackers of the config's
    ``tracking:`` section follow ``callbacks``; a replay has none (it reproduces a recorded
    run and logs no second one)."""
    run = RunDir(out)
    env = build_environment(resolved)
    clients = build_clients(resolved, replay=replay)
    trackers = [] if replay is not None else tracker_callbacks(
        resolved, run, [c.meter for c in clients.values()])
    return Trainer(resolved, env, clients["target"], clients["optimizer"], run,
                   callbacks=[*callbacks, *trackers], allow_config_change=allow_config_change,
                   prior_rejected=prior_rejected)
