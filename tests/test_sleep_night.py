"""A whole night on realistic Claude Code sessions: harvest, mine, train the active skill
behind the gate with a noisy optimizer (helpful, harmful and fact-copying proposals: the gate
decides what survives), stage, adopt, refuse drift, roll back; a second night at the same time
is refused; a stopped night is taken up again."""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from skillgrad.errors import ConfigError
from skillgrad.models.messages import ChatRequest
from skillgrad.sleep.adoption import adopt, rollback
from skillgrad.sleep.cycle import run_night
from skillgrad.sleep.demo import (
    FAKE_KEY,
    HARMFUL,
    HELPFUL,
    MODULES,
    SKILL,
    claude_session,
    scripted_optimizer,
    scripted_target,
    write_demo,
)
from skillgrad.sleep.night import SLEEP_DIR
from skillgrad.sleep.staging import Staging
from tests.e2e import cli

NOW = datetime(2026, 3, 9, 3, 17, tzinfo=timezone.utc)
PROMPTS: list[str] = []


def _optimizer(request: ChatRequest) -> Any:
    """The demo's stand-in optimizer (a harmful, a copied and a helpful rule; the judge
    wants a file name), recording what it was asked."""
    PROMPTS.append(request.messages[-1].text())
    return scripted_optimizer(request)


_target = scripted_target


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root, claude = write_demo(tmp_path, NOW)
    other = claude / "projects" / "-home"  # a session in the home folder
    other.mkdir()
    claude_session(other, "elsewhere", tmp_path / "home", NOW - timedelta(hours=5), "billing", 0)
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(claude))
    config = {"sleep": {"agents": ["claude_code"], "miner": "heuristic", "min_tasks": 3,
                        "val_percent": 50},
              "model": {"target": {"backend": "scripted", "function": f"{__name__}:_target"},
                        "optimizer": {"backend": "scripted",
                                      "function": f"{__name__}:_optimizer"}},
              "gradient": {"proposals": 3}, "evaluation": {"gate_test": "sign"}}
    (root / SLEEP_DIR / "config.yaml").write_text(yaml.safe_dump(config))
    return root


def _night(project: Path, **kw: Any) -> Any:
    environ = {"CLAUDE_CONFIG_DIR": str(project.parent / "claude")}
    return run_night(project, home=project.parent / "home", environ=environ, now=NOW, **kw)


def test_a_night_keeps_the_helpful_edit_and_stages_it(project: Path) -> None:
    result = _night(project)
    assert result.harvested == 32  # the home-folder session is not this project's
    (judged,) = [r.summary["models"]["optimizer"]["stages"]["judge"] for r in result.runs]
    assert judged["calls"] > 0  # the optimizer judged, metered with the run
    assert len(result.tasks.tasks) == 16 and all(t.occurrences == 2 for t in result.tasks.tasks)
    (run,) = result.runs
    assert run.name == "shop-dev" and run.status == "trained"
    assert run.proposed is not None and HELPFUL in run.proposed
    assert HARMFUL not in run.proposed and "billing module" not in run.proposed
    assert result.staged is not None
    staged = (result.staged / "report.md").read_text()
    assert "Selection score" in staged and "accepted at" in staged
    live = project / ".claude" / "skills" / "shop-dev" / "SKILL.md"
    assert live.read_text() == SKILL  # staged only
    # Adopt: the front matter kept byte for byte, the body trained; then roll back.
    staging = Staging(project)
    adopt(staging, result.night)
    adopted = live.read_text()
    assert adopted.startswith(SKILL.split("# Shop")[0]) and HELPFUL in adopted
    rollback(staging, result.night)
    assert live.read_text() == SKILL
    assert ".skillgrad/" in (project / ".gitignore").read_text()


def test_adoption_refuses_a_file_changed_since_staging(project: Path) -> None:
    result = _night(project)
    live = project / ".claude" / "skills" / "shop-dev" / "SKILL.md"
    live.write_text(SKILL + "\nA line the user added.\n")
    with pytest.raises(Exception, match="SKILL.md: changed"):
        adopt(Staging(project), result.night)
    assert live.read_text().endswith("A line the user added.\n")


def test_a_second_night_at_the_same_time_is_refused(project: Path) -> None:
    from skillgrad.sleep.night import night_lock

    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        with night_lock(project / SLEEP_DIR):
            started.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    started.wait(10)
    try:
        with pytest.raises(ConfigError, match="another night is running"):
            _night(project)
    finally:
        release.set()
        thread.join()


