"""Aggregate, select and update, as the trainer calls them: from the analysts' patches to one
candidate skill, in each update mode.

=========================  ========================  =======================  ==================
mode                       aggregate                 select                   update
=========================  ========================  =======================  ==================
``patch``                  merge the edits           rank, cut to the budget  apply the edits
                           (``aggregate``)           (``select``)             (``update``)
``rewrite_from_            fold the suggestions      rank, cut to the budget  one rewrite call
suggestions``              (``rewrite``)             (``select``)             (``rewrite``)
``full_rewrite_minibatch`` settle each minibatch's   score the valid ones on  adopt the best
                           document (refuse broken   the selection split,
                           ones)                     keep the best
=========================  ========================  =======================  ==================

Before anything is ranked or rolled out, proposals that would carry facts of the training items,
the scorer's feedback or the prompt's scaffolding into the skill are refused (``hygiene``);
update then takes the next ranked edit in place of one that changed nothing. With skill-aware
reflection, update also adds the analysts' reminders to the protected appendix
(``appendix``). Each stage returns a new :class:`Proposal` that carries what the
earlier ones found; whatever the mode, the gate decides whether the candidate is kept.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from skillgrad.models.base import ChatModel
from skillgrad.records import (
    ApplyReport,
    Edit,
    EditOutcome,
    EvalScore,
    Patch,
    Refused,
    RolloutResult,
    Selection,
    Suggestion,
)
from skillgrad.skill import estimate_tokens
from skillgrad.stages import appendix
from skillgrad.stages.aggregate import MergeSettings, aggregate
from skillgrad.stages.hygiene import (
    NO_EVIDENCE,
    REFUSED,
    Evidence,
    added_text,
    clean_items,
    distinct,
    find_quote,
)
from skillgrad.stages.render import one_line
from skillgrad.stages.restated import CONTRADICTS, CUT_TO, cut_to_own, left_out_by_skill
from skillgrad.stages.rewrite import fold_suggestions, rewrite_document, settle
from skillgrad.stages.select import SelectSettings, select
from skillgrad.stages.trigger import retrain_trigger
from skillgrad.stages.update import apply_edits

ModelFor = Callable[[str], ChatModel]
CHANGE_CHARS = 140  # a change as the records and the meta skill show it
Evaluate = Callable[[str], EvalScore]
Metric = Callable[[EvalScore, str], float]

# How the screen marks an added rule it left out (see stages.screen.without_riders).
LEFT_OUT_AT_SCREEN = "left out at the screen: "


@dataclass(frozen=True)
class CandidateSettings:
    mode: str = "patch"
    merge: MergeSettings = MergeSettings()
    select: SelectSettings = SelectSettings()
    fuzzy_threshold: float = 0.82
    scripts: bool = True  # a skill package's scripts/ are editable (the rollouts run them)
    skill_aware: bool = False
    reminders_from: str = "both"
    consolidate_threshold: int = 8
    meta: str = ""
    constraints: str = ""
    max_tokens: int | None = None
    rewrite_max_tokens: int | None = None
    temperature: float | None = None
    max_skill_tokens: int | None = None
    train_description: bool = True


@dataclass(frozen=True)
class Document:
    """One minibatch's whole-document proposal (``full_rewrite_minibatch``)."""

    minibatch: int | None
    text: str | None
    refusal: str | None


