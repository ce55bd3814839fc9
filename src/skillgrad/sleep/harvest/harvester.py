"""Harvest: the user's own agent sessions for one project, scrubbed: sleep's data loader.

As a data loader walks the shards of a dataset and remembers its position, the harvester walks
every store of every adapter, streams each source (a session file or a database), keeps the
sessions that belong to the project, scrubs each one, and keeps a checkpoint per source so the
next night reads only what is new. It never writes where an agent keeps its sessions.

What is kept: a session whose working directory, resolved, is the project root or lies below
it (a session in the user's home does not feed every project below it). What is left out, each
with a reason counted in the result: sources still being written, sources unchanged since the
last harvest, sources that cannot be read (one line each; the rest are read), sessions without
a working directory, sessions of other folders, skillgrad's own runs (a folder named
``skillgrad-replay...`` or a first prompt carrying ``[skillgrad-replay]``), sub-agents'
conversations (each agent marks them: Claude Code's ``subagents/agent-*.jsonl`` and
``isSidechain`` records, a Codex ``source.subagent``, an OpenCode child session, ...; they are
part of the session that started them, whose tool call holds what they returned, and their
first message is what that agent asked, not the user), sessions before the window and sessions
already harvested that did not grow.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from skillgrad.errors import ConfigError, DataError
from skillgrad.files import atomic_write_text
from skillgrad.sleep.scrub import Scrubber
from skillgrad.traces.base import Adapter, SessionFormatError
from skillgrad.traces.read import utc
from skillgrad.traces.sessions import REPLAY_MARKER, Session

# Reasons a source or a session is left out (the keys of ``HarvestResult.skip_counts``).
STILL_WRITING = "still being written"
UNCHANGED = "unchanged since the last harvest"
UNREADABLE = "unreadable"
BEFORE_WINDOW = "before the window"
NO_CWD = "no working directory"
OUTSIDE = "outside the project"
OWN_RUN = "skillgrad's own run"
SUB_AGENT = "a sub-agent's conversation"
NO_TURNS = "no turns"
SEEN = "already harvested"

REPLAY_PROMPT = f"[{REPLAY_MARKER}]"
CHECKPOINT_VERSION = 1


def _iso(time: datetime | None) -> str | None:
    return None if time is None else time.astimezone(timezone.utc).isoformat()


# -- results --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Skip:
    """A source, or one session of it, left out, and why (one of the reasons above);
    ``detail``: one line more (why a source could not be read)."""

    source: Path
    reason: str
    detail: str = ""
    session_id: str | None = None


@dataclass(frozen=True)
class HarvestResult:
    sessions: tuple[Session, ...]
    skipped: tuple[Skip, ...]

    @property
    def skip_counts(self) -> dict[str, int]:
        return dict(Counter(s.reason for s in self.skipped))


@dataclass(frozen=True)
class StoreInfo:
    agent: str
    path: Path
    exists: bool
    sources: int = 0


@dataclass(frozen=True)
class SourceInfo:
    """What a harvest would do with one source: ``status`` is "read" or the reason it is left
    out; ``sessions``: how many of its sessions it would keep."""

    agent: str
    path: Path
    status: str
    sessions: int = 0


@dataclass(frozen=True)
class HarvestPreview:
    project: Path
    checkpoint: Path
    stores: tuple[StoreInfo, ...]
    sources: tuple[SourceInfo, ...]
    skipped: tuple[Skip, ...]

    @property
    def sessions(self) -> int:
        return sum(s.sessions for s in self.sources)

    @property
    def skip_counts(self) -> dict[str, int]:
        return dict(Counter(s.reason for s in self.skipped))


# -- the checkpoint -------------------------------------------------------------------------

class Checkpoint:
    """What one project's harvests have read: per source its size, modification time and the
    window it was read with; per kept session (``agent:id``, wherever its file now lies) how
    many turns it had and when it ended. JSON, UTC ISO times, written atomically."""

    def __init__(self, path: Path, project: Path) -> None:
        self.path = path
        self.project = project
        self.sources: dict[str, dict[str, Any]] = {}
        self.sessions: dict[str, dict[str, Any]] = {}

    @classmethod
    def load(cls, path: Path, project: Path) -> Checkpoint:
        checkpoint = cls(path, project)
        if not path.exists():
            return checkpoint
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataError(f"{path}: not a harvest checkpoint ({exc}); delete it to harvest "
                            "every session again") from None
        if not isinstance(data, dict) or data.get("version") != CHECKPOINT_VERSION \
                or data.get("project") != str(project):
            raise DataError(f"{path}: not a version {CHECKPOINT_VERSION} harvest checkpoint of "
                            f"{project}; delete it to harvest every session again")
        checkpoint.sources = dict(data.get("sources") or {})
        checkpoint.sessions = dict(data.get("sessions") or {})
        return checkpoint

    def save(self) -> None:
        data = {"version": CHECKPOINT_VERSION, "project": str(self.project),
                "saved": _iso(datetime.now(timezone.utc)),
                "sources": self.sources, "sessions": self.sessions}
        atomic_write_text(self.path, json.dumps(data, indent=1, sort_keys=True) + "\n")

    def unchanged(self, source: Path, size: int, mtime: datetime,
                  since: datetime | None) -> bool:
        entry = self.sources.get(str(source))
        if entry is None or entry.get("size") != size or utc(entry.get("mtime")) != mtime:
            return False
        read_since = utc(entry.get("since"))
        # Read before with a window that started later: the older sessions were never read.
        return read_since is None or (since is not None and since >= read_since)

    def read(self, source: Path, agent: str, size: int, mtime: datetime,
             since: datetime | None) -> None:
        self.sources[str(source)] = {"agent": agent, "size": size, "mtime": _iso(mtime),
                                     "since": _iso(since)}

    def grew(self, session: Session) -> bool:
        """A session not kept before, or one with more turns or a later end than then."""
        entry = self.sessions.get(f"{session.agent}:{session.id}")
        if entry is None:
            return True
        if len(session.turns) > int(entry.get("turns", 0)):
            return True
        ended, before = session.ended, utc(entry.get("ended"))
        return ended is not None and (before is None or ended > before)

    def kept(self, session: Session) -> None:
        self.sessions[f"{session.agent}:{session.id}"] = {
            "turns": len(session.turns), "ended": _iso(session.ended),
            "source": str(session.source)}


# -- the harvester --------------------------------------------------------------------------

class Harvester:
    """Reads the sessions of one project from the stores of the given adapters (all five when
    None). ``environ`` and ``home`` say where the stores are (the agents' own variables);
    ``since``: a UTC time, sessions that ended before it are left out; ``settle_seconds``: a
    source modified more recently than this is still being written and waits for next time."""

    def __init__(self, project: Path | str, adapters: Sequence[Adapter] | None = None, *,
                 state_dir: Path, scrubber: Scrubber, environ: Mapping[str, str], home: Path,
                 since: datetime | None = None, settle_seconds: float = 60,
                 now: datetime | None = None) -> None:
        for name, value in (("since", since), ("now", now)):
            if value is not None and value.tzinfo is None:
                raise ConfigError(f"harvest: {name} must be a timezone-aware (UTC) time")
        if adapters is None:
            from skillgrad.traces.registry import adapters as load_adapters
            adapters = load_adapters()
        self.project = Path(project).expanduser().resolve()
        self.adapters = list(adapters)
        self.state_dir = Path(state_dir)
        self.scrubber = scrubber
        self.environ = environ
        self.home = Path(home)
        self.since = since
        self.settle_seconds = settle_seconds
        self.now = now if now is not None else datetime.now(timezone.utc)
        self._resolved: dict[str, Path] = {}

    @property
    def checkpoint_path(self) -> Path:
        digest = hashlib.sha256(str(self.project).encode("utf-8")).hexdigest()[:12]
        name = re.sub(r"[^A-Za-z0-9_.-]", "-", self.project.name) or "root"
        return self.state_dir / "harvest" / f"{name}-{digest}.json"

    def harvest(self) -> HarvestResult:
        """Every new or grown session of the project, scrubbed; the checkpoint is written."""
        skipped: list[Skip] = []
        sessions = tuple(self.iter_sessions(skipped))
        return HarvestResult(sessions=sessions, skipped=tuple(skipped))

    def iter_sessions(self, skipped: list[Skip] | None = None) -> Iterator[Session]:
        """The sessions of :meth:`harvest`, one at a time, each scrubbed; what is left out is
        appended to ``skipped``. A source enters the checkpoint once all its sessions were
        taken; the checkpoint is written when the iteration ends, stops or fails."""
        checkpoint = Checkpoint.load(self.checkpoint_path, self.project)
        skips = skipped if skipped is not None else []
        try:
            for session in self._walk(checkpoint, skips, None, None):
                yield self.scrubber.record(session)
        finally:
            checkpoint.save()

    def preview(self) -> HarvestPreview:
        """What a harvest would read (stores found or missing, sources, sessions kept per
        source), the checkpoint read but not written."""
        checkpoint = Checkpoint.load(self.checkpoint_path, self.project)
        skipped: list[Skip] = []
        stores: list[StoreInfo] = []
        sources: list[SourceInfo] = []
        for _ in self._walk(checkpoint, skipped, stores, sources):
            pass
        return HarvestPreview(project=self.project, checkpoint=self.checkpoint_path,
                              stores=tuple(stores), sources=tuple(sources),
                              skipped=tuple(skipped))

    # -- the walk ---------------------------------------------------------------------------

    def _walk(self, checkpoint: Checkpoint, skipped: list[Skip],
              stores: list[StoreInfo] | None,
              sources: list[SourceInfo] | None) -> Iterator[Session]:
        for adapter in self.adapters:
            for found in adapter.stores(self.environ, self.home):
                store = Path(os.path.abspath(found.expanduser()))  # checkpoint keys: absolute
                exists = store.exists()
                count = 0
                if exists:
                    for source in adapter.sources(store):
                        count += 1
                        yield from self._source(adapter, source, checkpoint, skipped, sources)
                if stores is not None:
                    stores.append(StoreInfo(agent=adapter.agent, path=store, exists=exists,
                                            sources=count))

    def _source(self, adapter: Adapter, source: Path, checkpoint: Checkpoint,
                skipped: list[Skip], sources: list[SourceInfo] | None) -> Iterator[Session]:
        def leave(reason: str, detail: str = "") -> None:
            skipped.append(Skip(source, reason, self.scrubber.text(detail)))
            if sources is not None:
                sources.append(SourceInfo(adapter.agent, source, reason, kept))

        kept = 0
        try:
            size, mtime = _stat(source)
        except OSError as exc:  # gone since it was listed (the agent's own cleanup)
            leave(UNREADABLE, _one_line(exc))
            return
        if (self.now - mtime).total_seconds() < self.settle_seconds:
            leave(STILL_WRITING)
            return
        if self.since is not None and mtime < self.since:
            leave(BEFORE_WINDOW)
            return
        if checkpoint.unchanged(source, size, mtime, self.since):
            leave(UNCHANGED)
            return
        try:
            for session in adapter.read(source):
                reason = self._left_out(session, checkpoint)
                if reason is not None:
                    skipped.append(Skip(source, reason, session_id=session.id))
                    continue
                yield session
                checkpoint.kept(session)
                kept += 1
        except SessionFormatError as exc:
            leave(UNREADABLE, _one_line(exc))
            return
        except OSError as exc:  # unreadable or vanished mid-read
            leave(UNREADABLE, _one_line(exc))
            return
        checkpoint.read(source, adapter.agent, size, mtime, self.since)
        if sources is not None:
            sources.append(SourceInfo(adapter.agent, source, "read", kept))

    def _left_out(self, session: Session, checkpoint: Checkpoint) -> str | None:
        """Why a session is not harvested, or None."""
        if session.cwd is None or not session.cwd.is_absolute():
            return NO_CWD
        if self._own_run(session):
            return OWN_RUN
        if not self._in_project(session.cwd):
            return OUTSIDE
        if session.sidechain:
            return SUB_AGENT
        if not session.turns:
            return NO_TURNS
        last = session.ended or session.started
        if self.since is not None and last is not None and last < self.since:
            return BEFORE_WINDOW
        if not checkpoint.grew(session):
            return SEEN
        return None

    def _resolve(self, path: Path) -> Path:
        key = str(path)
        if key not in self._resolved:
            self._resolved[key] = path.expanduser().resolve()
        return self._resolved[key]

    def _in_project(self, cwd: Path) -> bool:
        resolved = self._resolve(cwd)
        return resolved == self.project or self.project in resolved.parents

    def _own_run(self, session: Session) -> bool:
        assert session.cwd is not None
        folders = [session.cwd, *(Path(c) for c in session.meta.get("cwds", ()) if c)]
        for folder in folders:
            for path in (folder, self._resolve(folder)):
                if any(part.startswith(REPLAY_MARKER) for part in path.parts):
                    return True
        prompts = session.prompts
        return bool(prompts) and REPLAY_PROMPT in prompts[0].text


def _stat(source: Path) -> tuple[int, datetime]:
    """Size and modification time of a source; a SQLite database's write-ahead log counts as
    part of it (new rows land there first, the database file keeps its old time)."""
    stat = source.stat()
    size, mtime = stat.st_size, stat.st_mtime
    wal = source.with_name(source.name + "-wal")
    try:
        wal_stat = wal.stat()
    except OSError:
        pass
    else:
        size, mtime = size + wal_stat.st_size, max(mtime, wal_stat.st_mtime)
    return size, datetime.fromtimestamp(mtime, timezone.utc)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__