def _tree(root: Path) -> dict[Path, tuple[int, int, bytes]]:
    return {p.relative_to(root): (p.lstat().st_mode, p.lstat().st_mtime_ns,
                                  p.read_bytes() if p.is_file() else b"")
            for p in root.rglob("*")}


def test_a_dry_run_writes_nothing_to_the_project(project: Path) -> None:
    before = _tree(project)
    result = _night(project, dry_run=True)
    assert result.runs and result.runs[0].proposed is not None
    assert _tree(project) == before  # not even the night's lock file


def test_a_dry_run_is_refused_while_a_night_runs(project: Path) -> None:
    from skillgrad.sleep.night import night_lock

    with night_lock(project / SLEEP_DIR):
        with pytest.raises(ConfigError, match="another night is running"):
            _night(project, dry_run=True)


def test_the_cli_runs_a_night_and_reports_it(project: Path) -> None:
    config = project / SLEEP_DIR / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["sleep"]["window_hours"] = 24 * 365 * 50  # the fixture's sessions are dated 2026-03
    config.write_text(yaml.safe_dump(data))
    tests = Path(__file__).resolve().parent
    env = {"CLAUDE_CONFIG_DIR": str(project.parent / "claude"), "HOME": str(project.parent),
           "PYTHONPATH": f"{tests}:{tests.parent}"}
    proc = cli("sleep", "run", "--project", str(project), cwd=project, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "# Night" in proc.stdout and "staged:" in proc.stdout
    status = cli("sleep", "status", "--project", str(project), cwd=project, env=env)
    assert status.returncode == 0 and ": staged, 1 files (shop-dev)" in status.stdout
    assert "schedul" in status.stdout


def test_a_secret_in_a_session_reaches_no_prompt_and_no_file(project: Path) -> None:
    logs = project.parent / "claude" / "projects" / "-shop"
    assert FAKE_KEY in (logs / "s0-0.jsonl").read_text()
    result = _night(project)
    assert result.harvested == 32 and result.staged is not None
    for written in (project / ".skillgrad").rglob("*"):
        if written.is_file():
            assert FAKE_KEY not in written.read_text(errors="replace"), written


def _answer(request: dict[str, Any]) -> str:
    """The scripted models' reply to a handed-off request."""
    messages = request["messages"]
    text = lambda m: m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])  # noqa: E731
    if request.get("json_schema") is None:
        skill, prompt = text(messages[0]), text(messages[1])
        module = next(m for m in MODULES if m in prompt)
        return f"Fixed shop/{module}.py." if HELPFUL in skill else "Fixed the test."
    prompt = text(messages[-1])
    if "## Answer" in prompt:
        return json.dumps({"score": 1.0 if ".py" in prompt.rsplit("## Answer", 1)[1] else 0.2,
                           "reason": "r"})
    return json.dumps({"reasoning": "r", "edits": [{"op": "append", "content": HELPFUL}]})


def test_a_night_through_the_handoff_backend_stops_and_goes_on(project: Path) -> None:
    from skillgrad.errors import RunStopped

    config = project / SLEEP_DIR / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["model"] = {"target": {"backend": "handoff", "dir": "handoff"},
                     "optimizer": {"backend": "handoff", "dir": "handoff"}}
    data["gradient"] = {"proposals": 1}
    config.write_text(yaml.safe_dump(data))
    folder = project / SLEEP_DIR / "handoff"
    rounds = 0
    while True:
        try:
            result = _night(project)
            break
        except RunStopped:
            rounds += 1
            assert rounds < 30
            pending = json.loads((folder / "pending.json").read_text())
            for call in pending["pending"]:
                request = json.loads((folder / call["request"]).read_text())
                (folder / call["answer"]).parent.mkdir(exist_ok=True)
                (folder / call["answer"]).write_text(_answer(request))
    assert rounds >= 2
    assert result.runs[0].proposed is not None and HELPFUL in result.runs[0].proposed
    assert result.staged is not None


