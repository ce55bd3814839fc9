"""What the target answered (``skillgrad show RUN --rollouts`` and the dashboard's rollouts
page): every scored rollout of a run, the training batches of its steps (with what each
screened candidate and the gate's second look answered) and the evaluations of its skills on
the selection and test splits, with the task, the reply, the expected answer, the score and
the reason. Failed rollouts come first: they are what one reads a run for."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from skillgrad.errors import SkillgradError
from skillgrad.rundir import LABELLED, ROLLOUTS, RunDir, read_jsonl
from skillgrad.runview.common import load_state, step_name
from skillgrad.runview.versions import Versions

# The split names of the evaluation folders, as the rest of skillgrad says them.
SPLIT_NAMES = {"train": "train", "val": "selection", "test": "test"}
_EVAL_FOLDER = re.compile(r"(train|val|test)-([0-9a-f]{16})")
# The sources of a step besides its batch, as "e01-s002 screen" names one.
_STEP_PARTS = tuple(LABELLED)


@dataclass(frozen=True)
class RolloutView:
    """One scored rollout. ``step`` names the training step whose batch it was (empty for an
    evaluation); ``skill`` is the full hash of the skill it ran with."""

    source: str  # "e01-s002" (a step's batch), "e01-s002 screen" (the step's candidates, and
    # the current skill on a tie's extra tasks), "e01-s002 second look" (the gate's second
    # look, the candidate and the current skill on unseen training tasks) or "selection" /
    # "test" (an evaluation)
    step: str
    split: str  # train, selection, test
    skill: str
    task_id: str
    task: str  # the task as the target was shown it (its first user message)
    reply: str  # the target's last reply
    answer: str  # what the scorer read from the reply
    expected: str
    hard: float
    soft: float
    reason: str
    turns: int
    # How a failed rollout of a training step went wrong, as gradient.failure_judge named it
    # ("repeated itself: 'ACTION: …'"), or why it could not be named; "" when not judged.
    failure_mode: str = ""
    # Whose the skill is where a source holds several: "proposal 2", "current skill", ...
    role: str = ""
    # Whether the skill is a version of the run one can open (``diff``, the skill page); a
    # screened candidate that never reached the gate is not: screen.json holds its edits.
    versioned: bool = True

    @property
    def failed(self) -> bool:
        return self.hard < 1.0


@dataclass(frozen=True)
class RolloutsView:
    root: str
    rows: tuple[RolloutView, ...]
    filters: dict[str, str]  # what was asked for (step, skill, split), in words
    sources: tuple[str, ...]  # every source the run has, for a chooser


def read_rollouts(root: Path, *, step: str | None = None, skill: str | None = None,
                  split: str | None = None, failed_only: bool = False) -> RolloutsView:
    """The rollouts of the run in ``root``, failed first, then in the order they ran.

    ``step``: a step's name (``e01-s002``) or global number, its training batch, its
    screen's rollouts, the evaluation of the candidate it sent to the gate and the gate's
    second look at it; or one source of a step: ``e01-s002 screen``, ``e01-s002 second
    look``; ``skill``: a version name as ``skillgrad diff`` takes it (initial, best, final,
    a step, a hash prefix); ``split``: train, selection or test. An unknown name is a
    :class:`SkillgradError` listing the known ones."""
    run = RunDir(root)
    state = load_state(run)
    versions = Versions.of(state, str(root))
    candidates = {step_name(r.epoch, r.step): r.candidate_hash for r in state.history}
    before = _skill_before(versions)
    known = {*versions.known, *(c for c in candidates.values() if c)}
    every = list(_all(run, before, known, versions.final))
    filters: dict[str, str] = {}
    rows = every
    if step is not None:
        said, _, part = step.strip().partition(" ")
        name = _step_label(versions, said)
        candidate = candidates.get(name)
        if part:
            if part not in _STEP_PARTS:
                raise SkillgradError(
                    f"no rollouts {step!r} in {root}; a step's are its name ({name}) and "
                    + ", ".join(f"{name} {p}" for p in _STEP_PARTS))
            name = f"{name} {part}"
            rows = [r for r in rows if r.source == name]
        else:
            rows = [r for r in rows if r.step == name or (r.split == "selection" and candidate
                                                          and r.skill == candidate)]
        filters["step"] = name
    if skill is not None:
        _, digest = versions.resolve(skill)
        rows = [r for r in rows if r.skill == digest]
        filters["skill"] = f"{skill} ({digest[:8]})"
    if split is not None:
        wanted = SPLIT_NAMES.get(split, split)
        if wanted not in SPLIT_NAMES.values():
            raise SkillgradError(f"--split: {split!r} is not a split; the splits are train, "
                                 "selection and test")
        rows = [r for r in rows if r.split == wanted]
        filters["split"] = wanted
    if failed_only:
        rows = [r for r in rows if r.failed]
        filters["failed"] = "only"
    ordered = sorted(range(len(rows)), key=lambda i: (not rows[i].failed, i))
    sources = tuple(dict.fromkeys(r.source for r in every))
    return RolloutsView(str(root), tuple(rows[i] for i in ordered), filters, sources)


def _skill_before(versions: Versions) -> dict[str, str]:
    """The skill each step's batch ran with: the one after the step before it."""
    out, current = {}, versions.initial
    for name, _, after in versions.after:
        out[name] = current
        current = after
    return out


