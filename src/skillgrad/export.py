"""Export: a trained skill turned into what an agent loads (the deployable artifact, like a
model saved for inference rather than a training checkpoint).

Two forms:

* ``skill-folder``: ``OUT/<name>/SKILL.md``, YAML front matter (``name``, ``description``) and
  the skill, following the Agent Skills rules (:func:`skillgrad.agentskills.validate_skill`);
  :func:`install_skill` puts one where Claude Code or Codex looks for skills.
* ``agents-md``: a section of a memory file (``AGENTS.md``, ``CLAUDE.md``) between two marker
  comments naming the skill; the rest of the file is kept byte for byte, and a later export
  replaces only that section.

The protection markers of the skill's blocks (``<!-- NAME_START -->``: training machinery) are
taken out unless they are asked for; the blocks' text stays. Every write is atomic and nothing
different is overwritten without ``force``, which keeps a backup.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from skillgrad import prompts
from skillgrad.agentskills import (
    MAX_DESCRIPTION,
    MAX_NAME,
    SKILL_FILE,
    WARNING,
    SkillFileError,
    errors_of,
    parse_skill,
    render_skill,
    skill_roots,
    validate_skill,
)
from skillgrad.clients import build_client
from skillgrad.config import load_config
from skillgrad.errors import SkillgradError
from skillgrad.files import backup_beside, read_optional, replace_keeping_mode
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.package import split_package
from skillgrad.rundir import RunDir
from skillgrad.skill import protected_spans, remove_span

Format = Literal["skill-folder", "agents-md"]
FORMATS: tuple[Format, ...] = ("skill-folder", "agents-md")
AgentName = Literal["claude", "codex"]
AGENT_NAMES: dict[str, str] = {"claude": "Claude Code", "codex": "Codex"}
SCOPES = ("user", "project")
DESCRIBE_CHARS = 300  # what the optimizer is asked for: agents cut long descriptions first
_HEADING = 200  # characters of the skill's first heading a default description quotes
_NEW_FILE_MODE = 0o644


class ExportError(SkillgradError):
    """A skill cannot be exported as asked (an invalid name or description, a file that holds
    something else, a section that is broken)."""


@dataclass(frozen=True)
class Exported:
    """What an export did: the file it wrote (or found already so, ``changed`` false), and the
    backup of the different file it replaced (``force``), if any."""

    path: Path
    changed: bool
    backup: Path | None = None
    replaced_section: bool = False
    warnings: tuple[str, ...] = ()  # advice of the Agent Skills rules (a long body, say)


# ----------------------------------------------------------------------------- the skill


def export_skill(skill_text: str, fmt: Literal["skill-folder", "agents-md"], out: Path, *,
                 name: str, description: str, keep_blocks: bool = False) -> Path:
    """Write ``skill_text`` as ``fmt``: the skill folder ``out/<name>/SKILL.md``, or the
    section of skill ``name`` in the memory file ``out``; the path written. Refuses (one line,
    every problem) a name or description the Agent Skills rules do not allow, and a different
    skill already at ``out/<name>``."""
    return write_export(skill_text, fmt, out, name=name, description=description,
                        keep_blocks=keep_blocks).path


def write_export(skill_text: str, fmt: Format, out: Path, *, name: str, description: str,
                 keep_blocks: bool = False, force: bool = False) -> Exported:
    """:func:`export_skill`, saying what it did; ``force`` replaces a different skill folder's
    ``SKILL.md``, keeping a backup beside it."""
    if fmt not in FORMATS:
        raise ExportError(f"format {fmt!r}: not a format (allowed: {', '.join(FORMATS)})")
    package = split_package(skill_text)
    front, body = skill_parts(package.main, keep_blocks)
    front = {**front, "name": name, "description": description}
    warnings = tuple(check_skill(front, body))
    if fmt == "skill-folder":
        done = _write_skill_folder(render_skill(front, body), Path(out), name, force,
                                   dict(package.files))
    else:
        files = "".join(f"\n## {path}\n\n{demote(text.strip(), 3).strip()}\n"
                        for path, text in package.files.items())
        done = _write_section(Path(out), name, _section(name, description, body + files))
    return replace(done, warnings=warnings)


def skill_parts(skill_text: str, keep_blocks: bool = False) -> tuple[dict[str, Any], str]:
    """(front matter fields, body) of a skill: a run's skill has no front matter, one trained
    from a ``SKILL.md`` may; ``name`` and ``description`` are left out (an export sets them).
    The blocks' protection markers are taken out unless ``keep_blocks``."""
    front: dict[str, Any] = {}
    body = skill_text.removeprefix("\ufeff")
    if body.startswith("---"):
        try:
            front, body, _ = parse_skill(body, "the skill")
        except SkillFileError:
            pass  # a leading rule of dashes, not front matter: the text is all body
    front = {k: v for k, v in front.items() if k not in ("name", "description")}
    if not keep_blocks:
        body = strip_block_markers(body)
    body = body.strip("\n")
    if not body.strip():
        raise ExportError("the skill is empty: there is nothing to export")
    return front, body + "\n"


