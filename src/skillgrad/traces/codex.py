"""Codex CLI's rollout files, read into sessions (SLEEP_NOTES §1.2).

``$CODEX_HOME`` (else ``~/.codex``) keeps live sessions by date,
``sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``, and archived ones flat in
``archived_sessions/``: both are read. A line is ``{timestamp, type, payload}``: the first
``session_meta`` says who the session is (later ones are a fork's copy of its parent's),
``turn_context`` the working directory and model of each turn, ``response_item`` what the model
saw and did (messages, function and custom tool calls, their outputs, joined by ``call_id``),
``event_msg`` what the user saw (each visible message again, right beside its response item:
one of each adjacent pair is dropped), interrupts (``turn_aborted``) and rewinds
(``thread_rolled_back``: the newest N user turns are withdrawn). User-role messages that Codex
injects (AGENTS.md, ``<environment_context>``, ``<user_instructions>``) and compaction
summaries are not prompts; nor is the ``<skill><name>…</name><path>…SKILL.md</path>`` text it
sends when the person names a skill as ``$name``: that skill is one the session used. Files
written before the envelope (a bare header, then bare items) are read too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from skillgrad.agentskills import Agent
from skillgrad.traces.read import as_dict, loads, opt_str, read_jsonl, utc
from skillgrad.traces.sessions import Session, ToolCall, Turn

# User-role text Codex writes itself: instructions files, the environment block, the
# permissions preamble, its record of an aborted turn, a ! shell line.
CONTEXT = ("<environment_context", "<user_instructions", "# AGENTS.md instructions",
           "<INSTRUCTIONS>", "<permissions instructions", "<codex_internal_context",
           "<turn_aborted", "<user_shell_command", "<subagent_notification")
_IDE_REQUEST = "## My request for Codex:"  # the IDE extension's preamble ends here
_CWD = re.compile(r"<cwd>([^<]+)</cwd>")
# The text of a skill the person named as ``$name``, which Codex sends as a user-role message.
_SKILL = re.compile(r"<skill>\s*<name>([^<]+)</name>\s*<path>[^<]*SKILL\.md</path>")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_EXIT = re.compile(r"^(?:Exit code:|Process exited with code) (-?\d+)", re.M)
# How Codex answers a patch it did not apply: plain text, no exit code, no FileChange event.
_PATCH_FAILED = re.compile(r"^(?:patch rejected|apply_patch verification failed)\b", re.M)
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+?)\s*$",
                         re.M)
# Write tools an MCP server or a custom profile may give the model, by their last name part.
_WRITE_TOOLS = ("write_file", "edit_file", "create_file", "write", "edit")


class CodexAdapter:
    """Codex CLI's session store."""

    agent: Agent = "codex"

    def stores(self, environ: Mapping[str, str], home: Path) -> list[Path]:
        codex_home = environ.get("CODEX_HOME")
        return [Path(codex_home).expanduser() if codex_home else home / ".codex"]

    def sources(self, store: Path) -> Iterator[Path]:
        yield from sorted(p for p in store.glob("sessions/*/*/*/rollout-*.jsonl") if p.is_file())
        yield from sorted(p for p in store.glob("archived_sessions/*.jsonl") if p.is_file())

    def read(self, source: Path) -> Iterator[Session]:
        rollout = _Rollout(source)
        for number, record in read_jsonl(source):
            rollout.add(number, record)
        session = rollout.session()
        if session is not None:
            yield session


@dataclass
class _Call:
    id: str
    name: str
    arguments: dict[str, Any] | str
    time: datetime | None
    output: str | None = None
    exit_code: int | None = None
    is_error: bool = False

    def freeze(self) -> ToolCall:
        return ToolCall(id=self.id, name=self.name, arguments=self.arguments,
                        output=self.output, exit_code=self.exit_code, is_error=self.is_error,
                        time=self.time)


@dataclass
class _Turn:
    role: str
    text: str
    time: datetime | None
    calls: list[_Call] = field(default_factory=list)
    interrupt: bool = False


@dataclass
class _Said:
    """The last visible message, to recognise its mirror right beside it."""

    via: str  # "item" or "event"
    role: str
    text: str
    paired: bool = False


