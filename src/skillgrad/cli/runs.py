"""``skillgrad show``, ``diff`` and ``compare``: the commands that inspect runs. They print
what :mod:`skillgrad.runview` reads from run directories, wrapped to the terminal's width
(80 columns when the output is not a terminal); ``--json`` prints the same for scripts."""

from __future__ import annotations

import difflib
import json
import shutil
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from skillgrad.cli.config import SetOpt
from skillgrad.errors import SkillgradError

if TYPE_CHECKING:
    from skillgrad.runview import Column, EditView, EpochView, Gain, RunView, StepView

RunArg = Annotated[Path, typer.Argument(help="A run directory.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document (for scripts).")]
MAX_WIDTH = 100  # prose reads badly wider than this, even on a wide terminal


def show_command(run_dir: RunArg, json_: JsonOpt = False) -> None:
    """Show a run, also while it trains: one block per step with each edit and what became
    of it (applied, applied fuzzily, skipped, refused) and the gate's decision and reason,
    then the best step and the totals."""
    from skillgrad.runview import jsonable, read_run

    view = read_run(run_dir)
    if json_:
        typer.echo(json.dumps(jsonable(view), indent=2, ensure_ascii=False))
        return
    for line in show_lines(view, _width()):
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
    from skillgrad.runview import load_versions

    if (version_a is None) != (version_b is None):
        raise SkillgradError("diff: give two versions (or none, for initial -> best)")
    (label_a, text_a), (label_b, text_b) = load_versions(run_dir, version_a or "initial",
                                                         version_b or "best")
    lines = list(difflib.unified_diff(text_a.splitlines(), text_b.splitlines(), label_a,
                                      label_b, lineterm=""))
    if not lines:
        typer.echo(f"{label_a} and {label_b} are the same skill", err=True)
    for line in lines:
        typer.secho(line, fg=_diff_colour(line), bold=line.startswith(("---", "+++")) or None)


def _diff_colour(line: str) -> str | None:
    if line.startswith(("---", "+++")):
        return None
    return {"+": "green", "-": "red", "@": "cyan"}.get(line[:1])


def compare_command(
    sources: Annotated[list[Path], typer.Argument(
        metavar="SOURCE", help="Two or more run directories (with --config: skill files).")],
    config: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--config", help="Score skill files on this config's test split instead (as "
        "`skillgrad eval` does, into its default folders).")] = None,
    set_: SetOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Compare runs (or skill files): test scores, cost per role, the gate's decisions, and
    for each after the first a paired bootstrap 95% interval of its best skill's test gain
    over the first's, on their shared test tasks."""
    from skillgrad.runview import column_label, gains, jsonable, run_column

    if len(sources) < 2:
        raise SkillgradError("compare: give two or more run directories (or --config CONFIG "
                             "and two or more skill files)")
    if set_ and config is None:
        raise SkillgradError("compare: --set applies to the --config the skill files are "
                             "scored with; runs keep their own config")
    labels = [column_label(i) for i in range(len(sources))]
    if config is None:
        columns = [run_column(label, path) for label, path in zip(labels, sources, strict=True)]
    else:
        columns = _score_skills(config, set_ or [], labels, sources)
    found = gains(columns)
    if json_:
        data = {"columns": [{**{k: v for k, v in jsonable(c).items() if k != "per_task"},
                             "test_tasks": len(c.per_task or {})} for c in columns],
                "gains": jsonable(found)}
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    for line in compare_lines(columns, found, _width()):
        typer.echo(line)


def _score_skills(config: Path, overrides: list[str], labels: list[str],
                  paths: Sequence[Path]) -> list[Column]:
    from skillgrad.cli.config import compat_lines
    from skillgrad.config import load_config
    from skillgrad.evaluate import evaluate_skill
    from skillgrad.runview import skill_column
    from skillgrad.skill import read_skill_file, skill_hash

    resolved = load_config(config, overrides)
    for line in compat_lines(resolved):
        typer.echo(line, err=True)
    texts = [read_skill_file(p) for p in paths]  # every file checked before any model call
    columns = []
    for label, path, text in zip(labels, paths, texts, strict=True):
        folder = Path("runs") / f"eval-{config.stem}-test-{skill_hash(text)[:8]}"
        try:
            summary = evaluate_skill(resolved, text, "test", folder)
        except KeyboardInterrupt:
            sys.stderr.write("error: interrupted; run the same command again to go on (the "
                             "model calls answered so far are kept)\n")
            raise typer.Exit(130) from None
        typer.echo(f"{label}: {path} scored on test (written: {folder})", err=True)
        columns.append(skill_column(label, path, summary, folder))
    return columns


def _width() -> int:
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
            f"{r.train_soft:.3f} soft; budget {budget}; {r.n_proposed} proposed by the analysts")
    if r.rate is not None and r.rate.error:
        head += f"; the learning-rate reply could not be used ({r.rate.error})"
    if r.n_parse_errors:
        head += f"; {r.n_parse_errors} analyst replies could not be used"
    if r.skill_loads:
        head += (f"; the agent loaded the skill in {r.skill_loads[0]} of {r.skill_loads[1]} "
                 "training tasks")
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


# ----------------------------------------------------------------------------- compare


def compare_lines(columns: Sequence[Column], found: Sequence[Gain], width: int) -> list[str]:
    """The legend, the table (test scores hard/soft, cost per role, decisions) and the
    paired intervals."""
    out = [w for c in columns for w in wrap(
        f"{c.label}  {c.source} ({'skill file' if c.kind == 'skill' else 'run'}: {c.about})",
        width, hang="   ")]
    from skillgrad.runview import compare_rows, gain_line

    rows = compare_rows(columns)
    out += ["", *table(["", *(c.label for c in columns)], rows, left={0}), ""]
    out += wrap("test scores are hard/soft; a skill file's own score is its row 'test best'",
                width)
    for g in found:
        out += wrap(gain_line(g), width, hang="  ")
    return out
