"""OpenAI Responses (``POST /v1/responses``): what Codex CLI speaks.

A request's ``instructions`` and ``developer`` / ``system`` messages become the system prompt;
``function_call`` / ``custom_tool_call`` items become the assistant's tool calls and their
``*_output`` items tool results; reasoning and server-side items (web search) are dropped.
Tools: ``function`` tools, the functions inside a ``namespace`` tool (a call to one is written
back with its ``namespace``), and ``custom`` (free-form) tools, offered to the model as a
function of one string argument ``input`` and written back as ``custom_tool_call`` items.

The stream is the Responses event sequence, each event with its ``sequence_number``:
``response.created``, ``response.in_progress``; per output item ``response.output_item.added``,
then for a message ``response.content_part.added``, ``response.output_text.delta``,
``response.output_text.done``, ``response.content_part.done``, for a function call
``response.function_call_arguments.delta`` / ``.done``, for a custom tool call
``response.custom_tool_call_input.delta`` / ``.done``, and ``response.output_item.done``;
last ``response.completed`` carrying the whole response and its usage (Codex ends a turn on
it), or ``response.incomplete`` when the reply was cut off at the token limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from skillgrad.models.messages import Message
from skillgrad.serve.wire import (
    Answer,
    Call,
    Turn,
    WireError,
    assistant,
    function_tool,
    openai_error,
    parts_content,
    request_of,
    sse,
    text_of,
)

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_CUSTOM_INPUT = {"type": "object", "properties": {"input": {"type": "string"}},
                 "required": ["input"]}


class Responses:
    """The :class:`~skillgrad.serve.wire.WireFormat` of ``/v1/responses``."""

    def read(self, body: dict[str, Any], model: str | None = None) -> Turn:
        tools, names = _tools(body.get("tools") or [])
        if body.get("tool_choice") == "none":
            tools, names = [], {}
        messages: list[Message] = []
        if body.get("instructions"):
            messages.append(Message(role="system", content=text_of(body["instructions"])))
        items = body.get("input")
        if isinstance(items, str):
            items = [{"type": "message", "role": "user", "content": items}]
        if not isinstance(items, list):
            raise WireError("input: missing or not a list of items")
        reverse = {(_namespace(kind), wire): own for own, (kind, wire) in names.items()}
        pending: list[dict[str, Any]] = []  # tool calls of the assistant turn being read
        for item in items:
            messages, pending = _item(item, messages, pending, reverse)
        if pending:
            messages.append(assistant("", pending))
        text = body.get("text") or {}
        request = request_of(messages, tools, body.get("max_output_tokens"),
                             body.get("temperature"))
        if isinstance(text, dict) and (text.get("format") or {}).get("type") == "json_schema":
            request = request.model_copy(update={"json_schema": text["format"].get("schema")})
        return Turn(request, str(body.get("model") or model or ""), bool(body.get("stream")),
                    names=names)

    def reply(self, turn: Turn, answer: Answer) -> dict[str, Any]:
        return _response(turn, answer, _output(turn, answer), _status(answer))

    def events(self, turn: Turn, answer: Answer) -> Iterator[bytes]:
        counter = iter(range(1_000_000))

        def event(kind: str, **data: Any) -> bytes:
            return sse({"type": kind, "sequence_number": next(counter), **data}, kind)

        started = _response(turn, answer, [], "in_progress")
        yield event("response.created", response=started)
        yield event("response.in_progress", response=started)
        output = _output(turn, answer)
        for index, item in enumerate(output):
            yield from _item_events(event, index, item)
        status = _status(answer)
        final = "response.completed" if status == "completed" else "response.incomplete"
        yield event(final, response=_response(turn, answer, output, status))

    def error(self, error: WireError) -> tuple[int, dict[str, Any]]:
        return openai_error(error)


# ----------------------------------------------------------------------------- request


def _tools(raw: list[Any]) -> tuple[list[dict[str, Any]], dict[str, tuple[str, str]]]:
    """Function tools in skillgrad's shape, and each one's name -> (kind, wire name): kind
    ``function``, ``custom``, or ``ns:<namespace>`` for a function inside a namespace."""
    tools: list[dict[str, Any]] = []
    names: dict[str, tuple[str, str]] = {}

    def add(name: str, kind: str, description: Any, parameters: Any) -> None:
        own = name if name not in names else f"{kind.removeprefix('ns:')}__{name}"
        names[own] = (kind, name)
        tools.append(function_tool(own, description, parameters))

    for tool in raw:
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type")
        if kind == "function":
            add(str(tool.get("name", "")), "function", tool.get("description"),
                tool.get("parameters"))
        elif kind == "custom":
            fmt = tool.get("format") or {}
            grammar = f"\n\nInput format ({fmt.get('syntax', 'grammar')}):\n{fmt['definition']}" \
                if isinstance(fmt, dict) and fmt.get("definition") else ""
            add(str(tool.get("name", "")), "custom",
                f"{tool.get('description') or ''}{grammar}", _CUSTOM_INPUT)
        elif kind == "namespace":
            for inner in tool.get("tools") or []:
                if isinstance(inner, dict) and inner.get("type", "function") == "function":
                    add(str(inner.get("name", "")), f"ns:{tool.get('name', '')}",
                        inner.get("description"), inner.get("parameters"))
        # Server-side tools (web_search, file_search, ...) have no client to run them here.
    return tools, names


def _namespace(kind: str) -> str:
    return kind.removeprefix("ns:") if kind.startswith("ns:") else ""


def _item(item: Any, messages: list[Message], pending: list[dict[str, Any]],
          reverse: dict[tuple[str, str], str]) -> tuple[list[Message], list[dict[str, Any]]]:
    """Add one input item to the conversation; calls gather until a non-call item."""
    if not isinstance(item, dict):
        raise WireError("input: an item is not an object")
    kind = item.get("type") or ("message" if "role" in item else None)
    if kind in ("function_call", "custom_tool_call", "local_shell_call"):
        name = str(item.get("name") or "local_shell")
        name = reverse.get((str(item.get("namespace") or ""), name), name)
        arguments = item.get("arguments") if kind == "function_call" else (
            {"input": item.get("input", "")} if kind == "custom_tool_call" else item.get("action"))
        pending.append({"id": str(item.get("call_id") or item.get("id") or ""),
                        "type": "function",
                        "function": {"name": name, "arguments": arguments if isinstance(
                            arguments, str) else _json(arguments)}})
        return messages, pending
    if pending:
        messages.append(assistant("", pending))
        pending = []
    if kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
        messages.append(Message(role="tool", content=_output_text(item.get("output")),
                                tool_call_id=str(item.get("call_id") or "")))
    elif kind == "message":
        role = _ROLES.get(str(item.get("role")))
        if role is None:
            raise WireError(f"input: a message with role {item.get('role')!r} is not understood")
        messages.append(Message(role=role, content=parts_content(item.get("content"), _image_url)))  # type: ignore[arg-type]
    # reasoning, web_search_call, compaction, item_reference: nothing a backend can use.
    return messages, pending


def _json(value: Any) -> str:
    return json.dumps(value if value is not None else {})


def _output_text(value: Any) -> str:
    if isinstance(value, dict) and "content" in value:  # {content, success} of older clients
        return text_of(value["content"])
    return text_of(value)


def _image_url(part: dict[str, Any]) -> str | None:
    if part.get("type") != "input_image":
        return None
    return str(part.get("image_url") or part.get("file_id") or "")


# ----------------------------------------------------------------------------- answer


def _status(answer: Answer) -> str:
    return "incomplete" if answer.finish == "length" else "completed"


def _output(turn: Turn, answer: Answer) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if answer.text or not answer.calls:
        items.append({"id": f"msg_{answer.id}", "type": "message", "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": answer.text,
                                   "annotations": []}]})
    for call in answer.calls:
        items.append(_call_item(turn, call))
    return items


def _call_item(turn: Turn, call: Call) -> dict[str, Any]:
    kind, wire = turn.names.get(call.name, ("function", call.name))
    if kind == "custom":
        return {"id": f"ctc_{call.id}", "type": "custom_tool_call", "status": "completed",
                "call_id": call.id, "name": wire, "input": str(call.args().get("input", ""))}
    item = {"id": f"fc_{call.id}", "type": "function_call", "status": "completed",
            "call_id": call.id, "name": wire, "arguments": call.arguments}
    if _namespace(kind):
        item["namespace"] = _namespace(kind)
    return item


def _response(turn: Turn, answer: Answer, output: list[dict[str, Any]],
              status: str) -> dict[str, Any]:
    done = status != "in_progress"
    return {
        "id": f"resp_{answer.id}", "object": "response", "created_at": answer.created,
        "status": status, "model": turn.model, "output": output, "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete"
        else None,
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "usage": {"input_tokens": answer.prompt_tokens,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": answer.completion_tokens,
                  "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": answer.prompt_tokens + answer.completion_tokens}
        if done else None,
    }


def _item_events(event: Any, index: int, item: dict[str, Any]) -> Iterator[bytes]:
    """The events of one output item, from ``output_item.added`` to ``output_item.done``."""
    kind, item_id = item["type"], item["id"]
    if kind == "message":
        text = item["content"][0]["text"]
        yield event("response.output_item.added", output_index=index,
                    item={**item, "status": "in_progress", "content": []})
        empty = {"type": "output_text", "text": "", "annotations": []}
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        yield event("response.content_part.added", **where, part=empty)
        if text:
            yield event("response.output_text.delta", **where, delta=text, logprobs=[])
        yield event("response.output_text.done", **where, text=text, logprobs=[])
        yield event("response.content_part.done", **where, part=item["content"][0])
    elif kind == "function_call":
        yield event("response.output_item.added", output_index=index,
                    item={**item, "status": "in_progress", "arguments": ""})
        where = {"item_id": item_id, "output_index": index}
        yield event("response.function_call_arguments.delta", **where, delta=item["arguments"])
        yield event("response.function_call_arguments.done", **where, name=item["name"],
                    arguments=item["arguments"])
    else:  # custom_tool_call
        yield event("response.output_item.added", output_index=index,
                    item={**item, "status": "in_progress", "input": ""})
        where = {"item_id": item_id, "output_index": index}
        yield event("response.custom_tool_call_input.delta", **where, delta=item["input"])
        yield event("response.custom_tool_call_input.done", **where, input=item["input"])
    yield event("response.output_item.done", output_index=index, item=item)
