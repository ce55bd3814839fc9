"""``skillgrad sleep`` as a user runs it (``python -m skillgrad.cli sleep ...``), on the demo
project with its stand-in models and on a copy of a real-format Claude Code session: a bad
character in a prompt, a dry run, a demo written to a relative folder, an adoption cut off half
way."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from skillgrad.sleep.demo import write_demo

FIXTURES = Path(__file__).parent / "fixtures" / "sleep"
S1 = "5d2e1c8a-0b7f-4e2a-9c31-7f0d2a4b6e91"  # the fixture's main Claude Code session
SLEEP = Path(".skillgrad") / "sleep"
LONE = "\ud800"  # half of a surrogate pair: JSON can hold it, UTF-8 cannot
REPLACEMENT = "\ufffd"


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    """``python -m skillgrad.cli ARGS`` as a user runs it (only the skillgrad it imports: the
    scripted models are the demo's own)."""
    return subprocess.run([sys.executable, "-m", "skillgrad.cli", *args], cwd=cwd,
                          env={**os.environ, "COLUMNS": "200", **(env or {})},
                          capture_output=True, text=True, timeout=300)


def _demo(folder: Path) -> tuple[Path, Path, dict[str, str]]:
    """The scripted demo in ``folder``, its window wide enough for the fixture's dates; the
    environment a night runs in."""
    project, claude = write_demo(folder, scripted=True)
    config = project / SLEEP / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["sleep"]["window_hours"] = 24 * 365 * 50
    config.write_text(yaml.safe_dump(data))
    return project, claude, {"CLAUDE_CONFIG_DIR": str(claude), "HOME": str(folder)}


def _with_lone_surrogate(line: str) -> str:
    """A session line whose typed prompt ends in a lone surrogate, written as Claude Code's
    JSON.stringify writes one (the escape ``\\ud800``)."""
    record = json.loads(line)
    record["message"]["content"] += f" {LONE}"
    out = json.dumps(record)
    assert "\\ud800" in out
    return out


def _plant(project: Path, claude: Path) -> None:
    """A lone surrogate in a demo prompt that recurs (so it is mined), and in the typed prompt
    of a copy of the fixture's main session, moved into the project."""
    demo = claude / "projects" / "-shop" / "s0-1.jsonl"
    stat = demo.stat()
    lines = demo.read_text().splitlines()
    demo.write_text("\n".join([_with_lone_surrogate(lines[0]), *lines[1:]]) + "\n")
    os.utime(demo, (stat.st_atime, stat.st_mtime))
    real = FIXTURES / "claude_code" / "projects" / "-home-dev-shop" / f"{S1}.jsonl"
    copied = claude / "projects" / "-fixture" / real.name
    copied.parent.mkdir()
    lines = real.read_text().replace("/home/dev/shop", str(project)).splitlines()
    first = next(i for i, x in enumerate(lines) if json.loads(x).get("uuid") == "u1")
    lines[first] = _with_lone_surrogate(lines[first])
    copied.write_text("\n".join(lines) + "\n")
    day_ago = (datetime.now(timezone.utc) - timedelta(days=1)).timestamp()
    os.utime(copied, (day_ago, day_ago))


def _archived(project: Path) -> dict[str, dict[str, Any]]:
    folder = project / SLEEP / "archive" / "claude_code"
    return {(data := json.loads(p.read_text()))["id"]: data | {"_path": p}
            for p in folder.glob("*.json")}


def _intents(path: Path) -> list[str]:
    return [t["intent"] for t in json.loads(path.read_text(encoding="utf-8"))["tasks"]]


def test_a_lone_surrogate_in_a_prompt_stops_no_night(tmp_path: Path) -> None:
    project, claude, env = _demo(tmp_path / "demo")
    _plant(project, claude)
    out = tmp_path / "tasks.json"
    mined = cli("sleep", "mine", "--out", str(out), "--project", str(project), env=env)
    assert mined.returncode == 0 and "Traceback" not in mined.stderr, mined.stderr
    assert any(i.endswith(f"please fix it {REPLACEMENT}") for i in _intents(out))
    archived = _archived(project)
    prompt = archived[S1]["turns"][0]["text"]
    assert prompt.startswith("why does the tax test fail?") and prompt.endswith(REPLACEMENT)
    # The next night mines the same archive, and trains on it.
    night = cli("sleep", "run", "--project", str(project), env=env)
    assert night.returncode == 0 and "Traceback" not in night.stderr, night.stderr
    assert "# Night" in night.stdout and "- tasks: 16" in night.stdout


def test_an_archive_that_already_holds_a_lone_surrogate_is_read(tmp_path: Path) -> None:
    project, claude, env = _demo(tmp_path / "demo")
    first = cli("sleep", "mine", "--out", str(tmp_path / "t1.json"), "--project", str(project),
                env=env)
    assert first.returncode == 0, first.stderr
    # As an earlier harvest archived it (JSON's escape of the lone surrogate) ...
    path = _archived(project)["s0-1"]["_path"]
    text = path.read_text()
    assert "please fix it" in text
    path.write_text(text.replace("please fix it", "please fix it \\ud800", 1))
    shutil.rmtree(claude)  # ... and the agent has deleted the session since.
    out = tmp_path / "t2.json"
    again = cli("sleep", "mine", "--out", str(out), "--project", str(project), env=env)
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr
    assert any(i.endswith(f"please fix it {REPLACEMENT}") for i in _intents(out))
    night = cli("sleep", "run", "--project", str(project), env=env)
    assert night.returncode == 0 and "Traceback" not in night.stderr, night.stderr


def _snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every path under ``root``: its mode, modification time and (for a file) content."""
    out = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        out[str(path.relative_to(root))] = (stat.st_mode, stat.st_mtime_ns, digest)
    return out


@pytest.mark.parametrize("earlier_night", [False, True])
def test_a_dry_run_writes_nothing_in_the_project(tmp_path: Path, earlier_night: bool) -> None:
    project, _, env = _demo(tmp_path / "demo")
    if earlier_night:  # the project's sleep state exists, the lock file with it
        assert cli("sleep", "run", "--project", str(project), env=env).returncode == 0
    before = _snapshot(project)
    dry = cli("sleep", "dry-run", "--project", str(project), env=env)
    assert dry.returncode == 0, dry.stderr
    assert "# Night" in dry.stdout
    said = dry.stdout + dry.stderr
    assert "dry run: the night ran in a temporary folder; nothing in the project was" in said
    assert "staged: " not in said
    assert _snapshot(project) == before


def test_rollback_undoes_the_latest_adopted_night_by_default(tmp_path: Path) -> None:
    project, _, env = _demo(tmp_path / "demo")
    nothing = cli("sleep", "rollback", "--project", str(project), env=env)
    assert nothing.returncode != 0
    assert "no night has adopted files to roll back" in nothing.stderr
    assert cli("sleep", "run", "--project", str(project), env=env).returncode == 0
    adopted = cli("sleep", "adopt", "--project", str(project), env=env)
    assert adopted.returncode == 0 and "adopted: " in adopted.stdout + adopted.stderr
    before = cli("sleep", "status", "--project", str(project), env=env).stdout
    undone = cli("sleep", "rollback", "--project", str(project), env=env)
    assert undone.returncode == 0, undone.stderr
    assert "restored: " in undone.stdout + undone.stderr
    assert cli("sleep", "status", "--project", str(project), env=env).stdout != before


def test_a_demo_in_a_relative_folder_harvests_its_sessions(tmp_path: Path) -> None:
    made = cli("sleep", "demo", "rel/dir", "--scripted", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    (hint,) = [line for line in made.stdout.splitlines() if line.startswith("try: ")]
    assignment, _, command = hint.removeprefix("try: ").partition(" ")
    claude = assignment.removeprefix("CLAUDE_CONFIG_DIR=")
    project = command.rsplit("--project ", 1)[1]
    night = cli("sleep", "run", "--project", project, cwd=tmp_path,
                env={"CLAUDE_CONFIG_DIR": claude, "HOME": str(tmp_path)})
    assert night.returncode == 0, night.stderr
    assert "- sessions harvested: 32" in night.stdout
    assert Path(claude).is_absolute() and Path(project).is_absolute()
    # Given as relative as the folder was, from where the demo was written, too.
    again = cli("sleep", "dry-run", "--project", "rel/dir/shop", cwd=tmp_path,
                env={"CLAUDE_CONFIG_DIR": "rel/dir/claude", "HOME": str(tmp_path)})
    assert again.returncode == 0 and "- tasks: 16" in again.stdout, again.stderr


class Crash(BaseException):
    """A kill in the middle of an adoption: nothing in skillgrad catches it."""


def test_status_names_an_interrupted_adoption_and_the_command_that_undoes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from skillgrad.sleep import adoption
    from skillgrad.sleep.staging import StagedProposal, Staging

    project = tmp_path / "shop"
    skill = project / ".claude" / "skills" / "vat" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: vat\ndescription: Use for VAT.\n---\n\nOld.\n")
    (project / "CLAUDE.md").write_text("# Shop\n")
    before = {p: p.read_text() for p in (skill, project / "CLAUDE.md")}
    staging = Staging(project)
    staging.stage("20260302T031700Z", [
        StagedProposal(skill, skill.read_text().replace("Old.", "New."), "skill", "vat"),
        StagedProposal(project / "CLAUDE.md", "# Shop\nNew notes.\n", "memory", "CLAUDE.md")],
        "# Night\n", {}, [])
    real, calls = adoption._write_live, []

    def crash_second(path: Path, data: bytes) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise Crash
        real(path, data)

    monkeypatch.setattr(adoption, "_write_live", crash_second)
    with pytest.raises(Crash):
        adoption.adopt(staging, "20260302T031700Z")
    monkeypatch.undo()
    assert skill.read_text() != before[skill]  # half adopted

    status = cli("sleep", "status", "--project", str(project), env={"HOME": str(tmp_path)})
    assert status.returncode == 0, status.stderr
    (line,) = [x for x in status.stdout.splitlines() if x.startswith("interrupted:")]
    assert "night 20260302T031700Z's adoption stopped half way" in line
    assert f"`skillgrad sleep recover --project {project}`" in line
    assert f"`skillgrad sleep adopt 20260302T031700Z --project {project}`" in line
    assert "20260302T031700Z: staged, 2 files (vat, CLAUDE.md) (adoption interrupted)" \
        in status.stdout

    undone = cli("sleep", "recover", "--project", str(project), env={"HOME": str(tmp_path)})
    assert undone.returncode == 0, undone.stderr
    assert "undone: night 20260302T031700Z's adoption" in undone.stdout
    assert {p: p.read_text() for p in before} == before
    after = cli("sleep", "status", "--project", str(project), env={"HOME": str(tmp_path)})
    assert "interrupted" not in after.stdout
    nothing = cli("sleep", "recover", "--project", str(project), env={"HOME": str(tmp_path)})
    assert "nothing to recover" in nothing.stdout
