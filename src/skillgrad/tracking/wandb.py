"""The Weights & Biases backend of the trackers (``tracking.wandb``).

Each tracker holds its own ``wandb`` run object (``reinit="create_new"``), never the
process-wide ``wandb.run``, so two trainers can log in one process. The API key comes only
from ``WANDB_API_KEY`` (or ``wandb login``), and ``$WANDB_MODE``, ``$WANDB_DIR`` and W&B's
other variables keep their meaning when the config leaves ``mode`` and ``dir`` unset: W&B
reads them itself. W&B's system metadata is not collected: it holds the command line, whose
``--set`` values may be secrets; the run's parameters are the redacted config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillgrad.config import ResolvedConfig, WandbTracking
from skillgrad.models.client import Meter
from skillgrad.rundir import RunDir
from skillgrad.tracking.base import Param, Tracker


class WandbTracker(Tracker):
    """Logs the run to a W&B run (its history per global step, its summary, its files)."""

    key = "wandb"
    label = "W&B"

    def __init__(self, resolved: ResolvedConfig, run: RunDir,
                 meters: Sequence[Meter] = ()) -> None:
        super().__init__(resolved, run, meters)
        spec = resolved.config.tracking.wandb
        self.spec = spec if spec is not None else WandbTracking()
        self.wandb_run: Any = None

    def _open(self, previous: Mapping[str, Any]) -> dict[str, Any]:
        import wandb

        spec = self.spec
        where = {"project": spec.project, "entity": spec.entity}
        options: dict[str, Any] = {
            "project": spec.project, "entity": spec.entity, "tags": list(spec.tags),
            "name": spec.run_name or self.run.root.resolve().name, "reinit": "create_new"}
        if spec.mode is not None:
            options["mode"] = spec.mode
        if spec.dir is not None:
            folder = spec.dir if spec.dir.is_absolute() else self.resolved.base_dir / spec.dir
            folder.mkdir(parents=True, exist_ok=True)
            options["dir"] = str(folder)
        if previous.get("run_id") and all(previous.get(k) == v for k, v in where.items()):
            options.update(id=previous["run_id"], resume="allow")
        # W&B's metadata records the command line (a --set may hold a secret) and uploads it:
        # it is left out, with the rest of the system metadata.
        options["settings"] = wandb.Settings(x_disable_meta=True)
        self.wandb_run = wandb.init(**options)
        return {"run_id": self.wandb_run.id, **where}

    def where(self, entry: Mapping[str, Any]) -> str:
        path = "/".join(str(entry[k]) for k in ("entity", "project") if entry.get(k))
        url = getattr(self.wandb_run, "url", None)
        return f"{path}/{entry['run_id']}" + (f", {url}" if url else "")

    def _log_params(self, params: Mapping[str, Param], continued: bool) -> None:
        # A resume-safe key may have changed since the run began: its new value wins.
        self.wandb_run.config.update(dict(params), allow_val_change=True)

    def _log_metrics(self, values: Mapping[str, float], step: int) -> None:
        self.wandb_run.log(dict(values), step=step)

    def _log_final(self, values: Mapping[str, float], step: int, files: Sequence[Path]) -> None:
        self.wandb_run.summary.update(dict(values))
        for path in files:
            self.wandb_run.save(str(path), base_path=str(path.parent), policy="now")

    def _close(self) -> None:
        self.wandb_run.finish()
