"""``skillgrad dashboard``: every page over real toy runs (the scripted trainer's) and a real
sleep night, with the data ``show``, ``diff`` and ``compare`` print; model-written text shown
as text; only discovered runs addressable; the token on a non-loopback bind; nothing written
to a run directory; the command's one-line refusals."""

from __future__ import annotations

import hashlib
import html
import json
import os
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

pytest.importorskip("starlette")
pytest.importorskip("jinja2")

import toy  # noqa: E402
from e2e import cli, one_line_error  # noqa: E402
from starlette.testclient import TestClient  # noqa: E402
from test_runs_cli import FUZZY_ANCHOR, MISSING_ANCHOR, ONE_EPOCH, _StopAtReflect, _train  # noqa: E402

from skillgrad.cli.dashboard import listen  # noqa: E402
from skillgrad.config import load_config  # noqa: E402
from skillgrad.dashboard.app import create_app  # noqa: E402
from skillgrad.dashboard.discover import Catalog, LockTable, discover  # noqa: E402
from skillgrad.dashboard.runlist import duration_text  # noqa: E402
from skillgrad.dotted import flatten  # noqa: E402
from skillgrad.errors import SkillgradError  # noqa: E402
from skillgrad.rundir import RunDir  # noqa: E402
from skillgrad.runview import gain_line, gains, run_column  # noqa: E402
from skillgrad.sleep.cycle import run_night  # noqa: E402
from skillgrad.sleep.demo import HELPFUL, write_demo  # noqa: E402

NOW = datetime(2026, 3, 9, 3, 17, tzinfo=timezone.utc)
EVIL = ("# Evil skill\n\n<script>alert('skill')</script>\n\nAnswer the question about the "
        "item. <img src=x onerror=alert(1)>\n")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Toy runs under ``runs/`` (one with a skill that holds markup) and a sleep project
    with a staged night under ``demo/``."""
    base = tmp_path_factory.mktemp("dashboard")
    runs = base / "runs"
    (runs / "evil").mkdir(parents=True)
    (runs / "evil" / "evil.md").write_text(EVIL, encoding="utf-8")
    paths = {
        "mixed": _train(runs / "mixed", "mixed_optimizer",
                        [*ONE_EPOCH, "optimizer.learning_rate=3"]),
        "learned": _train(runs / "learned", overrides=["train.num_epochs=1"]),
        "flat": _train(runs / "flat", "silent_optimizer", ["train.num_epochs=1"]),
        "epochs": _train(runs / "epochs", overrides=[
            "train.num_epochs=3", "train.steps_per_epoch=1", "optimizer.use_slow_update=true",
            "optimizer.use_meta_skill=true"], full=True),
        "evil": _train(runs / "evil", overrides=[*ONE_EPOCH, "env.skill_init=evil.md"]),
    }
    project, claude = write_demo(base / "demo", NOW, scripted=True)
    night = run_night(project, home=base / "home", environ={"CLAUDE_CONFIG_DIR": str(claude)},
                      now=NOW)
    sources = [runs, base / "demo"]
    catalog = discover(sources)
    ids = {name: _id(catalog, path) for name, path in paths.items()}
    return {"base": base, "runs": runs, "paths": paths, "ids": ids, "catalog": catalog,
            "sources": sources, "project": project, "night": night.night,
            "client": TestClient(create_app(sources))}


def _id(catalog: Catalog, path: Path) -> str:
    return next(ref.id for ref in catalog.runs.values() if ref.path == path.resolve())


def _get(site: dict[str, Any], url: str, status: int = 200) -> str:
    response = site["client"].get(url)
    assert response.status_code == status, (url, response.text[:500])
    return response.text


def _text(page: str) -> str:
    """The page's text, markup removed and entities decoded, whitespace collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def _row(page: str, row_id: str) -> str:
    found = re.search(rf'<tr id="{re.escape(row_id)}".*?</tr>', page, re.S)
    assert found, row_id
    return found.group(0)


# ----------------------------------------------------------------------------- pages


def test_the_runs_list_shows_each_run_with_its_state_and_scores(site: dict[str, Any]) -> None:
    page = _get(site, "/")
    for name, run_id in site["ids"].items():
        row = _row(page, f"run-{run_id}")
        assert f'href="/run/{run_id}"' in row and 'class="status done"' in row, name
    state = json.loads((site["paths"]["learned"] / "checkpoint.json").read_text())
    row = _text(_row(page, f"run-{site['ids']['learned']}"))
    best = state["scores"][f"test:{state['best_hash']}"]
    calls = sum(m["calls"] for m in json.loads(
        (site["paths"]["learned"] / "summary.json").read_text())["models"].values())
    assert "3 / 3" in row and f"{best['hard']:.3f} / {best['soft']:.3f}" in row
    assert f"{calls:,}" in row and "the run is finished" in row
    assert f"/sleep/{next(iter(site['catalog'].projects))}" in page


