"""Where environments and model backends are found.

Built-in ones register through the same entry points as third-party plugins
(``skillgrad.environments`` and ``skillgrad.backends``), so a plugin is a first-class citizen.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any

from skillgrad.errors import ConfigError

ENV_GROUP = "skillgrad.environments"
BACKEND_GROUP = "skillgrad.backends"


def _names(group: str) -> dict[str, Any]:
    return {ep.name: ep for ep in entry_points(group=group)}


def environment_names() -> list[str]:
    return sorted(_names(ENV_GROUP))


def backend_names() -> list[str]:
    return sorted(_names(BACKEND_GROUP))


def _load(group: str, name: str, what: str, key: str, origin: str) -> Any:
    found = _names(group)
    if name not in found:
        allowed = ", ".join(sorted(found)) or "none installed"
        raise ConfigError(f"{origin}: {key}: unknown {what} {name!r} (allowed: {allowed})")
    return found[name].load()


def environment_class(name: str, *, origin: str = "config") -> Any:
    """The environment class registered as ``name``."""
    return _load(ENV_GROUP, name, "environment", "env.name", origin)


def backend_class(name: str, *, key: str = "model.backend", origin: str = "config") -> Any:
    """The model backend class registered as ``name``."""
    return _load(BACKEND_GROUP, name, "backend", key, origin)
