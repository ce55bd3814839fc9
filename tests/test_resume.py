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
from conftest import toy_config

from skillgrad.build import build_trainer
from skillgrad.config import load_config
from skillgrad.errors import RunDirError
from skillgrad.records import ChatRequest, Completion
from skillgrad.rundir import read_jsonl


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


def run(cfg: Path, out: Path, counter: Counter) -> dict | None:
    trainer = build_trainer(load_config(cfg), out)
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
    with pytest.raises(RunDirError, match="different config"):
        build_trainer(other, out).fit()
    # resume-safe keys may change
    build_trainer(load_config(cfg, ["execution.rollout_workers=2"]), out).fit()
    # and an explicit override continues with the new config
    summary = build_trainer(other, out, allow_config_change=True).fit()
    assert summary["steps"] == 6
    assert any(e["event"] == "config_changed" for e in read_jsonl(out / "events.jsonl"))


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
