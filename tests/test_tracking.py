"""Experiment trackers: a scripted toy run logged to a local MLflow store and to an offline
W&B run, both read back and compared with the run's own records (TensorBoard's event files:
test_tracking_tensorboard.py); a run logged to MLflow's SQLite store; a resumed run continues the
same tracker runs and logs nothing twice; credentials in the tracking URI, a missing library
and a tracker that cannot start each stop the run in one line before any model call; a tracker
that fails in the middle does not stop the training; replay and --dry-run start no tracker.

Nothing here reaches the network: W&B runs offline, MLflow writes a folder, outbound
connections from this process are refused and the proxies point at a closed local port."""

from __future__ import annotations

import json
import socket
import struct
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from conftest import toy_config
from e2e import cli, one_line_error
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient
from pydantic import BaseModel
from test_api import SKILL, models, sums
from test_runs_cli import _train
from wandb.proto import wandb_internal_pb2

from skillgrad import Trainer, optimize
from skillgrad.callbacks import TrainerCallback
from skillgrad.config import MlflowTracking, ResolvedConfig, SkillgradConfig, load_config
from skillgrad.envs.qa import QAOptions
from skillgrad.errors import ConfigError
from skillgrad.records import StepRecord
from skillgrad.rundir import RunDir, read_jsonl
from skillgrad.tracking import Tracker
from skillgrad.tracking.base import run_params
from skillgrad.tracking.mlflow import MlflowTracker, tracking_uri
from skillgrad.tracking.wandb import WandbTracker
from skillgrad.trainer import build_trainer

ONE_EPOCH = ["train.num_epochs=1", "train.steps_per_epoch=3"]
EXPERIMENT = "skillgrad-tests"


def _quiet_offline_env(mp: pytest.MonkeyPatch, home: Path) -> None:
    """Both libraries offline, silent and writing only under ``home``."""
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_TOKEN", "WANDB_API_KEY",
                 "WANDB_BASE_URL", "WANDB_PROJECT", "WANDB_ENTITY"):
        mp.delenv(name, raising=False)
    env = {
        # MLflow 3 keeps the plain-folder store only on request (its default is SQLite, which
        # needs SQLAlchemy; mlflow-skinny does not bring it).
        "MLFLOW_ALLOW_FILE_STORE": "true", "MLFLOW_DISABLE_TELEMETRY": "true",
        "DO_NOT_TRACK": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true",
        "WANDB_DISABLE_GIT": "true", "WANDB_DISABLE_CODE": "true", "WANDB_CONSOLE": "off",
        "WANDB_X_DISABLE_STATS": "true", "WANDB_DIR": str(home / "wandb-default"),
        "WANDB_CONFIG_DIR": str(home / "wandb-config"),
        "WANDB_CACHE_DIR": str(home / "wandb-cache"), "WANDB_DATA_DIR": str(home / "wandb-data"),
        "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
    }
    for name, value in env.items():
        mp.setenv(name, value)
    real = socket.socket.connect

    def local_only(sock: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"a tracker test tried to reach {address}")
        return real(sock, address)

    mp.setattr(socket.socket, "connect", local_only)


@pytest.fixture(autouse=True)
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _quiet_offline_env(monkeypatch, tmp_path)


def _tracking(base: Path) -> list[str]:
    """Overrides that log to an MLflow folder and an offline W&B run under ``base``."""
    return [f"tracking.mlflow.tracking_uri={base / 'mlruns'}",
            f"tracking.mlflow.experiment={EXPERIMENT}", "tracking.mlflow.tags={team: tests}",
            "tracking.wandb.mode=offline", f"tracking.wandb.dir={base / 'wandb'}",
            "tracking.wandb.project=skillgrad-tests", "tracking.wandb.tags=[toy]"]


def _client(base: Path) -> MlflowClient:
    return MlflowClient(tracking_uri=(base / "mlruns").as_uri())


def _history(run: Path) -> list[StepRecord]:
    state = json.loads((run / "checkpoint.json").read_text())
    return [StepRecord.model_validate(r) for r in state["history"]]


