"""Anthropic Messages (``POST /v1/messages``, ``/v1/messages/count_tokens``): what Claude Code
speaks.

``system`` (a string or text blocks) and ``system`` messages in the list (Claude Code sends
some mid-conversation) become system messages; an assistant's ``tool_use`` blocks become its
tool calls; a user's ``tool_result`` blocks become tool results, ahead of the rest of that
user turn; ``thinking`` blocks and server tools (those without an ``input_schema``) are
dropped.

The stream is the Messages event sequence: ``message_start`` (the message with empty content
and the input tokens), ``ping``, then per content block ``content_block_start``, one
``content_block_delta`` (``text_delta``, or ``input_json_delta`` with the call's arguments)
and ``content_block_stop``, then ``message_delta`` (``stop_reason``: ``end_turn``,
``tool_use`` or ``max_tokens``; the output tokens) and ``message_stop``.
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

_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
# Statuses and error types of the Messages API (402 billing_error: no SDK retries it).
_ERRORS = {"invalid_request": (400, "invalid_request_error"),
           "authentication": (401, "authentication_error"),
           "not_found": (404, "not_found_error"),
           "budget": (402, "billing_error"),
           "too_large": (400, "invalid_request_error"),
           "model": (500, "api_error"),
           "unavailable": (529, "overloaded_error")}


class Messages:
    """The :class:`~skillgrad.serve.wire.WireFormat` of ``/v1/messages``."""

    def read(self, body: dict[str, Any], model: str | None = None) -> Turn:
        messages: list[Message] = []
        if body.get("system"):
            messages.append(Message(role="system", content=_text_blocks(body["system"])))
        for raw in require(body, "messages", list):
            messages.extend(_turn(raw))
        tools = [function_tool(str(t.get("name", "")), t.get("description"),
                               t.get("input_schema"))
                 for t in body.get("tools") or []
                 if isinstance(t, dict) and "input_schema" in t]
        choice = body.get("tool_choice")
        if isinstance(choice, dict) and choice.get("type") == "none":
            tools = []
        request = request_of(messages, tools, body.get("max_tokens"), body.get("temperature"),
                             body.get("stop_sequences"))
        return Turn(request, str(body.get("model") or model or ""), bool(body.get("stream")))

    def reply(self, turn: Turn, answer: Answer) -> dict[str, Any]:
        return {**_message(turn, answer), "content": _blocks(answer),
                "stop_reason": _STOP[answer.finish],
                "usage": _usage(answer.prompt_tokens, answer.completion_tokens)}

    def events(self, turn: Turn, answer: Answer) -> Iterator[bytes]:
        def event(kind: str, **data: Any) -> bytes:
            return sse({"type": kind, **data}, kind)

        yield event("message_start", message={**_message(turn, answer), "content": [],
                                              "stop_reason": None,
                                              "usage": _usage(answer.prompt_tokens, 1)})
        yield event("ping")
        for index, block in enumerate(_blocks(answer)):
            if block["type"] == "text":
                yield event("content_block_start", index=index,
                            content_block={"type": "text", "text": ""})
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                yield event("content_block_start", index=index,
                            content_block={**block, "input": {}})
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            yield event("content_block_delta", index=index, delta=delta)
            yield event("content_block_stop", index=index)
        yield event("message_delta",
                    delta={"stop_reason": _STOP[answer.finish], "stop_sequence": None},
                    usage={"input_tokens": answer.prompt_tokens,
                           "output_tokens": answer.completion_tokens})
        yield event("message_stop")

    def error(self, error: WireError) -> tuple[int, dict[str, Any]]:
        status, kind = _ERRORS[error.kind]
        return status, {"type": "error", "error": {"type": kind, "message": str(error)}}


def count_request(body: dict[str, Any]) -> Turn:
    """A ``count_tokens`` body read as a request (it has no ``max_tokens``)."""
    return Messages().read({**body, "stream": False})


def _message(turn: Turn, answer: Answer) -> dict[str, Any]:
    return {"id": f"msg_{answer.id}", "type": "message", "role": "assistant",
            "model": turn.model, "stop_sequence": None}


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {"input_tokens": prompt, "output_tokens": completion,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def _blocks(answer: Answer) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if answer.text or not answer.calls:
        blocks.append({"type": "text", "text": answer.text})
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.args()}
               for c in answer.calls]
    return blocks


def _text_blocks(value: Any) -> str:
    if isinstance(value, list):
        return "\n\n".join(text_of(b) for b in value if isinstance(b, dict)
                           and b.get("type", "text") == "text" and text_of(b))
    return text_of(value)


def _turn(raw: Any) -> list[Message]:
    """One message of the list as skillgrad's messages (a user turn with tool results is
    several: the results first, then what the user added)."""
    if not isinstance(raw, dict) or raw.get("role") not in ("user", "assistant", "system"):
        raise WireError("messages: a message is not a user, assistant or system message")
    role, blocks = raw["role"], raw.get("content")
    if isinstance(blocks, str):
        return [Message(role=role, content=blocks)]
    if not isinstance(blocks, list):
        raise WireError("messages: content is neither text nor a list of blocks")
    if role == "assistant":
        calls = [{"id": str(b.get("id", "")), "type": "function",
                  "function": {"name": str(b.get("name", "")),
                               "arguments": json.dumps(b.get("input") or {})}}
                 for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
        return [assistant(_text_blocks(blocks), calls)]
    out = [Message(role="tool", content=_result(b), tool_call_id=str(b.get("tool_use_id", "")))
           for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
    parts = [p for p in (_part(b) for b in blocks if isinstance(b, dict) and b.get("type")
                         not in ("tool_result", "thinking", "redacted_thinking")) if p is not None]
    if parts or not out:
        out.append(Message(role=role, content=content(parts)))
    return out


def _result(block: dict[str, Any]) -> str:
    text = text_of(block.get("content"))
    return f"Error: {text}" if block.get("is_error") and not text.startswith("Error") else text


def _part(block: dict[str, Any]) -> dict[str, Any] | None:
    kind = block.get("type")
    if kind == "image":
        source = block.get("source") or {}
        if source.get("type") == "base64":
            return image_part(f"data:{source.get('media_type')};base64,{source.get('data')}")
        return image_part(str(source.get("url", "")))
    text = text_of(block) if kind in ("text", "document", None) else ""
    return {"type": "text", "text": text} if text else None
