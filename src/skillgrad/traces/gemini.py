"""Gemini CLI sessions: one JSON-lines file a session, under the project's temporary folder.

Layout (``$GEMINI_CLI_HOME/.gemini``, by default ``~/.gemini``)::

    projects.json                           {"projects": {"<project root>": "<short id>"}}
    tmp/<short id>/.project_root            the project root the folder belongs to
    tmp/<short id>/chats/session-<time>-<id8>.jsonl
    tmp/<short id>/chats/<parent id>/<id>.jsonl     a sub-agent's session
    tmp/<sha256 of the root>/chats/...      folders of versions before the short ids
    tmp/.../chats/session-*.json            one JSON object a session (older still; the CLI
                                            copies one it resumes to ``.jsonl`` and keeps it)

A file starts with a header {sessionId, projectHash (sha256 of the root), startTime, kind}.
Every later line is a message {id, timestamp, type: user | gemini | info | error | warning,
content}, where a line with an id seen before replaces that message in place (a tool result
or a token count arrived); ``{"$set": {...}}``, metadata, whose ``messages`` replace the whole
conversation (a checkpoint); or ``{"$rewindTo": id}``: the person rewound, and that message
and every later one are gone. ``gemini`` messages carry ``toolCalls`` with their status and
result (since 0.61 a tool's output is wrapped in ``<untrusted_context>``, left out here).
Tool results also come back as ``user`` messages holding only ``functionResponse``
parts: those are not the person's words, nor are slash commands, injected context
(``<session_context>``, ``<hook_context>``) or a compression summary (``<state_snapshot>``, and
the model's canned acknowledgement after it). A cancelled request (the ``Request cancelled.``
notice, or a tool call cancelled or declined) is an interrupt. Headless runs are not marked.

A file in which nothing was said is a stub, read as no session (not skipped, night after
night): ``gemini --resume`` first starts a file named for the current minute and the resumed
session's id, holding its header and the injected ``<session_context>``, then goes on in the
resumed session's own file (the same file when the minute is the same). So are a file of
``$set`` metadata alone and a lone header cut off mid-line.

The working directory: the folder's ``.project_root``; else the root ``projects.json`` gives
the folder's short id; else the root in ``projects.json`` whose sha256 is the session's
``projectHash`` (the name of an old hash folder); else unknown (None).
"""

from __future__ import annotations

import hashlib
import json
import re
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
    loads,
    read_json_object,
)
from skillgrad.traces.sessions import Session, ToolCall, Turn

EDIT_TOOLS = frozenset({"replace", "write_file", "edit"})  # args.file_path
SHELL_TOOL = "run_shell_command"
CANCELLED = "Request cancelled."  # the notice the CLI records when the person cancels
_IGNORED_PREFIXES = ("/", "?", "<session_context>", "<hook_context>")  # never sent as a prompt
_SUMMARY = "<state_snapshot>"
_STUB_BYTES = 64 * 1024  # a header is far shorter; a longer cut-off line is a real error
_EXIT = re.compile(r"^Exit Code: (-?\d+)\s*$", re.MULTILINE)
# 0.61 and later wrap each tool's output in this; the text inside is what the tool printed.
_UNTRUSTED = re.compile(r"\A\s*<untrusted_context>\n?(.*?)\n?</untrusted_context>\s*\Z", re.S)


