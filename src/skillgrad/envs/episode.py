"""The multi-turn loop of every acting environment: ask the target, let the environment act on
its reply, show it what happened, until the environment says the episode is over or the turn
limit is reached.

What differs between environments is the step function: given the model's completion it acts
in the world (runs a tool, plays a game command, clicks a button), keeps its own record of what
happened, and returns a :class:`Turn`: the messages of the turn (the reply as recorded, then
what answers it) and whether the episode is over. :func:`run_turns` owns the rest: the
request (the system message first, so a backend reuses its processed prefix), usage, turn
counting and the history window. A model failure propagates.

History window: every turn is kept in the transcript. With ``history_turns`` the prompt holds
the first user message plus at most that many recent turns; when the window is full the oldest
half is dropped at once (the first message then says how many turns are not shown), so between
trims the prompt only grows at its end. ``history_turns=0`` shows every turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from skillgrad.models.base import ChatModel
from skillgrad.models.messages import ChatRequest, Completion, Message, Usage


@dataclass(frozen=True)
class Turn:
    """What a step function returns: the turn's messages and whether the episode is over."""

    messages: tuple[Message, ...]
    done: bool = False


StepFn = Callable[[Completion], Turn]


@dataclass(frozen=True)
class Transcript:
    """A finished loop. ``turns`` counts the model's replies; ``done`` is the last step's
    verdict (False when the turn limit ended it); ``trimmed_turns`` is how many of the first
    turns the last prompt no longer showed."""

    messages: list[Message]
    turns: int
    usage: Usage
    done: bool
    trimmed_turns: int


def system_prompt(skill: str, protocol: str) -> str:
    """The skill first, then how to act in the environment (nothing before it when the skill
    is empty)."""
    return f"{skill.rstrip()}\n\n{protocol}".lstrip()


def run_turns(
    model: ChatModel,
    system: Message,
    first: Message,
    step: StepFn,
    *,
    max_turns: int,
    history_turns: int = 0,
    tools: tuple[dict[str, Any], ...] | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    done: bool = False,
) -> Transcript:
    """Ask ``model`` and play its reply with ``step`` until a step says done or ``max_turns``
    replies were used. ``done=True`` ends it before the first request (an episode already
    over when it starts)."""
    messages = [system, first]
    turns: list[tuple[Message, ...]] = []
    usage = Usage()
    start = 0
    while not done and len(turns) < max_turns:
        if history_turns and len(turns) - start >= history_turns:
            start = len(turns) - max(1, history_turns // 2)
        shown = first if start == 0 else Message(
            role="user", content=f"{first.text()}\n\n[{start} earlier turns are not shown.]")
        request = ChatRequest(
            messages=(system, shown, *(m for t in turns[start:] for m in t)),
            max_tokens=max_tokens, temperature=temperature, tools=tools)
        completion = model.complete(request)
        usage = usage + completion.usage
        turn = step(completion)
        turns.append(turn.messages)
        messages.extend(turn.messages)
        done = turn.done
    return Transcript(messages, len(turns), usage, done, start)


def one_action_turn(completion: Completion, calls: list[dict[str, Any]], observation: str,
                    *, ignored: str, done: bool) -> Turn:
    """The turn of a protocol that plays one action per reply: the reply, then the
    observation, as a user message (text protocol) or as the answer to the first tool call;
    every other call must be answered too, and is answered ``ignored``."""
    reply = Message(role="assistant", content=completion.text, tool_calls=calls or None)
    if calls:
        answers = [Message(role="tool", content=observation if n == 0 else ignored,
                           tool_call_id=str(c.get("id", n))) for n, c in enumerate(calls)]
    else:
        answers = [Message(role="user", content=observation)]
    return Turn((reply, *answers), done)
