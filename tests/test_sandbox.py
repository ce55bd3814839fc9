"""The sandbox for agent-written code: limits, isolation, file-system confinement and output
capping."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skillgrad import confine, sandbox, seccomp
from skillgrad.envs.base import EnvCommon
from skillgrad.sandbox import SandboxLimits, SandboxUnavailable, confinement, run_python

FAST = SandboxLimits(timeout_s=2.0, cpu_s=1, memory_mb=512, max_output_chars=300)
FOUND = confinement()
needs_landlock = pytest.mark.skipif(not FOUND.abi, reason=f"no confinement here: {FOUND.problem}")


def test_runs_code_in_the_given_folder_and_returns_its_output(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("hello")
    result = run_python("import os\nprint(os.getcwd())\nprint(open('data.txt').read())\n"
                        "open('out.txt', 'w').write('made')", tmp_path, FAST)
    assert result.returncode == 0 and not result.timed_out
    assert result.output.splitlines() == [str(tmp_path.resolve()), "hello"]
    assert (tmp_path / "out.txt").read_text() == "made"
    assert result.summary().endswith("(exit code 0)")


def test_environment_variables_of_the_parent_are_not_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    result = run_python("import os, json; print(json.dumps(sorted(os.environ)))", tmp_path, FAST)
    assert "OPENAI_API_KEY" not in result.output and "sk-secret" not in result.output
    assert result.output.strip() == '["HOME", "LANG", "PATH", "TMPDIR"]'


@pytest.mark.parametrize("code", [
    "import socket\ns = socket.socket()\nprint('created')",
    "import _socket\ns = _socket.socket()\nprint('created')",
    "import socket\nsocket.create_connection(('127.0.0.1', 9))\nprint('created')",
    "import socket\nsocket.getaddrinfo('localhost', 80)\nprint('created')",
])
def test_network_is_blocked(tmp_path: Path, code: str) -> None:
    result = run_python(code, tmp_path, FAST)
    assert result.returncode != 0 and "created" not in result.output
    assert "network access is disabled" in result.output


def test_wall_clock_timeout_kills_the_process_group(tmp_path: Path) -> None:
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print('started', flush=True)\n"
            "time.sleep(60)")
    started = time.monotonic()
    result = run_python(code, tmp_path, SandboxLimits(timeout_s=1.5, cpu_s=5))
    assert result.timed_out and result.returncode is None
    assert time.monotonic() - started < 10
    assert "wall-clock timeout" in result.summary() and "started" in result.output
    # The grandchild died with the run. (The PID the code sees is its namespace's; the
    # working directory names the run's processes from outside.)
    assert [p for p in _processes_in(tmp_path.resolve()) if _alive(p)] == []


def _processes_in(folder: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "cwd") == str(folder):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_cpu_limit_stops_a_busy_loop(tmp_path: Path) -> None:
    result = run_python("while True:\n    pass", tmp_path,
                        SandboxLimits(timeout_s=20, cpu_s=1))
    assert not result.timed_out and result.returncode is not None and result.returncode < 0
    assert "killed by signal" in result.summary()


def test_memory_limit(tmp_path: Path) -> None:
    result = run_python("x = bytearray(2 * 1024 ** 3)\nprint('allocated')", tmp_path, FAST)
    assert result.returncode != 0 and "allocated" not in result.output
    assert "MemoryError" in result.output


def test_output_is_truncated_keeping_its_start_and_end(tmp_path: Path) -> None:
    result = run_python("print('start' + 'x' * 100000)\nraise SystemExit('the end')", tmp_path,
                        FAST)
    assert result.truncated and len(result.output) == 300
    assert result.output.startswith("start") and result.output.rstrip().endswith("the end")
    assert "[... output truncated ...]" in result.summary()
    short = run_python("print('y' * 200)", tmp_path, FAST)
    assert not short.truncated and short.output.strip() == "y" * 200


def test_errors_in_the_code_are_reported_not_raised(tmp_path: Path) -> None:
    result = run_python("raise ValueError('bad input')", tmp_path, FAST)
    assert result.returncode == 1 and "ValueError: bad input" in result.output


# ----------------------------------------------------------------------------- confinement

TRY_WRITE = """
import os, subprocess
def attempt(label, action):
    try:
        action()
        print(label, "done")
    except OSError as exc:
        print(label, "denied", type(exc).__name__)
