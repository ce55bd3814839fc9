"""What a run's page shows, read from the run directory through :mod:`skillgrad.runview` (the
same reading ``skillgrad show`` prints): plain records the templates lay out, and the charts.
The runs list is :mod:`.runlist`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from skillgrad.dashboard.charts import Chart, Point, Series, chart
from skillgrad.dashboard.discover import LockTable, RunRef
from skillgrad.dashboard.runlist import duration_text, status_of, when
from skillgrad.dashboard.skills import version_names
from skillgrad.records import EpochUpdate, GateDecision, RejectedStep, StepRecord
from skillgrad.rundir import RunDir
from skillgrad.runview import (
    ACCEPTED,
    EditView,
    EpochView,
    RunView,
    StepView,
    Versions,
    load_state,
    read_run,
    step_name,
)
from skillgrad.runview.runconfig import RunConfig, SetKey, read_run_config
from skillgrad.runview.timing import RunTimes, run_times
from skillgrad.state import TrainerState

MARKS = {"accept": "accept", "accept_new_best": "accept", "reject": "reject",
         "refused": "refused", "skip": "skip"}


def mark(decision: str) -> str:
    """The class a decision is drawn and coloured with."""
    return MARKS.get(decision, "")


# ----------------------------------------------------------------------------- a run


@dataclass(frozen=True)
class TimelineRow:
    """A decision: a step's gate, or a slow update before an epoch."""

    name: str
    anchor: str
    decision: str
    done: bool = True
    train: float | None = None
    current: float | None = None
    candidate: float | None = None
    p_value: float | None = None
    mean_gain: float | None = None
    reason: str = ""
    screened_out: bool = False
    budget: str = ""

    @property
    def margin(self) -> float | None:
        if self.current is None or self.candidate is None:
            return None
        return self.candidate - self.current


@dataclass(frozen=True)
class StepBlock:
    step: StepView
    edits: tuple[tuple[EditView, int], ...]  # the same edit with the same fate: counted once
    budget: str


@dataclass(frozen=True)
class UsageRow:
    role: str
    stage: str  # "" for the role's total
    usage: dict[str, Any]

    @property
    def latency(self) -> float | None:
        calls = self.usage.get("calls") or 0
        return self.usage.get("seconds", 0.0) / calls if calls else None

    @property
    def attempts(self) -> str:
        return ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in
                         (self.usage.get("attempts") or {}).items())


@dataclass(frozen=True)
class RunPage:
    ref: RunRef
    status: str
    view: RunView
    state: TrainerState
    scores: Chart
    budget: Chart
    timeline: tuple[TimelineRow, ...]
    steps: tuple[StepBlock, ...]
    rejected: tuple[RejectedStep, ...]
    turned_down: tuple[StepView, ...]  # the steps rejected or refused
    usage: tuple[UsageRow, ...]
    versions: tuple[tuple[str, str], ...]  # (name, what it is) of the skill versions
    config: RunConfig | None = None  # None: the run directory holds no readable config
    set_keys: tuple[SetKey, ...] = ()  # the config's keys set differently from the defaults
    times: RunTimes = RunTimes()

    @property
    def started(self) -> str:
        return when(self.times.started)

    @property
    def duration(self) -> str:
        return duration_text(self.times.seconds)


def run_page(ref: RunRef, locks: LockTable) -> RunPage:
    view = read_run(ref.path)
    run = RunDir(ref.path)
    state = load_state(run)
    records = [s.record for s in view.steps if s.record is not None]
    config = read_run_config(run)
    return RunPage(
        config=config, set_keys=config.set_keys() if config else (), times=run_times(run),
        ref=ref, status=status_of(state, locks.holds(ref.path)), view=view, state=state,
        scores=score_chart(view), budget=budget_chart(records),
        timeline=tuple(timeline(view)), steps=tuple(_block(s) for s in view.steps),
        rejected=tuple(state.rejected),
        turned_down=tuple(s for s in view.steps if s.record is not None
                          and s.record.decision in ("reject", "refused")),
        usage=tuple(usage_rows(view.totals["models"])),
        versions=tuple(version_names(Versions.of(state, ref.label))))


