"""Regenerate docs/dashboard.png: the dashboard's page of a toy run (the tests' scripted
target and optimizer: a harmful line rejected, then rules accepted one by one), taken with
headless Chromium.

    python tools/dashboard_screenshot.py            # needs the dashboard extra, Playwright
    python tools/dashboard_screenshot.py --out x.png    # and a Chromium (Debian: chromium)
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the toy task family and its scripted models

from conftest import toy_config  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from skillgrad.cli.dashboard import address, listen, make_server  # noqa: E402
from skillgrad.config import load_config  # noqa: E402
from skillgrad.dashboard.app import create_app  # noqa: E402
from skillgrad.dashboard.discover import discover  # noqa: E402
from skillgrad.trainer import build_trainer  # noqa: E402


def make_run(folder: Path) -> Path:
    cfg = toy_config(folder)
    out = folder / "runs" / "toy"
    build_trainer(load_config(cfg), out).fit()
    return out


def shoot(runs: Path, out: Path, width: int = 1200, height: int = 900) -> None:
    sock = listen("127.0.0.1", 0)
    server = make_server(create_app([runs]))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        [run_id] = discover([runs]).runs
        url = address("127.0.0.1", sock.getsockname()[1]) + f"run/{run_id}"
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=shutil.which("chromium"))
            page = browser.new_page(viewport={"width": width, "height": height})
            page.goto(url)
            page.wait_for_selector("svg.chart circle")
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out))
            browser.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard.png")
    args = parser.parse_args()
    if shutil.which("chromium") is None:
        sys.exit("error: no chromium on PATH (Debian: apt-get install chromium)")
    out = args.out.resolve()
    here = Path.cwd()
    with tempfile.TemporaryDirectory(prefix="skillgrad-dashboard-") as tmp:
        os.chdir(tmp)  # the page names the run as runs/toy
        try:
            make_run(Path("."))
            shoot(Path("runs"), out)
        finally:
            os.chdir(here)
    print(f"written: {out}")


if __name__ == "__main__":
    main()
