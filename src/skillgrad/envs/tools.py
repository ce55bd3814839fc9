"""Multi-turn rollouts with tools: the forward pass of an agent that acts before it answers.

An environment declares its tools once (:class:`Tool`: name, description, a JSON schema of the
arguments, and the function that runs them). :func:`run_episode` then lets the target act until
it answers or the turn limit is reached (the loop of :func:`skillgrad.envs.episode.run_turns`,
with this module's step function), in one of two protocols:

* ``native``: the endpoint's own tool calling (OpenAI ``tools``); each call is answered with a
  ``tool`` message carrying the observation.
* ``text``: a plain-text action format for models and harnesses without tool calling (the small
  embedded model included). The protocol is described after the skill in the system message
  (the skill stays first, so its processed prefix is reused), the agent replies
  ``ACTION: name {json arguments}`` (one a reply; further action lines, or an answer, in the
  same reply are reported back as not used) or ``ANSWER: ...``, and observations come back as
  user messages.

Every action and observation is kept in the trajectory. A malformed action, an unknown tool or
bad arguments are the agent's mistakes: they become an observation saying what was wrong, and
the episode goes on. Only a model failure (:class:`~skillgrad.errors.ModelError`) propagates.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from skillgrad.envs.episode import Turn, run_turns
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Completion, Message, Usage
from skillgrad.package import READ_OFFER, READ_TOOL, split_package

ToolMode = Literal["native", "text"]

_ACTION = re.compile(r"^\s*\**ACTION\**:\s*([A-Za-z_][\w.-]*)\s*(.*)$", re.IGNORECASE)
_ANSWER = re.compile(r"^\s*\**(?:FINAL\s+)?ANSWER\**:\s*(.*)$", re.IGNORECASE)


class ToolError(Exception):
    """Raised by a tool for a bad call (wrong arguments, nothing found); the message becomes
    the observation the agent sees."""


@dataclass(frozen=True)
class Tool:
    """One tool an environment offers. ``run(**arguments)`` returns the observation text."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[..., str]

    def openai_spec(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name,
                                                 "description": self.description,
                                                 "parameters": self.parameters}}

    def signature(self) -> str:
        props = self.parameters.get("properties", {})
        args = ", ".join(f"{k}: {v.get('type', 'any')}" for k, v in props.items())
        return f"{self.name}({args})"


@dataclass(frozen=True)
class Action:
    """One tool use of an episode and what it returned."""

    tool: str
    arguments: dict[str, Any]
    observation: str
    ok: bool


@dataclass(frozen=True)
class Episode:
    """A finished multi-turn rollout. ``answer`` is None when none was given in time."""

    messages: tuple[Message, ...]
    answer: str | None
    turns: int
    actions: tuple[Action, ...]
    usage: Usage = Usage()
    truncated: bool = False
    problems: tuple[str, ...] = field(default=())


SkillFiles = Literal["tool", "inline"]


def package_view(skill: str, tools: Sequence[Tool],
                 skill_files: SkillFiles = "tool") -> tuple[str, list[Tool]]:
    """How an agent with tools sees a skill package (``tool``): SKILL.md first, then the other
    files listed by path with one line each, and a tool (:data:`READ_TOOL`) that reads one;
    ``inline``: the package text, every file in it. A single-file skill is left as it is."""
    package = split_package(skill)
    if not package.files or skill_files == "inline":
        return skill, list(tools)
    listing = "".join(f"- {path}: {_first_line(text)}\n" for path, text in package.files.items())
    shown = f"{package.main.rstrip()}\n\n## Files of this skill\n\n{READ_OFFER}\n{listing}"

    def read(path: str) -> str:
        text = package.file(str(path).strip().lstrip("./"))
        if text is None:
            raise ToolError(f"no file {path!r} in the skill (its files: "
                            f"{', '.join(package.paths)})")
        return text

    tool = Tool(READ_TOOL, "Read a file of your skill, by its path.",
                {"type": "object", "properties": {"path": {"type": "string"}},
                 "required": ["path"]}, read)
    return shown, [*tools, tool]


def _first_line(text: str) -> str:
    """A file's first non-blank line, its heading marks taken off (what it is about)."""
    line = next((x.strip() for x in text.splitlines() if x.strip()), "(empty)")
    line = line.lstrip("#").strip()
    return line if len(line) <= 100 else line[:99] + "…"


