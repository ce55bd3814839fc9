"""The TensorBoard tracker: a scripted toy run written as event files and read back with
TensorBoard's own ``EventAccumulator``, compared with the run's records; a resumed run goes on
in the same folder and writes no step twice; a folder that cannot be written, or that holds
another run's files, stops the run in one line before any model call.

Nothing here reaches the network: the event files are written to folders under pytest's."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import toy_config
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.plugins.hparams import plugin_data_pb2
from test_runs_cli import _train
from test_tracking import ONE_EPOCH, _history, _Interrupt, _quiet_offline_env

from skillgrad.config import load_config
from skillgrad.errors import ConfigError, RunDirError
from skillgrad.rundir import RunDir
from skillgrad.tracking.tensorboard import event_files
from skillgrad.trainer import build_trainer

TENSORBOARD = ["tracking.tensorboard={}"]


@pytest.fixture(autouse=True)
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _quiet_offline_env(monkeypatch, tmp_path)


def _accumulator(folder: Path) -> EventAccumulator:
    found = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    found.Reload()
    return found


def _series(events: EventAccumulator, tag: str) -> list[tuple[int, float]]:
    return [(e.step, e.value) for e in events.Scalars(tag)]


def _approx(pairs: list[tuple[int, float]]) -> list[tuple[int, Any]]:
    """TensorBoard keeps a scalar as a 32-bit float."""
    return [(step, pytest.approx(value, rel=1e-6)) for step, value in pairs]


def _text(events: EventAccumulator, tag: str) -> str:
    (event,) = events.Tensors(tag)
    return bytes(event.tensor_proto.string_val[0]).decode("utf-8")


def _written(folder: Path) -> Counter[tuple[str, int]]:
    """How often each (tag, step) was written, over every event file of ``folder``."""
    count: Counter[tuple[str, int]] = Counter()
    for path in event_files(folder):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                count[(value.tag, event.step)] += 1
    return count


@pytest.fixture(scope="module")
def tracked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A toy run (6 steps, accepts and rejects) written to TensorBoard in its run directory."""
    base = tmp_path_factory.mktemp("tensorboard")
    with pytest.MonkeyPatch.context() as mp:
        _quiet_offline_env(mp, base)
        yield _train(base, overrides=TENSORBOARD)


def test_the_event_files_hold_every_step_the_scores_the_params_and_the_files(
        tracked: Path) -> None:
    run = tracked
    entry = RunDir(run).read_tracking()["tensorboard"]
    log_dir = run.resolve() / "tensorboard"
    assert entry["run_id"] == "run" and entry["log_dir"] == str(log_dir)
    (only,) = event_files(log_dir / "run")  # the default: RUN/tensorboard/<run name>/
    events = _accumulator(only.parent)

    history = _history(run)
    assert [r.global_step for r in history] == [1, 2, 3, 4, 5, 6]
    assert {r.decision for r in history} >= {"accept_new_best", "reject"}
    assert _series(events, "train/hard") == _approx([(r.global_step, r.train_hard)
                                                     for r in history])
    assert _series(events, "gate/accepted") == [
        (r.global_step, 1.0 if r.decision.startswith("accept") else 0.0) for r in history]
    assert _series(events, "selection/candidate") == _approx([
        (r.global_step, r.candidate_score) for r in history if r.candidate_score is not None])
    assert _series(events, "edits/applied") == [
        (r.global_step, float(r.n_applied + r.n_fuzzy)) for r in history]
    assert _series(events, "optimizer/budget") == [(r.global_step, 1.0) for r in history]
    calls = _series(events, "usage/calls")
    assert [s for s, _ in calls] == [r.global_step for r in history]
    assert calls[0][1] > 0 and all(a[1] <= b[1] for a, b in zip(calls, calls[1:], strict=False))

    # Scores: the initial skill's at step 0, each new candidate's at the step that made it.
    state = json.loads((run / "checkpoint.json").read_text())
    seen = {state["initial_hash"]}
    expected = [(0, state["scores"][f"val:{state['initial_hash']}"]["hard"])]
    for r in history:
        if r.candidate_hash and r.candidate_hash not in seen and r.candidate_score is not None:
            seen.add(r.candidate_hash)
            expected.append((r.global_step, r.candidate_score))
    assert _series(events, "val/hard") == _approx(expected)
    summary = json.loads((run / "summary.json").read_text())
    for name in ("initial", "best", "final"):
        assert _series(events, f"test/{name}/hard") == _approx(
            [(6, summary["test"][name]["hard"])])
    assert _series(events, "best_step") == [(6, float(summary["best_step"]))]

    meta = events.SummaryMetadata("_hparams_/session_start_info")
    assert meta.plugin_data.plugin_name == "hparams"
    start = plugin_data_pb2.HParamsPluginData.FromString(
        meta.plugin_data.content).session_start_info
    resolved = load_config(run.parent / "config.yaml", TENSORBOARD)
    assert start.hparams["skillgrad.fingerprint"].string_value == resolved.fingerprint()
    assert start.hparams["train.num_epochs"].number_value == 2
    assert start.hparams["model.target.backend"].string_value == "scripted"
    assert start.hparams["tracking.tensorboard.log_dir"].string_value == "null"

    assert _text(events, "best_skill.md") == (run / "best_skill.md").read_text()
    fenced = _text(events, "summary.json")
    assert fenced.startswith("```json\n") and json.loads(fenced[8:-4]) == summary
    # Each scalar is written once, but test/hard and test/soft: once per skill tested (the
    # initial one and the best, which is also the final one).
    assert {k: n for k, n in _written(only.parent).items() if n > 1} == {
        ("test/hard", 6): 2, ("test/soft", 6): 2}


