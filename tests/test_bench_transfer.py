"""``bench/transfer.py``: a skill learned with one target, scored with another, on toy runs
whose scripted targets differ: one needs the skill's rules (``toy:target``), the other answers
exactly whatever the skill says (``test_bench_transfer:exact_target``)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml
from conftest import toy_config

from skillgrad.models.messages import ChatRequest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import transfer  # noqa: E402


def exact_target(request: ChatRequest) -> str:
    """A stronger model: the bare value, with any skill."""
    user = request.messages[-1].text()
    topic = re.search(r"What is the (\w+) of", user).group(1)  # type: ignore[union-attr]
    return "Answer: " + re.search(rf"{topic}: (\S+)", user).group(1)  # type: ignore[union-attr]


def test_the_learned_skill_is_scored_with_every_target(tmp_path: Path) -> None:
    cfg = toy_config(tmp_path)
    data = yaml.safe_load(cfg.read_text())
    data["train"] = {**data.get("train", {}), "num_epochs": 1}
    cfg.write_text(yaml.safe_dump(data))
    models = ["toy:target", "test_bench_transfer:exact_target"]
    out = tmp_path / "out"
    assert transfer.main([str(cfg), "--models", *models, "--key", "model.target.function",
                          "--out", str(out)]) == 0
    result = json.loads((out / "transfer.json").read_text())
    rows = {(r["trained_on"], r["used_on"]): r for r in result["rows"]}
    assert set(rows) == {(a, b) for a in models for b in models}
    weak, strong = models
    assert rows[weak, weak]["gain"] > 0 and rows[weak, weak]["low"] > 0  # it learned
    assert rows[weak, strong]["initial"] == 1.0 and rows[weak, strong]["gain"] == 0.0
    assert rows[strong, weak]["gain"] == 0.0  # nothing to learn on the strong target
    assert result["added_lines"][f"{weak} seed0"] and not result["added_lines"][f"{strong} seed0"]
    before = sorted(p.stat().st_mtime_ns for p in out.rglob("*.json*"))
    assert transfer.main([str(cfg), "--models", *models, "--key", "model.target.function",
                          "--out", str(out)]) == 0  # the second time reads what is there
    assert json.loads((out / "transfer.json").read_text())["rows"] == result["rows"]
    assert len(sorted(p.stat().st_mtime_ns for p in out.rglob("*.json*"))) == len(before)