def test_schedule_status_and_unschedule_through_the_cli(project: Path, tmp_path: Path) -> None:
    stub = Path(__file__).resolve().parent / "fixtures" / "sleep" / "bin"
    table = tmp_path / "crontab.txt"
    table.write_text("MAILTO=dev@example.com\n0 9 * * 1 /usr/bin/backup\n")
    env = {"PATH": f"{stub}:{os.environ['PATH']}", "CRONTAB_STUB_TABLE": str(table)}
    proc = cli("sleep", "schedule", "--project", str(project), cwd=project, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "sleep run --project" in table.read_text()
    assert table.read_text().startswith("MAILTO=dev@example.com\n0 9 * * 1 /usr/bin/backup\n")
    status = cli("sleep", "status", "--project", str(project), cwd=project, env=env)
    assert "scheduled: " in status.stdout
    assert cli("sleep", "unschedule", "--project", str(project), cwd=project,
               env=env).returncode == 0
    assert table.read_text() == "MAILTO=dev@example.com\n0 9 * * 1 /usr/bin/backup\n"


def test_what_a_night_turned_down_is_shown_to_the_next_one(project: Path) -> None:
    _night(project)
    carried = json.loads((project / SLEEP_DIR / "state" / "rejected" / "shop-dev.json")
                         .read_text())
    assert any(HARMFUL in e["content"] for r in carried for e in r["edits"])
    PROMPTS.clear()
    run_night(project, home=project.parent / "home", now=NOW + timedelta(days=1),
              environ={"CLAUDE_CONFIG_DIR": str(project.parent / "claude")})
    analysts = [p for p in PROMPTS if "## Answer" not in p]
    assert analysts and all(HARMFUL.removeprefix("- ") in p for p in analysts)


def _git(repo: Path, *args: str) -> None:
    import subprocess

    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e"})


def test_an_agent_mode_night_replays_the_agent_in_a_worktree_and_runs_the_checks(
        tmp_path: Path) -> None:
    import sys

    repo = tmp_path / "shop"
    (repo / "shop").mkdir(parents=True)
    for module in MODULES:
        (repo / "shop" / f"{module}.py").write_text("STATUS = 'BUG'\n")
    (repo / "check.py").write_text(
        "import sys\nfrom pathlib import Path\n"
        "sys.exit(0 if 'FIXED' in Path(f'shop/{sys.argv[1]}.py').read_text() else 1)\n")
    (repo / ".claude" / "skills" / "shop-dev").mkdir(parents=True)
    (repo / ".claude" / "skills" / "shop-dev" / "SKILL.md").write_text(SKILL)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "shop")
    claude = tmp_path / "claude"
    logs = claude / "projects" / "-shop"
    logs.mkdir(parents=True)
    for n, module in enumerate(MODULES):
        for wording in (0, 1):
            claude_session(logs, f"s{n}-{wording}", repo, NOW - timedelta(hours=40 - 2 * n),
                           module, wording, check=f"{sys.executable} check.py {{}}")
    agent = Path(__file__).resolve().parent / "fixtures" / "sleep" / "bin" / "fake-agent"
    config = {"sleep": {"agents": ["claude_code"], "miner": "heuristic", "val_percent": 50,
                        "mode": "agent"},
              "model": {"target": {"backend": "command",
                                   "argv": [sys.executable, str(agent), "{skill_file}"],
                                   "skill_file": ".claude/skills/skillgrad/SKILL.md"},
                        "optimizer": {"backend": "scripted",
                                      "function": f"{__name__}:_optimizer"}},
              "gradient": {"proposals": 3}, "evaluation": {"gate_test": "sign"}}
    (repo / SLEEP_DIR).mkdir(parents=True)
    (repo / SLEEP_DIR / "config.yaml").write_text(yaml.safe_dump(config))
    result = run_night(repo, home=tmp_path / "home", now=NOW,
                       environ={"CLAUDE_CONFIG_DIR": str(claude)})
    (run,) = result.runs
    assert run.proposed is not None and HELPFUL in run.proposed
    task = result.tasks.tasks[0]
    assert any(c.op == "command_passes" and "check.py" in str(c.arg) for c in task.checks)
    steps = sorted((repo / SLEEP_DIR / "work").glob("*/skills/shop-dev/runs/shop-dev/steps/*"))
    rolled = [json.loads(line) for line in (steps[0] / "rollouts.jsonl").read_text().splitlines()]
    assert all(r["metadata"]["checks"] for r in rolled)  # the checks ran in the worktree
    assert all("check.py" in next(iter(r["metadata"]["checks"])) for r in rolled)
    assert "BUG" in (repo / "shop" / "billing.py").read_text()  # the project is untouched
    assert not list((repo / SLEEP_DIR / "work").glob("*/skills/*/replays/skillgrad-replay-*"))


