"""The run directory under stress: two processes on one run, a killed holder, a file or a
read-only folder as --out, a full disk, Ctrl-C, and what the messages say in each case."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import toy_config

from skillgrad.cli import main as cli_module
from skillgrad.rundir import RunDir
from skillgrad.state import TrainerState

SHORT = ["--set", "train.num_epochs=1", "--set", "train.steps_per_epoch=2"]
SLOW = ["--set", "model.target.delay=0.15"]  # the first run outlasts a second start
PR_CAPBSET_DROP = 24
BYPASS_PERMISSIONS = (1, 2, 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER


def _env() -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                         os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "200"}


def cli(*args: str, preexec: Callable[[], None] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "skillgrad.cli", *args], env=_env(),
                          capture_output=True, text=True, timeout=timeout, preexec_fn=preexec)


def start(*args: str) -> subprocess.Popen[str]:
    """``skillgrad ARGS`` in the background, with the stop signals at their defaults as in a
    terminal (under ``nohup`` the suite inherits SIGHUP ignored, which the CLI keeps)."""
    return subprocess.Popen([sys.executable, "-m", "skillgrad.cli", *args], env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_stop_signals)


def _default_stop_signals() -> None:
    for signum in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, signal.SIG_DFL)


def error_lines(stderr: str) -> list[str]:
    """The error line and the hint after it (progress lines come before them)."""
    assert "Traceback" not in stderr
    lines = stderr.strip().splitlines()
    at = [i for i, line in enumerate(lines) if line.startswith("error: ")]
    assert len(at) == 1, stderr
    return lines[at[0]:]


def one_line_error(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert proc.returncode == code, proc.stderr
    return error_lines(proc.stderr)[0]


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"{what} did not happen (run exited {proc.poll()})")


def journal_lines(out: Path, step: str) -> int:
    path = out / "steps" / step / "calls.jsonl"
    return path.read_text().count("\n") if path.exists() else 0


@pytest.fixture
def cfg(toy_dir: Path) -> Path:
    return toy_config(toy_dir)


@pytest.fixture
def finished(cfg: Path) -> Path:
    out = cfg.parent / "run"
    assert cli("train", str(cfg), "--out", str(out), *SHORT).returncode == 0
    return out


# ----------------------------------------------------------------------------- the lock


def test_a_second_train_into_a_live_run_is_refused_at_once(cfg: Path) -> None:
    out = cfg.parent / "run"
    first = start("train", str(cfg), "--out", str(out), *SHORT, *SLOW)
    try:
        wait_for(lambda: (out / "run.json").exists(), first, "the first run's start")
        began = time.monotonic()
        second = cli("train", str(cfg), "--out", str(out), *SHORT, *SLOW)
        line = one_line_error(second)
        assert time.monotonic() - began < 30  # refused, not run
        assert str(out) in line and f"PID {first.pid}" in line
        assert first.wait(timeout=120) == 0, first.stderr.read() if first.stderr else ""
    finally:
        first.kill()
        first.communicate()
    events = [e["event"] for e in RunDir(out).events()]
    assert events.count("run_start") == 1 and "resume" not in events


def test_a_held_lock_blocks_train_but_not_show(finished: Path, cfg: Path) -> None:
    with RunDir(finished).lock():
        line = one_line_error(cli("train", str(cfg), "--out", str(finished), *SHORT))
        assert f"PID {os.getpid()}" in line
        shown = cli("show", str(finished))
        assert shown.returncode == 0, shown.stderr
        assert "best step:" in shown.stdout
    assert cli("train", str(cfg), "--out", str(finished), *SHORT).returncode == 0


def test_the_lock_of_a_killed_process_does_not_block_a_resume(cfg: Path) -> None:
    out = cfg.parent / "run"
    args = ("train", str(cfg), "--out", str(out), *SHORT, *SLOW)
    first = start(*args)
    wait_for(lambda: journal_lines(out, "e01-s002") >= 3, first, "step 2")
    os.kill(first.pid, signal.SIGKILL)
    first.communicate()
    assert (out / "run.lock").read_text().strip() == str(first.pid)  # left behind
    resumed = cli(*args)
    assert resumed.returncode == 0, resumed.stderr
    assert (out / "summary.json").exists()
    assert "resume" in [e["event"] for e in RunDir(out).events()]


# ----------------------------------------------------------------------------- file system


def test_out_naming_a_file_is_one_line(cfg: Path) -> None:
    target = cfg.parent / "notes.txt"
    target.write_text("keep me")
    line = one_line_error(cli("train", str(cfg), "--out", str(target)))
    assert str(target) in line and "is a file" in line
    assert target.read_text() == "keep me"


def _drop_bypass() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in BYPASS_PERMISSIONS:
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


@pytest.fixture
def unprivileged() -> Callable[[], None] | None:
    """What makes a child process respect file permissions: nothing for an ordinary user; for
    root, dropping the capabilities that bypass them (skipped where that is not allowed)."""
    if os.geteuid() != 0:
        return None
    try:
        subprocess.run(["true"], preexec_fn=_drop_bypass, check=True)
    except (OSError, subprocess.SubprocessError):
        pytest.skip("running as root and cannot drop CAP_DAC_OVERRIDE")
    return _drop_bypass


@pytest.fixture
def read_only() -> Iterator[Callable[[Path], None]]:
    """Makes folders read-only (every folder under them too), writable again at the end."""
    made: list[Path] = []

    def make(root: Path) -> None:
        for folder in [root, *(p for p in root.rglob("*") if p.is_dir())]:
            folder.chmod(0o555)
            made.append(folder)

    yield make
    for folder in made:
        folder.chmod(0o755)


def test_a_read_only_place_for_a_new_run_is_one_line(cfg: Path, unprivileged: Any,
                                                    read_only: Callable[[Path], None]) -> None:
    parent = cfg.parent / "ro"
    parent.mkdir()
    (parent / "empty").mkdir()
    read_only(parent)
    line = one_line_error(cli("train", str(cfg), "--out", str(parent / "run"),
                              preexec=unprivileged))
    assert str(parent / "run") in line and "ermission denied" in line
    line = one_line_error(cli("train", str(cfg), "--out", str(parent / "empty"),
                              preexec=unprivileged))
    assert str(parent / "empty") in line and "not writable" in line
    assert not (parent / "run").exists() and not any((parent / "empty").iterdir())


def test_resuming_a_read_only_run_is_one_line_and_changes_nothing(
        cfg: Path, unprivileged: Any, read_only: Callable[[Path], None]) -> None:
    out = cfg.parent / "run"
    stopped = cli("train", str(cfg), "--out", str(out), "--set", "model.optimizer.budget.calls=5")
    assert stopped.returncode == 3, stopped.stderr
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    read_only(out)
    line = one_line_error(cli("train", str(cfg), "--out", str(out), preexec=unprivileged))
    assert str(out) in line and "not writable" in line
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before


class CheckpointFault:
    """Makes the ``nth`` write of ``out``'s checkpoint fail with ``exc`` once its temporary
    file holds the new state (at the fsync before the rename), keeping what the checkpoint
    held just before."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, out: Path, nth: int,
                 exc: BaseException) -> None:
        self.out, self.nth, self.exc = out, nth, exc
        self.writes, self.before = 0, b""
        self._fds: set[int] = set()
        self._open, self._fsync = os.open, os.fsync
        monkeypatch.setattr(os, "open", self.open)
        monkeypatch.setattr(os, "fsync", self.fsync)

    def open(self, path: Any, *args: Any, **kwargs: Any) -> int:
        fd = self._open(path, *args, **kwargs)
        if Path(path).name.startswith(".checkpoint.json."):  # the temporary file of a write
            self._fds.add(fd)
        return fd

    def fsync(self, fd: int) -> None:
        if fd in self._fds:
            self._fds.discard(fd)
            self.writes += 1
            if self.writes == self.nth:
                self.before = (self.out / "checkpoint.json").read_bytes()
                raise self.exc
        self._fsync(fd)


