"""How the optimizer sees things: trajectories, edits, the rejected buffer and its own notes,
rendered as prompt text. Every stage that writes an optimizer prompt uses these, so the same
thing reads the same way in every call.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from skillgrad.records import Edit, RejectedStep, RolloutResult, Suggestion


def render_trajectories(batch: Sequence[RolloutResult], max_chars: int) -> str:
    return "\n".join(render_trajectory(r, max_chars, n) for n, r in enumerate(batch, 1))


def render_trajectory(result: RolloutResult, max_chars: int, number: int) -> str:
    """A trajectory as the optimizer sees it, without the skill (shown once, above)."""
    lines = []
    for msg in result.messages:
        if msg.role == "system":
            continue
        text = msg.text()
        if msg.tool_calls:
            text += "\n(tool calls: " + ", ".join(str(c) for c in msg.tool_calls) + ")"
        lines.append(f"[{msg.role}] {text}")
    body = clip_middle("\n".join(lines), max_chars)
    # The verdict follows the answer it judges: read in order, the failure explains itself.
    verdict = "solved" if result.success else f"FAILED: {result.reason or 'wrong answer'}"
    return (
        f"### Task {number} (id {result.task_id}; hard {result.hard:.2f}, soft {result.soft:.2f})"
        f"\n{body}\nResult: {verdict}\n"
    )


def clip_middle(text: str, max_chars: int) -> str:
    """Keep the informative head and tail of a long text and say how much was cut."""
    if len(text) <= max_chars:
        return text
    head = int(max_chars * 0.6)
    tail = max_chars - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


def render_rejected(rejected: Sequence[RejectedStep]) -> str:
    if not rejected:
        return ""
    lines = ["", "## Changes already tried this epoch and rejected by validation (do not repeat)"]
    for r in rejected:
        change = "no score" if r.delta is None else f"score change {r.delta:+.3f}"
        why = f"{r.note}; {change}" if r.note else change
        for e in r.edits:
            if isinstance(e, Suggestion):
                lines.append(f"- {e.type}: {e.description!r} ({why})")
            else:
                anchor = f" after/at {e.anchor!r}" if e.anchor else ""
                lines.append(f"- {e.op}{anchor}: {e.content!r} ({why})")
        for text in r.reminders:
            lines.append(f"- reminder: {text!r} ({why})")
        if not r.edits and not r.reminders:
            lines.append(f"- {why}")
    return "\n".join(lines) + "\n"


def render_meta(meta: str) -> str:
    """The optimizer's notes as a prompt section ("" when there are none)."""
    if not meta.strip():
        return ""
    return ("\n## Your notes from earlier epochs (optimizer memory; the agent never sees them)\n"
            f"{meta.strip()}\n")


def render_edits(edits: Sequence[Edit | Suggestion]) -> str:
    out = []
    for n, e in enumerate(edits, 1):
        if isinstance(e, Suggestion):
            out.append(f"{n}. [{e.type}] support {e.support}\n   description: {e.description!r}"
                       + (f"\n   rationale: {e.rationale}" if e.rationale else ""))
            continue
        anchor = f"\n   anchor: {e.anchor!r}" if e.anchor else ""
        out.append(f"{n}. [{e.op}] support {e.support}{anchor}\n   content: {e.content!r}"
                   + (f"\n   rationale: {e.rationale}" if e.rationale else ""))
    return "\n".join(out) if out else "(none)"


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_NUMBER = re.compile(r"(?<![A-Za-z])\d+(?:[.,]\d+)*")


def reason_kind(reason: str) -> str:
    """A failure reason with its particulars (quoted text, numbers) blanked: the kind of
    failure it reports, so that reasons of one kind count together."""
    return " ".join(_NUMBER.sub("N", _QUOTED.sub("'…'", reason)).split())


def render_breakdown(batch: Sequence[RolloutResult], most: int = 5) -> str:
    """How the failures of a minibatch divide into kinds, most common first ("" when they are
    all of one kind or there are fewer than two)."""
    kinds = Counter(reason_kind(r.reason or "wrong answer") for r in batch)
    if len(batch) < 2 or len(kinds) < 2:
        return ""
    lines = [f"- {n} x {kind}" for kind, n in kinds.most_common(most)]
    if len(kinds) > most:
        lines.append(f"- {sum(n for _, n in kinds.most_common()[most:])} x other kinds")
    return "Kinds of failure, most common first:\n" + "\n".join(lines) + "\n\n"