@dataclass(frozen=True)
class Proposal:
    """A step's candidate and how it was made, filled in by aggregate, select and update.

    ``items``: the merged edits or suggestions; ``refused``: those hygiene refused, each with
    its reason; ``documents``: whole-document proposals; ``refusal`` says why the candidate
    must not be rolled out (a broken rewrite, the size cap); ``artifacts`` are (kind, data)
    pairs for the step folder."""

    candidate: str
    refusal: str | None = None
    items: tuple[Edit | Suggestion, ...] = ()
    refused: tuple[Refused, ...] = ()
    restated: tuple[str, ...] = ()  # rules analysts left out as said or contradicted (Patch.restated)
    merge_left_out: tuple[str, ...] = ()  # and rules the merge wrote, left out alike
    documents: tuple[Document, ...] = ()
    selection: Selection | None = None
    report: ApplyReport | None = None
    n_proposed: int = 0
    n_applied: int = 0
    n_fuzzy: int = 0
    n_skipped: int = 0
    reminders: tuple[str, ...] = ()
    score: EvalScore | None = None
    chosen: str | None = None
    artifacts: tuple[tuple[str, Any], ...] = ()
    trigger: str = ""  # what the step did with an agent skill's description (stages.trigger)
    description: str | None = None  # the description the candidate gives it, when rewritten

    @property
    def kept(self) -> tuple[Edit | Suggestion, ...]:
        return self.selection.kept if self.selection is not None else ()

    def adding(self, kind: str, data: Any, **changes: Any) -> Proposal:
        """This proposal with one more artifact (and other fields changed)."""
        return replace(self, artifacts=(*self.artifacts, (kind, data)), **changes)

    def unchanged_reason(self) -> str:
        """Why the candidate is the skill it started from, for a skip's reason: no edit was
        proposed, or the edits did not apply (and why: anchor not found, duplicate content)."""
        outcomes = self.report.outcomes if self.report else ()
        skipped = [o for o in outcomes if o.status == "skipped"]
        refused = [o for o in outcomes if o.status == "refused"]
        if not skipped and not refused:
            return "no edit was proposed" if self.n_proposed == 0 else "no change could be applied"
        parts = []
        if refused:
            parts.append(f"{len(refused)} {_edits(refused)} {REFUSED}")
        if skipped:
            reasons = list(dict.fromkeys(o.reason or "no reason given" for o in skipped))
            parts.append(f"{len(skipped)} {_edits(skipped)} skipped: {'; '.join(reasons)}")
        return f"no change could be applied ({'; '.join(parts)})"

    def losses(self) -> tuple[str, ...]:
        """Where proposals were lost, or put back, on the way to the candidate: one phrase
        per stage (the analysts' and the aggregate's hygiene, the merge, the update)."""
        out = []
        whole = sum(not r.repaired for r in self.refused)
        if whole:
            out.append(f"hygiene refused {whole}")
        if len(self.refused) > whole:  # a part given the task's form, or a word dropped
            out.append(f"hygiene reworded {len(self.refused) - whole}")
        cut = sum(f" {CUT_TO} " in line for line in self.restated)
        against = sum(f" {CONTRADICTS} the skill's " in line for line in self.restated)
        said = [f"{n} {what}" for n, what in (
            (len(self.restated) - against - cut, "restating a kept rule or the skill"),
            (against, "contradicting the skill")) if n]
        if said:
            out.append(f"analysts: {' and '.join(said)} left out")
        if cut:
            out.append(f"analysts: {cut} cut to the clauses the skill lacks")
        merged = dict(self.artifacts).get("merged_patch")
        repaired = merged["merged"].repaired if isinstance(merged, dict) else ()
        if repaired:
            out.append(f"merge: {len(repaired)} put back")
        merge_cut = sum(f" {CUT_TO} " in line for line in self.merge_left_out)
        if len(self.merge_left_out) > merge_cut:
            out.append(f"merge: {len(self.merge_left_out) - merge_cut} restating or "
                       "contradicting the skill left out")
        if merge_cut:
            out.append(f"merge: {merge_cut} cut to the clauses the skill lacks")
        skipped = [o for o in (self.report.outcomes if self.report else ())
                   if o.status == "skipped"]
        # The screen's leave-one-out puts what it left out in the report, skipped, too; it is
        # the screen's loss, not the update's.
        reasons = [o.reason or "no reason given" for o in skipped]
        for stage, screened in (("update skipped", False), ("screen left out", True)):
            mine = [r.removeprefix(LEFT_OUT_AT_SCREEN) for r in reasons
                    if r.startswith(LEFT_OUT_AT_SCREEN) == screened]
            if mine:
                out.append(f"{stage} {len(mine)}: {'; '.join(dict.fromkeys(mine))}")
        return tuple(out)

    def changes(self) -> tuple[str, ...]:
        """Short descriptions of what the candidate changes (for records and the meta skill)."""
        out = []
        for item in self.kept:
            text = (item.description if isinstance(item, Suggestion) else
                    item.anchor if item.op == "delete" else item.content)
            head = item.type if isinstance(item, Suggestion) else item.op
            out.append(f"{head}: {one_line(text, CHANGE_CHARS)}")
        out += [f"reminder: {one_line(r, CHANGE_CHARS)}" for r in self.reminders]
        if self.description is not None:
            out.append(f"description: {one_line(self.description, CHANGE_CHARS)}")
        if not out and any(kind == "rewrites" for kind, _ in self.artifacts):
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


# ----------------------------------------------------------------------------- aggregate


