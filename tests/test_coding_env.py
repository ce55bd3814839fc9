"""The ``coding`` environment: its bundled task set is what the generator writes, every task's
checks fail on the untouched repository and pass after its reference solution, and a rollout
through the shared working-copy runner scores an agent by what it left there."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.envs.base import SPLITS, EnvCommon
from skillgrad.envs.coding import CodingEnvironment, CodingOptions
from skillgrad.envs.coding.generate import DATA_DIR, build, problems, prove, write
from skillgrad.envs.coding.tasks import read_repos, read_tasks
from skillgrad.envs.coding.templates import CONVENTIONS, TEMPLATES
from skillgrad.envs.workspace import Check, run_checks, worktree
from skillgrad.errors import DataError
from skillgrad.models.command import CommandBackend, CommandOptions
from skillgrad.models.scripted import ScriptedModel
from skillgrad.registry import environment_class, environment_names
from skillgrad.traces.sessions import REPLAY_MARKER

NAME = "skillgrad.envs.coding:CodingEnvironment"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "coding"
TASKS = read_tasks(DATA_DIR / "tasks.jsonl")
BY_ID = {t.id: t for t in TASKS}
# A stand-in for an agent CLI: it applies the patch named by its first argument (none: it
# does nothing) in the folder it runs in, and reports.
AGENT = """import subprocess, sys
if len(sys.argv) > 1:
    subprocess.run(["git", "apply", sys.argv[1]], check=True)
    print("Applied the change; the tests pass.")
else:
    print("I looked at it.")
"""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> CodingEnvironment:
    cache = tmp_path_factory.mktemp("coding-cache")
    return CodingEnvironment.create(EnvCommon(name="coding"), CodingOptions(cache=cache),
                                    Path("."))


def _agent(folder: Path, patch: str | None) -> CommandBackend:
    script = folder / "agent.py"
    script.write_text(AGENT, encoding="utf-8")
    argv = [sys.executable, str(script)]
    if patch is not None:
        (folder / "solution.patch").write_text(patch, encoding="utf-8")
        argv.append(str(folder / "solution.patch"))
    return CommandBackend.create(CommandOptions(argv=argv), folder)


def test_the_bundled_set_has_its_splits_each_with_every_template_and_both_repositories(
        env: CodingEnvironment) -> None:
    sizes = {split: len(env.tasks(split)) for split in SPLITS}
    assert sizes == {"train": 16, "val": 10, "test": 10}
    for split in SPLITS:
        tasks = [BY_ID[t.id] for t in env.tasks(split)]
        assert {t.template for t in tasks} == set(TEMPLATES), split
        assert {t.repo for t in tasks} == {"ledger", "textkit"}, split
    assert Counter(t.repo for t in TASKS) == {"ledger": 20, "textkit": 16}
    used = Counter(c for t in TASKS for c in t.conventions)
    assert set(used) == set(CONVENTIONS) and all(1 <= len(t.conventions) <= 2 for t in TASKS)
    assert all(any(c.arg == "python3 -m unittest" for c in t.checks) for t in TASKS)


def test_the_committed_task_set_is_what_the_generator_writes(tmp_path: Path) -> None:
    repos, tasks, _ = build(tmp_path / "repos")
    write(tmp_path / "out", repos, tasks)
    for name in ("tasks.jsonl", "repos.json"):
        assert (tmp_path / "out" / name).read_text() == (DATA_DIR / name).read_text(), name


def test_every_task_fails_untouched_and_passes_after_its_reference_solution(
        env: CodingEnvironment, tmp_path: Path) -> None:
    """What proves the checks right: no task is solved by doing nothing, and every check of
    every task passes on a solution that follows the request and the conventions."""
    repos = env._repos

    def one(task_id: str) -> list[str]:
        task = BY_ID[task_id]
        before, after = prove(task, repos[(task.repo, task.commit)], tmp_path)
        first = next(iter(before.values()))  # the request's own check comes first
        return problems(task, before, after) + ([f"{task_id}: done untouched"] if first else [])

    with ThreadPoolExecutor(4) as pool:
        found = [p for ps in pool.map(one, sorted(BY_ID)) for p in ps]
    assert found == []


def test_worktrees_of_one_repository_from_many_threads_at_once(tmp_path: Path) -> None:
    """Rollouts run in threads: a prune in one must not delete the worktree another is
    still adding (git's 'could not open .git/worktrees/…/locked')."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "a"], check=True)

    def one(i: int) -> str:
        with worktree(repo, None, tmp_path / "copies", f"t{i}") as copy:
            return (copy / "a.txt").read_text()

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(one, range(96))) == ["a\n"] * 96
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert len(listed) == 1 and not list((tmp_path / "copies").iterdir())


