"""GitHub Copilot CLI sessions: the event log of each session, and the session store database.

Layout (``$COPILOT_HOME``, by default ``~/.copilot``)::

    session-state/<id>/events.jsonl   one event a line: {type, id, parentId, timestamp, data}
    session-state/<id>.jsonl          the same, from versions that kept one file a session
    session-store.db                  SQLite: sessions(id, cwd, branch, created_at, ...),
                                      turns(session_id, turn_index, user_message,
                                      assistant_response, timestamp), session_files(session_id,
                                      file_path, tool_name, ...)

The event log is the full record and wins: the database is read only for the sessions that
have no event log left. Events used: ``session.start`` (``data.context``: cwd, branch, head
commit), ``user.message`` (without the injected ones: a skill's text, another agent's prompt,
an autopilot continuation), ``assistant.message`` with its ``toolRequests``, joined by call
id to ``tool.execution_start`` and ``tool.execution_complete`` (result, error, the shell exit
code: ``shellExecution.exitCode``), ``abort`` (an interrupt), ``skill.invoked``, model changes
and ``session.shutdown`` (the files the session modified). Events of a sub-agent (``agentId``) make a session of
their own, marked as a sidechain. A headless run (``copilot -p``) is known by the
non-interactive system prompt the CLI gives it, or by a detached parent session.

Times come as ISO strings with or without a zone, or epoch seconds or milliseconds; all become
aware UTC (a time without a zone is UTC, as everything this CLI writes).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from skillgrad.agentskills import Agent
from skillgrad.traces.base import SessionFormatError
from skillgrad.traces.read import (
    as_dict,
    checked_utc,
    jsonl_records,
    opt_str,
    query,
    sqlite_readonly,
)
from skillgrad.traces.sessions import Session, ToolCall, Turn

DB_NAME = "session-store.db"
EVENTS = "events.jsonl"
EDIT_TOOLS = frozenset({"edit", "create", "str_replace_editor", "write"})  # arguments.path
_INJECTED_SOURCES = ("skill-", "agent-")  # user.message.source of text no person typed
# The system prompt ``copilot -p`` runs under (the event log has no mode field).
_HEADLESS_PROMPT = "running in non-interactive mode"


class CopilotAdapter:
    """Copilot CLI's store. ``scratch``: the folder a locked database is copied into."""

    agent: Agent = "copilot"

    def __init__(self, scratch: Path | None = None) -> None:
        self.scratch = scratch

    def stores(self, environ: Mapping[str, str], home: Path) -> list[Path]:
        return [Path(environ.get("COPILOT_HOME") or home / ".copilot").expanduser()]

    def sources(self, store: Path) -> Iterator[Path]:
        state = store / "session-state"
        yield from sorted(state.glob(f"*/{EVENTS}"))
        flat = state.glob("*.jsonl")  # one file a session: unless a folder holds it now
        yield from sorted(p for p in flat if not (state / p.stem / EVENTS).exists())
        if (store / DB_NAME).is_file():
            yield store / DB_NAME

    def read(self, source: Path) -> Iterator[Session]:
        if source.name == DB_NAME:
            yield from self._read_db(source)
        else:
            yield from _read_events(source)

    def _read_db(self, db: Path) -> Iterator[Session]:
        state = db.parent / "session-state"
        with sqlite_readonly(db, self.scratch) as con:
            con.row_factory = sqlite3.Row
            tables = {r[0] for r in _rows(con, db, "SELECT name FROM sqlite_master")}
            for table in ("sessions", "turns"):
                if table not in tables:
                    raise SessionFormatError(f"{db}: no table {table!r}")
            rows = {}
            for row in _rows(con, db, "SELECT * FROM sessions"):
                sid = _column(row, "id", db, "sessions")
                if not isinstance(sid, str) or not sid:
                    raise SessionFormatError(f"{db}: table 'sessions' has a row without an id")
                rows[sid] = row
            for sid, row in sorted(rows.items()):
                if (state / sid / EVENTS).exists() or (state / f"{sid}.jsonl").exists():
                    continue  # its event log is read instead
                yield _db_session(con, db, row, sid, "session_files" in tables)


# ---------------------------------------------------------------------- the event log


