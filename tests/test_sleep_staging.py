"""Staging, adoption and rollback of a night's proposals (skillgrad.sleep.staging,
skillgrad.sleep.adoption)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from skillgrad.sleep import adoption as adoption_module
from skillgrad.sleep.adoption import adopt, interrupted, recover, rollback
from skillgrad.sleep.staging import (
    ABSENT,
    StagedProposal,
    Staging,
    StagingError,
    ensure_gitignore,
    new_night_id,
)

SKILL = "---\nname: fix-vat-rounding\ndescription: Use when a VAT test fails.\n---\n\nOld body.\n"
NEW_SKILL = SKILL.replace("Old body.", "Round per line, never the sum.")
MEMORY = "# Shop\n\nRun `pytest -q` before a commit.\n"
NEW_MEMORY = MEMORY + "Amounts are integer cents.\n"


class Crash(BaseException):
    """A kill in the middle of an operation: nothing in skillgrad catches it."""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / ".claude" / "skills" / "fix-vat-rounding").mkdir(parents=True)
    (root / ".claude" / "skills" / "fix-vat-rounding" / "SKILL.md").write_text(SKILL)
    (root / "CLAUDE.md").write_text(MEMORY)
    os.chmod(root / "CLAUDE.md", 0o640)
    return root


def skill_path(project: Path) -> Path:
    return project / ".claude" / "skills" / "fix-vat-rounding" / "SKILL.md"


def proposals(project: Path, new: bool = False) -> list[StagedProposal]:
    out = [StagedProposal(Path(".claude/skills/fix-vat-rounding/SKILL.md"), NEW_SKILL, "skill",
                    "fix-vat-rounding"),
           StagedProposal(project / "CLAUDE.md", NEW_MEMORY, "memory", "CLAUDE.md")]
    if new:
        out.append(StagedProposal(Path(".claude/skills/release-notes/SKILL.md"), "---\nname: "
                            "release-notes\ndescription: Drafts notes.\n---\n", "skill",
                            "release-notes"))
    return out


def stage(staging: Staging, night: str = "n1", new: bool = False) -> Path:
    return staging.stage(night, proposals(staging.project, new), "# Night n1\n",
                         {"accepted": True}, [{"task": "t1", "text": "[REDACTED]"}])


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------- staging
def test_a_staged_night_holds_the_proposals_their_diffs_and_the_pins(project: Path) -> None:
    staging = Staging(project)
    folder = stage(staging, new=True)
    assert folder == project / ".skillgrad" / "sleep" / "nights" / "n1"
    manifest = json.loads((folder / "manifest.json").read_text())
    files = {f["name"]: f for f in manifest["files"]}
    skill = files["fix-vat-rounding"]
    assert skill["live_sha256"] == sha(skill_path(project))
    assert skill["realpath"] == os.path.realpath(skill_path(project))
    assert skill["proposal_sha256"] == hashlib.sha256(NEW_SKILL.encode()).hexdigest()
    assert (folder / skill["proposed"]).read_text() == NEW_SKILL
    diff = (folder / skill["diff"]).read_text()
    assert diff.startswith("--- a/.claude/skills/fix-vat-rounding/SKILL.md\n+++ b/")
    assert "-Old body.\n+Round per line, never the sum.\n" in diff
    new = files["release-notes"]
    assert new["live_sha256"] == ABSENT
    assert (folder / new["diff"]).read_text().startswith("--- /dev/null\n")
    assert (folder / "report.md").read_text() == "# Night n1\n"
    assert json.loads((folder / "report.json").read_text()) == {"accepted": True}
    assert [json.loads(x) for x in (folder / "evidence.jsonl").read_text().splitlines()] == [
        {"task": "t1", "text": "[REDACTED]"}]
    assert staging.latest() == "n1"
    [night] = staging.nights()
    assert (night.id, night.state, night.adopted) == ("n1", "staged", ())
    assert [p.name for p in night.files] == ["fix-vat-rounding", "CLAUDE.md", "release-notes"]
    assert skill_path(project).read_text() == SKILL  # staging touches no live file


def test_a_staging_that_stops_before_its_manifest_is_not_a_night_and_is_redone(
        project: Path) -> None:
    staging = Staging(project)

    def evidence() -> Any:
        yield {"task": "t1"}
        raise Crash

    with pytest.raises(Crash):
        staging.stage("n1", proposals(project), "r", {}, evidence())
    assert (staging.root / "nights" / "n1").is_dir()
    assert staging.nights() == []
    stage(staging)
    assert [n.id for n in staging.nights()] == ["n1"]
    with pytest.raises(StagingError, match="n1 is staged already"):
        stage(staging)


def test_staging_refuses_what_it_could_never_adopt(project: Path) -> None:
    staging = Staging(project)
    twice = [*proposals(project), StagedProposal(Path("CLAUDE.md"), "x", "memory", "memory-2")]
    with pytest.raises(StagingError, match="CLAUDE.md: proposed twice"):
        staging.stage("n1", twice, "", {}, [])
    with pytest.raises(StagingError, match="inside skillgrad's own folder"):
        staging.stage("n2", [StagedProposal(Path(".skillgrad/sleep/latest"), "x", "memory", "m")],
                      "", {}, [])
    with pytest.raises(StagingError, match="is a folder, not a file"):
        staging.stage("n3", [StagedProposal(Path(".claude"), "x", "memory", "m")], "", {}, [])
    with pytest.raises(StagingError, match="not a night id"):
        staging.stage("../up", proposals(project), "", {}, [])
    with pytest.raises(StagingError, match="unknown proposal kind"):
        staging.stage("n4", [StagedProposal(Path("X.md"), "x", "rule",  # type: ignore[arg-type]
                                            "x")], "", {}, [])


def test_night_ids_are_utc_times() -> None:
    from datetime import datetime, timedelta, timezone
    paris = timezone(timedelta(hours=1))
    assert new_night_id(datetime(2026, 3, 2, 4, 17, tzinfo=paris)) == "20260302T031700Z"
    with pytest.raises(ValueError):
        new_night_id(datetime(2026, 3, 2, 4, 17))


# ---------------------------------------------------------------------- .gitignore
def test_the_first_use_ignores_the_folder_in_git_once_keeping_the_users_lines(
        tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    Staging(fresh).stage("n1", [], "", {}, [])
    assert (fresh / ".gitignore").read_bytes() == b".skillgrad/\n"

    user = tmp_path / "user"
    user.mkdir()
    original = b"# mine\r\nnode_modules/\r\n!keep.log\r\n*.log"  # CRLF, no final newline
    (user / ".gitignore").write_bytes(original)
    assert ensure_gitignore(user) is True
    assert (user / ".gitignore").read_bytes() == original + b"\r\n.skillgrad/\r\n"
    assert ensure_gitignore(user) is False
    Staging(user).stage("n1", [], "", {}, [])
    assert (user / ".gitignore").read_bytes() == original + b"\r\n.skillgrad/\r\n"

    other = tmp_path / "other"
    other.mkdir()
    (other / ".gitignore").write_bytes(b"dist/\n/.skillgrad\n\xff odd bytes\n")
    assert ensure_gitignore(other) is False
    assert (other / ".gitignore").read_bytes() == b"dist/\n/.skillgrad\n\xff odd bytes\n"


# ---------------------------------------------------------------------- adoption
def test_adoption_backs_up_then_replaces_each_file_keeping_its_permissions(
        project: Path) -> None:
    staging = Staging(project)
    folder = stage(staging, new=True)
    adopted = adopt(staging, "n1")
    assert skill_path(project).read_text() == NEW_SKILL
    assert (project / "CLAUDE.md").read_text() == NEW_MEMORY
    assert oct(os.stat(project / "CLAUDE.md").st_mode & 0o777) == oct(0o640)
    new = project / ".claude" / "skills" / "release-notes" / "SKILL.md"
    assert new.read_text().startswith("---\nname: release-notes")
    backups = {a.target.name if a.target.name != "SKILL.md" else a.target.parent.name: a.backup
               for a in adopted}
    assert backups["release-notes"] is None
    assert backups["CLAUDE.md"] is not None and backups["CLAUDE.md"].read_text() == MEMORY
    assert oct(os.stat(backups["CLAUDE.md"]).st_mode & 0o777) == oct(0o640)
    assert backups["fix-vat-rounding"] is not None
    assert backups["fix-vat-rounding"].read_text() == SKILL
    assert not (folder / "journal.json").exists()
    [night] = staging.nights()
    assert night.state == "adopted" and len(night.adopted) == 3
    with pytest.raises(StagingError, match="nothing left to adopt"):
        adopt(staging, "n1")
    leftovers = [p for p in project.rglob("*.tmp")]
    assert leftovers == []


def test_adoption_writes_through_a_symlink_that_was_there_at_staging(project: Path,
                                                                     tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "CLAUDE.md").write_text(MEMORY)
    (project / "CLAUDE.md").unlink()
    (project / "CLAUDE.md").symlink_to(dotfiles / "CLAUDE.md")
    staging = Staging(project)
    stage(staging)
    adopt(staging, "n1", files=["CLAUDE.md"])
    assert (project / "CLAUDE.md").is_symlink()
    assert (dotfiles / "CLAUDE.md").read_text() == NEW_MEMORY
    assert skill_path(project).read_text() == SKILL  # only the file asked for
    adopt(staging, "n1")  # then the rest
    assert skill_path(project).read_text() == NEW_SKILL


@pytest.mark.parametrize("change, message", [
    ("edit", "CLAUDE.md: changed since night n1 was staged"),
    ("delete", "CLAUDE.md: disappeared since night n1 was staged"),
    ("create", "release-notes/SKILL.md: appeared since night n1 was staged"),
])
def test_adoption_refuses_a_night_whose_live_file_moved_on(project: Path, change: str,
                                                            message: str) -> None:
    staging = Staging(project)
    stage(staging, new=True)
    if change == "edit":
        (project / "CLAUDE.md").write_text(MEMORY + "my own line\n")
    elif change == "delete":
        (project / "CLAUDE.md").unlink()
    else:
        (project / ".claude" / "skills" / "release-notes").mkdir()
        (project / ".claude" / "skills" / "release-notes" / "SKILL.md").write_text("mine")
    with pytest.raises(StagingError, match=message) as err:
        adopt(staging, "n1")
    assert "\n" not in str(err.value)
    assert skill_path(project).read_text() == SKILL  # all or nothing
    assert staging.night("n1").state == "refused"
    if change == "edit":
        assert (project / "CLAUDE.md").read_text() == MEMORY + "my own line\n"


def test_adoption_refuses_a_path_that_now_crosses_a_new_symlink(project: Path,
                                                                tmp_path: Path) -> None:
    staging = Staging(project)
    stage(staging)
    elsewhere = tmp_path / "elsewhere"
    (project / ".claude").rename(elsewhere)
    (project / ".claude").symlink_to(elsewhere)  # same bytes, other place
    with pytest.raises(StagingError, match=r"crosses a symlink \(.*/shop/\.claude\)"):
        adopt(staging, "n1")
    assert (elsewhere / "skills" / "fix-vat-rounding" / "SKILL.md").read_text() == SKILL


def test_adoption_refuses_a_staged_proposal_edited_after_staging(project: Path) -> None:
    staging = Staging(project)
    folder = stage(staging)
    night = staging.night("n1")
    (folder / night.files[1].proposed).write_text("rm -rf /\n")
    with pytest.raises(StagingError, match="staged proposal was modified"):
        adopt(staging, "n1")
    assert (project / "CLAUDE.md").read_text() == MEMORY


def test_adopt_names_a_file_the_night_does_not_propose(project: Path) -> None:
    staging = Staging(project)
    stage(staging)
    with pytest.raises(StagingError, match="proposes no file 'AGENTS.md'"):
        adopt(staging, "n1", files=["AGENTS.md"])
    with pytest.raises(StagingError, match="no night n9 is staged"):
        adopt(staging, "n9")


# ---------------------------------------------------------------------- rollback
def test_rollback_puts_back_every_file_and_removes_the_new_ones(project: Path) -> None:
    staging = Staging(project)
    stage(staging, new=True)
    adopt(staging, "n1")
    restored = rollback(staging, "n1")
    assert len(restored) == 3
    assert skill_path(project).read_text() == SKILL
    assert (project / "CLAUDE.md").read_text() == MEMORY
    assert not (project / ".claude" / "skills" / "release-notes").exists()
    assert staging.night("n1").state == "rolled back"
    with pytest.raises(StagingError, match="nothing adopted to roll back"):
        rollback(staging, "n1")
    adopt(staging, "n1")  # the pins hold again
    assert (project / "CLAUDE.md").read_text() == NEW_MEMORY
    events = [json.loads(x)["event"] for x in
              (staging.night_dir("n1") / "history.jsonl").read_text().splitlines()]
    assert events == ["staged", "adopted", "rolled_back", "adopted"]


def test_rollback_refuses_when_a_live_file_changed_since_adoption(project: Path) -> None:
    staging = Staging(project)
    stage(staging)
    adopt(staging, "n1")
    (project / "CLAUDE.md").write_text(NEW_MEMORY + "edited after adoption\n")
    with pytest.raises(StagingError, match="CLAUDE.md: changed since night n1 was adopted"):
        rollback(staging, "n1")
    assert skill_path(project).read_text() == NEW_SKILL  # nothing rolled back
    assert staging.night("n1").state == "adopted"


# ---------------------------------------------------------------------- crashes
def crash_on_call(monkeypatch: pytest.MonkeyPatch, n: int) -> list[Path]:
    """Make the n-th live write raise Crash before it happens."""
    real = adoption_module._write_live
    calls: list[Path] = []

    def write(path: Path, data: bytes) -> None:
        calls.append(path)
        if len(calls) == n:
            raise Crash
        real(path, data)

    monkeypatch.setattr(adoption_module, "_write_live", write)
    return calls


def test_a_crash_between_two_replaces_is_undone_by_the_next_call(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging = Staging(project)
    folder = stage(staging)
    crash_on_call(monkeypatch, 2)
    with pytest.raises(Crash):
        adopt(staging, "n1")
    assert skill_path(project).read_text() == NEW_SKILL  # the first file went live
    assert (project / "CLAUDE.md").read_text() == MEMORY
    assert (folder / "journal.json").exists()
    monkeypatch.undo()

    later = Staging(project)  # another process, later
    assert recover(later) == ["n1"]
    assert skill_path(project).read_text() == SKILL
    assert (project / "CLAUDE.md").read_text() == MEMORY
    assert not (folder / "journal.json").exists()
    assert later.night("n1").state == "staged"
    adopt(later, "n1")
    assert (project / "CLAUDE.md").read_text() == NEW_MEMORY


def test_adopt_itself_recovers_a_crashed_adoption_first(project: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    staging = Staging(project)
    stage(staging, new=True)
    crash_on_call(monkeypatch, 3)
    with pytest.raises(Crash):
        adopt(staging, "n1")
    monkeypatch.undo()
    adopt(staging, "n1")
    assert skill_path(project).read_text() == NEW_SKILL
    assert (project / ".claude" / "skills" / "release-notes" / "SKILL.md").exists()
    events = [json.loads(x)["event"] for x in
              (staging.night_dir("n1") / "history.jsonl").read_text().splitlines()]
    assert events == ["staged", "recovered", "adopted"]


def test_a_crash_in_a_rollback_is_undone_too(project: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    staging = Staging(project)
    stage(staging, new=True)
    adopt(staging, "n1")
    crash_on_call(monkeypatch, 2)
    with pytest.raises(Crash):
        rollback(staging, "n1")
    monkeypatch.undo()
    assert recover(staging) == ["n1"]
    assert skill_path(project).read_text() == NEW_SKILL
    assert (project / "CLAUDE.md").read_text() == NEW_MEMORY
    rollback(staging, "n1")
    assert (project / "CLAUDE.md").read_text() == MEMORY
    assert not (project / ".claude" / "skills" / "release-notes").exists()


def test_a_crash_after_the_commit_keeps_the_adoption(project: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    staging = Staging(project)
    stage(staging)
    real = Staging.add_history

    def event(self: Staging, folder: Path, name: str, **data: Any) -> None:
        if name == "adopted":
            raise Crash
        real(self, folder, name, **data)

    monkeypatch.setattr(Staging, "add_history", event)
    with pytest.raises(Crash):
        adopt(staging, "n1")
    monkeypatch.undo()
    assert recover(staging) == []  # committed: nothing to undo
    assert (project / "CLAUDE.md").read_text() == NEW_MEMORY
    night = staging.night("n1")
    assert night.state == "adopted" and len(night.adopted) == 2
    assert not (night.path / "journal.json").exists()


def test_a_file_changed_by_another_writer_mid_adoption_undoes_the_rest_at_once(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging = Staging(project)
    folder = stage(staging)
    real = adoption_module._write_live

    def write(path: Path, data: bytes) -> None:
        real(path, data)
        (project / "CLAUDE.md").write_text("an editor saved this\n")  # no lock of ours

    monkeypatch.setattr(adoption_module, "_write_live", write)
    with pytest.raises(StagingError, match="CLAUDE.md: changed while night n1 was being adopted"):
        adopt(staging, "n1")
    assert skill_path(project).read_text() == SKILL  # put back
    assert (project / "CLAUDE.md").read_text() == "an editor saved this\n"
    assert not (folder / "journal.json").exists()


def test_recovery_leaves_alone_a_file_someone_changed_after_the_crash(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging = Staging(project)
    stage(staging)
    crash_on_call(monkeypatch, 2)
    with pytest.raises(Crash):
        adopt(staging, "n1")
    monkeypatch.undo()
    skill_path(project).write_text("the user's own edit\n")
    with pytest.raises(StagingError, match="SKILL.md: changed after an interrupted adopt"):
        recover(staging)
    assert skill_path(project).read_text() == "the user's own edit\n"


def test_what_an_interruption_left_is_read_without_undoing_it(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging = Staging(project)
    stage(staging)
    assert interrupted(staging) == []
    crash_on_call(monkeypatch, 2)
    with pytest.raises(Crash):
        adopt(staging, "n1")
    monkeypatch.undo()
    (cut,) = interrupted(staging)
    assert (cut.night, cut.op, cut.committed, cut.running) == ("n1", "adopt", False, False)
    assert cut.journal.exists() and skill_path(project).read_text() == NEW_SKILL  # untouched
    with open(staging.night_dir("n1") / "night.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another process at work on it
        assert interrupted(staging)[0].running
    assert recover(staging) == ["n1"] and interrupted(staging) == []
    real = Staging.add_history

    def event(self: Staging, folder: Path, name: str, **data: Any) -> None:
        if name == "adopted":
            raise Crash
        real(self, folder, name, **data)

    monkeypatch.setattr(Staging, "add_history", event)
    with pytest.raises(Crash):
        adopt(staging, "n1")
    monkeypatch.undo()
    (cut,) = interrupted(staging)
    assert (cut.op, cut.committed) == ("adopt", True)  # finished: only its record is left


# ---------------------------------------------------------------------- concurrency
def test_two_adoptions_at_once_one_waits_and_then_finds_nothing_left(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    staging = Staging(project)
    stage(staging)
    real = adoption_module._write_live

    def slow(path: Path, data: bytes) -> None:
        time.sleep(0.3)
        real(path, data)

    monkeypatch.setattr(adoption_module, "_write_live", slow)
    results: list[str] = []
    start = threading.Barrier(2)

    def adopt_once() -> None:
        start.wait()
        try:
            adopt(Staging(project), "n1")
            results.append("adopted")
        except StagingError as exc:
            results.append(str(exc))

    threads = [threading.Thread(target=adopt_once) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count("adopted") == 1
    [refusal] = [r for r in results if r != "adopted"]
    assert "nothing left to adopt" in refusal
    assert skill_path(project).read_text() == NEW_SKILL
    assert (project / "CLAUDE.md").read_text() == NEW_MEMORY
    events = [json.loads(x)["event"] for x in
              (staging.night_dir("n1") / "history.jsonl").read_text().splitlines()]
    assert events.count("adopted") == 1


def test_two_nights_on_one_file_at_once_never_tear_it(project: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    staging = Staging(project)
    stage(staging, "n1")
    other = [StagedProposal(Path("CLAUDE.md"), "# Other night\n" * 200, "memory", "CLAUDE.md")]
    staging.stage("n2", other, "", {}, [])
    real = adoption_module._write_live

    def slow(path: Path, data: bytes) -> None:
        time.sleep(0.2)
        real(path, data)

    monkeypatch.setattr(adoption_module, "_write_live", slow)
    outcome: dict[str, str] = {}

    def adopt_night(night: str) -> None:
        try:
            adopt(Staging(project), night)
            outcome[night] = "adopted"
        except StagingError as exc:
            outcome[night] = str(exc)

    threads = [threading.Thread(target=adopt_night, args=(n,)) for n in ("n1", "n2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert list(outcome.values()).count("adopted") == 1
    loser = next(n for n, v in outcome.items() if v != "adopted")
    assert "CLAUDE.md: changed since night" in outcome[loser]
    text = (project / "CLAUDE.md").read_text()
    assert text in (NEW_MEMORY, "# Other night\n" * 200)


def test_a_file_another_process_holds_is_refused_with_its_pid(project: Path) -> None:
    staging = Staging(project, lock_timeout=0.3)
    stage(staging)
    lock = staging.lock_path(os.path.realpath(project / "CLAUDE.md"))
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import fcntl, os, sys, time\n"
         "f = open(sys.argv[1], 'a+'); fcntl.flock(f, fcntl.LOCK_EX)\n"
         "f.truncate(0); f.write(f'{os.getpid()}\\n'); f.flush(); print('held', flush=True)\n"
         "time.sleep(30)\n", str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(StagingError, match=f"in use by another skillgrad process "
                                               f"\\(PID {holder.pid}\\)"):
            adopt(staging, "n1")
    finally:
        holder.kill()
        holder.wait()
    assert skill_path(project).read_text() == SKILL
    adopt(staging, "n1")  # the kernel dropped the dead holder's lock
    assert skill_path(project).read_text() == NEW_SKILL


def test_the_lock_is_an_flock_that_a_second_opener_cannot_take(project: Path) -> None:
    staging = Staging(project)
    stage(staging)
    path = staging.lock_path("/x")
    with (adoption_module._flock(path, "x", staging.lock_timeout), open(path) as fh,
          pytest.raises(BlockingIOError)):
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
