"""What a tracker logs and when: the one mechanism every backend shares.

A tracker watches the loop through the callback hooks, as TensorBoard's writer watches a
network's training, and sends an experiment tracker the run's hyperparameters (the resolved
config, flattened), its scalars per global step and, at the end, its artifacts (the best skill,
the summary). A backend (:mod:`skillgrad.tracking.mlflow`, :mod:`skillgrad.tracking.wandb`,
:mod:`skillgrad.tracking.tensorboard`) only opens a run and writes what it is handed.

The contract, kept here so that every backend keeps it alike:

* The tracker's run starts at the first hook, which comes before any model call (the start
  of the initial evaluation, or the resume). A start that fails stops the run with one line.
* After that no hook raises: the first failure is logged as one warning, counted, and turns
  the tracker off; the training goes on.
* ``tracking.json`` in the run directory holds the tracker's run id and what that run already
  has (the last global step logged, the scores logged). A resumed run continues the same
  tracker run, logs the steps it missed and nothing twice.
* A score is logged at the global step it belongs to: the initial skill's at 0, a candidate's
  at the step that made it, the final test scores at the last step.
"""

from __future__ import annotations

import contextlib
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from skillgrad.callbacks import TrainerCallback
from skillgrad.config import ResolvedConfig
from skillgrad.dotted import flatten
from skillgrad.errors import ConfigError
from skillgrad.models.client import Meter
from skillgrad.records import EvalScore, StepRecord
from skillgrad.redact import redact_text
from skillgrad.rundir import RunDir
from skillgrad.version import __version__

log = logging.getLogger(__name__)

Param = str | int | float | bool | None
ACCEPTED = ("accept", "accept_new_best")
STEP_STAGE = "rollout"  # the first stage of every step
_REASON_CHARS = 600


# ----------------------------------------------------------------------------- what is logged


def run_params(resolved: ResolvedConfig) -> dict[str, Param]:
    """The run's hyperparameters: every key of the resolved config, dotted, with credentials
    masked as in the run directory's ``config.yaml``; then ``skillgrad.fingerprint`` and
    ``skillgrad.version``. A list or an empty mapping is given as JSON text."""
    params: dict[str, Param] = {k: _scalar(v) for k, v in flatten(resolved.redacted()).items()}
    params["skillgrad.fingerprint"] = resolved.fingerprint()
    params["skillgrad.version"] = __version__
    return params


def _scalar(value: Any) -> Param:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, default=str, ensure_ascii=False)


def step_metrics(record: StepRecord) -> dict[str, float]:
    """A step's scalars: the training batch's score, the gate's selection scores of the
    candidate, the current and the best skill, the edit budget (the learning rate) and what
    the rate controller allowed, whether the gate accepted, and the edits proposed, selected
    and applied (fuzzily too). A score the step did not make is left out."""
    values: dict[str, float | None] = {
        "train/hard": record.train_hard,
        "train/soft": record.train_soft,
        "selection/candidate": record.candidate_score,
        "selection/current": record.current_score,
        "selection/best": record.best_score,
        "optimizer/budget": record.budget,
        "optimizer/rate": None if record.rate is None else record.rate.applied,
        "gate/accepted": 1.0 if record.decision in ACCEPTED else 0.0,
        "edits/proposed": record.n_proposed,
        "edits/selected": record.n_selected,
        "edits/applied": record.n_applied + record.n_fuzzy,
        "epoch": record.epoch,
    }
    return {k: float(v) for k, v in values.items() if v is not None}


def usage_metrics(meters: Iterable[Meter]) -> dict[str, float]:
    """Model calls and tokens so far: per role (``usage/target/calls``, ...) and in all."""
    unique = list({id(m): m for m in meters}.values())  # both roles usually share one
    out: dict[str, float] = {}
    calls = tokens = 0
    for meter in unique:
        for role in sorted(meter.stages):
            total = meter.totals(role)
            out[f"usage/{role}/calls"] = float(total.calls)
            out[f"usage/{role}/prompt_tokens"] = float(total.prompt_tokens)
            out[f"usage/{role}/completion_tokens"] = float(total.completion_tokens)
            calls += total.calls
            tokens += total.prompt_tokens + total.completion_tokens
    if unique:
        out["usage/calls"], out["usage/tokens"] = float(calls), float(tokens)
    return out


