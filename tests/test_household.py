"""The household environment in the real ALFWorld engine: generated games, room splits, the
reference walkthrough wins and an idle agent scores 0 for every task type, partial credit and
reasons, both tool protocols, concurrency, bad data, the official-files loader (a folder scan,
or games listed in SkillOpt's path split), and a short training run with scripted models."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ValueError:  # a module blocked in sys.modules has no spec
        return False


_MISSING = [m for m in ("alfworld", "textworld", "fast_downward") if not _installed(m)]
if _MISSING:
    if os.environ.get("SKILLGRAD_REQUIRE_HOUSEHOLD") == "1":
        pytest.fail(f"SKILLGRAD_REQUIRE_HOUSEHOLD=1 but {', '.join(_MISSING)} not installed "
                    '(pip install "skillgrad[household]")', pytrace=False)
    pytest.skip(f"household needs {', '.join(_MISSING)}", allow_module_level=True)

from e2e import one_epoch, rule_optimizer, train_end_to_end  # noqa: E402

from skillgrad.envs.base import EnvCommon  # noqa: E402
from skillgrad.envs.household import (  # noqa: E402
    ALFWorldEnvironment,
    ALFWorldOptions,
    HouseholdEnvironment,
    HouseholdOptions,
)
from skillgrad.envs.household.agent import parse_command, resolve  # noqa: E402
from skillgrad.envs.household.engine import game_data, solve  # noqa: E402
from skillgrad.envs.household.generate import (  # noqa: E402
    TASK_TYPES,
    build_scene,
    candidates,
    goal_text,
    load_layout,
    problem_pddl,
)
from skillgrad.errors import ConfigError, DataError  # noqa: E402
from skillgrad.models.messages import ChatRequest, Completion  # noqa: E402
from skillgrad.models.scripted import ScriptedModel  # noqa: E402
from skillgrad.records import Task  # noqa: E402

SPLITS = ("train", "val", "test")


@pytest.fixture(scope="module")
def env() -> HouseholdEnvironment:
    return HouseholdEnvironment.create(EnvCommon(name="household"), HouseholdOptions(),
                                       Path("."))


def _one(env: HouseholdEnvironment, task_type: str, split: str = "test") -> Task:
    return next(t for t in env.tasks(split) if t.reference["task_type"] == task_type)  # type: ignore[arg-type]


def test_bundled_games_are_split_by_room_with_every_task_type(env: HouseholdEnvironment) -> None:
    sizes = {s: len(env.tasks(s)) for s in SPLITS}  # type: ignore[arg-type]
    assert sizes == {"train": 36, "val": 12, "test": 12}
    rooms = {s: {t.group for t in env.tasks(s)} for s in SPLITS}  # type: ignore[arg-type]
    assert not (rooms["train"] & rooms["val"] or rooms["train"] & rooms["test"]
                or rooms["val"] & rooms["test"])
    for split in SPLITS:
        assert {t.reference["task_type"] for t in env.tasks(split)} == set(TASK_TYPES)  # type: ignore[arg-type]
    task = env.tasks("test")[0]
    assert re.fullmatch(r"Your task is to: .+\.", task.prompt) and task.reference["walkthrough"]


def _with(env: HouseholdEnvironment, **options: Any) -> HouseholdEnvironment:
    """The same games under other play options (no reloading)."""
    return HouseholdEnvironment({s: env.tasks(s) for s in SPLITS}, env._problems,  # type: ignore[arg-type]
                                HouseholdOptions(**options))


def _tool_call(n: int, command: str) -> Completion:
    return Completion(text="", tool_calls=[{"id": f"c{n}", "type": "function", "function": {
        "name": "act", "arguments": json.dumps({"command": command})}}])


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_the_reference_walkthrough_wins(env: HouseholdEnvironment, task_type: str) -> None:
    task = _one(env, task_type)
    walkthrough = task.reference["walkthrough"]
    if task_type == "pick_two_obj_and_place":  # one task type plays through native tool calls
        native = _with(env, tool_mode="native")
        model = ScriptedModel([_tool_call(n, c) for n, c in enumerate(walkthrough)])
        won = native.rollout(task, native.initial_skill(), model)
        assert model.calls[0].tools is not None
        assert [m.role for m in won.messages[2:4]] == ["assistant", "tool"]
    else:
        won = env.rollout(task, env.initial_skill(), ScriptedModel(walkthrough))
    assert (won.hard, won.soft, won.turns, won.reason) == (1.0, 1.0, len(walkthrough), "")
    assert won.metadata["milestones"].split("/")[0] == won.metadata["milestones"].split("/")[1]


def test_idle_agents_score_zero_for_every_task_type_in_concurrent_rollouts(
    env: HouseholdEnvironment,
) -> None:
    # Rollouts run in threads here, as the trainer's rollout workers do: the engine must not
    # share state between games (TextWorld's parsers are process-wide; see engine.py).
    idle = _with(env, max_steps=1)
    tasks = [_one(env, t) for t in TASK_TYPES]
    results: dict[str, Any] = {}

    def run(task: Task) -> None:
        results[task.id] = idle.rollout(task, "", ScriptedModel(default="inventory"))

    threads = [threading.Thread(target=run, args=(t,)) for t in tasks]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == len(TASK_TYPES)
    for task in tasks:
        lost = results[task.id]
        assert (lost.hard, lost.soft, lost.turns) == (0.0, 0.0, 1), task.reference["task_type"]
        assert "reached 0/" in lost.reason and "hit the step limit of 1 turns" in lost.reason


def test_partial_progress_invalid_commands_and_history_window(env: HouseholdEnvironment) -> None:
    task = _one(env, "pick_heat_then_place_in_recep")
    walkthrough = task.reference["walkthrough"]
    take = next(i for i, c in enumerate(walkthrough) if c.startswith("take "))
    replies = [f"ACTION: {c}" for c in walkthrough[: take + 1]]
    replies += ["fly to the moon", "think: where is the microwave?"]
    short = _with(env, max_steps=len(replies) + 4, history_turns=4)
    model = ScriptedModel(replies, default="look")
    result = short.rollout(task, short.initial_skill(), model)
    assert result.hard == 0.0 and result.soft == 0.5  # found and picked up: 2 of 4 milestones
    assert "picked up a" in result.reason and "never heated a" in result.reason
    assert "1 of" in result.reason and "'fly to the moon'" in result.reason
    assert "repeated 'look' 4 times" in result.reason and "hit the step limit" in result.reason
    assert result.metadata["invalid"] == 1 and result.turns == short.options.max_steps
    # The prompt holds the system message, the intro and at most 4 turns of 2 messages; the
    # trajectory keeps every turn, and the skill stays first.
    assert max(len(call.messages) for call in model.calls) <= 2 + 4 * 2
    assert len(result.messages) == 2 + 2 * result.turns
    assert all(c.messages[0].text().startswith(short.initial_skill().strip()) for c in model.calls)
    assert "earlier turns are not shown" in model.calls[-1].messages[1].text()


def test_text_protocol_is_tolerant() -> None:
    assert parse_command("ACTION: Go to Fridge 1.\nbecause") == ("go to fridge 1", False)
    assert parse_command("\n> take apple 1 from countertop 1") == (
        "take apple 1 from countertop 1", False)
    assert parse_command('act {"command": "open drawer 2"}') == ("open drawer 2", False)
    assert parse_command("Think: the apple is cold")[1] is True
    assert parse_command("   ") == ("", False)
    assert resolve("put apple 1 in fridge 1", ["move apple 1 to fridge 1"]) == (
        "move apple 1 to fridge 1")


def test_generation_is_deterministic_and_an_unsolvable_game_names_the_seed() -> None:
    layout = load_layout("FloorPlan1")
    task_type = "pick_cool_then_place_in_recep"

    def problem(seed: int) -> tuple[str, str]:
        rng = random.Random(seed)
        params = rng.choice(candidates(task_type, layout))
        scene = build_scene(task_type, params, layout, rng)
        return problem_pddl("p", task_type, params, scene), goal_text(task_type, params, rng)

    assert problem(5) == problem(5) and problem(5) != problem(6)
    pddl, goal = problem(5)
    assert solve(game_data(pddl, goal), "seed 5")  # a generated game is solvable
    # Without canContain facts nothing can be put anywhere: the goal is unreachable.
    broken = re.sub(r"\(canContain [^)]*\)", "", pddl)
    with pytest.raises(DataError, match="seed 7, game x: unsolvable"):
        solve(game_data(broken, goal), "seed 7, game x")


def _write_games(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _bundled_records() -> list[dict[str, Any]]:
    from importlib import resources

    text = resources.files("skillgrad.envs.household").joinpath("data/games.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines()]


@pytest.mark.parametrize(
    ("change", "problem"),
    [({"walkthrough": []}, r"seed 0\): unsolvable game"),
     ({"task_type": "juggle"}, "unknown task_type 'juggle'"),
     ({"pddl_problem": None}, "missing or mistyped pddl_problem")],
)
def test_bad_game_records_name_the_file(tmp_path: Path, change: dict[str, Any],
                                        problem: str) -> None:
    record = {**_bundled_records()[0], **change}
    path = _write_games(tmp_path / "games.jsonl", [record])
    with pytest.raises(DataError, match=f"games.jsonl: line 1.*{problem}"):
        HouseholdEnvironment.create(EnvCommon(name="household"),
                                    HouseholdOptions(data_path=path), tmp_path)


def test_missing_file_and_broken_pddl(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nope.jsonl: file not found"):
        HouseholdEnvironment.create(EnvCommon(name="household"),
                                    HouseholdOptions(data_path=Path("nope.jsonl")), tmp_path)
    records = [{**r, "pddl_problem": "(define (problem"} for r in _bundled_records()[:5]]
    path = _write_games(tmp_path / "broken.jsonl", records)
    broken = HouseholdEnvironment.create(
        EnvCommon(name="household", split_ratio=(0.6, 0.2, 0.2)),
        HouseholdOptions(data_path=path), tmp_path)
    task = broken.tasks("test")[0]
    with pytest.raises(DataError, match=f"game {task.id}: unsolvable or malformed game; the engine cannot load it"):
        broken.rollout(task, "", ScriptedModel(default="look"))


# ----------------------------------------------------------------------------- official files


def _official_tree(root: Path, records: list[dict[str, Any]]) -> Path:
    """A tiny json_2.1.1 tree in ALFWorld's layout, made from generated games."""
    data = root / "json_2.1.1"
    for n, record in enumerate(records):
        split = ("train", "valid_seen", "valid_unseen")[n % 3]
        params = record["params"]
        task_dir = (f"{record['task_type']}-{params['object_target']}-None-"
                    f"{params['parent_target'] or 'None'}-{record['room'][9:]}")
        trial = data / split / task_dir / f"trial_T2019_{n:03d}"
        trial.mkdir(parents=True)
        game = {**game_data(record["pddl_problem"], record["goal"]), "solvable": True,
                "walkthrough": record["walkthrough"]}
        (trial / "game.tw-pddl").write_text(json.dumps(game))
        (trial / "traj_data.json").write_text(json.dumps({
            "task_type": record["task_type"], "scene": {"floor_plan": record["room"]},
            "pddl_params": {**params, "mrecep_target": "", "object_sliced": False}}))
    return data


