"""Experiment trackers: the run logged to MLflow, Weights & Biases or TensorBoard, as a
network's training is logged to TensorBoard, by trainer callbacks that the ``tracking:``
section of a config asks for (:mod:`skillgrad.tracking.base` says what they log and when).

No tracker's library is needed unless a config names it: each is imported only here, when its
tracker is made, and a missing one stops the run before any model call, in one line that
says what to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from skillgrad.config import ResolvedConfig
from skillgrad.errors import ConfigError
from skillgrad.models.client import Meter
from skillgrad.redact import redact_url
from skillgrad.rundir import RunDir
from skillgrad.tracking.base import Tracker

__all__ = ["Tracker", "missing_libraries", "tracker_callbacks"]

# tracking.<key>: (the module imported, the library's name in the message); the extra that
# installs it is named <key> too.
LIBRARIES = {"mlflow": ("mlflow.tracking", "MLflow"), "wandb": ("wandb", "W&B"),
             "tensorboard": ("tensorboard.summary.writer.record_writer", "TensorBoard")}


def tracker_callbacks(resolved: ResolvedConfig, run: RunDir,
                      meters: Sequence[Meter] = ()) -> list[Tracker]:
    """The trackers the config's ``tracking:`` section asks for, logging the run in ``run``
    (``meters``: the model clients' meters, for the calls and tokens so far). Nothing is
    contacted yet: each tracker starts its run at the trainer's first hook.

    Raises:
        ConfigError: a tracker's library is not installed.
    """
    missing = missing_libraries(resolved)
    if missing:
        raise ConfigError(missing[0])
    section = resolved.config.tracking
    trackers: list[Tracker] = []
    if section.mlflow is not None:
        from skillgrad.tracking.mlflow import MlflowTracker

        trackers.append(MlflowTracker(resolved, run, meters))
    if section.wandb is not None:
        from skillgrad.tracking.wandb import WandbTracker

        trackers.append(WandbTracker(resolved, run, meters))
    if section.tensorboard is not None:
        from skillgrad.tracking.tensorboard import TensorboardTracker

        trackers.append(TensorboardTracker(resolved, run, meters))
    return trackers


def missing_libraries(resolved: ResolvedConfig) -> list[str]:
    """One line for each library the config's trackers need that is not installed, naming the
    extra that brings it: what ``config check`` reports and a run refuses to start without."""
    section = resolved.config.tracking
    found = []
    for key, (module, name) in LIBRARIES.items():
        if getattr(section, key) is not None and not _importable(module):
            found.append(f"tracking.{key} needs {name}: pip install 'skillgrad[{key}]'")
    if section.mlflow is not None and _importable(LIBRARIES["mlflow"][0]):
        from skillgrad.tracking.mlflow import store_libraries, store_uri

        uri = store_uri(section.mlflow, resolved.base_dir)
        names = [name for module, name in store_libraries(uri).items() if not _importable(module)]
        if names:
            found.append(f"tracking.mlflow: the store {redact_url(uri)} needs "
                         f"{' and '.join(names)}: pip install 'skillgrad[mlflow]'")
    return found


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True
