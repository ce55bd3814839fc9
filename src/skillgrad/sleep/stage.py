"""Staging and adoption: what a night proposes waits for review and goes live only on request.

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
``absent``) and the proposal's sha256. Adoption re-checks every pin under the files' locks
and refuses the whole night, naming the file, if one no longer holds: a user's file is never
overwritten unless it is byte for byte what was reviewed against. The journal is written
before the first live file is touched; a process killed half way leaves it, and the next call
puts back every file the interrupted operation had changed (it undoes, so the user decides
again). The locks are per project: two projects adopting into one user-scope skill at the same
instant are kept apart only by the pin check just before each replace.

(Over the house limit of ~400 lines: every path, write, lock and journal entry of staging and
adoption stays in this one module, as those of a run stay in :mod:`skillgrad.rundir`.)
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Literal

from skillgrad.errors import SkillgradError
from skillgrad.files import fsync_dir, read_optional, replace_file, replace_keeping_mode
from skillgrad.rundir import atomic_write_text, read_jsonl, write_json, write_jsonl

SCHEMA_VERSION = 1
ABSENT = "absent"  # the sha256 pinned for a file that does not exist
SLEEP_DIR = Path(".skillgrad") / "sleep"
GITIGNORE_ENTRY = ".skillgrad/"
MANIFEST = "manifest.json"
Kind = Literal["skill", "memory"]
State = Literal["staged", "adopted", "rolled back", "refused"]
_STATES: dict[str, State] = {"staged": "staged", "adopted": "adopted",
                             "rolled_back": "rolled back", "refused": "refused"}
_NIGHT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class StagingError(SkillgradError):
    """A night cannot be staged, adopted or rolled back; the message names the file."""


@dataclass(frozen=True)
class Proposal:
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


@dataclass(frozen=True)
class Adopted:
    """A live file adoption wrote; ``backup``: its earlier content (None: it was new)."""

    target: Path
    backup: Path | None


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
    """The staged nights of one project. ``lock_timeout``: how long a call waits for a file
    another process is adopting into before it refuses."""

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

    def _ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        ensure_gitignore(self.project)

    # ------------------------------------------------------------------ staging
    def stage(self, night_id: str, proposals: Sequence[Proposal], report_md: str,
              report: dict[str, Any], evidence: Iterable[dict[str, Any]]) -> Path:
        """Write a night's proposals, their diffs, the report and the evidence; the manifest
        last, so a folder without one is a staging that did not finish (redone here)."""
        folder = self.night_dir(night_id)
        if (folder / MANIFEST).exists():
            raise StagingError(f"{folder}: night {night_id} is staged already")
        self._ensure()
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
        self._event(folder, "staged", files=[p.name for p in pins])
        write_json(folder / MANIFEST, {"schema_version": SCHEMA_VERSION, "night": night_id,
                                       "created": _now(), "files": [asdict(p) for p in pins]})
        atomic_write_text(self.root / "latest", night_id + "\n")
        return folder

    def _stage_one(self, folder: Path, index: int, proposal: Proposal) -> Pin:
        if proposal.kind not in ("skill", "memory"):
            raise StagingError(f"{proposal.target}: unknown proposal kind {proposal.kind!r} "
                               "(skill or memory)")
        target = Path(os.path.abspath(self.project / proposal.target))
        if target == self.root or self.root in target.parents:
            raise StagingError(f"{target}: inside skillgrad's own folder {self.root}")
        realpath = os.path.realpath(target)
        live = _read_live(Path(realpath), target)
        data = proposal.text.encode("utf-8")
        stem = f"{index:02d}-{_slug(proposal.name)}"
        pin = Pin(index=index, name=proposal.name, kind=proposal.kind, target=str(target),
                  realpath=realpath, links=_links(target), live_sha256=_sha(live),
                  proposal_sha256=_sha(data), proposed=f"proposed/{stem}-{target.name}",
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
        for event in read_jsonl(folder / "history.jsonl"):
            state = _STATES.get(event.get("event", ""), state)
        adopted = _read_adoption(folder)["files"]
        return Night(id=night_id, path=folder, state=state, created=created, files=pins,
                     adopted=tuple(p.name for p in pins if str(p.index) in adopted))

    # ------------------------------------------------------------------ adoption
    def adopt(self, night_id: str, files: Iterable[str] | None = None) -> list[Adopted]:
        """Make a staged night's proposals (``files``: some of them, by name or target path)
        the live files, each backed up first; refuses the night if a pin no longer holds."""
        night = self.night(night_id)
        self._ensure()
        with self._flock(night.path / "night.lock", f"night {night_id}"):
            self._recover(holding=night_id)
            night = self.night(night_id)
            chosen = _choose(night, files)
            with self._target_locks(p.realpath for p in chosen):
                for pin in chosen:
                    problem = self._drift(night, pin)
                    if problem is not None:
                        self._event(night.path, "refused", reason=problem)
                        raise StagingError(problem + "; nothing adopted")
                entries = [self._backup(night.path, pin) for pin in chosen]
                journal = self._journal(night.path, "adopt", entries)
                written: set[str] = set()
                try:
                    for pin in chosen:
                        self._recheck(night, pin)
                        written.add(pin.realpath)
                        _write_live(Path(pin.realpath), (night.path / pin.proposed).read_bytes())
                except (StagingError, OSError):
                    self._undo(night.path, journal, written)
                    raise
                adoption = _read_adoption(night.path)
                for pin, entry in zip(chosen, entries, strict=True):
                    adoption["files"][str(pin.index)] = {"sha256": pin.proposal_sha256,
                                                         "made_dirs": entry["made_dirs"],
                                                         "time": _now()}
                self._commit(night.path, journal["id"], adoption, "adopted",
                             [p.name for p in chosen])
        return [Adopted(Path(p.target), None if p.live_sha256 == ABSENT
                        else night.path / p.backup) for p in chosen]

    def rollback(self, night_id: str) -> list[Path]:
        """Put back what an adopted night replaced; refuses, naming the file, if a live file
        changed since the adoption. Returns the files restored (or removed: they were new)."""
        night = self.night(night_id)
        self._ensure()
        with self._flock(night.path / "night.lock", f"night {night_id}"):
            self._recover(holding=night_id)
            night = self.night(night_id)
            adoption = _read_adoption(night.path)
            pins = [p for p in night.files if str(p.index) in adoption["files"]]
            if not pins:
                raise StagingError(f"{night.path}: night {night_id} has nothing adopted to "
                                   "roll back")
            with self._target_locks(p.realpath for p in pins):
                for pin in pins:
                    self._check_adopted(night, pin)
                entries = [_entry(pin, pin.proposal_sha256, pin.proposed, pin.live_sha256,
                                  adoption["files"][str(pin.index)]["made_dirs"])
                           for pin in pins]
                journal = self._journal(night.path, "rollback", entries)
                written = set()
                try:
                    for pin, entry in zip(pins, entries, strict=True):
                        written.add(pin.realpath)
                        _restore(night.path, Path(pin.realpath),
                                 pin.backup if pin.live_sha256 != ABSENT else ABSENT,
                                 entry["made_dirs"])
                except (StagingError, OSError):
                    self._undo(night.path, journal, written)
                    raise
                adoption["files"] = {}
                self._commit(night.path, journal["id"], adoption, "rolled_back",
                             [p.name for p in pins])
        return [Path(p.target) for p in pins]

    def recover(self) -> list[str]:
        """Undo every adoption or rollback a killed process left half done (its journal is
        still there): each file it had changed gets its earlier content back. A night another
        process is working on is left to it. Returns the ids of the nights put back. Adopt
        and rollback do this first."""
        return self._recover(holding=None)

    def _recover(self, holding: str | None) -> list[str]:
        done = []
        for journal in sorted((self.root / "nights").glob("*/journal.json")):
            folder = journal.parent
            with contextlib.ExitStack() as stack:
                if folder.name != holding:
                    try:
                        stack.enter_context(self._flock(folder / "night.lock", "", wait=0))
                    except StagingError:
                        continue  # that night's operation is alive: not ours to undo
                try:
                    data = json.loads(journal.read_text(encoding="utf-8"))
                except (json.JSONDecodeError, UnicodeDecodeError):
                    raise StagingError(f"{journal}: not valid JSON; restore the files it "
                                       "names by hand") from None
                if self._undo(folder, data):
                    done.append(folder.name)
        return done

    # ------------------------------------------------------------------ steps
    def _drift(self, night: Night, pin: Pin) -> str | None:
        """Why ``pin`` no longer holds (None: it does)."""
        since = f"since night {night.id} was staged"
        if _sha_path(night.path / pin.proposed) != pin.proposal_sha256:
            return f"{night.path / pin.proposed}: the staged proposal was modified {since}"
        new = [link for link in _links(Path(pin.target)) if link not in pin.links]
        if new:
            return f"{pin.target}: its path now crosses a symlink ({new[0]}) that was not there {since}"
        real = os.path.realpath(pin.target)
        if real != pin.realpath:
            return f"{pin.target}: now resolves to {real}, not to {pin.realpath} as it did {since}"
        live = _sha_path(Path(real))
        if live == pin.live_sha256:
            return None
        if pin.live_sha256 == ABSENT:
            return f"{pin.target}: appeared {since}"
        return f"{pin.target}: {'disappeared' if live == ABSENT else 'changed'} {since}"

    def _recheck(self, night: Night, pin: Pin) -> None:
        """The pin once more just before the replace (a writer that holds no lock of ours)."""
        if _sha_path(Path(pin.realpath)) != pin.live_sha256:
            raise StagingError(f"{pin.target}: changed while night {night.id} was being "
                               "adopted; nothing adopted (the files already replaced are put "
                               "back)")

    def _check_adopted(self, night: Night, pin: Pin) -> None:
        since = f"since night {night.id} was adopted"
        if os.path.realpath(pin.target) != pin.realpath or any(
                link not in pin.links for link in _links(Path(pin.target))):
            raise StagingError(f"{pin.target}: its path resolves elsewhere {since}; "
                               "nothing rolled back")
        if _sha_path(Path(pin.realpath)) != pin.proposal_sha256:
            raise StagingError(f"{pin.target}: changed {since}; nothing rolled back (its "
                               f"earlier content: {night.path / pin.backup})")
        if pin.live_sha256 != ABSENT and _sha_path(night.path / pin.backup) != pin.live_sha256:
            raise StagingError(f"{night.path / pin.backup}: the backup was modified; nothing "
                               "rolled back")

    def _backup(self, folder: Path, pin: Pin) -> dict[str, Any]:
        real = Path(pin.realpath)
        if pin.live_sha256 != ABSENT:  # as private as the file it keeps
            replace_file(folder / pin.backup, real.read_bytes(), stat.S_IMODE(real.stat().st_mode))
        made = [str(p) for p in reversed(real.parents) if not p.exists()]
        return _entry(pin, pin.live_sha256, pin.backup if pin.live_sha256 != ABSENT else ABSENT,
                      pin.proposal_sha256, made)

    def _journal(self, folder: Path, op: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
        """Write the journal of an operation before it touches a live file."""
        journal = {"id": f"{op}-{secrets.token_hex(6)}", "op": op, "time": _now(),
                   "pid": os.getpid(), "files": entries}
        write_json(folder / "journal.json", journal)
        return journal

    def _commit(self, folder: Path, op_id: str, adoption: dict[str, Any], event: str,
                names: list[str]) -> None:
        """Record a finished operation: adoption.json naming ``op_id`` is the commit point."""
        adoption["last_op"] = op_id
        write_json(folder / "adoption.json", adoption)
        self._event(folder, event, op=op_id, files=names)
        (folder / "journal.json").unlink()

    def _undo(self, folder: Path, journal: dict[str, Any],
              written: set[str] | None = None) -> bool:
        """Put back the files of an interrupted operation; False if it had committed, and
        only its record was left to finish. ``written``: the operation failed in this process,
        which holds the files' locks and knows which ones it touched."""
        if _read_adoption(folder).get("last_op") == journal["id"]:
            if not any(e.get("op") == journal["id"]
                       for e in read_jsonl(folder / "history.jsonl")):
                self._event(folder, {"adopt": "adopted", "rollback": "rolled_back"}[
                    journal["op"]], op=journal["id"], files=[])
            (folder / "journal.json").unlink()
            return False
        entries = [e for e in journal["files"] if written is None or e["realpath"] in written]
        with (contextlib.nullcontext() if written is not None
              else self._target_locks(e["realpath"] for e in entries)):
            for e in entries:
                live = _sha_path(Path(e["realpath"]))
                if live == e["before"]:
                    continue
                if live != e["after"]:
                    raise StagingError(
                        f"{e['realpath']}: changed after an interrupted {journal['op']} of night "
                        f"{folder.name}; left as it is (delete {folder / 'journal.json'} once "
                        "the file is as it should be)")
                _restore(folder, Path(e["realpath"]), e["source"], e["made_dirs"])
        self._event(folder, "recovered", op=journal["id"], undone=journal["op"])
        (folder / "journal.json").unlink()
        return True

    # ------------------------------------------------------------------ locks and records
    @contextlib.contextmanager
    def _target_locks(self, realpaths: Iterable[str]) -> Iterator[None]:
        with contextlib.ExitStack() as stack:
            for real in sorted(set(realpaths)):  # one order for everyone: no deadlock
                stack.enter_context(self._flock(self.lock_path(real), real))
            yield

    @contextlib.contextmanager
    def _flock(self, path: Path, what: str, wait: float | None = None) -> Iterator[None]:
        """Hold ``path`` locked (flock, dropped by the kernel if the holder dies), waiting up
        to ``wait`` seconds (default ``lock_timeout``) for another holder."""
        deadline = time.monotonic() + (self.lock_timeout if wait is None else wait)
        path.parent.mkdir(parents=True, exist_ok=True)
        fh: IO[str] = open(path, "a+", encoding="utf-8")
        try:
            while True:
                try:
                    fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        fh.seek(0)
                        holder = fh.read().strip() or "unknown"
                        raise StagingError(f"{what}: in use by another skillgrad process "
                                           f"(PID {holder}); try again when it ends") from None
                    time.sleep(0.05)
            fh.truncate(0)
            fh.write(f"{os.getpid()}\n")
            fh.flush()
            yield
        finally:
            fh.close()

    def _event(self, folder: Path, event: str, **data: Any) -> None:
        line = json.dumps({"time": _now(), "event": event, **data}, ensure_ascii=False)
        with (folder / "history.jsonl").open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _choose(night: Night, files: Iterable[str] | None) -> list[Pin]:
    if files is None:
        chosen = [p for p in night.files if p.name not in night.adopted]
        if not chosen:
            raise StagingError(f"{night.path}: night {night.id} has nothing left to adopt")
        return chosen
    wanted = list(files)
    by_key = {k: p for p in night.files for k in (p.name, p.target, p.realpath)}
    unknown = [w for w in wanted if w not in by_key and os.path.abspath(w) not in by_key]
    if unknown:
        raise StagingError(f"night {night.id} proposes no file {unknown[0]!r} (it proposes: "
                           f"{', '.join(p.name for p in night.files) or 'nothing'})")
    picked = [p for p in night.files
              if p.index in {(by_key.get(w) or by_key[os.path.abspath(w)]).index for w in wanted}]
    done = [p for p in picked if p.name in night.adopted]
    if done:
        raise StagingError(f"{done[0].target}: adopted already from night {night.id}")
    return picked