def test_agent_mode_needs_a_target_that_runs_programs(tmp_path: Path) -> None:
    from skillgrad.config import validate

    raw = {"model": {"target": {"backend": "scripted", "replies": ["x"]}},
           "env": {"name": "sleep", "tasks_path": "tasks.json", "mode": "agent"}}
    with pytest.raises(ConfigError, match=r"env.mode 'agent' runs an agent CLI .*backend: "
                       r"command"):
        validate(raw, {}, tmp_path)


def test_tasks_no_skill_fits_can_train_the_agents_memory_file(project: Path) -> None:
    import shutil

    shutil.rmtree(project / ".claude" / "skills")  # the sessions' skill is gone
    config = project / SLEEP_DIR / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["sleep"]["unrouted"] = "memory"
    config.write_text(yaml.safe_dump(data))
    (project / "CLAUDE.md").write_text("# Shop\n\nUse Python 3.11.\n")
    result = _night(project)
    (run,) = result.runs
    assert run.kind == "memory" and run.target == project / "CLAUDE.md"
    assert run.proposed is not None and HELPFUL in run.proposed
    assert run.proposed.startswith("# Shop\n\nUse Python 3.11.\n")
    adopt(Staging(project), result.night)
    assert HELPFUL in (project / "CLAUDE.md").read_text()


def test_the_nights_budget_stops_training_cleanly_and_says_so(project: Path) -> None:
    config = project / SLEEP_DIR / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["model"]["target"]["budget"] = {"calls": 12}
    config.write_text(yaml.safe_dump(data))
    result = _night(project)
    (run,) = result.runs
    assert run.status == "budget spent" and "budget" in run.reason
    assert result.report["skills"][0]["status"] == "budget spent"
    assert not (project / SLEEP_DIR / "state" / "pending.json").exists()  # the night ended


def test_a_new_skill_s_description_cuts_requests_at_a_word() -> None:
    from skillgrad.sleep.cycle import _clipped

    text = "please add a CHANGELOG.md entry under Unreleased about the split_evenly rounding fix"
    assert _clipped(text, 100) == text
    assert _clipped(text, 70) == "please add a CHANGELOG.md entry under Unreleased about the ..."
    assert _clipped("two\nlines", 100) == "two lines"


def _reference_optimizer(request: ChatRequest) -> Any:
    """The demo's optimizer, but its helpful rule goes under the reference's heading."""
    reply = scripted_optimizer(request)
    if request.kind in ("analyst_failure", "analyst_success") and \
            reply["edits"][0]["content"] == HELPFUL:
        reply["edits"] = [{"op": "insert_after", "anchor": "# Conventions", "content": HELPFUL}]
    return reply


def test_a_night_trains_a_skill_package_and_stages_each_changed_file(project: Path) -> None:
    """The agent's skill is a folder: a night trains SKILL.md and its reference as one
    package, and stages only the file that changed; adoption writes it, rollback restores it."""
    folder = project / ".claude" / "skills" / "shop-dev"
    (folder / "references").mkdir()
    reference = folder / "references" / "conventions.md"
    reference.write_text("# Conventions\n\nKeep changes small.\n")
    config = project / SLEEP_DIR / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["model"]["optimizer"]["function"] = f"{__name__}:_reference_optimizer"
    config.write_text(yaml.safe_dump(data))

    result = _night(project)
    (run,) = result.runs
    assert run.proposed is not None and HELPFUL in run.proposed
    assert result.staged is not None
    night = Staging(project).night(result.night)
    assert [Path(p.target).relative_to(folder).as_posix() for p in night.files] == [
        "references/conventions.md"]  # SKILL.md did not change: not staged
    assert reference.read_text() == "# Conventions\n\nKeep changes small.\n"  # staged only
    staging = Staging(project)
    adopt(staging, result.night)
    assert reference.read_text() == f"# Conventions\n{HELPFUL}\n\nKeep changes small.\n"
    assert (folder / "SKILL.md").read_text() == SKILL
    rollback(staging, result.night)
    assert reference.read_text() == "# Conventions\n\nKeep changes small.\n"
