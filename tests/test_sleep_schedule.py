"""Nightly scheduling (skillgrad.sleep.schedule), against a stub crontab that keeps its table
in a temporary file: the user's real crontab is never read or written."""

from __future__ import annotations

import shutil
import stat
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from skillgrad.sleep import schedule as sched
from skillgrad.sleep.schedule import (
    BEGIN,
    END,
    ScheduleError,
    cron_line,
    due,
    last_night,
    record_night,
    remove_systemd,
    schedule,
    scheduled,
    slot,
    unschedule,
    write_systemd,
)

STUB = Path(__file__).parent / "fixtures" / "sleep" / "bin" / "crontab"
USER_TABLE = (b"# my jobs\nMAILTO=me@example.org\n"
              b"*/10 * * * * /usr/bin/backup --quiet  # keep\n"
              b"@reboot /home/dev/bin/caf\xe9.sh\n")  # not UTF-8


@pytest.fixture(autouse=True)
def no_agent_stores(monkeypatch: pytest.MonkeyPatch) -> None:
    """The agents' store variables of the machine running the tests stay out of the lines."""
    for name in sched.STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stub crontab first on PATH; returns the file its table lives in (absent: no
    crontab yet)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(STUB, bin_dir / "crontab")
    (bin_dir / "crontab").chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    path = tmp_path / "crontab.table"
    monkeypatch.setenv("CRONTAB_STUB_TABLE", str(path))
    return path


@pytest.fixture
def program(tmp_path: Path) -> Path:
    """A stand-in for the skillgrad command: it writes its arguments to its output."""
    path = tmp_path / "bin-tools" / "skillgrad"
    path.parent.mkdir()
    path.write_text('#!/bin/sh\nfor a in "$@"; do echo "arg: $a"; done\n')
    path.chmod(stat.S_IRWXU)
    return path


def make_project(tmp_path: Path, name: str) -> Path:
    project = tmp_path / name
    project.mkdir()
    return project


def test_an_empty_crontab_gets_a_block_with_the_projects_line(table: Path, tmp_path: Path,
                                                             program: Path) -> None:
    project = make_project(tmp_path, "shop")
    assert scheduled(project) is None  # "no crontab for user" is an empty table
    line = schedule(project, [str(program), "sleep", "run", "--project", str(project)])
    minute, hour = slot(project)
    assert line.startswith(f"{minute} {hour} * * * cd {project} && {program} sleep run ")
    assert f">> {project}/.skillgrad/sleep/cron.log 2>&1" in line
    assert table.read_text() == f"{BEGIN}\n{line}\n{END}\n"
    assert scheduled(project) == line
    assert (project / ".skillgrad" / "sleep").is_dir()
    assert (project / ".gitignore").read_text() == ".skillgrad/\n"


def test_the_users_lines_stay_byte_for_byte(table: Path, tmp_path: Path,
                                            program: Path) -> None:
    table.write_bytes(USER_TABLE)
    shop, blog = make_project(tmp_path, "shop"), make_project(tmp_path, "blog")
    schedule(shop, [str(program), "sleep"])
    schedule(blog, [str(program), "sleep"], when="04:30")
    data = table.read_bytes()
    assert data.startswith(USER_TABLE)
    block = data[len(USER_TABLE):].decode().splitlines()
    assert block[0] == BEGIN and block[-1] == END and len(block) == 4
    assert block[2].startswith("30 4 * * * cd ")
    schedule(shop, [str(program), "sleep", "--again"])  # replaced, not added
    assert len(table.read_bytes()[len(USER_TABLE):].decode().splitlines()) == 4
    assert "--again" in (scheduled(shop) or "")
    assert unschedule(shop) is True
    assert unschedule(shop) is False
    assert scheduled(blog) is not None
    assert unschedule(blog) is True
    assert table.read_bytes() == USER_TABLE  # the empty block goes too


def test_a_table_without_a_final_newline_keeps_its_last_line(table: Path, tmp_path: Path,
                                                            program: Path) -> None:
    table.write_bytes(b"0 1 * * * /bin/true")
    project = make_project(tmp_path, "shop")
    schedule(project, [str(program)])
    assert table.read_bytes().startswith(b"0 1 * * * /bin/true\n" + BEGIN.encode())
    unschedule(project)
    assert table.read_bytes() == b"0 1 * * * /bin/true\n"


