"""``skillgrad export``: a run's skill as a skill folder, a memory-file section, or installed
for Claude Code or Codex (skillgrad.export, skillgrad.cli.export)."""

from __future__ import annotations

import inspect
import json
import os
import random
import shutil
import string
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toy
import yaml
from conftest import toy_config_full
from e2e import one_line_error

from skillgrad.agentskills import parse_skill, validate_skill
from skillgrad.cli.export import resolve_version
from skillgrad.config import load_config
from skillgrad.errors import RunDirError
from skillgrad.export import (
    ExportError,
    default_description,
    describe_skill,
    export_skill,
    install_root,
    install_skill,
    section_markers,
    skill_name,
    strip_block_markers,
    write_export,
)
from skillgrad.models.scripted import ScriptedModel
from skillgrad.rundir import RunDir
from skillgrad.skill import skill_hash
from skillgrad.trainer import build_trainer

BLOCK = "<!-- APPENDIX_START -->\n- Check the item before you answer.\n<!-- APPENDIX_END -->"
SKILL = ("# Toy skill\n\nAnswer the question about the item.\n\nRule color: reply with the bare "
         f"value.\n\n{BLOCK}\n")
DESCRIPTION = "Answers questions about items. Use when asked for an attribute of an item."
LONG = " ".join("".join(random.Random(n).choices(string.ascii_lowercase, k=7))
               for n in range(150))  # over 1,024 characters, and not a runaway reply
