"""Reading run directories back: what ``skillgrad show``, ``diff`` and ``compare`` print.

The training log, annotated: each step's edits with what became of them and the gate's
decision with its reason (the loss curve with the reason for every update kept or refused);
the skill versions by name (the checkpoints one can diff); and runs side by side with a paired
bootstrap interval of the best skill's test gain (an A/B test of two trainings). Pure logic
over the files :class:`~skillgrad.rundir.RunDir` names; the console is :mod:`skillgrad.runs_cli`'s.
(Over the house limit of ~400 lines: the three commands read the same files of a run, and
that reading, with the shapes every update mode leaves, stays in one module.)
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from skillgrad.errors import RunDirError, SkillgradError
from skillgrad.records import (
    ApplyReport,
    Edit,
    EpochUpdate,
    GateDecision,
    Patch,
    Selection,
    StepRecord,
    Suggestion,
)
from skillgrad.rundir import ROLLOUTS, RunDir, WorkDir, read_jsonl
from skillgrad.skill import skill_hash
from skillgrad.state import TrainerState
from skillgrad.summary import model_usage

ACCEPTED = ("accept", "accept_new_best")
# The step files WorkDir writes through gate(), patches() and candidate(), read back here.
GATE, PATCHES, CANDIDATE = "gate.json", "patches.json", "candidate.md"
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class EditView:
    """One change a step proposed and what became of it. ``outcome``: ``applied``,
    ``applied_fuzzy`` (``matched``: the text its anchor matched), ``skipped``, ``refused``
    (``reason`` says why), ``not_selected`` (cut to the step's budget), ``rewritten`` or
    ``rewrite_failed`` (suggestions), ``scored`` or ``chosen`` (whole documents), ``added``
    (appendix reminders)."""

    kind: str  # edit, suggestion, document, reminder
    op: str  # an edit's op, a suggestion's type, "rewrite", "reminder"
    text: str
    outcome: str
    anchor: str = ""
    reason: str = ""
    matched: str | None = None
    similarity: float | None = None


@dataclass(frozen=True)
class GateView:
    """The gate's decision on a step's (or a slow update's) candidate, and why."""

    decision: str
    reason: str
    metric: str = ""
    candidate: float | None = None
    current: float | None = None
    best: float | None = None
    p_value: float | None = None
    mean_gain: float | None = None
    screened_out: bool = False  # no proposal beat the current skill on the step's tasks
    rule: str = ""


@dataclass(frozen=True)
class ProposalView:
    """One candidate screened on the step's training tasks (``gradient.proposals`` above one,
    or a line ablation)."""

    index: int
    status: str
    edits: tuple[str, ...]
    score: float | None = None
    reason: str = ""
    chosen: bool = False


@dataclass(frozen=True)
class StepView:
    """A step: ``record`` is None while it is unfinished (in progress, or interrupted), and
    ``files`` then lists what its folder holds so far."""

    name: str
    epoch: int
    step: int
    record: StepRecord | None
    edits: tuple[EditView, ...] = ()
    proposals: tuple[ProposalView, ...] = ()
    gate: GateView | None = None
    skill_after: str | None = None
    best: bool = False
    files: tuple[str, ...] = ()
    edits_of: int | None = None  # with screening: the proposal whose edits ``edits`` are
    calls: int = 0  # of an unfinished step: the model calls answered so far


@dataclass(frozen=True)
class EpochView:
    """The work done before ``epoch`` started (slow update, meta skill); ``update`` is None
    while it is unfinished."""

    epoch: int
    update: EpochUpdate | None
    skill_after: str | None = None


@dataclass(frozen=True)
class RunView:
    root: str
    phase: str
    position: str
    steps_done: int
    total_steps: int
    mode: str
    gate_rule: str
    steps: tuple[StepView, ...]
    epochs: tuple[EpochView, ...]
    best_step: int
    skills: dict[str, str]  # initial, best, final -> hash
    selection: dict[str, float | None]  # the same skills' selection scores (hard)
    totals: dict[str, Any]


def jsonable(obj: Any) -> Any:
    """``obj`` (views, records, containers) as plain JSON values."""
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [jsonable(o) for o in obj]
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    return obj


def step_name(epoch: int, step: int) -> str:
    return f"e{epoch:02d}-s{step:03d}"


def load_state(run: RunDir) -> TrainerState:
    """The checkpoint's state, or a one-line refusal that says what the folder is instead."""
    data = run.require_checkpoint()
    try:
        return TrainerState.model_validate(data)
    except ValidationError as exc:
        raise RunDirError(f"{run.checkpoint_path}: not a checkpoint this skillgrad reads "
                          f"({_first_error(exc)})") from None


# ----------------------------------------------------------------------------- show


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
    decision = _read_model(folder.path / GATE, GateDecision)
    screen = _read_json(folder.path / WorkDir.ARTIFACTS["screen"])
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
                    _proposals(_read_json(folder.path / WorkDir.ARTIFACTS["screen"])),
                    files=files, calls=len(read_jsonl(folder.calls_path)))


def _edits(folder: WorkDir) -> tuple[EditView, ...]:
    """The step's proposed changes and their outcomes, from whichever artifacts its update
    mode wrote, and the reminders it added to the appendix."""
    return (*_documents(folder), *_suggestions(folder), *_applied(folder), *_reminders(folder))


def _documents(folder: WorkDir) -> list[EditView]:
    """``full_rewrite_minibatch``: each minibatch's whole document, refused or scored."""
    rows = _read_json(folder.path / WorkDir.ARTIFACTS["rewrites"])
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
    ranked = _read_model(folder.path / WorkDir.ARTIFACTS["ranked_suggestions"], Selection)
    if ranked is None:
        return []
    rewrite = _read_json(folder.path / WorkDir.ARTIFACTS["rewrite"]) or {}
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
    report = _read_model(folder.path / WorkDir.ARTIFACTS["apply_report"], ApplyReport)
    if report is None:
        return []
    out = [EditView("edit", o.edit.op, _edit_text(o.edit), o.status, o.edit.anchor,
                    o.reason or "", o.matched, o.similarity) for o in report.outcomes]
    ranked = _read_model(folder.path / WorkDir.ARTIFACTS["ranked_edits"], Selection)
    tried = [o.edit for o in report.outcomes]
    if ranked is not None:
        out += [_item(e, "not_selected", f"cut to the budget of {ranked.budget}")
                for e in ranked.ranked if e not in tried]
    return out


def _reminders(folder: WorkDir) -> list[EditView]:
    """Skill-aware reflection: the reminders added to the appendix, and those it had."""
    update = _read_json(folder.path / WorkDir.ARTIFACTS["appendix"]) or {}
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
    return EditView("edit", item.op, _edit_text(item), outcome, item.anchor, reason)


def _edit_text(edit: Edit) -> str:
    return edit.content if edit.op != "delete" else ""


def _patches(folder: WorkDir) -> list[Patch]:
    data = _read_json(folder.path / PATCHES)
    try:
        return [Patch.model_validate(p) for p in data or []]
    except ValidationError as exc:
        raise RunDirError(f"{folder.path / PATCHES}: not valid patches "
                          f"({_first_error(exc)})") from None


def _candidate_hash(folder: WorkDir) -> str | None:
    path = folder.path / CANDIDATE
    return skill_hash(path.read_text(encoding="utf-8")) if path.exists() else None


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
    test = {name: _score(state, "test", digest) for name, digest in (
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


def _score(state: TrainerState, split: str, digest: str) -> dict[str, float] | None:
    s = state.score(split, digest)
    return None if s is None else {"hard": s.hard, "soft": s.soft, "n": s.n}


def _read_json(path: Path) -> Any:
    """A JSON artifact of the run (None when it is not there)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path}: not valid JSON (line {exc.lineno})") from None


def _read_model(path: Path, model: type[M]) -> M | None:
    data = _read_json(path)
    if data is None:
        return None
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise RunDirError(f"{path}: not a valid {model.__name__} ({_first_error(exc)})") from None


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}"


# ----------------------------------------------------------------------------- versions


@dataclass(frozen=True)
class Versions:
    """The named skill versions of a run: ``initial``, ``best``, ``final`` (the current skill
    while it trains), the skill after each step's decision (``after``: name, global step,
    hash), and every skill the checkpoint knows by hash."""

    root: str
    initial: str
    best: str
    final: str
    best_step: int
    after: tuple[tuple[str, int, str], ...]
    known: tuple[str, ...]

    @classmethod
    def of(cls, state: TrainerState, root: str = "") -> Versions:
        current, after = state.initial_hash, []
        for r in state.history:
            if r.step == 1:  # the skill the epoch started from, after its slow update
                current = state.epoch_start.get(str(r.epoch), current)
            if r.decision in ACCEPTED and r.candidate_hash:
                current = r.candidate_hash
            after.append((step_name(r.epoch, r.step), r.global_step, current))
        known = {key.partition(":")[2] for key in state.scores}
        known |= {state.initial_hash, state.best_hash, state.current_hash}
        return cls(root, state.initial_hash, state.best_hash, state.current_hash,
                   state.best_step, tuple(after), tuple(sorted(known)))

    def resolve(self, name: str) -> tuple[str, str]:
        """(a label for the diff's header, the hash) of the version called ``name``."""
        fixed = {"initial": (self.initial, ""),
                 "best": (self.best, f", step {self.best_step}" if self.best_step else ""),
                 "final": (self.final, "")}
        if name in fixed:
            digest, where = fixed[name]
            return f"{name}{where} ({digest[:8]})", digest
        found = re.fullmatch(r"e(\d+)-s(\d+)", name)
        for label, g, digest in self.after:
            if (found and label == step_name(int(found[1]), int(found[2]))) or (
                    name.isdigit() and int(name) == g):
                return f"after {label}, step {g} ({digest[:8]})", digest
        prefix = name.lower()
        if len(prefix) >= 4 and re.fullmatch(r"[0-9a-f]+", prefix):
            matches = [d for d in self.known if d.startswith(prefix)]
            if len(matches) == 1:
                return f"skill {matches[0][:8]}", matches[0]
            if matches:
                raise SkillgradError(
                    f"skill-hash prefix {name!r} matches {len(matches)} skill versions in "
                    f"{self.root}: {', '.join(d[:12] for d in matches)}; give more characters")
        raise SkillgradError(f"no skill version {name!r} in {self.root}; the names are "
                             f"{self.names()}")

    def names(self) -> str:
        """The names that exist, in words (for the refusal of one that does not)."""
        steps = "no finished step yet"
        if len(self.after) <= 6:
            steps = ", ".join(f"{n} ({g})" for n, g, _ in self.after) or steps
        elif self.after:
            (first, g0, _), (last, g1, _) = self.after[0], self.after[-1]
            steps = f"{first} ... {last} (or {g0}-{g1})"
        hashes = ", ".join(d[:8] for d in self.known[:8])
        more = f" and {len(self.known) - 8} more" if len(self.known) > 8 else ""
        return (f"initial, best, final; a step: {steps}; or a skill-hash prefix (4 or more "
                f"characters) of {hashes}{more}")


def load_versions(root: Path, *names: str) -> list[tuple[str, str]]:
    """(label, text) of each named skill version of the run in ``root``."""
    run = RunDir(root)
    versions = Versions.of(load_state(run), str(root))
    found = [versions.resolve(name) for name in names]  # every name checked before reading
    return [(label, run.load_skill(digest)) for label, digest in found]


# ----------------------------------------------------------------------------- compare


@dataclass(frozen=True)
class Column:
    """One run (or one skill file scored on a config's test split) in ``compare``. For a
    skill file its score stands in ``test['best']``. ``per_task``: the best skill's
    (hard, soft) per test task, None when there are no test results (``note`` says why)."""

    label: str
    source: str
    kind: str  # run or skill
    about: str  # where the run stands, or how many tasks the skill was scored on
    test: dict[str, dict[str, float] | None]
    models: dict[str, dict[str, float]]
    decisions: dict[str, int] | None = None
    note: str = ""
    per_task: dict[str, tuple[float, float]] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Gain:
    """The paired gain of ``label``'s best skill over ``against``'s on their ``n`` shared
    test tasks: (mean, low, high) of the 95% bootstrap interval, per metric."""

    label: str
    against: str
    n: int
    hard: tuple[float, float, float] | None = None
    soft: tuple[float, float, float] | None = None
    note: str = ""


def column_label(i: int) -> str:
    """The label of the ``i``-th run (or skill) compared: A, B, ..., then R27, R28, ..."""
    return chr(ord("A") + i) if i < 26 else f"R{i + 1}"


def run_column(label: str, root: Path) -> Column:
    run = RunDir(root)
    state = load_state(run)
    test = {name: _score(state, "test", digest) for name, digest in (
        ("initial", state.initial_hash), ("best", state.best_hash),
        ("final", state.current_hash))}
    per_task = per_task_results(run.eval_dir("test", state.best_hash))
    config = run.read_config()
    evaluation = (config.get("evaluation") or {}) if isinstance(config, dict) else {}
    note = "" if per_task is not None else "no test results " + (
        "(evaluation.eval_test is off)" if evaluation.get("eval_test") is False
        else "(the run has not reached its final evaluation)" if state.phase != "done"
        else "of its best skill in its evals folder")
    counts = Counter(r.decision for r in state.history)
    decisions = {"accept": counts["accept"] + counts["accept_new_best"],
                 "reject": counts["reject"], "refused": counts["refused"],
                 "skip": counts["skip"]}
    return Column(label, str(root), "run", state.position(), test,
                  _costs(model_usage(state.meter)), decisions, note, per_task)


def skill_column(label: str, path: Path, summary: dict[str, Any], folder: Path) -> Column:
    """A skill file scored by :func:`skillgrad.evaluate.evaluate_skill` into ``folder``."""
    score = {"hard": summary["hard"], "soft": summary["soft"], "n": summary["n"]}
    return Column(label, str(path), "skill", f"scored on {summary['n']} test tasks",
                  {"initial": None, "best": score, "final": None},
                  _costs(summary.get("models", {})), per_task=per_task_results(WorkDir(folder)))


def per_task_results(folder: WorkDir) -> dict[str, tuple[float, float]] | None:
    """(hard, soft) per task of the rollouts in ``folder`` (None when it has none)."""
    rows = read_jsonl(folder.path / ROLLOUTS)
    return {str(r["task_id"]): (float(r["hard"]), float(r["soft"])) for r in rows} or None


def _costs(usage: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {role: {"calls": u["calls"], "tokens": u["prompt_tokens"] + u["completion_tokens"],
                   "cost": u["cost"]} for role, u in usage.items()}


def gains(columns: Sequence[Column]) -> list[Gain]:
    """Each column after the first against the first, on their shared test tasks."""
    first, out = columns[0], []
    for col in columns[1:]:
        theirs, ours = first.per_task, col.per_task
        if theirs is None or ours is None:
            missing = [f"{c.label}: {c.note}" for c in (first, col) if c.per_task is None]
            out.append(Gain(col.label, first.label, 0, note="; ".join(missing)))
            continue
        shared = sorted(set(theirs) & set(ours))
        if not shared:
            out.append(Gain(col.label, first.label, 0, note="no shared test tasks"))
            continue
        per_metric = [paired_interval([ours[t][m] - theirs[t][m] for t in shared])
                      for m in (0, 1)]
        out.append(Gain(col.label, first.label, len(shared), per_metric[0], per_metric[1]))
    return out


def paired_interval(gains: Sequence[float], *, samples: int = 2000, seed: int = 0,
                    level: float = 0.95) -> tuple[float, float, float]:
    """The mean of the per-task paired ``gains`` and its percentile bootstrap interval
    (tasks resampled with replacement, seeded: the same gains give the same interval)."""
    if not gains:
        return math.nan, math.nan, math.nan
    n = len(gains)
    rng = random.Random(seed)
    means = sorted(sum(gains[rng.randrange(n)] for _ in range(n)) / n for _ in range(samples))
    low = means[max(0, math.floor((1 - level) / 2 * samples))]
    high = means[min(samples, math.ceil((1 + level) / 2 * samples)) - 1]
    return sum(gains) / n, low, high
