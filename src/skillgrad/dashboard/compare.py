"""Runs side by side: their curves overlaid, and ``skillgrad compare``'s table with the paired
bootstrap interval of each best skill's test gain over the first's (an A/B test of two
trainings) and the config keys set differently, from the same :mod:`skillgrad.runview`
columns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup

from skillgrad.dashboard.charts import Series, line_chart
from skillgrad.dashboard.discover import RunRef
from skillgrad.dashboard.pages import score_points
from skillgrad.rundir import RunDir
from skillgrad.runview import (
    Column,
    ConfigDiff,
    Gain,
    column_label,
    compare_rows,
    config_cell,
    config_diff,
    gain_line,
    gains,
    load_state,
    run_column,
    run_configs,
)

COLOURS = 8  # the stylesheet's run-0 ... run-7


@dataclass(frozen=True)
class Compared:
    ref: RunRef
    column: Column
    colour: str  # the class of its curves and legend swatch


@dataclass(frozen=True)
class ComparePage:
    runs: tuple[Compared, ...]
    rows: tuple[tuple[str, ...], ...]
    gains: tuple[Gain, ...]
    lines: tuple[str, ...]  # each gain in words
    selection: Markup
    train: Markup
    config: ConfigDiff
    config_rows: tuple[tuple[str, ...], ...]  # a key, then its value per run ("-": not set)


def compare_page(refs: Sequence[RunRef]) -> ComparePage:
    """``refs`` (two or more) compared; each after the first against the first."""
    columns = [run_column(column_label(i), ref.path) for i, ref in enumerate(refs)]
    found = gains(columns)
    differ = config_diff([c.label for c in columns], run_configs([ref.path for ref in refs]))
    runs = tuple(Compared(ref, col, f"run-{i % COLOURS}")
                 for i, (ref, col) in enumerate(zip(refs, columns, strict=True)))
    selection, train = [], []
    for run in runs:
        state = load_state(RunDir(run.ref.path))
        initial = state.score("val", state.initial_hash)
        curves = score_points(state.history, None if initial is None else initial.hard,
                              state.epoch_updates)
        name = f"{run.column.label}"
        selection += [Series(f"{name}: skill kept", run.colour, curves["kept"], step=True),
                      Series(f"{name}: candidate", run.colour, curves["candidate"],
                             line=False)]
        train.append(Series(f"{name}: training batch", run.colour, curves["train"]))
    return ComparePage(
        runs=runs, rows=tuple(tuple(r) for r in compare_rows(columns)), gains=tuple(found),
        lines=tuple(gain_line(g) for g in found),
        selection=line_chart(selection, title="selection score per step", y_range=(0.0, 1.0)),
        train=line_chart(train, title="training batch score per step", y_range=(0.0, 1.0)),
        config=differ, config_rows=tuple(
            (r.key, *(config_cell(r.values[c.label]) if c.label in r.values else "-"
                      for c in columns if c.label not in differ.unread))
            for r in differ.rows))