# Registers the command on the main command line unless it is there already, then runs it.
MAIN = ("import skillgrad.cli.main as c\nfrom skillgrad.cli.export import export_command\n"
        "if not any(x.name == 'export' for x in c.app.registered_commands):\n"
        "    c.app.command('export')(export_command)\nc.main()\n")


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished toy run (two epochs of three steps; rejected, accepted and skipped steps)
    whose skill has a protected block, in a folder whose name is no valid skill name."""
    folder = tmp_path_factory.mktemp("toy")
    config = toy_config_full(folder, skill=SKILL)
    build_trainer(load_config(config), folder / "Toy_Run 2").fit()
    return folder / "Toy_Run 2"


@pytest.fixture
def run(trained: Path, tmp_path: Path) -> Path:
    """A copy of the trained run that a test may change."""
    return Path(shutil.copytree(trained, tmp_path / "Toy_Run 2"))


def _toy_run(folder: Path, skill: str = toy.INITIAL_SKILL) -> Path:
    """A one-step toy run that starts from ``skill``."""
    folder.mkdir(parents=True)
    config = toy_config_full(folder, skill=skill)
    build_trainer(load_config(config, ["train.num_epochs=1", "train.steps_per_epoch=1"]),
                  folder / "run").fit()
    return folder / "run"


def state_of(run: Path) -> dict[str, Any]:
    return json.loads((run / "checkpoint.json").read_text())


def export(*args: str, cwd: Path, home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``skillgrad export ARGS`` as a user runs it, with HOME at ``home`` (never the real one)
    and no agent folder variables but those in ``env``."""
    tests = str(Path(__file__).parent)
    full = {k: v for k, v in os.environ.items() if k not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME")}
    full.update(HOME=str(home), PYTHONPATH=tests, COLUMNS="200", **env)
    return subprocess.run([sys.executable, "-c", MAIN, "export", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=120)


# ----------------------------------------------------------------------------- versions


@pytest.mark.parametrize("name", ["initial", "best", "final"])
def test_named_versions_are_the_runs_skills(trained: Path, name: str) -> None:
    summary = json.loads((trained / "summary.json").read_text())
    version = resolve_version(trained, name)
    assert version.digest == summary["skills"][name]
    assert version.text == RunDir(trained).load_skill(version.digest)
    assert version.label.startswith(name)


def test_the_runs_steps_hold_accepted_rejected_and_skipped_decisions(trained: Path) -> None:
    decisions = {r["decision"] for r in state_of(trained)["history"]}
    assert {"reject", "accept_new_best", "skip"} <= decisions


def test_a_step_is_the_skill_training_held_after_it(trained: Path) -> None:
    state = state_of(trained)
    best = state["best_step"]
    record = state["history"][best - 1]
    step_id = f"e{record['epoch']:02d}-s{record['step']:03d}"
    assert resolve_version(trained, step_id).digest == state["best_hash"]
    assert resolve_version(trained, str(best)).digest == state["best_hash"]
    assert resolve_version(trained, f"e{record['epoch']}-s{record['step']}").digest == \
        state["best_hash"]
    previous = resolve_version(trained, "1").digest
    for r in state["history"][1:]:  # a step the gate did not accept keeps the skill it had
        here = resolve_version(trained, str(r["global_step"])).digest
        if r["decision"].startswith("accept"):
            assert here == r["candidate_hash"]
        elif r["step"] > 1:
            assert here == previous
        previous = here
    first = state["history"][0]
    assert first["decision"] == "reject"
    assert resolve_version(trained, "e01-s001").digest == state["initial_hash"]
    assert resolve_version(trained, str(len(state["history"]))).digest == state["current_hash"]


def test_a_hash_prefix_names_any_stored_skill(trained: Path) -> None:
    rejected = next(r["candidate_hash"] for r in state_of(trained)["history"]
                    if r["decision"] == "reject")
    version = resolve_version(trained, rejected[:6].upper())
    assert version.digest == rejected
    assert skill_hash(version.text) == rejected
    assert resolve_version(trained, rejected).digest == rejected  # the whole hash too


def test_an_unknown_version_lists_what_the_run_holds(trained: Path) -> None:
    state = state_of(trained)
    for wrong in ("latest", "e09-s001", "99", "ffffffffff"):
        with pytest.raises(RunDirError) as err:
            resolve_version(trained, wrong)
        message = str(err.value)
        assert "\n" not in message
        assert f"--version {wrong!r}: is not a version of this run" in message
        assert "initial, best, final" in message and "e01-s001 to e02-s003, or 1 to 6" in message
        assert f"{state['initial_hash'][:8]} (initial)" in message
        assert "reject at e01-s001" in message


def test_an_ambiguous_hash_prefix_is_refused(run: Path) -> None:
    best = state_of(run)["best_hash"]
    twin = next(f"twin {n}" for n in range(10**6) if skill_hash(f"twin {n}")[:4] == best[:4])
    RunDir(run).save_skill(twin)
    with pytest.raises(RunDirError, match=r"names 2 skills \(skill .*; skill .*\)"):
        resolve_version(run, best[:4])
    assert resolve_version(run, best[:12]).digest == best


def test_a_folder_that_is_no_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match="no such folder"):
        resolve_version(tmp_path / "nothing", "best")


def test_a_modified_skill_file_is_refused(run: Path) -> None:
    path = next((run / "skills").glob("*.md"))
    path.write_text(path.read_text() + "tampered\n")
    with pytest.raises(RunDirError, match="modified"):
        resolve_version(run, "ffff")


# ----------------------------------------------------------------------------- skill folders


def test_a_skill_folder_follows_the_agent_skills_rules(tmp_path: Path) -> None:
    path = export_skill(SKILL, "skill-folder", tmp_path, name="toy-items",
                        description=DESCRIPTION)
    assert path == tmp_path / "toy-items" / "SKILL.md"
    front, body, _ = parse_skill(path.read_text(), str(path))
    assert front == {"name": "toy-items", "description": DESCRIPTION}
    assert validate_skill(front, body, path.parent.name) == []
    assert body.startswith("\n# Toy skill\n")
    assert "- Check the item before you answer." in body


def test_the_python_api_keeps_its_signature() -> None:
    params = inspect.signature(export_skill).parameters
    assert list(params) == ["skill_text", "fmt", "out", "name", "description", "keep_blocks"]
    assert [p.kind.name for p in params.values()][3:] == ["KEYWORD_ONLY"] * 3
    assert params["keep_blocks"].default is False


def test_block_markers_are_taken_out_unless_kept(tmp_path: Path) -> None:
    stripped = export_skill(SKILL, "skill-folder", tmp_path / "a", name="toy",
                            description=DESCRIPTION).read_text()
    kept = export_skill(SKILL, "skill-folder", tmp_path / "b", name="toy",
                        description=DESCRIPTION, keep_blocks=True).read_text()
    assert "APPENDIX" not in stripped and "<!--" not in stripped
    assert stripped.endswith("value.\n\n- Check the item before you answer.\n")
    assert BLOCK in kept


def test_strip_block_markers_keeps_every_blocks_text() -> None:
    text = ("A\n\n<!-- slow_update_start -->\nG1\n<!-- SLOW_UPDATE_END -->\n\nB\n\n"
            "<!-- EMPTY_START -->\n<!-- EMPTY_END -->\n\nC\n<!-- OPEN_START -->\nrest\n")
    assert strip_block_markers(text) == "A\n\nG1\n\nB\n\nC\nrest\n"
    assert strip_block_markers("no blocks <!-- a comment -->\n") == "no blocks <!-- a comment -->\n"


def test_a_skill_with_front_matter_keeps_its_other_fields(tmp_path: Path) -> None:
    text = "---\nname: old\ndescription: old one\nlicense: MIT\n---\n\n# Old\n\nDo it.\n"
    path = export_skill(text, "skill-folder", tmp_path, name="new", description=DESCRIPTION)
    front, body, _ = parse_skill(path.read_text(), str(path))
    assert front == {"license": "MIT", "name": "new", "description": DESCRIPTION}
    assert body == "\n# Old\n\nDo it.\n"


@pytest.mark.parametrize("name, description, problems", [
    ("Toy--Skill", DESCRIPTION, ["name 'Toy--Skill': only a-z, 0-9 and '-'"]),
    ("-toy", DESCRIPTION, ["name '-toy': only a-z"]),
    ("t" * 65, DESCRIPTION, ["name: 65 characters (at most 64)"]),
    ("toy", "", ["description: missing"]),
    ("toy", "x" * 1025, ["description: 1025 characters (at most 1024)"]),
    ("Bad Name", "x" * 2000, ["name 'Bad Name'", "description: 2000 characters"]),
])
def test_an_invalid_name_or_description_is_refused_in_one_line(
        tmp_path: Path, name: str, description: str, problems: list[str]) -> None:
    with pytest.raises(ExportError) as err:
        export_skill(SKILL, "skill-folder", tmp_path, name=name, description=description)
    assert "\n" not in str(err.value)
    for problem in problems:
        assert problem in str(err.value)
    assert list(tmp_path.iterdir()) == []


def test_an_empty_skill_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="empty"):
        export_skill("<!-- A_START -->\n<!-- A_END -->\n", "skill-folder", tmp_path,
                     name="toy", description=DESCRIPTION)