def test_a_run_page_shows_the_curves_the_decisions_and_each_edits_outcome(
        site: dict[str, Any]) -> None:
    page = _get(site, f"/run/{site['ids']['mixed']}")
    text = _text(page)
    assert 'id="step-e01-s001"' in page and 'id="t-step-e01-s002"' in page
    # The rule written again when its analyst was asked once more is shown once.
    assert "quotes the gold answer of training item" in text and "(2 times)" not in text
    assert f"replaces {FUZZY_ANCHOR} Answer each question asked. applied_fuzzy the anchor " \
        "matched Answer the question about the item. (similarity" in text
    assert f"after {MISSING_ANCHOR} Rule zebra: unused. skipped anchor not found" in text
    assert toy.rule("year") in text and "over current" in text
    assert "no edit was proposed; the skill is unchanged" in text
    assert len(re.findall(r'<circle class="pt s-train', page)) == 2
    assert len(re.findall(r'<circle class="pt s-cand accept"', page)) == 1
    assert re.search(r'<circle class="pt s-test test"[^>]*><title>test \(hard\): best skill',
                     page)
    assert re.search(r'<circle class="pt s-budget"', page)
    usage = json.loads((site["paths"]["mixed"] / "summary.json").read_text())["models"]
    for role, u in usage.items():
        assert f"{role} all {u['calls']:,}" in text
        assert all(stage in text for stage in u["stages"])


def test_rejected_steps_and_edits_cut_to_the_budget(site: dict[str, Any]) -> None:
    page = _get(site, f"/run/{site['ids']['learned']}")
    text = _text(page)
    assert "not_selected cut to the budget of 1" in text
    assert re.search(r'<circle class="pt s-cand reject"', page)
    assert re.search(r'<tr id="t-step-e01-s001" class="done reject">', page)
    turned = page.split("All steps turned down", 1)[1].split("</table>", 1)[0]
    assert toy.HARMFUL in turned and "not strictly better" in _text(turned)


def test_slow_updates_and_the_meta_skill_are_shown(site: dict[str, Any]) -> None:
    page = _get(site, f"/run/{site['ids']['epochs']}")
    text = _text(page)
    assert 'id="epoch-2"' in page and 'id="epoch-3"' in page
    assert "before epoch 2" in text and "meta skill updated" in text and "slow update:" in text
    state = json.loads((site["paths"]["epochs"] / "checkpoint.json").read_text())
    assert state["meta_skill"].split("\n")[0] in html.unescape(page)
    assert f"/skill?v={state['epoch_start']['2'][:8]}" in page


def test_the_skill_at_any_version(site: dict[str, Any]) -> None:
    run_id, run = site["ids"]["mixed"], site["paths"]["mixed"]
    state = json.loads((run / "checkpoint.json").read_text())
    initial = _text(_get(site, f"/run/{run_id}/skill?v=initial"))
    assert "Answer the question about the item." in initial
    assert toy.rule("year") not in initial
    for name in ("best", "e01-s001", state["best_hash"][:6], "final"):
        assert toy.rule("year") in _text(_get(site, f"/run/{run_id}/skill?v={name}"))
    missing = _text(_get(site, f"/run/{run_id}/skill?v=e09-s001", 404))
    assert "no skill version 'e09-s001'" in missing


def test_the_diff_between_two_versions_marks_the_changed_lines(site: dict[str, Any]) -> None:
    run_id = site["ids"]["mixed"]
    page = _get(site, f"/run/{run_id}/diff?a=initial&b=best")
    added = [_text(r) for r in re.findall(r'<tr class="added">.*?</tr>', page, re.S)]
    removed = [_text(r) for r in re.findall(r'<tr class="removed">.*?</tr>', page, re.S)]
    assert any(toy.rule("year") in r for r in added)
    assert any("Answer the question about the item." in r for r in removed)
    assert not any("Rule color" in r for r in added + removed)  # unchanged
    same = _text(_get(site, f"/run/{run_id}/diff?a=e01-s001&b=best"))
    assert "are the same skill" in same
    assert "no skill version 'nope'" in _text(_get(site, f"/run/{run_id}/diff?a=nope", 404))


