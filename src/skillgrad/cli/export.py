"""``skillgrad export``: a skill of a run (``--version``) written as an agent loads it, a
skill folder or a section of a memory file, or installed where Claude Code or Codex looks
(:mod:`skillgrad.export` does the writing)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from skillgrad.errors import RunDirError, SkillgradError

if TYPE_CHECKING:
    from skillgrad.export import Exported
    from skillgrad.rundir import RunDir

MIN_PREFIX = 4  # the shortest skill-hash prefix taken as one (shorter digits are steps)
OptText = Optional[str]  # noqa: UP045 - typer needs Optional here


def _say(line: str) -> None:
    from skillgrad.console import say

    say(line)


def export_command(
    run: Annotated[Path, typer.Argument(help="A run directory.")],
    version: Annotated[str, typer.Option(
        "--version", help="initial, best, final, a step (e01-s003, or a global step number: "
        "the skill after that step) or a prefix of a skill's hash.")] = "best",
    fmt: Annotated[OptText, typer.Option(
        "--format", help="skill-folder (OUT/NAME/SKILL.md; the default) or agents-md (a "
        "section of the memory file OUT).")] = None,
    name: Annotated[OptText, typer.Option(
        "--name", help="The skill's name (default: the name in the skill's front matter, "
        "else the run folder's name, made valid).")] = None,
    description: Annotated[OptText, typer.Option(
        "--description", help="What the skill does and when to use it (default: the "
        "description in the skill's front matter; --install needs one).")] = None,
    describe: Annotated[bool, typer.Option(
        "--describe", help="Have the run's optimizer model (RUN/config.yaml) propose the "
        "description.")] = False,
    out: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--out", "-o", help="skill-folder: the folder the skill folder goes into (default: .); "
        "agents-md: the memory file (default: ./AGENTS.md).")] = None,
    keep_blocks: Annotated[bool, typer.Option(
        "--keep-blocks", help="Keep the protected blocks' markers (<!-- NAME_START -->); "
        "by default they are taken out and the blocks' text kept.")] = False,
    install: Annotated[OptText, typer.Option(
        "--install", help="Put the skill folder where an agent looks: claude (Claude Code) or "
        "codex.")] = None,
    scope: Annotated[OptText, typer.Option(
        "--scope", help="With --install: project (the default: .claude/skills, .agents/skills "
        "of the current folder) or user (~/.claude/skills, ~/.agents/skills: every project's)."
        )] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace a different skill folder of the same name (its SKILL.md is "
        "kept as SKILL.md.bak-<UTC time>).")] = False,
) -> None:
    """Export a skill of a run as an agent loads it: a skill folder (SKILL.md with name and
    description), a section of AGENTS.md or CLAUDE.md, or installed for Claude Code or Codex."""
    from skillgrad import export
    from skillgrad.agentskills import own_fields

    kind = _check_options(fmt, install, out, scope, description, describe, force)
    if name is not None and not name.strip():  # given, and empty: not the default name
        raise SkillgradError("--name: empty; give 1-64 characters of a-z, 0-9 and '-', or "
                             "leave --name out for the run folder's name")
    chosen = resolve_version(run, version)
    own_name, own_description = own_fields(chosen.text)
    skill = name or own_name or _default_name(run)
    export.check_name(skill)
    _say(f"version: {chosen.label}; skill {chosen.digest[:8]}")
    if name is None:
        _say(f"name: {skill} (the skill's own, from its front matter)" if own_name else
             f"name: {skill} (the run folder's; give --name NAME for another)")
    if describe:
        description = export.describe_skill(export.run_optimizer(run), chosen.text, skill)
        _say(f"description (proposed by the run's optimizer): {description}")
    elif description is None and own_description is not None:
        description = own_description
        _say(f"description: the skill's own, from its front matter: {description}")
    elif description is None and install is not None:
        raise SkillgradError(
            "--install: an agent loads a skill by its description, and this skill has none; "
            "give --description TEXT (what it does and when to use it) or --describe (the "
            "run's optimizer proposes one)")
    elif description is None:
        description = export.default_description(chosen.text, export.run_env_name(run))
        _say(f"description: a default, from the skill's first heading and the environment "
             f"(give --description TEXT, or --describe, for one that says when to use the "
             f"skill): {description}")
    if install is not None:
        done = export.install_skill(chosen.text, install,  # type: ignore[arg-type]
                                    name=skill, description=description,
                                    scope=scope or "project", cwd=Path.cwd(), home=Path.home(),
                                    environ=os.environ, keep_blocks=keep_blocks, force=force)
        where = f"{export.AGENT_NAMES[install]}, {scope or 'project'} scope"
        _report(done, f"installed for {where}", f"already installed for {where}")
        return
    target = out or Path("AGENTS.md" if kind == "agents-md" else ".")
    existed = target.is_file()
    done = export.write_export(chosen.text, kind, target, name=skill,  # type: ignore[arg-type]
                               description=description, keep_blocks=keep_blocks, force=force)
    if kind == "agents-md":
        what = ("section replaced, the rest of the file unchanged" if done.replaced_section
                else "new section at its end" if existed else "new file")
        _report(done, f"written ({what})", "unchanged (its section is already this one)")
    else:
        _report(done, "written", "unchanged (the same skill is there already)")


def _check_options(fmt: str | None, install: str | None, out: Path | None, scope: str | None,
                   description: str | None, describe: bool, force: bool) -> str:
    """The format asked for; refuses options that contradict each other, one line."""
    from skillgrad.export import AGENT_NAMES, FORMATS, SCOPES

    if fmt is not None and fmt not in FORMATS:
        raise SkillgradError(f"--format: {fmt!r} is not a format (allowed: {', '.join(FORMATS)})")
    if install is not None and install not in AGENT_NAMES:
        raise SkillgradError(f"--install: {install!r} is not an agent (allowed: "
                             f"{', '.join(AGENT_NAMES)})")
    if scope is not None and scope not in SCOPES:
        raise SkillgradError(f"--scope: {scope!r} is not a scope (allowed: {', '.join(SCOPES)})")
    if description is not None and describe:
        raise SkillgradError("export: give --description TEXT or --describe, not both")
    if install is None:
        if scope is not None:
            raise SkillgradError("--scope: only with --install claude|codex")
        fmt = fmt or "skill-folder"
        if force and fmt == "agents-md":
            raise SkillgradError("--force: only for a skill folder (an agents-md export "
                                 "replaces its own section only)")
        return fmt
    if fmt == "agents-md":
        raise SkillgradError("--install: puts a skill folder; give --format skill-folder or "
                             "leave --format out")
    if out is not None:
        raise SkillgradError("--install and --out: give one (--install decides where the "
                             "skill folder goes)")
    return "skill-folder"


def _default_name(run: Path) -> str:
    from skillgrad.export import skill_name

    folder = run.resolve().name
    name = skill_name(folder)
    if not name:
        raise SkillgradError(f"the run folder's name {folder!r} makes no skill name; give "
                             "--name NAME (a-z, 0-9 and '-')")
    return name


def _report(done: Exported, changed: str, unchanged: str) -> None:
    for warning in done.warnings:
        _say(f"warning: {warning}")
    _say(f"{changed if done.changed else unchanged}: {done.path}")
    if done.backup is not None:
        _say(f"the different skill that was there is kept as: {done.backup}")


# ----------------------------------------------------------------------------- versions


@dataclass(frozen=True)
class Version:
    """A skill version of a run: what it is (``label``), its content hash and its text."""

    label: str
    digest: str
    text: str


def resolve_version(run_dir: Path, version: str = "best") -> Version:
    """The skill ``version`` names in the run in ``run_dir``: ``initial``, ``best``, ``final``,
    a step (``e01-s003``, or a global step number: the skill as training held it after that
    step) or a prefix (4 characters or more) of a skill's content hash. Refuses, in one line
    listing what the run holds, a version it does not hold or one that names several."""
    from skillgrad.rundir import RunDir
    from skillgrad.state import TrainerState

    run = RunDir(run_dir)
    state = TrainerState.model_validate(run.require_checkpoint())
    after = _skills_after_steps(state)
    steps = {_step_id(r.epoch, r.step): r.global_step for r in state.history}
    names = {"initial": state.initial_hash, "best": state.best_hash, "final": state.current_hash}
    wanted = version.strip().lower()
    found: dict[str, str] = {}  # label -> hash
    if wanted in names:
        found[_named(wanted, state)] = names[wanted]
    step = re.fullmatch(r"e(\d+)-s(\d+)", wanted)
    at = steps.get(_step_id(int(step[1]), int(step[2]))) if step else None
    if wanted.isdigit() and int(wanted) in after:
        at = int(wanted)
    if at is not None:
        r = next(r for r in state.history if r.global_step == at)
        found[f"{_step_id(r.epoch, r.step)} (the skill after global step {at} of "
              f"{state.total_steps}; that step's gate: {r.decision})"] = after[at]
    if len(wanted) >= MIN_PREFIX and re.fullmatch(r"[0-9a-f]+", wanted):
        found.update({f"skill {d[:8]}": d for d in _stored(run) if d.startswith(wanted)})
    if len(set(found.values())) == 1:
        label, digest = next(iter(found.items()))
        return Version(label, digest, run.load_skill(digest))
    what = (f"names {len(set(found.values()))} skills ({'; '.join(found)})" if found
            else "is not a version of this run")
    raise RunDirError(f"--version {version!r}: {what}; {_known(run, state, steps)}")


def _step_id(epoch: int, step: int) -> str:
    return f"e{epoch:02d}-s{step:03d}"


def _skills_after_steps(state: Any) -> dict[int, str]:
    """The hash of the skill training held after each global step (an epoch starts from the
    skill its start-of-epoch work left: a slow update may have changed it)."""
    after, current, epoch = {}, state.initial_hash, 1
    for r in state.history:
        if r.epoch != epoch:
            epoch, current = r.epoch, state.epoch_start.get(str(r.epoch), current)
        if r.decision in ("accept", "accept_new_best") and r.candidate_hash:
            current = r.candidate_hash
        after[r.global_step] = current
    return after


def _named(name: str, state: Any) -> str:
    if name == "best":
        r = next((r for r in state.history if r.global_step == state.best_step), None)
        return ("best (the initial skill: no step did better)" if r is None else
                f"best (from step {_step_id(r.epoch, r.step)})")
    if name == "final" and state.phase != "done":
        return f"final (the run is not finished: {state.position()})"
    return name


def _stored(run: RunDir) -> list[str]:
    """The hashes of the skill versions stored in the run directory (each read back and
    checked against its hash: a modified one is refused)."""
    from skillgrad.skill import skill_hash

    digests = []
    for stem in run.stored_skills():
        try:
            text = run.load_skill(stem)
        except UnicodeDecodeError:
            raise RunDirError(f"{run.skill_path(stem)}: skill file is not UTF-8 text (it was "
                              "modified)") from None
        digests.append(skill_hash(text))
    return digests


def _known(run: RunDir, state: Any, steps: dict[str, int], shown: int = 12) -> str:
    """What a run holds, in one line: its names, steps and stored skills."""
    labels: dict[str, list[str]] = {}
    for name, digest in (("initial", state.initial_hash), ("best", state.best_hash),
                         ("final", state.current_hash)):
        labels.setdefault(digest, []).append(name)
    for r in state.history:
        if r.candidate_hash:
            labels.setdefault(r.candidate_hash, []).append(
                f"{r.decision} at {_step_id(r.epoch, r.step)}")
    order = list(labels)
    stored = sorted(_stored(run), key=lambda d: (order.index(d) if d in order else len(order), d))
    hashes = ", ".join(f"{d[:8]} ({', '.join(labels[d])})" if d in labels else d[:8]
                       for d in stored[:shown])
    more = f" and {len(stored) - shown} more" if len(stored) > shown else ""
    ids = list(steps)
    span = f"{ids[0]} to {ids[-1]}, or 1 to {len(ids)}" if ids else "none yet"
    return (f"give initial, best, final, a step ({span}) or a hash prefix of "
            f"{MIN_PREFIX}+ characters of a stored skill: {hashes or 'none'}{more}")
