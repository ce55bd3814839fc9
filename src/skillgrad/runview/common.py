"""Reading run directories back: the views ``skillgrad show``, ``diff`` and ``compare`` print
and the dashboard renders, and the reading of a run's files they share. Pure logic over the
files :class:`~skillgrad.rundir.RunDir` names; the console is the CLI's."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from skillgrad.errors import RunDirError
from skillgrad.records import (
    EpochUpdate,
    StepRecord,
)
from skillgrad.rundir import RunDir, read_json
from skillgrad.state import TrainerState

ACCEPTED = ("accept", "accept_new_best")
# The step files WorkDir writes through gate(), patches() and candidate(), read back here.
PATCHES, CANDIDATE = "patches.json", "candidate.md"
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class EditView:
    """One change a step proposed and what became of it. ``outcome``: ``applied``,
    ``applied_fuzzy`` (``matched``: the text its anchor matched), ``skipped``, ``refused``
    (``reason`` says why), ``not_selected`` (cut to the step's budget), ``rewritten`` or
    ``rewrite_failed`` (suggestions), ``scored`` or ``chosen`` (whole documents), ``added``
    (appendix reminders)."""

    kind: str  # edit, suggestion, document, reminder
    op: str  # an edit's op, a suggestion's type, "rewrite", "reminder"
    text: str
    outcome: str
    anchor: str = ""
    reason: str = ""
    matched: str | None = None
    similarity: float | None = None


@dataclass(frozen=True)
class GateView:
    """The gate's decision on a step's (or a slow update's) candidate, and why."""

    decision: str
    reason: str
    metric: str = ""
    candidate: float | None = None
    current: float | None = None
    best: float | None = None
    p_value: float | None = None
    mean_gain: float | None = None
    screened_out: bool = False  # no proposal beat the current skill on the step's tasks
    rule: str = ""


@dataclass(frozen=True)
class ProposalView:
    """One candidate screened on the step's training tasks (``gradient.proposals`` above one,
    or a line ablation)."""

    index: int
    status: str
    edits: tuple[str, ...]
    score: float | None = None
    reason: str = ""
    chosen: bool = False


@dataclass(frozen=True)
class StepView:
    """A step: ``record`` is None while it is unfinished (in progress, or interrupted), and
    ``files`` then lists what its folder holds so far."""

    name: str
    epoch: int
    step: int
    record: StepRecord | None
    edits: tuple[EditView, ...] = ()
    proposals: tuple[ProposalView, ...] = ()
    gate: GateView | None = None
    skill_after: str | None = None
    best: bool = False
    files: tuple[str, ...] = ()
    edits_of: int | None = None  # with screening: the proposal whose edits ``edits`` are
    calls: int = 0  # of an unfinished step: the model calls answered so far


@dataclass(frozen=True)
class EpochView:
    """The work done before ``epoch`` started (slow update, meta skill); ``update`` is None
    while it is unfinished."""

    epoch: int
    update: EpochUpdate | None
    skill_after: str | None = None


@dataclass(frozen=True)
class RunView:
    root: str
    phase: str
    position: str
    steps_done: int
    total_steps: int
    mode: str
    gate_rule: str
    steps: tuple[StepView, ...]
    epochs: tuple[EpochView, ...]
    best_step: int
    skills: dict[str, str]  # initial, best, final -> hash
    selection: dict[str, float | None]  # the same skills' selection scores (hard)
    totals: dict[str, Any]


def jsonable(obj: Any) -> Any:
    """``obj`` (views, records, containers) as plain JSON values."""
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [jsonable(o) for o in obj]
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    return obj


def step_name(epoch: int, step: int) -> str:
    return f"e{epoch:02d}-s{step:03d}"


def load_state(run: RunDir) -> TrainerState:
    """The checkpoint's state, or a one-line refusal that says what the folder is instead."""
    data = run.require_checkpoint()
    try:
        return TrainerState.model_validate(data)
    except ValidationError as exc:
        raise RunDirError(f"{run.checkpoint_path}: not a checkpoint this skillgrad reads "
                          f"({first_error(exc)})") from None


def read_model(path: Path, model: type[M]) -> M | None:
    data = read_json(path)
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RunDirError(f"{path}: not a valid {model.__name__} ({first_error(exc)})") from None


def first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}"


def state_score(state: TrainerState, split: str, digest: str) -> dict[str, float] | None:
    s = state.score(split, digest)
    return None if s is None else {"hard": s.hard, "soft": s.soft, "n": s.n}
