"""A restricted subprocess for model-written code: the "untrusted op" of a forward pass.

Environments that give the target a ``python`` tool run its code here, never in the trainer's
process. Each run gets:

* a fresh working directory (the caller copies in the files the code may touch);
* file-system confinement by the kernel (Landlock, :mod:`skillgrad.confine`): the code and
  everything it starts can write only inside the working directory, and read only that, the
  system's program and library folders and the folders Python runs from, so the home
  directory, its secrets and the run directory are out of reach; and a seccomp filter
  (:mod:`skillgrad.seccomp`) that refuses UNIX sockets, which Landlock does not check. Where
  the kernel cannot do both, :func:`run_python` refuses unless the caller allows unconfined
  runs explicitly;
* a cleared environment (``PATH``, ``HOME`` and ``TMPDIR`` = the working directory, ``LANG``
  only), so API keys and tokens of the trainer are not visible;
* ``python -I`` (isolated mode: no ``PYTHON*`` variables, no user site) and a bootstrap that
  reads the code, confines the process, sets CPU-time, address-space and file-size limits,
  then installs an audit hook that refuses every socket operation before the code is
  compiled. Audit hooks cannot be removed from inside the process, so ``import _socket`` does
  not get around it;
* private network and PID namespaces and a process limit where the host allows them
  (:mod:`skillgrad.namespaces`): the bootstrap is the init of the PID namespace, so when the
  code's process ends, or the run is killed, nothing it started is left running;
* a wall-clock timeout that kills the run, and output (stdout and stderr together) truncated
  to a limit.

Files the code hands back are read with :func:`read_handed_back`, which follows no link the
code made.

It guards the user's files and keys against model-written code; it does not hide the files
inside the readable folders (the Python installation, ``sys.path``, ``/usr``), nor whether a
path exists elsewhere (``stat`` is not confined).
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import platform
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from skillgrad import confine, seccomp
from skillgrad.errors import ConfigError
from skillgrad.namespaces import PROCESS_LIMIT, RESERVED_PIDS, kill_run, namespaces

logger = logging.getLogger(__name__)

# Runs in the child before the model's code; argv[1] is a JSON object (see _run). As the init
# of the run's PID namespace (PID 1) it first caps the namespace's processes, forks the code's
# process and waits for it: when that ends, the init ends and the kernel kills all that is left.
# The code's process reads the code, loads confine and seccomp, confines itself with both (the
# status file is written and closed before the code runs, so the code cannot forge it), sets
# the limits, then installs an audit hook that refuses sockets before the code is compiled.
_BOOTSTRAP = r"""
import json, os, resource, sys
cfg = json.loads(sys.argv[1])
limits = {}  # what caps the processes, and at how many
if os.getpid() == 1:
    if cfg["pid_max"]:
        try:
            with open("/proc/sys/kernel/pid_max", "w") as f:
                f.write(str(cfg["pid_max"]))
            limits["pid_max"] = cfg["pid_max"] - 1
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:  # the next PIDs wrap round
                f.write(str(cfg["pid_max"] - 1))  # RESERVED_PIDS .. pid_max - 1 from the start
            limits["pid_max"] = cfg["limit"]
        except OSError:
            pass
    child = os.fork()
    if child:
        import signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # so the namespace's own cannot end it
        while True:
            pid, status = os.wait()  # also reaps the orphans the namespace hands to its init
            if pid == child:
                break
        with open(cfg["exit"], "w", encoding="utf-8") as f:
            f.write(str(os.waitstatus_to_exitcode(status)))
        os._exit(0)
elif sys.platform == "linux":  # no PID namespace: orphans come back here, to be found and killed
    import ctypes
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
with open(cfg["code"], encoding="utf-8") as f:
    source = f.read()
if cfg["nproc"]:
    resource.setrlimit(resource.RLIMIT_NPROC, (cfg["limit"], cfg["limit"]))
    limits["RLIMIT_NPROC"] = cfg["limit"]
processes = (f"at most {min(limits.values())} processes ({', '.join(limits)})" if limits
             else "no process limit")
