"""The ``alfworld`` environment: the official ALFWorld game files, when the user has them (the
published data set behind the ``household`` loss).

ALFWorld's data (``alfworld-download``, in the folder ``$ALFWORLD_DATA`` names) is laid out as
``json_2.1.1/<split>/<task dir>/<trial>/`` with ``traj_data.json`` (task type, target objects,
scene) and ``game.tw-pddl`` (domain, grammar with the goal, problem, ``solvable``,
``walkthrough``) in each trial folder. Games are chosen in one of two ways:

* **Folder scan** (``split_mode: ratio``, the default): the splits are the folders ``train``,
  ``valid_seen`` and ``valid_unseen`` of ``data_dir`` (the ``json_2.1.1`` folder; default
  ``$ALFWORLD_DATA/json_2.1.1``), mapped to train / val / test with options. Games are selected
  the way ``AlfredTWEnv.collect_game_files`` does: task types as configured, "movable" and
  "Sliced" trials skipped, trials without a game file or not marked solvable skipped (and
  counted in the log).
* **Listed games** (``split_mode: split_dir``, SkillOpt's ``alfworld_path_split`` layout):
  ``split_dir`` holds ``train/``, ``val/`` and ``test/``, each with a JSON list of
  ``{"id", "gamefile", "task_type"}``. ``gamefile`` is absolute or relative to ``data_dir``
  (default ``$ALFWORLD_DATA``, the folder holding ``json_2.1.1``); ``~`` and ``$VARIABLES`` in
  it are expanded. The trial's ``traj_data.json`` lies next to its game file. A listed game
  that cannot be played is an error naming the record, never skipped.

Play and scoring are those of ``household``.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions, Split
from skillgrad.envs.data import load_splits, located_records, resolve_path, skill_file
from skillgrad.envs.household.engine import check_game_file, goal_of_grammar
from skillgrad.envs.household.env import GameEnvironment, PlayOptions
from skillgrad.envs.household.generate import TASK_TYPES
from skillgrad.errors import ConfigError, DataError
from skillgrad.records import Task

log = logging.getLogger(__name__)
OfficialSplit = Literal["train", "valid_seen", "valid_unseen", "valid_train"]
DATA_VARIABLE = "ALFWORLD_DATA"
GAMES_FOLDER = "json_2.1.1"
_SCENE = re.compile(r"-(\d+)$")
_UNSUPPORTED = ("movable", "Sliced")  # trials ALFWorld's TextWorld games do not support


class ALFWorldOptions(PlayOptions):
    """The ``env:`` keys of ``alfworld``."""

    data_dir: Path | None = Field(
        None, description="folder scan: the json_2.1.1 folder holding the split folders; "
        "split_mode split_dir: the folder the items' gamefile paths are relative to; "
        "default: $ALFWORLD_DATA/json_2.1.1 or $ALFWORLD_DATA")
    train_split: OfficialSplit = "train"
    val_split: OfficialSplit = "valid_seen"
    test_split: OfficialSplit = "valid_unseen"
    max_games: int | None = Field(None, ge=1, description="first N games of each split")


class ALFWorldEnvironment(GameEnvironment):
    """Official ALFWorld games; built from config with :meth:`create`."""

    Options: ClassVar[type[EnvOptions]] = ALFWorldOptions

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> ALFWorldEnvironment:
        if common.split_mode == "split_dir":
            splits = load_listed_splits(common, options, base_dir)
        else:
            splits = load_official_splits(common, options, base_dir)
        return cls(splits, options, skill_file(common, base_dir))

    def game(self, task: Task) -> tuple[dict[str, Any], str]:
        path = Path(task.reference["game_file"])
        data = _read_json(path)
        check_game_file(data, path)
        return data, str(path)


def data_root(options: ALFWorldOptions, base_dir: Path) -> Path | None:
    """The folder ``env.data_dir`` names, else ``$ALFWORLD_DATA``; None when neither is set.
    A folder that does not exist is a DataError naming where it came from."""
    if options.data_dir is not None:
        root, origin = resolve_path(options.data_dir, base_dir), "env.data_dir"
    else:
        value = os.environ.get(DATA_VARIABLE, "").strip()
        if not value:
            return None
        root, origin = Path(os.path.expandvars(value)).expanduser(), f"${DATA_VARIABLE}"
    if not root.is_dir():
        raise DataError(f"{root}: ALFWorld data folder not found ({origin})")
    return root


# ----------------------------------------------------------------------------- folder scan


def load_official_splits(common: EnvCommon, options: ALFWorldOptions,
                         base_dir: Path) -> dict[Split, list[Task]]:
    """The splits of a folder scan of ``json_2.1.1``."""
    if common.split_dir is not None:
        raise ConfigError("env.split_dir is used only when env.split_mode is 'split_dir'; "
                          "remove it, or set env.split_mode: split_dir to play listed games")
    root = data_root(options, base_dir)
    if root is None:
        raise ConfigError(f"env alfworld needs env.data_dir (the {GAMES_FOLDER} folder) or the "
                          f"{DATA_VARIABLE} environment variable (the folder holding "
                          f"{GAMES_FOLDER})")
    if options.data_dir is None:  # $ALFWORLD_DATA holds json_2.1.1, as in ALFWorld's configs
        root = root / GAMES_FOLDER
        if not root.is_dir():
            raise DataError(f"{root}: ALFWorld data folder not found (${DATA_VARIABLE}/"
                            f"{GAMES_FOLDER})")
    names = {"train": options.train_split, "val": options.val_split,
             "test": options.test_split}
    return {split: load_official_split(root / names[split], set(options.task_types),
                                       options.max_games, root) for split in SPLITS}


def load_official_split(folder: Path, task_types: set[str], max_games: int | None,
                        root: Path) -> list[Task]:
    """The playable games of one official split folder, in path order."""
    if not folder.is_dir():
        raise DataError(f"{folder}: ALFWorld split folder not found")
    tasks: list[Task] = []
    skipped: Counter[str] = Counter()
    for traj_path in sorted(folder.rglob("traj_data.json")):
        trial = traj_path.parent
        if any(word in str(trial) for word in _UNSUPPORTED):
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
        tasks.append(_task(trial.relative_to(root).as_posix(), trial, traj, game, game_path))
        if max_games is not None and len(tasks) >= max_games:
            break
    if skipped:
        log.info("%s: skipped %s", folder, ", ".join(f"{n} {why}" for why, n in skipped.items()))
    if not tasks:
        why = f" (skipped: {dict(skipped)})" if skipped else ""
        raise DataError(f"{folder}: no playable games of the task types "
                        f"{sorted(task_types)}{why}")
    return tasks


# ----------------------------------------------------------------------------- listed games


def load_listed_splits(common: EnvCommon, options: ALFWorldOptions,
                       base_dir: Path) -> dict[Split, list[Task]]:
    """The splits of a ``split_dir`` whose records list game files."""
    unused = sorted({"train_split", "val_split", "test_split"} & options.model_fields_set)
    if unused:
        raise ConfigError(f"{', '.join('env.' + k for k in unused)} name {GAMES_FOLDER} "
                          "folders and are not used when env.split_mode is 'split_dir' (the "
                          "split folders list the games); remove them")
    listing = _Listing(data_root(options, base_dir), set(options.task_types))
    splits = load_splits(common, None, base_dir, listing.load, lambda t: t.group)
    if options.max_games is not None:
        splits = {split: tasks[: options.max_games] for split, tasks in splits.items()}
    return splits


class _Listing:
    """Reads split files of ``{id, gamefile, task_type}`` records into tasks."""

    def __init__(self, root: Path | None, task_types: set[str]) -> None:
        self.root = root
        self.task_types = task_types

    def load(self, path: Path) -> list[Task]:
        tasks = []
        for where, record in located_records(path):
            task_type = record.get("task_type")
            if task_type not in TASK_TYPES:
                shown = repr(task_type) if task_type is not None else "missing"
                raise DataError(f"{where}: task_type {shown}; expected one of "
                                f"{', '.join(TASK_TYPES)}")
            if task_type in self.task_types:
                tasks.append(self.task(record, where))
        if not tasks:
            raise DataError(f"{path}: no games of the task types {sorted(self.task_types)}")
        return tasks

    def task(self, record: dict[str, Any], where: str) -> Task:
        item_id = record.get("id")
        if isinstance(item_id, bool) or not isinstance(item_id, (str, int)) \
                or not str(item_id).strip():
            raise DataError(f"{where}: missing or empty 'id'")
        where = f"{where} (id {item_id})"
        game_path = self.game_path(record.get("gamefile"), where)
        trial = game_path.parent
        if any(word in str(trial) for word in _UNSUPPORTED):
            raise DataError(f"{where}: {game_path}: ALFWorld does not support movable or "
                            "sliced trials")
        if not game_path.is_file():
            raise DataError(f"{where}: game file {game_path} not found")
        try:
            game = _read_json(game_path)
            check_game_file(game, game_path)
            traj = _read_json(trial / "traj_data.json")
        except DataError as exc:
            raise DataError(f"{where}: {exc}") from None
        if not game.get("solvable"):
            raise DataError(f"{where}: {game_path} is not marked solvable")
        if not isinstance(traj, dict) or traj.get("task_type") != record["task_type"]:
            said = traj.get("task_type") if isinstance(traj, dict) else None
            raise DataError(f"{where}: task_type {record['task_type']!r}, but "
                            f"{trial / 'traj_data.json'} says {said!r}")
        return _task(str(item_id), trial, traj, game, game_path, where)

    def game_path(self, gamefile: Any, where: str) -> Path:
        if not isinstance(gamefile, str) or not gamefile.strip():
            raise DataError(f"{where}: missing or empty 'gamefile'")
        expanded = os.path.expandvars(gamefile.strip())
        if "$" in expanded:
            raise DataError(f"{where}: gamefile {gamefile!r} names an environment variable "
                            "that is not set")
        path = Path(expanded).expanduser()
        if path.is_absolute():
            return path
        if self.root is None:
            raise ConfigError(f"{where}: gamefile {gamefile!r} is relative; set env.data_dir "
                              f"or the {DATA_VARIABLE} environment variable to the folder "
                              f"holding {GAMES_FOLDER}")
        return self.root / path


# ----------------------------------------------------------------------------- shared


def _task(task_id: str, trial: Path, traj: dict[str, Any], game: dict[str, Any],
          game_path: Path, where: str | None = None) -> Task:
    params = traj.get("pddl_params")
    if not isinstance(params, dict) or not params.get("object_target"):
        prefix = f"{where}: " if where else ""
        raise DataError(f"{prefix}{trial / 'traj_data.json'}: missing pddl_params.object_target")
    scene: dict[str, Any] = traj["scene"] if isinstance(traj.get("scene"), dict) else {}
    number = _SCENE.search(trial.parent.name)
    room = str(scene.get("floor_plan") or (f"FloorPlan{number.group(1)}" if number else
                                           trial.parent.name))
    goal = goal_of_grammar(game["grammar"]) or traj["task_type"].replace("_", " ")
    return Task(
        id=task_id, prompt=f"Your task is to: {goal}.", group=room,
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
