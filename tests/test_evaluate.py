"""``skillgrad eval`` scores the tasks a run would use: the caps of the config hold."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import toy_config

from skillgrad.config import load_config
from skillgrad.evaluate import evaluate_skill


@pytest.mark.parametrize(("split", "section", "key"), [
    ("test", "evaluation", "test_env_num"), ("val", "evaluation", "sel_env_num"),
    ("train", "train", "train_size")])
def test_eval_keeps_the_split_cap(toy_dir: Path, split: str, section: str, key: str) -> None:
    full = evaluate_skill(load_config(toy_config(toy_dir)), None, split, toy_dir / "all")
    capped = evaluate_skill(load_config(toy_config(toy_dir, **{section: {key: 2}})), None,
                            split, toy_dir / "capped")
    assert full["n"] > 2 and capped["n"] == 2


def test_eval_out_naming_a_file_is_refused_and_the_file_kept(toy_dir: Path) -> None:
    from skillgrad.errors import RunDirError

    notes = toy_dir / "notes.txt"
    notes.write_text("mine")
    with pytest.raises(RunDirError, match=r"notes\.txt: is a file, not a folder"):
        evaluate_skill(load_config(toy_config(toy_dir)), None, "test", notes)
    assert notes.read_text() == "mine"
