"""The ``sleep`` environment: a night's mined tasks, replayed with the current skill.

Each task is a request the user made several times. The target answers it with the skill as
its system message (text mode), and the answer is scored by the task's checks and rubric
(:mod:`skillgrad.sleep.judge`). Tasks are split into training and selection by a stable hash
of their id (:func:`~skillgrad.sleep.tasks.split_of`), so no task is on both sides and a task
stays on its side from night to night. There is no test split: a night has no third set of
tasks to spare (``evaluation.eval_test`` is off for nights), and its report says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from skillgrad.envs.base import EnvCommon, EnvOptions, Split, single_turn
from skillgrad.envs.workspace import run_task
from skillgrad.errors import DataError
from skillgrad.models.base import ChatModel
from skillgrad.records import RolloutResult, Task
from skillgrad.sleep import judge as judging
from skillgrad.sleep.tasks import SleepTask, read_tasks, split_of

DEFAULT_SKILL = """# Working in this project

Do what the request asks. Name the files you change and the commands that confirm it.
"""


class SleepOptions(EnvOptions):
    """The ``env:`` keys of ``sleep``."""

    tasks_path: Path = Field(description="the night's tasks.json")
    skill: str | None = Field(None, description="only the tasks routed to this skill")
    mode: Literal["text", "agent"] = Field(
        "text", description="text: the target answers in one reply; agent: the target (the "
        "user's agent CLI, backend: agent) works in a git worktree of the "
        "project at the task's commit, and the task's checks run there")
    repo: Path | None = Field(None, description="agent mode: the git repository (default: "
                              "the tasks file's project)")
    check_timeout: float = Field(300.0, gt=0, description="agent mode: seconds a check may run")
    val_percent: int = Field(34, ge=1, le=90, description="share of tasks for selection")
    max_tokens: int = Field(1024, ge=16)
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    judge: dict[str, Any] | None = Field(
        None, description="the rubric judge: a model role section (backend and its keys); "
        "none: rule checks only, unless a judge is set (a night sets its optimizer)")
    judge_samples: int = Field(1, ge=1, le=8, description="judge calls averaged per answer")
    require_review: bool = Field(False, description="refuse a tasks file not marked reviewed")


class SleepEnvironment:
    """A night's tasks as an environment."""

    Options = SleepOptions

    def __init__(self, tasks: dict[Split, list[SleepTask]], options: SleepOptions,
                 skill_text: str, judge_model: ChatModel | None, repo: Path | None = None,
                 replays: Path | None = None) -> None:
        self._tasks = tasks
        self.options = options
        self._skill = skill_text
        self._judge = judge_model
        self._repo = repo
        self._replays = replays

    @classmethod
    def create(cls, common: EnvCommon, options: SleepOptions, base_dir: Path) -> SleepEnvironment:
        path = options.tasks_path if options.tasks_path.is_absolute() else (
            base_dir / options.tasks_path)
        tasks_file = read_tasks(path)
        if options.require_review and not tasks_file.reviewed:
            raise DataError(f"{path}: not reviewed; read it, then set \"reviewed\": true "
                            "(env.require_review is on)")
        chosen = [t for t in tasks_file.tasks
                  if options.skill is None or t.skill == options.skill]
        splits: dict[Split, list[SleepTask]] = {"train": [], "val": [], "test": []}
        for task in chosen:
            splits[split_of(task, options.val_percent)].append(task)
        skill_text = _read_skill(common.skill_init, base_dir) if common.skill_init else (
            DEFAULT_SKILL)
        repo = options.repo or Path(tasks_file.project)
        if options.mode == "agent" and not (repo / ".git").exists():
            raise DataError(f"{repo}: not a git repository; agent mode replays tasks in "
                            "git worktrees (set env.repo)")
        return cls(splits, options, skill_text, _judge_model(options, base_dir), repo,
                   path.parent / "replays")

    def set_judge(self, model: ChatModel) -> None:
        """Judge with ``model`` (a night passes its optimizer's client, so that the judge's
        calls are metered, journaled and budgeted with the run's)."""
        self._judge = model

    def tasks(self, split: Split) -> list[Task]:
        return [Task(id=t.id, prompt=t.intent, reference=t.model_dump(mode="json"),
                     group=t.id, metadata={"skill": t.skill, "occurrences": t.occurrences})
                for t in self._tasks[split]]

    def initial_skill(self) -> str:
        return self._skill

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        mined = SleepTask.model_validate(task.reference)
        if self.options.mode == "agent":
            return self._agent_rollout(task, mined, skill, model)
        system, user, completion = single_turn(
            model, skill, mined.intent, max_tokens=self.options.max_tokens,
            temperature=self.options.temperature)
        hard, soft, reason = judging.score(mined, completion.text, self._judge,
                                           self.options.judge_samples)
        return RolloutResult(task_id=task.id, messages=(system, user), answer=completion.text,
                             hard=hard, soft=soft, reason=reason, usage=completion.usage)

    def _agent_rollout(self, task: Task, mined: SleepTask, skill: str,
                       model: ChatModel) -> RolloutResult:
        """The agent works in a worktree at the task's commit; then the checks run there."""
        from skillgrad.skill import skill_hash

        if self._repo is None or self._replays is None:
            raise DataError("agent mode needs the project's git repository (env.repo)")
        run = run_task(model, skill, mined.intent, self._repo, mined.commit, mined.checks,
                       self._replays, f"{task.id}-{skill_hash(skill)[:8]}",
                       timeout=self.options.check_timeout, max_tokens=self.options.max_tokens,
                       temperature=self.options.temperature)
        answer = run.completion.text
        hard, soft, reason = judging.score(mined, answer, self._judge,
                                           self.options.judge_samples, run.checks)
        return RolloutResult(task_id=task.id, messages=run.messages, answer=answer,
                             hard=hard, soft=soft, reason=reason, usage=run.completion.usage,
                             metadata={"checks": run.checks,
                                       "files_changed": list(run.files_changed)})


def _read_skill(path: Path, base_dir: Path) -> str:
    from skillgrad.package import read_skill

    return read_skill(path if path.is_absolute() else base_dir / path)


def _judge_model(options: SleepOptions, base_dir: Path) -> ChatModel | None:
    return None if options.judge is None else role_model(options.judge, base_dir, "judge")


def role_model(spec: dict[str, Any], base_dir: Path, role: str) -> ChatModel:
    """A model from a role section (``backend`` and its keys, as under ``model.target``)
    behind its own client: retries, budget, and the section's cache."""
    from skillgrad.clients import role_client

    return role_client(spec, base_dir, role).for_stage(role)
