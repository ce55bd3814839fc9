"""Structured (JSON) answers from the optimizer model.

The request carries a JSON schema, which backends with structured output enforce. Replies are
still parsed tolerantly (code fences, surrounding prose, small syntax slips), validated against
the expected shape, and, if that fails, the model is asked once more with the parse error shown.
A reply cut off by the token limit is never used.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

from skillgrad.models.base import ChatModel
from skillgrad.models.messages import ChatRequest, Message

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class JsonReply(Generic[T]):
    """``value`` when the reply parsed; otherwise ``error``. ``raw`` is always kept."""

    value: T | None
    raw: str
    error: str | None = None
    attempts: int = 1


def extract_json(text: str) -> object:
    """The JSON object in ``text``, tolerating fences, prose around it and small slips."""
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    if start < 0:
        raise ValueError("the reply contains no JSON object")
    repaired = json_repair.loads(text[start:])
    if not isinstance(repaired, dict) or not repaired:
        raise ValueError("the reply is not a JSON object")
    return repaired


def parse_as(text: str, shape: type[T]) -> T:
    data = extract_json(text)
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "top level"
        raise ValueError(f"{where}: {first['msg']}") from None


def strict_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every property of every object required.

    The shapes parse leniently (missing keys get defaults), but a grammar-constrained model
    only writes what the schema requires; requiring every key makes it fill them all in.
    """
    return _require_all(schema)  # type: ignore[no-any-return]


def _require_all(node: Any) -> Any:
    if isinstance(node, list):
        return [_require_all(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _require_all(v) for k, v in node.items()}
    if out.get("type") == "object" and isinstance(out.get("properties"), dict):
        out["required"] = list(out["properties"])
    return out


def ask_json(
    model: ChatModel,
    messages: list[Message],
    shape: type[T],
    *,
    kind: str,
    max_tokens: int | None = None,
    temperature: float | None = None,
    schema: dict[str, Any] | None = None,
) -> JsonReply[T]:
    """Ask for a JSON object of ``shape``; one repair retry; never raises on a bad reply.

    ``kind`` names the call (its prompt); ``schema`` (default: ``shape``'s, every key required)
    is what the request asks the model for; it may be narrower than ``shape`` (an enum of
    allowed anchors, say)."""
    schema = schema or strict_schema(shape.model_json_schema())
    raw = ""
    error: str | None = None
    for attempt in (1, 2):
        request = ChatRequest(
            messages=tuple(messages), max_tokens=max_tokens, temperature=temperature,
            json_schema=schema, kind=kind,
        )
        completion = model.complete(request)
        raw = completion.text
        if completion.truncated:
            return JsonReply(None, raw, "reply was cut off at the token limit", attempt)
        try:
            return JsonReply(parse_as(raw, shape), raw, None, attempt)
        except ValueError as exc:
            error = f"reply is not valid JSON of the expected shape: {exc}"
        messages = [
            *messages,
            Message(role="assistant", content=raw),
            Message(role="user", content=f"That reply could not be used ({error}). "
                    "Reply again with only the JSON object."),
        ]
    return JsonReply(None, raw, error, 2)
