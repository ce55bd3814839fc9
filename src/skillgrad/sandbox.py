"""A restricted subprocess for model-written code: the "untrusted op" of a forward pass.

Environments that give the target a ``python`` tool run its code here, never in the trainer's
process. Each run gets:

* a fresh working directory (the caller copies in the files the code may touch);
* file-system confinement by the kernel (Landlock, :mod:`skillgrad.confine`): the code and
  everything it starts can write only inside the working directory, and read only that, the
  system's program and library folders and the folders Python runs from, so the home
  directory, its secrets and the run directory are out of reach. Where the kernel cannot
  confine, :func:`run_python` refuses unless the caller allows unconfined runs explicitly;
* a cleared environment (``PATH``, ``HOME`` and ``TMPDIR`` = the working directory, ``LANG``
  only), so API keys and tokens of the trainer are not visible;
* ``python -I`` (isolated mode: no ``PYTHON*`` variables, no user site) and a bootstrap that
  reads the code, confines the process, sets CPU-time, address-space and file-size limits,
  then installs an audit hook that refuses every socket operation before the code is
  compiled. Audit hooks cannot be removed from inside the process, so ``import _socket`` does
  not get around it;
* a private network namespace (``unshare -n``, or ``unshare -rn`` as an unprivileged user)
  when the host allows it, which also cuts subprocesses the code starts off the network;
* a wall-clock timeout that kills the whole process group, and output (stdout and stderr
  together) truncated to a limit.

It guards the user's files and keys against model-written code; it does not hide the files
inside the readable folders (the Python installation, ``sys.path``, ``/usr``), nor whether a
path exists elsewhere (``stat`` is not confined).
"""

from __future__ import annotations

import functools
import logging
import os
import platform
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from skillgrad import confine
from skillgrad.errors import ConfigError

logger = logging.getLogger(__name__)

# Runs inside the child before the model's code; argv: code file, cpu s, memory bytes, fsize,
# then the confine module's path (empty: run unconfined), the status file and the home folders.
# The status file is written before the code runs and closed, so the code cannot forge it.
_BOOTSTRAP = r"""
import os, resource, sys
code_path, cpu, memory, fsize = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
confine_path, status_path, homes = sys.argv[5], sys.argv[6], sys.argv[7].split(os.pathsep)
with open(code_path, encoding="utf-8") as f:
    source = f.read()
if confine_path:
    import importlib.util
    spec = importlib.util.spec_from_file_location("_skillgrad_confine", confine_path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with open(status_path, "w", encoding="utf-8") as status:
        try:
            abi = module.confine([os.getcwd()], homes)
        except OSError as exc:
            status.write(f"error: {exc}")
            sys.exit(f"the sandbox cannot confine this code: {exc}")
        status.write(f"ok: Landlock ABI {abi}")
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
def _no_network(event, args):
    if event.startswith("socket."):
        raise PermissionError("network access is disabled in this sandbox")
sys.addaudithook(_no_network)
del resource, f
sys.argv = [code_path]
exec(compile(source, "agent_code.py", "exec"), {"__name__": "__main__"})
"""


class SandboxUnavailable(ConfigError):
    """Model-written code cannot be confined on this host, and running it unconfined was not
    allowed (or the child could not apply the confinement the host was found to offer)."""


@dataclass(frozen=True)
class Confinement:
    """Whether this host confines the sandbox's file access: the Landlock ABI in use, or 0 and
    the reason it cannot."""

    abi: int
    problem: str = ""


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
def network_namespace_prefix() -> tuple[str, ...]:
    """The ``unshare`` command that gives a child its own (empty) network namespace here, or
    ``()`` when the host does not allow one. Probed once per process: it cannot change."""
    for prefix in (("unshare", "-n"), ("unshare", "-rn")):
        try:
            done = subprocess.run([*prefix, "true"], capture_output=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return prefix
    logger.info("unshare -n is not available; the sandbox blocks sockets with an audit hook only")
    return ()


@functools.cache
def confinement() -> Confinement:
    """Whether the kernel confines the sandbox here: Landlock is offered *and* a test run of
    the bootstrap could write inside its folder but not beside it. Probed once per process."""
    if sys.platform != "linux":
        return Confinement(0, f"{sys.platform} has no Landlock (Linux only)")
    abi = confine.landlock_abi()
    if abi < 1:
        return Confinement(0, f"the kernel ({platform.release()}) offers no Landlock: it needs "
                              "Linux 5.13+ with landlock in the boot's LSM list")
    with tempfile.TemporaryDirectory(prefix="skillgrad-probe-") as probe:
        work, beside = Path(probe) / "work", Path(probe) / "beside"
        work.mkdir()
        beside.mkdir()
        code = (f"open('inside', 'w').write('x')\ntry:\n    open({str(beside / 'x')!r}, 'w')\n"
                "except PermissionError:\n    print('confined')")
        result, status = _run(code, work, SandboxLimits(timeout_s=30, cpu_s=10), confined=True)
        held = (status.startswith("ok") and result.output.strip() == "confined"
                and (work / "inside").is_file() and not (beside / "x").exists())
    if not held:
        said = result.output.strip().splitlines() or [result.summary()]
        reason = status.removeprefix("error: ") or said[-1]
        return Confinement(0, f"Landlock ABI {abi} did not hold in a test run ({reason})")
    return Confinement(abi)


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


def _run(code: str, workdir: Path, limits: SandboxLimits,
         confined: bool) -> tuple[SandboxResult, str]:
    """One run and the bootstrap's confinement status (``ok: ...``, ``error: ...``, or empty
    when unconfined or when the child died before it could say)."""
    with tempfile.TemporaryDirectory(prefix="skillgrad-sandbox-") as private:
        # The code, its output and the status live outside workdir, where the confined code
        # can neither read nor write them, and cannot confuse them with its own files.
        code_path = Path(private) / "agent_code.py"
        code_path.write_text(code, encoding="utf-8")
        out_path, status_path = Path(private) / "output.txt", Path(private) / "status.txt"
        prefix = network_namespace_prefix()
        command = [*prefix, sys.executable, "-I", "-c", _BOOTSTRAP, str(code_path),
                   str(limits.cpu_s), str(limits.memory_mb * 2**20),
                   str(limits.max_file_mb * 2**20), confine.__file__ if confined else "",
                   str(status_path), os.pathsep.join(_homes()) if confined else ""]
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
                _kill_group(process)
            else:
                _kill_group(process)  # children it left behind die with it
        output, truncated = _read_capped(out_path, limits.max_output_chars)
        status = status_path.read_text(encoding="utf-8") if status_path.is_file() else ""
    result = SandboxResult(returncode, output, timed_out, truncated, bool(prefix), confined)
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


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone
    process.wait()


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