def _entry(pin: Pin, before: str, source: str, after: str, made: list[str]) -> dict[str, Any]:
    """A journal line: the file, its sha256 before and after, where its earlier content lies
    (a path in the night folder, or ABSENT) and the folders the operation makes."""
    return {"realpath": pin.realpath, "before": before, "source": source, "after": after,
            "made_dirs": made}


def _restore(folder: Path, real: Path, source: str, made_dirs: list[str]) -> None:
    if source != ABSENT:
        _write_live(real, (folder / source).read_bytes())
        return
    with contextlib.suppress(FileNotFoundError):
        real.unlink()
    fsync_dir(real.parent)
    for made in reversed(made_dirs):  # the folders adoption made for a new file, if empty
        with contextlib.suppress(OSError):
            Path(made).rmdir()


def _read_adoption(folder: Path) -> dict[str, Any]:
    path = folder / "adoption.json"
    if not path.exists():
        return {"files": {}}
    try:
        return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise StagingError(f"{path}: not valid JSON") from None


def _read_live(real: Path, target: Path) -> bytes | None:
    return read_optional(real, StagingError, target)


def _write_live(path: Path, data: bytes) -> None:
    """Replace ``path``'s content in one step, keeping its permissions."""
    replace_keeping_mode(path, data, StagingError)


def _links(path: Path) -> tuple[str, ...]:
    """The symlinks among ``path`` and the folders above it."""
    out, here = [], Path(path.anchor)
    for part in path.parts[1:]:
        here = here / part
        if here.is_symlink():
            out.append(str(here))
    return tuple(out)


def _sha(data: bytes | None) -> str:
    return ABSENT if data is None else hashlib.sha256(data).hexdigest()


def _sha_path(path: Path) -> str:
    try:
        return _sha(path.read_bytes())
    except FileNotFoundError:
        return ABSENT


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


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
