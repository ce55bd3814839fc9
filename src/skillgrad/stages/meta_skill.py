"""Meta skill: the optimizer's memory across epochs (the analogue of an optimizer's state, such
as Adam's moments: it shapes later updates but is not part of the weights).

At the end of each epoch but the last, the optimizer rewrites its notes from the epoch's steps
(which edits validation accepted or rejected) and from the longitudinal comparison the slow
update also uses. Later reflect, merge, rank and learning-rate calls read the notes; the target
never does, so they cannot change a score by themselves: only the edits they inform reach the
skill, and those pass the gate.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from skillgrad import prompts
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.records import StepRecord
from skillgrad.stages.slow_update import Pair, count, render_counts, render_pairs

MAX_CHARS = 3000


class NotesReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    reasoning: str = ""
    notes: str = ""


def render_epoch(history: Sequence[StepRecord], epoch: int) -> str:
    """The steps of ``epoch``: decision, score change and the changes tried."""
    lines = []
    for r in history:
        if r.epoch != epoch:
            continue
        gain = ("" if r.candidate_score is None or r.current_score is None
                else f" ({r.candidate_score - r.current_score:+.3f})")
        lines.append(f"- step {r.global_step}: {r.decision}{gain}"
                     + (f"; {r.reason}" if r.reason else ""))
        lines += [f"  tried: {c}" for c in r.changes]
    return "\n".join(lines) or "(no steps)"


def update_notes(
    notes: str,
    history_text: str,
    pairs: Sequence[Pair],
    model: ChatModel,
    *,
    max_chars: int = 4000,
    max_tokens: int | None = None,
    temperature: float | None = None,
) -> tuple[str | None, str | None]:
    """(the new notes, or ``None`` and why the old ones stay)."""
    text = prompts.render(
        "meta_skill", meta=notes.strip() or "(none yet)", history=history_text,
        counts=render_counts(count(pairs)), pairs=render_pairs(pairs, "mixed", max_chars, 4),
    )
    reply = ask_json(model, [Message(role="user", content=text)], NotesReply,
                     kind="meta_skill", max_tokens=max_tokens, temperature=temperature)
    if reply.value is None:
        return None, f"meta-skill reply unusable ({reply.error}); the previous notes stay"
    new = reply.value.notes.strip()
    if not new:
        return None, "the optimizer wrote no notes; the previous notes stay"
    return new[:MAX_CHARS], None
