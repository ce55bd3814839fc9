"""Rewrite updates: the optimizer writes a whole new skill instead of bounded edits.

Two modes use this module. ``rewrite_from_suggestions``: the analysts' typed revision
suggestions are folded, ranked and cut to the step's budget (``selection``), and one call
rewrites the document to carry out the kept ones. ``full_rewrite_minibatch``: every minibatch
proposes a complete document (``reflect.propose_document``); the candidates compete on the
selection split and the best goes to the gate.

Protected blocks are frozen: the rewrite is asked for the text outside them (the blocks are
listed for reference) and they are put back after it verbatim, so a rewrite never has to copy
markers, which small models do badly. A reply that writes blocks anyway must reproduce all of
them exactly. A rewrite that was cut off by the token limit, is empty, is identical to the
current skill, or drops, alters or adds a protected block is refused before any rollout, and
the reason is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from skillgrad import prompts
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.records import Patch, Suggestion
from skillgrad.skill import body_without_blocks, protected_spans

_WORDS = re.compile(r"[a-z0-9]+")


class DocumentReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    document: str


@dataclass(frozen=True)
class RewriteResult:
    """A rewrite's outcome: the new document, or ``None`` and why it was refused."""

    document: str | None
    error: str | None = None
    raw: str | None = None


def ask_document(
    model: ChatModel, prompt: str, *, kind: str, max_tokens: int | None, temperature: float | None
) -> RewriteResult:
    """Ask for a whole document (as JSON, which a grammar-constrained model cannot wrap in
    chatter or follow with an echo of the instructions); never raises on a bad reply."""
    reply = ask_json(model, [Message(role="user", content=prompt)], DocumentReply, kind=kind,
                     max_tokens=max_tokens, temperature=temperature)
    if reply.value is None:
        error = reply.error or "no document"
        if "cut off" in error:
            error = "rewrite was cut off at the token limit"
        return RewriteResult(None, error, reply.raw)
    document = _untag(reply.value.document).strip("\n")
    if not document.strip():
        return RewriteResult(None, "rewrite is empty", reply.raw)
    return RewriteResult(document + "\n", None, reply.raw)


def _untag(document: str) -> str:
    """The document without the <skill> tags the prompt shows it in (models copy them)."""
    text = document.strip()
    if text.lower().startswith("<skill>") and text.lower().endswith("</skill>"):
        return text[len("<skill>") : -len("</skill>")]
    return document


def check_protected(old: str, new: str) -> str | None:
    """Why ``new`` may not replace ``old`` because of its protected blocks, or ``None``."""
    before = [(b.name, old[b.start : b.end]) for b in protected_spans(old)]
    after = [(b.name, new[b.start : b.end]) for b in protected_spans(new)]
    if before == after:
        return None
    names_before = [n for n, _ in before]
    names_after = [n for n, _ in after]
    dropped = [n for n in names_before if n not in names_after]
    if dropped:
        return f"rewrite drops protected block {', '.join(dropped)}"
    added = [n for n in names_after if n not in names_before]
    if added:
        return f"rewrite adds protected block {', '.join(added)}"
    changed = [n for (n, text) in before if (n, text) not in after]
    if changed:
        return f"rewrite alters protected block {', '.join(changed)}"
    return "rewrite changes the number or order of protected blocks"


def settle(old: str, document: str | None, error: str | None) -> tuple[str | None, str | None]:
    """(the candidate a rewrite reply makes, or ``None`` and why it is refused before the gate).

    A reply without protected blocks is the text outside them: the old skill's blocks are put
    back after it, verbatim and in order. A reply with blocks must reproduce every one."""
    if document is None:
        return None, error or "no document"
    blocks = protected_spans(old)
    if blocks and not protected_spans(document):
        frozen = "\n\n".join(old[b.start : b.end] for b in blocks)
        document = f"{document.rstrip()}\n\n{frozen}\n"
    problem = check_protected(old, document)
    if problem is None and document == old:
        problem = "rewrite is identical to the current skill"
    return (None, problem) if problem else (document, None)


def prompt_parts(skill: str) -> tuple[str, str]:
    """The text a rewrite works on and the protected blocks it is shown for reference."""
    blocks = protected_spans(skill)
    if not blocks:
        return skill.strip("\n"), ""
    listed = "\n\n".join(skill[b.start : b.end] for b in blocks)
    return (body_without_blocks(skill).strip("\n"),
            f"\n## Protected blocks (added back after your text unchanged; do not repeat)\n"
            f"{listed}\n")


def fold_suggestions(patches: Sequence[Patch]) -> tuple[Suggestion, ...]:
    """All suggestions of ``patches``; the same type and wording folded, support summed.
    Failure analysts' suggestions come first (they fix something)."""
    ordered = sorted(patches, key=lambda p: p.source != "failure")
    seen: dict[tuple[str, str], Suggestion] = {}
    for p in ordered:
        for s in p.suggestions:
            key = (s.type, " ".join(_WORDS.findall(s.description.lower())))
            if key in seen:
                seen[key] = seen[key].model_copy(update={"support": seen[key].support + s.support})
            else:
                seen[key] = s
    return tuple(seen.values())


def rewrite_document(
    skill: str,
    suggestions: Sequence[Suggestion],
    model: ChatModel,
    *,
    meta: str = "",
    constraints: str = "",
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> RewriteResult:
    """One call that rewrites ``skill`` to carry out ``suggestions``, checked."""
    body, blocks = prompt_parts(skill)
    listed = "\n".join(f"{n}. {s.type.replace('_', ' ')}: {s.description}"
                       for n, s in enumerate(suggestions, 1))
    text = prompts.render("rewrite", skill=body, blocks=blocks, meta=meta, suggestions=listed,
                          constraints=constraints)
    result = ask_document(model, text, kind="rewrite", max_tokens=max_tokens, temperature=temperature)
    candidate, refusal = settle(skill, result.document, result.error)
    if candidate is None:
        return RewriteResult(None, refusal, result.raw)
    return RewriteResult(candidate, None, result.raw)
