"""The command line as a user meets it: the quickstart, show, eval, and one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import toy_config
from e2e import cli, one_line_error

from skillgrad import __version__
from skillgrad.skill import skill_hash

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("qs")
    shutil.copytree(REPO / "examples" / "quickstart", folder / "quickstart")
    proc = cli("train", "quickstart/scripted.yaml", "--out", "run", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    assert "test (hard/soft)" in proc.stdout
    # The end of a run says how long it took and what it learned.
    lines = proc.stdout.splitlines()
    assert any(line.startswith("time: ") for line in lines)
    learned = lines.index("learned (initial -> best):")
    assert lines[learned + 1].startswith("  + ")
    (folder / "end.txt").write_text(proc.stdout)
    next_line = proc.stdout.strip().splitlines()[-1]
    assert next_line.startswith("next: skillgrad show run") and "skillgrad dashboard run" in next_line
    return folder


def test_version_and_help() -> None:
    assert cli("--version").stdout.strip() == f"skillgrad {__version__}"
    for cmd in ("train", "eval", "show"):
        proc = cli(cmd, "--help")
        assert proc.returncode == 0 and "Usage" in proc.stdout


def test_quickstart_learns_and_accepts(quickstart: Path) -> None:
    summary = json.loads((quickstart / "run" / "summary.json").read_text())
    assert summary["test"]["best"]["hard"] > summary["test"]["initial"]["hard"]
    decisions = summary["decisions_per_epoch"]["1"]
    assert decisions.get("accept_new_best", 0) >= 1
    best = (quickstart / "run" / "best_skill.md").read_text()
    assert "only the answer" in best


def test_show_prints_a_row_per_step(quickstart: Path) -> None:
    proc = cli("show", "run", cwd=quickstart)
    assert proc.returncode == 0, proc.stderr
    assert "accept_new_best" in proc.stdout and "best step:" in proc.stdout
    state = json.loads((quickstart / "run" / "checkpoint.json").read_text())
    assert proc.stdout.count("skip") >= sum(r["decision"] == "skip" for r in state["history"])


def test_eval_scores_a_skill_and_writes_a_summary(quickstart: Path) -> None:
    proc = cli("eval", "quickstart/scripted.yaml", "--skill", "run/best_skill.md", "--split",
               "test", "--out", "ev", cwd=quickstart)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((quickstart / "ev" / "eval_summary.json").read_text())
    train_summary = json.loads((quickstart / "run" / "summary.json").read_text())
    assert summary["hard"] == train_summary["test"]["best"]["hard"]
    assert summary["n"] == train_summary["test"]["best"]["n"]


def test_eval_of_the_initial_skill_and_of_no_skill(quickstart: Path) -> None:
    proc = cli("eval", "quickstart/scripted.yaml", "--initial", cwd=quickstart)
    assert proc.returncode == 0, proc.stderr
    initial = json.loads(next((quickstart / "runs").glob("eval-scripted-test-initial/"
                                                         "eval_summary.json")).read_text())
    state = json.loads((quickstart / "run" / "checkpoint.json").read_text())
    train_summary = json.loads((quickstart / "run" / "summary.json").read_text())
    assert initial["skill_hash"] == state["initial_hash"]
    assert initial["soft"] == train_summary["test"]["initial"]["soft"]
    proc = cli("eval", "quickstart/scripted.yaml", "--no-skill", "--out", "none", cwd=quickstart)
    assert proc.returncode == 0, proc.stderr
    none = json.loads((quickstart / "none" / "eval_summary.json").read_text())
    assert none["skill_hash"] == skill_hash("") and none["n"] == initial["n"]
    for args in ((), ("--initial", "--no-skill"), ("--skill", "run/best_skill.md", "--initial")):
        line = one_line_error(cli("eval", "quickstart/scripted.yaml", *args, cwd=quickstart))
        assert line == "error: eval: give exactly one of --skill FILE, --initial or --no-skill"


def test_set_overrides_reach_the_run(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    proc = cli("train", str(cfg), "--out", str(toy_dir / "run"), "--set", "train.num_epochs=1")
    assert proc.returncode == 0, proc.stderr
    state = json.loads((toy_dir / "run" / "checkpoint.json").read_text())
    assert state["num_epochs"] == 1 and len(state["history"]) == 3
    assert "num_epochs: 1" in (toy_dir / "run" / "config.yaml").read_text()


def test_unknown_key_is_one_line_naming_key_and_file(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("train:\n  num_epoch: 3\n")
    line = one_line_error(cli("train", "c.yaml", cwd=tmp_path))
    assert "c.yaml" in line and "train.num_epoch" in line and "num_epochs" in line


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("train:\n  num_epoch: 3\n")
    proc = cli("--debug", "train", "c.yaml", cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" in proc.stderr


def test_malformed_yaml(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("train: [1, 2\n")
    line = one_line_error(cli("train", "c.yaml", cwd=tmp_path))
    assert "malformed YAML" in line and "line" in line


def test_missing_and_empty_data_files(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    (toy_dir / "toy.jsonl").unlink()
    line = one_line_error(cli("train", str(cfg), "--out", str(toy_dir / "r1")))
    assert "toy.jsonl" in line
    (toy_dir / "toy.jsonl").write_text("")
    line = one_line_error(cli("train", str(cfg), "--out", str(toy_dir / "r2")))
    assert "toy.jsonl" in line and "empty" in line
    assert not (toy_dir / "r2" / "checkpoint.json").exists()


def test_an_empty_split_is_refused(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir, env={"split_ratio": [1.0, 0.0, 0.0]})
    line = one_line_error(cli("train", str(cfg), "--out", str(toy_dir / "r")))
    assert "val" in line or "test" in line


def test_eval_rejects_a_skill_that_is_not_utf8(quickstart: Path) -> None:
    (quickstart / "latin1.md").write_bytes("Réponse courte".encode("latin-1"))
    line = one_line_error(cli("eval", "quickstart/scripted.yaml", "--skill", "latin1.md",
                              cwd=quickstart))
    assert "latin1.md" in line and "UTF-8" in line


def test_eval_rejects_an_unknown_split(quickstart: Path) -> None:
    line = one_line_error(cli("eval", "quickstart/scripted.yaml", "--skill", "run/best_skill.md",
                              "--split", "dev", cwd=quickstart))
    assert "dev" in line


def test_show_on_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    line = one_line_error(cli("show", str(tmp_path)))
    assert "not a skillgrad run directory" in line


def test_show_on_a_folder_of_runs_names_the_runs_in_it(tmp_path: Path) -> None:
    for name in ("seed1", "seed0"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "run.json").write_text("{}")
    (tmp_path / "compare.json").write_text("{}")
    line = one_line_error(cli("show", str(tmp_path)))
    assert line.endswith("not a skillgrad run directory (the runs inside it: seed0, seed1)")


def test_training_into_a_foreign_folder_is_refused(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    foreign = toy_dir / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("keep me")
    line = one_line_error(cli("train", str(cfg), "--out", str(foreign)))
    assert "not a skillgrad run directory" in line
    assert (foreign / "todo.txt").read_text() == "keep me"


def test_a_model_failure_stops_with_a_resume_hint_and_is_not_a_score(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    cfg.write_text(cfg.read_text().replace("function: toy:target", "replies: ['Answer: x']"))
    out = toy_dir / "run"
    proc = cli("train", str(cfg), "--out", str(out))
    line = one_line_error(proc, code=1)
    assert "model call failed" in line and "resume" in proc.stderr
    assert not (out / "checkpoint.json").exists()  # nothing was scored from the failure
    journal = (out / "init" / "calls.jsonl").read_text().splitlines()
    assert len(journal) == 1  # the one answered call is kept for the resumed run


def test_an_initial_skill_that_is_not_utf8_stops_before_anything_is_written(toy_dir: Path) -> None:
    cfg = toy_config(toy_dir)
    (toy_dir / "toy_skill.md").write_bytes("Réponse".encode("latin-1"))
    line = one_line_error(cli("train", str(cfg), "--out", str(toy_dir / "run")))
    assert "toy_skill.md" in line and "UTF-8" in line
    assert not (toy_dir / "run").exists()


# ----------------------------------------------------------------------------- models


def test_models_list_names_the_known_models(tmp_path: Path) -> None:
    env_home = {"SKILLGRAD_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "skillgrad.cli", "model", "list"],
                          env={**os.environ, **env_home, "COLUMNS": "200"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "qwen2.5-coder-1.5b (default)" in proc.stdout and "qwen2.5-coder-0.5b" in proc.stdout
    assert str(tmp_path) in proc.stdout  # where it looked


def test_models_install_of_an_unknown_model_is_one_line() -> None:
    line = one_line_error(cli("model", "install", "gpt-17"))
    assert "unknown embedded model 'gpt-17'" in line and "qwen2.5-coder-1.5b" in line


def test_a_missing_embedded_model_stops_before_the_run_starts(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    shutil.copy(REPO / "examples" / "quickstart" / "data.jsonl", tmp_path)
    config.write_text("env: {name: qa, data_path: data.jsonl}\n"
                      "model: {target: {backend: embedded, model_path: missing.gguf}}\n")
    line = one_line_error(cli("train", str(config), "--out", str(tmp_path / "run")))
    assert "model_path" in line and "missing.gguf" in line
    assert not (tmp_path / "run").exists()


def test_dash_h_is_help_for_every_command() -> None:
    from e2e import cli

    for args in (["-h"], ["train", "-h"], ["sleep", "-h"], ["config", "check", "-h"]):
        proc = cli(*args)
        assert proc.returncode == 0 and "Usage: skillgrad" in proc.stdout, args


def test_train_dry_run_plans_calls_and_cost_and_calls_nothing(tmp_path: Path) -> None:
    import yaml
    from conftest import toy_config
    from e2e import cli

    cfg = toy_config(tmp_path, model={
        "target": {"backend": "scripted", "replies": [], "prices": {"prompt": 1.0,
                                                                    "completion": 2.0}},
        "optimizer": {"backend": "scripted", "replies": []}})
    data = yaml.safe_load(cfg.read_text())
    proc = cli("train", str(cfg), "--out", str(tmp_path / "run"), "--dry-run", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "plan: 3 steps" in proc.stdout or "plan: 6 steps" in proc.stdout
    target_total = next(line for line in proc.stdout.splitlines()
                        if "target" in line and "total" in line)
    assert target_total.split("│")[-2].strip()  # priced: a cost
    assert not (tmp_path / "run").exists() and data["train"]["num_epochs"] == 2
    # Which models run, and the plan against a role's budget.
    assert "optimizer: scripted; time: none (scripted replies)" in proc.stdout.splitlines()
    short = cli("train", str(cfg), "--dry-run", "--set", "model.target.budget.calls=5",
                cwd=tmp_path)
    line = next(x for x in short.stdout.splitlines() if x.startswith("target: scripted"))
    assert "budget: calls 5 allowed, up to " in line and "may stop, resumably" in line
    roomy = cli("train", str(cfg), "--dry-run", "--set", "model.target.budget.calls=100000",
                cwd=tmp_path)
    assert "target: scripted; within its budget; time: none (scripted replies)" in roomy.stdout


def test_every_commands_help_fits_80_columns_without_cutting_words() -> None:
    """Each command's --help at 80 columns: no line wider, no option name or value cut short
    with an ellipsis, and every --set reads KEY=VALUE."""
    import typer
    from typer.testing import CliRunner

    from skillgrad.cli.main import app

    def paths(command: object, path: list[str]) -> list[list[str]]:
        found = [path]
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            found += paths(sub, [*path, name])
        return found

    runner = CliRunner()
    commands = paths(typer.main.get_command(app), [])
    assert len(commands) > 20
    for path in commands:
        result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"},
                               prog_name="skillgrad")
        assert result.exit_code == 0, path
        lines = result.output.splitlines()
        assert lines[0].startswith("Usage: skillgrad"), path
        assert max(len(line) for line in lines) <= 80, path
        assert "…" not in result.output and " / --no-" not in result.output, path
        assert "--set <" not in result.output, path


def test_a_missing_extra_is_named_not_a_traceback(tmp_path: Path) -> None:
    """With openpyxl not installed (a stand-in module that says so), checking a spreadsheet
    config names the extra to install."""
    import tomllib

    from skillgrad.cli.main import MODULE_EXTRAS

    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "openpyxl.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'openpyxl'\", name='openpyxl')\n")
    proc = cli("config", "check", str(REPO / "examples" / "spreadsheet" / "config.yaml"),
               env={"PYTHONPATH": f"{hidden}{os.pathsep}{Path(__file__).parent}"})
    assert one_line_error(proc) == ("error: openpyxl: not installed; it comes with skillgrad's "
                                    "spreadsheet extra: pip install 'skillgrad[spreadsheet]'")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert set(MODULE_EXTRAS.values()) <= set(extras)


def test_config_check_shows_what_is_set_and_finds_what_the_run_lacks(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text("".join(
        json.dumps({"id": f"q{i}", "question": f"q{i}?", "answer": "a"}) + "\n"
        for i in range(10)))
    config = tmp_path / "c.yaml"
    config.write_text("env: {name: qa, data_path: d.jsonl}\ntrain: {batch_size: 3}\n"
                      "model:\n  target: {backend: scripted, default: a}\n"
                      "  optimizer: {backend: scripted, default: a}\n")
    proc = cli("config", "check", str(config), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    keys = [line.split()[0] for line in proc.stdout.splitlines() if line.startswith("  ")]
    assert "train.batch_size" in keys and "train.num_epochs" not in keys  # a default
    assert "more keys at their defaults: --all shows them" in proc.stdout
    assert len(proc.stdout.splitlines()) < 20
    every = cli("config", "check", str(config), "--all", cwd=tmp_path)
    assert "train.num_epochs" in every.stdout and "--all shows them" not in every.stdout

    config.write_text("env: {name: qa, data_path: d.jsonl}\nmodel:\n"
                      "  target: {backend: embedded, model_path: missing.gguf}\n"
                      "  optimizer: {backend: agent, cli: codex, binary: no-such-codex,"
                      " role: optimizer, serve: nowhere.yaml}\n"
                      f"tracking:\n  mlflow: {{tracking_uri: {tmp_path / 'mlruns'}}}\n")
    proc = cli("config", "check", str(config), cwd=tmp_path)
    missing = [line for line in proc.stdout.splitlines() if line.startswith("missing: ")]
    assert any("model.target.model_path: missing.gguf does not exist" in m for m in missing)
    assert any("model.optimizer.binary: 'no-such-codex' not found on PATH" in m
               for m in missing)
    assert any("model.optimizer.serve: " in m and "nowhere.yaml does not exist" in m
               for m in missing)
    line = one_line_error(proc)
    assert "the run would stop: " in line and "more above" in line
    assert not proc.stdout.rstrip().endswith("ok")
