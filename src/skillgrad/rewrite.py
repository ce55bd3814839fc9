"""Rewrite updates: the optimizer writes a whole new skill instead of bounded edits.

Two modes use this module. ``rewrite_from_suggestions``: the analysts' typed revision
suggestions are folded, ranked and cut to the step's budget (``selection``), and one call
rewrites the document to carry out the kept ones. ``full_rewrite_minibatch``: every minibatch
proposes a complete document (``reflect.propose_document``); the candidates compete on the
selection split and the best goes to the gate.

A large step needs a stronger check than a patch: a rewrite that was cut off by the token
limit, is empty, or drops, alters or adds a protected block is refused before any rollout, and
the reason is recorded.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from skillgrad import prompts
from skillgrad.models.base import ChatModel
from skillgrad.records import ChatRequest, Completion, Message, Patch, Suggestion
from skillgrad.reflect import render_edits
from skillgrad.skill import protected_spans

_TAGGED = re.compile(r"<skill>\s*\n?(.*?)\n?\s*</skill>", re.DOTALL | re.IGNORECASE)
_FENCED = re.compile(r"\A\s*```[a-z]*\s*\n(.*?)\n```\s*\Z", re.DOTALL | re.IGNORECASE)
_WORDS = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class RewriteResult:
    """A rewrite's outcome: the new document, or ``None`` and why it was refused."""

    document: str | None
    error: str | None = None
    raw: str | None = None


def extract_document(completion: Completion) -> tuple[str | None, str | None]:
    """The document in a rewrite reply, or ``(None, reason)``.

    The reply should hold it between ``<skill>`` tags; a reply that is only a fenced block, or
    only the document, is taken as it is."""
    if completion.truncated:
        return None, "rewrite was cut off at the token limit"
    text = completion.text
    tagged = _TAGGED.search(text)
    if tagged:
        document = tagged.group(1)
    elif re.search(r"<skill>", text, re.IGNORECASE):
        return None, "rewrite opens <skill> but never closes it"
    else:
        fenced = _FENCED.match(text)
        document = fenced.group(1) if fenced else text
    document = document.strip("\n")
    if not document.strip():
        return None, "rewrite is empty"
    return document + "\n", None


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


def validate_rewrite(old: str, document: str | None, error: str | None) -> str | None:
    """The reason a proposed document is refused before the gate, or ``None``."""
    if document is None:
        return error or "no document"
    if document == old:
        return "rewrite is identical to the current skill"
    return check_protected(old, document)


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
    text = prompts.render("rewrite", skill=skill, meta=meta, suggestions=render_edits(suggestions),
                          constraints=constraints)
    request = ChatRequest(messages=(Message(role="user", content=text),),
                          max_tokens=max_tokens, temperature=temperature)
    completion = model.complete(request)
    document, error = extract_document(completion)
    refusal = validate_rewrite(skill, document, error)
    if refusal is not None:
        return RewriteResult(None, refusal, completion.text)
    return RewriteResult(document)
