"""OpenCode sessions: the SQLite database of OpenCode 1.2 and later, and the JSON files before it.

Layout (``$XDG_DATA_HOME/opencode``, by default ``~/.local/share/opencode``)::

    opencode.db                                session(id, directory, parent_id, title, revert,
                                               time_created, ...), message(id, session_id,
                                               time_created, data JSON), part(id, message_id,
                                               session_id, data JSON); times in epoch ms
    storage/session/<project>/<session>.json   the same records as JSON files, written before
    storage/message/<session>/<message>.json   1.2 and kept by its migration: a session found
    storage/part/<message>/<part>.json         in the database is not read again from here

A message is the user's or the assistant's; its words are ``text`` parts (``synthetic`` and
``ignored`` ones are the engine's), its tool calls ``tool`` parts carrying their state (input,
output or error, ``metadata.exit`` for a shell command), the files it changed ``patch`` parts.
A user message with a ``compaction`` part asks for a summary and the assistant's ``summary``
reply is that summary: neither is kept. An assistant message the person aborted
(``MessageAbortedError``) ends in an interrupt. ``session.revert`` (an undo the person has not
yet moved past) hides the messages from the one it names. A session with a parent is a
sub-agent's. Headless runs (``opencode run``) are not marked in the store; the request they
store is their arguments joined, each holding a space quoted: the quotes are taken off the
first request of a session where it has exactly that form.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillgrad.agentskills import Agent
from skillgrad.traces.base import SessionFormatError
from skillgrad.traces.read import (
    as_dict,
    loads,
    query,
    read_json_object,
    sqlite_readonly,
)
from skillgrad.traces.sessions import Session, ToolCall, Turn

DB_NAME = "opencode.db"
EDIT_TOOLS = frozenset({"edit", "write", "multiedit"})  # their input names the file: filePath
_RUN_ARG = re.compile(r'"((?:[^"\\]|\\.)*)"|([^ ]+)')  # one argument of ``opencode run``


class OpenCodeAdapter:
    """OpenCode's store. ``scratch``: the folder a locked database is copied into (by default
    the system's temporary folder)."""

    agent: Agent = "opencode"

    def __init__(self, scratch: Path | None = None) -> None:
        self.scratch = scratch
        # session ids in a database, by (path, mtime, size): the JSON files of a store are
        # checked against them one file at a time
        self._db_ids: dict[tuple[Path, int, int], frozenset[str]] = {}

    def stores(self, environ: Mapping[str, str], home: Path) -> list[Path]:
        data = environ.get("XDG_DATA_HOME") or str(home / ".local" / "share")
        return [Path(data).expanduser() / "opencode"]

    def sources(self, store: Path) -> Iterator[Path]:
        if (store / DB_NAME).is_file():
            yield store / DB_NAME
        yield from sorted((store / "storage" / "session").glob("*/*.json"))

    def read(self, source: Path) -> Iterator[Session]:
        if source.name == DB_NAME:
            yield from self._read_db(source)
            return
        if len(source.parents) < 4 or source.parents[1].name != "session":
            raise SessionFormatError(f"{source}: not in an OpenCode storage/session/<project> "
                                     "folder")
        store = source.parents[3]  # <store>/storage/session/<project>/<id>.json
        info = read_json_object(source)
        session_id = _str(info.get("id"), f"{source}: field 'id'")
        if session_id in self._ids_in_db(store / DB_NAME):
            return  # migrated: the database copy is the one read
        yield _build(source, _legacy_row(info, source), _legacy_messages(store, session_id))

    # ------------------------------------------------------------------ the database

    def _read_db(self, db: Path) -> Iterator[Session]:
        with sqlite_readonly(db, self.scratch) as con:
            rows = _query(con, db, "SELECT id, directory, parent_id, title, revert, time_created,"
                                   " time_updated FROM session ORDER BY time_created, id")
            for row in rows:
                where = f"{db}: session {row[0]}"
                revert = _json(row[4], f"{where}: column revert") if row[4] else None
                yield _build(db, _Row(str(row[0]), row[1], row[2], row[3], revert,
                                      _ms(row[5], where), _ms(row[6], where)),
                             _db_messages(con, db, str(row[0])))

    def _ids_in_db(self, db: Path) -> frozenset[str]:
        try:
            stat = db.stat()
        except FileNotFoundError:
            return frozenset()
        except OSError as exc:
            raise SessionFormatError(f"{db}: cannot read ({exc.strerror or exc})") from None
        key = (db, stat.st_mtime_ns, stat.st_size)
        if key not in self._db_ids:
            with sqlite_readonly(db, self.scratch) as con:
                ids = frozenset(str(r[0]) for r in _query(con, db, "SELECT id FROM session"))
            self._db_ids = {key: ids}  # one store's database at a time
        return self._db_ids[key]


