"""A SkillOpt config, key by key, into skillgrad's keys.

The translation works on the flattened config (``section.key`` -> value) and writes a new one:
every key it reads is either carried over (a key both projects have), mapped (a SkillOpt key
into the skillgrad key with its meaning), noted (no effect here: :class:`CompatNote`) or
refused (a value that cannot be honoured: :class:`ConfigError`). Keys it does not know are
carried over untouched, so the strict validator after it still names them.

A config is read as SkillOpt's when it holds a key only SkillOpt has (its flat ``model:`` keys,
a benchmark name or an ``env:`` key of SkillOpt's, ...). Only then do SkillOpt's conventions
apply: "" = unset, relative paths read from the current directory (SkillOpt runs from its
repository's root), and its code defaults where they are not keys (16384 completion tokens for
optimizer and target calls). A native config is passed through as it is.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgrad.dotted import flatten, unflatten
from skillgrad.errors import ConfigError
from skillgrad.skillopt import envkeys, models, sections
from skillgrad.skillopt import flat as legacy
from skillgrad.skillopt.notes import CompatNote, NoteKind

# The fields of an environment: name -> annotation (None: there is no such environment).
EnvFields = Callable[[str], Mapping[str, Any] | None]


@dataclass
class Translation:
    """The native config (``raw``), where each of its keys came from (``origins``: the file
    or ``--set``; ``where``: with the line), the notes, and whether it was SkillOpt's."""

    raw: dict[str, Any]
    origins: dict[str, str]
    where: dict[str, str]
    notes: list[CompatNote] = field(default_factory=list)
    skillopt: bool = False


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
        """``FILE:LINE`` (or ``--set``) of a key as the user wrote it."""
        files = [w.split(":", 1)[0] for w in self._where.values() if w != "--set"]
        return self._where.get(key) or self._origins.get(key) or (files[-1] if files else "config")

    # ---------------------------------------------------------------- writing

    def keep(self, key: str, value: Any = ..., *, target: str | None = None) -> None:
        """Write ``key`` (or ``target``) with its value and origin; a renamed key's origin
        says which SkillOpt key it came from."""
        if value is ...:
            value = self.src.get(key)
        self.src.pop(key, None)
        name = target or key
        self.out[name] = value
        base = self._origins.get(key, "")
        renamed = name != key and "(as SkillOpt's" not in base
        suffix = f" (as SkillOpt's {key})" if renamed else ""
        self.origins[name] = self._origins.get(key, "defaults") + suffix
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


def translate(raw: dict[str, Any], origins: dict[str, str], where: dict[str, str],
              env_fields: EnvFields, *, environ: Mapping[str, str] | None = None,
              cwd: Path | None = None) -> Translation:
    """``raw`` in skillgrad's keys. A native config comes back as it is."""
    if legacy.is_flat(raw):
        origins, where = dict(origins), dict(where)
        raw = unflatten(legacy.sectioned(raw, origins, where))
    flat = flatten(raw)
    env_name = str(flat.get("env.name") or "")
    fields = env_fields(envkeys.native_name(env_name)) or {}
    if not is_skillopt(flat, fields):
        return Translation(raw, dict(origins), dict(where))
    work = Work(flat, origins, where, os.environ if environ is None else environ,
                cwd or Path.cwd())
    models.translate(work)
    sections.translate(work)
    envkeys.translate(work, env_fields)
    for key in list(work.src):  # everything else (and unknown keys, for the validator)
        work.keep(key)
    return Translation(unflatten(work.out), work.origins, work.where, work.notes, True)


def is_skillopt(flat: Mapping[str, Any], env_fields: Mapping[str, Any]) -> bool:
    """Whether a flattened config holds a key only SkillOpt has."""
    if any(models.is_skillopt_key(k, flat) for k in flat if k.startswith("model.")):
        return True
    if any(k in sections.SKILLOPT_ONLY for k in flat):
        return True
    name = str(flat.get("env.name") or "")
    if name in envkeys.RENAMED:
        return True
    return any(k.startswith("env.") and k.split(".")[1] not in env_fields
               and envkeys.is_skillopt_env_key(name, k.split(".")[1]) for k in flat)