if cfg["confine"]:
    import importlib.util
    def load(name, path):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    with open(cfg["status"], "w", encoding="utf-8") as status:
        try:
            landlock = load("_skillgrad_confine", cfg["confine"])
            seccomp = load("_skillgrad_seccomp", cfg["seccomp"])
            abi = landlock.confine([os.getcwd()], cfg["homes"])
            arch = seccomp.install()
        except OSError as exc:
            status.write(f"error: {exc}")
            sys.exit(f"the sandbox cannot confine this code: {exc}")
        status.write(f"ok: Landlock ABI {abi}, seccomp filter ({arch}), {processes}")
resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu"], cfg["cpu"] + 1))
resource.setrlimit(resource.RLIMIT_AS, (cfg["memory"], cfg["memory"]))
resource.setrlimit(resource.RLIMIT_FSIZE, (cfg["fsize"], cfg["fsize"]))
def _no_network(event, args):
    if event.startswith("socket."):
        raise PermissionError("network access is disabled in this sandbox")
sys.addaudithook(_no_network)
code_path = cfg["code"]
del resource, f, cfg, json
sys.argv = [code_path]
exec(compile(source, "agent_code.py", "exec"), {"__name__": "__main__"})
"""


class SandboxUnavailable(ConfigError):
    """Model-written code cannot be confined on this host, and running it unconfined was not
    allowed (or the child could not apply the confinement the host was found to offer)."""


@dataclass(frozen=True)
class Confinement:
    """Whether this host confines the sandbox: the Landlock ABI in use, or 0 and the reason it
    cannot; ``details`` is what a test run reported (Landlock, seccomp, process limit)."""

    abi: int
    problem: str = ""
    details: str = ""


@dataclass(frozen=True)
class SandboxLimits:
    """Resource limits of one run."""

    timeout_s: float = 10.0
    cpu_s: int = 10
    memory_mb: int = 1024
    max_output_chars: int = 2000
    max_file_mb: int = 64


@dataclass(frozen=True)
class SandboxResult:
    """What a run produced. ``returncode`` is None when the run was killed at the timeout;
    ``confined`` says whether the kernel confined its file access."""

    returncode: int | None
    output: str
    timed_out: bool
    truncated: bool
    network_namespace: bool
    confined: bool
    pid_namespace: bool = False

    def summary(self) -> str:
        """The observation an agent sees: the output and how the run ended."""
        if self.timed_out:
            end = "killed: wall-clock timeout"
        elif self.returncode == 0:
            end = "exit code 0"
        elif self.returncode is not None and self.returncode < 0:
            end = f"killed by signal {-self.returncode} (CPU or memory limit?)"
        else:
            end = f"exit code {self.returncode}"
        return f"{self.output.rstrip()}\n({end})".lstrip()


@functools.cache
def confinement() -> Confinement:
    """Whether the kernel confines the sandbox here: Landlock is offered, the seccomp filter
    knows this architecture, *and* a test run of the bootstrap could write inside its folder
    but not beside it, nor make a UNIX socket. Probed once per process; logs what it found."""
    found = _probe()
    if found.abi:
        logger.info("code sandbox: %s; %s", found.details, namespaces().describe())
    else:
        logger.info("code sandbox: not confined (%s); %s", found.problem,
                    namespaces().describe())
    return found


def _probe() -> Confinement:
    if sys.platform != "linux":
        return Confinement(0, f"{sys.platform} has no Landlock (Linux only)")
    abi = confine.landlock_abi()
    if abi < 1:
        return Confinement(0, f"the kernel ({platform.release()}) offers no Landlock: it needs "
                              "Linux 5.13+ with landlock in the boot's LSM list")
    if not seccomp.arch():
        return Confinement(0, f"the sandbox's seccomp filter does not know this architecture "
                              f"({platform.machine()}; it knows {', '.join(seccomp.ARCHES)})")
    with tempfile.TemporaryDirectory(prefix="skillgrad-probe-") as probe:
        work, beside = Path(probe) / "work", Path(probe) / "beside"
        work.mkdir()
        beside.mkdir()
        code = ("import ctypes\nopen('inside', 'w').write('x')\ntry:\n"
                f"    open({str(beside / 'x')!r}, 'w')\nexcept PermissionError:\n"
                "    if ctypes.CDLL(None).socket(1, 1, 0) < 0:\n        print('confined')")
        result, status = _run(code, work, SandboxLimits(timeout_s=30, cpu_s=10), confined=True)
        held = (status.startswith("ok") and result.output.strip() == "confined"
                and (work / "inside").is_file() and not (beside / "x").exists())
    if not held:
        said = result.output.strip().splitlines() or [result.summary()]
        reason = status.removeprefix("error: ") or said[-1]
        return Confinement(0, f"Landlock ABI {abi} and the seccomp filter did not hold in a "
                              f"test run ({reason})")
    return Confinement(abi, details=status.removeprefix("ok: "))


def require_confinement(allow_unconfined: bool, subject: str = "model-written code",
                        opt_in: str = "allow_unconfined=True") -> None:
    """Refuse, as one line naming ``opt_in``, to go on where the sandbox cannot confine
    ``subject``, unless ``allow_unconfined``; then warn that it will run unconfined. Meant for
    the time a config is built, so the refusal comes before any run starts."""
    found = confinement()
    if found.abi:
        return
    if not allow_unconfined:
        raise SandboxUnavailable(_refusal(found, subject, opt_in))
    logger.warning("%s runs unconfined (%s): it can read and write every file this user can",
                   subject, found.problem)


def _refusal(found: Confinement, subject: str, opt_in: str) -> str:
    return (f"{subject} cannot be confined here: {found.problem}; set {opt_in} to run it "
            "with this user's access to every file")


def run_python(code: str, workdir: Path, limits: SandboxLimits = SandboxLimits(), *,
               allow_unconfined: bool = False) -> SandboxResult:
    """Run ``code`` with the interpreter of this process in ``workdir`` under ``limits``,
    confined by the kernel; without confinement only where ``allow_unconfined``.

    Never raises for anything the code does (an exception, a crash, a timeout are all in the
    result); raises :class:`SandboxUnavailable` when it cannot confine the code and may not
    run it unconfined, :class:`OSError` when the interpreter cannot be started at all.
    """
    found = confinement()
    if not found.abi and not allow_unconfined:
        raise SandboxUnavailable(_refusal(found, "model-written code", "allow_unconfined=True"))
    result, status = _run(code, Path(workdir).resolve(), limits, confined=bool(found.abi))
    # The code runs only after the bootstrap wrote "ok"; a run killed at the timeout before
    # that ran nothing and is an ordinary timed-out result.
    if found.abi and not status.startswith("ok") and not (result.timed_out and not status):
        problem = status.removeprefix("error: ") or "the child did not report its confinement"
        raise SandboxUnavailable(f"model-written code could not be confined: {problem}")
    return result


class UnsafeFile(OSError):
    """A file handed back by sandboxed code is a link, or not a regular file of its folder."""


def read_handed_back(workdir: Path, name: str) -> bytes | None:
    """The bytes of ``name`` (a path relative to ``workdir``) as a run left it, or None when
    it is not there. The code may have replaced it, or a folder on its way, by a symbolic link
    to a file it could not read itself, which this process can: nothing is followed (each step
    is opened relative to the last with ``O_NOFOLLOW``), and :class:`UnsafeFile` says why
    what is there is not a regular file, which is then not opened for reading at all."""
    parts = Path(name).parts
    if not parts or Path(name).is_absolute() or ".." in parts:
        raise ValueError(f"{name!r} is not a path inside the folder")
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    folder = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for step in parts[:-1]:
            inner = _open_step(step, folder, os.O_RDONLY | os.O_DIRECTORY | nofollow, name)
            if inner is None:
                return None
            os.close(folder)
            folder = inner
        # O_PATH first: a FIFO or a device is refused before it is opened (which could block
        # or act); then the file itself, which must be the one just looked at.
        seen = _open_step(parts[-1], folder, os.O_PATH | nofollow, name)
        if seen is None:
            return None
        try:
            looked = os.fstat(seen)
        finally:
            os.close(seen)
        if not stat.S_ISREG(looked.st_mode):
            raise UnsafeFile(f"{name} is not a regular file (a symbolic link, a folder or a "
                             "device) and was not read")
        fd = _open_step(parts[-1], folder, os.O_RDONLY | os.O_NONBLOCK | nofollow, name)
    finally:
        os.close(folder)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        now = os.fstat(f.fileno())
        if (now.st_dev, now.st_ino) != (looked.st_dev, looked.st_ino):
            raise UnsafeFile(f"{name} was replaced while it was read and was not read")
        return f.read()


def _open_step(step: str, folder: int, flags: int, name: str) -> int | None:
    try:
        return os.open(step, flags, dir_fd=folder)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafeFile(f"{name} is a symbolic link, or lies behind one, and was not "
                             "read") from None
        raise


def _run(code: str, workdir: Path, limits: SandboxLimits,
         confined: bool) -> tuple[SandboxResult, str]:
    """One run and the bootstrap's confinement status (``ok: ...``, ``error: ...``, or empty
    when unconfined or when the child died before it could say)."""
    ns = namespaces()
    with tempfile.TemporaryDirectory(prefix="skillgrad-sandbox-") as private:
        # The code, its output and the status live outside workdir, where the confined code
        # can neither read nor write them, and cannot confuse them with its own files.
        code_path = Path(private) / "agent_code.py"
        code_path.write_text(code, encoding="utf-8")
        out_path, status_path = Path(private) / "output.txt", Path(private) / "status.txt"
        exit_path = Path(private) / "exit.txt"  # the code's exit status, said by the init
        cfg = {"code": str(code_path), "cpu": limits.cpu_s, "memory": limits.memory_mb * 2**20,
               "fsize": limits.max_file_mb * 2**20, "status": str(status_path),
               "confine": confine.__file__ if confined else "",
               "seccomp": seccomp.__file__ if confined else "",
               "homes": _homes() if confined else [], "exit": str(exit_path),
               "limit": PROCESS_LIMIT, "nproc": ns.nproc,
               "pid_max": RESERVED_PIDS + PROCESS_LIMIT if ns.pid_max else 0}
        command = [*ns.prefix, sys.executable, "-I", "-c", _BOOTSTRAP, json.dumps(cfg)]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir),
               "TMPDIR": str(workdir), "LANG": "C.UTF-8"}
        with open(out_path, "wb") as out:
            process = subprocess.Popen(command, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                       stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)
            timed_out = False
            try:
                returncode: int | None = process.wait(timeout=limits.timeout_s)
            except subprocess.TimeoutExpired:
                timed_out, returncode = True, None
            kill_run(process, ns.pid)  # whatever it left behind dies with it
        if not timed_out and exit_path.is_file():  # through the init: the code's own status
            returncode = int(exit_path.read_text(encoding="utf-8"))
        output, truncated = _read_capped(out_path, limits.max_output_chars)
        status = status_path.read_text(encoding="utf-8") if status_path.is_file() else ""
    result = SandboxResult(returncode, output, timed_out, truncated, ns.network, confined,
                           ns.pid)
    return result, status


def _homes() -> list[str]:
    """The user's home folders, as ``HOME`` says and as the password database says: no folder
    the confined code may read can hold either."""
    import pwd  # POSIX only, and only the confined runs need it

    homes = [str(Path.home())]
    try:
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        pass  # a uid without an entry (some containers): HOME is all there is
    return list(dict.fromkeys(homes))


def _read_capped(path: Path, limit: int) -> tuple[str, bool]:
    """The output, or its start and end when longer than ``limit`` characters: the end holds
    the traceback an agent needs, the start what the code printed first."""
    size = path.stat().st_size
    window = limit * 4  # UTF-8: at most 4 bytes a character
    with open(path, "rb") as f:
        if size <= window:
            text = f.read().decode("utf-8", errors="replace")
            if len(text) <= limit:
                return text, False
            head_raw, tail_raw = text.encode(), text.encode()
        else:
            head_raw = f.read(window)
            f.seek(size - window)
            tail_raw = f.read(window)
    marker = "\n[... output truncated ...]\n"
    keep = max(0, limit - len(marker))
    head = head_raw.decode("utf-8", errors="replace")[: keep // 3]
    tail = tail_raw.decode("utf-8", errors="replace")
    tail = tail[len(tail) - (keep - len(head)):] if keep - len(head) > 0 else ""
    return head + marker + tail, True
