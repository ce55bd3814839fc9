"""The Agent Skills format: where each agent keeps skills and memory files, what a skill
file holds (YAML front matter, then the body), and the rules a skill must follow.

Export writes skills in this format; Sleep finds the user's skills with it, so that a
correction can be routed to the skill that was in use.

Skill folders (``<root>/<name>/SKILL.md``), in the order :func:`find_skills` reads them:

=============================  =======  ======  ==========================================
root                           scope    family  read by
=============================  =======  ======  ==========================================
``<project>/.claude/skills``   project  claude  Claude Code
``<project>/.agents/skills``   project  agents  Codex, and others that follow Agent Skills
``~/.claude/skills``           user     claude  Claude Code (``$CLAUDE_CONFIG_DIR/skills``)
``~/.agents/skills``           user     agents  Codex, ...
``~/.codex/skills``            user     agents  Codex, legacy (``$CODEX_HOME/skills``)
=============================  =======  ======  ==========================================

Memory files (always loaded), by agent (:func:`memory_file`):

===============  ==============================================================
agent            project memory file
===============  ==============================================================
``claude_code``  ``CLAUDE.md``
``codex``        ``AGENTS.md``
``copilot``      ``AGENTS.md``
``opencode``     ``AGENTS.md``
``gemini``       ``GEMINI.md`` (Gemini CLI's default ``context.fileName``)
===============  ==============================================================
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from skillgrad.errors import ConfigError, DataError
from skillgrad.yamlfile import load_yaml_text

log = logging.getLogger(__name__)

# The coding agents skillgrad knows, by the name their sessions and memory files go by.
Agent = Literal["claude_code", "codex", "copilot", "opencode", "gemini"]
AGENTS: tuple[Agent, ...] = ("claude_code", "codex", "copilot", "opencode", "gemini")
Scope = Literal["project", "user"]
Family = Literal["claude", "agents"]
SKILL_FILE = "SKILL.md"
WARNING = "warning: "  # how a problem that does not make a skill invalid begins
MEMORY_FILES: dict[Agent, str] = {"claude_code": "CLAUDE.md", "codex": "AGENTS.md",
                                  "copilot": "AGENTS.md", "opencode": "AGENTS.md",
                                  "gemini": "GEMINI.md"}
MAX_NAME, MAX_DESCRIPTION, MAX_COMPATIBILITY = 64, 1024, 500
# Anthropic's rules for a skill's name and description, beyond the open format's.
RESERVED_WORDS = ("anthropic", "claude")
_XML_TAG = re.compile(r"</?[A-Za-z][\w.-]*(?:\s[^<>]*)?/?>")
MAX_BODY_LINES, MAX_BODY_TOKENS = 500, 5000
_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class SkillFileError(DataError):
    """A skill file that cannot be read: not UTF-8, or no well-formed YAML front matter."""


@dataclass(frozen=True)
class SkillFile:
    """One skill as found on disk. ``front``: every field of its front matter; ``head``: the
    front matter exactly as written, both ``---`` lines included, so an edit of the body keeps
    the rest byte for byte."""

    path: Path
    scope: Scope
    family: Family
    front: dict[str, Any]
    body: str
    head: str = field(repr=False)

    @property
    def folder(self) -> Path:
        return self.path.parent

    @property
    def name(self) -> str:
        value = self.front.get("name")
        return value if isinstance(value, str) else ""

    @property
    def description(self) -> str:
        value = self.front.get("description")
        return value if isinstance(value, str) else ""

    def problems(self) -> list[str]:
        """What breaks the Agent Skills rules (:func:`validate_skill`)."""
        return validate_skill(self.front, self.body, self.folder.name)

    def with_body(self, body: str) -> str:
        """The skill file's text with ``body`` in place of its body."""
        return self.head + body


