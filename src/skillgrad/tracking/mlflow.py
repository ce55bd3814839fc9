"""The MLflow backend of the trackers (``tracking.mlflow``).

It talks to MLflow through an ``MlflowClient`` of its own, never the fluent ``mlflow.*``
functions and their process-wide active run, so two trainers can log in one process.
Credentials come only from MLflow's own environment variables (``MLFLOW_TRACKING_TOKEN``,
``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD``), which MLflow reads itself.

mlflow-skinny leaves out what MLflow's database stores (``sqlite:///mlflow.db``, MLflow 3's
default store, and the other SQL ones) import: the ``mlflow`` extra brings SQLAlchemy and
Alembic, and :func:`skillgrad.tracking.missing_libraries` names them before the run starts
where they are missing, since MLflow itself would only say that the URI is not supported.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from skillgrad.config import MlflowTracking, ResolvedConfig
from skillgrad.models.client import Meter
from skillgrad.redact import redact_url
from skillgrad.rundir import RunDir
from skillgrad.tracking.base import Param, Tracker, reason

log = logging.getLogger(__name__)

# MLflow's own limits: a key's characters and length, a parameter value's length.
_KEY_CHARS = re.compile(r"[^\w./ -]")
_KEY_LENGTH = 250
_VALUE_LENGTH = 6000
# Tracking URIs MLflow takes without a scheme (anything else without one is a folder).
_NAMED_URIS = ("databricks", "databricks-uc", "uc")
# MLflow's database stores, by the scheme of their URI (which may name a driver:
# postgresql+psycopg2), and what each of them imports that mlflow-skinny does not bring.
_DATABASES = ("sqlite", "mysql", "postgresql", "mssql")
SQL_LIBRARIES = {"sqlalchemy": "SQLAlchemy", "alembic": "Alembic"}


def tracking_uri(spec: MlflowTracking, base_dir: Path) -> str | None:
    """The URI of ``tracking.mlflow.tracking_uri``: a folder (no scheme) is made absolute
    against the config's folder, as every path of a config is; unset stays unset (MLflow's
    ``$MLFLOW_TRACKING_URI``, else its default)."""
    uri = spec.tracking_uri
    if uri is None or uri in _NAMED_URIS or len(urlsplit(uri).scheme) > 1:
        return uri  # a one-letter "scheme" is a Windows drive
    path = Path(uri).expanduser()
    return (path if path.is_absolute() else base_dir / path).resolve().as_uri()


def store_uri(spec: MlflowTracking, base_dir: Path) -> str:
    """The store the run is logged to: the config's, else the one MLflow picks itself
    (``$MLFLOW_TRACKING_URI``, else its default: ``sqlite:///mlflow.db`` in MLflow 3, unless
    ``./mlruns`` holds runs)."""
    from mlflow.tracking import get_tracking_uri

    return tracking_uri(spec, base_dir) or str(get_tracking_uri())


def store_libraries(uri: str) -> dict[str, str]:
    """What the store at ``uri`` imports that mlflow-skinny does not bring (module: the
    library's name): SQLAlchemy and Alembic for a database, nothing for any other store."""
    return dict(SQL_LIBRARIES) if urlsplit(uri).scheme.partition("+")[0] in _DATABASES else {}


class MlflowTracker(Tracker):
    """Logs the run to an MLflow run. ``client``: an ``MlflowClient`` to use instead of
    one made for the config's tracking URI."""

    key = "mlflow"
    label = "MLflow"

    def __init__(self, resolved: ResolvedConfig, run: RunDir, meters: Sequence[Meter] = (),
                 *, client: Any = None) -> None:
        super().__init__(resolved, run, meters)
        spec = resolved.config.tracking.mlflow
        self.spec = spec if spec is not None else MlflowTracking()
        self.client = client
        self._run_id = ""

    def _open(self, previous: Mapping[str, Any]) -> dict[str, Any]:
        from mlflow.exceptions import MlflowException
        from mlflow.tracking import MlflowClient

        uri = tracking_uri(self.spec, self.resolved.base_dir)
        if self.client is None:
            self.client = MlflowClient(tracking_uri=uri)
        # Kept masked: $MLFLOW_TRACKING_URI may carry a password.
        where = redact_url(str(getattr(self.client, "tracking_uri", None) or uri or ""))
        run_id = previous.get("run_id")
        if run_id and previous.get("tracking_uri") == where:
            try:
                self.client.get_run(run_id)
            except MlflowException as exc:
                if exc.error_code != "RESOURCE_DOES_NOT_EXIST":
                    raise
                log.warning("tracking.mlflow: run %s is not in %s (%s); starting a new one",
                            run_id, where, reason(exc))
            else:
                self.client.update_run(run_id, status="RUNNING")
                self._run_id = str(run_id)
                return {"run_id": self._run_id, "tracking_uri": where}
        found = self.client.get_experiment_by_name(self.spec.experiment)
        experiment = (found.experiment_id if found is not None
                      else self.client.create_experiment(self.spec.experiment))
        name = self.spec.run_name or self.run.root.resolve().name
        tags = {"skillgrad.run_dir": str(self.run.root.resolve()), **self.spec.tags}
        self._run_id = self.client.create_run(experiment, run_name=name, tags=tags).info.run_id
        return {"run_id": self._run_id, "tracking_uri": where}

    def _log_params(self, params: Mapping[str, Param], continued: bool) -> None:
        from mlflow.entities import Param as MlflowParam

        held = self.client.get_run(self._run_id).data.params if continued else {}
        # MLflow never changes a logged parameter: on a resume only the new keys are logged
        # (a resume-safe key that changed keeps its first value there).
        batch = {_key(k): _text(v) for k, v in params.items()}
        self.client.log_batch(self._run_id, params=[
            MlflowParam(k, v) for k, v in batch.items() if k not in held])

    def _log_metrics(self, values: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self.client.log_batch(self._run_id, metrics=[
            Metric(_key(k), float(v), now, step) for k, v in values.items()])

    def _log_final(self, values: Mapping[str, float], step: int, files: Sequence[Path]) -> None:
        self._log_metrics(values, step)
        for path in files:
            self.client.log_artifact(self._run_id, str(path))

    def _close(self) -> None:
        self.client.set_terminated(self._run_id, status="FINISHED")


def _key(name: str) -> str:
    return _KEY_CHARS.sub("_", name)[:_KEY_LENGTH]


def _text(value: Param) -> str:
    text = value if isinstance(value, str) else json.dumps(value)  # true, null, 0.5
    return text[:_VALUE_LENGTH]
