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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skillgrad.dotted import flatten, unflatten
from skillgrad.skillopt import envkeys, models, sections
from skillgrad.skillopt import flat as legacy
from skillgrad.skillopt.notes import CompatNote
from skillgrad.skillopt.work import EnvFields, Work


@dataclass
class Translation:
    """The native config (``raw``), where each of its keys came from (``origins``: the file
    or ``--set``; ``where``: with the line), the notes, and whether it was SkillOpt's."""

    raw: dict[str, Any]
    origins: dict[str, str]
    where: dict[str, str]
    notes: list[CompatNote] = field(default_factory=list)
    skillopt: bool = False


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
