"""SkillOpt's configs, brought as they are: each benchmark config (our fixtures of SkillOpt
0.2.0's shipped files, every key of its schema) loads, ``skillgrad config check`` passes from a
SkillOpt checkout with data in SkillOpt's layouts, ``migrate`` round-trips to the same
fingerprint, and a one-step run goes through over SkillOpt's Azure OpenAI settings."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from skillgrad.config import load_config
from skillgrad.dotted import flatten
from skillgrad.errors import ConfigError
from skillgrad.testing.openai_server import FakeOpenAIServer
from skillgrad.trainer import build_trainer
from tests import toy
from tests.e2e import cli, one_line_error
from tests.skillopt_checkout import BENCHMARKS, ENVIRON, FIXTURES, SKILLOPT, make_checkout

KEY = "sk-test-skillopt-canary-5f3a"
NEEDS = {"alfworld": "alfworld", "spreadsheetbench": "openpyxl", "officeqa": "rank_bm25",
         "docvqa": None, "searchqa": None, "livemathematicianbench": None}
# The keys each shipped config sets that have an effect in SkillOpt and none here.
IGNORED = {"spreadsheetbench": {"env.mode", "env.exec_timeout"}}
ONE_STEP = ["train.num_epochs=1", "train.batch_size=2", "train.steps_per_epoch=1",
            "train.train_size=0", "evaluation.sel_env_num=1", "evaluation.test_env_num=1"]


def _available(benchmark: str) -> bool:
    module = NEEDS[benchmark]
    return module is None or importlib.util.find_spec(module) is not None


BENCH = [pytest.param(b, marks=pytest.mark.skipif(not _available(b), reason=f"needs {NEEDS[b]}"))
         for b in BENCHMARKS]


@pytest.fixture
def azure(monkeypatch: pytest.MonkeyPatch) -> None:
    """SkillOpt's environment for its default backend (openai_chat on Azure, CLI login)."""
    for name in ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AUTH_MODE", "TARGET_AZURE_OPENAI_API_KEY",
                 "OPTIMIZER_AZURE_OPENAI_API_KEY", "QWEN_CHAT_BASE_URL", "QWEN_CHAT_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example-resource.openai.azure.com")


