"""Callbacks observe the training loop without the loop knowing who listens."""

from __future__ import annotations

from typing import Any

from skillgrad.records import EpochUpdate, EvalScore, StepRecord


class TrainerCallback:
    """Override any hook; every default does nothing. Hooks must not raise."""

    def on_train_begin(self) -> None:
        """A new run begins: nothing of it is written yet (a tracker opens its run here, so
        that one that cannot start leaves no half-made run directory)."""

    def on_resume(self, state: Any) -> None:
        """A run continues from its checkpoint."""

    def on_stage_start(self, stage: str, total: int | None) -> None:
        """A stage begins; ``total`` is its number of tasks when known."""

    def on_task_done(self, stage: str) -> None:
        """One task of a stage with a known total finished."""

    def on_stage_end(self, stage: str, seconds: float) -> None:
        """A stage finished."""

    def on_evaluate(self, score: EvalScore) -> None:
        """A skill was scored on a split."""

    def on_step_end(self, record: StepRecord) -> None:
        """A step was checkpointed."""

    def on_epoch_update(self, update: EpochUpdate) -> None:
        """The start-of-epoch work (comparison, meta skill, slow update) was checkpointed."""

    def on_train_end(self, summary: dict[str, Any]) -> None:
        """The run finished: the final evaluation is done and ``summary`` (what
        ``summary.json`` holds) is written and checkpointed. Called once per run."""
