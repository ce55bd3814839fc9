"""The environment contract: tasks per split, one rollout, one score.

An environment plays the role of the data set and the loss function. The trainer only ever
calls :meth:`Environment.tasks`, :meth:`Environment.initial_skill` and
:meth:`Environment.rollout`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from skillgrad.models.base import ChatModel
from skillgrad.models.messages import AgentTrace, ChatRequest, Completion, Message
from skillgrad.package import READ_OFFER, split_package
from skillgrad.records import RolloutResult, Task, render_expected

Split = Literal["train", "val", "test"]
SPLITS: tuple[Split, ...] = ("train", "val", "test")


class EnvOptions(BaseModel):
    """Base class of an environment's own config keys (the ``env:`` section minus the common
    keys). Subclasses add fields; unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class EnvCommon(BaseModel):
    """Keys of the ``env:`` section that every environment understands."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = "qa"
    skill_init: Path | None = Field(
        default=None, description=("initial skill: a file, or an Agent Skills folder (SKILL.md "
                                   "and the files beside it); default: the environment's own")
    )
    split_mode: Literal["ratio", "split_dir"] = "ratio"
    split_dir: Path | None = None
    split_ratio: tuple[float, float, float] = (0.6, 0.2, 0.2)
    split_seed: int = 0


@runtime_checkable
class Environment(Protocol):
    """What the trainer needs from an environment.

    Contract:
    * :meth:`tasks` returns the tasks of one split in a stable order; an empty or unreadable
      split raises :class:`~skillgrad.errors.DataError` naming the file and the problem.
    * :meth:`rollout` never raises because the agent got a task wrong: a wrong, empty or
      malformed answer is a scored :class:`RolloutResult` with ``hard``/``soft`` in [0, 1] and a
      ``reason``. Only a systemic fault raises; a model failure
      (:class:`~skillgrad.errors.ModelError`) propagates untouched so it is never scored.
    * The skill is the first thing in the target's prompt (the system message), so a backend
      can reuse the processed prefix across one skill version's tasks.
    """

    def tasks(self, split: Split) -> list[Task]: ...

    def initial_skill(self) -> str: ...

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult: ...


class EnvironmentFactory(Protocol):
    """What the registry finds under the ``skillgrad.environments`` entry point: a class (or
    callable) with an ``Options`` model and a ``create`` constructor."""

    Options: ClassVar[type[EnvOptions]]

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> Environment: ...


def single_turn(model: ChatModel, skill: str, content: str | list[dict[str, Any]], *,
                max_tokens: int, temperature: float) -> tuple[Message, Message, Completion]:
    """One call of the target, the skill first (as the system message) and ``content`` as the
    user's: the two messages and the completion. A model failure propagates, never scored."""
    system = Message(role="system", content=skill)
    user = Message(role="user", content=content)
    completion = model.complete(ChatRequest(messages=(system, user), max_tokens=max_tokens,
                                            temperature=temperature))
    return system, user, completion


def traced_rollout(env: Environment, task: Task, skill: str, model: ChatModel) -> RolloutResult:
    """``env.rollout``, with the task's expected answer (``expected``, as a person reads it)
    and what an agent target did put into the result: every environment
    gets its agent's real trajectory (turns, tool calls, outputs, exit codes) after its own
    messages, and ``metadata["agent"]``: whether the skill was loaded, the files changed, the
    model calls and tool calls made. A target that is no agent leaves the result as it is.
    For a skill package whose files the agent could open (an agent target, or the read tool of
    an environment with tools), ``metadata["references_read"]`` says which it opened."""
    recorder = _TraceRecorder(model)
    result = env.rollout(task, skill, recorder)
    if not result.expected:
        result = result.model_copy(update={"expected": render_expected(task.reference)})
    traces = recorder.traces
    messages = result.messages + tuple(m for t in traces for m in t.messages)
    metadata = dict(result.metadata)
    package = split_package(skill)
    offered = any(m.role == "system" and READ_OFFER in m.text() for m in result.messages)
    if package.files and (traces or offered):  # which files it opened: its calls name them
        called = _calls_text(messages)
        metadata["references_read"] = {path: path in called for path in package.files}
    if traces:
        loads = [t.skill_loaded for t in traces if t.skill_loaded is not None]
        metadata["agent"] = {
            "cli": traces[0].agent,
            "placement": traces[0].placement,
            "skill_loaded": any(loads) if loads else None,
            "files_changed": list(dict.fromkeys(f for t in traces for f in t.files_changed)),
            "calls": sum(t.calls for t in traces),
            "tool_calls": sum(len(m.tool_calls or ()) for t in traces for m in t.messages),
        }
    if not traces and metadata == result.metadata:
        return result
    return result.model_copy(update={"messages": messages, "metadata": metadata})


def _calls_text(messages: tuple[Message, ...]) -> str:
    """What the agent's calls said: native tool calls' arguments and text ``ACTION:`` lines."""
    parts = [json.dumps(c, default=str) for m in messages if m.role == "assistant"
             for c in m.tool_calls or ()]
    parts += [line for m in messages if m.role == "assistant"
              for line in m.text().splitlines() if line.strip().upper().startswith("ACTION")]
    return "\n".join(parts)


class _TraceRecorder:
    """The target, keeping the agent traces of the completions it returns (one rollout's)."""

    def __init__(self, model: ChatModel) -> None:
        self._model = model
        self.traces: list[AgentTrace] = []

    def complete(self, request: ChatRequest) -> Completion:
        completion = self._model.complete(request)
        if completion.trace is not None:
            self.traces.append(completion.trace)
        return completion

    def __getattr__(self, name: str) -> Any:  # the target's other attributes, as they are
        return getattr(self._model, name)
