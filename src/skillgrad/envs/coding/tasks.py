"""The ``coding`` task set on disk: ``tasks.jsonl`` (one task a line) and ``repos.json`` (each
repository's files), and a repository made a git repository with a stable commit.

A repository is committed with a fixed author, committer, dates and message, and without
the user's git configuration, so the same files always give the same commit hash: a task
names its repository by name and commit, and a cached copy that is not at that commit is
never used.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from skillgrad.envs.base import Split
from skillgrad.envs.data import located_records
from skillgrad.envs.workspace import AGENT_CHECKS, Check, git
from skillgrad.errors import DataError

TASKS_FILE = "tasks.jsonl"
REPOS_FILE = "repos.json"
GENERATE = "python -m skillgrad.envs.coding.generate"
# Who commits a repository and when: fixed, so the commit hash is a function of the files.
COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "skillgrad", "GIT_AUTHOR_EMAIL": "coding@skillgrad.invalid",
    "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+00:00", "GIT_COMMITTER_NAME": "skillgrad",
    "GIT_COMMITTER_EMAIL": "coding@skillgrad.invalid",
    "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+00:00",
    # The user's configuration (signing, hooks, line endings) must not change the commit.
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}


class CodingTask(BaseModel):
    """One task: a request to carry out in a repository at a commit, and its checks."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    repo: str = Field(min_length=1, description="a repository of repos.json")
    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    split: Split
    template: str = ""
    conventions: tuple[str, ...] = ()
    request: str = Field(min_length=1)
    checks: tuple[Check, ...] = Field(min_length=1)
    solution: str = Field("", description="a reference solution: a patch for git apply")

    @field_validator("checks")
    @classmethod
    def _working_copy(cls, value: tuple[Check, ...]) -> tuple[Check, ...]:
        if not any(c.op in AGENT_CHECKS for c in value):
            raise ValueError("no working-copy check (command_passes, file_changed or "
                             "file_unchanged): the agent's work would never be looked at")
        return value


def read_tasks(path: Path) -> list[CodingTask]:
    """The tasks of a ``tasks.jsonl``; a bad line is a :class:`DataError` naming it."""
    tasks = [_task(record, where) for where, record in located_records(path)]
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise DataError(f"{path}: task id {task.id!r} is used twice")
        seen.add(task.id)
    return tasks


def _task(record: dict[str, Any], where: str) -> CodingTask:
    try:
        return CodingTask.model_validate(record)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"])
        message = str(err["msg"]).removeprefix("Value error, ")  # pydantic's wrapping
        raise DataError(f"{where}: {key}: {message}") from None


def read_repos(path: Path) -> dict[str, dict[str, str]]:
    """Each repository's files (relative path -> text) from a ``repos.json``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: repositories file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a JSON file ({exc})") from None
    repos = data.get("repos") if isinstance(data, dict) else None
    if not isinstance(repos, dict) or not repos:
        raise DataError(f"{path}: expected {{\"repos\": {{name: {{path: text}}}}}}")
    for name, files in repos.items():
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            raise DataError(f"{path}: repos.{name}: not a usable repository name")
        if not isinstance(files, dict) or not files or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            raise DataError(f"{path}: repos.{name}: expected a map of file path to text")
        for rel in files:
            parts = PurePosixPath(rel).parts
            if not rel or PurePosixPath(rel).is_absolute() or ".." in parts or ".git" in parts:
                raise DataError(f"{path}: repos.{name}: {rel!r} is not a path inside it")
    return repos


def commit_files(files: dict[str, str], folder: Path, message: str) -> str:
    """``files`` written into the empty ``folder`` and committed there as a new git
    repository with a fixed identity and date: the commit hash."""
    for rel, text in sorted(files.items()):
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text.encode("utf-8"))
    env = {**os.environ, **COMMIT_ENV}
    git(folder, "init", "-q", env=env)
    git(folder, "add", "-A", env=env)
    git(folder, "commit", "-q", "--no-verify", "--no-gpg-sign", "-m", message, env=env)
    return git(folder, "rev-parse", "HEAD", env=env).strip()


def repository(name: str, files: dict[str, str], commit: str, cache: Path) -> Path:
    """The git repository of ``name`` at ``commit`` under ``cache``, made from ``files`` on
    first use. Files that commit to another hash are a :class:`DataError` (the task set is
    out of date: regenerate it)."""
    path = cache / f"{name}-{commit[:12]}"
    if (path / ".git").is_dir():
        if git(path, "rev-parse", "HEAD").strip() != commit:
            raise DataError(f"{path}: not at commit {commit}; delete the folder to rebuild it")
        return path
    cache.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache))
    try:
        made = commit_files(files, building, message(name))
        if made != commit:
            raise DataError(f"repository {name}: its files commit to {made}, but its tasks "
                            f"name {commit}; regenerate the task set ({GENERATE})")
        try:
            building.rename(path)
        except OSError:  # another process made it first
            if not (path / ".git").is_dir():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return path


def message(name: str) -> str:
    return f"{name}: the starting point of the coding tasks\n"
