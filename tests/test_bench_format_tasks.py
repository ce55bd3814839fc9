"""``bench/format_tasks.py``: the held-out question sets it writes load as the ``qa``
environment, hold answers that are right, and are the same for the same seed."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from skillgrad.build import build_environment
from skillgrad.config import load_config

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "format_tasks.py"


def _write(out: Path, kind: str, seed: int = 0) -> list[dict[str, str]]:
    subprocess.run([sys.executable, str(SCRIPT), str(out), "--kind", kind, "--seed", str(seed)],
                   check=True, capture_output=True)
    return [json.loads(line) for line in (out / "data.jsonl").read_text().splitlines()]


def test_letter_questions_are_each_about_a_word_of_their_own_and_answered_right(
        tmp_path: Path) -> None:
    tasks = _write(tmp_path / "a", "letters")
    assert len(tasks) == 120 and len({t["question"] for t in tasks}) == 120
    words = [re.search(r"the word '(\w+)'", t["question"]).group(1)  # type: ignore[union-attr]
             for t in tasks]
    assert len(set(words)) == 120  # no word asked about twice, within or across splits
    for task, word in zip(tasks, words, strict=True):
        if letter := re.search(r"the letter '(\w)'", task["question"]):
            assert task["answer"] == str(word.count(letter.group(1)))
        elif "vowels" in task["question"]:
            assert task["answer"] == str(sum(c in "aeiou" for c in word))
        else:
            assert task["answer"] == str(len(word))
    assert _write(tmp_path / "b", "letters") == tasks
    assert _write(tmp_path / "c", "letters", seed=1) != tasks
    config = yaml.safe_load((tmp_path / "a" / "config.yaml").read_text())
    assert config["env"]["max_tokens"] == 200  # room to spell a word out before the answer


@pytest.mark.parametrize("kind", ["dates", "times", "units", "letters"])
def test_every_kind_loads_as_the_qa_environment(tmp_path: Path, kind: str) -> None:
    _write(tmp_path, kind)
    env = build_environment(load_config(tmp_path / "config.yaml"))
    assert sum(len(env.tasks(split)) for split in ("train", "val", "test")) == 120
