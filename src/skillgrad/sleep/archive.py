"""skillgrad's own copy of the harvested sessions, redacted, one JSON file per session.

Agents delete old sessions (Claude Code after 30 days by default); the archive keeps what was
harvested, so a night mines every session of its window whatever the agent kept, and a night
that fails after harvesting loses nothing. A session that grew is written again whole.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from skillgrad.errors import DataError
from skillgrad.files import atomic_write_text
from skillgrad.traces.sessions import Session, ToolCall, Turn


def to_json(session: Session) -> dict[str, Any]:
    return _plain(asdict(session))


def from_json(data: dict[str, Any]) -> Session:
    turns = tuple(
        Turn(role=t["role"], text=t["text"], time=_time(t.get("time")),
             interrupt=bool(t.get("interrupt")),
             tool_calls=tuple(ToolCall(**{**c, "time": _time(c.get("time"))})
                              for c in t.get("tool_calls", ())))
        for t in data["turns"])
    fields = {k: v for k, v in data.items() if k not in ("turns", "source", "cwd", "started",
                                                        "ended", "skills", "files_changed")}
    return Session(**fields, turns=turns, source=Path(data["source"]),
                   cwd=Path(data["cwd"]) if data.get("cwd") else None,
                   started=_time(data.get("started")), ended=_time(data.get("ended")),
                   skills=tuple(data.get("skills", ())),
                   files_changed=tuple(data.get("files_changed", ())))


class Archive:
    """The sessions of one project, under ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, session: Session) -> Path:
        digest = hashlib.sha256(f"{session.agent}:{session.id}".encode()).hexdigest()[:16]
        return self.folder / session.agent / f"{digest}.json"

    def put(self, session: Session) -> None:
        path = self.path(session)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(to_json(session), sort_keys=True) + "\n")

    def sessions(self, since: datetime | None = None) -> Iterator[Session]:
        """Every archived session (that ended at or after ``since``), oldest first."""
        paths = sorted(self.folder.glob("*/*.json")) if self.folder.exists() else []
        found = []
        for path in paths:
            try:
                session = from_json(json.loads(path.read_text(encoding="utf-8")))
            except (ValueError, KeyError, TypeError) as exc:
                raise DataError(f"{path}: not an archived session ({exc}); remove it") from None
            last = session.ended or session.started
            if since is None or last is None or last >= since:
                found.append(session)
        yield from sorted(found, key=lambda s: (s.started.timestamp() if s.started else 0.0,
                                                s.id))

    def __len__(self) -> int:
        return len(list(self.folder.glob("*/*.json"))) if self.folder.exists() else 0


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None
