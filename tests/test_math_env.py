"""The math loader: MATH-format items, \\boxed{} answers, equivalence checking."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from e2e import one_epoch, rule_optimizer, train_end_to_end

from skillgrad.envs.base import EnvCommon
from skillgrad.envs.math.env import (
    MathEnvironment,
    MathOptions,
    equivalent,
    final_answer,
    last_boxed,
    parse_item,
)
from skillgrad.errors import DataError
from skillgrad.models.messages import ChatRequest
from skillgrad.models.scripted import ScriptedModel

FIXTURE = Path(__file__).parent / "fixtures" / "math" / "math_items.jsonl"
RULE = "Put the final answer in \\boxed{}."


def make_env() -> MathEnvironment:
    common = EnvCommon(name="math", split_ratio=(0.5, 0.25, 0.25))
    return MathEnvironment.create(common, MathOptions(data_path=FIXTURE), Path("."))


def test_items_load_with_the_gold_from_the_solution() -> None:
    env = make_env()
    tasks = {t.id: t for s in ("train", "val", "test") for t in env.tasks(s)}
    assert len(tasks) == 8
    assert tasks["fixture/1"].reference["answer"] == "\\frac{3}{4}"
    assert tasks["fixture/1"].metadata == {"level": "Level 1", "type": "Prealgebra"}


def test_boxed_extraction_balances_braces() -> None:
    assert last_boxed("x \\boxed{1} then \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    assert last_boxed("no box") is None
    assert last_boxed("\\boxed{unclosed") is None
    assert final_answer("Work.\nAnswer: 12") == "12"
    assert final_answer("Thus\n$7$") == "7"


def test_fbox_and_braceless_boxed_answers_as_in_the_math_data_set() -> None:
    assert last_boxed("so the area is $\\fbox{$12\\pi$}$.") == "$12\\pi$"
    assert last_boxed("The answer is $\\boxed 5$.") == "5"
    assert last_boxed("\\boxed 7.") == "7"
    assert last_boxed("\\boxedfoo and \\boxed .") is None
    task = parse_item({"problem": "p", "solution": "Hence $\\fbox{\\frac{1}{2}}$."}, "x")
    assert task.reference["answer"] == "\\frac{1}{2}"


@pytest.mark.parametrize(
    ("answer", "gold", "same"),
    [("0.75", "\\frac{3}{4}", True), ("\\frac34", "\\frac{3}{4}", True), ("3/4", "0.75", True),
     ("\\sqrt{4}", "2", True), ("5", "4", False), ("", "4", False), ("x+1", "1+x", True)],
)
def test_equivalence(answer: str, gold: str, same: bool) -> None:
    assert equivalent(answer, gold) is same


def test_equivalence_works_in_worker_threads() -> None:
    with ThreadPoolExecutor(2) as pool:
        assert list(pool.map(lambda a: equivalent(a, "\\frac{1}{2}"), ["0.5", "1/3"])) == [
            True, False]


def test_scores_and_reasons() -> None:
    env = make_env()
    task = next(t for s in ("train", "val", "test") for t in env.tasks(s) if t.id == "fixture/1")
    right = env.rollout(task, env.initial_skill(), ScriptedModel(["So \\boxed{0.75}"]))
    assert right.hard == right.soft == 1.0 and right.answer == "0.75"
    wrong = env.rollout(task, env.initial_skill(), ScriptedModel(["It is 1/2"]))
    assert wrong.hard == 0.0 and "not equivalent" in wrong.reason
    assert "no \\boxed{} answer" in wrong.reason


@pytest.mark.parametrize(
    ("item", "problem"),
    [({"solution": "\\boxed{1}"}, "missing 'problem'"),
     ({"problem": "p", "solution": "no box"}, "no gold answer")],
)
def test_bad_items_name_the_file_and_item(tmp_path: Path, item: dict[str, Any],
                                          problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(item) + "\n")
    common = EnvCommon(name="math", split_ratio=(0.5, 0.25, 0.25))
    with pytest.raises(DataError, match=f"bad.jsonl: line 1: {problem}"):
        MathEnvironment.create(common, MathOptions(data_path=path), tmp_path)


GOLD: dict[str, str] = {}


def math_target(request: ChatRequest) -> str:
    """Knows the answers; boxes them only when the skill asks."""
    answer = GOLD[request.messages[-1].text()]
    if RULE in request.messages[0].text():
        return f"Step by step.\n\\boxed{{{answer}}}"
    return f"Step by step, I get {answer} more or less.\nThat is all my work."


math_optimizer = rule_optimizer(RULE, support=3)


def test_one_epoch_of_training(tmp_path: Path) -> None:
    env = make_env()
    GOLD.update({t.prompt: t.reference["answer"] for s in ("train", "val", "test")
                 for t in env.tasks(s)})
    config = one_epoch({"name": "math", "data_path": str(FIXTURE),
                        "split_ratio": [0.5, 0.25, 0.25]}, 4)
    train_end_to_end(tmp_path, config, skill="# Math\n\nSolve the problem.\n",
                     target="test_math_env:math_target", optimizer="test_math_env:math_optimizer",
                     rule=RULE)


def test_the_bundled_champ_problems() -> None:
    env = MathEnvironment.create(EnvCommon(name="math"), MathOptions(), Path("."))
    sizes = [len(env.tasks(s)) for s in ("train", "val", "test")]
    assert sizes == [47, 16, 16]
    tasks = [t for s in ("train", "val", "test") for t in env.tasks(s)]
    assert all(t.reference["answer"].lstrip("-").isdigit() for t in tasks)
    assert len({t.id for t in tasks}) == 79
    assert {t.metadata["type"] for t in tasks} == {
        "Combinatorics", "Inequality", "Number-Theory", "Polynomial", "Sequence"}


def test_the_bundled_gsm_symbolic_problems_split_by_template() -> None:
    env = MathEnvironment.create(EnvCommon(name="math"), MathOptions(dataset="gsm_symbolic"),
                                 Path("."))
    sizes = [len(env.tasks(s)) for s in ("train", "val", "test")]
    assert sizes == [120, 39, 41]
    templates = {s: {t.group for t in env.tasks(s)} for s in ("train", "val", "test")}
    assert not (templates["train"] & templates["val"] or templates["train"] & templates["test"]
                or templates["val"] & templates["test"])
    task = env.tasks("test")[0]
    gold = task.reference["answer"]
    right = env.rollout(task, env.initial_skill(), ScriptedModel([f"So \\boxed{{{gold}}}"]))
    assert right.hard == 1.0