def _series(client: MlflowClient, run_id: str, key: str) -> list[tuple[int, float]]:
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def _mlflow_runs(base: Path, name: str = EXPERIMENT) -> list[Any]:
    client = _client(base)
    experiment = client.get_experiment_by_name(name)
    return [] if experiment is None else client.search_runs([experiment.experiment_id])


# ----------------------------------------------------------------------------- W&B's run files


def _records(path: Path) -> Iterator[Any]:
    """The records of a ``.wandb`` file: a 7-byte header (``:W&B``, a magic number, a
    version), then 32 KiB blocks of chunks, each with a 7-byte header (checksum, length, kind:
    1 whole, 2 first, 3 middle, 4 last); a block's tail too short for a header is padding."""
    data, block, pos, parts = path.read_bytes(), 32768, 7, b""
    assert data[:4] == b":W&B", path
    while pos + 7 <= len(data):
        left = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if left < 7 or (kind == 0 and length == 0):
            pos += left
            continue
        parts += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()  # type: ignore[attr-defined]
            record.ParseFromString(parts)
            parts = b""
            yield record


def _item(item: Any) -> tuple[str, Any]:
    return (item.key or "/".join(item.nested_key)), json.loads(item.value_json)


class OfflineRun:
    """What the offline W&B run folders of one run id hold, every segment (a resume writes
    another folder of the same id) read in order."""

    def __init__(self, folder: Path, run_id: str) -> None:
        # offline-run-<started>-<id>, with -1, -2, ... when two start in the same second
        self.segments = sorted(folder.glob(f"wandb/offline-run-*-{run_id}*"))
        self.config: dict[str, Any] = {}
        self.rows: list[dict[str, Any]] = []
        self.summary: dict[str, Any] = {}
        self.ids: set[str] = set()
        for segment in self.segments:
            for record in _records(next(segment.glob("run-*.wandb"))):
                kind = record.WhichOneof("record_type")
                if kind == "run":
                    self.ids.add(record.run.run_id)
                    self.config.update(_item(i) for i in record.run.config.update)
                elif kind == "config":
                    self.config.update(_item(i) for i in record.config.update)
                elif kind == "history":
                    self.rows.append(dict(_item(i) for i in record.history.item))
                elif kind == "summary":
                    self.summary.update(_item(i) for i in record.summary.update)

    def series(self, key: str) -> list[tuple[int, float]]:
        return [(row["_step"], row[key]) for row in self.rows if key in row]


# ----------------------------------------------------------------------------- one tracked run


