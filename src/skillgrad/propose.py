"""Aggregate, select and update: from the analysts' patches to one candidate skill.

The three update modes differ only here:

* ``patch``: merge the edits (``aggregate``), rank and cut them to the learning rate
  (``selection``), apply them (``update.apply_edits``);
* ``rewrite_from_suggestions``: fold and rank the typed suggestions, cut them to the learning
  rate, and have one call rewrite the document (``rewrite``);
* ``full_rewrite_minibatch``: every minibatch proposed a whole document; the valid ones are
  scored on the selection split and the best becomes the candidate.

With skill-aware reflection the analysts' reminders are added to the protected appendix of the
candidate (``appendix``). Whatever the mode, the trainer's gate decides whether the candidate
becomes the current skill.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from skillgrad import appendix
from skillgrad.aggregate import MergeSettings, aggregate
from skillgrad.models.base import ChatModel
from skillgrad.records import ApplyReport, Edit, EvalScore, Patch, Selection, Suggestion
from skillgrad.rewrite import fold_suggestions, rewrite_document, settle
from skillgrad.selection import SelectSettings, select
from skillgrad.skill import estimate_tokens
from skillgrad.update import apply_edits

ModelFor = Callable[[str], ChatModel]


@dataclass(frozen=True)
class ProposeSettings:
    mode: str = "patch"
    merge: MergeSettings = MergeSettings()
    select: SelectSettings = SelectSettings()
    fuzzy_threshold: float = 0.82
    skill_aware: bool = False
    reminders_from: str = "both"
    consolidate_threshold: int = 8
    meta: str = ""
    constraints: str = ""
    max_tokens: int | None = None
    rewrite_max_tokens: int | None = None
    temperature: float | None = None
    max_skill_tokens: int | None = None


@dataclass
class Proposal:
    """A step's candidate and how it was made. ``refusal`` says why it must not be rolled out
    (a broken rewrite, the size cap); ``files`` are written to the step folder."""

    candidate: str
    refusal: str | None = None
    selection: Selection | None = None
    report: ApplyReport | None = None
    n_proposed: int = 0
    n_applied: int = 0
    n_fuzzy: int = 0
    n_skipped: int = 0
    reminders: tuple[str, ...] = ()
    score: EvalScore | None = None
    files: dict[str, Any] = field(default_factory=dict)

    @property
    def kept(self) -> tuple[Edit | Suggestion, ...]:
        return self.selection.kept if self.selection is not None else ()

    def changes(self) -> tuple[str, ...]:
        """Short descriptions of what the candidate changes (for records and the meta skill)."""
        out = []
        for item in self.kept:
            text = item.description if isinstance(item, Suggestion) else item.content
            head = item.type if isinstance(item, Suggestion) else item.op
            out.append(f"{head}: {_clip(text)}")
        out += [f"reminder: {_clip(r)}" for r in self.reminders]
        if not out and "rewrites.json" in self.files:
            out.append("whole-document rewrite")
        return tuple(out)


def size_refusal(text: str, cap: int | None) -> str | None:
    if cap is None:
        return None
    n = estimate_tokens(text)
    return None if n <= cap else f"over the size cap ({n} > {cap} estimated tokens)"


def size_note(skill: str, cap: int | None) -> str:
    """The analysts' reminder of the size cap (a "- ..." rule line, or "")."""
    if cap is None:
        return ""
    n = estimate_tokens(skill)
    advice = ("It is close to the cap: replace, merge or delete rather than add."
              if n > 0.8 * cap else "Prefer replacing or merging rules over adding overlapping ones.")
    return (f"- Size: the skill is about {n} tokens and a version over {cap} tokens is refused. "
            f"{advice}\n")


