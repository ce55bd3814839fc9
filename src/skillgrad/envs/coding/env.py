"""The built-in ``coding`` environment: small requests to a coding agent in git repositories,
scored by checks run in the working copy it leaves.

In deep-learning terms it is a data set plus a loss: each task is a repository at a commit
and a request ("rename ...", "add a keyword argument ...", "fix ..."); the target, an agent
that edits files (``backend: agent``, or ``command`` running an agent CLI), works on it in a
throwaway git worktree (:func:`skillgrad.envs.workspace.run_task`, the runner Sleep's agent
mode shares); the loss is the task's checks there: commands that must exit 0, files that
must or must not change. ``hard`` = 1 when every check passes, ``soft`` = the share that
pass, ``reason`` = the failed checks. A model that cannot act on files leaves the copy as it
was: its checks fail, a scored result and never an error.

Data: the bundled task set (``data/``, see ``data/DATA_CARD.md``, written by
:mod:`.generate`): 36 tasks over two small Python repositories whose unwritten conventions
the checks also test, so a skill that states them helps. ``env.data`` reads another folder
of the same two files. Splits: the split each task names (train 16, val 10, test 10), or
``env.split_ratio`` with ``env.split_seed`` over all tasks (``env.splits: ratio``).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions, Split
from skillgrad.envs.coding.tasks import (
    REPOS_FILE,
    TASKS_FILE,
    CodingTask,
    read_repos,
    read_tasks,
    repository,
)
from skillgrad.envs.data import (
    SplitTasksMixin,
    package_file,
    require_nonempty,
    resolve_path,
    skill_file,
    split_by_ratio,
)
from skillgrad.envs.workspace import WorkspaceRun, describe, run_task
from skillgrad.errors import ConfigError, DataError
from skillgrad.models.base import ChatModel
from skillgrad.models.weights import home_dir
from skillgrad.records import RolloutResult, Task
from skillgrad.skill import skill_hash


class CodingOptions(EnvOptions):
    """The ``env:`` keys of ``coding``."""

    data: Path | None = Field(None, description="folder holding tasks.jsonl and repos.json "
                              "(as python -m skillgrad.envs.coding.generate writes them); "
                              "default: the bundled task set")
    splits: Literal["data", "ratio"] = Field(
        "data", description="data: the split each task names; ratio: env.split_ratio and "
        "env.split_seed over all tasks")
    cache: Path | None = Field(None, description="folder the task repositories are made git "
                               "repositories in; default: $SKILLGRAD_HOME/coding "
                               "(~/.cache/skillgrad/coding)")
    check_timeout: float = Field(120.0, gt=0, description="seconds a check command may run")
    max_tokens: int = Field(4096, ge=16, description="token limit of each agent reply")
    temperature: float = Field(0.0, ge=0.0, le=2.0)


class CodingEnvironment(SplitTasksMixin[CodingOptions]):
    """Coding tasks in git worktrees; built with :meth:`create`."""

    SKILL_PACKAGE = "skillgrad.envs.coding"
    Options: ClassVar[type[EnvOptions]] = CodingOptions

    def __init__(self, splits: dict[Split, list[Task]], tasks: dict[str, CodingTask],
                 repos: dict[tuple[str, str], Path], options: CodingOptions,
                 skill_path: Path | None = None) -> None:
        super().__init__(splits, options, skill_path)
        self._coding = tasks
        self._repos = repos

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> CodingEnvironment:
        if common.split_mode == "split_dir":
            raise ConfigError("env coding: its tasks name their split (env.splits: data) or are "
                              "split by env.split_ratio (env.splits: ratio); env.split_mode "
                              "'split_dir' is not used")
        folder = (resolve_path(options.data, base_dir) if options.data is not None
                  else package_file("skillgrad.envs.coding", "data"))
        coding = read_tasks(folder / TASKS_FILE)
        files = read_repos(folder / REPOS_FILE)
        cache = resolve_path(options.cache, base_dir) if options.cache else home_dir() / "coding"
        repos: dict[tuple[str, str], Path] = {}
        for item in coding:
            if item.repo not in files:
                raise DataError(f"{folder / TASKS_FILE}: task {item.id}: repository "
                                f"{item.repo!r} is not in {folder / REPOS_FILE}")
            key = (item.repo, item.commit)
            if key not in repos:
                repos[key] = repository(item.repo, files[item.repo], item.commit, cache)
        tasks = [_task(item) for item in coding]
        if options.splits == "data":
            splits = {s: [_task(c) for c in coding if c.split == s] for s in SPLITS}
            hint = "env.splits data: the split each task names; set env.splits: ratio"
        else:
            splits = split_by_ratio(tasks, common.split_ratio, common.split_seed)
            hint = f"{len(tasks)} tasks; env.split_ratio {common.split_ratio}"
        require_nonempty(splits, str(folder / TASKS_FILE), hint=hint)
        return cls(splits, {c.id: c for c in coding}, repos, options,
                   skill_file(common, base_dir))

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        item = self._coding[task.id]
        opts = self.options
        with tempfile.TemporaryDirectory(prefix="skillgrad-coding-") as folder:
            run = run_task(model, skill, item.request, self._repos[(item.repo, item.commit)],
                           item.commit, item.checks, Path(folder),
                           f"{task.id}-{skill_hash(skill)[:8]}", timeout=opts.check_timeout,
                           max_tokens=opts.max_tokens, temperature=opts.temperature)
        return score(task, item, run)


def _task(item: CodingTask) -> Task:
    # The reference is what the checks test, in words: shown to the optimizer as what was
    # expected; the reference solution stays out of every prompt.
    return Task(id=item.id, prompt=item.request,
                reference="; ".join(describe(c) for c in item.checks),
                metadata={"repo": item.repo, "template": item.template,
                          "conventions": list(item.conventions)})


def score(task: Task, item: CodingTask, run: WorkspaceRun) -> RolloutResult:
    """hard = every check passed, soft = the share passed, reason = the failed checks."""
    failed = run.failed
    total = len(run.checks)
    reason = f"failed checks: {', '.join(failed)}" if failed else ""
    if failed and not run.files_changed:
        reason += "; no file was changed"
    return RolloutResult(
        task_id=task.id, messages=run.messages, answer=run.completion.text,
        hard=float(not failed), soft=(total - len(failed)) / total if total else 0.0,
        reason=reason, usage=run.completion.usage,
        metadata={"checks": run.checks, "files_changed": list(run.files_changed),
                  "template": item.template, "repo": item.repo})
