"""The staging area: what a night proposes waits here for review, and goes live only on request
(:mod:`skillgrad.sleep.adoption`).

The deployment step after training: a candidate checkpoint is written beside the model in
service, compared with it, and swapped in (or back out) as one step. Layout::

    <project>/.skillgrad/sleep/
      latest                  the id of the night staged last
      locks/<hash>.lock       one per live file (flock), keyed by the file's real path
      nights/<id>/
        manifest.json         written last: the pins of every proposed file
        report.md  report.json  evidence.jsonl (redacted by the caller)
        proposed/NN-<name>    each proposed file, exactly as it would go live
        diffs/NN-<name>.diff  against the live file as staging found it
        backup/NN-<name>      the live file as adoption found it
        adoption.json         the files adopted now: what was written, what it replaced
        journal.json          only while an adoption or a rollback is under way
        history.jsonl         staged, refused, adopted, rolled back, recovered
        night.lock

A pin is the live file's path, its real path, the symlinks on the way, its sha256 (or
``absent``) and the proposal's sha256: what adoption checks the live file against before it
replaces it. Staging writes a night's folder and reads it back; adoption and rollback (the
backups, the journal, ``adoption.json``) are :mod:`skillgrad.sleep.adoption`'s.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from skillgrad.errors import SkillgradError
from skillgrad.files import atomic_write_text, read_optional, replace_file
from skillgrad.rundir import read_jsonl, write_json, write_jsonl

SCHEMA_VERSION = 1
ABSENT = "absent"  # the sha256 pinned for a file that does not exist
SLEEP_DIR = Path(".skillgrad") / "sleep"
GITIGNORE_ENTRY = ".skillgrad/"
MANIFEST = "manifest.json"
HISTORY = "history.jsonl"
ADOPTION = "adoption.json"
Kind = Literal["skill", "memory"]
State = Literal["staged", "adopted", "rolled back", "refused"]
_STATES: dict[str, State] = {"staged": "staged", "adopted": "adopted",
                             "rolled_back": "rolled back", "refused": "refused"}
_NIGHT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class StagingError(SkillgradError):
    """A night cannot be staged, adopted or rolled back; the message names the file."""


@dataclass(frozen=True)
class StagedProposal:
    """A file a night proposes: a skill's ``SKILL.md`` or a memory file (``CLAUDE.md``,
    ``AGENTS.md``). ``target``: the live path (relative: to the project)."""

    target: Path
    text: str
    kind: Kind
    name: str


@dataclass(frozen=True)
class Pin:
    """One proposed file as the manifest pins it; paths of the night folder are relative."""

    index: int
    name: str
    kind: Kind
    target: str
    realpath: str
    links: tuple[str, ...]  # the symlinks the target's path crossed at staging time
    live_sha256: str  # or ABSENT
    proposal_sha256: str
    proposed: str
    diff: str
    backup: str


@dataclass(frozen=True)
class Night:
    id: str
    path: Path
    state: State
    created: datetime
    files: tuple[Pin, ...]
    adopted: tuple[str, ...]  # names of the files adopted now


def new_night_id(now: datetime) -> str:
    """The id of a night started at ``now`` (timezone-aware), in UTC: ``20260302T031700Z``."""
    if now.tzinfo is None:
        raise ValueError("new_night_id needs a timezone-aware time")
    return now.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def ensure_gitignore(project: Path) -> bool:
    """Add ``.skillgrad/`` to the project's ``.gitignore`` (made if missing) unless a line
    already ignores it; the user's lines stay as they are, byte for byte. Says if it wrote."""
    path = Path(project) / ".gitignore"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    except OSError as exc:
        raise StagingError(f"{path}: cannot be read ({exc.strerror})") from exc
    if any(line.strip() in (b".skillgrad", b".skillgrad/", b"/.skillgrad", b"/.skillgrad/")
           for line in data.splitlines()):
        return False
    newline = b"\r\n" if b"\r\n" in data else b"\n"
    lead = newline if data and not data.endswith(b"\n") else b""
    try:
        with path.open("ab") as fh:  # appended, so a symlinked .gitignore stays one
            fh.write(lead + GITIGNORE_ENTRY.encode() + newline)
    except OSError as exc:
        raise StagingError(f"{path}: cannot add {GITIGNORE_ENTRY} ({exc.strerror})") from exc
    return True


