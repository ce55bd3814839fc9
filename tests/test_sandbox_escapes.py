"""Escapes from the code sandbox that model-written code may try, each refused: reaching a UNIX
socket outside its folder (through Python's socket module, ctypes or a child interpreter),
leaving a process behind that outlives the run, forking without bound, making a device node,
and handing back a link to an outside file for the trainer to read.

:data:`ESCAPES` holds one attempt per kind; the reliability suite runs them again and counts
them. The tests import only what every version of the sandbox has, so that each of them can
be run against an older one.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from skillgrad.sandbox import SandboxLimits, confinement, run_python

FOUND = confinement()
needs_confinement = pytest.mark.skipif(not FOUND.abi,
                                       reason=f"no confinement here: {FOUND.problem}")
LIMITS = SandboxLimits(timeout_s=10, cpu_s=5)


def _namespaces() -> Any:
    """What the host gives a run (None where the sandbox does not say: an older one, which
    must then hold the guarantees all the same)."""
    try:
        from skillgrad.namespaces import namespaces
    except ImportError:
        return None
    return namespaces()


NS = _namespaces()
needs_pid_namespace = pytest.mark.skipif(NS is not None and not NS.pid,
                                         reason="no PID namespace here (unshare -p)")
needs_process_limit = pytest.mark.skipif(NS is not None and not (NS.pid_max or NS.nproc),
                                         reason="no process limit is enforced here")


@dataclass(frozen=True)
class Attempt:
    """How one escape went: ``refused``, and what shows it (the code's output, what the
    server saw, what was left)."""

    refused: bool
    evidence: str


# ----------------------------------------------------------------------------- UNIX sockets

OUTCOME = """
try:
{attempt}
    print("CONNECTED")
except OSError as exc:
    print("refused", type(exc).__name__)