def _in_checkout(tmp_path: Path, benchmark: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    config = make_checkout(tmp_path / "SkillOpt", benchmark)
    monkeypatch.chdir(tmp_path / "SkillOpt")
    for name, value in ENVIRON.get(benchmark, {}).items():
        monkeypatch.setenv(name, value)
    return config.relative_to(tmp_path / "SkillOpt")


def _respond(body: dict[str, Any]) -> str:
    """The optimizer's JSON from the toy; the target always says the same wrong thing."""
    return toy.http_responder(body) if body.get("response_format") else "ANSWER: 1"


# ----------------------------------------------------------------------------- the shipped configs


@pytest.mark.parametrize("benchmark", BENCH)
def test_each_shipped_config_passes_check_from_a_skillopt_checkout(
        benchmark: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    config = _in_checkout(tmp_path, benchmark, monkeypatch)
    proc = cli("config", "check", str(config), cwd=Path.cwd(), env=dict(ENVIRON.get(benchmark, {})))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.rstrip().endswith("ok")
    assert "SkillOpt's, read in skillgrad's keys" in out
    counts = next(line for line in out.splitlines() if line.startswith("env "))
    assert all(f"{s} 0 tasks" not in counts for s in ("train", "val", "test")), counts
    warned = {line.split(": ")[2] for line in out.splitlines() if line.startswith("warning: ")}
    assert warned == IGNORED.get(benchmark, set())
    # Every value says where it came from; the shipped skill path is read from the checkout.
    assert f"configs/{benchmark}/default.yaml:" in out
    skill = f"{Path.cwd()}/skillopt/envs/{benchmark}/skills/initial.md"
    assert json.dumps(skill) in out


@pytest.mark.parametrize("benchmark", BENCH)
def test_migrate_writes_skillgrads_keys_with_the_same_fingerprint(
        benchmark: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    config = _in_checkout(tmp_path, benchmark, monkeypatch)
    out = tmp_path / "migrated" / "config.yaml"
    out.parent.mkdir()
    proc = cli("config", "migrate", str(config), "--out", str(out), cwd=Path.cwd(),
               env=dict(ENVIRON.get(benchmark, {})))
    assert proc.returncode == 0, proc.stderr
    original, migrated = load_config(config), load_config(out)
    assert not migrated.skillopt and original.skillopt
    assert migrated.fingerprint() == original.fingerprint()
    assert migrated.resolved() == original.resolved()
    text = out.read_text()
    assert "# SkillOpt's model.target_backend" in text  # a comment on each mapped key
    assert "# not carried over:" in text and "model.codex_exec_path" in text
    monkeypatch.chdir(tmp_path)  # the migrated file no longer depends on the directory
    assert load_config(out).fingerprint() == original.fingerprint()


@pytest.mark.parametrize("benchmark", BENCH)
def test_a_one_step_run_goes_through_skillopts_azure_settings(
        benchmark: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    config = _in_checkout(tmp_path, benchmark, monkeypatch)
    with FakeOpenAIServer(responder=_respond, api_key=KEY) as server:
        monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", server.url.removesuffix("/v1"))
        monkeypatch.setenv("AZURE_OPENAI_AUTH_MODE", "api_key")
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
        extra = ["env.max_steps=3"] if benchmark == "alfworld" else []
        resolved = load_config(config, [*ONE_STEP, *extra])
        summary = build_trainer(resolved, tmp_path / "run").fit()
    assert summary["test"]["best"]["n"] == 1
    assert server.requests, "no call reached the endpoint"
    for body, headers in zip(server.requests, server.headers, strict=True):
        assert body["model"] == "gpt-5.5" and body["reasoning_effort"] == "medium"
        assert "temperature" not in body and "max_tokens" not in body
        assert body["max_completion_tokens"] == 16384
        assert headers["api-key"] == KEY
    written = "".join(p.read_text(errors="replace") for p in (tmp_path / "run").rglob("*")
                      if p.is_file())
    assert KEY not in written
    assert "AZURE_OPENAI_API_KEY" in (tmp_path / "run" / "config.yaml").read_text()


def test_train_on_a_skillopt_config_prints_its_warnings_and_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    config = _in_checkout(tmp_path, "spreadsheetbench", monkeypatch) if _available(
        "spreadsheetbench") else _in_checkout(tmp_path, "searchqa", monkeypatch)
    with FakeOpenAIServer(responder=_respond) as server:
        env = {"AZURE_OPENAI_ENDPOINT": server.url, "AZURE_OPENAI_AUTH_MODE": "openai_compatible"}
        sets = [a for s in ONE_STEP for a in ("--set", s)]
        proc = cli("train", str(config), "--out", str(tmp_path / "run"), *sets, cwd=Path.cwd(),
                   env=env)
    assert proc.returncode == 0, proc.stderr
    assert "note: evaluation.gate_test: skillgrad's honest gate" in proc.stderr
    if "spreadsheetbench" in str(config):
        assert "warning: " in proc.stderr and "env.mode:" in proc.stderr
    assert (tmp_path / "run" / "best_skill.md").exists()


# ----------------------------------------------------------------------------- every key, named


def test_every_key_of_skillopts_schema_is_mapped_or_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    folder = tmp_path / "SkillOpt"
    (folder / "configs").mkdir(parents=True)
    for name in ("full_schema.yaml", "_base_"):
        source = SKILLOPT / "configs" / name
        target = folder / "configs" / name
        if source.is_dir():
            target.mkdir()
            (target / "default.yaml").write_text((source / "default.yaml").read_text())
        else:
            target.write_text(source.read_text())
    (folder / "configs" / "searchqa_items.json").write_text(json.dumps(
        [{"id": f"q{i}", "question": f"What is {i}?", "context": "[DOC] [TLE] t [PAR] p",
          "answers": [str(i)]} for i in range(10)]))
    monkeypatch.chdir(folder / "configs")
    resolved = load_config(Path("full_schema.yaml"))
    written = {**flatten(yaml.safe_load((folder / "configs" / "_base_" / "default.yaml")
                                        .read_text())),
               **flatten(yaml.safe_load(Path("full_schema.yaml").read_text()))}
    written.pop("_base_")
    noted = {n.key for n in resolved.notes}
    used = " ".join(resolved.origins.values())
    unaccounted = [k for k in written
                   if k not in noted and k not in resolved.origins and f"SkillOpt's {k}" not in used]
    assert unaccounted == []
    flat = flatten(resolved.resolved())
    assert flat["env.split_ratio"] == [0.2, 0.1, 0.7]  # "2:1:7"
    assert flat["evaluation.gate_metric"] == "mixed" and flat["train.steps_per_epoch"] == 1
    assert flat["evaluation.sel_env_num"] is None and flat["train.train_size"] is None  # 0: all


def test_a_key_neither_project_has_is_still_an_error(azure: None, tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("_base_: " + str(SKILLOPT / "configs/searchqa/default.yaml") +
                      "\noptimizer:\n  learning_rat: 3\n")
    with pytest.raises(ConfigError, match=r"c.yaml: unknown key 'optimizer.learning_rat'"):
        load_config(config)
    config.write_text("_base_: " + str(SKILLOPT / "configs/searchqa/default.yaml") +
                      "\nmodel:\n  target_qwen_chat_temprature: 0.3\n")
    with pytest.raises(ConfigError, match=r"unknown key 'model.target_qwen_chat_temprature'"):
        load_config(config)


# ----------------------------------------------------------------------------- conventions


def _skillopt(tmp_path: Path, text: str, *overrides: str) -> Any:
    config = tmp_path / "so.yaml"
    config.write_text(f"_base_: {SKILLOPT / 'configs/_base_/default.yaml'}\n" + text)
    return load_config(config, list(overrides))


def _flat(resolved: Any) -> dict[str, Any]:
    return flatten(resolved.resolved())


def test_skillopts_conventions_are_honoured(tmp_path: Path, azure: None) -> None:
    (tmp_path / "items.json").write_text("[]")
    resolved = _skillopt(tmp_path, """
train: {seed: 7}
optimizer: {lr_control_mode: auto, skill_update_mode: rewrite, longitudinal_pair_policy: delta}
evaluation: {use_gate: 0, gate_metric: " Soft "}
env: {name: searchqa, split_seed: 0, split_ratio: "2:1:7", data_path: items.json, limit: 5,
      workers: 3, skill_init: ""}
""")
    flat = _flat(resolved)
    assert flat["env.split_seed"] == 7  # 0 is train.seed
    assert flat["env.skill_init"] is None  # "" is unset: the environment's own skill
    assert flat["env.data_path"] == str(Path.cwd() / "items.json")  # SkillOpt's directory
    assert flat["optimizer.lr_control_mode"] == "autonomous" and flat["optimizer.lr_ceiling"] == 999
    assert flat["optimizer.skill_update_mode"] == "rewrite_from_suggestions"
    assert flat["optimizer.longitudinal_pair_policy"] == "changed"
    assert flat["evaluation.use_gate"] is True and flat["evaluation.gate_metric"] == "soft"
    assert (flat["train.train_size"], flat["evaluation.sel_env_num"],
            flat["evaluation.test_env_num"]) == (5, 5, 5)  # limit 5: every split's first 5
    assert flat["execution.rollout_workers"] == 3
    assert flat["optimizer.max_tokens"] == 16384 and flat["env.max_tokens"] == 16384
    lines = [n.line() for n in resolved.notes]
    assert any("env.split_mode" in line and "other splits" in line for line in lines)


def test_schedulers_and_modes_keep_skillopts_meaning(tmp_path: Path, azure: None) -> None:
    env = "env: {name: searchqa, split_mode: split_dir, split_dir: x}\n"
    free = _flat(_skillopt(tmp_path, "optimizer: {lr_scheduler: autonomous}\n" + env))
    assert free["optimizer.lr_control_mode"] == "none"  # no budget: every merged edit
    fixed = _flat(_skillopt(tmp_path, "optimizer: {lr_control_mode: none}\n" + env))
    assert fixed["optimizer.lr_control_mode"] == "fixed"  # SkillOpt budgets none like fixed
    assert _flat(_skillopt(tmp_path, "optimizer: {skill_aware_consolidate_threshold: 0}\n" + env))[
        "optimizer.skill_aware_consolidate_threshold"] == 0


def test_skillopts_legacy_flat_configs_load(tmp_path: Path, azure: None) -> None:
    config = tmp_path / "flat.yaml"
    config.write_text(f"env: searchqa\nsplit_mode: split_dir\nsplit_dir: {FIXTURES}/searchqa\n"
                      "edit_budget: 3\nmin_edit_budget: 1\nbatch_size: 4\nsel_env_num: 0\n"
                      "target_model: my-deployment\noptimizer_model: gpt-5.5\nworkers: 2\n"
                      "context_chars: 900\n")
    resolved = load_config(config)
    flat = flatten(resolved.resolved())
    assert resolved.skillopt and flat["env.name"] == "searchqa"
    assert (flat["optimizer.learning_rate"], flat["optimizer.min_learning_rate"]) == (3, 1)
    assert flat["train.batch_size"] == 4 and flat["evaluation.sel_env_num"] is None
    assert flat["model.target.model"] == "my-deployment"
    assert flat["execution.rollout_workers"] == 2 and flat["env.context_chars"] == 900
    assert resolved.origin("optimizer.learning_rate") == f"{config}:4 (as SkillOpt's flat edit_budget)"
    config.write_text("env: searchqa\nsplit_mode: split_dir\nsplit_dir: x\nbatch_sise: 4\n")
    with pytest.raises(ConfigError, match=r"unknown key 'env.batch_sise'"):
        load_config(config)


def test_a_skillopt_key_under_another_environment_is_unknown(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("env: {name: qa, data_path: d.jsonl, workers: 4}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'env.workers'"):
        load_config(config)


def test_a_native_config_is_not_translated(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("env: {name: qa, skill_init: ''}\n")
    assert load_config(config).config.env.skill_init == Path("")  # no SkillOpt convention
    config.write_text("evaluation: {sel_env_num: 0}\nenv: {name: qa, data_path: d.jsonl}\n")
    resolved = load_config(config)
    assert not resolved.skillopt and resolved.notes == ()
    assert resolved.config.evaluation.sel_env_num is None  # 0 = all holds everywhere


# ----------------------------------------------------------------------------- models


ENV = "env: {name: searchqa, split_mode: split_dir, split_dir: x}\n"


def test_per_role_keys_beat_shared_ones_and_config_beats_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    monkeypatch.setenv("TARGET_AZURE_OPENAI_ENDPOINT", "https://role-env.openai.azure.com")
    monkeypatch.setenv("TARGET_AZURE_OPENAI_API_KEY", "x")
    resolved = _skillopt(tmp_path, """
model:
  azure_openai_endpoint: https://shared.openai.azure.com
  optimizer_azure_openai_endpoint: https://optimizer.openai.azure.com
  azure_openai_auth_mode: api_key
""" + ENV)
    flat = _flat(resolved)
    assert flat["model.optimizer.azure_endpoint"] == "https://optimizer.openai.azure.com"
    assert flat["model.target.azure_endpoint"] == "https://shared.openai.azure.com"
    assert flat["model.target.api_key_env"] == "TARGET_AZURE_OPENAI_API_KEY"
    assert flat["model.optimizer.api_key_env"] == "AZURE_OPENAI_API_KEY"
    assert flat["model.target.azure_login"] == "api_key"
    assert resolved.origin("model.target.api_key_env") == "$TARGET_AZURE_OPENAI_API_KEY"


def test_qwen_and_minimax_roles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                azure: None) -> None:
    monkeypatch.setenv("QWEN_CHAT_BASE_URL", "http://127.0.0.1:8001/v1")
    monkeypatch.setenv("QWEN_CHAT_API_KEY", "local")
    flat = _flat(_skillopt(tmp_path, """
model:
  optimizer_backend: qwen_chat
  target_backend: minimax_chat
  optimizer_qwen_chat_temperature: ""
  qwen_chat_enable_thinking: true
""" + ENV))
    assert flat["model.optimizer.base_url"] == "http://127.0.0.1:8001/v1"
    assert flat["model.optimizer.model"] == "Qwen/Qwen3.5-4B"  # SkillOpt swaps its gpt-5.5
    assert flat["model.optimizer.api_key_env"] == "QWEN_CHAT_API_KEY"
    assert flat["model.optimizer.send_temperature"] is False  # "" omits the temperature
    assert flat["model.optimizer.max_tokens_cap"] == 8000
    assert flat["model.optimizer.extra_body.chat_template_kwargs.enable_thinking"] is True
    assert flat["model.target.base_url"] == "https://api.minimax.io/v1"
    assert flat["model.target.model"] == "MiniMax-M2.7"  # minimax_model beats model.target
    assert flat["model.target.temperature"] == 0.7
    # SkillOpt's current main sends MiniMax's own top-level thinking field; M2 always thinks.
    assert flat["model.target.extra_body.thinking.type"] == "adaptive"


def test_an_openai_compatible_endpoint_through_openai_chat(
        tmp_path: Path, azure: None) -> None:
    flat = _flat(_skillopt(tmp_path, """
model:
  azure_openai_endpoint: http://127.0.0.1:9000/v1
  azure_openai_auth_mode: openai_compatible
  target: my-model
""" + ENV))
    assert flat["model.target.base_url"] == "http://127.0.0.1:9000/v1"
    assert flat["model.target.azure_endpoint"] is None and flat["model.target.model"] == "my-model"


@pytest.mark.parametrize(("text", "match"), [
    ("model: {target_azure_openai_api_key: " + KEY + "}\n",
     r"model.target_azure_openai_api_key: skillgrad reads API keys only from environment"),
    ("model: {target_backend: codex_exec}\n",  # an agent CLI: its local model is not named
     r"model.target_backend: SkillOpt's codex_exec runs codex against its vendor's hosted"),
    ("model: {optimizer_backend: claude_code_exec}\n", r"not a optimizer backend of SkillOpt 0.2.0"),
    ("model: {optimizer_backend: minimax_chat}\n",  # MiniMax's model follows the target's
     r"asks MiniMax for its one MiniMax deployment, here the target's model \('gpt-5.5'\)"),
    ("model: {target_backend: grok_chat}\n", r"'grok_chat' is not a target backend"),
    ("model: {target: gpt-5.2-codex}\n", r"Responses API"),
    ("model: {azure_openai_auth_mode: kerberos}\n", r"auth mode 'kerberos'"),
    ("model: {reasoning_effort: max}\n", r"'max' is not a reasoning effort"),
    ("model: {target: {backend: scripted}}\n", r"a skillgrad role section next to SkillOpt's"),
    ("env: {name: searchqa, split_ratio: '2:1'}\n", r"env.split_ratio: expected \"train:val:test\""),
    ("env: {name: officeqa, search_mode: custom_search}\n", r"searches a web service"),
    ("env: {name: ''}\n", r"env.name: a SkillOpt config names its benchmark"),
])
def test_values_that_cannot_be_honoured_are_errors_naming_the_key(
        text: str, match: str, tmp_path: Path, azure: None) -> None:
    body = text if "env:" in text else text + ENV
    with pytest.raises(ConfigError, match=match) as caught:
        _skillopt(tmp_path, body)
    assert KEY not in str(caught.value) and "\n" not in str(caught.value)


def test_no_endpoint_names_the_keys_and_variables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    monkeypatch.delenv("OPTIMIZER_AZURE_OPENAI_ENDPOINT", raising=False)
    with pytest.raises(ConfigError, match=r"default.yaml:\d+: model.optimizer_azure_openai_endpoint: "
                       r"no endpoint for the optimizer.*AZURE_OPENAI_ENDPOINT"):
        _skillopt(tmp_path, ENV)


# ----------------------------------------------------------------------------- the commands


def test_check_shows_origins_masks_credentials_and_exits_2_on_error(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "question": f"q{i}?", "answer": "a"}) + "\n"
                            for i in range(10)))
    config = tmp_path / "c.yaml"
    config.write_text("train:\n  batch_size: 3\nmodel:\n  target:\n    backend: openai_compatible"
                      "\n    base_url: http://127.0.0.1:9/v1\n    model: m\n    extra_headers:\n"
                      f"      Authorization: Bearer {KEY}\nenv:\n  name: qa\n  data_path: d.jsonl\n")
    proc = cli("config", "check", str(config), "--set", "train.seed=5", "--all", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith("  ")}
    assert lines["train.batch_size"].endswith(f"# {config}:2")
    assert lines["train.seed"].endswith("# --set") and lines["train.num_epochs"].endswith("# default")
    assert KEY not in proc.stdout and "skillgrad's" in proc.stdout.splitlines()[0]
    assert "env qa: train 6 tasks, val 2 tasks, test 2 tasks" in proc.stdout
    data.unlink()
    proc = cli("config", "check", str(config), cwd=tmp_path)
    assert "d.jsonl" in one_line_error(proc, 2)


def test_migrate_refuses_a_native_config_and_an_existing_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    native = tmp_path / "n.yaml"
    native.write_text("env: {name: qa, data_path: d.jsonl}\n")
    assert "nothing to migrate" in one_line_error(
        cli("config", "migrate", str(native), "--out", str(tmp_path / "o.yaml"), cwd=tmp_path))
    config = _in_checkout(tmp_path, "searchqa", monkeypatch)
    taken = tmp_path / "taken.yaml"
    taken.write_text("keep me\n")
    error = one_line_error(cli("config", "migrate", str(config), "--out", str(taken),
                               cwd=Path.cwd()))
    assert "exists" in error and taken.read_text() == "keep me\n"
    assert cli("config", "migrate", str(config), "--out", str(taken), "--force",
               cwd=Path.cwd()).returncode == 0
