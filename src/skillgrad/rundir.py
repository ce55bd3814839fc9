"""The run directory: the one module that owns every path and every write of a run.

Layout::

    RUN/
      config.yaml          resolved config, secrets redacted
      checkpoint.json      trainer state, replaced atomically after every step
      events.jsonl         append-only event log, one JSON object per line
      skills/<hash>.md     every skill version, content-addressed
      best_skill.md        the deployable artifact
      current_skill.md     the skill training would continue from
      init/  final/        evaluation scopes: rollouts and model calls
      run.json             the marker: the config fingerprint and the skillgrad version
      steps/e01-s001/      rollouts, patches, merged patch, ranked edits, candidate,
                           apply report, gate decision, model calls (calls.jsonl)
      epochs/e02/          start-of-epoch work: task pairs, meta skill, slow update, calls
      meta_skill.md        the optimizer's notes (never shown to the target)
      evals/<split>-<hash>/rollouts.jsonl
      summary.json

The file names inside a step or epoch folder are those of :class:`WorkDir`; nothing else
names a file of a run. Every file except the logs is written to a temporary name and renamed
into place, so a run killed at any instant leaves either the old or the new version, never
half of one.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from skillgrad.errors import RunDirError
from skillgrad.skill import skill_hash

SCHEMA_VERSION = 1
CALLS = "calls.jsonl"  # a scope's model-call journal (what --replay reads)
ROLLOUTS = "rollouts.jsonl"
EVAL_SUMMARY = "eval_summary.json"  # written by ``skillgrad eval``


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)  # gone after a successful replace


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json")
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return _jsonable(dataclasses.asdict(obj))
    if isinstance(obj, (list, tuple)):
        return [_jsonable(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    return obj


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Objects of a JSON-lines file; a half-written last line (a killed writer) is skipped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


class WorkDir:
    """One folder of a run's work (a step, the start of an epoch, an evaluation scope) and the
    names of the files in it. ``artifact`` takes the stage artifacts a candidate was made
    from, by kind."""

    ARTIFACTS = {
        "merged_patch": "merged_patch.json",
        "ranked_edits": "ranked_edits.json",
        "ranked_suggestions": "ranked_suggestions.json",
        "apply_report": "apply_report.json",
        "rewrite": "rewrite.json",
        "rewrites": "rewrites.json",
        "appendix": "appendix.json",
        "screen": "screen.json",
    }

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def calls_path(self) -> Path:
        return self.path / CALLS

    def rollouts(self, results: Iterable[Any]) -> None:
        write_jsonl(self.path / ROLLOUTS, results)

    def patches(self, patches: Any) -> None:
        write_json(self.path / "patches.json", patches)

    def artifact(self, kind: str, data: Any) -> None:
        if kind not in self.ARTIFACTS:
            raise ValueError(f"unknown step artifact {kind!r}")
        write_json(self.path / self.ARTIFACTS[kind], data)

    def candidate(self, text: str) -> None:
        atomic_write_text(self.path / "candidate.md", text)

    def gate(self, decision: Any) -> None:
        write_json(self.path / "gate.json", decision)

    def record(self, record: Any) -> None:
        write_json(self.path / "record.json", record)

    def pairs(self, rows: Iterable[Any]) -> None:
        write_jsonl(self.path / "pairs.jsonl", rows)

    def meta_skill(self, text: str) -> None:
        atomic_write_text(self.path / "meta_skill.md", text)

    def epoch_update(self, update: Any) -> None:
        write_json(self.path / "epoch_update.json", update)

    def eval_summary(self, summary: Any) -> None:
        write_json(self.path / EVAL_SUMMARY, summary)


def write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(_jsonable(data), indent=2, ensure_ascii=False) + "\n")


def write_jsonl(path: Path, rows: Iterable[Any]) -> None:
    atomic_write_text(path, "".join(json.dumps(_jsonable(r), ensure_ascii=False) + "\n"
                                    for r in rows))


class RunDir:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    # ------------------------------------------------------------------ paths
    @property
    def config_path(self) -> Path:
        return self.root / "config.yaml"

    @property
    def checkpoint_path(self) -> Path:
        return self.root / "checkpoint.json"

    @property
    def events_path(self) -> Path:
        return self.root / "events.jsonl"

    @property
    def summary_path(self) -> Path:
        return self.root / "summary.json"

    @property
    def best_skill_path(self) -> Path:
        return self.root / "best_skill.md"

    @property
    def current_skill_path(self) -> Path:
        return self.root / "current_skill.md"

    def skill_path(self, digest: str) -> Path:
        return self.root / "skills" / f"{digest[:16]}.md"

    @property
    def marker_path(self) -> Path:
        return self.root / "run.json"

    def step_dir(self, epoch: int, step: int) -> WorkDir:
        """The folder of 1-based ``step`` of 1-based ``epoch``."""
        return WorkDir(self.root / "steps" / f"e{epoch:02d}-s{step:03d}")

    def epoch_dir(self, epoch: int) -> WorkDir:
        """The folder of the work done before 1-based ``epoch`` started."""
        return WorkDir(self.root / "epochs" / f"e{epoch:02d}")

    @property
    def meta_skill_path(self) -> Path:
        return self.root / "meta_skill.md"

    def scope_dir(self, name: str) -> WorkDir:
        """An evaluation scope (``init``, ``final``): its rollouts and model calls."""
        return WorkDir(self.root / name)

    def eval_dir(self, split: str, digest: str) -> WorkDir:
        return WorkDir(self.root / "evals" / f"{split}-{digest[:16]}")

    # ------------------------------------------------------------------ writes
    def write_text(self, path: Path, text: str) -> None:
        atomic_write_text(path, text)

    def write_json(self, path: Path, data: Any) -> None:
        write_json(path, data)

    def write_jsonl(self, path: Path, rows: Iterable[Any]) -> None:
        write_jsonl(path, rows)

    def event(self, kind: str, **data: Any) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        line = json.dumps({"time": round(time.time(), 3), "event": kind, **_jsonable(data)},
                          ensure_ascii=False)
        with self.events_path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")

    def events(self) -> list[dict[str, Any]]:
        return read_jsonl(self.events_path)

    def save_skill(self, text: str) -> str:
        digest = skill_hash(text)
        path = self.skill_path(digest)
        if not path.exists():
            atomic_write_text(path, text)
        return digest

    def load_skill(self, digest: str) -> str:
        path = self.skill_path(digest)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise RunDirError(f"{path}: skill version missing from the run directory") from None
        if skill_hash(text) != digest:
            raise RunDirError(f"{path}: skill file was modified (content hash differs)")
        return text

    # ------------------------------------------------------------------ checkpoint
    def save_checkpoint(self, state: BaseModel) -> None:
        self.write_json(self.checkpoint_path, state)

    def load_checkpoint_data(self) -> dict[str, Any] | None:
        path = self.checkpoint_path
        if not path.exists():
            return None
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RunDirError(f"{path}: checkpoint is not valid JSON") from None
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            raise RunDirError(f"{path}: checkpoint schema version is not {SCHEMA_VERSION}")
        return data

    def exists(self) -> bool:
        return self.checkpoint_path.exists()

    # ------------------------------------------------------------------ the marker
    def previous_fingerprint(self) -> str | None:
        """The config fingerprint an earlier start wrote (``None`` for a new directory);
        refuses a folder that holds other things."""
        if self.marker_path.exists():
            data = json.loads(self.marker_path.read_text(encoding="utf-8"))
            return data.get("fingerprint")  # type: ignore[no-any-return]
        if self.root.exists() and any(self.root.iterdir()):
            raise RunDirError(f"{self.root}: exists, is not empty and is not a skillgrad run "
                              "directory")
        return None

    def write_marker(self, fingerprint: str, version: str) -> None:
        self.write_json(self.marker_path, {"fingerprint": fingerprint, "skillgrad": version})

    def read_summary(self) -> dict[str, Any]:
        return json.loads(self.summary_path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]

    def read_config(self) -> Any:
        """The resolved config the run directory holds (``None`` when it is unreadable)."""
        try:
            return yaml.safe_load(self.config_path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            return None
