"""What ``skillgrad train`` shows while and after it trains: the start or resume banner,
progress bars, a line per step and per epoch update, the plan of a dry run, the summary."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from skillgrad.callbacks import TrainerCallback
from skillgrad.cli.runs import usage_line
from skillgrad.config import ResolvedConfig
from skillgrad.console import console, out_console
from skillgrad.records import EpochUpdate, EvalScore, StepRecord
from skillgrad.rundir import RunDir

_SPLIT_WORDS = {"val": "selection"}  # the split's name in what a person reads


class ProgressCallback(TrainerCallback):
    """Progress bars for stages with a known number of tasks, one line per step."""

    def __init__(self, progress: Progress, steps: int | None = None, done: int = 0) -> None:
        self.progress = progress
        self.tasks: dict[str, Any] = {}
        self.total = steps
        self.steps = (progress.add_task("steps", total=steps, completed=done)
                      if steps else None)

    def on_resume(self, state: Any) -> None:
        """Where the run goes on, once the trainer has accepted the run directory (a refused
        config change is said first and alone)."""
        done = int(getattr(state, "global_step", 0) or 0)
        if self.total is not None and done >= self.total:
            out_console.print(f"all {self.total} steps are done; finishing the run",
                              markup=False)
        else:
            of = f" of {self.total}" if self.total is not None else ""
            out_console.print(
                f"resuming at epoch {state.epoch} step {state.step + 1} of "
                f"{state.steps_per_epoch} ({done}{of} steps done)", markup=False)

    def on_stage_start(self, stage: str, total: int | None) -> None:
        label = stage if total is not None else f"{stage}…"
        self.tasks[stage] = self.progress.add_task(label, total=total)

    def on_task_done(self, stage: str) -> None:
        if stage in self.tasks:
            self.progress.advance(self.tasks[stage])

    def on_stage_end(self, stage: str, seconds: float) -> None:
        task = self.tasks.pop(stage, None)
        if task is not None:
            self.progress.remove_task(task)

    def on_evaluate(self, score: EvalScore) -> None:
        self.progress.console.print(
            f"  eval {_SPLIT_WORDS.get(score.split, score.split)} of skill "
            f"{score.skill_hash[:8]}: hard {score.hard:.3f} "
            f"soft {score.soft:.3f} (n={score.n})"
        )

    def on_step_end(self, r: StepRecord) -> None:
        cand = "-" if r.candidate_score is None else f"{r.candidate_score:.3f}"
        cur = "-" if r.current_score is None else f"{r.current_score:.3f}"
        budget = (f"{r.rate.applied} ({r.rate.mode})" if r.rate and r.rate.mode != "fixed"
                  else str(r.budget))
        why = f" ({escape(r.reason)})" if r.reason else ""
        lost = f"; {escape('; '.join(r.losses))}" if r.losses else ""
        loads = (f", skill loaded {r.skill_loads[0]}/{r.skill_loads[1]}" if r.skill_loads
                 else "")
        self.progress.console.print(
            f"epoch {r.epoch} step {r.step}: train {r.train_hard:.2f}{loads}, budget {budget}, "
            f"edits {r.n_applied + r.n_fuzzy}/{r.n_selected} applied "
            f"({r.n_proposed} proposed{lost}), selection {cur} -> {cand}: "
            f"[bold]{r.decision}[/bold]{why}"
        )
        if r.trigger:  # the agent seldom loaded the skill: its description, retrained or not
            self.progress.console.print(f"  skill {escape(r.trigger)}")
        if self.steps is not None:
            self.progress.advance(self.steps)

    def on_epoch_update(self, u: EpochUpdate) -> None:
        p = u.pairs
        line = (f"before epoch {u.epoch}: pairs improved {p.improved}, regressed {p.regressed}, "
                f"persistent failure {p.persistent_failure}, stable success {p.stable_success}")
        if u.meta_skill_updated:
            line += "; meta skill updated"
        if u.slow_update is not None:
            d = u.slow_update
            line += f"; slow update: [bold]{d.decision}[/bold] ({escape(d.reason)})"
        self.progress.console.print(line)


def progress_bars() -> Progress:
    # Bars only on a terminal: elsewhere the live display ends in an empty line, which would
    # stand before an error line; the step lines are printed either way.
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TimeRemainingColumn(), console=console,
                    transient=True, disable=not console.is_terminal)


def banner(resolved: ResolvedConfig, trainer: Any, run_dir: Path) -> tuple[int, int]:
    """The run's start line; the steps in all and those done (where it resumes is said by
    :meth:`ProgressCallback.on_resume`)."""
    from skillgrad.state import steps_per_epoch

    t = resolved.config.train
    per_epoch = steps_per_epoch(len(trainer.train_tasks), t.batch_size * t.accumulation,
                                t.steps_per_epoch)
    steps = per_epoch * t.num_epochs
    m = resolved.config.model
    names = {role: getattr(resolved.role_options[role], "model", None)
             for role in ("target", "optimizer")}
    models = ", ".join(f"{role} {getattr(m, role).backend}" + (
        f" {name}" if isinstance(name, str) else "") for role, name in names.items())
    out_console.print(f"run {run_dir}: train {len(trainer.train_tasks)} / selection "
                  f"{len(trainer.val_tasks)} tasks, {steps} steps; {models}", markup=False)
    checkpoint = RunDir(run_dir).checkpoint_path
    done = 0
    try:
        data = json.loads(checkpoint.read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none yet; or unreadable, which the run itself reports
        data = None
    if isinstance(data, dict):  # where it resumes is said once the trainer accepts the folder
        done = int(data.get("global_step", 0) or 0)
    return steps, done


def print_summary(summary: dict[str, Any], run_dir: Path) -> None:
    test = summary.get("test") or {}
    if test:
        parts = [f"{k} {v['hard']:.3f}/{v['soft']:.3f}" for k, v in test.items() if v]
        out_console.print("test (hard/soft): " + ", ".join(parts))
    decisions: dict[str, int] = {}
    for counts in summary.get("decisions_per_epoch", {}).values():
        for k, v in counts.items():
            decisions[k] = decisions.get(k, 0) + v
    out_console.print("decisions: " + (", ".join(f"{k} {v}" for k, v in sorted(decisions.items())) or "none"))
    seconds = summary.get("wall_seconds")
    if isinstance(seconds, (int, float)):
        out_console.print(f"time: {_duration(seconds)}", markup=False)
    print_learned(run_dir)
    edits = summary.get("edits", {})
    print_unusable(edits.get("parse_errors", 0), edits.get("unusable_steps", 0))
    print_usage(summary.get("models", {}))
    if not summary.get("gate", {}).get("use_gate", True):
        out_console.print("[yellow]note: the gate was OFF for this run[/yellow]")
    out_console.print(f"best skill: {run_dir / 'best_skill.md'}   summary: {run_dir / 'summary.json'}")


LEARNED_LINES = 12  # lines of the learned diff shown at the end of a run


def print_learned(run_dir: Path) -> None:
    """What the run learned: the lines the best skill adds to or drops from the initial one
    (the first :data:`LEARNED_LINES`; ``skillgrad diff`` has the whole diff)."""
    from skillgrad.errors import SkillgradError
    from skillgrad.package import package_diff
    from skillgrad.runview import load_versions

    try:
        (_, initial), (_, best) = load_versions(run_dir, "initial", "best")
    except SkillgradError:  # a run with no best skill yet says nothing here
        return
    changed, old, where = [], "", ""
    for line in package_diff(initial, best, "initial", "best", context=0):
        if line.startswith("--- "):
            old = line[4:].removeprefix("initial").removeprefix(": ")
        elif line.startswith("+++ "):  # a package's lines say which file they are in
            name = line[4:].removeprefix("best").removeprefix(": ")
            name = old if name == "/dev/null" else name
            where = "" if name in ("", "SKILL.md") else f"{name}: "
        elif line[:1] in "+-" and line[1:].strip():
            changed.append(f"{line[0]}{where}{line[1:]}")
    if not changed:
        out_console.print("learned: nothing (the best skill is the initial one)", markup=False)
        return
    out_console.print("learned (initial -> best):", markup=False)
    for line in changed[:LEARNED_LINES]:
        out_console.print(f"  {line[0]} {line[1:]}", markup=False, highlight=False)
    if len(changed) > LEARNED_LINES:
        out_console.print(f"  … {len(changed) - LEARNED_LINES} more lines: skillgrad diff "
                          f"{run_dir}", markup=False)


def _duration(seconds: float) -> str:
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours} h {minutes} min"
    return f"{minutes} min {secs} s" if minutes else f"{seconds:.1f} s"


def print_plan(resolved: ResolvedConfig) -> None:
    from skillgrad.build import build_environment
    from skillgrad.plan import as_rows, plan_run, time_bound

    plan = plan_run(resolved, build_environment(resolved))
    sizes = ", ".join(f"{k} {v}" for k, v in plan.splits.items())
    out_console.print(f"plan: {plan.steps} steps over {sizes} tasks; the most each model can "
                      "be asked (a run asks fewer)", markup=False)
    speeds = _speeds(resolved)
    total, unknown = 0.0, False
    table = Table("role", "stage", "calls", "prompt tok", "completion tok", "cost")
    for row in as_rows(resolved, plan):
        cost = row.get("cost")
        table.add_row(row["role"], row["stage"], str(row["calls"]), str(row["prompt_tokens"]),
                      str(row["completion_tokens"]), "" if cost is None else f"{cost:.4f}")
    out_console.print(table)
    for role in ("target", "optimizer"):
        section = getattr(resolved.config.model, role)
        options = resolved.role_options.get(role)
        name = next((str(v) for k in ("model", "cli", "model_path", "function")
                     if (v := getattr(options, k, None))), "")
        line = f"{role}: {section.backend}" + (f" {name}" if name else "")
        calls, prompt, completion = plan.totals(role)
        budget = section.budget
        over = []
        if budget.calls is not None and calls > budget.calls:
            over.append(f"calls {budget.calls} allowed, up to {calls} planned")
        if budget.tokens is not None and prompt + completion > budget.tokens:
            over.append(f"tokens {budget.tokens:,} allowed, up to {prompt + completion:,} "
                        "planned")
        if budget.calls is not None or budget.tokens is not None or budget.cost is not None:
            line += ("; budget: " + "; ".join(over) + " (the run may stop, resumably, before "
                     "it ends)" if over else "; within its budget")
        speed = speeds.get(role)
        if isinstance(speed, tuple):
            seconds = time_bound(plan, role, speed)
            total += seconds
            line += (f"; time: at most {_duration(seconds)} at {speed[0]:.0f} prompt and "
                     f"{speed[1]:.0f} generated tokens/s, measured now")
        elif speed is not None:
            line += f"; time: {speed}"
            unknown = unknown or speed.startswith("not")
        out_console.print(line, markup=False)
    if total and not unknown:
        out_console.print(f"time: at most {_duration(total)} in all; a run takes less (replies "
                          "end before their limit, and a prompt whose skill prefix is cached "
                          "evaluates only the rest)", markup=False)
    for note in plan.notes:
        out_console.print(f"note: {note}", markup=False)


def _speeds(resolved: ResolvedConfig) -> dict[str, tuple[float, float] | str]:
    """Each role's speed for the plan's time: measured now for a backend that can be (the
    embedded model, once per model file), or why there is none."""
    out: dict[str, tuple[float, float] | str] = {}
    measured: dict[str, tuple[float, float]] = {}
    for role in ("target", "optimizer"):
        section = getattr(resolved.config.model, role)
        cls = resolved.backend_classes.get(role)
        if section.backend == "scripted":
            out[role] = "none (scripted replies)"
        elif cls is None or not getattr(cls, "measures_speed", False):
            out[role] = "not estimated (the speed of its model is known once it answers)"
        else:
            model = cls.create(resolved.role_options[role], resolved.base_dir)
            key = str(getattr(model, "identity", role))
            if key not in measured:
                console.print(f"measuring the {role} model's speed on this machine ...",
                              markup=False, highlight=False)
                measured[key] = model.measure_speed()
            out[role] = measured[key]
            del model
    return out


def print_unusable(parse_errors: int, steps: int, last: StepRecord | None = None) -> None:
    """The optimizer replies that could not be used, when there were any: analyst replies
    that failed to parse, the steps in which none could be used, and (when the records are at
    hand) the last such step's error."""
    if not parse_errors:
        return
    line = f"optimizer: {parse_errors} analyst replies could not be used (parse errors)"
    if steps:
        line += f"; {steps} step{'s' if steps != 1 else ''} without a usable reply"
    if last is not None:
        line += f", the last (step {last.global_step}): {last.unusable}"
    out_console.print(f"[yellow]{escape(line)}[/yellow]")


def print_usage(models: dict[str, Any]) -> None:
    """One line per role (:func:`~skillgrad.cli.runs.usage_line`, as ``show`` prints it)."""
    for role, usage in models.items():
        out_console.print(escape(usage_line(role, usage)))
