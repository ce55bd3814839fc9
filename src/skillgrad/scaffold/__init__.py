"""``skillgrad env new NAME``: a working environment package for the user to edit.

The template (``scaffold/template``) is a complete environment: a loader with record
validation, a rollout with the skill as the system message, a scorer with reasons, a config,
an initial skill, sample data and tests that pass as generated. Python files carry a ``.tmpl``
suffix in the template so that linters and type checkers of skillgrad itself skip them.
"""

from __future__ import annotations

import re
from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from skillgrad import registry
from skillgrad.errors import SkillgradError

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_") if part) + "Environment"


def new_environment(name: str, parent: Path) -> Path:
    """Write the package of environment ``name`` into ``parent/name`` and return that folder."""
    if not _NAME.match(name):
        raise SkillgradError(
            f"env new {name!r}: a name is lower case letters, digits and _, starting with a "
            "letter (it becomes the config's env.name and a Python package name)"
        )
    taken = registry.claimed(registry.ENV_GROUP, name)
    if taken:
        raise SkillgradError(
            f"env new {name!r}: an installed environment already has this name "
            f"({', '.join(taken)}); choose another"
        )
    target = Path(parent) / name
    if target.exists() and any(target.iterdir()):
        raise SkillgradError(f"env new: {target} exists and is not empty; choose another --dir")
    values = {"__NAME__": name, "__PKG__": f"{name}_env", "__CLASS__": class_name(name)}
    _copy(resources.files("skillgrad.scaffold").joinpath("template"), target, values)
    return target


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def _copy(source: Traversable, target: Path, values: dict[str, str]) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for item in sorted(source.iterdir(), key=lambda t: t.name):
        if item.name == "__pycache__":
            continue
        name = _fill(item.name.removesuffix(".tmpl"), values)
        if item.is_dir():
            _copy(item, target / name, values)
        else:
            (target / name).write_text(_fill(item.read_text("utf-8"), values), encoding="utf-8")
