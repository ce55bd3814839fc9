"""The officeqa loader: OfficeQA's layout (question CSV + folder of parsed documents) served
through the doc_qa tools, on a tiny fixture written in that layout."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from skillgrad.envs.base import EnvCommon
from skillgrad.envs.doc_qa import sections_from_text
from skillgrad.envs.doc_qa.officeqa import OfficeQAEnvironment, OfficeQAOptions, source_names
from skillgrad.errors import ConfigError, DataError
from skillgrad.models.scripted import ScriptedModel

ENV_NAME = "skillgrad.envs.doc_qa:OfficeQAEnvironment"
SPLITS = ("train", "val", "test")
URL = "https://fraser.stlouisfed.org/title/treasury-bulletin-407/{month}-{year}-6529?page=15"
MONTHS = ["january", "february", "march", "april", "may", "june"]
TOPICS = ["national defense", "veterans administration", "public works", "interest on the debt",
          "customs receipts", "savings bonds"]
COLUMNS = ["uid", "question", "answer", "source_docs", "source_files", "difficulty"]


def _name(i: int) -> str:
    return f"treasury_bulletin_{1941 + i}_{i + 1:02d}"


def write_fixture(root: Path, columns: list[str] = COLUMNS, cross: bool = True
                  ) -> tuple[Path, Path]:
    """Six bulletins (one more that no question cites) and 12 questions, plus one citing two
    bulletins when ``cross``, OfficeQA style."""
    docs = root / "transformed"
    docs.mkdir(parents=True, exist_ok=True)
    for i, topic in enumerate(TOPICS):
        rows = "\n".join(f"| {MONTHS[m].capitalize()} | {(i + 1) * 1000 + m * 37:,} |"
                         for m in range(6))
        (docs / f"{_name(i)}.txt").write_text(
            f"# Treasury Bulletin {MONTHS[i].capitalize()} {1941 + i}\n\nIssued monthly.\n\n"
            f"## Expenditures for {topic}\n\nIn millions of dollars.\n\n"
            f"| Month | {topic.capitalize()} |\n| --- | --- |\n{rows}\n\n"
            f"## Notes on {topic}\n\nFigures for {topic} are preliminary.\n")
    (docs / "treasury_bulletin_1999_03.txt").write_text("Unrelated text about tariffs.\n")
    records = []
    for i, topic in enumerate(TOPICS):
        for m in (0, 4):
            records.append({
                "uid": f"UID{len(records) + 1:04d}",
                "question": f"What were the expenditures for {topic} in {MONTHS[m]} "
                            f"{1941 + i}, in millions of nominal dollars?",
                "answer": f"{(i + 1) * 1000 + m * 37:,}",
                "source_docs": URL.format(month=MONTHS[i], year=1941 + i),
                "source_files": f"{_name(i)}.txt", "difficulty": "easy" if m else "hard"})
    records += [{"uid": "UID0013", "question": "What is the sum of national defense and "
                    "veterans administration expenditures in January, in millions?",
                    "answer": "3,000", "source_docs": "", "difficulty": "hard",
                    "source_files": f"{_name(0)}.txt\n{_name(1)}.txt"}] if cross else []
    path = root / "officeqa_full.csv"
    write_csv(path, records, columns)
    return path, docs


def write_csv(path: Path, records: list[dict[str, str]], columns: list[str]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(records)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _env(tmp_path: Path, **options: object) -> OfficeQAEnvironment:
    csv_path, docs = write_fixture(tmp_path)
    common = EnvCommon(name=ENV_NAME, split_seed=3)
    opts = OfficeQAOptions(csv_path=csv_path, docs_dir=docs, **options)  # type: ignore[arg-type]
    return OfficeQAEnvironment.create(common, opts, tmp_path)


def test_loads_the_layout_and_keeps_shared_files_in_one_split(tmp_path: Path) -> None:
    env = _env(tmp_path)
    tasks = {s: env.tasks(s) for s in SPLITS}
    assert sum(len(t) for t in tasks.values()) == 13 and all(tasks.values())
    split_of = {t.id: s for s, ts in tasks.items() for t in ts}
    # UID0013 cites bulletins 0 and 1, so all their questions share one split.
    assert len({split_of[u] for u in ("UID0001", "UID0002", "UID0003", "UID0004", "UID0013")}) == 1
    cross = next(t for ts in tasks.values() for t in ts if t.id == "UID0013")
    assert cross.reference["docs"] == [_name(0), _name(1)]
    assert len(env.index.documents) == 7  # the whole folder is searchable
    assert len(_env(tmp_path, corpus="sources").index.documents) == 6


def test_chunks_must_fit_what_read_section_shows(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="env.chunk_chars .2000. must not exceed"):
        OfficeQAOptions(docs_dir=tmp_path, chunk_chars=2000)


def test_difficulty_filter(tmp_path: Path) -> None:
    env = _env(tmp_path, difficulty="easy")
    tasks = [t for s in SPLITS for t in env.tasks(s)]
    assert len(tasks) == 6 and {t.metadata["difficulty"] for t in tasks} == {"easy"}


def test_source_docs_urls_map_to_parsed_files(tmp_path: Path) -> None:
    row = {"source_docs": "https://fraser.stlouisfed.org/title/treasury-bulletin-407/"
           "january-1941-6529?page=15\nhttps://fraser.stlouisfed.org/title/treasury-bulletin-"
           "407/february-1954-6685?page=14"}
    assert source_names(row) == ["treasury_bulletin_1941_01.txt", "treasury_bulletin_1954_02.txt"]
    assert source_names({"source_files": "a.txt, b.txt", "source_docs": "x"}) == ["a.txt", "b.txt"]
    # An older CSV without source_files still loads, from the URLs.
    csv_path, docs = write_fixture(tmp_path, [c for c in COLUMNS if c != "source_files"],
                                   cross=False)
    env = OfficeQAEnvironment.create(EnvCommon(name=ENV_NAME, split_seed=3),
                                     OfficeQAOptions(csv_path=csv_path, docs_dir=docs), tmp_path)
    tasks = {t.id: t for s in SPLITS for t in env.tasks(s)}
    assert len(tasks) == 12 and tasks["UID0003"].reference["docs"] == [_name(1)]


def test_sections_from_headings_and_chunks_keep_table_headers() -> None:
    text = "# Title\nintro\n## Receipts\n| A | B |\n| --- | --- |\n| x | 1 |\n## Debt\nbody"
    sections = sections_from_text(text)
    assert [s.title for s in sections] == ["Title", "Receipts", "Debt"]
    rows = "\n".join(f"| row{i} | {i * 11} |" for i in range(60))
    chunks = sections_from_text(f"Preface line.\n| Month | Value |\n| --- | --- |\n{rows}\n",
                                chunk_chars=300)
    assert len(chunks) > 3
    assert all(c.text.startswith("| Month | Value |") for c in chunks[1:])
    assert all(len(c.text) <= 300 for c in chunks)
    body = "\n".join(re.sub(r"\| Month \| Value \|\n\| --- \| --- \|\n?", "", c.text)
                     for c in chunks)
    assert all(f"| row{i} |" in body for i in range(60))  # nothing lost


def test_search_finds_the_cited_bulletin(tmp_path: Path) -> None:
    env = _env(tmp_path)
    tasks = [t for s in SPLITS for t in env.tasks(s)]
    found = sum(t.reference["docs"][0] in env.index.search(t.prompt[10:]) for t in tasks)
    assert found / len(tasks) > 0.8


def test_rollout_reads_and_scores_numbers_with_tolerance(tmp_path: Path) -> None:
    env = _env(tmp_path)
    task = next(t for s in SPLITS for t in env.tasks(s) if t.id == "UID0003")
    doc = task.reference["docs"][0]

    def act(tool: str, **args: object) -> str:
        return f"ACTION: {tool} {json.dumps(args)}"

    close = env.rollout(task, env.initial_skill(), ScriptedModel(
        [act("search", query=task.prompt[10:]), act("read_section", doc=doc, section=2),
         "ANSWER: 1,990 million"]))  # gold 2,000; within the 1% default tolerance
    assert close.hard == 1.0 and close.metadata["read"] == [[doc, 2]]
    far = env.rollout(task, env.initial_skill(), ScriptedModel(
        [act("open_document", doc=doc + ".txt"), "ANSWER: 2,400"]))
    assert far.hard == 0.0 and "off from the gold 2,000" in far.reason
    assert "it opened the document holding the answer" in far.reason


def test_split_dir_reads_one_csv_per_split(tmp_path: Path) -> None:
    csv_path, docs = write_fixture(tmp_path)
    rows = read_csv(csv_path)
    folder = tmp_path / "splits"
    folder.mkdir()
    for n, split in enumerate(SPLITS):
        write_csv(folder / f"{split}.csv", rows[4 * n: 4 * n + 4], COLUMNS)
    env = OfficeQAEnvironment.create(
        EnvCommon(name=ENV_NAME, split_mode="split_dir", split_dir=folder),
        OfficeQAOptions(docs_dir=docs), tmp_path)
    assert [len(env.tasks(s)) for s in SPLITS] == [4, 4, 4]
    with pytest.raises(ConfigError, match="env.csv_path is not used"):
        OfficeQAEnvironment.create(
            EnvCommon(name=ENV_NAME, split_mode="split_dir", split_dir=folder),
            OfficeQAOptions(docs_dir=docs, csv_path=csv_path), tmp_path)


@pytest.mark.parametrize(
    ("edit", "problem"),
    [("missing_csv", "officeqa_full.csv: file not found"),
     ("no_answer_column", "officeqa_full.csv: missing column ground_truth (or answer)"),
     ("no_source_columns", "officeqa_full.csv: missing column source_files (or source_docs)"),
     ("unknown_file", "officeqa_full.csv: row 2 (UID0001): source file "
                      "'treasury_bulletin_2030_01.txt' not found in"),
     ("empty_answer", "officeqa_full.csv: row 2: ground_truth (or answer) is missing or empty"),
     ("no_url", "officeqa_full.csv: row 14 (UID0013): no source file"),
     ("tiny", "officeqa_full.csv: split 'val' is empty")],
)
def test_bad_data_is_one_error_naming_the_file(tmp_path: Path, edit: str, problem: str) -> None:
    csv_path, docs = write_fixture(tmp_path)
    rows, columns = read_csv(csv_path), list(COLUMNS)
    if edit == "no_answer_column":
        columns[2] = "gold"
        rows = [{**r, "gold": r["answer"]} for r in rows]
    elif edit == "no_source_columns":
        columns = columns[:3] + ["difficulty"]
    elif edit == "unknown_file":
        rows[0]["source_files"] = "treasury_bulletin_2030_01.txt"
    elif edit == "empty_answer":
        rows[0]["answer"] = " "
    elif edit == "no_url":
        columns.remove("source_files")
    elif edit == "tiny":
        rows = rows[:1]
    write_csv(csv_path, rows, columns)
    if edit == "missing_csv":
        csv_path.unlink()
    with pytest.raises(DataError, match=re.escape(problem)):
        OfficeQAEnvironment.create(EnvCommon(name=ENV_NAME),
                                   OfficeQAOptions(csv_path=csv_path, docs_dir=docs), tmp_path)
