"""The Python API: Trainer.from_config / run_epoch / metrics / best_skill / export, train(),
and optimize() over tasks held in memory with scripted models."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toy
from conftest import toy_config, toy_config_full

import skillgrad
from skillgrad import ScriptedModel, SkillgradError, Trainer, load_config, optimize, train
from skillgrad.envs.memory import hash_split, to_tasks
from skillgrad.errors import ConfigError, DataError, RunDirError
from skillgrad.models.messages import ChatRequest, Completion
from skillgrad.rundir import read_jsonl
from skillgrad.testing import scripted_optimizer
from skillgrad.trainer import build_trainer

ROOT = Path(__file__).resolve().parents[1]
# Every mechanism of the loop that works between epochs (slow update, meta skill), over three
# epochs of two steps: what run_epoch must sequence exactly as fit() does.
EPOCHS = ["train.num_epochs=3", "train.steps_per_epoch=2", "train.batch_size=6",
          "optimizer.use_slow_update=true", "optimizer.use_meta_skill=true",
          "optimizer.slow_update_samples=6"]


def comparable(out: Path) -> dict[str, Any]:
    """What two runs that trained alike share: skills, scores, decisions, model usage."""
    summary = json.loads((out / "summary.json").read_text())
    state = json.loads((out / "checkpoint.json").read_text())
    history = [{k: v for k, v in r.items() if k != "seconds"} for r in state["history"]]
    updates = [{k: v for k, v in u.items() if k != "seconds"} for u in state["epoch_updates"]]
    calls = {role: u["calls"] for role, u in summary["models"].items()}
    return {"best": (out / "best_skill.md").read_text(), "test": summary["test"],
            "selection": summary["selection"], "history": history, "scores": state["scores"],
            "updates": updates, "meta": state["meta_skill"], "calls": calls}


# ----------------------------------------------------------------------------- from a config


@pytest.mark.parametrize("overrides", [(), tuple(EPOCHS)], ids=["steps", "epoch_mechanisms"])
def test_run_epoch_trains_to_what_fit_reaches(toy_dir: Path, tmp_path: Path,
                                              overrides: tuple[str, ...]) -> None:
    cfg = toy_config_full(toy_dir)
    fitted = Trainer.from_config(cfg, overrides, out=tmp_path / "fit")
    summary = fitted.fit()

    trainer = Trainer.from_config(cfg, overrides, out=tmp_path / "epochs")
    epochs = []
    while records := trainer.run_epoch():
        epochs.append([(r.epoch, r.step) for r in records])
    n_epochs, n_steps = summary["epochs"], summary["steps"] // summary["epochs"]
    assert epochs == [[(e, s) for s in range(1, n_steps + 1)] for e in range(1, n_epochs + 1)]
    assert comparable(tmp_path / "epochs") == comparable(tmp_path / "fit")
    if overrides:
        assert len(comparable(tmp_path / "fit")["updates"]) == 2  # before epochs 2 and 3
    assert trainer.best_skill == fitted.best_skill == (tmp_path / "fit" / "best_skill.md").read_text()
    assert trainer.metrics == fitted.metrics
    assert trainer.run_epoch() == []  # done: nothing more to train


class Dying(BaseException):
    """Stands for the process dying mid-step: nothing in the library may catch it."""


class DiesAt:
    """Wraps a model; dies before the ``at``-th call over all wrapped models."""

    def __init__(self, inner: Any, count: list[int], at: int) -> None:
        self.inner, self.count, self.at = inner, count, at

    def complete(self, request: ChatRequest) -> Completion:
        if self.count[0] + 1 >= self.at:
            raise Dying()
        self.count[0] += 1
        return self.inner.complete(request)  # type: ignore[no-any-return]


def test_run_epoch_resumes_a_run_stopped_inside_an_epoch(toy_dir: Path, tmp_path: Path) -> None:
    cfg = toy_config_full(toy_dir)
    Trainer.from_config(cfg, EPOCHS, out=tmp_path / "fit").fit()
    # Calls from the end of epoch 1 to the middle of epoch 2's second step.
    n = {scope: len(read_jsonl(tmp_path / "fit" / scope / "calls.jsonl"))
         for scope in ("epochs/e02", "steps/e02-s001", "steps/e02-s002")}
    first = Trainer.from_config(cfg, EPOCHS, out=tmp_path / "run")
    assert [r.global_step for r in first.run_epoch()] == [1, 2]
    count = [0]
    at = n["epochs/e02"] + n["steps/e02-s001"] + n["steps/e02-s002"] // 2
    first.target.model = DiesAt(first.target.model, count, at)
    first.optimizer.model = DiesAt(first.optimizer.model, count, at)
    with pytest.raises(Dying):
        first.run_epoch()
    state = json.loads((tmp_path / "run" / "checkpoint.json").read_text())
    assert (state["epoch"], state["step"], state["global_step"]) == (2, 1, 3)

    again = Trainer.from_config(cfg, EPOCHS, out=tmp_path / "run")
    assert [r.global_step for r in again.run_epoch()] == [4]  # the rest of epoch 2
    assert [r.global_step for r in again.run_epoch()] == [5, 6]
    assert comparable(tmp_path / "run") == comparable(tmp_path / "fit")


def test_metrics_and_best_skill_before_during_and_after(toy_dir: Path, tmp_path: Path) -> None:
    cfg = toy_config(toy_dir)
    trainer = Trainer.from_config(cfg, out=tmp_path / "run")
    assert trainer.best_skill == toy.INITIAL_SKILL  # what training would start from
    assert trainer.metrics["steps"] == [] and trainer.metrics["test"] is None

    trainer.run_epoch()
    during = trainer.metrics
    assert [s["decision"] for s in during["steps"]][0] == "reject"
    assert during["selection"]["initial"] < during["selection"]["best"]
    assert during["done"] is False and during["test"] is None
    assert during["best_step"] == max(s["global_step"] for s in during["steps"]
                                      if s["decision"] == "accept_new_best")

    summary = trainer.fit()
    after = trainer.metrics
    assert after["done"] is True
    assert after["test"] == summary["test"]
    assert {k: after["selection"][k] for k in ("initial", "best")} == {
        k: summary["selection"][k] for k in ("initial", "best")}
    assert after["selection"]["current"] == summary["selection"]["final"]
    assert len(after["steps"]) == summary["steps"]
    json.dumps(after)  # plain data
    # A trainer that has not run reads the same from the run directory's checkpoint.
    reread = Trainer.from_config(cfg, out=tmp_path / "run")
    assert reread.metrics == after
    assert reread.best_skill == (tmp_path / "run" / "best_skill.md").read_text()
    for topic in ("year", "city", "animal"):
        assert toy.rule(topic) in reread.best_skill
    other = Trainer.from_config(cfg, ["train.seed=8"], out=tmp_path / "run")
    with pytest.raises(RunDirError, match="different config"):
        other.metrics  # noqa: B018


def test_export_writes_the_best_skill(toy_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("skillgrad.export")
    trainer = Trainer.from_config(toy_config(toy_dir), out=tmp_path / "toy-run")
    trainer.fit()
    path = trainer.export(out=tmp_path / "skills")
    assert path == tmp_path / "skills" / "toy-run" / "SKILL.md"
    text = path.read_text()
    assert text.startswith("---\nname: toy-run\ndescription: ")
    assert toy.rule("city") in text
    named = trainer.export(out=tmp_path / "skills", name="toy", description="Answers toys.")
    assert "description: Answers toys." in named.read_text()


def test_train_and_the_top_level_names(toy_dir: Path, tmp_path: Path) -> None:
    cfg = toy_config(toy_dir)
    summary = train(cfg, out=tmp_path / "a", overrides=["train.num_epochs=1"])
    expected = build_trainer(load_config(cfg, ["train.num_epochs=1"]), tmp_path / "b").fit()
    assert summary["test"] == expected["test"] and summary["steps"] == 3
    for name in ("Trainer", "load_config", "optimize", "train", "OptimizeResult",
                 "MemoryEnvironment"):
        assert name in skillgrad.__all__ and getattr(skillgrad, name).__doc__


# ----------------------------------------------------------------------------- optimize

RULE = "Reply with the number alone: no words around it."
SKILL = "# Adding\n\nAdd the two numbers of the question.\n"


def adder(request: ChatRequest) -> str:
    """The target: adds right, but in a sentence until the skill says otherwise."""
    a, b = (int(n) for n in re.findall(r"\d+", request.messages[-1].text()))
    return str(a + b) if "number alone" in request.messages[0].text() else f"The sum is {a + b}."


def analyst(skill: str, failed: str, prompt: str) -> dict[str, Any]:
    """Proposes the rule only when the metric's feedback is in what it was shown."""
    seen = failed.count("wants the bare number")
    if not seen or RULE in skill:
        return {"reasoning": "nothing to fix", "edits": []}
    return {"reasoning": "sentences", "edits": [
        {"op": "append", "anchor": "", "content": RULE, "support": seen, "rationale": "r"}]}


