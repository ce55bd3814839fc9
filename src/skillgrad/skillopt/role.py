"""One role of SkillOpt's flat ``model:`` section while it is written as a skillgrad role.

SkillOpt looks each setting of a backend up in one order: the per-role key, the shared key, the
per-role environment variable, the shared one, its default. :class:`Role` holds those lookups
(which keys count as given differs by key in SkillOpt: :meth:`Role.config` takes the first
non-empty value, :meth:`Role.present` the first key written at all, :meth:`Role.given` the first
that is not null) and writes the role's skillgrad keys with their origins. The translators of
the backends share it (:mod:`.models`, :mod:`.chats`, :mod:`.agents`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillgrad.dotted import flatten
from skillgrad.errors import ConfigError
from skillgrad.skillopt.notes import CompatNote, NoteKind

if TYPE_CHECKING:
    from skillgrad.skillopt.work import Work

ROLES = ("optimizer", "target")


class Role:
    """One role's settings, looked up in SkillOpt's order."""

    def __init__(self, work: Work, role: str, backend: str, key: str, own: list[str],
                 backends: dict[str, str]) -> None:
        self.work, self.role, self.backend = work, role, backend
        self.key = key  # the key that chose the backend
        self.own = own  # the user's skillgrad keys of this role (an agent role's)
        self.backends = backends  # SkillOpt's backend of each role
        self.prefix = f"model.{role}."
        self.read: set[str] = set()

    # ---------------------------------------------------------------- lookup

    def config(self, *names: str) -> tuple[Any, str] | None:
        """The first non-empty value among config keys ``model.<name>``."""
        found = None
        for name in names:
            key = f"model.{name}"
            if self.work.has(key):
                self.read.add(key)
                value = self.work.peek(key)
                if found is None and value not in ("", None):
                    found = (value, key)
        return found

    def present(self, *names: str) -> tuple[Any, str] | None:
        """The value of the first config key ``model.<name>`` that is given at all."""
        for name in names:
            key = f"model.{name}"
            if self.work.has(key):
                self.read.add(key)
                return self.work.peek(key), key
        return None

    def given(self, *names: str) -> tuple[Any, str] | None:
        """The value of the first config key ``model.<name>`` that is not null (SkillOpt's
        ``role_value if role_value is not None else shared_value``)."""
        for name in names:
            key = f"model.{name}"
            if self.work.has(key):
                self.read.add(key)
                if self.work.peek(key) is not None:
                    return self.work.peek(key), key
        return None

    def environ(self, *names: str) -> tuple[str, str] | None:
        for name in names:
            value = self.work.environ.get(name, "")
            if value.strip():
                return value.strip(), f"${name}"
        return None

    def setting(self, names: tuple[str, ...], env: tuple[str, ...],
                default: Any) -> tuple[Any, str]:
        return (self.config(*names) or self.environ(*env)
                or (default, "SkillOpt's default"))

    def where(self, source: str) -> str:
        """Where a value came from, for an error: ``$NAME`` or the key's ``FILE:LINE``."""
        return source if source.startswith("$") else self.work.at(source)

    # ---------------------------------------------------------------- writing

    def assign(self, key: str, found: tuple[Any, str]) -> None:
        """Write the role's ``key``; its origin (and each inner key's, for a mapping such as
        ``extra_body``) names the SkillOpt key, variable or default it came from."""
        value, source = found
        origin = (self.work.at(source) + f" (as SkillOpt's {source})"
                  if source.startswith("model.") else source)
        self.work.derive(self.prefix + key, value, origin)
        if isinstance(value, dict):
            for inner in flatten(value):
                self.work.origins[f"{self.prefix}{key}.{inner}"] = origin
                self.work.where[f"{self.prefix}{key}.{inner}"] = origin

    def note(self, key: str, kind: NoteKind, reason: str, target: str = "") -> None:
        """Name ``key`` once without consuming it (the other role may read it too); a
        mapping replaces a note that it had no effect."""
        for i, note in enumerate(self.work.notes):
            if note.key == key:
                if kind == "mapped" and note.kind == "inert":
                    self.work.notes[i] = CompatNote(key, note.where, kind, reason, target)
                return
        self.work.notes.append(CompatNote(key, self.work.at(key), kind, reason, target))

    def model_name(self) -> tuple[str, str]:
        """The role's model as SkillOpt names it (``model.<role>``) and its key; ("", "")
        where the role is given as a section."""
        key = f"model.{self.role}"
        self.read.add(key)
        if not self.work.has(key) or isinstance(self.work.peek(key), dict):
            return "", ""
        return str(self.work.peek(key) or "").strip(), key

    def no_key_in_file(self, *names: str) -> None:
        found = self.config(*names)
        if found is not None:
            raise self.work.refuse(found[1], "skillgrad reads API keys only from environment "
                                   "variables and never writes them out: export it and set "
                                   "this key to \"\"")

    def number(self, found: tuple[Any, str], kind: type) -> tuple[Any, str]:
        value, source = found
        try:
            return kind(value), source
        except (TypeError, ValueError):
            raise ConfigError(f"{self.where(source)}: {source}: expected a number "
                              f"(got {value!r})") from None

    def sampling(self, temperature: tuple[Any, str], cap: tuple[Any, str]) -> None:
        """A temperature ("" or unset: none is sent) and a completion-token cap."""
        if temperature[0] in ("", None):
            self.assign("send_temperature", (False, temperature[1]))
        else:
            self.assign("temperature", self.number(temperature, float))
        self.assign("max_tokens_cap", self.number(cap, int))


def truthy(value: Any) -> bool:
    """SkillOpt's reading of a boolean setting: ``1``, ``true``, ``yes``, ``on``."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