@pytest.fixture(scope="module")
def tracked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A toy run (6 steps, accepts and rejects) logged to both trackers: (base, run dir)."""
    base = tmp_path_factory.mktemp("tracked")
    with pytest.MonkeyPatch.context() as mp:
        _quiet_offline_env(mp, base)
        run = _train(base, overrides=_tracking(base))
        yield base, run


def test_the_mlflow_run_holds_the_config_every_step_and_the_artifacts(
        tracked: tuple[Path, Path], tmp_path: Path) -> None:
    base, run = tracked
    client = _client(base)
    (found,) = _mlflow_runs(base)
    run_id = found.info.run_id
    assert RunDir(run).read_tracking()["mlflow"]["run_id"] == run_id
    assert found.info.run_name == "run" and found.info.status == "FINISHED"
    assert found.data.tags["team"] == "tests"

    resolved = load_config(base / "config.yaml", _tracking(base))
    params = found.data.params
    assert params["skillgrad.fingerprint"] == resolved.fingerprint()
    assert params["train.num_epochs"] == "2" and params["train.batch_size"] == "100"
    assert params["model.target.backend"] == "scripted"
    assert params["env.split_ratio"] == "[0.5, 0.25, 0.25]"
    assert params["tracking.mlflow.experiment"] == EXPERIMENT

    history = _history(run)
    assert [r.global_step for r in history] == [1, 2, 3, 4, 5, 6]
    assert {r.decision for r in history} >= {"accept_new_best", "reject"}
    steps = [r.global_step for r in history]
    assert _series(client, run_id, "train/hard") == [(r.global_step, r.train_hard)
                                                     for r in history]
    assert _series(client, run_id, "gate/accepted") == [
        (r.global_step, 1.0 if r.decision.startswith("accept") else 0.0) for r in history]
    assert _series(client, run_id, "selection/candidate") == [
        (r.global_step, r.candidate_score) for r in history if r.candidate_score is not None]
    assert _series(client, run_id, "selection/best") == [
        (r.global_step, r.best_score) for r in history if r.best_score is not None]
    assert _series(client, run_id, "optimizer/budget") == [(s, 1.0) for s in steps]
    assert _series(client, run_id, "edits/applied") == [
        (r.global_step, float(r.n_applied + r.n_fuzzy)) for r in history]
    assert _series(client, run_id, "edits/proposed") == [
        (r.global_step, float(r.n_proposed)) for r in history]
    calls = _series(client, run_id, "usage/calls")
    assert [s for s, _ in calls] == steps
    assert calls[0][1] > 0 and all(a[1] <= b[1] for a, b in zip(calls, calls[1:], strict=False))

    # Scores: the initial skill's at step 0, each new candidate's at the step that made it.
    state = json.loads((run / "checkpoint.json").read_text())
    seen = {state["initial_hash"]}
    expected = [(0, state["scores"][f"val:{state['initial_hash']}"]["hard"])]
    for r in history:
        if r.candidate_hash and r.candidate_hash not in seen and r.candidate_score is not None:
            seen.add(r.candidate_hash)
            expected.append((r.global_step, r.candidate_score))
    assert _series(client, run_id, "val/hard") == expected

    summary = json.loads((run / "summary.json").read_text())
    for name in ("initial", "best", "final"):
        assert _series(client, run_id, f"test/{name}/hard") == [(6, summary["test"][name]["hard"])]
    assert {s for s, _ in _series(client, run_id, "test/hard")} == {6}
    assert _series(client, run_id, "best_step") == [(6, float(summary["best_step"]))]

    names = {a.path for a in client.list_artifacts(run_id)}
    assert names == {"best_skill.md", "summary.json"}
    skill = Path(client.download_artifacts(run_id, "best_skill.md", str(tmp_path)))
    assert skill.read_bytes() == (run / "best_skill.md").read_bytes()
    copied = Path(client.download_artifacts(run_id, "summary.json", str(tmp_path)))
    assert json.loads(copied.read_text()) == summary


def test_the_offline_wandb_run_holds_the_config_a_row_per_step_and_the_summary(
        tracked: tuple[Path, Path]) -> None:
    base, run = tracked
    run_id = RunDir(run).read_tracking()["wandb"]["run_id"]
    offline = OfflineRun(base / "wandb", run_id)
    assert len(offline.segments) == 1 and offline.ids == {run_id}
    resolved = load_config(base / "config.yaml", _tracking(base))
    assert offline.config["skillgrad.fingerprint"] == resolved.fingerprint()
    assert offline.config["train.num_epochs"] == 2
    assert offline.config["evaluation.gate_test"] == "strict"

    history = _history(run)
    rows = [row for row in offline.rows if "train/hard" in row]
    assert [row["_step"] for row in rows] == [r.global_step for r in history]
    assert offline.series("train/soft") == [(r.global_step, r.train_soft) for r in history]
    assert offline.series("selection/current") == [
        (r.global_step, r.current_score) for r in history if r.current_score is not None]
    assert offline.series("val/hard")[0][0] == 0  # the initial skill, before any step

    summary = json.loads((run / "summary.json").read_text())
    for name in ("initial", "best", "final"):
        assert offline.summary[f"test/{name}/hard"] == summary["test"][name]["hard"]
        assert offline.summary[f"test/{name}/soft"] == summary["test"][name]["soft"]
    assert offline.summary["best_step"] == summary["best_step"]
    files = offline.segments[0] / "files"
    assert (files / "best_skill.md").read_bytes() == (run / "best_skill.md").read_bytes()
    assert json.loads((files / "summary.json").read_text()) == summary


def test_replay_and_dry_run_start_no_tracker(tracked: tuple[Path, Path], tmp_path: Path) -> None:
    base, recorded = tracked
    before = sorted(p.name for p in (base / "wandb" / "wandb").iterdir())
    cfg = toy_config(tmp_path)
    trainer = build_trainer(load_config(cfg, _tracking(base)), tmp_path / "replayed",
                            replay=recorded)
    assert not any(isinstance(cb, Tracker) for cb in trainer.callbacks)
    trainer.fit()
    assert len(_mlflow_runs(base)) == 1
    assert sorted(p.name for p in (base / "wandb" / "wandb").iterdir()) == before
    assert not (tmp_path / "replayed" / "tracking.json").exists()

    elsewhere = tmp_path / "dry"
    sets = [a for o in _tracking(elsewhere) for a in ("--set", o)]
    proc = cli("train", str(cfg), "--dry-run", *sets, env={"MLFLOW_ALLOW_FILE_STORE": "true"})
    assert proc.returncode == 0, proc.stderr
    assert not elsewhere.exists()


def test_trainers_built_from_a_config_get_its_trackers_after_the_callbacks_given(
        toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    mine = TrainerCallback()
    trainer = Trainer.from_config(cfg, _tracking(toy_dir), toy_dir / "run", callbacks=[mine])
    assert [type(cb) for cb in trainer.callbacks] == [TrainerCallback, MlflowTracker,
                                                      WandbTracker]
    assert trainer.callbacks[0] is mine
    assert Trainer.from_config(cfg, out=toy_dir / "plain").callbacks == []


def test_optimize_logs_to_the_trackers_of_its_tracking_section(tmp_path: Path) -> None:
    store, scripted = tmp_path / "mlruns", models()
    result = optimize(sums(12), valset=sums(6, offset=50), metric=lambda a, t: a == t["answer"],
                      initial_skill=SKILL, target=scripted["target"],
                      optimizer=scripted["optimizer"], out=tmp_path / "run",
                      train={"num_epochs": 1, "batch_size": 6},
                      tracking={"mlflow": {"tracking_uri": str(store)}})
    (found,) = _mlflow_runs(tmp_path, "skillgrad")
    assert found.info.status == "FINISHED" and found.info.run_name == "run"
    history = _history(result.run_dir)
    assert _series(_client(tmp_path), found.info.run_id, "train/hard") == [
        (r.global_step, r.train_hard) for r in history]


# ----------------------------------------------------------------------------- resume


class _Interrupt(TrainerCallback):
    """Interrupts the run: at the ``n``-th start of ``stage``, or at the end of step ``n``
    (``stage`` "step_end", before the trackers, which follow this callback, see it)."""

    def __init__(self, stage: str, n: int) -> None:
        self.stage, self.n = stage, n

    def on_stage_start(self, stage: str, total: int | None) -> None:
        if stage == self.stage:
            self.n -= 1
            if self.n == 0:
                raise KeyboardInterrupt

    def on_step_end(self, record: StepRecord) -> None:
        if self.stage == "step_end" and record.global_step == self.n:
            raise KeyboardInterrupt


@pytest.mark.parametrize("stage, n", [("reflect", 2), ("step_end", 1)],
                         ids=["inside-step-2", "before-the-trackers-saw-step-1"])
def test_a_resumed_run_continues_the_same_tracker_runs_and_logs_nothing_twice(
        tmp_path: Path, stage: str, n: int) -> None:
    overrides = [*ONE_EPOCH, *_tracking(tmp_path)]
    run = tmp_path / "run"
    trainer = build_trainer(load_config(toy_config(tmp_path), overrides), run,
                            callbacks=[_Interrupt(stage, n)])
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    for tracker in trainer.callbacks:  # what W&B's exit hook does as the process ends
        if isinstance(tracker, WandbTracker):
            tracker.wandb_run.finish(exit_code=130)
    first = RunDir(run).read_tracking()
    assert first["mlflow"]["step"] == (1 if stage == "reflect" else 0)
    (interrupted,) = _mlflow_runs(tmp_path)
    assert interrupted.info.status == "RUNNING"

    _train(tmp_path, overrides=overrides)
    again = RunDir(run).read_tracking()
    assert again["mlflow"]["run_id"] == first["mlflow"]["run_id"]
    assert again["wandb"]["run_id"] == first["wandb"]["run_id"]
    assert again["mlflow"]["step"] == again["wandb"]["step"] == 3

    history = _history(run)
    (finished,) = _mlflow_runs(tmp_path)
    run_id = finished.info.run_id
    assert run_id == first["mlflow"]["run_id"] and finished.info.status == "FINISHED"
    client = _client(tmp_path)
    assert _series(client, run_id, "train/hard") == [(r.global_step, r.train_hard)
                                                     for r in history]
    val = _series(client, run_id, "val/hard")
    assert len(val) == len(set(val)) and val[0][0] == 0

    offline = OfflineRun(tmp_path / "wandb", first["wandb"]["run_id"])
    assert len(offline.segments) == 2 and offline.ids == {first["wandb"]["run_id"]}
    assert offline.series("train/hard") == [(r.global_step, r.train_hard) for r in history]
    assert [s for s, _ in offline.series("val/hard")].count(0) == 1


# ----------------------------------------------------------------------------- failures


@pytest.mark.parametrize("uri", ["https://me:s3cretpw@mlflow.example.com",
                                 "https://mlflow.example.com/?token=s3cretpw"])
def test_a_credential_in_the_tracking_uri_is_a_config_error_naming_the_key(
        toy_dir: Path, uri: str) -> None:
    cfg = toy_config(toy_dir)
    with pytest.raises(ConfigError) as caught:
        load_config(cfg, [f"tracking.mlflow.tracking_uri={uri}"])
    message = str(caught.value)
    assert "\n" not in message and "s3cretpw" not in message
    assert message.startswith("--set: tracking.mlflow.tracking_uri: holds a credential")


def test_the_cli_refuses_a_credential_in_the_tracking_uri_in_one_line(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    proc = cli("train", str(cfg), "--out", str(toy_dir / "run"), "--set",
               "tracking.mlflow.tracking_uri=http://me:s3cretpw@127.0.0.1:5000")
    line = one_line_error(proc)
    assert "tracking.mlflow.tracking_uri" in line and "s3cretpw" not in proc.stderr
    assert not (toy_dir / "run").exists()


def _hide(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Importing ``module`` (or a module of it) fails from now on, as if not installed."""
    for loaded in [m for m in sys.modules if m == module or m.startswith(module + ".")]:
        monkeypatch.setitem(sys.modules, loaded, None)
    monkeypatch.setitem(sys.modules, module, None)