def _all(run: RunDir, before: dict[str, str], known: set[str],
         current: str) -> Iterator[RolloutView]:
    for folder in run.step_dirs():
        name = folder.path.name
        skill = before.get(name, current)  # the step in progress runs with the current skill
        for row in read_jsonl(folder.path / ROLLOUTS):
            yield _view(row, name, name, "train", skill)
        # The screen (each candidate, and the current skill on a tie's extra tasks) and the
        # gate's second look (the candidate and the current skill on unseen tasks).
        for part, file in LABELLED.items():
            for row in read_jsonl(folder.path / file):
                digest = str(row.get("skill", ""))
                yield replace(_view(row, f"{name} {part}", name, "train", digest),
                              role=str(row.get("role", "")), versioned=digest in known)
    evals = run.root / "evals"
    if not evals.is_dir():
        return
    order = list(SPLIT_NAMES)
    found_folders = [(found, path) for path in sorted(evals.iterdir())
                     if (found := _EVAL_FOLDER.fullmatch(path.name)) is not None]
    for found, path in sorted(found_folders, key=lambda pair: order.index(pair[0][1])):
        split = SPLIT_NAMES[found[1]]
        digest = next((d for d in known if d.startswith(found[2])), found[2])
        for row in read_jsonl(path / ROLLOUTS):
            yield _view(row, split, "", split, digest)


def _view(row: dict[str, Any], source: str, step: str, split: str, skill: str) -> RolloutView:
    messages = [m for m in row.get("messages") or () if isinstance(m, dict)]
    task = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
    reply = next((_text(m.get("content")) for m in reversed(messages)
                  if m.get("role") == "assistant" and _text(m.get("content")).strip()), "")
    return RolloutView(source=source, step=step, split=split, skill=skill,
                       task_id=str(row.get("task_id", "")), task=task, reply=reply,
                       answer=str(row.get("answer", "")), expected=str(row.get("expected", "")),
                       hard=float(row.get("hard", 0.0)), soft=float(row.get("soft", 0.0)),
                       reason=str(row.get("reason", "")), turns=int(row.get("turns", 1)),
                       failure_mode=_failure_mode(row))


def _failure_mode(row: dict[str, Any]) -> str:
    """The judge's verdict of a rollout as one line ("" when it has none)."""
    metadata = row.get("metadata")
    verdict = metadata.get("failure_mode") if isinstance(metadata, dict) else None
    if not isinstance(verdict, dict):
        return ""
    if isinstance(verdict.get("mode"), str):
        evidence = str(verdict.get("evidence") or "")
        return verdict["mode"] + (f": {evidence!r}" if evidence else "")
    return f"not named: {verdict.get('error', 'no verdict')}"


def _text(content: Any) -> str:
    """A message's content as text (a multimodal one's text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content
                         if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _step_label(versions: Versions, name: str) -> str:
    found = re.fullmatch(r"e(\d+)-s(\d+)", name)
    for label, g, _ in versions.after:
        if (found and label == step_name(int(found[1]), int(found[2]))) or (
                name.isdigit() and int(name) == g):
            return label
    if found:  # the step in progress has no record yet, but it has rollouts
        return step_name(int(found[1]), int(found[2]))
    raise SkillgradError(f"no step {name!r} in {versions.root}; the names are "
                         f"{versions.names().split('; or ')[0]}")
