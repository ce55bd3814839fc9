"""The training log, annotated (``skillgrad show``): each step's edits with what became of
them and the gate's decision with its reason (the loss curve with the reason for every update
kept or refused)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from skillgrad.errors import RunDirError
from skillgrad.models.usage import model_usage
from skillgrad.records import (
    ApplyReport,
    Edit,
    GateDecision,
    Patch,
    Selection,
    StepRecord,
    Suggestion,
)
from skillgrad.rundir import GATE, RunDir, WorkDir, read_json, read_jsonl, read_text
from skillgrad.runview.common import (
    CANDIDATE,
    PATCHES,
    EditView,
    EpochView,
    GateView,
    ProposalView,
    RunView,
    StepView,
    first_error,
    load_state,
    read_model,
    state_score,
    step_name,
)
from skillgrad.runview.versions import Versions
from skillgrad.skill import skill_hash
from skillgrad.state import TrainerState


def read_run(root: Path) -> RunView:
    """Everything ``skillgrad show`` prints of the run in ``root``, finished or not."""
    run = RunDir(root)
    state = load_state(run)
    versions = Versions.of(state)
    after = {g: digest for _, g, digest in versions.after}
    steps = [_step(run, r, after[r.global_step], r.global_step == state.best_step)
             for r in state.history]
    epochs = [EpochView(u.epoch, u, state.epoch_start.get(str(u.epoch)))
              for u in state.epoch_updates]
    if state.phase == "train" and not state.training_done:
        if state.step == 0 and state.epoch > state.epoch_update_done:
            if run.epoch_dir(state.epoch).path.exists():
                epochs.append(EpochView(state.epoch, None))
        elif (folder := run.step_dir(state.epoch, state.step + 1)).path.exists():
            steps.append(_unfinished(folder, state.epoch, state.step + 1))
    summary = run.read_summary() if run.summary_path.exists() else None
    config = run.read_config()
    mode = (config.get("optimizer") or {}).get("skill_update_mode") if isinstance(
        config, dict) else None
    rule = (summary or {}).get("gate", {}).get("rule") or next(
        (s.gate.rule for s in reversed(steps) if s.gate and s.gate.rule), "")

    def val(digest: str) -> float | None:
        score = state.score("val", digest)
        return None if score is None else score.hard

    return RunView(
        root=str(root), phase=state.phase, position=state.position(),
        steps_done=state.global_step, total_steps=state.total_steps, mode=mode or "patch",
        gate_rule=rule, steps=tuple(steps), epochs=tuple(epochs), best_step=state.best_step,
        skills={"initial": state.initial_hash, "best": state.best_hash,
                "final": state.current_hash},
        selection={"initial": val(state.initial_hash), "best": val(state.best_hash),
                   "final": val(state.current_hash)},
        totals=_totals(run, state, summary))


def _step(run: RunDir, record: StepRecord, skill_after: str, best: bool) -> StepView:
    folder = run.step_dir(record.epoch, record.step)
    decision = read_model(folder.path / GATE, GateDecision)
    screen = read_json(folder.path / WorkDir.ARTIFACTS["screen"])
    screened_out = bool(screen) and screen.get("chosen") is None
    gate = GateView(
        decision=record.decision, reason=record.reason, candidate=record.candidate_score,
        current=record.current_score, best=record.best_score, screened_out=screened_out)
    if decision is not None:
        gate = GateView(decision.decision, decision.reason, decision.metric, decision.candidate,
                        decision.current, decision.best, decision.p_value, decision.mean_gain,
                        screened_out, decision.rule)
    edits = _edits(folder) or tuple(EditView("edit", c.partition(": ")[0], c.partition(": ")[2],
                                             "selected") for c in record.changes)
    # With screening the folder holds the chosen proposal's artifacts (the first one's when
    # none was chosen).
    edits_of = (screen.get("chosen") or 0) if screen else None
    return StepView(step_name(record.epoch, record.step), record.epoch, record.step, record,
                    edits, _proposals(screen), gate, skill_after, best, edits_of=edits_of)


def _unfinished(folder: WorkDir, epoch: int, step: int) -> StepView:
    files = tuple(sorted(p.name for p in folder.path.iterdir() if not p.name.startswith(".")))
    return StepView(step_name(epoch, step), epoch, step, None, _edits(folder),
                    _proposals(read_json(folder.path / WorkDir.ARTIFACTS["screen"])),
                    files=files, calls=len(read_jsonl(folder.calls_path)))


def _edits(folder: WorkDir) -> tuple[EditView, ...]:
    """The step's proposed changes and their outcomes, from whichever artifacts its update
    mode wrote, and the reminders it added to the appendix."""
    return (*_documents(folder), *_suggestions(folder), *_applied(folder), *_reminders(folder))


def _documents(folder: WorkDir) -> list[EditView]:
    """``full_rewrite_minibatch``: each minibatch's whole document, refused or scored."""
    rows = read_json(folder.path / WorkDir.ARTIFACTS["rewrites"])
    if not isinstance(rows, list):
        return []
    chosen = _candidate_hash(folder)
    out = []
    for row in rows:
        text = f"whole document from minibatch {row.get('minibatch')}"
        if row.get("refused"):
            out.append(EditView("document", "rewrite", text, "refused",
                                reason=str(row["refused"])))
            continue
        digest = str(row.get("skill_hash", ""))
        out.append(EditView("document", "rewrite", text,
                            "chosen" if digest == chosen else "scored",
                            reason=f"selection {row.get('val', 0):.3f}, skill {digest[:8]}"))
    return out


