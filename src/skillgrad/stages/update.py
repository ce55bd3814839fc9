"""Apply edits to the skill: the optimizer step.

In deep learning the optimizer step turns a (clipped) gradient into a bounded change of the
weights. Here the weights are the skill document and the gradient is a list of ``Edit``s;
``apply_edits`` applies them in order, each to the result of the previous one, and reports
for every edit whether it landed exactly, landed on a tolerant match, or was skipped and why.

Guarantees (what makes the step *bounded*):

* An edit that cannot be placed is a reported skip; a missing anchor never turns into an append.
* Protected blocks (see ``skill.py``) are frozen parameters: no anchor may touch them, edit
  content is passed through ``neutralise_markers``, and an edit after which the blocks differ
  in any way is skipped.
* ``append`` lands before any protected blocks that end the document, so they stay at the end.
* In a skill package (``package.py``) each edit lands inside one file, never across the line
  that separates two files; an edit can create a file or remove one.
* A skill that opens with Agent Skills front matter keeps it valid: its ``description`` (when
  an agent loads the skill) is trained like the body, but an edit after which the front matter
  no longer parses, breaks a rule of the format (a description of 1-1,024 characters, ...)
  or renames the skill is skipped, with the rule it broke.

(Over the house limit of ~400 lines: an edit of a skill package lands in one of its files by
the same anchor search as an edit of a document, which stays private to this module.)

Anchors are located in three steps: (1) exact substring of the stripped anchor; (2) the same
after normalising both sides (casefold, collapse whitespace, drop markdown punctuation and list
numbering), mapped back to the original characters; (3) the most similar run of consecutive
non-blank lines (as many as the anchor has) by ``difflib`` ratio, accepted at or above
``fuzzy_threshold``. Steps 1 and 2 take the first occurrence outside protected blocks; when
every occurrence is protected the edit is refused rather than retried with a looser step.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Literal

from skillgrad.agentskills import SkillFileError, errors_of, parse_skill, validate_skill
from skillgrad.package import (
    MAIN,
    check_path,
    is_package,
    join_package,
    split_package,
    unparseable,
)
from skillgrad.records import ApplyReport, Edit, EditOutcome
from skillgrad.skill import (
    LIST_ITEM,
    Block,
    neutralise_markers,
    protected_spans,
    remove_span,
)

__all__ = ["IDLE_REASONS", "apply_edits"]

# How a skip begins when the edit would change nothing (as opposed to an anchor not found).
IDLE_REASONS = ("no change", "duplicate content")

_PUNCTUATION = frozenset("#*_`>-")
_INLINE_MARKUP = "*_`"
_LIST_MARKER_RE = re.compile(r"^[ \t]*(?:\d+[.)]|[-*+])[ \t]+", re.MULTILINE)
# An anchor that starts like a list item, heading or quote ("- x", "## x", "1. x", "> x").
_ANCHOR_PREFIX_RE = re.compile(r"(?:\d+[.)]|[-*+]|#+|>)\s")
# What may precede the text of a line in markdown: indentation, bullets, numbers, #, >.
_LINE_PREFIX_RE = re.compile(r"[ \t]*(?:(?:\d+[.)]|[-*+>#]+)[ \t]*)*")


@dataclass(frozen=True)
class _Match:
    start: int
    end: int
    similarity: float
    exact: bool


class _Skip(Exception):
    """Why an edit was skipped. Control flow inside this module only; never escapes it."""

    def __init__(
        self, reason: str, matched: str | None = None, similarity: float | None = None
    ) -> None:
        super().__init__(reason)
        self.reason, self.matched, self.similarity = reason, matched, similarity


def apply_edits(
    skill: str, edits: Sequence[Edit], *, fuzzy_threshold: float = 0.82, scripts: bool = True
) -> tuple[str, ApplyReport]:
    """Apply ``edits`` in order; return the new skill and one outcome per edit.

    Pure: the input is not modified, and a skipped edit leaves the document as it was.
    """
    if not 0.0 <= fuzzy_threshold <= 1.0:
        raise ValueError(f"fuzzy_threshold must be in [0, 1], got {fuzzy_threshold}")
    if is_package(skill) or any(e.file and e.file != MAIN for e in edits):
        return _apply_to_package(skill, edits, fuzzy_threshold, scripts)
    outcomes = []
    for index, edit in enumerate(edits):
        skill, outcome = _apply_one(skill, index, edit, fuzzy_threshold)
        outcomes.append(outcome)
    return skill, ApplyReport(outcomes=tuple(outcomes))


def _apply_to_package(text: str, edits: Sequence[Edit], threshold: float,
                      scripts: bool = True) -> tuple[str, ApplyReport]:
    """``apply_edits`` on a skill package: each edit lands in one file, the one it names, else
    SKILL.md for an append and the first file (SKILL.md first, then by path) where its anchor
    is found. An append to a path the package lacks creates the file; a delete with no anchor
    removes the file it names. A file's line in the package text is never an edit's to touch.
    A file under ``scripts/`` is edited only where the rollouts run it (``scripts``), and a
    code or data file an edit would leave unparseable is not changed."""
    package = split_package(text)
    files = {MAIN: package.main, **package.files}
    outcomes = []
    for index, edit in enumerate(edits):
        path, skip = _file_for(files, edit, threshold)
        if skip is None and not scripts and path.startswith("scripts/"):
            skip = (f"{path}: the environment does not run the skill's scripts, so a change "
                    "to one could not be checked")
        if skip is not None:
            outcomes.append(EditOutcome(index=index, edit=edit, status="skipped", reason=skip))
            continue
        if path not in files:  # an append that creates a file
            content = _clean(edit.content)
            if not content:
                outcomes.append(EditOutcome(index=index, edit=edit, status="skipped",
                                            reason="empty content"))
                continue
            broken = unparseable(path, content + "\n")
            if broken:
                outcomes.append(EditOutcome(index=index, edit=edit, status="skipped",
                                            reason=broken))
                continue
            files[path] = content + "\n"
            outcomes.append(EditOutcome(index=index, edit=edit, status="applied"))
            continue
        if edit.op == "delete" and not edit.anchor.strip() and path != MAIN:
            del files[path]
            outcomes.append(EditOutcome(index=index, edit=edit, status="applied"))
            continue
        new, outcome = _apply_one(files[path], index, edit, threshold)
        broken = unparseable(path, new) if new != files[path] else None
        if broken:
            outcome = outcome.model_copy(update={"status": "skipped", "reason": broken})
        else:
            files[path] = new
        outcomes.append(outcome)
    main = files.pop(MAIN)
    return join_package(main, files), ApplyReport(outcomes=tuple(outcomes))


def _file_for(files: dict[str, str], edit: Edit, threshold: float) -> tuple[str, str | None]:
    """The file of the package ``edit`` changes, or why it has none (the reason of a skip)."""
    if edit.file:
        problem = None if edit.file == MAIN else check_path(edit.file)
        if problem:
            return edit.file, f"not a file of the package: {problem}"
        if edit.file not in files and edit.op != "append":
            return edit.file, f"no file {edit.file} in the skill package"
        return edit.file, None
    if edit.op == "append":
        return MAIN, None
    anchor = edit.anchor.strip()
    exact = [path for path, body in files.items() if anchor and anchor in body]
    if exact:  # where the anchor is, as written, before any tolerant match elsewhere
        return exact[0], None
    for path, body in files.items():
        try:
            _locate(body, edit.anchor, threshold)
        except _Skip:
            continue
        return path, None
    return MAIN, None  # not found anywhere: SKILL.md's attempt reports why


def _apply_one(text: str, index: int, edit: Edit, threshold: float) -> tuple[str, EditOutcome]:
    match: _Match | None = None
    try:
        content = _clean(edit.content)
        if edit.op != "delete" and not content:
            raise _Skip("empty content; use delete" if edit.op == "replace" else "empty content")
        if edit.op == "append":
            new = _append(text, content)
        else:
            match = _locate(text, edit.anchor, threshold)
            new = _OPS[edit.op](text, match, content)
        if new == text:
            raise _Skip("no change", *_described(text, match))
        if _frozen(new) != _frozen(text):
            raise _Skip("edit would alter a protected block", *_described(text, match))
        broken = _front_matter_broken(text, new)
        if broken:
            raise _Skip(f"edit would break the front matter: {broken}", *_described(text, match))
    except _Skip as skip:
        return text, EditOutcome(
            index=index,
            edit=edit,
            status="skipped",
            matched=skip.matched,
            similarity=skip.similarity,
            reason=skip.reason,
        )
    matched, similarity = _described(text, match)
    status: Literal["applied", "applied_fuzzy"] = (
        "applied" if match is None or match.exact else "applied_fuzzy"
    )
    return new, EditOutcome(
        index=index, edit=edit, status=status, matched=matched, similarity=similarity
    )


def _front_matter_broken(old: str, new: str) -> str | None:
    """What ``new`` breaks of the Agent Skills front matter ``old`` opens with (None when
    ``old`` has none, or ``new``'s is as valid as ``old``'s and names the same skill)."""
    if not old.removeprefix("\ufeff").startswith("---"):
        return None
    try:
        front_old, body_old, _ = parse_skill(old, "skill")
    except SkillFileError:
        return None  # not front matter to begin with: a rule like any other line
    try:
        front, body, _ = parse_skill(new, "skill")
    except SkillFileError as exc:
        return str(exc).removeprefix("skill: ")
    if front.get("name") != front_old.get("name"):
        return f"name: {front_old.get('name')!r} became {front.get('name')!r} (the skill's " \
               "folder is named by it)"
    before = set(errors_of(validate_skill(front_old, body_old)))
    return next((p for p in errors_of(validate_skill(front, body)) if p not in before), None)


def _described(text: str, match: _Match | None) -> tuple[str | None, float | None]:
    return (None, None) if match is None else (text[match.start : match.end], match.similarity)


def _clean(content: str) -> str:
    """Neutralised content without leading blank lines or trailing whitespace ("" if blank)."""
    content = neutralise_markers(content).replace("<!-- skillgrad:file", "<!- - skillgrad:file")
    return re.sub(r"\A(?:[ \t]*\n)+", "", content).rstrip() if content.strip() else ""


def _frozen(text: str) -> list[tuple[str, str]]:
    return [(b.name, text[b.start : b.end]) for b in protected_spans(text)]


# ----------------------------------------------------------------------------- the four ops


def _append(text: str, content: str) -> str:
    """Append at the end, but before any protected blocks that end the document. A list item
    added after a list item continues that list (no blank line between them: a person writes
    one list, not a list and a second one)."""
    if content in text:
        raise _Skip("duplicate content")
    cut = len(text)
    for block in reversed(protected_spans(text)):
        if text[block.end : cut].strip():
            break
        cut = block.start
    head, tail = text[:cut].rstrip(), text[cut:]
    kind = _list_kind(content)
    joint = "\n" if kind and _ends_in_list(head) == kind else "\n\n"
    new = f"{head}{joint}{content}" if head else content
    return f"{new}\n\n{tail}" if tail else f"{new}\n"


def _list_kind(line: str) -> str:
    """"bullet" or "number" for a list item's line, "" for any other."""
    item = LIST_ITEM.match(line)
    return "" if item is None else "number" if item.group(0).strip()[:1].isdigit() else "bullet"


