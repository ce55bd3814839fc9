"""An environment over tasks held in memory and a metric function: the data set is a Python
list, the loss is the user's own ``metric(answer, task)``. What :func:`skillgrad.optimize`
trains on; it has no entry point (a config file cannot name a list in a notebook).

A task is a mapping or an object with ``input`` (or ``prompt``): the text the target is shown;
and optionally ``answer`` (or ``reference``): what the metric compares with, and what the
optimizer is shown as the expected answer; ``id`` (a string or an integer; default: the first
12 hex digits of the SHA-1 of the input); ``group``: tasks of one group stay in one split.
A :class:`~skillgrad.records.Task` is taken as it is.

The metric returns a number in [0, 1], a bool (1 or 0), or ``(score, feedback)``: the feedback
is the failure reason the optimizer reads. It is called with the target's reply and the task
exactly as it was given (the dict, the object), from several threads at once when
``execution.rollout_workers`` is above 1.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions, Split, single_turn
from skillgrad.errors import ConfigError, DataError
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.records import RolloutResult, Task

Metric = Callable[[str, Any], Any]
"""``metric(answer, task) -> float | bool | (float, feedback)``."""

# Without a selection set, this share of the training tasks is held out for the gate: the
# selection-to-training proportion of the default env.split_ratio (0.6 / 0.2 / 0.2).
VAL_SHARE = 0.25


class MemoryOptions(EnvOptions):
    """The ``env:`` keys of the in-memory environment."""

    max_tokens: int = Field(default=512, ge=1, description="token limit of the target's reply")
    temperature: float = Field(default=0.0, ge=0.0, description="sampling temperature of the "
                               "target")
    data_digest: str = Field(default="", description="hash of the tasks and the initial skill "
                             "(set by skillgrad.optimize): a run directory is only resumed with "
                             "the data it was made with")
    metric: str = Field(default="", description="the metric's name and a hash of its code (set "
                        "by skillgrad.optimize): a run is only resumed with the same metric")


class MemoryEnvironment:
    """Tasks of each split in memory, scored by ``metric``.

    ``items`` maps a task id to what the metric is handed as the task (default: the
    :class:`~skillgrad.records.Task` itself); :meth:`from_sets` builds all of it from lists.
    """

    Options: ClassVar[type[EnvOptions]] = MemoryOptions

    def __init__(self, splits: Mapping[Split, Sequence[Task]], skill: str, metric: Metric, *,
                 items: Mapping[str, Any] | None = None,
                 options: MemoryOptions | None = None) -> None:
        if not callable(metric):
            raise ConfigError(f"metric: expected a function (answer, task) -> score, got "
                              f"{type(metric).__name__}")
        self._splits = {s: list(splits.get(s, ())) for s in SPLITS}
        self._skill = skill
        self.metric = metric
        self.items = dict(items or {})
        self.options = options or MemoryOptions()

    @classmethod
    def from_sets(cls, trainset: Iterable[Any], valset: Iterable[Any] | None = None,
                  testset: Iterable[Any] | None = None, *, metric: Metric, skill: str,
                  options: MemoryOptions | None = None) -> MemoryEnvironment:
        """The environment of three lists of tasks; without ``valset``, a quarter of the
        training tasks (by the hash of their id or group, see :func:`hash_split`) is held out
        for the gate; without ``testset``, there is no test split."""
        splits, items = split_sets(trainset, valset, testset)
        return cls(splits, skill, metric, items=items, options=options)

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> MemoryEnvironment:
        raise ConfigError("env.name: the in-memory environment holds tasks given from Python "
                          "(skillgrad.optimize, or MemoryEnvironment(...) passed to Trainer); "
                          "a config file cannot create it")

    def tasks(self, split: Split) -> list[Task]:
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r}; expected one of {', '.join(SPLITS)}")
        return list(self._splits[split])

    def initial_skill(self) -> str:
        return self._skill

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        # No try/except: a model failure is infrastructure and must propagate, never be scored;
        # so does an exception the metric raises.
        system, user, completion = single_turn(model, skill, task.prompt,
                                               max_tokens=self.options.max_tokens,
                                               temperature=self.options.temperature)
        answer = completion.text.strip()
        value, feedback = read_score(self.metric(answer, self.items.get(task.id, task)),
                                     task.id, self.metric)
        reason = ""
        if value < 1.0:
            reason = feedback or f"the metric scored the reply {value:.2f}"
            if completion.truncated:
                reason += (f"; the reply was cut off at the token limit "
                           f"(env.max_tokens={self.options.max_tokens})")
        return RolloutResult(
            task_id=task.id,
            messages=(system, user, Message(role="assistant", content=completion.text)),
            answer=answer, hard=value, soft=value, reason=reason, usage=completion.usage)


def data_digest(splits: Mapping[Split, Sequence[Task]], skill: str) -> str:
    """A hash of every task (id, input, answer) of every split and of the initial skill."""
    data = {s: [[t.id, t.prompt, t.reference] for t in splits.get(s, ())] for s in SPLITS}
    text = json.dumps({"splits": data, "skill": skill}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def callable_identity(fn: Any) -> str:
    """A function's (or callable object's) name and a hash of its code and constants: the
    same for the same metric in another process, different when its code changes."""
    call = vars(type(fn)).get("__call__")  # a callable object: its class's __call__
    target = fn if hasattr(fn, "__code__") or call is None else call
    code = getattr(target, "__code__", None)
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    module = getattr(fn, "__module__", None) or type(fn).__module__
    if code is None:
        return f"{module}.{name}"
    consts = repr([c for c in code.co_consts if not hasattr(c, "co_code")])
    digest = hashlib.sha256(code.co_code + consts.encode()).hexdigest()[:12]
    return f"{module}.{name}:{digest}"


def read_score(value: Any, task_id: str, metric: Metric) -> tuple[float, str]:
    """The score in [0, 1] and the feedback ("" when none) of what ``metric`` returned for
    task ``task_id``; anything else raises :class:`~skillgrad.errors.ConfigError`."""
    name = getattr(metric, "__name__", type(metric).__name__)
    feedback: Any = ""
    if isinstance(value, tuple) and len(value) == 2:
        value, feedback = value
        if feedback is None:
            feedback = ""
        if not isinstance(feedback, str):
            raise ConfigError(f"metric {name} returned feedback of type "
                              f"{type(feedback).__name__} for task {task_id!r}; the feedback "
                              "of (score, feedback) must be a string or None")
    if isinstance(value, bool):
        return float(value), feedback
    if isinstance(value, numbers.Real):
        score = float(value)
        if not math.isfinite(score) or not 0.0 <= score <= 1.0:
            raise ConfigError(f"metric {name} returned {score!r} for task {task_id!r}; a score "
                              "must be a number in [0, 1]")
        return score, feedback
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    raise ConfigError(f"metric {name} returned {shown} ({type(value).__name__}) for task "
                      f"{task_id!r}; it must return a number in [0, 1], a bool, or "
                      "(score, feedback)")


# ----------------------------------------------------------------------------- tasks


def split_sets(trainset: Iterable[Any], valset: Iterable[Any] | None,
               testset: Iterable[Any] | None) -> tuple[dict[Split, list[Task]], dict[str, Any]]:
    """The tasks of each split and, by task id, each task as it was given; a task id may
    occur once over all the sets."""
    given: dict[str, list[tuple[Task, Any]]] = {}
    for name, items in (("trainset", trainset), ("valset", valset), ("testset", testset)):
        if items is not None:
            given[name] = to_tasks(items, name)
    train = given["trainset"]
    if "valset" in given:
        val = given["valset"]
    else:
        if len({_unit(t) for t, _ in train}) < 2:
            raise DataError("trainset: without a valset at least two tasks (of two groups) are "
                            "needed: a quarter is held out to gate the changes")
        train, val = hash_split(train)
    splits: dict[Split, list[tuple[Task, Any]]] = {
        "train": train, "val": val, "test": given.get("testset", [])}
    seen: dict[str, Split] = {}
    for split in SPLITS:
        for task, _ in splits[split]:
            if task.id in seen:
                raise DataError(f"task id {task.id!r} is in the {seen[task.id]} split and again "
                                f"in {split}; task ids must be unique over all the sets")
            seen[task.id] = split
    items = {t.id: item for split in SPLITS for t, item in splits[split]}
    return {s: [t for t, _ in splits[s]] for s in SPLITS}, items


def to_tasks(items: Iterable[Any], name: str) -> list[tuple[Task, Any]]:
    """Each item of the list ``name`` as a :class:`Task`, with the item itself."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise DataError(f"{name}: expected a list of tasks, got {type(items).__name__}")
    out = [(to_task(item, f"{name}[{i}]"), item) for i, item in enumerate(items)]
    if not out:
        hint = {"valset": "; pass valset=None to hold out part of the trainset instead",
                "testset": "; pass testset=None to skip the final test"}.get(name, "")
        raise DataError(f"{name} is empty{hint}")
    first: dict[str, int] = {}
    for i, (task, _) in enumerate(out):
        j = first.setdefault(task.id, i)
        if j != i:
            raise DataError(f"{name}[{i}]: task id {task.id!r} repeats {name}[{j}]; give each "
                            "task a unique 'id'")
    return out


