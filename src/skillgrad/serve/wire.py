"""What the four wire formats share: a request read into skillgrad's :class:`ChatRequest`
(:class:`Turn`), an answer ready to be written back (:class:`Answer`), the one-method contract
each format implements (:class:`WireFormat`), and small helpers (SSE framing, content parts,
tool definitions).

A format never calls a model: it translates. The server (:mod:`skillgrad.serve.app`) asks
the client layer between ``read`` and ``reply`` / ``events``.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from skillgrad.models.messages import ChatRequest, Completion, Message
from skillgrad.models.toolcalls import arguments_object, call_ids

# Why a request was refused; each format names it its own way (status, error type, code):
# a malformed request, a missing or wrong key, an unknown path, the role's budget spent, a
# prompt over the model's window, a model that refused the call (fatal: retrying will not
# help), a model that kept failing (transient failures past the client's retries).
ErrorKind = Literal["invalid_request", "authentication", "not_found", "budget", "too_large",
                    "model", "unavailable"]
# Kinds an agent must not retry: the same request would be refused again.
FINAL: frozenset[str] = frozenset({"invalid_request", "authentication", "not_found", "budget",
                                   "too_large", "model"})


class WireError(Exception):
    """A request the server refuses; ``kind`` picks the format's status and error body."""

    def __init__(self, message: str, kind: ErrorKind = "invalid_request") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Turn:
    """One wire request in skillgrad's terms: what the model is asked, the model name the
    agent sent (echoed back), whether the answer streams, and what the format needs to write
    the answer its way (``names``: a tool's name in the request -> its wire name and kind)."""

    request: ChatRequest
    model: str
    stream: bool = False
    names: dict[str, tuple[str, str]] = field(default_factory=dict)
    include_usage: bool = False


@dataclass(frozen=True)
class Call:
    """A tool call of the answer: its id, tool name and arguments (a JSON text)."""

    id: str
    name: str
    arguments: str

    def args(self) -> dict[str, Any]:
        return arguments_object(self.arguments)


@dataclass(frozen=True)
class Answer:
    """A :class:`Completion` as the formats write it: text, calls with ids, why it stopped
    (``stop``, ``length`` or ``tool_calls``), tokens, and the response's id and time."""

    text: str
    calls: tuple[Call, ...]
    finish: str
    prompt_tokens: int
    completion_tokens: int
    id: str
    created: int

    @classmethod
    def of(cls, completion: Completion, request: ChatRequest) -> Answer:
        raw = completion.tool_calls or []
        fallback = call_ids(request, len(raw))
        calls = []
        for n, call in enumerate(raw):
            function = call.get("function") or {}
            arguments = function.get("arguments")
            calls.append(Call(
                id=str(call.get("id") or fallback[n]), name=str(function.get("name", "")),
                arguments=arguments if isinstance(arguments, str) else json.dumps(
                    arguments or {})))
        finish = "length" if completion.truncated else "tool_calls" if calls else "stop"
        return cls(completion.text, tuple(calls), finish, completion.usage.prompt_tokens,
                   completion.usage.completion_tokens, uuid.uuid4().hex[:24], int(time.time()))


class WireFormat(Protocol):
    """One wire format (Chat Completions, Responses, Messages, Gemini).

    Contract:
    * ``read`` turns a request body into a :class:`Turn`, or raises :class:`WireError` naming
      what is wrong; it keeps every message, tool definition, tool call and tool result, and
      drops only what no skillgrad backend can act on (reasoning, caching hints, server tools).
    * ``reply`` is the whole answer as the format's JSON body; ``events`` the same answer as
      the format's SSE stream, in the order its clients rely on, as encoded lines.
    * ``error`` is the format's HTTP status and error body for a refusal.
    """

    def read(self, body: dict[str, Any], model: str | None = None) -> Turn: ...

    def reply(self, turn: Turn, answer: Answer) -> dict[str, Any]: ...

    def events(self, turn: Turn, answer: Answer) -> Iterator[bytes]: ...

    def error(self, error: WireError) -> tuple[int, dict[str, Any]]: ...


