"""The searchqa loader: SearchQA's materialised layout as single-turn QA over its snippets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from e2e import one_epoch, rule_optimizer, train_end_to_end

from skillgrad.envs.base import EnvCommon
from skillgrad.envs.qa.searchqa import SearchQAEnvironment, SearchQAOptions, snippets
from skillgrad.errors import DataError
from skillgrad.models.messages import ChatRequest

FIXTURE = Path(__file__).parent / "fixtures" / "searchqa"
RULE = "Reply with the answer words only, copied from the snippets."


def make_env(folder: Path = FIXTURE) -> SearchQAEnvironment:
    common = EnvCommon(name="searchqa", split_mode="split_dir", split_dir=folder)
    return SearchQAEnvironment.create(common, SearchQAOptions(), Path("."))


def test_the_published_layout_loads_with_readable_snippets() -> None:
    env = make_env()
    assert [len(env.tasks(s)) for s in ("train", "val", "test")] == [4, 2, 2]
    task = env.tasks("train")[0]
    assert task.reference["answers"] == ["Ithmoor River", "Ithmoor"]
    assert "- Kormarsh: Kormarsh is a market town on the Ithmoor River." in task.prompt
    assert "[DOC]" not in task.prompt and "[PAR]" not in task.prompt
    assert task.prompt.rstrip().endswith("Question: This river flows through the town of "
                                         "Kormarsh")


def test_snippets_without_markers_are_kept() -> None:
    assert snippets("  plain text ") == "plain text"
    assert snippets("[DOC] no title here") == "- no title here"


@pytest.mark.parametrize(
    ("item", "problem"),
    [({"id": "x", "question": "q", "context": "c", "answer": "a"}, "missing key 'answers' "
      "(found 'answer'"),
     ({"id": "x", "question": "q", "context": None, "answers": ["a"]}, "key 'context'"),
     ({"id": "x", "question": "", "context": "c", "answers": ["a"]}, "key 'question'"),
     ({"id": "x", "question": "q", "context": "c", "answers": []}, "key 'answer'")],
)
def test_bad_items_name_the_file_and_item(tmp_path: Path, item: dict[str, Any],
                                          problem: str) -> None:
    folder = tmp_path / "sq"
    shutil.copytree(FIXTURE, folder)
    (folder / "val" / "items.json").write_text(json.dumps([item]))
    with pytest.raises(DataError, match=r"val/items.json: record 1: " + problem.replace("(", r"\(")):
        make_env(folder)


def test_an_empty_split_is_an_error(tmp_path: Path) -> None:
    folder = tmp_path / "sq"
    shutil.copytree(FIXTURE, folder)
    (folder / "test" / "items.json").write_text("[]")
    with pytest.raises(DataError, match="test"):
        make_env(folder)


def searchqa_target(request: ChatRequest) -> str:
    """Finds the answer in the snippets; phrases it as a sentence unless the skill says not to."""
    prompt = request.messages[-1].text()
    question = prompt.rsplit("Question:", 1)[1].strip()
    answers = {t.prompt.rsplit("Question:", 1)[1].strip(): t.reference["answers"][0]
               for s in ("train", "val", "test") for t in make_env().tasks(s)}
    answer = answers[question]
    return answer if RULE in request.messages[0].text() else f"I believe it is {answer}."


searchqa_optimizer = rule_optimizer(RULE, support=2)


def test_one_epoch_of_training(tmp_path: Path) -> None:
    config = one_epoch({"name": "searchqa", "split_mode": "split_dir",
                        "split_dir": str(FIXTURE)}, 4)
    train_end_to_end(tmp_path, config, target="test_searchqa:searchqa_target",
                     optimizer="test_searchqa:searchqa_optimizer", rule=RULE)
