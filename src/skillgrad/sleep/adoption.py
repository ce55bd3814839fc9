"""Adoption and rollback of a staged night (:mod:`skillgrad.sleep.staging`): its proposals
become the live files, or the files they replaced come back.

Adoption re-checks every pin under the files' locks and refuses the whole night, naming the
file, if one no longer holds: a user's file is never overwritten unless it is byte for byte
what was reviewed against. The journal is written before the first live file is touched; a
process killed half way leaves it, and the next call puts back every file the interrupted
operation had changed (it undoes, so the user decides again). The locks are per project: two
projects adopting into one user-scope skill at the same instant are kept apart only by the pin
check just before each replace.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import stat
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from skillgrad.files import fsync_dir, replace_file, replace_keeping_mode
from skillgrad.rundir import read_jsonl, write_json
from skillgrad.sleep.staging import (
    ABSENT,
    ADOPTION,
    HISTORY,
    Night,
    Pin,
    Staging,
    StagingError,
    file_sha,
    path_links,
    read_adoption,
    timestamp,
)


@dataclass(frozen=True)
class Adopted:
    """A live file adoption wrote; ``backup``: its earlier content (None: it was new)."""

    target: Path
    backup: Path | None


def adopt(staging: Staging, night_id: str, files: Iterable[str] | None = None
          ) -> list[Adopted]:
    """Make a staged night's proposals (``files``: some of them, by name or target path)
    the live files, each backed up first; refuses the night if a pin no longer holds."""
    with _held(staging, night_id) as night:
        chosen = _choose(night, files)
        with _target_locks(staging, (p.realpath for p in chosen)):
            for pin in chosen:
                problem = _drift(night, pin)
                if problem is not None:
                    staging.add_history(night.path, "refused", reason=problem)
                    raise StagingError(problem + "; nothing adopted")
            entries = [_backup(night.path, pin) for pin in chosen]
            journal = _journal(night.path, "adopt", entries)
            written: set[str] = set()
            try:
                for pin in chosen:
                    _recheck(night, pin)
                    written.add(pin.realpath)
                    _write_live(Path(pin.realpath), (night.path / pin.proposed).read_bytes())
            except (StagingError, OSError):
                _undo(staging, night.path, journal, written)
                raise
            adoption = read_adoption(night.path)
            for pin, entry in zip(chosen, entries, strict=True):
                adoption["files"][str(pin.index)] = {"sha256": pin.proposal_sha256,
                                                     "made_dirs": entry["made_dirs"],
                                                     "time": timestamp()}
            _commit(staging, night.path, journal["id"], adoption, "adopted",
                    [p.name for p in chosen])
    return [Adopted(Path(p.target), None if p.live_sha256 == ABSENT
                    else night.path / p.backup) for p in chosen]


def rollback(staging: Staging, night_id: str) -> list[Path]:
    """Put back what an adopted night replaced; refuses, naming the file, if a live file
    changed since the adoption. Returns the files restored (or removed: they were new)."""
    with _held(staging, night_id) as night:
        adoption = read_adoption(night.path)
        pins = [p for p in night.files if str(p.index) in adoption["files"]]
        if not pins:
            raise StagingError(f"{night.path}: night {night_id} has nothing adopted to "
                               "roll back")
        with _target_locks(staging, (p.realpath for p in pins)):
            for pin in pins:
                _check_adopted(night, pin)
            entries = [_entry(pin, pin.proposal_sha256, pin.proposed, pin.live_sha256,
                              adoption["files"][str(pin.index)]["made_dirs"])
                       for pin in pins]
            journal = _journal(night.path, "rollback", entries)
            written = set()
            try:
                for pin, entry in zip(pins, entries, strict=True):
                    written.add(pin.realpath)
                    _restore(night.path, Path(pin.realpath),
                             pin.backup if pin.live_sha256 != ABSENT else ABSENT,
                             entry["made_dirs"])
            except (StagingError, OSError):
                _undo(staging, night.path, journal, written)
                raise
            adoption["files"] = {}
            _commit(staging, night.path, journal["id"], adoption, "rolled_back",
                    [p.name for p in pins])
    return [Path(p.target) for p in pins]


def recover(staging: Staging) -> list[str]:
    """Undo every adoption or rollback a killed process left half done (its journal is
    still there): each file it had changed gets its earlier content back. A night another
    process is working on is left to it. Returns the ids of the nights put back. Adopt
    and rollback do this first."""
    return _recover(staging, holding=None)


@dataclass(frozen=True)
class Interrupted:
    """An adoption or a rollback whose journal is still there. ``committed``: it had
    finished, only its record was left (recovery keeps it); ``running``: another process
    holds the night now (it is under way, not interrupted)."""

    night: str
    op: str  # adopt | rollback
    journal: Path
    committed: bool
    running: bool


def interrupted(staging: Staging) -> list[Interrupted]:
    """The nights an adoption or a rollback left half done, read only (for ``sleep status``:
    nothing is undone or written here)."""
    found = []
    for journal in sorted((staging.root / "nights").glob("*/journal.json")):
        folder = journal.parent
        try:
            data = json.loads(journal.read_text(encoding="utf-8"))
            op, committed = str(data["op"]), read_adoption(folder).get("last_op") == data["id"]
        except (OSError, ValueError, KeyError, TypeError, StagingError):
            op, committed = "operation", False  # unreadable: recover names it
        found.append(Interrupted(folder.name, op, journal, committed,
                                 _busy(folder / "night.lock")))
    return found


def _busy(lock: Path) -> bool:
    """Whether another process holds ``lock`` (an flock); opened read-only, never made."""
    try:
        fh = open(lock, "rb")
    except FileNotFoundError:
        return False
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
        return False


@contextlib.contextmanager
def _held(staging: Staging, night_id: str) -> Iterator[Night]:
    """The night, read again once its lock is held and what an interrupted operation left
    half done is undone."""
    folder = staging.night(night_id).path  # an unknown night is refused before anything
    staging.ensure()
    with _flock(folder / "night.lock", f"night {night_id}", staging.lock_timeout):
        _recover(staging, holding=night_id)
        yield staging.night(night_id)


def _recover(staging: Staging, holding: str | None) -> list[str]:
    done = []
    for journal in sorted((staging.root / "nights").glob("*/journal.json")):
        folder = journal.parent
        with contextlib.ExitStack() as stack:
            if folder.name != holding:
                try:
                    stack.enter_context(_flock(folder / "night.lock", "", wait=0))
                except StagingError:
                    continue  # that night's operation is alive: not ours to undo
            try:
                data = json.loads(journal.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise StagingError(f"{journal}: not valid JSON; restore the files it "
                                   "names by hand") from None
            if _undo(staging, folder, data):
                done.append(folder.name)
    return done


# ---------------------------------------------------------------------- steps
def _drift(night: Night, pin: Pin) -> str | None:
    """Why ``pin`` no longer holds (None: it does)."""
    since = f"since night {night.id} was staged"
    if file_sha(night.path / pin.proposed) != pin.proposal_sha256:
        return f"{night.path / pin.proposed}: the staged proposal was modified {since}"
    new = [link for link in path_links(Path(pin.target)) if link not in pin.links]
    if new:
        return f"{pin.target}: its path now crosses a symlink ({new[0]}) that was not there {since}"
    real = os.path.realpath(pin.target)
    if real != pin.realpath:
        return f"{pin.target}: now resolves to {real}, not to {pin.realpath} as it did {since}"
    live = file_sha(Path(real))
    if live == pin.live_sha256:
        return None
    if pin.live_sha256 == ABSENT:
        return f"{pin.target}: appeared {since}"
    return f"{pin.target}: {'disappeared' if live == ABSENT else 'changed'} {since}"


def _recheck(night: Night, pin: Pin) -> None:
    """The pin once more just before the replace (a writer that holds no lock of ours)."""
    if file_sha(Path(pin.realpath)) != pin.live_sha256:
        raise StagingError(f"{pin.target}: changed while night {night.id} was being "
                           "adopted; nothing adopted (the files already replaced are put "
                           "back)")


def _check_adopted(night: Night, pin: Pin) -> None:
    since = f"since night {night.id} was adopted"
    if os.path.realpath(pin.target) != pin.realpath or any(
            link not in pin.links for link in path_links(Path(pin.target))):
        raise StagingError(f"{pin.target}: its path resolves elsewhere {since}; "
                           "nothing rolled back")
    if file_sha(Path(pin.realpath)) != pin.proposal_sha256:
        raise StagingError(f"{pin.target}: changed {since}; nothing rolled back (its "
                           f"earlier content: {night.path / pin.backup})")
    if pin.live_sha256 != ABSENT and file_sha(night.path / pin.backup) != pin.live_sha256:
        raise StagingError(f"{night.path / pin.backup}: the backup was modified; nothing "
                           "rolled back")


def _backup(folder: Path, pin: Pin) -> dict[str, Any]:
    real = Path(pin.realpath)
    if pin.live_sha256 != ABSENT:  # as private as the file it keeps
        replace_file(folder / pin.backup, real.read_bytes(), stat.S_IMODE(real.stat().st_mode))
    made = [str(p) for p in reversed(real.parents) if not p.exists()]
    return _entry(pin, pin.live_sha256, pin.backup if pin.live_sha256 != ABSENT else ABSENT,
                  pin.proposal_sha256, made)


def _journal(folder: Path, op: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Write the journal of an operation before it touches a live file."""
    journal = {"id": f"{op}-{secrets.token_hex(6)}", "op": op, "time": timestamp(),
               "pid": os.getpid(), "files": entries}
    write_json(folder / "journal.json", journal)
    return journal


