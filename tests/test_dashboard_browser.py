"""The dashboard in a real headless Chromium, served by ``skillgrad dashboard`` itself: every
page loads without a console error, the curves have their points, the diff shows the changed
lines, a step the trainer writes appears on an open page without a reload, and a bind to an
address that is not exempt asks for the token.

Needs Playwright and a ``chromium`` on PATH (browsers are not downloaded); skipped without
them unless ``SKILLGRAD_REQUIRE_BROWSER=1``."""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

_MISSING = [name for name, found in (("chromium", shutil.which("chromium")),
                                     ("playwright", find_spec("playwright")),
                                     ("starlette", find_spec("starlette"))) if found is None]
if _MISSING:
    if os.environ.get("SKILLGRAD_REQUIRE_BROWSER") == "1":
        pytest.fail(f"SKILLGRAD_REQUIRE_BROWSER=1 but missing: {', '.join(_MISSING)}",
                    pytrace=False)
    pytest.skip(f"browser tests need {', '.join(_MISSING)}", allow_module_level=True)

import toy  # noqa: E402
from playwright.sync_api import Browser, Page, sync_playwright  # noqa: E402
from test_runs_cli import ONE_EPOCH, _train  # noqa: E402

from skillgrad.callbacks import TrainerCallback  # noqa: E402
from skillgrad.dashboard.discover import discover  # noqa: E402
from skillgrad.records import StepRecord  # noqa: E402
from skillgrad.sleep.cycle import run_night  # noqa: E402
from skillgrad.sleep.demo import write_demo  # noqa: E402

TESTS = Path(__file__).parent
NOW = datetime(2026, 3, 9, 3, 17, tzinfo=timezone.utc)


