"""When nights run: a managed block of the user's crontab, or a systemd user timer.

The training schedule of sleep. Every project gets one line in a block between two marker
comments; the user's other crontab lines are kept byte for byte. A project's minute and hour
come from a hash of its path (01:00 to 05:59), so that the projects of one machine do not all
start at once; ``when`` sets them instead. The output of a night goes to
``<project>/.skillgrad/sleep/cron.log``.

A night that did not run (the machine was off) runs at the next start: the night records its
time in ``<project>/.skillgrad/sleep/state/last_night.json`` (:func:`record_night`) and
:func:`due` says whether a day has passed since. A systemd timer does the same itself
(``Persistent=true``). The crontab program is the one on ``PATH``, run without a shell.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

from skillgrad.errors import SkillgradError
from skillgrad.rundir import write_json
from skillgrad.sleep.staging import SLEEP_DIR, ensure_gitignore

BEGIN = "# BEGIN skillgrad sleep (one line per project; skillgrad sleep --unschedule removes one)"
END = "# END skillgrad sleep"
DUE_AFTER = timedelta(hours=24)
_TAG = "# skillgrad-sleep "  # ends each line of the block, followed by the project's key
# Where each agent keeps its sessions, when not under HOME (skillgrad.traces reads them): a
# scheduled night runs with the values these have when it is scheduled, so that it reads the
# stores a night run by hand reads. Paths, never secrets.
STORE_VARIABLES = ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "GEMINI_CLI_HOME", "XDG_DATA_HOME",
                   "COPILOT_HOME")
_FIELD = re.compile(r"^[0-9A-Za-z*,/\-]+$")


class ScheduleError(SkillgradError):
    """A night cannot be scheduled or unscheduled (no crontab program, a damaged block, a
    bad time); the message says which."""


@dataclass(frozen=True)
class SystemdUnits:
    service: Path
    timer: Path
    enable: str  # the command that turns the timer on (not run by skillgrad)


def log_path(project: Path) -> Path:
    return Path(os.path.abspath(project)) / SLEEP_DIR / "cron.log"


def project_key(project: Path) -> str:
    """A short, stable name for a project: its absolute path, hashed."""
    return hashlib.sha256(os.path.abspath(project).encode()).hexdigest()[:12]


def slot(project: Path) -> tuple[int, int]:
    """The (minute, hour) a project's night starts at when no time is given: from 01:00 to
    05:59, spread by the hash of its path and the same on every call."""
    value = int(project_key(project), 16)
    return value % 60, 1 + (value // 60) % 5


def cron_when(project: Path, when: str | None) -> str:
    """The five time fields: ``when`` as ``HH:MM`` (daily) or five crontab fields, else the
    project's own :func:`slot`."""
    if when is None:
        minute, hour = slot(project)
        return f"{minute} {hour} * * *"
    daily = _daily(when)
    if daily is not None:
        return f"{daily[1]} {daily[0]} * * *"
    fields = when.split()
    if len(fields) != 5 or not all(_FIELD.match(f) for f in fields):
        raise ScheduleError(f"--at {when!r}: give HH:MM or five crontab fields "
                            "(minute hour day month weekday)")
    return " ".join(fields)


def cron_line(project: Path, command_argv: Sequence[str], when: str | None = None) -> str:
    """The crontab line of a project: cd into it, run the command, append to the log."""
    project = Path(os.path.abspath(project))
    argv = _absolute_argv(command_argv)
    _one_line(project, *argv)
    stores = [f"{k}={v}" for k, v in store_environment().items()]
    run = shlex.join(["env", *stores, *argv] if stores else argv)
    command = (f"cd {shlex.quote(str(project))} && {run} >> "
               f"{shlex.quote(str(log_path(project)))} 2>&1")
    command = command.replace("%", "\\%")  # cron makes a bare % a newline (and drops the \\)
    return f"{cron_when(project, when)} {command} {_TAG}{project_key(project)}"


def schedule(project: Path, command_argv: Sequence[str], when: str | None = None) -> str:
    """Put the project's line in the crontab (replacing its earlier one); returns it."""
    project = Path(os.path.abspath(project))
    line = cron_line(project, command_argv, when)
    (project / SLEEP_DIR).mkdir(parents=True, exist_ok=True)  # where cron.log goes
    ensure_gitignore(project)
    program = _crontab()
    with _table_lock():
        table = _read_table(program)
        _write_table(program, _edit(table, project_key(project), line))
    return line


def unschedule(project: Path) -> bool:
    """Take the project's line out of the crontab; says whether there was one."""
    key = project_key(project)
    program = _crontab()
    with _table_lock():
        table = _read_table(program)
        if scheduled_line(table, key) is None:
            return False
        _write_table(program, _edit(table, key, None))
    return True


