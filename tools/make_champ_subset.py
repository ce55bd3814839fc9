"""Build the math environment's bundled problems from CHAMP (``champ-dataset`` 1.0.0, MIT).

    pip download champ-dataset==1.0.0 --no-deps -d /tmp/champ
    python tools/make_champ_subset.py /tmp/champ/champ_dataset-1.0.0-py3-none-any.whl

Keeps the problems whose final answer is an integer (79 of 270), which exact comparison and
math-verify both check without doubt; the others have free-form answers ("C(10, 5), or
equivalently 252", "2^floor(n/2)*floor(n/2)!") and are left out.
"""

from __future__ import annotations

import json
import re
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/skillgrad/envs/math/data/champ_integer.jsonl"


def main(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        problems = json.loads(z.read("champ_dataset/dataset_files/v0.json"))["problems"]
    kept = []
    for key in sorted(problems):
        p = problems[key]
        answer = str(p["_answer"]).strip()
        if re.fullmatch(r"-?\d+", answer):
            kept.append({"id": p["identifier"], "problem": p["_text"].strip(), "answer": answer,
                         "type": p["category"]})
    OUT.write_text("".join(json.dumps(k, ensure_ascii=False) + "\n" for k in kept),
                   encoding="utf-8")
    print(f"{OUT}: {len(kept)} of {len(problems)} problems")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