def strip_block_markers(text: str) -> str:
    """``text`` with the START and END markers of its protected blocks taken out, each block's
    text kept where it was (an empty block leaves nothing)."""
    for block in reversed(protected_spans(text)):
        span = text[block.start:block.end]
        opening = re.match(rf"<!--\s*{block.name}_START\s*-->", span, re.IGNORECASE)
        closing = re.search(rf"<!--\s*{block.name}_END\s*-->\Z", span, re.IGNORECASE)
        inner = span[opening.end() if opening else 0:closing.start() if closing else None]
        if inner.strip():  # an unterminated block ran to the end: its last line ends there
            inner = inner.strip("\n") + ("" if closing else "\n" * inner.endswith("\n"))
            text = text[:block.start] + inner + text[block.end:]
        else:
            text = remove_span(text, block.start, block.end)
    return text


def check_skill(front: Mapping[str, Any], body: str) -> list[str]:
    """The skill's warnings (advice); refuses, in one line, a skill that breaks a rule."""
    problems = validate_skill(front, body, front.get("name"))
    errors = errors_of(problems)
    if errors:
        raise ExportError(f"skill {front.get('name')!r} cannot be exported: {'; '.join(errors)}")
    return [p.removeprefix(WARNING) for p in problems if p.startswith(WARNING)]


def check_name(name: str) -> None:
    """Refuse, in one line, a name the Agent Skills rules do not allow."""
    errors = [p for p in validate_skill({"name": name, "description": "-"}, "", name)
              if p.startswith("name")]
    if errors:
        raise ExportError(f"--name: {'; '.join(errors)}")