def propose_patch(
    skill: str, patches: Sequence[Patch], budget: int, model_for: ModelFor,
    settings: ProposeSettings,
) -> Proposal:
    agg = aggregate(patches, skill, model_for("aggregate"), settings.merge)
    selection = select(agg.merged.edits, budget, skill, model_for("select"), settings.select)
    edits = tuple(e for e in selection.kept if isinstance(e, Edit))
    candidate, report = apply_edits(skill, edits, fuzzy_threshold=settings.fuzzy_threshold)
    proposal = Proposal(
        candidate=candidate, selection=selection, report=report,
        n_proposed=sum(len(p.edits) for p in patches), n_applied=report.count("applied"),
        n_fuzzy=report.count("applied_fuzzy"), n_skipped=report.count("skipped"),
        files={"merged_patch.json": {"merged": agg.merged, "levels": agg.levels},
               "ranked_edits.json": selection, "apply_report.json": report},
    )
    return _finish(proposal, skill, patches, model_for, settings)


def propose_rewrite(
    skill: str, patches: Sequence[Patch], budget: int, model_for: ModelFor,
    settings: ProposeSettings,
) -> Proposal:
    folded = fold_suggestions(patches)
    select_settings = settings.select
    selection = select(folded, budget, skill, model_for("select"), select_settings)
    kept = tuple(s for s in selection.kept if isinstance(s, Suggestion))
    proposal = Proposal(candidate=skill, selection=selection,
                        n_proposed=sum(len(p.suggestions) for p in patches),
                        files={"ranked_suggestions.json": selection})
    if kept:
        result = rewrite_document(
            skill, kept, model_for("rewrite"), meta=settings.meta,
            constraints=settings.constraints, temperature=settings.temperature,
            max_tokens=settings.rewrite_max_tokens or settings.max_tokens)
        proposal.files["rewrite.json"] = {"error": result.error, "raw": result.raw,
                                          "document": result.document}
        if result.document is None:
            proposal.refusal = result.error
        else:
            proposal.candidate, proposal.n_applied = result.document, len(kept)
    return _finish(proposal, skill, patches, model_for, settings)


def propose_full(
    skill: str, patches: Sequence[Patch], evaluate: Callable[[str], EvalScore],
    metric: Callable[[EvalScore, str], float], settings: ProposeSettings,
) -> Proposal:
    """The best valid whole-document candidate by ``metric(score, document)``."""
    rows: list[dict[str, Any]] = []
    best: tuple[float, str, EvalScore] | None = None
    for p in patches:
        document, refusal = settle(skill, p.document, p.error)
        refusal = refusal or size_refusal(document or "", settings.max_skill_tokens)
        row: dict[str, Any] = {"minibatch": p.minibatch, "refused": refusal}
        if refusal is None and document is not None:
            score = evaluate(document)
            value = metric(score, document)
            row.update(skill_hash=score.skill_hash, val=value)
            if best is None or value > best[0]:
                best = (value, document, score)
        rows.append(row)
    files = {"rewrites.json": rows}
    if best is None:
        reasons = "; ".join(sorted({str(r["refused"]) for r in rows})) or "no minibatch"
        return Proposal(candidate=skill, refusal=f"no valid rewrite ({reasons})",
                        n_proposed=len(patches), files=files)
    return Proposal(candidate=best[1], score=best[2], n_proposed=len(patches), n_applied=1,
                    files=files)


def _finish(
    proposal: Proposal, skill: str, patches: Sequence[Patch], model_for: ModelFor,
    settings: ProposeSettings,
) -> Proposal:
    """Add the reminders to the appendix (skill-aware reflection)."""
    if not settings.skill_aware or proposal.refusal is not None:
        return proposal
    proposed = appendix.collect(patches, settings.reminders_from)
    if not proposed:
        return proposal
    candidate, update = appendix.update_appendix(
        proposal.candidate, proposed, settings.consolidate_threshold, model_for("appendix"),
        max_tokens=settings.max_tokens, temperature=settings.temperature)
    proposal.candidate = candidate
    proposal.reminders = tuple(update.added)
    proposal.files["appendix.json"] = update
    return proposal


def _clip(text: str, limit: int = 140) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