def test_nothing_is_written_into_a_run_directory_that_refuses_the_run(toy_dir: Path) -> None:
    """A run directory made by another config, whose first start stopped before its first
    checkpoint, is refused when the trainer claims it: the tracker, which opened first, has
    written nothing into it."""
    run = RunDir(toy_dir / "run")
    run.write_marker("0" * 16, "0.0.1")
    trainer = build_trainer(load_config(toy_config(toy_dir), TENSORBOARD), run.root)
    with pytest.raises(RunDirError, match="different config"):
        trainer.fit()
    assert trainer.target.meter.totals().calls == 0
    assert not run.tensorboard_folder.exists()


@pytest.mark.parametrize("stage, n", [("reflect", 2), ("step_end", 1)],
                         ids=["inside-step-2", "before-the-tracker-saw-step-1"])
def test_a_resumed_run_goes_on_in_the_same_folder_and_writes_no_step_twice(
        tmp_path: Path, stage: str, n: int) -> None:
    overrides = [*ONE_EPOCH, f"tracking.tensorboard.log_dir={tmp_path / 'tb'}",
                 "tracking.tensorboard.run_name=toy"]
    run = tmp_path / "run"
    trainer = build_trainer(load_config(toy_config(tmp_path), overrides), run,
                            callbacks=[_Interrupt(stage, n)])
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    first = RunDir(run).read_tracking()["tensorboard"]
    assert first["step"] == (1 if stage == "reflect" else 0)
    folder = tmp_path / "tb" / "toy"
    assert len(event_files(folder)) == 1

    _train(tmp_path, overrides=overrides)
    again = RunDir(run).read_tracking()["tensorboard"]
    assert again["run_id"] == first["run_id"] == "toy" and again["step"] == 3

    # Over both starts, each scalar is written as often as by a run never interrupted (the
    # hyperparameters are written by each start; the model usage of a step the tracker missed
    # is not known when the resumed start logs that step).
    whole = tmp_path / "whole"
    _train(whole, overrides=[*ONE_EPOCH, f"tracking.tensorboard.log_dir={whole / 'tb'}"])
    resumed, reference = _written(folder), _written(whole / "tb" / "run")
    assert {k: n for k, n in resumed.items()
            if n != reference[k] and k[0] != "_hparams_/session_start_info"} == {}
    assert {k for k in reference if k not in resumed} == (
        set() if stage == "reflect" else {k for k in reference if k[0].startswith("usage/")
                                          and k[1] == 1})
    history = _history(run)
    events = _accumulator(folder)
    assert _series(events, "train/hard") == _approx([(r.global_step, r.train_hard)
                                                     for r in history])
    assert [s for s, _ in _series(events, "val/hard")].count(0) == 1
    assert _series(events, "test/best/hard")[0][0] == 3


def test_a_run_whose_event_files_are_gone_is_written_again_whole(tmp_path: Path) -> None:
    overrides = [*ONE_EPOCH, *TENSORBOARD]
    run = tmp_path / "run"
    trainer = build_trainer(load_config(toy_config(tmp_path), overrides), run,
                            callbacks=[_Interrupt("reflect", 3)])
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    folder = run / "tensorboard" / "run"
    (gone,) = event_files(folder)
    gone.unlink()
    _train(tmp_path, overrides=overrides)
    assert [s for s, _ in _series(_accumulator(folder), "train/hard")] == [1, 2, 3]


def test_a_folder_holding_another_runs_files_stops_the_run_before_any_model_call(
        tmp_path: Path, tracked: Path) -> None:
    other = tracked.resolve() / "tensorboard"
    overrides = [f"tracking.tensorboard.log_dir={other}"]
    trainer = build_trainer(load_config(toy_config(tmp_path), overrides), tmp_path / "run")
    with pytest.raises(ConfigError) as caught:
        trainer.fit()
    assert str(caught.value) == (
        f"tracking.tensorboard: {other / 'run'} holds the event files of another run; set "
        "tracking.tensorboard.run_name or log_dir to another folder, or remove that one")
    assert trainer.target.meter.totals().calls == 0
    assert not (tmp_path / "run").exists()


def test_a_log_dir_that_is_a_file_stops_the_run_in_one_line(toy_dir: Path) -> None:
    (toy_dir / "tb").write_text("not a folder")
    resolved = load_config(toy_config(toy_dir), ["tracking.tensorboard.log_dir=tb"])
    trainer = build_trainer(resolved, toy_dir / "run")
    with pytest.raises(ConfigError) as caught:
        trainer.fit()
    assert str(caught.value) == ("tracking.tensorboard: cannot start the TensorBoard run: "
                                 f"{(toy_dir / 'tb').resolve()}: is a file, not a folder")
    assert trainer.target.meter.totals().calls == 0
    assert not (toy_dir / "run").exists()


def test_the_run_name_must_be_one_folder(toy_dir: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(toy_config(toy_dir), ["tracking.tensorboard.run_name=a/b"])
    assert str(caught.value) == ("--set: tracking.tensorboard.run_name: not a single folder "
                                 "name (no /, not . or ..) (got 'a/b')")