def sums(n: int, offset: int = 0) -> list[dict[str, Any]]:
    return [{"input": f"What is {i} + {i + 3}?", "answer": str(2 * i + 3), "id": f"q{i}",
             "note": "kept for the metric"} for i in range(offset, offset + n)]


def models() -> dict[str, ScriptedModel]:
    return {"target": ScriptedModel(fn=adder),
            "optimizer": ScriptedModel(fn=scripted_optimizer(analyst))}


def test_optimize_learns_from_the_metrics_feedback(tmp_path: Path) -> None:
    seen: list[Any] = []

    def metric(answer: str, task: dict[str, Any]) -> tuple[float, str]:
        seen.append(task)
        if answer == task["answer"]:
            return 1.0, "right"
        return 0.0, f"the checker wants the bare number, got {len(answer)} characters"

    trainset, testset = sums(24), sums(8, offset=100)
    result = optimize(trainset, testset=testset, metric=metric, initial_skill=SKILL,
                      out=tmp_path / "run", train={"num_epochs": 1, "batch_size": 8},
                      **models())
    assert RULE in result.best_skill and result.best_skill.startswith(SKILL.rstrip())
    assert result.run_dir == tmp_path / "run"
    assert (result.run_dir / "best_skill.md").read_text() == result.best_skill
    assert result.summary["test"]["initial"]["hard"] == 0.0
    assert result.summary["test"]["best"] == {"hard": 1.0, "soft": 1.0, "n": 8}
    assert result.summary["gate"]["test"] == "bootstrap"  # the default gate, unchanged
    assert all(any(task is t for t in trainset + testset) for task in seen)  # as given
    step = result.run_dir / "steps" / "e01-s001"
    prompts = [c["request"]["messages"][0]["content"] for c in read_jsonl(step / "calls.jsonl")
               if c["stage"] == "reflect"]
    assert any("Result: FAILED: the checker wants the bare number, got 14 characters" in p
               for p in prompts)
    rollouts = read_jsonl(step / "rollouts.jsonl")
    assert rollouts and all(
        r["reason"] == f"the checker wants the bare number, got {len(r['answer'])} characters"
        for r in rollouts)
    tested = [r for folder in (result.run_dir / "evals").glob("test-*")
              for r in read_jsonl(folder / "rollouts.jsonl")]
    assert {(r["hard"], r["reason"]) for r in tested if r["hard"] == 1} == {(1.0, "")}

    again = models()
    resumed = optimize(trainset, testset=testset, metric=metric, initial_skill=SKILL,
                       out=tmp_path / "run", train={"num_epochs": 1, "batch_size": 8}, **again)
    assert resumed == result and not again["target"].calls  # finished: nothing re-run
    with pytest.raises(RunDirError, match=r"optimize\(out='.*run'\): that folder holds a run "
                       r"made with other tasks or another initial_skill; give another out="):
        optimize(sums(23), testset=testset, metric=metric, initial_skill=SKILL,
                 out=tmp_path / "run", train={"num_epochs": 1, "batch_size": 8}, **models())

    def stricter(answer: str, task: dict[str, Any]) -> float:  # another metric: not the run's
        return float(answer.strip() == str(task["answer"]))

    with pytest.raises(RunDirError, match="made with another metric; give another out="):
        optimize(trainset, testset=testset, metric=stricter, initial_skill=SKILL,
                 out=tmp_path / "run", train={"num_epochs": 1, "batch_size": 8}, **models())


