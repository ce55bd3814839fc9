"""Config loading: defaults, ``_base_`` inheritance, ``--set`` overrides, strict validation."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from skillgrad.config import (
    SMALL_OPTIMIZER_GRADIENT,
    GradientSection,
    ResolvedConfig,
    SkillgradConfig,
    load_config,
)
from skillgrad.envs.base import EnvCommon
from skillgrad.envs.qa import QAEnvironment, QAOptions
from skillgrad.errors import ConfigError

MINIMAL = {
    "env": {"name": "qa", "data_path": "data.jsonl"},
    "model": {
        "target": {"backend": "scripted", "default": "x"},
        "optimizer": {"backend": "scripted", "default": "{}"},
    },
}


def write(path: Path, data: object) -> Path:
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


@pytest.fixture
def minimal(tmp_path: Path) -> Path:
    return write(tmp_path / "config.yaml", MINIMAL)


def error_of(path: Path | None, overrides: list[str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides or [])
    return str(info.value)


# ----------------------------------------------------------------------------- defaults


def test_defaults_equal_the_reference(minimal: Path) -> None:
    cfg = load_config(minimal).config
    assert cfg.train.num_epochs == 4
    assert cfg.train.batch_size == 40
    assert cfg.gradient.minibatch_size == 8
    assert cfg.gradient.merge_batch_size == 8
    assert cfg.optimizer.learning_rate == 4
    assert cfg.optimizer.min_learning_rate == 2
    assert cfg.optimizer.lr_scheduler == "cosine"
    assert cfg.evaluation.gate_metric == "hard"
    assert cfg.evaluation.use_gate is True


def test_resolved_config_carries_options_and_folder(minimal: Path) -> None:
    resolved = load_config(minimal)
    assert isinstance(resolved.env_options, QAOptions)
    assert resolved.env_options.data_path == Path("data.jsonl")
    assert set(resolved.role_options) == {"target", "optimizer"}
    assert resolved.role_options["target"].default == "x"
    assert resolved.base_dir == minimal.parent.resolve()
    assert resolved.source == minimal


# ----------------------------------------------------------------------------- inheritance


def test_base_is_relative_to_the_child_and_deep_merged(tmp_path: Path) -> None:
    (tmp_path / "bases").mkdir()
    write(tmp_path / "bases" / "base.yaml",
          {**MINIMAL, "train": {"num_epochs": 2, "batch_size": 10, "seed": 5}})
    child = write(tmp_path / "child.yaml",
                  {"_base_": "bases/base.yaml", "train": {"batch_size": 20}})
    cfg = load_config(child).config
    assert cfg.train.batch_size == 20  # child overrides
    assert cfg.train.num_epochs == 2  # kept from the base
    assert cfg.train.seed == 5
    assert cfg.model.target is not None and cfg.model.target.backend == "scripted"


def test_nested_bases_apply_in_order(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", {**MINIMAL, "train": {"num_epochs": 1, "batch_size": 11, "seed": 1}})
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "b.yaml", {"_base_": "../a.yaml", "train": {"batch_size": 22}})
    c = write(tmp_path / "sub" / "c.yaml", {"_base_": "b.yaml", "train": {"seed": 3}})
    train = load_config(c).config.train
    assert (train.num_epochs, train.batch_size, train.seed) == (1, 22, 3)


def test_base_cycle_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", {"_base_": "b.yaml", **MINIMAL})
    write(tmp_path / "b.yaml", {"_base_": "a.yaml"})
    assert "cycle" in error_of(tmp_path / "a.yaml")


def test_self_base_is_a_cycle(tmp_path: Path) -> None:
    path = write(tmp_path / "a.yaml", {"_base_": "a.yaml", **MINIMAL})
    assert "cycle" in error_of(path)


def test_missing_base_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "a.yaml", {"_base_": "nowhere.yaml", **MINIMAL})
    message = error_of(path)
    assert "nowhere.yaml" in message
    assert "not found" in message


def test_missing_config_file(tmp_path: Path) -> None:
    assert "absent.yaml" in error_of(tmp_path / "absent.yaml")


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", "env:\n  name: qa\ntrain: [1, 2\n")
    message = error_of(path)
    assert str(path) in message
    assert "malformed YAML" in message
    assert "line " in message


def test_malformed_yaml_line_number_is_one_based(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", "a: 1\nb: 2\nc: : :\n")
    assert "line 3" in error_of(path)


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path / "list.yaml", "- a\n- b\n")
    message = error_of(path)
    assert str(path) in message
    assert "mapping" in message


def test_empty_file_gives_defaults(tmp_path: Path) -> None:
    path = write(tmp_path / "empty.yaml", "")
    config = load_config(path).config
    # Both roles default to the embedded model, a small optimizer: its gradient defaults.
    assert config.gradient == GradientSection(**SMALL_OPTIMIZER_GRADIENT)
    assert config.model_copy(update={"gradient": GradientSection()}) == SkillgradConfig()


# ----------------------------------------------------------------------------- unknown keys


def test_unknown_key_names_key_file_and_allowed(tmp_path: Path) -> None:
    write(tmp_path / "base.yaml", MINIMAL)
    path = write(tmp_path / "c.yaml", {"_base_": "base.yaml", "train": {"num_epoch": 3}})
    message = error_of(path)
    assert "'train.num_epoch'" in message
    assert message.startswith(str(path))  # the child, not the base, holds the key
    assert "num_epochs" in message and "batch_size" in message


def test_unknown_key_in_a_base_names_the_base(tmp_path: Path) -> None:
    base = write(tmp_path / "base.yaml", {**MINIMAL, "gradient": {"minibatchsize": 3}})
    path = write(tmp_path / "c.yaml", {"_base_": "base.yaml"})
    message = error_of(path)
    assert message.startswith(str(base))
    assert "gradient.minibatchsize" in message


def test_unknown_top_level_section_names_its_file(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", {**MINIMAL, "trainer": {"num_epochs": 1}})
    message = error_of(path)
    assert "'trainer'" in message
    assert message.startswith(str(path))  # located even though its value is a mapping
    assert "train" in message and "optimizer" in message


def test_env_options_are_validated_by_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", {**MINIMAL, "env": {**MINIMAL["env"], "foo": 1}})
    message = error_of(path)
    assert "'env.foo'" in message
    assert message.startswith(str(path))
    # Both the environment's own keys and the keys every environment has are allowed.
    assert "data_path" in message
    assert "split_mode" in message and "name" in message


def test_env_option_value_is_validated(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", {**MINIMAL, "env": {**MINIMAL["env"], "max_tokens": 0}})
    message = error_of(path)
    assert "env.max_tokens" in message
    assert "(got 0)" in message


def test_unknown_environment_lists_allowed(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", {**MINIMAL, "env": {"name": "nope"}})
    message = error_of(path)
    assert "'nope'" in message and "qa" in message
    assert message.startswith(str(path))


def test_qa_data_path_is_checked_at_creation_not_validation(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", {**MINIMAL, "env": {"name": "qa"}})
    resolved = load_config(path)  # validation accepts it
    assert resolved.env_options.data_path is None
    with pytest.raises(ConfigError, match="env.data_path is required"):
        QAEnvironment.create(resolved.config.env, resolved.env_options, resolved.base_dir)


def test_unknown_backend_lists_allowed(tmp_path: Path) -> None:
    data = {**MINIMAL, "model": {"target": {"backend": "telepathy"}}}
    message = error_of(write(tmp_path / "c.yaml", data))
    assert "model.target.backend" in message
    assert "'telepathy'" in message
    assert "scripted" in message


def test_a_role_without_backend_is_the_embedded_model(tmp_path: Path) -> None:
    resolved = load_config(write(tmp_path / "c.yaml", {**MINIMAL, "model": {"target": {}}}))
    assert resolved.config.model.target.backend == "embedded"
    assert resolved.config.model.optimizer.backend == "embedded"
    assert resolved.resolved()["model"]["optimizer"]["model"] == "qwen2.5-coder-1.5b"
    # An unknown key in a role that names no backend is checked against the embedded options.
    message = error_of(write(tmp_path / "d.yaml", {**MINIMAL, "model": {"target": {"x": 1}}}))
    assert "unknown key 'model.target.x'" in message and "n_ctx" in message


def test_backend_options_are_validated(tmp_path: Path) -> None:
    data = {**MINIMAL, "model": {"target": {"backend": "scripted", "scripts": "s.yaml"}}}
    path = write(tmp_path / "c.yaml", data)
    message = error_of(path)
    assert "'model.target.scripts'" in message
    assert message.startswith(str(path))
    assert "script" in message and "concurrency" in message  # backend's and common keys


def test_backend_option_value_is_validated(tmp_path: Path) -> None:
    data = {**MINIMAL, "model": {"optimizer": {"backend": "scripted", "delay": -1}}}
    message = error_of(write(tmp_path / "c.yaml", data))
    assert "model.optimizer.delay" in message


def test_role_common_keys_are_not_backend_options(minimal: Path) -> None:
    resolved = load_config(minimal, ["model.target.concurrency=3"])
    assert resolved.config.model.target is not None
    assert resolved.config.model.target.concurrency == 3
    assert resolved.role_options["target"].default == "x"


# ----------------------------------------------------------------------------- bad values


def test_bad_scheduler_lists_allowed(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", {**MINIMAL, "optimizer": {"lr_scheduler": "exp"}})
    message = error_of(path)
    assert "optimizer.lr_scheduler" in message
    assert "'exp'" in message
    for kind in ("constant", "linear", "cosine"):
        assert kind in message


def test_batch_size_must_be_positive(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", {**MINIMAL, "train": {"batch_size": 0}})
    message = error_of(path)
    assert message.startswith(str(path))
    assert "train.batch_size" in message
    assert "(got 0)" in message


def test_min_learning_rate_above_learning_rate(tmp_path: Path) -> None:
    data = {**MINIMAL, "optimizer": {"learning_rate": 2, "min_learning_rate": 3}}
    path = write(tmp_path / "c.yaml", data)
    message = error_of(path)
    assert "min_learning_rate (3) must not exceed learning_rate (2)" in message
    assert "Value error" not in message  # pydantic's wrapper is not shown
    assert message.startswith(str(path))  # not "defaults": the file set these keys


def test_inconsistent_training_options_are_rejected(minimal: Path) -> None:
    full = ["optimizer.skill_update_mode=full_rewrite_minibatch"]
    assert "lr_control_mode applies" in error_of(
        minimal, [*full, "optimizer.lr_control_mode=autonomous"])
    assert "use_skill_aware_reflection works with" in error_of(
        minimal, [*full, "optimizer.use_skill_aware_reflection=true"])
    assert "lr_ceiling is only used" in error_of(minimal, ["optimizer.lr_ceiling=3"])
    assert "need use_gate: true" in error_of(
        minimal, ["evaluation.use_gate=false", "evaluation.gate_test=sign"])
    message = error_of(minimal, ["optimizer.longitudinal_pair_policy=all"])
    assert "optimizer.longitudinal_pair_policy" in message and "'mixed'" in message
    assert "train.accumulation" in error_of(minimal, ["train.accumulation=0"])


# ----------------------------------------------------------------------------- overrides


def test_override_types_values(minimal: Path) -> None:
    cfg = load_config(minimal, ["optimizer.learning_rate=6", "evaluation.use_gate=false"]).config
    assert cfg.optimizer.learning_rate == 6
    assert cfg.evaluation.use_gate is False
    raw = load_config(minimal, ["optimizer.learning_rate=6"]).raw
    assert raw["optimizer"]["learning_rate"] == 6
    assert isinstance(raw["optimizer"]["learning_rate"], int)


def test_override_wins_over_file(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", {**MINIMAL, "train": {"batch_size": 7, "seed": 3}})
    train = load_config(path, ["train.batch_size=9"]).config.train
    assert (train.batch_size, train.seed) == (9, 3)


def test_override_without_a_file(tmp_path: Path) -> None:
    resolved = load_config(None, ["train.num_epochs=2"])
    assert resolved.config.train.num_epochs == 2
    assert resolved.source is None


@pytest.mark.parametrize("item", ["foo", "=3", "a..b=1", "train.=1"])
def test_bad_override_form(minimal: Path, item: str) -> None:
    message = error_of(minimal, [item])
    assert "--set" in message
    assert "dotted.key=value" in message


def test_override_into_a_scalar_is_an_error(minimal: Path) -> None:
    message = error_of(minimal, ["env.name.x=1"])
    assert "--set" in message and "env.name is not a section" in message


def test_bad_override_value_says_set(minimal: Path) -> None:
    message = error_of(minimal, ["train.batch_size=0"])
    assert message.startswith("--set")
    assert "train.batch_size" in message


def test_unknown_override_key_says_set(minimal: Path) -> None:
    message = error_of(minimal, ["train.num_epoch=3"])
    assert message.startswith("--set")
    assert "'train.num_epoch'" in message


def test_override_replacing_a_section_is_blamed_on_the_override(minimal: Path) -> None:
    message = error_of(minimal, ["model.target={backend: telepathy}"])
    assert "model.target.backend" in message
    assert message.startswith("--set")  # not the file whose backend key was replaced


# ----------------------------------------------------------------------------- redaction


class KeyOptions(BaseModel):
    """A backend's own options holding a secret (the scripted backend has none)."""

    api_key: str
    api_key_env: str
    hf_token: str
    headers: dict[str, str]


