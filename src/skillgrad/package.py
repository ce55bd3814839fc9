"""A skill package: an Agent Skills folder (``SKILL.md`` and the files beside it) as the
trainable state.

A folder is carried through training as one text, the *package text*, so that every stage
that hashes, stores, diffs, replays or edits a skill treats a package as it treats a skill
document. The text is ``SKILL.md`` exactly as written, then each other file of the folder in
path order, each after a line of its own::

    <!-- skillgrad:file references/format.md -->

A skill of one file has no such line: its package text is the document itself, so its hash,
its checkpoint and its replays are those of a single-file skill. A package's hash
(:func:`skillgrad.skill.skill_hash` of its text) covers every path and every byte.

A target that reads text reads the package text: ``SKILL.md`` first, then each file after the
line that names it. An agent target gets the folder itself, where its CLI looks for skills
(:func:`write_folder`). Only text files are trained; a folder that holds anything else is
refused in one line.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import yaml

from skillgrad.errors import DataError
from skillgrad.skill import MAX_SKILL_BYTES, read_skill_file

__all__ = [
    "MAIN",
    "READ_OFFER",
    "READ_TOOL",
    "Package",
    "check_path",
    "file_marker",
    "is_package",
    "join_package",
    "package_diff",
    "read_folder",
    "read_skill",
    "split_package",
    "unparseable",
    "write_folder",
]

MAIN = "SKILL.md"
# How an agent with tools is told it can open the package's files (envs.tools.package_view);
# a rollout whose system message says it could read them records which it did.
READ_TOOL = "read_skill_file"
READ_OFFER = f"Read one with the {READ_TOOL} tool when you need it:"
_MARKER = re.compile(r"^<!-- skillgrad:file (?P<path>\S(?:.*\S)?) -->$", re.MULTILINE)
# What a file of the package may be called: a relative POSIX path of visible parts.
_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]*$")
# Left out of a folder as it is read: version control, editors' and Python's leftovers.
_SKIPPED = {".git", ".hg", ".svn", "__pycache__", ".DS_Store", ".pytest_cache", ".mypy_cache"}
MAX_FILES = 200


def file_marker(path: str) -> str:
    """The line that opens file ``path`` in a package text."""
    return f"<!-- skillgrad:file {path} -->"


@dataclass(frozen=True)
class Package:
    """A package's files: ``SKILL.md`` (``main``) and the others by path, in path order."""

    main: str
    files: Mapping[str, str]

    @property
    def paths(self) -> list[str]:
        return [MAIN, *self.files]

    def text(self) -> str:
        return join_package(self.main, self.files)

    def file(self, path: str) -> str | None:
        return self.main if path == MAIN else self.files.get(path)


def check_path(path: str) -> str | None:
    """What is wrong with ``path`` as the name of a package file (None: nothing)."""
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or "\\" in path or str(pure) != path or ".." in pure.parts:
        return f"{path!r} is not a plain relative path inside the package (folder/file, with /)"
    if any(not _PART.match(part) for part in pure.parts):
        return (f"{path!r}: each part of a path is letters, digits and . _ + -, and does "
                "not begin with a dot")
    if path == MAIN:
        return f"{MAIN} is the package's main file, not one beside it"
    return None


def join_package(main: str, files: Mapping[str, str]) -> str:
    """The package text of ``main`` (``SKILL.md``) and ``files`` (path: text)."""
    parts = [main]
    for path in sorted(files):
        problem = check_path(path)
        if problem:
            raise DataError(f"skill package: {problem}")
        parts.append(f"\n{file_marker(path)}\n{files[path]}")
    return "".join(parts)


def is_package(text: str) -> bool:
    """Whether ``text`` holds files beside its ``SKILL.md``."""
    return _MARKER.search(text) is not None


def split_package(text: str) -> Package:
    """The files of a package text (a skill document with no file line is a package of one
    file). A file named twice, or a path that is not a plain relative one, raises
    :class:`DataError`."""
    marks = list(_MARKER.finditer(text))
    if not marks:
        return Package(text, {})
    # A marker line is preceded by the newline join_package writes before it.
    starts = [m.start() - 1 if m.start() and text[m.start() - 1] == "\n" else m.start()
              for m in marks]
    main = text[:starts[0]]
    files: dict[str, str] = {}
    for n, mark in enumerate(marks):
        path = mark.group("path")
        problem = check_path(path)
        if problem:
            raise DataError(f"skill package: {problem}")
        if path in files:
            raise DataError(f"skill package: {path} is in it twice")
        end = starts[n + 1] if n + 1 < len(marks) else len(text)
        body_start = mark.end() + 1 if text[mark.end():mark.end() + 1] == "\n" else mark.end()
        files[path] = text[body_start:end]
    return Package(main, dict(sorted(files.items())))