def _suggestions(folder: WorkDir) -> list[EditView]:
    """``rewrite_from_suggestions``: the refused, the ranked and the kept suggestions, and
    whether the rewrite carried the kept ones out."""
    ranked = read_model(folder.path / WorkDir.ARTIFACTS["ranked_suggestions"], Selection)
    if ranked is None:
        return []
    rewrite = read_json(folder.path / WorkDir.ARTIFACTS["rewrite"]) or {}
    out = [_item(r.item, "refused", r.reason) for p in _patches(folder) for r in p.refused]
    for s in ranked.ranked:
        if s not in ranked.kept:
            out.append(_item(s, "not_selected", f"cut to the budget of {ranked.budget}"))
        elif rewrite.get("document") is None:
            out.append(_item(s, "rewrite_failed", str(rewrite.get("error") or "")))
        else:
            out.append(_item(s, "rewritten"))
    return out


def _applied(folder: WorkDir) -> list[EditView]:
    """``patch``: every edit tried, in order (the refused first), then the ranked ones
    left out."""
    report = read_model(folder.path / WorkDir.ARTIFACTS["apply_report"], ApplyReport)
    if report is None:
        return []
    out = [EditView("edit", _op(o.edit), _edit_text(o.edit), o.status, o.edit.anchor,
                    o.reason or "", o.matched, o.similarity) for o in report.outcomes]
    ranked = read_model(folder.path / WorkDir.ARTIFACTS["ranked_edits"], Selection)
    tried = [o.edit for o in report.outcomes]
    if ranked is not None:
        out += [_item(e, "not_selected", f"cut to the budget of {ranked.budget}")
                for e in ranked.ranked if e not in tried]
    return out


def _reminders(folder: WorkDir) -> list[EditView]:
    """Skill-aware reflection: the reminders added to the appendix, and those it had."""
    update = read_json(folder.path / WorkDir.ARTIFACTS["appendix"]) or {}
    out = [EditView("reminder", "reminder", r, "added") for r in update.get("added", [])]
    out += [EditView("reminder", "reminder", r, "skipped", reason="already in the appendix")
            for r in update.get("duplicates", [])]
    if update.get("error"):
        out.append(EditView("reminder", "consolidate", "", "skipped",
                            reason=str(update["error"])))
    return out


def _item(item: Edit | Suggestion, outcome: str, reason: str = "") -> EditView:
    if isinstance(item, Suggestion):
        return EditView("suggestion", item.type, item.description, outcome, reason=reason)
    return EditView("edit", _op(item), _edit_text(item), outcome, item.anchor, reason)


def _op(edit: Edit | Suggestion) -> str:
    """An edit's op, and the file of a skill package it names ("append references/a.md")."""
    if isinstance(edit, Suggestion):
        return edit.type
    return f"{edit.op} {edit.file}" if edit.file else edit.op


def _edit_text(edit: Edit) -> str:
    return edit.content if edit.op != "delete" else ""


def _patches(folder: WorkDir) -> list[Patch]:
    data = read_json(folder.path / PATCHES)
    try:
        return [Patch.model_validate(p) for p in data or []]
    except ValidationError as exc:
        raise RunDirError(f"{folder.path / PATCHES}: not valid patches "
                          f"({first_error(exc)})") from None


def _candidate_hash(folder: WorkDir) -> str | None:
    text = read_text(folder.path / CANDIDATE)
    return None if text is None else skill_hash(text)


def _proposals(screen: Any) -> tuple[ProposalView, ...]:
    if not isinstance(screen, dict):
        return ()
    return tuple(ProposalView(
        index=int(row.get("proposal", i)), status=str(row.get("status", "")),
        edits=tuple(str(e) for e in row.get("edits", [])), score=row.get("score"),
        reason=str(row.get("reason", "")), chosen=row.get("proposal", i) == screen.get("chosen"))
        for i, row in enumerate(screen.get("rows", [])))


def _totals(run: RunDir, state: TrainerState, summary: dict[str, Any] | None) -> dict[str, Any]:
    """The totals ``show`` ends with: the summary's when the run finished, else what the
    checkpoint knows of the same."""
    history = state.history
    unusable = [r for r in history if r.unusable]
    test = {name: state_score(state, "test", digest) for name, digest in (
        ("initial", state.initial_hash), ("best", state.best_hash),
        ("final", state.current_hash))}
    gate = (summary or {}).get("gate", {})
    return {
        "finished": summary is not None,
        "test": {k: v for k, v in test.items() if v is not None},
        "decisions": dict(sorted(Counter(r.decision for r in history).items())),
        "edits": {"proposed": sum(r.n_proposed for r in history),
                  "applied": sum(r.n_applied for r in history),
                  "applied_fuzzy": sum(r.n_fuzzy for r in history),
                  "skipped": sum(r.n_skipped for r in history),
                  "refused": sum(r.n_refused for r in history)},
        "parse_errors": sum(r.n_parse_errors for r in history),
        "unusable_steps": len(unusable),
        "last_unusable": ({"step": unusable[-1].global_step, "error": unusable[-1].unusable}
                          if unusable else None),
        "models": summary["models"] if summary else model_usage(state.meter),
        "use_gate": gate.get("use_gate", True),
        "best_skill": str(run.best_skill_path),
        "summary": str(run.summary_path) if summary else None,
    }


