"""Prompt templates: markdown files with ``{{name}}`` placeholders, checked when filled."""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files

_PLACEHOLDER = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")


@cache
def template(name: str) -> str:
    return files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8")


@cache
def fixed_texts() -> tuple[str, ...]:
    """Every template's own words: its text with each placeholder cut out (a line break in
    its place), in name order."""
    names = sorted(f.name.removesuffix(".md") for f in files(__package__).iterdir()
                   if f.name.endswith(".md"))
    return tuple(_PLACEHOLDER.sub("\n", template(n)) for n in names)


def placeholders(text: str) -> set[str]:
    return set(_PLACEHOLDER.findall(text))


def render(name: str, **values: str) -> str:
    """Fill template ``name``. Every placeholder must be given and every value used, so a
    renamed placeholder fails loudly instead of sending a prompt with a hole in it."""
    text = template(name)
    needed = placeholders(text)
    missing, unused = needed - values.keys(), values.keys() - needed
    if missing or unused:
        raise KeyError(f"prompt {name!r}: missing {sorted(missing)}, unused {sorted(unused)}")
    # One pass, so a value that itself contains "{{x}}" is never expanded.
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)
