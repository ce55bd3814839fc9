"""One typed model of an agent session, whatever agent wrote it.

Adapters (:mod:`skillgrad.traces`) read each agent's own format into these records and
leave out what is not the user's or the agent's words: compaction summaries, injected
context (meta records, AGENTS.md preambles, environment blocks), tool-result-only lines,
mirrored duplicates, abandoned branches of a rewound conversation. A tool call carries its
result, joined by id. Every time is timezone-aware UTC.

Every text a record holds is valid Unicode: an agent's JSON can carry a lone UTF-16 surrogate
(``"\\ud800"``: half of an emoji cut in two), which no UTF-8 file, tasks file or model request
can hold. The records replace each one with U+FFFD as they are made, whoever makes them (an
adapter, or the archive reading back a session harvested before), so one bad character never
stops a night.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from skillgrad.agentskills import Agent

# skillgrad's own agent runs (replays of mined tasks) work in a folder whose name starts with
# this and put "[skillgrad-replay]" in their first prompt; harvest never reads them back.
REPLAY_MARKER = "skillgrad-replay"
_SURROGATE = re.compile("[\ud800-\udfff]")


def valid_text(value: Any) -> Any:
    """``value`` (a string, or JSON data holding strings) with each lone UTF-16 surrogate
    replaced by U+FFFD; a pair split into two code points becomes the one character it
    encodes. What needs no change is returned as it is (the same object)."""
    if not _has_surrogate(value):
        return value
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {valid_text(k): valid_text(v) for k, v in value.items()}
    return type(value)(valid_text(v) for v in value)


def _has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_surrogate(v) for v in value)
    return False


def _make_valid(record: Any, names: tuple[str, ...]) -> None:
    """Replace the lone surrogates in the text fields ``names`` of a frozen record, in
    place."""
    for name in names:
        value = getattr(record, name)
        clean = valid_text(value)
        if clean is not value:
            object.__setattr__(record, name, clean)


@dataclass(frozen=True)
class ToolCall:
    """One tool call and its result. ``arguments``: the parsed JSON object when the agent
    wrote JSON, else the text. ``exit_code``: a shell command's, where the log records it.
    ``is_error``: the tool failed, or its command exited non-zero, whichever way the agent's
    log says so (Claude Code marks a failing command an error, Gemini CLI and Copilot CLI
    record only its exit code)."""

    id: str
    name: str
    arguments: dict[str, Any] | str = ""
    output: str | None = None  # None: no result was recorded (the session ended first)
    exit_code: int | None = None
    is_error: bool = False
    time: datetime | None = None

    def __post_init__(self) -> None:
        _make_valid(self, ("id", "name", "arguments", "output"))
        if self.exit_code not in (None, 0) and not self.is_error:
            object.__setattr__(self, "is_error", True)

    @property
    def command(self) -> str | None:
        """The shell command this call ran, if it is a shell call (any agent's naming)."""
        args = self.arguments
        if not isinstance(args, dict):
            return None
        value = args.get("command", args.get("cmd"))
        if isinstance(value, list):
            return " ".join(str(v) for v in value)
        return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Turn:
    """One message. A user turn is text the person typed (``interrupt``: the person stopped
    the agent here); an assistant turn is the agent's text and the tools it called."""

    role: Literal["user", "assistant"]
    text: str
    time: datetime | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    interrupt: bool = False

    def __post_init__(self) -> None:
        _make_valid(self, ("text",))


@dataclass(frozen=True)
class Session:
    """A session of one agent in one working directory."""

    agent: Agent
    id: str
    source: Path  # the file (or database) it was read from
    turns: tuple[Turn, ...]
    cwd: Path | None = None
    started: datetime | None = None
    ended: datetime | None = None
    git_branch: str | None = None
    git_commit: str | None = None
    model: str | None = None
    skills: tuple[str, ...] = ()  # skills the agent loaded or invoked
    files_changed: tuple[str, ...] = ()  # paths its edit tools wrote
    parent_id: str | None = None  # the session a sub-agent or fork came from
    sidechain: bool = False  # a sub-agent's conversation
    headless: bool = False  # a non-interactive run (codex exec, claude -p), as the log says
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _make_valid(self, ("id", "git_branch", "git_commit", "model", "skills", "files_changed",
                           "parent_id", "meta"))

    @property
    def prompts(self) -> list[Turn]:
        return [t for t in self.turns if t.role == "user" and not t.interrupt]

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [c for t in self.turns for c in t.tool_calls]