"""

CONNECT_WITH_SOCKET = """\
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(PATH)"""

CONNECT_WITH_CTYPES = """\
    import ctypes, struct
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.socket(1, 1, 0)  # AF_UNIX, SOCK_STREAM
    if fd < 0:
        raise OSError(ctypes.get_errno(), "socket")
    raw = PATH.encode()
    address = struct.pack("H", 1) + raw + bytes(108 - len(raw))
    if libc.connect(fd, address, len(address)) != 0:
        raise OSError(ctypes.get_errno(), "connect")"""

CONNECT_FROM_A_CHILD = """\
    import subprocess, sys
    child = {child!r}
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
    print(done.stdout + done.stderr)
    if "CONNECTED" in done.stdout:
        raise SystemExit(0)
    raise OSError("the child interpreter was refused")"""


def connect_code(how: str, path: str) -> str:
    """Code that tries to connect to the UNIX socket ``path`` ``how``, printing CONNECTED or
    refused."""
    socket_code = f"PATH = {path!r}\n" + OUTCOME.format(attempt=CONNECT_WITH_SOCKET)
    attempt = {"socket module": CONNECT_WITH_SOCKET, "ctypes": CONNECT_WITH_CTYPES,
               "child interpreter": CONNECT_FROM_A_CHILD.format(child=socket_code)}[how]
    return f"PATH = {path!r}\n" + OUTCOME.format(attempt=attempt)


@contextmanager
def unix_server() -> Iterator[tuple[str, list[str]]]:
    """A listening UNIX socket with a path outside any sandbox folder, and the connections it
    accepted (a short folder of its own: a socket's path holds at most 107 bytes)."""
    folder = tempfile.mkdtemp(prefix="sg-sock-")
    path = os.path.join(folder, "agent.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    server.settimeout(0.05)
    accepted: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            accepted.append("connection")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield path, accepted
    finally:
        time.sleep(0.2)  # a connection in flight is still counted
        stop.set()
        thread.join()
        server.close()
        os.unlink(path)
        os.rmdir(folder)


def try_unix_socket(how: str, work: Path) -> Attempt:
    with unix_server() as (path, accepted):
        result = run_python(connect_code(how, path), work, LIMITS)
    said = result.output.strip()
    refused = "CONNECTED" not in said and "refused" in said and not accepted
    return Attempt(refused, f"{said[-300:]!r}; the server accepted {len(accepted)}")


CONNECTIONS = ("socket module", "ctypes", "child interpreter")


@needs_confinement
@pytest.mark.parametrize("how", CONNECTIONS)
def test_a_unix_socket_outside_the_folder_cannot_be_reached(tmp_path: Path, how: str) -> None:
    attempt = try_unix_socket(how, tmp_path)
    assert attempt.refused, attempt.evidence


@needs_confinement
def test_unix_socket_pairs_and_io_uring_are_refused(tmp_path: Path) -> None:
    """A socket pair could still send to a path (``sendto``); a ring makes sockets without
    the socket syscall."""
    code = ("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "pair = (ctypes.c_int * 2)()\n"
            "print('pair', libc.socketpair(1, 1, 0, pair), ctypes.get_errno())\n"
            "print('ring', libc.syscall(425, 8, ctypes.create_string_buffer(120)), "
            "ctypes.get_errno())")
    result = run_python(code, tmp_path, LIMITS)
    assert result.output.split() == ["pair", "-1", "1", "ring", "-1", "1"], result.output


# ----------------------------------------------------------------------------- processes

LEAVE_BEHIND = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep({delay})
        open("late.txt", "w").write("outlived the run")
        os._exit(0)
    os._exit(0)
os.wait()
print("left a process behind", flush=True)
{then}
"""


def processes_in(folder: Path) -> list[int]:
    """The processes whose working directory is ``folder`` (all the code started, here)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.readlink(entry / "cwd") == str(folder):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _kill_all(pids: list[int]) -> None:
    for pid in pids:  # what an older sandbox left behind: not left to run on
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def try_leaving_a_process(work: Path, timed_out: bool) -> Attempt:
    """Code that starts a grandchild in a session of its own, which writes ``late.txt`` after
    the run; the run ends normally or at its timeout."""
    delay = 2.0
    code = LEAVE_BEHIND.format(delay=delay, then="time.sleep(60)" if timed_out else "")
    folder = work.resolve()
    result = run_python(code, folder, SandboxLimits(timeout_s=1.5, cpu_s=5))
    left = processes_in(folder)
    time.sleep(delay + 0.5)
    late = (folder / "late.txt").exists()
    _kill_all(processes_in(folder))
    refused = (result.timed_out == timed_out and "left a process behind" in result.output
               and not left and not late)
    return Attempt(refused, f"{result.summary()!r}; left running: {left}; late.txt: {late}")


@needs_pid_namespace
@pytest.mark.parametrize("timed_out", [False, True], ids=["run ends", "timeout"])
def test_a_process_in_its_own_session_does_not_outlive_the_run(tmp_path: Path,
                                                               timed_out: bool) -> None:
    attempt = try_leaving_a_process(tmp_path, timed_out)
    assert attempt.refused, attempt.evidence


FORK_BOMB = """
import os, time
made = 0
try:
    for _ in range({bound}):  # bounded: a host without a limit is not flooded
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        made += 1
except OSError as exc:
    print("stopped after", made, exc.errno)
else:
    print("made", made)
"""


def try_fork_bomb(work: Path) -> Attempt:
    folder = work.resolve()
    result = run_python(FORK_BOMB.format(bound=400), folder, LIMITS)
    left = processes_in(folder)
    _kill_all(left)
    words = result.output.split()
    stopped = words[:2] == ["stopped", "after"] and int(words[2]) < 64 and words[3] == "11"
    return Attempt(stopped and not left, f"{result.summary()!r}; left running: {len(left)}")


@needs_process_limit
def test_a_fork_bomb_is_stopped(tmp_path: Path) -> None:
    attempt = try_fork_bomb(tmp_path)
    assert attempt.refused, attempt.evidence


# ----------------------------------------------------------------------------- files


def try_device_node(work: Path) -> Attempt:
    """Root may make device nodes: one for the disk would read every file. This one is
    harmless (``/dev/null``'s numbers); it must not be made at all."""
    code = ("import os, stat\ntry:\n"
            "    os.mknod('node', stat.S_IFCHR | 0o600, os.makedev(1, 3))\n    print('made')\n"
            "except OSError as exc:\n    print('refused', type(exc).__name__)")
    result = run_python(code, work, LIMITS)
    return Attempt(result.output.startswith("refused") and not (work / "node").exists(),
                   result.output)


@needs_confinement
def test_device_nodes_cannot_be_made(tmp_path: Path) -> None:
    attempt = try_device_node(tmp_path)
    assert attempt.refused, attempt.evidence


SECRET = "OUTSIDE-SECRET"
LINK_TO = "import os\nos.remove('workbook.xlsx')\nos.symlink({target!r}, 'workbook.xlsx')"


def _workbook(path: Path, value: str) -> Path:
    openpyxl = pytest.importorskip("openpyxl")
    wb = openpyxl.Workbook()
    wb.active.title = "Sheet1"
    wb.active["A1"] = value
    wb.save(path)
    return path


def try_linking_the_workbook(work: Path) -> Attempt:
    """The python tool's code replaces its workbook with a link to a workbook outside its
    folder that holds a secret; the session must not load it."""
    from skillgrad.envs.spreadsheet import SpreadsheetOptions
    from skillgrad.envs.spreadsheet.workbook import WorkbookSession
    from skillgrad.envs.tools import ToolError

    outside = _workbook(work / "outside.xlsx", SECRET)
    own = work / "own"
    own.mkdir()
    session = WorkbookSession(_workbook(own / "workbook.xlsx", "mine"),
                              SpreadsheetOptions(python_tool=True))
    try:
        said = session.python(LINK_TO.format(target=str(outside)))
    except ToolError as exc:
        said = str(exc)
    shown = session.read_range("Sheet1!A1:A1")
    refused = SECRET not in shown and "symbolic link" in said
    return Attempt(refused, f"tool said {said!r}; the session shows {shown!r}")


@needs_confinement
def test_a_workbook_replaced_by_a_link_is_not_read(tmp_path: Path) -> None:
    attempt = try_linking_the_workbook(tmp_path)
    assert attempt.refused, attempt.evidence


@needs_confinement
def test_a_task_whose_workbook_became_a_link_is_a_scored_failure(tmp_path: Path) -> None:
    """The link points at the solved workbook: read through, it would score 1."""
    pytest.importorskip("openpyxl")
    import json

    from skillgrad.envs.base import EnvCommon
    from skillgrad.envs.spreadsheet import SpreadsheetEnvironment, SpreadsheetOptions
    from skillgrad.envs.spreadsheet.templates import apply_solution
    from skillgrad.models.scripted import ScriptedModel

    env = SpreadsheetEnvironment.create(
        EnvCommon(name="spreadsheet"),
        SpreadsheetOptions(count=5, templates=("lookup",), python_tool=True), Path("."))
    task = env.tasks("train")[0]
    solved = tmp_path / "solved.xlsx"
    solved.write_bytes(apply_solution(env.generated(task)))
    call = json.dumps({"code": LINK_TO.format(target=str(solved))})
    result = env.rollout(task, env.initial_skill(),
                         ScriptedModel([f"ACTION: python {call}", "ANSWER: done"]))
    assert result.hard == 0.0, f"scored {result.hard} through the link"
    assert "symbolic link" in result.reason


def test_read_handed_back_follows_nothing(tmp_path: Path) -> None:
    from skillgrad.sandbox import UnsafeFile, read_handed_back

    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    (work / "kept.txt").write_text("mine")
    (work / "sub").mkdir()
    (work / "sub" / "kept.txt").write_text("mine too")
    (work / "link.txt").symlink_to(outside / "secret.txt")
    (work / "door").symlink_to(outside)
    os.mkfifo(work / "pipe")
    assert read_handed_back(work, "kept.txt") == b"mine"
    assert read_handed_back(work, "sub/kept.txt") == b"mine too"
    assert read_handed_back(work, "missing.txt") is None
    for name in ("link.txt", "door/secret.txt", "pipe", "sub"):  # a FIFO would block
        with pytest.raises(UnsafeFile, match="not read"):
            read_handed_back(work, name)
    with pytest.raises(ValueError):
        read_handed_back(work, "../outside/secret.txt")


ESCAPES: dict[str, Callable[[Path], Attempt]] = {
    "unix socket (socket module)": lambda work: try_unix_socket("socket module", work),
    "unix socket (ctypes)": lambda work: try_unix_socket("ctypes", work),
    "unix socket (child interpreter)": lambda work: try_unix_socket("child interpreter", work),
    "setsid, run ends": lambda work: try_leaving_a_process(work, timed_out=False),
    "setsid, timeout": lambda work: try_leaving_a_process(work, timed_out=True),
    "fork bomb": try_fork_bomb,
    "device node": try_device_node,
    "workbook link": try_linking_the_workbook,
}
"""Every escape above, by name: what the reliability suite tries and counts."""


def unavailable(name: str) -> str:
    """Why the escape ``name`` cannot be tried on this host ("" when it can)."""
    if not FOUND.abi:
        return f"no confinement here: {FOUND.problem}"
    if name.startswith("setsid") and NS is not None and not NS.pid:
        return "no PID namespace here (unshare -p)"
    if name == "fork bomb" and NS is not None and not (NS.pid_max or NS.nproc):
        return "no process limit is enforced here"
    return ""
