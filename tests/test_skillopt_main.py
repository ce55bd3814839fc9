"""SkillOpt's current configs, as its main branch ships them (our byte-for-byte copy in
``fixtures/skillopt/current``, commit bdfdc30): each loads, or refuses with its one line where it
needs what only the user can give; and the keys its base config gained since 0.2.0 (the Qwen
thinking modes, the MiniMax region) and the backends it now routes otherwise (a ``minimax_chat``
optimizer, the generic ``openai_compatible``) are translated with SkillOpt's meaning, down to
the request bodies."""

from __future__ import annotations

import importlib.util
import shutil
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
from tests.skillopt_checkout import BENCHMARKS, ENVIRON, SKILLOPT, make_checkout

CURRENT = SKILLOPT / "current"
CONFIGS = sorted(p.relative_to(CURRENT).as_posix() for p in (CURRENT / "configs").rglob("*.yaml"))
MIXINS = ("configs/_base_/default.yaml", "configs/features/soft_gate.yaml")
KEY = "sk-test-skillopt-main-7c1d"
NEEDS = {"alfworld": "alfworld", "spreadsheetbench": "openpyxl", "officeqa": "rank_bm25",
         "docvqa": None, "searchqa": None, "livemathematicianbench": None}
# The keys each shipped config sets that have an effect in SkillOpt and none here.
IGNORED = {"spreadsheetbench": {"env.mode", "env.exec_timeout"}}
ONE_STEP = ["train.num_epochs=1", "train.batch_size=2", "train.steps_per_epoch=1",
            "train.train_size=0", "evaluation.sel_env_num=1", "evaluation.test_env_num=1"]
ENV = "env: {name: searchqa, split_mode: split_dir, split_dir: x}\n"
VARIABLES = ("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AUTH_MODE", "AZURE_OPENAI_ENDPOINT",
             "OPTIMIZER_AZURE_OPENAI_ENDPOINT", "TARGET_AZURE_OPENAI_ENDPOINT",
             *(f"{scope}QWEN_CHAT_{item}" for scope in ("", "OPTIMIZER_", "TARGET_")
               for item in ("BASE_URL", "API_KEY", "THINKING_MODE", "ENABLE_THINKING",
                            "USE_MAX_COMPLETION_TOKENS")),
             *(f"MINIMAX_{item}" for item in ("REGION", "BASE_URL", "API_KEY", "TEMPERATURE",
                                              "MAX_TOKENS", "ENABLE_THINKING",
                                              "TIMEOUT_SECONDS")),
             *(f"{scope}OPENAI_COMPATIBLE_{item}" for scope in ("", "OPTIMIZER_", "TARGET_")
               for item in ("BASE_URL", "API_KEY", "TEMPERATURE", "MAX_TOKENS",
                            "TIMEOUT_SECONDS")))


def _available(benchmark: str) -> bool:
    module = NEEDS[benchmark]
    return module is None or importlib.util.find_spec(module) is not None


BENCH = [pytest.param(b, marks=pytest.mark.skipif(not _available(b), reason=f"needs {NEEDS[b]}"))
         for b in BENCHMARKS]


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch) -> None:
    """No backend variable of the machine running the tests leaks into them."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def azure(monkeypatch: pytest.MonkeyPatch) -> None:
    """What SkillOpt's default backend (openai_chat on Azure, CLI login) needs: an endpoint."""
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example-resource.openai.azure.com")


