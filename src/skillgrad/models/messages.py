"""What a model is asked and what it answers: the types every backend speaks.

Frozen pydantic models that round-trip through JSON, so a call journal holds exactly what was
sent and received.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Message(_Frozen):
    """One chat message. ``content`` may be a list of parts (text / image) for vision models."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] = ""
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(str(p.get("text", "")) for p in self.content if isinstance(p, dict))


class Usage(_Frozen):
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class ChatRequest(_Frozen):
    """What a model is asked. ``json_schema`` asks for structured output where supported."""

    messages: tuple[Message, ...]
    max_tokens: int | None = None
    temperature: float | None = None
    json_schema: dict[str, Any] | None = None
    tools: tuple[dict[str, Any], ...] | None = None
    stop: tuple[str, ...] | None = None
    # What the call is for: the name of the optimizer prompt (analyst_failure, merge, rank,
    # ...), or None for a task. It labels the call (test doubles route on it) and is not part
    # of its identity: journals, caches and recordings key requests without it.
    kind: str | None = None
    # A folder the call works in (an agent's working copy: a git worktree of the task's
    # repository at its commit); only backends that run a program in a folder take it
    # (``command``, ``agent``).
    workspace: str | None = None

    def identity(self) -> dict[str, Any]:
        """The request as JSON data, without its label: what keys it in a journal or cache.
        A workspace counts by its folder's name alone (environments name it after the task
        and the skill; where it lies is a throwaway detail, so a replay finds the call). No
        workspace is no key at all, so requests made before the field keep their keys."""
        if not self.workspace:
            return self.model_dump(mode="json", exclude={"kind", "workspace"})
        data = self.model_dump(mode="json", exclude={"kind"})
        data["workspace"] = PurePath(self.workspace).name
        return data


class AgentTrace(_Frozen):
    """What an agent target did for one request, read back from its own session log: its
    turns after the request (``assistant`` messages with their tool calls, ``tool`` messages
    with each call's output and exit code), whether it loaded the skill, and the files it
    changed.

    ``skill_loaded`` is None where the skill was only placed in a memory file (which every
    request carries), so loading it was no choice of the agent's; ``calls`` counts the model
    calls the agent made."""

    agent: str
    messages: tuple[Message, ...] = ()
    skill_loaded: bool | None = None
    files_changed: tuple[str, ...] = ()
    calls: int = 0
    placement: str = ""  # skill, instructions or both: where the skill was put


class Completion(_Frozen):
    """What a model answered. ``finish_reason`` is ``"length"`` when the reply was cut off.
    ``trace``: an agent target's own trajectory behind the answer."""

    text: str
    usage: Usage = Usage()
    finish_reason: str = "stop"
    model: str = ""
    tool_calls: list[dict[str, Any]] | None = None
    trace: AgentTrace | None = None

    @property
    def truncated(self) -> bool:
        return self.finish_reason == "length"
