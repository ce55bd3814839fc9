"""The built-in ``household`` environment: ALFWorld's text household tasks played in the real
ALFWorld engine (TextWorld's PDDL environment driven by the Fast Downward planner).

In deep-learning terms it is a data set plus a loss: each task is one game (a room, a goal such
as "put a clean apple in fridge"); the target acts one command per turn; the loss is the game's
own success (``hard`` = won) and partial progress read from the engine's state (``soft`` =
milestones reached, see :mod:`~skillgrad.envs.household.progress`). Games are split by room, so
no room is seen in two splits, the way ALFWorld's unseen split holds out rooms.

The bundled games are generated from the room layouts that ship with ``alfworld`` (see
``data/DATA_CARD.md``); a file written by ``tools/generate_household.py`` with another seed can
be used with ``data_path``. Official ALFWorld game files are read by
:class:`~skillgrad.envs.household.alfworld.ALFWorldEnvironment`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

from pydantic import Field

from skillgrad.envs.base import EnvCommon, EnvOptions, Split
from skillgrad.envs.data import (
    SplitTasksMixin,
    load_splits,
    located_records,
    package_file,
    skill_file,
)
from skillgrad.envs.household.agent import Playthrough, Settings, play
from skillgrad.envs.household.engine import game_data, load_game
from skillgrad.envs.household.generate import TASK_TYPES
from skillgrad.envs.household.progress import Test, milestones
from skillgrad.errors import DataError
from skillgrad.models.base import ChatModel
from skillgrad.records import RolloutResult, Task

BUNDLED = "games.jsonl"
TaskType = Literal["pick_and_place_simple", "look_at_obj_in_light",
                   "pick_clean_then_place_in_recep", "pick_heat_then_place_in_recep",
                   "pick_cool_then_place_in_recep", "pick_two_obj_and_place"]
assert get_args(TaskType) == TASK_TYPES  # one list of task types, in ALFWorld's order


class PlayOptions(EnvOptions):
    """How a game is played; shared by ``household`` and ``alfworld``."""

    task_types: tuple[TaskType, ...] = Field(
        get_args(TaskType), min_length=1, description="ALFWorld task types to keep")
    tool_mode: Literal["text", "native"] = Field(
        "text", description="text: one command per reply; native: an act(command) tool call")
    max_steps: int = Field(30, ge=1, le=500, description="turns before the game is lost")
    show_admissible: bool = Field(True, description="list the admissible commands each turn")
    history_turns: int = Field(12, ge=0, description="recent turns kept in the prompt (0: all)")
    max_tokens: int = Field(48, ge=1, description="token limit of each reply")
    temperature: float = Field(0.0, ge=0.0)

    def settings(self) -> Settings:
        return Settings(self.tool_mode, self.max_steps, self.show_admissible,
                        self.history_turns, self.max_tokens, self.temperature)


class HouseholdOptions(PlayOptions):
    """The ``env:`` keys of ``household``."""

    data_path: Path | None = Field(None, description="games JSONL from tools/"
                                   "generate_household.py; default: the bundled games")


class GameEnvironment(SplitTasksMixin[PlayOptions], ABC):
    """Rollout and scoring shared by the generated and the official games. A subclass
    implements :meth:`game` (the ``game.tw-pddl`` object of a task)."""

    SKILL_PACKAGE = "skillgrad.envs.household"

    @abstractmethod
    def game(self, task: Task) -> tuple[dict[str, Any], str]:
        """The game object of ``task`` and where it comes from (for error messages)."""

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        data, where = self.game(task)
        # A game that does not load is bad data (a DataError), never a task failure.
        game = load_game(data, where)
        ref = task.reference
        steps = milestones(ref["task_type"], ref["params"]["object_target"],
                           ref["params"]["parent_target"], ref["params"]["toggle_target"])
        played = play(model, skill, game, steps, self.options.settings())
        return _score(task, played, steps, self.options.max_steps)


class HouseholdEnvironment(GameEnvironment):
    """ALFWorld-style games generated from the ``alfworld`` room layouts."""

    Options: ClassVar[type[EnvOptions]] = HouseholdOptions

    def __init__(self, splits: dict[Split, list[Task]], problems: dict[str, tuple[str, str]],
                 options: PlayOptions, skill_path: Path | None = None) -> None:
        super().__init__(splits, options, skill_path)
        self._problems = problems

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> HouseholdEnvironment:
        data_path = options.data_path
        if data_path is None and common.split_mode == "ratio":
            data_path = package_file("skillgrad.envs.household", "data", BUNDLED)
        library = _Library(set(options.task_types))
        splits = load_splits(common, data_path, base_dir, library.load, lambda t: t.group)
        return cls(splits, library.problems, options, skill_file(common, base_dir))

    def game(self, task: Task) -> tuple[dict[str, Any], str]:
        problem, goal = self._problems[task.id]
        return game_data(problem, goal), f"game {task.id}"


class _Library:
    """Reads generated-games files into tasks and keeps each game's PDDL problem by task id."""

    def __init__(self, task_types: set[str]) -> None:
        self.task_types = task_types
        self.problems: dict[str, tuple[str, str]] = {}

    def load(self, path: Path) -> list[Task]:
        tasks = []
        for where, record in located_records(path):
            task, problem = game_record(record, where)
            if task.reference["task_type"] in self.task_types:
                self.problems[task.id] = (problem, task.reference["goal"])
                tasks.append(task)
        if not tasks:
            raise DataError(f"{path}: no games of the task types {sorted(self.task_types)}")
        return tasks


