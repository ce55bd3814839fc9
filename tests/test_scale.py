"""What a step costs does not grow with the run or the data set: the checkpoint keeps per-task
results only for the skills the gate compares with, a batch does not reshuffle the whole
training set, and a JSONL data set is read a line at a time."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from conftest import toy_config

from skillgrad.config import load_config
from skillgrad.envs.data import iter_located_records, parse_records
from skillgrad.envs.qa.env import parse_record
from skillgrad.errors import DataError, RunDirError
from skillgrad.records import RolloutResult, Task
from skillgrad.rundir import RunDir
from skillgrad.stages.rollout import score
from skillgrad.state import BatchOrder, TrainerState, batch_for
from skillgrad.trainer import build_trainer

# ----------------------------------------------------------------------------- scores


def test_the_checkpoint_keeps_per_task_results_of_the_compared_skills_only(
        toy_dir: Path) -> None:
    # The bootstrap gate rejects most candidates of the toy, so many skills get scored.
    cfg = toy_config(toy_dir, train={"num_epochs": 4}, evaluation={"gate_test": "bootstrap"})
    build_trainer(load_config(cfg), toy_dir / "run").fit()
    data = json.loads((toy_dir / "run" / "checkpoint.json").read_text())
    state = TrainerState.model_validate(data)
    val = [s for s in state.scores.values() if s.split == "val"]
    assert len(val) > 3
    kept = {key for key, s in state.scores.items() if s.per_task}
    assert kept <= {f"val:{state.current_hash}", f"val:{state.best_hash}"}
    # Every score's per-task results are in its evaluation folder, read back on demand.
    state.compact(RunDir(toy_dir / "run"))
    for key, stored in data["scores"].items():
        split, _, digest = key.partition(":")
        found = state.score(split, digest)
        assert found is not None and len(found.per_task) == found.n == stored["n"]
        assert (found.hard, found.soft) == (stored["hard"], stored["soft"])


def _results(skill: str, n: int) -> list[RolloutResult]:
    rng = random.Random(skill)
    return [RolloutResult(task_id=f"t{i}", messages=(), answer="a", hard=h, soft=rng.random())
            for i, h in enumerate(rng.choice((0.0, 1.0)) for _ in range(n))]


def _scored(run: RunDir, skill: str, n: int = 7) -> tuple[str, TrainerState]:
    results = _results(skill, n)
    digest = run.save_skill(skill)
    run.eval_dir("val", digest).rollouts(results)
    state = TrainerState(fingerprint="f", steps_per_epoch=1, num_epochs=1, initial_hash="a",
                         current_hash="a", best_hash="a")
    state.put_score(score(results, "val", digest))
    return digest, state


def test_a_compacted_score_reads_back_equal(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    digest, state = _scored(run, "a skill")
    full = state.score("val", digest)
    state.compact(run)
    assert state.scores[f"val:{digest}"].per_task == {}
    assert state.score("val", digest) == full
    # Read from its checkpoint, a state gives the same score once it knows its run.
    again = TrainerState.model_validate(json.loads(state.model_dump_json()))
    again.compact(run)
    assert again.score("val", digest) == full
    # A skill that becomes the current one gets its per-task results back for good.
    again.current_hash = digest
    again.compact(run)
    assert again.scores[f"val:{digest}"] == full


def test_a_changed_or_missing_evaluation_folder_is_refused(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    digest, state = _scored(run, "a skill")
    state.compact(run)
    run.eval_dir("val", digest).rollouts(_results("another skill", 7))
    with pytest.raises(RunDirError, match="differ from the checkpoint's score"):
        state.score("val", digest)
    (run.eval_dir("val", digest).path / "rollouts.jsonl").unlink()
    with pytest.raises(RunDirError, match="evaluation results missing"):
        state.score("val", digest)


# ----------------------------------------------------------------------------- batches


def _reshuffled(tasks: list[Task], seed: int, epoch: int, step: int, size: int) -> list[Task]:
    """A batch the way the whole index list was shuffled anew for each one."""
    order = list(range(len(tasks)))
    random.Random(f"batch:{seed}:{epoch}").shuffle(order)
    start = (step * size) % len(order)
    return [tasks[order[(start + i) % len(order)]] for i in range(min(size, len(order)))]


def test_batches_keep_their_tasks_and_the_epoch_order_is_drawn_once() -> None:
    tasks = [Task(id=f"t{i}", prompt=str(i)) for i in range(23)]
    order = BatchOrder(tasks, seed=5)
    for epoch in (1, 2, 3):
        first = order.order(epoch)
        for step in range(9):  # wraps around the 23 tasks
            for size in (1, 4, 23, 40):
                expected = _reshuffled(tasks, 5, epoch, step, size)
                assert order.batch(epoch, step, size) == expected
                assert batch_for(tasks, 5, epoch, step, size) == expected
        assert order.order(epoch) is first  # drawn once for the epoch, not per batch
    assert list(order.order(1)) != list(order.order(2))


# ----------------------------------------------------------------------------- loading


def test_a_jsonl_file_is_read_a_line_at_a_time(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"question": f"q{i}", "answer": "a"}) + "\n"
                            for i in range(5)), encoding="utf-8")

    def whole(*args: object, **kwargs: object) -> None:
        raise AssertionError("the data file was read whole")

    monkeypatch.setattr(Path, "read_bytes", whole)
    monkeypatch.setattr(Path, "read_text", whole)
    records = iter_located_records(path)
    assert next(records) == (f"{path}: line 1", {"question": "q0", "answer": "a"})
    assert [r.question for r in parse_records(path, parse_record)] == [f"q{i}" for i in range(5)]


@pytest.mark.parametrize(("lines", "fragment"), [
    # A byte that is not UTF-8 anywhere is reported before a bad line ahead of it ...
    ([b"{oops", b'{"question": "q", "answer": "a"}', b'"\xff"'], "not valid UTF-8"),
    # ... and a bad line before a record that the environment refuses ahead of it.
    ([b'{"question": "", "answer": "a"}', b"[1]"], "line 2: expected a JSON object"),
    ([b'{"question": "", "answer": "a"}', b'{"question": "q", "answer": "a"}'],
     "line 1: key 'question'"),
])
def test_a_streamed_file_reports_the_error_reading_it_whole_would(
        tmp_path: Path, lines: list[bytes], fragment: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(DataError, match=fragment):
        parse_records(path, parse_record)