def test_official_alfworld_files(tmp_path: Path) -> None:
    records = _bundled_records()[::7][:9]  # every task type; three games per split folder
    data = _official_tree(tmp_path, records)
    # As in ALFWorld, trials without a game file and games not marked solvable are skipped.
    extra = data / "valid_unseen" / "pick_and_place_simple-Mug-None-Desk-301" / "trial_T1"
    extra.mkdir(parents=True)
    (extra / "traj_data.json").write_text(json.dumps({"task_type": "pick_and_place_simple"}))
    unsolvable = next(p for p in (data / "valid_seen").rglob("game.tw-pddl")
                      if "pick_clean" in str(p))
    unsolvable.write_text(json.dumps({**json.loads(unsolvable.read_text()), "solvable": False}))
    official = ALFWorldEnvironment.create(EnvCommon(name="alfworld"),
                                          ALFWorldOptions(data_dir=Path("json_2.1.1")), tmp_path)
    assert [len(official.tasks(s)) for s in SPLITS] == [3, 2, 3]  # type: ignore[arg-type]
    task = official.tasks("test")[0]
    assert task.id.startswith("valid_unseen/") and task.id.endswith("/trial_T2019_002")
    record = records[2]
    assert task.reference["task_type"] == record["task_type"] and task.group == record["room"]
    assert task.prompt == f"Your task is to: {record['goal']}."  # read from the game's grammar
    result = official.rollout(task, official.initial_skill(), ScriptedModel(record["walkthrough"]))
    assert result.hard == 1.0
    two_kinds = ("pick_two_obj_and_place", "pick_and_place_simple")
    only = ALFWorldEnvironment.create(
        EnvCommon(name="alfworld"), ALFWorldOptions(data_dir=data, task_types=two_kinds),
        tmp_path)
    assert [len(only.tasks(s)) for s in SPLITS] == [1, 1, 1]  # type: ignore[arg-type]
    assert {t.reference["task_type"] for s in SPLITS for t in only.tasks(s)} == set(two_kinds)  # type: ignore[arg-type]


