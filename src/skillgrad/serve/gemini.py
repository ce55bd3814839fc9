"""Gemini ``generateContent`` / ``streamGenerateContent?alt=sse`` / ``countTokens``
(``/v1beta/models/{model}:...``): what Gemini CLI speaks.

``systemInstruction`` is the system prompt; ``model`` turns' ``functionCall`` parts become the
assistant's tool calls and ``functionResponse`` parts tool results (a call without an ``id``
gets one from its position, and a response without one answers the first open call of its
name); thought parts and built-in tools (search, code execution) are dropped. Declarations
may give ``parametersJsonSchema`` (JSON Schema) or ``parameters`` (Gemini's schema, whose
upper-case type names are lowered).

The stream is a sequence of ``data:`` chunks, each a ``GenerateContentResponse``: the text,
then the function calls with ``finishReason`` (``STOP`` or ``MAX_TOKENS``) and
``usageMetadata`` on the last chunk, which is what Gemini CLI takes as a complete turn.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from skillgrad.models.messages import Message
from skillgrad.serve.wire import (
    Answer,
    Turn,
    WireError,
    assistant,
    content,
    function_tool,
    image_part,
    request_of,
    require,
    sse,
    text_of,
)

_ERRORS = {"invalid_request": (400, "INVALID_ARGUMENT"),
           "authentication": (401, "UNAUTHENTICATED"),
           "not_found": (404, "NOT_FOUND"),
           "budget": (400, "FAILED_PRECONDITION"),  # Gemini CLI retries a 429 for minutes
           "too_large": (400, "INVALID_ARGUMENT"),
           "model": (500, "INTERNAL"),
           "unavailable": (503, "UNAVAILABLE")}


class Gemini:
    """The :class:`~skillgrad.serve.wire.WireFormat` of ``:generateContent``; the server
    sets ``stream`` from the method the path names."""

    def read(self, body: dict[str, Any], model: str | None = None) -> Turn:
        body = body.get("generateContentRequest") or body  # countTokens may wrap it
        messages: list[Message] = []
        system = body.get("systemInstruction") or body.get("system_instruction")
        if system:
            messages.append(Message(role="system", content=_text(system)))
        open_calls: list[tuple[str, str]] = []  # (name, id) of calls not answered yet
        for n, turn in enumerate(require(body, "contents", list)):
            messages.extend(_content(turn, n, open_calls))
        tools = [function_tool(str(d.get("name", "")), d.get("description"),
                               d.get("parametersJsonSchema") or _lower(d.get("parameters")))
                 for t in body.get("tools") or [] if isinstance(t, dict)
                 for d in t.get("functionDeclarations") or t.get("function_declarations") or []]
        mode = ((body.get("toolConfig") or {}).get("functionCallingConfig") or {}).get("mode")
        if isinstance(mode, str) and mode.upper() == "NONE":
            tools = []
        config = body.get("generationConfig") or {}
        request = request_of(messages, tools, config.get("maxOutputTokens"),
                             config.get("temperature"), config.get("stopSequences"))
        schema = config.get("responseJsonSchema") or _lower(config.get("responseSchema"))
        if schema and config.get("responseMimeType") == "application/json":
            request = request.model_copy(update={"json_schema": schema})
        return Turn(request, str(model or ""))

    def reply(self, turn: Turn, answer: Answer) -> dict[str, Any]:
        parts = ([{"text": answer.text}] if answer.text or not answer.calls else []) + _calls(
            answer)
        return _chunk(turn, answer, parts, final=True)

    def events(self, turn: Turn, answer: Answer) -> Iterator[bytes]:
        if answer.text and answer.calls:
            yield sse(_chunk(turn, answer, [{"text": answer.text}], final=False))
            yield sse(_chunk(turn, answer, _calls(answer), final=True))
        else:
            yield sse(self.reply(turn, answer))

    def error(self, error: WireError) -> tuple[int, dict[str, Any]]:
        status, name = _ERRORS[error.kind]
        return status, {"error": {"code": status, "message": str(error), "status": name}}


def _chunk(turn: Turn, answer: Answer, parts: list[dict[str, Any]],
           final: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    out: dict[str, Any] = {"candidates": [candidate], "modelVersion": turn.model,
                           "responseId": answer.id}
    if final:
        candidate["finishReason"] = "MAX_TOKENS" if answer.finish == "length" else "STOP"
        out["usageMetadata"] = {"promptTokenCount": answer.prompt_tokens,
                                "candidatesTokenCount": answer.completion_tokens,
                                "totalTokenCount": answer.prompt_tokens
                                + answer.completion_tokens}
    return out


def _calls(answer: Answer) -> list[dict[str, Any]]:
    return [{"functionCall": {"id": c.id, "name": c.name, "args": c.args()}}
            for c in answer.calls]


def _text(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("parts", value)
    if isinstance(value, list):
        return "".join(text_of(p) for p in value if isinstance(p, dict) and not p.get("thought"))
    return text_of(value)


def _content(turn: Any, n: int, open_calls: list[tuple[str, str]]) -> list[Message]:
    if not isinstance(turn, dict):
        raise WireError("contents: an entry is not an object")
    parts = [p for p in turn.get("parts") or [] if isinstance(p, dict) and not p.get("thought")]
    if turn.get("role") == "model":
        calls = []
        for k, part in enumerate(p["functionCall"] for p in parts if "functionCall" in p):
            call_id = str(part.get("id") or f"call_{n}_{k}")
            open_calls.append((str(part.get("name", "")), call_id))
            calls.append({"id": call_id, "type": "function",
                          "function": {"name": str(part.get("name", "")),
                                       "arguments": _json(part.get("args"))}})
        text = "".join(str(p.get("text", "")) for p in parts if "text" in p)
        return [assistant(text, calls)]
    out = []
    for part in (p["functionResponse"] for p in parts if "functionResponse" in p):
        out.append(Message(role="tool", content=_response_text(part.get("response")),
                           tool_call_id=_answered(part, open_calls)))
    rest = [q for q in (_part(p) for p in parts if "functionResponse" not in p) if q is not None]
    if rest or not out:
        out.append(Message(role="user", content=content(rest)))
    return out


def _answered(part: dict[str, Any], open_calls: list[tuple[str, str]]) -> str:
    """The id of the open call ``part`` answers: the one with its id, else the first of its
    name (a client may rename ids it did not make)."""
    name, wanted = str(part.get("name", "")), part.get("id")
    for match in ((lambda c: c[1] == wanted), (lambda c: c[0] == name)):
        for k, call in enumerate(open_calls):
            if match(call):
                del open_calls[k]
                return call[1]
    return str(wanted or name)


def _response_text(response: Any) -> str:
    """A function's response: its ``output`` (or ``content``) when it has one, else JSON."""
    if isinstance(response, dict):
        for key in ("output", "content", "result"):
            if key in response and len(response) == 1:
                return text_of(response[key])
        if "error" in response and len(response) == 1:
            return f"Error: {text_of(response['error'])}"
    return response if isinstance(response, str) else _json(response)


def _part(part: dict[str, Any]) -> dict[str, Any] | None:
    if "inlineData" in part:
        data = part["inlineData"]
        return image_part(f"data:{data.get('mimeType')};base64,{data.get('data')}")
    if "fileData" in part:
        return image_part(str(part["fileData"].get("fileUri", "")))
    if "text" in part:
        return {"type": "text", "text": str(part["text"])}
    return None


def _lower(schema: Any) -> Any:
    """Gemini's schema with JSON Schema's lower-case type names (``OBJECT`` -> ``object``)."""
    if isinstance(schema, dict):
        return {k: (v.lower() if k == "type" and isinstance(v, str) else _lower(v))
                for k, v in schema.items()}
    if isinstance(schema, list):
        return [_lower(v) for v in schema]
    return schema


def _json(value: Any) -> str:
    return json.dumps(value if value is not None else {}, ensure_ascii=False)