def aggregate_stage(
    skill: str, patches: Sequence[Patch], model: ChatModel, settings: CandidateSettings,
    evidence: Evidence = NO_EVIDENCE, requests: Mapping[str, str] | None = None,
) -> Proposal:
    """Gradient accumulation: the patches of every minibatch as one set of proposals, less
    those that quote what the optimizer was shown (``evidence``)."""
    if settings.mode == "full_rewrite_minibatch":
        documents = []
        for p in patches:
            text, refusal = settle(skill, p.document, p.error)
            refusal = refusal or size_refusal(text or "", settings.max_skill_tokens)
            quote = find_quote(added_text(skill, text), evidence, skill) if text else None
            refusal = refusal or (quote.reason() if quote else None)
            documents.append(Document(p.minibatch, text, refusal))
        return Proposal(candidate=skill, documents=tuple(documents), n_proposed=len(patches))
    first = distinct(r for p in patches for r in p.refused)  # what the analysts were refused
    if settings.mode == "rewrite_from_suggestions":
        items, refused = clean_items(fold_suggestions(patches), evidence, skill)
        return Proposal(candidate=skill, items=tuple(items), refused=tuple(first + refused),
                        n_proposed=sum(len(p.suggestions) for p in patches))
    agg = aggregate(patches, skill, model, settings.merge, requests)
    # The analysts' rules were checked against the skill; a rule the merge wrote is checked
    # here: one that says lines of the skill again beside a clause of its own is cut to that
    # clause, and one that says again what the skill says, or its opposite, is left out.
    merged, cut = cut_to_own(agg.merged.edits, skill)
    items, refused = clean_items(merged, evidence, skill)
    items, left_out = left_out_by_skill(items, skill)
    left_out = [*cut, *left_out]
    return Proposal(candidate=skill, items=tuple(items), refused=tuple(first + refused),
                    restated=tuple(line for p in patches for line in p.restated),
                    merge_left_out=tuple(left_out),
                    n_proposed=sum(len(p.edits) for p in patches),
                    artifacts=(("merged_patch", {"merged": agg.merged, "levels": agg.levels,
                                                 "left_out": left_out}),))


# ----------------------------------------------------------------------------- select


def select_stage(
    proposal: Proposal, budget: int, skill: str, model: ChatModel, settings: CandidateSettings,
    evaluate: Evaluate, metric: Metric,
) -> Proposal:
    """Clipping: the proposals ranked and cut to the step's budget; whole documents compete on
    the selection split (``evaluate``) by ``metric(score, document)``."""
    if settings.mode == "full_rewrite_minibatch":
        return _best_document(proposal, evaluate, metric)
    selection = select(proposal.items, budget, skill, model, settings.select)
    kind = "ranked_suggestions" if settings.mode == "rewrite_from_suggestions" else "ranked_edits"
    return proposal.adding(kind, selection, selection=selection)


def _best_document(proposal: Proposal, evaluate: Evaluate, metric: Metric) -> Proposal:
    rows: list[dict[str, Any]] = []
    best: tuple[float, str, EvalScore] | None = None
    for doc in proposal.documents:
        row: dict[str, Any] = {"minibatch": doc.minibatch, "refused": doc.refusal}
        if doc.refusal is None and doc.text is not None:
            score = evaluate(doc.text)
            value = metric(score, doc.text)
            row.update(skill_hash=score.skill_hash, val=value)
            if best is None or value > best[0]:
                best = (value, doc.text, score)
        rows.append(row)
    if best is None:
        reasons = "; ".join(sorted({str(r["refused"]) for r in rows})) or "no minibatch"
        return proposal.adding("rewrites", rows, refusal=f"no valid rewrite ({reasons})")
    return proposal.adding("rewrites", rows, chosen=best[1], score=best[2])


# ----------------------------------------------------------------------------- update


def update_stage(
    proposal: Proposal, skill: str, patches: Sequence[Patch], model_for: ModelFor,
    settings: CandidateSettings, evidence: Evidence = NO_EVIDENCE,
    results: Sequence[RolloutResult] = (),
) -> Proposal:
    """The optimizer step: the selected changes made to the skill, and, when the step's
    ``results`` show an agent that seldom loaded it, a new description (its trigger)."""
    if settings.mode == "full_rewrite_minibatch":
        if proposal.chosen is not None:
            proposal = replace(proposal, candidate=proposal.chosen, n_applied=1)
    elif settings.mode == "rewrite_from_suggestions":
        proposal = _rewrite(proposal, skill, model_for("rewrite"), settings, evidence)
    else:
        candidate, report = _apply_selected(proposal, skill, settings.fuzzy_threshold,
                                            settings.scripts)
        proposal = proposal.adding(
            "apply_report", report, candidate=candidate, report=report,
            n_applied=report.count("applied"), n_fuzzy=report.count("applied_fuzzy"),
            n_skipped=report.count("skipped"))
    if settings.mode != "full_rewrite_minibatch":
        proposal = _add_reminders(proposal, patches, model_for, settings, evidence)
    return _retrain_trigger(proposal, skill, results, model_for, settings, evidence)


