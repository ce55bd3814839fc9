"""Skill discovery, the Agent Skills rules and memory files (skillgrad.sleep.skills)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skillgrad.agentskills import (
    WARNING,
    SkillFileError,
    errors_of,
    find_skills,
    memory_file,
    parse_skill,
    read_skill,
    skills_named,
    validate_skill,
)
from skillgrad.errors import ConfigError
from skillgrad.sleep.adoption import adopt
from skillgrad.sleep.skills import new_skill
from skillgrad.sleep.staging import Staging

FIXTURES = Path(__file__).parent / "fixtures" / "sleep" / "skills"


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """(project, home) copied from the fixtures."""
    shutil.copytree(FIXTURES / "project", tmp_path / "project")
    shutil.copytree(FIXTURES / "home", tmp_path / "home")
    return tmp_path / "project", tmp_path / "home"


def test_skills_are_found_where_each_agent_loads_them(tree: tuple[Path, Path]) -> None:
    project, home = tree
    skills = find_skills(project, home)
    assert [(s.folder.name, s.scope, s.family) for s in skills] == [
        ("fix-vat-rounding", "project", "claude"),
        ("release-notes", "project", "agents"),
        ("pdf-forms", "user", "claude"),
        ("Review_Code", "user", "agents"),
        ("legacy-lint", "user", "agents"),  # ~/.codex/skills, the legacy place
    ]
    vat = skills[0]
    assert vat.name == "fix-vat-rounding" and vat.description.startswith("Use when a tax")
    assert vat.front["allowed-tools"] == "Bash(pytest:*) Read Edit"
    assert vat.body.startswith("\n# Fixing VAT rounding\n")
    notes = skills[1]
    assert notes.front["metadata"] == {"author": "shop-team", "version": "1.2"}
    assert notes.front["license"] == "MIT"
    assert skills[2].front["argument-hint"] == "[form.pdf]"  # fields of one agent are kept
    assert [s.problems() for s in skills if s.folder.name != "Review_Code"] == [[]] * 4


def test_the_agents_own_variables_move_the_user_folders(tree: tuple[Path, Path],
                                                        tmp_path: Path) -> None:
    project, home = tree
    claude = tmp_path / "claude-config"
    shutil.move(str(home / ".claude"), claude)
    codex = tmp_path / "codex-home"
    shutil.move(str(home / ".codex"), codex)
    assert "pdf-forms" not in [s.name for s in find_skills(project, home)]
    found = find_skills(project, home, {"CLAUDE_CONFIG_DIR": str(claude),
                                        "CODEX_HOME": str(codex)})
    assert [s.name for s in found if s.scope == "user"] == ["pdf-forms", "Review_Code",
                                                            "legacy-lint"]


def test_a_project_that_is_the_home_folder_is_read_once(tree: tuple[Path, Path]) -> None:
    _, home = tree
    skills = find_skills(home, home)
    assert [s.folder.name for s in skills] == ["pdf-forms", "Review_Code", "legacy-lint"]
    assert [s.scope for s in skills] == ["project", "project", "user"]


def test_a_skill_that_breaks_the_rules_says_each_problem(tree: tuple[Path, Path]) -> None:
    project, home = tree
    [review] = [s for s in find_skills(project, home) if s.folder.name == "Review_Code"]
    assert review.problems() == [
        "name 'Review_Code': only a-z, 0-9 and '-', with no '-' at either end or twice in a row",
        "description: missing (1-1024 characters: what the skill does and when to use it)",
    ]


@pytest.mark.parametrize("name, folder, ok", [
    ("a", "a", True), ("x" * 64, "x" * 64, True), ("x" * 65, "x" * 65, False),
    ("pdf-forms2", "pdf-forms2", True), ("-pdf", "-pdf", False), ("pdf-", "pdf-", False),
    ("pdf--forms", "pdf--forms", False), ("PDF", "PDF", False), ("pdf_forms", "pdf_forms", False),
    ("pdf-forms", "pdf-form", False), ("", "", False), (None, "x", False), (3, "3", False),
])
def test_the_name_rules(name: object, folder: str, ok: bool) -> None:
    problems = validate_skill({"name": name, "description": "d"}, "body\n", folder)
    assert (problems == []) is ok, problems


def test_description_compatibility_and_the_other_fields() -> None:
    base = {"name": "x", "description": "d" * 1024}
    assert validate_skill(base, "", "x") == []
    assert validate_skill({**base, "description": "d" * 1025}, "", "x") == [
        "description: 1025 characters (at most 1024)"]
    assert validate_skill({**base, "description": "  "}, "", "x")[0].startswith(
        "description: missing")
    assert validate_skill({**base, "compatibility": "c" * 500}, "", "x") == []
    assert validate_skill({**base, "compatibility": "c" * 501}, "", "x") == [
        "compatibility: must be text of 1-500 characters"]
    assert validate_skill({**base, "metadata": {"version": 2}}, "", "x") == [
        "metadata: must map names to text"]
    assert validate_skill({**base, "license": ["MIT"]}, "", "x") == [
        "license: must be text (a license name or a bundled file)"]
    assert validate_skill({**base, "allowed-tools": ["Read", "Bash"]}, "", "x") == []
    assert validate_skill({**base, "allowed-tools": {"Read": 1}}, "", "x") == [
        "allowed-tools: must be a space-separated list of tools"]


def test_a_long_body_is_a_warning_not_an_error() -> None:
    front = {"name": "x", "description": "d"}
    assert validate_skill(front, "line\n" * 499, "x") == []
    [lines] = validate_skill(front, "line\n" * 500, "x")
    assert lines == f"{WARNING}body: 500 lines (keep it under 500; move detail into references/)"
    [tokens] = validate_skill(front, "word " * 4001, "x")
    assert tokens.startswith(f"{WARNING}body: about 5001 tokens")
    assert errors_of([lines, tokens]) == []


@pytest.mark.parametrize("folder, message", [
    ("unclosed", "the front matter is never closed"),
    ("list-front", "the front matter is a list, not a mapping of fields"),
    ("bad-yaml", r"\(front matter\): malformed YAML at line 4, column 1"),
    ("no-front", "no YAML front matter"),
    ("twice", "duplicate key 'description'"),
])
def test_a_malformed_skill_file_is_one_line_naming_it(folder: str, message: str) -> None:
    path = FIXTURES / "malformed" / folder / "SKILL.md"
    with pytest.raises(SkillFileError, match=message) as err:
        read_skill(path)
    assert str(err.value).startswith(str(path))
    assert "\n" not in str(err.value)


def test_a_skill_file_that_is_not_utf8_is_one_line_and_the_search_can_go_on(
        tree: tuple[Path, Path]) -> None:
    project, home = tree
    bad = project / ".claude" / "skills" / "latin1" / "SKILL.md"
    bad.parent.mkdir()
    bad.write_bytes("---\nname: latin1\ndescription: caf\xe9\n---\n".encode("latin-1"))
    with pytest.raises(SkillFileError, match=r"latin1/SKILL.md: not UTF-8 text \(byte 33 is "
                                             r"0xe9\)$"):
        find_skills(project, home)
    errors: list[SkillFileError] = []
    skills = find_skills(project, home, on_error=errors.append)
    assert len(skills) == 5 and [str(e) for e in errors] == [
        f"{bad}: not UTF-8 text (byte 33 is 0xe9)"]


def test_an_edited_body_keeps_the_front_matter_byte_for_byte(tree: tuple[Path, Path]) -> None:
    project, _ = tree
    path = project / ".agents" / "skills" / "release-notes" / "SKILL.md"
    skill = read_skill(path)
    assert skill.with_body(skill.body) == path.read_text()
    edited = skill.with_body("\nNew steps.\n")
    assert edited.startswith(path.read_text().split("---\n\n", 1)[0] + "---\n")
    assert parse_skill(edited, "edited")[0] == skill.front


def test_a_new_skill_is_a_valid_staged_proposal(tmp_path: Path) -> None:
    root = tmp_path / "shop" / ".claude" / "skills"
    root.mkdir(parents=True)
    proposal = new_skill("check-invoices", "Use when an invoice total looks wrong: "
                         "re-add the lines in cents.", "\n\n# Checking invoices\n\nSum in "
                         "cents.", root)
    assert proposal.target == root / "check-invoices" / "SKILL.md"
    assert (proposal.kind, proposal.name) == ("skill", "check-invoices")
    front, body, _ = parse_skill(proposal.text, "new")
    assert front == {"name": "check-invoices", "description": "Use when an invoice total looks "
                     "wrong: re-add the lines in cents."}
    assert proposal.text.endswith("---\n\n# Checking invoices\n\nSum in cents.\n")
    staging = Staging(tmp_path / "shop")
    staging.stage("n1", [proposal], "", {}, [])
    adopt(staging, "n1")
    skill = read_skill(proposal.target)
    assert skill.problems() == [] and skill.body == "\n# Checking invoices\n\nSum in cents.\n"


def test_a_new_skill_that_breaks_the_rules_is_refused_with_every_problem(tmp_path: Path) -> None:
    with pytest.raises(SkillFileError, match=r"^new skill 'Check_Invoices': name "
                                             r"'Check_Invoices': .*; description: missing"):
        new_skill("Check_Invoices", "", "body", tmp_path)


def test_a_skill_used_in_a_session_is_found_by_name(tree: tuple[Path, Path]) -> None:
    project, home = tree
    skills = find_skills(project, home)
    assert [s.folder.name for s in skills_named(skills, "pdf-forms")] == ["pdf-forms"]
    assert [s.folder.name for s in skills_named(skills, "shop-plugin:fix-vat-rounding")] == [
        "fix-vat-rounding"]
    assert skills_named(skills, "unknown") == []


def test_each_agent_has_its_memory_file(tmp_path: Path) -> None:
    assert memory_file(tmp_path, "claude_code") == tmp_path / "CLAUDE.md"
    for agent in ("codex", "copilot", "opencode"):
        assert memory_file(tmp_path, agent) == tmp_path / "AGENTS.md"  # type: ignore[arg-type]
    assert memory_file(tmp_path, "gemini") == tmp_path / "GEMINI.md"
    with pytest.raises(ConfigError, match="unknown agent 'cursor'"):
        memory_file(tmp_path, "cursor")  # type: ignore[arg-type]
