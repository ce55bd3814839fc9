"""The runs list: a row per run the dashboard found, with its state, when it started and how
long it has trained, the settings runs are told apart by, its scores and what its models
cost, read from the run directory (a link out of it is not followed).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from skillgrad.dashboard.discover import Catalog, LockTable, RunRef
from skillgrad.errors import SkillgradError
from skillgrad.models.usage import model_usage
from skillgrad.rundir import RunDir, confined_reads
from skillgrad.runview import load_state
from skillgrad.runview.runconfig import read_run_config
from skillgrad.runview.timing import RunTimes, run_times
from skillgrad.state import TrainerState


def status_of(state: TrainerState | None, held: bool) -> str:
    """``running`` while a training process holds the run, ``done`` once its final
    evaluation is written, ``stopped`` otherwise (interrupted, or not resumed yet)."""
    if held:
        return "running"
    return "done" if state is not None and state.phase == "done" else "stopped"


@dataclass(frozen=True)
class RunRow:
    ref: RunRef
    status: str
    position: str
    steps_done: int | None = None
    total_steps: int | None = None
    best_selection: float | None = None
    test: dict[str, float] | None = None  # the best skill's hard, soft, n
    calls: int = 0
    tokens: int = 0
    cost: float = 0.0
    error: str = ""
    times: RunTimes = RunTimes()
    settings: tuple[tuple[str, str], ...] = ()  # (what, value): see RunConfig.settings

    @property
    def started(self) -> str:
        return when(self.times.started)

    @property
    def started_day(self) -> str:
        return self.started.partition(" ")[0]

    @property
    def started_time(self) -> str:
        return self.started.partition(" ")[2]

    @property
    def started_utc(self) -> str:
        t = self.times.started
        return "" if t is None else datetime.fromtimestamp(t, timezone.utc).isoformat(
            timespec="seconds")

    @property
    def duration(self) -> str:
        return duration_text(self.times.seconds)

    @property
    def duration_note(self) -> str:
        """What the duration counts, when it is not the whole training."""
        notes = ["so far"] if self.status == "running" else []
        if self.status == "stopped" and self.times.seconds is not None:
            notes.append("until it stopped")
        if self.times.resumes:
            notes.append(f"resumed {self.times.resumes}×")
        return ", ".join(notes)


def run_rows(catalog: Catalog, locks: LockTable) -> list[RunRow]:
    return [run_row(ref, locks) for ref in catalog.runs.values()]


def run_row(ref: RunRef, locks: LockTable) -> RunRow:
    held = locks.holds(ref.path)
    run = RunDir(ref.path)
    try:
        with confined_reads(ref.path):  # a link out of the run directory is not followed
            config = read_run_config(run)
            times, settings = run_times(run), config.settings if config else ()
            state = load_state(run) if run.exists() else None
    except SkillgradError as exc:
        return RunRow(ref, "unreadable", "", error=str(exc))
    if state is None:
        return RunRow(ref, status_of(None, held), "no checkpoint yet (starting, or stopped "
                      "before its first one)", times=times, settings=settings)
    best = state.score("val", state.best_hash)
    test = state.score("test", state.best_hash)
    usage = totals_of(model_usage(state.meter))
    return RunRow(ref, status_of(state, held), state.position(), state.global_step,
                  state.total_steps, None if best is None else best.hard,
                  None if test is None else {"hard": test.hard, "soft": test.soft,
                                             "n": test.n}, usage["calls"], usage["tokens"],
                  usage["cost"], times=times, settings=settings)


def when(t: float | None) -> str:
    """A time (seconds since the epoch) to the minute, in the dashboard machine's zone."""
    return "-" if t is None else datetime.fromtimestamp(t).strftime("%Y-%m-%d %H:%M")


def duration_text(seconds: float | None) -> str:
    """``4.2 s``, ``42 s``, ``12 min 3 s``, ``3 h 5 min``, ``2 d 4 h``; ``-`` for None."""
    if seconds is None:
        return "-"
    if seconds < 9.95:
        return f"{seconds:.1f} s"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def totals_of(models: dict[str, Any]) -> dict[str, Any]:
    """Calls, tokens and cost over every role."""
    return {"calls": sum(int(u["calls"]) for u in models.values()),
            "tokens": sum(int(u["prompt_tokens"]) + int(u["completion_tokens"])
                          for u in models.values()),
            "cost": sum(float(u["cost"]) for u in models.values())}