class _Rollout:
    def __init__(self, source: Path) -> None:
        self.source = source
        self.meta: dict[str, Any] | None = None
        self.cwds: list[str] = []
        self.models: list[str] = []
        self.turns: list[_Turn] = []
        self.calls: dict[str, _Call] = {}
        self.said: _Said | None = None
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.compactions = 0
        self.rollbacks = 0
        self.skills: dict[str, None] = {}

    def add(self, number: int, record: dict[str, Any]) -> None:
        time = utc(record.get("timestamp"))
        if time is not None:
            self.first = self.first or time
            self.last = time
        payload = record.get("payload")
        kind = record.get("type")
        if not isinstance(payload, dict):
            # Before the envelope: a bare header line, then bare response items.
            if number == 1 and "id" in record and "type" not in record:
                kind, payload = "session_meta", record
            else:
                kind, payload = "response_item", record
        if kind == "session_meta":
            if self.meta is None:  # a fork repeats its parent's after its own
                self.meta = payload
                self.add_cwd(payload.get("cwd"))
        elif kind == "turn_context":
            self.add_cwd(payload.get("cwd"))
            if isinstance(payload.get("model"), str):
                self.models.append(payload["model"])
        elif kind == "response_item":
            self._item(payload, time)
        elif kind == "event_msg":
            self._event(payload, time)
        elif kind == "compacted":
            self.compactions += 1  # a model's summary, not the person's words

    def add_cwd(self, cwd: Any) -> None:
        if isinstance(cwd, str) and cwd and cwd not in self.cwds:
            self.cwds.append(cwd)

    # -- response items ---------------------------------------------------------------------

    def _item(self, item: dict[str, Any], time: datetime | None) -> None:
        kind = item.get("type")
        if kind == "message":
            role = item.get("role")
            if role == "user":
                text = _prompt(item.get("content"), self)
                if text is not None:
                    self._said("item", "user", text, time)
            elif role == "assistant":
                text = _content_text(item.get("content")).strip()
                if text:
                    self._said("item", "assistant", text, time)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            self._call(item, time)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call = self.calls.get(str(item.get("call_id")))
            if call is not None:
                call.output, exit_code, failed = _output(item.get("output"))
                call.exit_code = call.exit_code if exit_code is None else exit_code
                call.is_error = failed or call.exit_code not in (None, 0)

    def _call(self, item: dict[str, Any], time: datetime | None) -> None:
        call_id = item.get("call_id") or item.get("id")
        if not isinstance(call_id, str):
            return
        kind = item["type"]
        arguments: dict[str, Any] | str
        if kind == "local_shell_call":
            name = "local_shell"
            action = item.get("action")
            arguments = action if isinstance(action, dict) else ""
        else:
            name = str(item.get("name") or "")
            raw = item.get("arguments") if kind == "function_call" else item.get("input")
            arguments = _arguments(raw)
        call = _Call(id=call_id, name=name, arguments=arguments, time=time)
        self.calls[call_id] = call
        if not self.turns or self.turns[-1].role != "assistant":
            self.turns.append(_Turn("assistant", "", time))
        self.turns[-1].calls.append(call)
        self.said = None

    # -- events -----------------------------------------------------------------------------

    def _event(self, event: dict[str, Any], time: datetime | None) -> None:
        kind = event.get("type")
        if kind == "user_message":
            text = _prompt(event.get("message"), self)
            if text is not None:
                self._said("event", "user", text, time)
        elif kind == "agent_message":
            text = _content_text(event.get("message")).strip()
            if text:
                self._said("event", "assistant", text, time)
        elif kind == "turn_aborted":
            self.turns.append(_Turn("user", "", time, interrupt=True))
            self.said = None
        elif kind == "thread_rolled_back":
            self._roll_back(event.get("num_turns"))
        elif kind == "exec_command_end":
            call = self.calls.get(str(event.get("call_id")))
            code = event.get("exit_code")
            if call is not None and isinstance(code, int) and call.exit_code is None:
                call.exit_code = code
                call.is_error = call.is_error or code != 0

    def _said(self, via: str, role: str, text: str, time: datetime | None) -> None:
        last = self.said
        if last is not None and not last.paired and last.via != via and last.role == role \
                and last.text == text:
            last.paired = True  # the mirror of the message just before it
            return
        self.said = _Said(via, role, text)
        self.turns.append(_Turn(role, text, time))

    def _roll_back(self, count: Any) -> None:
        """The newest ``count`` user turns are withdrawn, with all that followed them."""
        if not isinstance(count, int) or count <= 0:
            return
        prompts = [i for i, t in enumerate(self.turns) if t.role == "user" and not t.interrupt]
        cut = prompts[-count] if count <= len(prompts) else 0
        del self.turns[cut:]
        self.said = None
        self.rollbacks += 1

    # -- the session ------------------------------------------------------------------------

    def session(self) -> Session | None:
        meta = self.meta or {}
        if not self.turns and self.meta is None:
            return None
        source = meta.get("source")
        originator = meta.get("originator")
        git = as_dict(meta.get("git"))
        parent = meta.get("forked_from_id") or _find(source, "parent_thread_id") \
            or meta.get("parent_thread_id")
        turns = tuple(Turn(role="user" if t.role == "user" else "assistant", text=t.text,
                           time=t.time, tool_calls=tuple(c.freeze() for c in t.calls),
                           interrupt=t.interrupt) for t in self.turns)
        calls = [c for t in turns for c in t.tool_calls]
        extra: dict[str, Any] = {}
        for key, value in (("cli_version", meta.get("cli_version")),
                           ("source", source if isinstance(source, str) else None),
                           ("originator", originator if isinstance(originator, str) else None),
                           ("compactions", self.compactions), ("rollbacks", self.rollbacks),
                           ("cwds", self.cwds if len(self.cwds) > 1 else None),
                           ("forked", bool(meta.get("forked_from_id")))):
            if value:
                extra[key] = value
        started = utc(meta.get("timestamp")) or self.first
        return Session(
            agent="codex", id=self._id(meta), source=self.source, turns=turns,
            cwd=Path(self.cwds[0]) if self.cwds else None, started=started, ended=self.last,
            git_branch=opt_str(git.get("branch")), git_commit=opt_str(git.get("commit_hash")),
            model=self.models[-1] if self.models else opt_str(meta.get("model")),
            skills=tuple(self.skills),
            files_changed=tuple(_distinct(p for c in calls for p in _written(c))),
            parent_id=str(parent) if parent else None,
            sidechain=isinstance(source, dict) and "subagent" in source,
            headless=source == "exec" or originator == "codex_exec", meta=extra)

    def _id(self, meta: dict[str, Any]) -> str:
        if isinstance(meta.get("id"), str) and meta["id"]:
            return str(meta["id"])
        match = _UUID.search(self.source.stem)
        return match.group(0) if match else self.source.stem


