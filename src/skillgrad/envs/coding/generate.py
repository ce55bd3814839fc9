"""Writing the bundled ``coding`` task set (the data-set builder of the ``coding``
environment): ``data/repos.json`` from the two repositories' sources (:mod:`.ledger`,
:mod:`.textkit`) and ``data/tasks.jsonl`` from the task specs (:mod:`.instances`), each task
with its repository's commit and its reference solution as a patch.

Every task is proved before it is written: in a worktree at its commit, some check fails on
the untouched repository and every check passes after its reference patch. Run it again
after changing a source or a spec::

    python -m skillgrad.envs.coding.generate
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from skillgrad.envs.coding import instances, ledger, textkit
from skillgrad.envs.coding.tasks import (
    COMMIT_ENV,
    REPOS_FILE,
    TASKS_FILE,
    CodingTask,
    commit_files,
    message,
)
from skillgrad.envs.workspace import git, run_checks, worktree
from skillgrad.errors import DataError

SOURCES = {"ledger": ledger.FILES, "textkit": textkit.FILES}
DATA_DIR = Path(__file__).resolve().parent / "data"


def build(work: Path) -> tuple[dict[str, dict[str, str]], list[CodingTask], dict[str, Path]]:
    """The repositories, the tasks (with commits and patches) and, in ``work``, each
    repository as a git repository."""
    repos: dict[str, Path] = {}
    commits: dict[str, str] = {}
    for name, files in SOURCES.items():
        repos[name] = work / name
        repos[name].mkdir(parents=True)
        commits[name] = commit_files(files, repos[name], message(name))
    tasks = []
    for spec in instances.specs():
        patch = _patch(repos[spec.repo], SOURCES[spec.repo], spec.solve(SOURCES[spec.repo]))
        tasks.append(CodingTask(
            id=spec.id, repo=spec.repo, commit=commits[spec.repo], split=spec.split,
            template=spec.template, conventions=spec.conventions, request=spec.request,
            checks=spec.checks, solution=patch))
    return {name: dict(sorted(files.items())) for name, files in SOURCES.items()}, tasks, repos


def _patch(repo: Path, before: dict[str, str], after: dict[str, str]) -> str:
    """The patch that turns ``before`` into ``after`` in ``repo`` (left as it was)."""
    env = {**os.environ, **COMMIT_ENV}
    for rel in before.keys() - after.keys():
        (repo / rel).unlink()
    for rel, text in after.items():
        if text != before.get(rel):
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            (repo / rel).write_bytes(text.encode("utf-8"))
    git(repo, "add", "-A", env=env)
    patch = git(repo, "diff", "--cached", "--no-color", "--no-ext-diff", "--no-renames",
                env=env)
    git(repo, "reset", "-q", "--hard", env=env)
    if not patch:
        raise DataError(f"{repo.name}: a reference solution changes nothing")
    return patch


def prove(task: CodingTask, repo: Path, folder: Path, timeout: float = 120.0
          ) -> tuple[dict[str, bool], dict[str, bool]]:
    """The outcome of ``task``'s checks on its untouched repository, up to the first that
    fails, and of every check after its reference patch (in a worktree under ``folder``)."""
    before: dict[str, bool] = {}
    with worktree(repo, task.commit, folder, task.id) as copy:
        for check in task.checks:
            before.update(run_checks([check], copy, task.commit, timeout)[0])
            if not all(before.values()):
                break
        patch = folder / f"{task.id}.patch"
        patch.write_text(task.solution, encoding="utf-8")
        git(copy, "apply", str(patch))
        after, _ = run_checks(task.checks, copy, task.commit, timeout)
    return before, after


def problems(task: CodingTask, before: dict[str, bool], after: dict[str, bool]) -> list[str]:
    """What is wrong with a task whose checks gave ``before`` and ``after``."""
    found = []
    if all(before.values()):
        found.append(f"{task.id}: every check passes on the untouched repository")
    failed = [name for name, passed in after.items() if not passed]
    if failed:
        found.append(f"{task.id}: the reference solution fails {', '.join(failed)}")
    if len(after) != len(task.checks):
        found.append(f"{task.id}: {len(task.checks) - len(after)} checks did not run")
    return found


def write(out: Path, repos: dict[str, dict[str, str]], tasks: list[CodingTask]) -> None:
    """The two data files, as the package ships them (readable by all, unlike a run's)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / REPOS_FILE).write_text(json.dumps(
        {"version": 1, "repos": repos}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / TASKS_FILE).write_text("".join(
        json.dumps(t.model_dump(mode="json"), ensure_ascii=False) + "\n" for t in tasks),
        encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=__spec__.name if __spec__ else "generate",
                                     description="Write the bundled coding task set.")
    parser.add_argument("--out", type=Path, default=DATA_DIR, help="folder to write to")
    parser.add_argument("--no-prove", action="store_true",
                        help="skip running every task's checks before and after its solution")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="skillgrad-coding-") as tmp:
        repos, tasks, paths = build(Path(tmp) / "repos")
        found = []
        for task in [] if args.no_prove else tasks:
            found += problems(task, *prove(task, paths[task.repo], Path(tmp) / "work"))
    if found:
        raise SystemExit("\n".join(found))
    write(args.out, repos, tasks)
    counts = {s: sum(t.split == s for t in tasks) for s in ("train", "val", "test")}
    print(f"{args.out}: {len(tasks)} tasks ({', '.join(f'{s} {n}' for s, n in counts.items())})"
          f" over {len(repos)} repositories")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