def test_a_different_skill_is_not_overwritten_without_force(tmp_path: Path) -> None:
    path = export_skill(SKILL, "skill-folder", tmp_path, name="toy", description=DESCRIPTION)
    old = path.read_bytes()
    assert not write_export(SKILL, "skill-folder", tmp_path, name="toy",
                            description=DESCRIPTION).changed
    with pytest.raises(ExportError, match="a different skill named 'toy' is there; give --force"):
        export_skill(SKILL + "More.\n", "skill-folder", tmp_path, name="toy",
                     description=DESCRIPTION)
    assert path.read_bytes() == old
    done = write_export(SKILL + "More.\n", "skill-folder", tmp_path, name="toy",
                        description=DESCRIPTION, force=True)
    assert done.changed and done.backup is not None
    assert done.backup.parent == path.parent
    assert done.backup.name.startswith("SKILL.md.bak-") and done.backup.name.endswith("Z")
    assert done.backup.read_bytes() == old
    assert "More." in path.read_text()
    again = write_export(SKILL, "skill-folder", tmp_path, name="toy", description=DESCRIPTION,
                         force=True)  # a second backup in the same second gets its own name
    assert again.backup is not None and again.backup != done.backup
    assert "More." in again.backup.read_text() and done.backup.read_bytes() == old


