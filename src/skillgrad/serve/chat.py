"""OpenAI Chat Completions (``POST /v1/chat/completions``): what OpenCode and Copilot CLI speak.

Streaming follows the OpenAI stream: a first chunk with the role, the text as a content delta,
each tool call as a delta at its ``index`` (id, type and name first, then the arguments), a
chunk with the ``finish_reason``, a usage chunk with no choices when
``stream_options.include_usage`` asks for it, and ``data: [DONE]``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from skillgrad.models.messages import Message
from skillgrad.serve.wire import (
    Answer,
    Turn,
    WireError,
    function_tool,
    openai_error,
    parts_content,
    request_of,
    require,
    sse,
    text_of,
)

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
          "tool": "tool", "function": "tool"}


class ChatCompletions:
    """The :class:`~skillgrad.serve.wire.WireFormat` of ``/v1/chat/completions``."""

    def read(self, body: dict[str, Any], model: str | None = None) -> Turn:
        messages = [_message(m) for m in require(body, "messages", list)]
        tools = [function_tool(str(f.get("name", "")), f.get("description"), f.get("parameters"))
                 for t in body.get("tools") or [] if t.get("type", "function") == "function"
                 for f in [t.get("function") or {}]]
        if body.get("tool_choice") == "none":
            tools = []
        limit = body.get("max_completion_tokens", body.get("max_tokens"))
        request = request_of(messages, tools, limit, body.get("temperature"), body.get("stop"))
        options = body.get("stream_options") or {}
        return Turn(request, str(body.get("model") or model or ""), bool(body.get("stream")),
                    include_usage=bool(options.get("include_usage")))

    def reply(self, turn: Turn, answer: Answer) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant",
                                   "content": answer.text if answer.text or not answer.calls
                                   else None}
        if answer.calls:
            message["tool_calls"] = [_call(c) for c in answer.calls]
        return {**_head(turn, answer, "chat.completion"),
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": answer.finish}],
                "usage": _usage(answer)}

    def events(self, turn: Turn, answer: Answer) -> Iterator[bytes]:
        head = _head(turn, answer, "chat.completion.chunk")

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            return sse({**head, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                             "finish_reason": finish}]})

        yield chunk({"role": "assistant", "content": ""})
        if answer.text:
            yield chunk({"content": answer.text})
        for n, call in enumerate(answer.calls):
            yield chunk({"tool_calls": [{"index": n, "id": call.id, "type": "function",
                                         "function": {"name": call.name, "arguments": ""}}]})
            yield chunk({"tool_calls": [{"index": n,
                                         "function": {"arguments": call.arguments}}]})
        yield chunk({}, answer.finish)
        if turn.include_usage:
            yield sse({**head, "choices": [], "usage": _usage(answer)})
        yield sse("[DONE]")

    def error(self, error: WireError) -> tuple[int, dict[str, Any]]:
        return openai_error(error)


def _head(turn: Turn, answer: Answer, kind: str) -> dict[str, Any]:
    return {"id": f"chatcmpl-{answer.id}", "object": kind, "created": answer.created,
            "model": turn.model}


def _usage(answer: Answer) -> dict[str, int]:
    return {"prompt_tokens": answer.prompt_tokens, "completion_tokens": answer.completion_tokens,
            "total_tokens": answer.prompt_tokens + answer.completion_tokens}


def _call(call: Any) -> dict[str, Any]:
    return {"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": call.arguments}}


def _message(raw: Any) -> Message:
    if not isinstance(raw, dict) or raw.get("role") not in _ROLES:
        raise WireError(f"messages: a message with role {raw.get('role') if isinstance(raw, dict) else raw!r} is not understood")
    role = _ROLES[raw["role"]]
    calls = [c for c in raw.get("tool_calls") or [] if isinstance(c, dict)]
    if raw["role"] == "function":  # the legacy form of a tool result
        return Message(role="tool", content=text_of(raw.get("content")),
                       tool_call_id=str(raw.get("name", "")))
    return Message(role=role, content=parts_content(raw.get("content"), _image_url),
                   tool_call_id=raw.get("tool_call_id") if role == "tool" else None,
                   tool_calls=[{"id": c.get("id"), "type": "function",
                                "function": c.get("function") or {}} for c in calls] or None)


def _image_url(part: dict[str, Any]) -> str | None:
    if part.get("type") != "image_url":
        return None
    url = part.get("image_url")
    return str(url.get("url", "")) if isinstance(url, dict) else str(url)
