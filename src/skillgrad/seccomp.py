"""A seccomp filter for the code sandbox: no UNIX sockets and no io_uring, for good.

Landlock (:mod:`skillgrad.confine`) confines files by path, but connecting to a UNIX socket
that has a path (an ssh agent, ``docker.sock``, the session's D-Bus) is no file access it
checks, and a network namespace does not separate such sockets. So the child of
:mod:`skillgrad.sandbox`, after Landlock and before the model's code exists in it, calls
:func:`install`: from then on the kernel answers ``EPERM`` to

* ``socket(AF_UNIX, ...)`` and ``socketpair(AF_UNIX, ...)``, whatever the type or protocol;
* ``io_uring_setup``, ``io_uring_enter`` and ``io_uring_register`` (a ring can create sockets
  and connect them without these syscalls);

and kills the process at any syscall of another ABI (``int 0x80`` or x32 on x86-64), where
the numbers above would mean something else. A filter cannot be removed, and it is inherited
by every thread, ``fork`` and ``exec``: Python's ``socket`` module, ``ctypes`` and a child
interpreter meet the same refusal. Pipes (``subprocess``, ``multiprocessing``'s one-way
pipes) are untouched.

The filter knows the syscall numbers of :data:`ARCHES` only (64-bit little-endian, where the
first argument's low word is at a fixed offset); elsewhere :func:`arch` is empty and the
sandbox refuses to run code it cannot filter. Like ``confine``, the child loads this file by
its path, so it imports only the standard library.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys
from typing import NamedTuple


class Arch(NamedTuple):
    """An architecture's audit identifier and the numbers of the syscalls the filter sees."""

    audit: int  # AUDIT_ARCH_* of include/uapi/linux/audit.h
    socket: int
    socketpair: int
    x32: bool = False  # x86-64 also takes x32 syscalls (numbers with bit 30 set)


IO_URING = (425, 426, 427)  # setup, enter, register: the same number on every architecture
ARCHES = {
    "x86_64": Arch(0xC000003E, socket=41, socketpair=53, x32=True),
    "aarch64": Arch(0xC00000B7, socket=198, socketpair=199),
}
_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}

# Classic BPF (include/uapi/linux/filter.h) and seccomp (include/uapi/linux/seccomp.h).
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_NR, _AUDIT_ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg 0's low word: LE)
_KILL_PROCESS, _ALLOW = 0x80000000, 0x7FFF0000
_DENY = 0x00050000 | errno.EPERM  # SECCOMP_RET_ERRNO
_X32_BIT = 0x40000000
_AF_UNIX = 1
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def arch() -> str:
    """The key of :data:`ARCHES` this interpreter runs as, or "" where the filter does not
    know the syscall numbers (another architecture, a 32-bit interpreter, not Linux)."""
    if sys.platform != "linux" or struct.calcsize("P") != 8 or sys.byteorder != "little":
        return ""
    machine = platform.machine().lower()
    machine = _ALIASES.get(machine, machine)
    return machine if machine in ARCHES else ""


def program(name: str) -> list[tuple[int, int, int, int]]:
    """The filter for architecture ``name`` as (code, jt, jf, k) instructions."""
    spec = ARCHES[name]
    head = [(_LD_W_ABS, 0, 0, _AUDIT_ARCH), (_JEQ_K, 1, 0, spec.audit),
            (_RET_K, 0, 0, _KILL_PROCESS), (_LD_W_ABS, 0, 0, _NR)]
    if spec.x32:
        head += [(_JGE_K, 0, 1, _X32_BIT), (_RET_K, 0, 0, _KILL_PROCESS)]
    # After the checks: allow; the domain test (socket, socketpair); deny; allow.
    checks = [(spec.socket, "domain"), (spec.socketpair, "domain"),
              *((nr, "deny") for nr in IO_URING)]
    allow = len(checks)
    label = {"domain": allow + 1, "deny": allow + 3}
    body = [(_JEQ_K, label[target] - (i + 1), 0, nr) for i, (nr, target) in enumerate(checks)]
    body += [(_RET_K, 0, 0, _ALLOW),
             (_LD_W_ABS, 0, 0, _ARG0),
             (_JEQ_K, 0, 1, _AF_UNIX),
             (_RET_K, 0, 0, _DENY),
             (_RET_K, 0, 0, _ALLOW)]
    return head + body


def install() -> str:
    """Install the filter on this process (and so on all it starts), then check that the
    kernel refuses a UNIX socket. Returns the architecture; raises :class:`OSError` when it
    cannot, and then the process must not go on to run the code."""
    name = arch()
    if not name:
        raise OSError(f"the seccomp filter does not know this architecture "
                      f"({platform.machine()}, {struct.calcsize('P') * 8}-bit)")
    instructions = program(name)
    table = (_SockFilter * len(instructions))(*(_SockFilter(*i) for i in instructions))
    prog = _SockFprog(len(instructions), table)
    libc = ctypes.CDLL(None, use_errno=True)
    for call, args in (("prctl(PR_SET_NO_NEW_PRIVS)", (_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)),
                       ("prctl(PR_SET_SECCOMP)", (_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER,
                                                  ctypes.byref(prog), 0, 0))):
        if libc.prctl(*args) != 0:
            raise OSError(f"{call}: {os.strerror(ctypes.get_errno())}")
    fd = libc.socket(_AF_UNIX, 1, 0)  # SOCK_STREAM
    if fd >= 0 or ctypes.get_errno() != errno.EPERM:
        if fd >= 0:
            os.close(fd)
        raise OSError("the seccomp filter was installed but a UNIX socket was not refused")
    return name