def test_an_agent_that_applies_the_reference_solution_scores_1(
        env: CodingEnvironment, tmp_path: Path) -> None:
    (task,) = [t for t in env.tasks("train") if t.id == "ledger-fix-low-stock"]
    model = _agent(tmp_path, BY_ID[task.id].solution)
    result = env.rollout(task, "# Skill\nFollow the conventions.\n", model)
    assert (result.hard, result.soft, result.reason) == (1.0, 1.0, "")
    assert result.answer == "Applied the change; the tests pass."
    assert all(result.metadata["checks"].values()) and len(result.metadata["checks"]) == 4
    changed = result.metadata["files_changed"]
    assert {"CHANGELOG.md", "ledger/stock.py", "tests/test_regressions.py"} <= set(changed)
    assert [m.role for m in result.messages] == ["system", "user"]
    assert result.messages[1].text() == BY_ID[task.id].request


def test_an_agent_that_does_nothing_scores_0_with_the_failed_checks_named(
        env: CodingEnvironment, tmp_path: Path) -> None:
    (task,) = [t for t in env.tasks("test") if t.id == "textkit-fix-line-at"]
    result = env.rollout(task, "# Skill\n", _agent(tmp_path, None))
    assert result.hard == 0.0
    assert result.soft == pytest.approx(2 / 4)  # the suite passes, the test file is unchanged
    assert result.reason.startswith("failed checks: command_passes ")
    assert "from textkit.lines import line_at" in result.reason.split(",")[0]
    assert "tests/test_regressions.py" in result.reason
    assert result.metadata["checks"]["command_passes 'python3 -m unittest'"] is True
    assert result.metadata["checks"]["file_unchanged 'tests/test_lines.py'"] is True


def test_a_model_that_cannot_act_on_files_is_scored_not_raised(env: CodingEnvironment) -> None:
    task = env.tasks("val")[0]
    model = ScriptedModel(default="Rename it and update the callers.")
    result = env.rollout(task, "# Skill\n", model)
    assert result.hard == 0.0 and 0.0 < result.soft < 1.0
    assert result.reason.endswith("; no file was changed")
    assert result.metadata["files_changed"] == []
    assert model.calls[0].workspace is not None
    assert REPLAY_MARKER in Path(model.calls[0].workspace).name  # never harvested by Sleep


def test_a_rollout_leaves_no_worktree_behind(env: CodingEnvironment, tmp_path: Path) -> None:
    task = env.tasks("train")[0]
    item = BY_ID[task.id]
    env.rollout(task, "# Skill\n", _agent(tmp_path, None))
    repo = env._repos[(item.repo, item.commit)]
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True,
                            text=True, check=True).stdout
    assert len(listed.splitlines()) == 1  # the repository's own