# ----------------------------------------------------------------------------- helpers


def sse(data: dict[str, Any] | str, event: str | None = None) -> bytes:
    """One server-sent event (``event:`` line only when named)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def text_of(value: Any) -> str:
    """The text of a content value: a string, or the text of a list of parts."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(text_of(part) for part in value)
    if isinstance(value, dict):
        for key in ("text", "content", "output"):
            if key in value:
                return text_of(value[key])
        return ""
    return str(value)


def content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """Message content from OpenAI-shaped parts: one string when every part is text (what
    every backend reads best), else the parts (an image reaches a vision model)."""
    if all(p.get("type") == "text" for p in parts):
        return "".join(str(p.get("text", "")) for p in parts)
    return parts


def parts_content(value: Any, image_url: Callable[[dict[str, Any]], str | None]
                  ) -> str | list[dict[str, Any]]:
    """Message content from a wire format's content value: a string as it is, a list of parts
    as text and images; ``image_url`` gives an image part's URL (None: not an image), as
    each format places it."""
    if not isinstance(value, list):
        return text_of(value)
    parts: list[dict[str, Any]] = []
    for part in value:
        if not isinstance(part, dict):
            continue
        url = image_url(part)
        parts.append(image_part(url) if url is not None
                     else {"type": "text", "text": text_of(part)})
    return content(parts)


def image_part(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def function_tool(name: str, description: str | None, parameters: Any) -> dict[str, Any]:
    """A tool definition in skillgrad's (OpenAI Chat) shape."""
    schema = parameters if isinstance(parameters, dict) and parameters else {
        "type": "object", "properties": {}}
    return {"type": "function", "function": {"name": name, "description": description or "",
                                             "parameters": schema}}


def assistant(text: str, calls: list[dict[str, Any]]) -> Message:
    return Message(role="assistant", content=text, tool_calls=calls or None)


def merge_system(messages: list[Message]) -> list[Message]:
    """Leading system messages joined into one (agents send several: base instructions,
    developer notes, skills): one system prompt is what chat templates expect first, and the
    embedded model keys its cached prefix on it."""
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    if lead < 2:
        return messages
    joined = "\n\n".join(m.text() for m in messages[:lead] if m.text())
    return [Message(role="system", content=joined), *messages[lead:]]


def request_of(messages: list[Message], tools: list[dict[str, Any]], max_tokens: Any,
               temperature: Any, stop: Any = None) -> ChatRequest:
    """The :class:`ChatRequest` of a translated conversation; refuses an empty one."""
    messages = merge_system(messages)
    if not messages:
        raise WireError("the request has no messages")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    return ChatRequest(
        messages=tuple(messages), tools=tuple(tools) or None,
        max_tokens=int(max_tokens) if isinstance(max_tokens, (int, float)) else None,
        temperature=float(temperature) if isinstance(temperature, (int, float)) else None,
        stop=tuple(str(s) for s in stops) or None)


def require(body: dict[str, Any], key: str, kind: type | tuple[type, ...]) -> Any:
    value = body.get(key)
    if not isinstance(value, kind):
        raise WireError(f"{key}: missing or not a {getattr(kind, '__name__', 'valid value')}")
    return value


# OpenAI's statuses and error types; ``insufficient_quota`` is what Codex takes as final.
_OPENAI_ERRORS = {"invalid_request": (400, "invalid_request_error", None),
                  "authentication": (401, "invalid_request_error", "invalid_api_key"),
                  "not_found": (404, "invalid_request_error", "not_found"),
                  "budget": (429, "insufficient_quota", "insufficient_quota"),
                  "too_large": (400, "invalid_request_error", "context_length_exceeded"),
                  "model": (500, "server_error", "model_refused"),
                  "unavailable": (503, "server_error", "model_unavailable")}


def openai_error(error: WireError) -> tuple[int, dict[str, Any]]:
    """The status and body of an OpenAI error (Chat Completions and Responses share them)."""
    status, kind, code = _OPENAI_ERRORS[error.kind]
    return status, {"error": {"message": str(error), "type": kind, "param": None, "code": code}}