def test_a_linked_skill_file_is_backed_up_and_replaced_through_its_link(tmp_path: Path) -> None:
    elsewhere = tmp_path / "dotfiles" / "SKILL.md"
    elsewhere.parent.mkdir()
    elsewhere.write_text("---\nname: toy\ndescription: mine\n---\n\nMine.\n")
    (tmp_path / "skills" / "toy").mkdir(parents=True)
    link = tmp_path / "skills" / "toy" / "SKILL.md"
    link.symlink_to(elsewhere)
    done = write_export(SKILL, "skill-folder", tmp_path / "skills", name="toy",
                        description=DESCRIPTION, force=True)
    assert link.is_symlink() and "Rule color" in elsewhere.read_text()
    assert done.backup is not None and done.backup.read_text().endswith("Mine.\n")


def test_a_folder_that_is_no_skill_folder_is_not_written_into(tmp_path: Path) -> None:
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "notes.txt").write_text("mine")
    with pytest.raises(ExportError, match="holds no SKILL.md"):
        export_skill(SKILL, "skill-folder", tmp_path, name="toy", description=DESCRIPTION)
    assert not (tmp_path / "toy" / "SKILL.md").exists()


def test_skill_name_makes_a_valid_name() -> None:
    assert skill_name("Toy_Run 2") == "toy-run-2"
    assert skill_name("--Café__Über--") == "cafe-uber"
    assert skill_name("a" * 63 + "-b") == "a" * 63
    assert skill_name("___") == ""


def test_the_default_description_says_what_the_skill_is() -> None:
    text = default_description(SKILL, "qa")
    assert text == ("Toy skill. A skill trained with skillgrad on tasks of the 'qa' "
                    "environment; use it for tasks of that kind.")
    assert default_description("No heading here!\n", None) == \
        "No heading here! A skill trained with skillgrad."
    assert len(default_description("# " + "word " * 400, "qa")) <= 1024


# ----------------------------------------------------------------------------- --describe


def test_describe_asks_the_model_one_json_question() -> None:
    model = ScriptedModel([{"description": f"  {DESCRIPTION}\n"}])
    assert describe_skill(model, SKILL, "toy") == DESCRIPTION
    (request,) = model.calls
    assert request.kind == "export_describe" and request.json_schema is not None
    prompt = request.messages[0].text()
    assert "Rule color" in prompt and "`toy`" in prompt and "APPENDIX" not in prompt


@pytest.mark.parametrize("replies, why", [
    (["not json", "still not json"], "could not be used"),
    ([{"description": LONG}], f"{len(LONG)} characters"),
    ([{"description": "   "}], "0 characters"),
])
def test_an_unusable_description_is_refused(replies: list[Any], why: str) -> None:
    with pytest.raises(ExportError, match=why):
        describe_skill(ScriptedModel(replies), SKILL, "toy")


