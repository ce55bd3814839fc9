"""The officeqa loader on SkillOpt's OfficeQA layout: ``split_dir`` with ``train/``, ``val/``
and ``test/`` folders (a CSV, else a JSON array, each), SkillOpt's row fields and their
alternatives, and ``data_dirs`` (document roots searched in order, ``transformed/`` first),
on a fixture at the paths SkillOpt's ``configs/officeqa/default.yaml`` names."""

from __future__ import annotations

import csv
import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.envs.base import EnvCommon
from skillgrad.envs.doc_qa.officeqa import (
    OfficeQAEnvironment,
    OfficeQAOptions,
    list_field,
    load_questions,
)
from skillgrad.errors import ConfigError, DataError
from skillgrad.models.scripted import ScriptedModel

FIXTURE = Path(__file__).parent / "fixtures" / "skillopt" / "officeqa"
SPLIT_DIR = "data/officeqa_split"  # as SkillOpt's config names them
DOCS = "data/officeqa_docs_official"
SPLITS = ("train", "val", "test")
TRAIN_CSV = "train/officeqa_train.csv"
TEST_CSV = "test/officeqa_test.csv"
VAL_JSON = "val/items.json"


def make_env(base: Path = FIXTURE, data_dirs: tuple[str, ...] = (DOCS,),
             **options: Any) -> OfficeQAEnvironment:
    common = EnvCommon(name="officeqa", split_mode="split_dir", split_dir=Path(SPLIT_DIR))
    opts = OfficeQAOptions(data_dirs=tuple(Path(d) for d in data_dirs), **options)
    return OfficeQAEnvironment.create(common, opts, base)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of the fixture to edit."""
    shutil.copytree(FIXTURE, tmp_path / "so")
    return tmp_path / "so"


def tasks_by_id(env: OfficeQAEnvironment) -> dict[str, Any]:
    return {t.id: t for s in SPLITS for t in env.tasks(s)}


def split_file(base: Path, name: str) -> Path:
    return base / SPLIT_DIR / name


def rewrite_csv(path: Path, change: Any) -> None:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    columns = list(rows[0])
    change(rows, columns)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def rewrite_json(path: Path, change: Any) -> None:
    records = json.loads(path.read_text(encoding="utf-8"))
    change(records)
    path.write_text(json.dumps(records), encoding="utf-8")


# ----------------------------------------------------------------------------- loading


def test_the_layout_loads_as_skillopts_config_names_it() -> None:
    env = make_env()
    assert [[t.id for t in env.tasks(s)] for s in SPLITS] == [
        ["UID0101", "UID0102", "UID0103", "UID0104"], ["UID0201", "UID0202", "UID0203"],
        ["UID0301", "UID0302", "UID0303"]]
    tasks = tasks_by_id(env)
    # the CSV split: uid / ground_truth / category, two files separated by CRLF in one cell
    assert tasks["UID0101"].reference["answers"] == ["46,457"]
    assert tasks["UID0101"].metadata["difficulty"] == "easy"
    assert tasks["UID0103"].reference["docs"] == ["treasury_bulletin_1961_09",
                                                  "treasury_bulletin_1978_12"]
    assert len(tasks["UID0103"].metadata["source_docs"]) == 2
    # the JSON split: id / answer / difficulty, JSON arrays in strings, a numeric answer
    assert tasks["UID0202"].reference == {"answers": ["140,988"], "docs": [
        "treasury_bulletin_1952_06"], "sections": {}}
    assert tasks["UID0202"].metadata["difficulty"] == "hard"
    assert tasks["UID0203"].reference["answers"] == ["1208"]
    # an empty source_files: the file follows from the source_docs URL
    assert tasks["UID0302"].reference["docs"] == ["treasury_bulletin_1978_12"]
    assert tasks["UID0301"].reference["docs"] == ["treasury_bulletin_1961_09",
                                                  "treasury_bulletin_2003_02"]
    assert tasks["UID0301"].prompt.startswith("Question: What is the sum of Series H")
    assert len(env.index.documents) == 7  # every document of the root is searchable
    assert len(make_env(corpus="sources").index.documents) == 6


def test_difficulty_filters_on_category_or_difficulty() -> None:
    env = make_env(difficulty="hard")
    assert [[t.id for t in env.tasks(s)] for s in SPLITS] == [
        ["UID0102", "UID0103"], ["UID0202"], ["UID0301"]]


def test_a_skillopt_config_section_builds_with_paths_relative_to_the_config(copy: Path
                                                                           ) -> None:
    config = {"env": {"name": "officeqa", "split_mode": "split_dir", "split_dir": SPLIT_DIR,
                      "data_dirs": [DOCS]},
              "model": {"target": {"backend": "scripted", "default": "x"}}}
    (copy / "c.yaml").write_text(yaml.safe_dump(config))
    env = build_environment(load_config(copy / "c.yaml"))
    assert isinstance(env, OfficeQAEnvironment)
    assert [len(env.tasks(s)) for s in SPLITS] == [4, 3, 3]


def test_data_dirs_as_a_string_is_split_like_skillopts() -> None:
    options = OfficeQAOptions.model_validate({"data_dirs": f"a{os.pathsep}b, c"})
    assert options.data_dirs == (Path("a"), Path("b"), Path("c"))
    assert OfficeQAOptions.model_validate({"data_dirs": "one"}).data_dirs == (Path("one"),)
    for empty in ([], "", [" "]):
        with pytest.raises(ValidationError, match="names no folder|an entry is empty"):
            OfficeQAOptions.model_validate({"data_dirs": empty})


def test_docs_dir_or_data_dirs_exactly_one(copy: Path) -> None:
    common = EnvCommon(name="officeqa", split_mode="split_dir", split_dir=Path(SPLIT_DIR))
    with pytest.raises(ConfigError, match=r"needs env.docs_dir .* or env.data_dirs"):
        OfficeQAEnvironment.create(common, OfficeQAOptions(), copy)
    both = OfficeQAOptions(docs_dir=Path(DOCS), data_dirs=(Path(DOCS),))
    with pytest.raises(ConfigError, match="env.docs_dir and env.data_dirs are alternatives"):
        OfficeQAEnvironment.create(common, both, copy)
    with pytest.raises(DataError, match=r"missing_docs: document folder not found "
                       r"\(env.data_dirs\)"):
        make_env(copy, data_dirs=(DOCS, "missing_docs"))
    # docs_dir is one folder as it is: the transformed/ folder itself
    env = OfficeQAEnvironment.create(common, OfficeQAOptions(docs_dir=Path(DOCS) /
                                                             "transformed"), copy)
    assert [len(env.tasks(s)) for s in SPLITS] == [4, 3, 3]


# ----------------------------------------------------------------------------- document roots


def bulletin(folder: Path, name: str, title: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.txt").write_text(f"# {title}\n\nSome text.\n", encoding="utf-8")


def test_transformed_is_preferred_and_roots_are_searched_in_order(copy: Path) -> None:
    official = copy / DOCS
    bulletin(official, "treasury_bulletin_1946_03", "Outside transformed")
    bulletin(official, "treasury_bulletin_2010_01", "Outside transformed")
    extra = copy / "extra"
    bulletin(extra, "treasury_bulletin_1946_03", "Second root")
    bulletin(extra / "nested" / "deeper", "treasury_bulletin_2011_05", "Nested")

    env = make_env(copy, data_dirs=(DOCS, "extra"))
    titles = {d.id: d.title for d in env.index.documents.values()}
    assert "Outside transformed" not in " ".join(titles.values())  # transformed/ wins
    assert "treasury_bulletin_2010_01" not in titles
    assert titles["treasury_bulletin_1946_03"].endswith("Treasury Bulletin March 1946")
    assert titles["treasury_bulletin_2011_05"].endswith("Nested")  # subfolders are searched
    assert len(titles) == 8

    first_extra = make_env(copy, data_dirs=("extra", DOCS))
    assert first_extra.index.documents["treasury_bulletin_1946_03"].title.endswith("Second root")
    # a root without transformed/ is read as it is; the same root twice counts once
    shutil.rmtree(official / "transformed")
    with pytest.raises(DataError, match=r"row 3 \(UID0102\): source file "
                       r"'treasury_bulletin_1952_06.txt' not found in .*officeqa_docs_official"
                       r", .*extra$"):
        make_env(copy, data_dirs=(DOCS, "extra", "extra"))


def test_one_root_with_two_documents_of_one_name_is_an_error(copy: Path) -> None:
    bulletin(copy / DOCS / "transformed" / "more", "treasury_bulletin_1952_06", "Copy")
    with pytest.raises(DataError, match=r"transformed: two documents named "
                       r"'treasury_bulletin_1952_06' \(treasury_bulletin_1952_06.txt and "
                       r"more/treasury_bulletin_1952_06.txt\); keep one"):
        make_env(copy)


# ----------------------------------------------------------------------------- split folders


def test_a_split_folder_reads_its_first_csv_else_its_first_json(
        copy: Path, caplog: pytest.LogCaptureFixture) -> None:
    one = [{"uid": "UID0901", "question": "q?", "answer": "1",
            "source_files": "treasury_bulletin_1999_07.txt"}]
    split_file(copy, "train/items.json").write_text(json.dumps(one))
    split_file(copy, "val/a_first.json").write_text(json.dumps(one))
    with caplog.at_level(logging.WARNING, logger="skillgrad.envs.doc_qa.officeqa"):
        env = make_env(copy)
    assert [t.id for t in env.tasks("train")] == ["UID0101", "UID0102", "UID0103", "UID0104"]
    assert [t.id for t in env.tasks("val")] == ["UID0901"]
    assert "reading officeqa_train.csv only; ignoring items.json" in caplog.text
    assert "reading a_first.json only; ignoring items.json" in caplog.text


def test_split_folder_problems_name_the_folder(copy: Path) -> None:
    shutil.copy(split_file(copy, TEST_CSV), split_file(copy, "test.csv"))
    with pytest.raises(DataError, match=r"test split is ambiguous \(test.csv and test/\)"):
        make_env(copy)
    split_file(copy, VAL_JSON).unlink()
    with pytest.raises(DataError, match=r"officeqa_split/val: no .csv or .json file"):
        make_env(copy)
    shutil.rmtree(split_file(copy, "val"))
    with pytest.raises(DataError, match=r"officeqa_split: no val split found \(looked for "
                       r"val.csv and val/\)"):
        make_env(copy)
    with pytest.raises(DataError, match="nowhere: split directory not found"):
        OfficeQAEnvironment.create(
            EnvCommon(name="officeqa", split_mode="split_dir", split_dir=Path("nowhere")),
            OfficeQAOptions(data_dirs=(Path(DOCS),)), copy)


# ----------------------------------------------------------------------------- row fields


@pytest.mark.parametrize(
    ("value", "names"),
    [(["a.txt", " b.txt ", ""], ["a.txt", "b.txt"]),
     ('["a.txt", "b.txt"]', ["a.txt", "b.txt"]),
     ("a.txt\r\nb.txt", ["a.txt", "b.txt"]),
     ("a.txt\nb.txt\n", ["a.txt", "b.txt"]),
     ("a.txt, b.txt", ["a.txt", "b.txt"]),
     ("a.txt;b.txt", ["a.txt", "b.txt"]),
     ("[not json", ["[not json"]),
     ("", []), (None, [])],
)
def test_list_fields_take_skillopts_forms(value: object, names: list[str]) -> None:
    assert list_field(value) == names


def test_field_alternatives_follow_skillopts_order(tmp_path: Path) -> None:
    path = tmp_path / "items.json"
    path.write_text(json.dumps([
        {"uid": "u1", "id": "ignored", "question": " Q1 ", "ground_truth": "7",
         "answer": "ignored", "category": "Hard", "difficulty": "easy",
         "source_files": ["f.txt"]},
        {"uid": "", "id": 2, "question": "Q2", "ground_truth": "", "answer": 3.5,
         "difficulty": "easy", "source_files": "", "source_docs": "https://fraser.stlouisfed"
         ".org/title/treasury-bulletin-407/may-1950-6640?page=3, https://x.test/other"},
        {"id": "u3", "question": "Q3", "answer": "no level", "source_files": "f.txt"}]))
    rows = load_questions(path)
    assert [(r["uid"], r["question"], r["answer"], r["difficulty"]) for r in rows] == [
        ("u1", "Q1", "7", "hard"), ("2", "Q2", "3.5", "easy"), ("u3", "Q3", "no level", "")]
    assert rows[1]["sources"] == ["treasury_bulletin_1950_05.txt"]
    assert rows[1]["source_docs"][1] == "https://x.test/other"
    assert [r["where"] for r in rows] == [f"{path}: record {n}" for n in (1, 2, 3)]


# ----------------------------------------------------------------------------- bad rows


def _no_question(rows: list[dict[str, str]], columns: list[str]) -> None:
    rows[1]["question"] = "  "


def _unknown_csv_file(rows: list[dict[str, str]], columns: list[str]) -> None:
    rows[0]["source_files"] = "treasury_bulletin_2099_01.txt"


def _no_question_column(rows: list[dict[str, str]], columns: list[str]) -> None:
    columns.remove("question")


def _no_source(rows: list[dict[str, str]], columns: list[str]) -> None:
    rows[2]["source_files"], rows[2]["source_docs"] = "", "https://x.test/no-bulletin"


BAD_CSV = [
    (TRAIN_CSV, _no_question, "train/officeqa_train.csv: row 3: question is missing or empty"),
    (TEST_CSV, _unknown_csv_file, "test/officeqa_test.csv: row 2 (UID0301): source file "
     "'treasury_bulletin_2099_01.txt' not found in "),
    (TRAIN_CSV, _no_question_column, "train/officeqa_train.csv: missing column question "
     "(found: category, ground_truth, source_docs, source_files, split, uid)"),
    (TEST_CSV, _no_source, "test/officeqa_test.csv: row 4 (UID0303): no source file "
     "(source_files is empty and source_docs has no treasury-bulletin URL)"),
]
BAD_JSON: list[tuple[Any, str]] = [
    (lambda r: r[1].pop("question"), "record 2: question is missing or empty"),
    (lambda r: r[0].update(source_files=["treasury_bulletin_2099_01.txt"]),
     "record 1 (UID0201): source file 'treasury_bulletin_2099_01.txt' not found in "),
    (lambda r: r[2].update(question=["a", "list"]), "record 3: question must be text or a "
     "number, got list"),
    (lambda r: r[0].update(source_files={"a": 1}), "record 1 (UID0201): source_files: "
     "expected a list or a string"),
    (lambda r: r[1].update(id="UID0101"), "record 2: uid 'UID0101' is already used at "),
    (lambda r: r.append("not an object"), "record 4 is a string; expected an object"),
]


@pytest.mark.parametrize(("name", "change", "problem"), BAD_CSV)
def test_bad_csv_rows_are_one_error_naming_file_and_row(copy: Path, name: str, change: Any,
                                                        problem: str) -> None:
    rewrite_csv(split_file(copy, name), change)
    with pytest.raises(DataError, match=re.escape(problem)) as caught:
        make_env(copy)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(str(split_file(copy, "")))


@pytest.mark.parametrize(("change", "problem"), BAD_JSON)
def test_bad_json_records_are_one_error_naming_file_and_record(copy: Path, change: Any,
                                                               problem: str) -> None:
    rewrite_json(split_file(copy, VAL_JSON), change)
    with pytest.raises(DataError, match=re.escape(f"val/items.json: {problem}")) as caught:
        make_env(copy)
    assert "\n" not in str(caught.value)


def test_a_csv_row_longer_than_its_header_is_refused(copy: Path) -> None:
    path = split_file(copy, TEST_CSV)
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[-2] += ",stray"  # the last row (the file ends with a newline)
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(DataError, match=r"test/officeqa_test.csv: row 4: 8 fields, but the "
                       "header has 7"):
        make_env(copy)


def test_a_json_split_that_is_not_a_list_is_refused(copy: Path) -> None:
    split_file(copy, VAL_JSON).write_text('{"question": "q"}')
    with pytest.raises(DataError, match=r"val/items.json: top level is an object with none "
                       "of the list keys"):
        make_env(copy)


# ----------------------------------------------------------------------------- a rollout


def act(tool: str, **args: object) -> str:
    return f"ACTION: {tool} {json.dumps(args)}"


def test_a_scripted_rollout_over_a_fixture_task_scores_as_expected() -> None:
    env = make_env()
    task = tasks_by_id(env)["UID0101"]
    doc = "treasury_bulletin_1946_03"
    model = ScriptedModel([act("search", query="total budget receipts fiscal year 1945"),
                           act("read_section", doc=doc, section=2), "ANSWER: 46,457"])
    right = env.rollout(task, env.initial_skill(), model)
    assert (right.hard, right.soft, right.reason) == (1.0, 1.0, "")
    assert right.metadata["read"] == [[doc, 2]]
    assert doc in right.metadata["opened"]
    # the search result the model saw came from the fixture's document
    assert f"[{doc}]" in model.calls[1].messages[-1].text()
    assert "46,457" in model.calls[2].messages[-1].text()

    wrong = env.rollout(task, env.initial_skill(), ScriptedModel(
        [act("open_document", doc=doc), "ANSWER: 44,149"]))  # the 1944 figure
    assert wrong.hard == 0.0
    assert "answer '44,149' does not match gold '46,457'" in wrong.reason
    assert "it opened the document holding the answer" in wrong.reason

    two = tasks_by_id(env)["UID0103"]  # the answer needs both of its files
    both = env.rollout(two, env.initial_skill(), ScriptedModel(
        [act("read_section", doc="treasury_bulletin_1961_09", section=2),
         act("read_section", doc="treasury_bulletin_1978_12", section=2), "ANSWER: 1006"]))
    assert both.hard == 1.0
    assert both.metadata["opened"] == ["treasury_bulletin_1961_09", "treasury_bulletin_1978_12"]
