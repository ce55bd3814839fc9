"""Agent replays in a throwaway working copy: a git worktree of the project at the commit a
task's sessions started from, and the task's checks run there after the agent's work.

The worktree's folder name starts with ``skillgrad-replay`` (:data:`REPLAY_MARKER`), so the
agent's own session of the replay is never harvested back. Commands run without a shell,
with a time limit; a command that cannot start is a failed check, never a crash.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from skillgrad.errors import DataError
from skillgrad.sleep.judge import describe
from skillgrad.sleep.sessions import REPLAY_MARKER
from skillgrad.sleep.tasks import AGENT_CHECKS, SleepTask


def _git(repo: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              timeout=120, check=False)
    except FileNotFoundError:
        raise DataError("git: not found on PATH; agent mode replays tasks in git worktrees"
                        ) from None
    if done.returncode != 0:
        problem = (done.stderr or done.stdout).strip().splitlines()
        raise DataError(f"{repo}: git {args[0]} failed: {problem[-1] if problem else ''}")
    return done.stdout


@contextmanager
def worktree(repo: Path, commit: str | None, folder: Path, name: str) -> Iterator[Path]:
    """A detached worktree of ``repo`` at ``commit`` (HEAD when unknown) in
    ``folder/skillgrad-replay-<name>``, removed afterwards; one left by an interrupted
    replay is replaced."""
    path = folder / f"{REPLAY_MARKER}-{name}"
    folder.mkdir(parents=True, exist_ok=True)
    if path.exists():
        _git(repo, "worktree", "remove", "--force", str(path))
    _git(repo, "worktree", "prune")
    _git(repo, "worktree", "add", "--detach", "--force", str(path), commit or "HEAD")
    try:
        yield path
    finally:
        try:
            _git(repo, "worktree", "remove", "--force", str(path))
        except DataError:
            shutil.rmtree(path, ignore_errors=True)
            _git(repo, "worktree", "prune")


def run_checks(task: SleepTask, copy: Path, timeout: float) -> dict[str, bool]:
    """The outcome of each working-copy check of ``task`` in ``copy``."""
    outcomes = {}
    changed = _changed(copy)
    for rule in task.checks:
        if rule.op not in AGENT_CHECKS:
            continue
        if rule.op == "file_changed":
            outcomes[describe(rule)] = str(rule.arg).lstrip("./") in changed
            continue
        try:
            done = subprocess.run(shlex.split(str(rule.arg)), cwd=copy, capture_output=True,
                                  timeout=timeout, check=False)
            outcomes[describe(rule)] = done.returncode == 0
        except (OSError, ValueError, subprocess.TimeoutExpired):
            outcomes[describe(rule)] = False
    return outcomes


def _changed(copy: Path) -> set[str]:
    out = _git(copy, "status", "--porcelain", "--untracked-files=all")
    return {line[3:].strip() for line in out.splitlines() if len(line) > 3}
