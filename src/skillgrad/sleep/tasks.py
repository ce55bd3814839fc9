"""Mined tasks: what the user asked for, how to check an answer, and the sessions it came from.

A tasks file (``tasks.json``) is what a night trains on. It can be exported, read and edited
by the user, and marked ``reviewed``; ``skillgrad sleep run --tasks FILE`` then trains on it as
it is, so what is sent to a model is exactly what the user saw.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skillgrad.envs.workspace import Check
from skillgrad.errors import DataError

Outcome = Literal["satisfied", "corrected", "interrupted", "failed", "unknown"]


class SessionEvidence(BaseModel):
    """Where a task was seen: one prompt of one session."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str
    session: str
    source: str
    turn: int
    time: datetime | None = None
    outcome: Outcome = "unknown"


class SleepTask(BaseModel):
    """One recurring, checkable request."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    intent: str = Field(min_length=1, description="the request, in the user's words (redacted)")
    context: str = Field("", description="what the sessions show around it: files, commands, "
                         "how it ended")
    checks: list[Check] = Field(default_factory=list)
    rubric: str | None = Field(None, description="what a good answer does, for the judge")
    outcome: Outcome = "unknown"
    occurrences: int = Field(1, ge=1)
    evidence: list[SessionEvidence] = Field(default_factory=list)
    skill: str | None = Field(None, description="the skill that was active in its sessions")
    agent: str | None = None
    commit: str | None = Field(None, description="the repository commit its sessions started "
                               "from (agent mode replays it there)")
    miner: Literal["heuristic", "llm", "user"] = "heuristic"


class TasksFile(BaseModel):
    """A night's tasks. ``reviewed``: the user has read them and allows them to be sent."""

    model_config = ConfigDict(extra="forbid")

    version: Literal[1] = 1
    project: str
    created: datetime
    reviewed: bool = False
    miner: str = "heuristic"
    notes: list[str] = Field(default_factory=list)
    tasks: list[SleepTask] = Field(default_factory=list)


def task_id(intent: str, project: str) -> str:
    """A stable id: the same request in the same project always gets the same id, also after
    the project's folder moved (only its name counts)."""
    normal = " ".join(re.findall(r"[a-z0-9]+", intent.lower()))
    name = Path(project).name
    return "t-" + hashlib.sha256(f"{name}\n{normal}".encode()).hexdigest()[:12]


def split_of(task: SleepTask, val_percent: int, seed: str = "") -> Literal["train", "val"]:
    """Train or selection, by a stable hash of the task id: a task never changes sides from
    night to night, and no task is in both."""
    bucket = int(hashlib.sha256(f"{seed}{task.id}".encode()).hexdigest(), 16) % 100
    return "val" if bucket < val_percent else "train"


def read_tasks(path: Path) -> TasksFile:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: tasks file not found") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: tasks file is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: not JSON (line {exc.lineno}: {exc.msg})") from None
    try:
        return TasksFile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise DataError(f"{path}: {where}: {err['msg']}") from None


def write_tasks(path: Path, tasks: TasksFile) -> None:
    from skillgrad.files import atomic_write_text

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, tasks.model_dump_json(indent=2) + "\n")
