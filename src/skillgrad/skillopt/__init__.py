"""SkillOpt's configs, read as they are.

A config written for SkillOpt 0.2.0 (its flat ``model:`` keys, its 0 = all and "" = unset,
its environment names and keys) is translated into skillgrad's own keys before validation,
key by key, with the meaning kept (:func:`translate`). What has no counterpart here becomes a
:class:`CompatNote`: one line per key naming it and saying why. A value that cannot be
honoured is a :class:`~skillgrad.errors.ConfigError` naming the key. Keys that are neither
skillgrad's nor SkillOpt's stay errors: the validator after the translation sees them.
"""

from skillgrad.skillopt.notes import CompatNote
from skillgrad.skillopt.translate import Translation, translate

__all__ = ["CompatNote", "Translation", "translate"]
