"""Tool calls from the backends skillgrad serve puts behind the wire formats: the scripted
model (from Python and from a YAML script) and the embedded model (its ``<tool_call>`` blocks,
through a stand-in llama.cpp and, where installed, the real model)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from test_embedded import _real_model_or_skip

from skillgrad.models.embedded import EmbeddedBackend, EmbeddedOptions
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.models.scripted import ScriptedBackend, ScriptedOptions
from skillgrad.models.toolcalls import split_tool_calls

SHELL = {"type": "function", "function": {
    "name": "shell", "description": "Run a shell command and return its output.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}}}
ASK = ChatRequest(messages=(Message(role="system", content="You are a coding agent."),
                            Message(role="user", content="List the files here.")),
                  tools=(SHELL,))


def test_a_scripted_yaml_reply_calls_tools_with_stable_ids(tmp_path: Path) -> None:
    options = ScriptedOptions.model_validate({
        "rules": [{"when": "[tool]", "reply": "two files"}],
        "default": {"text": "Listing.", "tool_calls": [
            {"name": "shell", "arguments": {"command": "ls"}},
            {"name": "shell", "arguments": '{"command": "pwd"}', "id": "mine"}]}})
    model = ScriptedBackend.create(options, tmp_path)
    first = model.complete(ASK)
    assert first.text == "Listing." and first.finish_reason == "tool_calls"
    assert [c["function"] for c in first.tool_calls or []] == [
        {"name": "shell", "arguments": '{"command": "ls"}'},
        {"name": "shell", "arguments": '{"command": "pwd"}'}]
    ids = [c["id"] for c in first.tool_calls or []]
    assert ids[1] == "mine" and ids[0].startswith("call_")
    assert model.complete(ASK).tool_calls == first.tool_calls  # same request, same ids
    result = Message(role="tool", content="a b", tool_call_id=ids[0])
    after = ChatRequest(messages=(*ASK.messages, Message(role="assistant", content="",
                                                         tool_calls=first.tool_calls), result))
    assert model.complete(after).text == "two files"
    # A mapping with other keys is still a JSON reply, as before.
    plain = ScriptedBackend.create(ScriptedOptions(default={"tool_calls": 1, "x": 2}), tmp_path)
    assert json.loads(plain.complete(ASK).text) == {"tool_calls": 1, "x": 2}


def test_tool_call_blocks_are_cut_out_of_a_reply() -> None:
    text = ('I will look.\n<tool_call>\n{"name": "shell", "arguments": {"command": "ls"}}\n'
            "</tool_call>\n<tool_call>{'name': 'shell', 'arguments': {'command': 'pwd',}}")
    rest, calls = split_tool_calls(text, ASK)
    assert rest == "I will look."
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"command": "ls"}, {"command": "pwd"}]  # the second unclosed and sloppy, still read
    assert len({c["id"] for c in calls}) == 2
    assert split_tool_calls("<tool_call>not a call</tool_call>", ASK) == (
        "<tool_call>not a call</tool_call>", [])
    # What the real 1.5B model wrote on a first try: the call as a fenced object, no tags.
    fenced = '```json\n{\n  "name": "shell",\n  "arguments": {\n    "command": "ls -l"\n  }\n}\n```'
    rest, (call,) = split_tool_calls(fenced, ASK)
    assert rest == "" and json.loads(call["function"]["arguments"]) == {"command": "ls -l"}
    for answer in ('{"name": "grep", "arguments": {}}', '{"answer": 4}', 'Use {"name": "shell"}'):
        assert split_tool_calls(answer, ASK) == (answer, [])  # not an offered tool's call


def _stand_in(monkeypatch: pytest.MonkeyPatch, template: str, reply: str) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []

    class Llama:
        metadata = {"tokenizer.chat_template": template}

        def __init__(self, **kwargs: Any) -> None:
            pass

        def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
            calls.append(kwargs)
            return {"choices": [{"message": {"content": reply}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 40, "completion_tokens": 12}}

    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=Llama))
    return calls


@pytest.mark.parametrize("template", ["{% if tools %}{{ tools }}{% endif %}", "{{ messages }}"])
def test_the_embedded_model_offers_tools_and_returns_calls(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, template: str) -> None:
    reply = '<tool_call>\n{"name": "shell", "arguments": {"command": "ls"}}\n</tool_call>'
    seen = _stand_in(monkeypatch, template, reply)
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    model = EmbeddedBackend.create(EmbeddedOptions(model_path=Path("m.gguf")), tmp_path)
    history = ChatRequest(messages=(
        *ASK.messages,
        Message(role="assistant", content="", tool_calls=[{
            "id": "c1", "type": "function",
            "function": {"name": "shell", "arguments": '{"command": "pwd"}'}}]),
        Message(role="tool", content="/work", tool_call_id="c1")), tools=(SHELL,))
    out = model.complete(history)
    assert out.text == "" and out.finish_reason == "tool_calls"
    (call,) = out.tool_calls or []
    assert call["function"] == {"name": "shell", "arguments": '{"command": "ls"}'}
    sent = seen[-1]
    # The history reaches the template as Hugging Face templates read it.
    assert sent["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"command": "pwd"}
    assert sent["messages"][3] == {"role": "tool", "content": "/work", "tool_call_id": "c1"}
    if "tools" in template:  # the template renders the tools itself
        assert sent["tools"] == [SHELL]
        assert sent["messages"][0]["content"] == "You are a coding agent."
    else:  # the convention goes into the system prompt
        assert "tools" not in sent
        assert "<tool_call>" in sent["messages"][0]["content"]
        assert '"name": "shell"' in sent["messages"][0]["content"]
    assert EmbeddedBackend.accepts_tools


def test_the_real_embedded_model_answers_with_a_tool_call() -> None:
    """One call of the real 1.5B model (skipped where it is not installed)."""
    _real_model_or_skip()
    model = EmbeddedBackend.create(EmbeddedOptions(n_ctx=2048), Path("."))
    out = model.complete(ASK.model_copy(update={"max_tokens": 60}))
    assert out.tool_calls, out.text
    assert out.tool_calls[0]["function"]["name"] == "shell"
    assert "ls" in json.loads(out.tool_calls[0]["function"]["arguments"])["command"]
