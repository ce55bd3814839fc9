"""What the translation of a SkillOpt config says about its keys."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NoteKind = Literal["mapped", "ignored", "inert", "differs"]


@dataclass(frozen=True)
class CompatNote:
    """One SkillOpt key and what became of it.

    ``mapped``: read into a skillgrad key with its meaning (``target``); ``ignored``: it has an
    effect in SkillOpt and none here (a warning); ``inert``: it has no effect in SkillOpt
    either with this config (its backend is not used, or SkillOpt reads it but never uses it);
    ``differs``: read, but skillgrad does something else on purpose (the reason says what)."""

    key: str
    where: str
    kind: NoteKind
    reason: str = ""
    target: str = ""

    def line(self) -> str:
        """The note as one line: ``FILE:LINE: KEY: REASON``."""
        head = f"{self.where}: {self.key}" if self.where else self.key
        if self.kind == "mapped":
            return f"{head} -> {self.target}" + (f" ({self.reason})" if self.reason else "")
        return f"{head}: {self.reason}"
