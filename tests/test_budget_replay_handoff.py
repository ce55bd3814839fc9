"""Whole runs of the toy task with the shared layer in play: a budget that stops a run which a
larger budget resumes, --replay of a recorded run, and the handoff backend's round trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toy
from conftest import toy_config

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.errors import AnswersPending, ConfigError, ModelError, RunStopped
from skillgrad.models.accounting import BudgetExhausted
from skillgrad.models.messages import ChatRequest, Completion
from skillgrad.models.scripted import ScriptedModel
from skillgrad.rundir import read_jsonl
from skillgrad.trainer import build_trainer

HANDOFF_TARGET = {"target": {"backend": "handoff", "dir": "handoff"},
                  "optimizer": {"backend": "scripted", "function": "toy:optimizer"}}


def explode(request: ChatRequest) -> str:
    raise AssertionError("a configured model was called")


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "skillgrad.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


class Counting:
    """Wraps a model and counts the calls that reach it."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.calls = inner, 0

    def complete(self, request: ChatRequest) -> Completion:
        self.calls += 1
        return self.inner.complete(request)


def outcome(out: Path) -> dict[str, Any]:
    """What must not depend on how a run got to its end."""
    summary = json.loads((out / "summary.json").read_text())
    state = json.loads((out / "checkpoint.json").read_text())
    models = {role: {k: u[k] for k in ("calls", "prompt_tokens", "completion_tokens")}
              for role, u in summary["models"].items()}
    return {
        "best": (out / "best_skill.md").read_bytes(),
        "skills": sorted(p.name for p in (out / "skills").glob("*.md")),
        "test": summary["test"],
        "decisions": [r["decision"] for r in state["history"]],
        "candidates": {p.parent.name: p.read_bytes() for p in out.glob("steps/*/candidate.md")},
        "gates": {p.parent.name: json.loads(p.read_text()) for p in out.glob("steps/*/gate.json")},
        "models": models,
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """An uninterrupted run with the scripted models: (its run directory, its outcome)."""
    folder = tmp_path_factory.mktemp("ref")
    out = folder / "run"
    build_trainer(load_config(toy_config(folder)), out).fit()
    return out, outcome(out)


# ----------------------------------------------------------------------------- budget


def test_a_budget_stops_the_run_and_a_larger_one_finishes_it(toy_dir: Path, reference) -> None:
    _, expected = reference
    cfg = toy_config(toy_dir)
    out = toy_dir / "run"
    optimizer_calls = expected["models"]["optimizer"]["calls"]
    assert optimizer_calls > 20

    trainer = build_trainer(load_config(cfg, ["model.optimizer.budget.calls=20"]), out)
    first = trainer.optimizer.model = Counting(trainer.optimizer.model)
    with pytest.raises(BudgetExhausted, match=r"model\.optimizer\.budget\.calls") as info:
        trainer.fit()
    assert isinstance(info.value, RunStopped)
    assert first.calls == 20  # not one call after the budget ran out
    events = read_jsonl(out / "events.jsonl")
    assert events[-1]["event"] == "stopped" and "budget" in events[-1]["reason"]
    state = json.loads((out / "checkpoint.json").read_text())  # intact and readable
    assert state["phase"] == "train" and 0 < state["global_step"] < 6
    assert len(state["history"]) == state["global_step"]
    assert not (out / "summary.json").exists()

    # the same budget again: the step's journal is replayed, and it stops at the same call
    trainer = build_trainer(load_config(cfg, ["model.optimizer.budget.calls=20"]), out)
    same = trainer.optimizer.model = Counting(trainer.optimizer.model)
    with pytest.raises(BudgetExhausted):
        trainer.fit()
    assert same.calls == 0

    # a larger budget is a resume-safe change: no --allow-config-change needed
    trainer = build_trainer(load_config(cfg, ["model.optimizer.budget.calls=1000"]), out)
    rest = trainer.optimizer.model = Counting(trainer.optimizer.model)
    trainer.fit()
    assert first.calls + rest.calls == optimizer_calls  # nothing was asked twice
    assert outcome(out) == expected
    assert [e["event"] for e in read_jsonl(out / "events.jsonl")].count("stopped") == 2


@pytest.mark.parametrize("override, kind", [
    ("model.target.budget.tokens=500", "tokens"),
    ("model.target.budget.cost=0.001", "cost"),
])
def test_token_and_cost_budgets_stop_a_run(toy_dir: Path, override: str, kind: str) -> None:
    cfg = toy_config(toy_dir)
    overrides = [override, "model.target.prices.prompt=1", "model.target.prices.completion=2"]
    with pytest.raises(BudgetExhausted, match=rf"model\.target\.budget\.{kind}"):
        build_trainer(load_config(cfg, overrides), toy_dir / "run").fit()
    assert read_jsonl(toy_dir / "run" / "events.jsonl")[-1]["event"] == "stopped"


def test_a_cost_budget_needs_prices(toy_dir: Path) -> None:
    with pytest.raises(ConfigError, match="prices"):
        load_config(toy_config(toy_dir), ["model.optimizer.budget.cost=1"])


def test_cli_exits_3_when_the_budget_runs_out(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    proc = cli("train", str(cfg), "--out", str(toy_dir / "run"),
               "--set", "model.optimizer.budget.calls=5")
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    error = next(line for line in proc.stderr.splitlines() if line.startswith("error: "))
    assert error.startswith("error: stopped:") and "budget" in error
    assert "model.optimizer.budget.calls" in error


# ----------------------------------------------------------------------------- replay


def test_replay_reproduces_a_run_without_calling_any_model(tmp_path: Path, reference) -> None:
    recorded, expected = reference
    folder = tmp_path / "cfg"
    folder.mkdir()
    broken = {role: {"backend": "scripted", "function": "test_budget_replay_handoff:explode"}
              for role in ("target", "optimizer")}
    cfg = toy_config(folder, model=broken)
    with pytest.raises(AssertionError, match="configured model was called"):  # the models raise
        build_trainer(load_config(cfg), tmp_path / "live").fit()

    out = tmp_path / "replayed"
    summary = build_trainer(load_config(cfg), out, replay=recorded).fit()
    assert outcome(out) == expected
    assert summary["test"] == expected["test"]
    assert len(expected["gates"]) == 6 and len(expected["candidates"]) == 6


@pytest.mark.parametrize("override", ["optimizer.learning_rate=3", "train.seed=8"])
def test_replay_with_another_config_fails_naming_the_recording(
    tmp_path: Path, reference, override: str
) -> None:
    recorded, _ = reference
    cfg = toy_config(tmp_path)
    with pytest.raises(ModelError, match=r"replay of .*: the \w+ model was sent a request the "
                                         r"recorded run never asked"):
        build_trainer(load_config(cfg, [override]), tmp_path / "other", replay=recorded).fit()


def test_cli_refuses_to_replay_into_the_recorded_run(toy_dir: Path, reference) -> None:
    recorded, _ = reference
    cfg = toy_config(toy_dir)
    before = (recorded / "events.jsonl").read_bytes()
    proc = cli("train", str(cfg), "--out", str(recorded), "--replay", str(recorded))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[0].startswith("error: --replay")
    assert (recorded / "events.jsonl").read_bytes() == before


# ----------------------------------------------------------------------------- handoff


def answer_pending(handoff: Path) -> list[str]:
    """Answer every pending call the way the toy's scripted target would, usage included."""
    pending = json.loads((handoff / "pending.json").read_text())["pending"]
    model = ScriptedModel(fn=toy.target)
    for entry in pending:
        request = ChatRequest.model_validate_json((handoff / entry["request"]).read_text())
        completion = model.complete(request)
        (handoff / "answers" / f"{entry['id']}.json").write_text(json.dumps(
            {"text": completion.text, "usage": completion.usage.model_dump()}))
    return [e["id"] for e in pending]


def test_handoff_round_trip_equals_the_scripted_run(toy_dir: Path, reference) -> None:
    _, expected = reference
    cfg = toy_config(toy_dir, model=HANDOFF_TARGET)
    out, handoff = toy_dir / "run", toy_dir / "handoff"

    with pytest.raises(AnswersPending) as info:
        build_trainer(load_config(cfg), out).fit()
    val = build_environment(load_config(cfg)).tasks("val")
    pending = json.loads((handoff / "pending.json").read_text())["pending"]
    assert len(pending) == len(val) == 9  # the whole initial evaluation is asked at once
    asked = {json.loads((handoff / e["request"]).read_text())["messages"][-1]["content"]
             for e in pending}
    assert asked == {t.prompt for t in val}
    assert sorted(e["id"] for e in pending) == info.value.waiting[str(handoff.resolve())]
    prompts = (handoff / "prompts.md").read_text()
    assert all(f"## {e['id']}" in prompts and f"answers/{e['id']}.txt" in prompts
               for e in pending)
    assert read_jsonl(out / "events.jsonl")[-1]["event"] == "stopped"

    rounds = 1
    while True:
        answer_pending(handoff)
        try:
            build_trainer(load_config(cfg), out).fit()
            break
        except AnswersPending:
            rounds += 1
            assert rounds <= 50, "the handoff loop does not converge"
    assert (out / "summary.json").is_file()
    assert outcome(out) == expected
    # one round per stage of target calls: the initial evaluation, a rollout and a gate
    # evaluation per step (fewer where a skill's score is known), the final test evaluations
    assert rounds <= 1 + 2 * 6 + 3, rounds
    assert not (handoff / "pending.json").exists()


def test_handoff_text_answers_and_bad_json_answers(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir, model=HANDOFF_TARGET)
    out, handoff = toy_dir / "run", toy_dir / "handoff"
    with pytest.raises(AnswersPending):
        build_trainer(load_config(cfg), out).fit()
    ids = [e["id"] for e in json.loads((handoff / "pending.json").read_text())["pending"]]
    (handoff / "answers" / f"{ids[0]}.json").write_text('{"txt": "no text key"}')
    with pytest.raises(ModelError, match=rf"{ids[0]}\.json: not an answer object"):
        build_trainer(load_config(cfg), out).fit()
    (handoff / "answers" / f"{ids[0]}.json").unlink()
    for cid in ids:
        (handoff / "answers" / f"{cid}.txt").write_text("  Answer: nothing\n")
    with pytest.raises(AnswersPending):  # the initial evaluation is done: the first rollouts
        build_trainer(load_config(cfg), out).fit()
    journal = read_jsonl(out / "init" / "calls.jsonl")
    assert len(journal) == len(ids)
    assert {c["completion"]["text"] for c in journal} == {"Answer: nothing"}
    state = json.loads((out / "checkpoint.json").read_text())
    assert [(s["split"], s["n"], s["hard"]) for s in state["scores"].values()] == [("val", 9, 0.0)]
    new = json.loads((handoff / "pending.json").read_text())["pending"]
    assert new and not set(ids) & {e["id"] for e in new}


def test_cli_exits_3_and_points_to_the_prompts(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir, model=HANDOFF_TARGET)
    proc = cli("train", str(cfg), "--out", str(toy_dir / "run"))
    assert proc.returncode == 3, proc.stderr
    assert "Traceback" not in proc.stderr
    error = next(line for line in proc.stderr.splitlines() if line.startswith("error: "))
    assert "9 model calls waiting for answers" in error and "prompts.md" in error
    assert (toy_dir / "handoff" / "prompts.md").is_file()


def test_an_answer_to_a_prompt_that_no_longer_exists_is_named_and_kept(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from skillgrad.models.handoff import HandoffModel

    (tmp_path / "answers").mkdir()
    (tmp_path / "answers" / "0123456789abcdef.txt").write_text("an old answer")
    with caplog.at_level("WARNING"):
        HandoffModel(tmp_path)
    assert "0123456789abcdef.txt answers no call that was asked here" in caplog.text
    assert (tmp_path / "answers" / "0123456789abcdef.txt").read_text() == "an old answer"
