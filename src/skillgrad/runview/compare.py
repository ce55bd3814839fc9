"""Runs side by side (``skillgrad compare`` and the dashboard's comparison): each run's test
scores, costs and decisions, with a paired bootstrap interval of the best skill's test gain
(an A/B test of two trainings)."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgrad.models.usage import model_usage
from skillgrad.rundir import ROLLOUTS, RunDir, WorkDir, read_jsonl
from skillgrad.runview.common import load_state, state_score


@dataclass(frozen=True)
class Column:
    """One run (or one skill file scored on a config's test split) in ``compare``. For a
    skill file its score stands in ``test['best']``. ``per_task``: the best skill's
    (hard, soft) per test task, None when there are no test results (``note`` says why)."""

    label: str
    source: str
    kind: str  # run or skill
    about: str  # where the run stands, or how many tasks the skill was scored on
    test: dict[str, dict[str, float] | None]
    models: dict[str, dict[str, float]]
    decisions: dict[str, int] | None = None
    note: str = ""
    per_task: dict[str, tuple[float, float]] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Gain:
    """The paired gain of ``label``'s best skill over ``against``'s on their ``n`` shared
    test tasks: (mean, low, high) of the 95% bootstrap interval, per metric."""

    label: str
    against: str
    n: int
    hard: tuple[float, float, float] | None = None
    soft: tuple[float, float, float] | None = None
    note: str = ""


def column_label(i: int) -> str:
    """The label of the ``i``-th run (or skill) compared: A, B, ..., then R27, R28, ..."""
    return chr(ord("A") + i) if i < 26 else f"R{i + 1}"


def run_column(label: str, root: Path) -> Column:
    run = RunDir(root)
    state = load_state(run)
    test = {name: state_score(state, "test", digest) for name, digest in (
        ("initial", state.initial_hash), ("best", state.best_hash),
        ("final", state.current_hash))}
    per_task = per_task_results(run.eval_dir("test", state.best_hash))
    config = run.read_config()
    evaluation = (config.get("evaluation") or {}) if isinstance(config, dict) else {}
    note = "" if per_task is not None else "no test results " + (
        "(evaluation.eval_test is off)" if evaluation.get("eval_test") is False
        else "(the run has not reached its final evaluation)" if state.phase != "done"
        else "of its best skill in its evals folder")
    counts = Counter(r.decision for r in state.history)
    decisions = {"accept": counts["accept"] + counts["accept_new_best"],
                 "reject": counts["reject"], "refused": counts["refused"],
                 "skip": counts["skip"]}
    return Column(label, str(root), "run", state.position(), test,
                  _costs(model_usage(state.meter)), decisions, note, per_task)


def skill_column(label: str, path: Path, summary: dict[str, Any], folder: Path) -> Column:
    """A skill file scored by :func:`skillgrad.evaluate.evaluate_skill` into ``folder``."""
    score = {"hard": summary["hard"], "soft": summary["soft"], "n": summary["n"]}
    return Column(label, str(path), "skill", f"scored on {summary['n']} test tasks",
                  {"initial": None, "best": score, "final": None},
                  _costs(summary.get("models", {})), per_task=per_task_results(WorkDir(folder)))


def per_task_results(folder: WorkDir) -> dict[str, tuple[float, float]] | None:
    """(hard, soft) per task of the rollouts in ``folder`` (None when it has none)."""
    rows = read_jsonl(folder.path / ROLLOUTS)
    return {str(r["task_id"]): (float(r["hard"]), float(r["soft"])) for r in rows} or None


def _costs(usage: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {role: {"calls": u["calls"], "tokens": u["prompt_tokens"] + u["completion_tokens"],
                   "cost": u["cost"]} for role, u in usage.items()}


def gains(columns: Sequence[Column]) -> list[Gain]:
    """Each column after the first against the first, on their shared test tasks."""
    first, out = columns[0], []
    for col in columns[1:]:
        theirs, ours = first.per_task, col.per_task
        if theirs is None or ours is None:
            missing = [f"{c.label}: {c.note}" for c in (first, col) if c.per_task is None]
            out.append(Gain(col.label, first.label, 0, note="; ".join(missing)))
            continue
        shared = sorted(set(theirs) & set(ours))
        if not shared:
            out.append(Gain(col.label, first.label, 0, note="no shared test tasks"))
            continue
        per_metric = [paired_interval([ours[t][m] - theirs[t][m] for t in shared])
                      for m in (0, 1)]
        out.append(Gain(col.label, first.label, len(shared), per_metric[0], per_metric[1]))
    return out


def paired_interval(gains: Sequence[float], *, samples: int = 2000, seed: int = 0,
                    level: float = 0.95) -> tuple[float, float, float]:
    """The mean of the per-task paired ``gains`` and its percentile bootstrap interval
    (tasks resampled with replacement, seeded: the same gains give the same interval)."""
    if not gains:
        return math.nan, math.nan, math.nan
    n = len(gains)
    rng = random.Random(seed)
    means = sorted(sum(gains[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples))
    low = means[max(0, math.floor((1 - level) / 2 * samples))]
    high = means[min(samples, math.ceil((1 + level) / 2 * samples)) - 1]
    return sum(gains) / n, low, high


def compare_rows(columns: Sequence[Column]) -> list[list[str]]:
    """The table's rows: a name, then one cell per column (test scores hard/soft, test
    tasks, calls, tokens and cost per role, the gate's decisions)."""
    roles = list(dict.fromkeys(role for c in columns for role in c.models))
    rows: list[list[str]] = []
    for name in ("initial", "best", "final"):
        rows.append([f"test {name}", *(_hard_soft(c.test.get(name)) for c in columns)])
    rows.append(["test tasks", *(str(len(c.per_task)) if c.per_task else "-" for c in columns)])
    for role in roles:
        for key in ("calls", "tokens", "cost"):
            rows.append([f"{role} {key}", *(_cost(c.models.get(role), key) for c in columns)])
    for key in ("accept", "reject", "refused", "skip"):
        rows.append([f"{key} decisions", *(str(c.decisions[key]) if c.decisions else "-"
                                           for c in columns)])
    return rows


def gain_line(g: Gain) -> str:
    """A paired gain and its interval, in words (or why there is none)."""
    if g.hard is None or g.soft is None:
        return f"{g.label} vs {g.against}: no interval ({g.note})"
    return (f"{g.label} vs {g.against}, best skills on {g.n} shared test tasks: "
            f"{_interval('hard', g.hard)}; {_interval('soft', g.soft)}")


def _hard_soft(score: dict[str, float] | None) -> str:
    return "-" if score is None else f"{score['hard']:.3f}/{score['soft']:.3f}"


def _cost(usage: dict[str, float] | None, key: str) -> str:
    if usage is None:
        return "-"
    return f"{usage[key]:.4f}" if key == "cost" else str(int(usage[key]))


def _interval(metric: str, found: tuple[float, float, float]) -> str:
    mean, low, high = found
    return f"{metric} {mean:+.3f} (95% interval {low:+.3f} to {high:+.3f})"
