"""The four request templates of the ``coding`` tasks and the checks of the repositories'
conventions (the generator's building blocks; :mod:`.instances` fills them in).

A task's checks test the request (the new name or keyword works, the bug is gone) and one or
two conventions of its repository; every task also runs the whole test suite. Each task
carries its reference solution, written here as edits of the repository's files that follow
every convention, so the generator can prove the checks: all pass after it, some fail
before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skillgrad.envs.base import Split
from skillgrad.envs.workspace import Check

Files = dict[str, str]
Solve = Callable[[Files], Files]

TEMPLATES = ("rename", "add_function", "add_keyword", "fix_bug")
CONVENTIONS = {
    "all": "every public function is listed in its module's __all__",
    "tests": "new behaviour gets a test in tests/test_<module>.py",
    "changelog": "every change gets a line under ## Unreleased in CHANGELOG.md",
    "cents": "money is an int number of cents, never a float",
    "docstring": "a public function's docstring names its keyword arguments",
    "regression": "a bug fix gets its test in tests/test_regressions.py; existing test files "
                  "stay as they are",
}
UNITTEST = Check(op="command_passes", arg="python3 -m unittest")


@dataclass(frozen=True)
class Spec:
    """One task before it is generated: its request, checks and reference solution."""

    id: str
    repo: str
    template: str
    split: Split
    request: str
    checks: tuple[Check, ...]
    conventions: tuple[str, ...]
    solve: Solve


@dataclass(frozen=True)
class Target:
    """Where a task works: a module (``ledger/money.py``) and the public name it is about."""

    path: str
    name: str

    @property
    def module(self) -> str:
        return self.path.removesuffix(".py").replace("/", ".")

    @property
    def tests(self) -> str:
        return f"tests/test_{self.path.rsplit('/', 1)[-1]}"


def py(code: str) -> Check:
    """A check that runs ``code`` with ``python3 -c`` in the working copy (no double quotes
    in ``code``: the command is split like a shell line)."""
    if '"' in code:
        raise ValueError(f"check code holds a double quote: {code}")
    return Check(op="command_passes", arg=f'python3 -c "{code}"')


def convention_checks(name: str, target: Target, word: str, cents: str | None) -> list[Check]:
    """The checks of one convention for a task about ``target`` (``word``: what the test,
    changelog line or docstring must name; ``cents``: an expression that must be an int)."""
    module = target.module
    if name == "all":
        return [py(f"import {module} as m; assert '{target.name}' in m.__all__ and "
                   "all(hasattr(m, n) for n in m.__all__)")]
    if name == "tests":
        return [py(f"assert '{word}' in open('{target.tests}').read()")]
    if name == "changelog":
        return [py("t = open('CHANGELOG.md').read(); "
                   "u = t.split('## Unreleased', 1)[1].split('\\n## ', 1)[0]; "
                   f"assert '{word}' in u")]
    if name == "cents":
        if cents is None:
            raise ValueError(f"{target.name}: the cents convention needs an expression")
        return [py(f"from {module} import {target.name}; assert isinstance({cents}, int)")]
    if name == "docstring":  # a new function's docstring, or one that names a new keyword
        wanted = "(m.{0}.__doc__ or '').strip()" if word == target.name else (
            f"'{word}' in (m.{{0}}.__doc__ or '')")
        return [py(f"import {module} as m; assert " + wanted.format(target.name))]
    if name == "regression":
        return [py(f"assert '{target.name}' in open('tests/test_regressions.py').read()"),
                Check(op="file_unchanged", arg=target.tests)]
    raise ValueError(f"unknown convention {name!r}")


def checks_of(behaviour: Sequence[str], conventions: Sequence[str], target: Target, word: str,
              cents: str | None = None) -> tuple[Check, ...]:
    found = [py(code) for code in behaviour]
    for name in conventions:
        found += convention_checks(name, target, word, cents)
    return (*found, UNITTEST)


# ----------------------------------------------------------------------------- solutions


def _replace(files: Files, path: str, old: str, new: str) -> None:
    text = files[path]
    if text.count(old) != 1:
        raise ValueError(f"{path}: {old!r} is in it {text.count(old)} times, not once")
    files[path] = text.replace(old, new)


def _list_in_all(files: Files, path: str, name: str) -> None:
    found = re.search(r"__all__ = \[(.*?)\]", files[path], re.S)
    if found is None:
        raise ValueError(f"{path}: no __all__")
    names = sorted({*re.findall(r'"(\w+)"', found.group(1)), name})
    listed = ", ".join(f'"{n}"' for n in names)
    files[path] = files[path].replace(found.group(0), f"__all__ = [{listed}]")


def _changelog(files: Files, line: str) -> None:
    _replace(files, "CHANGELOG.md", "## Unreleased\n\n", f"## Unreleased\n\n- {line}\n\n")


def _append(files: Files, path: str, code: str) -> None:
    files[path] = files[path].rstrip("\n") + "\n\n\n" + code.strip("\n") + "\n"


def rename(task_id: str, repo: str, split: Split, target: Target, new: str,
           behaviour: str, conventions: Sequence[str]) -> Spec:
    old = target.name

    def solve(files: Files) -> Files:
        out = {p: re.sub(rf"\b{old}\b", new, t) if p.endswith(".py") else t
               for p, t in files.items()}
        _changelog(out, f"Renamed `{target.module.split('.', 1)[1]}.{old}` to `{new}`.")
        return out

    request = (f"Rename the function `{old}` in {target.path} to `{new}`, and update "
               "everything that uses it.")
    renamed = Target(target.path, new)
    return Spec(task_id, repo, "rename", split, request,
                checks_of([behaviour], conventions, renamed, new), tuple(conventions), solve)


def add_function(task_id: str, repo: str, split: Split, target: Target, request: str,
                 code: str, test: str, behaviour: Sequence[str], conventions: Sequence[str],
                 cents: str | None = None) -> Spec:
    def solve(files: Files) -> Files:
        out = dict(files)
        _append(out, target.path, code)
        _list_in_all(out, target.path, target.name)
        _append(out, target.tests, test)
        _changelog(out, f"Added `{target.module.split('.', 1)[1]}.{target.name}`.")
        return out

    return Spec(task_id, repo, "add_function", split, request,
                checks_of(behaviour, conventions, target, target.name, cents),
                tuple(conventions), solve)


def add_keyword(task_id: str, repo: str, split: Split, target: Target, keyword: str,
                request: str, new: str, test: str, behaviour: Sequence[str],
                conventions: Sequence[str], cents: str | None = None) -> Spec:
    """``new``: the whole function, as it reads with the keyword."""

    def solve(files: Files) -> Files:
        out = dict(files)
        _replace(out, target.path, _function(out[target.path], target.name), new)
        _append(out, target.tests, test)
        _changelog(out, f"`{target.name}` takes `{keyword}`.")
        return out

    return Spec(task_id, repo, "add_keyword", split, request,
                checks_of(behaviour, conventions, target, keyword, cents),
                tuple(conventions), solve)


def _function(text: str, name: str) -> str:
    """The source of the top-level function ``name`` in ``text``, up to its last line."""
    start = text.index(f"def {name}(")
    after = re.compile(r"\n\n\n(?=\S)").search(text, start)
    return text[start:after.start() + 1 if after else len(text)]


def fix_bug(task_id: str, repo: str, split: Split, target: Target, request: str, old: str,
            new: str, test: str, behaviour: Sequence[str], conventions: Sequence[str]) -> Spec:
    def solve(files: Files) -> Files:
        out = dict(files)
        _replace(out, target.path, old, new)
        _append(out, "tests/test_regressions.py", test)
        _changelog(out, f"Fixed `{target.name}`.")
        return out

    return Spec(task_id, repo, "fix_bug", split, request,
                checks_of(behaviour, conventions, target, target.name),
                tuple(conventions), solve)
