"""Screen: with ``gradient.proposals`` above one, a step makes several candidates, each from its
own sampled reflection, and keeps the one that does best on the step's own training tasks.

The current skill's scores on those tasks are known (the step's rollouts), so each candidate
costs one rollout per task. A candidate goes on to the gate only if it beats the current skill
there; the gate then judges it on the selection split, which played no part in the choice, so
choosing among several does not bias the gate's estimate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from skillgrad.package import is_package
from skillgrad.records import (
    ApplyReport,
    Edit,
    EditOutcome,
    RolloutResult,
    Selection,
    Suggestion,
    Task,
)
from skillgrad.skill import LIST_ITEM, body_without_blocks, instructions, skill_hash
from skillgrad.stages.candidate import LEFT_OUT_AT_SCREEN, Proposal
from skillgrad.stages.hygiene import LEAD, SENTENCE_END, leans_back
from skillgrad.stages.update import apply_edits


@dataclass(frozen=True)
class Screening:
    """``chosen``: the index of the proposal that goes to the gate (None: none does, and
    ``reason`` says why); ``rows``: one per proposal, for the step folder."""

    chosen: int | None
    reason: str
    current: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    sampled_again: int = 0  # proposals sampled once more, none of the first being a new skill


def new_skill(proposal: Proposal, skill: str, rejected: Mapping[str, int]) -> bool:
    """Whether the screen would roll ``proposal`` out: a changed skill, not refused, that the
    gate has not rejected before (``rejected``: skill hash -> the global step)."""
    return (proposal.refusal is None and proposal.candidate != skill
            and skill_hash(proposal.candidate) not in rejected)


def screen(
    proposals: Sequence[Proposal],
    skill: str,
    baseline: Sequence[RolloutResult],
    tasks: Sequence[Task],
    run: Callable[[str, Sequence[Task]], list[RolloutResult]],
    value: Callable[[Sequence[RolloutResult]], float],
    rejected: Mapping[str, int] | None = None,
    extra: Sequence[Task] = (),
    tie_break: int = 0,
    shorter_on_tie: bool = False,
) -> Screening:
    """Roll out each distinct, changed, unrefused candidate on ``tasks`` and choose the best
    that beats ``baseline`` (the current skill on the same tasks); ties go to the earlier. A
    candidate the gate already rejected (``rejected``: skill hash -> the global step) is not
    rolled out again, so the next one goes to the gate in its place.

    When none beats the current skill but some tie it, up to ``tie_break`` of them (the
    earliest) get a second look: they and the current skill are rolled out on ``extra``
    training tasks, and the best that is ahead of the current skill on both sets together goes
    to the gate (a bounded round of successive halving: one round, the field cut to those
    that tied).

    With ``shorter_on_tie``, when still nothing is ahead, the shortest candidate that only
    deletes (a line or skill ablation, say) and tied the current skill, on the second look
    too where it had one, goes to the gate: at equal training scores the shorter skill is
    tried, and the selection split decides."""
    current = value(baseline)
    rows: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    best: tuple[float, int] | None = None
    rolled: dict[int, list[RolloutResult]] = {}
    for i, p in enumerate(proposals):
        digest = skill_hash(p.candidate)
        row: dict[str, Any] = {"proposal": i, "candidate_hash": digest,
                               "edits": [_shown(e) for e in p.kept]}
        if p.refusal is not None:
            row.update(status="refused", reason=p.refusal)
        elif p.candidate == skill:
            row.update(status="unchanged", reason=p.unchanged_reason())
        elif digest in seen:
            row.update(status="duplicate", reason=f"the same skill as proposal {seen[digest]}")
        elif rejected and digest in rejected:
            row.update(status="rejected before",
                       reason=f"the gate rejected this same skill at step {rejected[digest]}")
        else:
            seen[digest] = i
            results = run(p.candidate, tasks)
            rolled[i] = results
            score = value(results)
            row.update(status="scored", score=round(score, 6),
                       per_task={r.task_id: [r.hard, r.soft] for r in results})
            if score > current and (best is None or score > best[0]):
                best = (score, i)
        rows.append(row)
    scored = [r for r in rows if r["status"] == "scored"]
    tied = [r["proposal"] for r in scored if abs(r["score"] - round(current, 6)) < 1e-9]
    if best is not None:
        reason = (f"proposal {best[1]} of {len(proposals)} scores {best[0]:.3f} on the step's "
                  f"{len(tasks)} training tasks, the current skill {current:.3f}")
        return Screening(best[1], reason, current, rows)
    if tie_break > 0 and extra and tied:
        looked = _second_look(proposals, tied[:tie_break], skill, baseline, rolled, tasks,
                              extra, run, value, current, rows)
    elif not scored:
        before = [r for r in rows if r["status"] == "rejected before"]
        looked = Screening(None, (
            f"none of the {len(proposals)} proposals changed the skill" if not before else
            f"none of the {len(proposals)} proposals is a new skill ({len(before)} the gate "
            "rejected before)"), current, rows)
    else:
        top = max(r["score"] for r in scored)
        looked = Screening(None, (
            f"no proposal beat the current skill on the step's {len(tasks)} training tasks "
            f"(best {top:.3f}, current {current:.3f}; {len(scored)} rolled out)"), current, rows)
    return _shorter(proposals, tied, skill, looked) if shorter_on_tie else looked


def screened_roles(ran: Sequence[tuple[str, Sequence[Task], list[RolloutResult]]], skill: str,
                   candidates: Sequence[str], tasks: Sequence[Task], chosen: int | None,
                   ) -> list[tuple[str, str, list[RolloutResult]]]:
    """Each of the screen's runs (the skill, its tasks, the results, in the order they ran) as
    (the skill's hash, whose it is, the results): "current skill", "proposal 2" (its index
    among ``candidates``, as ``screen.json`` numbers it) or "proposal 2, a part left out"
    (the chosen one, trying itself without a rider); ", on more tasks" for a tie's second
    look, on tasks outside the step's batch ``tasks``."""
    whose: dict[str, str] = {}
    for i, candidate in enumerate(candidates):
        whose.setdefault(skill_hash(candidate), f"proposal {i}")
    whose[skill_hash(skill)] = "current skill"
    batch = {t.id for t in tasks}
    out = []
    for doc, ts, results in ran:
        digest = skill_hash(doc)
        role = whose.get(digest) or (f"proposal {chosen}, a part left out"
                                     if chosen is not None else "a candidate")
        if any(t.id not in batch for t in ts):
            role += ", on more tasks"
        out.append((digest, role, results))
    return out