def test_optimize_says_what_it_does_and_returns_typed_figures(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    def metric(answer: str, task: dict[str, Any]) -> float:
        return float(answer == task["answer"])

    trainset, testset = sums(24), sums(8, offset=100)
    with caplog.at_level(logging.INFO, logger="skillgrad"):
        result = optimize(trainset, testset=testset, metric=metric, initial_skill=SKILL,
                          out=tmp_path / "run", train={"num_epochs": 1, "batch_size": 8},
                          **models())
    said = capsys.readouterr().err.splitlines()
    steps = [line for line in said if line.startswith("skillgrad: step ")]
    assert len(steps) == result.summary["steps"] and "selection" in steps[0]
    end = "done: test " + ", ".join(f"{k} {v:.3f}" for k, v in result.test.items())
    assert said[-1] == f"skillgrad: {end}" and set(result.test) == {"initial", "best", "final"}
    assert [r.getMessage() for r in caplog.records if r.name == "skillgrad"][-1] == end
    assert sum(result.decisions.values()) == result.summary["steps"]
    assert set(result.usage) >= {"target", "optimizer"} and result.selection["best"] >= 0

    quiet = optimize(trainset, testset=testset, metric=metric, initial_skill=SKILL,
                     out=tmp_path / "quiet", train={"num_epochs": 1, "batch_size": 8},
                     verbose=False, **models())
    assert capsys.readouterr().err == "" and quiet.test == result.test


def test_unusable_optimizer_replies_are_said_not_silent(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = optimize(sums(12), metric=lambda answer, task: answer == task["answer"],
                      initial_skill=SKILL, target={"backend": "scripted", "default": "9"},
                      optimizer={"backend": "scripted", "default": "not JSON"},
                      train={"num_epochs": 1, "batch_size": 4, "steps_per_epoch": 1},
                      out=tmp_path / "run")
    err = capsys.readouterr().err
    assert "optimizer replies could not be used" in err, err
    assert result.best_skill == SKILL


def test_a_bool_metric_and_role_sections(tmp_path: Path) -> None:
    result = optimize(sums(12), valset=sums(6, offset=50),
                      metric=lambda answer, task: answer == task["answer"],
                      initial_skill=SKILL, target={"backend": "scripted", "default": "9"},
                      optimizer={"backend": "scripted", "default": "no idea"},
                      out=tmp_path / "run", train={"num_epochs": 1, "batch_size": 6})
    # The target says 9 to everything: right for 3 + 6 only (q3 in the trainset).
    assert result.summary["selection"]["initial"] == 0.0
    assert result.summary["test"] == {}
    assert result.best_skill == SKILL
    rollouts = read_jsonl(next((tmp_path / "run" / "evals").glob("val-*")) / "rollouts.jsonl")
    assert {r["reason"] for r in rollouts} == {"the metric scored the reply 0.00"}
    config = (tmp_path / "run" / "config.yaml").read_text()
    assert "backend: scripted" in config and "skillgrad.envs.memory:MemoryEnvironment" in config


def test_without_a_valset_the_split_is_stable(tmp_path: Path) -> None:
    tasks = to_tasks(sums(20), "trainset")
    train, val = hash_split(tasks)
    assert len(val) == 5 and len(train) == 15
    again_train, again_val = hash_split(list(reversed(tasks)))
    assert {t.id for t, _ in again_val} == {t.id for t, _ in val}
    assert [t.id for t, _ in train] == [t.id for t, _ in tasks if t.id not in
                                         {v.id for v, _ in val}]  # the given order is kept
    # ... and in any process (no use of Python's salted hash()).
    code = ("import sys; sys.path.insert(0, 'tests'); from test_api import sums; "
            "from skillgrad.envs.memory import hash_split, to_tasks; "
            "print(sorted(t.id for t, _ in hash_split(to_tasks(sums(20), 't'))[1]))")
    for seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=ROOT, env={**os.environ, "PYTHONHASHSEED": seed}, check=True)
        assert done.stdout.strip() == str(sorted(t.id for t, _ in val))
    grouped = to_tasks([{**t, "group": f"g{i // 4}"} for i, t in enumerate(sums(20))], "t")
    _, held = hash_split(grouped)
    assert len({t.group for t, _ in held}) == 1 and len(held) == 4  # whole groups held out


def _call(**changes: Any) -> None:
    args: dict[str, Any] = {"metric": lambda answer, task: 1.0, "initial_skill": SKILL,
                            "train": {"num_epochs": 1}, **models()}
    trainset = changes.pop("trainset", sums(8))
    optimize(trainset, **{**args, **changes})


@pytest.mark.parametrize(("changes", "error", "message"), [
    ({"trainset": []}, DataError, "trainset is empty"),
    ({"trainset": sums(1)}, DataError, "without a valset at least two tasks"),
    ({"trainset": "What is 1 + 2?"}, DataError, "trainset: expected a list of tasks, got str"),
    ({"trainset": [{"answer": "3"}]}, DataError, r"trainset\[0\]: 'input' \(or 'prompt'\)"),
    ({"trainset": sums(3) + sums(1)}, DataError, r"trainset\[3\]: task id 'q0' repeats"),
    ({"valset": sums(2)}, DataError, "task id 'q0' is in the train split and again in val"),
    ({"valset": []}, DataError, "valset is empty; pass valset=None"),
    ({"metric": lambda answer, task: "yes"}, ConfigError,
     r"metric <lambda> returned 'yes' \(str\) for task 'q\d'; it must return a number"),
    ({"metric": lambda answer, task: 1.5}, ConfigError, "a score must be a number in"),
    ({"metric": lambda answer, task: (0.0, 7)}, ConfigError, "feedback of type int"),
    ({"metric": "exact"}, ConfigError, r"optimize\(metric=...\): expected a function"),
    ({"initial_skill": "  "}, DataError, "the initial skill is empty"),
    ({"target": 42}, ConfigError, r"optimize\(target=...\): expected a ChatModel"),
    ({"target": {"backend": "nope"}}, ConfigError,
     r"optimize\(target=...\): model.target.backend: unknown backend 'nope'"),
    ({"train": {"num_epoch": 2}}, ConfigError,
     r"optimize\(train=...\): unknown key 'train.num_epoch'"),
    ({"num_epochs": 2}, ConfigError, "config overrides go by section"),
    ({"env": {"split_ratio": [1, 0, 0]}}, ConfigError, "env.split_ratio is set by optimize"),
    ({"evaluation": {"eval_test": True}}, ConfigError, "no testset was given"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_bad_inputs_are_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        changes: dict[str, Any], error: type[SkillgradError],
                                        message: str) -> None:
    monkeypatch.chdir(tmp_path)  # the default run directory, runs/optimize, lands here
    with pytest.raises(error, match=message) as caught:
        _call(**changes)
    assert "\n" not in str(caught.value)


# ----------------------------------------------------------------------------- the example


def test_the_python_api_example_runs(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "python_api.py"),
                           str(tmp_path / "runs")], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "optimize: test 0.00 -> 1.00" in done.stdout
    assert re.search(r"epoch 1: \['accept_new_best'", done.stdout)
    assert "from_config: test 0.00 -> 1.00" in done.stdout
    assert (tmp_path / "runs" / "skills" / "concise-reader" / "SKILL.md").is_file()
