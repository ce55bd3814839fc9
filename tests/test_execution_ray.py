"""The Ray execution backend: rollouts on Ray workers (a local cluster of 2 CPUs) give the same
skills, scores and call counts as local threads, resume after a kill, and turn a dead worker
into an infrastructure error, never a score."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray
import ray.cloudpickle
import yaml
from conftest import toy_config
from pydantic import BaseModel, ConfigDict
from test_resume import Counter, comparable, run

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.errors import ConfigError, ExecutionError, FatalModelError
from skillgrad.execution import ExecutionSettings, rollout_environment
from skillgrad.models.messages import ChatRequest, Completion, Usage
from skillgrad.records import RolloutResult, Task
from skillgrad.rundir import read_jsonl
from skillgrad.stages.rollout import rollout

RAY = ["execution.backend=ray", "execution.rollout_workers=2", "execution.ray_cpus_per_worker=0.5"]


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    """One local cluster for the module: the backend joins a Ray already initialised."""
    # The workers import the toy's scripted models from this folder, as the driver does.
    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(Path(__file__).parent)}})
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the test's environments
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, int]:
    folder = tmp_path_factory.mktemp("local")
    cfg = toy_config(folder)
    counter = Counter()
    run(cfg, folder / "run", counter, ["execution.rollout_workers=2"])
    return cfg, comparable(folder / "run"), counter.completed


def _skills(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((out / "skills").iterdir())}


def test_ray_gives_the_same_run_as_local_threads(cluster, local_run, tmp_path: Path) -> None:
    cfg, expected, calls = local_run
    counter = Counter()
    assert run(cfg, tmp_path / "ray", counter, RAY) is not None
    assert comparable(tmp_path / "ray") == expected
    assert _skills(tmp_path / "ray") == _skills(cfg.parent / "run")
    assert counter.completed == calls  # every call went through this process's client layer
    placed = [e for e in read_jsonl(tmp_path / "ray" / "events.jsonl")
              if e["event"] == "execution"]
    assert placed and placed[0]["backend"] == "ray" and placed[0]["workers"] == 2
    assert os.getpid() not in placed[0]["pids"]  # the rollouts ran in the workers' processes


class PidTargetOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PidTarget:
    """A target backend that answers as the toy's scripted target does and names the process
    it was made in (``Completion.model``), to show where the target ran."""

    Options = PidTargetOptions

    @classmethod
    def create(cls, options: PidTargetOptions, base_dir: Path) -> PidTarget:
        return cls()

    def __init__(self) -> None:
        self.made_in = os.getpid()

    def complete(self, request: ChatRequest) -> Completion:
        import toy

        return Completion(text=toy.target(request), model=f"pid{self.made_in}",
                          usage=Usage(prompt_tokens=10, completion_tokens=3))


def test_the_target_can_run_in_the_workers(cluster, tmp_path: Path) -> None:
    """``ray_target: workers``: each worker makes the target model once and answers its own
    episodes' calls; the client layer here still journals and counts every one, and the run
    equals the same run with the target in this process."""
    skills = {}
    for where in ("driver", "workers"):
        folder = tmp_path / where
        folder.mkdir()
        cfg = toy_config(folder, model={"target": {"backend": "test_execution_ray:PidTarget"}},
                         train={"num_epochs": 1})
        counter = Counter()
        assert run(cfg, folder / "run", counter, [*RAY, f"execution.ray_target={where}"])
        skills[where] = (comparable(folder / "run"), _skills(folder / "run"), counter.completed)
        made = {e["completion"]["model"] for p in (folder / "run").rglob("calls.jsonl")
                for e in read_jsonl(p) if e["role"] == "target"}
        placed = [e for e in read_jsonl(folder / "run" / "events.jsonl")
                  if e["event"] == "execution"][0]
        if where == "driver":
            assert made == {f"pid{os.getpid()}"}
        else:
            assert placed["target"] == "workers"
            assert made and made <= {f"pid{pid}" for pid in placed["pids"]}
    assert skills["driver"] == skills["workers"]


@pytest.mark.parametrize("fraction", [0.1, 0.6])
def test_killed_under_ray_and_resumed_equals_uninterrupted(cluster, local_run, tmp_path: Path,
                                                           fraction: float) -> None:
    cfg, expected, calls = local_run
    out = tmp_path / "run"
    first = Counter(kill_at=1 + int(fraction * calls))
    assert run(cfg, out, first, RAY) is None  # killed mid-run, workers waiting for answers
    second = Counter()
    assert run(cfg, out, second, RAY) is not None
    assert comparable(out) == expected
    assert first.completed + second.completed == calls


def _tasks(n: int) -> list[Task]:
    return [Task(id=f"q{i}", prompt=f"Context:\nitem {i}: color: hue{i}\n\nQuestion: What is "
                 f"the color of item {i}?", reference={"answers": [f"hue{i}"]}) for i in range(n)]


class Echo:
    """Answers every question with the value in its context."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on

    def complete(self, request: ChatRequest) -> Completion:
        user = request.messages[-1].text()
        if self.fail_on and self.fail_on in user:
            raise FatalModelError("the endpoint refused the key")
        value = user.split("color: ")[1].split()[0]
        return Completion(text=f"Answer: {value}", usage=Usage(prompt_tokens=5,
                                                               completion_tokens=2))


