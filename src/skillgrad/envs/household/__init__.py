"""Household tasks (the ALFWorld family) played in the real ALFWorld engine: generated games
(``household``) and the official ALFWorld game files (``alfworld``)."""

from skillgrad.envs.household.alfworld import ALFWorldEnvironment, ALFWorldOptions
from skillgrad.envs.household.env import HouseholdEnvironment, HouseholdOptions

__all__ = ["ALFWorldEnvironment", "ALFWorldOptions", "HouseholdEnvironment", "HouseholdOptions"]
