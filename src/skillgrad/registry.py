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


def _registered(group: str) -> dict[str, list[Any]]:
    """Every name in ``group`` with its distinct entry points (one, unless two installed
    packages claim the same name; the same target listed twice counts once)."""
    found: dict[str, list[Any]] = {}
    for ep in entry_points(group=group):
        same = found.setdefault(ep.name, [])
        if all(other.value != ep.value for other in same):
            same.append(ep)
    return found


def _names(group: str) -> dict[str, Any]:
    return {name: eps[0] for name, eps in _registered(group).items()}


def claimed(group: str, name: str) -> list[str]:
    """The targets (``module:Class``) registered as ``name`` in ``group``."""
    return [ep.value for ep in _registered(group).get(name, [])]


def environment_names() -> list[str]:
    return sorted(_names(ENV_GROUP))


def backend_names() -> list[str]:
    return sorted(_names(BACKEND_GROUP))


def _load(group: str, name: str, what: str, key: str, origin: str) -> Any:
    if ":" in name:
        return _load_path(name, what, key, origin)
    found = _registered(group)
    if name not in found:
        allowed = ", ".join(sorted(found)) or "none installed"
        raise ConfigError(f"{origin}: {key}: unknown {what} {name!r} (allowed: {allowed})")
    if len(found[name]) > 1:
        targets = ", ".join(ep.value for ep in found[name])
        raise ConfigError(f"{origin}: {key}: {what} {name!r} is registered by more than one "
                          f"installed package ({targets}); uninstall one, or give the class "
                          "itself as package.module:Class")
    return found[name][0].load()


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
    rows: list[tuple[str, str, str]] = []
    for name, eps in sorted(_registered(group).items()):
        rows.extend(_row(name, ep, clash=len(eps) > 1) for ep in eps)
    return rows


def _row(name: str, ep: Any, clash: bool) -> tuple[str, str, str]:
    if clash:
        return name, ep.value, "(name registered more than once: cannot be used by name)"
    try:
        obj = ep.load()
        module = importlib.import_module(obj.__module__)
        doc = (module.__doc__ or obj.__doc__ or "").strip().splitlines()
        summary = doc[0].replace("``", "") if doc else ""
    except ImportError as exc:  # a broken plugin is listed, not fatal
        summary = f"(cannot be loaded: {exc})"
    return name, ep.value, summary


def environment_class(name: str, *, origin: str = "config") -> Any:
    """The environment class registered as ``name``."""
    return _load(ENV_GROUP, name, "environment", "env.name", origin)


def backend_class(name: str, *, key: str = "model.backend", origin: str = "config") -> Any:
    """The model backend class registered as ``name``."""
    return _load(BACKEND_GROUP, name, "backend", key, origin)
