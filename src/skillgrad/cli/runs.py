"""``skillgrad show`` and ``diff``: the commands that inspect runs (``compare`` is
:mod:`.compare`'s). They print what :mod:`skillgrad.runview` reads from run directories,
wrapped to the terminal's width (80 columns when the output is not a terminal); ``--json``
prints the same for scripts."""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from skillgrad.errors import SkillgradError

if TYPE_CHECKING:
    from skillgrad.runview import (
        EditView,
        EpochView,
        RolloutsView,
        RunView,
        StepView,
    )

RunArg = Annotated[Path, typer.Argument(help="A run directory.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (for scripts).")]
MAX_WIDTH = 100  # prose reads badly wider than this, even on a wide terminal


def show_command(
    run_dir: RunArg,
    step: Annotated[Optional[str], typer.Argument(  # noqa: UP045 - typer needs Optional
        metavar="[STEP]", help="With --rollouts: only this step (e01-s002, or its global "
        "number): its training batch, its screen, its candidate's selection evaluation and the "
        "gate's second look; or one part: \"e01-s002 screen\", \"e01-s002 second look\".")] = None,
    rollouts: Annotated[bool, typer.Option(
        "--rollouts", help="Show what the target answered: each task, the reply, the expected "
        "answer, the score and the reason, failed first.")] = False,
    skill: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--skill", help="With --rollouts: only this skill version's rollouts (initial, best, "
        "final, a step, a hash prefix).")] = None,
    split: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--split", help="With --rollouts: only train, selection or test.")] = None,
    failed: Annotated[bool, typer.Option(
        "--failed", help="With --rollouts: only the rollouts that failed.")] = False,
    json_: JsonOpt = False,
) -> None:
    """Show a run, also while it trains: one block per step with each edit and what became
    of it (applied, applied fuzzily, skipped, refused) and the gate's decision and reason,
    then the best step and the totals. With --rollouts: what the target answered."""
    from skillgrad.runview import jsonable, read_rollouts, read_run

    if rollouts:
        found = read_rollouts(run_dir, step=step, skill=skill, split=split, failed_only=failed)
        data: Any = found
        lines = rollout_lines(found, terminal_width())
    else:
        given = [name for name, value in (("STEP", step), ("--skill", skill),
                                          ("--split", split), ("--failed", failed)) if value]
        if given:
            raise SkillgradError(f"show: {', '.join(given)} is for the rollouts; add "
                                 "--rollouts (skillgrad show RUN --rollouts [STEP])")
        data = view = read_run(run_dir)
        lines = show_lines(view, terminal_width())
    if json_:
        typer.echo(json.dumps(jsonable(data), indent=2, ensure_ascii=False))
        return
    for line in lines:
        typer.echo(line)


def diff_command(
    run_dir: RunArg,
    version_a: Annotated[Optional[str], typer.Argument(  # noqa: UP045 - typer needs Optional
        help="initial, best, final, a step (e01-s003, or its global step number: the skill "
             "after that step's decision) or a skill-hash prefix.")] = None,
    version_b: Annotated[Optional[str], typer.Argument(  # noqa: UP045
        help="The version to compare it with (the same kinds of name).")] = None,
) -> None:
    """Print a unified diff between two skill versions of a run (initial -> best by default),
    coloured on a terminal."""
    from skillgrad.package import package_diff
    from skillgrad.runview import load_versions

    if (version_a is None) != (version_b is None):
        raise SkillgradError("diff: give two versions (or none, for initial -> best)")
    (label_a, text_a), (label_b, text_b) = load_versions(run_dir, version_a or "initial",
                                                         version_b or "best")
    lines = package_diff(text_a, text_b, label_a, label_b)
    if not lines:
        typer.echo(f"{label_a} and {label_b} are the same skill", err=True)
    for line in lines:
        typer.secho(line, fg=_diff_colour(line), bold=line.startswith(("---", "+++")) or None)


def _diff_colour(line: str) -> str | None:
    if line.startswith(("---", "+++")):
        return None
    return {"+": "green", "-": "red", "@": "cyan"}.get(line[:1])


def terminal_width() -> int:
    """The terminal's width, at least 40 and at most :data:`MAX_WIDTH` (80 off a terminal)."""
    return max(40, min(MAX_WIDTH, shutil.get_terminal_size((80, 24)).columns))


