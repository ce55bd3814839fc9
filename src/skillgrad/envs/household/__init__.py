"""Household tasks (the ALFWorld family) played in the real ALFWorld engine: generated games
(``household``, :mod:`.env`; bundled in ``data/``, see ``data/DATA_CARD.md``) and the official
ALFWorld game files (``alfworld``, :mod:`.alfworld`). Both play with the shipped ``skill.md``."""

from skillgrad.envs.household.alfworld import ALFWorldEnvironment, ALFWorldOptions
from skillgrad.envs.household.env import HouseholdEnvironment, HouseholdOptions

__all__ = ["ALFWorldEnvironment", "ALFWorldOptions", "HouseholdEnvironment", "HouseholdOptions"]
