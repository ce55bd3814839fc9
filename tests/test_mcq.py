"""The mcq loader: LiveMathematicianBench-style multiple choice, seeded shuffles, label scoring."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e import one_epoch, rule_optimizer, train_end_to_end

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.envs.base import EnvCommon
from skillgrad.envs.mcq import LABELS, MCQEnvironment, MCQOptions, read_choice
from skillgrad.errors import DataError
from skillgrad.models.messages import ChatRequest
from skillgrad.models.scripted import ScriptedModel
from skillgrad.records import Task

FIXTURE = Path(__file__).parent / "fixtures" / "mcq" / "qa_2025-01_final.json"
RULE = "End with <answer>X</answer>, X being the letter of your choice."


def make_env(**options: Any) -> MCQEnvironment:
    common = EnvCommon(name="mcq", split_ratio=(0.5, 0.25, 0.25))
    return MCQEnvironment.create(common, MCQOptions(data_path=FIXTURE, **options), Path("."))


def all_tasks(env: MCQEnvironment) -> list[Task]:
    return [t for s in ("train", "val", "test") for t in env.tasks(s)]


def test_both_item_shapes_load_and_groups_stay_in_one_split() -> None:
    env = make_env()
    tasks = all_tasks(env)
    assert len(tasks) == 12
    by_split = {s: {t.group for t in env.tasks(s)} for s in ("train", "val", "test")}
    assert sum(len(g) for g in by_split.values()) == 4  # each of the 4 groups in one split
    for task in tasks:
        choices, correct = task.reference["choices"], task.reference["correct"]
        assert len(choices) == 4 and f"{LABELS[correct]}. {choices[correct]}" in task.prompt


def test_the_correct_text_survives_the_seeded_shuffle() -> None:
    source = json.loads(FIXTURE.read_text())
    truth = {}
    for raw in source:
        body = raw.get("mcq", raw)
        label = body["correct_choice"]
        label = label["label"] if isinstance(label, dict) else label
        truth[raw["id"]] = next(c["text"] for c in body["choices"] if c["label"] == label)
    shuffled, again, plain = make_env(), make_env(), make_env(shuffle_choices=False)
    positions = []
    for task in all_tasks(shuffled):
        assert task.reference["choices"][task.reference["correct"]] == truth[task.id]
        positions.append(task.reference["correct"])
    assert len(set(positions)) > 1
    assert [t.prompt for t in all_tasks(again)] == [t.prompt for t in all_tasks(shuffled)]
    assert any(a.prompt != b.prompt for a, b in zip(all_tasks(plain), all_tasks(shuffled),
                                                   strict=True))
    other_seed = make_env(choice_seed=1)
    assert [t.prompt for t in all_tasks(other_seed)] != [t.prompt for t in all_tasks(shuffled)]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [("Thinking...\n<answer>C</answer>", 2), ("Answer: (B)", 1), ("so the answer is\nD.", 3),
     ("Answer: 6", None), ("no idea", None), ("<answer>x^2</answer>", 1)],
)
def test_reading_the_choice(reply: str, expected: int | None) -> None:
    choices = ("3x^2", "x^2", "7", "0")
    assert read_choice(reply, choices) == expected


def test_scores_and_reasons() -> None:
    env = make_env()
    task = env.tasks("test")[0]
    correct = task.reference["correct"]
    wrong = (correct + 1) % 4
    right = env.rollout(task, env.initial_skill(),
                        ScriptedModel([f"<answer>{LABELS[correct]}</answer>"]))
    assert right.hard == right.soft == 1.0 and right.reason == ""
    miss = env.rollout(task, env.initial_skill(),
                       ScriptedModel([f"<answer>{LABELS[wrong]}</answer>"]))
    assert miss.hard == 0.0 and f"chose {LABELS[wrong]}" in miss.reason
    assert f"correct is {LABELS[correct]}" in miss.reason
    none = env.rollout(task, env.initial_skill(), ScriptedModel(["hmm"]))
    assert none.hard == 0.0 and "no choice label found" in none.reason


@pytest.mark.parametrize(
    ("item", "problem"),
    [({"id": "x", "choices": ["a", "b"], "correct_choice": "A"}, "missing 'question'"),
     ({"id": "x", "question": "q", "choices": ["a"], "correct_choice": "A"}, "two non-empty"),
     ({"id": "x", "question": "q", "choices": ["a", "b"], "correct_choice": "E"}, "not one of"),
     ({"id": "x", "question": "q", "choices": ["a", "b"]}, "missing 'correct_choice'"),
     ({"id": "x", "question": "q", "choices": 5, "correct_choice": "A"}, "'choices' must be")],
)
def test_bad_items_name_the_file_and_item(tmp_path: Path, item: dict[str, Any],
                                          problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([item]))
    common = EnvCommon(name="mcq", split_ratio=(0.5, 0.25, 0.25))
    with pytest.raises(DataError, match=f"bad.json: record 1: .*{problem}"):
        MCQEnvironment.create(common, MCQOptions(data_path=path), tmp_path)


def test_a_repeated_task_id_is_refused_when_the_environment_is_built(tmp_path: Path) -> None:
    items = json.loads(FIXTURE.read_text())
    first = items[0]
    path = tmp_path / "dup.json"
    path.write_text(json.dumps([first, {**items[1], "id": first["id"]}, *items[2:]]))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"env": {
        "name": "mcq", "data_path": str(path), "split_ratio": [0.5, 0.25, 0.25]}}))
    with pytest.raises(DataError, match=f"env mcq: task id '{first['id']}' is in the (train|val|"
                       "test) split and again in (train|val|test); task ids must be unique"):
        build_environment(load_config(tmp_path / "c.yaml"))


ANSWERS: dict[str, str] = {}


def mcq_target(request: ChatRequest) -> str:
    """Knows the right choice; writes it in the tagged form only if the skill asks for it."""
    prompt = request.messages[-1].text()
    label = ANSWERS[prompt]
    if RULE in request.messages[0].text():
        return f"Working.\n<answer>{label}</answer>"
    return f"I would go with option {label} after some thought, probably."


mcq_optimizer = rule_optimizer(RULE, support=3)


def test_one_epoch_of_training(tmp_path: Path) -> None:
    env = make_env()
    ANSWERS.update({t.prompt: LABELS[t.reference["correct"]] for t in all_tasks(env)})
    config = one_epoch({"name": "mcq", "data_path": str(FIXTURE),
                        "split_ratio": [0.5, 0.25, 0.25]}, 6)
    train_end_to_end(tmp_path, config, skill="# Multiple choice\n\nPick the correct choice.\n",
                     target="test_mcq:mcq_target", optimizer="test_mcq:mcq_optimizer", rule=RULE)


# ----------------------------------------------------------------------------- SkillOpt's split_dir

LIVEMATH = Path(__file__).parent / "fixtures" / "skillopt" / "livemathematicianbench"
LIVEMATH_SPLIT = LIVEMATH / "livemathematicianbench_split"
SPLIT_DIR = EnvCommon(name="mcq", split_mode="split_dir", split_dir=LIVEMATH_SPLIT)


def _livemath(split: str) -> list[dict[str, Any]]:
    return json.loads((LIVEMATH_SPLIT / split / "items.json").read_text())  # type: ignore[no-any-return]


def test_a_skillopt_livemath_split_is_read_as_is() -> None:
    env = MCQEnvironment.create(SPLIT_DIR, MCQOptions(shuffle_choices=True), Path("."))
    for split in ("train", "val", "test"):
        items = {i["id"]: i for i in _livemath(split)}
        tasks = env.tasks(split)  # type: ignore[arg-type]
        assert [t.id for t in tasks] == list(items)
        for task in tasks:
            item = items[task.id]
            assert task.reference["choices"][task.reference["correct"]] == (
                item["correct_choice"]["text"])
            assert sorted(task.reference["choices"]) == sorted(c["text"] for c in item["choices"])
            assert task.prompt.startswith(item["question"] + "\n\nChoices:\nA. ")
            # Reference material stays hidden unless asked for.
            assert item["theorem"] not in task.prompt and "## " not in task.prompt
    shown = [t.reference["choices"] for t in all_tasks(env)]
    assert shown != [[c["text"] for c in i["choices"]]
                     for s in ("train", "val", "test") for i in _livemath(s)]
    task = env.tasks("test")[1]
    right = LABELS[task.reference["correct"]]
    won = env.rollout(task, env.initial_skill(), ScriptedModel([f"<answer>{right}</answer>"]))
    assert won.hard == 1.0 and won.reason == ""


@pytest.mark.parametrize(
    ("options", "sections"),
    [({"use_theorem": True}, ["Theorem"]), ({"use_sketch": True}, ["Proof Sketch"]),
     ({"use_theorem": True, "use_sketch": True}, ["Theorem", "Proof Sketch"])],
)
def test_theorem_and_sketch_are_appended_when_asked(options: dict[str, bool],
                                                    sections: list[str]) -> None:
    plain = MCQEnvironment.create(SPLIT_DIR, MCQOptions(), Path("."))
    shown = MCQEnvironment.create(SPLIT_DIR, MCQOptions(**options), Path("."))
    items = {i["id"]: i for s in ("train", "val", "test") for i in _livemath(s)}
    key = {"Theorem": "theorem", "Proof Sketch": "sketch"}
    for before, after in zip(all_tasks(plain), all_tasks(shown), strict=True):
        extra = "".join(f"\n\n## {h}\n{items[after.id][key[h]]}" for h in sections)
        assert after.prompt == before.prompt + extra
        assert after.reference == before.reference


@pytest.mark.parametrize("option", ["use_theorem", "use_sketch"])
def test_a_missing_theorem_or_sketch_is_refused_when_asked_for(tmp_path: Path,
                                                               option: str) -> None:
    key = {"use_theorem": "theorem", "use_sketch": "sketch"}[option]
    for split in ("train", "val", "test"):
        items = _livemath(split)
        if split == "val":
            items[1][key] = "  "
        (tmp_path / split).mkdir()
        (tmp_path / split / "items.json").write_text(json.dumps(items))
    common = EnvCommon(name="mcq", split_mode="split_dir", split_dir=tmp_path)
    MCQEnvironment.create(common, MCQOptions(), tmp_path)  # not asked for: fine
    with pytest.raises(DataError, match=rf"val/items.json: record 2: env.{option} is on but the "
                       rf"item has no '{key}' text$"):
        MCQEnvironment.create(common, MCQOptions(**{option: True}), tmp_path)


def test_the_reference_options_through_a_config(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"env": {
        "name": "mcq", "split_mode": "split_dir", "split_dir": str(LIVEMATH_SPLIT),
        "shuffle_choices": True, "use_theorem": False, "use_sketch": True}}))
    env = build_environment(load_config(tmp_path / "c.yaml"))
    task = env.tasks("train")[0]
    assert "\n\n## Proof Sketch\n" in task.prompt and "## Theorem" not in task.prompt
