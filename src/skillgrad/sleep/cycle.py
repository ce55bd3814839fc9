"""``skillgrad sleep run``: one night from harvest to staged proposals, and its report.

1. harvest the project's new sessions into the archive (redacted);
2. mine the window's archived sessions into tasks (or take the user's reviewed tasks file);
3. route each task to the skill that was active in its sessions; tasks no skill fits train a
   new skill, proposed with a name and a description that says when to use it;
4. train each skill with enough tasks on both sides of the split (:mod:`.night`);
5. stage what changed, with the report (scores before and after per task; which tasks each
   accepted edit came from) and the evidence, for ``sleep adopt``.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillgrad.errors import AnswersPending, RunStopped
from skillgrad.package import join_package, read_folder, split_package
from skillgrad.rundir import RunDir
from skillgrad.sleep.archive import Archive
from skillgrad.sleep.night import (
    SLEEP_DIR,
    NightState,
    SkillRun,
    SleepSection,
    load_sleep_config,
    night_config,
    night_lock,
    route,
    skill_run,
    slug,
    split_counts,
    train_skill,
    window_start,
)
from skillgrad.sleep.tasks import TasksFile, read_tasks, split_of, write_tasks

log = logging.getLogger(__name__)


@dataclass
class NightResult:
    night: str
    harvested: int
    skipped: dict[str, int]
    tasks: TasksFile
    runs: list[SkillRun] = field(default_factory=list)
    staged: Path | None = None
    report: dict[str, Any] = field(default_factory=dict)


@contextmanager
def _dry(project: Path, dry_run: bool) -> Iterator[Path]:
    """The project root a night writes under: the project itself, or for a dry run a
    temporary folder holding a copy of its sleep state (removed afterwards)."""
    if not dry_run:
        yield project
        return
    with tempfile.TemporaryDirectory(prefix="skillgrad-sleep-dry-") as tmp:
        source, copy = project / SLEEP_DIR, Path(tmp) / SLEEP_DIR
        if source.exists():
            shutil.copytree(source, copy, ignore=shutil.ignore_patterns("*.lock", "work",
                                                                        "nights"))
        yield Path(tmp)


def run_night(project: Path, *, config: Path | None = None, tasks: Path | None = None,
              dry_run: bool = False, environ: Mapping[str, str] | None = None,
              home: Path | None = None, now: datetime | None = None) -> NightResult:
    """Run (or take up again) a night for ``project``. Raises
    :class:`~skillgrad.errors.RunStopped` when a budget runs out or handoff answers are
    pending; the next call continues the same night."""
    project = project.expanduser().resolve()
    folder = project / SLEEP_DIR
    environ = os.environ if environ is None else environ
    home = Path.home() if home is None else home
    now = now or datetime.now(timezone.utc)
    settings, section = load_sleep_config(config or folder / "config.yaml")
    with night_lock(folder, dry_run=dry_run), _dry(project, dry_run) as root:
        work = root / SLEEP_DIR
        state = NightState(work)
        night = state.pending() or now.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        work_dir = work / "work" / night
        tasks_path = work_dir / "tasks.json"
        harvested, skipped = 0, dict[str, int]()
        if tasks is not None:
            write_tasks(tasks_path, read_tasks(tasks))
        elif not tasks_path.exists():
            harvested, skipped = _harvest(project, work, section, environ, home, now)
            mined = _mine(project, work, section, settings, now)
            write_tasks(tasks_path, mined)
        tasks_file = read_tasks(tasks_path)
        result = NightResult(night, harvested, skipped, tasks_file)
        state.set_pending(night)
        result.runs = _train(project, work_dir, tasks_file, settings, section, environ, home)
        result.report = report(result, section)
        result.staged = _stage(project, root, night, result)
        state.set_pending(None)
        if not dry_run:
            from skillgrad.sleep.schedule import record_night

            record_night(project, datetime.now(timezone.utc), night)
        return result


def harvest_and_mine(project: Path, *, config: Path | None = None,
                     environ: Mapping[str, str] | None = None, home: Path | None = None,
                     now: datetime | None = None) -> TasksFile:
    """The tasks a night would train on (the harvest checkpoint advances and the sessions
    are archived, as in a night), for the user to review."""
    project = project.expanduser().resolve()
    folder = project / SLEEP_DIR
    settings, section = load_sleep_config(config or folder / "config.yaml")
    now = now or datetime.now(timezone.utc)
    with night_lock(folder):
        _harvest(project, folder, section, os.environ if environ is None else environ,
                 Path.home() if home is None else home, now)
        return _mine(project, folder, section, settings, now)


def _harvest(project: Path, work: Path, section: SleepSection, environ: Mapping[str, str],
             home: Path, now: datetime) -> tuple[int, dict[str, int]]:
    from skillgrad.sleep.harvest.harvester import Harvester
    from skillgrad.sleep.scrub import Scrubber
    from skillgrad.traces.registry import adapters

    harvester = Harvester(project, adapters(section.agents), state_dir=work / "state",
                          scrubber=Scrubber(section.redact_patterns), environ=environ,
                          home=home, since=window_start(now, section),
                          settle_seconds=section.settle_seconds, now=now)
    archive = Archive(work / "archive")
    skipped: list[Any] = []
    count = 0
    for session in harvester.iter_sessions(skipped):
        archive.put(session)
        count += 1
    counts: dict[str, int] = {}
    for skip in skipped:
        counts[skip.reason] = counts.get(skip.reason, 0) + 1
    return count, counts


def _mine(project: Path, work: Path, section: SleepSection, settings: Mapping[str, Any],
          now: datetime) -> TasksFile:
    from skillgrad.sleep.env import role_model
    from skillgrad.sleep.mine import mine

    sessions = list(Archive(work / "archive").sessions(window_start(now, section)))
    model = None
    if section.miner == "llm":
        spec = dict((settings.get("model") or {}).get("optimizer") or {})
        model = role_model(spec, project / SLEEP_DIR, "miner")
    return mine(sessions, str(project), min_occurrences=section.min_occurrences,
                max_tasks=section.max_tasks, model=model)


def _train(project: Path, work_dir: Path, tasks_file: TasksFile, settings: Mapping[str, Any],
           section: SleepSection, environ: Mapping[str, str], home: Path) -> list[SkillRun]:
    from skillgrad.agentskills import find_skills, memory_file

    skills = {s.name: s for s in find_skills(project, home, environ) if s.name}
    spent = Spent(settings)
    runs = []
    for name, group in sorted(route(tasks_file.tasks, skills).items()):
        skill = skills.get(name)
        run = SkillRun(name or _new_name(project), skill.path if skill else None, group)
        start = _start(skill) if skill is not None else None
        if not name and section.unrouted == "memory":
            agent = max({t.agent for t in group if t.agent} or {"claude_code"},
                        key=lambda a: sum(t.agent == a for t in group))
            run.target = memory_file(project, agent)  # type: ignore[arg-type]
            run.name, run.kind = run.target.name, "memory"
            start = (run.target.read_text(encoding="utf-8") if run.target.exists()
                     else MEMORY_START)
        n_train, n_val = split_counts(group, section.val_percent)
        if len(group) < section.min_tasks:
            run.status, run.reason = "too few tasks", (
                f"{len(group)} tasks, {section.min_tasks} needed")
        elif n_val == 0 or n_train == 0:
            run.status, run.reason = "unverified", (
                f"{n_train} training and {n_val} selection tasks: a change could not be "
                "checked on tasks it was not made from")
        elif spent.exhausted():
            run.status, run.reason = "budget spent", spent.exhausted() or ""
        else:
            folder = work_dir / "skills" / slug(run.name)
            subset = TasksFile(project=tasks_file.project, created=tasks_file.created,
                               reviewed=tasks_file.reviewed, miner=tasks_file.miner,
                               tasks=group)
            write_tasks(folder / "tasks.json", subset)
            body = None
            if start is not None:
                body = folder / "initial.md"
                body.write_text(start, encoding="utf-8")
            raw = night_config(spent.remaining(), section, folder / "tasks.json", body, n_train)
            try:
                train_skill(run, raw, folder, project / SLEEP_DIR,
                            work_dir.parent.parent / "state")
            except AnswersPending:
                raise  # the night is pending: the next run goes on with the answers
            except RunStopped as exc:  # the night's budget ran out in this run
                run.status, run.reason = "budget spent", str(exc)
                run.proposed = _best_so_far(skill_run(folder, run.name), start)
            spent.add(skill_run(folder, run.name))
        runs.append(run)
    return runs


MEMORY_START = "# Notes for agents working in this project\n"


class Spent:
    """The night's budgets (the ``budget`` of each model role in the sleep config) across its
    skills: each run gets what the earlier ones left."""

    def __init__(self, settings: Mapping[str, Any]) -> None:
        self.settings = settings
        self.used: dict[str, dict[str, float]] = {}

    def add(self, run_dir: RunDir) -> None:
        checkpoint = run_dir.load_checkpoint_data()
        if checkpoint is None:
            return
        meters = checkpoint.get("meter", {})
        for role, stages in meters.items():  # role -> stage -> calls, tokens, cost
            used = self.used.setdefault(role, {"calls": 0, "tokens": 0, "cost": 0.0})
            for meter in stages.values():
                used["calls"] += meter.get("calls", 0)
                used["tokens"] += meter.get("prompt_tokens", 0) + meter.get(
                    "completion_tokens", 0)
                used["cost"] += meter.get("cost", 0.0)

    def remaining(self) -> dict[str, Any]:
        out = {k: v for k, v in self.settings.items()}
        model = {r: dict(v) for r, v in (self.settings.get("model") or {}).items()}
        for role, spec in model.items():
            budget = dict(spec.get("budget") or {})
            for key, limit in list(budget.items()):
                if limit is not None:
                    budget[key] = max(0, limit - self.used.get(role, {}).get(key, 0))
            if budget:
                spec["budget"] = budget
        if model:
            out["model"] = model
        return out

    def exhausted(self) -> str | None:
        for role, spec in (self.remaining().get("model") or {}).items():
            for key, left in (spec.get("budget") or {}).items():
                if left is not None and left <= 0:
                    return f"the night's {role} {key} budget is spent"
        return None


def _best_so_far(run_dir: RunDir, start: str | None) -> str | None:
    best = run_dir.best_skill_path
    if not best.exists():
        return None
    text = best.read_text(encoding="utf-8")
    return None if start is not None and text == start else text


def _start(skill: Any) -> str:
    """What a night trains of a skill the agent has: its body, and where its folder holds
    other text files (references, scripts), those too, as one package. A folder that cannot
    be trained whole (a binary asset) trains its body alone, and the log says why."""
    from skillgrad.errors import DataError

    try:
        files = split_package(read_folder(skill.folder)).files
    except DataError as exc:
        log.warning("skill %s: training SKILL.md alone (%s)", skill.name, exc)
        return str(skill.body)
    return join_package(skill.body, files) if files else str(skill.body)


def _new_name(project: Path) -> str:
    name = slug(project.name)[:48].strip("-") or "project"
    return f"{name}-practices"


def _stage(project: Path, root: Path, night: str, result: NightResult) -> Path | None:
    """Stage the skills that changed (under ``root``: the project, or a dry run's folder)."""
    from skillgrad.agentskills import read_skill
    from skillgrad.sleep.skills import new_skill
    from skillgrad.sleep.staging import StagedProposal, Staging

    proposals = []
    for run in result.runs:
        if run.proposed is None:
            continue
        if run.kind == "memory" and run.target is not None:
            proposals.append(StagedProposal(target=run.target, text=run.proposed,
                                            kind="memory", name=run.name))
        elif run.target is not None:
            live = read_skill(run.target)
            package = split_package(run.proposed)  # a package's changed files, each staged
            if package.main != live.body or not package.files:
                proposals.append(StagedProposal(target=run.target,
                                                text=live.with_body(package.main),
                                                kind="skill", name=run.name))
            for rel, text in package.files.items():
                path = live.folder / rel
                if not path.is_file() or path.read_text(encoding="utf-8") != text:
                    proposals.append(StagedProposal(target=path, text=text, kind="skill",
                                                    name=f"{run.name}/{rel}"))
        else:
            intents = "; ".join(_clipped(t.intent, 100) for t in run.tasks[:3])
            description = (f"Use when working in {project.name} on requests such as: "
                           f"{intents}")[:1024]
            proposals.append(new_skill(run.name, description, run.proposed,
                                       project / ".claude" / "skills"))
    if not proposals:
        return None
    evidence = [e.model_dump(mode="json") | {"task": t.id}
                for run in result.runs for t in run.tasks for e in t.evidence]
    return Staging(root).stage(night, proposals, report_markdown(result.report),
                               result.report, evidence)


def report(result: NightResult, section: SleepSection) -> dict[str, Any]:
    skills = []
    for run in result.runs:
        tasks = [{"id": t.id, "intent": t.intent, "occurrences": t.occurrences,
                  "split": split_of(t, section.val_percent),
                  "before": run.before.get(t.id), "after": run.after.get(t.id)}
                 for t in run.tasks]
        selection = run.summary.get("selection", {})
        skills.append({"skill": run.name, "target": str(run.target) if run.target else None,
                       "status": run.status, "reason": run.reason,
                       "selection_before": selection.get("initial"),
                       "selection_after": selection.get("best"),
                       "changed": run.proposed is not None, "accepted": run.accepted,
                       "tasks": tasks})
    return {"night": result.night, "harvested_sessions": result.harvested,
            "skipped": result.skipped, "miner": result.tasks.miner,
            "notes": result.tasks.notes, "tasks": len(result.tasks.tasks),
            "test": "none: a night's tasks are split into training and selection only",
            "skills": skills}


def report_markdown(data: Mapping[str, Any]) -> str:
    lines = [f"# Night {data['night']}", "",
             f"- sessions harvested: {data['harvested_sessions']}"
             + (f" (skipped: {', '.join(f'{k} {v}' for k, v in data['skipped'].items())})"
                if data["skipped"] else ""),
             f"- tasks: {data['tasks']} (miner: {data['miner']})", f"- test: {data['test']}"]
    lines += [f"- note: {n}" for n in data["notes"]]
    for skill in data["skills"]:
        lines += ["", f"## {skill['skill']} ({skill['status']})"]
        if skill["reason"]:
            lines.append(skill["reason"])
        if skill["selection_before"] is not None:
            lines.append(f"Selection score {skill['selection_before']:.3f} -> "
                         f"{skill['selection_after']:.3f}"
                         + (" (changed)" if skill["changed"] else " (unchanged)"))
        for step in skill["accepted"]:
            lines.append(f"- accepted at {step['step']} from tasks {', '.join(step['tasks'])}: "
                         f"{step['reason']}")
        lines += ["", "| task | split | before | after | request |", "|---|---|---|---|---|"]
        for t in skill["tasks"]:
            lines.append(f"| {_cell(t['id'])} | {t['split']} | {_fmt(t['before'])} | "
                         f"{_fmt(t['after'])} | {_cell(t['intent'], 70)} |")
    return "\n".join(lines) + "\n"


def _cell(text: str, limit: int | None = None) -> str:
    """``text`` as one markdown table cell: on one line, its pipes escaped."""
    flat = " ".join(str(text).split())[:limit]
    return flat.replace("\\", "\\\\").replace("|", "\\|")


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _clipped(text: str, limit: int) -> str:
    """``text`` on one line, cut at a word boundary before ``limit`` characters (with an
    ellipsis) where it is longer."""
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    return line[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " ..."
