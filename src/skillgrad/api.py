"""skillgrad from Python: train from a config file, or optimize a skill over tasks held in a
list, with the same loop, gate and run directory as ``skillgrad train``.

Three entry points, from the most configured to the least::

    summary = train("config.yaml", out="runs/qa", overrides=["train.num_epochs=2"])

    trainer = Trainer.from_config("config.yaml", out="runs/qa")
    while trainer.run_epoch():           # one epoch per call; [] once the run is done
        print(trainer.metrics["selection"])
    trainer.export(out="skills")         # the best skill as an Agent Skills folder

    result = optimize(trainset, metric=my_metric, initial_skill="Answer briefly.",
                      target=target_model, optimizer=optimizer_model,
                      train={"num_epochs": 2}, out="runs/notebook")
    print(result.best_skill)

:func:`optimize` is GEPA's ``optimize`` in skillgrad's terms: the tasks are dicts (or
objects) with an ``input`` and an ``answer``, the loss is ``metric(answer, task)``, the models
are any :class:`~skillgrad.models.base.ChatModel` objects (or role sections of a config), and
``**config`` overrides the config's sections. Every change still passes the gate, and the run
directory is the checkpoint: calling it again with the same arguments resumes (or, once
finished, returns the finished run's result).

(This module sits on top of :mod:`skillgrad.build`, beside the CLI; ``Trainer.from_config``,
``.metrics`` and ``.best_skill`` defer to it, at call time.)
"""

from __future__ import annotations

import copy
import logging
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ConfigDict

from skillgrad.callbacks import TrainerCallback
from skillgrad.clients import ROLES, build_clients
from skillgrad.config import validate
from skillgrad.dotted import flatten
from skillgrad.envs.base import EnvCommon
from skillgrad.envs.memory import (
    MemoryEnvironment,
    MemoryOptions,
    Metric,
    callable_identity,
    data_digest,
    split_sets,
)
from skillgrad.errors import ConfigError, DataError, RunDirError
from skillgrad.models.base import ChatModel
from skillgrad.package import read_skill
from skillgrad.records import StepRecord
from skillgrad.rundir import RunDir
from skillgrad.tracking import tracker_callbacks
from skillgrad.trainer import Trainer

log = logging.getLogger("skillgrad")

MEMORY_ENV = "skillgrad.envs.memory:MemoryEnvironment"
GIVEN_MODEL = "skillgrad.api:GivenModel"


def train(config_path: str | Path, out: str | Path | None = None,
          overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Train the config at ``config_path`` into ``out`` and return the summary (what
    ``skillgrad train CONFIG --out OUT --set KEY=VALUE ...`` does, without the console).

    Args:
        config_path: a skillgrad (or SkillOpt) YAML config; its relative paths are read from
            its folder.
        out: the run directory (default ``runs/<config name>``). A directory holding a
            checkpoint of the same config is resumed; one of another config is refused.
        overrides: dotted ``key=value`` strings, as ``--set`` takes them.

    Returns:
        The run summary (``summary.json``): selection and test scores, decisions, model usage.
    """
    return trainer_from_config(config_path, overrides, out).fit()


def trainer_from_config(path: str | Path, overrides: Sequence[str] = (),
                        out: str | Path | None = None, *,
                        callbacks: Sequence[TrainerCallback] = (),
                        allow_config_change: bool = False) -> Trainer:
    """:meth:`Trainer.from_config <skillgrad.trainer.Trainer.from_config>`."""
    return Trainer.from_config(path, overrides, out, callbacks=callbacks,
                               allow_config_change=allow_config_change)


@dataclass(frozen=True)
class OptimizeResult:
    """What :func:`optimize` returns: the best skill's text, the run summary (``summary.json``)
    and the run directory (every skill version, step and model call)."""

    best_skill: str
    summary: dict[str, Any]
    run_dir: Path

    @property
    def test(self) -> dict[str, float]:
        """The test split's hard score of the initial, best and final skill ({} without a
        testset)."""
        return {k: float(v["hard"]) for k, v in (self.summary.get("test") or {}).items() if v}

    @property
    def selection(self) -> dict[str, float]:
        """The selection split's score of the initial, best and final skill."""
        return {k: float(v) for k, v in (self.summary.get("selection") or {}).items()
                if isinstance(v, (int, float))}

    @property
    def decisions(self) -> dict[str, int]:
        """How many steps the gate accepted, rejected, skipped or refused."""
        out: dict[str, int] = {}
        for counts in (self.summary.get("decisions_per_epoch") or {}).values():
            for k, v in counts.items():
                out[k] = out.get(k, 0) + int(v)
        return out

    @property
    def usage(self) -> dict[str, Any]:
        """Each role's calls, tokens, time and cost (``summary.json``'s ``models``)."""
        return dict(self.summary.get("models") or {})