def skill_name(text: str) -> str:
    """``text`` (a run folder's name, say) made a valid skill name: lower case ASCII letters
    and digits, every other run of characters one '-'; empty when nothing is left."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    name = re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
    return name[:MAX_NAME].rstrip("-")


def default_description(skill_text: str, env: str | None) -> str:
    """A description made from the skill's first heading (else its first line) and the
    environment the run trained on: what the skill is, not yet when to use it."""
    _, body = skill_parts(skill_text)
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    heading = next((line for line in lines if re.match(r"#{1,6}\s", line)), lines[0])
    heading = re.sub(r"^[#>*\-\s]+", "", heading).strip() or "A skill"
    if len(heading) > _HEADING:
        heading = heading[:_HEADING].rsplit(" ", 1)[0] + " ..."
    end = "" if heading[-1] in ".!?" else "."
    where = (f" on tasks of the {env!r} environment; use it for tasks of that kind" if env
             else "")
    return f"{heading}{end} A skill trained with skillgrad{where}."


class _Description(BaseModel):
    description: str


def describe_skill(model: ChatModel, skill_text: str, name: str) -> str:
    """The description ``model`` proposes for the skill: what it does and when to use it."""
    _, body = skill_parts(skill_text)
    text = prompts.render("export_describe", skill_name=name, skill=body.strip("\n"),
                          max_chars=str(DESCRIBE_CHARS))
    reply = ask_json(model, [Message(role="user", content=text)], _Description,
                     kind="export_describe", max_tokens=400)
    if reply.value is None:
        raise ExportError(f"--describe: the optimizer's reply could not be used ({reply.error}); "
                          "give --description TEXT instead")
    description = " ".join(reply.value.description.split())
    if not description or len(description) > MAX_DESCRIPTION:
        raise ExportError(f"--describe: the optimizer proposed a description of "
                          f"{len(description)} characters (1-{MAX_DESCRIPTION} are allowed); "
                          "give --description TEXT instead")
    return description


def run_optimizer(run_dir: Path) -> ChatModel:
    """The optimizer model of the run in ``run_dir``, from the config it recorded."""
    run = RunDir(run_dir)
    if not run.config_path.exists():
        raise ExportError(f"{run.config_path}: missing, so the run's optimizer is unknown; give "
                          "--description TEXT instead of --describe")
    return build_client(load_config(run.config_path), "optimizer").for_stage("export_describe")


def run_env_name(run_dir: Path) -> str | None:
    """The name of the environment the run trained on (``None`` if its records do not say)."""
    config = RunDir(run_dir).read_config()
    env = config.get("env") if isinstance(config, dict) else None
    name = env.get("name") if isinstance(env, dict) else None
    return name if isinstance(name, str) else None


# ----------------------------------------------------------------------------- skill folders


def install_root(agent: AgentName, scope: str, cwd: Path, home: Path,
                 environ: Mapping[str, str] | None = None) -> Path:
    """The folder ``agent`` reads skill folders from (see :mod:`skillgrad.sleep.skills`):
    Claude Code ``~/.claude/skills`` (``$CLAUDE_CONFIG_DIR/skills``) or
    ``<cwd>/.claude/skills``; Codex ``~/.agents/skills`` (``$CODEX_HOME/skills`` when that is
    set) or ``<cwd>/.agents/skills``."""
    if agent not in AGENT_NAMES:
        raise ExportError(f"--install: {agent!r} is not an agent (allowed: "
                          f"{', '.join(AGENT_NAMES)})")
    if scope not in SCOPES:
        raise ExportError(f"--scope: {scope!r} is not a scope (allowed: {', '.join(SCOPES)})")
    env = environ or {}
    roots = skill_roots(Path(cwd), Path(home), env)
    family = "claude" if agent == "claude" else "agents"
    found = [root for root, s, f in roots if s == scope and f == family]
    codex_home = agent == "codex" and scope == "user" and bool(env.get("CODEX_HOME"))
    return found[-1] if codex_home else found[0]


def install_skill(skill_text: str, agent: AgentName, *, name: str, description: str,
                  scope: str = "user", cwd: Path | None = None, home: Path | None = None,
                  environ: Mapping[str, str] | None = None, keep_blocks: bool = False,
                  force: bool = False) -> Exported:
    """Write the skill folder where ``agent`` looks (:func:`install_root`)."""
    root = install_root(agent, scope, cwd or Path.cwd(), home or Path.home(),
                        os.environ if environ is None else environ)
    return write_export(skill_text, "skill-folder", root, name=name, description=description,
                        keep_blocks=keep_blocks, force=force)


def _write_skill_folder(text: str, root: Path, name: str, force: bool,
                        files: Mapping[str, str] | None = None) -> Exported:
    """Write ``SKILL.md`` (``text``) and the package's other ``files`` into ``root/name``. A
    folder that already holds exactly these is left alone; one that holds something else is
    replaced only with ``force``, each file it changes kept as a backup beside it."""
    files = dict(files or {})
    if root.exists() and not root.is_dir():
        raise ExportError(f"{root}: is a file; skill folders go into a folder")
    folder = root / name
    path = folder / SKILL_FILE
    if folder.exists() and not folder.is_dir():
        raise ExportError(f"{folder}: is a file, not a skill folder; remove it or give another "
                          "--name")
    existing = _read(path)
    others = {rel: _read(folder / rel) for rel in files}
    same_others = all(others[rel] == body.encode("utf-8") for rel, body in files.items())
    if existing == text.encode("utf-8") and same_others:
        return Exported(path, changed=False)
    if existing is None and folder.is_dir() and any(folder.iterdir()) and not force:
        raise ExportError(f"{folder}: exists and holds no {SKILL_FILE}, so it is not a skill "
                          "folder; give another --name, or --force to write into it")
    if existing is not None and not force:
        raise ExportError(f"{path}: a different skill named {name!r} is there; give --force to "
                          "replace it (a backup is kept beside it), or another --name")
    changed = existing not in (None, text.encode("utf-8"))
    backup = backup_beside(path, ExportError) if changed else None
    for rel, body in files.items():
        target = folder / rel
        if others[rel] is not None and others[rel] != body.encode("utf-8"):
            backup_beside(target, ExportError)
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_file(target, body)
    _write_file(path, text)
    return Exported(path, changed=True, backup=backup)


# ----------------------------------------------------------------------------- memory files


def section_markers(name: str) -> tuple[str, str]:
    """The comments that open and close skill ``name``'s section of a memory file."""
    return (f"<!-- skillgrad skill {name}: begin (skillgrad export replaces this section) -->",
            f"<!-- skillgrad skill {name}: end -->")


