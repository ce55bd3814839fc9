"""Resume equivalence: a run killed at any point and resumed equals an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import toy_config

from skillgrad.config import load_config
from skillgrad.errors import RunDirError
from skillgrad.models.messages import ChatRequest, Completion
from skillgrad.rundir import read_jsonl
from skillgrad.trainer import build_trainer


class SimulatedKill(BaseException):
    """Stands for the process dying: nothing in the library may catch it."""


class Counter:
    def __init__(self, kill_at: int | None = None) -> None:
        self.completed = 0
        self.kill_at = kill_at


class Killing:
    """Wraps a model; dies before the ``kill_at``-th call (counted over both roles)."""

    def __init__(self, inner, counter: Counter) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.counter = inner, counter

    def complete(self, request: ChatRequest) -> Completion:
        if self.counter.kill_at is not None and self.counter.completed + 1 >= self.counter.kill_at:
            raise SimulatedKill()
        out = self.inner.complete(request)
        self.counter.completed += 1
        return out


def run(cfg: Path, out: Path, counter: Counter, overrides: list[str] | None = None) -> dict | None:
    trainer = build_trainer(load_config(cfg, overrides or []), out)
    trainer.target.model = Killing(trainer.target.model, counter)
    trainer.optimizer.model = Killing(trainer.optimizer.model, counter)
    try:
        return trainer.fit()
    except SimulatedKill:
        return None


def comparable(out: Path) -> dict:
    summary = json.loads((out / "summary.json").read_text())
    state = json.loads((out / "checkpoint.json").read_text())
    history = [{k: v for k, v in r.items() if k != "seconds"} for r in state["history"]]
    models = {role: {k: u[k] for k in ("calls", "prompt_tokens", "completion_tokens")}
              for role, u in summary["models"].items()}
    return {"best": (out / "best_skill.md").read_bytes(), "test": summary["test"],
            "selection": summary["selection"], "history": history, "models": models,
            "scores": state["scores"], "decisions": summary["decisions_per_epoch"]}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, int]:
    folder = tmp_path_factory.mktemp("ref")
    cfg = toy_config(folder)
    counter = Counter()
    run(cfg, folder / "run", counter)
    return cfg, comparable(folder / "run"), counter.completed


@pytest.mark.parametrize("fraction", [0.0, 0.03, 0.2, 0.37, 0.5, 0.71, 0.9, 0.99])
def test_killed_and_resumed_equals_uninterrupted(reference, tmp_path: Path, fraction: float) -> None:
    cfg, expected, total_calls = reference
    out = tmp_path / "run"
    first = Counter(kill_at=1 + int(fraction * total_calls))
    assert run(cfg, out, first) is None  # killed
    second = Counter()
    assert run(cfg, out, second) is not None
    assert comparable(out) == expected
    # nothing lost: calls completed before the kill were not asked again
    assert first.completed + second.completed == total_calls


def test_repeated_kills_still_converge(reference, tmp_path: Path) -> None:
    cfg, expected, total_calls = reference
    out = tmp_path / "run"
    asked = 0
    for kill_at in (7, 13, 29, 5, 41):
        counter = Counter(kill_at=kill_at)
        if run(cfg, out, counter) is not None:
            break
        asked += counter.completed
    final = Counter()
    run(cfg, out, final)
    assert comparable(out) == expected
    assert asked + final.completed == total_calls


def test_half_written_journal_and_event_lines_are_tolerated(reference, tmp_path: Path) -> None:
    cfg, expected, total_calls = reference
    out = tmp_path / "run"
    run(cfg, out, Counter(kill_at=total_calls // 2))
    journals = sorted(out.glob("steps/*/calls.jsonl"), key=lambda p: p.stat().st_mtime)
    with journals[-1].open("a") as fh:
        fh.write('{"key": "abc", "role": "tar')  # the writer died mid-line
    with (out / "events.jsonl").open("a") as fh:
        fh.write('{"event": "ste')
    run(cfg, out, Counter())
    assert comparable(out) == expected


def test_a_finished_run_is_not_trained_again(reference, tmp_path: Path) -> None:
    cfg, expected, _ = reference
    out = tmp_path / "run"
    run(cfg, out, Counter())
    again = Counter()
    run(cfg, out, again)
    assert again.completed == 0
    assert comparable(out) == expected


def test_a_directory_of_another_config_is_refused(reference, tmp_path: Path) -> None:
    cfg, _, _ = reference
    out = tmp_path / "run"
    run(cfg, out, Counter(kill_at=20))
    other = load_config(cfg, ["optimizer.learning_rate=3"])
    with pytest.raises(RunDirError, match="different config") as refused:
        build_trainer(other, out).fit()
    # the refusal names what changed, and nothing else
    assert "(optimizer.learning_rate: 1 -> 3)" in str(refused.value)
    # resume-safe keys may change
    build_trainer(load_config(cfg, ["execution.rollout_workers=2"]), out).fit()
    # and an explicit override continues with the new config
    summary = build_trainer(other, out, allow_config_change=True).fit()
    assert summary["steps"] == 6
    assert any(e["event"] == "config_changed" for e in read_jsonl(out / "events.jsonl"))


def test_a_refusal_names_keys_a_newer_version_added(reference, tmp_path: Path) -> None:
    """A run directory written before a key existed: the refusal says the key is new."""
    cfg, _, _ = reference
    out = tmp_path / "run"
    run(cfg, out, Counter(kill_at=20))
    written = yaml.safe_load((out / "config.yaml").read_text())
    del written["evaluation"]["gate_test"]
    written["train"]["removed_key"] = 1
    (out / "config.yaml").write_text(yaml.safe_dump(written))
    with pytest.raises(RunDirError) as refused:
        build_trainer(load_config(cfg, ["optimizer.learning_rate=3"]), out).fit()
    message = str(refused.value)
    assert "evaluation.gate_test is new (now 'strict'; that run predates it)" in message
    assert "optimizer.learning_rate: 1 -> 3" in message
    assert "train.removed_key is no longer a key (was 1)" in message
    assert "\n" not in message


def test_kill_dash_nine_mid_stage_then_resume(toy_dir: Path, reference) -> None:
    """A real process killed with SIGKILL in the middle of a step resumes to the same result."""
    _, expected, _ = reference
    cfg = toy_config(toy_dir)
    text = cfg.read_text().replace("function: toy:target", "function: toy:target\n    delay: 0.01")
    cfg.write_text(text)
    out = toy_dir / "run"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    cmd = [sys.executable, "-m", "skillgrad.cli", "train", str(cfg), "--out", str(out)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = out / "steps" / "e01-s002" / "calls.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and journal.read_text().count("\n") >= 5:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "summary.json").exists()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert comparable(out) == expected


# ----------------------------------------------------------------------------- Training II state

FULL = ["train.num_epochs=3", "train.steps_per_epoch=2", "train.accumulation=2",
        "train.batch_size=6", "optimizer.use_slow_update=true", "optimizer.use_meta_skill=true",
        "optimizer.slow_update_samples=6", "optimizer.use_skill_aware_reflection=true",
        "optimizer.skill_aware_consolidate_threshold=2", "optimizer.lr_control_mode=autonomous",
        "evaluation.gate_test=bootstrap", "evaluation.gate_alpha=0.3",
        "evaluation.gate_bootstrap_samples=200"]
REMINDERS = ["Check the format.", "Give the value alone.", "Read the context first."]


def run_full(folder: Path, out: Path, counter: Counter) -> dict | None:
    from conftest import toy_config_full

    return run(toy_config_full(folder, rate=2, reminders=REMINDERS), out, counter, FULL)


def comparable_full(out: Path) -> dict:
    state = json.loads((out / "checkpoint.json").read_text())
    updates = [{k: v for k, v in u.items() if k != "seconds"} for u in state["epoch_updates"]]
    return {**comparable(out), "epoch_updates": updates, "meta": state["meta_skill"],
            "skills": sorted(p.name for p in (out / "skills").iterdir())}


@pytest.fixture(scope="module")
def reference_full(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, int, dict]:
    folder = tmp_path_factory.mktemp("full")
    counter = Counter()
    out = folder / "run"
    run_full(folder, out, counter)
    # where the interesting moments are, counted in calls over both roles
    n = {scope: len(read_jsonl(out / scope / "calls.jsonl"))
         for scope in ("init", "steps/e01-s001", "steps/e01-s002", "epochs/e02")}
    e02 = [c["stage"] for c in read_jsonl(out / "epochs" / "e02" / "calls.jsonl")]
    marks = {
        "mid_step_with_rejected_buffer": n["init"] + n["steps/e01-s001"] + n["steps/e01-s002"] // 2,
        "in_the_slow_update": n["init"] + n["steps/e01-s001"] + n["steps/e01-s002"]
        + e02.index("slow_update") + 1,
    }
    return folder, comparable_full(out), counter.completed, marks


def test_the_full_reference_exercises_every_mechanism(reference_full) -> None:
    _, expected, _, _ = reference_full
    updates = expected["epoch_updates"]
    assert [u["epoch"] for u in updates] == [2, 3]
    assert all(u["meta_skill_updated"] and u["slow_update"] for u in updates)
    assert expected["meta"]
    history = expected["history"]
    assert history[0]["decision"] == "reject"  # so the buffer is not empty in step 2
    assert any(r["n_reminders"] for r in history)
    assert all(r["rate"]["mode"] == "autonomous" for r in history)


@pytest.mark.parametrize("where", ["mid_step_with_rejected_buffer", "in_the_slow_update"])
def test_full_state_resumes_exactly(reference_full, tmp_path: Path, where: str) -> None:
    folder, expected, total_calls, marks = reference_full
    out = tmp_path / "run"
    first = Counter(kill_at=marks[where])
    assert run_full(folder, out, first) is None
    state = json.loads((out / "checkpoint.json").read_text())
    if where == "mid_step_with_rejected_buffer":
        assert state["epoch"] == 1 and state["step"] == 1 and state["rejected"]
        assert state["epoch_update_done"] == 1  # the slow update is still to come
    else:
        assert state["epoch"] == 2 and state["step"] == 0 and state["epoch_update_done"] == 1
        assert (out / "epochs" / "e02" / "pairs.jsonl").exists()
    second = Counter()
    assert run_full(folder, out, second) is not None
    assert comparable_full(out) == expected
    assert first.completed + second.completed == total_calls


@pytest.mark.parametrize("fraction", [0.15, 0.45, 0.62, 0.8, 0.97])
def test_full_state_killed_anywhere_resumes_exactly(reference_full, tmp_path: Path,
                                                    fraction: float) -> None:
    folder, expected, total_calls, _ = reference_full
    out = tmp_path / "run"
    first = Counter(kill_at=1 + int(fraction * total_calls))
    assert run_full(folder, out, first) is None
    second = Counter()
    assert run_full(folder, out, second) is not None
    assert comparable_full(out) == expected
    assert first.completed + second.completed == total_calls


def _as_if_older(out: Path, cfg: Path, key: str) -> None:
    """Make ``out`` look like a run directory written before ``key`` existed: its recorded
    config lacks the key and its fingerprints were computed without it."""
    record = yaml.safe_load((out / "config.yaml").read_text())
    section, name = key.split(".")
    del record[section][name]
    (out / "config.yaml").write_text(yaml.safe_dump(record))
    old = load_config(cfg).fingerprint(without=[key])
    for name_ in ("checkpoint.json", "run.json"):
        data = json.loads((out / name_).read_text())
        data["fingerprint"] = old
        (out / name_).write_text(json.dumps(data))


def test_a_run_that_predates_a_key_at_its_default_resumes(reference, tmp_path: Path) -> None:
    cfg, expected, _ = reference
    out = tmp_path / "run"
    assert run(cfg, out, Counter(kill_at=20)) is None
    _as_if_older(out, cfg, "gradient.line_ablations")
    assert run(cfg, out, Counter()) is not None
    assert comparable(out) == expected
    added = [e for e in read_jsonl(out / "events.jsonl") if e["event"] == "config_keys_added"]
    assert added and added[0]["keys"] == ["gradient.line_ablations"]
    assert "line_ablations" in (out / "config.yaml").read_text()  # the record is brought up


def test_a_run_that_predates_a_key_set_away_from_its_default_is_refused(reference,
                                                                         tmp_path: Path) -> None:
    cfg, _, _ = reference
    out = tmp_path / "run"
    assert run(cfg, out, Counter(kill_at=20)) is None
    _as_if_older(out, cfg, "gradient.line_ablations")
    with pytest.raises(RunDirError, match=r"gradient.line_ablations is new \(now 2"):
        build_trainer(load_config(cfg, ["gradient.line_ablations=2"]), out).fit()
    # nor is another change hidden behind a key that is new
    with pytest.raises(RunDirError, match="optimizer.learning_rate: 1 -> 3"):
        build_trainer(load_config(cfg, ["optimizer.learning_rate=3"]), out).fit()
