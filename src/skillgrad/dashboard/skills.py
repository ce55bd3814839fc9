"""The skill at any version of a run, and the difference between two versions, line by line:
the checkpoints of a training, opened and compared (``skillgrad diff`` in a page)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from skillgrad.dashboard.discover import RunRef
from skillgrad.package import split_package
from skillgrad.rundir import RunDir
from skillgrad.runview import Versions, load_state

CONTEXT = 3  # unchanged lines shown around a change


@dataclass(frozen=True)
class DiffRow:
    """``kind``: ``same``, ``added``, ``removed``, ``gap`` (unchanged lines left out: ``text``
    says how many) or ``hunk`` (a unified diff's ``@@`` line); ``old`` and ``new`` are the
    line's numbers in each version."""

    kind: str
    text: str
    old: int | None = None
    new: int | None = None


@dataclass(frozen=True)
class SkillPage:
    ref: RunRef
    name: str
    label: str
    digest: str
    text: str
    versions: tuple[tuple[str, str], ...]

    @property
    def files(self) -> list[tuple[str, str]]:
        """A skill package's files (path, text), SKILL.md first; [] for a single file."""
        package = split_package(self.text)
        return [(path, package.file(path) or "") for path in package.paths] \
            if package.files else []


@dataclass(frozen=True)
class DiffPage:
    ref: RunRef
    a: str
    b: str
    label_a: str
    label_b: str
    rows: tuple[DiffRow, ...]
    versions: tuple[tuple[str, str], ...]

    @property
    def added(self) -> int:
        return sum(r.kind == "added" for r in self.rows)

    @property
    def removed(self) -> int:
        return sum(r.kind == "removed" for r in self.rows)


def run_versions(ref: RunRef) -> Versions:
    return Versions.of(load_state(RunDir(ref.path)), ref.label)


def version_names(versions: Versions) -> list[tuple[str, str]]:
    """The names a skill version can be asked for by, with what each is."""
    best = f", step {versions.best_step}" if versions.best_step else ""
    return [("initial", "the skill training started from"),
            ("best", f"the best skill{best}"),
            ("final", "the final skill (while training: the current one)"),
            *((name, f"after step {g}") for name, g, _ in versions.after)]


def skill_page(ref: RunRef, name: str) -> SkillPage:
    """The skill called ``name`` (initial, best, final, a step, a hash prefix); a name that
    names no version raises the one-line refusal ``skillgrad diff`` gives."""
    versions = run_versions(ref)
    label, digest = versions.resolve(name)
    text = RunDir(ref.path).load_skill(digest)
    return SkillPage(ref, name, label, digest, text, tuple(version_names(versions)))


def diff_page(ref: RunRef, a: str, b: str) -> DiffPage:
    versions = run_versions(ref)  # one read of the checkpoint names both versions
    (label_a, digest_a), (label_b, digest_b) = versions.resolve(a), versions.resolve(b)
    run = RunDir(ref.path)
    text_a, text_b = run.load_skill(digest_a), run.load_skill(digest_b)
    return DiffPage(ref, a, b, label_a, label_b, tuple(package_rows(text_a, text_b)),
                    tuple(version_names(versions)))


def package_rows(a: str, b: str, context: int = CONTEXT) -> list[DiffRow]:
    """:func:`diff_rows` of two skill versions, file by file where either is a package: a
    ``header`` row names each file (and whether it was added, removed or left unchanged),
    then its lines, numbered within the file."""
    pa, pb = split_package(a), split_package(b)
    if not pa.files and not pb.files:
        return diff_rows(a, b, context)
    out: list[DiffRow] = []
    for path in dict.fromkeys([*pa.paths, *pb.paths]):
        old, new = pa.file(path), pb.file(path)
        if old == new:
            out.append(DiffRow("header", f"{path} (unchanged)"))
            continue
        state = " (new file)" if old is None else " (removed)" if new is None else ""
        out.append(DiffRow("header", f"{path}{state}"))
        out += diff_rows(old or "", new or "", context)
    return out


def diff_rows(a: str, b: str, context: int = CONTEXT) -> list[DiffRow]:
    """The lines of ``b`` against ``a``: removed, added, and the unchanged ones near a change
    (longer unchanged runs become one ``gap`` row)."""
    old, new = a.splitlines(), b.splitlines()
    out: list[DiffRow] = []
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    for n, (tag, i1, i2, j1, j2) in enumerate(ops):
        if tag == "equal":
            out += _unchanged(old, i1, i2, j1, context, first=n == 0, last=n == len(ops) - 1)
            continue
        out += [DiffRow("removed", old[i], old=i + 1) for i in range(i1, i2)]
        out += [DiffRow("added", new[j], new=j + 1) for j in range(j1, j2)]
    return out


def _unchanged(lines: list[str], i1: int, i2: int, j1: int, context: int, first: bool,
               last: bool) -> list[DiffRow]:
    keep_head = 0 if first else context  # lines after the change before
    keep_tail = 0 if last else context  # lines before the change after
    rows = [DiffRow("same", lines[i], old=i + 1, new=j1 + i - i1 + 1) for i in range(i1, i2)]
    if first and last:  # the same text: show it all
        return rows
    if len(rows) <= keep_head + keep_tail + 1:
        return rows
    hidden = len(rows) - keep_head - keep_tail
    gap = DiffRow("gap", f"{hidden} unchanged line{'s' if hidden != 1 else ''}")
    return [*rows[:keep_head], gap, *(rows[len(rows) - keep_tail:] if keep_tail else [])]


def unified_rows(text: str) -> list[DiffRow]:
    """A unified diff's lines (a night's staged ``.diff`` file), classed the same way."""
    out = []
    for line in text.splitlines():
        if line.startswith(("+++", "---")):
            out.append(DiffRow("header", line))
        elif line.startswith("@@"):
            out.append(DiffRow("hunk", line))
        elif line.startswith("+"):
            out.append(DiffRow("added", line[1:]))
        elif line.startswith("-"):
            out.append(DiffRow("removed", line[1:]))
        else:
            out.append(DiffRow("same", line[1:] if line.startswith(" ") else line))
    return out