class GeminiAdapter:
    """Gemini CLI's store (the ``.gemini`` folder)."""

    agent: Agent = "gemini"

    def stores(self, environ: Mapping[str, str], home: Path) -> list[Path]:
        return [Path(environ.get("GEMINI_CLI_HOME") or home).expanduser() / ".gemini"]

    def sources(self, store: Path) -> Iterator[Path]:
        for chats in sorted((store / "tmp").glob("*/chats")):
            found = [*chats.glob("session-*.jsonl"), *chats.glob("*/*.jsonl"),
                     *(p for p in chats.glob("session-*.json")
                       if not p.with_suffix(".jsonl").exists())]
            yield from sorted(found)

    def read(self, source: Path) -> Iterator[Session]:
        nested = source.parent.name != "chats"  # chats/<parent id>/<id>.jsonl
        if len(source.parents) < (5 if nested else 4) \
                or (source.parents[1] if nested else source.parent).name != "chats":
            raise SessionFormatError(f"{source}: not in a Gemini CLI tmp/<project>/chats folder")
        folder = source.parents[2] if nested else source.parents[1]  # tmp/<project>
        if source.suffix == ".json":
            meta, messages = _legacy(source)
        else:
            try:
                meta, messages = _replay(source)
            except SessionFormatError:
                if _unfinished_header(source):
                    return  # a stub (see _unfinished_header): no conversation in it
                raise
        sid = meta.get("sessionId")
        if not messages and source.suffix == ".jsonl":
            return  # a stub: metadata only, no message (see the module's docstring)
        if not isinstance(sid, str) or not sid:
            raise SessionFormatError(f"{source}: no session header (sessionId, projectHash)")
        project_hash = meta.get("projectHash") if isinstance(meta.get("projectHash"), str) else None
        conversation = _Conversation(messages)
        if not conversation.turns and source.suffix == ".jsonl":
            return  # a stub: nothing was said in it (see the module's docstring)
        kind = meta.get("kind")
        summary = meta.get("summary")
        yield Session(
            agent="gemini", id=sid, source=source, turns=tuple(conversation.turns),
            cwd=_project_root(folder, project_hash),
            started=checked_utc(meta.get("startTime"), f"{source}: startTime"),
            ended=checked_utc(meta.get("lastUpdated"), f"{source}: lastUpdated"),
            model=conversation.model, skills=tuple(conversation.skills),
            files_changed=tuple(conversation.files),
            parent_id=source.parent.name if nested else None,
            sidechain=nested or kind == "subagent",
            meta={"summary": summary} if isinstance(summary, str) and summary else {},
        )


# ---------------------------------------------------------------------- reading a file

_Located = tuple[str, dict[str, Any]]  # (where, message record)


def _replay(path: Path) -> tuple[dict[str, Any], list[_Located]]:
    """The metadata and the messages a JSON-lines session file ends with, its ``$set`` and
    ``$rewindTo`` records applied as the CLI applies them."""
    meta: dict[str, Any] = {}
    messages: dict[str, _Located] = {}  # insertion order; a replaced message keeps its place
    for where, record in jsonl_records(path):
        if isinstance(record.get("$rewindTo"), str):
            ids = list(messages)
            target = record["$rewindTo"]
            # the CLI clears everything for an id it does not know, and so do we
            for gone in ids[ids.index(target):] if target in ids else ids:
                del messages[gone]
        elif isinstance(record.get("id"), str):
            messages[record["id"]] = (where, record)
        elif isinstance(record.get("$set"), dict):
            update = record["$set"]
            if "messages" in update:
                messages = dict(_located(update["messages"], f"{where}: $set.messages"))
            meta.update((k, v) for k, v in update.items() if k != "messages")
        elif isinstance(record.get("sessionId"), str):  # the header
            meta.update((k, v) for k, v in record.items() if k != "messages")
            if "messages" in record:
                messages.update(_located(record["messages"], f"{where}: messages"))
    return meta, list(messages.values())


def _unfinished_header(path: Path) -> bool:
    """Whether the file is one line, cut off before its newline, with no message after it:
    the header of a session the CLI stopped writing as it started (a resume swapped it)."""
    with path.open("rb") as fh:
        head = fh.read(_STUB_BYTES + 1)
    return (len(head) <= _STUB_BYTES and head.lstrip().startswith(b'{"sessionId"')
            and b"\n" not in head.strip() and not head.endswith(b"\n"))