def test_official_files_bad_data(tmp_path: Path) -> None:
    data = _official_tree(tmp_path, _bundled_records()[:3])
    opts = ALFWorldOptions(data_dir=data)
    with pytest.raises(DataError, match="valid_train: ALFWorld split folder not found"):
        ALFWorldEnvironment.create(EnvCommon(name="alfworld"),
                                   ALFWorldOptions(data_dir=data, test_split="valid_train"),
                                   tmp_path)
    with pytest.raises(DataError, match="nowhere: ALFWorld data folder not found"):
        ALFWorldEnvironment.create(EnvCommon(name="alfworld"),
                                   ALFWorldOptions(data_dir=Path("nowhere")), tmp_path)
    game_file = next((data / "valid_seen").rglob("game.tw-pddl"))
    game_file.write_text(json.dumps({"grammar": "g", "pddl_domain": "d"}))
    with pytest.raises(DataError, match="game.tw-pddl: missing or empty pddl_problem"):
        ALFWorldEnvironment.create(EnvCommon(name="alfworld"), opts, tmp_path)
    game_file.write_text("{not json")
    with pytest.raises(DataError, match="game.tw-pddl: not a readable JSON file"):
        ALFWorldEnvironment.create(EnvCommon(name="alfworld"), opts, tmp_path)


