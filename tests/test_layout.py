"""The layers of ARCHITECTURE.md, checked: every import points down, never up."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "skillgrad"

LOOP = ("trainer", "build", "evaluate", "cli", "settings", "state", "summary", "callbacks")
# module prefix -> the skillgrad modules (prefixes) it must not import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "stages": (*LOOP, "config", "registry", "rundir"),
    "models": (*LOOP, "stages", "config", "registry", "envs", "records"),
    "envs": (*LOOP, "stages", "config", "rundir"),
    "records": (*LOOP, "stages", "config", "envs", "rundir", "registry"),
    "skill": (*LOOP, "stages", "config", "envs", "models", "records", "rundir"),
    "prompts": (*LOOP, "stages", "config", "envs", "models", "records", "rundir"),
    "parallel": (*LOOP, "stages", "config", "envs", "models", "records", "rundir"),
    # Where rollouts run: it moves environments and model calls, and knows no config or stage.
    "execution": (*LOOP, "stages", "config", "registry", "rundir"),
    "errors": (*LOOP, "stages", "config", "envs", "models", "records", "rundir"),
    "config": ("trainer", "build", "evaluate", "cli", "settings", "state", "summary", "stages"),
    "registry": (*LOOP, "stages", "config"),
    "trainer": ("build", "evaluate", "cli"),
    "settings": ("trainer", "build", "evaluate", "cli", "state"),
    "build": ("cli", "evaluate"),
    # The dashboard only reads run directories: it cannot train, call a model or score.
    "dashboard": ("trainer", "build", "evaluate", "cli", "stages", "models"),
    # Trackers are callbacks: they observe the loop and never drive it.
    "tracking": ("trainer", "build", "evaluate", "cli", "stages"),
}


def _module(path: Path, package: Path) -> str:
    rel = path.relative_to(package).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, skillgrad module) for every import of the package in ``path``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "skillgrad":
                out += [(node.lineno, a.name) for a in node.names]
            elif node.module.startswith("skillgrad."):
                out.append((node.lineno, node.module.removeprefix("skillgrad.")))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name.removeprefix("skillgrad.")) for a in node.names
                    if a.name.startswith("skillgrad.")]
    return out


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def violations(package: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(package.rglob("*.py")):
        me = _module(path, package)
        rules = [bad for prefix, bad in FORBIDDEN.items() if _matches(me, prefix)]
        for line, target in _imports(path):
            for bad in rules:
                hit = next((b for b in bad if _matches(target, b)), None)
                if hit is not None:
                    found.append(f"{path.relative_to(package)}:{line}: {me} imports {target}")
    return found


def test_imports_follow_the_layers() -> None:
    assert violations() == []


def test_the_rules_catch_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: a stage that reads the config is reported, a record is not."""
    (tmp_path / "stages").mkdir()
    (tmp_path / "stages" / "probe.py").write_text(
        "from skillgrad.config import SkillgradConfig\nfrom skillgrad.records import Task\n",
        encoding="utf-8")
    assert violations(tmp_path) == ["stages/probe.py:1: stages.probe imports config"]


@pytest.mark.parametrize("stage", ["rollout", "reflect", "aggregate", "select", "schedule",
                                   "update", "gate", "slow_update", "meta_skill", "rewrite",
                                   "appendix", "candidate", "hygiene"])
def test_every_stage_has_its_module_and_is_named_in_the_architecture(stage: str) -> None:
    assert (PACKAGE / "stages" / f"{stage}.py").is_file()
    text = (PACKAGE.parents[1] / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert f"stages/{stage}.py" in text
