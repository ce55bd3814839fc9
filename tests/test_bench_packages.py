"""``bench/packages.py``: the same skill trained as a package and as one file, on toy runs
whose scripted optimizer puts each rule under the heading only the reference file holds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import toy
from conftest import toy_config

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import packages  # noqa: E402

RULES = "# Rules\n\nAnswer with the value the context gives.\n"


def test_package_and_single_file_training_side_by_side(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    cfg = toy_config(tmp_path, model={"optimizer": {
        "backend": "scripted", "function": "test_package:package_optimizer"}},
        train={"num_epochs": 1, "batch_size": 100, "steps_per_epoch": 3, "seed": 7})
    folder = tmp_path / "toy-skill"
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(toy.INITIAL_SKILL)
    (folder / "references" / "rules.md").write_text(RULES)
    out = tmp_path / "out"
    assert packages.main([str(cfg), str(folder), "--out", str(out)]) == 0
    result = json.loads((out / "packages.json").read_text())
    rows = {r["arm"]: r for r in result["rows"]}
    assert rows["initial"]["test"] < rows["package"]["test"]
    assert rows["package"]["gain"] > 0 and rows["package"]["low"] > 0  # it learned
    assert rows["single"]["gain"] > 0
    assert rows["package"]["calls"][0] > 0 and rows["single"]["calls"][0] > 0
    assert result["files_changed"] == {"seed0": ["references/rules.md"]}
    assert result["reads"]["package training"] is None  # the qa env inlines every file
    single = (out / "single-file-initial.md").read_text()
    assert single.startswith(toy.INITIAL_SKILL.rstrip()) and "## references/rules.md" in single
    assert toy.rule("year") in result["skills"]["single seed0"]
    printed = capsys.readouterr().out
    assert "package seed0 changed: references/rules.md" in printed
    assert "no rollout could open the files" in printed
    again = packages.main([str(cfg), str(folder), "--out", str(out)])  # read back
    assert again == 0 and json.loads((out / "packages.json").read_text())["rows"] == \
        result["rows"]