def skill_roots(project: Path, home: Path,
                environ: Mapping[str, str] | None = None) -> list[tuple[Path, Scope, Family]]:
    """The folders skills live in (see the module's table), existing or not."""
    env = environ or {}
    claude = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"
    codex = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
    return [(project / ".claude" / "skills", "project", "claude"),
            (project / ".agents" / "skills", "project", "agents"),
            (claude / "skills", "user", "claude"),
            (home / ".agents" / "skills", "user", "agents"),
            (codex / "skills", "user", "agents")]


def find_skills(project: Path, home: Path, environ: Mapping[str, str] | None = None,
                on_error: Callable[[SkillFileError], None] | None = None) -> list[SkillFile]:
    """Every skill of the project and of the user, project first, each root's skills by
    folder name; a folder reached twice (the project is the home folder, a symlink) is read
    once. A file that cannot be read raises :class:`SkillFileError`, or, given ``on_error``,
    is handed to it and the search goes on."""
    found, seen = [], set()
    for root, scope, family in skill_roots(Path(project), Path(home), environ):
        if not root.is_dir():
            continue
        for path in sorted(root.glob(f"*/{SKILL_FILE}")):
            real = os.path.realpath(path)
            if path.parent.name.startswith(".") or real in seen:
                continue
            seen.add(real)
            try:
                found.append(read_skill(path, scope, family))
            except SkillFileError as exc:
                if on_error is None:
                    raise
                on_error(exc)
    return found


def read_skill(path: Path, scope: Scope = "project", family: Family = "claude") -> SkillFile:
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillFileError(f"{path}: not UTF-8 text (byte {exc.start} is "
                             f"0x{exc.object[exc.start]:02x})") from None
    except OSError as exc:
        raise SkillFileError(f"{path}: cannot be read ({exc.strerror})") from exc
    front, body, head = parse_skill(text, str(path))
    return SkillFile(path=Path(path), scope=scope, family=family, front=front, body=body,
                     head=head)