def _second_look(
    proposals: Sequence[Proposal], tied: Sequence[int], skill: str,
    baseline: Sequence[RolloutResult], rolled: Mapping[int, list[RolloutResult]],
    tasks: Sequence[Task], extra: Sequence[Task],
    run: Callable[[str, Sequence[Task]], list[RolloutResult]],
    value: Callable[[Sequence[RolloutResult]], float], current: float,
    rows: list[dict[str, Any]],
) -> Screening:
    """The candidates that tied the current skill, and the current skill, on ``extra`` tasks
    too: the best ahead on both sets together goes to the gate."""
    base = value([*baseline, *run(skill, extra)])
    best: tuple[float, int] | None = None
    for i in tied:
        both = value([*rolled[i], *run(proposals[i].candidate, extra)])
        rows[i]["second_look"] = {"tasks": len(extra), "score": round(both, 6),
                                  "current": round(base, 6)}
        if both > base and (best is None or both > best[0]):
            best = (both, i)
    n = len(tasks) + len(extra)
    if best is not None:
        reason = (f"proposal {best[1]} of {len(proposals)} tied the current skill on the "
                  f"step's {len(tasks)} training tasks and scores {best[0]:.3f} on those and "
                  f"{len(extra)} more, the current skill {base:.3f}")
        return Screening(best[1], reason, current, rows)
    reason = (f"no proposal beat the current skill on the step's {len(tasks)} training tasks; "
              f"{len(tied)} that tied it did not on {n} ({base:.3f} the current skill)")
    return Screening(None, reason, current, rows)


def _shorter(proposals: Sequence[Proposal], tied: Sequence[int], skill: str,
             screening: Screening) -> Screening:
    """``screening`` when it chose a candidate or no deletion tied; else the shortest tied
    candidate that only deletes (and did not fall behind on a second look), for the gate."""
    if screening.chosen is not None:
        return screening
    rows = screening.rows
    shorter = [i for i in tied
               if proposals[i].kept and len(proposals[i].candidate) < len(skill)
               and all(isinstance(e, Edit) and e.op == "delete" for e in proposals[i].kept)
               and ("second_look" not in rows[i] or abs(
                   rows[i]["second_look"]["score"] - rows[i]["second_look"]["current"]) < 1e-9)]
    if not shorter:
        return screening
    i = min(shorter, key=lambda k: (len(proposals[k].candidate), k))
    n = len(proposals[i].kept)
    gone = ("no skill at all" if not proposals[i].candidate.strip() else
            f"{n} instruction{'s' if n != 1 else ''} deleted")
    reason = (f"{screening.reason}; proposal {i} of {len(proposals)} tied it and is shorter "
              f"({gone}): the gate decides")
    return Screening(i, reason, screening.current, rows)