def text_protocol(tools: Sequence[Tool]) -> str:
    """How the text protocol is explained to the agent, after the skill."""
    lines = ["## Tools", "", "You can use these tools:"]
    for tool in tools:
        lines.append(f"- {tool.signature()}: {tool.description}")
    example = tools[0]
    first = next(iter(example.parameters.get("properties", {})), "arg")
    lines += [
        "",
        "To use a tool, reply with exactly one line and nothing else, for example:",
        f'ACTION: {example.name} {{"{first}": "..."}}',
        "You will see the result and can act again. When you know the answer, reply:",
        "ANSWER: <your answer>",
    ]
    return "\n".join(lines)


def run_episode(
    model: ChatModel,
    skill: str,
    task_prompt: str,
    tools: Sequence[Tool],
    *,
    mode: ToolMode = "text",
    max_turns: int = 6,
    max_tokens: int | None = None,
    temperature: float | None = None,
    skill_files: SkillFiles = "tool",
) -> Episode:
    """Let the target act with ``tools`` until it answers or ``max_turns`` replies were used.
    A skill package is shown as :func:`package_view` makes it (``skill_files``)."""
    skill, tools = package_view(skill, tools, skill_files)
    by_name = {t.name: t for t in tools}
    system = skill if mode == "native" else f"{skill.rstrip()}\n\n{text_protocol(tools)}"
    actions: list[Action] = []
    last = _Step(Message(role="assistant"))

    def step(completion: Completion) -> Turn:
        nonlocal last
        last = (_native_step if mode == "native" else _text_step)(completion, by_name)
        last.truncated = completion.truncated
        actions.extend(last.actions)
        return Turn((last.reply, *last.observations),
                    done=last.answer is not None or completion.truncated)

    # The whole history is shown every turn (no window).
    transcript = run_turns(
        model, Message(role="system", content=system), Message(role="user", content=task_prompt),
        step, max_turns=max_turns, max_tokens=max_tokens, temperature=temperature,
        tools=tuple(t.openai_spec() for t in tools) if mode == "native" else None)
    if transcript.done:
        return Episode(tuple(transcript.messages), last.answer, transcript.turns, tuple(actions),
                       transcript.usage, last.truncated)
    return Episode(tuple(transcript.messages), None, max_turns, tuple(actions), transcript.usage,
                   problems=(f"no answer within {max_turns} turns",))


@dataclass
class _Step:
    reply: Message
    actions: list[Action] = field(default_factory=list)
    observations: list[Message] = field(default_factory=list)
    answer: str | None = None
    truncated: bool = False


def _native_step(completion: Completion, tools: dict[str, Tool]) -> _Step:
    calls = completion.tool_calls or []
    step = _Step(Message(role="assistant", content=completion.text, tool_calls=calls or None))
    if not calls:
        step.answer = completion.text.strip()
        return step
    for n, call in enumerate(calls):
        function = call.get("function") or {}
        action = _execute(tools, str(function.get("name", "")), function.get("arguments", "{}"))
        step.actions.append(action)
        step.observations.append(Message(role="tool", content=action.observation,
                                         tool_call_id=str(call.get("id", f"call_{n}"))))
    return step


def _text_step(completion: Completion, tools: dict[str, Tool]) -> _Step:
    """One text-protocol reply: its first ``ACTION`` or ``ANSWER`` line decides. An action
    runs, and the agent is told of what the same reply held beyond it and was not used (more
    action lines: one action a reply, as the protocol says; an answer: not an answer before
    the result is seen), so nothing it wrote is dropped unseen. A reply with neither is the
    answer."""
    text = completion.text
    step = _Step(Message(role="assistant", content=text))
    lines = text.splitlines()
    for n, line in enumerate(lines):
        action = _ACTION.match(line)
        if action is not None:
            done = _execute(tools, action.group(1), action.group(2).strip() or "{}")
            step.actions.append(done)
            parts = [f"OBSERVATION:\n{done.observation}"]
            rest = lines[n + 1:]
            more = sum(_ACTION.match(x) is not None for x in rest)
            if more:
                parts.append(f"NOT RUN: the {more} more ACTION line{'s' * (more > 1)} of that "
                             "reply (one action per reply; send the next after you see this "
                             "result)")
            if any(_ANSWER.match(x) for x in rest):
                parts.append("NOT TAKEN: the ANSWER of that reply (a reply with an action is "
                             "not an answer; answer once you have seen the result)")
            step.observations.append(Message(role="user", content="\n\n".join(parts)))
            return step
        answer = _ANSWER.match(line)
        if answer is not None:
            rest_text = text[text.index(line) + len(line):].strip()
            step.answer = (answer.group(1) or rest_text).strip()
            return step
    # Neither an action nor a marked answer: the reply is the answer (models often skip the
    # marker); the environment's scorer judges it.
    step.answer = text.strip()
    return step


