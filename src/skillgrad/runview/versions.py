"""The skill versions of a run by name (``skillgrad diff``): the checkpoints one can diff."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from skillgrad.errors import SkillgradError
from skillgrad.rundir import RunDir
from skillgrad.runview.common import ACCEPTED, load_state, step_name
from skillgrad.state import TrainerState


@dataclass(frozen=True)
class Versions:
    """The named skill versions of a run: ``initial``, ``best``, ``final`` (the current skill
    while it trains), the skill after each step's decision (``after``: name, global step,
    hash), and every skill the checkpoint knows by hash."""

    root: str
    initial: str
    best: str
    final: str
    best_step: int
    after: tuple[tuple[str, int, str], ...]
    known: tuple[str, ...]

    @classmethod
    def of(cls, state: TrainerState, root: str = "") -> Versions:
        current, after = state.initial_hash, []
        for r in state.history:
            if r.step == 1:  # the skill the epoch started from, after its slow update
                current = state.epoch_start.get(str(r.epoch), current)
            if r.decision in ACCEPTED and r.candidate_hash:
                current = r.candidate_hash
            after.append((step_name(r.epoch, r.step), r.global_step, current))
        known = {key.partition(":")[2] for key in state.scores}
        known |= {state.initial_hash, state.best_hash, state.current_hash}
        return cls(root, state.initial_hash, state.best_hash, state.current_hash,
                   state.best_step, tuple(after), tuple(sorted(known)))

    def resolve(self, name: str) -> tuple[str, str]:
        """(a label for the diff's header, the hash) of the version called ``name``."""
        fixed = {"initial": (self.initial, ""),
                 "best": (self.best, f", step {self.best_step}" if self.best_step else ""),
                 "final": (self.final, "")}
        if name in fixed:
            digest, where = fixed[name]
            return f"{name}{where} ({digest[:8]})", digest
        found = re.fullmatch(r"e(\d+)-s(\d+)", name)
        for label, g, digest in self.after:
            if (found and label == step_name(int(found[1]), int(found[2]))) or (
                    name.isdigit() and int(name) == g):
                return f"after {label}, step {g} ({digest[:8]})", digest
        prefix = name.lower()
        if len(prefix) >= 4 and re.fullmatch(r"[0-9a-f]+", prefix):
            matches = [d for d in self.known if d.startswith(prefix)]
            if len(matches) == 1:
                return f"skill {matches[0][:8]}", matches[0]
            if matches:
                raise SkillgradError(
                    f"skill-hash prefix {name!r} matches {len(matches)} skill versions in "
                    f"{self.root}: {', '.join(d[:12] for d in matches)}; give more characters")
        raise SkillgradError(f"no skill version {name!r} in {self.root}; the names are "
                             f"{self.names()}")

    def names(self) -> str:
        """The names that exist, in words (for the refusal of one that does not)."""
        steps = "no finished step yet"
        if len(self.after) <= 6:
            steps = ", ".join(f"{n} ({g})" for n, g, _ in self.after) or steps
        elif self.after:
            (first, g0, _), (last, g1, _) = self.after[0], self.after[-1]
            steps = f"{first} ... {last} (or {g0}-{g1})"
        hashes = ", ".join(d[:8] for d in self.known[:8])
        more = f" and {len(self.known) - 8} more" if len(self.known) > 8 else ""
        return (f"initial, best, final; a step: {steps}; or a skill-hash prefix (4 or more "
                f"characters) of {hashes}{more}")


def load_versions(root: Path, *names: str) -> list[tuple[str, str]]:
    """(label, text) of each named skill version of the run in ``root``."""
    run = RunDir(root)
    versions = Versions.of(load_state(run), str(root))
    found = [versions.resolve(name) for name in names]  # every name checked before reading
    return [(label, run.load_skill(digest)) for label, digest in found]
