"""``skillgrad env new``: the scaffolded package passes its own tests and trains as generated;
``env list`` / ``backend list``; environments named by ``module:Class``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from e2e import rule_optimizer, train_end_to_end

from skillgrad import registry
from skillgrad.config import load_config
from skillgrad.errors import ConfigError, SkillgradError
from skillgrad.models.messages import ChatRequest
from skillgrad.scaffold import new_environment

RULE = "End with a line 'Answer: <the number or time>'."


def scaffold_target(request: ChatRequest) -> str:
    """Solves the sample word problems, but states the answer only if the skill says how."""
    import re

    question = request.messages[-1].text()
    numbers = [int(n) for n in re.findall(r"\d+", question)]
    if "bus" in question:
        h, m, add = numbers[0], numbers[1], numbers[2]
        total = h * 60 + m + add
        answer = f"{total // 60}:{total % 60:02d}"
    elif "crate" in question:
        answer = str(numbers[0] * numbers[1])
    elif "stamps" in question:
        answer = str(numbers[0] - numbers[1])
    else:
        answer = str(numbers[0] // numbers[1])
    if RULE in request.messages[0].text():
        return f"Working it out.\nAnswer: {answer}"
    return f"Working it out, the result would be {answer} I think."


scaffold_optimizer = rule_optimizer(RULE, support=3)


@pytest.fixture
def package(tmp_path: Path) -> Path:
    return new_environment("word_sums", tmp_path)


def test_the_scaffold_passes_its_own_tests(package: Path) -> None:
    expected = {"pyproject.toml", "README.md", "config.yaml", "data/tasks.jsonl",
                "src/word_sums_env/env.py", "src/word_sums_env/__init__.py",
                "src/word_sums_env/initial_skill.md", "tests/test_word_sums.py"}
    assert {str(p.relative_to(package)) for p in package.rglob("*") if p.is_file()} == expected
    for path in package.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert not any(p in text for p in ("__NAME__", "__PKG__", "__CLASS__")), path
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=package, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "5 passed" in proc.stdout


def test_the_scaffold_trains_one_epoch(package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(package / "src"))
    config = yaml.safe_load((package / "config.yaml").read_text())
    config["env"]["name"] = "word_sums_env.env:WordSumsEnvironment"  # not installed: by path
    train_end_to_end(package, config, target="test_scaffold:scaffold_target",
                     optimizer="test_scaffold:scaffold_optimizer", rule=RULE)


def test_bad_names_and_occupied_folders_are_refused(tmp_path: Path) -> None:
    for bad in ("Word", "1abc", "a-b", ""):
        with pytest.raises(SkillgradError, match="lower case"):
            new_environment(bad, tmp_path)
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "x").write_text("mine")
    with pytest.raises(SkillgradError, match="not empty"):
        new_environment("taken", tmp_path)
    assert (tmp_path / "taken" / "x").read_text() == "mine"


def test_a_name_taken_by_an_installed_environment_is_refused(tmp_path: Path) -> None:
    for taken in ("qa", "math"):
        with pytest.raises(SkillgradError, match=f"env new '{taken}': an installed environment "
                           "already has this name"):
            new_environment(taken, tmp_path)
    assert not (tmp_path / "qa").exists()


def test_two_packages_claiming_one_name_is_an_error_not_a_guess(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    info = tmp_path / "site" / "other_qa-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: other-qa\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[skillgrad.environments]\nqa = skillgrad.envs.math:MathEnvironment\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert set(registry.claimed(registry.ENV_GROUP, "qa")) == {
        "skillgrad.envs.qa:QAEnvironment", "skillgrad.envs.math:MathEnvironment"}
    (tmp_path / "c.yaml").write_text("env: {name: qa}\n")
    with pytest.raises(ConfigError, match="environment 'qa' is registered by more than one "
                       "installed package .*skillgrad.envs.math:MathEnvironment"):
        load_config(tmp_path / "c.yaml")
    rows = [r for r in registry.describe(registry.ENV_GROUP) if r[0] == "qa"]
    assert len(rows) == 2 and all("registered more than once" in r[2] for r in rows)
    # the class named directly still works, and other names are untouched
    (tmp_path / "d.yaml").write_text("env: {name: 'skillgrad.envs.qa:QAEnvironment', "
                                     "data_path: data.jsonl}\n")
    (tmp_path / "data.jsonl").write_text('{"question": "q", "answers": ["a"]}\n')
    assert load_config(tmp_path / "d.yaml").config.env.name == "skillgrad.envs.qa:QAEnvironment"
    assert registry.environment_class("math").__name__ == "MathEnvironment"


def test_an_environment_path_that_is_not_an_environment(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("env: {name: 'os.path:join'}\n")
    with pytest.raises(ConfigError, match="'os.path:join' is not an environment class"):
        load_config(tmp_path / "c.yaml")
    (tmp_path / "d.yaml").write_text("env: {name: 'no_such_module_x:Env'}\n")
    with pytest.raises(ConfigError, match="cannot import 'no_such_module_x'"):
        load_config(tmp_path / "d.yaml")


def test_env_and_backend_lists(tmp_path: Path) -> None:
    def run(*args: str) -> str:
        proc = subprocess.run([sys.executable, "-m", "skillgrad.cli", *args],
                              env={**os.environ, "COLUMNS": "250"}, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    assert "skillgrad.envs.qa:QAEnvironment" in run("env", "list")
    backends = run("backend", "list")
    for name in ("embedded", "openai_compatible", "command", "handoff", "scripted"):
        assert name in backends
    proc = subprocess.run([sys.executable, "-m", "skillgrad.cli", "env", "new", "Bad-Name",
                           "--dir", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.startswith("error: env new 'Bad-Name'")