def _prompt(content: Any, rollout: _Rollout) -> str | None:
    """The person's words in a user-role message, each item of injected context left out
    (its ``<cwd>`` still tells where a session without a recorded one ran); None when
    nothing is left."""
    items = content if isinstance(content, list) else [content]
    parts = []
    for item in items:
        text = _content_text([item]).strip()
        skill = _SKILL.match(text)
        if skill:
            rollout.skills.setdefault(skill.group(1).strip(), None)  # loaded by ``$name``
        elif text.startswith(CONTEXT):
            for cwd in _CWD.findall(text):
                if not rollout.cwds:
                    rollout.add_cwd(cwd.strip())
        elif text:
            parts.append(text)
    text = "\n".join(parts)
    if _IDE_REQUEST in text:
        text = text.split(_IDE_REQUEST, 1)[1].strip()
    return text or None


def _content_text(content: Any) -> str:
    """A message's content (a string, or input/output text and image items) as text."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for item in content:
        if isinstance(item, str):
            parts.append(item)
        elif isinstance(item, dict):
            text = item.get("text")
            if isinstance(text, str):
                parts.append(text)
            elif str(item.get("type", "")).endswith("image"):
                parts.append("[image]")
    return "\n".join(parts)


def _arguments(raw: Any) -> dict[str, Any] | str:
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str):
        return ""
    try:
        parsed = loads(raw)
    except ValueError:
        return raw
    return parsed if isinstance(parsed, dict) else raw


def _output(raw: Any) -> tuple[str, int | None, bool]:
    """A tool output's text, exit code and whether it says it failed. Codex writes a JSON
    text ``{output, metadata: {exit_code}}``, a header ``Exit code: N ... Output:``, a plain
    text, or ``{content, success}``."""
    success: Any = None
    exit_code: int | None = None
    if isinstance(raw, str):
        try:
            parsed = loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and ("output" in parsed or "metadata" in parsed):
            raw = parsed
    if isinstance(raw, dict):
        metadata = as_dict(raw.get("metadata"))
        code = metadata.get("exit_code", raw.get("exit_code"))
        if isinstance(code, int) and not isinstance(code, bool):
            exit_code = code
        success = raw.get("success")
        raw = raw.get("output", raw.get("content", ""))
    text = _content_text(raw) if not isinstance(raw, str) else raw
    if exit_code is None:
        head, _, after = text.partition("\nOutput:")
        match = _EXIT.search(head if after else text[:300])
        # A patch run through the shell nests its own header right after the first Output:
        match = match or (re.match(r"\s*Exit code: (-?\d+)", after) if after else None)
        if match:
            exit_code = int(match.group(1))
    return text, exit_code, success is False or bool(_PATCH_FAILED.search(text[:400]))


def _written(call: ToolCall) -> list[str]:
    """The files an edit call wrote: an apply_patch patch's file headers (as its own tool, or
    run through the shell), or the path of a write tool."""
    if call.is_error:
        return []
    args = call.arguments
    texts: list[str] = []
    if isinstance(args, str):
        texts.append(args)
    else:
        for value in args.values():
            if isinstance(value, str):
                texts.append(value)
            elif isinstance(value, list):
                texts += [v for v in value if isinstance(v, str)]
    paths = [p for t in texts if "*** Begin Patch" in t for p in _PATCH_FILE.findall(t)]
    if not paths and isinstance(args, dict) \
            and re.split(r"__|\.|/", call.name)[-1] in _WRITE_TOOLS:
        path = args.get("path", args.get("file_path"))
        if isinstance(path, str) and path:
            paths.append(path)
    return paths


def _find(value: Any, key: str) -> Any:
    """``key`` anywhere in a nested JSON value (a sub-agent's ``source`` nests its parent)."""
    if isinstance(value, dict):
        if value.get(key):
            return value[key]
        for inner in value.values():
            found = _find(inner, key)
            if found:
                return found
    return None


def _distinct(values: Any) -> list[str]:
    return list(dict.fromkeys(values))