attempt("open", lambda: open(OUTSIDE + "/made.txt", "w").write("x"))
attempt("mkdir", lambda: os.mkdir(OUTSIDE + "/made-dir"))
attempt("parent", lambda: open("../escape.txt", "w").write("x"))
os.symlink(OUTSIDE, "door")
attempt("symlink", lambda: open("door/through.txt", "w").write("x"))
open("moved.txt", "w").write("x")
attempt("rename", lambda: os.rename("moved.txt", OUTSIDE + "/moved.txt"))
done = subprocess.run(["touch", OUTSIDE + "/touched.txt"], capture_output=True)
print("touch", "done" if done.returncode == 0 else "denied")
open("inside.txt", "w").write("kept")
os.mkdir("inside-dir")
print("inside done")
"""


@needs_landlock
def test_writes_outside_the_working_folder_are_denied(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    code = f"OUTSIDE = {str(outside)!r}\n{TRY_WRITE}"
    result = run_python(code, work, SandboxLimits(timeout_s=10, cpu_s=5))
    assert result.confined and result.returncode == 0, result.output
    lines = result.output.splitlines()
    assert lines == ["open denied PermissionError", "mkdir denied PermissionError",
                     "parent denied PermissionError", "symlink denied PermissionError",
                     "rename denied PermissionError", "touch denied", "inside done"]
    assert list(outside.iterdir()) == [] and not (tmp_path / "escape.txt").exists()
    assert (work / "inside.txt").read_text() == "kept" and (work / "inside-dir").is_dir()


@needs_landlock
def test_home_secrets_and_other_folders_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    planted = {home / ".ssh" / "id_ed25519": "SECRET-KEY",
               home / ".cache" / "skillgrad" / "calls.jsonl": "SECRET-CACHE",
               home / "notes.txt": "SECRET-NOTES",
               tmp_path / "runs" / "r1" / "checkpoint.json": "SECRET-RUN"}
    for path, text in planted.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    real_home = str(Path.home())  # here it may hold the Python installation (pyenv)
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    targets = [*map(str, planted), str(home), str(home / ".ssh"), real_home]
    code = (f"import os\nfor p in {targets!r}:\n    try:\n"
            "        print(open(p).read() if os.path.isfile(p) else os.listdir(p))\n"
            "    except PermissionError:\n        print('denied')\n")
    result = run_python(code, work, FAST)
    assert result.confined and result.returncode == 0, result.output
    assert "SECRET" not in result.output
    assert result.output.split() == ["denied"] * len(targets)


@needs_landlock
def test_python_and_its_packages_still_run_confined(tmp_path: Path) -> None:
    pytest.importorskip("openpyxl")
    code = ("import openpyxl, subprocess, sys, tempfile\n"
            "wb = openpyxl.Workbook(); wb.active['A1'] = 7; wb.save('w.xlsx')\n"
            "print(openpyxl.load_workbook('w.xlsx').active['A1'].value)\n"
            "print(subprocess.run([sys.executable, '-c', 'print(6 * 7)'],\n"
            "                     capture_output=True, text=True).stdout.strip())\n"
            "with tempfile.NamedTemporaryFile() as t:\n"
            f"    print(t.name.startswith({str(tmp_path.resolve())!r}))")
    result = run_python(code, tmp_path, SandboxLimits(timeout_s=20, cpu_s=10))
    assert result.confined and result.returncode == 0, result.output
    assert result.output.split() == ["7", "42", "True"]


@needs_landlock
@pytest.mark.skipif(FOUND.abi < 6, reason="signal scoping needs Landlock ABI 6 (Linux 6.12)")
def test_confined_code_cannot_signal_the_trainer(tmp_path: Path) -> None:
    """Refused by Landlock's scope, or not even there: in a PID namespace of its own the code
    sees no process outside it."""
    code = (f"import os\ntry:\n    os.kill({os.getpid()}, 0)\n    print('reached')\n"
            "except (PermissionError, ProcessLookupError):\n    print('denied')")
    assert run_python(code, tmp_path, FAST).output.strip() == "denied"


def test_a_readable_folder_may_not_hold_the_home_or_its_secrets() -> None:
    confine.check_roots(["/usr", "/home/u/.venv", "/home/u/.pyenv/versions/3.11"], ["/home/u"])
    with pytest.raises(confine.ConfinementError, match="holds the home directory /home/u"):
        confine.check_roots(["/usr", "/home"], ["/home/u"])
    with pytest.raises(confine.ConfinementError, match="overlaps /home/u/.ssh"):
        confine.check_roots(["/home/u/.ssh/tools"], ["/home/u"])
    with pytest.raises(confine.ConfinementError, match="overlaps /home/u/.cache/skillgrad"):
        confine.check_roots(["/home/u/.cache"], ["/srv", "/home/u"])


@needs_landlock
def test_a_child_that_cannot_confine_itself_is_an_error_not_a_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A home inside what Python must read cannot be hidden: the child refuses before the
    code runs, and the caller gets an error rather than an unconfined result."""
    monkeypatch.setenv("HOME", "/usr")
    with pytest.raises(SandboxUnavailable, match="holds the home directory /usr") as caught:
        run_python("open('ran.txt', 'w').write('x')", tmp_path, FAST)
    assert "\n" not in str(caught.value)
    assert not (tmp_path / "ran.txt").exists()