def optimize(
    trainset: Iterable[Any],
    valset: Iterable[Any] | None = None,
    testset: Iterable[Any] | None = None,
    *,
    metric: Metric,
    initial_skill: str | Path,
    target: ChatModel | Mapping[str, Any],
    optimizer: ChatModel | Mapping[str, Any] | None = None,
    out: str | Path = "runs/optimize",
    callbacks: Sequence[TrainerCallback] = (),
    verbose: bool = True,
    **config: Mapping[str, Any],
) -> OptimizeResult:
    """Train a skill on tasks held in memory and return the best one.

    Args:
        trainset: the tasks the optimizer learns from: dicts or objects with ``input`` (or
            ``prompt``), the text the target is shown, and ``answer`` (or ``reference``), what
            the metric compares with and the optimizer sees as expected; optional ``id``
            (default: a hash of the input) and ``group`` (kept in one split). A
            :class:`~skillgrad.records.Task` is taken as it is.
        valset: the selection tasks the gate scores every candidate on. Without it, a quarter
            of the trainset (chosen by a hash of each task's id, or its group) is held out.
        testset: tasks scored once at the end (initial, best and final skill); without it
            there is no test.
        metric: ``metric(answer, task)``, where ``answer`` is the target's reply and ``task``
            the item as given; it returns a score in [0, 1], a bool, or ``(score,
            feedback)``: the feedback is the failure reason the optimizer reads. Anything else
            stops the run with a :class:`~skillgrad.errors.ConfigError`.
        initial_skill: the skill to start from: its text, or a ``Path`` to a skill file.
        target: the model that does the tasks with the skill: a ChatModel (any backend:
            ``ScriptedModel``, or a model a skillgrad backend made) or a role section as a
            config's ``model.target`` (``{"backend": "openai_compatible", "base_url": ...}``).
        optimizer: the model that proposes the changes, the same way; default: the target.
        out: the run directory. Calling again into it with the same tasks, skill and config
            resumes; with other ones it is refused (:class:`~skillgrad.errors.RunDirError`).
        callbacks: :class:`~skillgrad.callbacks.TrainerCallback` objects that observe the loop
            (the trackers of a ``tracking={...}`` section follow them).
        verbose: print a line per step and one at the end to stderr (default); the same
            lines go to the ``skillgrad`` logger at INFO either way.
        **config: config overrides by section, e.g. ``train={"num_epochs": 2}``,
            ``evaluation={"gate_test": "strict"}``, ``env={"max_tokens": 256}`` (the target's
            reply limit and temperature are the only ``env`` keys here).

    Returns:
        An :class:`OptimizeResult` with ``best_skill``, ``summary`` and ``run_dir``.

    Raises:
        ConfigError, DataError: a bad argument or task, in one line.
    """
    if not callable(metric):
        raise ConfigError(f"optimize(metric=...): expected a function (answer, task) -> score, "
                          f"got {type(metric).__name__}")
    skill = _skill_text(initial_skill)
    splits, items = split_sets(trainset, valset, testset)
    roles = {"target": _role(target, "target"),
             "optimizer": _role(target if optimizer is None else optimizer, "optimizer")}
    env_section = {**_env_keys(config.get("env", {})), "name": MEMORY_ENV,
                   "data_digest": data_digest(splits, skill),
                   "metric": callable_identity(metric)}
    raw, origins = _raw_config(config, {r: spec for r, (spec, _) in roles.items()}, env_section,
                               has_test=testset is not None)
    resolved = validate(raw, origins, Path.cwd())
    options = cast(MemoryOptions, resolved.env_options)  # env.name is the memory env's, above
    env = MemoryEnvironment(splits, skill, metric, items=items, options=options)
    given = {r: model for r, (_, model) in roles.items() if model is not None}
    clients = build_clients(resolved, given=given)
    run = RunDir(Path(out))
    trackers = tracker_callbacks(resolved, run, [c.meter for c in clients.values()])
    trainer = Trainer(resolved, env, clients["target"], clients["optimizer"], run,
                      callbacks=[*callbacks, StepLines(verbose), *trackers])
    try:
        summary = trainer.fit()
    except RunDirError as exc:
        if "made with a different config" not in str(exc):
            raise
        raise RunDirError(f"optimize(out={str(out)!r}): that folder holds a run made with "
                          f"{_what_changed(run, resolved)}; give another out=, or remove the "
                          "folder to start again") from None
    return OptimizeResult(best_skill=trainer.best_skill, summary=summary, run_dir=Path(out))


