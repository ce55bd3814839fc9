"""Finding what the dashboard shows: run directories (a folder holding ``checkpoint.json``, or
the ``run.json`` marker of a run before its first checkpoint) and projects with sleep nights
(``.skillgrad/sleep/``), a few levels under the folders it was given, found again on every
request so that a training started later shows up.

Only what was found is addressable: a page names a run by an id made here, and the id is
looked up, never turned into a path. Nothing here writes, creates or locks a file; whether a
training process holds a run is read from the kernel's lock table (``/proc/locks``) rather
than by taking the lock, which could make a starting training fail.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from skillgrad.errors import SkillgradError
from skillgrad.rundir import LOCK, RunDir, inside
from skillgrad.sleep.staging import SLEEP_DIR

MAX_DEPTH = 4  # runs/compare-math/skillgrad/seed0 is three levels under runs
SKIPPED = frozenset({"node_modules", "__pycache__"})
PROC_LOCKS = Path("/proc/locks")


@dataclass(frozen=True)
class RunRef:
    """A run the dashboard found: ``label`` is its path as the user would write it, ``night``
    the sleep night it was trained in (``project`` its project's id), if any."""

    id: str
    path: Path
    label: str
    project: str = ""
    night: str = ""


@dataclass(frozen=True)
class SleepRef:
    """A project with sleep nights (``project/.skillgrad/sleep``)."""

    id: str
    project: Path
    label: str

    @property
    def folder(self) -> Path:
        return self.project / SLEEP_DIR


@dataclass(frozen=True)
class Catalog:
    runs: dict[str, RunRef] = field(default_factory=dict)
    projects: dict[str, SleepRef] = field(default_factory=dict)


def is_run(folder: Path) -> bool:
    run = RunDir(folder)
    return run.checkpoint_path.is_file() or run.marker_path.is_file()


def is_sleep_project(folder: Path) -> bool:
    return (folder / SLEEP_DIR / "nights").is_dir() or (folder / SLEEP_DIR / "work").is_dir()


def check_sources(sources: Sequence[Path], sleep: Sequence[Path] = ()) -> None:
    """Refuse, in one line, a folder that holds no run and no sleep nights."""
    for source in sources:
        if not source.exists():
            raise SkillgradError(f"{source}: no such folder, so no runs to show")
        if not source.is_dir():
            raise SkillgradError(f"{source}: is a file; give a run directory or a folder of runs")
        if not any(True for _ in _walk(source, MAX_DEPTH)):
            raise SkillgradError(f"{source}: not a run directory, and no run directory (nor "
                                 f"sleep nights) within {MAX_DEPTH} levels under it")
    for project in sleep:
        if not is_sleep_project(project):
            raise SkillgradError(f"--sleep {project}: no sleep nights there (no {SLEEP_DIR})")


def discover(sources: Sequence[Path], sleep: Sequence[Path] = ()) -> Catalog:
    """Every run and sleep project under ``sources`` (and the projects ``sleep``), each once."""
    catalog = Catalog()
    seen: set[Path] = set()
    found = [(kind, path, _label(source, path)) for source in sources
             for kind, path in _walk(source, MAX_DEPTH)]
    found += [("sleep", project, str(project)) for project in sleep]
    for kind, path, label in found:
        real = path.resolve()
        if real in seen:
            continue
        seen.add(real)
        if kind == "run":
            ref = RunRef(_ident(label, real), real, label)
            catalog.runs[ref.id] = ref
            continue
        project = SleepRef(_ident(label or real.name, real), real, label or str(real))
        catalog.projects[project.id] = project
        for night, run in night_runs(real):
            name = f"{project.label}: night {night}, {run.name}"
            catalog.runs.setdefault(_ident(name, run), RunRef(
                _ident(name, run), run, name, project.id, night))
    return catalog


def night_runs(project: Path) -> Iterator[tuple[str, Path]]:
    """(night, run directory) of the runs sleep trained (``work/<night>/skills/*/runs/*``)."""
    work = project / SLEEP_DIR / "work"
    for run in sorted(work.glob("*/skills/*/runs/*")):
        if is_run(run):
            yield run.relative_to(work).parts[0], run.resolve()


def _walk(folder: Path, depth: int) -> Iterator[tuple[str, Path]]:
    if is_run(folder):
        yield "run", folder
        return  # a run's own folders hold no other runs
    if is_sleep_project(folder):
        yield "sleep", folder
    if depth == 0:
        return
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:  # unreadable: nothing to show there
        return
    for entry in entries:
        if entry.name.startswith(".") or entry.name in SKIPPED:
            continue
        try:
            if not entry.is_dir():
                continue
        except OSError:
            continue
        yield from _walk(Path(entry.path), depth - 1)


def _label(source: Path, path: Path) -> str:
    if path == source:
        return str(source)
    return str(source / path.relative_to(source))


def _ident(label: str, real: Path) -> str:
    """A readable, URL-safe id: the label's words and a digest of the real path."""
    words = re.sub(r"[^A-Za-z0-9_-]+", "-", label).strip("-")[-60:].strip("-")
    digest = hashlib.sha256(str(real).encode("utf-8")).hexdigest()[:6]
    return f"{words}-{digest}" if words else digest


# ----------------------------------------------------------------------------- liveness


@dataclass(frozen=True)
class LockTable:
    """The ``flock`` locks held on this machine, from ``/proc/locks``: (device major,
    minor, inode) and the holder's PID. ``known`` is False where the table cannot be read
    (not Linux): then the PID a lock file names is checked instead."""

    held: frozenset[tuple[int, int, int, int]] = frozenset()
    known: bool = True

    @classmethod
    def read(cls, path: Path = PROC_LOCKS) -> LockTable:
        try:
            text = path.read_text(encoding="ascii", errors="replace")
        except OSError:
            return cls(known=False)
        held = set()
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 6 or parts[1] != "FLOCK":  # "->" lines are waiters
                continue
            try:
                major, minor, inode = parts[5].split(":")
                held.add((int(major, 16), int(minor, 16), int(inode), int(parts[4])))
            except ValueError:
                continue
        return cls(frozenset(held))

    def holds(self, root: Path) -> bool:
        """Whether a live process holds the run lock of the run in ``root``. A lock file
        left behind by a process that ended is not held."""
        path = root / LOCK
        if not inside(path, root):  # a link out of the run directory: no lock of its run
            return False
        try:
            st = path.stat()
            pid = int(path.read_text(encoding="utf-8").strip() or 0)
        except (OSError, ValueError):
            return False
        if not self.known:
            return _alive(pid)
        dev = (os.major(st.st_dev), os.minor(st.st_dev))
        # On an overlay file system the table names the lower device: the inode and the PID
        # the holder wrote into the file then identify it.
        return any((major, minor) == dev and inode == st.st_ino or
                   inode == st.st_ino and holder == pid
                   for major, minor, inode, holder in self.held)


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, as another user's
        return True
    return True


def fingerprint(root: Path, locks: LockTable) -> str:
    """A cheap digest that changes when the run does: the checkpoint's size and time, the step
    and epoch folders and what the newest step folder holds, the summary, the lock."""
    run = RunDir(root)
    parts: list[str] = [str(locks.holds(root))]
    for path in (run.checkpoint_path, run.summary_path, run.marker_path):
        try:
            st = path.stat()
            parts.append(f"{path.name}:{st.st_size}:{st.st_mtime_ns}")
        except OSError:
            parts.append(f"{path.name}:-")
    for folder in (run.steps_folder, run.epochs_folder):
        names = sorted(_names(folder))
        parts.append(",".join(names[-1:]) + f"#{len(names)}")
        if names:
            parts.append(",".join(sorted(_names(folder / names[-1]))))
    return hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest()[:16]


def _names(folder: Path) -> list[str]:
    try:
        return [e.name for e in os.scandir(folder) if not e.name.startswith(".")]
    except OSError:
        return []