@pytest.mark.parametrize("key, module, name", [("mlflow", "mlflow", "MLflow"),
                                               ("wandb", "wandb", "W&B"),
                                               ("tensorboard", "tensorboard", "TensorBoard")])
def test_a_missing_library_stops_the_run_before_any_model_call_in_one_line(
        toy_dir: Path, monkeypatch: pytest.MonkeyPatch, key: str, module: str,
        name: str) -> None:
    _hide(monkeypatch, module)
    resolved = load_config(toy_config(toy_dir), [*_tracking(toy_dir), "tracking.tensorboard={}"])
    with pytest.raises(ConfigError) as caught:
        build_trainer(resolved, toy_dir / "run")
    assert str(caught.value) == f"tracking.{key} needs {name}: pip install 'skillgrad[{key}]'"
    assert not (toy_dir / "run").exists()


@pytest.mark.parametrize("hidden, named", [("sqlalchemy", "SQLAlchemy and Alembic"),
                                           ("alembic", "Alembic")])
def test_a_database_store_without_its_libraries_stops_the_run_in_one_line(
        toy_dir: Path, monkeypatch: pytest.MonkeyPatch, hidden: str, named: str) -> None:
    """mlflow-skinny alone cannot open sqlite:///mlflow.db (MLflow's error only calls the URI
    unsupported): the line names what is missing and the extra that brings it."""
    _hide(monkeypatch, hidden)
    if hidden == "sqlalchemy":
        _hide(monkeypatch, "alembic")  # Alembic is made of SQLAlchemy
    uri = f"sqlite:///{toy_dir}/mlflow.db"
    resolved = load_config(toy_config(toy_dir), [f"tracking.mlflow.tracking_uri={uri}"])
    with pytest.raises(ConfigError) as caught:
        build_trainer(resolved, toy_dir / "run")
    assert str(caught.value) == (f"tracking.mlflow: the store {uri} needs {named}: "
                                 "pip install 'skillgrad[mlflow]'")
    assert not (toy_dir / "run").exists() and not (toy_dir / "mlflow.db").exists()