# ----------------------------------------------------------------------------- text


def wrap(text: str, width: int, indent: str = "", hang: str | None = None) -> list[str]:
    """``text`` wrapped to ``width``: the first line after ``indent``, the others after
    ``hang`` (``indent`` when not given); each of its own lines wrapped on its own."""
    hang = indent if hang is None else hang
    out: list[str] = []
    for i, line in enumerate(text.splitlines() or [""]):
        out += textwrap.wrap(line, width, initial_indent=indent if i == 0 else hang,
                             subsequent_indent=hang, break_on_hyphens=False) or [hang.rstrip()]
    return out


def table(header: Sequence[str], rows: Sequence[Sequence[str]], left: set[int]) -> list[str]:
    """Columns as wide as their widest cell, two spaces apart; ``left``: the columns aligned
    left (the others right)."""
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]

    def line(row: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths, strict=True))).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


# ----------------------------------------------------------------------------- show


def show_lines(view: RunView, width: int) -> list[str]:
    """What ``skillgrad show`` prints: the overview, a block per step (the start-of-epoch
    work before its epoch's first step), the best step and the totals."""
    out = wrap(f"{view.root}: {view.position}", width)
    out += wrap(f"update mode: {view.mode}; gate: {view.gate_rule or '-'}", width)
    out += ["", *_overview(view.steps)]
    epochs = {e.epoch: e for e in view.epochs}
    for s in view.steps:
        if s.step == 1 and s.epoch in epochs:
            out += ["", *_epoch_block(epochs.pop(s.epoch), width)]
        out += ["", *_step_block(s, width)]
    for e in epochs.values():
        out += ["", *_epoch_block(e, width)]
    initial, best = view.selection["initial"], view.selection["best"]
    out += ["", f"best step: {view.best_step} (val {_num(best)}, initial {_num(initial)})"]
    return out + [w for line in _totals(view.totals) for w in wrap(line, width, hang="  ")]


def rollout_lines(view: RolloutsView, width: int) -> list[str]:
    """What the target answered, a block per rollout: where it ran, the score, the task, the
    reply, the expected answer, the reason and the failure mode a judge named (each cut to a
    few lines), failed first."""
    asked = ", ".join(f"{k} {v}" for k, v in view.filters.items())
    failed = sum(r.failed for r in view.rows)
    head = f"{view.root}: {len(view.rows)} rollouts ({failed} failed)"
    out = [head + (f"; {asked}" if asked else "")]
    if not view.rows:
        where = ", ".join(view.sources) or "none yet"
        out.append(f"no rollouts match; the run has rollouts of: {where}")
    for r in view.rows:
        verdict = "FAILED" if r.failed else "solved"
        whose = f" ({r.role})" if r.role else ""
        out += ["", f"{r.source} · task {r.task_id} · skill {r.skill[:8]}{whose} · "
                    f"score {r.hard:g}/{r.soft:.2f} · {verdict}"
                    + (f" · {r.turns} turns" if r.turns > 1 else "")]
        for label, text, lines in (("task", r.task, 3), ("reply", r.reply, 4),
                                   ("answer", r.answer if r.answer != r.reply.strip() else "", 1),
                                   ("expected", r.expected, 2), ("reason", r.reason, 3),
                                   ("mode", r.failure_mode, 2)):
            if text.strip():
                out += _clipped(label, text, width, lines)
    return out


def _clipped(label: str, text: str, width: int, most: int) -> list[str]:
    """``label: text`` wrapped under a hanging indent, cut to ``most`` lines (the task's end,
    where its question is; the start of the others)."""
    indent = " " * 12
    body = wrap(" ".join(text.split()), width, indent)
    if len(body) > most:
        cut = len(body) - most
        body = ([indent + "…", *body[-most:]] if label == "task"
                else [*body[:most], f"{indent}… ({cut} more lines; --json has all)"])
    first = f"  {label + ':':<10}"
    return [first + body[0][len(indent):], *body[1:]]


