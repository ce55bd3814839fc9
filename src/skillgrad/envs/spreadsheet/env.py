"""The built-in ``spreadsheet`` environment: edit a workbook with tools (SpreadsheetBench family).

In deep-learning terms it is a data set plus a loss. The data set is generated: seeded
templates (:mod:`.templates`) build small openpyxl workbooks with an instruction each (derived
columns, conditional sums and counts, lookups across sheets, sorting, filtering, date
arithmetic, text cleanup, deleting rows). The target works on a private copy of the workbook
through tools over several turns (:mod:`.workbook`) and says when it is done; the loss
recalculates the workbook and compares the target cells (:mod:`.checker`): ``hard`` = all
right, ``soft`` = the fraction right, and the reason names the wrong cells.

Each task has its own workbook, which is its split group; the split ratio is applied within
each template, so every split holds every template. The default 60 tasks split 36/12/12 with
``env.split_ratio`` 0.6/0.2/0.2.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions, Split
from skillgrad.envs.data import SplitTasksMixin, require_nonempty, skill_file, split_by_ratio
from skillgrad.envs.spreadsheet.checker import show
from skillgrad.envs.spreadsheet.templates import (
    TEMPLATE_NAMES,
    Generated,
    TemplateName,
    generate,
)
from skillgrad.envs.spreadsheet.workbook import (
    WorkbookOptions,
    check_python_tool,
    run_workbook_episode,
    workbook_reason,
)
from skillgrad.errors import ConfigError
from skillgrad.models.base import ChatModel
from skillgrad.records import RolloutResult, Task


class SpreadsheetOptions(WorkbookOptions):
    """The ``env:`` keys of ``spreadsheet``."""

    count: int = Field(60, ge=3, le=5000, description="generated tasks, spread over templates")
    seed: int = Field(0, description="generation seed (split_seed only shuffles the splits)")
    templates: tuple[TemplateName, ...] = Field(TEMPLATE_NAMES, min_length=1,
                                                description="templates to draw from, in turn")


def task_prompt(instruction: str, sheets: str) -> str:
    """What the target is shown for one workbook task (kept short for small models)."""
    return f"Task: {instruction}\nSheets: {sheets}\nWhen the workbook is done, reply ANSWER: done"


def build_tasks(options: SpreadsheetOptions) -> tuple[list[Task], dict[str, Generated]]:
    """The generated tasks (template ``i % len(templates)``, seed ``options.seed * 100003 +
    i``) and their generated workbooks by task id."""
    tasks: list[Task] = []
    generated: dict[str, Generated] = {}
    names = list(dict.fromkeys(options.templates))
    for i in range(options.count):
        name = names[i % len(names)]
        g = generate(name, options.seed * 100003 + i)
        task_id = f"{name}-{g.seed}"
        tasks.append(Task(id=task_id, prompt=task_prompt(g.instruction, g.sheets), group=task_id,
                          reference={"targets": {k: _encode(v) for k, v in g.targets.items()}},
                          metadata={"template": name, "seed": g.seed}))
        generated[task_id] = g
    return tasks, generated


def stratified_splits(tasks: list[Task], common: EnvCommon) -> dict[Split, list[Task]]:
    """``env.split_ratio`` over tasks interleaved by template, so every split holds the
    templates in proportion (each task is its own workbook, hence its own group).

    Within each template the tasks are shuffled with ``env.split_seed`` and given the key
    ``(rank + 0.5) / size``; all tasks sorted by key are cut at the ratio boundaries. Tasks
    keep their generation order within a split.
    """
    split_by_ratio([], common.split_ratio, 0)  # a bad env.split_ratio is a ConfigError here
    rng = random.Random(common.split_seed)
    names = list(dict.fromkeys(t.metadata["template"] for t in tasks))
    keyed: list[tuple[float, int, int]] = []
    for n, name in enumerate(names):
        members = [i for i, t in enumerate(tasks) if t.metadata["template"] == name]
        rng.shuffle(members)
        keyed += [((rank + 0.5) / len(members), n, i) for rank, i in enumerate(members)]
    keyed.sort()
    train, val = common.split_ratio[0] * len(tasks), sum(common.split_ratio[:2]) * len(tasks)
    chosen: dict[Split, list[int]] = {s: [] for s in SPLITS}
    for position, (_, _, i) in enumerate(keyed):
        middle = position + 0.5
        chosen["train" if middle < train else "val" if middle < val else "test"].append(i)
    return {s: [tasks[i] for i in sorted(ids)] for s, ids in chosen.items()}


def _encode(value: Any) -> Any:
    """Expected values as JSON (dates as ISO text) so tasks round-trip through the run dir."""
    return value if value is None or isinstance(value, (str, int, float, bool)) else show(value)


class SpreadsheetEnvironment(SplitTasksMixin[SpreadsheetOptions]):
    """Generated workbook-editing tasks; built from config with :meth:`create`."""

    SKILL_PACKAGE = "skillgrad.envs.spreadsheet"
    Options: ClassVar[type[EnvOptions]] = SpreadsheetOptions

    def __init__(self, splits: dict[Split, list[Task]], generated: dict[str, Generated],
                 options: SpreadsheetOptions, skill_path: Path | None = None) -> None:
        super().__init__(splits, options, skill_path)
        self._generated = generated  # read-only after construction: safe across threads

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> SpreadsheetEnvironment:
        if common.split_mode != "ratio":
            raise ConfigError("env spreadsheet generates its tasks: env.split_mode must be "
                              "'ratio' (use env spreadsheetbench for a folder of workbooks)")
        check_python_tool(options)
        tasks, generated = build_tasks(options)
        splits = stratified_splits(tasks, common)
        require_nonempty(splits, f"env spreadsheet (count {options.count}, seed {options.seed})",
                         hint="raise env.count or change env.split_ratio")
        return cls(splits, generated, options, skill_file(common, base_dir))

    def generated(self, task: Task) -> Generated:
        """The generated workbook, targets and reference solution of ``task``."""
        return self._generated[task.id]

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        g = self._generated[task.id]
        outcome = run_workbook_episode(model, skill, task.prompt, g.workbook, g.targets,
                                       self.options)
        episode = outcome.episode
        return RolloutResult(
            task_id=task.id, messages=episode.messages, answer=episode.answer or "",
            hard=outcome.check.hard, soft=outcome.check.soft,
            reason=workbook_reason(outcome), turns=episode.turns, usage=episode.usage,
            metadata={"template": g.template, "wrong_cells": len(outcome.check.wrong),
                      "tools": [a.tool for a in episode.actions]},
        )