def scheduled(project: Path) -> str | None:
    """The project's line in the crontab, if it has one."""
    return scheduled_line(_read_table(_crontab()), project_key(project))


def scheduled_line(table: str, key: str) -> str | None:
    _, block, _ = _split(table)
    return next((line.rstrip("\r\n") for line in block or [] if _key_of(line) == key), None)


def _edit(table: str, key: str, line: str | None) -> str:
    """``table`` with the block holding ``line`` for ``key`` (None: none); every line outside
    the block stays as it is, and a block left empty goes."""
    before, block, after = _split(table)
    kept = [x for x in block or [] if _key_of(x) != key]
    if line is not None:
        kept.append(line + "\n")
    if block is None:
        if not kept:
            return table
        if before and not before[-1].endswith("\n"):
            before[-1] += "\n"
    if not kept:
        return "".join(before + after)
    return "".join([*before, BEGIN + "\n", *kept, END + "\n", *after])


def _split(table: str) -> tuple[list[str], list[str] | None, list[str]]:
    """(lines before the block, the block's lines or None when there is no block, lines
    after it), line endings kept."""
    lines = table.splitlines(keepends=True)
    begins = [i for i, x in enumerate(lines) if x.rstrip("\r\n") == BEGIN]
    ends = [i for i, x in enumerate(lines) if x.rstrip("\r\n") == END]
    if not begins and not ends:
        return lines, None, []
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise ScheduleError("crontab: the skillgrad sleep block is damaged (its BEGIN and END "
                            "comment lines must appear once each, in order); fix it with "
                            "crontab -e")
    return lines[:begins[0]], lines[begins[0] + 1:ends[0]], lines[ends[0] + 1:]


def _key_of(line: str) -> str | None:
    head, tag, key = line.rstrip("\r\n").rpartition(_TAG)
    return key if tag and head else None


def _crontab() -> str:
    program = shutil.which("crontab")
    if program is None:
        raise ScheduleError("crontab: not found on PATH; install cron, or schedule with "
                            "--systemd")
    return program


