"""One night: harvest, mine, train each routed skill behind the gate, stage the result.

The training is a :class:`~skillgrad.trainer.Trainer` run over the ``sleep`` environment, one
run directory per skill in the night's work folder, with the project's model settings: the
gate, resume, budgets, the handoff backend and every model backend are the trainer's own. A
night that stops (a budget ran out, handoff answers are pending) is taken up again by the next
``sleep run``; one night runs at a time per project.

Layout, under ``<project>/.skillgrad/sleep/``: ``config.yaml`` (optional), ``archive/`` (the
harvested sessions, redacted), ``state/`` (harvest checkpoints, the pending night, the last
night), ``work/<night>/`` (its tasks and run directories) and ``nights/<night>/`` (what it
staged: :mod:`skillgrad.sleep.staging`).
"""

from __future__ import annotations

import fcntl
import json
import math
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skillgrad.agentskills import AGENTS
from skillgrad.errors import ConfigError
from skillgrad.files import atomic_write_text
from skillgrad.records import Edit, RejectedStep
from skillgrad.rundir import RunDir
from skillgrad.sleep.staging import SLEEP_DIR as SLEEP_DIR  # the night's callers use them
from skillgrad.sleep.staging import NightState as NightState
from skillgrad.sleep.tasks import SleepTask, split_of
from skillgrad.yamlfile import load_yaml_text

MAX_CARRIED = 8  # turned-down changes a night hands to the next
SECTIONS = ("sleep", "model", "train", "gradient", "optimizer", "evaluation", "execution")


class SleepSection(BaseModel):
    """The ``sleep:`` section of a project's sleep config (``.skillgrad/sleep/config.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agents: list[str] = Field(default_factory=lambda: [str(a) for a in AGENTS])
    window_hours: float = Field(72.0, gt=0, description="the sessions of how many hours a "
                                "night mines")
    min_occurrences: int = Field(2, ge=1, description="times a request must recur")
    max_tasks: int = Field(40, ge=1)
    min_tasks: int = Field(3, ge=2, description="tasks a skill needs to be trained")
    miner: str = Field("llm", pattern="^(llm|heuristic)$")
    unrouted: str = Field("skill", pattern="^(skill|memory)$", description="tasks no skill "
                          "fits train a new skill, or the notes of the agent's memory file "
                          "(CLAUDE.md, AGENTS.md, GEMINI.md)")
    mode: str = Field("text", pattern="^(text|agent)$", description="text: the target answers "
                      "each task in one reply; agent: the target (backend command, your agent "
                      "CLI) works in a git worktree of the project, where the checks then run")
    val_percent: int = Field(34, ge=1, le=90)
    redact_patterns: list[str] = Field(default_factory=list)
    judge: dict[str, Any] | None = Field(None, description="default: model.optimizer's section")
    judge_samples: int = Field(1, ge=1, le=8)
    max_tokens: int = Field(512, ge=16, description="the target's reply limit per task")
    require_review: bool = False
    settle_seconds: float = Field(60.0, ge=0)


@dataclass
class SkillRun:
    """What a night did with one skill's tasks."""

    name: str
    target: Path | None
    tasks: list[SleepTask]
    kind: str = "skill"  # skill | memory (the agent's own memory file)
    status: str = "trained"  # trained | unverified | too few tasks | budget spent
    reason: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    before: dict[str, float] = field(default_factory=dict)
    after: dict[str, float] = field(default_factory=dict)
    accepted: list[dict[str, Any]] = field(default_factory=list)
    proposed: str | None = None


def load_sleep_config(path: Path | None) -> tuple[dict[str, Any], SleepSection]:
    """The night's skillgrad sections (model, train, ...) and its ``sleep:`` section."""
    if path is None or not path.exists():
        return {}, SleepSection()
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    data = load_yaml_text(text, str(path)) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of sections")
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"{path}: unknown section '{unknown[0]}' (allowed: "
                          f"{', '.join(SECTIONS)})")
    try:
        section = SleepSection.model_validate(data.pop("sleep", None) or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"{path}: sleep.{key}: {err['msg']}") from None
    return data, section


@contextmanager
def night_lock(folder: Path, *, dry_run: bool = False) -> Iterator[None]:
    """One night at a time per project: a second one is refused, not queued. A dry run
    writes nothing to the project: it takes the lock only where a night made its file before
    (so it is refused while that night runs), and makes no folder or file of its own."""
    path = folder / "night.lock"
    handle: IO[bytes] | None
    if dry_run:
        try:
            handle = open(path, "rb")  # an flock needs no write access
        except FileNotFoundError:
            handle = None
    else:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a+b")
    with handle if handle is not None else nullcontext():
        if handle is not None:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConfigError(f"{folder}: another night is running for this project"
                                  ) from None
        yield


