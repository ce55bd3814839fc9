"""The agent loop of a shopping episode: the forward pass of a policy that acts one action per
turn until it buys or runs out of turns.

The loop itself is :func:`skillgrad.envs.episode.run_turns`; this module is the shop's step
function and protocol. Like a household game (and unlike
:func:`skillgrad.envs.tools.run_episode`) an episode has no final answer: it ends at
``Buy Now`` or after ``max_turns`` replies. Two protocols:

* ``text``: the agent replies with one WebShop action, ``search[query]`` or ``click[button]``
  (or ``think[...]``, which uses a turn and changes nothing); the page comes back as a user
  message. A reply is read tolerantly: the first line that is an action, after an
  ``Action:`` prefix, quotes or backticks.
* ``native``: the endpoint's tool calling, with a ``search(query)`` and a ``click(button)``
  tool; only the first call of a reply is played, the others are answered "ignored".

The skill is the first thing of the system message. Every turn is kept in the trajectory; the
prompt holds the first page (with the instruction) and at most ``history_turns`` recent turns,
dropping the oldest half at once when the window is full, so a backend keeps reusing its
processed prefix between trims. An agent's malformed reply is an observation that says so; a
model failure propagates.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from skillgrad.envs.episode import Turn, one_action_turn, run_turns, system_prompt
from skillgrad.envs.webshop.engine import Outcome, Purchase, Shop, parse_action
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Completion, Message, Usage

Mode = Literal["text", "native"]
_PREFIX = re.compile(r"^(?:\**\s*(?:action|next action)\s*\**\s*:\s*|>\s*)", re.IGNORECASE)
_INLINE = re.compile(r"\b(search|click|think)\s*\[([^\]\n]*)\]", re.IGNORECASE)
TOOLS: tuple[dict[str, Any], ...] = (
    {"type": "function", "function": {
        "name": "search", "description": "Search the shop (only on the search page).",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}},
                       "required": ["query"]}}},
    {"type": "function", "function": {
        "name": "click", "description": "Click a button shown in [brackets] on the page.",
        "parameters": {"type": "object", "properties": {"button": {"type": "string"}},
                       "required": ["button"]}}},
)
_NO_ACTION = ("Invalid action: no action found; reply with one action, search[query] or "
              "click[button].")


@dataclass(frozen=True)
class Settings:
    mode: Mode = "text"
    max_turns: int = 15
    history_turns: int = 10
    max_tokens: int | None = 64
    temperature: float | None = 0.0


@dataclass(frozen=True)
class Step:
    """One turn: the raw reply, the action read from it, and what the shop answered."""

    reply: str
    action: str
    observation: str
    valid: bool
    thought: bool = False


@dataclass
class Episode:
    messages: list[Message] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    purchase: Purchase | None = None
    usage: Usage = Usage()
    trimmed_turns: int = 0


def protocol(settings: Settings) -> str:
    """How to shop, told after the skill in the system message."""
    if settings.mode == "native":
        how = ("call the search tool with a query on the search page, or the click tool with "
               "the text of a button")
    else:
        how = ("reply with exactly one action and nothing else: search[your query] on the "
               "search page, or click[button] with the text of a button")
    lines = ["## How to shop", "",
             "You are in a web shop, buying the item an instruction describes. Each turn, "
             f"{how} shown in [brackets] on the current page (a product id, an option value, "
             "Description, Features, Reviews, < Prev, Next >, Back to Search, Buy Now). "
             "The shop answers with the next page. Clicking Buy Now buys the open item with "
             f"the options you selected and ends the episode; you have {settings.max_turns} "
             "turns."]
    if settings.mode == "text":
        lines.append("You may instead reply think[your plan]; it uses a turn.")
    return "\n".join(lines)


def no_action(reply: str, shop: Shop) -> str:
    """What to tell an agent whose text reply holds no action. A reply that is only the text of
    a button of the page, bare or in brackets ("Next >", "[Buy Now]": a slip small models make
    again and again when told just that no action was found), is told how to press it."""
    bare = reply.strip().strip("`").strip()
    if bare.startswith("[") and bare.endswith("]"):
        bare = bare[1:-1].strip()
    button = next((b for b in shop.buttons() if b.lower() == bare.lower()), None) if bare else None
    if button is not None:
        return (f"Invalid action: {button} alone is not an action; to press that button, "
                f"reply click[{button}].")
    return _NO_ACTION


def parse_reply(reply: str) -> str:
    """The action in a text reply (``name[argument]``), or "" when there is none."""
    for raw in reply.splitlines():
        line = _PREFIX.sub("", raw.strip().strip("`").strip()).strip().strip("\"'`").strip()
        parsed = parse_action(line) if line else None
        if (parsed is not None and parsed[0] in ("search", "click", "think")
                and not set(parsed[1]) & set("[]")):  # one action, not two on a line
            return f"{parsed[0]}[{parsed[1]}]"
    inline = _INLINE.search(reply)
    return f"{inline.group(1).lower()}[{inline.group(2).strip()}]" if inline else ""


def native_action(call: dict[str, Any]) -> tuple[str, str]:
    """(action, problem) of one tool call; the action is "" when the call is malformed."""
    function = call.get("function") or {}
    name = function.get("name")
    key = {"search": "query", "click": "button"}.get(str(name))
    if key is None:
        return "", f"Invalid action: there is no tool {name!r}; call search(query) or " \
                   "click(button)."
    raw = function.get("arguments") or "{}"
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        return "", f'Invalid action: the arguments are not valid JSON; call {name} with ' \
                   f'{{"{key}": "..."}}.'
    if not isinstance(arguments, dict) or not isinstance(arguments.get(key), str):
        return "", f'Invalid action: missing {key}; call {name} with {{"{key}": "..."}}.'
    return f"{name}[{arguments[key]}]", ""


def play(model: ChatModel, skill: str, shop: Shop, settings: Settings) -> Episode:
    """Shop with ``model`` under ``skill`` until a purchase or ``settings.max_turns`` turns."""
    out = Episode()

    def step(completion: Completion) -> Turn:
        played, outcome, turn = _take_turn(shop, completion, settings)
        out.steps.append(played)
        out.purchase = outcome.purchase
        return turn

    transcript = run_turns(
        model, Message(role="system", content=system_prompt(skill, protocol(settings))),
        Message(role="user", content=shop.observation()), step,
        max_turns=settings.max_turns, history_turns=settings.history_turns,
        tools=TOOLS if settings.mode == "native" else None,
        max_tokens=settings.max_tokens, temperature=settings.temperature)
    out.messages, out.usage = transcript.messages, transcript.usage
    out.trimmed_turns = transcript.trimmed_turns
    return out


def _take_turn(shop: Shop, completion: Completion,
               settings: Settings) -> tuple[Step, Outcome, Turn]:
    calls = (completion.tool_calls or []) if settings.mode == "native" else []
    if calls:
        action, problem = native_action(calls[0])
    else:
        action = parse_reply(completion.text)
        problem = "" if action else no_action(completion.text, shop)
    thought = action.lower().startswith("think[")
    if thought:
        outcome = Outcome("OK.", True)
    elif problem:
        outcome = Outcome(problem, False)
    else:
        outcome = shop.step(action)
    turn = one_action_turn(completion, calls, outcome.observation,
                           ignored="ignored: one action per turn",
                           done=outcome.purchase is not None)
    step = Step(completion.text, action, outcome.observation, outcome.valid, thought)
    return step, outcome, turn