def _ends_in_list(text: str) -> str:
    """The kind of list (:func:`_list_kind`) ``text``'s last paragraph is, "" where it is none:
    its last line is an item or an item's indented continuation, and the kind is that item's."""
    block = text[text.rfind("\n\n") + 1 :].strip("\n").splitlines()
    if not block or (not _list_kind(block[-1]) and block[-1][:1] not in (" ", "\t")):
        return ""
    return next((_list_kind(x) for x in reversed(block) if _list_kind(x)), "")


def _insert_after(text: str, match: _Match, content: str) -> str:
    """Insert on new line(s) after the line holding the end of the match (never mid-line)."""
    line_end = text.find("\n", match.end)
    if line_end == -1:
        return f"{text}\n{content}"
    following = text[line_end + 1 :].lstrip("\n")
    if following.startswith(content) and following[len(content) : len(content) + 1] in ("", "\n"):
        raise _Skip("no change (content already follows the anchor)", *_described(text, match))
    return f"{text[:line_end]}\n{content}{text[line_end:]}"


def _replace(text: str, match: _Match, content: str) -> str:
    return text[: match.start] + content + text[match.end :]


def _delete(text: str, match: _Match, _content: str) -> str:
    return remove_span(text, match.start, match.end)


_OPS: dict[str, Callable[[str, _Match, str], str]] = {
    "insert_after": _insert_after,
    "replace": _replace,
    "delete": _delete,
}


