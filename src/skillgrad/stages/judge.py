"""Judge: an outcome-blind reviewer names how each failed episode went wrong, for reflection
(``gradient.failure_judge``).

Each failed rollout's task and the agent's turns, and what it was told back, are read without
the expected result, the score or the scorer's account, and one mode of a fixed list that holds
for any agent is picked (it repeated itself, it answered before doing the work, it broke the way
it was told to act, ...), quoting the agent's words that show it: by count where the episode's
counts establish the mode, else by one optimizer call. The analysts then see each failure's
mode beside its episode, and how many episodes of their batch failed each way: a pattern of
process that the outcome alone does not show. The mode is judged from the agent's behaviour
only, so it cannot leak an expected answer into a rule.

The judgement is kept in the rollout's metadata (``failure_mode``), so the step's
``rollouts.jsonl`` shows it; a judge call that fails is kept there as its error, and that
episode is shown to the analysts without a mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from skillgrad import prompts
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.parallel import fan_out
from skillgrad.records import RolloutResult
from skillgrad.stages.render import FAILURE_MODE, NO_MODE, one_line, render_episode

# Each mode: what the reviewer is told it means. General to any agent, named from what the
# agent did, never from what was expected.
MODES: dict[str, str] = {
    "answered before acting": "it gave its final answer without first doing the work the task "
                              "asks for (no tool used, nothing read or changed)",
    "repeated itself": "it sent the same reply or action again after seeing its result, "
                       "instead of moving on",
    "ignored feedback": "it went on the same way after it was told that an action failed or "
                        "was not run",
    "broke the protocol": "it did not act or reply in the form it was told to use (several "
                          "actions in one reply, an unknown tool, malformed arguments)",
    "stopped early": "it did part of the task, then gave its final answer",
    "misread the task": "it worked on something other than what the task asks",
    "reasoning slip": "it worked on the right thing but made a mistake of logic or calculation",
    "ran out": "it kept going until its turns or its reply length ran out",
    "none visible": "nothing in the episode shows why it failed",
}

ModeName = Literal[
    "answered before acting", "repeated itself", "ignored feedback", "broke the protocol",
    "stopped early", "misread the task", "reasoning slip", "ran out", "none visible",
]


class Judgement(BaseModel):
    mode: ModeName
    evidence: str = ""


REPEATS = 3  # one reply sent this many times in a row, unchanged, is a loop without asking


@dataclass(frozen=True)
class JudgeSettings:
    """``multi_turn``: the environment gives the agent more than one turn (so one reply with no
    tool call is an answer given before any work)."""

    workers: int = 4
    max_episode_chars: int = 4000
    max_tokens: int | None = 100
    temperature: float | None = None
    multi_turn: bool = False


def judge_failures(results: Sequence[RolloutResult], model: ChatModel,
                   settings: JudgeSettings) -> list[RolloutResult]:
    """``results`` in their order, each failed one with its judgement (or the judge's error) in
    its metadata under ``failure_mode``; solved ones as they were."""
    failed = [i for i, r in enumerate(results) if not r.success]

    def run(i: int) -> dict[str, str]:
        return judge_one(results[i], model, settings)

    verdicts = fan_out(run, failed, settings.workers, "judge")
    out = list(results)
    for i, verdict in zip(failed, verdicts, strict=True):
        metadata = {**results[i].metadata, FAILURE_MODE: verdict}
        out[i] = results[i].model_copy(update={"metadata": metadata})
    return out


def judge_one(result: RolloutResult, model: ChatModel, settings: JudgeSettings) -> dict[str, str]:
    """``{"mode", "evidence"}``, or ``{"error"}`` when no usable reply came. A mode the
    episode's counts establish (:func:`counted_mode`) is named without a call; one reviewer
    call names the others."""
    counted = counted_mode(result, settings.multi_turn)
    if counted is not None:
        return counted
    prompt = prompts.render(
        "judge", episode=render_episode(result, settings.max_episode_chars),
        facts=episode_facts(result),
        modes="\n".join(f"- {name}: {meaning}" for name, meaning in MODES.items()))
    reply = ask_json(model, [Message(role="user", content=prompt)], Judgement, kind="judge",
                     max_tokens=settings.max_tokens, temperature=settings.temperature)
    if reply.value is None:
        return {"error": reply.error or "no reply"}
    value: Judgement = reply.value
    quote = one_line(value.evidence.strip().strip('"'), 160)
    # Only the agent's own words pass as evidence: a reviewer's account of the episode is
    # left out (a small model writes one instead of quoting, in any words).
    said = " ".join(" ".join(_said(m).split()) for m in result.messages if m.role == "assistant")
    bare = quote.removesuffix("…")
    shown = value.mode != NO_MODE and bool(bare) and bare in said
    return {"mode": value.mode, "evidence": quote if shown else ""}


def counted_mode(result: RolloutResult, multi_turn: bool) -> dict[str, str] | None:
    """The mode an episode's counts alone establish, quoting the agent: one reply sent
    :data:`REPEATS` or more times in a row is "repeated itself"; in a multi-turn environment,
    a single reply that called no tool is "answered before acting". None otherwise (a small
    reviewer names these less reliably than it counts them)."""
    turns = [m for m in result.messages if m.role == "assistant"]
    replies = [_said(m) for m in turns]
    run, repeated = longest_run(replies)
    if run >= REPEATS:
        return {"mode": "repeated itself", "evidence": _first_line(repeated)}
    if multi_turn and len(turns) == 1 and not turns[0].tool_calls:
        return {"mode": "answered before acting", "evidence": _first_line(replies[0])}
    return None


def _first_line(text: str) -> str:
    return one_line(text.strip().split("\n", 1)[0], 160)


def episode_facts(result: RolloutResult) -> str:
    """What can be counted in an episode without knowing its outcome, one "- ..." line each:
    how many replies the agent sent and how many tools it called, and the longest run of one
    reply sent again unchanged."""
    replies = [_said(m) for m in result.messages if m.role == "assistant"]
    calls = sum(len(m.tool_calls or ()) for m in result.messages if m.role == "assistant")
    lines = [f"- The agent sent {len(replies)} "
             f"{'reply' if len(replies) == 1 else 'replies'} and called tools {calls} times."]
    run, _ = longest_run(replies)
    if run > 1:
        lines.append(f"- It sent one reply {run} times in a row, unchanged.")
    if replies and not replies[-1].strip():
        lines.append("- Its last reply is empty.")
    return "\n".join(lines)


def _said(message: Message) -> str:
    text = message.text().strip()
    if message.tool_calls:
        text += " " + " ".join(str(c) for c in message.tool_calls)
    return text


def longest_run(items: Sequence[str]) -> tuple[int, str]:
    """The length of the longest run of equal neighbours in ``items``, and its item (the first
    such run; ``(0, "")`` when empty)."""
    best, which, run = 0, "", 0
    for i, item in enumerate(items):
        run = run + 1 if i and item == items[i - 1] else 1
        if run > best:
            best, which = run, item
    return best, which
