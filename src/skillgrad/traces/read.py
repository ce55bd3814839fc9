"""What the session adapters read with: a JSON-lines file a line at a time, a JSON file, a
SQLite store without writing to it, and the values found there as the types a session holds.

Every JSON value read here (:func:`loads`) is valid Unicode: a lone UTF-16 surrogate that an
agent wrote as an escape (``"\\ud800"``) becomes U+FFFD, so a path or a prompt holding one
can be compared, hashed, written and sent like any other text.

Nothing here writes where an agent keeps its sessions. A source that cannot be read raises
:class:`~skillgrad.traces.base.SessionFormatError` naming the file (and the line, or
the field) it is about, never its content.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillgrad.traces.base import SessionFormatError
from skillgrad.traces.sessions import valid_text

MAX_LINE_BYTES = 64 * 2**20  # one JSON line; inline images are a few MB, a runaway one more
BUSY_WAIT_S = 0.5  # how long a read waits for another process's write lock before copying
_DB_COPY_SUFFIXES = ("", "-wal", "-journal")  # see sqlite_readonly
_FRACTION = re.compile(r"\.(\d+)")
# A \uD800-\uDFFF escape: the only way JSON text can hold a surrogate.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


def loads(text: str | bytes) -> Any:
    """``json.loads``, with every string of the result valid Unicode (lone surrogates
    replaced by U+FFFD). Raises ``ValueError`` as ``json.loads`` does."""
    value = json.loads(text)
    escaped = (_SURROGATE_ESCAPE_BYTES.search(text) if isinstance(text, bytes)
               else _SURROGATE_ESCAPE.search(text))
    return valid_text(value) if escaped else value


# ---------------------------------------------------------------------- files

def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of a JSON-lines file, one line in
    memory at a time. Raises :class:`SessionFormatError` for a line that is not a JSON object:
    "truncated" when it is the last line and has no newline (a writer that stopped mid-line),
    "malformed" otherwise. The messages name line numbers, never content."""
    with path.open("rb") as fh:
        number = 0
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise SessionFormatError(f"malformed: line {number} is longer than "
                                         f"{MAX_LINE_BYTES // 2**20} MiB")
            if not raw.strip():
                continue
            try:
                obj = loads(raw)
            except ValueError:  # JSONDecodeError, or bytes that are not UTF-8
                if not raw.endswith(b"\n"):
                    raise SessionFormatError(f"truncated: the last line ({number}) is cut "
                                             "off") from None
                raise SessionFormatError(f"malformed: line {number} is not JSON") from None
            if not isinstance(obj, dict):
                raise SessionFormatError(f"malformed: line {number} is not a JSON object")
            yield number, obj


def jsonl_records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """Every object of a JSON-lines file with where it is (``<path>: line N``), read whole;
    a bad line is a :class:`SessionFormatError` that names the file."""
    try:
        return [(f"{path}: line {n}", obj) for n, obj in read_jsonl(path)]
    except SessionFormatError as exc:
        raise SessionFormatError(f"{path}: {exc}") from None


