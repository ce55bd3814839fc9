"""What the trackers keep holds no secret: W&B's run files (which it uploads) do not record the
command line, whose ``--set`` values may be secrets, and neither MLflow's store nor TensorBoard's
event files hold one; the parameters are the redacted config, with a fingerprint that does not
depend on any secret's value.

Nothing here reaches the network: W&B runs offline, MLflow writes a folder, and outbound
connections from this process are refused."""

from __future__ import annotations

import base64
import hashlib
import socket
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import toy_config

from skillgrad import Trainer
from skillgrad.config import load_config

SECRET = "cnry2tracked8812"


@pytest.fixture(autouse=True)
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_TOKEN", "WANDB_API_KEY",
                 "WANDB_BASE_URL", "WANDB_PROJECT", "WANDB_ENTITY"):
        monkeypatch.delenv(name, raising=False)
    env = {"MLFLOW_ALLOW_FILE_STORE": "true", "MLFLOW_DISABLE_TELEMETRY": "true",
           "DO_NOT_TRACK": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true",
           "WANDB_DISABLE_GIT": "true", "WANDB_CONSOLE": "off", "WANDB_X_DISABLE_STATS": "true",
           "WANDB_DIR": str(tmp_path / "wandb-default"),
           "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config"),
           "WANDB_CACHE_DIR": str(tmp_path / "wandb-cache"),
           "WANDB_DATA_DIR": str(tmp_path / "wandb-data")}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    real = socket.socket.connect

    def local_only(sock: socket.socket, address: Any) -> Any:
        if isinstance(address, tuple) and address[0] not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"a tracker test tried to reach {address}")
        return real(sock, address)

    monkeypatch.setattr(socket.socket, "connect", local_only)


def forms(secret: str) -> list[bytes]:
    raw = secret.encode()
    return [raw, base64.b64encode(raw), hashlib.sha256(raw).hexdigest().encode()]


def holding(folder: Path, secret: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file()
            for form in forms(secret) if form in p.read_bytes()]


def written_out(folder: Path, timeout: float = 60.0) -> list[Path]:
    """The ``.wandb`` files under ``folder`` once W&B has written them out: the last run's
    final summary is in one, and none has grown for a second. W&B's service may still be
    writing after ``finish()`` returned (or the process that logged exited)."""
    deadline = time.monotonic() + timeout
    sizes: list[int] = []
    while True:
        files = sorted(folder.rglob("run-*.wandb"))
        now = [f.stat().st_size for f in files]
        if (now == sizes and any(b"best_step" in f.read_bytes() for f in files)
                and all(size > 7 for size in now)):
            return files
        if time.monotonic() > deadline:
            raise AssertionError(f"no finished W&B run file under {folder}: {files}")
        sizes = now
        time.sleep(1.0)


def test_wandbs_run_files_do_not_record_a_secret_of_the_command_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = toy_config(tmp_path)
    given = f"model.target.extra_headers.X-Api-Key={SECRET}"
    monkeypatch.setattr(sys, "argv", ["skillgrad", "train", str(cfg), "--set", given])
    overrides = ["tracking.wandb.mode=offline", f"tracking.wandb.dir={tmp_path}",
                 f"tracking.mlflow.tracking_uri={tmp_path / 'mlruns'}",
                 f"tracking.tensorboard.log_dir={tmp_path / 'tb'}",
                 "train.num_epochs=1", "train.steps_per_epoch=1"]
    Trainer.from_config(cfg, overrides, out=tmp_path / "run").fit()
    files = written_out(tmp_path / "wandb")
    assert all(b"train.num_epochs" in f.read_bytes() for f in files)  # the params are there
    assert holding(tmp_path / "wandb", SECRET) == []
    assert holding(tmp_path / "mlruns", SECRET) == []
    events = list((tmp_path / "tb").rglob("*tfevents*"))
    assert events and all(b"train.num_epochs" in p.read_bytes() for p in events)
    assert holding(tmp_path / "tb", SECRET) == []


def test_the_logged_fingerprint_does_not_depend_on_a_secrets_value(tmp_path: Path) -> None:
    from skillgrad.tracking.base import run_params

    def params(key: str) -> dict[str, Any]:
        cfg = toy_config(tmp_path, model={"target": {
            "backend": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "m",
            "extra_headers": {"X-Api-Key": key}}})
        return run_params(load_config(cfg))

    first, second = params(SECRET), params("cnry2other5120")
    assert first == second
    assert first["model.target.extra_headers.X-Api-Key"] == "***"
    assert not [v for v in first.values() if any(f.decode() in str(v) for f in forms(SECRET))]
