"""A SkillOpt checkout as a user has one: its configs (our fixtures of SkillOpt 0.2.0's
shipped files), its initial skills, and data at the paths its configs name (our fixtures in
SkillOpt's layouts), for tests that run skillgrad on SkillOpt configs from that folder."""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"
SKILLOPT = FIXTURES / "skillopt"
BENCHMARKS = ("searchqa", "alfworld", "spreadsheetbench", "officeqa", "livemathematicianbench",
              "docvqa")

# Each benchmark's data: the path its config names -> our fixture there.
DATA = {
    "searchqa": {"data/searchqa_split": FIXTURES / "searchqa"},
    "alfworld": {"data/alfworld_path_split": SKILLOPT / "alfworld" / "alfworld_path_split"},
    "livemathematicianbench": {
        "data/livemathematicianbench_split":
            SKILLOPT / "livemathematicianbench" / "livemathematicianbench_split"},
    "officeqa": {"data/officeqa_split": SKILLOPT / "officeqa" / "data" / "officeqa_split",
                 "data/officeqa_docs_official":
                     SKILLOPT / "officeqa" / "data" / "officeqa_docs_official"},
    "spreadsheetbench": {
        "data/spreadsheetbench_split":
            SKILLOPT / "spreadsheetbench" / "data" / "spreadsheetbench_split",
        "data/spreadsheetbench_verified_400":
            SKILLOPT / "spreadsheetbench" / "data" / "spreadsheetbench_verified_400"},
    "docvqa": {"data/docvqa": SKILLOPT / "docvqa" / "data" / "docvqa",
               "data/docvqa_images": SKILLOPT / "docvqa" / "data" / "docvqa_images"},
}
# What SkillOpt's own environment would need besides its files.
ENVIRON = {"alfworld": {"ALFWORLD_DATA": str(SKILLOPT / "alfworld" / "alfworld_data")}}


def make_checkout(folder: Path, benchmark: str) -> Path:
    """``folder`` laid out like a SkillOpt checkout for ``benchmark``; its config's path."""
    shutil.copytree(SKILLOPT / "configs", folder / "configs")
    skill = folder / "skillopt" / "envs" / benchmark / "skills" / "initial.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(f"# {benchmark}\n\nSolve the task. Put the final answer last.\n")
    for where, fixture in DATA[benchmark].items():
        (folder / where).parent.mkdir(parents=True, exist_ok=True)
        (folder / where).symlink_to(fixture, target_is_directory=True)
    return folder / "configs" / benchmark / "default.yaml"
