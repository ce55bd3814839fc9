"""The harvest adapters by agent name: named by import path and imported only when asked for,
so a session store one does not use costs nothing to have (and an adapter's optional
dependencies stay optional)."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from skillgrad.errors import ConfigError

if TYPE_CHECKING:
    from skillgrad.traces.base import Adapter

# agent name (skillgrad.agentskills.AGENTS) -> "module:class"
ADAPTERS: dict[str, str] = {
    "claude_code": "skillgrad.traces.claude_code:ClaudeCodeAdapter",
    "codex": "skillgrad.traces.codex:CodexAdapter",
    "copilot": "skillgrad.traces.copilot:CopilotAdapter",
    "opencode": "skillgrad.traces.opencode:OpenCodeAdapter",
    "gemini": "skillgrad.traces.gemini:GeminiAdapter",
}


def adapters(names: Iterable[str] | None = None) -> list[Adapter]:
    """Instances of the named adapters (all of them when None), in the order given, each
    once. An unknown name is a :class:`~skillgrad.errors.ConfigError` naming the allowed
    ones."""
    chosen = list(ADAPTERS) if names is None else [names] if isinstance(names, str) \
        else list(names)
    out: list[Adapter] = []
    seen: set[str] = set()
    for name in chosen:
        if name not in ADAPTERS:
            raise ConfigError(f"sleep: unknown agent {name!r} (allowed: "
                              f"{', '.join(ADAPTERS)})")
        if name in seen:
            continue
        seen.add(name)
        module, _, cls = ADAPTERS[name].partition(":")
        out.append(getattr(importlib.import_module(module), cls)())
    return out