def test_the_rollouts_page_shows_each_reply_with_its_expected_answer(
        site: dict[str, Any]) -> None:
    run_id, path = site["ids"]["mixed"], site["paths"]["mixed"]
    assert f'href="/run/{run_id}/rollouts"' in _get(site, f"/run/{run_id}")
    page = _get(site, f"/run/{run_id}/rollouts")
    rows = [json.loads(line) for p in sorted(path.glob("*/*/rollouts.jsonl"))
            for line in p.read_text().splitlines()]
    classes = re.findall(r'<tr class="(failed|solved)">', page)
    n_failed = sum(r["hard"] < 1 for r in rows)
    assert classes == ["failed"] * n_failed + ["solved"] * (len(rows) - n_failed)
    text = _text(page)
    assert f"{len(rows)} rollouts, {n_failed} failed" in text
    one = next(r for r in rows if r["hard"] < 1)
    assert one["task_id"] in text and one["expected"] in text and one["reason"][:40] in text
    step = _get(site, f"/run/{run_id}/rollouts?step=e01-s001&split=train&failed=1")
    batch = [json.loads(line) for line in
             (path / "steps" / "e01-s001" / "rollouts.jsonl").read_text().splitlines()]
    assert len(re.findall(r'<tr class="failed">', step)) == sum(r["hard"] < 1 for r in batch)
    assert "<tr class=\"solved\">" not in step
    assert "step e01-s001 · split train · failed only" in _text(step)
    missing = _get(site, f"/run/{run_id}/rollouts?step=e07-s001x", status=404)
    assert "no step" in _text(missing)


def test_compare_overlays_the_curves_and_gives_the_paired_interval(
        site: dict[str, Any]) -> None:
    flat, learned = site["ids"]["flat"], site["ids"]["learned"]
    page = _get(site, f"/compare?run={flat}&run={learned}")
    columns = [run_column("A", site["paths"]["flat"]), run_column("B", site["paths"]["learned"])]
    [gain] = gains(columns)
    assert gain.hard is not None and gain_line(gain) in _text(page)
    assert re.search(r'<circle class="pt run-0', page) and re.search(r'<circle class="pt run-1',
                                                                      page)
    assert 'class="pt run-1 accept"' in page
    legend = page.split('class="legend runs-legend"', 1)[1].split("</ul>", 1)[0]
    assert f"/run/{flat}" in legend and f"/run/{learned}" in legend
    text = _text(page)
    assert re.search(r"test best \d\.\d{3}/\d\.\d{3} \d\.\d{3}/\d\.\d{3}", text)
    assert re.search(r"target cost - -", text)  # the toy's models have no prices
    # The config keys that differ, one row per key, one cell per run: these two runs differ
    # only in their optimizer.
    config = page.split('id="config"', 1)[1]
    rows = re.findall(r"<tr><th><code>(.*?)</code></th>(.*?)</tr>", config)
    assert [(key, re.findall(r"<code>(.*?)</code>", cells)) for key, cells in rows] == [
        ("model.optimizer.function", ["test_runs_cli:silent_optimizer", "toy:optimizer"])]
    same = _get(site, f"/compare?run={flat}&run={flat}").split('id="config"', 1)[1]
    assert "same config" in _text(same) and "<code>" not in same
    assert "Tick two or more runs" in _text(_get(site, f"/compare?run={flat}"))
    _get(site, f"/compare?run={flat}&run=nope", 404)


def test_a_sleep_projects_nights_and_a_nights_staged_report(site: dict[str, Any]) -> None:
    [project_id] = site["catalog"].projects
    night = site["night"]
    page = _get(site, f"/sleep/{project_id}")
    row = _row(page, f"night-{night}")
    assert 'class="status staged"' in row and "shop-dev" in row
    [run_ref] = [r for r in site["catalog"].runs.values() if r.night == night]
    assert f"/run/{run_ref.id}" in row
    report = _get(site, f"/sleep/{project_id}/{night}")
    text = _text(report)
    assert "selection score 0.000 → 1.000 (changed)" in text and "accepted at e01-s001" in text
    added = [_text(r) for r in re.findall(r'<tr class="added">.*?</tr>', report, re.S)]
    assert any(HELPFUL in r for r in added) and "# Night " + night in html.unescape(report)
    _get(site, f"/run/{run_ref.id}")
    _get(site, f"/sleep/{project_id}/20990101T000000Z", 404)
    _get(site, "/sleep/nope", 404)


