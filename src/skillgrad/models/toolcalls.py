"""Native tool calls in skillgrad's own terms: the OpenAI-shaped call every backend returns in
:attr:`Completion.tool_calls`, and how a model without a native tool API makes one.

A tool call is ``{"id", "type": "function", "function": {"name", "arguments"}}`` with the
arguments as a JSON string, whichever backend made it: the OpenAI-compatible endpoint returns
it so, the scripted model writes it from a short form (:func:`tool_call`), and the embedded
model is prompted in the Hermes / Qwen convention that its chat template teaches::

    <tool_call>
    {"name": "shell", "arguments": {"command": "ls"}}
    </tool_call>

Those blocks are cut out of its reply and become calls (:func:`split_tool_calls`); so does a
reply that is nothing but such an object for an offered tool, fenced or not (what
Qwen2.5-Coder-1.5B writes instead of the tags, measured on the first call of a test). A chat
template that knows no tools gets the same convention as a system preamble
(:func:`tools_preamble`). Call ids that a model does not give are derived from the request,
so the same request gets the same ids: a journal or recording keyed by a later request (which
carries them in its history) still matches.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import json_repair

from skillgrad.models.messages import ChatRequest, Message

_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCED = re.compile(r"\A\s*(?:```[a-zA-Z]*\s*)?(\{.*\})\s*(?:```)?\s*\Z", re.DOTALL)


def tool_call(name: str, arguments: Any = None, call_id: str | None = None) -> dict[str, Any]:
    """One call in the OpenAI shape; ``arguments`` as an object or a JSON string."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    call: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": text}}
    if call_id:
        call["id"] = call_id
    return call


def normal_call(raw: dict[str, Any]) -> dict[str, Any]:
    """A call given in the OpenAI shape or the short one (``{"name", "arguments", "id"}``)
    in the OpenAI shape."""
    function = raw.get("function")
    if isinstance(function, dict):
        return tool_call(str(function.get("name", "")), function.get("arguments"), raw.get("id"))
    return tool_call(str(raw.get("name", "")), raw.get("arguments", raw.get("args")),
                     raw.get("id"))


def call_ids(request: ChatRequest, count: int) -> list[str]:
    """``count`` call ids derived from ``request`` (the same request, the same ids)."""
    digest = hashlib.sha256(json.dumps(request.identity(), sort_keys=True).encode())
    return [f"call_{digest.hexdigest()[:20]}_{n}" for n in range(count)]


def arguments_object(raw: Any) -> dict[str, Any]:
    """A call's arguments as an object: a JSON string is parsed (tolerantly: models emit
    trailing commas and single quotes); anything that is not an object becomes ``{}``."""
    if isinstance(raw, dict):
        return raw
    if not isinstance(raw, str) or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = json_repair.loads(raw)
    return value if isinstance(value, dict) else {}


def template_message(message: Message) -> dict[str, Any]:
    """``message`` as a chat template reads it: text content, and a call's arguments as an
    object (Hugging Face templates render ``arguments | tojson``)."""
    out: dict[str, Any] = {"role": message.role, "content": message.text()}
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.get("id"), "type": "function",
             "function": {"name": c.get("function", {}).get("name", ""),
                          "arguments": arguments_object(c.get("function", {}).get("arguments"))}}
            for c in message.tool_calls]
    if message.tool_call_id:
        out["tool_call_id"] = message.tool_call_id
    return out


def _bare_call(text: str, request: ChatRequest) -> dict[str, Any] | None:
    """The call a reply makes when it is only ``{"name", "arguments"}`` (fenced or not) and
    names an offered tool; else ``None`` (a JSON answer is not taken for a call)."""
    whole = _FENCED.match(text)
    if whole is None:
        return None
    value = arguments_object(whole.group(1))
    offered = {str((t.get("function") or {}).get("name")) for t in request.tools or ()}
    if value.get("name") not in offered or not isinstance(value.get("arguments"), (dict, str)):
        return None
    return tool_call(str(value["name"]), arguments_object(value["arguments"]))


def tools_preamble(tools: tuple[dict[str, Any], ...]) -> str:
    """The tool convention as a system preamble, for a chat template that renders no tools."""
    specs = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            f"<tools>\n{specs}\n</tools>\n\nFor each function call, return a json object with "
            "function name and arguments within <tool_call></tool_call> XML tags:\n"
            '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
            "</tool_call>")


def split_tool_calls(text: str, request: ChatRequest) -> tuple[str, list[dict[str, Any]]]:
    """The reply ``text`` without its ``<tool_call>`` blocks, and the calls they hold (ids
    from :func:`call_ids`). A block that is not a call (no name) stays in the text."""
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    last = 0
    for match in _BLOCK.finditer(text):
        body = match.group(1).strip()
        value = arguments_object(body) if body.startswith("{") else {}
        name = value.get("name")
        if not isinstance(name, str) or not name:
            continue
        kept.append(text[last:match.start()])
        last = match.end()
        calls.append(tool_call(name, arguments_object(value.get("arguments",
                                                                value.get("parameters")))))
    kept.append(text[last:])
    if not calls:
        call = _bare_call(text, request)
        if call is None:
            return text, []
        kept, calls = [], [call]
    for call, call_id in zip(calls, call_ids(request, len(calls)), strict=True):
        call["id"] = call_id
    return "".join(kept).strip(), calls