@pytest.fixture
def no_landlock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A kernel without Landlock, as the capability probe sees it."""
    monkeypatch.setattr(confine, "landlock_abi", lambda: 0)
    sandbox.confinement.cache_clear()
    yield
    sandbox.confinement.cache_clear()


def test_without_confinement_code_is_refused_unless_allowed(
    tmp_path: Path, no_landlock: None
) -> None:
    assert not confinement().abi and "offers no Landlock" in confinement().problem
    with pytest.raises(SandboxUnavailable, match="allow_unconfined=True") as caught:
        run_python("open('ran.txt', 'w').write('x')", tmp_path, FAST)
    assert "\n" not in str(caught.value) and "offers no Landlock" in str(caught.value)
    assert not (tmp_path / "ran.txt").exists()
    allowed = run_python("open('ran.txt', 'w').write('x')\nprint('ran')", tmp_path, FAST,
                         allow_unconfined=True)
    assert allowed.returncode == 0 and not allowed.confined and allowed.output.strip() == "ran"


def test_the_spreadsheet_python_tool_is_refused_when_built_unless_allowed(
    tmp_path: Path, no_landlock: None
) -> None:
    pytest.importorskip("openpyxl")
    from skillgrad.envs.spreadsheet import SpreadsheetEnvironment, SpreadsheetOptions
    from skillgrad.envs.spreadsheet.workbook import WorkbookSession

    common, small = EnvCommon(name="spreadsheet"), {"count": 5, "templates": ("lookup",)}
    with pytest.raises(SandboxUnavailable) as caught:
        SpreadsheetEnvironment.create(common, SpreadsheetOptions(**small, python_tool=True),
                                      Path("."))
    message = str(caught.value)
    assert "\n" not in message and message.startswith("env.python_tool: model-written code ")
    assert "set env.allow_unconfined_python: true" in message
    SpreadsheetEnvironment.create(common, SpreadsheetOptions(**small), Path("."))  # no tool
    allowed = SpreadsheetEnvironment.create(common, SpreadsheetOptions(
        **small, python_tool=True, allow_unconfined_python=True), Path("."))
    path = tmp_path / "workbook.xlsx"
    path.write_bytes(allowed.generated(allowed.tasks("train")[0]).workbook)
    assert WorkbookSession(path, allowed.options).python("print('ran')") == "ran\n(exit code 0)"


# ----------------------------------------------------------------------------- what it says


def test_the_sandbox_logs_what_this_host_guarantees(caplog: pytest.LogCaptureFixture) -> None:
    sandbox.confinement.cache_clear()
    with caplog.at_level(logging.INFO, logger="skillgrad.sandbox"):
        found = confinement()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("code sandbox:")]
    assert len(said) == 1 and "namespaces" in said[0]
    if found.abi:
        assert found.details.startswith(f"Landlock ABI {found.abi}, seccomp filter (")
        assert found.details in said[0]


def test_an_architecture_the_filter_does_not_know_is_refused_unless_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(seccomp, "arch", lambda: "")
    sandbox.confinement.cache_clear()
    try:
        if confine.landlock_abi() < 1:
            pytest.skip("no Landlock here: that refusal comes first")
        assert not confinement().abi
        assert "seccomp filter does not know this architecture" in confinement().problem
        with pytest.raises(SandboxUnavailable, match="allow_unconfined=True"):
            run_python("print('ran')", tmp_path, FAST)
        allowed = run_python("print('ran')", tmp_path, FAST, allow_unconfined=True)
        assert allowed.output.strip() == "ran" and not allowed.confined
    finally:
        sandbox.confinement.cache_clear()


def _decide(program: list[tuple[int, int, int, int]], data: dict[int, int]) -> int:
    """Classic BPF as the kernel runs the filter: loads of a word, jumps, returns."""
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = program[pc]
        if code == 0x20:  # ld [k]
            acc, pc = data[k], pc + 1
        elif code in (0x15, 0x35):  # jeq, jge
            hit = acc == k if code == 0x15 else acc >= k
            pc += 1 + (jt if hit else jf)
        else:
            assert code == 0x06
            return k


@pytest.mark.parametrize("arch", sorted(seccomp.ARCHES))
def test_the_filter_refuses_unix_sockets_and_io_uring_only(arch: str) -> None:
    spec = seccomp.ARCHES[arch]
    program = seccomp.program(arch)
    allow, eperm, kill = 0x7FFF0000, 0x00050001, 0x80000000

    def decide(nr: int, arg0: int = 0, audit: int = spec.audit) -> int:
        return _decide(program, {4: audit, 0: nr, 16: arg0})

    for nr in (spec.socket, spec.socketpair):
        assert decide(nr, 1) == eperm  # AF_UNIX
        assert decide(nr, 2) == allow and decide(nr, 10) == allow  # AF_INET, AF_INET6
    assert [decide(nr) for nr in seccomp.IO_URING] == [eperm] * 3
    assert decide(0) == allow and decide(1, 1) == allow  # other syscalls, whatever arg 0
    assert decide(spec.socket, 1, audit=0x40000003) == kill  # i386 (int 0x80)
    if spec.x32:
        assert decide(0x40000000 | spec.socket, 1) == kill


def test_the_code_sees_its_own_exit_status_through_the_init(tmp_path: Path) -> None:
    assert run_python("raise SystemExit(3)", tmp_path, FAST).returncode == 3
    killed = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", tmp_path,
                        FAST)
    assert killed.returncode == -9 and "killed by signal 9" in killed.summary()
