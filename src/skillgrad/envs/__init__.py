"""Environments: task loaders, rollouts and scorers (the data and the loss)."""

from skillgrad.envs.base import EnvCommon, Environment, EnvOptions, Split

__all__ = ["EnvCommon", "EnvOptions", "Environment", "Split"]
