"""``skillgrad sleep``: nights over the user's own agent sessions, from the command line."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from skillgrad.errors import ConfigError, SkillgradError

if TYPE_CHECKING:
    from skillgrad.sleep.adoption import Interrupted

sleep_app = typer.Typer(help="Sleep: improve a project's agent skills from its sessions.",
                        no_args_is_help=True)

ProjectOpt = Annotated[Path, typer.Option("--project", "-p", help="The project's root folder.")]
ConfigOpt = Annotated[Optional[Path], typer.Option(  # noqa: UP045 - typer needs Optional
    "--config", help="Sleep config (default: PROJECT/.skillgrad/sleep/config.yaml).")]
TasksOpt = Annotated[Optional[Path], typer.Option(  # noqa: UP045
    "--tasks", help="Train on this tasks file (e.g. one you reviewed) instead of mining.")]


def _say(line: str) -> None:
    from skillgrad.console import say

    say(line)


@sleep_app.command("run")
def run(project: ProjectOpt = Path("."), config: ConfigOpt = None,
        tasks: TasksOpt = None,
        if_due: Annotated[bool, typer.Option(
            "--if-due", help="Only if no night finished in the last 24 hours (for a start-up "
            "hook: a night the machine slept through runs then).")] = False) -> None:
    """Run a night: harvest, mine, train each skill behind the gate, stage the result. A
    night stopped by a budget or pending handoff answers goes on with the same command."""
    if if_due:
        from datetime import datetime, timezone

        from skillgrad.sleep.schedule import due

        if not due(project.expanduser().resolve(), datetime.now(timezone.utc)):
            _say("not due: a night finished less than 24 hours ago")
            return
    _night(project, config, tasks, dry_run=False)


@sleep_app.command("dry-run")
def dry_run(project: ProjectOpt = Path("."), config: ConfigOpt = None,
            tasks: TasksOpt = None) -> None:
    """A night in a temporary folder: the report is printed, nothing is written to the
    project (its harvest checkpoint included)."""
    _night(project, config, tasks, dry_run=True)


def _night(project: Path, config: Path | None, tasks: Path | None, dry_run: bool) -> None:
    from skillgrad.sleep.cycle import report_markdown, run_night

    result = run_night(project, config=config, tasks=tasks, dry_run=dry_run)
    if dry_run:
        _say("dry run: the night ran in a temporary folder; nothing in the project was "
             "written, staged or checkpointed")
    sys.stdout.write(report_markdown(result.report))
    if result.staged is not None and not dry_run:
        _say(f"staged: {result.staged} (adopt with: skillgrad sleep adopt --project "
             f"{project} {result.night})")
    elif result.staged is None:
        _say("nothing to stage: no skill changed")
    else:
        _say("dry run: a real night would stage the changes above (skillgrad sleep run)")


@sleep_app.command("harvest")
def harvest(project: ProjectOpt = Path("."), config: ConfigOpt = None) -> None:
    """Show what a night would read: each agent's stores, the sources and their sessions,
    and what would be skipped and why. Nothing is written."""
    from skillgrad.sleep.harvest.harvester import Harvester
    from skillgrad.sleep.night import SLEEP_DIR, load_sleep_config
    from skillgrad.sleep.scrub import Scrubber
    from skillgrad.traces.registry import adapters

    root = project.expanduser().resolve()
    _, section = load_sleep_config(config or root / SLEEP_DIR / "config.yaml")
    preview = Harvester(root, adapters(section.agents), state_dir=root / SLEEP_DIR / "state",
                        scrubber=Scrubber(section.redact_patterns), environ=os.environ,
                        home=Path.home(), settle_seconds=section.settle_seconds).preview()
    for store in preview.stores:
        _say(f"{store.agent}: {store.path} ({'found' if store.exists else 'not found'})")
    for source in preview.sources:
        _say(f"  {source.path}: {source.sessions} sessions"
             + ("" if source.status == "read" else f" (left out: {source.status})"))
    counts = ", ".join(f"{k} {v}" for k, v in preview.skip_counts.items())
    _say(f"{preview.sessions} sessions would be read" + (f"; skipped: {counts}" if counts else ""))


@sleep_app.command("mine")
def mine_tasks(out: Annotated[Path, typer.Option("--out", "-o", help="The tasks file to write.")],
               project: ProjectOpt = Path("."), config: ConfigOpt = None) -> None:
    """Harvest and mine into a tasks file to read and edit; set "reviewed": true in it and
    train on it with `sleep run --tasks FILE`."""
    from datetime import datetime, timezone

    from skillgrad.sleep.cycle import harvest_and_mine
    from skillgrad.sleep.tasks import write_tasks

    if out.exists():
        raise ConfigError(f"--out {out}: exists; give another path")
    tasks = harvest_and_mine(project, config=config, now=datetime.now(timezone.utc))
    write_tasks(out, tasks)
    _say(f"written: {out} ({len(tasks.tasks)} tasks, miner {tasks.miner}); review it, set "
         "\"reviewed\": true, then: skillgrad sleep run --tasks " + str(out))
    for note in tasks.notes:
        _say(f"note: {note}")


@sleep_app.command("status")
def status(project: ProjectOpt = Path(".")) -> None:
    """The project's nights and their state, an adoption or a rollback that stopped half
    way, a pending night, and the schedule."""
    from skillgrad.sleep.adoption import interrupted
    from skillgrad.sleep.night import SLEEP_DIR, NightState
    from skillgrad.sleep.schedule import scheduled, systemd_timer
    from skillgrad.sleep.staging import Staging

    root = project.expanduser().resolve()
    staging = Staging(root)
    broken = {i.night: i for i in interrupted(staging)}
    for night in staging.nights():
        cut = broken.get(night.id)
        _say(f"{night.id}: {night.state}, {len(night.files)} files "
             f"({', '.join(p.name for p in night.files)})"
             + (f" ({_OPS.get(cut.op, cut.op)} interrupted)" if cut and not cut.running
                else ""))
    for cut in broken.values():
        _say(_interrupted_line(cut, root))
    pending = NightState(root / SLEEP_DIR).pending()
    if pending:
        _say(f"pending: night {pending} stopped before it finished; `skillgrad sleep run` "
             "goes on with it")
    timer = systemd_timer(root)
    if timer is not None:
        _say(f"scheduled: systemd user timer {timer}")
    try:
        line = scheduled(root)
    except SkillgradError as exc:  # no crontab here: the rest of the status still stands
        if timer is None:
            _say(f"schedule: unknown ({exc})")
        return
    if line or timer is None:
        _say(f"scheduled: {line}" if line else "not scheduled")


_OPS = {"adopt": "adoption", "rollback": "rollback"}


def _interrupted_line(cut: Interrupted, root: Path) -> str:
    """What ``sleep status`` says of an adoption or rollback whose journal is still there,
    with the command that undoes it (or finishes its record)."""
    what = f"night {cut.night}'s {_OPS.get(cut.op, cut.op)}"
    recover = f"`skillgrad sleep recover --project {root}`"
    if cut.running:
        return f"under way: {what}, in another skillgrad process"
    if cut.committed:
        return (f"interrupted: {what} finished but was not recorded; {recover} records it "
                "(the adopted files stay)")
    again = {"adopt": f"; `skillgrad sleep adopt {cut.night} --project {root}` puts them "
                      "back and adopts the night again",
             "rollback": f"; `skillgrad sleep rollback {cut.night} --project {root}` puts "
                         "them back and rolls the night back again"}.get(cut.op, "")
    return (f"interrupted: {what} stopped half way (journal {cut.journal}); {recover} puts "
            f"back the files it had changed{again}")


@sleep_app.command("recover")
def recover(project: ProjectOpt = Path(".")) -> None:
    """Undo an adoption or a rollback that stopped half way (a crash, a kill): every file it
    had changed gets its earlier content back. `sleep adopt` and `sleep rollback` do this
    first on their own."""
    from skillgrad.sleep.adoption import interrupted
    from skillgrad.sleep.adoption import recover as recover_nights
    from skillgrad.sleep.staging import Staging

    staging = Staging(project.expanduser().resolve())
    before = interrupted(staging)
    undone = recover_nights(staging)
    for cut in before:
        what = f"night {cut.night}'s {_OPS.get(cut.op, cut.op)}"
        if cut.night in undone:
            _say(f"undone: {what}; its files are as they were before it")
        elif cut.running:
            _say(f"left alone: {what} is under way in another skillgrad process")
        else:
            _say(f"recorded: {what} had finished")
    if not before:
        _say("nothing to recover: no adoption or rollback stopped half way")


@sleep_app.command("adopt")
def adopt(night: Annotated[Optional[str], typer.Argument(  # noqa: UP045
        help="The night (default: the latest staged).")] = None,
        project: ProjectOpt = Path("."),
        file: Annotated[Optional[list[str]], typer.Option(  # noqa: UP045
            "--file", help="Adopt only this proposed file (by name; repeatable).")] = None,
        ) -> None:
    """Adopt a staged night: each live file is backed up and replaced, unless it changed
    since the night was staged."""
    from skillgrad.sleep.adoption import adopt as adopt_night
    from skillgrad.sleep.staging import Staging

    staging = Staging(project.expanduser().resolve())
    chosen = night or staging.latest()
    if chosen is None:
        raise ConfigError("no staged night to adopt")
    for adopted in adopt_night(staging, chosen, file or None):
        _say(f"adopted: {adopted.target}" + (f" (backup: {adopted.backup})"
                                             if adopted.backup else " (new file)"))


@sleep_app.command("rollback")
def rollback(night: Annotated[Optional[str], typer.Argument(  # noqa: UP045
        help="The adopted night to undo (default: the latest with files adopted).")] = None,
             project: ProjectOpt = Path(".")) -> None:
    """Put back the files a night's adoption replaced."""
    from skillgrad.sleep.adoption import rollback as roll_back
    from skillgrad.sleep.staging import Staging

    staging = Staging(project.expanduser().resolve())
    chosen = night or next((n.id for n in reversed(staging.nights()) if n.adopted), None)
    if chosen is None:
        raise ConfigError("no night has adopted files to roll back")
    for path in roll_back(staging, chosen):
        _say(f"restored: {path}")


