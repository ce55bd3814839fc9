"""The namespaces and process limits of the code sandbox: what ``unshare`` gives a run here.

:mod:`skillgrad.sandbox` starts every run under the ``unshare`` command that
:func:`namespaces` found to work on this host, the first of:

* ``unshare -n -p -f`` (root) or ``unshare -r -n -p -f`` (any user, in a user namespace of its
  own): an empty network namespace and a PID namespace whose init is the sandbox's bootstrap.
  When the code's process ends, or the run is killed at its timeout, the init ends and the
  kernel kills every process left in the namespace, those that called ``setsid`` included;
* ``unshare -n`` or ``unshare -rn``: a network namespace only;
* nothing.

Without a PID namespace :func:`kill_run` kills the process group and every descendant it
finds in ``/proc``; a process that left the group (``setsid``) *and* whose parent has exited
is no descendant any more and can outlive the run.

How many processes: in a PID namespace the init sets the namespace's ``pid_max`` so that it
can hold at most :data:`PROCESS_LIMIT` processes and threads besides the init. Only Linux
6.14+ keeps ``pid_max`` per PID namespace (before, the file is the host's), so
:func:`namespaces` allows the write only where it cannot reach the host's value: as a user
other than root, whom the kernel never lets write the host's, or as root after a test write by
an unprivileged user in a throwaway namespace succeeded. In a user namespace of its own the
code also gets ``RLIMIT_NPROC`` = :data:`PROCESS_LIMIT`, which counts only the processes of
that namespace there; root is exempt from ``RLIMIT_NPROC``, and outside a user namespace it
would count every process of the user, so then it is not set.
"""

from __future__ import annotations

import functools
import os
import select
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

PROCESS_LIMIT = 64
"""Processes and threads the code may have at once, where the host lets it be enforced."""

RESERVED_PIDS = 300
"""The kernel's RESERVED_PIDS: past ``pid_max``, PIDs wrap to this number, not to 2."""

_NOBODY = "65534"


@dataclass(frozen=True)
class Namespaces:
    """What a run is started under: the ``unshare`` command (``()`` for none) and what it
    gives."""

    prefix: tuple[str, ...] = ()
    network: bool = False
    pid: bool = False
    pid_max: bool = False  # its init may set the PID namespace's pid_max
    nproc: bool = False  # RLIMIT_NPROC holds: not root, in a user namespace of its own

    def describe(self) -> str:
        """One phrase for the log: the namespaces a run gets."""
        kinds = [k for k, on in (("network", self.network), ("PID", self.pid),
                                 ("user", "-r" in self.prefix or "-rn" in self.prefix)) if on]
        if not kinds:
            return "no namespaces (unshare is not available); processes may outlive a run"
        said = f"{' and '.join(kinds)} namespaces ({' '.join(self.prefix)})"
        return said if self.pid else said + "; processes that leave the session may outlive a run"


def _works(command: list[str]) -> bool:
    try:
        done = subprocess.run(command, capture_output=True, timeout=10, cwd="/")
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.cache
def namespaces() -> Namespaces:
    """The namespaces a run gets on this host. Probed once per process: it cannot change."""
    pid_one = ["sh", "-c", 'test "$$" = 1']
    root = os.geteuid() == 0
    prefix: tuple[str, ...]
    for prefix in (("unshare", "-n", "-p", "-f"), ("unshare", "-r", "-n", "-p", "-f")):
        if _works([*prefix, *pid_one]):
            return Namespaces(prefix, network=True, pid=True,
                              pid_max=not root or _pid_max_is_per_namespace(),
                              nproc=not root and "-r" in prefix)
    for prefix in (("unshare", "-n"), ("unshare", "-rn")):
        if _works([*prefix, "true"]):
            return Namespaces(prefix, network=True, nproc=not root and prefix[-1] == "-rn")
    return Namespaces()


def _pid_max_is_per_namespace() -> bool:
    """Whether this kernel keeps ``pid_max`` per PID namespace, learnt without any risk to
    the host's value: an unprivileged user (who may never write the host's) writes it in a
    PID namespace of a user namespace of its own. Only root needs to ask."""
    value = str(RESERVED_PIDS + PROCESS_LIMIT)
    return _works(["setpriv", f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups",
                   "unshare", "-r", "-p", "-f", "sh", "-c",
                   f"echo {value} > /proc/sys/kernel/pid_max"])


def kill_run(process: subprocess.Popen[bytes], pid_namespace: bool) -> None:
    """Kill what a run left, and return when it is gone. In a PID namespace: the process group
    (``unshare`` and the namespace's init, whose end makes the kernel kill the rest), then
    wait for the init's end. Without one: the process group and every descendant found in
    ``/proc``, twice (what forked while the first pass ran)."""
    if pid_namespace:
        inits = [fd for fd in map(_pidfd, children(process.pid)) if fd is not None]
        _kill_group(process.pid)
        for fd in inits:
            try:  # readable once the init has ended, after the kernel emptied its namespace
                poll = select.poll()
                poll.register(fd, select.POLLIN)
                poll.poll(10_000)
            finally:
                os.close(fd)
    else:
        for _ in range(2):
            for pid in descendants(process.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            _kill_group(process.pid)
    process.wait()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None  # gone already, or a kernel before 5.3


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` now."""
    try:  # the kernel's own list, where it keeps one (CONFIG_PROC_CHILDREN)
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return _parents().get(pid, [])


def descendants(root: int) -> list[int]:
    """The processes below ``root`` now, from each process's parent in ``/proc``."""
    below = _parents()
    found, todo = [], [root]
    while todo:
        for child in below.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _parents() -> dict[int, list[int]]:
    """Parent PID -> the PIDs of its children, for every process in ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    return children