def _execute(tools: dict[str, Tool], name: str, raw_arguments: Any) -> Action:
    tool = tools.get(name)
    if tool is None:
        known = ", ".join(sorted(tools))
        return Action(name, {}, f"error: there is no tool {name!r} (tools: {known})", ok=False)
    arguments = raw_arguments
    if raw_arguments is None or isinstance(raw_arguments, str) and not raw_arguments.strip():
        arguments = {}  # some endpoints send "" (or nothing) for a call without arguments
    elif isinstance(raw_arguments, str):
        try:
            arguments = json.loads(raw_arguments)
        except json.JSONDecodeError as exc:
            arguments = _call_arguments(tool, raw_arguments)
            if arguments is None:
                return Action(name, {}, f"error: {json_problem(raw_arguments, exc)}",
                              ok=False)
    if not isinstance(arguments, dict):
        return Action(name, {}, "error: the arguments must be a JSON object", ok=False)
    allowed = set(tool.parameters.get("properties", {}))
    missing = [k for k in tool.parameters.get("required", []) if k not in arguments]
    unknown = [k for k in arguments if allowed and k not in allowed]
    if missing or unknown:
        problem = (f"missing {', '.join(missing)}" if missing else
                   f"unknown argument {', '.join(unknown)}")
        return Action(name, arguments, f"error: {problem}; call it as {tool.signature()}",
                      ok=False)
    try:
        return Action(name, arguments, tool.run(**arguments), ok=True)
    except ToolError as exc:
        return Action(name, arguments, f"error: {exc}", ok=False)


def json_problem(raw: str, exc: json.JSONDecodeError) -> str:
    """What is wrong with the arguments ``raw``, for the agent: the decoder's complaint and
    where (the text just before the fault); when a string ended early at a ``"`` the agent
    meant as text (``"=COUNTIF(A2:A9, "East")"``), how to write one inside a string, first,
    where a clipped account of the episode still shows it."""
    before = raw[max(0, exc.pos - 30) : exc.pos]
    where = f"right after {('…' if exc.pos > 30 else '') + before!r}"
    ended_early = (exc.msg.startswith(("Expecting ',' delimiter", "Expecting ':' delimiter"))
                   and before.rstrip().endswith('"') and exc.pos < len(raw)
                   and raw[exc.pos] not in ",:}]")
    if ended_early:
        return ('the arguments are not valid JSON: write a " inside a text value as \\" '
                f"(a string ended early, {where})")
    said = f"{exc.msg}, {where}" if before.strip() else exc.msg
    return f"the arguments are not valid JSON ({said}); write them as a JSON object"


def _call_arguments(tool: Tool, raw: str) -> dict[str, Any] | None:
    """Arguments written as a function call, ``("doc-3", 2)`` or ``(doc="doc-3")``, which
    small models often produce: positional values map to the schema's properties in order.
    Only literals are accepted (``ast.literal_eval``); anything else is None (not a call)."""
    text = raw.strip()
    if not (text.startswith("(") and text.endswith(")")):
        return None
    try:
        call = ast.parse(f"f{text}", mode="eval").body
        if not isinstance(call, ast.Call):
            return None
        names = list(tool.parameters.get("properties", {}))
        if len(call.args) > len(names):
            return None
        arguments = {names[i]: ast.literal_eval(a) for i, a in enumerate(call.args)}
        for keyword in call.keywords:
            if keyword.arg is None:
                return None
            arguments[keyword.arg] = ast.literal_eval(keyword.value)
    except (SyntaxError, ValueError, TypeError):
        return None
    return arguments