def test_redacted_hides_secrets_but_keeps_env_var_names_and_numbers() -> None:
    secrets = {"api_key": "sk-123", "api_key_env": "OPENAI_KEY", "hf_token": "hf_1",
               "headers": {"Authorization": "Bearer t", "Accept": "json"}}
    raw = {
        "model": {"target": {"backend": "fake", **secrets}},
        "optimizer": {"max_tokens": 512},
        "env": {"name": "qa"},
    }
    resolved = ResolvedConfig(
        SkillgradConfig.model_validate(raw), QAOptions(),
        {"target": KeyOptions.model_validate(secrets)}, Path("."), raw=raw,
    )
    out = resolved.redacted()
    target = out["model"]["target"]
    assert target["api_key"] == "***"
    assert target["hf_token"] == "***"
    assert target["headers"] == {"Authorization": "***", "Accept": "json"}
    assert target["api_key_env"] == "OPENAI_KEY"  # names a variable, holds no secret
    assert target["backend"] == "fake"
    assert out["optimizer"]["max_tokens"] == 512  # "tokens" is not a secret
    assert raw["model"]["target"]["api_key"] == "sk-123"  # the original is untouched


def test_redacted_keeps_every_value_of_a_config_without_secrets(minimal: Path) -> None:
    resolved = load_config(minimal, ["optimizer.max_tokens=100", "env.max_tokens=32"])
    out = resolved.redacted()
    assert "***" not in yaml.safe_dump(out)
    assert out["optimizer"]["max_tokens"] == 100
    assert out["env"]["max_tokens"] == 32
    assert out["model"]["target"]["default"] == "x"


# ----------------------------------------------------------------------------- fingerprint


def test_fingerprint_is_stable(minimal: Path) -> None:
    assert load_config(minimal).fingerprint() == load_config(minimal).fingerprint()


@pytest.mark.parametrize(
    "override", ["train.batch_size=20", "optimizer.learning_rate=5", "env.data_path=other.jsonl",
                 "model.target.default=y"],
)
def test_fingerprint_changes_with_training_keys(minimal: Path, override: str) -> None:
    assert load_config(minimal, [override]).fingerprint() != load_config(minimal).fingerprint()


@pytest.mark.parametrize(
    "override", ["execution.rollout_workers=8", "model.target.concurrency=4",
                 "model.optimizer.max_retries=9"],
)
def test_fingerprint_ignores_resume_safe_keys(minimal: Path, override: str) -> None:
    assert load_config(minimal, [override]).fingerprint() == load_config(minimal).fingerprint()


def test_env_common_keys_are_in_the_env_section() -> None:
    # The "allowed" list of env errors is built from these; keep the test honest if they move.
    assert {"name", "split_mode", "skill_init"} <= set(EnvCommon.model_fields)
