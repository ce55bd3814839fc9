"""Where environments and model backends are found.

Built-in ones register through the same entry points as third-party plugins
(``skillgrad.environments`` and ``skillgrad.backends``), so a plugin is a first-class citizen.
A name of the form ``package.module:Class`` loads that class directly, for an environment or
backend under development that is not installed yet.
"""

from __future__ import annotations

import importlib
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
    if ":" in name:
        return _load_path(name, what, key, origin)
    found = _names(group)
    if name not in found:
        allowed = ", ".join(sorted(found)) or "none installed"
        raise ConfigError(f"{origin}: {key}: unknown {what} {name!r} (allowed: {allowed})")
    return found[name].load()


def _load_path(name: str, what: str, key: str, origin: str) -> Any:
    module_name, _, attr = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{origin}: {key}: cannot import {module_name!r} for {what} {name!r} "
                          f"({exc})") from None
    found = getattr(module, attr, None)
    if found is None or not hasattr(found, "Options") or not hasattr(found, "create"):
        article = "an" if what[0] in "aeiou" else "a"
        raise ConfigError(f"{origin}: {key}: {name!r} is not {article} {what} class (it needs "
                          "Options and create)")
    return found


def describe(group: str) -> list[tuple[str, str, str]]:
    """(name, where it comes from, first docstring line) of every registered plugin."""
    rows = []
    for name, ep in sorted(_names(group).items()):
        try:
            obj = ep.load()
            module = importlib.import_module(obj.__module__)
            doc = (module.__doc__ or obj.__doc__ or "").strip().splitlines()
            summary = doc[0].replace("``", "") if doc else ""
        except ImportError as exc:  # a broken plugin is listed, not fatal
            summary = f"(cannot be loaded: {exc})"
        rows.append((name, ep.value, summary))
    return rows


def environment_class(name: str, *, origin: str = "config") -> Any:
    """The environment class registered as ``name``."""
    return _load(ENV_GROUP, name, "environment", "env.name", origin)


def backend_class(name: str, *, key: str = "model.backend", origin: str = "config") -> Any:
    """The model backend class registered as ``name``."""
    return _load(BACKEND_GROUP, name, "backend", key, origin)