def test_a_run_logs_to_the_sqlite_database_the_docs_offer_first(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tracking_uri: sqlite:///mlflow.db``, as the docs give it: a database in the working
    folder (MLflow keeps the artifacts beside it, in ./mlruns)."""
    monkeypatch.chdir(tmp_path)
    run = _train(tmp_path, overrides=[*ONE_EPOCH,
                                      "tracking.mlflow.tracking_uri=sqlite:///mlflow.db"])
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db")
    (found,) = client.search_runs([client.get_experiment_by_name("skillgrad").experiment_id])
    assert found.info.status == "FINISHED"
    assert found.info.run_id == RunDir(run).read_tracking()["mlflow"]["run_id"]
    history = _history(run)
    assert [r.global_step for r in history] == [1, 2, 3]
    assert _series(client, found.info.run_id, "train/hard") == [
        (r.global_step, r.train_hard) for r in history]
    assert _series(client, found.info.run_id, "usage/calls")[-1][0] == 3
    summary = json.loads((run / "summary.json").read_text())
    assert _series(client, found.info.run_id, "test/best/hard") == [
        (3, summary["test"]["best"]["hard"])]
    assert found.data.params["skillgrad.fingerprint"] == load_config(
        tmp_path / "config.yaml", ONE_EPOCH).fingerprint()
    assert {a.path for a in client.list_artifacts(found.info.run_id)} == {
        "best_skill.md", "summary.json"}


def test_a_tracker_that_cannot_start_stops_the_run_before_any_model_call(toy_dir: Path) -> None:
    resolved = load_config(toy_config(toy_dir), ["tracking.mlflow.tracking_uri=nosuch://x"])
    trainer = build_trainer(resolved, toy_dir / "run")
    with pytest.raises(ConfigError) as caught:
        trainer.fit()
    message = str(caught.value)
    assert message.startswith("tracking.mlflow: cannot start the MLflow run: ")
    assert "nosuch://x" in message and "\n" not in message
    assert trainer.target.meter.totals().calls == 0
    assert not (toy_dir / "run").exists()  # no half-made run directory is left behind


class FlakyClient(MlflowClient):
    """An MLflow client whose server goes away once step 2 is logged."""

    def log_batch(self, run_id: str, metrics: Sequence[Metric] = (), params: Sequence[Any] = (),
                  tags: Sequence[Any] = (), synchronous: bool | None = None) -> Any:
        if any(m.step >= 2 for m in metrics):
            raise ConnectionError("the tracking server went away")
        return super().log_batch(run_id, metrics, params, tags, synchronous=synchronous)


def test_a_tracker_failing_in_the_middle_turns_itself_off_and_training_goes_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    resolved = load_config(toy_config(tmp_path), ONE_EPOCH)
    tracker = MlflowTracker(resolved, RunDir(tmp_path / "run"),
                            client=FlakyClient(tracking_uri=(tmp_path / "mlruns").as_uri()))
    with caplog.at_level("WARNING", logger="skillgrad.tracking"):
        run = _train(tmp_path, overrides=ONE_EPOCH, callbacks=[tracker])
    assert (run / "summary.json").exists() and [r.global_step for r in _history(run)] == [1, 2, 3]
    assert tracker.failures == 1
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("skillgrad.tracking")]
    assert len(warnings) == 1
    assert warnings[0].startswith("tracking.mlflow: MLflow failed (the tracking server went away)")
    events = [e for e in read_jsonl(run / "events.jsonl") if e["event"] == "tracker_failed"]
    assert [e["tracker"] for e in events] == ["mlflow"]
    (flaky,) = _mlflow_runs(tmp_path, "skillgrad")  # the default experiment
    assert tracker.run_id is not None
    assert flaky.info.run_id == tracker.run_id and flaky.info.status == "RUNNING"
    assert _series(_client(tmp_path), tracker.run_id, "train/hard") == [
        (1, _history(run)[0].train_hard)]


# ----------------------------------------------------------------------------- the config


class KeyOptions(BaseModel):
    api_key: str
    base_url: str


def test_params_are_the_redacted_config_plus_fingerprint_and_version() -> None:
    raw = {"model": {"target": {"backend": "fake"}}, "env": {"name": "qa"}}
    resolved = ResolvedConfig(
        SkillgradConfig.model_validate(raw), QAOptions(),
        {"target": KeyOptions(api_key="sk-123456", base_url="http://u:pw123456@h/v1")},
        Path("."), raw=raw)
    params = run_params(resolved)
    assert params["model.target.api_key"] == "***"
    assert params["model.target.base_url"] == "http://***@h/v1"
    assert "sk-123456" not in json.dumps(params) and "pw123456" not in json.dumps(params)
    assert params["optimizer.learning_rate"] == 4 and params["tracking.mlflow"] is None
    assert params["skillgrad.fingerprint"] == resolved.fingerprint()
    assert params["skillgrad.version"] == __import__("skillgrad").__version__


def test_trackers_do_not_change_the_fingerprint(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    assert (load_config(cfg, _tracking(toy_dir)).fingerprint()
            == load_config(cfg).fingerprint())


def test_the_tracking_section_rejects_unknown_keys(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    with pytest.raises(ConfigError, match=r"unknown key 'tracking.wandb.api_key' \(allowed "
                                          r"here: dir, entity, mode, project, run_name, tags\)"):
        load_config(cfg, ["tracking.wandb.api_key=abc"])


@pytest.mark.parametrize("given, expected", [
    ("./mlruns", "{base}/mlruns"), ("runs/../mlruns", "{base}/mlruns"),
    ("/srv/mlruns", "/srv/mlruns"), ("sqlite:///mlflow.db", "sqlite:///mlflow.db"),
    ("http://127.0.0.1:5000", "http://127.0.0.1:5000"), ("databricks", "databricks"),
    (None, None)])
def test_a_tracking_folder_is_read_from_the_configs_folder(
        tmp_path: Path, given: str | None, expected: str | None) -> None:
    uri = tracking_uri(MlflowTracking(tracking_uri=given), tmp_path)
    if expected is not None and expected.startswith(("{base}", "/")):
        expected = Path(expected.format(base=tmp_path.resolve())).as_uri()
    assert uri == expected


def test_train_says_where_each_tracker_logs_the_run(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir, train={"num_epochs": 1, "steps_per_epoch": 1})
    env = {"MLFLOW_ALLOW_FILE_STORE": "true", "MLFLOW_DISABLE_TELEMETRY": "true",
           "DO_NOT_TRACK": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_DIR": str(toy_dir / "wandb-default"),
           "WANDB_CONFIG_DIR": str(toy_dir / "wandb-config"),
           "WANDB_CACHE_DIR": str(toy_dir / "wandb-cache")}
    tensorboard = toy_dir / "tensor board"  # said as a command to paste: quoted
    sets = [a for o in [*_tracking(toy_dir), f"tracking.tensorboard.log_dir={tensorboard}"]
            for a in ("--set", o)]
    proc = cli("train", str(cfg), "--out", str(toy_dir / "run"), *sets, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    entries = RunDir(toy_dir / "run").read_tracking()
    mlflow_id, wandb_id = entries["mlflow"]["run_id"], entries["wandb"]["run_id"]
    said = " ".join(proc.stderr.split())
    assert (f"tracking.mlflow: logging to MLflow run {mlflow_id} (tracking_uri "
            f"{(toy_dir / 'mlruns').as_uri()})") in said, said
    assert f"tracking.wandb: logging to W&B run {wandb_id} (skillgrad-tests/{wandb_id}" in said
    assert ("tracking.tensorboard: logging to TensorBoard run run (tensorboard --logdir "
            f"'{tensorboard}')") in said, said
    assert entries["tensorboard"]["run_id"] == "run"