def to_task(item: Any, where: str) -> Task:
    """One task from a mapping or an object (``where`` prefixes every error)."""
    if isinstance(item, Task):
        return item
    text = _field(item, "input", "prompt")
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"{where}: 'input' (or 'prompt') must be a non-empty string"
                        f"{_got(text)}")
    task_id = _field(item, "id")
    if task_id is None:
        task_id = hashlib.sha1(text.encode()).hexdigest()[:12]
    elif isinstance(task_id, int) and not isinstance(task_id, bool):
        task_id = str(task_id)
    elif not isinstance(task_id, str) or not task_id.strip():
        raise DataError(f"{where}: 'id' must be a non-empty string or an integer{_got(task_id)}")
    group = _field(item, "group")
    if group is not None and not isinstance(group, str):
        raise DataError(f"{where}: 'group' must be a string or None{_got(group)}")
    return Task(id=task_id, prompt=text, reference=_field(item, "answer", "reference"),
                group=group)


def hash_split(tasks: Sequence[tuple[Task, Any]],
               share: float = VAL_SHARE) -> tuple[list[tuple[Task, Any]], list[tuple[Task, Any]]]:
    """(train, val): the groups (a task without one is its own) ranked by the SHA-256 of their
    name, the first ``share`` of them (at least one, never all) held out. The same tasks split
    the same way in any order and any process; each split keeps the tasks' order."""
    units = sorted({_unit(t) for t, _ in tasks},
                   key=lambda u: hashlib.sha256(u.encode()).hexdigest())
    n_val = min(len(units) - 1, max(1, round(len(units) * share)))
    held = set(units[:n_val])
    return ([e for e in tasks if _unit(e[0]) not in held],
            [e for e in tasks if _unit(e[0]) in held])


def _unit(task: Task) -> str:
    return f"group:{task.group}" if task.group is not None else f"id:{task.id}"


def _field(item: Any, *names: str) -> Any:
    for name in names:
        if isinstance(item, Mapping):
            if name in item:
                return item[name]
        elif hasattr(item, name):
            return getattr(item, name)
    return None


def _got(value: Any) -> str:
    if value is None:
        return " (missing)"
    shown = repr(value)
    return f" (got {shown if len(shown) <= 40 else shown[:37] + '...'})"