def parse_skill(text: str, source: str) -> tuple[dict[str, Any], str, str]:
    """(front matter fields, body, the front matter as written) of a skill file's text."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n") != "---":
        raise SkillFileError(f"{source}: no YAML front matter (the first line must be '---')")
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r\n") in ("---", "...")),
                 None)
    if close is None:
        raise SkillFileError(f"{source}: the front matter is never closed (no second '---' "
                             "line)")
    try:  # after a blank line for the opening '---', so that YAML's line numbers are the file's
        front = load_yaml_text("\n" + "".join(lines[1:close]), f"{source} (front matter)")
    except ConfigError as exc:
        raise SkillFileError(str(exc)) from None
    if front is None:
        front = {}
    if not isinstance(front, dict):
        raise SkillFileError(f"{source}: the front matter is a {type(front).__name__}, not "
                             "a mapping of fields")
    return front, "".join(lines[close + 1:]), "".join(lines[:close + 1])


def validate_skill(front: Mapping[str, Any], body: str, folder: str | None = None) -> list[str]:
    """The Agent Skills rules ``front`` and ``body`` break, one line each; a line starting
    with :data:`WARNING` is advice, not a rule. ``folder``: the name of the skill's folder,
    which ``name`` must equal."""
    problems = _name_problems(front.get("name"), folder)
    description = front.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append(f"description: missing (1-{MAX_DESCRIPTION} characters: what the "
                        "skill does and when to use it)")
    elif len(description) > MAX_DESCRIPTION:
        problems.append(f"description: {len(description)} characters (at most "
                        f"{MAX_DESCRIPTION})")
    elif (tag := _XML_TAG.search(description)) is not None:
        problems.append(f"description: holds the XML tag {tag.group(0)!r} (Anthropic's skill "
                        "rules refuse tags)")
    if "compatibility" in front:
        value = front["compatibility"]
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_COMPATIBILITY:
            problems.append(f"compatibility: must be text of 1-{MAX_COMPATIBILITY} characters")
    if "license" in front and not isinstance(front["license"], str):
        problems.append("license: must be text (a license name or a bundled file)")
    metadata = front.get("metadata")
    if "metadata" in front and not (isinstance(metadata, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
        problems.append("metadata: must map names to text")
    tools = front.get("allowed-tools")
    if "allowed-tools" in front and not (isinstance(tools, str) or (
            isinstance(tools, list) and all(isinstance(t, str) for t in tools))):
        problems.append("allowed-tools: must be a space-separated list of tools")
    lines = body.count("\n") + (0 if body.endswith("\n") or not body else 1)
    if lines >= MAX_BODY_LINES:
        problems.append(f"{WARNING}body: {lines} lines (keep it under {MAX_BODY_LINES}; move "
                        "detail into references/)")
    tokens = len(body) // 4  # a rough count, for advice only
    if tokens > MAX_BODY_TOKENS:
        problems.append(f"{WARNING}body: about {tokens} tokens (keep it under about "
                        f"{MAX_BODY_TOKENS}; it is loaded whole when the skill is used)")
    return problems


def _name_problems(name: Any, folder: str | None) -> list[str]:
    if not isinstance(name, str) or not name:
        return [f"name: missing (1-{MAX_NAME} characters of a-z, 0-9 and '-')"]
    if len(name) > MAX_NAME:
        return [f"name: {len(name)} characters (at most {MAX_NAME})"]
    if not _NAME.match(name):
        return [f"name {name!r}: only a-z, 0-9 and '-', with no '-' at either end or twice "
                "in a row"]
    if folder is not None and name != folder:
        return [f"name {name!r}: differs from its folder's name {folder!r}"]
    reserved = [w for w in RESERVED_WORDS if w in name]
    if reserved:
        return [f"name {name!r}: holds the reserved word {reserved[0]!r} (Anthropic's skill "
                "rules refuse it)"]
    return []


def errors_of(problems: Iterable[str]) -> list[str]:
    """The problems that make a skill invalid (warnings left out)."""
    return [p for p in problems if not p.startswith(WARNING)]


def render_skill(front: Mapping[str, Any], body: str) -> str:
    """A skill file's text: ``front`` as YAML front matter, a blank line, ``body``."""
    head = yaml.safe_dump(dict(front), sort_keys=False, allow_unicode=True, width=1_000_000)
    body = body.strip("\n")
    return f"---\n{head}---\n\n{body}\n" if body else f"---\n{head}---\n"


def skills_named(skills: Iterable[SkillFile], name: str) -> list[SkillFile]:
    """The skills a session's skill use refers to (``plugin:name`` is ``name``), in the order
    :func:`find_skills` gave them."""
    wanted = name.rpartition(":")[2]
    return [s for s in skills if s.name == wanted or (not s.name and s.folder.name == wanted)]


def memory_file(project: Path, agent: Agent) -> Path:
    """The project memory file ``agent`` loads in every session (see the module's table)."""
    if agent not in MEMORY_FILES:
        raise ConfigError(f"unknown agent {agent!r} (known: {', '.join(AGENTS)})")
    return Path(project) / MEMORY_FILES[agent]


def own_fields(skill_text: str) -> tuple[str | None, str | None]:
    """The ``name`` and ``description`` of the skill's own front matter (a skill trained from
    a ``SKILL.md``, whose description an agent target may have trained), each None when it
    has none or when it is not valid as Agent Skills define it."""
    if not skill_text.removeprefix("\ufeff").startswith("---"):
        return None, None
    try:
        front, _, _ = parse_skill(skill_text.removeprefix("\ufeff"), "the skill")
    except SkillFileError:
        return None, None
    name, description = front.get("name"), front.get("description")
    name = name if isinstance(name, str) and name.strip() else None
    if name is not None and [p for p in validate_skill({"name": name, "description": "-"},
                                                       "", name) if p.startswith("name")]:
        name = None
    description = (description.strip() if isinstance(description, str)
                   and description.strip() else None)
    return name, description
