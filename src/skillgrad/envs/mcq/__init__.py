"""The ``mcq`` environment (:mod:`.env`): multiple-choice questions scored by the chosen
label, with its shipped ``skill.md``."""

from skillgrad.envs.mcq.env import LABELS, MCQEnvironment, MCQOptions, read_choice

__all__ = ["LABELS", "MCQEnvironment", "MCQOptions", "read_choice"]
