"""The skill document: the weights being trained.

The skill is one markdown string. Its content hash is its identity (like a checkpoint's digest),
and parts of it can be *frozen*: a protected block

    <!-- NAME_START -->
    ...
    <!-- NAME_END -->

is left alone by the optimizer step (``update.apply_edits``), the way frozen parameters receive
no gradient. Only epoch-level features (slow update, appendix) write blocks, via ``set_block``.

Marker recognition is deliberately generous (whitespace and case are ignored) and an
unterminated START protects to the end of the document: when in doubt, protect. Blocks do not
nest; a marker inside a block is part of that block's content.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from skillgrad.errors import DataError, SkillgradError

__all__ = [
    "Block",
    "body_without_blocks",
    "get_block",
    "neutralise_markers",
    "editable_lines",
    "estimate_tokens",
    "protected_spans",
    "read_skill_file",
    "remove_span",
    "set_block",
    "skill_hash",
]

# A marker as the document defines it: ``<!-- NAME_START -->`` / ``<!-- NAME_END -->``.
_MARKER_RE = re.compile(r"<!--\s*([A-Za-z][A-Za-z0-9_]*)_(START|END)\s*-->", re.IGNORECASE)
# Anything that merely looks like one (a superset of _MARKER_RE): neutralised inside edits.
_LOOKALIKE_RE = re.compile(r"<!--\s*([\w\s-]*?[_\s-](?:START|END))\s*-->", re.IGNORECASE)
_NAME_RE = re.compile(r"[A-Z][A-Z0-9_]*")
_LIST_NUMBER_RE = re.compile(r"^\s*\d+[.)]")
# Words (split into pieces of at most 6 characters) and single punctuation marks: close to, and
# usually a little above, what BPE tokenizers of current chat models count for English.
_TOKEN_RE = re.compile(r"[^\W_]{1,6}|[^\w\s]|_")
# Control bytes no text file holds (tab, newline, form feed and carriage return aside). In UTF-8
# they never occur inside a multi-byte character, so the bytes can be searched before decoding.
_BINARY_RE = re.compile(rb"[\x00-\x08\x0b\x0e-\x1f\x7f]")
# A skill is a system prompt: a megabyte is some 250,000 tokens, beyond any model's context.
MAX_SKILL_BYTES = 1_000_000


@dataclass(frozen=True)
class Block:
    """A protected block: ``text[start:end]`` runs from its START marker to its END marker."""

    name: str
    start: int
    end: int


def skill_hash(text: str) -> str:
    """Content identity of a skill: sha256 hex digest of its exact UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _scan(text: str) -> list[tuple[Block, int, int]]:
    """Blocks in document order, each with the offsets of its content (between the markers)."""
    found: list[tuple[Block, int, int]] = []
    pos = 0
    while True:
        start = next((m for m in _MARKER_RE.finditer(text, pos) if _kind(m) == "START"), None)
        if start is None:
            return found
        name = start.group(1).upper()
        end = next(
            (
                m
                for m in _MARKER_RE.finditer(text, start.end())
                if _kind(m) == "END" and m.group(1).upper() == name
            ),
            None,
        )
        if end is None:  # unterminated: protect everything that follows
            found.append((Block(name, start.start(), len(text)), start.end(), len(text)))
            return found
        found.append((Block(name, start.start(), end.end()), start.end(), end.start()))
        pos = end.end()


def _kind(marker: re.Match[str]) -> str:
    return marker.group(2).upper()


def protected_spans(text: str) -> list[Block]:
    """The protected blocks of ``text``, in document order, non-overlapping."""
    return [block for block, _, _ in _scan(text)]


def editable_lines(text: str) -> list[str]:
    """The distinct non-blank lines of ``text`` outside protected blocks: what an edit may
    anchor on."""
    blocks = protected_spans(text)
    lines: list[str] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        start, offset = offset, offset + len(line)
        inside = any(b.start <= start < b.end for b in blocks)
        stripped = line.strip()
        if stripped and not inside and stripped not in lines:
            lines.append(stripped)
    return lines


def neutralise_markers(content: str) -> str:
    """Defuse anything in ``content`` that looks like a protection marker.

    ``<!-- X_START -->`` becomes ``<!- - X_START - ->``: still readable, no longer an HTML
    comment, and never recognised as a marker. Idempotent.
    """
    while True:
        content, n = _LOOKALIKE_RE.subn(lambda m: f"<!- - {m.group(1).strip()} - ->", content)
        if n == 0:  # each pass removes at least one "<!--" and creates none, so this ends
            return content


def _canonical_name(name: str) -> str:
    upper = name.upper()
    if not _NAME_RE.fullmatch(upper):
        raise ValueError(f"invalid block name {name!r}: expected [A-Z][A-Z0-9_]*")
    return upper


def get_block(text: str, name: str) -> str | None:
    """The content of the first block called ``name`` (surrounding newlines stripped), or None."""
    wanted = _canonical_name(name)
    for block, inner_start, inner_end in _scan(text):
        if block.name == wanted:
            return text[inner_start:inner_end].strip("\n")
    return None