def _commit(staging: Staging, folder: Path, op_id: str, adoption: dict[str, Any], event: str,
            names: list[str]) -> None:
    """Record a finished operation: adoption.json naming ``op_id`` is the commit point."""
    adoption["last_op"] = op_id
    write_json(folder / ADOPTION, adoption)
    staging.add_history(folder, event, op=op_id, files=names)
    (folder / "journal.json").unlink()


def _undo(staging: Staging, folder: Path, journal: dict[str, Any],
          written: set[str] | None = None) -> bool:
    """Put back the files of an interrupted operation; False if it had committed, and
    only its record was left to finish. ``written``: the operation failed in this process,
    which holds the files' locks and knows which ones it touched."""
    if read_adoption(folder).get("last_op") == journal["id"]:
        if not any(e.get("op") == journal["id"] for e in read_jsonl(folder / HISTORY)):
            staging.add_history(folder, {"adopt": "adopted", "rollback": "rolled_back"}[
                journal["op"]], op=journal["id"], files=[])
        (folder / "journal.json").unlink()
        return False
    entries = [e for e in journal["files"] if written is None or e["realpath"] in written]
    with (contextlib.nullcontext() if written is not None
          else _target_locks(staging, (e["realpath"] for e in entries))):
        for e in entries:
            live = file_sha(Path(e["realpath"]))
            if live == e["before"]:
                continue
            if live != e["after"]:
                raise StagingError(
                    f"{e['realpath']}: changed after an interrupted {journal['op']} of night "
                    f"{folder.name}; left as it is (delete {folder / 'journal.json'} once "
                    "the file is as it should be)")
            _restore(folder, Path(e["realpath"]), e["source"], e["made_dirs"])
    staging.add_history(folder, "recovered", op=journal["id"], undone=journal["op"])
    (folder / "journal.json").unlink()
    return True


# ---------------------------------------------------------------------- locks
@contextlib.contextmanager
def _target_locks(staging: Staging, realpaths: Iterable[str]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for real in sorted(set(realpaths)):  # one order for everyone: no deadlock
            stack.enter_context(_flock(staging.lock_path(real), real, staging.lock_timeout))
        yield


@contextlib.contextmanager
def _flock(path: Path, what: str, wait: float) -> Iterator[None]:
    """Hold ``path`` locked (flock, dropped by the kernel if the holder dies), waiting up
    to ``wait`` seconds for another holder."""
    deadline = time.monotonic() + wait
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


# ---------------------------------------------------------------------- live files
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


def _write_live(path: Path, data: bytes) -> None:
    """Replace ``path``'s content in one step, keeping its permissions."""
    replace_keeping_mode(path, data, StagingError)