# ----------------------------------------------------------------------------- listed games

SKILLOPT = Path(__file__).parent / "fixtures" / "skillopt" / "alfworld"
PATH_SPLIT = SKILLOPT / "alfworld_path_split"
ALFWORLD_DATA = SKILLOPT / "alfworld_data"
LISTED = EnvCommon(name="alfworld", split_mode="split_dir", split_dir=PATH_SPLIT)


def _items(split: str) -> list[dict[str, Any]]:
    return json.loads((PATH_SPLIT / split / "items.json").read_text())  # type: ignore[no-any-return]


def _path_split(folder: Path, change: dict[str, Any], at: int = 0) -> Path:
    """A copy of the fixture's path split with ``change`` applied to train record ``at``."""
    for split in SPLITS:
        items = _items(split)
        if split == "train":
            items[at] = {k: v for k, v in {**items[at], **change}.items() if v is not None}
        (folder / split).mkdir(parents=True)
        (folder / split / "items.json").write_text(json.dumps(items))
    return folder


def test_a_skillopt_path_split_over_alfworld_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALFWORLD_DATA", str(ALFWORLD_DATA))
    listed = ALFWorldEnvironment.create(LISTED, ALFWorldOptions(max_steps=50), Path("."))
    for split in SPLITS:
        tasks, items = listed.tasks(split), _items(split)  # type: ignore[arg-type]
        assert [t.id for t in tasks] == [i["id"] for i in items]
        assert [t.reference["task_type"] for t in tasks] == [i["task_type"] for i in items]
        assert [Path(t.reference["game_file"]) for t in tasks] == [
            ALFWORLD_DATA / i["gamefile"] for i in items]
    task = listed.tasks("train")[1]
    assert task.group == "FloorPlan228"
    assert task.prompt == "Your task is to: put some laptop on sidetable."  # from the grammar
    # env.data_dir names the same folder; without $ALFWORLD_DATA it is what is used.
    monkeypatch.delenv("ALFWORLD_DATA")
    named = ALFWorldEnvironment.create(LISTED, ALFWorldOptions(data_dir=ALFWORLD_DATA),
                                       Path("."))
    assert [t for s in SPLITS for t in named.tasks(s)] == [  # type: ignore[arg-type]
        t for s in SPLITS for t in listed.tasks(s)]  # type: ignore[arg-type]
    fewer = ALFWorldEnvironment.create(
        LISTED, ALFWorldOptions(data_dir=ALFWORLD_DATA, max_games=1, task_types=(
            "pick_and_place_simple", "pick_clean_then_place_in_recep",
            "pick_cool_then_place_in_recep")), Path("."))
    assert [t.id for s in SPLITS for t in fewer.tasks(s)] == [  # type: ignore[arg-type]
        "train:0001", "val:0000", "test:0000"]