def test_the_line_runs_under_sh_as_cron_would_even_with_odd_paths(table: Path, tmp_path: Path,
                                                                  program: Path) -> None:
    project = make_project(tmp_path, "my shop 100% 'quoted'")
    line = schedule(project, [str(program), "sleep", "--set", "sleep.window=72h", "a b"])
    assert "\\%" in line and "100%" not in line.replace("\\%", "")
    command = " ".join(line.split(" ")[5:]).replace("\\%", "%")  # what cron hands to sh
    subprocess.run(["/bin/sh", "-c", command], check=True, cwd=tmp_path)
    log = (project / ".skillgrad" / "sleep" / "cron.log").read_text()
    assert log.splitlines() == ["arg: sleep", "arg: --set", "arg: sleep.window=72h", "arg: a b"]


def test_projects_get_different_stable_night_times(tmp_path: Path) -> None:
    slots = [slot(tmp_path / f"project-{i}") for i in range(60)]
    assert slots == [slot(tmp_path / f"project-{i}") for i in range(60)]
    assert all(0 <= m < 60 and 1 <= h <= 5 for m, h in slots)
    assert len(set(slots)) > 40


def test_when_takes_a_time_or_five_fields(tmp_path: Path, program: Path) -> None:
    assert cron_line(tmp_path, [str(program)], "04:05").startswith("5 4 * * * ")
    assert cron_line(tmp_path, [str(program)], "*/30 2-4 * * 1-5").startswith(
        "*/30 2-4 * * 1-5 cd ")
    for bad, message in [("25:00", "not a time of day"), ("tonight", "give HH:MM"),
                         ("0 3 * *", "give HH:MM"), ("0 3 * * ; rm", "give HH:MM")]:
        with pytest.raises(ScheduleError, match=message):
            cron_line(tmp_path, [str(program)], bad)