def set_block(text: str, name: str, content: str) -> str:
    """Set block ``name`` to ``content``, leaving exactly one block of that name.

    The first existing block is rewritten in place (later duplicates are removed); if there is
    none, the block is appended at the end of the document. ``content`` is neutralised first,
    so it cannot open or close a block. ``get_block`` returns ``content`` stripped of
    surrounding newlines.
    """
    wanted = _canonical_name(name)
    inner = neutralise_markers(content).strip("\n")
    rendered = f"<!-- {wanted}_START -->\n{inner}\n<!-- {wanted}_END -->"
    blocks = [b for b in protected_spans(text) if b.name == wanted]
    if not blocks:
        body = text.rstrip("\n")
        return f"{body}\n\n{rendered}\n" if body.strip() else f"{rendered}\n"
    for dup in reversed(blocks[1:]):
        text = remove_span(text, dup.start, dup.end)
    first = blocks[0]
    tail = text[first.end :] or "\n"  # an unterminated block ran to the end
    return text[: first.start] + rendered + tail


def body_without_blocks(text: str) -> str:
    """``text`` with every protected block removed (blank lines around them tidied)."""
    for block in reversed(protected_spans(text)):
        text = remove_span(text, block.start, block.end)
    return text


# The start of a list item: a bullet or a number ("- ", "* ", "2. ", "3) ").
LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def instructions(text: str) -> list[str]:
    """The instructions of a skill as written: each paragraph and each list item, with the
    lines it is wrapped onto (headings, blank lines and protected blocks left out)."""
    out: list[list[str]] = []
    block: str | None = None  # what the last line began: "item", "paragraph" or None
    for line in body_without_blocks(text).splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            block = None
        elif LIST_ITEM.match(line):
            out.append([line])
            block = "item"
        elif block == "paragraph" or (block == "item" and line[:1].isspace()):
            out[-1].append(line)
        else:
            out.append([line])
            block = "paragraph"
    return ["\n".join(lines).strip() for lines in out]


def remove_span(text: str, start: int, end: int) -> str:
    """Remove ``text[start:end]``; drop the line(s) it empties, keep at most one blank line.

    A line counts as emptied when no letter or digit is left on it besides a list number
    (deleting "Second" from "2) Second." drops the line rather than leaving "2) .").
    Inside a line, the doubled space the removal leaves is collapsed.
    """
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    rest = _LIST_NUMBER_RE.sub("", text[line_start:start] + text[end:line_end])
    if any(ch.isalnum() for ch in rest):
        left, right = text[:start], text[end:]
        if left.endswith((" ", "\t")) and (not right or right[0] in " \t\n"):
            left = left.rstrip(" \t")
        elif not left or left.endswith("\n"):
            right = right.lstrip(" \t")
        return left + right
    left, right = text[:line_start], text[line_end + 1 :]
    if not left.strip():
        return right.lstrip("\n")
    if not right.strip():
        return left.rstrip("\n") + "\n"
    newlines = len(left) - len(left.rstrip("\n")) + len(right) - len(right.lstrip("\n"))
    return left.rstrip("\n") + "\n" * min(newlines, 2) + right.lstrip("\n")


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate of ``text``'s length in tokens (the skill-size cap's unit).

    It is the same for every backend, so a cap means the same thing whichever model serves."""
    return len(_TOKEN_RE.findall(text))


_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_capped(path: Path, limit: int, error: type[SkillgradError], what: str) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path``: one past the cap tells a file
    that is too large, and ``/dev/zero`` is never read whole. The file is opened without
    waiting and refused unless it is a regular file (a FIFO would block until something
    writes into it): ``error("PATH: WHAT is a named pipe (FIFO), not a regular file")``. The
    open's own failures are :class:`OSError` (a folder: ``IsADirectoryError``)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a file")
            raise error(f"{path}: {what} is {kind}, not a regular file")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read(limit + 1)
    finally:
        os.close(fd)


def read_skill_file(path: Path) -> str:
    """Read a skill file; a missing, empty, binary, oversized or non-UTF-8 file, or one that
    is not a regular file (a FIFO, a device), raises :class:`DataError` naming it."""
    try:
        data = read_capped(Path(path), MAX_SKILL_BYTES, DataError, "skill file")
    except FileNotFoundError:
        raise DataError(f"{path}: skill file not found") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot read skill file ({exc.strerror or exc})") from None
    if len(data) > MAX_SKILL_BYTES:
        raise DataError(f"{path}: skill file is larger than {MAX_SKILL_BYTES:,} bytes; a skill "
                        "is a system prompt and must fit in the target's context")
    binary = _BINARY_RE.search(data)
    if binary is not None:
        raise DataError(f"{path}: skill file is binary, not text (control byte "
                        f"0x{binary.group()[0]:02x} at offset {binary.start()})")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path}: skill file is not valid UTF-8 (bad byte at offset {exc.start})"
        ) from None
    if not text.strip():
        raise DataError(f"{path}: skill file is empty")
    return text