def _overview(steps: Sequence[StepView]) -> list[str]:
    if not steps:
        return ["no step has finished yet"]
    rows = []
    for s in steps:
        r = s.record
        if r is None:
            rows.append([s.name, "", "", "", "", "", "unfinished"])
            continue
        val = "-" if r.candidate_score is None else \
            f"{_num(r.current_score)}->{_num(r.candidate_score)}"
        applied = r.n_applied + r.n_fuzzy
        rows.append([f"{r.global_step} {s.name}",
                     f"{applied}/{r.n_selected}" if r.n_selected else str(applied),
                     str(r.n_skipped), str(r.n_refused), f"{r.train_hard:.3f}", val,
                     r.decision + (" *" if s.best else "")])
    header = ["step", "applied", "skipped", "refused", "train", "val", "decision"]
    return table(header, rows, left={0, 6})


def _step_block(s: StepView, width: int) -> list[str]:
    r = s.record
    if r is None:
        calls = f" ({s.calls} model calls answered)" if s.calls else ""
        head = (f"{s.name}: not finished (in progress, or interrupted: training again resumes "
                f"it); its folder holds {', '.join(s.files) or 'nothing yet'}{calls}")
        return wrap(head, width, hang="  ") + _edit_lines(s.edits, width)
    budget = str(r.budget)
    if r.rate is not None and r.rate.mode != "fixed":
        budget = f"{r.rate.applied} ({r.rate.mode}, schedule {r.rate.schedule_budget})"
    head = (f"{s.name} (step {r.global_step}, epoch {r.epoch}): train {r.train_hard:.3f} hard, "
            f"{r.train_soft:.3f} soft; budget {budget}; {r.n_proposed} proposed for the candidate")
    if r.rate is not None and r.rate.error:
        head += f"; the learning-rate reply could not be used ({r.rate.error})"
    if r.n_parse_errors:
        head += f"; {r.n_parse_errors} analyst replies could not be used"
    if r.skill_loads:
        head += (f"; the agent loaded the skill in {r.skill_loads[0]} of {r.skill_loads[1]} "
                 "training tasks")
    if r.references_read:
        head += "; " + reads_line(r.references_read)
    out = wrap(head, width, hang="  ")
    if r.losses:  # where proposals were lost or put back on the way to the candidate
        out += wrap(f"on the way to the candidate: {'; '.join(r.losses)}", width, "  ", "    ")
    if r.trigger:  # the agent seldom loaded it: what became of the skill's description
        out += wrap(f"description (when the agent loads the skill): {r.trigger}", width, "  ",
                    "    ")
    if r.unusable:
        out += wrap(f"no usable analyst reply: {r.unusable}", width, "  ", "    ")
    if s.proposals:
        out += wrap("proposals screened on the step's training tasks:", width, "  ")
        for p in s.proposals:
            score = "" if p.score is None else f" {p.score:.3f}"
            line = f"{p.index}. {p.status}{score}{' (chosen)' if p.chosen else ''}"
            line += f": {p.reason}" if p.reason else ""
            out += wrap(line, width, "    ", "       ")
            out += [w for e in p.edits for w in wrap(e, width, "       ")]
    of = f" of proposal {s.edits_of}" if s.proposals and s.edits_of is not None else ""
    out += _edit_lines(s.edits, width, of)
    if s.gate is not None:
        out += wrap(_gate_line(s.gate.decision, s.gate.current, s.gate.candidate,
                               s.gate.reason, s.gate.screened_out), width, "  ", "    ")
    return out


_OUTCOMES = {"applied": "applied", "rewritten": "carried out by the rewrite",
             "added": "added to the appendix", "selected": "selected"}


def _edit_lines(edits: Sequence[EditView], width: int, of: str = "") -> list[str]:
    if not edits:
        return []
    out = wrap(f"edits{of}:", width, "  ")
    groups: list[list[EditView]] = []  # the same edit with the same fate, proposed again
    for e in edits:
        if groups and groups[-1][0] == e:
            groups[-1].append(e)
        else:
            groups.append([e])
    for i, group in enumerate(groups, 1):
        e = group[0]
        what = f'{e.op} "{e.anchor}"' if e.anchor else e.op
        times = f" ({len(group)} times)" if len(group) > 1 else ""
        out += wrap(f"{i}. {what}{times}: {_outcome(e)}", width, "    ", "       ")
        if e.text:
            out += wrap(e.text, width, "       ")
    return out


