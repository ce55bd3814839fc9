"""The agent loop of a household game: the forward pass of a policy that acts one command per
turn until the game is won or the step limit is reached.

The loop itself is :func:`skillgrad.envs.episode.run_turns`; this module is the game's step
function and protocol. A game has no final answer (an episode ends on the engine's ``won``,
not on an ``ANSWER:``), and the text protocol is ALFWorld's plain command per reply rather than
``ACTION: tool {json}``. The conventions are those of every acting environment: the skill is
the first thing of the system message, an agent's malformed reply is an observation that says
so, and a model failure propagates.

History: every turn is kept in the trajectory, but the prompt holds the game intro (with the
goal) plus at most ``history_turns`` recent turns. When the window is full the oldest half is
dropped at once, so between trims the prompt only grows at its end and a backend keeps reusing
its processed prefix.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from skillgrad.envs.episode import Turn, one_action_turn, run_turns, system_prompt
from skillgrad.envs.household.engine import INVALID_FEEDBACK, Game, Observation
from skillgrad.envs.household.progress import Test, level
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Completion, Message, Usage

Mode = Literal["text", "native"]
_PREFIX = re.compile(r"^(?:\**\s*(?:action|command)\s*\**\s*:\s*|>\s*)", re.IGNORECASE)
_THINK = re.compile(r"^\**\s*think\s*\**\s*:", re.IGNORECASE)
_ACT_JSON = re.compile(r"^act\s*(\{.*\})\s*$", re.IGNORECASE)
_PUT = re.compile(r"^put (.+?) (?:in|on|into|onto|in/on) (.+)$")
ACT_TOOL: dict[str, Any] = {"type": "function", "function": {
    "name": "act", "description": "Send one command to the game; returns what happens.",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                   "required": ["command"]}}}


@dataclass(frozen=True)
class Settings:
    mode: Mode = "text"
    max_steps: int = 30
    show_admissible: bool = True
    history_turns: int = 12
    max_tokens: int | None = 48
    temperature: float | None = 0.0


@dataclass(frozen=True)
class Step:
    """One turn: the raw reply, the command read from it, the game's answer."""

    reply: str
    command: str
    feedback: str
    valid: bool
    thought: bool = False


@dataclass
class Playthrough:
    """A finished game. ``best_level`` is the furthest milestone any state reached."""

    messages: list[Message] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    won: bool = False
    best_level: int = 0
    usage: Usage = Usage()
    trimmed_turns: int = 0


def protocol(settings: Settings) -> str:
    """How to play, told after the skill in the system message."""
    how = ('call the act tool with exactly one command' if settings.mode == "native" else
           "reply with exactly one command and nothing else")
    lines = ["## How to play", "",
             f"You are playing a text game in a household. Each turn, {how} "
             "(for example: go to fridge 1). The game answers with what happened. "
             f"The game ends when the task is done or after {settings.max_steps} turns."]
    if settings.mode == "text":
        lines.append('You may instead reply "think: <your plan>"; it uses a turn.')
    if settings.show_admissible:
        lines.append("Each observation lists the admissible commands; use one of them exactly.")
    return "\n".join(lines)


def parse_command(reply: str) -> tuple[str, bool]:
    """The command in a text reply and whether it is a thought. Takes the first non-empty line
    and tolerates ``ACTION:``, ``>``, quotes, a trailing period and ``act {"command": ...}``."""
    for raw in reply.splitlines():
        line = raw.strip().strip("`").strip()
        if not line:
            continue
        if _THINK.match(line):
            return line, True
        line = _PREFIX.sub("", line).strip()
        as_json = _ACT_JSON.match(line)
        if as_json is not None:
            try:
                line = str(json.loads(as_json.group(1)).get("command", ""))
            except (json.JSONDecodeError, AttributeError):
                return "", False
        line = line.strip().strip("\"'`").strip().rstrip(".").strip()
        return " ".join(line.lower().split()), False
    return "", False


def resolve(command: str, admissible: Sequence[str]) -> str:
    """Map a near-miss to the engine's form: ``put X in Y`` is ALFWorld's ``move X to Y``."""
    if command in admissible:
        return command
    put = _PUT.match(command)
    if put is not None and f"move {put.group(1)} to {put.group(2)}" in admissible:
        return f"move {put.group(1)} to {put.group(2)}"
    return command


def observation_text(obs: Observation, settings: Settings) -> str:
    if not settings.show_admissible or obs.won:
        return obs.feedback
    return f"{obs.feedback}\nAdmissible commands: {', '.join(obs.admissible)}"


def play(model: ChatModel, skill: str, game: Game, milestones: list[tuple[str, Test]],
         settings: Settings) -> Playthrough:
    """Play ``game`` with ``model`` under ``skill`` until won or ``settings.max_steps`` turns."""
    system = Message(role="system", content=system_prompt(skill, protocol(settings)))
    obs = game.reset()
    out = Playthrough(best_level=level(milestones, obs))

    def step(completion: Completion) -> Turn:
        nonlocal obs
        played, obs, turn = _take_turn(game, obs, completion, settings)
        out.steps.append(played)
        out.best_level = max(out.best_level, level(milestones, obs))
        out.won = obs.won
        return turn

    transcript = run_turns(
        model, system, Message(role="user", content=observation_text(obs, settings)), step,
        max_turns=settings.max_steps, history_turns=settings.history_turns,
        tools=(ACT_TOOL,) if settings.mode == "native" else None,
        max_tokens=settings.max_tokens, temperature=settings.temperature, done=obs.won)
    out.messages, out.usage = transcript.messages, transcript.usage
    out.trimmed_turns = transcript.trimmed_turns
    return out


def _take_turn(game: Game, obs: Observation, completion: Completion,
               settings: Settings) -> tuple[Step, Observation, Turn]:
    calls = (completion.tool_calls or []) if settings.mode == "native" else []
    if calls:
        command, problem = _native_command(calls[0])
        thought = False
    else:
        (command, thought), problem = parse_command(completion.text), ""
    if thought:
        feedback, valid = "OK.", True
    elif problem:
        feedback, valid = problem, False
    else:
        command = resolve(command, obs.admissible)
        if command:
            obs = game.step(command)
        feedback = obs.feedback if command else INVALID_FEEDBACK
        valid = bool(command) and feedback != INVALID_FEEDBACK
    text = observation_text(Observation(feedback, obs.admissible, obs.won, obs.facts), settings)
    # Every tool call must be answered; only the first one is played.
    turn = one_action_turn(completion, calls, text, ignored="ignored: one command per turn",
                           done=obs.won)
    return Step(completion.text, command, feedback, valid, thought), obs, turn


def _native_command(call: dict[str, Any]) -> tuple[str, str]:
    function = call.get("function") or {}
    if function.get("name") != "act":
        return "", f"error: there is no tool {function.get('name')!r}; call act(command)"
    raw = function.get("arguments", "{}")
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return "", 'error: the arguments are not valid JSON; call act with {"command": "..."}'
    if not isinstance(arguments, dict) or not isinstance(arguments.get("command"), str):
        return "", 'error: missing command; call act with {"command": "..."}'
    return " ".join(arguments["command"].lower().split()).rstrip("."), ""