def read_json_object(path: Path) -> dict[str, Any]:
    """A file holding one JSON object (a session saved whole). One that stops mid-way (a
    writer still at it, or killed) is "truncated", at the line where it stops."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SessionFormatError(f"{path}: cannot read ({exc})") from None
    try:
        obj = loads(text)
    except json.JSONDecodeError as exc:
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            raise SessionFormatError(f"{path}: truncated: the JSON stops at line "
                                     f"{text.rstrip().count(chr(10)) + 1}, unfinished") from None
        raise SessionFormatError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(obj, dict):
        raise SessionFormatError(f"{path}: expected a JSON object")
    return obj


# ---------------------------------------------------------------------- SQLite

@contextlib.contextmanager
def sqlite_readonly(path: Path, scratch: Path | None = None) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the SQLite database at ``path``.

    A database that cannot be read where it lies (another process holds it locked, or its
    folder takes no ``-shm`` file) is copied with its ``-wal`` and ``-journal`` files into a
    temporary folder (inside ``scratch`` when given) and the copy is read: opening it replays
    the write-ahead log, or rolls back a half-done write, to the last committed state. The
    ``-shm`` file is not copied: it only indexes the ``-wal``, SQLite rebuilds it, and one
    copied while a writer works could disagree with the copied log. Raises
    :class:`SessionFormatError` for a file that is not a readable database, or one that cannot
    be read in place and cannot be copied."""
    try:
        con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=BUSY_WAIT_S)
    except sqlite3.Error as exc:
        raise SessionFormatError(f"{path}: cannot open the database ({exc})") from None
    try:
        _probe(con, path)
    except _Unopenable as exc:  # locked, or its -shm cannot be made beside it: read a copy
        reason = str(exc)
    else:
        with contextlib.closing(con):
            yield con
        return
    with _copied(path, scratch, reason) as copy:
        try:
            con = sqlite3.connect(copy)
            _probe(con, path)
        except (sqlite3.Error, _Unopenable) as exc:
            raise SessionFormatError(f"{path}: {reason}, and its copy cannot be read either "
                                     f"({exc})") from None
        with contextlib.closing(con):
            yield con


def query(con: sqlite3.Connection, db: Path, sql: str, args: tuple[Any, ...] = (), *,
          what: str) -> list[Any]:
    """The rows of ``sql``; a failure is a :class:`SessionFormatError` saying that ``what``
    (the session store, its tables) cannot be read."""
    try:
        return con.execute(sql, args).fetchall()
    except sqlite3.Error as exc:
        raise SessionFormatError(f"{db}: cannot read {what} ({exc})") from None


class _Unopenable(Exception):
    """The database cannot be opened where it lies, read-only: another process holds it
    locked, or SQLite cannot create its shared-memory file there."""


def _probe(con: sqlite3.Connection, path: Path) -> None:
    try:
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.OperationalError as exc:  # busy, locked, cannot open the -shm
        con.close()
        raise _Unopenable(str(exc)) from None
    except sqlite3.DatabaseError as exc:  # not a database, or a corrupt one
        con.close()
        raise SessionFormatError(f"{path}: not a readable SQLite database ({exc})") from None


@contextlib.contextmanager
def _copied(path: Path, scratch: Path | None, reason: str) -> Iterator[Path]:
    def unusable(exc: OSError) -> SessionFormatError:
        return SessionFormatError(f"{path}: {reason}, and it cannot be copied "
                                  f"({exc.strerror or exc})")

    try:
        tmp = tempfile.TemporaryDirectory(prefix="skillgrad-sqlite-", dir=scratch)
    except OSError as exc:
        raise unusable(exc) from None
    with tmp:
        try:
            for suffix in _DB_COPY_SUFFIXES:
                src = path.with_name(path.name + suffix)
                if suffix and not src.exists():
                    continue
                shutil.copyfile(src, Path(tmp.name) / src.name)
        except OSError as exc:
            raise unusable(exc) from None
        yield Path(tmp.name) / path.name


# ---------------------------------------------------------------------- values

def utc(value: Any) -> datetime | None:
    """A timezone-aware UTC time from an ISO 8601 string (``Z``, an offset, or none, which is
    taken as UTC) or epoch seconds or milliseconds; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, (int, float)):
        seconds = value / 1000 if abs(value) > 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, timezone.utc)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    if text[-1] in "Zz":
        text = text[:-1] + "+00:00"
    # Python 3.10 takes only 3 or 6 fraction digits; agents write 1 to 9.
    text = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), text, count=1)
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def checked_utc(value: Any, where: str, expected: str = "an ISO time") -> datetime | None:
    """:func:`utc`, but a value that is there and is not a time is an error, not None; the
    error says the value is not ``expected``."""
    time = utc(value)
    if time is None and value not in (None, ""):
        raise SessionFormatError(f"{where}: {value!r} is not {expected}")
    return time


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def opt_str(value: Any) -> str | None:
    """``value`` if it is a string with something in it, else None."""
    return value if isinstance(value, str) and value else None
