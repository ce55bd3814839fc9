"""The trainer's state: a plain serialisable record that holds everything needed to continue
a run exactly (loop position, skill versions, scores, the rejected-edit buffer, meters), and
resuming it: the checkpoint is only continued with the config it was made with.

The data-loader position needs no storage: which tasks a step sees is a pure function of the
seed, the epoch and the step. What a step costs does not grow with the data set or the run:
the epoch's order of the training tasks is drawn once per epoch (:class:`BatchOrder`), and a
score keeps its per-task results only while the gate may compare with them (the current and
the best skill's); every other skill's are read back from its evaluation folder when needed,
so neither memory nor the checkpoint holds the task ids of every evaluation ever made.
"""

from __future__ import annotations

import json
import math
import random
from array import array
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from skillgrad.config import (
    MISSING,
    EvaluationSection,
    ResolvedConfig,
    changed_keys,
    config_changes,
    dump_yaml,
)
from skillgrad.dotted import flatten
from skillgrad.errors import RunDirError
from skillgrad.records import EpochUpdate, EvalScore, RejectedStep, StepRecord, Task
from skillgrad.rundir import SCHEMA_VERSION, RunDir


class TrainerState(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    fingerprint: str
    phase: Literal["train", "final", "done"] = "train"
    epoch: int = 1
    step: int = 0
    global_step: int = 0
    steps_per_epoch: int
    num_epochs: int
    initial_hash: str
    current_hash: str
    best_hash: str
    best_step: int = 0
    scores: dict[str, EvalScore] = Field(default_factory=dict)
    rejected: list[RejectedStep] = Field(default_factory=list)
    history: list[StepRecord] = Field(default_factory=list)
    # Epoch-level learning: the skill each epoch started from (keys are 1-based epochs), the
    # last epoch whose start-of-epoch work (slow update, meta skill) is done, its records, and
    # the optimizer's notes (the meta skill; never shown to the target).
    epoch_start: dict[str, str] = Field(default_factory=dict)
    epoch_update_done: int = 1
    epoch_updates: list[EpochUpdate] = Field(default_factory=list)
    meta_skill: str = ""
    meter: dict[str, Any] = Field(default_factory=dict)
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    wall_seconds: float = 0.0
    _run: RunDir | None = PrivateAttr(default=None)  # where compacted per-task results are

    @property
    def total_steps(self) -> int:
        return self.num_epochs * self.steps_per_epoch

    @property
    def training_done(self) -> bool:
        return self.global_step >= self.total_steps

    def position(self) -> str:
        """Where the loop stands, in words: what a resume continues with."""
        if self.phase == "done":
            return "the run is finished"
        if self.phase == "final" or self.training_done:
            return f"at the final evaluation, all {self.total_steps} steps done"
        if self.step == 0 and self.epoch > self.epoch_update_done:
            at = f"before epoch {self.epoch}"
        else:
            at = f"at epoch {self.epoch} step {self.step + 1} of {self.steps_per_epoch}"
        return f"{at}, {self.global_step} of {self.total_steps} steps done"

    def score(self, split: str, digest: str) -> EvalScore | None:
        """The score of skill ``digest`` on ``split``, with its per-task results: read back
        from its evaluation folder when :meth:`compact` dropped them, and kept until the next
        compaction. (A state read from a checkpoint with no run attached gives the means
        alone, per_task empty, for those.)"""
        key = f"{split}:{digest}"
        found = self.scores.get(key)
        if found is None or not _compacted(found) or self._run is None:
            return found
        self.scores[key] = found = _restored(found, self._run)
        return found

    def put_score(self, score: EvalScore) -> None:
        self.scores[f"{score.split}:{score.skill_hash}"] = score

    def compact(self, run: RunDir) -> None:
        """Keep per-task results only for the selection scores of the current and the best
        skill (what the gate compares a candidate with); every other score keeps its means,
        and ``run``'s evaluation folders its per-task results (read back by :meth:`score`).
        Called before every checkpoint, so that memory and the checkpoint stay bounded by the
        selection split however many candidates a run evaluates."""
        self._run = run
        kept = {f"val:{self.current_hash}", f"val:{self.best_hash}"}
        for key, found in self.scores.items():
            if key in kept and _compacted(found):
                self.scores[key] = _restored(found, run)
            elif key not in kept and found.per_task:
                self.scores[key] = found.model_copy(update={"per_task": {}})

    def advance(self) -> None:
        """Move the loop position past the step just completed."""
        self.global_step += 1
        self.step += 1
        if self.step >= self.steps_per_epoch:
            self.epoch += 1
            self.step = 0
            self.rejected = []  # the buffer is per epoch


def steps_per_epoch(n_train: int, batch_size: int, override: int | None) -> int:
    return override if override is not None else max(1, math.ceil(n_train / batch_size))


def _compacted(score: EvalScore) -> bool:
    """Whether :meth:`TrainerState.compact` dropped ``score``'s per-task results (an
    evaluation of n tasks has n of them)."""
    return score.n > 0 and not score.per_task


def _restored(score: EvalScore, run: RunDir) -> EvalScore:
    """``score`` with its per-task results read back from ``run``; refused when they are not
    what the score was made from."""
    per_task = run.eval_per_task(score.split, score.skill_hash)
    n = len(per_task)
    hard = sum(h for h, _ in per_task.values()) / n if n else 0.0
    soft = sum(s for _, s in per_task.values()) / n if n else 0.0
    if (n, hard, soft) != (score.n, score.hard, score.soft):
        raise RunDirError(f"{run.eval_dir(score.split, score.skill_hash).path}: evaluation "
                          f"results differ from the checkpoint's score ({n} tasks, hard "
                          f"{hard:.4f}; the checkpoint: {score.n} tasks, hard {score.hard:.4f})")
    return score.model_copy(update={"per_task": per_task})


class BatchOrder:
    """The batches of the training ``tasks`` for ``seed``: each epoch a seeded permutation,
    sliced (wrapping around). The permutation is drawn once per epoch and kept as an array of
    indices, so a batch costs its own size, whatever the size of the training set.

    With gradient accumulation a step has several batches: batch ``step * accumulation + j``.
    """

    def __init__(self, tasks: Sequence[Task], seed: int) -> None:
        self.tasks = tasks
        self.seed = seed
        self._epoch: int | None = None
        self._order = array("I")

    def order(self, epoch: int) -> Sequence[int]:
        """Epoch ``epoch``'s permutation of the task indices."""
        if self._epoch != epoch:
            order = array("I", range(len(self.tasks)))
            random.Random(f"batch:{self.seed}:{epoch}").shuffle(order)  # type: ignore[arg-type]
            self._epoch, self._order = epoch, order
        return self._order

    def batch(self, epoch: int, step: int, size: int) -> list[Task]:
        order = self.order(epoch)
        n = min(size, len(order))
        start = (step * size) % len(order)
        return [self.tasks[order[(start + i) % len(order)]] for i in range(n)]


def batch_for(tasks: Sequence[Task], seed: int, epoch: int, step: int, size: int) -> list[Task]:
    """The tasks of one batch (:meth:`BatchOrder.batch`, drawing the epoch's order anew)."""
    return BatchOrder(tasks, seed).batch(epoch, step, size)


def step_rng(seed: int, epoch: int, step: int, purpose: str) -> random.Random:
    return random.Random(f"{purpose}:{seed}:{epoch}:{step}")


# ----------------------------------------------------------------------------- resume


def resume_state(run: RunDir, resolved: ResolvedConfig, allow_change: bool) -> TrainerState | None:
    """The state in ``run``'s checkpoint, checked against the config (``None`` when there is no
    checkpoint yet)."""
    data = run.load_checkpoint_data()
    if data is None:
        return None
    state = checkpoint_state(run, data)
    state.compact(run)  # what it wrote compacted; one written before compaction is, now
    fingerprint = resolved.fingerprint()
    check_fingerprint(run, resolved, state.fingerprint, allow_change)
    if state.fingerprint != fingerprint:
        # Only the new fingerprint stays: one an older skillgrad wrote hashed secret values.
        state.fingerprint = fingerprint
        run.save_checkpoint(state)
        _renew_marker(run, fingerprint)
    return state


def _renew_marker(run: RunDir, fingerprint: str) -> None:
    """``run.json`` with ``fingerprint`` in place of the one it holds."""
    try:
        data = json.loads(run.marker_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # no readable marker: the checkpoint alone says which config the run has
    if isinstance(data, dict) and data.get("fingerprint") != fingerprint:
        run.write_json(run.marker_path, {**data, "fingerprint": fingerprint})


def checkpoint_state(run: RunDir, data: dict[str, Any]) -> TrainerState:
    """The checkpoint's data as the state, or the one-line refusal ``skillgrad show`` gives
    (a key this skillgrad does not know, a value of the wrong type)."""
    try:
        return TrainerState.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "value"
        raise RunDirError(f"{run.checkpoint_path}: not a checkpoint this skillgrad reads "
                          f"({where}: {err['msg']})") from None


def claim_run(run: RunDir, resolved: ResolvedConfig, version: str, allow_change: bool) -> None:
    """Make ``run`` the directory of a new start: check what an earlier start left (its
    marker's fingerprint), then write the marker and the resolved config (secrets redacted)."""
    fingerprint = resolved.fingerprint()
    previous = run.previous_fingerprint()
    if previous is not None:
        check_fingerprint(run, resolved, previous, allow_change)
    run.write_marker(fingerprint, version)
    run.write_text(run.config_path, dump_yaml(resolved.redacted()))


def check_fingerprint(run: RunDir, resolved: ResolvedConfig, previous: str | None,
                      allow_change: bool) -> None:
    """Refuse to continue a run made with a different config, unless ``allow_change``: then
    the change is logged and the new config recorded.

    A fingerprint that differs while the recorded ``config.yaml`` shows no change is the
    same config: either only a masked value differs (a secret, which a resume may change), or
    the fingerprint was written by an older skillgrad, which hashed secret values (this one
    hashes the redacted config, where a secret is ``***`` or its ``${VAR}``)."""
    current = resolved.fingerprint()
    if previous == current:
        return
    added = keys_added_since(run, resolved)
    if added and previous == resolved.fingerprint(without=added):
        # The run predates these keys and each is at its default, which keeps what the run
        # computed before they existed: the same config, written down by a newer skillgrad.
        run.event("config_keys_added", keys=added)
        run.write_text(run.config_path, dump_yaml(resolved.redacted()))
        return
    if _recorded_alike(run, resolved, added):
        run.event("fingerprint_renewed", keys_added=added)
        run.write_text(run.config_path, dump_yaml(resolved.redacted()))
        return
    if not allow_change:
        raise RunDirError(
            f"{run.root}: this run directory was made with a different config"
            f"{_config_changes(run, resolved)}; use another --out, or pass "
            "--allow-config-change to continue with this one"
        )
    # The fingerprints themselves are not recorded: one an older skillgrad wrote hashed
    # secret values.
    run.event("config_changed", changes=_recorded_changes(run, resolved))
    run.write_text(run.config_path, dump_yaml(resolved.redacted()))


def _recorded_alike(run: RunDir, resolved: ResolvedConfig, added: list[str]) -> bool:
    """Whether the config ``run`` records differs from ``resolved`` in no key but ``added``
    (keys it predates, at their defaults), once both are redacted (false when the record is
    unreadable)."""
    previous = run.read_config()
    if not isinstance(previous, dict):
        return False
    changed = changed_keys(previous, resolved.redacted())
    return all(k in added and was is MISSING for k, (was, _) in changed.items())


def keys_added_since(run: RunDir, resolved: ResolvedConfig) -> list[str]:
    """The keys the run directory's recorded config lacks that this config leaves at their
    defaults (none when the record is unreadable)."""
    previous = run.read_config()
    if not isinstance(previous, dict):
        return []
    old = flatten(previous)

    def set_by_user(key: str) -> bool:  # the key itself, or a mapping above it
        parts = key.split(".")
        return any(".".join(parts[:n]) in resolved.origins for n in range(1, len(parts) + 1))

    return sorted(k for k in flatten(resolved.redacted()) if k not in old and not set_by_user(k))


def _recorded_changes(run: RunDir, resolved: ResolvedConfig) -> list[str]:
    """What differs from the config the run directory holds, one phrase each (none when
    the record is unreadable)."""
    previous = run.read_config()
    if not isinstance(previous, dict):
        return []
    return config_changes(previous, resolved.redacted())


def _config_changes(run: RunDir, resolved: ResolvedConfig, shown: int = 3) -> str:
    """What differs from the config the run directory holds, for the refusal message."""
    changes = _recorded_changes(run, resolved)
    if not changes:
        return ""  # no readable record of the old config: the refusal still stands
    more = f"; {len(changes) - shown} more" if len(changes) > shown else ""
    return f" ({'; '.join(changes[:shown])}{more})"


# ----------------------------------------------------------------------------- read-back


def read_state(run: RunDir, resolved: ResolvedConfig, allow_change: bool) -> TrainerState | None:
    """The state of ``run``'s checkpoint as a finished or stopped run left it, without
    starting anything (``None`` before the first checkpoint). Unless ``allow_change``, a
    checkpoint of another config is refused, as resuming it would be."""
    data = run.load_checkpoint_data()
    if data is None:
        return None
    state = checkpoint_state(run, data)
    if not allow_change:
        check_fingerprint(run, resolved, state.fingerprint, False)
    return state


def best_skill(run: RunDir, state: TrainerState | None, initial: str) -> str:
    """The text of the best skill so far: ``initial`` before the first checkpoint."""
    return initial if state is None else run.load_skill(state.best_hash)


def run_metrics(state: TrainerState | None, evaluation: EvaluationSection) -> dict[str, Any]:
    """The run's scores as plain data (:attr:`Trainer.metrics
    <skillgrad.trainer.Trainer.metrics>`): the gate metric of the initial, best and current
    skill on the selection split, per step its decision and scores, the best step, and the
    test scores once the run is done."""
    ev = evaluation
    out: dict[str, Any] = {"metric": ev.gate_metric, "selection": {}, "steps": [],
                           "best_step": 0, "test": None, "done": False}
    if state is None:
        return out

    def selection(digest: str) -> float | None:
        found = state.score("val", digest)
        return None if found is None else found.metric(ev.gate_metric, ev.gate_mixed_weight)

    out["selection"] = {"initial": selection(state.initial_hash),
                        "best": selection(state.best_hash),
                        "current": selection(state.current_hash)}
    out["steps"] = [
        {"epoch": r.epoch, "step": r.step, "global_step": r.global_step, "decision": r.decision,
         "candidate": r.candidate_score, "current": r.current_score, "best": r.best_score,
         "train_hard": r.train_hard, "train_soft": r.train_soft}
        for r in state.history]
    out["best_step"] = state.best_step
    out["done"] = state.phase == "done"
    if out["done"] and ev.eval_test:
        test = {name: state.score("test", digest) for name, digest in (
            ("initial", state.initial_hash), ("best", state.best_hash),
            ("final", state.current_hash))}
        out["test"] = {name: {"hard": s.hard, "soft": s.soft, "n": s.n}
                       for name, s in test.items() if s is not None}
    return out