class Staging:
    """The staged nights of one project. ``lock_timeout``: how long an adoption waits for a
    file another process is adopting into before it refuses."""

    def __init__(self, project: Path, lock_timeout: float = 30.0) -> None:
        self.project = Path(os.path.abspath(project))
        self.root = self.project / SLEEP_DIR
        self.lock_timeout = lock_timeout

    def night_dir(self, night_id: str) -> Path:
        if not _NIGHT_ID.match(night_id):
            raise StagingError(f"{night_id!r}: not a night id (letters, digits, '.', '_', '-')")
        return self.root / "nights" / night_id

    def lock_path(self, realpath: str) -> Path:
        return self.root / "locks" / f"{hashlib.sha256(realpath.encode()).hexdigest()[:16]}.lock"

    def ensure(self) -> None:
        """Make the staging folder, and keep it out of the project's git."""
        self.root.mkdir(parents=True, exist_ok=True)
        ensure_gitignore(self.project)

    # ------------------------------------------------------------------ staging
    def stage(self, night_id: str, proposals: Sequence[StagedProposal], report_md: str,
              report: dict[str, Any], evidence: Iterable[dict[str, Any]]) -> Path:
        """Write a night's proposals, their diffs, the report and the evidence; the manifest
        last, so a folder without one is a staging that did not finish (redone here)."""
        folder = self.night_dir(night_id)
        if (folder / MANIFEST).exists():
            raise StagingError(f"{folder}: night {night_id} is staged already")
        self.ensure()
        if folder.exists():
            shutil.rmtree(folder)
        pins = [self._stage_one(folder, i, p) for i, p in enumerate(proposals)]
        for i, pin in enumerate(pins):
            twin = next((p for p in pins[:i] if pin.realpath == p.realpath
                         or pin.name == p.name), None)
            if twin is not None:
                raise StagingError(f"{pin.target}: proposed twice (as {twin.name!r} for "
                                   f"{twin.target} and as {pin.name!r}); each file and each "
                                   "name once")
        atomic_write_text(folder / "report.md", report_md)
        write_json(folder / "report.json", report)
        write_jsonl(folder / "evidence.jsonl", evidence)
        self.add_history(folder, "staged", files=[p.name for p in pins])
        write_json(folder / MANIFEST, {"schema_version": SCHEMA_VERSION, "night": night_id,
                                       "created": timestamp(),
                                       "files": [asdict(p) for p in pins]})
        atomic_write_text(self.root / "latest", night_id + "\n")
        return folder

    def _stage_one(self, folder: Path, index: int, proposal: StagedProposal) -> Pin:
        if proposal.kind not in ("skill", "memory"):
            raise StagingError(f"{proposal.target}: unknown proposal kind {proposal.kind!r} "
                               "(skill or memory)")
        target = Path(os.path.abspath(self.project / proposal.target))
        if target == self.root or self.root in target.parents:
            raise StagingError(f"{target}: inside skillgrad's own folder {self.root}")
        realpath = os.path.realpath(target)
        live = read_optional(Path(realpath), StagingError, target)
        data = proposal.text.encode("utf-8")
        stem = f"{index:02d}-{_slug(proposal.name)}"
        pin = Pin(index=index, name=proposal.name, kind=proposal.kind, target=str(target),
                  realpath=realpath, links=path_links(target), live_sha256=sha(live),
                  proposal_sha256=sha(data), proposed=f"proposed/{stem}-{target.name}",
                  diff=f"diffs/{stem}.diff", backup=f"backup/{stem}-{target.name}")
        replace_file(folder / pin.proposed, data)
        old = None if live is None else live.decode("utf-8", errors="replace")
        atomic_write_text(folder / pin.diff, _diff(old, proposal.text, self._shown(target)))
        return pin

    def _shown(self, target: Path) -> str:
        return (str(target.relative_to(self.project)) if self.project in target.parents
                else str(target))

    # ------------------------------------------------------------------ reading
    def latest(self) -> str | None:
        """The id of the night staged last (None: none yet)."""
        path = self.root / "latest"
        if not path.exists():
            return None
        return path.read_text(encoding="utf-8").strip() or None

    def nights(self) -> list[Night]:
        """Every night staged in this project, oldest first."""
        base = self.root / "nights"
        if not base.is_dir():
            return []
        return [self.night(p.name) for p in sorted(base.iterdir())
                if _NIGHT_ID.match(p.name) and (p / MANIFEST).exists()]

    def night(self, night_id: str) -> Night:
        folder = self.night_dir(night_id)
        path = folder / MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            pins = tuple(Pin(**{**f, "links": tuple(f["links"])}) for f in data["files"])
            created = datetime.fromisoformat(data["created"])
        except FileNotFoundError:
            raise StagingError(f"{folder}: no night {night_id} is staged") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StagingError(f"{path}: not a skillgrad staging manifest ({exc})") from None
        if data.get("schema_version") != SCHEMA_VERSION:
            raise StagingError(f"{path}: manifest schema version is not {SCHEMA_VERSION}")
        state: State = "staged"
        for event in read_jsonl(folder / HISTORY):
            state = _STATES.get(event.get("event", ""), state)
        adopted = read_adoption(folder)["files"]
        return Night(id=night_id, path=folder, state=state, created=created, files=pins,
                     adopted=tuple(p.name for p in pins if str(p.index) in adopted))

    # ------------------------------------------------------------------ records
    def add_history(self, folder: Path, event: str, **data: Any) -> None:
        """Append ``event`` to a night's history (synced before this returns)."""
        line = json.dumps({"time": timestamp(), "event": event, **data}, ensure_ascii=False)
        with (folder / HISTORY).open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def read_adoption(folder: Path) -> dict[str, Any]:
    """A night's ``adoption.json``: the files adopted now, and the last operation."""
    path = folder / ADOPTION
    if not path.exists():
        return {"files": {}}
    try:
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise StagingError(f"{path}: not valid JSON") from None