def run_main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["skillgrad", *args])
    with pytest.raises(SystemExit) as exited:
        cli_module.main()
    return int(exited.value.code or 0)


def assert_checkpoint_kept(out: Path, fault: CheckpointFault) -> TrainerState:
    assert fault.writes == fault.nth
    assert (out / "checkpoint.json").read_bytes() == fault.before
    assert not list(out.glob(".checkpoint.json.*"))  # no temporary file left
    return TrainerState.model_validate(json.loads(fault.before))


def test_a_full_disk_is_one_line_and_the_checkpoint_stays(
        cfg: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = cfg.parent / "run"
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    fault = CheckpointFault(monkeypatch, out, 3, full)  # the checkpoint after step 2
    assert run_main(monkeypatch, "train", str(cfg), "--out", str(out), *SHORT) == 1
    line, hint = error_lines(capsys.readouterr().err)
    assert line == f"error: {out / 'checkpoint.json'}: No space left on device"
    assert "epoch 1 step 2" in hint and f"skillgrad train {cfg}" in hint
    assert assert_checkpoint_kept(out, fault).global_step == 1
    monkeypatch.undo()
    assert run_main(monkeypatch, "train", str(cfg), "--out", str(out), *SHORT) == 0


def test_ctrl_c_during_a_checkpoint_write_keeps_the_last_one(
        cfg: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = cfg.parent / "run"
    fault = CheckpointFault(monkeypatch, out, 2, KeyboardInterrupt())  # after step 1
    assert run_main(monkeypatch, "train", str(cfg), "--out", str(out), *SHORT) == 130
    [line] = error_lines(capsys.readouterr().err)
    assert "interrupted" in line and "epoch 1 step 1" in line
    assert f"resume with: skillgrad train {cfg} --out {out}" in line
    assert assert_checkpoint_kept(out, fault).global_step == 0
    monkeypatch.undo()
    assert run_main(monkeypatch, "train", str(cfg), "--out", str(out), *SHORT) == 0


def test_ctrl_c_says_where_the_run_stopped_and_how_to_resume(cfg: Path) -> None:
    out = cfg.parent / "run"
    args = ("train", str(cfg), "--out", str(out), *SHORT, *SLOW)
    run = start(*args)
    wait_for(lambda: journal_lines(out, "e01-s002") >= 3, run, "step 2")
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    [line] = error_lines(err)
    assert line.startswith("error: interrupted") and "epoch 1 step 2" in line
    assert line.endswith(f"resume with: skillgrad {' '.join(args)}")
    resumed = cli(*args)
    assert resumed.returncode == 0, resumed.stderr


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_stop_a_run_as_ctrl_c_does(cfg: Path, signum: int) -> None:
    """``kill``, a closed terminal or a job scheduler's stop: the same line and exit code as
    Ctrl-C, the checkpoint kept, and the same command resumes."""
    out = cfg.parent / "run"
    args = ("train", str(cfg), "--out", str(out), *SHORT, *SLOW)
    run = start(*args)
    wait_for(lambda: journal_lines(out, "e01-s002") >= 3, run, "step 2")
    run.send_signal(signum)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    [line] = error_lines(err)
    assert line.startswith("error: interrupted") and "epoch 1 step 2" in line
    assert line.endswith(f"resume with: skillgrad {' '.join(args)}")
    assert TrainerState.model_validate_json((out / "checkpoint.json").read_text()).global_step == 1
    resumed = cli(*args)
    assert resumed.returncode == 0, resumed.stderr


# The disk fills up as a journal line is appended: ``skillgrad train`` with every append to
# the journal named argv[1] going to /dev/full (whose writes fail with ENOSPC, as a full
# disk's do, and name no file).
FULL_JOURNAL = """
import pathlib, runpy, sys
journal = sys.argv.pop(1)
opened = pathlib.Path.open
def open_full(self, mode="r", *args, **kwargs):
    if self.name == journal and "a" in mode:
        return open("/dev/full", mode, *args, **kwargs)
    return opened(self, mode, *args, **kwargs)
pathlib.Path.open = open_full
runpy.run_module("skillgrad.cli", run_name="__main__")
"""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("journal", ["calls.jsonl", "events.jsonl"])
def test_a_full_disk_at_a_journal_append_names_the_journal(cfg: Path, journal: str) -> None:
    out = cfg.parent / "run"
    args = ("train", str(cfg), "--out", str(out), *SHORT)
    full = subprocess.run([sys.executable, "-c", FULL_JOURNAL, journal, *args], env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert full.returncode == 1, full.stderr
    line, hint = error_lines(full.stderr)
    first = out / "init" / journal if journal == "calls.jsonl" else out / journal
    assert line == f"error: {first}: No space left on device"
    assert hint.endswith(f"resume with: skillgrad {' '.join(args)}")
    resumed = cli(*args)
    assert resumed.returncode == 0, resumed.stderr


@pytest.mark.parametrize("parent", ["default", "ignored"])
def test_ctrl_c_during_an_evaluation_says_so_in_one_line(cfg: Path, parent: str) -> None:
    """Also when the suite itself runs with SIGINT ignored (in the background, under
    ``nohup``): the child it starts is given the signal's default, as a terminal gives it."""
    out = cfg.parent / "ev"
    args = ("eval", str(cfg), "--initial", "--out", str(out), *SLOW)
    before = signal.getsignal(signal.SIGINT)
    if parent == "ignored":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        run = start(*args)
    finally:
        signal.signal(signal.SIGINT, before)
    wait_for(lambda: (out / "calls.jsonl").exists()
             and (out / "calls.jsonl").read_text().count("\n") >= 2, run, "two answered calls")
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    [line] = error_lines(err)
    assert line.startswith("error: interrupted; run the same command again")
    assert cli(*args).returncode == 0


# ----------------------------------------------------------------------------- messages


def test_a_failure_before_the_first_checkpoint_does_not_claim_one(cfg: Path) -> None:
    cfg.write_text(cfg.read_text().replace("function: toy:target", "replies: ['Answer: x']"))
    out = cfg.parent / "run"
    proc = cli("train", str(cfg), "--out", str(out))
    one_line_error(proc, code=1)
    assert "intact" not in proc.stderr and "no checkpoint was written yet" in proc.stderr
    assert not (out / "checkpoint.json").exists()


def test_show_and_train_agree_on_a_run_without_a_checkpoint(cfg: Path) -> None:
    failing = cfg.parent / "failing.yaml"
    failing.write_text(cfg.read_text().replace("function: toy:target", "replies: ['Answer: x']"))
    out = cfg.parent / "run"
    assert cli("train", str(failing), "--out", str(out)).returncode == 1
    line = one_line_error(cli("show", str(out)))
    assert "not a skillgrad run directory" not in line
    assert str(out) in line and "no checkpoint yet" in line
    line = one_line_error(cli("train", str(cfg), "--out", str(out)))
    assert "made with a different config" in line


def test_debug_may_follow_the_subcommand(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("train:\n  num_epoch: 3\n")
    proc = cli("train", str(tmp_path / "c.yaml"), "--debug")
    assert proc.returncode != 0 and "Traceback" in proc.stderr
    assert "No such option" not in proc.stderr


def test_fit_as_a_library_call_locks_the_run_directory(toy_dir: Path) -> None:
    from skillgrad.config import load_config
    from skillgrad.errors import RunDirError
    from skillgrad.trainer import build_trainer

    run = toy_dir / "run"
    run.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
        "f.write(f'{os.getpid()}\\n'); f.flush(); print('held', flush=True); time.sleep(30)"),
        str(run / "run.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(RunDirError, match=f"in use.*{holder.pid}"):
            build_trainer(load_config(toy_config(toy_dir)), run).fit()
    finally:
        holder.kill()
        holder.wait()
    # Its holder gone, the lock blocks nothing; a CLI start holding it already is no conflict.
    assert build_trainer(load_config(toy_config(toy_dir)), run).fit()["test"]["best"]["n"] > 0


def test_a_refused_config_change_is_not_preceded_by_a_resume_line(cfg: Path) -> None:
    out = cfg.parent / "run"
    assert cli("train", str(cfg), "--out", str(out)).returncode == 0
    again = cli("train", str(cfg), "--out", str(out))
    assert again.returncode == 0 and "steps are done; finishing the run" in again.stdout
    changed = cli("train", str(cfg), "--out", str(out), "--set", "optimizer.learning_rate=2")
    assert changed.returncode != 0 and "made with a different config" in changed.stderr
    assert "finishing the run" not in changed.stdout and "resuming" not in changed.stdout
