"""YAML as skillgrad reads it: every file (configs, their bases, ``--set`` values, scripted
models' scripts) goes through one loader that refuses a key named twice in a mapping, and
nesting deeper than :data:`MAX_DEPTH` (before the parser's recursion runs out)."""

from __future__ import annotations

from typing import Any

import yaml

from skillgrad.errors import ConfigError

__all__ = ["MAX_DEPTH", "DuplicateKeyError", "NestingError", "UniqueKeyLoader",
           "load_yaml_lines", "load_yaml_text"]

MAX_DEPTH = 100  # levels of mappings and lists; a config uses a handful


class NestingError(ConfigError):
    """A YAML document nests mappings and lists more than :data:`MAX_DEPTH` levels deep."""


class DuplicateKeyError(ConfigError):
    """A YAML mapping names one key twice."""


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that names one key twice.

    PyYAML itself keeps the last value silently (``num_epochs: 2`` and later ``num_epochs: 3``
    in one section trains 3 epochs), so a typo or a bad merge of two configs changes a run
    without a word. Keys brought in by a ``<<`` merge may be overridden, as YAML intends.

    ``key_lines`` maps each dotted key of the document to the line it is written on (1-based),
    for messages that say where a value came from."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.key_lines: dict[str, int] = {}
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        """PyYAML's composer recurses once per level: past :data:`MAX_DEPTH` it stops with
        an error that says where, rather than running out of stack."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                line = self.peek_event().start_mark.line + 1
                raise NestingError(f"nested more than {MAX_DEPTH} levels deep (at line {line})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: yaml.Node) -> Any:
        self._check_keys(node, (), set())
        return super().construct_document(node)

    def _check_keys(self, node: yaml.Node, path: tuple[str, ...], seen: set[int]) -> None:
        if id(node) in seen:  # an alias of a node already checked (or a recursive one)
            return
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._check_keys(item, (*path, str(i)), seen)
        if not isinstance(node, yaml.MappingNode):
            return
        lines: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._check_keys(value_node, path, seen)
                continue
            key = self.construct_object(key_node) if isinstance(key_node, yaml.ScalarNode) else None
            dotted = (*path, str(key))
            line = key_node.start_mark.line + 1
            if key is not None and key in lines:
                raise DuplicateKeyError(
                    f"duplicate key '{'.'.join(dotted)}' at lines {lines[key]} and {line} "
                    "(each key may appear once in a mapping)")
            if key is not None:
                lines[key] = line
                self.key_lines.setdefault(".".join(dotted), line)
            self._check_keys(value_node, dotted, seen)


def load_yaml_text(text: str, source: str) -> Any:
    """Parse one YAML document with :class:`UniqueKeyLoader`; every problem is a
    :class:`ConfigError` that names ``source`` (a file, or ``--set KEY``) and the line."""
    return load_yaml_lines(text, source)[0]


def load_yaml_lines(text: str, source: str) -> tuple[Any, dict[str, int]]:
    """:func:`load_yaml_text`, and the line of every dotted key."""
    loader = UniqueKeyLoader(text)
    try:
        return loader.get_single_data(), loader.key_lines
    except (DuplicateKeyError, NestingError) as exc:
        raise type(exc)(f"{source}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{source}: malformed YAML{where}: {problem}") from None
    finally:
        loader.dispose()