# The edits that only add text: a rule that adds nothing can be left out without changing
# what the others do (a deletion or replacement left out would bring old text back).
_ADDING = frozenset({"append", "insert_after"})


def sentence_cuts(content: str) -> list[tuple[str, str]]:
    """The ways to leave one sentence of a one-line rule out: each (the rule without it, the
    sentence left out), in the rule's order. A sentence that leans on the one before
    (:func:`~skillgrad.stages.hygiene.leans_back`: an example, "Otherwise ...", "... those
    words.") is part of it, and a rule of one such part, or written over several lines, has
    none. A rule left beginning with a word of sequence ("Instead, reply ...") loses it."""
    marker = LIST_ITEM.match(content)
    head, body = (marker.group(0), content[marker.end():]) if marker else ("", content)
    body = body.strip()
    if not body or "\n" in body:
        return []
    parts: list[list[str]] = []
    for sentence in SENTENCE_END.split(body):
        if parts and leans_back(sentence):
            parts[-1].append(sentence)
        else:
            parts.append([sentence])
    if len(parts) < 2:
        return []
    cuts = []
    for j in range(len(parts)):
        rest = LEAD.sub("", " ".join(x for k, part in enumerate(parts) if k != j for x in part))
        cuts.append((head + rest[:1].upper() + rest[1:], " ".join(parts[j])))
    return cuts


def without_riders(
    proposal: Proposal, skill: str, score: float, tasks: Sequence[Task],
    run: Callable[[str, Sequence[Task]], list[RolloutResult]],
    value: Callable[[Sequence[RolloutResult]], float],
    rejected: Mapping[str, int] | None = None,
) -> tuple[Proposal, list[str]]:
    """The chosen ``proposal`` (which scored ``score`` on the step's ``tasks``) without what
    rides along: each edit, while it applies two or more, and each sentence of a rule of
    several (:func:`sentence_cuts`) is left out in turn and the candidate rolled out on the
    same tasks; the piece whose absence scores as well (the latest among equals; a whole edit
    before a sentence) is dropped, and the rest is looked at again. An analyst's reply that
    holds one rule that works and one that does nothing ("Remove any extra words from the
    reply." beside "Ensure the reply follows the correct structure of a sentence.") is
    screened as one candidate; so is one rule of two sentences, one of which does nothing
    ("If the context is not given, you should rely on what you know about the topic, not on
    the specific date. Reply with the date in the format the task asks for (...)."). This
    keeps what earned the score. Each dropped edit stays in the report, skipped, with why; a
    dropped sentence is reported skipped beside the rule it was cut from, which is applied
    without it; the second value lists what was left out. Only edits applied exactly that
    only add text (appended or inserted rules), with nothing added after them (reminders, a
    description), are taken apart; otherwise the proposal comes back as it was."""
    report = proposal.report
    if (report is None or proposal.reminders or proposal.documents or proposal.trigger
            or proposal.description is not None):
        return proposal, []
    applied = [o for o in report.outcomes if o.status in ("applied", "applied_fuzzy")]
    if (not applied or any(o.status != "applied" or o.edit.op not in _ADDING for o in applied)
            or apply_edits(skill, [o.edit for o in applied])[0] != proposal.candidate):
        return proposal, []
    kept, dropped, cuts, note = list(applied), list[EditOutcome](), list[EditOutcome](), []
    while True:
        ways = _ways_to_leave_out(kept)
        best: tuple[float, int, str] | None = None
        for w, (edits, _, _) in enumerate(ways):
            candidate, _ = apply_edits(skill, [o.edit for o in edits])
            if candidate == skill or (rejected and skill_hash(candidate) in rejected):
                continue
            without = value(run(candidate, tasks))
            if without >= score and (best is None or without >= best[0]):
                best = (without, w, candidate)
        if best is None:
            break
        without, w, candidate = best
        edits, rider, rest = ways[w]
        why = (f"{LEFT_OUT_AT_SCREEN}{rest} scored {without:.3f} without it on the step's "
               f"{len(tasks)} training tasks, {score:.3f} with it")
        whole = len(edits) < len(kept)
        (dropped if whole else cuts).append(
            rider.model_copy(update={"status": "skipped", "reason": why}))
        note.append(f"{_shown(rider.edit)!r} ({why.removeprefix(LEFT_OUT_AT_SCREEN)})")
        kept = edits
        proposal, score = replace(proposal, candidate=candidate), without
    if not dropped and not cuts:
        return proposal, []
    return _lean(proposal, report, applied, kept, dropped, cuts), note


