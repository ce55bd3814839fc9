"""Harvest: the sessions local coding agents wrote, one adapter per agent.

Adapters are named by import path in :mod:`.registry` and imported only when asked for.
:class:`~skillgrad.sleep.harvest.harvester.Harvester` walks them for one project.
"""

from __future__ import annotations

from typing import Any

from skillgrad.sleep.harvest.registry import ADAPTERS, adapters

_LAZY = ("Harvester", "HarvestResult", "HarvestPreview", "Skip", "StoreInfo", "SourceInfo")


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from skillgrad.sleep.harvest import harvester
        return getattr(harvester, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ADAPTERS", "adapters", *_LAZY]
