"""Train an agent skill's trigger: the ``description`` in its front matter.

An agent CLI lists its skills by name and description and reads a skill's body only when the
description fits the request at hand, so a body the agent never loads is a parameter with no
gradient: its rules can neither help nor hurt. When the step's rollouts show that the agent
loaded the skill on fewer than half of the tasks where loading was its choice, one optimizer
call rewrites the description from the body and the requests it was not loaded on, and the
candidate carries it to the gate with the step's other changes (the gate's ``never_loaded``
rule refuses a candidate that is still never loaded, so a description cannot pass on a score
that is not the skill's).

It is a parameter group of its own: one line, outside the step's edit budget. The new
description obeys the Agent Skills limits (1-1,024 characters, valid YAML), may not carry a
training item's words into the skill (the same hygiene as every edit), and is applied as a
``replace`` of the description entry, so the apply report and the records show it like any
edit. A skill without front matter has no description to train (the agent backend's
``description`` setting stands in for it): that is said in the step's record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from skillgrad import prompts
from skillgrad.agentskills import MAX_DESCRIPTION, SkillFileError, parse_skill
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.records import Edit, EditOutcome, RolloutResult
from skillgrad.stages.hygiene import Evidence, find_quote
from skillgrad.stages.render import one_line
from skillgrad.stages.rollout import skill_choices
from skillgrad.stages.update import apply_edits

# The load rate under which the description is rewritten.
LOAD_FLOOR = 0.5
_REQUESTS = 6  # unloaded requests shown to the optimizer
_REQUEST_CHARS = 400
_BODY_CHARS = 4000


@dataclass(frozen=True)
class Trigger:
    """What the step did with the description: the ``candidate`` (with it, or as it was),
    ``note`` one phrase for the step record, the ``outcome`` of its ``replace`` edit (None
    when none was tried) and the new ``description`` (None unless it was applied)."""

    candidate: str
    note: str
    outcome: EditOutcome | None = None
    description: str | None = None


class _Description(BaseModel):
    description: str


def retrain_trigger(candidate: str, results: Sequence[RolloutResult], model: ChatModel,
                    evidence: Evidence, *, threshold: float = 0.82,
                    max_tokens: int | None = None, temperature: float | None = None
                    ) -> Trigger | None:
    """The candidate with a new description when the agent loaded the skill on fewer than
    :data:`LOAD_FLOOR` of the step's rollouts where it chose; None when no rollout's agent
    chose (no agent target, or the skill in its memory file) or it loaded often enough."""
    choices = skill_choices(results)
    missed = [r for r, loaded in choices if not loaded]
    loaded, chose = len(choices) - len(missed), len(choices)
    if chose == 0 or loaded >= LOAD_FLOOR * chose:
        return None
    rate = f"loaded {loaded}/{chose}"
    try:
        front, body, head = parse_skill(candidate, "skill")
    except SkillFileError:
        return Trigger(candidate, f"{rate}; not trained: the skill has no front matter, so "
                       "its description is the agent backend's setting")
    entry = _entry(head)
    current = front.get("description")
    if entry is None or not isinstance(current, str):
        return Trigger(candidate, f"{rate}; not trained: the front matter has no description")
    requests = "\n".join(f"- {one_line(_request(r), _REQUEST_CHARS)}"
                         for r in missed[:_REQUESTS])
    text = prompts.render("trigger", skill_name=str(front.get("name") or "skill"),
                          description=current, skill=_head(body.strip("\n")),
                          requests=requests, loaded=str(loaded), chose=str(chose),
                          max_chars=str(MAX_DESCRIPTION))
    reply = ask_json(model, [Message(role="user", content=text)], _Description, kind="trigger",
                     max_tokens=max_tokens or 400, temperature=temperature)
    if reply.value is None:
        return Trigger(candidate, f"{rate}; the optimizer's description could not be used "
                       f"({reply.error})")
    new = " ".join(reply.value.description.split())
    edit = Edit(op="replace", anchor=entry,
                content="description: " + json.dumps(new, ensure_ascii=False))
    quote = find_quote(new, evidence, candidate)
    if quote is not None:
        outcome = EditOutcome(index=0, edit=edit, status="refused", reason=quote.reason())
        return Trigger(candidate, f"{rate}; the new description {quote.reason()}", outcome)
    changed, report = apply_edits(candidate, [edit], fuzzy_threshold=threshold)
    outcome = report.outcomes[0]
    if outcome.status == "skipped":
        return Trigger(candidate, f"{rate}; the new description was skipped: {outcome.reason}",
                       outcome)
    return Trigger(changed, f"{rate}; description rewritten: {one_line(new, 160)}", outcome, new)


def _entry(head: str) -> str | None:
    """The ``description`` entry as written in the front matter ``head`` (its first line and
    any indented lines that continue it)."""
    lines = head.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("description:"):
            end = i + 1
            while end < len(lines) and lines[end][:1] in (" ", "\t"):
                end += 1
            return "\n".join(lines[i:end])
    return None


def _request(result: RolloutResult) -> str:
    """The request the agent was given (the rollout's first user message)."""
    users = [m for m in result.messages if m.role == "user"]
    return users[0].text() if users else result.task_id


def _head(body: str) -> str:
    """The skill's body as the optimizer is shown it: its first :data:`_BODY_CHARS`."""
    return body if len(body) <= _BODY_CHARS else body[: _BODY_CHARS - 1] + "…"
