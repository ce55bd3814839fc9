from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))

import toy  # noqa: E402


def toy_config(folder: Path, optimizer_function: str | None = None,
               **sections: dict[str, Any]) -> Path:
    """Write a config for the toy task family into ``folder`` and return its path (with
    ``optimizer_function``, ``module:name``, as the scripted optimizer instead of the toy's)."""
    toy.write_data(folder)
    cfg: dict[str, Any] = {
        "model": {
            "target": {"backend": "scripted", "function": "toy:target"},
            "optimizer": {"backend": "scripted", "function": "toy:optimizer"},
        },
        "env": {"name": "qa", "data_path": "toy.jsonl", "skill_init": "toy_skill.md",
                "split_ratio": [0.5, 0.25, 0.25], "split_seed": 1},
        "train": {"num_epochs": 2, "batch_size": 100, "steps_per_epoch": 3, "seed": 7},
        "gradient": {"minibatch_size": 4, "analyst_workers": 2},
        "optimizer": {"learning_rate": 1, "min_learning_rate": 1, "lr_scheduler": "constant"},
        # The toy's splits are tiny and its loop tests count decisions made by the strict
        # gate; the honest default has tests of its own.
        "evaluation": {"gate_test": "strict"},
    }
    if optimizer_function is not None:
        cfg["model"]["optimizer"] = {"backend": "scripted", "function": optimizer_function}
    for name, values in sections.items():
        cfg.setdefault(name, {}).update(values)
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def toy_config_full(folder: Path, skill: str | None = None, **args: Any) -> Path:
    """The toy config with ``toy.make_optimizer(**args)``, which also answers the epoch-level
    and alternative update calls, as the optimizer."""
    cfg = toy_config(folder)
    data = yaml.safe_load(cfg.read_text())
    data["model"]["optimizer"] = {"backend": "scripted", "function": "toy:make_optimizer",
                                  "function_args": args}
    cfg.write_text(yaml.safe_dump(data))
    if skill is not None:
        (folder / "toy_skill.md").write_text(skill)
    return cfg


@pytest.fixture
def toy_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "toy"
    folder.mkdir()
    return folder


@pytest.fixture
def fake_llama(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """llama_cpp.Llama replaced by a stand-in that loads no weights and answers "ok"; returns
    the keyword arguments of every create_chat_completion call, to check what reached it."""
    import types

    calls: list[dict[str, Any]] = []

    class FakeLlama:
        def __init__(self, **kwargs: Any) -> None:
            pass

        def create_chat_completion(self, **kwargs: Any) -> dict[str, Any]:
            calls.append(kwargs)
            return {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}

    monkeypatch.setitem(sys.modules, "llama_cpp", types.SimpleNamespace(Llama=FakeLlama))
    return calls