def test_describe_through_the_command_uses_the_runs_optimizer(run: Path, tmp_path: Path) -> None:
    config = yaml.safe_load((run / "config.yaml").read_text())
    config["model"]["optimizer"].update(function=None, function_args=None, rules=[
        {"when": "description of a skill", "reply": {"description": DESCRIPTION}}])
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    proc = export(str(run), "--describe", "--format", "skill-folder", "--out", "out",
                  cwd=tmp_path, home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    assert f"description (proposed by the run's optimizer): {DESCRIPTION}" in proc.stdout
    front, _, _ = parse_skill((tmp_path / "out" / "toy-run-2" / "SKILL.md").read_text(), "x")
    assert front == {"name": "toy-run-2", "description": DESCRIPTION}


# ----------------------------------------------------------------------------- memory files


def test_agents_md_sections_leave_every_other_byte_alone(tmp_path: Path) -> None:
    path = tmp_path / "AGENTS.md"
    before, after = "# Project\r\n\r\nUse tabs.\r\n\r\n", "\r\n## Later\r\n\r\nMine.  \r\n"
    path.write_bytes(before.encode())
    assert not write_export(SKILL, "agents-md", path, name="toy",
                            description=DESCRIPTION).replaced_section
    text = path.read_bytes().decode()
    begin, end = section_markers("toy")
    assert text.startswith(before + begin + "\r\n") and text.endswith(end + "\r\n")
    assert "\n" not in text.replace("\r\n", "")  # the file's own line ends throughout
    path.write_bytes((text + after).encode())
    other = export_skill("# Other\n\nBe brief.\n", "agents-md", path, name="other",
                         description="Brief replies. Use when asked to be brief.")
    assert other == path
    old = path.read_bytes().decode()
    old_stop = old.index(end) + len(end)
    done = write_export(SKILL.replace("bare value", "value alone"), "agents-md", path,
                        name="toy", description=DESCRIPTION)
    assert done.changed and done.replaced_section
    new = path.read_bytes().decode()
    start, stop = new.index(begin), new.index(end) + len(end)
    assert new[:start] == before  # every byte outside the section is as it was
    assert new[stop:] == old[old_stop:]
    assert new[stop:].startswith("\r\n" + after) and section_markers("other")[0] in new[stop:]
    assert "value alone" in new[start:stop] and "bare value" not in new
    assert not write_export(SKILL.replace("bare value", "value alone"), "agents-md", path,
                            name="toy", description=DESCRIPTION).changed


def test_an_agents_md_export_makes_a_new_file(tmp_path: Path) -> None:
    path = export_skill(SKILL, "agents-md", tmp_path / "sub" / "CLAUDE.md", name="toy",
                        description=DESCRIPTION, keep_blocks=True)
    begin, end = section_markers("toy")
    demoted = SKILL.replace("# Toy skill", "## Toy skill", 1)  # no H1 inside someone's file
    assert path.read_text() == f"{begin}\n> **toy**: {DESCRIPTION}\n\n{demoted}{end}\n"


def test_a_section_s_headings_sit_below_the_memory_file_s_own() -> None:
    from skillgrad.export import demote

    body = "# Title\n\n## Part\n\n```\n# a comment in code\n```\n\n##### Deep\n###### Deepest\n"
    assert demote(body) == ("## Title\n\n### Part\n\n```\n# a comment in code\n```\n\n"
                            "###### Deep\n###### Deepest\n")
    assert demote("## Already\n\n### fine\n") == "## Already\n\n### fine\n"
    assert demote("No headings.\n") == "No headings.\n"


def test_a_linked_memory_file_is_written_through_its_link(tmp_path: Path) -> None:
    (tmp_path / "CLAUDE.md").write_text("# Notes\n")
    (tmp_path / "AGENTS.md").symlink_to("CLAUDE.md")
    export_skill(SKILL, "agents-md", tmp_path / "AGENTS.md", name="toy", description=DESCRIPTION)
    assert (tmp_path / "AGENTS.md").is_symlink()
    assert (tmp_path / "CLAUDE.md").read_text().startswith("# Notes\n\n<!-- skillgrad skill toy")


@pytest.mark.parametrize("damage", ["begin", "end", "twice", "swapped"])
def test_a_broken_section_is_refused(tmp_path: Path, damage: str) -> None:
    begin, end = section_markers("toy")
    text = {"begin": f"{begin}\nx\n", "end": f"x\n{end}\n", "twice": f"{begin}\n{end}\n" * 2,
            "swapped": f"{end}\nx\n{begin}\n"}[damage]
    path = tmp_path / "AGENTS.md"
    path.write_text(text)
    with pytest.raises(ExportError, match="the section of skill 'toy' is broken"):
        export_skill(SKILL, "agents-md", path, name="toy", description=DESCRIPTION)
    assert path.read_text() == text


def test_a_memory_file_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "AGENTS.md"
    path.write_bytes(b"caf\xe9\n")
    with pytest.raises(ExportError, match="not UTF-8"):
        export_skill(SKILL, "agents-md", path, name="toy", description=DESCRIPTION)
    assert path.read_bytes() == b"caf\xe9\n"


# ----------------------------------------------------------------------------- --install


def test_install_roots_follow_each_agent(tmp_path: Path) -> None:
    home, cwd = tmp_path / "home", tmp_path / "work"
    assert install_root("claude", "user", cwd, home, {}) == home / ".claude" / "skills"
    assert install_root("claude", "user", cwd, home, {"CLAUDE_CONFIG_DIR": "/c"}) == \
        Path("/c/skills")
    assert install_root("claude", "project", cwd, home, {}) == cwd / ".claude" / "skills"
    assert install_root("codex", "user", cwd, home, {}) == home / ".agents" / "skills"
    assert install_root("codex", "user", cwd, home, {"CODEX_HOME": "/x"}) == Path("/x/skills")
    assert install_root("codex", "project", cwd, home, {"CODEX_HOME": "/x"}) == \
        cwd / ".agents" / "skills"
    with pytest.raises(ExportError, match="not an agent"):
        install_root("cursor", "user", cwd, home, {})  # type: ignore[arg-type]


def test_install_skill_writes_where_the_agent_looks(tmp_path: Path) -> None:
    done = install_skill(SKILL, "claude", name="toy", description=DESCRIPTION,
                         home=tmp_path / "home", cwd=tmp_path, environ={})
    assert done.path == tmp_path / "home" / ".claude" / "skills" / "toy" / "SKILL.md"
    assert oct(done.path.stat().st_mode & 0o777) == "0o644"


def test_install_through_the_command(run: Path, tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    proc = export(str(run), "--install", "claude", "--description", DESCRIPTION,
                  cwd=work, home=home)
    assert proc.returncode == 0, proc.stderr
    installed = work / ".claude" / "skills" / "toy-run-2" / "SKILL.md"
    assert f"installed for Claude Code, project scope: {installed}" in proc.stdout
    assert "name: toy-run-2 (the run folder's; give --name NAME for another)" in proc.stdout
    assert "Check the item" in installed.read_text() and "APPENDIX" not in installed.read_text()
    assert not home.exists()  # the user's own skills are left alone unless asked
    proc = export(str(run), "--install", "claude", "--scope", "user", "--description",
                  DESCRIPTION, cwd=work, home=home, CLAUDE_CONFIG_DIR=str(tmp_path / "cc"))
    assert (tmp_path / "cc" / "skills" / "toy-run-2" / "SKILL.md").exists(), proc.stderr
    proc = export(str(run), "--install", "codex", "--scope", "user", "--name", "toy",
                  "--description", DESCRIPTION, cwd=work, home=home)
    assert proc.returncode == 0, proc.stderr
    assert (home / ".agents" / "skills" / "toy" / "SKILL.md").exists()
    proc = export(str(run), "--install", "claude", "--description", DESCRIPTION, cwd=work,
                  home=home)
    assert f"already installed for Claude Code, project scope: {installed}" in proc.stdout
    old = installed.read_bytes()
    proc = export(str(run), "--install", "claude", "--version", "initial",
                  "--description", DESCRIPTION, cwd=work, home=home)
    line = one_line_error(proc)
    assert f"{installed}: a different skill named 'toy-run-2' is there; give --force" in line
    assert installed.read_bytes() == old
    proc = export(str(run), "--install", "claude", "--version", "initial", "--force",
                  "--description", DESCRIPTION, cwd=work, home=home)
    assert proc.returncode == 0, proc.stderr
    (backup,) = installed.parent.glob("SKILL.md.bak-*")
    assert f"the different skill that was there is kept as: {backup}" in proc.stdout
    assert backup.read_bytes() == old and installed.read_bytes() != old
    assert sorted(p.name for p in installed.parent.iterdir()) == ["SKILL.md", backup.name]


def test_install_with_no_flags_takes_the_skills_own_name_and_description(
        tmp_path: Path) -> None:
    """A skill without a description is not installed under a made-up one (an agent loads
    a skill by it); one trained from a SKILL.md keeps its own name and description."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    bare = _toy_run(tmp_path / "bare")
    line = one_line_error(export(str(bare), "--install", "claude", cwd=work, home=home))
    assert "--install: an agent loads a skill by its description, and this skill has none; " \
        "give --description TEXT" in line and "--describe" in line
    assert not (work / ".claude").exists() and not home.exists()
    own = ("---\nname: item-facts\ndescription: Answers questions about an item's facts "
           "from its context. Use it when asked for an item's year, city or colour.\n---\n\n"
           + toy.INITIAL_SKILL)
    owned = _toy_run(tmp_path / "owned", own)
    proc = export(str(owned), "--install", "claude", cwd=work, home=home)
    assert proc.returncode == 0, proc.stderr
    installed = work / ".claude" / "skills" / "item-facts" / "SKILL.md"
    text = installed.read_text()
    assert "name: item-facts" in text and "Use it when asked for an item's year" in text
    assert "name: item-facts (the skill's own, from its front matter)" in proc.stdout
    assert "description: the skill's own, from its front matter" in proc.stdout


# ----------------------------------------------------------------------------- the command


def test_the_command_exports_each_format(run: Path, tmp_path: Path) -> None:
    proc = export(str(run), "--format", "skill-folder", "--out", "skills", cwd=tmp_path,
                  home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("version: best (from step e")
    assert lines[1] == "name: toy-run-2 (the run folder's; give --name NAME for another)"
    assert lines[2].startswith("description: a default, from the skill's first heading")
    assert lines[3] == f"written: {Path('skills') / 'toy-run-2' / 'SKILL.md'}"
    path = tmp_path / "skills" / "toy-run-2" / "SKILL.md"
    best = RunDir(run).load_skill(state_of(run)["best_hash"])
    assert path.read_text().split("---\n", 2)[2] == "\n" + strip_block_markers(best)
    proc = export(str(run), "--format", "agents-md", "--version", "initial", "--keep-blocks",
                  "--name", "toy", "--description", DESCRIPTION, cwd=tmp_path,
                  home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"written (new file): {Path('AGENTS.md')}"
    assert BLOCK in (tmp_path / "AGENTS.md").read_text()


def test_the_format_defaults_to_a_skill_folder(trained: Path, tmp_path: Path) -> None:
    proc = export(str(trained), "--name", "toy", "--description", DESCRIPTION, cwd=tmp_path,
                  home=tmp_path / "home")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "toy" / "SKILL.md").is_file()


@pytest.mark.parametrize("args, message", [
    (["--version", "latest", "--format", "skill-folder"],
     "--version 'latest': is not a version of this run; give initial, best, final"),
    (["--format", "zip"], "--format: 'zip' is not a format (allowed: skill-folder, agents-md)"),
    (["--install", "claude", "--out", "x"], "--install and --out: give one"),
    (["--install", "claude", "--format", "agents-md"], "--install: puts a skill folder"),
    (["--install", "vim"], "--install: 'vim' is not an agent (allowed: claude, codex)"),
    (["--format", "skill-folder", "--scope", "user"], "--scope: only with --install"),
    (["--format", "skill-folder", "--describe", "--description", "x"], "not both"),
    (["--format", "skill-folder", "--name", "Bad_Name"], "--name: name 'Bad_Name': only a-z"),
    (["--format", "skill-folder", "--description", "x" * 1025],
     "description: 1025 characters (at most 1024)"),
    (["--name", "claude-helper", "--description", "x"],
     "--name: name 'claude-helper': holds the reserved word 'claude'"),
    (["--name", "my-anthropic-notes", "--description", "x"], "reserved word 'anthropic'"),
    (["--name", "toy", "--description", "Use it for <b>items</b>."],
     "description: holds the XML tag '<b>'"),
])
def test_the_command_refuses_in_one_line(trained: Path, tmp_path: Path, args: list[str],
                                         message: str) -> None:
    proc = export(str(trained), *args, cwd=tmp_path, home=tmp_path / "home")
    assert message in one_line_error(proc)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