def read_folder(folder: Path) -> str:
    """The package text of a skill folder: its ``SKILL.md`` and every other text file in it
    (hidden files and caches left out). A missing ``SKILL.md``, a binary file, a file whose
    text holds a package's own file line, or a folder over the size limit raises
    :class:`DataError` naming the file; the folder is only read."""
    folder = Path(folder)
    main_path = folder / MAIN
    if not main_path.is_file():
        raise DataError(f"{folder}: a skill folder holds {MAIN}, and this one does not")
    main = read_skill_file(main_path)
    files: dict[str, str] = {}
    total = len(main.encode("utf-8"))
    for root, dirs, names in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d not in _SKIPPED and not d.startswith("."))
        for name in sorted(names):
            if name in _SKIPPED or name.startswith(".") or name.endswith((".pyc", ".pyo")) \
                    or ".bak-" in name:  # and the backups an export keeps beside a file
                continue
            path = Path(root) / name
            rel = path.relative_to(folder).as_posix()
            if rel == MAIN:
                continue
            if path.is_symlink() or not path.is_file():
                raise DataError(f"{path}: a skill package holds regular files only, and this "
                                "is a link or a special file")
            problem = check_path(rel)
            if problem:
                raise DataError(f"{path}: {problem}")
            text = _read_text(path)
            files[rel] = text
            total += len(text.encode("utf-8"))
            if len(files) > MAX_FILES:
                raise DataError(f"{folder}: a skill package has at most {MAX_FILES} files")
            if total > MAX_SKILL_BYTES:
                raise DataError(f"{folder}: the skill package is larger than "
                                f"{MAX_SKILL_BYTES:,} bytes")
    for rel, text in ((MAIN, main), *files.items()):
        if _MARKER.search(text):
            raise DataError(f"{folder / rel}: it holds a line skillgrad uses to join a "
                            "package's files (<!-- skillgrad:file ... -->)")
    return join_package(main, files)


def _read_text(path: Path) -> str:
    data = path.read_bytes()
    if b"\x00" in data:
        raise DataError(f"{path}: a binary file; skillgrad trains the text files of a skill "
                        "package (move it out of the folder to train the rest)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 (bad byte at offset {exc.start})") from None


def write_folder(text: str, folder: Path) -> list[Path]:
    """Write the files of package text ``text`` into ``folder`` (made if missing); the paths
    written, ``SKILL.md`` first. Files of the folder that the package does not hold are left
    as they are."""
    package = split_package(text)
    written = []
    for path in package.paths:
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(package.file(path) or "", encoding="utf-8")
        written.append(target)
    return written


def read_skill(path: Path) -> str:
    """A skill as training starts from it: a skill file's text, or a skill folder's package
    text (:func:`read_folder`). Errors name the file and the problem."""
    path = Path(path)
    return read_folder(path) if path.is_dir() else read_skill_file(path)


def package_diff(text_a: str, text_b: str, label_a: str, label_b: str,
                 context: int = 3) -> list[str]:
    """The unified diff of two skill versions, file by file for a package (each file's
    header names it: ``best: references/format.md``; a file one side lacks is diffed with
    nothing). Two single-file skills give exactly their plain unified diff."""
    a, b = split_package(text_a), split_package(text_b)
    if not a.files and not b.files:
        return list(difflib.unified_diff(text_a.splitlines(), text_b.splitlines(), label_a,
                                         label_b, lineterm="", n=context))
    lines: list[str] = []
    for path in dict.fromkeys([*a.paths, *b.paths]):
        old, new = a.file(path), b.file(path)
        lines += difflib.unified_diff(
            (old or "").splitlines(), (new or "").splitlines(),
            f"{label_a}: {path}" if old is not None else "/dev/null",
            f"{label_b}: {path}" if new is not None else "/dev/null", lineterm="", n=context)
    return lines


def unparseable(path: str, text: str) -> str | None:
    """Why ``text`` is no longer valid as the file ``path`` names (Python, JSON, YAML or a
    shell script, by its suffix); None when it parses or is not code or data."""
    suffix = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    try:
        if suffix == "py":
            ast.parse(text, filename=path)
        elif suffix == "json":
            json.loads(text)
        elif suffix in ("yaml", "yml"):
            yaml.safe_load(text)
        elif suffix in ("sh", "bash"):
            done = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True,
                                  timeout=10, check=False)
            if done.returncode != 0:
                first = (done.stderr.strip().splitlines() or ["a syntax error"])[0]
                return f"edit would leave {path} unparseable: {first}"
    except SyntaxError as exc:
        return f"edit would leave {path} unparseable: {exc.msg} (line {exc.lineno})"
    except (ValueError, yaml.YAMLError) as exc:
        return f"edit would leave {path} unparseable: {str(exc).splitlines()[0]}"
    return None
