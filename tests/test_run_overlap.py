"""Work that does not depend on each other runs together, and changes nothing: the longitudinal
rollouts of the previous and the current skill share one fan-out, so do the final test
evaluations of the initial, best and final skill; the run ends exactly as one that does all of
it one rollout at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import toy_config_full

from skillgrad import parallel
from skillgrad.config import load_config
from skillgrad.models.client import CallTiming
from skillgrad.trainer import build_trainer

EPOCHS = ["train.num_epochs=3", "train.steps_per_epoch=1", "optimizer.use_slow_update=true",
          "optimizer.use_meta_skill=true"]
TIMES = {"seconds", "wall_seconds", "stage_seconds", "meter"}


def _untimed(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: _untimed(v) for k, v in data.items() if k not in TIMES}
    if isinstance(data, list):
        return [_untimed(v) for v in data]
    return data


def _outcome(run: Path) -> dict[str, Any]:
    state = json.loads((run / "checkpoint.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    return {"best": (run / "best_skill.md").read_bytes(),
            "skills": {p.name: p.read_bytes() for p in sorted((run / "skills").iterdir())},
            "state": _untimed({k: state[k] for k in ("scores", "history", "epoch_updates",
                                                     "meta_skill", "rejected")}),
            "test": summary["test"]}


def test_independent_rollouts_share_a_fan_out_and_the_run_ends_the_same(toy_dir: Path) -> None:
    cfg = toy_config_full(toy_dir)
    build_trainer(load_config(cfg, EPOCHS), toy_dir / "serial").fit()

    seen: list[tuple[CallTiming, tuple[parallel.Frame, ...]]] = []
    trainer = build_trainer(load_config(cfg, [*EPOCHS, "execution.rollout_workers=4"]),
                            toy_dir / "together")
    trainer.target.observer = lambda timing: seen.append((timing, parallel.frames()))
    trainer.fit()
    assert _outcome(toy_dir / "together") == _outcome(toy_dir / "serial")

    def fan_outs(stage: str) -> dict[str, set[parallel.FanOut]]:
        by_scope: dict[str, set[parallel.FanOut]] = {}
        for timing, frames in seen:
            if timing.stage == stage:
                assert timing.journal is not None
                by_scope.setdefault(timing.journal.parent.name, set()).add(frames[0].fan_out)
        return by_scope

    state = json.loads((toy_dir / "together" / "checkpoint.json").read_text())
    compared = [u for u in state["epoch_updates"] if u["previous_hash"] != u["current_hash"]]
    longitudinal = fan_outs("longitudinal")
    assert compared and set(longitudinal) == {f"e{u['epoch']:02d}" for u in
                                              state["epoch_updates"]}
    for update in compared:  # both skills' rollouts in one fan-out, on the rollout workers
        (fan,) = longitudinal[f"e{update['epoch']:02d}"]
        assert (fan.name, fan.items, fan.workers) == ("rollouts", 2 * len(update["tasks"]), 4)
    skills = {state["initial_hash"], state["best_hash"], state["current_hash"]}
    (final,) = fan_outs("eval_test")["final"]
    assert len(skills) > 1 and final.name == "rollouts"
    assert final.items == len(skills) * state["scores"][f"test:{state['initial_hash']}"]["n"]
