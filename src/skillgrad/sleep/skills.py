"""A new skill proposed by a night: an Agent Skills folder (:mod:`skillgrad.agentskills`)
staged for review like any other proposal."""

from __future__ import annotations

import logging
from pathlib import Path

from skillgrad.agentskills import (
    SKILL_FILE,
    WARNING,
    SkillFileError,
    errors_of,
    render_skill,
    validate_skill,
)
from skillgrad.sleep.staging import StagedProposal

log = logging.getLogger(__name__)


def new_skill(name: str, description: str, body: str, root: Path) -> StagedProposal:
    """The proposal of a new skill ``<root>/<name>/SKILL.md``; refuses (one line, every
    problem) a name or description the Agent Skills rules do not allow."""
    front = {"name": name, "description": description}
    problems = validate_skill(front, body, name)
    errors = errors_of(problems)
    if errors:
        raise SkillFileError(f"new skill {name!r}: {'; '.join(errors)}")
    for warning in problems:
        log.warning("new skill %r: %s", name, warning.removeprefix(WARNING))
    text = render_skill(front, body)
    return StagedProposal(target=Path(root) / name / SKILL_FILE, text=text, kind="skill", name=name)