def _run(argv: list[str], data: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(argv, input=data, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ScheduleError(f"{' '.join(argv)}: could not run ({exc})") from exc


def _read_table(program: str) -> str:
    proc = _run([program, "-l"])
    if proc.returncode == 0:
        return proc.stdout.decode("utf-8", "surrogateescape")  # bytes back exactly as read
    message = proc.stderr.decode("utf-8", "replace").strip()
    if "no crontab" in message.lower():
        return ""
    raise ScheduleError(f"crontab -l failed (exit {proc.returncode}): "
                        f"{message.splitlines()[0] if message else 'no message'}")


def _write_table(program: str, table: str) -> None:
    proc = _run([program, "-"], table.encode("utf-8", "surrogateescape"))
    if proc.returncode != 0:
        message = proc.stderr.decode("utf-8", "replace").strip()
        raise ScheduleError(f"crontab - refused the new table (exit {proc.returncode}): "
                            f"{message.splitlines()[0] if message else 'no message'}")


@contextlib.contextmanager
def _table_lock() -> Iterator[None]:
    """Serialise this user's read-modify-write of the crontab across skillgrad processes."""
    path = Path(tempfile.gettempdir()) / f"skillgrad-crontab-{os.getuid()}.lock"
    with open(path, "a", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


# ---------------------------------------------------------------------- systemd
def write_systemd(project: Path, command_argv: Sequence[str], when: str | None = None,
                  config_home: Path | None = None) -> SystemdUnits:
    """Write a user service and timer for the project's nights under
    ``<config_home>/systemd/user/`` (default ``~/.config``); they are not enabled here."""
    project = Path(os.path.abspath(project))
    argv = _absolute_argv(command_argv)
    _one_line(project, *argv)
    if when is None:
        minute, hour = slot(project)
    else:
        daily = _daily(when)
        if daily is None:
            raise ScheduleError(f"--at {when!r}: a systemd timer takes HH:MM")
        hour, minute = daily
    (project / SLEEP_DIR).mkdir(parents=True, exist_ok=True)
    ensure_gitignore(project)
    folder = _unit_dir(config_home)
    name = f"skillgrad-sleep-{project_key(project)}"
    log = _unit_escape(str(log_path(project)))
    environment = "".join(f"Environment={_exec_quote(f'{k}={v}')}\n"
                          for k, v in store_environment().items())
    service = (f"[Unit]\nDescription=skillgrad sleep: {_unit_escape(str(project))}\n\n"
               f"[Service]\nType=oneshot\nWorkingDirectory={_unit_escape(str(project))}\n"
               f"{environment}ExecStart={' '.join(_exec_quote(a) for a in argv)}\n"
               f"StandardOutput=append:{log}\nStandardError=append:{log}\n")
    timer = (f"[Unit]\nDescription=Nightly skillgrad sleep: {_unit_escape(str(project))}\n\n"
             f"[Timer]\nOnCalendar=*-*-* {hour:02d}:{minute:02d}:00\nPersistent=true\n\n"
             "[Install]\nWantedBy=timers.target\n")
    units = SystemdUnits(service=folder / f"{name}.service", timer=folder / f"{name}.timer",
                         enable=f"systemctl --user daemon-reload && systemctl --user enable "
                                f"--now {name}.timer")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        units.service.write_text(service, encoding="utf-8")
        units.timer.write_text(timer, encoding="utf-8")
    except OSError as exc:
        raise ScheduleError(f"{exc.filename or folder}: cannot write the systemd unit "
                            f"({exc.strerror})") from exc
    return units


def store_environment() -> dict[str, str]:
    """The agents' store variables set now (:data:`STORE_VARIABLES`), made absolute."""
    return {k: os.path.abspath(os.path.expanduser(v)) for k in STORE_VARIABLES
            if (v := os.environ.get(k))}


def systemd_timer(project: Path, config_home: Path | None = None) -> Path | None:
    """The project's systemd timer file, when one is written."""
    path = _unit_dir(config_home) / f"skillgrad-sleep-{project_key(project)}.timer"
    return path if path.exists() else None


def remove_systemd(project: Path, config_home: Path | None = None) -> list[Path]:
    """Delete the project's unit files (disable the timer first); returns those deleted."""
    folder = _unit_dir(config_home)
    name = f"skillgrad-sleep-{project_key(project)}"
    gone = []
    for path in (folder / f"{name}.timer", folder / f"{name}.service"):
        if path.exists():
            try:
                path.unlink()
            except OSError as exc:
                raise ScheduleError(f"{path}: cannot be removed ({exc.strerror})") from exc
            gone.append(path)
    return gone


def _unit_dir(config_home: Path | None) -> Path:
    return (config_home or Path.home() / ".config") / "systemd" / "user"


def _unit_escape(value: str) -> str:
    return value.replace("%", "%%")


def _exec_quote(arg: str) -> str:
    """One ExecStart argument: double-quoted, C escapes, and %/$ doubled (systemd expands
    both)."""
    inner = arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{inner}"'


def _daily(when: str) -> tuple[int, int] | None:
    """(hour, minute) of an ``HH:MM`` time; None if ``when`` is not one; an error if it is
    one out of range."""
    match = re.fullmatch(r"(\d{1,2}):(\d{2})", when.strip())
    if match is None:
        return None
    hour, minute = int(match.group(1)), int(match.group(2))
    if hour > 23 or minute > 59:
        raise ScheduleError(f"--at {when!r}: not a time of day (00:00 to 23:59)")
    return hour, minute


def _absolute_argv(command_argv: Sequence[str]) -> list[str]:
    """The command with its program found now: cron and systemd run with a bare PATH."""
    argv = [str(a) for a in command_argv]
    if not argv:
        raise ScheduleError("the command to schedule is empty")
    program = argv[0] if os.path.isabs(argv[0]) else shutil.which(argv[0])
    if program is None:
        raise ScheduleError(f"{argv[0]}: not found on PATH, so a scheduled night could not "
                            "run it; give its full path")
    return [program, *argv[1:]]


def _one_line(*values: object) -> None:
    bad = next((v for v in values if "\n" in str(v) or "\r" in str(v)), None)
    if bad is not None:
        raise ScheduleError(f"{str(bad)!r}: a path or argument with a line break cannot be "
                            "scheduled")


# ---------------------------------------------------------------------- missed nights
def state_path(project: Path) -> Path:
    return Path(os.path.abspath(project)) / SLEEP_DIR / "state" / "last_night.json"


def record_night(project: Path, finished: datetime, night_id: str | None = None) -> None:
    """Remember when the project's last successful night finished."""
    if finished.tzinfo is None:
        raise ValueError("record_night needs a timezone-aware time")
    ensure_gitignore(Path(project))
    write_json(state_path(project), {
        "schema_version": 1, "night": night_id,
        "finished": finished.astimezone(timezone.utc).isoformat(timespec="seconds")})


def last_night(project: Path) -> datetime | None:
    """When the project's last successful night finished (None: never)."""
    path = state_path(project)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        finished = datetime.fromisoformat(data["finished"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ScheduleError(f"{path}: not a skillgrad night record ({exc})") from None
    if finished.tzinfo is None:
        raise ScheduleError(f"{path}: the time {data['finished']!r} has no time zone")
    return finished


def due(project: Path, now: datetime, after: timedelta = DUE_AFTER) -> bool:
    """Whether a night should run now: none has yet, or the last finished more than
    ``after`` (a day) before ``now`` (timezone-aware)."""
    if now.tzinfo is None:
        raise ValueError("due needs a timezone-aware time")
    last = last_night(project)
    return last is None or now - last > after