def path_links(path: Path) -> tuple[str, ...]:
    """The symlinks among ``path`` and the folders above it."""
    out, here = [], Path(path.anchor)
    for part in path.parts[1:]:
        here = here / part
        if here.is_symlink():
            out.append(str(here))
    return tuple(out)


def sha(data: bytes | None) -> str:
    """The sha256 a pin holds for ``data`` (ABSENT: no file)."""
    return ABSENT if data is None else hashlib.sha256(data).hexdigest()


def file_sha(path: Path) -> str:
    try:
        return sha(path.read_bytes())
    except FileNotFoundError:
        return ABSENT


def timestamp() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _diff(old: str | None, new: str, shown: str) -> str:
    lines = difflib.unified_diff(_lines(old or ""), _lines(new),
                                 "/dev/null" if old is None else f"a/{shown}", f"b/{shown}")
    return "".join(lines)


def _lines(text: str) -> list[str]:
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1] + "\n\\ No newline at end of file\n")
    return lines


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")[:60] or "file"


class NightState:
    """The night a stopped run left pending, and when the last one finished."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder / "state"

    def pending(self) -> str | None:
        path = self.folder / "pending.json"
        if not path.exists():
            return None
        return str(json.loads(path.read_text(encoding="utf-8"))["night"])

    def set_pending(self, night: str | None) -> None:
        path = self.folder / "pending.json"
        if night is None:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"night": night}) + "\n")