@sleep_app.command("schedule")
def schedule(project: ProjectOpt = Path("."), at: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--at", help="HH:MM or five cron fields (default: a time between 01:00 and 05:59 "
        "derived from the project, so that projects do not all run at once).")] = None,
        systemd: Annotated[bool, typer.Option(
            "--systemd", help="Write a systemd user timer instead (a missed night runs at "
            "the next boot).")] = False) -> None:
    """Run a night every day (a managed block in your crontab)."""
    from skillgrad.sleep import schedule as scheduling

    root = project.expanduser().resolve()
    argv = [sys.executable, "-m", "skillgrad.cli", "sleep", "run", "--project", str(root)]
    if systemd:
        units = scheduling.write_systemd(root, argv, at)
        _say(f"written: {units.service} and {units.timer}; turn the timer on with: "
             f"{units.enable}")
        return
    line = scheduling.schedule(root, argv, at)
    _say(f"scheduled: {line}")


@sleep_app.command("unschedule")
def unschedule(project: ProjectOpt = Path(".")) -> None:
    """Remove the project's line from the crontab block."""
    from skillgrad.sleep import schedule as scheduling

    root = project.expanduser().resolve()
    removed = [str(p) for p in scheduling.remove_systemd(root)]
    if removed:
        _say(f"removed: {', '.join(removed)}")
    elif scheduling.unschedule(root):
        _say("unscheduled")
    else:
        _say("was not scheduled")


@sleep_app.command("demo")
def demo(folder: Annotated[Path, typer.Argument(help="Where the demo project goes.")],
         scripted: Annotated[bool, typer.Option(
             "--scripted", help="Stand-in models instead of the embedded one: a night takes a second.")
         ] = False) -> None:
    """Write a demo project with Claude Code sessions to try sleep on (see docs/sleep.md)."""
    from skillgrad.sleep.demo import write_demo

    if folder.exists() and any(folder.iterdir()):
        raise ConfigError(f"{folder}: not empty; give a new folder")
    project, claude = write_demo(folder, scripted=scripted)
    _say(f"written: {project} (a project with the skill shop-dev) and {claude} (its Claude "
         "Code sessions)")
    _say(f"try: CLAUDE_CONFIG_DIR={claude} skillgrad sleep run --project {project}")
