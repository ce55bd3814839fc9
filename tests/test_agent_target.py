"""The agent target's pieces that need no agent CLI: its options, the reply read from a CLI's
output, the served calls of a request, the trace put into every environment's results, the
gate's treatment of a skill the agent never loaded, and what reflection is told."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from skillgrad.envs.base import traced_rollout
from skillgrad.models.agent import AgentOptions, split_front_matter
from skillgrad.models.agent_trace import reply_from_stdout, served_usage
from skillgrad.models.messages import AgentTrace, ChatRequest, Completion, Message, Usage
from skillgrad.records import EvalScore, RolloutResult, Task
from skillgrad.stages.gate import GateRule, decide
from skillgrad.stages.render import render_trajectory
from skillgrad.stages.rollout import score


def test_an_agent_target_needs_exactly_one_loopback_brain() -> None:
    AgentOptions(cli="codex", serve=Path("serve.yaml"))
    AgentOptions(cli="claude", endpoint="unix:/tmp/s.sock")
    AgentOptions(cli="claude", endpoint="http://127.0.0.1:8400", isolate=False)
    with pytest.raises(ValidationError, match="exactly one of serve"):
        AgentOptions(cli="codex")
    with pytest.raises(ValidationError, match="exactly one of serve"):
        AgentOptions(cli="codex", serve=Path("a.yaml"), endpoint="unix:/s")
    with pytest.raises(ValidationError, match="never pointed at a vendor"):
        AgentOptions(cli="codex", endpoint="https://api.openai.com/v1", isolate=False)
    with pytest.raises(ValidationError, match="reaches no TCP port"):
        AgentOptions(cli="codex", endpoint="http://127.0.0.1:8400")
    with pytest.raises(ValidationError, match="tools: false needs serve"):
        AgentOptions(cli="codex", endpoint="unix:/s", tools=False)
    with pytest.raises(ValidationError, match="cli"):
        AgentOptions(cli="cursor", serve=Path("a.yaml"))  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="Extra inputs"):
        AgentOptions(cli="codex", serve=Path("a.yaml"), sandbox="none")  # type: ignore[call-arg]


def test_a_skill_with_front_matter_brings_its_own_trigger() -> None:
    front, body = split_front_matter("---\nname: tidy\ndescription: Use for tidying.\n---\n\n"
                                     "- Run the tests.\n")
    assert front == {"name": "tidy", "description": "Use for tidying."}
    assert body.strip() == "- Run the tests."
    assert split_front_matter("- Run the tests.\n") == ({}, "- Run the tests.\n")


def test_the_reply_is_read_from_each_cli_s_output() -> None:
    codex = "\n".join(json.dumps(e) for e in [
        {"type": "thread.started"},
        {"type": "item.completed", "item": {"type": "command_execution", "command": "ls"}},
        {"type": "item.completed", "item": {"type": "agent_message", "text": " 2 files "}},
        {"type": "turn.completed", "usage": {"input_tokens": 5}}])
    assert reply_from_stdout("codex", "warning: x\n" + codex) == "2 files"
    assert reply_from_stdout("claude", json.dumps({"type": "result", "result": "done"})) == "done"
    assert reply_from_stdout("gemini", json.dumps({"response": "ok", "stats": {}})) == "ok"
    assert reply_from_stdout("opencode", "plain words\n") == "plain words"


def test_a_request_s_served_calls_give_its_calls_and_tokens() -> None:
    calls = [{"completion": {"usage": {"prompt_tokens": 100, "completion_tokens": 7}}},
             {"completion": {"usage": {"prompt_tokens": 120, "completion_tokens": 3}}}]
    assert served_usage(calls) == (2, Usage(prompt_tokens=220, completion_tokens=10))
    assert served_usage([]) == (0, None)


class _Env:
    """An environment of one call, as most are: it knows nothing of agents."""

    def rollout(self, task: Task, skill: str, model: object) -> RolloutResult:
        system, user = Message(role="system", content=skill), Message(role="user",
                                                                     content=task.prompt)
        done = model.complete(ChatRequest(messages=(system, user)))  # type: ignore[attr-defined]
        return RolloutResult(task_id=task.id, messages=(system, user), answer=done.text,
                             hard=0.0, soft=0.0, reason="wrong")


class _Agent:
    def __init__(self, loaded: bool | None) -> None:
        self.loaded = loaded
        self.name = "an agent"

    def complete(self, request: ChatRequest) -> Completion:
        call = {"id": "c1", "type": "function",
                "function": {"name": "Bash", "arguments": "{\"command\": \"ls\"}"}}
        trace = AgentTrace(agent="claude_code", skill_loaded=self.loaded, calls=2,
                           placement="skill",
                           files_changed=("a.py",), messages=(
                               Message(role="assistant", content="", tool_calls=[call]),
                               Message(role="tool", tool_call_id="c1", content="[exit code 0]\na.txt"),
                               Message(role="assistant", content="1 file")))
        return Completion(text="1 file", trace=trace)


def test_every_environment_gets_the_agent_s_own_trajectory() -> None:
    task = Task(id="t1", prompt="How many files?")
    agent = _Agent(loaded=False)
    result = traced_rollout(_Env(), task, "- Count with ls.", agent)  # type: ignore[arg-type]
    roles = [m.role for m in result.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert result.metadata["agent"] == {"cli": "claude_code", "placement": "skill",
                                        "skill_loaded": False,
                                        "files_changed": ["a.py"], "calls": 2,
                                        "tool_calls": 1}
    shown = render_trajectory(result, 4000, 1)
    assert "[exit code 0]" in shown and "never loaded the skill" in shown
    plain = traced_rollout(_Env(), task, "x", _Plain())  # type: ignore[arg-type]
    assert "agent" not in plain.metadata and len(plain.messages) == 2
    assert score([plain], "val", "h").skill_loads is None


class _Plain:
    def complete(self, request: ChatRequest) -> Completion:
        return Completion(text="2")


def _scored(hard: float, loads: tuple[int, int] | None, on_load: bool = True) -> EvalScore:
    return EvalScore(split="val", skill_hash="h", n=4, hard=hard, soft=hard,
                     per_task={f"t{i}": (hard, hard) for i in range(4)}, skill_loads=loads,
                     body_on_load=on_load)


def test_a_candidate_the_agent_never_loaded_is_not_judged_on_its_score() -> None:
    rule = GateRule(metric="hard", test="strict")
    current = _scored(0.25, (2, 4))
    unloaded = decide(_scored(0.75, (0, 4)), current, current, rule)
    assert unloaded.decision == "reject"
    assert "never loaded the candidate skill on the 4 selection tasks" in unloaded.reason
    loaded = decide(_scored(0.75, (1, 4)), current, current, rule)
    assert loaded.decision == "accept_new_best"
    # placed in the memory file too, the body reached the agent anyway: judged on its score
    both = decide(_scored(0.75, (0, 4), on_load=False), current, current, rule)
    assert both.decision == "accept_new_best"
    results = [RolloutResult(task_id=f"t{i}", messages=(), answer="", hard=0, soft=0,
                             metadata={"agent": {"skill_loaded": i < 1}}) for i in range(3)]
    assert score(results, "val", "h").skill_loads == (1, 3)
    assert not score(results, "val", "h").body_on_load


def test_a_workspace_counts_by_its_name_so_a_replay_finds_the_call() -> None:
    def request(folder: str) -> ChatRequest:
        return ChatRequest(messages=(Message(role="user", content="fix it"),), workspace=folder)

    assert request("/tmp/a1/skillgrad-replay-t1-abc").identity() == \
        request("/tmp/b2/skillgrad-replay-t1-abc").identity()
    assert request("/tmp/a1/skillgrad-replay-t1-abc").identity() != \
        request("/tmp/a1/skillgrad-replay-t2-abc").identity()
    assert "workspace" not in ChatRequest(messages=request("x").messages).identity()


class _Reader(_Agent):
    """An agent that loads its skill and opens one file of the package, by a shell read."""

    def complete(self, request: ChatRequest) -> Completion:
        call = {"id": "c1", "type": "function", "function": {
            "name": "exec_command",
            "arguments": "{\"cmd\": \"cat $CODEX_HOME/skills/count/references/count.md\"}"}}
        trace = AgentTrace(agent="codex", skill_loaded=True, calls=2, placement="skill",
                           messages=(Message(role="assistant", content="", tool_calls=[call]),
                                     Message(role="tool", tool_call_id="c1", content="ls"),
                                     Message(role="assistant", content="2 files")))
        return Completion(text="2 files", trace=trace)


def test_which_files_of_a_skill_package_the_agent_read_is_counted_and_shown() -> None:
    """A reference nobody reads is a finding: each rollout records which of the package's
    files the agent opened; a step counts them; reflection, ``show`` and the dashboard say
    it."""
    from skillgrad.cli.runs import reads_line
    from skillgrad.package import join_package
    from skillgrad.stages.rollout import references_read

    skill = join_package("- Count the files.\n", {"references/count.md": "Use ls.\n",
                                                   "references/unused.md": "Never mind.\n"})
    task = Task(id="t1", prompt="How many files?")
    read = traced_rollout(_Env(), task, skill, _Reader(True))  # type: ignore[arg-type]
    assert read.metadata["references_read"] == {"references/count.md": True,
                                                         "references/unused.md": False}
    shown = render_trajectory(read, 4000, 1)
    assert ("Of the skill's other files it read references/count.md; it never opened "
            "references/unused.md.") in shown
    counts = references_read([read, read])
    assert counts == {"rollouts": 2, "references/count.md": 2, "references/unused.md": 0}
    assert reads_line(counts) == ("files of the skill the agent read: references/count.md 2 of "
                                  "2, references/unused.md never")
    single = traced_rollout(_Env(), task, "- Count the files.\n", _Reader(True))  # type: ignore[arg-type]
    assert "references_read" not in single.metadata
    assert references_read([single]) is None
