"""The reminder appendix of skill-aware reflection.

When the skill already states the right rule and the agent did not follow it (an
EXECUTION_LAPSE), editing the body again does not help; a short reminder in a protected block at
the end of the skill does. Reminders are deduplicated (the same words, or nearly the same
sentence); when the appendix grows past a threshold, one optimizer call consolidates it. The
appendix is part of the step's candidate, so it passes the gate like every other change.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from pydantic import BaseModel, ConfigDict

from skillgrad import prompts
from skillgrad.models.ask_json import ask_json, strict_schema
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.records import Patch
from skillgrad.skill import body_without_blocks, get_block, set_block

BLOCK = "APPENDIX"
HEADING = "Reminders (rules you have missed before; follow them):"
SIMILAR = 0.85
_WORDS = re.compile(r"[a-z0-9]+")


class ConsolidateReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    reminders: list[str] = []


@dataclass
class AppendixUpdate:
    """What a step did to the appendix (written to the step folder)."""

    proposed: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    consolidated: bool = False
    dropped: list[str] = field(default_factory=list)
    error: str | None = None


def reminders_of(skill: str) -> list[str]:
    """The reminders in ``skill``'s appendix, in order."""
    content = get_block(skill, BLOCK) or ""
    return [line[2:].strip() for line in content.splitlines() if line.startswith("- ")]


def collect(patches: Sequence[Patch], source: str) -> list[str]:
    """Reminders proposed by the analysts (only failure analysts' with ``failure_only``)."""
    out: list[str] = []
    for p in patches:
        if source == "failure_only" and p.source != "failure":
            continue
        out += [" ".join(r.split()) for r in p.reminders if r.strip()]
    return out


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def is_duplicate(text: str, existing: Sequence[str]) -> bool:
    """The same words, or nearly (word-level similarity; one changed word in a short sentence
    is a different reminder, a dropped article is not)."""
    words = _words(text)
    return any(SequenceMatcher(None, words, _words(e), autojunk=False).ratio() >= SIMILAR
               for e in existing)


def update_appendix(
    skill: str,
    proposed: Sequence[str],
    threshold: int,
    model: ChatModel,
    *,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> tuple[str, AppendixUpdate]:
    """``skill`` with the new, distinct reminders added to its appendix, consolidated by one
    optimizer call when there are more than ``threshold`` (0: never)."""
    report = AppendixUpdate(proposed=list(proposed))
    current = reminders_of(skill)
    merged = list(current)
    for text in proposed:
        if is_duplicate(text, merged):
            report.duplicates.append(text)
        else:
            merged.append(text)
            report.added.append(text)
    if not report.added:
        return skill, report
    if threshold and len(merged) > threshold:
        merged = _consolidate(skill, merged, threshold, model, report, max_tokens, temperature)
    return set_block(skill, BLOCK, render(merged)), report


def render(reminders: Sequence[str]) -> str:
    return "\n".join([HEADING, *(f"- {r}" for r in reminders)])


def _consolidate(
    skill: str, reminders: list[str], limit: int, model: ChatModel, report: AppendixUpdate,
    max_tokens: int | None, temperature: float | None,
) -> list[str]:
    text = prompts.render(
        "consolidate", count=str(len(reminders)), limit=str(limit),
        skill=body_without_blocks(skill).strip(),
        reminders="\n".join(f"- {r}" for r in reminders),
    )
    schema = strict_schema(ConsolidateReply.model_json_schema())
    schema["properties"]["reminders"]["maxItems"] = limit
    reply = ask_json(model, [Message(role="user", content=text)], ConsolidateReply,
                     kind="consolidate", max_tokens=max_tokens, temperature=temperature, schema=schema)
    kept = [" ".join(r.split()) for r in (reply.value.reminders if reply.value else []) if r.strip()]
    if reply.value is None or not kept:
        # Recorded fallback: keep the newest ``limit`` reminders.
        report.error = (f"consolidation reply unusable ({reply.error or 'no reminders'}); "
                        f"kept the newest {limit}")
        report.dropped = reminders[:-limit]
        return reminders[-limit:]
    report.consolidated = True
    kept = kept[:limit]
    report.dropped = [r for r in reminders if not is_duplicate(r, kept)]
    return kept
