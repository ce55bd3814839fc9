"""What every session adapter provides, and the errors it raises.

An adapter knows one agent's store: where it lies (:meth:`Adapter.stores`, from the agent's
own environment variables and defaults), which sources it holds (files, or one database), and
how to read a source into :class:`~skillgrad.traces.sessions.Session` records. It never
writes, and opens databases read-only. A source it cannot read raises
:class:`SessionFormatError` with one line saying why; the harvester counts it and reads on.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol

from skillgrad.agentskills import Agent
from skillgrad.errors import DataError
from skillgrad.traces.sessions import Session


class SessionFormatError(DataError):
    """A session source that cannot be read (malformed, truncated, locked, unknown layout)."""


class Adapter(Protocol):
    """One agent's session store."""

    agent: Agent

    def stores(self, environ: Mapping[str, str], home: Path) -> list[Path]:
        """The folders (or database files) where this agent keeps sessions on this machine,
        existing or not: from the agent's own variables (``CLAUDE_CONFIG_DIR``,
        ``CODEX_HOME``, ...) or its defaults under ``home``."""
        ...

    def sources(self, store: Path) -> Iterator[Path]:
        """Every session source in a store (a session file, or the database), in a stable
        order."""
        ...

    def read(self, source: Path) -> Iterator[Session]:
        """The sessions of one source, redaction not yet applied (the harvester scrubs every
        record it keeps). Raises :class:`SessionFormatError` for a source it cannot read; a
        record of an unknown type inside a readable source is skipped."""
        ...
