"""skillgrad: train the skill document of a frozen LLM agent like the weights of a network.

The names a Python user needs, from a config file::

    from skillgrad import Trainer, train

    summary = train("config.yaml", out="runs/my-run", overrides=["train.num_epochs=2"])

    trainer = Trainer.from_config("config.yaml", out="runs/my-run")
    while trainer.run_epoch():          # one epoch per call; [] once the run is done
        print(trainer.metrics["selection"])
    print(trainer.best_skill)

from tasks held in a list, with a metric of one's own and any :class:`ChatModel`::

    from skillgrad import optimize

    result = optimize(trainset, metric=my_metric, initial_skill="Answer briefly.",
                      target=target_model, optimizer=optimizer_model, out="runs/notebook")

or with objects of one's own (any :class:`Environment`, any :class:`ChatModel` behind a
:class:`ModelClient`)::

    Trainer(load_config("config.yaml"), env, ModelClient(target, "target"),
            ModelClient(optimizer, "optimizer"), RunDir("runs/my-run")).fit()

The names are imported on first use, so ``import skillgrad`` stays cheap.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from skillgrad.version import __version__

_EXPORTS = {
    "optimize": "skillgrad.api",
    "train": "skillgrad.api",
    "OptimizeResult": "skillgrad.api",
    "Trainer": "skillgrad.trainer",
    "TrainerCallback": "skillgrad.callbacks",
    "load_config": "skillgrad.config",
    "ResolvedConfig": "skillgrad.config",
    "build_trainer": "skillgrad.trainer",
    "build_environment": "skillgrad.build",
    "build_clients": "skillgrad.clients",
    "RunDir": "skillgrad.rundir",
    "TrainerState": "skillgrad.state",
    "ModelClient": "skillgrad.models.client",
    "ChatModel": "skillgrad.models.base",
    "ScriptedModel": "skillgrad.models.scripted",
    "ChatRequest": "skillgrad.models.messages",
    "Completion": "skillgrad.models.messages",
    "Message": "skillgrad.models.messages",
    "Environment": "skillgrad.envs.base",
    "MemoryEnvironment": "skillgrad.envs.memory",
    "Task": "skillgrad.records",
    "RolloutResult": "skillgrad.records",
    "EvalScore": "skillgrad.records",
    "StepRecord": "skillgrad.records",
    "SkillgradError": "skillgrad.errors",
    "ConfigError": "skillgrad.errors",
    "DataError": "skillgrad.errors",
    "ModelError": "skillgrad.errors",
    "RunStopped": "skillgrad.errors",
}

__all__ = [
    "__version__",
    "optimize",
    "train",
    "OptimizeResult",
    "Trainer",
    "TrainerCallback",
    "load_config",
    "ResolvedConfig",
    "build_trainer",
    "build_environment",
    "build_clients",
    "RunDir",
    "TrainerState",
    "ModelClient",
    "ChatModel",
    "ScriptedModel",
    "ChatRequest",
    "Completion",
    "Message",
    "Environment",
    "MemoryEnvironment",
    "Task",
    "RolloutResult",
    "EvalScore",
    "StepRecord",
    "SkillgradError",
    "ConfigError",
    "DataError",
    "ModelError",
    "RunStopped",
]

if TYPE_CHECKING:
    from skillgrad.api import OptimizeResult, optimize, train
    from skillgrad.build import build_environment
    from skillgrad.callbacks import TrainerCallback
    from skillgrad.clients import build_clients
    from skillgrad.config import ResolvedConfig, load_config
    from skillgrad.envs.base import Environment
    from skillgrad.envs.memory import MemoryEnvironment
    from skillgrad.errors import ConfigError, DataError, ModelError, RunStopped, SkillgradError
    from skillgrad.models.base import ChatModel
    from skillgrad.models.client import ModelClient
    from skillgrad.models.messages import ChatRequest, Completion, Message
    from skillgrad.models.scripted import ScriptedModel
    from skillgrad.records import EvalScore, RolloutResult, StepRecord, Task
    from skillgrad.rundir import RunDir
    from skillgrad.state import TrainerState
    from skillgrad.trainer import Trainer, build_trainer


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'skillgrad' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
