"""A restricted subprocess for code an agent writes: the "untrusted op" of a forward pass.

Environments that give the target a ``python`` tool run its code here, never in the trainer's
process. Each run gets:

* a fresh working directory (the caller copies in the files the code may touch);
* a cleared environment (``PATH``, ``HOME`` = the working directory, ``LANG`` only), so API
  keys and tokens of the trainer are not visible;
* ``python -I`` (isolated mode: no ``PYTHON*`` variables, no user site) and a bootstrap that
  sets CPU-time, address-space and file-size limits, then installs an audit hook that refuses
  every socket operation before the agent's code is compiled. Audit hooks cannot be removed
  from inside the process, so ``import _socket`` does not get around it;
* a private network namespace (``unshare -n``, or ``unshare -rn`` as an unprivileged user)
  when the host allows it, which also cuts subprocesses the code starts off the network;
* a wall-clock timeout that kills the whole process group, and output (stdout and stderr
  together) truncated to a limit.

It is a guard against accidents and greedy code, not a security boundary against a determined
attacker: the file system outside the working directory is still readable.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

# Runs inside the child before the agent's code; argv: code file, cpu s, memory bytes, fsize.
_BOOTSTRAP = r"""
import resource, sys
code_path, cpu, memory, fsize = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
def _no_network(event, args):
    if event.startswith("socket."):
        raise PermissionError("network access is disabled in this sandbox")
sys.addaudithook(_no_network)
with open(code_path, encoding="utf-8") as f:
    source = f.read()
del resource, f
sys.argv = [code_path]
exec(compile(source, "agent_code.py", "exec"), {"__name__": "__main__"})
"""


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
    """What a run produced. ``returncode`` is None when the run was killed at the timeout."""

    returncode: int | None
    output: str
    timed_out: bool
    truncated: bool
    network_namespace: bool

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


def run_python(code: str, workdir: Path, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Run ``code`` with the interpreter of this process in ``workdir`` under ``limits``.

    Never raises for anything the code does (an exception, a crash, a timeout are all in the
    result); raises :class:`OSError` only when the interpreter cannot be started at all.
    """
    workdir = Path(workdir).resolve()
    with tempfile.TemporaryDirectory(prefix="skillgrad-sandbox-") as private:
        # The code and its output live outside workdir so the code cannot read them back
        # as data files or confuse them with its own outputs.
        code_path = Path(private) / "agent_code.py"
        code_path.write_text(code, encoding="utf-8")
        out_path = Path(private) / "output.txt"
        prefix = network_namespace_prefix()
        command = [*prefix, sys.executable, "-I", "-c", _BOOTSTRAP, str(code_path),
                   str(limits.cpu_s), str(limits.memory_mb * 2**20),
                   str(limits.max_file_mb * 2**20)]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(workdir), "LANG": "C.UTF-8"}
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
    return SandboxResult(returncode, output, timed_out, truncated, bool(prefix))


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
