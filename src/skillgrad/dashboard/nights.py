"""Sleep nights: each night of a project, what it staged (the report, the proposed files and
their diffs against the live ones) and the runs it trained, read from the folders
:mod:`skillgrad.sleep.staging` and :mod:`skillgrad.sleep.night` write (never written here)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgrad.dashboard.discover import Catalog, RunRef, SleepRef
from skillgrad.dashboard.skills import DiffRow, unified_rows
from skillgrad.errors import SkillgradError
from skillgrad.rundir import inside
from skillgrad.sleep.staging import Night, NightState, Pin, Staging


@dataclass(frozen=True)
class NightRow:
    """A night: ``state`` is the staging's (staged, adopted, rolled back, refused), or
    ``pending`` (stopped before it finished), ``not staged`` (it changed no skill) or
    ``unreadable`` (``error`` says why)."""

    id: str
    state: str
    night: Night | None = None
    runs: tuple[RunRef, ...] = ()
    error: str = ""


@dataclass(frozen=True)
class StagedFile:
    pin: Pin
    diff: tuple[DiffRow, ...]
    proposed: str
    adopted: bool


@dataclass(frozen=True)
class SleepPage:
    ref: SleepRef
    nights: tuple[NightRow, ...]


@dataclass(frozen=True)
class NightPage:
    ref: SleepRef
    row: NightRow
    report: dict[str, Any] = field(default_factory=dict)
    report_md: str = ""
    files: tuple[StagedFile, ...] = ()


def sleep_page(ref: SleepRef, catalog: Catalog) -> SleepPage:
    return SleepPage(ref, tuple(night_rows(ref, catalog)))


def night_rows(ref: SleepRef, catalog: Catalog) -> list[NightRow]:
    """Every night of the project, newest first: the staged ones and those that only
    trained (their work folder)."""
    staging = Staging(ref.project)
    ids = {p.name for base in (ref.folder / "nights", ref.folder / "work") if base.is_dir()
           for p in base.iterdir() if p.is_dir() and not p.name.startswith(".")}
    try:
        pending = NightState(ref.folder).pending()
    except (OSError, ValueError, KeyError):  # an unreadable state file: no night is pending
        pending = None
    out = []
    for night_id in sorted(ids, reverse=True):
        runs = tuple(r for r in catalog.runs.values()
                     if r.project == ref.id and r.night == night_id)
        if not (ref.folder / "nights" / night_id / "manifest.json").exists():
            state = "pending" if night_id == pending else "not staged"
            out.append(NightRow(night_id, state, runs=runs))
            continue
        try:
            night = staging.night(night_id)
        except SkillgradError as exc:
            out.append(NightRow(night_id, "unreadable", runs=runs, error=str(exc)))
            continue
        out.append(NightRow(night_id, night.state, night, runs))
    return out


def night_page(ref: SleepRef, night_id: str, catalog: Catalog) -> NightPage | None:
    """The night ``night_id`` (None when the project has no such night)."""
    row = next((r for r in night_rows(ref, catalog) if r.id == night_id), None)
    if row is None:
        return None
    if row.night is None:
        return NightPage(ref, row)
    folder = row.night.path
    report = _read(folder, "report.json")
    files = tuple(StagedFile(pin, tuple(unified_rows(_read(folder, pin.diff) or "")),
                             _read(folder, pin.proposed) or "", pin.name in row.night.adopted)
                  for pin in row.night.files)
    return NightPage(ref, row, report if isinstance(report, dict) else {},
                     _read(folder, "report.md") or "", files)


def _read(folder: Path, name: str) -> Any:
    """A file of the night folder (JSON parsed), None when missing or outside the folder
    (where it really lies, its links followed: :func:`skillgrad.rundir.inside`)."""
    path = folder / name
    if not inside(path, folder):
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if name.endswith(".json"):
        try:
            return json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return None
    return text