def test_the_folder_scan_defaults_to_alfworld_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ALFWORLD_DATA", str(ALFWORLD_DATA))
    scanned = ALFWorldEnvironment.create(EnvCommon(name="alfworld"), ALFWorldOptions(),
                                         Path("."))
    listed = ALFWorldEnvironment.create(LISTED, ALFWorldOptions(), Path("."))
    for split in SPLITS:
        assert [t.reference for t in scanned.tasks(split)] == [  # type: ignore[arg-type]
            t.reference for t in listed.tasks(split)]  # type: ignore[arg-type]
    assert scanned.tasks("test")[0].id.startswith("valid_unseen/pick_cool_then_place_in_recep")


def test_a_listed_game_plays_to_a_win(tmp_path: Path) -> None:
    # Absolute game files need no data folder at all.
    items = {s: [{**i, "gamefile": str(ALFWORLD_DATA / i["gamefile"])} for i in _items(s)]
             for s in SPLITS}
    for split in SPLITS:
        (tmp_path / split).mkdir()
        (tmp_path / split / "items.json").write_text(json.dumps(items[split]))
    common = EnvCommon(name="alfworld", split_mode="split_dir", split_dir=Path("."))
    listed = ALFWorldEnvironment.create(common, ALFWorldOptions(max_steps=50), tmp_path)
    task = listed.tasks("test")[0]
    plan = task.reference["walkthrough"]
    assert len(plan) == 6 and task.reference["task_type"] == "pick_cool_then_place_in_recep"
    won = listed.rollout(task, listed.initial_skill(), ScriptedModel(plan))
    assert (won.hard, won.soft, won.turns, won.reason) == (1.0, 1.0, len(plan), "")
    lost = listed.rollout(task, listed.initial_skill(), ScriptedModel(plan[:-1], default="look"))
    assert lost.hard == 0.0 and "hit the step limit of 50 turns" in lost.reason


@pytest.mark.parametrize(
    ("change", "problem"),
    [({"gamefile": "json_2.1.1/train/x/trial_T1/game.tw-pddl"},
      r"items.json: record 2 \(id train:0001\): game file .*alfworld_data/json_2.1.1/train/x/"
      r"trial_T1/game.tw-pddl not found$"),
     ({"gamefile": None}, r"record 2 \(id train:0001\): missing or empty 'gamefile'"),
     ({"id": ""}, r"record 2: missing or empty 'id'"),
     ({"task_type": "pick_and_place"}, r"record 2: task_type 'pick_and_place'; expected one of"),
     ({"task_type": "look_at_obj_in_light"},
      r"record 2 \(id train:0001\): task_type 'look_at_obj_in_light', but .*traj_data.json says "
      r"'pick_and_place_simple'"),
     ({"gamefile": "$NO_SUCH_FOLDER_VAR/game.tw-pddl"}, "names an environment variable that is "
      "not set")],
)
def test_bad_listed_games_name_the_file_and_record(tmp_path: Path, change: dict[str, Any],
                                                   problem: str) -> None:
    folder = _path_split(tmp_path / "split", change, at=1)
    common = EnvCommon(name="alfworld", split_mode="split_dir", split_dir=folder)
    with pytest.raises(DataError, match=problem) as raised:
        ALFWorldEnvironment.create(common, ALFWorldOptions(data_dir=ALFWORLD_DATA), tmp_path)
    assert "\n" not in str(raised.value) and str(folder / "train" / "items.json") in str(
        raised.value)