def _section(name: str, description: str, body: str) -> str:
    begin, end = section_markers(name)
    for marker in (begin, end):
        if marker in body:
            raise ExportError(f"skill {name!r}: its text holds the section marker {marker!r}, "
                              "so its section could not be found again")
    return f"{begin}\n> **{name}**: {description}\n\n{demote(body).strip(chr(10))}\n{end}"


_ATX = re.compile(r"^(#{1,6})(\s)", re.MULTILINE)
_FENCE = re.compile(r"^\s*(```|~~~)")


def demote(body: str, top: int = 2) -> str:
    """``body`` with its headings moved down so that the highest is level ``top``: a section
    of someone's AGENTS.md holds no H1 of its own. Headings keep their order of levels
    (none goes past 6); lines in fenced code are left alone."""
    lines = body.splitlines(keepends=True)
    fenced, levels = False, []
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := _ATX.match(line)):
            levels.append(len(m.group(1)))
    shift = max(0, top - min(levels)) if levels else 0
    if not shift:
        return body
    out, fenced = [], False
    for line in lines:
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced and (m := _ATX.match(line)):
            line = "#" * min(6, len(m.group(1)) + shift) + line[len(m.group(1)):]
        out.append(line)
    return "".join(out)


def _write_section(path: Path, name: str, section: str) -> Exported:
    """Put ``section`` into the memory file ``path``: in place of skill ``name``'s section if
    it has one, else at its end; not a byte of the rest changes."""
    if path.is_dir():
        raise ExportError(f"{path}: is a folder; give --out the memory file (AGENTS.md, "
                          "CLAUDE.md)")
    data = _read(path)
    if data is None:
        _write_file(path, section + "\n")
        return Exported(path, changed=True)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExportError(f"{path}: not UTF-8 text (byte {exc.start}); the section is written "
                          "into UTF-8 files only") from None
    nl = "\r\n" if "\r\n" in text else "\n"
    section = section.replace("\r\n", "\n").replace("\n", nl)
    begin, end = section_markers(name)
    starts, ends = _find_all(text, begin), _find_all(text, end)
    replaced = bool(starts or ends)
    if not replaced:  # a new section at the end, after a blank line
        ending = text[len(text.rstrip("\r\n")):].count("\n")
        gap = nl * (2 - min(ending, 2)) if text else ""
        new = text + gap + section + nl
    elif len(starts) == 1 and len(ends) == 1 and starts[0] < ends[0]:
        new = text[:starts[0]] + section + text[ends[0] + len(end):]
    else:
        order = ", the end first" if starts and ends and ends[0] < starts[0] else ""
        raise ExportError(f"{path}: the section of skill {name!r} is broken ({len(starts)} "
                          f"begin and {len(ends)} end markers{order}); mend or remove it by "
                          "hand, then export again")
    if new == text:
        return Exported(path, changed=False, replaced_section=replaced)
    _write_file(path, new)
    return Exported(path, changed=True, replaced_section=replaced)


def _find_all(text: str, marker: str) -> list[int]:
    return [m.start() for m in re.finditer(re.escape(marker), text)]


# ----------------------------------------------------------------------------- files


def _read(path: Path) -> bytes | None:
    """``path``'s bytes; ``None`` when there is no such file."""
    return read_optional(path, ExportError)


def _write_file(path: Path, text: str) -> None:
    """Write ``text`` atomically to the file ``path`` names (through a symbolic link: the link
    stays), keeping an existing file's permissions."""
    replace_keeping_mode(Path(os.path.realpath(path)), text.encode("utf-8"), ExportError,
                         _NEW_FILE_MODE)