_ARGUMENTS = {"env.data_digest": "other tasks or another initial_skill",
              "env.metric": "another metric"}


class StepLines(TrainerCallback):
    """A line per step and one at the end, to the ``skillgrad`` logger at INFO and, when
    ``echo``, to stderr: what :func:`optimize` says while it runs."""

    def __init__(self, echo: bool = True) -> None:
        self.echo = echo

    def _say(self, line: str, warning: bool = False) -> None:
        log.log(logging.WARNING if warning else logging.INFO, "%s", line)
        if self.echo:
            print(f"skillgrad: {line}", file=sys.stderr, flush=True)

    def on_resume(self, state: Any) -> None:
        self._say(f"resuming at step {state.global_step + 1}" if state.phase == "train"
                  else "the run is done; returning its result")

    def on_step_end(self, record: StepRecord) -> None:
        cur = "-" if record.current_score is None else f"{record.current_score:.3f}"
        cand = "-" if record.candidate_score is None else f"{record.candidate_score:.3f}"
        line = (f"step {record.global_step}: train {record.train_hard:.2f}, edits "
                f"{record.n_applied + record.n_fuzzy}/{record.n_selected} applied "
                f"({record.n_proposed} proposed), selection {cur} -> {cand}: "
                f"{record.decision}" + (f" ({record.reason})" if record.reason else ""))
        self._say(line)
        if record.n_parse_errors:
            self._say(f"step {record.global_step}: {record.n_parse_errors} optimizer replies "
                      f"could not be used" + (f" ({record.unusable})" if record.unusable
                                              else ""), warning=True)

    def on_train_end(self, summary: dict[str, Any]) -> None:
        test = summary.get("test") or {}
        scores = ", ".join(f"{k} {v['hard']:.3f}" for k, v in test.items() if v)
        sel = summary.get("selection") or {}
        picked = ", ".join(f"{k} {v:.3f}" for k, v in sel.items() if isinstance(v, float))
        self._say("done: " + (f"test {scores}" if scores else f"selection {picked or '-'}"))


def _what_changed(run: RunDir, resolved: Any) -> str:
    """The arguments of :func:`optimize` that differ from the run's, in its words."""
    from skillgrad.config import changed_keys

    previous = run.read_config()
    keys = sorted(changed_keys(previous, resolved.redacted())) if isinstance(previous, dict) \
        else []
    said = [_ARGUMENTS[k] for k in keys if k in _ARGUMENTS]
    other = [k for k in keys if k not in _ARGUMENTS]
    if other:
        said.append("other settings (" + ", ".join(other[:4]) + ")")
    return " and ".join(said) or "other arguments"