@contextmanager
def serve(*args: str) -> Iterator[str]:
    """``skillgrad dashboard ARGS --port 0`` in a process of its own; the address it prints."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(TESTS), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "skillgrad.cli", "dashboard", *args,
                             "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        line = proc.stdout.readline() if ready else ""
        found = re.match(r"dashboard: (\S+) \(Ctrl-C stops it\)", line)
        assert found, (line, proc.poll(), proc.stderr.read() if proc.poll() is not None else "")
        yield found.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=shutil.which("chromium"))
        yield chromium
        chromium.close()


@dataclass
class Tab:
    """A browser tab and the errors its pages reported (console errors, uncaught ones)."""

    page: Page
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def tab(browser: Browser) -> Iterator[Tab]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    found = Tab(context.new_page())
    found.page.set_default_timeout(15_000)
    found.page.on("console", lambda m: m.type == "error" and found.errors.append(m.text))
    found.page.on("pageerror", lambda e: found.errors.append(str(e)))
    yield found
    context.close()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("browser")
    _train(base / "runs" / "mixed", "mixed_optimizer", [*ONE_EPOCH, "optimizer.learning_rate=3"])
    _train(base / "runs" / "learned", overrides=["train.num_epochs=1"])
    project, claude = write_demo(base / "demo", NOW, scripted=True)
    night = run_night(project, home=base / "home", environ={"CLAUDE_CONFIG_DIR": str(claude)},
                      now=NOW).night
    sources = [base / "runs", base / "demo"]
    with serve(*map(str, sources)) as url:
        yield {"url": url, "catalog": discover(sources), "night": night}


def _run_id(folder: dict[str, Any], name: str) -> str:
    return next(i for i, ref in folder["catalog"].runs.items() if f"/{name}/" in f"{ref.path}/")


def test_every_page_loads_without_a_console_error(folder: dict[str, Any], tab: Tab) -> None:
    page = tab.page
    url, catalog = folder["url"], folder["catalog"]
    [project] = catalog.projects
    mixed, learned = _run_id(folder, "mixed"), _run_id(folder, "learned")
    paths = ["", f"run/{mixed}", f"run/{learned}", f"run/{mixed}/skill?v=initial",
             f"run/{mixed}/diff", f"run/{mixed}/rollouts", f"run/{learned}/rollouts?failed=1",
             f"compare?run={mixed}&run={learned}", "compare",
             f"sleep/{project}", f"sleep/{project}/{folder['night']}"]
    for path in paths:
        response = page.goto(url + path)
        assert response is not None and response.status == 200, path
        if path.startswith("run/") and "/" not in path[4:] or path.startswith("compare?"):
            assert page.locator("svg.chart circle.pt").count() > 0, path
    page.goto(url + f"run/{learned}")
    page.wait_for_timeout(1800)  # one poll of the live script
    assert page.locator("svg.chart circle.pt.s-cand.reject").count() == 1
    assert tab.errors == []


def test_the_diff_page_shows_the_changed_lines(folder: dict[str, Any], tab: Tab) -> None:
    page = tab.page
    page.goto(folder["url"] + f"run/{_run_id(folder, 'mixed')}/diff?a=initial&b=best")
    added = page.locator("table.diff tr.added", has_text=toy.rule("year"))
    removed = page.locator("table.diff tr.removed", has_text="Answer the question about the item.")
    assert added.count() == 1 and added.is_visible()
    assert removed.count() == 1 and removed.is_visible()
    assert tab.errors == []


def _shot(page: Page, folder: Path, name: str, **options: Any) -> Path:
    """A screenshot of ``page`` into ``folder``; a copy also into $SKILLGRAD_DASHBOARD_SHOTS
    when it is set (to look at what the tests saw)."""
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), **options)
    keep = os.environ.get("SKILLGRAD_DASHBOARD_SHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)
    return path


def test_the_runs_list_and_a_runs_config_and_charts_read_well(
        folder: dict[str, Any], tab: Tab, tmp_path: Path) -> None:
    page, mixed = tab.page, _run_id(folder, "mixed")
    page.goto(folder["url"])
    row = page.locator(f"#run-{mixed}")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d\s+\d\d:\d\d", row.locator("td.when").inner_text())
    settings = row.locator("td.settings")
    assert "lr 3 constant" in settings.inner_text() and settings.is_visible()
    assert _shot(page, tmp_path, "runs").stat().st_size > 0

    page.goto(folder["url"] + f"run/{mixed}")
    roles = page.locator("table.roles")
    assert roles.is_visible() and "test_runs_cli:mixed_optimizer" in roles.inner_text()
    assert page.locator("table.set-keys", has_text="optimizer.learning_rate").is_visible()
    full = page.locator("details.config")
    assert not full.locator("pre").is_visible()
    full.locator("summary").click()
    assert full.locator("pre").is_visible() and "max_tokens: 2048" in full.inner_text()
    _shot(page, tmp_path, "run-config", full_page=True)

    chart = page.locator("figure", has=page.locator("svg.chart")).first
    chart.scroll_into_view_if_needed()
    for text in ("text.x-tick", "text.y-tick", "text.x-label", "text.y-label"):
        box = chart.locator(text).first.bounding_box()
        assert box is not None, text
        across = box["width"] if text == "text.y-label" else box["height"]  # turned up
        assert across >= 10, (text, box)  # drawn at a readable size
    point = chart.locator("circle.pt.s-train").nth(1)
    point.hover()
    tip = page.locator(".chart-tip")
    tip.wait_for(state="visible")
    assert re.fullmatch(r"training batch: step 2 \(e01-s002\): \d\.\d{3} hard, "
                        r"\d\.\d{3} soft", tip.inner_text())
    _shot(page, tmp_path, "chart-hover", clip=_around(chart.bounding_box()))
    page.mouse.move(0, 0)
    tip.wait_for(state="hidden")
    assert tab.errors == []


def test_the_rollouts_page_filters_and_opens_a_long_reply(
        folder: dict[str, Any], tab: Tab, tmp_path: Path) -> None:
    page, mixed = tab.page, _run_id(folder, "mixed")
    page.goto(folder["url"] + f"run/{mixed}")
    page.locator("a", has_text="rollouts").first.click()
    page.wait_for_url(re.compile(r".*/rollouts$"))
    rows = page.locator("table.rollouts tbody tr")
    total = rows.count()
    assert total > 0 and rows.first.get_attribute("class") == "failed"
    _shot(page, tmp_path, "rollouts", full_page=True)
    page.select_option("select[name=step]", "e01-s001")
    page.select_option("select[name=split]", "train")
    page.check("input[name=failed]")
    page.locator("form.pick button").click()
    page.wait_for_url(re.compile(r".*step=e01-s001.*"))
    kept = page.locator("table.rollouts tbody tr")
    assert 0 < kept.count() < total
    assert all(kept.nth(i).get_attribute("class") == "failed" for i in range(kept.count()))
    assert all(kept.nth(i).locator("td.where").inner_text().startswith("e01-s001")
               for i in range(kept.count()))
    assert "step e01-s001 · split train · failed only" in page.locator("p.sub").first.inner_text()
    reason = kept.first.locator("td").nth(5)
    assert "gold" in reason.inner_text() or "match" in reason.inner_text()
    assert tab.errors == []


def _around(box: Any, margin: int = 60) -> dict[str, float]:
    """A clip of the page around ``box``, with room around it for a tooltip."""
    assert box is not None
    x, y = max(0, box["x"] - margin), max(0, box["y"] - margin)
    return {"x": x, "y": y, "width": box["x"] + box["width"] + margin * 3 - x,
            "height": box["y"] + box["height"] + margin - y}


class _HoldAfterFirstStep(TrainerCallback):
    """Holds the trainer after its first step's checkpoint until ``go`` is set."""

    def __init__(self) -> None:
        self.first, self.go = threading.Event(), threading.Event()

    def on_step_end(self, record: StepRecord) -> None:
        if record.global_step == 1:
            self.first.set()
            self.go.wait(60)