def timeline(view: RunView) -> list[TimelineRow]:
    """Every decision in order: each epoch's slow update before its first step."""
    epochs = {e.epoch: e for e in view.epochs}
    out: list[TimelineRow] = []
    for s in view.steps:
        if s.step == 1 and s.epoch in epochs:
            out.append(_epoch_row(epochs.pop(s.epoch)))
        out.append(_step_row(s))
    return out + [_epoch_row(e) for e in epochs.values()]


def _step_row(s: StepView) -> TimelineRow:
    r, g = s.record, s.gate
    if r is None:
        return TimelineRow(s.name, f"step-{s.name}", "unfinished", done=False,
                           reason=f"in progress, or interrupted; {s.calls} model calls so far")
    if g is None:
        return TimelineRow(s.name, f"step-{s.name}", r.decision, train=r.train_hard,
                           reason=r.reason, budget=budget_text(r))
    return TimelineRow(s.name, f"step-{s.name}", g.decision, train=r.train_hard,
                       current=g.current, candidate=g.candidate, p_value=g.p_value,
                       mean_gain=g.mean_gain, reason=g.reason, screened_out=g.screened_out,
                       budget=budget_text(r))


def _epoch_row(e: EpochView) -> TimelineRow:
    name, anchor = f"before epoch {e.epoch}", f"epoch-{e.epoch}"
    u = e.update
    if u is None:
        return TimelineRow(name, anchor, "unfinished", done=False, reason="in progress, or "
                           "interrupted")
    d = u.slow_update
    if d is None:
        return TimelineRow(name, anchor, "no slow update", reason=u.error or "")
    return TimelineRow(name, anchor, d.decision, current=d.current, candidate=d.candidate,
                       p_value=d.p_value, mean_gain=d.mean_gain, reason=d.reason)


def budget_text(r: StepRecord) -> str:
    if r.rate is not None and r.rate.mode != "fixed":
        return f"{r.rate.applied} ({r.rate.mode}, schedule {r.rate.schedule_budget})"
    return str(r.budget)


def _block(s: StepView) -> StepBlock:
    groups: list[list[EditView]] = []
    for e in s.edits:
        if groups and groups[-1][0] == e:
            groups[-1].append(e)
        else:
            groups.append([e])
    return StepBlock(s, tuple((g[0], len(g)) for g in groups),
                     budget_text(s.record) if s.record is not None else "")


def usage_rows(models: dict[str, Any]) -> list[UsageRow]:
    """Each role's totals, then its stages."""
    out = []
    for role, usage in models.items():
        out.append(UsageRow(role, "", usage))
        out += [UsageRow(role, stage, u) for stage, u in (usage.get("stages") or {}).items()]
    return out


# ----------------------------------------------------------------------------- charts


def score_chart(view: RunView) -> Chart:
    """Training batch score, the selection scores of each candidate (marked by the gate's
    decision) and of the skill kept after each step, and the test scores there are."""
    records = [s.record for s in view.steps if s.record is not None]
    updates = [e.update for e in view.epochs if e.update is not None]
    curves = score_points(records, view.selection.get("initial"), updates)
    top = max([1.0, *(p.y for points in curves.values() for p in points)])
    return chart([
        Series("training batch", "s-train", curves["train"]),
        Series("selection: current skill", "s-kept", curves["kept"], step=True),
        Series("test (hard)", "s-test", tuple(_test_points(view)), line=False),
        Series("selection: candidate", "s-cand", curves["candidate"], line=False),
    ], title="scores per step", y_label="score", y_range=(0.0, top))


