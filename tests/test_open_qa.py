"""The open_qa environment: bundled real data, BM25 search tool, article splits, scoring with
reasons, bad data, and a short training run with scripted models."""

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
from skillgrad.envs.open_qa import OpenQAEnvironment, OpenQAOptions, load_squad
from skillgrad.errors import ConfigError, DataError
from skillgrad.models.messages import ChatRequest, Completion
from skillgrad.models.scripted import ScriptedModel

SEARCH_RULE = "Always search for the question's subject first, then answer from the result."


@pytest.fixture(scope="module")
def env() -> OpenQAEnvironment:
    return OpenQAEnvironment.create(EnvCommon(name="open_qa"), OpenQAOptions(), Path("."))


def test_bundled_data_counts_and_article_splits(env: OpenQAEnvironment) -> None:
    sizes = {s: len(env.tasks(s)) for s in ("train", "val", "test")}
    assert sizes == {"train": 192, "val": 64, "test": 64}
    articles = {s: {t.group for t in env.tasks(s)} for s in ("train", "val", "test")}
    assert not (articles["train"] & articles["val"] or articles["train"] & articles["test"]
                or articles["val"] & articles["test"])
    assert len(env.index.paragraphs) == 160  # search covers the whole corpus


def test_search_finds_the_gold_paragraph_for_most_questions(env: OpenQAEnvironment) -> None:
    tasks = env.tasks("test")
    found = sum(any(g.lower() in env._search(t.prompt[len("Question: "):]).lower()
                    for g in t.reference["answers"]) for t in tasks)
    assert found / len(tasks) > 0.8


def _oracle(env: OpenQAEnvironment) -> dict[str, list[str]]:
    return {t.prompt: t.reference["answers"] for s in ("train", "val", "test")
            for t in env.tasks(s)}


def test_a_searching_agent_is_right_and_a_guessing_one_wrong_with_reasons(
    env: OpenQAEnvironment,
) -> None:
    task = env.tasks("val")[0]
    gold = task.reference["answers"][0]
    question = task.prompt[len("Question: "):]
    model = ScriptedModel([f'ACTION: search {json.dumps({"query": question})}',
                           f"ANSWER: {gold}"])
    right = env.rollout(task, env.initial_skill(), model)
    assert right.hard == 1.0 and right.turns == 2
    assert right.metadata["searches"] == [question]
    assert any(m.text().startswith("OBSERVATION:") for m in right.messages)
    guess = env.rollout(task, env.initial_skill(), ScriptedModel(["ANSWER: Atlantis"]))
    assert guess.hard == 0.0 and "it never searched" in guess.reason and gold in guess.reason
    searched_wrong = env.rollout(task, env.initial_skill(), ScriptedModel(
        [f'ACTION: search {json.dumps({"query": question})}', "ANSWER: Atlantis"]))
    assert "the search results contained the gold answer" in searched_wrong.reason


def test_running_out_of_turns_is_a_scored_failure(env: OpenQAEnvironment) -> None:
    task = env.tasks("val")[1]
    model = ScriptedModel(default='ACTION: search {"query": "anything at all"}')
    result = env.rollout(task, env.initial_skill(), model)
    assert result.hard == 0.0 and result.turns == 4
    assert "no answer within 4 turns" in result.reason


def test_native_tool_mode(env: OpenQAEnvironment) -> None:
    task = env.tasks("test")[0]
    gold = task.reference["answers"][0]
    call = {"id": "c1", "type": "function",
            "function": {"name": "search", "arguments": json.dumps({"query": task.prompt})}}
    model = ScriptedModel([Completion(text="", tool_calls=[call]), Completion(text=gold)])
    native = OpenQAEnvironment(
        {s: env.tasks(s) for s in ("train", "val", "test")}, env.index,
        OpenQAOptions(tool_mode="native"))
    result = native.rollout(task, native.initial_skill(), model)
    assert result.hard == 1.0 and model.calls[0].tools is not None


@pytest.mark.parametrize(
    ("content", "problem"),
    [("{", "not a JSON file"), ('{"x": 1}', "not SQuAD format"),
     ('{"data": [{"title": "t"}]}', "article 0"),
     ('{"data": [{"title": "t", "paragraphs": []}]}', "no questions")],
)
def test_bad_data_names_the_file(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(DataError, match=f"bad.json: {problem}"):
        load_squad(path)


def test_missing_file_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nope.json: file not found"):
        OpenQAEnvironment.create(EnvCommon(name="open_qa"),
                                 OpenQAOptions(data_path=Path("nope.json")), tmp_path)


# ----------------------------------------------------------------------------- a training run

ORACLE: dict[str, list[str]] = {}


def open_qa_target(request: ChatRequest) -> str:
    """Searches only when the skill says so; answers with the gold found in the observation."""
    skill = request.messages[0].text()
    question = request.messages[1].text()
    if SEARCH_RULE not in skill:
        return "ANSWER: I am not sure"
    last = request.messages[-1]
    if last.role == "user" and last.text().startswith("OBSERVATION:"):
        golds = ORACLE[question]
        seen = [g for g in golds if g.lower() in last.text().lower()]
        return f"ANSWER: {seen[0] if seen else 'unknown'}"
    query = question[len("Question: "):]
    return f"ACTION: search {json.dumps({'query': query})}"


open_qa_optimizer = rule_optimizer(SEARCH_RULE, support=4, cue="it never searched")


def test_one_epoch_of_training_learns_to_search(tmp_path: Path, env: OpenQAEnvironment) -> None:
    ORACLE.update(_oracle(env))
    train_end_to_end(tmp_path, one_epoch({"name": "open_qa"}, 8, steps_per_epoch=2, eval_tasks=16),
                     target="test_open_qa:open_qa_target",
                     optimizer="test_open_qa:open_qa_optimizer", rule=SEARCH_RULE, best_above=0.6)


@pytest.mark.parametrize("backend", ["command", "handoff"])  # embedded calls tools
def test_native_tool_mode_with_a_target_without_tool_calling_is_refused(
        tmp_path: Path, backend: str) -> None:
    """The tools would never reach such a model: an error, not episodes without actions."""
    target: dict[str, Any] = {"backend": backend}
    if backend == "command":
        target["argv"] = ["agent"]

    def config(mode: str) -> Path:
        path = tmp_path / f"{mode}.yaml"
        path.write_text(yaml.safe_dump({"env": {"name": "open_qa", "tool_mode": mode},
                                        "model": {"target": target}}))
        return path

    with pytest.raises(ConfigError, match=f"env.tool_mode 'native' needs a target with native "
                       f"tool calling, but model.target.backend '{backend}' has none"):
        build_environment(load_config(config("native")))
    assert build_environment(load_config(config("text"))).tasks("test")


def test_native_tool_mode_with_a_scripted_target_builds(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({
        "env": {"name": "open_qa", "tool_mode": "native"},
        "model": {"target": {"backend": "scripted", "default": "x"}}}))
    assert build_environment(load_config(tmp_path / "c.yaml")).tasks("test")