def _legacy(path: Path) -> tuple[dict[str, Any], list[_Located]]:
    record = read_json_object(path)
    meta = {k: v for k, v in record.items() if k != "messages"}
    return meta, [m for _, m in _located(record.get("messages", []), f"{path}: messages")]


def _located(messages: Any, where: str) -> list[tuple[str, _Located]]:
    if not isinstance(messages, list):
        raise SessionFormatError(f"{where}: not a list")
    out = []
    for n, message in enumerate(messages, 1):
        if not isinstance(message, dict) or not isinstance(message.get("id"), str):
            raise SessionFormatError(f"{where}: message {n} is not an object with an id")
        out.append((message["id"], (f"{where}: message {n}", message)))
    return out


# ---------------------------------------------------------------------- the conversation


class _Conversation:
    def __init__(self, messages: list[_Located]) -> None:
        self.turns: list[Turn] = []
        self.skills: dict[str, None] = {}
        self.files: dict[str, None] = {}
        self.model: str | None = None
        # tool results that came back as user messages, for calls recorded without one
        self._results: dict[str, dict[str, Any]] = {}
        for where, message in messages:
            for part in _parts(message.get("content"), where):
                response = part.get("functionResponse")
                if isinstance(response, dict) and isinstance(response.get("id"), str):
                    self._results[response["id"]] = part
        after_summary = False
        for where, message in messages:
            after_summary = self._message(message, where, after_summary)

    def _message(self, message: dict[str, Any], where: str, after_summary: bool) -> bool:
        """Adds the turns of one message; returns whether it was a compression summary."""
        kind = message.get("type")
        time = checked_utc(message.get("timestamp"), f"{where}: timestamp")
        parts = _parts(message.get("content"), where)
        if kind == "user":
            if parts and all("functionResponse" in p for p in parts):
                return False  # tool results, joined to their calls
            shown = message.get("displayContent")
            text = _text(_parts(shown, where) if shown is not None else parts).strip()
            if text.startswith(_SUMMARY):
                return True
            if text and not text.startswith(_IGNORED_PREFIXES):
                self.turns.append(Turn("user", text, time))
        elif kind == "gemini":
            raw_calls = message.get("toolCalls") or []
            if not isinstance(raw_calls, list):
                raise SessionFormatError(f"{where}: toolCalls is not a list")
            if not raw_calls:  # a resume's rewritten history: calls only as functionCall parts
                raw_calls = [{"id": c.get("id"), "name": c.get("name"), "args": c.get("args"),
                              "resumed": True}
                             for p in parts if isinstance(c := p.get("functionCall"), dict)]
            if after_summary and not raw_calls:
                return False  # the model acknowledging the summary
            calls = tuple(self._call(c, f"{where}: tool call {n}")
                          for n, c in enumerate(raw_calls, 1))
            self.turns.append(Turn("assistant", _text(parts), time, calls))
            self.model = message["model"] if isinstance(message.get("model"), str) else self.model
            if any(isinstance(c, dict) and c.get("status") == "cancelled" for c in raw_calls):
                self._interrupt(time)
        elif kind == "info" and _text(parts).strip() == CANCELLED:
            self._interrupt(time)
        return False

    def _interrupt(self, time: datetime | None) -> None:
        if not (self.turns and self.turns[-1].interrupt):  # one stop, however many notices
            self.turns.append(Turn("user", "", time, interrupt=True))

    def _call(self, call: Any, where: str) -> ToolCall:
        if not isinstance(call, dict) or not isinstance(call.get("id"), str) \
                or not isinstance(call.get("name"), str):
            raise SessionFormatError(f"{where}: not an object with an id and a name")
        args = as_dict(call.get("args"))
        result = call.get("result")
        if result is None and call["id"] in self._results:
            result = [self._results[call["id"]]]
        if result is not None:  # a resume puts every sibling's response in each call's result
            result = _own_responses(_parts(result, where), call["id"])
        output, failed = _output(result, where) if result is not None else (None, False)
        status = call.get("status")
        if status is None and result is not None and call.get("resumed"):
            status = "error" if failed else "success"  # as rewritten on resume: no status
        exit_code = None
        if call["name"] == SHELL_TOOL and output is not None:
            found = _EXIT.search(output)
            exit_code = int(found.group(1)) if found else 0 if status == "success" \
                and output.startswith("Output:") else None  # the tool prints non-zero codes
        if status == "success" and call["name"] in EDIT_TOOLS:
            if isinstance(args.get("file_path"), str):
                self.files[args["file_path"]] = None
        if call["name"] == "activate_skill" and isinstance(args.get("name"), str):
            self.skills[args["name"]] = None
        return ToolCall(id=call["id"], name=call["name"], arguments=args, output=output,
                        exit_code=exit_code, is_error=failed or status == "error",
                        time=checked_utc(call.get("timestamp"), f"{where}: timestamp"))