def score_points(records: Sequence[StepRecord], initial: float | None,
                 updates: Sequence[EpochUpdate] = ()) -> dict[str, tuple[Point, ...]]:
    """The points of the curves over ``records``: ``train`` (the batch's hard score),
    ``candidate`` (its selection score, marked by the decision) and ``kept`` (the selection
    score of the skill kept after each step, from the initial skill's at step 0). A slow
    update before an epoch is a candidate half a step before the epoch's first step."""
    train: list[Point] = []
    cand: list[Point] = []
    kept = ([Point(0, initial, f"step 0: the initial skill scores {initial:.3f}")]
            if initial is not None else [])
    last = initial
    for x, name, r, d in _decisions(records, updates):
        at = f"step {x:g} ({name})" if r is not None else name
        if r is not None:
            train.append(Point(x, r.train_hard, f"{at}: {r.train_hard:.3f} hard, "
                               f"{r.train_soft:.3f} soft"))
        if d.candidate is not None:
            cand.append(Point(x, d.candidate, f"{at}: {d.candidate:.3f}, {d.decision} "
                              f"(the current skill {_num(d.current)})", mark(d.decision)))
        if d.decision in ACCEPTED and d.candidate is not None:
            last = d.candidate
        elif d.current is not None:
            last = d.current
        if last is not None:
            kept.append(Point(x, last, f"{at}: the skill kept scores {last:.3f}"))
    return {"train": tuple(train), "candidate": tuple(cand), "kept": tuple(kept)}


def _decisions(records: Sequence[StepRecord], updates: Sequence[EpochUpdate]
               ) -> list[tuple[float, str, StepRecord | None, GateDecision]]:
    """(x, name, the step's record or None, the decision) of each step and slow update, in
    order."""
    out: list[tuple[float, str, StepRecord | None, GateDecision]] = [
        (r.global_step, step_name(r.epoch, r.step), r, GateDecision(
            decision=r.decision, metric="", candidate=r.candidate_score,
            current=r.current_score)) for r in records]
    for u in updates:
        if u.slow_update is None:
            continue
        before = max((r.global_step for r in records if r.epoch < u.epoch), default=0)
        out.append((before + 0.5, f"before epoch {u.epoch} (slow update)", None,
                    u.slow_update))
    return sorted(out, key=lambda item: item[0])


def _test_points(view: RunView) -> list[Point]:
    where = {"initial": 0, "best": view.best_step, "final": view.steps_done}
    return [Point(where[name], score["hard"], f"{name} skill (step {where[name]}): "
                  f"{score['hard']:.3f} hard, {score['soft']:.3f} soft (n={score['n']})",
                  "test")
            for name, score in view.totals["test"].items() if name in where]


def budget_chart(records: Sequence[StepRecord]) -> Chart:
    """The edit budget per step (the learning rate), the edits applied and proposed."""
    schedule = [Point(r.global_step, r.rate.schedule_budget if r.rate else r.budget,
                      f"step {r.global_step}: budget {budget_text(r)}") for r in records]
    allowed = [Point(r.global_step, r.rate.applied, f"step {r.global_step}: {r.rate.applied} "
                     f"allowed ({r.rate.mode})") for r in records
               if r.rate is not None and r.rate.mode != "fixed"]
    applied = [Point(r.global_step, r.n_applied + r.n_fuzzy, f"step {r.global_step}: "
                     f"{r.n_applied + r.n_fuzzy} applied of {r.n_selected} selected",
                     mark(r.decision)) for r in records]
    proposed = [Point(r.global_step, r.n_proposed, f"step {r.global_step}: {r.n_proposed} "
                      "proposed") for r in records]
    return chart([
        Series("edit budget", "s-budget", tuple(schedule), step=True),
        Series("edits allowed", "s-allowed", tuple(allowed), step=True),
        Series("applied", "s-applied", tuple(applied)),
        Series("proposed", "s-proposed", tuple(proposed), line=False),
    ], title="edit budget per step", y_label="edits", integer_y=True)


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"