def _read_events(path: Path) -> Iterator[Session]:
    records = jsonl_records(path)
    if not records:
        return  # a session that recorded nothing yet
    start = next(((w, r) for w, r in records if r.get("type") == "session.start"), None)
    if start is None:
        raise SessionFormatError(f"{path}: no session.start record")
    where, data = start[0], _data(start[1], start[0])
    context = as_dict(data.get("context"))
    sid = opt_str(data.get("sessionId")) or (path.parent.name if path.name == EVENTS
                                              else path.stem)
    groups: dict[str | None, list[tuple[str, dict[str, Any]]]] = {}
    for w, r in records:
        if not isinstance(r.get("type"), str):
            raise SessionFormatError(f"{w}: no event type")
        groups.setdefault(_agent_of(r, w), []).append((w, r))
    main = _Conversation(groups.pop(None, []))
    cwd = Path(context["cwd"]) if opt_str(context.get("cwd")) else None
    parent = opt_str(data.get("detachedFromSpawningParentSessionId"))
    meta: dict[str, Any] = {k: context[k] for k in ("repository", "gitRoot")
                            if opt_str(context.get(k))}
    if len(main.cwds) > 1:  # it changed folder (session.context_changed)
        meta["cwds"] = list(main.cwds)
    yield Session(
        agent="copilot", id=sid, source=path, turns=tuple(main.turns), cwd=cwd,
        started=_time(data.get("startTime"), f"{where}: startTime") or main.first,
        ended=main.last, git_branch=opt_str(context.get("branch")),
        git_commit=opt_str(context.get("headCommit")),
        model=main.model or opt_str(data.get("selectedModel")), skills=tuple(main.skills),
        files_changed=tuple(main.files), parent_id=parent,
        headless=main.headless or parent is not None, meta=meta,
    )
    for agent_id, events in groups.items():
        sub = _Conversation(events)
        if sub.turns:
            yield Session(
                agent="copilot", id=f"{sid}:{agent_id}", source=path, turns=tuple(sub.turns),
                cwd=cwd, started=sub.first, ended=sub.last, model=sub.model,
                skills=tuple(sub.skills), files_changed=tuple(sub.files), parent_id=sid,
                sidechain=True, meta={"agent": sub.agent_name} if sub.agent_name else {},
            )


