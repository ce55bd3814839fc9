"""The TensorBoard backend of the trackers (``tracking.tensorboard``).

The run is written as TensorBoard event files in ``LOG_DIR/RUN_NAME/``, which ``tensorboard
--logdir LOG_DIR`` shows beside the other runs there: the scalars per global step, the
hyperparameters (the HParams tab) and, at the end, the best skill and the summary (the Text
tab). Nothing is written before the run directory is claimed (a start that fails leaves no
files), and every event is on disk before ``tracking.json`` says it was logged.

Why the ``tensorboard`` package and not tensorboardX, which is lighter (0.7 MB installed
against about 55 MB with grpcio and TensorBoard's data server): the ``tensorboard --logdir``
that shows the files comes only with the ``tensorboard`` package, so it is the one library
the extra needs; it imports in about 0.1 s and needs no TensorFlow. Of it, only the record
writer and the protocol buffers are used (the pieces its ``EventFileWriter``, and
``torch.utils.tensorboard``, are made of): the ``EventFileWriter`` itself imports TensorFlow
when that is installed, for its file layer, and writes from a thread of its own, while a
tracker writes a few events a step and needs each one written before it records it.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from skillgrad.config import ResolvedConfig, TensorboardTracking
from skillgrad.errors import ConfigError
from skillgrad.models.client import Meter
from skillgrad.rundir import RunDir
from skillgrad.tracking.base import Param, Tracker

EVENTS = "tfevents"  # what TensorBoard looks for in the name of an event file


class EventFile:
    """One event file, appended to synchronously: each event is flushed as it is written."""

    def __init__(self, path: Path) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.summary.writer.record_writer import RecordWriter

        self.path = path
        self._fh = path.open("ab")
        self._records = RecordWriter(self._fh)
        self.write(Event(wall_time=time.time(), file_version="brain.Event:2"))

    def write(self, event: Any) -> None:
        self._records.write(event.SerializeToString())
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class TensorboardTracker(Tracker):
    """Writes the run as a TensorBoard run: a folder of event files."""

    key = "tensorboard"
    label = "TensorBoard"

    def __init__(self, resolved: ResolvedConfig, run: RunDir,
                 meters: Sequence[Meter] = ()) -> None:
        super().__init__(resolved, run, meters)
        spec = resolved.config.tracking.tensorboard
        self.spec = spec if spec is not None else TensorboardTracking()
        self.folder: Path | None = None  # the run's folder of event files
        self.file: EventFile | None = None
        self._pending: list[Any] = []  # events made before the run directory was claimed
        self._continued = False

    def log_dir(self) -> Path:
        """The folder TensorBoard is pointed at: the config's (relative: to the config's
        folder), else the run directory's ``tensorboard/``."""
        given = self.spec.log_dir
        if given is None:
            return self.run.tensorboard_folder.resolve()
        given = given.expanduser()
        return (given if given.is_absolute() else self.resolved.base_dir / given).resolve()

    def _open(self, previous: Mapping[str, Any]) -> dict[str, Any]:
        log_dir = self.log_dir()
        name = self.spec.run_name or self.run.root.resolve().name
        folder = log_dir / name
        entry = {"run_id": name, "log_dir": str(log_dir)}
        held = event_files(folder)
        # The run goes on in its folder only while the folder holds its files; one whose
        # files are gone is started again, and the steps it missed are logged anew.
        self._continued = bool(held) and all(previous.get(k) == v for k, v in entry.items())
        if held and not self._continued:
            raise ConfigError(f"tracking.tensorboard: {folder} holds the event files of another "
                              "run; set tracking.tensorboard.run_name or log_dir to another "
                              "folder, or remove that one")
        _check_writable(folder)
        self.folder = folder
        return entry

    def _continues(self, entry: Mapping[str, Any], previous: Mapping[str, Any]) -> bool:
        return self._continued

    def where(self, entry: Mapping[str, Any]) -> str:
        return f"tensorboard --logdir {shlex.quote(str(entry['log_dir']))}"

    def _log_params(self, params: Mapping[str, Param], continued: bool) -> None:
        from tensorboard.plugins.hparams.summary_v2 import hparams_pb

        # A resume-safe key may have changed since the run began: its new value wins. Written
        # at the last step the run holds, so that TensorBoard sees no step go back.
        assert self.folder is not None
        values = {k: _hparam(v) for k, v in params.items()}
        # Kept until the first scalar: a start whose run directory is then refused (made by
        # another config) writes nothing.
        self._write(hparams_pb(values, trial_id=self.folder.name), self._logged, now=False)

    def _log_metrics(self, values: Mapping[str, float], step: int) -> None:
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._write(Summary(value=[Summary.Value(tag=k, simple_value=float(v))
                                   for k, v in values.items()]), step)

    def _log_final(self, values: Mapping[str, float], step: int, files: Sequence[Path]) -> None:
        from tensorboard.plugins.text.summary_v2 import text_pb

        self._log_metrics(values, step)
        for path in files:  # TensorBoard's Text tab renders markdown
            text = path.read_text(encoding="utf-8")
            if path.suffix != ".md":
                text = f"```{path.suffix.lstrip('.')}\n{text.rstrip()}\n```"
            self._write(text_pb(path.name, text), step)

    def _close(self) -> None:
        self._flush_pending()
        if self.file is not None:
            self.file.close()
            self.file = None

    def _write(self, summary: Any, step: int, now: bool = True) -> None:
        from tensorboard.compat.proto.event_pb2 import Event

        self._pending.append(Event(wall_time=time.time(), step=step, summary=summary))
        if now:
            self._flush_pending()

    def _flush_pending(self) -> None:
        """Write the events made so far, once the run directory is claimed (a scalar comes
        only after that)."""
        if not self._pending or not self.run.marker_path.exists():
            return
        if self.file is None:
            assert self.folder is not None
            self.folder.mkdir(parents=True, exist_ok=True)
            self.file = EventFile(self.folder / (
                f"events.out.{EVENTS}.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}"))
        while self._pending:
            self.file.write(self._pending[0])
            self._pending.pop(0)


def event_files(folder: Path) -> list[Path]:
    """The event files in ``folder``, in the order TensorBoard reads them."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if EVENTS in p.name and p.is_file())


def _check_writable(folder: Path) -> None:
    """Refuse, before the run starts, a folder the event files cannot be written in (it is
    made at the first write)."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise NotADirectoryError(f"{existing}: is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise PermissionError(f"{existing}: not writable")


def _hparam(value: Param) -> str | int | float | bool:
    """A parameter as TensorBoard's HParams take it: ``None`` as ``null``."""
    return json.dumps(value) if value is None else value