def test_the_program_is_found_now_because_cron_has_a_bare_path(tmp_path: Path,
                                                                program: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    monkeypatch.setenv("PATH", str(program.parent))
    assert f"&& {program} sleep" in cron_line(tmp_path, ["skillgrad", "sleep"])
    with pytest.raises(ScheduleError, match="no-such-tool: not found on PATH"):
        cron_line(tmp_path, ["no-such-tool"])
    with pytest.raises(ScheduleError, match="empty"):
        cron_line(tmp_path, [])
    with pytest.raises(ScheduleError, match="line break"):
        cron_line(tmp_path, [str(program), "a\nb"])


def test_a_missing_crontab_program_is_one_line(tmp_path: Path, program: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(ScheduleError, match="^crontab: not found on PATH; install cron, or "
                                            "schedule with --systemd$"):
        schedule(make_project(tmp_path, "shop"), [str(program)])


def test_crontab_failures_are_reported_and_nothing_is_lost(table: Path, tmp_path: Path,
                                                          program: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    table.write_bytes(USER_TABLE)
    monkeypatch.setenv("CRONTAB_STUB_REFUSE", '"-":3: bad minute')
    with pytest.raises(ScheduleError, match='crontab - refused the new table .*bad minute'):
        schedule(make_project(tmp_path, "shop"), [str(program)])
    assert table.read_bytes() == USER_TABLE


def test_a_damaged_block_is_refused_and_left_alone(table: Path, tmp_path: Path,
                                                   program: Path) -> None:
    damaged = USER_TABLE + (BEGIN + "\n0 3 * * * true # skillgrad-sleep abc\n").encode()
    table.write_bytes(damaged)
    with pytest.raises(ScheduleError, match="block is damaged"):
        schedule(make_project(tmp_path, "shop"), [str(program)])
    assert table.read_bytes() == damaged


def test_a_line_the_user_added_inside_the_block_is_kept(table: Path, tmp_path: Path,
                                                        program: Path) -> None:
    table.write_text(f"{BEGIN}\n# my note\n{END}\n")
    project = make_project(tmp_path, "shop")
    schedule(project, [str(program)])
    unschedule(project)
    assert table.read_text() == f"{BEGIN}\n# my note\n{END}\n"


# ---------------------------------------------------------------------- systemd
def test_systemd_units_are_written_not_enabled(tmp_path: Path, program: Path) -> None:
    project = make_project(tmp_path, "shop 50%")
    config = tmp_path / "config"
    units = write_systemd(project, [str(program), "sleep", "$HOME"], "02:45", config)
    key = sched.project_key(project)
    assert units.timer == config / "systemd" / "user" / f"skillgrad-sleep-{key}.timer"
    timer = units.timer.read_text()
    assert "OnCalendar=*-*-* 02:45:00\n" in timer and "Persistent=true\n" in timer
    assert "WantedBy=timers.target" in timer
    service = units.service.read_text()
    assert f'ExecStart="{program}" "sleep" "$$HOME"\n' in service
    assert "WorkingDirectory=" + str(project).replace("%", "%%") + "\n" in service
    assert "StandardOutput=append:" in service and "cron.log" in service
    assert units.enable == (f"systemctl --user daemon-reload && systemctl --user enable --now "
                            f"skillgrad-sleep-{key}.timer")
    with pytest.raises(ScheduleError, match="a systemd timer takes HH:MM"):
        write_systemd(project, [str(program)], "0 3 * * *", config)
    assert remove_systemd(project, config) == [units.timer, units.service]
    assert not units.service.exists()


def test_a_scheduled_night_reads_the_agent_stores_a_night_by_hand_reads(
        table: Path, tmp_path: Path, program: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_project(tmp_path, "shop")
    (tmp_path / "claude home").mkdir()
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "claude home"))
    monkeypatch.setenv("CODEX_HOME", "~/codex-store")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-not-for-the-schedule")
    probe = tmp_path / "bin-tools" / "probe"
    probe.write_text('#!/bin/sh\necho "claude=$CLAUDE_CONFIG_DIR codex=$CODEX_HOME '
                     'key=$ANTHROPIC_API_KEY"\n')
    probe.chmod(stat.S_IRWXU)
    line = schedule(project, [str(probe)])
    assert "sk-not-for-the-schedule" not in line
    command = " ".join(line.split(" ")[5:])
    subprocess.run(["/bin/sh", "-c", command], check=True, cwd=tmp_path,
                   env={"PATH": "/usr/bin:/bin"})  # cron's bare environment
    log = (project / ".skillgrad" / "sleep" / "cron.log").read_text().strip()
    assert log == (f"claude={tmp_path / 'claude home'} codex={Path.home() / 'codex-store'} "
                   "key=")
    units = write_systemd(project, [str(probe)], "02:45", tmp_path / "config")
    service = units.service.read_text()
    assert f'Environment="CLAUDE_CONFIG_DIR={tmp_path / "claude home"}"\n' in service
    assert f'Environment="CODEX_HOME={Path.home() / "codex-store"}"\n' in service
    assert "sk-not-for-the-schedule" not in service


def test_status_names_a_systemd_timer_where_there_is_no_crontab(
        tmp_path: Path, program: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from e2e import cli

    project = make_project(tmp_path, "shop")
    home = tmp_path / "home"
    units = write_systemd(project, [str(program), "sleep"], "02:45", home / ".config")
    (tmp_path / "no-crontab").mkdir()  # a PATH with no crontab: the real one is not read
    proc = cli("sleep", "status", "--project", str(project),
               env={"HOME": str(home), "PATH": str(tmp_path / "no-crontab")})
    assert proc.returncode == 0, proc.stderr
    assert f"scheduled: systemd user timer {units.timer}" in proc.stdout
    assert "unknown" not in proc.stdout


# ---------------------------------------------------------------------- missed nights
def test_a_night_is_due_when_a_day_has_passed_since_the_last(tmp_path: Path) -> None:
    project = make_project(tmp_path, "shop")
    now = datetime(2026, 3, 3, 9, 0, tzinfo=timezone.utc)
    assert last_night(project) is None and due(project, now)
    record_night(project, now - timedelta(hours=2), "20260303T070000Z")
    assert not due(project, now)
    assert last_night(project) == now - timedelta(hours=2)
    assert due(project, now + timedelta(hours=23)) is True
    paris = timezone(timedelta(hours=1))
    record_night(project, datetime(2026, 3, 3, 10, 0, tzinfo=paris))  # 09:00 UTC
    assert not due(project, now + timedelta(hours=23, minutes=59))
    assert due(project, now + timedelta(hours=24, minutes=1))
    assert (project / ".gitignore").read_text() == ".skillgrad/\n"
    with pytest.raises(ValueError):
        due(project, datetime(2026, 3, 3, 9, 0))
    with pytest.raises(ValueError):
        record_night(project, datetime(2026, 3, 3, 9, 0))


def test_a_damaged_night_record_is_an_error_not_a_fresh_start(tmp_path: Path) -> None:
    project = make_project(tmp_path, "shop")
    path = project / ".skillgrad" / "sleep" / "state" / "last_night.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(ScheduleError, match="last_night.json: not a skillgrad night record"):
        due(project, datetime.now(timezone.utc))
    path.write_text('{"finished": "2026-03-03T09:00:00"}')
    with pytest.raises(ScheduleError, match="has no time zone"):
        last_night(project)