def _own_responses(parts: list[dict[str, Any]], call_id: str) -> list[dict[str, Any]]:
    """The parts of a result that answer the call ``call_id``: a response naming another
    call's id belongs to that call."""
    def mine(part: dict[str, Any]) -> bool:
        response = part.get("functionResponse")
        return not (isinstance(response, dict) and isinstance(response.get("id"), str)
                    and response["id"] != call_id)

    return [p for p in parts if mine(p)]


def _output(result: Any, where: str) -> tuple[str, bool]:
    """A tool result's text, and whether it reports an error."""
    texts, failed = [], False
    for part in _parts(result, where):
        response = part.get("functionResponse")
        if isinstance(response, dict):
            body = response.get("response")
            if isinstance(body, dict) and isinstance(body.get("error"), str):
                texts.append(body["error"])
                failed = True
            elif isinstance(body, dict) and isinstance(body.get("output"), str):
                texts.append(_unwrapped(body["output"]))
            elif body is not None:
                texts.append(json.dumps(body, ensure_ascii=False))
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "\n".join(texts), failed


def _unwrapped(output: str) -> str:
    """A tool's output without the ``<untrusted_context>`` wrapper the CLI puts around it."""
    found = _UNTRUSTED.match(output)
    return found.group(1) if found else output


def _parts(content: Any, where: str) -> list[dict[str, Any]]:
    """Gemini content (a string, one part, or a list of them) as a list of parts."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, dict):
        return [content]
    if isinstance(content, list) and all(isinstance(p, (str, dict)) for p in content):
        return [{"text": p} if isinstance(p, str) else p for p in content]
    raise SessionFormatError(f"{where}: content is neither text nor a list of parts")


def _text(parts: list[dict[str, Any]]) -> str:
    return "".join(p["text"] for p in parts
                   if isinstance(p.get("text"), str) and not p.get("thought"))


# ---------------------------------------------------------------------- the project root


def _project_root(folder: Path, project_hash: str | None) -> Path | None:
    marker = folder / ".project_root"
    if marker.is_file():
        try:
            root = marker.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise SessionFormatError(f"{marker}: cannot read ({exc})") from None
        if root:
            return Path(root)
    projects = _registry(folder.parents[1] / "projects.json")
    for root, short_id in projects.items():
        if short_id == folder.name:
            return Path(root)
    for root in projects:
        digest = hashlib.sha256(root.encode("utf-8")).hexdigest()
        if digest in (project_hash, folder.name):
            return Path(root)
    return None


def _registry(path: Path) -> dict[str, str]:
    """``projects.json``: project root -> short id; empty when there is none."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SessionFormatError(f"{path}: cannot read ({exc})") from None
    try:
        data = loads(text)
    except json.JSONDecodeError as exc:
        raise SessionFormatError(f"{path}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict):
        raise SessionFormatError(f"{path}: no 'projects' object")
    return {k: v for k, v in projects.items() if isinstance(k, str) and isinstance(v, str)}