def eval_metrics(score: EvalScore) -> dict[str, float]:
    """A skill's score on a split: ``<split>/hard`` and ``<split>/soft``."""
    return {f"{score.split}/hard": score.hard, f"{score.split}/soft": score.soft}


def final_metrics(summary: Mapping[str, Any]) -> dict[str, float]:
    """From the summary: the test scores of the initial, best and final skill
    (``test/best/hard``, ...) and the step the best skill came from (``best_step``)."""
    out: dict[str, float] = {}
    for name, score in (summary.get("test") or {}).items():
        if score:
            out[f"test/{name}/hard"] = float(score["hard"])
            out[f"test/{name}/soft"] = float(score["soft"])
    if summary.get("best_step") is not None:
        out["best_step"] = float(summary["best_step"])
    return out


def reason(exc: BaseException) -> str:
    """An exception as one short line, credentials masked (a library may quote its URL)."""
    lines = str(exc).strip().splitlines()
    text = lines[0].strip() if lines else type(exc).__name__
    text = redact_text(text)
    return text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."


# ----------------------------------------------------------------------------- the tracker


class Tracker(TrainerCallback, ABC):
    """A trainer callback that logs the run to an experiment tracker.

    A backend sets ``key`` (its section under ``tracking:``, and its entry in
    ``tracking.json``) and ``label`` (the library's name, for messages), and implements the
    five methods below ``# backend``; each may raise whatever its library raises: this class
    decides what a failure does.
    """

    key: ClassVar[str]
    label: ClassVar[str]

    def __init__(self, resolved: ResolvedConfig, run: RunDir,
                 meters: Sequence[Meter] = ()) -> None:
        self.resolved = resolved
        self.run = run
        self.meters = tuple(meters)
        self.failures = 0  # failures after the start (the first one turns the tracker off)
        self.run_id: str | None = None
        self._started = self._off = self._saved = False
        self._done = 0  # global steps the trainer has finished
        self._in_step = False
        self._logged = 0  # the last global step the tracker's run holds
        self._scored: set[str] = set()  # "split:skill hash" of the scores it holds
        self._entry: dict[str, Any] = {}

    # ------------------------------------------------------------------ backend
    @abstractmethod
    def _open(self, previous: Mapping[str, Any]) -> dict[str, Any]:
        """Start the tracker's run, or continue the one ``previous`` (this tracker's entry of
        ``tracking.json``, ``{}`` when none) names when it lives where this config points;
        return the entry to keep: ``run_id`` and where the run lives."""

    @abstractmethod
    def _log_params(self, params: Mapping[str, Param], continued: bool) -> None:
        """Log the hyperparameters (``continued``: to a run that may hold them already)."""

    @abstractmethod
    def _log_metrics(self, values: Mapping[str, float], step: int) -> None:
        """Log scalars at a global step (steps only grow, or repeat the last one)."""

    @abstractmethod
    def _log_final(self, values: Mapping[str, float], step: int, files: Sequence[Path]) -> None:
        """Log the run's final scalars (at the last step) and its artifact files."""

    @abstractmethod
    def _close(self) -> None:
        """End the tracker's run as finished."""

    def _continues(self, entry: Mapping[str, Any], previous: Mapping[str, Any]) -> bool:
        """Whether the run ``_open`` opened (``entry``) is the one ``previous`` names, so
        that the steps and scores ``previous`` lists are not logged again: when it has the
        same run id, unless a backend knows better."""
        return bool(entry["run_id"] == previous.get("run_id"))

    # ------------------------------------------------------------------ hooks
    def on_train_begin(self) -> None:
        self._start()

    def on_resume(self, state: Any) -> None:
        if state.phase == "done":
            return  # a finished run run again: nothing is left to log
        self._done, self._in_step = state.global_step, False
        self._start()
        missed = [r for r in state.history if r.global_step > self._logged]
        for record in missed:  # steps it did not see (it came to the config later, or an
            # interrupt came between the checkpoint and this hook)
            if not self._guarded(self._log_step, record, {}):
                break

    def on_stage_start(self, stage: str, total: int | None) -> None:
        if stage == STEP_STAGE:
            self._in_step = True
        self._start()

    def on_evaluate(self, score: EvalScore) -> None:
        self._start()
        key = f"{score.split}:{score.skill_hash[:16]}"
        if key not in self._scored:
            self._guarded(self._log_score, score, key, self._done + int(self._in_step))

    def on_step_end(self, record: StepRecord) -> None:
        self._start()
        self._done, self._in_step = record.global_step, False
        if record.global_step > self._logged:
            self._guarded(self._log_step, record, usage_metrics(self.meters))

    def on_epoch_update(self, update: Any) -> None:
        self._start()

    def on_train_end(self, summary: dict[str, Any]) -> None:
        self._start()
        self._guarded(self._finish, summary)

    # ------------------------------------------------------------------ the mechanism
    def _start(self) -> None:
        """Open the tracker's run once; a failure stops the run with one line. Its entry in
        ``tracking.json`` is written once the run directory is claimed (a new run's tracker
        opens before anything of the run is written)."""
        if self._started and not self._saved and self.run.marker_path.exists():
            self._save()
        if self._started or self._off:
            return
        previous = self.run.read_tracking().get(self.key)
        previous = previous if isinstance(previous, dict) else {}
        try:
            entry = self._open(previous)
            continued = self._continues(entry, previous)
            if continued:
                self._logged = int(previous.get("step", 0))
                self._scored = {str(s) for s in previous.get("scored", ())}
            self._log_params(run_params(self.resolved), continued)
        except ConfigError:
            raise
        except Exception as exc:  # a boundary: whatever the library raises (a bad URI, a
            # server that is down, a refused key) stops the run here, before any model call
            raise ConfigError(f"tracking.{self.key}: cannot start the {self.label} run: "
                              f"{reason(exc)}") from exc
        self._entry, self.run_id, self._started = entry, str(entry["run_id"]), True
        if self.run.marker_path.exists():
            self._save()
        from skillgrad.console import console  # where to look, said once the run is open

        console.print(f"tracking.{self.key}: {'continuing' if continued else 'logging to'} "
                      f"{self.label} run {self.run_id} ({self.where(entry)})", markup=False,
                      highlight=False)

    def where(self, entry: Mapping[str, Any]) -> str:
        """Where the tracker's run lives, in words (its entry of ``tracking.json``)."""
        return ", ".join(f"{k} {v}" for k, v in entry.items() if k != "run_id" and v)

    def _guarded(self, fn: Callable[..., None], *args: Any) -> bool:
        """``fn(*args)``, unless the tracker is off; whether it ran. A failure turns the
        tracker off with one warning: the training goes on without it."""
        if not self._started or self._off:
            return False
        try:
            fn(*args)
        except Exception as exc:  # noqa: BLE001 - a boundary: a tracker that fails (its
            # server down, its disk full) must not stop the training it watches
            self.failures += 1
            self._off = True
            why = reason(exc)
            log.warning("tracking.%s: %s failed (%s); the tracker is off for the rest of this "
                        "run, training goes on", self.key, self.label, why)
            with contextlib.suppress(OSError):  # the run's own writes will say so
                self.run.event("tracker_failed", tracker=self.key, reason=why)
            return False
        return True

    def _log_step(self, record: StepRecord, extra: Mapping[str, float]) -> None:
        self._log_metrics({**step_metrics(record), **extra}, record.global_step)
        self._logged = record.global_step
        self._save()

    def _log_score(self, score: EvalScore, key: str, step: int) -> None:
        self._log_metrics(eval_metrics(score), step)
        self._scored.add(key)
        self._save()

    def _finish(self, summary: Mapping[str, Any]) -> None:
        files = [p for p in (self.run.best_skill_path, self.run.summary_path) if p.exists()]
        self._log_final(final_metrics(summary), self._done, files)
        self._close()
        self._off = True  # the tracker's run is over

    def _save(self) -> None:
        self._saved = True
        data = self.run.read_tracking()
        data[self.key] = {**self._entry, "step": self._logged, "scored": sorted(self._scored)}
        self.run.write_json(self.run.tracking_path, data)
