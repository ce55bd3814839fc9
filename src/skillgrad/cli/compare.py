"""``skillgrad compare``: runs side by side (test scores, cost per role, the gate's
decisions, the config keys set differently, and the paired bootstrap interval of each best
skill's test gain over the first's), or skill files scored on one config's test split, side
by side. What :mod:`skillgrad.runview.compare` reads, laid out as :mod:`.runs` lays out
``show``."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from skillgrad.cli.config import SetOpt
from skillgrad.cli.runs import JsonOpt, table, terminal_width, wrap
from skillgrad.errors import SkillgradError

if TYPE_CHECKING:
    from skillgrad.runview import Column, ConfigDiff, Gain


def compare_command(
    sources: Annotated[list[Path], typer.Argument(
        metavar="SOURCE", help="Two or more run directories (with --config: skill files).")],
    config: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--config", help="Score skill files on this config's test split instead (as "
        "`skillgrad eval` does).")] = None,
    out: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--out", "-o", help="With --config: the folder the skill files' evaluations go in, one "
        "folder each (default: $SKILLGRAD_HOME/evals, else $XDG_CACHE_HOME/skillgrad/evals, "
        "else ~/.cache/skillgrad/evals); the same command again replays their model calls.")
    ] = None,
    set_: SetOpt = None,
    json_: JsonOpt = False,
) -> None:
    """Compare runs: test scores, cost per role, the gate's decisions, the config keys set
    differently, and for each after the first a paired bootstrap 95% interval of its best
    skill's test gain over the first's, on their shared test tasks. Or, with --config, skill
    files scored on that config's test split: their scores, cost per role and the same
    interval."""
    from skillgrad.runview import (
        column_label,
        config_diff,
        gains,
        jsonable,
        run_column,
        run_configs,
    )

    if len(sources) < 2:
        raise SkillgradError("compare: give two or more run directories (or --config CONFIG "
                             "and two or more skill files)")
    if set_ and config is None:
        raise SkillgradError("compare: --set applies to the --config the skill files are "
                             "scored with; runs keep their own config")
    if out is not None and config is None:
        raise SkillgradError("compare: --out is where the skill files scored with --config "
                             "are evaluated; runs are only read")
    labels = [column_label(i) for i in range(len(sources))]
    if config is None:
        columns = [run_column(label, path) for label, path in zip(labels, sources, strict=True)]
        differ = config_diff(labels, run_configs(sources))
    else:
        columns, differ = _score_skills(config, set_ or [], labels, sources, out), None
    found = gains(columns)
    if json_:
        data = {"columns": [{**{k: v for k, v in jsonable(c).items() if k != "per_task"},
                             "test_tasks": len(c.per_task or {})} for c in columns],
                "gains": jsonable(found), "config": jsonable(differ)}
        typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    for line in compare_lines(columns, found, terminal_width(), differ):
        typer.echo(line)


def _score_skills(config: Path, overrides: list[str], labels: list[str],
                  paths: Sequence[Path], out: Path | None) -> list[Column]:
    from skillgrad.cli.config import compat_lines
    from skillgrad.config import load_config
    from skillgrad.evaluate import evaluate_skill
    from skillgrad.package import read_skill
    from skillgrad.runview import priced_roles, skill_column

    resolved = load_config(config, overrides)
    for line in compat_lines(resolved):
        typer.echo(line, err=True)
    texts = [read_skill(p) for p in paths]  # every file checked before any model call
    priced = priced_roles(resolved.resolved()) or set()
    fingerprint = resolved.fingerprint()
    columns = []
    for label, path, text in zip(labels, paths, texts, strict=True):
        folder = eval_folder(out, config, fingerprint, text)
        try:
            summary = evaluate_skill(resolved, text, "test", folder)
        except KeyboardInterrupt:
            sys.stderr.write("error: interrupted; run the same command again to go on (the "
                             "model calls answered so far are kept)\n")
            raise typer.Exit(130) from None
        typer.echo(f"{label}: {path} scored on test (written: {folder})", err=True)
        columns.append(skill_column(label, path, summary, folder, priced))
    return columns


def eval_folder(out: Path | None, config: Path, fingerprint: str, skill: str) -> Path:
    """Where ``compare --config`` evaluates a skill file: a folder named after the config (its
    file's name and fingerprint) and the skill's hash, in ``out`` or else in skillgrad's cache
    folder's ``evals``. Not the working directory: comparing is no reason to leave folders
    there. The same config and skill find their folder again, and its journal answers the
    model calls made before (an interrupted or repeated comparison costs nothing again)."""
    from skillgrad.models.weights import home_dir
    from skillgrad.skill import skill_hash

    root = out if out is not None else home_dir() / "evals"
    return root / f"{config.stem}-{fingerprint[:8]}-test-{skill_hash(skill)[:8]}"


def compare_lines(columns: Sequence[Column], found: Sequence[Gain], width: int,
                  differ: ConfigDiff | None = None) -> list[str]:
    """The legend, the table (runs: test scores hard/soft, cost per role, decisions; skill
    files: test score hard/soft, cost per role), the paired intervals, and (runs) the config
    keys that differ."""
    from skillgrad.runview import compare_rows, gain_line

    out = [w for c in columns for w in wrap(
        f"{c.label}  {c.source} ({'skill file' if c.kind == 'skill' else 'run'}: {c.about})",
        width, hang="   ")]
    rows = compare_rows(columns)
    out += ["", *table(["", *(c.label for c in columns)], rows, left={0}), ""]
    out += wrap("test scores are hard/soft; cost is - where the role's model has no prices",
                width)
    for g in found:
        out += wrap(gain_line(g), width, hang="  ")
    return out if differ is None else [*out, "", *config_lines(differ, width)]


def config_lines(differ: ConfigDiff, width: int) -> list[str]:
    """The config keys whose values differ, as a table (one row per key, one cell per run;
    "-" where a run's config lacks the key), or a block per key when the table is wider than
    ``width``; "same config" when none does."""
    from skillgrad.runview import config_cell

    out = [w for label in differ.unread for w in wrap(
        f"{label}: its config.yaml could not be read; its keys are not compared", width)]
    if differ.same:
        return ["same config"]
    labels = [label for label in differ.labels if label not in differ.unread]
    if not differ.rows:
        return out + ([f"same config of {', '.join(labels)}"] if len(labels) > 1 else [])
    rows = [[r.key, *(config_cell(r.values[label]) if label in r.values else "-"
                      for label in labels)] for r in differ.rows]
    out.append(f"config keys that differ ({len(rows)}):")
    lines = table(["key", *labels], rows, left=set(range(len(labels) + 1)))
    if max(len(line) for line in lines) <= width:
        return out + lines
    for row in rows:
        out.append(row[0])
        for label, cell in zip(labels, row[1:], strict=True):
            out += wrap(cell, width, f"  {label}: ", " " * (len(label) + 4))
    return out