def night_config(settings: Mapping[str, Any], section: SleepSection, tasks_path: Path,
                 skill_file: Path | None, n_train: int) -> dict[str, Any]:
    """A trainer config for one skill's tasks: the project's model settings, one pass over
    its training tasks, the gate with no per-task regression, no test split of its own."""
    model = dict(settings.get("model") or {})
    batch = max(1, min(8, n_train))
    raw: dict[str, Any] = {
        "train": {"num_epochs": 1, "batch_size": batch,
                  "steps_per_epoch": max(1, math.ceil(n_train / batch))},
        # One analysis a step in anchored edits, whatever the optimizer (not the trainer's
        # default for a small one): a session's task is judged, with no answer to set a
        # reply beside; the project's own gradient keys still win.
        "gradient": {"minibatch_size": batch, "proposals": 1, "proposal_form": "edits",
                     "failure_only": False},
        "optimizer": {"learning_rate": 2, "min_learning_rate": 1},
        "evaluation": {"gate_no_regression": True, "eval_test": False},
        "env": {"name": "sleep", "tasks_path": str(tasks_path), "mode": section.mode,
                "val_percent": section.val_percent, "judge": section.judge,
                "judge_samples": section.judge_samples, "max_tokens": section.max_tokens,
                "require_review": section.require_review},
    }
    if skill_file is not None:
        raw["env"]["skill_init"] = str(skill_file)
    for key in ("train", "gradient", "optimizer", "evaluation", "execution"):
        raw.setdefault(key, {}).update(settings.get(key) or {})
    if model:
        raw["model"] = model
    return raw


def train_skill(run: SkillRun, raw: dict[str, Any], folder: Path, base_dir: Path,
                state_dir: Path) -> None:
    """One trainer run over a skill's tasks, in ``folder``: the scores before and after per
    selection task, and the accepted steps with the tasks their edits were made from. Paths
    of the model settings are read from ``base_dir`` (the sleep config's folder); the changes
    the last night turned down are read from, and this night's written to, ``state_dir``."""
    from skillgrad.build import build_environment
    from skillgrad.clients import build_clients
    from skillgrad.config import validate
    from skillgrad.sleep.env import SleepEnvironment
    from skillgrad.trainer import Trainer

    run_dir = skill_run(folder, run.name)
    carried = state_dir / "rejected" / f"{slug(run.name)}.json"
    prior = [RejectedStep.model_validate(r) for r in json.loads(carried.read_text("utf-8"))
             ] if carried.exists() else []
    resolved = validate(raw, {}, base_dir)
    env = build_environment(resolved)
    clients = build_clients(resolved)
    if raw["env"].get("judge") is None and isinstance(env, SleepEnvironment):
        # The optimizer judges: its calls metered, journaled and budgeted with the run's.
        env.set_judge(clients["optimizer"].for_stage("judge"))
    trainer = Trainer(resolved, env, clients["target"], clients["optimizer"], run_dir,
                      prior_rejected=prior)
    run.summary = trainer.fit()
    carried.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(carried, json.dumps([r.model_dump(mode="json") for r in
                                           rejected_in(run_dir)[-MAX_CARRIED:]]) + "\n")
    skills = run.summary["skills"]
    run.before = _per_task(run_dir, skills["initial"])
    run.after = _per_task(run_dir, skills["best"])
    for step in run_dir.step_dirs():
        record = step.read_record()
        if record is not None and str(record.get("decision", "")).startswith("accept"):
            rolled = step.read_rollouts()
            gate = step.read_gate() or {}
            run.accepted.append({"step": step.path.name,
                                 "reason": gate.get("reason", ""),
                                 "tasks": sorted({r["task_id"] for r in rolled})})
    if skills["best"] != skills["initial"]:
        run.proposed = run_dir.best_skill_path.read_text(encoding="utf-8")


def skill_run(folder: Path, name: str) -> RunDir:
    """The run directory of skill ``name``'s training, in the night's folder for it."""
    return RunDir(folder / "runs" / slug(name))


def rejected_in(run_dir: RunDir) -> list[RejectedStep]:
    """The changes a night's run turned down (by the gate, or beaten on the step's tasks in
    the screen), for the next night's optimizer to see."""
    found = []
    for step in run_dir.step_dirs():
        gate = step.read_gate()
        if gate is None:
            continue
        texts: list[str] = []
        if gate.get("decision") == "reject":
            report = step.read_artifact("apply_report") or {}
            texts += [o["edit"]["content"] or f"delete: {o['edit']['anchor']}"
                      for o in report.get("outcomes", ()) if o.get("status") in (
                          "applied", "fuzzy")]
        data = step.read_artifact("screen")
        if data is not None:
            texts += [e for i, row in enumerate(data.get("rows", ()))
                      if row.get("status") == "scored" and i != data.get("chosen")
                      for e in row.get("edits", ())]
        edits = tuple(Edit(op="append", content=t) for t in dict.fromkeys(texts) if t)
        if edits:
            found.append(RejectedStep(global_step=-1, edits=edits,
                                      note=f"turned down last night: {gate.get('reason', '')}"))
    return found


def _per_task(run_dir: RunDir, digest: str) -> dict[str, float]:
    """The selection score (soft) per task of skill ``digest`` (none: never evaluated)."""
    if not run_dir.eval_dir("val", digest).rollouts_path.exists():
        return {}
    return {task: soft for task, (_, soft) in run_dir.eval_per_task("val", digest).items()}


def route(tasks: list[SleepTask], known: Mapping[str, Any]) -> dict[str, list[SleepTask]]:
    """Tasks by the skill that was active in their sessions; those no skill fits under
    ``""`` (a new skill may be proposed for them)."""
    routed: dict[str, list[SleepTask]] = {}
    for task in tasks:
        name = task.skill if task.skill and task.skill in known else ""
        routed.setdefault(name, []).append(task)
    return routed


def split_counts(tasks: list[SleepTask], val_percent: int) -> tuple[int, int]:
    val = sum(split_of(t, val_percent) == "val" for t in tasks)
    return len(tasks) - val, val


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-") or "skill"


def window_start(now: datetime, section: SleepSection) -> datetime:
    return now.astimezone(timezone.utc) - timedelta(hours=section.window_hours)
