"""Train an environment end to end with scripted models: the block every environment's tests
share. The scripted target gets a task right only once the skill states one rule; the scripted
optimizer (:func:`rule_optimizer`) proposes that rule when the failures it is shown call for
it; one short epoch must then take the test score from 0 to (nearly) 1, with the rule in the
best skill."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from skillgrad.config import load_config
from skillgrad.models.messages import ChatRequest
from skillgrad.testing import scripted_optimizer
from skillgrad.trainer import build_trainer


def rule_optimizer(rule: str, support: int, cue: str | None = None) -> Callable[[ChatRequest], Any]:
    """An optimizer that appends ``rule`` until the skill has it, when the failed tasks shown
    contain ``cue`` (any failure when ``cue`` is None)."""

    def propose(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
        if rule in skill or (cue is not None and cue not in tasks):
            return {"reasoning": "nothing to add", "edits": []}
        return {"reasoning": "the failures lack the rule",
                "edits": [{"op": "append", "content": rule, "support": support}]}

    return scripted_optimizer(propose)


def one_epoch(env: dict[str, Any], batch_size: int, *, minibatch_size: int | None = None,
              steps_per_epoch: int | None = None, eval_tasks: int | None = None
              ) -> dict[str, Any]:
    """The config of one epoch that reflects on failures only, one edit per step."""
    train: dict[str, Any] = {"num_epochs": 1, "batch_size": batch_size}
    if steps_per_epoch is not None:
        train["steps_per_epoch"] = steps_per_epoch
    config: dict[str, Any] = {
        "env": env,
        "train": train,
        "gradient": {"minibatch_size": minibatch_size or batch_size, "failure_only": True},
        "optimizer": {"learning_rate": 1, "min_learning_rate": 1},
    }
    if eval_tasks is not None:
        config["evaluation"] = {"sel_env_num": eval_tasks, "test_env_num": eval_tasks}
    return config


def train_end_to_end(folder: Path, config: dict[str, Any], *, target: str, optimizer: str,
                     rule: str, skill: str | None = None, best_above: float | None = None
                     ) -> dict[str, Any]:
    """Train ``config`` with the scripted ``target`` and ``optimizer`` (``module:function``),
    written to ``folder/config.yaml`` (relative paths in it are relative to ``folder``), into
    ``folder/run``, starting from ``skill`` when given (else the environment's own). The
    initial skill must score 0 on test and the best skill contain ``rule`` and score 1 (or
    more than ``best_above``). Returns the summary."""
    config = {**config, "model": {"target": {"backend": "scripted", "function": target},
                                  "optimizer": {"backend": "scripted", "function": optimizer}}}
    if skill is not None:
        (folder / "skill.md").write_text(skill)
        config["env"] = {**config["env"], "skill_init": "skill.md"}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    summary: dict[str, Any] = build_trainer(load_config(folder / "config.yaml"),
                                            folder / "run").fit()
    assert summary["test"]["initial"]["hard"] == 0.0
    if best_above is None:
        assert summary["test"]["best"]["hard"] == 1.0
    else:
        assert summary["test"]["best"]["hard"] > best_above
    assert rule in (folder / "run" / "best_skill.md").read_text()
    return summary


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """``python -m skillgrad.cli ARGS`` as a user runs it, with the tests folder importable (the
    scripted models' ``toy:...`` functions) and ``env`` added to the environment."""
    path = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                         os.environ.get("PYTHONPATH")]))
    full = {**os.environ, "PYTHONPATH": path, "COLUMNS": "200", **(env or {})}
    return subprocess.run([sys.executable, "-m", "skillgrad.cli", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout)


def one_line_error(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The error line of a refusal with exit ``code`` and no traceback."""
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith("error: ")
    return lines[0]