def _db_messages(con: sqlite3.Connection, db: Path, session_id: str) -> list[_Message]:
    parts: dict[str, list[dict[str, Any]]] = {}
    for pid, mid, data in _query(con, db, "SELECT id, message_id, data FROM part"
                                          " WHERE session_id = ? ORDER BY message_id, id",
                                 (session_id,)):
        part = _json(data, f"{db}: part {pid}")
        parts.setdefault(str(mid), []).append({**part, "id": str(pid)})
    messages = []
    for mid, created, data in _query(con, db, "SELECT id, time_created, data FROM message"
                                              " WHERE session_id = ? ORDER BY time_created, id",
                                     (session_id,)):
        where = f"{db}: message {mid}"
        messages.append(_Message(str(mid), _ms(created, where), _json(data, where),
                                 parts.get(str(mid), []), where))
    return messages


def _query(con: sqlite3.Connection, db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
    return query(con, db, sql, args, what="the OpenCode tables")


# ---------------------------------------------------------------------- the JSON storage


def _legacy_row(info: dict[str, Any], source: Path) -> _Row:
    time = as_dict(info.get("time"))
    where = f"{source}: field 'time'"
    revert = info.get("revert")
    return _Row(str(info["id"]), info.get("directory"), info.get("parentID"), info.get("title"),
                revert if isinstance(revert, dict) else None,
                _ms(time.get("created"), where), _ms(time.get("updated"), where))


def _legacy_messages(store: Path, session_id: str) -> list[_Message]:
    messages = []
    for file in sorted((store / "storage" / "message" / session_id).glob("*.json")):
        data = read_json_object(file)
        mid = _str(data.get("id"), f"{file}: field 'id'")
        parts = [read_json_object(p)
                 for p in sorted((store / "storage" / "part" / mid).glob("*.json"))]
        time = as_dict(data.get("time"))
        messages.append(_Message(mid, _ms(time.get("created"), f"{file}: field 'time'"), data,
                                 sorted(parts, key=lambda p: str(p.get("id", ""))), str(file)))
    return sorted(messages, key=lambda m: (m.created or datetime.min.replace(tzinfo=timezone.utc),
                                           m.id))


# ---------------------------------------------------------------------- one session


@dataclass(frozen=True)
class _Row:
    id: str
    directory: Any
    parent_id: Any
    title: Any
    revert: dict[str, Any] | None
    created: datetime | None
    updated: datetime | None


@dataclass(frozen=True)
class _Message:
    id: str
    created: datetime | None
    data: dict[str, Any]
    parts: list[dict[str, Any]]
    where: str  # the file, or the database row, for errors


def _build(source: Path, row: _Row, messages: list[_Message]) -> Session:
    turns: list[Turn] = []
    files: dict[str, None] = {}
    skills: dict[str, None] = {}
    model = None
    for message in _unreverted(messages, row.revert):
        data, parts = message.data, message.parts
        role = data.get("role")
        if role == "user":
            if any(p.get("type") == "compaction" for p in parts):
                continue  # asks the model to summarise: not the person's words
            text = _text(parts)
            if not row.parent_id and not any(t.role == "user" for t in turns):
                text = _run_prompt(text)
            if text.strip():
                turns.append(Turn("user", text, message.created))
        elif role == "assistant" and data.get("summary") is not True:  # summary: compaction
            calls = tuple(_tool_call(p, message.where) for p in parts if p.get("type") == "tool")
            for call in calls:
                if call.is_error or call.output is None:
                    continue  # it wrote nothing, or had not finished
                if call.name in EDIT_TOOLS and isinstance(call.arguments, dict):
                    if isinstance(call.arguments.get("filePath"), str):
                        files[call.arguments["filePath"]] = None
                if call.name == "skill" and isinstance(call.arguments, dict):
                    if isinstance(call.arguments.get("name"), str):
                        skills[call.arguments["name"]] = None
            for part in parts:
                if part.get("type") == "patch" and isinstance(part.get("files"), list):
                    files.update((f, None) for f in part["files"] if isinstance(f, str))
            turns.append(Turn("assistant", _text(parts), message.created, calls))
            model = data.get("modelID") if isinstance(data.get("modelID"), str) else model
            error = data.get("error")
            if isinstance(error, dict) and error.get("name") == "MessageAbortedError":
                time = as_dict(data.get("time"))
                ended = _ms(time.get("completed"), message.where) or message.created
                turns.append(Turn("user", "", ended, interrupt=True))
    return Session(
        agent="opencode", id=row.id, source=source, turns=tuple(turns),
        cwd=Path(row.directory) if isinstance(row.directory, str) and row.directory else None,
        started=row.created, ended=row.updated, model=model, skills=tuple(skills),
        files_changed=tuple(files), parent_id=str(row.parent_id) if row.parent_id else None,
        sidechain=bool(row.parent_id),
        meta={"title": row.title} if isinstance(row.title, str) else {},
    )


def _unreverted(messages: list[_Message], revert: dict[str, Any] | None) -> list[_Message]:
    """The messages an undo has not hidden: those before ``revert.messageID`` (and, when the
    undo names a part, that message's parts before it)."""
    if not revert or not isinstance(revert.get("messageID"), str):
        return messages
    ids = [m.id for m in messages]
    if revert["messageID"] not in ids:
        return messages  # the undone messages are already gone from the store
    cut = ids.index(revert["messageID"])
    kept = messages[:cut]
    part_id = revert.get("partID")
    parts = messages[cut].parts
    if isinstance(part_id, str) and part_id in [p.get("id") for p in parts]:
        head = parts[:[p.get("id") for p in parts].index(part_id)]
        if head:
            m = messages[cut]
            kept.append(_Message(m.id, m.created, m.data, head, m.where))
    return kept


def _text(parts: list[dict[str, Any]]) -> str:
    return "\n".join(p["text"] for p in parts
                     if p.get("type") == "text" and isinstance(p.get("text"), str)
                     and not p.get("synthetic") and not p.get("ignored"))


def _run_prompt(text: str) -> str:
    """The request of ``opencode run``, which stores its arguments joined by spaces with each
    one that holds a space in quotes (a quote inside as ``\\"``): the arguments themselves,
    joined by spaces, where ``text`` is exactly that form and starts with a quoted one."""
    if not text.startswith('"'):
        return text
    args: list[str] = []
    pos = 0
    while pos < len(text):
        if args:
            if text[pos] != " ":
                return text
            pos += 1
        found = _RUN_ARG.match(text, pos)
        if found is None:
            return text
        quoted = found.group(1)
        args.append(quoted.replace('\\"', '"') if quoted is not None else found.group(2))
        pos = found.end()
    stored = " ".join('"' + a.replace('"', '\\"') + '"' if " " in a else a for a in args)
    return " ".join(args) if stored == text else text


def _tool_call(part: dict[str, Any], where: str) -> ToolCall:
    where = f"{where}: tool part {part.get('id', '?')}"
    state = part.get("state")
    if not isinstance(state, dict):
        raise SessionFormatError(f"{where}: no tool state")
    status = state.get("status")
    metadata = as_dict(state.get("metadata"))
    exit_code = metadata.get("exit")
    time = as_dict(state.get("time"))
    output = (state.get("output") if status == "completed"
              else state.get("error") if status == "error" else None)
    return ToolCall(
        id=_str(part.get("callID"), f"{where}: field 'callID'"),
        name=_str(part.get("tool"), f"{where}: field 'tool'"),
        arguments=as_dict(state.get("input")),
        output=output if isinstance(output, str) else None,
        exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool)
        else None,
        is_error=status == "error",
        time=_ms(time.get("start"), where),
    )


def _json(text: Any, where: str) -> dict[str, Any]:
    try:
        obj = loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise SessionFormatError(f"{where}: invalid JSON ({exc})") from None
    if not isinstance(obj, dict):
        raise SessionFormatError(f"{where}: expected a JSON object")
    return obj


def _ms(value: Any, where: str) -> datetime | None:
    """Epoch milliseconds, as OpenCode writes every time, to aware UTC."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SessionFormatError(f"{where}: time {value!r} is not epoch milliseconds")
    try:
        return datetime.fromtimestamp(value / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise SessionFormatError(f"{where}: time {value!r} is out of range") from None



def _str(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise SessionFormatError(f"{where} is missing or not a string")
    return value