# ----------------------------------------------------------------------------- anchors


def _locate(text: str, anchor: str, threshold: float) -> _Match:
    """Find ``anchor`` outside protected blocks, or raise ``_Skip`` saying why not."""
    needle = anchor.strip()
    if not needle:
        raise _Skip("empty anchor")
    blocks = protected_spans(text)
    for spans, exact in (
        (_exact_spans(text, needle), True),
        (_tolerant_spans(text, needle), False),
    ):
        if spans:
            return _first_unprotected(text, spans, blocks, exact)
    return _most_similar(text, needle, blocks, threshold)


def _exact_spans(text: str, needle: str) -> list[tuple[int, int]]:
    spans, at = [], text.find(needle)
    while at != -1:
        spans.append((at, at + len(needle)))
        at = text.find(needle, at + 1)
    return spans


def _tolerant_spans(text: str, needle: str) -> list[tuple[int, int]]:
    target = _normalise(needle)[0].strip()
    if not target:
        return []
    norm, origin = _normalise(text)
    spans, at = [], norm.find(target)
    while at != -1:
        spans.append(_widen(text, origin[at], origin[at + len(target) - 1] + 1, needle))
        at = norm.find(target, at + 1)
    return spans


def _first_unprotected(
    text: str, spans: list[tuple[int, int]], blocks: list[Block], exact: bool
) -> _Match:
    for start, end in spans:
        if _block_at(blocks, start, end) is None:
            return _Match(start, end, 1.0, exact)
    start, end = spans[0]
    raise _Skip(
        f"anchor is inside protected block {_block_at(blocks, start, end)}", text[start:end], 1.0
    )


