"""Experiment trackers: the run logged to MLflow or Weights & Biases, as a network's training
is logged to TensorBoard, by trainer callbacks that the ``tracking:`` section of a config asks
for (:mod:`skillgrad.tracking.base` says what they log and when).

Neither library is needed unless a config names it: each is imported only here, when its
tracker is made, and a missing one stops the run before any model call, in one line that
says what to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from skillgrad.config import ResolvedConfig
from skillgrad.errors import ConfigError
from skillgrad.models.client import Meter
from skillgrad.rundir import RunDir
from skillgrad.tracking.base import Tracker

__all__ = ["Tracker", "tracker_callbacks"]

# tracking.<key>: (the module imported, the library's name in the message)
LIBRARIES = {"mlflow": ("mlflow.tracking", "MLflow"), "wandb": ("wandb", "W&B")}


def tracker_callbacks(resolved: ResolvedConfig, run: RunDir,
                      meters: Sequence[Meter] = ()) -> list[Tracker]:
    """The trackers the config's ``tracking:`` section asks for, logging the run in ``run``
    (``meters``: the model clients' meters, for the calls and tokens so far). Nothing is
    contacted yet: each tracker starts its run at the trainer's first hook.

    Raises:
        ConfigError: a tracker's library is not installed.
    """
    section = resolved.config.tracking
    trackers: list[Tracker] = []
    if section.mlflow is not None:
        _require("mlflow")
        from skillgrad.tracking.mlflow import MlflowTracker

        trackers.append(MlflowTracker(resolved, run, meters))
    if section.wandb is not None:
        _require("wandb")
        from skillgrad.tracking.wandb import WandbTracker

        trackers.append(WandbTracker(resolved, run, meters))
    return trackers


def _require(key: str) -> None:
    module, name = LIBRARIES[key]
    try:
        importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"tracking.{key} needs {name}: pip install 'skillgrad[{key}]'") from None
