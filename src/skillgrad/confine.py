"""Landlock for the code sandbox: what the child process may read and write.

:mod:`skillgrad.sandbox` runs model-written code in a child interpreter. Before that code is
compiled, the child calls :func:`confine`, which asks the kernel (Landlock, Linux 5.13+, no
privileges needed) to limit the process and everything it starts, for good, to:

* read and execute: the system's program and library folders (:data:`SYSTEM_ROOTS`) and the
  folders this interpreter runs from (its prefixes and ``sys.path``, see
  :func:`python_roots`), nothing else of the home directory;
* read and write: the run's working directory and a few devices (:data:`DEVICES`); no device
  node may be made anywhere (root could otherwise make one for the disk and read it);
* no TCP (Landlock ABI 4+) and no signals or abstract UNIX sockets outside the sandbox
  (ABI 6+), where the kernel has them. UNIX sockets with a path are no file access Landlock
  checks: :mod:`skillgrad.seccomp` refuses every UNIX socket.

The same file runs on both sides: the trainer's process calls :func:`landlock_abi` to learn
whether the kernel can confine at all, and the child loads this file by its path, before any
model-written code exists in it. It therefore imports only the standard library.
"""

from __future__ import annotations

import ctypes
import os
import platform
import stat
import sys
from collections.abc import Iterable, Sequence

# Landlock's syscalls have these numbers on every architecture but alpha and mips.
_SYSCALL_ARCHES = frozenset({"x86_64", "amd64", "i386", "i686", "aarch64", "arm64", "armv7l",
                             "armv6l", "riscv64", "ppc64le", "ppc64", "s390x", "loongarch64"})
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# File-system access rights (include/uapi/linux/landlock.h) and the ABI that added them.
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_FS_ABI1 = (1 << 13) - 1  # execute .. make_sym
_FS_MAKE_DEVICE = (1 << 6) | (1 << 11)  # make_char, make_block
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_FILE_ONLY = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
_READ = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_NET_ALL = (1 << 0) | (1 << 1)  # bind_tcp, connect_tcp (ABI 4)
_SCOPE_ALL = (1 << 0) | (1 << 1)  # abstract_unix_socket, signal (ABI 6)

SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                "/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group",
                "/etc/nsswitch.conf", "/etc/mime.types")
"""What programs read to start and to load libraries: binaries, shared libraries, the
loader's cache, the time zone and user names. Nothing else of ``/etc``, and nothing of
``/proc``, ``/tmp``, ``/var``, ``/home``, ``/root``, ``/mnt`` or any other folder."""

DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
"""Devices the code may open for reading and writing."""

SECRETS = (".ssh", ".gnupg", ".aws", ".netrc", ".cache/skillgrad")
"""Paths under the home directory that no readable folder may hold or lie in."""


class ConfinementError(OSError):
    """The kernel refused, or a readable folder would expose a denied one."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel's header
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def landlock_abi() -> int:
    """The Landlock ABI version this kernel offers, 0 where it has none (not Linux, an older
    kernel, Landlock left out of the boot's LSM list, or a seccomp filter that blocks it)."""
    if sys.platform != "linux" or platform.machine().lower() not in _SYSCALL_ARCHES:
        return 0
    version = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0),
                              ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def handled_fs(abi: int) -> int:
    """Every file-system right the kernel of ``abi`` knows: all of them are denied unless a
    rule grants them, so nothing is left unhandled by accident."""
    rights = _FS_ABI1
    rights |= _FS_REFER if abi >= 2 else 0
    rights |= _FS_TRUNCATE if abi >= 3 else 0
    rights |= _FS_IOCTL_DEV if abi >= 5 else 0
    return rights


def python_roots() -> list[str]:
    """The folders this interpreter runs from: its prefixes (a virtual environment and the
    installation it points to), every ``sys.path`` entry and the executable's real folder."""
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path,
             os.path.dirname(os.path.realpath(sys.executable))]
    return _existing(found)


def _existing(paths: Iterable[str]) -> list[str]:
    real = (os.path.realpath(p) for p in paths if p)
    return list(dict.fromkeys(p for p in real if os.path.exists(p)))


def _within(path: str, folder: str) -> bool:
    return os.path.commonpath([path, folder]) == folder


def check_roots(roots: Sequence[str], homes: Sequence[str]) -> None:
    """Refuse a readable root that would expose what must stay hidden: one that holds a home
    directory, or holds or lies inside one of its :data:`SECRETS`."""
    for home in (os.path.realpath(h) for h in homes):
        secrets = [os.path.join(home, secret) for secret in SECRETS]
        for root in roots:
            if _within(home, root):
                raise ConfinementError(f"{root} must be readable for Python but holds the "
                                       f"home directory {home}")
            for secret in secrets:
                if _within(secret, root) or _within(root, secret):
                    raise ConfinementError(f"{root} must be readable for Python but overlaps "
                                           f"{secret}")


def confine(write: Sequence[str], homes: Sequence[str]) -> int:
    """Restrict this process, and all it starts, to reading :data:`SYSTEM_ROOTS` and
    :func:`python_roots` and to writing ``write`` (see the module docstring). Returns the ABI
    used; raises :class:`ConfinementError` when it cannot, and then the process must not go
    on to run the code."""
    abi = landlock_abi()
    if abi < 1:
        raise ConfinementError("the kernel offers no Landlock")
    read = [r for r in _existing([*SYSTEM_ROOTS, *python_roots()]) if r not in write]
    check_roots(read, homes)
    fs = handled_fs(abi)
    attr = _RulesetAttr(fs, _NET_ALL if abi >= 4 else 0, _SCOPE_ALL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8  # the struct as this ABI knows it
    libc = _libc()
    ruleset = _check(libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size),
                                  ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        for path in read:
            _allow(libc, ruleset, path, _READ)
        for path in _existing(write):
            _allow(libc, ruleset, path, fs & ~_FS_MAKE_DEVICE)
        for path in _existing(DEVICES):
            _allow(libc, ruleset, path, fs & ~_FS_EXECUTE)
        _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(_RESTRICT_SELF, ruleset, ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int) -> None:
    """Grant ``rights`` beneath ``path`` (only the file rights when it is not a folder)."""
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_ONLY
        rule = _PathBeneathAttr(rights, fd)
        _check(libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule),
                            ctypes.c_uint32(0)), f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def _check(result: int, call: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise ConfinementError(f"{call}: {os.strerror(errno)}")
    return result
