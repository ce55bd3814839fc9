"""The translation of a SkillOpt config in progress (:class:`Work`): the keys still to read,
the keys written, where each came from, and the notes; shared by the translators of each part
of a config (:mod:`.models`, :mod:`.sections`, :mod:`.envkeys`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from skillgrad.errors import ConfigError
from skillgrad.skillopt.notes import CompatNote, NoteKind

# The fields of an environment: name -> annotation (None: there is no such environment).
EnvFields = Callable[[str], Mapping[str, Any] | None]


class Work:
    """The translation in progress: the keys still to read and the keys written."""

    def __init__(self, flat: dict[str, Any], origins: dict[str, str], where: dict[str, str],
                 environ: Mapping[str, str], cwd: Path) -> None:
        self.src = dict(flat)
        self.out: dict[str, Any] = {}
        self._origins, self._where = origins, where
        self.origins: dict[str, str] = {}
        self.where: dict[str, str] = {}
        self.notes: list[CompatNote] = []
        self.environ, self.cwd = environ, cwd
        self.backends: dict[str, str] = {}  # SkillOpt's backend of each role, once chosen

    # ---------------------------------------------------------------- reading

    def has(self, key: str) -> bool:
        return key in self.src

    def peek(self, key: str, default: Any = None) -> Any:
        return self.src.get(key, default)

    def take(self, key: str, default: Any = None) -> Any:
        return self.src.pop(key, default)

    def keys_under(self, prefix: str) -> list[str]:
        return [k for k in self.src if k.startswith(prefix)]

    def at(self, key: str) -> str:
        """``FILE:LINE`` (or ``--set``) of a key as the user wrote it (or of the section
        holding it, for a key given inside a section: ``--set 'model.target={serve: x}'``)."""
        files = [w.split(":", 1)[0] for w in self._where.values() if w != "--set"]
        parent = key.rpartition(".")[0]
        return (self._where.get(key) or self._origins.get(key) or _inside(self._where, parent)
                or _inside(self._origins, parent) or (files[-1] if files else "config"))

    # ---------------------------------------------------------------- writing

    def keep(self, key: str, value: Any = ..., *, target: str | None = None) -> None:
        """Write ``key`` (or ``target``) with its value and origin; a renamed key's origin
        says which SkillOpt key it came from."""
        if value is ...:
            value = self.src.get(key)
        self.src.pop(key, None)
        name = target or key
        self.out[name] = value
        base = _inside(self._origins, key) or ""
        renamed = name != key and "(as SkillOpt's" not in base
        suffix = f" (as SkillOpt's {key})" if renamed else ""
        self.origins[name] = (base or "defaults") + suffix
        self.where[name] = self.at(key) + suffix

    def put(self, target: str, value: Any, reason: str, *, source: str = "") -> None:
        """Write a key that no single SkillOpt key sets (a SkillOpt code default, or a value
        derived from several keys), noted as mapped."""
        self.src.pop(target, None)
        self.out[target] = value
        origin = f"SkillOpt's {source}" if source else "SkillOpt's defaults"
        self.origins[target] = self._origins.get(source, origin) if source else origin
        self.where[target] = (self.at(source) if source else origin) + (
            f" (as SkillOpt's {source})" if source else "")
        self.notes.append(CompatNote(source or target, self.at(source) if source else "",
                                     "mapped", reason, target))

    def derive(self, target: str, value: Any, origin: str) -> None:
        """Write a key whose value comes from elsewhere than one config key: an environment
        variable (``origin`` = ``$NAME``) or a SkillOpt default."""
        self.out[target] = value
        self.origins[target] = self.where[target] = origin

    def note(self, key: str, kind: NoteKind, reason: str) -> None:
        """Read ``key`` without writing it: why is ``reason``."""
        self.src.pop(key, None)
        self.notes.append(CompatNote(key, self.at(key), kind, reason))

    def refuse(self, key: str, why: str) -> ConfigError:
        return ConfigError(f"{self.at(key)}: {key}: {why}")

    def path(self, value: Any) -> Any:
        """A relative path read as SkillOpt reads it: from the current directory."""
        if isinstance(value, str) and value and not Path(value).is_absolute():
            return str(self.cwd / value)
        if isinstance(value, list):
            return [self.path(v) for v in value]
        return value


def _inside(table: dict[str, str], key: str) -> str | None:
    """``table``'s entry of ``key``, else of the nearest section holding it."""
    while key:
        if key in table:
            return table[key]
        key = key.rpartition(".")[0]
    return None