def _outcome(e: EditView) -> str:
    if e.outcome in _OUTCOMES:
        return _OUTCOMES[e.outcome]
    if e.outcome == "applied_fuzzy":
        similarity = "" if e.similarity is None else f" (similarity {e.similarity:.2f})"
        return f'applied fuzzily, the anchor matched "{e.matched}"{similarity}'
    words = {"not_selected": "not selected", "rewrite_failed": "not carried out, the rewrite "
             "failed"}.get(e.outcome, e.outcome)
    if e.reason.startswith(words):  # "refused before rollout: ..."
        return e.reason
    return f"{words}: {e.reason}" if e.reason else words


def _gate_line(decision: str, current: float | None, candidate: float | None, reason: str,
               screened_out: bool = False, what: str = "gate") -> str:
    line = f"{what}: {decision}" + (" (screened out)" if screened_out else "")
    if candidate is not None:
        line += f", selection {_num(current)} -> {_num(candidate)}"
    return line + (f": {reason}" if reason else "")


def _epoch_block(e: EpochView, width: int) -> list[str]:
    u = e.update
    if u is None:
        return wrap(f"before epoch {e.epoch}: not finished (in progress, or interrupted)", width)
    p = u.pairs
    head = (f"before epoch {e.epoch}: pairs improved {p.improved}, regressed {p.regressed}, "
            f"persistent failure {p.persistent_failure}, stable success {p.stable_success}")
    head += "; meta skill updated" if u.meta_skill_updated else ""
    out = wrap(head, width, hang="  ")
    d = u.slow_update
    if d is not None:
        out += wrap(_gate_line(d.decision, d.current, d.candidate, d.reason,
                               what="slow update"), width, "  ", "    ")
        if u.guidance:
            out += wrap("guidance:", width, "    ") + wrap(u.guidance, width, "      ")
    if u.error:
        out += wrap(f"error: {u.error}", width, "  ", "    ")
    return out


def _totals(t: dict[str, Any]) -> list[str]:
    """The lines ``train`` also ends with: test scores, decisions, unusable replies, model
    usage, the gate switched off, and where the best skill is."""
    out = []
    if t["test"]:
        out.append("test (hard/soft): " + ", ".join(
            f"{k} {v['hard']:.3f}/{v['soft']:.3f}" for k, v in t["test"].items()))
    out.append("decisions: " + (", ".join(f"{k} {v}" for k, v in t["decisions"].items())
                                or "none"))
    ed = t["edits"]
    out.append(f"edits: {ed['proposed']} proposed, {ed['applied'] + ed['applied_fuzzy']} "
               f"applied ({ed['applied_fuzzy']} fuzzily), {ed['skipped']} skipped, "
               f"{ed['refused']} refused")
    if t["parse_errors"]:
        line = f"optimizer: {t['parse_errors']} analyst replies could not be used (parse errors)"
        if t["unusable_steps"]:
            last = t["last_unusable"]
            line += (f"; {t['unusable_steps']} steps without a usable reply, the last (step "
                     f"{last['step']}): {last['error']}")
        out.append(line)
    out += [usage_line(role, u) for role, u in t["models"].items()]
    if not t["use_gate"]:
        out.append("note: the gate was OFF for this run")
    out.append(f"best skill: {t['best_skill']}")
    return out + ([f"summary: {t['summary']}"] if t["summary"] else [])


def usage_line(role: str, u: dict[str, Any]) -> str:
    """One role's calls, tokens, time, cost, and every attempt sent by outcome."""
    cost = f", cost {u['cost']:.4f}" if u.get("cost") else ""
    cached = f" ({u['cached']} from cache)" if u.get("cached") else ""
    line = (f"{role}: {u['calls']} calls{cached}, {u['prompt_tokens']} prompt + "
            f"{u['completion_tokens']} completion tokens, {u['seconds']:.0f} s{cost}")
    attempts = u.get("attempts") or {}
    if attempts:
        kinds = ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in attempts.items())
        line += f"; {sum(attempts.values())} attempts ({kinds})"
    if u.get("cut_off_dropped"):
        line += f"; {u['cut_off_dropped']} replies dropped, cut off at the token limit"
    return line


def reads_line(reads: dict[str, int]) -> str:
    """How often an agent opened each file of its skill package ("references/a.md 2 of 3,
    references/b.md never"), a file nobody read named as such."""
    total = reads.get("rollouts", 0)
    parts = [f"{path} {'never' if n == 0 else f'{n} of {total}'}"
             for path, n in reads.items() if path != "rollouts"]
    return "files of the skill the agent read: " + ", ".join(parts)