def test_a_step_appears_on_an_open_page_while_the_trainer_writes_it(
        tmp_path: Path, tab: Tab) -> None:
    page, hold, failed = tab.page, _HoldAfterFirstStep(), []

    def train() -> None:
        try:
            _train(tmp_path / "live", overrides=["train.num_epochs=1"], callbacks=[hold])
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failed.append(exc)
            hold.first.set()

    thread = threading.Thread(target=train)
    thread.start()
    try:
        assert hold.first.wait(60) and not failed
        with serve(str(tmp_path)) as url:
            [run_id] = discover([tmp_path]).runs
            page.goto(url + f"run/{run_id}")
            assert page.locator("#t-step-e01-s001.done").count() == 1
            assert page.locator("#t-step-e01-s002").count() == 0
            assert page.locator("h1 .status.running").count() == 1
            page.evaluate("window.kept = 'no reload'")
            hold.go.set()
            page.wait_for_selector("#t-step-e01-s002.done")
            page.wait_for_selector("#t-step-e01-s003.done")
            thread.join(60)
            page.wait_for_selector("h1 .status.done")
            assert page.evaluate("window.kept") == "no reload"
            assert page.locator("svg.chart circle.pt.s-train").count() == 3
    finally:
        hold.go.set()
        thread.join(60)
    assert not failed
    assert tab.errors == []


def test_a_bind_that_is_not_exempt_asks_for_the_token(folder: dict[str, Any], tmp_path: Path,
                                                     tab: Tab) -> None:
    page = tab.page
    shutil.copytree(next(iter(folder["catalog"].runs.values())).path, tmp_path / "run")
    with serve(str(tmp_path / "run"), "--host", "127.0.0.2") as url:
        found = re.fullmatch(r"(http://127\.0\.0\.2:\d+/)\?token=([\w-]{20,})", url)
        assert found, url
        base, token = found.groups()
        response = page.goto(base)
        assert response is not None and response.status == 401
        assert "needs its token" in page.content()
        response = page.goto(f"{base}?token=wrong")
        assert response is not None and response.status == 401
        response = page.goto(f"{base}?token={token}")
        assert response is not None and response.status == 200
        run_id = page.locator("table.runs a").first.get_attribute("href")
        response = page.goto(base.rstrip("/") + str(run_id))  # the cookie, no token
        assert response is not None and response.status == 200
        assert page.locator("svg.chart circle.pt").count() > 0
