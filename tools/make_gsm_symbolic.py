"""Generate the math environment's GSM8K-style word problems with reasoning-gym's
``gsm_symbolic`` generator (reasoning-gym 0.1.25, Apache-2.0).

    pip install reasoning-gym==0.1.25     # in a scratch virtual environment
    python tools/make_gsm_symbolic.py

Deterministic (seed 0, 200 items). Each item keeps the index of the template that produced it
as its group, so that the environment can split by template and no template appears in two
splits.
"""

from __future__ import annotations

import json
from pathlib import Path

import reasoning_gym

OUT = Path(__file__).resolve().parents[1] / "src/skillgrad/envs/math/data/gsm_symbolic.jsonl"


def main(size: int = 200, seed: int = 0) -> None:
    dataset = reasoning_gym.create_dataset("gsm_symbolic", size=size, seed=seed)
    rows = []
    for i in range(size):
        item = dataset[i]
        template = dataset.task_indices[i]
        assert dataset.score_answer(item["answer"], item) == 1.0
        rows.append({"id": f"gsm_symbolic-{seed}-{i:03d}", "question": item["question"],
                     "answer": str(item["answer"]), "group": f"template-{template:03d}"})
    OUT.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                   encoding="utf-8")
    print(f"{OUT}: {len(rows)} problems from {len({r['group'] for r in rows})} templates")


if __name__ == "__main__":
    main()