class _Conversation:
    """The turns of one agent (the main one, or a sub-agent) in an event log."""

    def __init__(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        self.turns: list[Turn] = []
        self.skills: dict[str, None] = {}
        self.files: dict[str, None] = {}
        self.cwds: dict[str, None] = {}
        self.model: str | None = None
        self.headless = False
        self.agent_name: str | None = None
        times = [_time(r.get("timestamp"), f"{w}: timestamp") for w, r in events]
        stamped = [t for t in times if t is not None]
        self.first: datetime | None = min(stamped) if stamped else None
        self.last: datetime | None = max(stamped) if stamped else None
        self._starts: dict[str, tuple[dict[str, Any], datetime | None]] = {}
        self._done: dict[str, dict[str, Any]] = {}
        self._requested: set[str] = set()
        for (w, r), t in zip(events, times, strict=True):
            data = _data(r, w)
            if r["type"] in ("tool.execution_start", "tool.execution_complete"):
                call_id = opt_str(data.get("toolCallId"))
                if call_id is None:
                    raise SessionFormatError(f"{w}: {r['type']} without a toolCallId")
                if r["type"] == "tool.execution_start":
                    self._starts[call_id] = (data, t)
                else:
                    self._done[call_id] = data
            elif r["type"] == "assistant.message":
                self._requested.update(q["toolCallId"] for q in _requests(data, w))
        for (w, r), t in zip(events, times, strict=True):
            self._event(r["type"], _data(r, w), w, t)

    def _event(self, kind: str, data: dict[str, Any], where: str, time: datetime | None) -> None:
        if kind == "user.message":
            source = opt_str(data.get("source")) or ""
            text = opt_str(data.get("content"))
            if (text and text.strip() and not data.get("isAutopilotContinuation")
                    and not source.startswith(_INJECTED_SOURCES)):
                self.turns.append(Turn("user", text, time))
        elif kind == "assistant.message":
            calls = []
            for req in _requests(data, where):
                start, started = self._starts.get(req["toolCallId"], ({}, None))
                calls.append(_call(req["toolCallId"], req.get("name") or start.get("toolName"),
                                   req.get("arguments", start.get("arguments")),
                                   started or time, self._done.get(req["toolCallId"]), where))
            self.turns.append(Turn("assistant", opt_str(data.get("content")) or "", time,
                                   tuple(calls)))
            self.model = opt_str(data.get("model")) or self.model
            self._edits(calls)
        elif kind == "tool.execution_start" and data["toolCallId"] not in self._requested:
            # a tool the person ran themselves: no assistant message asked for it
            call = _call(data["toolCallId"], data.get("toolName"), data.get("arguments"), time,
                         self._done.get(data["toolCallId"]), where)
            self.turns.append(Turn("assistant", "", time, (call,)))
            self._edits([call])
        elif kind == "abort":
            self.turns.append(Turn("user", "", time, interrupt=True))
        elif kind == "skill.invoked" and opt_str(data.get("name")):
            self.skills[data["name"]] = None
        elif kind == "session.model_change":
            self.model = opt_str(data.get("newModel")) or self.model
        elif kind == "session.shutdown":
            modified = as_dict(data.get("codeChanges")).get("filesModified")
            self.files.update((f, None) for f in modified or [] if isinstance(f, str))
        elif kind in ("session.start", "session.context_changed"):
            cwd = opt_str(as_dict(data.get("context")).get("cwd") if kind == "session.start"
                           else data.get("cwd"))
            if cwd:
                self.cwds[cwd] = None
        elif kind == "system.message":
            self.headless = self.headless or _HEADLESS_PROMPT in (opt_str(data.get("content"))
                                                                  or "")
        elif kind == "subagent.started":
            self.agent_name = opt_str(data.get("agentName"))

    def _edits(self, calls: list[ToolCall]) -> None:
        for call in calls:
            args = call.arguments
            if call.is_error or call.output is None:
                continue  # it wrote nothing, or the session ended before it finished
            if call.name in EDIT_TOOLS and isinstance(args, dict) and args.get("command") != "view":
                if opt_str(args.get("path")):
                    self.files[args["path"]] = None


def _call(call_id: str, name: Any, arguments: Any, time: datetime | None,
          done: dict[str, Any] | None, where: str) -> ToolCall:
    if not opt_str(name):
        raise SessionFormatError(f"{where}: tool call {call_id} has no tool name")
    result, error = as_dict((done or {}).get("result")), as_dict((done or {}).get("error"))
    output = opt_str(result.get("content"))
    if output is None:
        output = opt_str(error.get("message"))
    exit_code = _int(as_dict((done or {}).get("shellExecution")).get("exitCode"))
    for block in result.get("contents") or []:
        if isinstance(block, dict) and block.get("type") in ("shell_exit", "terminal"):
            exit_code = _int(block.get("exitCode")) if exit_code is None else exit_code
    return ToolCall(id=call_id, name=name,
                    arguments=arguments if isinstance(arguments, (dict, str)) else {},
                    output=output, exit_code=exit_code,
                    is_error=done is not None and (done.get("success") is False or bool(error)),
                    time=time)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _requests(data: dict[str, Any], where: str) -> list[dict[str, Any]]:
    requests = data.get("toolRequests") or []
    if not isinstance(requests, list) or not all(
            isinstance(q, dict) and isinstance(q.get("toolCallId"), str) for q in requests):
        raise SessionFormatError(f"{where}: toolRequests is not a list of calls with an id")
    return requests


def _agent_of(record: dict[str, Any], where: str) -> str | None:
    data = _data(record, where)
    return opt_str(record.get("agentId") or data.get("parentToolCallId"))


def _data(record: dict[str, Any], where: str) -> dict[str, Any]:
    data = record.get("data", {})
    if not isinstance(data, dict):
        raise SessionFormatError(f"{where}: 'data' is not an object")
    return data


# ---------------------------------------------------------------------- the database


def _db_session(con: sqlite3.Connection, db: Path, row: sqlite3.Row, sid: str,
                has_files: bool) -> Session:
    where = f"{db}: sessions {sid}"
    turns: list[Turn] = []
    rows = _rows(con, db, "SELECT * FROM turns WHERE session_id = ? ORDER BY rowid", (sid,))
    if rows and "turn_index" in rows[0].keys():
        rows.sort(key=lambda r: r["turn_index"] if isinstance(r["turn_index"], int) else 0)
    for n, turn in enumerate(rows):
        at = f"{db}: turns of {sid}, turn {n}"
        time = _time(turn["timestamp"], f"{at}: timestamp") if "timestamp" in turn.keys() else None
        asked = _column(turn, "user_message", db, "turns")
        answer = _column(turn, "assistant_response", db, "turns")
        if isinstance(asked, str) and asked.strip():
            turns.append(Turn("user", asked, time))
        if isinstance(answer, str) and answer.strip():
            turns.append(Turn("assistant", answer, time))
    files: dict[str, None] = {}
    if has_files:
        for f in _rows(con, db, "SELECT * FROM session_files WHERE session_id = ? ORDER BY rowid",
                       (sid,)):
            path = _column(f, "file_path", db, "session_files")
            if _column(f, "tool_name", db, "session_files") in EDIT_TOOLS and isinstance(path, str):
                files[path] = None
    keys = row.keys()
    return Session(
        agent="copilot", id=sid, source=db, turns=tuple(turns),
        cwd=Path(row["cwd"]) if "cwd" in keys and isinstance(row["cwd"], str) and row["cwd"]
        else None,
        started=_time(row["created_at"], f"{where}: created_at") if "created_at" in keys
        else None,
        ended=_time(row["updated_at"], f"{where}: updated_at") if "updated_at" in keys
        else None,
        git_branch=opt_str(row["branch"]) if "branch" in keys else None,
        files_changed=tuple(files),
        meta={"summary": row["summary"]} if "summary" in keys and row["summary"] else {},
    )


def _rows(con: sqlite3.Connection, db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[Any]:
    return query(con, db, sql, args, what="the session store")


def _column(row: sqlite3.Row, name: str, db: Path, table: str) -> Any:
    if name not in row.keys():
        raise SessionFormatError(f"{db}: table {table!r} has no column {name!r}")
    return row[name]


def _time(value: Any, where: str) -> datetime | None:
    return checked_utc(value, where, "an ISO time or epoch seconds or milliseconds")
