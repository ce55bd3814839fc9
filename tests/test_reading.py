"""The reading environment: SQuAD paragraphs as context, article splits and their sizes, the
prompt layout, scoring with reasons, config checks, and a short training run with scripted
models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from e2e import one_epoch, rule_optimizer, train_end_to_end

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.envs.base import SPLITS, EnvCommon
from skillgrad.envs.data import package_file
from skillgrad.envs.reading import ReadingEnvironment, ReadingOptions, load_reading, spread
from skillgrad.errors import ConfigError, DataError
from skillgrad.models.messages import ChatRequest, Completion
from skillgrad.models.scripted import ScriptedModel
from skillgrad.records import Task
from skillgrad.registry import environment_names

# The class by path: found whether or not the installed metadata lists the entry point yet.
NAME = "skillgrad.envs.reading:ReadingEnvironment"
BUNDLED = package_file("skillgrad.envs.open_qa", "data", "squad_subset.json")
RULE = "Reply with the shortest phrase of the context that answers, and nothing else."


def make_env(ratio: tuple[float, float, float] = (0.6, 0.2, 0.2), **options: object
             ) -> ReadingEnvironment:
    return ReadingEnvironment.create(EnvCommon(name="reading", split_ratio=ratio),
                                     ReadingOptions(**options), Path("."))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def env() -> ReadingEnvironment:
    return make_env()


def articles(env: ReadingEnvironment) -> dict[str, set[str | None]]:
    return {s: {t.group for t in env.tasks(s)} for s in SPLITS}


def paragraph(task: Task) -> str:
    return task.prompt.rpartition("\n\nQuestion: ")[0]


# ----------------------------------------------------------------------------- data and splits


def test_bundled_data_is_split_by_article(env: ReadingEnvironment) -> None:
    assert {s: len(env.tasks(s)) for s in SPLITS} == {"train": 192, "val": 64, "test": 64}
    groups = articles(env)
    assert [len(groups[s]) for s in SPLITS] == [12, 4, 4]
    assert not (groups["train"] & groups["val"] or groups["train"] & groups["test"]
                or groups["val"] & groups["test"])
    ids = [t.id for s in SPLITS for t in env.tasks(s)]
    assert len(ids) == len(set(ids)) == 320


def test_caps_give_benchmark_sizes_over_many_articles_and_paragraphs() -> None:
    env = make_env((0.5, 0.2, 0.3), max_train=30, max_val=20, max_test=60)
    assert {s: len(env.tasks(s)) for s in SPLITS} == {"train": 30, "val": 20, "test": 60}
    groups = articles(env)
    assert [len(groups[s]) for s in SPLITS] == [10, 4, 6]  # every article of its split
    assert not (groups["train"] & groups["val"] or groups["train"] & groups["test"]
                or groups["val"] & groups["test"])
    train = env.tasks("train")
    assert len({paragraph(t) for t in train}) == 30  # 30 paragraphs
    # a prefix (evaluation.test_env_num) keeps the articles too
    assert len({t.group for t in env.tasks("test")[:6]}) == 6


def test_tiny_splits_and_questions_per_article() -> None:
    tiny = make_env(max_train=4, max_val=2, max_test=2)
    assert [len(tiny.tasks(s)) for s in SPLITS] == [4, 2, 2]
    two = make_env(questions_per_article=2)
    assert [len(two.tasks(s)) for s in SPLITS] == [24, 8, 8]
    for split in SPLITS:  # one question from each of two paragraphs of every article
        tasks = two.tasks(split)
        for article in {t.group for t in tasks}:
            mine = [t for t in tasks if t.group == article]
            assert len(mine) == 2 and paragraph(mine[0]) != paragraph(mine[1])


def test_ids_are_the_squad_ids_and_stable(env: ReadingEnvironment) -> None:
    again = make_env()
    assert [t.id for t in env.tasks("test")] == [t.id for t in again.tasks("test")]
    assert all(len(t.id) == 24 for s in SPLITS for t in env.tasks(s))  # SQuAD's hex ids


def test_a_different_seed_moves_articles_but_never_splits_one() -> None:
    other = ReadingEnvironment.create(EnvCommon(name="reading", split_seed=3), ReadingOptions(),
                                      Path("."))
    groups = articles(other)
    assert groups != articles(make_env())
    assert not (groups["train"] & groups["test"])


def test_spread_takes_each_key_in_turn() -> None:
    assert spread(["a1", "a2", "a3", "b1", "c1", "c2"], lambda s: s[0]) == [
        "a1", "b1", "c1", "a2", "c2", "a3"]
    assert spread([], lambda s: s) == []


def test_a_user_file_and_its_errors(tmp_path: Path) -> None:
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"data": [
        {"title": f"Article_{k}", "paragraphs": [
            {"context": f"Paragraph {k} says the colour is blue.",
             "qas": [{"id": f"q{k}", "question": "What colour?", "answers": [{"text": "blue"}]}]}]}
        for k in range(5)]}))
    env = ReadingEnvironment.create(EnvCommon(name="reading"),
                                    ReadingOptions(data_path=Path("mine.json")), tmp_path)
    assert sorted(t.id for s in SPLITS for t in env.tasks(s)) == [f"q{k}" for k in range(5)]
    assert {t.group for s in SPLITS for t in env.tasks(s)} == {f"Article {k}" for k in range(5)}
    records = load_reading(path)
    assert records[0].context == "Paragraph 0 says the colour is blue."
    twice = json.loads(path.read_text())
    twice["data"][1]["paragraphs"][0]["qas"][0]["id"] = "q0"
    path.write_text(json.dumps(twice))
    with pytest.raises(DataError, match="article 'Article 1', question 'q0': id 'q0' is used "
                       "twice"):
        ReadingEnvironment.create(EnvCommon(name="reading"), ReadingOptions(data_path=path),
                                  tmp_path)
    with pytest.raises(DataError, match="nope.json: file not found"):
        ReadingEnvironment.create(EnvCommon(name="reading"),
                                  ReadingOptions(data_path=Path("nope.json")), tmp_path)


# ----------------------------------------------------------------------------- prompt, scoring


def test_the_skill_is_the_system_message_and_the_user_holds_paragraph_then_question(
        env: ReadingEnvironment) -> None:
    task = env.tasks("test")[0]
    model = ScriptedModel(["x"])
    env.rollout(task, "MY SKILL", model)
    system, user = model.calls[0].messages
    assert system.role == "system" and system.text() == "MY SKILL"
    record = next(r for r in load_reading(BUNDLED) if r.id == task.id)
    assert user.role == "user"
    assert user.text() == f"Context:\n{record.context}\n\nQuestion: {record.question}"
    assert env.initial_skill().strip().endswith("Answer the question using the context.")
    assert "short" not in env.initial_skill().lower()


BLACK_DEATH = Task(
    id="q", group="Black Death",
    prompt="Context:\nThe Black Death is thought to have originated in the arid plains of "
           "Central Asia, where it then travelled along the Silk Road.\n\n"
           "Question: Where did the black death originate?",
    reference={"answers": ["the arid plains of Central Asia", "Central Asia"]})


@pytest.mark.parametrize(("reply", "hard", "reason"), [
    ("Central Asia", 1.0, ""),
    ("Answer: **the arid plains of Central Asia.**", 1.0, ""),
    ("Atlantis", 0.0, "answer 'Atlantis' does not match gold 'the arid plains of Central Asia' "
                      "or 'Central Asia'; unlike the gold answer, it is not a phrase of the "
                      "context"),
    ("the Silk Road", 0.0, "it is a phrase of the context"),
    ("The Black Death originated in the arid plains of Central Asia.", 0.0,
     "it contains the gold answer plus extra words, and scoring is exact match, so only the "
     "answer alone counts (token F1 0.71); unlike the gold answer, it is not a phrase of the "
     "context"),
    ("originated in the arid plains of Central Asia", 0.0,
     "plus extra words, and scoring is exact match, so only the answer alone counts (token F1 "
     "0.83); it is a phrase of the context"),
    ("", 0.0, "empty answer; gold is 'the arid plains of Central Asia' or 'Central Asia'"),
])
def test_right_wrong_and_wordy_answers_with_reasons(env: ReadingEnvironment, reply: str,
                                                    hard: float, reason: str) -> None:
    result = env.rollout(BLACK_DEATH, "skill", ScriptedModel([reply]))
    assert result.hard == hard
    assert reason in result.reason if reason else result.reason == ""
    assert result.soft == 1.0 if hard else 0.0 <= result.soft < 1.0
    assert result.turns == 1 and [m.role for m in result.messages] == [
        "system", "user", "assistant"]


def test_a_cut_off_reply_says_so(env: ReadingEnvironment) -> None:
    result = env.rollout(BLACK_DEATH, "skill", ScriptedModel(
        [Completion(text="It began in the arid", finish_reason="length")]))
    assert result.hard == 0.0 and "cut off at the token limit (max_tokens=64)" in result.reason


# ----------------------------------------------------------------------------- config


def write_config(folder: Path, env: dict[str, object]) -> Path:
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump({"env": env, "model": {
        "target": {"backend": "scripted", "default": "x"},
        "optimizer": {"backend": "scripted", "default": "x"}}}))
    return path


def test_unknown_env_key_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="env.max_turns") as caught:
        build_environment(load_config(write_config(tmp_path, {"name": NAME, "max_turns": 2})))
    assert "questions_per_article" in str(caught.value) and "max_test" in str(caught.value)


def test_bad_sizes_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="env.max_val"):
        load_config(write_config(tmp_path, {"name": NAME, "max_val": 0}))


def test_the_example_config_loads(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "examples" / "reading" / "config.yaml"
    config = yaml.safe_load(example.read_text())
    config["env"]["name"] = NAME
    config["model"] = {"target": {"backend": "scripted", "default": "x"},
                       "optimizer": {"backend": "scripted", "default": "x"}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    env = build_environment(load_config(tmp_path / "config.yaml"))
    assert [len(env.tasks(s)) for s in SPLITS] == [24, 12, 30]


@pytest.mark.skipif("reading" not in environment_names(),
                    reason="the installed metadata predates the entry point (pip install -e .)")
def test_the_name_reading_is_registered(tmp_path: Path) -> None:
    env = build_environment(load_config(write_config(tmp_path, {"name": "reading",
                                                                "max_test": 3})))
    assert isinstance(env, ReadingEnvironment) and len(env.tasks("test")) == 3


# ----------------------------------------------------------------------------- a training run

ORACLE: dict[str, str] = {}


def reading_target(request: ChatRequest) -> str:
    """Knows every gold answer; says it in a sentence until the skill holds the rule."""
    gold = ORACLE[request.messages[1].text()]
    if RULE in request.messages[0].text():
        return gold
    return f"According to the context, the answer is {gold}."


reading_optimizer = rule_optimizer(RULE, support=3, cue="plus extra words")


def test_one_epoch_of_training_learns_to_answer_with_the_phrase_alone(tmp_path: Path) -> None:
    sizes = {"max_train": 12, "max_val": 4, "max_test": 6}
    ORACLE.update({t.prompt: t.reference["answers"][0] for s in SPLITS
                   for t in make_env(**sizes).tasks(s)})  # type: ignore[arg-type]
    summary = train_end_to_end(tmp_path, one_epoch({"name": NAME, **sizes}, 6, steps_per_epoch=2),
                               target="test_reading:reading_target",
                               optimizer="test_reading:reading_optimizer", rule=RULE)
    assert summary["test"]["best"]["soft"] == 1.0