def game_record(record: dict[str, Any], where: str) -> tuple[Task, str]:
    """A generated-game record -> (task, PDDL problem); a bad record is one DataError."""
    need = {"id": str, "room": str, "task_type": str, "goal": str, "pddl_problem": str,
            "walkthrough": list, "params": dict, "seed": int}
    bad = [k for k, kind in need.items() if not isinstance(record.get(k), kind)]
    if bad:
        raise DataError(f"{where}: missing or mistyped {', '.join(bad)}")
    where = f"{where} (game {record['id']}, seed {record['seed']})"
    if record["task_type"] not in TASK_TYPES:
        raise DataError(f"{where}: unknown task_type {record['task_type']!r}")
    params = {k: str(record["params"].get(k) or "") for k in
              ("object_target", "parent_target", "toggle_target")}
    if not params["object_target"]:
        raise DataError(f"{where}: params.object_target is missing")
    walkthrough = record["walkthrough"]
    if not walkthrough or not all(isinstance(c, str) for c in walkthrough):
        raise DataError(f"{where}: unsolvable game (no walkthrough); regenerate the file")
    task = Task(id=record["id"], prompt=f"Your task is to: {record['goal']}.",
                group=record["room"],
                reference={"task_type": record["task_type"], "params": params,
                           "goal": record["goal"], "walkthrough": list(walkthrough)},
                metadata={"room": record["room"], "seed": record["seed"]})
    return task, record["pddl_problem"]


def _score(task: Task, played: Playthrough, steps: list[tuple[str, Test]],
           max_steps: int) -> RolloutResult:
    commands = [s.command for s in played.steps]
    invalid = [s.command or "(empty reply)" for s in played.steps if not s.valid]
    won = played.won
    soft = 1.0 if won else played.best_level / len(steps)
    return RolloutResult(
        task_id=task.id, messages=tuple(played.messages), answer=" ; ".join(commands),
        hard=1.0 if won else 0.0, soft=soft,
        reason="" if won else _reason(task, played, steps, invalid, max_steps),
        turns=len(played.steps), usage=played.usage,
        metadata={"task_type": task.reference["task_type"], "won": won,
                  "steps": len(played.steps), "invalid": len(invalid),
                  "milestones": f"{played.best_level}/{len(steps)}",
                  "walkthrough_steps": len(task.reference.get("walkthrough") or []),
                  "trimmed_turns": played.trimmed_turns},
    )


def _reason(task: Task, played: Playthrough, steps: list[tuple[str, Test]],
            invalid: list[str], max_steps: int) -> str:
    done = [label for label, _ in steps[: played.best_level]]
    missing = [label for label, _ in steps[played.best_level:]]
    parts = [f"task not completed ({task.prompt}); reached {played.best_level}/{len(steps)} "
             f"milestones" + (f" ({', '.join(done)})" if done else "")
             + f"; never {missing[0]}"]
    if invalid:
        shown = ", ".join(repr(c) for c in list(dict.fromkeys(invalid))[:3])
        parts.append(f"{len(invalid)} of {len(played.steps)} commands were invalid or not "
                     f"admissible (e.g. {shown})")
    repeated = Counter(s.command for s in played.steps if s.command and not s.thought)
    if repeated:
        command, count = repeated.most_common(1)[0]
        if count >= 3:
            parts.append(f"repeated {command!r} {count} times")
    if len(played.steps) >= max_steps:
        parts.append(f"hit the step limit of {max_steps} turns")
    walkthrough = task.reference.get("walkthrough") or []
    if walkthrough:
        parts.append(f"a solution takes {len(walkthrough)} commands")
    return "; ".join(parts)