def _with_content(outcome: EditOutcome, content: str) -> EditOutcome:
    return outcome.model_copy(update={"edit": outcome.edit.model_copy(
        update={"content": content})})


def _ways_to_leave_out(kept: list[EditOutcome]) -> list[tuple[list[EditOutcome], EditOutcome,
                                                                 str]]:
    """Each way to leave one piece of ``kept`` out: (the edits kept, the piece, what is
    scored without it): each sentence of a rule of several, then, of two edits or more, each
    edit (the later wins among equals, so a whole edit goes before a sentence)."""
    ways = [([*kept[:j], _with_content(o, rest), *kept[j + 1:]], _with_content(o, sentence),
             "the rest")
            for j, o in enumerate(kept) for rest, sentence in sentence_cuts(o.edit.content)]
    if len(kept) >= 2:
        ways += [([x for k, x in enumerate(kept) if k != j], o, f"the other {len(kept) - 1}")
                 for j, o in enumerate(kept)]
    return ways


def _lean(proposal: Proposal, report: ApplyReport, applied: list[EditOutcome],
          kept: list[EditOutcome], dropped: list[EditOutcome],
          cuts: list[EditOutcome]) -> Proposal:
    """``proposal`` with its report, selection and counts saying what the screen left out:
    ``dropped`` edits skipped in their place, ``cuts`` (sentences) skipped after the rule
    they were cut from, which stays applied as ``kept`` holds it."""
    now = {o.index: o for o in (*kept, *dropped)}
    outcomes: list[EditOutcome] = []
    for o in report.outcomes:
        outcomes.append(now.get(o.index, o))
        outcomes += [c for c in cuts if c.index == o.index]
    lean = ApplyReport(outcomes=tuple(outcomes))
    was = {o.index: o.edit for o in applied}  # each kept edit as the selection holds it
    becomes = [(was[o.index], o.edit) for o in kept]
    gone = [was[o.index] for o in dropped]
    selection = proposal.selection
    if selection is not None:
        selection = selection.model_copy(update={"kept": tuple(
            next((after for before, after in becomes if before == e), e)
            for e in selection.kept if e not in gone)})
    artifacts = tuple((kind, lean if kind == "apply_report" else data)
                      for kind, data in proposal.artifacts)
    return replace(proposal, report=lean, selection=selection, artifacts=artifacts,
                   n_applied=proposal.n_applied - len(dropped),
                   n_skipped=proposal.n_skipped + len(dropped) + len(cuts))


def _shown(item: Edit | Suggestion) -> str:
    if isinstance(item, Suggestion):
        return item.description
    return f"delete: {item.anchor}" if item.op == "delete" else item.content


def ablations(skill: str, limit: int, whole: bool = False) -> list[Proposal]:
    """Candidates that each delete one instruction of ``skill`` (:func:`instructions`, the
    latest first, up to ``limit``; a wrapped list item goes whole), and with ``whole`` one that
    deletes all of it: no skill at all (a package keeps its files and headings, and loses
    their instructions). Screened next to the analysts' proposals, they let a step find that
    an instruction, or the skill as a whole, hurts, which no added rule can undo."""
    parts = list(dict.fromkeys(reversed(instructions(skill))))
    sets = [([line], "line ablation") for line in parts[:limit]]
    if whole and parts:
        headings = [] if is_package(skill) else [
            line for line in body_without_blocks(skill).splitlines()
            if line.strip().startswith("#")]
        if all(parts + headings != lines for lines, _ in sets):
            sets.append((parts + headings, "skill ablation"))
    proposals = []
    for lines, why in sets:
        edits = tuple(Edit(op="delete", anchor=line, rationale=why) for line in lines)
        candidate, report = apply_edits(skill, list(edits))
        if candidate != skill:
            proposals.append(Proposal(
                candidate=candidate, items=edits, n_proposed=len(edits),
                n_applied=report.count("applied"), report=report,
                selection=Selection(budget=len(edits), ranked=edits, kept=edits)))
    return proposals