def _in_checkout(tmp_path: Path, benchmark: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A SkillOpt checkout with its current configs and our data; the config's path in it."""
    folder = tmp_path / "SkillOpt"
    make_checkout(folder, benchmark)
    shutil.rmtree(folder / "configs")
    shutil.copytree(CURRENT / "configs", folder / "configs")
    monkeypatch.chdir(folder)
    for name, value in ENVIRON.get(benchmark, {}).items():
        monkeypatch.setenv(name, value)
    return Path("configs") / benchmark / "default.yaml"


def _over(tmp_path: Path, text: str, *overrides: str, base: str = "searchqa") -> Any:
    config = tmp_path / "so.yaml"
    config.write_text(f"_base_: {CURRENT / 'configs' / base / 'default.yaml'}\n{text}")
    return load_config(config, list(overrides))


def _flat(resolved: Any) -> dict[str, Any]:
    return flatten(resolved.resolved())


def _role(resolved: Any, role: str) -> dict[str, Any]:
    return dict(resolved.raw["model"][role])


def _notes(resolved: Any, kind: str) -> dict[str, str]:
    return {n.key: n.reason for n in resolved.notes if n.kind == kind}


# ----------------------------------------------------------------------------- every config


def test_the_fixture_is_every_config_skillopt_ships() -> None:
    assert CONFIGS == sorted([f"configs/{b}/default.yaml" for b in BENCHMARKS] + list(MIXINS))
    assert (CURRENT / "LICENSE").read_text().startswith("MIT License\n\nCopyright (c) 2026 "
                                                        "Microsoft Corporation")
    base = yaml.safe_load((CURRENT / "configs" / "_base_" / "default.yaml").read_text())
    assert {"qwen_chat_thinking_mode", "target_qwen_chat_thinking_mode",
            "minimax_region"} <= set(base["model"])


@pytest.mark.parametrize("benchmark", BENCH)
def test_each_current_config_passes_check_from_a_skillopt_checkout(
        benchmark: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    config = _in_checkout(tmp_path, benchmark, monkeypatch)
    proc = cli("config", "check", str(config), cwd=Path.cwd())
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.rstrip().endswith("ok") and "unknown key" not in out + proc.stderr
    counts = next(line for line in out.splitlines() if line.startswith("env "))
    assert all(f"{s} 0 tasks" not in counts for s in ("train", "val", "test")), counts
    warned = {line.split(": ")[2] for line in out.splitlines() if line.startswith("warning: ")}
    assert warned == IGNORED.get(benchmark, set())
    inert = next(line for line in out.splitlines() if "have no effect in SkillOpt" in line)
    for key in ("model.qwen_chat_thinking_mode", "model.target_qwen_chat_thinking_mode",
                "model.minimax_region"):  # its new keys, named: no Qwen or MiniMax role here
        assert key in inert


@pytest.mark.parametrize("benchmark", BENCH)
def test_migrate_keeps_the_fingerprint_of_each_current_config(
        benchmark: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    config = _in_checkout(tmp_path, benchmark, monkeypatch)
    out = tmp_path / "migrated.yaml"
    proc = cli("config", "migrate", str(config), "--out", str(out), cwd=Path.cwd())
    assert proc.returncode == 0, proc.stderr
    assert load_config(out).fingerprint() == load_config(config).fingerprint()
    assert "model.minimax_region" in out.read_text()  # among the keys not carried over


@pytest.mark.parametrize("name", CONFIGS)
def test_without_an_endpoint_each_refuses_with_one_line(name: str) -> None:
    """SkillOpt's default backend is Azure OpenAI with no endpoint in the file: the user's."""
    with pytest.raises(ConfigError, match=r"_base_/default.yaml:44: "
                       r"model.optimizer_azure_openai_endpoint: no endpoint for the optimizer: "
                       r"set it .* or export OPTIMIZER_AZURE_OPENAI_ENDPOINT or "
                       r"AZURE_OPENAI_ENDPOINT$") as caught:
        load_config(CURRENT / name)
    assert "\n" not in str(caught.value)


def test_check_without_an_endpoint_exits_2_on_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _in_checkout(tmp_path, "searchqa", monkeypatch)
    error = one_line_error(cli("config", "check", str(config), cwd=Path.cwd()))
    assert "model.optimizer_azure_openai_endpoint: no endpoint for the optimizer" in error


@pytest.mark.parametrize("name", MIXINS)
def test_the_base_and_the_feature_file_name_no_benchmark(name: str, azure: None) -> None:
    with pytest.raises(ConfigError, match=r"env.name: a SkillOpt config names its benchmark"):
        load_config(CURRENT / name)


def test_the_soft_gate_feature_loads_under_a_benchmark(tmp_path: Path, azure: None) -> None:
    config = tmp_path / "gate.yaml"
    config.write_text(f"_base_: {CURRENT / 'configs/features/soft_gate.yaml'}\n{ENV}")
    flat = _flat(load_config(config))
    assert (flat["evaluation.gate_metric"], flat["evaluation.gate_mixed_weight"]) == ("soft", 0.5)


@pytest.mark.parametrize("backends", [
    "", "backend: qwen_chat, optimizer_backend: qwen_chat",
    "optimizer_backend: minimax_chat, target_backend: minimax_chat",
    "backend: openai_compatible"])
def test_every_key_of_the_current_base_is_mapped_or_named(
        backends: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", "http://127.0.0.1:8000/v1")
    resolved = _over(tmp_path, f"model: {{{backends}}}\n" + ENV)
    written = {**flatten(yaml.safe_load((CURRENT / "configs/_base_/default.yaml").read_text())),
               **flatten(yaml.safe_load((CURRENT / "configs/searchqa/default.yaml").read_text()))}
    written.pop("_base_")
    noted = {n.key for n in resolved.notes}
    used = " ".join(resolved.origins.values())
    assert [k for k in written if k not in noted and k not in resolved.origins
            and f"SkillOpt's {k}" not in used] == []


# ----------------------------------------------------------------------------- qwen_chat


OFF, ON = {"chat_template_kwargs": {"enable_thinking": False}}, \
    {"chat_template_kwargs": {"enable_thinking": True}}


@pytest.mark.parametrize(("keys", "env", "optimizer", "target"), [
    ("target_qwen_chat_thinking_mode: disabled", {}, {}, OFF),
    ("optimizer_qwen_chat_thinking_mode: enabled, target_qwen_chat_thinking_mode: Disabled",
     {}, ON, OFF),
    ("target_qwen_chat_thinking_mode: server-default", {}, {}, {}),  # omitted: the server's
    ("target_qwen_chat_thinking_mode: false", {}, {}, OFF),  # YAML false is disabled
    ("target_qwen_chat_thinking_mode: 'on'", {"QWEN_CHAT_THINKING_MODE": "disabled"}, OFF, ON),
    ("target_qwen_chat_thinking_mode: enabled, qwen_chat_enable_thinking: true", {}, ON, ON),
    ("qwen_chat_enable_thinking: false, target_qwen_chat_thinking_mode: server_default", {},
     {}, {}),  # legacy false omits the field, as server_default does: they agree
])
def test_qwen_thinking_modes_go_on_the_wire_as_skillopt_sends_them(
        keys: str, env: dict[str, str], optimizer: dict[str, Any], target: dict[str, Any],
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    resolved = _over(tmp_path, "model: {backend: qwen_chat, optimizer_backend: qwen_chat, "
                     f"{keys}}}\n" + ENV)
    assert (_role(resolved, "optimizer").get("extra_body", {}),
            _role(resolved, "target").get("extra_body", {})) == (optimizer, target)
    flat = _flat(resolved)
    assert flat["model.target.model"] == "Qwen/Qwen3.5-4B"
    assert flat["model.target.base_url"] == "http://localhost:8000/v1"
    if "server" in keys and "false" not in keys:
        assert "model.target_qwen_chat_thinking_mode" in _notes(resolved, "mapped")


def test_an_empty_per_role_mode_is_unset_and_where_skillopt_differs_a_note_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    """SkillOpt's trainer hands the empty per-role keys of its default.yaml over the shared
    key, the legacy key and the environment (each an explicit server_default there); its docs
    call them overrides of the shared key. skillgrad follows the docs and says where."""
    shared = _over(tmp_path, "model: {target_backend: qwen_chat, "
                   "qwen_chat_thinking_mode: disabled}\n" + ENV)
    assert _role(shared, "target")["extra_body"] == OFF
    differs = _notes(shared, "differs")
    assert "SkillOpt's trainer passes this empty key over qwen_chat_thinking_mode and sends no " \
           "chat_template_kwargs" in differs["model.target_qwen_chat_thinking_mode"]
    assert shared.origin("model.target.extra_body").endswith(
        "(as SkillOpt's model.qwen_chat_thinking_mode)")
    legacy = _over(tmp_path, "model: {target_backend: qwen_chat, "
                   "target_qwen_chat_enable_thinking: true}\n" + ENV)
    assert _role(legacy, "target")["extra_body"] == ON
    assert "SkillOpt stops on this empty thinking mode" in _notes(legacy, "differs")[
        "model.target_qwen_chat_thinking_mode"]
    monkeypatch.setenv("TARGET_QWEN_CHAT_THINKING_MODE", "enabled")
    env = _over(tmp_path, "model: {target_backend: qwen_chat}\n" + ENV)
    assert _role(env, "target")["extra_body"] == ON
    assert env.origin("model.target.extra_body") == "$TARGET_QWEN_CHAT_THINKING_MODE"
    assert "model.target_qwen_chat_thinking_mode" in _notes(env, "differs")


def test_a_config_without_the_new_keys_reads_thinking_as_before(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    old = SKILLOPT / "configs" / "_base_" / "default.yaml"  # 0.2.0's base: no thinking modes
    config = tmp_path / "old.yaml"
    config.write_text(f"_base_: {old}\nmodel: {{target_backend: qwen_chat, "
                      f"qwen_chat_enable_thinking: true}}\n{ENV}")
    resolved = load_config(config)
    assert _role(resolved, "target")["extra_body"] == ON
    assert not [k for k in _notes(resolved, "differs") if "thinking" in k]
    config.write_text(f"_base_: {old}\nmodel: {{target_backend: qwen_chat}}\n{ENV}")
    monkeypatch.setenv("QWEN_CHAT_THINKING_MODE", "disabled")
    assert _role(load_config(config), "target")["extra_body"] == OFF


@pytest.mark.parametrize(("keys", "env", "match"), [
    ("target_qwen_chat_thinking_mode: fasle", {},
     r"so.yaml:2: model.target_qwen_chat_thinking_mode: Qwen thinking mode 'fasle' \(allowed: "
     r"server_default, enabled, disabled\)"),
    ("target_qwen_chat_thinking_mode: disabled, qwen_chat_enable_thinking: true", {},
     r"model.target_qwen_chat_thinking_mode: disabled disagrees with "
     r"model.qwen_chat_enable_thinking: True \(that is enabled\), as SkillOpt refuses too"),
    ("qwen_chat_enable_thinking: false, qwen_chat_thinking_mode: disabled", {},
     r"model.qwen_chat_thinking_mode: disabled disagrees"),  # legacy false is server_default
    ("", {"QWEN_CHAT_THINKING_MODE": "maybe"}, r"^\$QWEN_CHAT_THINKING_MODE: .*'maybe'"),
])
def test_a_thinking_mode_skillopt_refuses_is_one_line(
        keys: str, env: dict[str, str], match: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = tmp_path / "so.yaml"
    config.write_text(f"_base_: {SKILLOPT / 'configs/_base_/default.yaml'}\n"
                      f"model: {{target_backend: qwen_chat, {keys}}}\n{ENV}")
    with pytest.raises(ConfigError, match=match) as caught:
        load_config(config)
    assert "\n" not in str(caught.value)


# ----------------------------------------------------------------------------- minimax_chat


@pytest.mark.parametrize(("keys", "env", "url", "origin"), [
    ("", {}, "https://api.minimax.io/v1", "SkillOpt's default region global_en"),
    ("minimax_region: cn_zh", {}, "https://api.minimaxi.com/v1",
     "(as SkillOpt's model.minimax_region)"),
    ("minimax_region: CN-ZH", {}, "https://api.minimaxi.com/v1",
     "(as SkillOpt's model.minimax_region)"),
    ("", {"MINIMAX_REGION": "cn_zh"}, "https://api.minimaxi.com/v1", "$MINIMAX_REGION"),
    ("minimax_region: cn_zh, minimax_base_url: 'http://127.0.0.1:9/v1'", {},
     "http://127.0.0.1:9/v1", "(as SkillOpt's model.minimax_base_url)"),
    ("minimax_region: cn_zh", {"MINIMAX_BASE_URL": "http://127.0.0.1:9/v1"},
     "http://127.0.0.1:9/v1", "$MINIMAX_BASE_URL"),  # a base URL beats the region
])
def test_the_minimax_region_picks_the_url_unless_one_is_given(
        keys: str, env: dict[str, str], url: str, origin: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    resolved = _over(tmp_path, f"model: {{target_backend: minimax_chat, {keys}}}\n" + ENV)
    assert _role(resolved, "target")["base_url"] == url
    assert resolved.origin("model.target.base_url").endswith(origin)
    if "base_url" in keys or env.get("MINIMAX_BASE_URL"):
        assert "names the URL" in _notes(resolved, "inert")["model.minimax_region"]


def test_minimax_thinking_is_its_own_top_level_field(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    default = _role(_over(tmp_path, "model: {target_backend: minimax_chat}\n" + ENV), "target")
    assert default["model"] == "MiniMax-M3" and default["extra_body"] == {
        "thinking": {"type": "disabled"}}  # minimax_enable_thinking: "false"
    assert (default["temperature"], default["max_tokens_cap"], default["timeout"]) == (
        0.7, 8000, 300.0)
    on = _role(_over(tmp_path, "model: {target_backend: minimax_chat, "
                     "minimax_enable_thinking: 'true'}\n" + ENV), "target")
    assert on["extra_body"] == {"thinking": {"type": "adaptive"}}
    m2 = _over(tmp_path, "model: {target_backend: minimax_chat, minimax_model: MiniMax-M2.7}\n"
               + ENV)
    assert _role(m2, "target")["extra_body"] == {"thinking": {"type": "adaptive"}}
    assert "always thinks" in _notes(m2, "inert")["model.minimax_enable_thinking"]
    # SkillOpt hands no per-call limit to MiniMax: its own timeout stays.
    assert "minimax_chat" in _notes(m2, "inert")["env.exec_timeout"]


def test_a_minimax_optimizer_calls_minimax_with_the_one_minimax_model(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    monkeypatch.setenv("MINIMAX_API_KEY", KEY)
    both = _over(tmp_path, "model: {optimizer_backend: minimax_chat, target_backend: "
                 "minimax_chat, optimizer: my-optimizer, minimax_model: MiniMax-M2.7}\n" + ENV)
    optimizer = _role(both, "optimizer")
    assert (optimizer["backend"], optimizer["base_url"], optimizer["model"],
            optimizer["api_key_env"]) == ("openai_compatible", "https://api.minimax.io/v1",
                                          "MiniMax-M2.7", "MINIMAX_API_KEY")
    assert "one MiniMax deployment" in _notes(both, "inert")["model.optimizer"]
    named = _over(tmp_path, "model: {optimizer_backend: minimax_chat, target: MiniMax-M3, "
                  "azure_openai_auth_mode: openai_compatible, azure_openai_endpoint: "
                  "'http://127.0.0.1:7/v1'}\n" + ENV)  # the target's name is MiniMax's
    assert _role(named, "optimizer")["model"] == "MiniMax-M3"
    assert named.origin("model.optimizer.model").endswith("(as SkillOpt's model.target)")
    with pytest.raises(ConfigError, match=r"so.yaml:2: model.optimizer_backend: SkillOpt's "
                       r"minimax_chat optimizer asks MiniMax .* \('gpt-5.5'\), which MiniMax "
                       r"does not serve; make the target minimax_chat too"):
        _over(tmp_path, "model: {optimizer_backend: minimax_chat}\n" + ENV)
    with pytest.raises(ConfigError, match=r"model.minimax_region: MiniMax region 'eu' "
                       r"\(allowed: global_en, cn_zh\)"):
        _over(tmp_path, "model: {target_backend: minimax_chat, minimax_region: eu}\n" + ENV)


# ----------------------------------------------------------------------------- openai_compatible


def test_skillopts_openai_compatible_backend_is_read_from_its_variables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, azure: None) -> None:
    monkeypatch.setenv("OPENAI_COMPATIBLE_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("TARGET_OPENAI_COMPATIBLE_BASE_URL", "http://127.0.0.1:8001/v1")
    monkeypatch.setenv("OPENAI_COMPATIBLE_API_KEY", KEY)
    monkeypatch.setenv("OPTIMIZER_OPENAI_COMPATIBLE_TEMPERATURE", "0.2")
    monkeypatch.setenv("TARGET_OPENAI_COMPATIBLE_MAX_TOKENS", "4096")
    monkeypatch.setenv("OPENAI_COMPATIBLE_TIMEOUT_SECONDS", "90")
    resolved = _over(tmp_path, "model: {backend: openai_compatible, optimizer: ''}\n" + ENV)
    optimizer, target = _role(resolved, "optimizer"), _role(resolved, "target")
    assert optimizer == {"backend": "openai_compatible", "model": "gpt-4o-mini",  # "" is that
                         "base_url": "http://127.0.0.1:8000/v1",
                         "api_key_env": "OPENAI_COMPATIBLE_API_KEY", "temperature": 0.2,
                         "max_tokens_cap": 8000, "timeout": 90.0}
    assert target["model"] == "gpt-5.5"  # sent as named: no default is swapped in
    assert (target["base_url"], target["send_temperature"], target["max_tokens_cap"]) == (
        "http://127.0.0.1:8001/v1", False, 4096)
    assert target["timeout"] == 120  # searchqa's exec_timeout limits each target call
    assert resolved.origin("model.target.base_url") == "$TARGET_OPENAI_COMPATIBLE_BASE_URL"
    assert KEY not in str(resolved.raw)


def test_openai_compatible_with_neither_a_server_nor_a_key_is_one_line(
        tmp_path: Path, azure: None) -> None:
    with pytest.raises(ConfigError, match=r"so.yaml:2: model.target_backend: SkillOpt's "
                       r"openai_compatible sends the target's calls to https://api.openai.com/v1"
                       r" unless TARGET_OPENAI_COMPATIBLE_BASE_URL or OPENAI_COMPATIBLE_BASE_URL"
                       ) as caught:
        _over(tmp_path, "model: {target_backend: compat}\n" + ENV)
    assert "\n" not in str(caught.value)


# ----------------------------------------------------------------------------- on the wire


def _respond(body: dict[str, Any]) -> str:
    return toy.http_responder(body) if body.get("response_format") else "ANSWER: 1"


@pytest.mark.parametrize("backend", ["openai_compatible", "minimax_chat", "qwen_chat"])
def test_a_one_step_run_sends_what_skillopt_sends(
        backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _in_checkout(tmp_path, "searchqa", monkeypatch)
    sets = {"openai_compatible": ["model.backend=openai_compatible"],
            "minimax_chat": ["model.optimizer_backend=minimax_chat",
                             "model.target_backend=minimax_chat"],
            "qwen_chat": ["model.optimizer_backend=qwen_chat", "model.target_backend=qwen_chat",
                          "model.optimizer_qwen_chat_thinking_mode=enabled",
                          "model.target_qwen_chat_thinking_mode=disabled"]}[backend]
    with FakeOpenAIServer(responder=_respond, api_key=KEY) as server:
        variable = {"openai_compatible": "OPENAI_COMPATIBLE", "minimax_chat": "MINIMAX",
                    "qwen_chat": "QWEN_CHAT"}[backend]
        monkeypatch.setenv(f"{variable}_BASE_URL", server.url)
        monkeypatch.setenv(f"{variable}_API_KEY", KEY)
        summary = build_trainer(load_config(config, [*ONE_STEP, *sets]), tmp_path / "run").fit()
    assert summary["test"]["best"]["n"] == 1
    assert server.requests, "no call reached the endpoint"
    for body, headers in zip(server.requests, server.headers, strict=True):
        optimizer = bool(body.get("response_format"))
        assert headers["authorization"] == f"Bearer {KEY}"
        assert "reasoning_effort" not in body and "max_completion_tokens" not in body
        assert body["max_tokens"] == 8000  # SkillOpt's cap below the 16384 asked for
        if backend == "openai_compatible":
            assert body["model"] == "gpt-5.5" and "temperature" not in body
        elif backend == "minimax_chat":
            assert body["model"] == "MiniMax-M3" and body["temperature"] == 0.7
            assert body["thinking"] == {"type": "disabled"}
            assert "chat_template_kwargs" not in body
        else:
            assert body["model"] == "Qwen/Qwen3.5-4B"
            assert body["chat_template_kwargs"] == {"enable_thinking": optimizer}
    written = "".join(p.read_text(errors="replace") for p in (tmp_path / "run").rglob("*")
                      if p.is_file())
    assert KEY not in written
