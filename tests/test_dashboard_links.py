"""The dashboard reads a run's files only where they really lie inside the run directory (a
link out of it, to a file or a folder, is refused with a line that names it; a link within
it is followed), and a loopback dashboard answers only to a Host header that is exactly one
of its names with at most a port of digits."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")

from conftest import toy_config  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402

from skillgrad.dashboard.app import create_app  # noqa: E402
from skillgrad.dashboard.discover import discover  # noqa: E402

TESTS = Path(__file__).resolve().parent
SECRET = "TOP-SECRET-7f3a"  # what a file outside the run holds
REFUSED = "links to a file outside the run directory"
STEP = Path("steps") / "e01-s001"


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished toy run of two steps, trained once; each test works on its own copy."""
    folder = tmp_path_factory.mktemp("trained")
    toy_config(folder, train={"num_epochs": 1, "steps_per_epoch": 2, "batch_size": 100,
                              "seed": 7})
    path = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "skillgrad.cli", "train", "config.yaml",
                           "--out", "run"], cwd=folder, env={**os.environ, "PYTHONPATH": path},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return folder / "run"


@pytest.fixture
def site(trained: Path, tmp_path: Path) -> dict[str, Any]:
    """A copy of the run under ``runs/``, a folder ``outside`` it, and a client."""
    run = tmp_path / "runs" / "toy"
    shutil.copytree(trained, run)
    outside = tmp_path / "outside"
    outside.mkdir()
    client = TestClient(create_app([tmp_path / "runs"]))
    [run_id] = discover([tmp_path / "runs"]).runs
    return {"run": run, "outside": outside, "client": client, "id": run_id}


def _with_secret(path: Path) -> str:
    """``path`` (a step's apply report) with the content of its edits :data:`SECRET`: what
    the run's page shows of it."""
    data = json.loads(path.read_text())
    for outcome in data["outcomes"]:
        outcome["edit"]["content"] = SECRET
    return json.dumps(data)


def _shown(site: dict[str, Any]) -> list[tuple[str, int, str]]:
    """(url, status, text) of the run's page and its JSON."""
    urls = [f"/run/{site['id']}", f"/api/run/{site['id']}"]
    return [(url, r.status_code, r.text) for url in urls for r in [site["client"].get(url)]]


def test_a_file_of_a_run_that_links_out_of_it_is_not_shown(site: dict[str, Any]) -> None:
    report = site["run"] / STEP / "apply_report.json"
    secret = site["outside"] / "secret.json"
    secret.write_text(_with_secret(report))
    report.unlink()
    report.symlink_to(secret)
    for url, status, text in _shown(site):
        assert SECRET not in text, url
        assert status == 500 and REFUSED in text and "apply_report.json" in text, (url, text[:300])


def test_a_folder_of_a_run_that_links_out_of_it_is_not_shown(site: dict[str, Any]) -> None:
    step = site["run"] / STEP
    moved = site["outside"] / "step"
    shutil.move(step, moved)
    (moved / "apply_report.json").write_text(_with_secret(moved / "apply_report.json"))
    step.symlink_to(moved, target_is_directory=True)
    for url, status, text in _shown(site):
        assert SECRET not in text, url
        assert status == 500 and REFUSED in text, (url, text[:300])


def test_a_checkpoint_that_links_out_of_the_run_is_not_read(site: dict[str, Any]) -> None:
    checkpoint = site["run"] / "checkpoint.json"
    state = json.loads(checkpoint.read_text())
    state["meta_skill"] = SECRET
    (site["outside"] / "state.json").write_text(json.dumps(state))
    checkpoint.unlink()
    checkpoint.symlink_to(site["outside"] / "state.json")
    listing = site["client"].get("/")
    assert listing.status_code == 200 and "unreadable" in listing.text
    assert REFUSED in listing.text
    for url, _, text in _shown(site):
        assert SECRET not in text and REFUSED in text, url


def test_a_link_within_the_run_is_followed(site: dict[str, Any]) -> None:
    report = site["run"] / STEP / "apply_report.json"
    kept = site["run"] / "report-of-step-1.json"
    shutil.move(report, kept)
    report.symlink_to(Path("..") / ".." / kept.name)
    page = site["client"].get(f"/run/{site['id']}")
    assert page.status_code == 200 and REFUSED not in page.text


@pytest.mark.parametrize("host", [
    "127.0.0.1:8765@evil.example", "localhost:8765@evil.example", "[::1]:8765@evil.example",
    "127.0.0.1@evil.example", "127.0.0.1:8765:8765", "127.0.0.1:80a", "127.0.0.1:-1",
    "127.0.0.1:", "localhost:\uff18\uff17", "127.0.0.1 evil.example", "[::1]evil.example",
    "127.0.0.1.evil.example", "evil.example:8765", "", "user@localhost:8765",
])
def test_a_host_header_that_is_not_exactly_a_loopback_name_is_refused(
        trained: Path, host: str) -> None:
    client = TestClient(create_app([trained], hosts={"127.0.0.1", "localhost", "::1"}))
    response = client.get("/", headers={"host": host.encode("utf-8")})  # type: ignore[dict-item]
    assert response.status_code == 400, host
    assert "answers only to the address it listens on" in response.text


@pytest.mark.parametrize("host", ["127.0.0.1:8765", "127.0.0.1", "localhost:8765",
                                  "LocalHost", "[::1]:8765", "[::1]"])
def test_a_loopback_name_with_or_without_a_port_is_served(trained: Path, host: str) -> None:
    client = TestClient(create_app([trained], hosts={"127.0.0.1", "localhost", "::1"}))
    assert client.get("/", headers={"host": host}).status_code == 200, host
