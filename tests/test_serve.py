"""skillgrad serve's four wire formats over real HTTP on 127.0.0.1, against a scripted model:
for each, a first turn the model answers with a tool call and a second turn that carries the
call and its result back, whole and streamed; the exact event sequences the agent CLIs read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from skillgrad.models.client import ModelClient
from skillgrad.models.messages import ChatRequest
from skillgrad.models.scripted import ScriptedModel
from skillgrad.serve.app import create_app, running
from skillgrad.serve.scopes import ClientScopes

SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}},
          "required": ["command"]}
FINAL = "Two files: a.txt and b.txt."


@pytest.fixture
def served() -> Iterator[tuple[str, ScriptedModel]]:
    """A server whose model calls ``shell`` first and answers once it sees a tool result."""
    model = ScriptedModel(rules=[{"when": "[tool]", "reply": FINAL}], default={
        "tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}]})
    with running(create_app(ClientScopes(ModelClient(model, "target")))) as url:
        yield url, model


def sse(text: str) -> list[tuple[str | None, Any]]:
    """(event name, data) of each server-sent event; ``[DONE]`` stays a string."""
    events = []
    for block in text.strip().split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:] if line[6:] == "[DONE]" else json.loads(line[6:])
        events.append((name, data))
    return events


def post(url: str, body: dict[str, Any]) -> httpx.Response:
    response = httpx.post(url, json=body, timeout=10)
    assert response.status_code == 200, response.text
    return response


def assert_second_turn(request: ChatRequest, call_id: str = "call_a") -> None:
    """What the model was asked on the turn after its call: the call and its result."""
    roles = [m.role for m in request.messages]
    assert roles == ["system", "user", "assistant", "tool"], roles
    call = request.messages[2].tool_calls[0]  # type: ignore[index]
    assert call["id"] == call_id and call["function"]["name"] == "shell"
    assert json.loads(call["function"]["arguments"]) == {"command": "ls"}
    assert request.messages[3].tool_call_id == call_id
    assert request.messages[3].text() == "a.txt b.txt"
    assert request.tools == ({"type": "function", "function": {
        "name": "shell", "description": "Run a command.", "parameters": SCHEMA}},)


# ----------------------------------------------------------------------------- chat completions


CHAT_TOOLS = [{"type": "function", "function": {"name": "shell", "description": "Run a command.",
                                                 "parameters": SCHEMA}}]
CHAT_FIRST = [{"role": "system", "content": "You are terse."},
              {"role": "user", "content": [{"type": "text", "text": "List the files."}]}]
CHAT_SECOND = [*CHAT_FIRST,
               {"role": "assistant", "content": None, "tool_calls": [{
                   "id": "call_a", "type": "function",
                   "function": {"name": "shell", "arguments": '{"command": "ls"}'}}]},
               {"role": "tool", "tool_call_id": "call_a", "content": "a.txt b.txt"}]


def test_chat_completions_whole(served: tuple[str, ScriptedModel]) -> None:
    url, model = served
    first = post(f"{url}/v1/chat/completions",
                 {"model": "m", "messages": CHAT_FIRST, "tools": CHAT_TOOLS}).json()
    choice = first["choices"][0]
    assert first["object"] == "chat.completion" and first["model"] == "m"
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "shell", "arguments": '{"command": "ls"}'}
    second = post(f"{url}/v1/chat/completions",
                  {"model": "m", "messages": CHAT_SECOND, "tools": CHAT_TOOLS,
                   "max_tokens": 99, "temperature": 0.2}).json()
    assert second["choices"][0]["message"] == {"role": "assistant", "content": FINAL}
    assert second["choices"][0]["finish_reason"] == "stop"
    assert set(second["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    assert_second_turn(model.calls[-1])
    assert (model.calls[-1].max_tokens, model.calls[-1].temperature) == (99, 0.2)


def test_chat_completions_stream(served: tuple[str, ScriptedModel]) -> None:
    url, _ = served
    body = {"model": "m", "messages": CHAT_FIRST, "tools": CHAT_TOOLS, "stream": True,
            "stream_options": {"include_usage": True}}
    response = post(f"{url}/v1/chat/completions", body)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [data for _, data in sse(response.text)]
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    deltas = [c["choices"][0]["delta"] for c in chunks[:-1]]
    assert deltas[0] == {"role": "assistant", "content": ""}
    first, rest = deltas[1]["tool_calls"][0], deltas[2]["tool_calls"][0]
    assert first["index"] == 0 and first["type"] == "function" and first["id"]
    assert first["function"] == {"name": "shell", "arguments": ""}
    assert rest == {"index": 0, "function": {"arguments": '{"command": "ls"}'}}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0

    text = [d for _, d in sse(post(f"{url}/v1/chat/completions", {
        **body, "messages": CHAT_SECOND, "stream_options": {}}).text)]
    assert [c["choices"][0]["delta"] for c in text[:-2]] == [
        {"role": "assistant", "content": ""}, {"content": FINAL}]
    assert text[-2]["choices"][0]["finish_reason"] == "stop" and text[-1] == "[DONE]"


def test_chat_completions_through_the_openai_sdk(served: tuple[str, ScriptedModel]) -> None:
    import openai

    url, model = served
    client = openai.OpenAI(base_url=f"{url}/r/sdk/v1", api_key="dummy")
    stream = client.chat.completions.create(model="m", messages=CHAT_SECOND,  # type: ignore[arg-type]
                                            tools=CHAT_TOOLS, stream=True)  # type: ignore[arg-type]
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == FINAL
    assert_second_turn(model.calls[-1])


# ----------------------------------------------------------------------------- responses


RESPONSES_TOOLS = [{"type": "function", "name": "shell", "description": "Run a command.",
                    "strict": False, "parameters": SCHEMA},
                   {"type": "web_search", "external_web_access": False}]
RESPONSES_FIRST = [
    {"type": "message", "role": "developer",
     "content": [{"type": "input_text", "text": "You are terse."}]},
    {"type": "message", "role": "user",
     "content": [{"type": "input_text", "text": "List the files."}]}]
RESPONSES_SECOND = [
    *RESPONSES_FIRST,
    {"type": "reasoning", "summary": [], "encrypted_content": None},
    {"type": "function_call", "call_id": "call_a", "name": "shell",
     "arguments": '{"command": "ls"}'},
    {"type": "function_call_output", "call_id": "call_a", "output": "a.txt b.txt"}]
RESPONSE_EVENTS_CALL = [
    "response.created", "response.in_progress", "response.output_item.added",
    "response.function_call_arguments.delta", "response.function_call_arguments.done",
    "response.output_item.done", "response.completed"]
RESPONSE_EVENTS_TEXT = [
    "response.created", "response.in_progress", "response.output_item.added",
    "response.content_part.added", "response.output_text.delta", "response.output_text.done",
    "response.content_part.done", "response.output_item.done", "response.completed"]


def test_responses_whole(served: tuple[str, ScriptedModel]) -> None:
    url, model = served
    first = post(f"{url}/v1/responses", {"model": "m", "input": RESPONSES_FIRST,
                                         "tools": RESPONSES_TOOLS}).json()
    assert first["object"] == "response" and first["status"] == "completed"
    (item,) = first["output"]
    assert item["type"] == "function_call" and item["name"] == "shell"
    assert item["call_id"].startswith("call_") and item["arguments"] == '{"command": "ls"}'
    second = post(f"{url}/v1/responses", {"model": "m", "input": RESPONSES_SECOND,
                                          "tools": RESPONSES_TOOLS,
                                          "max_output_tokens": 50}).json()
    (message,) = second["output"]
    assert message["type"] == "message" and message["role"] == "assistant"
    assert message["content"] == [{"type": "output_text", "text": FINAL, "annotations": []}]
    assert second["usage"]["total_tokens"] == (second["usage"]["input_tokens"]
                                               + second["usage"]["output_tokens"])
    assert_second_turn(model.calls[-1])  # the web_search tool is not the model's to call


def test_responses_stream_is_the_sequence_codex_reads(served: tuple[str, ScriptedModel]) -> None:
    url, _ = served
    body = {"model": "m", "input": RESPONSES_FIRST, "tools": RESPONSES_TOOLS, "stream": True}
    events = sse(post(f"{url}/v1/responses", body).text)
    assert [name for name, _ in events] == RESPONSE_EVENTS_CALL
    assert all(name == data["type"] for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    done = events[-2][1]["item"]
    assert done["type"] == "function_call" and done["name"] == "shell"
    assert done["arguments"] == '{"command": "ls"}' and done["call_id"]
    completed = events[-1][1]["response"]
    assert completed["id"].startswith("resp_") and completed["output"] == [done]
    assert set(completed["usage"]) >= {"input_tokens", "output_tokens", "total_tokens",
                                       "input_tokens_details", "output_tokens_details"}

    events = sse(post(f"{url}/v1/responses", {**body, "input": RESPONSES_SECOND}).text)
    assert [name for name, _ in events] == RESPONSE_EVENTS_TEXT
    assert events[4][1]["delta"] == FINAL
    assert events[-2][1]["item"]["content"][0]["text"] == FINAL


def test_responses_custom_and_namespaced_tools_round_trip() -> None:
    model = ScriptedModel(default={"tool_calls": [
        {"name": "apply_patch", "arguments": {"input": "*** x"}},
        {"name": "spawn", "arguments": {"command": "go"}}]})
    with running(create_app(ClientScopes(ModelClient(model, "target")))) as url:
        _custom_and_namespaced(url, model)


def _custom_and_namespaced(url: str, model: ScriptedModel) -> None:
    tools = [{"type": "custom", "name": "apply_patch", "description": "Edit files.",
              "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
             {"type": "namespace", "name": "agents", "description": "Sub-agents.",
              "tools": [{"type": "function", "name": "spawn", "parameters": SCHEMA}]}]
    out = post(f"{url}/v1/responses", {"model": "m", "input": "patch it", "tools": tools}).json()
    custom, spawned = out["output"]
    assert custom["type"] == "custom_tool_call" and custom["input"] == "*** x"
    assert custom["name"] == "apply_patch" and "call_id" in custom
    assert spawned["type"] == "function_call" and spawned["namespace"] == "agents"
    asked = model.calls[-1].tools
    assert asked is not None and "start: /.+/" in asked[0]["function"]["description"]
    assert asked[0]["function"]["parameters"]["required"] == ["input"]
    history = [{"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch",
                "input": "*** x"},
               {"type": "custom_tool_call_output", "call_id": "c1", "output": "Done."},
               {"type": "function_call", "call_id": "c2", "name": "spawn", "namespace": "agents",
                "arguments": "{}"},
               {"type": "function_call_output", "call_id": "c2",
                "output": [{"type": "input_text", "text": "spawned"}]}]
    post(f"{url}/v1/responses", {"model": "m", "input": history, "tools": tools})
    sent = model.calls[-1].messages
    assert [m.role for m in sent] == ["assistant", "tool", "assistant", "tool"]
    assert json.loads(sent[0].tool_calls[0]["function"]["arguments"]) == {"input": "*** x"}  # type: ignore[index]
    assert sent[2].tool_calls[0]["function"]["name"] == "spawn"  # type: ignore[index]
    assert sent[3].text() == "spawned"


def test_responses_stream_through_the_openai_sdk(served: tuple[str, ScriptedModel]) -> None:
    import openai

    url, _ = served
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="dummy")
    stream = client.responses.create(model="m", input=RESPONSES_FIRST,  # type: ignore[arg-type]
                                     tools=RESPONSES_TOOLS[:1], stream=True)  # type: ignore[arg-type]
    kinds = [event.type for event in stream]
    assert kinds == RESPONSE_EVENTS_CALL


# ----------------------------------------------------------------------------- anthropic


ANTHROPIC_TOOLS = [{"name": "shell", "description": "Run a command.", "input_schema": SCHEMA},
                   {"type": "web_search_20250305", "name": "web_search"}]
ANTHROPIC_FIRST = [{"role": "user", "content": [
    {"type": "text", "text": "List the files.", "cache_control": {"type": "ephemeral"}}]}]
ANTHROPIC_SECOND = [
    *ANTHROPIC_FIRST,
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "ls will do", "signature": "x"},
        {"type": "tool_use", "id": "call_a", "name": "shell", "input": {"command": "ls"}}]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_a",
         "content": [{"type": "text", "text": "a.txt b.txt"}]}]}]
ANTHROPIC_BODY = {"model": "claude-x", "max_tokens": 64000, "tools": ANTHROPIC_TOOLS,
                  "system": [{"type": "text", "text": "You are terse."}],
                  "thinking": {"type": "adaptive"}}


def test_anthropic_messages_whole(served: tuple[str, ScriptedModel]) -> None:
    url, model = served
    first = post(f"{url}/v1/messages?beta=true",
                 {**ANTHROPIC_BODY, "messages": ANTHROPIC_FIRST}).json()
    assert first["type"] == "message" and first["role"] == "assistant"
    assert first["stop_reason"] == "tool_use" and first["model"] == "claude-x"
    (block,) = first["content"]
    assert block["type"] == "tool_use" and block["name"] == "shell"
    assert block["input"] == {"command": "ls"} and block["id"].startswith("call_")
    second = post(f"{url}/v1/messages", {**ANTHROPIC_BODY, "messages": ANTHROPIC_SECOND}).json()
    assert second["content"] == [{"type": "text", "text": FINAL}]
    assert second["stop_reason"] == "end_turn"
    assert set(second["usage"]) >= {"input_tokens", "output_tokens"}
    assert_second_turn(model.calls[-1])


def test_anthropic_stream_is_the_messages_sequence(served: tuple[str, ScriptedModel]) -> None:
    url, _ = served
    body = {**ANTHROPIC_BODY, "messages": ANTHROPIC_FIRST, "stream": True}
    events = sse(post(f"{url}/v1/messages", body).text)
    assert [name for name, _ in events] == [
        "message_start", "ping", "content_block_start", "content_block_delta",
        "content_block_stop", "message_delta", "message_stop"]
    assert all(name == data["type"] for name, data in events)
    start = events[0][1]["message"]
    assert start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] > 0
    block = events[2][1]["content_block"]
    assert block["type"] == "tool_use" and block["input"] == {} and block["name"] == "shell"
    delta = events[3][1]["delta"]
    assert delta["type"] == "input_json_delta" and json.loads(delta["partial_json"]) == {
        "command": "ls"}
    assert events[5][1]["delta"]["stop_reason"] == "tool_use"
    assert events[5][1]["usage"]["output_tokens"] > 0

    events = sse(post(f"{url}/v1/messages", {**body, "messages": ANTHROPIC_SECOND}).text)
    assert events[2][1]["content_block"] == {"type": "text", "text": ""}
    assert events[3][1]["delta"] == {"type": "text_delta", "text": FINAL}
    assert events[5][1]["delta"]["stop_reason"] == "end_turn"


def test_anthropic_system_messages_in_the_list_and_count_tokens(
        served: tuple[str, ScriptedModel]) -> None:
    url, model = served
    messages = [*ANTHROPIC_FIRST, {"role": "system", "content": "Agents: none."},
                {"role": "assistant", "content": "Sure."}, {"role": "user", "content": "Go."}]
    post(f"{url}/v1/messages", {**ANTHROPIC_BODY, "messages": messages})
    assert [m.role for m in model.calls[-1].messages] == [
        "system", "user", "system", "assistant", "user"]
    counted = post(f"{url}/v1/messages/count_tokens",
                   {"model": "claude-x", "messages": ANTHROPIC_SECOND, "tools": ANTHROPIC_TOOLS})
    assert counted.json()["input_tokens"] > 10
    assert model.n_calls == 1  # counting asks no model


# ----------------------------------------------------------------------------- gemini


GEMINI_TOOLS = [{"functionDeclarations": [{"name": "shell", "description": "Run a command.",
                                           "parametersJsonSchema": SCHEMA}]},
                {"googleSearch": {}}]
GEMINI_FIRST = [{"role": "user", "parts": [{"text": "List the files."}]}]
GEMINI_SECOND = [
    *GEMINI_FIRST,
    {"role": "model", "parts": [{"text": "thinking...", "thought": True},
                                {"functionCall": {"id": "call_a", "name": "shell",
                                                  "args": {"command": "ls"}},
                                 "thoughtSignature": "sig"}]},
    {"role": "user", "parts": [{"functionResponse": {"id": "call_a", "name": "shell",
                                                     "response": {"output": "a.txt b.txt"}}}]}]
GEMINI_BODY = {"systemInstruction": {"parts": [{"text": "You are terse."}]},
               "tools": GEMINI_TOOLS,
               "generationConfig": {"temperature": 1, "topP": 0.95,
                                    "thinkingConfig": {"includeThoughts": True}}}


def test_gemini_generate_content_whole(served: tuple[str, ScriptedModel]) -> None:
    url, model = served
    first = post(f"{url}/v1beta/models/gem:generateContent",
                 {**GEMINI_BODY, "contents": GEMINI_FIRST}).json()
    (candidate,) = first["candidates"]
    assert candidate["finishReason"] == "STOP" and candidate["content"]["role"] == "model"
    (part,) = candidate["content"]["parts"]
    assert part["functionCall"]["name"] == "shell"
    assert part["functionCall"]["args"] == {"command": "ls"} and part["functionCall"]["id"]
    assert first["modelVersion"] == "gem"
    second = post(f"{url}/v1beta/models/gem:generateContent",
                  {**GEMINI_BODY, "contents": GEMINI_SECOND}).json()
    assert second["candidates"][0]["content"]["parts"] == [{"text": FINAL}]
    usage = second["usageMetadata"]
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]
    assert_second_turn(model.calls[-1])


def test_gemini_stream_ends_with_finish_reason_and_usage(
        served: tuple[str, ScriptedModel]) -> None:
    url, _ = served
    path = f"{url}/r/g1/v1beta/models/gem:streamGenerateContent?alt=sse"
    events = sse(post(path, {**GEMINI_BODY, "contents": GEMINI_FIRST}).text)
    assert [name for name, _ in events] == [None]  # data-only events
    last = events[-1][1]
    assert last["candidates"][0]["finishReason"] == "STOP" and "usageMetadata" in last
    assert "functionCall" in last["candidates"][0]["content"]["parts"][0]
    events = sse(post(path, {**GEMINI_BODY, "contents": GEMINI_SECOND}).text)
    assert events[-1][1]["candidates"][0]["content"]["parts"] == [{"text": FINAL}]
    without_sse = post(path.replace("?alt=sse", ""), {**GEMINI_BODY, "contents": GEMINI_FIRST})
    assert isinstance(without_sse.json(), list)  # a JSON array of chunks


def test_gemini_calls_without_ids_and_upper_case_schemas(
        served: tuple[str, ScriptedModel]) -> None:
    url, model = served
    contents = [GEMINI_FIRST[0],
                {"role": "model", "parts": [{"functionCall": {"name": "shell",
                                                              "args": {"command": "ls"}}}]},
                {"role": "user", "parts": [{"functionResponse": {
                    "name": "shell", "response": {"output": "a.txt b.txt"}}}]}]
    tools = [{"functionDeclarations": [{"name": "shell", "description": "Run a command.",
                                        "parameters": {"type": "OBJECT", "properties": {
                                            "command": {"type": "STRING"}},
                                            "required": ["command"]}}]}]
    post(f"{url}/v1beta/models/gem:generateContent",
         {**GEMINI_BODY, "tools": tools, "contents": contents})
    sent = model.calls[-1]
    assert_second_turn(sent, call_id=sent.messages[2].tool_calls[0]["id"])  # type: ignore[index]
    counted = post(f"{url}/v1beta/models/gem:countTokens", {"contents": GEMINI_SECOND})
    assert counted.json()["totalTokens"] > 5


def test_a_slow_answer_streams_its_headers_at_once_and_keeps_the_line_alive() -> None:
    """A local model reading an agent's first prompt takes minutes; the client must see
    headers and bytes meanwhile (comments; newlines for Gemini's reader, which takes only
    data lines), then the events as usual."""
    model = ScriptedModel(replies=[FINAL, FINAL], delay=0.5)
    app = create_app(ClientScopes(ModelClient(model, "target")), keepalive=0.05)
    with running(app) as url:
        chat = post(f"{url}/v1/chat/completions", {"model": "m", "stream": True,
                                                   "messages": CHAT_FIRST}).text
        gemini = post(f"{url}/v1beta/models/m:streamGenerateContent?alt=sse",
                      {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}).text
    assert chat.startswith(": the model is working\n\n")
    assert [d for _, d in sse(chat.replace(": the model is working\n\n", ""))][-1] == "[DONE]"
    assert gemini.startswith("\n") and gemini.lstrip("\n").startswith("data: ")
    assert FINAL in gemini


def test_an_agent_s_turns_past_the_limit_end_its_loop() -> None:
    """A small model can repeat one tool call until its time runs out: past --max-calls
    turns of one rollout tag, the answer is words that stop the agent, not the model's."""
    model = ScriptedModel(default={"tool_calls": [{"name": "shell",
                                                   "arguments": {"command": "ls"}}]})
    app = create_app(ClientScopes(ModelClient(model, "target")), max_calls=2)
    body = {"model": "m", "messages": CHAT_FIRST, "tools": CHAT_TOOLS}
    with running(app) as url:
        replies = [post(f"{url}/r/t1/v1/chat/completions", body).json()["choices"][0]
                   for _ in range(3)]
        other = post(f"{url}/r/t2/v1/chat/completions", body).json()["choices"][0]
    assert [r["finish_reason"] for r in replies] == ["tool_calls", "tool_calls", "stop"]
    assert replies[2]["message"]["content"].startswith("I stop here: the limit of model calls")
    assert other["finish_reason"] == "tool_calls"
    assert len(model.calls) == 3  # the turn past the limit never reached the model
