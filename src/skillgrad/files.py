"""Files read whole or found missing, and replaced in one step, never left half written: the
one atomic write of skillgrad, for a run's files and for the user's (a skill folder, an
AGENTS.md)."""

from __future__ import annotations

import os
import secrets
import stat
from datetime import datetime, timezone
from pathlib import Path

from skillgrad.errors import SkillgradError


def read_optional(path: Path, error: type[SkillgradError], shown: Path | None = None
                  ) -> bytes | None:
    """``path``'s bytes, or ``None`` when there is no such file; any other problem is an
    ``error`` naming ``shown`` (default: ``path``)."""
    name = shown or path
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise error(f"{name}: is a folder, not a file") from None
    except OSError as exc:
        raise error(f"{name}: cannot be read ({exc.strerror})") from exc


def replace_file(path: Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` in one step: a temporary file in the same folder, fsync,
    rename, fsync of the folder. ``mode``: the new file's permissions (default: the umask's)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
        fsync_dir(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def replace_keeping_mode(path: Path, data: bytes, error: type[SkillgradError],
                         new_mode: int | None = None) -> None:
    """:func:`replace_file` keeping the permissions of the file it replaces (``new_mode`` for
    a new one); a failure is an ``error`` naming the file."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode) if path.exists() else new_mode
        replace_file(path, data, mode)
    except OSError as exc:
        raise error(f"{path}: cannot be written ({exc.strerror})") from exc


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it into place: an
    interrupt, a kill or a full disk leaves the old file (or none), never half of one. The file
    is readable by its owner only (a run's files may quote what the models were sent)."""
    try:
        replace_file(path, text.encode("utf-8"), 0o600)
    except OSError as exc:
        raise naming_error(exc, path) from exc


def naming_error(exc: OSError, path: Path) -> OSError:
    """``exc`` about ``path``: a failed write names the file it was for, not the temporary
    file (or nothing, as a full disk does). The errno keeps its subclass."""
    if exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror, str(path))


def backup_beside(path: Path, error: type[SkillgradError]) -> Path:
    """A copy of ``path`` beside it, ``<name>.bak-<UTC stamp>``, never over another one (an
    ``error`` when a thousand were made this second)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1, 1000):
        backup = path.with_name(f"{path.name}.bak-{stamp}" + (f"-{n}" if n > 1 else ""))
        try:
            # The very bytes, at once: the old file lives on under the new name (the file a
            # link points to, which is the one replaced; a link of a link would show the new).
            os.link(os.path.realpath(path), backup)
            return backup
        except FileExistsError:
            continue
        except OSError:  # a file system without hard links: a copy instead
            try:
                with backup.open("xb") as fh:
                    fh.write(path.read_bytes())
                    fh.flush()
                    os.fsync(fh.fileno())
            except FileExistsError:
                continue
            return backup
    raise error(f"{path}: 999 backups made this second already; try again")