def _env(tmp_path: Path):  # type: ignore[no-untyped-def]
    cfg = toy_config(tmp_path)
    return build_environment(load_config(cfg))


def test_a_model_failure_stops_the_rollout_and_is_never_scored(cluster, tmp_path: Path) -> None:
    env = _env(tmp_path)
    settings = ExecutionSettings(backend="ray", workers=2, ray_cpus_per_worker=0.5)
    with rollout_environment(env, settings) as remote:
        with pytest.raises(FatalModelError, match="refused the key"):
            rollout(remote, _tasks(4), "Answer.", Echo(fail_on="item 2:"), workers=2)
        # the workers are clean afterwards: the next batch runs and scores
        results = rollout(remote, _tasks(4), "Answer.", Echo(), workers=2)
    assert [r.hard for r in results] == [1.0] * 4
    assert [r.task_id for r in results] == ["q0", "q1", "q2", "q3"]


class Crashing:
    """An environment whose worker process dies on one task (stands for a segfault, an OOM
    kill or a lost node)."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner

    def tasks(self, split):  # type: ignore[no-untyped-def]
        return self.inner.tasks(split)

    def initial_skill(self) -> str:
        return str(self.inner.initial_skill())

    def rollout(self, task: Task, skill: str, model) -> RolloutResult:  # type: ignore[no-untyped-def]
        if task.id == "q1" and os.environ.get("SKILLGRAD_TEST_DRIVER") != str(os.getpid()):
            os._exit(3)
        return self.inner.rollout(task, skill, model)  # type: ignore[no-any-return]


def test_a_dead_worker_is_an_execution_error_and_is_replaced(cluster, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLGRAD_TEST_DRIVER", str(os.getpid()))
    env = Crashing(_env(tmp_path))
    settings = ExecutionSettings(backend="ray", workers=1, ray_cpus_per_worker=0.5)
    with rollout_environment(env, settings) as remote:
        with pytest.raises(ExecutionError, match="task 'q1' failed"):
            rollout(remote, _tasks(2), "Answer.", Echo())
        results = rollout(remote, [_tasks(1)[0]], "Answer.", Echo())
    assert results[0].hard == 1.0


class Unsendable:
    def __init__(self) -> None:
        self.reader = (line for line in ())  # a generator cannot be pickled

    def tasks(self, split):  # type: ignore[no-untyped-def]
        return []

    def initial_skill(self) -> str:
        return ""

    def rollout(self, task, skill, model):  # type: ignore[no-untyped-def]
        raise AssertionError("never reached")


def test_an_environment_that_cannot_be_sent_is_named(cluster) -> None:
    with pytest.raises(ConfigError, match="the Unsendable environment cannot be sent"):
        with rollout_environment(Unsendable(), ExecutionSettings(backend="ray")):
            pass


def test_ray_config_keys_are_checked(tmp_path: Path) -> None:
    cfg = toy_config(tmp_path)
    with pytest.raises(ConfigError, match="execution.backend"):
        load_config(cfg, ["execution.backend=dask"])
    with pytest.raises(ConfigError, match="execution.ray_address.*credential"):
        load_config(cfg, ["execution.ray_address=ray://admin:hunter2@head:10001"])
    data = yaml.safe_load(cfg.read_text())
    data["execution"] = {"ray_runtime_env": {"env_vars": {"OPENAI_API_KEY": "sk-x"}}}
    cfg.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="env_vars is not allowed"):
        load_config(cfg)


def test_the_cli_starts_and_stops_a_cluster_for_the_run(tmp_path: Path) -> None:
    """From the command line, with no Ray running: a local cluster is started for the run, the
    run trains to the end, and no Ray process outlives it."""
    cfg = toy_config(tmp_path, train={"num_epochs": 1, "steps_per_epoch": 1})
    args = [sys.executable, "-m", "skillgrad.cli", "train", str(cfg), "--out", str(tmp_path / "run")]
    for key in RAY:
        args += ["--set", key]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}  # the toy's scripted models
    before = _ray_daemons()
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "run" / "summary.json").exists()
    deadline = time.monotonic() + 20
    while _ray_daemons() - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _ray_daemons() - before == set(), "the run's Ray cluster outlived it"


def _ray_daemons() -> set[int]:
    """The pids of Ray's cluster daemons running now."""
    found = subprocess.run(["pgrep", "-f", "gcs_server|raylet"], capture_output=True, text=True)
    return {int(pid) for pid in found.stdout.split()}