def test_the_ratio_split_and_another_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "repos.json").write_text((DATA_DIR / "repos.json").read_text())
    lines = (DATA_DIR / "tasks.jsonl").read_text().splitlines()[:10]
    (data / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    common = EnvCommon(name="coding", split_ratio=(0.6, 0.2, 0.2))
    made = CodingEnvironment.create(
        common, CodingOptions(data=Path("data"), splits="ratio", cache=tmp_path / "cache"),
        tmp_path)
    assert [len(made.tasks(s)) for s in SPLITS] == [6, 2, 2]
    trained = [line for line in lines if json.loads(line)["split"] == "train"]
    (data / "tasks.jsonl").write_text("\n".join(trained) + "\n")
    with pytest.raises(DataError, match=r"tasks.jsonl: split 'val' is empty"):
        CodingEnvironment.create(EnvCommon(name="coding"), CodingOptions(
            data=data, cache=tmp_path / "cache"), tmp_path)


def test_a_task_set_whose_files_commit_elsewhere_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    repos = read_repos(DATA_DIR / "repos.json")
    repos["ledger"]["VERSION"] = "0.5.0\n"
    (data / "repos.json").write_text(json.dumps({"repos": repos}))
    (data / "tasks.jsonl").write_text((DATA_DIR / "tasks.jsonl").read_text())
    with pytest.raises(DataError, match=r"repository ledger: its files commit to [0-9a-f]{40}, "
                       r"but its tasks name [0-9a-f]{40}; regenerate"):
        CodingEnvironment.create(EnvCommon(name="coding"), CodingOptions(
            data=data, cache=tmp_path / "cache"), tmp_path)


def test_a_bad_task_line_is_named(tmp_path: Path) -> None:
    bad = dict(json.loads((DATA_DIR / "tasks.jsonl").read_text().splitlines()[0]))
    bad["checks"] = [{"op": "contains", "arg": "done"}]
    (tmp_path / "tasks.jsonl").write_text(json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"tasks.jsonl: line 1: checks: no working-copy check"):
        read_tasks(tmp_path / "tasks.jsonl")


def test_the_working_copy_checks(tmp_path: Path) -> None:
    """file_changed / file_unchanged see committed work too; a command that cannot start is
    a failed check, never a crash; text checks are skipped."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("a\n")
    (repo / "b.txt").write_text("b\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    checks = [Check(op="file_changed", arg="./a.txt"), Check(op="file_unchanged", arg="b.txt"),
              Check(op="file_unchanged", arg="a.txt"), Check(op="command_passes",
                                                              arg="no-such-program --x"),
              Check(op="command_passes", arg=f"{sys.executable} -c pass"),
              Check(op="contains", arg="done")]
    with worktree(repo, None, tmp_path / "work", "t") as copy:
        assert copy.name == f"{REPLAY_MARKER}-t"
        base = subprocess.run(["git", "-C", str(copy), "rev-parse", "HEAD"], check=True,
                              capture_output=True, text=True).stdout.strip()
        (copy / "a.txt").write_text("changed\n")
        subprocess.run(["git", "-C", str(copy), "-c", "user.name=t", "-c", "user.email=t@e",
                        "commit", "-qam", "agent's commit"], check=True)
        (copy / "new.txt").write_text("new\n")
        outcomes, changed = run_checks(checks, copy, base, timeout=30)
    assert changed == ("a.txt", "new.txt")
    assert list(outcomes.values()) == [True, True, False, False, True]
    assert not (tmp_path / "work" / f"{REPLAY_MARKER}-t").exists()


def test_the_example_config_trains_the_coding_env_with_an_opencode_agent(
        tmp_path: Path) -> None:
    config = yaml.safe_load((EXAMPLE / "config.yaml").read_text())
    assert config["env"]["name"] == "coding"
    config["env"].update(name=NAME, cache=str(tmp_path / "cache"))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    resolved = load_config(tmp_path / "config.yaml")
    target = resolved.role_options["target"]
    assert (resolved.config.model.target.backend, target.cli, target.serve) == (
        "agent", "opencode", Path("serve.yaml"))
    assert (EXAMPLE / "serve.yaml").is_file()
    env = build_environment(resolved)
    assert isinstance(env, CodingEnvironment) and len(env.tasks("test")) == 10


@pytest.mark.skipif("coding" not in environment_names(),
                    reason="the installed metadata predates the entry point (pip install -e .)")
def test_the_name_coding_is_registered() -> None:
    assert environment_class("coding") is CodingEnvironment