def test_listed_game_files_that_cannot_be_played(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(ALFWORLD_DATA, data)
    common = EnvCommon(name="alfworld", split_mode="split_dir", split_dir=PATH_SPLIT)
    game_file = data / _items("val")[0]["gamefile"]
    game_file.write_text(json.dumps({**json.loads(game_file.read_text()), "solvable": False}))
    with pytest.raises(DataError, match=r"val/items.json: record 1 \(id val:0000\): .*game.tw-pddl "
                       "is not marked solvable"):
        ALFWorldEnvironment.create(common, ALFWorldOptions(data_dir=data), tmp_path)
    game_file.write_text("{not json")
    with pytest.raises(DataError, match=r"record 1 \(id val:0000\): .*game.tw-pddl: not a "
                       "readable JSON file"):
        ALFWorldEnvironment.create(common, ALFWorldOptions(data_dir=data), tmp_path)
    shutil.copy(ALFWORLD_DATA / _items("val")[0]["gamefile"], game_file)
    (game_file.parent / "traj_data.json").unlink()
    with pytest.raises(DataError, match=r"record 1 \(id val:0000\): .*traj_data.json: file not "
                       "found"):
        ALFWorldEnvironment.create(common, ALFWorldOptions(data_dir=data), tmp_path)


def test_alfworld_config_problems(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(ConfigError, match=r"record 1 \(id train:0000\): gamefile 'json_2.1.1/"
                       ".*' is relative; set env.data_dir or the ALFWORLD_DATA environment "
                       "variable to the folder holding json_2.1.1$"):
        ALFWorldEnvironment.create(LISTED, ALFWorldOptions(), tmp_path)
    with pytest.raises(ConfigError, match="env alfworld needs env.data_dir .* or the "
                       "ALFWORLD_DATA environment variable"):
        ALFWorldEnvironment.create(EnvCommon(name="alfworld"), ALFWorldOptions(), tmp_path)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "missing"))
    with pytest.raises(DataError, match=r"missing: ALFWorld data folder not found \(\$ALFWORLD_DATA\)"):
        ALFWorldEnvironment.create(LISTED, ALFWorldOptions(), tmp_path)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    with pytest.raises(DataError, match=r"json_2.1.1: ALFWorld data folder not found "
                       r"\(\$ALFWORLD_DATA/json_2.1.1\)"):
        ALFWorldEnvironment.create(EnvCommon(name="alfworld"), ALFWorldOptions(), tmp_path)
    with pytest.raises(ConfigError, match="env.test_split name json_2.1.1 folders and are not "
                       "used when env.split_mode is 'split_dir'"):
        ALFWorldEnvironment.create(LISTED, ALFWorldOptions(data_dir=ALFWORLD_DATA,
                                                           test_split="valid_unseen"), tmp_path)
    with pytest.raises(ConfigError, match="env.split_dir is used only when env.split_mode is "
                       "'split_dir'"):
        ALFWorldEnvironment.create(EnvCommon(name="alfworld", split_dir=PATH_SPLIT),
                                   ALFWorldOptions(data_dir=ALFWORLD_DATA), tmp_path)


# ----------------------------------------------------------------------------- a training run

ROUTE_RULE = ("Find the target object, take it, change it as the task says, then bring it to "
              "the destination.")
WALKTHROUGHS: dict[str, list[str]] = {}


def household_target(request: ChatRequest) -> str:
    """Idles ('look') unless the skill says how to proceed; then plays the reference route."""
    if ROUTE_RULE not in request.messages[0].text():
        return "look"
    intro = request.messages[1].text()
    goal = re.search(r"Your task is to: (.*?)\.\n", intro)
    assert goal is not None
    done = sum(m.role == "assistant" for m in request.messages)
    route = WALKTHROUGHS[goal.group(1)]
    return route[done] if done < len(route) else "look"


household_optimizer = rule_optimizer(ROUTE_RULE, support=1, cue="repeated 'look'")


def test_one_epoch_of_training_learns_to_act(tmp_path: Path, env: HouseholdEnvironment) -> None:
    WALKTHROUGHS.update({t.reference["goal"]: t.reference["walkthrough"]
                         for s in SPLITS for t in env.tasks(s)})  # type: ignore[arg-type]
    # Short games keep the run fast: these two task types take at most 5 commands.
    config = one_epoch({"name": "skillgrad.envs.household:HouseholdEnvironment", "max_steps": 5,
                        "task_types": ["pick_and_place_simple", "look_at_obj_in_light"]}, 1,
                       steps_per_epoch=1, eval_tasks=1)
    train_end_to_end(tmp_path, config, target="test_household:household_target",
                     optimizer="test_household:household_optimizer", rule=ROUTE_RULE)
