"""An agent's work in a throwaway working copy, and the checks run there afterwards: the one
runner of Sleep's agent mode and the ``coding`` environment.

In deep-learning terms it is the forward pass of a target that acts on files: the agent (a
backend that accepts a request's ``workspace``) is handed the skill and a request in a git
worktree of a repository at a commit; the loss is read from the working copy it leaves
(commands that must exit 0, files that must or must not change).

The worktree's folder name starts with ``skillgrad-replay`` (:data:`REPLAY_MARKER`), so the
agent's own session of the replay is never harvested back by Sleep. Commands run without a
shell, with a time limit; a command that cannot start is a failed check, never a crash. A
model that cannot act on files simply leaves the copy as it was: its checks fail, a scored
result.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from skillgrad.errors import DataError
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import ChatRequest, Completion, Message
from skillgrad.traces.sessions import REPLAY_MARKER

CheckOp = Literal["contains", "not_contains", "regex", "max_chars", "min_chars", "no_refusal",
                  "mentions_file", "command_passes", "file_changed", "file_unchanged"]
# Checks that need the agent's working copy; a text reply skips them.
AGENT_CHECKS = frozenset({"command_passes", "file_changed", "file_unchanged"})


class Check(BaseModel):
    """A rule an answer must pass. ``contains`` / ``not_contains`` / ``mentions_file``: a
    text, compared case-insensitively; ``regex``: a pattern; ``max_chars`` / ``min_chars``: a
    length; ``no_refusal``: no argument. In the agent's working copy: ``command_passes``: a
    command (run without a shell) that must exit 0 after the agent's work; ``file_changed``:
    a path, relative to the repository, the agent must change; ``file_unchanged``: a path the
    agent must leave as it was."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: CheckOp
    arg: str | int | None = None

    @field_validator("arg")
    @classmethod
    def _usable(cls, value: str | int | None) -> str | int | None:
        if isinstance(value, str) and not value.strip():
            raise ValueError("an empty argument checks nothing")
        return value


def describe(rule: Check) -> str:
    """A check in one phrase (``command_passes 'python3 -m unittest'``): the key of its
    outcome and how a failed one reads in a reason."""
    return f"{rule.op}" + (f" {rule.arg!r}" if rule.arg is not None else "")


@dataclass(frozen=True)
class WorkspaceRun:
    """One agent run in a working copy: the request's two messages, the agent's completion,
    the outcome of each working-copy check (by :func:`describe`) and the files it changed
    (added, modified or deleted, relative to the repository; committed work counts)."""

    messages: tuple[Message, Message]
    completion: Completion
    checks: dict[str, bool] = field(default_factory=dict)
    files_changed: tuple[str, ...] = ()

    @property
    def failed(self) -> list[str]:
        return [name for name, passed in self.checks.items() if not passed]


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``git -C repo args``'s output; a failure is a :class:`DataError` naming the repository."""
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              timeout=120, check=False, env=env)
    except FileNotFoundError:
        raise DataError("git: not found on PATH; agent work runs in git worktrees") from None
    if done.returncode != 0:
        problem = (done.stderr or done.stdout).strip().splitlines()
        raise DataError(f"{repo}: git {args[0]} failed: {problem[-1] if problem else ''}")
    return done.stdout


@contextmanager
def _bookkeeping(repo: Path) -> Iterator[None]:
    """Held while ``repo``'s worktree list changes. ``git worktree prune`` deletes the entry
    of a worktree another thread or process is still adding (its ``gitdir`` file is not yet
    written), so adds, removes and prunes of one repository take turns: an ``flock`` on a
    file in its git folder (in the temporary folder, keyed by its path, when that is not a
    folder), which conflicts across threads and processes alike."""
    gitdir = repo / ".git"
    if gitdir.is_dir():
        lock = gitdir / "skillgrad-worktrees.lock"
    else:
        key = hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:16]
        lock = Path(tempfile.gettempdir()) / f"skillgrad-worktrees-{key}.lock"
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextmanager
def worktree(repo: Path, commit: str | None, folder: Path, name: str) -> Iterator[Path]:
    """A detached worktree of ``repo`` at ``commit`` (HEAD when unknown) in
    ``folder/skillgrad-replay-<name>``, removed afterwards; one left by an interrupted
    run is replaced. Safe to use from several threads or processes on one repository."""
    path = folder / f"{REPLAY_MARKER}-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    with _bookkeeping(repo):
        if path.exists():
            git(repo, "worktree", "remove", "--force", str(path))
        git(repo, "worktree", "prune")
        git(repo, "worktree", "add", "--detach", "--force", str(path), commit or "HEAD")
    try:
        yield path
    finally:
        with _bookkeeping(repo):
            try:
                git(repo, "worktree", "remove", "--force", str(path))
            except DataError:
                shutil.rmtree(path, ignore_errors=True)
                git(repo, "worktree", "prune")


def run_checks(checks: Sequence[Check], copy: Path, base: str, timeout: float
               ) -> tuple[dict[str, bool], tuple[str, ...]]:
    """The outcome of each working-copy check in ``copy`` (the others are skipped), and the
    files changed since ``base``."""
    changed = changed_files(copy, base)
    outcomes: dict[str, bool] = {}
    for rule in checks:
        if rule.op not in AGENT_CHECKS:
            continue
        if rule.op in ("file_changed", "file_unchanged"):
            touched = _relative(str(rule.arg)) in changed
            outcomes[describe(rule)] = touched == (rule.op == "file_changed")
            continue
        outcomes[describe(rule)] = _passes(str(rule.arg), copy, timeout)
    return outcomes, changed


def _passes(command: str, copy: Path, timeout: float) -> bool:
    try:
        done = subprocess.run(shlex.split(command), cwd=copy, capture_output=True,
                              timeout=timeout, check=False,
                              env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _relative(path: str) -> str:
    return PurePosixPath(path.removeprefix("./")).as_posix()


def changed_files(copy: Path, base: str) -> tuple[str, ...]:
    """Files added, modified or deleted in ``copy`` since commit ``base``: the working tree
    against ``base`` (so work the agent committed counts) and untracked files not ignored."""
    tracked = git(copy, "diff", "--name-only", "--no-renames", "-z", base)
    untracked = git(copy, "ls-files", "--others", "--exclude-standard", "-z")
    return tuple(sorted({p for p in (tracked + untracked).split("\0") if p}))


def run_task(model: ChatModel, skill: str, request: str, repo: Path, commit: str | None,
             checks: Sequence[Check], folder: Path, name: str, *, timeout: float,
             max_tokens: int, temperature: float) -> WorkspaceRun:
    """The agent works on ``request`` with ``skill`` as its system message in a worktree of
    ``repo`` at ``commit`` (in ``folder``, named after ``name``); then the working-copy
    checks run there, and the worktree is removed. A model failure propagates, never
    scored; a repository git cannot check out is a :class:`DataError`."""
    system = Message(role="system", content=skill)
    user = Message(role="user", content=request)
    with worktree(repo, commit, folder, name) as copy:
        base = git(copy, "rev-parse", "HEAD").strip()
        completion = model.complete(ChatRequest(
            messages=(system, user), max_tokens=max_tokens, temperature=temperature,
            workspace=str(copy)))
        outcomes, changed = run_checks(checks, copy, base, timeout)
    return WorkspaceRun((system, user), completion, outcomes, changed)