def _retrain_trigger(
    proposal: Proposal, skill: str, results: Sequence[RolloutResult], model_for: ModelFor,
    settings: CandidateSettings, evidence: Evidence,
) -> Proposal:
    """An agent skill's description rewritten when the agent seldom loaded the skill
    (:mod:`skillgrad.stages.trigger`); the candidate as it was otherwise."""
    if not settings.train_description or proposal.refusal is not None or not results:
        return proposal
    made = retrain_trigger(proposal.candidate, results, model_for("trigger"), evidence,
                           threshold=settings.fuzzy_threshold, max_tokens=settings.max_tokens,
                           temperature=settings.temperature)
    if made is None:
        return proposal
    data = {"note": made.note, "description": made.description,
            "outcome": made.outcome.model_dump(mode="json") if made.outcome else None}
    return proposal.adding("trigger", data, candidate=made.candidate, trigger=made.note,
                           description=made.description)


def _apply_selected(proposal: Proposal, skill: str, threshold: float,
                    scripts: bool = True) -> tuple[str, ApplyReport]:
    """Apply the selected edits; one that could not be applied (no change, duplicate content,
    anchor not found) gives its place to the next ranked edit, so it does not waste the step.
    The report lists the refused edits first, then every edit tried, in order."""
    kept = [e for e in proposal.kept if isinstance(e, Edit)]
    spare = [e for e in (proposal.selection.ranked if proposal.selection else ())
             if isinstance(e, Edit) and e not in kept]
    outcomes = [EditOutcome(index=i, edit=r.item, status="refused", reason=r.reason)
                for i, r in enumerate(proposal.refused) if isinstance(r.item, Edit)]
    wanted, landed = len(kept), 0
    queue = kept + spare
    while queue and landed < wanted:
        edit = queue.pop(0)
        skill, report = apply_edits(skill, [edit], fuzzy_threshold=threshold, scripts=scripts)
        outcome = report.outcomes[0]
        outcomes.append(outcome.model_copy(update={"index": len(outcomes)}))
        landed += outcome.status != "skipped"
    return skill, ApplyReport(outcomes=tuple(outcomes))


def _rewrite(
    proposal: Proposal, skill: str, model: ChatModel, settings: CandidateSettings,
    evidence: Evidence,
) -> Proposal:
    kept = tuple(s for s in proposal.kept if isinstance(s, Suggestion))
    if not kept:
        return proposal
    result = rewrite_document(
        skill, kept, model, meta=settings.meta, constraints=settings.constraints,
        temperature=settings.temperature,
        max_tokens=settings.rewrite_max_tokens or settings.max_tokens)
    data = {"error": result.error, "raw": result.raw, "document": result.document}
    if result.document is None:
        return proposal.adding("rewrite", data, refusal=result.error)
    quote = find_quote(added_text(skill, result.document), evidence, skill)
    if quote is not None:
        return proposal.adding("rewrite", data, refusal=f"the rewrite {quote.reason()}")
    return proposal.adding("rewrite", data, candidate=result.document, n_applied=len(kept))


def _add_reminders(
    proposal: Proposal, patches: Sequence[Patch], model_for: ModelFor,
    settings: CandidateSettings, evidence: Evidence,
) -> Proposal:
    """Skill-aware reflection: the reminders go into the candidate's appendix (those that
    quote what the optimizer was shown are left out)."""
    if not settings.skill_aware or proposal.refusal is not None:
        return proposal
    proposed = [r for r in appendix.collect(patches, settings.reminders_from)
                if find_quote(r, evidence, proposal.candidate) is None]
    if not proposed:
        return proposal
    candidate, update = appendix.update_appendix(
        proposal.candidate, proposed, settings.consolidate_threshold, model_for("appendix"),
        max_tokens=settings.max_tokens, temperature=settings.temperature)
    return proposal.adding("appendix", update, candidate=candidate,
                           reminders=tuple(update.added))


def _edits(items: Sequence[Any]) -> str:
    return "edit" if len(items) == 1 else "edits"
