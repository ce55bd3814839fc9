"""The ``alfworld`` environment: the official ALFWorld game files, when the user has them (the
published data set behind the ``household`` loss).

ALFWorld's data (``alfworld-download``) is laid out as
``json_2.1.1/<split>/<task dir>/<trial>/`` with ``traj_data.json`` (task type, target objects,
scene) and ``game.tw-pddl`` (domain, grammar with the goal, problem, ``solvable``,
``walkthrough``) in each trial folder; the splits are ``train``, ``valid_seen`` and
``valid_unseen``, mapped to train / val / test with options. Games are selected the way
``AlfredTWEnv.collect_game_files`` does: task types as configured, "movable" and "Sliced"
trials skipped, trials without a game file or not marked solvable skipped (and counted in the
log). Play and scoring are those of ``household``.
"""

from __future__ import annotations

import json
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions
from skillgrad.envs.data import resolve_path, skill_file
from skillgrad.envs.household.engine import check_game_file, goal_of_grammar
from skillgrad.envs.household.env import GameEnvironment, PlayOptions
from skillgrad.errors import ConfigError, DataError
from skillgrad.records import Task

log = logging.getLogger(__name__)
OfficialSplit = Literal["train", "valid_seen", "valid_unseen", "valid_train"]
_SCENE = re.compile(r"-(\d+)$")


class ALFWorldOptions(PlayOptions):
    """The ``env:`` keys of ``alfworld``."""

    data_dir: Path = Field(description="the json_2.1.1 folder holding the split folders")
    train_split: OfficialSplit = "train"
    val_split: OfficialSplit = "valid_seen"
    test_split: OfficialSplit = "valid_unseen"
    max_games: int | None = Field(None, ge=1, description="first N games of each split")


class ALFWorldEnvironment(GameEnvironment):
    """Official ALFWorld games; built from config with :meth:`create`."""

    Options: ClassVar[type[EnvOptions]] = ALFWorldOptions

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> ALFWorldEnvironment:
        if common.split_mode != "ratio" or common.split_dir is not None:
            raise ConfigError("env alfworld uses ALFWorld's own split folders; remove "
                              "env.split_mode / env.split_dir and set env.train_split, "
                              "env.val_split and env.test_split instead")
        root = resolve_path(options.data_dir, base_dir)
        if not root.is_dir():
            raise DataError(f"{root}: ALFWorld data folder not found (env.data_dir)")
        names = {"train": options.train_split, "val": options.val_split,
                 "test": options.test_split}
        splits = {split: load_official_split(root / names[split], set(options.task_types),
                                             options.max_games, root) for split in SPLITS}
        return cls(splits, options, skill_file(common, base_dir))

    def game(self, task: Task) -> tuple[dict[str, Any], str]:
        path = Path(task.reference["game_file"])
        data = _read_json(path)
        check_game_file(data, path)
        return data, str(path)


def load_official_split(folder: Path, task_types: set[str], max_games: int | None,
                        root: Path) -> list[Task]:
    """The playable games of one official split folder, in path order."""
    if not folder.is_dir():
        raise DataError(f"{folder}: ALFWorld split folder not found")
    tasks: list[Task] = []
    skipped: Counter[str] = Counter()
    for traj_path in sorted(folder.rglob("traj_data.json")):
        trial = traj_path.parent
        if "movable" in str(trial) or "Sliced" in str(trial):
            skipped["movable or sliced"] += 1
            continue
        traj = _read_json(traj_path)
        if not isinstance(traj, dict) or not isinstance(traj.get("task_type"), str):
            raise DataError(f"{traj_path}: expected an object with a 'task_type'")
        if traj["task_type"] not in task_types:
            continue
        game_path = trial / "game.tw-pddl"
        if not game_path.is_file():
            skipped["no game.tw-pddl"] += 1
            continue
        game = _read_json(game_path)
        check_game_file(game, game_path)
        if not game.get("solvable"):
            skipped["not marked solvable"] += 1
            continue
        tasks.append(_task(trial, traj, game, game_path, root))
        if max_games is not None and len(tasks) >= max_games:
            break
    if skipped:
        log.info("%s: skipped %s", folder, ", ".join(f"{n} {why}" for why, n in skipped.items()))
    if not tasks:
        why = f" (skipped: {dict(skipped)})" if skipped else ""
        raise DataError(f"{folder}: no playable games of the task types "
                        f"{sorted(task_types)}{why}")
    return tasks


def _task(trial: Path, traj: dict[str, Any], game: dict[str, Any], game_path: Path,
          root: Path) -> Task:
    params = traj.get("pddl_params")
    if not isinstance(params, dict) or not params.get("object_target"):
        raise DataError(f"{trial / 'traj_data.json'}: missing pddl_params.object_target")
    scene: dict[str, Any] = traj["scene"] if isinstance(traj.get("scene"), dict) else {}
    number = _SCENE.search(trial.parent.name)
    room = str(scene.get("floor_plan") or (f"FloorPlan{number.group(1)}" if number else
                                           trial.parent.name))
    goal = goal_of_grammar(game["grammar"]) or traj["task_type"].replace("_", " ")
    return Task(
        id=trial.relative_to(root).as_posix(), prompt=f"Your task is to: {goal}.", group=room,
        reference={"task_type": traj["task_type"], "goal": goal, "game_file": str(game_path),
                   "walkthrough": list(game.get("walkthrough") or []),
                   "params": {k: str(params.get(k) or "") for k in
                              ("object_target", "parent_target", "toggle_target")}},
        metadata={"room": room})


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable JSON file ({exc.__class__.__name__})") from None
