"""Multi-turn rollouts with tools, in the text protocol and in native tool calling (scripted and
over HTTP through the openai_compatible backend)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from skillgrad.envs.tools import Tool, ToolError, run_episode, text_protocol
from skillgrad.errors import FatalModelError, ScriptExhausted
from skillgrad.models.command import CommandBackend, CommandOptions
from skillgrad.models.handoff import HandoffBackend, HandoffOptions
from skillgrad.models.messages import ChatRequest, Completion, Message
from skillgrad.models.openai_compat import OpenAICompatibleBackend, OpenAICompatibleOptions
from skillgrad.models.scripted import ScriptedModel
from skillgrad.testing import FakeOpenAIServer, completion_body

PAGES = {"heron": "The Amber Heron was launched in 1931.", "plover": "The Grey Plover sank."}


def _search(query: str) -> str:
    hits = [text for key, text in PAGES.items() if key in query.lower()]
    if not hits:
        raise ToolError(f"nothing found for {query!r}")
    return "\n".join(hits)


SEARCH = Tool("search", "Search the encyclopedia.",
              {"type": "object", "properties": {"query": {"type": "string"}},
               "required": ["query"]}, _search)
SKILL = "# Research\nSearch before you answer."


def test_text_protocol_acts_observes_and_answers() -> None:
    model = ScriptedModel(['ACTION: search {"query": "Amber Heron"}', "ANSWER: 1931"])
    episode = run_episode(model, SKILL, "When was the Amber Heron launched?", [SEARCH])
    assert episode.answer == "1931" and episode.turns == 2
    assert [(a.tool, a.arguments, a.ok) for a in episode.actions] == [
        ("search", {"query": "Amber Heron"}, True)]
    system = model.calls[0].messages[0].text()
    assert system.startswith(SKILL)  # the skill first: its prefix is reused across tasks
    assert "search(query: string)" in system and "ANSWER:" in system
    second = model.calls[1].messages
    assert second[-1].role == "user" and "launched in 1931" in second[-1].text()
    assert [m.role for m in episode.messages] == ["system", "user", "assistant", "user",
                                                  "assistant"]
    assert model.calls[0].tools is None


@pytest.mark.parametrize(
    ("action", "problem"),
    [
        ('ACTION: search {"query": ', "not valid JSON"),
        ("ACTION: browse {}", "there is no tool 'browse' (tools: search)"),
        ('ACTION: search {"q": "x"}', "missing query"),
        ('ACTION: search {"query": "x", "page": 2}', "unknown argument page"),
        ('ACTION: search ["x"]', "must be a JSON object"),
        ('ACTION: search {"query": "zebra"}', "nothing found for 'zebra'"),
    ],
)
def test_agent_mistakes_are_observations_not_crashes(action: str, problem: str) -> None:
    model = ScriptedModel([action, "ANSWER: unknown"])
    episode = run_episode(model, SKILL, "q", [SEARCH])
    assert episode.answer == "unknown" and not episode.actions[0].ok
    assert problem in episode.actions[0].observation
    assert problem in model.calls[1].messages[-1].text()


def test_a_quote_that_ends_a_string_early_is_pointed_out() -> None:
    """The spreadsheet agent wrote ``"=COUNTIF(A2:A9, "East")"`` three times, each told only
    that the JSON was invalid. It is told where the text broke and how to write a quote inside
    a string; a JSON object cut short is told where, without that hint."""
    bad = 'ACTION: search {"query": "the "Amber Heron" launch"}'
    model = ScriptedModel([bad, 'ACTION: search {"query": "the \\"Amber Heron\\" launch"}',
                           "ANSWER: 1931"])
    episode = run_episode(model, SKILL, "q", [SEARCH])
    told = episode.actions[0].observation
    assert told.startswith('error: the arguments are not valid JSON: write a " inside a text '
                           'value as \\" (a string ended early, right after \'{"query": '
                           '"the "\')')
    assert episode.actions[1].ok and episode.answer == "1931"
    cut = run_episode(ScriptedModel(['ACTION: search {"query": "heron"', "ANSWER: x"]), SKILL,
                      "q", [SEARCH]).actions[0].observation
    assert "right after '{\"query\": \"heron\"'" in cut and "inside a text value" not in cut


@pytest.mark.parametrize(
    ("action", "arguments"),
    [('ACTION: search("heron")', {"query": "heron"}),
     ("ACTION: search (query='heron')", {"query": "heron"})],
)
def test_arguments_written_as_a_call_are_understood(action: str, arguments: dict) -> None:
    model = ScriptedModel([action, "ANSWER: 1931"])
    episode = run_episode(model, SKILL, "q", [SEARCH])
    assert episode.actions[0].arguments == arguments and episode.actions[0].ok


@pytest.mark.parametrize("action", ['ACTION: search("a", "b")', "ACTION: search(open('x'))",
                                    "ACTION: search(**kw)"])
def test_calls_that_are_not_plain_literals_are_mistakes(action: str) -> None:
    episode = run_episode(ScriptedModel([action, "ANSWER: x"]), SKILL, "q", [SEARCH])
    assert not episode.actions[0].ok and "not valid JSON" in episode.actions[0].observation


def test_one_action_runs_per_reply_and_the_agent_is_told_what_did_not() -> None:
    """The protocol asks for one action a reply: a reply with more runs its first, and the
    agent is told that the rest did not run, where they were once dropped unseen."""
    reply = ('I will look both up.\nACTION: search {"query": "heron"}\n'
             'OBSERVATION: (made up by the agent)\nACTION: search {"query": "plover"}\n'
             'ACTION: search {"query": "tern"}')
    model = ScriptedModel([reply, "ANSWER: 1931"])
    episode = run_episode(model, SKILL, "q", [SEARCH])
    assert [a.arguments["query"] for a in episode.actions] == ["heron"]
    assert episode.answer == "1931" and episode.turns == 2
    seen = model.calls[1].messages[-1].text()
    assert seen.startswith("OBSERVATION:\nThe Amber Heron was launched in 1931.\n\n")
    assert seen.endswith("NOT RUN: the 2 more ACTION lines of that reply (one action per "
                         "reply; send the next after you see this result)")


def test_an_answer_in_a_reply_that_acts_is_not_taken_and_the_agent_is_told() -> None:
    model = ScriptedModel(['ACTION: search {"query": "heron"}\nANSWER: 1920', "ANSWER: 1931"])
    episode = run_episode(model, SKILL, "q", [SEARCH])
    assert episode.answer == "1931" and len(episode.actions) == 1
    seen = model.calls[1].messages[-1].text()
    assert "NOT TAKEN: the ANSWER of that reply" in seen and "NOT RUN" not in seen
    alone = ScriptedModel(['ACTION: search {"query": "heron"}', "ANSWER: 1931"])
    run_episode(alone, SKILL, "q", [SEARCH])
    assert alone.calls[1].messages[-1].text() == (
        "OBSERVATION:\nThe Amber Heron was launched in 1931.")  # one action: nothing more


def test_the_turn_limit_ends_an_episode_without_answer() -> None:
    model = ScriptedModel(default='ACTION: search {"query": "heron"}')
    episode = run_episode(model, SKILL, "q", [SEARCH], max_turns=3)
    assert episode.answer is None and episode.turns == 3 and len(episode.actions) == 3
    assert episode.problems == ("no answer within 3 turns",)


def test_an_unmarked_reply_is_the_answer_and_a_marker_on_its_own_line_works() -> None:
    assert run_episode(ScriptedModel(["It was 1931."]), SKILL, "q", [SEARCH]).answer == (
        "It was 1931.")
    assert run_episode(ScriptedModel(["Let me see.\nANSWER:\n1931"]), SKILL, "q",
                       [SEARCH]).answer == "1931"


def test_a_truncated_reply_ends_the_episode() -> None:
    cut = Completion(text='ACTION: search {"que', finish_reason="length")
    episode = run_episode(ScriptedModel([cut]), SKILL, "q", [SEARCH])
    assert episode.truncated and episode.turns == 1


def test_a_model_failure_propagates() -> None:
    with pytest.raises(ScriptExhausted):
        run_episode(ScriptedModel([]), SKILL, "q", [SEARCH])


def _call(name: str, arguments: dict[str, Any], cid: str = "call_1") -> dict[str, Any]:
    return {"id": cid, "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def test_native_tool_calls_get_tool_messages() -> None:
    replies = [Completion(text="", tool_calls=[_call("search", {"query": "heron"}, "c7")]),
               Completion(text="1931")]
    model = ScriptedModel(replies)
    episode = run_episode(model, SKILL, "q", [SEARCH], mode="native")
    assert episode.answer == "1931"
    assert model.calls[0].tools == (SEARCH.openai_spec(),)
    assert model.calls[0].messages[0].text() == SKILL  # no text protocol in native mode
    tool_msg = model.calls[1].messages[-1]
    assert tool_msg.role == "tool" and tool_msg.tool_call_id == "c7"
    assert "1931" in tool_msg.text()


@pytest.mark.parametrize("raw", ["", "  ", None])
def test_native_calls_with_empty_arguments_mean_no_arguments(raw: str | None) -> None:
    clock = Tool("clock", "The time.", {"type": "object", "properties": {}}, lambda: "noon")
    call = {"id": "c1", "type": "function", "function": {"name": "clock", "arguments": raw}}
    wrong = {**call, "function": {"name": "search", "arguments": raw}}
    model = ScriptedModel([Completion(text="", tool_calls=[call, wrong]), Completion(text="x")])
    episode = run_episode(model, SKILL, "q", [SEARCH, clock], mode="native")
    assert episode.actions[0].ok and episode.actions[0].observation == "noon"
    assert not episode.actions[1].ok and "missing query" in episode.actions[1].observation


def test_native_tool_calls_over_http() -> None:
    def responder(body: dict[str, Any]) -> dict[str, Any]:
        last = body["messages"][-1]
        if last["role"] == "tool":
            assert last["tool_call_id"] == "call_9"
            assert body["messages"][-2]["tool_calls"][0]["function"]["name"] == "search"
            return completion_body("1931")
        assert body["tools"][0]["function"]["name"] == "search"
        return completion_body("", tool_calls=[_call("search", {"query": "amber heron"},
                                                     "call_9")])

    with FakeOpenAIServer(responder=responder) as server:
        model = OpenAICompatibleBackend.create(
            OpenAICompatibleOptions(base_url=server.url, model="m"), Path("."))
        episode = run_episode(model, SKILL, "When?", [SEARCH], mode="native")
    assert episode.answer == "1931"
    assert episode.actions[0].arguments == {"query": "amber heron"} and episode.actions[0].ok


def test_protocol_text_names_every_tool() -> None:
    other = Tool("lookup", "Look a word up.", {"type": "object", "properties": {
        "word": {"type": "string"}}}, lambda word: word)
    text = text_protocol([SEARCH, other])
    assert "search(query: string)" in text and "lookup(word: string)" in text


def test_requests_are_plain_chat_requests() -> None:
    model = ScriptedModel(["ANSWER: x"])
    run_episode(model, SKILL, "q", [SEARCH], max_tokens=50, temperature=0.0)
    request: ChatRequest = model.calls[0]
    assert request.max_tokens == 50 and request.temperature == 0.0


def test_backends_without_tool_calling_refuse_tools_instead_of_dropping_them(
        tmp_path: Path, fake_llama: list[dict[str, Any]]) -> None:
    calls = fake_llama  # (the embedded model has tool calling: test_serve_tools.py)
    marker = tmp_path / "ran"
    models = {
        "command backend": CommandBackend.create(CommandOptions(argv=[
            sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x')"]), tmp_path),
        "handoff backend": HandoffBackend.create(HandoffOptions(dir=Path("h")), tmp_path),
    }
    request = ChatRequest(messages=(Message(role="user", content="q"),),
                          tools=(SEARCH.openai_spec(),))
    for who, model in models.items():
        with pytest.raises(FatalModelError, match=f"^{who} has no native tool calling: the "
                           r"request offers tools \(search\)"):
            model.complete(request)
    assert calls == [] and not marker.exists()
    assert not list((tmp_path / "h").rglob("*.json"))  # nothing asked of a person either