def _block_at(blocks: list[Block], start: int, end: int) -> str | None:
    return next((b.name for b in blocks if start < b.end and end > b.start), None)


def _most_similar(text: str, needle: str, blocks: list[Block], threshold: float) -> _Match:
    """Step 3: the best line window, or raise ``_Skip``; unprotected windows are preferred."""
    best = _best_windows(text, needle, blocks)
    free, frozen = best.get(False), best.get(True)
    if free is not None and free.similarity >= threshold:
        return free
    if frozen is not None and frozen.similarity >= threshold:
        name = _block_at(blocks, frozen.start, frozen.end)
        raise _Skip(f"anchor is inside protected block {name}", *_described(text, frozen))
    if free is None:
        raise _Skip("anchor not found")
    detail = f"best line similarity {free.similarity:.2f} < {threshold:.2f}"
    raise _Skip(f"anchor not found ({detail})", *_described(text, free))


def _best_windows(text: str, needle: str, blocks: list[Block]) -> dict[bool, _Match]:
    """Most similar run of consecutive non-blank lines, keyed by whether it is protected.

    The run is as long as the anchor's non-blank lines; similarity is the ``difflib`` ratio of
    the normalised texts.
    """
    target = _normalise(needle)[0].strip()
    size = sum(1 for line in needle.splitlines() if line.strip())
    lines = [
        (m.start(), m.end(), _normalise(m.group())[0].strip())
        for m in re.finditer(r"\S(?:[^\n]*\S)?", text)
    ]
    best: dict[bool, _Match] = {}
    for i in range(len(lines) - size + 1 if target else 0):
        start, end = lines[i][0], lines[i + size - 1][1]
        protected = _block_at(blocks, start, end) is not None
        floor = best[protected].similarity if protected in best else -1.0
        ratio = _ratio(target, " ".join(norm for _, _, norm in lines[i : i + size]), floor)
        if ratio > floor:
            best[protected] = _Match(start, end, ratio, exact=False)
    return best


def _ratio(a: str, b: str, floor: float) -> float:
    """difflib ratio, or -1 when the cheap upper bounds already show it cannot beat ``floor``."""
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    if matcher.real_quick_ratio() <= floor or matcher.quick_ratio() <= floor:
        return -1.0
    return matcher.ratio()


def _normalise(text: str) -> tuple[str, list[int]]:
    """Casefold, drop markdown punctuation and list markers, collapse whitespace.

    Returns the normalised text and, for each of its characters, the offset in ``text`` it
    came from.
    """
    dropped = {i for m in _LIST_MARKER_RE.finditer(text) for i in range(m.start(), m.end())}
    chars: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        if i in dropped or ch in _PUNCTUATION:
            continue
        if ch.isspace():
            if chars and chars[-1] == " ":
                continue
            ch = " "
        for folded in ch.casefold():
            chars.append(folded)
            origin.append(i)
    return "".join(chars), origin


def _widen(text: str, start: int, end: int, anchor: str) -> tuple[int, int]:
    """Grow a tolerant match over the markup the normalisation ignored.

    Emphasis markers touching the match are included (so a replace does not leave a dangling
    ``**``), and when the anchor itself starts like a list item or heading, so does the match.
    """
    while start > 0 and text[start - 1] in _INLINE_MARKUP:
        start -= 1
    while end < len(text) and text[end] in _INLINE_MARKUP:
        end += 1
    line_start = text.rfind("\n", 0, start) + 1
    prefix = text[line_start:start]
    if _ANCHOR_PREFIX_RE.match(anchor) and _LINE_PREFIX_RE.fullmatch(prefix):
        start = line_start + len(prefix) - len(prefix.lstrip())
    return start, end