def _cells(row: str) -> list[str]:
    return [_text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]


def test_the_runs_list_shows_when_each_run_began_how_long_it_trained_and_its_settings(
        site: dict[str, Any], tmp_path: Path) -> None:
    page = _get(site, "/")
    head = [_text(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", page, re.S)]
    assert head[2:6] == ["status", "started", "duration", "settings"]
    events = [json.loads(line) for line in
              (site["paths"]["mixed"] / "events.jsonl").read_text().splitlines()]
    first = datetime.fromtimestamp(events[0]["time"])
    cells = _cells(_row(page, f"run-{site['ids']['mixed']}"))
    assert cells[3] == first.strftime("%Y-%m-%d %H:%M")
    assert cells[4] == duration_text(events[-1]["time"] - events[0]["time"]) != "-"
    assert cells[5] == ("env qa target scripted toy:target optimizer scripted "
                        "test_runs_cli:mixed_optimizer epochs 1 × 2 steps batch 100 "
                        "lr 3 constant")
    assert "epochs 3 × 1 steps" in _cells(_row(page, f"run-{site['ids']['epochs']}"))[5]
    # A run stopped for a day and resumed: the day it waited is not counted.
    runs = tmp_path / "runs"
    shutil.copytree(site["paths"]["learned"], runs / "resumed")
    shutil.copytree(site["paths"]["learned"], runs / "old")
    start = datetime(2026, 3, 9, 8, 30).timestamp()
    script = [(0, "run_start"), (5, "step_start"), (600, "stopped"), (86_400, "resume"),
              (86_400 + 60, "step_end"), (86_400 + 125, "run_end")]
    (runs / "resumed" / "events.jsonl").write_text("".join(
        json.dumps({"time": start + t, "event": kind}) + "\n" for t, kind in script))
    for name in ("events.jsonl", "config.yaml"):  # a run directory that predates them
        (runs / "old" / name).unlink()
    catalog, listing = discover([runs]), TestClient(create_app([runs])).get("/").text
    resumed, old = (_cells(_row(listing, f"run-{_id(catalog, runs / name)}"))
                    for name in ("resumed", "old"))
    assert resumed[3] == "2026-03-09 08:30" and resumed[4] == "12 min 5 s resumed 1×"
    assert old[3:6] == ["-", "-", "-"] and old[6] == "3 / 3"


def _table(page: str, cls: str) -> list[list[str]]:
    found = re.search(rf'<table class="{cls}">(.*?)</table>', page, re.S)
    assert found, cls
    rows = [_cells(r) for r in re.findall(r"<tr>(.*?)</tr>", found.group(1), re.S)]
    return [r for r in rows if r]  # the head's row has no <td>


def test_a_run_page_shows_its_models_and_the_keys_set_differently_from_the_defaults(
        site: dict[str, Any], tmp_path: Path) -> None:
    page = _get(site, f"/run/{site['ids']['mixed']}")
    assert _table(page, "roles") == [
        ["target", "scripted", "toy:target", "-"],
        ["optimizer", "scripted", "test_runs_cli:mixed_optimizer", "-"]]
    keys = {row[0]: row[1:] for row in _table(page, "set-keys")}
    assert keys["optimizer.learning_rate"] == ["3", "4"]
    assert keys["env.split_ratio"] == ["0.5 0.25 0.25", "0.6 0.2 0.2"]
    assert keys["model.target.backend"] == ["scripted", "embedded"]
    # What is shown as set is what the run's config file and --set gave (what
    # ``skillgrad config check`` lists), less env.name, which the file sets to its default.
    config = site["paths"]["mixed"].parent / "config.yaml"
    resolved = load_config(config, [*ONE_EPOCH, "optimizer.learning_rate=3"])
    given = {k for k in flatten(resolved.redacted()) if resolved.origin(k) != "default"}
    assert resolved.config.env.name == "qa" and set(keys) == given - {"env.name"}
    full = page.split('<details class="config"', 1)[1].split("</details>", 1)[0]
    assert "max_tokens: 2048" in html.unescape(full) and "gate_test: strict" in full
    assert "started" in _text(page.split('class="sub run-about">', 1)[1].split("</p>")[0])
    # A run written before a secret was masked shows it masked all the same.
    runs = tmp_path / "runs"
    shutil.copytree(site["paths"]["flat"], runs / "secret")
    data = yaml.safe_load((runs / "secret" / "config.yaml").read_text())
    data["env"]["name"] = "not_installed.envs:Env"  # looked up only when registered
    data["model"]["optimizer"] = {"backend": "openai_compatible", "model": "gpt-x",
                                  "base_url": "https://user:hunter2@llm.example/v1?sig=zz9",
                                  "extra_headers": {"Ocp-Apim-Subscription-Key": "k3y-abcdef"}}
    (runs / "secret" / "config.yaml").write_text(yaml.safe_dump(data))
    [run_id] = discover([runs]).runs
    shown = TestClient(create_app([runs])).get(f"/run/{run_id}").text
    assert "hunter2" not in shown and "zz9" not in shown and "k3y-abcdef" not in shown
    roles = _table(shown, "roles")
    assert roles[1][:3] == ["optimizer", "openai_compatible", "gpt-x"]
    assert "base_url https://" in roles[1][3] and "llm.example" in roles[1][3]
    set_here = {row[0]: row[1:] for row in _table(shown, "set-keys")}
    assert set_here["model.optimizer.model"] == ["gpt-x", "none"]
    assert "llm.example" in set_here["model.optimizer.base_url"][0]
    assert set_here["env.name"] == ["not_installed.envs:Env", "qa"]


def _svgs(page: str) -> list[str]:
    return re.findall(r'<svg class="chart".*?</svg>', page, re.S)


def test_the_charts_name_their_axes_and_each_points_step_and_value(
        site: dict[str, Any]) -> None:
    page = _get(site, f"/run/{site['ids']['mixed']}")
    scores, budget = _svgs(page)
    for svg, unit in ((scores, "score"), (budget, "edits")):
        assert re.search(r'<text class="label x-label"[^>]*>step</text>', svg)
        assert re.search(rf'<text class="label y-label"[^>]*>{unit}</text>', svg)
        assert len(re.findall(r'<text class="tick x-tick"[^>]*>\d+</text>', svg)) >= 2
        assert len(re.findall(r'<text class="tick y-tick"[^>]*>[\d.]+</text>', svg)) >= 3
    assert re.findall(r'<text class="tick y-tick"[^>]*>([\d.]+)</text>', scores) == [
        "0", "0.2", "0.4", "0.6", "0.8", "1"]
    points = re.findall(r'<circle class="pt ([^"]*)"[^>]*><title>(.*?)</title>', scores)
    assert len(points) == len(re.findall("<circle", scores)) >= 8
    for _, title in points:
        assert re.search(r"step \d+", title) and re.search(r"\d\.\d{3}", title), title
    train = [t for c, t in points if c == "s-train"]
    record = json.loads((site["paths"]["mixed"] / "steps" / "e01-s002" / "record.json")
                        .read_text())
    assert f"training batch: step 2 (e01-s002): {record['train_hard']:.3f} hard" in train[1]
    assert any(t.startswith("selection: candidate: step 1 (e01-s001): ")
               and "accept" in t for c, t in points if c.startswith("s-cand"))


def test_the_json_views(site: dict[str, Any]) -> None:
    run_id = site["ids"]["mixed"]
    data = json.loads(_get(site, f"/api/run/{run_id}"))
    assert data["status"] == "done"
    assert [s["name"] for s in data["run"]["steps"]] == ["e01-s001", "e01-s002"]
    assert re.fullmatch(r"[0-9a-f]{16}", json.loads(_get(site, f"/api/run/{run_id}/version"))[
        "version"])
    assert json.loads(_get(site, "/api/run/nope/version", 404)) == {
        "error": "no run 'nope' here; the runs list names them all"}


# ----------------------------------------------------------------------------- safety


def _urls(site: dict[str, Any]) -> list[str]:
    catalog: Catalog = site["catalog"]
    urls = ["/", "/compare", "/api/runs/version", "/static/dashboard.css", "/static/live.js",
            "/static/charts.js"]
    for run_id in catalog.runs:
        urls += [f"/run/{run_id}", f"/run/{run_id}/skill", f"/run/{run_id}/skill?v=initial",
                 f"/run/{run_id}/skill?v=e01-s001", f"/run/{run_id}/diff",
                 f"/run/{run_id}/rollouts", f"/run/{run_id}/rollouts?step=e01-s001&failed=1",
                 f"/api/run/{run_id}", f"/api/run/{run_id}/version"]
    urls.append("/compare?" + "&".join(f"run={i}" for i in catalog.runs))
    for project_id in catalog.projects:
        urls += [f"/sleep/{project_id}", f"/sleep/{project_id}/{site['night']}"]
    return urls


def test_markup_in_a_skill_is_shown_as_text(site: dict[str, Any]) -> None:
    run_id = site["ids"]["evil"]
    pages = [_get(site, url) for url in (f"/run/{run_id}", f"/run/{run_id}/skill?v=initial",
                                         f"/run/{run_id}/diff", f"/run/{run_id}/skill?v=best")]
    for page in pages:
        assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#39;skill&#39;)&lt;/script&gt;" in pages[1]
    assert "&lt;img src=x onerror=alert(1)&gt;" in pages[1]
    assert "<script>alert('skill')</script>" in _text(pages[1])


def test_every_page_loads_only_the_dashboards_own_scripts(site: dict[str, Any]) -> None:
    for url in _urls(site):
        response = site["client"].get(url)
        assert response.status_code == 200, url
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-frame-options"] == "DENY"
        if response.headers["content-type"].startswith("text/html"):
            scripts = re.findall(r"<script[^>]*>", response.text)
            assert scripts == ['<script src="/static/live.js" defer>',
                               '<script src="/static/charts.js" defer>'], url
            assert not re.search(r'(src|href)="(https?:)?//', response.text), url


def test_only_discovered_runs_are_reachable(site: dict[str, Any]) -> None:
    secret = site["base"] / "secret.txt"
    secret.write_text("not for the dashboard", encoding="utf-8")
    for url in ("/run/nope", "/run/..%2F..%2Fsecret.txt", "/run/%2e%2e/skill",
                "/run/..%2Fruns%2Fmixed%2Frun/skill?v=best", "/static/..%2Fapp.py",
                "/static/%2e%2e/app.py", "/static/../../secret.txt", "/sleep/..%2F..",
                "/sleep/%2e%2e/%2e%2e", "/api/run/..%2F..%2Fsecret.txt",
                f"/run/{site['ids']['mixed']}/skill?v=..%2F..%2Fsecret.txt"):
        response = site["client"].get(url)
        assert response.status_code == 404, url
        assert "not for the dashboard" not in response.text and "create_app" not in response.text
    assert site["client"].post("/").status_code == 405


def _snapshot(*roots: Path) -> dict[str, tuple[str, int]]:
    """Every file's digest and mtime, every folder's mtime, under ``roots``."""
    out = {}
    for root in roots:
        for dirpath, _, files in os.walk(root):
            out[dirpath] = ("dir", os.stat(dirpath).st_mtime_ns)
            for name in files:
                path = os.path.join(dirpath, name)
                data = Path(path).read_bytes()
                out[path] = (hashlib.sha256(data).hexdigest(), os.stat(path).st_mtime_ns)
    return out


def test_visiting_every_page_writes_nothing(site: dict[str, Any]) -> None:
    roots = (site["runs"], site["project"])
    before = _snapshot(*roots)
    for url in _urls(site):
        site["client"].get(url)
    assert _snapshot(*roots) == before


def test_a_token_is_needed_when_one_is_set(site: dict[str, Any]) -> None:
    client = TestClient(create_app(site["sources"], token="s3cret-token"))
    for url in ("/", "/?token=wrong", f"/run/{site['ids']['mixed']}", "/static/live.js",
                "/api/runs/version"):
        response = client.get(url)
        assert response.status_code == 401, url
        assert "needs its token" in response.text and "s3cret" not in response.text
    response = client.get("/?token=s3cret-token")
    assert response.status_code == 200
    cookie = response.headers["set-cookie"]
    assert "s3cret-token" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert client.get(f"/run/{site['ids']['mixed']}").status_code == 200  # by the cookie
    bearer = TestClient(create_app(site["sources"], token="s3cret-token"))
    assert bearer.get("/", headers={"Authorization": "Bearer s3cret-token"}).status_code == 200
    assert bearer.get("/", headers={"Authorization": "Bearer s3cret"}).status_code == 401
    bearer.cookies.set("skillgrad_dashboard", "wrong")
    assert bearer.get("/").status_code == 401


def test_a_loopback_dashboard_answers_only_to_its_own_names(site: dict[str, Any]) -> None:
    app = create_app(site["sources"], hosts={"127.0.0.1", "localhost", "::1"})
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    assert client.get("/").status_code == 200
    assert client.get("/", headers={"host": "[::1]:8765"}).status_code == 200
    assert client.get("/", headers={"host": "evil.example:8765"}).status_code == 400


# ----------------------------------------------------------------------------- live state


def test_running_stopped_and_done(site: dict[str, Any], tmp_path: Path) -> None:
    if not LockTable.read().known:
        pytest.skip("no /proc/locks here")
    runs = tmp_path / "runs"
    shutil.copytree(site["paths"]["mixed"], runs / "held")
    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path / "cut", callbacks=[_StopAtReflect(3)])
    shutil.copytree(tmp_path / "cut" / "run", runs / "cut")
    client = TestClient(create_app([runs]))
    catalog = discover([runs])
    held, cut = _id(catalog, runs / "held"), _id(catalog, runs / "cut")
    # The copy's lock file names a live process (this one), but nothing holds it.
    assert int((runs / "held" / "run.lock").read_text()) == os.getpid()
    assert 'class="status done"' in _row(client.get("/").text, f"run-{held}")
    with RunDir(runs / "held").lock():
        assert 'class="status running"' in _row(client.get("/").text, f"run-{held}")
        assert 'class="status running"' in client.get(f"/run/{held}").text
    assert 'class="status done"' in _row(client.get("/").text, f"run-{held}")
    assert 'class="status stopped"' in _row(client.get("/").text, f"run-{cut}")
    page = client.get(f"/run/{cut}").text
    assert '<tr id="t-step-e01-s003" class="unfinished' in page
    assert "model calls so far" in _text(page)


def test_the_lock_table_tells_a_held_lock_from_a_file_left_behind(tmp_path: Path) -> None:
    (tmp_path / "run.lock").write_text("4242\n")
    st = (tmp_path / "run.lock").stat()
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    table = tmp_path / "locks"
    table.write_text(f"1: FLOCK  ADVISORY  WRITE 4242 {dev}:{st.st_ino} 0 EOF\n")
    assert LockTable.read(table).holds(tmp_path)
    table.write_text(f"1: FLOCK  ADVISORY  WRITE 99 ab:01:{st.st_ino} 0 EOF\n"
                     f"1: -> FLOCK  ADVISORY  WRITE 4242 {dev}:{st.st_ino} 0 EOF\n"
                     f"2: POSIX  ADVISORY  WRITE 4242 {dev}:{st.st_ino} 0 EOF\n")
    assert not LockTable.read(table).holds(tmp_path)  # another device's; a waiter; not flock
    table.write_text(f"1: FLOCK  ADVISORY  WRITE 4242 ab:01:{st.st_ino} 0 EOF\n")
    assert LockTable.read(table).holds(tmp_path)  # an overlay's lower device, its holder
    assert not LockTable.read(tmp_path / "missing").known


def test_the_fingerprint_moves_with_the_run_and_new_runs_appear(site: dict[str, Any],
                                                               tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    shutil.copytree(site["paths"]["mixed"], runs / "a")
    client = TestClient(create_app([runs]))
    [run_id] = discover([runs]).runs

    def version(url: str) -> str:
        return str(client.get(url).json()["version"])

    first, index = version(f"/api/run/{run_id}/version"), version("/api/runs/version")
    assert version(f"/api/run/{run_id}/version") == first
    (runs / "a" / "steps" / "e01-s003").mkdir()
    second = version(f"/api/run/{run_id}/version")
    assert second != first
    (runs / "a" / "steps" / "e01-s003" / "calls.jsonl").write_text("")
    assert version(f"/api/run/{run_id}/version") != second
    shutil.copytree(site["paths"]["flat"], runs / "b")
    assert version("/api/runs/version") != index
    page = client.get("/").text
    assert page.count('<tr id="run-') == 2 and str(runs / "b") in page


# ----------------------------------------------------------------------------- command


def test_the_command_refuses_what_holds_no_runs_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    for arg, words in (("missing", "no such folder"),
                       ("empty", "not a run directory, and no run directory"),
                       ("file.txt", "is a file")):
        line = one_line_error(cli("dashboard", str(tmp_path / arg), "--port", "0"))
        assert words in line, line
    line = one_line_error(cli("dashboard", "--sleep", str(tmp_path / "empty"), "--port", "0"))
    assert "--sleep" in line and "no sleep nights there" in line
    with listen("127.0.0.1", 0) as taken, pytest.raises(SkillgradError, match="cannot listen"):
        listen("127.0.0.1", taken.getsockname()[1])


def test_the_command_says_how_to_install_the_extra(tmp_path: Path) -> None:
    blocker = tmp_path / "blocker" / "starlette"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('no starlette', name='starlette')\n")
    tests = Path(__file__).parent
    proc = cli("dashboard", str(tmp_path), env={
        "PYTHONPATH": os.pathsep.join([str(blocker.parent), str(tests)])})
    line = one_line_error(proc)
    assert line == "error: the dashboard needs starlette: pip install 'skillgrad[dashboard]'"
    assert len(proc.stderr.strip().splitlines()) == 1


def test_the_commands_help_fits_80_columns() -> None:
    proc = cli("dashboard", "-h", env={"COLUMNS": "80"})
    assert proc.returncode == 0 and "Usage: skillgrad dashboard" in proc.stdout
    assert "--host" in proc.stdout and "--port" in proc.stdout and "--sleep" in proc.stdout
    assert all(len(line) <= 80 for line in proc.stdout.splitlines())



def test_a_skill_package_shows_as_a_tree_of_files_with_per_file_diffs(tmp_path: Path) -> None:
    """A run trained from a skill folder: the skill page lists the package's files and shows
    each; the diff page heads each file's changes with its path, an unchanged file named as
    such; the run page counts which files an agent read."""
    folder = tmp_path / "pkg"
    (folder / "toy-skill" / "references").mkdir(parents=True)
    (folder / "toy-skill" / "SKILL.md").write_text(toy.INITIAL_SKILL)
    (folder / "toy-skill" / "references" / "rules.md").write_text("# Rules\n\nBe exact.\n")
    run = _train(folder, overrides=[*ONE_EPOCH, "env.skill_init=toy-skill"])
    state = json.loads((run / "checkpoint.json").read_text())
    state["history"][0]["references_read"] = {"rollouts": 3, "references/rules.md": 0}
    (run / "checkpoint.json").write_text(json.dumps(state))
    client = TestClient(create_app([folder]))
    run_id = _id(discover([folder]), run)

    page = client.get(f"/run/{run_id}/skill?v=best").text
    tree = re.search(r'<nav class="tree">.*?</nav>', page, re.S)
    assert tree and _text(tree.group(0)).startswith("files SKILL.md ")
    assert "references/rules.md" in _text(tree.group(0))
    files = re.findall(r'<h2 id="file-\d" class="file">(.*?)</h2>', page)
    assert files == ["SKILL.md", "references/rules.md"]
    assert "skillgrad:file" not in page

    diff = client.get(f"/run/{run_id}/diff?a=initial&b=best").text
    headers = [_text(r) for r in re.findall(r'<tr class="header">.*?</tr>', diff, re.S)]
    assert headers == ["SKILL.md", "references/rules.md (unchanged)"]
    added = [_text(r) for r in re.findall(r'<tr class="added">.*?</tr>', diff, re.S)]
    assert any(toy.rule("year") in r for r in added)

    assert "files read: references/rules.md never" in _text(client.get(f"/run/{run_id}").text)
    shown = cli("show", str(run))
    assert "files of the skill the agent read: references/rules.md never" in " ".join(
        shown.stdout.split()), shown.stdout


def test_the_rollouts_page_shows_the_screens_candidates_by_their_step_part(
        tmp_path: Path) -> None:
    """The step chooser offers "e01-s001 screen"; choosing it lists what each screened
    candidate made the target answer, whose it is, and links only the gated one's skill."""
    from test_proposals import _sampled

    from skillgrad.trainer import build_trainer

    out = tmp_path / "runs" / "screened"
    build_trainer(load_config(_sampled(tmp_path)), out).fit()
    client = TestClient(create_app([tmp_path / "runs"]))
    run_id = _id(discover([tmp_path / "runs"]), out)
    page = client.get(f"/run/{run_id}/rollouts").text
    assert '<option value="e01-s001 screen"' in page
    assert f'href="/run/{run_id}/rollouts?step=e01-s001%20screen"' in \
        client.get(f"/run/{run_id}").text  # from the step's table of screened proposals
    response = client.get(f"/run/{run_id}/rollouts", params={"step": "e01-s001 screen"})
    assert response.status_code == 200, response.text[:300]
    text = _text(response.text)
    assert "step e01-s001 screen" in text and "proposal 1" in text
    rows = re.findall(r'<tr class="(?:failed|solved)">.*?</tr>', response.text, re.S)
    kept = (out / "steps" / "e01-s001" / "screened.jsonl").read_text().splitlines()
    assert len(rows) == len(kept)
    chosen = json.loads((out / "steps" / "e01-s001" / "screen.json").read_text())["chosen"]
    for row in rows:
        linked = 'href="/run/' in row
        assert linked == (f"proposal {chosen}" in row), row
