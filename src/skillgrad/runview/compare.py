"""Runs side by side (``skillgrad compare`` and the dashboard's comparison): each run's test
scores, costs and decisions, the config keys set differently, with a paired bootstrap interval
of the best skill's test gain (an A/B test of two trainings); or skill files scored on one
config's test split, side by side."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgrad.dotted import flatten, unflatten
from skillgrad.models.usage import model_usage
from skillgrad.redact import redact
from skillgrad.rundir import ROLLOUTS, RunDir, WorkDir, read_jsonl
from skillgrad.runview.common import load_state, state_score

# Keys of a run's stored config that say where things are kept or what a run is called, not
# what it computes: a role's response-cache folder, the folder the coding tasks' repositories
# are made in, where W&B keeps its files, and a tracker's name for the run (by default the run
# directory's). Two runs set up alike may well differ in them, so ``compare`` leaves them out
# of the keys that differ. (Everything else counts, even what cannot change a score, such as
# execution.rollout_workers or a role's concurrency: it can change the time and the cost.)
UNCOMPARED = frozenset({
    *(f"model.{role}.cache_dir" for role in ("target", "optimizer")),
    "env.cache", "tracking.wandb.dir", "tracking.wandb.run_name", "tracking.mlflow.run_name",
})


@dataclass(frozen=True)
class Column:
    """One run (or one skill file scored on a config's test split) in ``compare``. A run's
    ``test`` holds its initial, best and final skills' scores; a skill file's holds its own,
    as ``test['skill']``. ``models``: calls, tokens and cost per role, the cost None where the
    role's model has no prices. ``per_task``: the best skill's (the skill file's) (hard, soft)
    per test task, None when there are no test results (``note`` says why)."""

    label: str
    source: str
    kind: str  # run or skill
    about: str  # where the run stands, or how many tasks the skill was scored on
    test: dict[str, dict[str, float] | None]
    models: dict[str, dict[str, float | None]]
    decisions: dict[str, int] | None = None
    note: str = ""
    per_task: dict[str, tuple[float, float]] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ConfigRow:
    """A config key whose value differs between the compared runs: its value per run label
    (a run whose config lacks the key, one written by another skillgrad, is left out)."""

    key: str
    values: dict[str, Any]


@dataclass(frozen=True)
class ConfigDiff:
    """The keys of the runs' stored configs (``config.yaml``, secrets masked) whose values
    differ, :data:`UNCOMPARED` aside, between the runs ``labels``; ``unread``: the labels of
    runs whose config could not be read. ``same``: every config was read and no key
    differs."""

    labels: tuple[str, ...]
    rows: tuple[ConfigRow, ...]
    unread: tuple[str, ...] = ()
    same: bool = False


@dataclass(frozen=True)
class Gain:
    """The paired gain of ``label``'s best skill (or skill file) over ``against``'s on their
    ``n`` shared test tasks: (mean, low, high) of the 95% bootstrap interval, per metric."""

    label: str
    against: str
    n: int
    hard: tuple[float, float, float] | None = None
    soft: tuple[float, float, float] | None = None
    note: str = ""
    what: str = "best skills"  # what was compared: the runs' best skills, or skill files


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
                  _costs(model_usage(state.meter), priced_roles(config)), decisions, note,
                  per_task)


def skill_column(label: str, path: Path, summary: dict[str, Any], folder: Path,
                 priced: Collection[str]) -> Column:
    """A skill file scored by :func:`skillgrad.evaluate.evaluate_skill` into ``folder``;
    ``priced``: the roles whose models have prices (the others' cost is unknown)."""
    score = {"hard": summary["hard"], "soft": summary["soft"], "n": summary["n"]}
    return Column(label, str(path), "skill", f"scored on {summary['n']} test tasks",
                  {"skill": score}, _costs(summary.get("models", {}), priced),
                  per_task=per_task_results(WorkDir(folder)))


def priced_roles(config: Any) -> set[str] | None:
    """The roles of a resolved config (as ``config.yaml`` holds it) whose models have
    ``prices``: only their cost is metered. None when ``config`` is not one (unreadable)."""
    if not isinstance(config, dict) or not isinstance(config.get("model"), dict):
        return None
    return {role for role, section in config["model"].items()
            if isinstance(section, dict) and section.get("prices")}


def config_diff(labels: Sequence[str], configs: Sequence[Any]) -> ConfigDiff:
    """The keys whose values differ between ``configs`` (each run's ``config.yaml``, None
    where unreadable), one row per dotted key in key order, :data:`UNCOMPARED` aside; a
    section one config leaves null and another sets (``prices``, a tracker) is one row, its
    value the section's mapping. Each config is masked again first: a run directory written by
    an older skillgrad may hold values it did not yet mask, and a masked value is never shown
    unmasked."""
    flat = {label: {k: v for k, v in flatten(redact(config)).items() if k not in UNCOMPARED}
            for label, config in zip(labels, configs, strict=True) if isinstance(config, dict)}
    unread = tuple(label for label in labels if label not in flat)
    keys = {k for f in flat.values() for k in f}
    rows = []
    for key in sorted(keys):
        parts = key.split(".")
        if any(".".join(parts[:i]) in keys for i in range(1, len(parts))):
            continue  # a section one run leaves out (null) and another sets: one row, above
        found = {label: _value_at(f, key) for label, f in flat.items()}
        values = {label: v for label, v in found.items() if v is not _NONE}
        first = next(iter(values.values()))
        if len(values) < len(flat) or any(v != first for v in values.values()):
            rows.append(ConfigRow(key, values))
    return ConfigDiff(tuple(labels), tuple(rows), unread, same=not rows and not unread)


_NONE = object()  # a key a config lacks


def _value_at(flat: dict[str, Any], key: str) -> Any:
    """The value of ``key`` in a flattened config: its leaf, else the section under it."""
    if key in flat:
        return flat[key]
    section = {k[len(key) + 1:]: v for k, v in flat.items() if k.startswith(key + ".")}
    return unflatten(section) if section else _NONE


def run_configs(roots: Sequence[Path]) -> list[Any]:
    """Each run directory's stored config (None where it cannot be read)."""
    return [RunDir(root).read_config() for root in roots]


def per_task_results(folder: WorkDir) -> dict[str, tuple[float, float]] | None:
    """(hard, soft) per task of the rollouts in ``folder`` (None when it has none)."""
    rows = read_jsonl(folder.path / ROLLOUTS)
    return {str(r["task_id"]): (float(r["hard"]), float(r["soft"])) for r in rows} or None


def _costs(usage: dict[str, Any], priced: Collection[str] | None
           ) -> dict[str, dict[str, float | None]]:
    """Calls, tokens and cost per role; the cost None (unknown, not free) for a role whose
    model has no prices. ``priced`` None (the config could not be read): a cost counts as
    known when it is above zero."""
    def cost(role: str, u: dict[str, Any]) -> float | None:
        known = u["cost"] > 0 if priced is None else role in priced
        return u["cost"] if known else None

    return {role: {"calls": u["calls"], "tokens": u["prompt_tokens"] + u["completion_tokens"],
                   "cost": cost(role, u)} for role, u in usage.items()}


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
        out.append(Gain(col.label, first.label, len(shared), per_metric[0], per_metric[1],
                        what="skill files" if col.kind == "skill" else "best skills"))
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
    """The table's rows: a name, then one cell per column. Runs: test scores hard/soft of the
    initial, best and final skills, test tasks, calls, tokens and cost per role, the gate's
    decisions. Skill files: the test score hard/soft, test tasks, calls, tokens and cost per
    role. A cost is "-" where the role's model has no prices."""
    runs = any(c.kind == "run" for c in columns)
    names = ("initial", "best", "final") if runs else ("skill",)
    rows = [[f"test {name}" if runs else "test", *(_hard_soft(c.test.get(name))
                                                   for c in columns)] for name in names]
    rows.append(["test tasks", *(str(len(c.per_task)) if c.per_task else "-" for c in columns)])
    for role in dict.fromkeys(role for c in columns for role in c.models):
        for key in ("calls", "tokens", "cost"):
            rows.append([f"{role} {key}", *(_cost(c.models.get(role), key) for c in columns)])
    if runs:
        for key in ("accept", "reject", "refused", "skip"):
            rows.append([f"{key} decisions", *(str(c.decisions[key]) if c.decisions else "-"
                                               for c in columns)])
    return rows


def config_cell(value: Any) -> str:
    """A config value as YAML writes a scalar (a list or mapping as JSON), for a table cell."""
    if isinstance(value, str) and value:
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def gain_line(g: Gain) -> str:
    """A paired gain and its interval, in words (or why there is none)."""
    if g.hard is None or g.soft is None:
        return f"{g.label} vs {g.against}: no interval ({g.note})"
    return (f"{g.label} vs {g.against}, {g.what} on {g.n} shared test tasks: "
            f"{_interval('hard', g.hard)}; {_interval('soft', g.soft)}")


def _hard_soft(score: dict[str, float] | None) -> str:
    return "-" if score is None else f"{score['hard']:.3f}/{score['soft']:.3f}"


def _cost(usage: dict[str, float | None] | None, key: str) -> str:
    value = None if usage is None else usage[key]
    if value is None:
        return "-"
    return f"{value:.4f}" if key == "cost" else str(int(value))


def _interval(metric: str, found: tuple[float, float, float]) -> str:
    mean, low, high = found
    return f"{metric} {mean:+.3f} (95% interval {low:+.3f} to {high:+.3f})"
