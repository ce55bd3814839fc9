"""Model clients from a config's role sections: the one place a role's backend, retries,
budget, prices, response cache and concurrency limit become a :class:`ModelClient`.

Training, evaluation, export, the Python API and Sleep's judge all build their clients here,
so a role section means the same thing wherever it is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillgrad import registry
from skillgrad.config import ResolvedConfig, RoleSection
from skillgrad.errors import ConfigError
from skillgrad.models.base import ChatModel
from skillgrad.models.client import EndpointLimits, Meter, ModelClient
from skillgrad.models.store import Recording, ReplayModel, ResponseCache
from skillgrad.models.weights import home_dir

ROLES = ("target", "optimizer")


def section_client(model: ChatModel, role: str, spec: RoleSection, base_dir: Path, *,
                   limit: Any = None, meter: Meter | None = None,
                   cache: bool = True) -> ModelClient:
    """``model`` behind the client layer as the role section ``spec`` sets it: retries,
    budget, prices, and (unless ``cache`` is false) the section's response cache, whose
    folder is taken relative to ``base_dir`` (the config's folder)."""
    responses = None
    if cache and spec.cache:
        folder = spec.cache_dir or home_dir() / "responses"
        responses = ResponseCache(folder if folder.is_absolute() else base_dir / folder)
    return ModelClient(
        model, role, max_retries=spec.max_retries, retry_base_delay=spec.retry_base_delay,
        limit=limit, budget=spec.budget, prices=spec.prices, cache=responses, meter=meter)


def build_clients(
    resolved: ResolvedConfig, *, replay: Path | None = None, roles: Sequence[str] = ROLES,
    given: Mapping[str, ChatModel] | None = None,
) -> dict[str, ModelClient]:
    """One client per role, all on one meter. Clients of one endpoint share its concurrency
    limit; with ``replay`` every answer comes from that run directory's recorded calls
    instead. ``given``: model objects of the caller's for some roles (the Python API's), put
    behind the same retries, budget and metering without a cache; one object serving both
    roles keeps one concurrency limit."""
    given = dict(given or {})
    recording = Recording(replay) if replay is not None else None
    models: dict[str, ChatModel] = {}
    limits = EndpointLimits()
    meter = Meter()  # one meter for the run: calls and tokens per role and stage
    execution = resolved.config.execution
    named = [role for role in roles if role not in given]
    for role in named:
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
        clients[role] = section_client(
            model, role, getattr(resolved.config.model, role), resolved.base_dir,
            limit=limits.semaphore(_endpoint(model, role)), meter=meter,
            cache=recording is None)
    given_limits = EndpointLimits()
    for role, model in given.items():
        given_limits.declare(f"object:{id(model)}",
                             getattr(resolved.config.model, role).concurrency)
    for role, model in given.items():
        clients[role] = section_client(
            model, role, getattr(resolved.config.model, role), resolved.base_dir,
            limit=given_limits.semaphore(f"object:{id(model)}"), meter=meter, cache=False)
    return clients


def build_client(resolved: ResolvedConfig, role: str) -> ModelClient:
    """The client of one role (for commands that need only the target)."""
    return build_clients(resolved, roles=(role,))[role]


def role_client(spec: Mapping[str, Any], base_dir: Path, role: str) -> ModelClient:
    """A client from a role section given as plain data (``backend`` and its keys, as under
    ``model.target``), outside a training config: Sleep's judge. A bad section is a
    :class:`ConfigError` naming ``role``."""
    try:
        section = RoleSection.model_validate(spec)
        backend = registry.backend_class(section.backend, key=f"{role}.backend")
        extra = {k: v for k, v in spec.items() if k not in RoleSection.model_fields}
        model = backend.create(backend.Options.model_validate(extra), base_dir)
    except ValueError as exc:  # pydantic's ValidationError is one
        raise ConfigError(f"{role}: {str(exc).splitlines()[0]}") from None
    return section_client(model, role, section, base_dir)


def _endpoint(model: ChatModel, role: str) -> str:
    endpoint = getattr(model, "endpoint", None)
    return str(endpoint) if endpoint else f"{role}:{id(model)}"