# ----------------------------------------------------------------------------- optimize's config


class GivenModelOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = ""  # the class of the object, for the record


class GivenModel:
    """The backend that stands, in a run's config, for a model object handed to
    :func:`optimize` (``backend: skillgrad.api:GivenModel``, ``model``: its class)."""

    Options = GivenModelOptions

    @classmethod
    def create(cls, options: GivenModelOptions, base_dir: Path) -> ChatModel:
        raise ConfigError(f"backend {GIVEN_MODEL!r} stands for a model object given to "
                          f"skillgrad.optimize() ({options.model or 'a ChatModel'}); a config "
                          "file cannot create one: name a backend such as openai_compatible")


def _role(value: Any, role: str) -> tuple[dict[str, Any], ChatModel | None]:
    """(the role's config section, the model object when one was given)."""
    if isinstance(value, Mapping):
        return copy.deepcopy(dict(value)), None
    if isinstance(value, ChatModel):
        return {"backend": GIVEN_MODEL, "model": _name(type(value))}, value
    raise ConfigError(f"optimize({role}=...): expected a ChatModel (an object with "
                      "complete(request)) or a role section such as {'backend': "
                      f"'openai_compatible', ...}}, got {type(value).__name__}")


def _env_keys(values: Any) -> dict[str, Any]:
    """The ``env`` keys a caller may set: the memory environment's own, not the splitting."""
    if not isinstance(values, Mapping):
        return {}  # reported with the other sections by _raw_config
    own = set(MemoryOptions.model_fields) - {"data_digest", "metric"}
    for key in values:
        if key not in own:
            what = ("is set by optimize() itself (the tasks, splits and initial skill are its "
                    "arguments)" if key in {*EnvCommon.model_fields, *MemoryOptions.model_fields}
                    else "is not a key of the in-memory environment")
            raise ConfigError(f"optimize(env=...): env.{key} {what}; allowed here: "
                              f"{', '.join(sorted(own))}")
    return dict(values)


def _raw_config(config: Mapping[str, Any], roles: dict[str, dict[str, Any]],
                env: dict[str, Any], *, has_test: bool) -> tuple[dict[str, Any], dict[str, str]]:
    """The config ``optimize`` validates, and where each key came from (its errors name the
    argument, as a file's name the file)."""
    raw: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for section, values in config.items():
        if section == "model":
            raise ConfigError("optimize(model=...): give the models as target= and optimizer= "
                              "(a ChatModel or a role section each)")
        if not isinstance(values, Mapping):
            raise ConfigError(f"optimize({section}=...): config overrides go by section, as a "
                              f"dict (e.g. train={{'num_epochs': 2}}); got "
                              f"{type(values).__name__}")
        raw[section] = copy.deepcopy(dict(values))
        origins.update({f"{section}.{k}": f"optimize({section}=...)"
                        for k in flatten(raw[section])})
    raw["model"] = roles
    for role in ROLES:
        origins.update({f"model.{role}.{k}": f"optimize({role}=...)" for k in flatten(roles[role])})
    raw["env"] = env
    origins["env.name"] = origins["env.data_digest"] = origins["env.metric"] = "optimize()"
    evaluation = raw.setdefault("evaluation", {})
    if not has_test:
        if evaluation.get("eval_test") is True:
            raise ConfigError("optimize(evaluation=...): evaluation.eval_test is true but no "
                              "testset was given")
        evaluation["eval_test"] = False
        origins["evaluation.eval_test"] = "optimize(testset=None)"
    return raw, origins


def _skill_text(value: Any) -> str:
    if isinstance(value, Path):
        return read_skill(value)
    if not isinstance(value, str):
        raise ConfigError(f"optimize(initial_skill=...): expected the skill's text (a str) or a "
                          f"Path to a skill file, got {type(value).__name__}")
    if not value.strip():
        raise DataError("optimize(initial_skill=...): the initial skill is empty")
    return value


def _name(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"
