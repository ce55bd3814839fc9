"""The doc_qa environment: bundled documents and generated reports, search / open / read tools,
numeric scoring with tolerance, reasons, bad data, and a short training run with scripted
models."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from e2e import one_epoch, rule_optimizer, train_end_to_end
from pydantic import ValidationError

from skillgrad.envs.base import EnvCommon
from skillgrad.envs.doc_qa import DocQAEnvironment, DocQAOptions, load_collection
from skillgrad.envs.doc_qa.answers import parse_numbers, score_answer
from skillgrad.envs.doc_qa.reports import generate_reports
from skillgrad.errors import ConfigError, DataError
from skillgrad.models.messages import ChatRequest, Completion
from skillgrad.models.scripted import ScriptedModel
from skillgrad.records import Task

ENV_NAME = "skillgrad.envs.doc_qa:DocQAEnvironment"
READ_RULE = "Search first, then read the section the search points to, then answer."
SPLITS = ("train", "val", "test")


@pytest.fixture(scope="module")
def env() -> DocQAEnvironment:
    return DocQAEnvironment.create(EnvCommon(name=ENV_NAME), DocQAOptions(), Path("."))


def _question(task: Task) -> str:
    return task.prompt[len("Question: "):]


def _act(tool: str, **arguments: Any) -> str:
    return f"ACTION: {tool} {json.dumps(arguments)}"


# ----------------------------------------------------------------------------- data


def test_builtin_collection_sizes_and_family_splits(env: DocQAEnvironment) -> None:
    sizes = {s: len(env.tasks(s)) for s in SPLITS}
    assert sum(sizes.values()) == 104 and 10 <= sizes["test"] <= 24
    groups = {s: {t.group for t in env.tasks(s)} for s in SPLITS}
    assert not (groups["train"] & groups["val"] or groups["train"] & groups["test"]
                or groups["val"] & groups["test"])
    kinds = {t.reference["docs"][0].split("-")[0] for s in SPLITS for t in env.tasks(s)}
    assert kinds == {"nyt", "reviews", "report"}
    assert len(env.index.documents) == 16 + 10  # search covers every split's documents


def test_parts_and_seed_choose_the_collection() -> None:
    reports = DocQAEnvironment.create(EnvCommon(name=ENV_NAME),
                                      DocQAOptions(parts=("reports",), companies=5), Path("."))
    tasks = [t for s in SPLITS for t in reports.tasks(s)]
    assert len(tasks) == 40 and all(t.id.startswith("report-") for t in tasks)
    again, _ = generate_reports(0, 3)
    other, _ = generate_reports(1, 3)
    assert [d.sections for d in again] == [d.sections for d in generate_reports(0, 3)[0]]
    assert [d.sections for d in again] != [d.sections for d in other]


def _table(text: str) -> dict[str, list[float]]:
    rows = [line.strip("| ").split(" | ") for line in text.splitlines()
            if line.startswith("|") and not line.startswith("|---")]
    return {r[0]: [float(x.replace(",", "")) for x in r[1:]] for r in rows[1:]}


def test_report_answers_are_computed_from_the_tables() -> None:
    documents, questions = generate_reports(7, 6)
    assert len({q["question"] for q in questions}) == len(questions) == 48
    by_id = {d.id: d for d in documents}
    checked = 0
    for q in questions:
        doc = by_id[q["doc"]]
        gold = parse_numbers(q["answers"][0])
        if total := re.search(r"total revenue of the (\w+) region", q["question"]):
            revenue = _table(doc.sections[1].text)
            assert gold[0].value == sum(revenue[total.group(1)])
            checked += 1
        elif unspent := re.search(r"did the (\w+) department leave unspent", q["question"]):
            _, budget, spent = _table(doc.sections[2].text)[unspent.group(1)]
            assert gold[0].value == budget - spent
            checked += 1
        elif change := re.search(r"did the (\w+) region's revenue change", q["question"]):
            first, _, last = _table(doc.sections[1].text)[change.group(1)]
            assert gold[0].value == round((last - first) / first * 100, 1)
            checked += 1
    assert checked >= 10


def test_search_finds_the_right_document_for_most_questions(env: DocQAEnvironment) -> None:
    tasks = [t for s in SPLITS for t in env.tasks(s)]
    found = sum(t.reference["docs"][0] in env.index.search(_question(t)) for t in tasks)
    assert found / len(tasks) > 0.85


# ----------------------------------------------------------------------------- scoring


@pytest.mark.parametrize(
    ("answer", "gold", "hard", "soft"),
    [("4512", "4,512", 1.0, 1.0), ("$4,512 thousand", "4,512", 1.0, 1.0),
     ("4,516", "4,512", 1.0, 1.0),  # within 0.1%
     ("4,600", "4,512", 0.0, 0.0), ("12.34%", "12.3%", 1.0, 1.0), ("12.3", "12.3%", 1.0, 1.0),
     ("12.4%", "12.3%", 0.0, 0.0), ("-3.2", "-3.2%", 1.0, 1.0), ("3.2", "-3.2%", 0.0, 0.0),
     ("4,500,000", "4.5 million", 1.0, 1.0), ("1988", "1987", 0.0, 0.0),
     ("3", "three", 1.0, 1.0), ("The total was 4,512", "4,512", 0.0, 1.0),
     ("European Central Bank", "European Central Bank", 1.0, 1.0),
     ("Atlantis", "European Central Bank", 0.0, 0.0)],
)
def test_scoring_numbers_with_tolerance_and_text(answer: str, gold: str, hard: float,
                                                 soft: float) -> None:
    verdict = score_answer(answer, [gold], tolerance=0.001)
    assert (verdict.hard, round(verdict.soft, 3)) == (hard, soft)


def test_score_notes_say_what_is_wrong() -> None:
    assert "extra words" in score_answer("The total was 4,512", ["4,512"], 0.001).note
    assert "off from the gold 4,512" in score_answer("4,600", ["4,512"], 0.001).note
    assert "no number" in score_answer("many", ["4,512"], 0.001).note
    assert score_answer("4,600", ["4,512"], 0.05).hard == 1.0  # a looser tolerance


# ----------------------------------------------------------------------------- tools, rollouts


def test_tools_list_read_and_refuse_bad_ids(env: DocQAEnvironment) -> None:
    doc = next(iter(env.index.documents.values()))
    listing = env.index.open_document(f"[{doc.id.upper()}]")
    assert f"{len(doc.sections)} sections" in listing and "2. " in listing
    assert doc.sections[1].text[:50] in env.index.read_section(doc.id, "2")
    model = ScriptedModel([_act("read_section", doc="nope", section=1),
                           _act("read_section", doc=doc.id, section=99), "ANSWER: x"])
    task = env.tasks("test")[0]
    result = env.rollout(task, env.initial_skill(), model)
    observations = [m.text() for m in result.messages if m.text().startswith("OBSERVATION:")]
    assert "there is no document 'nope'" in observations[0]
    assert f"has sections 1 to {len(doc.sections)}" in observations[1]
    assert "2 of 2 tool calls failed (first: read_section: error: there is no document" \
        in result.reason


def _gold_path(task: Task) -> tuple[str, int]:
    doc = task.reference["docs"][0]
    return doc, task.reference["sections"][doc][0]


def test_a_reading_agent_is_right_and_others_get_reasons(env: DocQAEnvironment) -> None:
    task = next(t for t in env.tasks("test") if t.id.startswith("report-")
                and re.search(r"total|unspent", t.prompt))
    gold = task.reference["answers"][0]
    doc, section = _gold_path(task)
    right = env.rollout(task, env.initial_skill(), ScriptedModel(
        [_act("search", query=_question(task)), _act("read_section", doc=doc, section=section),
         f"ANSWER: {gold}"]))
    assert right.hard == 1.0 and right.turns == 3 and right.metadata["read"] == [[doc, section]]
    guess = env.rollout(task, env.initial_skill(), ScriptedModel(["ANSWER: 12"]))
    assert guess.hard == 0.0 and "it never searched" in guess.reason and gold in guess.reason
    other = 1 if section != 1 else 2
    wrong_section = env.rollout(task, env.initial_skill(), ScriptedModel(
        [_act("read_section", doc=doc, section=other), "ANSWER: 12"]))
    assert f"the answer is in section {section}" in wrong_section.reason
    assert "which it never read" in wrong_section.reason
    wordy = env.rollout(task, env.initial_skill(), ScriptedModel(
        [_act("read_section", doc=doc, section=section), f"ANSWER: The value is {gold}"]))
    assert wordy.hard == 0.0 and wordy.soft == 1.0 and "extra words" in wordy.reason
    elsewhere = next(d for d in env.index.documents if d != doc)
    lost = env.rollout(task, env.initial_skill(), ScriptedModel(
        [_act("open_document", doc=elsewhere), "ANSWER: 12"]))
    assert f"it never found the document holding the answer, {doc}" in lost.reason


def test_running_out_of_turns_is_a_scored_failure(env: DocQAEnvironment) -> None:
    task = env.tasks("val")[0]
    model = ScriptedModel(default=_act("search", query="anything at all"))
    result = env.rollout(task, env.initial_skill(), model)
    assert result.hard == 0.0 and result.turns == 6
    assert "no answer within 6 turns" in result.reason


def test_native_tool_mode(env: DocQAEnvironment) -> None:
    task = env.tasks("test")[0]
    doc, section = _gold_path(task)
    call = {"id": "c1", "type": "function", "function": {
        "name": "read_section", "arguments": json.dumps({"doc": doc, "section": section})}}
    model = ScriptedModel([Completion(text="", tool_calls=[call]),
                           Completion(text=task.reference["answers"][0])])
    native = DocQAEnvironment({s: env.tasks(s) for s in SPLITS}, env.index,
                              DocQAOptions(tool_mode="native"))
    result = native.rollout(task, native.initial_skill(), model)
    assert result.hard == 1.0 and model.calls[0].tools is not None
    assert any(m.role == "tool" for m in result.messages)


# ----------------------------------------------------------------------------- own data


def _collection(n_docs: int) -> dict[str, Any]:
    docs = [{"id": f"d{i}", "title": f"Memo {i} on topic{i}",
             "sections": [{"title": "Intro", "text": f"Memo {i} covers topic{i}."},
                          {"title": "Numbers", "text": f"The count for topic{i} is {10 * i}."}]}
            for i in range(n_docs)]
    questions = [{"id": f"q{i}", "question": f"What is the count for topic{i}?",
                  "answers": [str(10 * i)], "doc": f"d{i}", "sections": [2]}
                 for i in range(n_docs)]
    return {"documents": docs, "questions": questions}


def test_own_file_and_split_dir(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps(_collection(10)))
    env = DocQAEnvironment.create(EnvCommon(name=ENV_NAME),
                                  DocQAOptions(data_path=Path("c.json")), tmp_path)
    assert sum(len(env.tasks(s)) for s in SPLITS) == 10 and len(env.index.documents) == 10
    folder = tmp_path / "splits"
    folder.mkdir()
    for split in SPLITS:
        data = _collection(3)
        for d in data["documents"]:
            d["id"] = f"{split}-{d['id']}"
        for q in data["questions"]:
            q["doc"], q["id"] = f"{split}-{q['doc']}", f"{split}-{q['id']}"
        (folder / f"{split}.json").write_text(json.dumps(data))
    env = DocQAEnvironment.create(
        EnvCommon(name=ENV_NAME, split_mode="split_dir", split_dir=folder), DocQAOptions(),
        tmp_path)
    assert [len(env.tasks(s)) for s in SPLITS] == [3, 3, 3]
    assert env.tasks("val")[0].reference["docs"] == ["val-d0"]


@pytest.mark.parametrize(
    ("content", "problem"),
    [("{", "not a JSON file"), ('{"documents": []}', "not doc_qa format"),
     ('{"documents": [{"id": "d"}], "questions": []}', "document 0: expected id, title"),
     ('{"documents": [{"id": "d", "title": "t", "sections": []}], "questions": []}',
      "document 'd' has no sections"),
     ('{"documents": [], "questions": []}', "no questions"),
     ('{"documents": [], "questions": [{"id": "q", "question": "?", "answers": ["1"], '
      '"doc": "x"}]}', "question 'q' names unknown document 'x'"),
     ('{"documents": [{"id": "d", "title": "t", "sections": [{"title": "a", "text": "b"}]}], '
      '"questions": [{"id": "q", "question": "?", "answers": ["1"], "doc": "d", '
      '"sections": [3]}]}', "question 'q': 'd' has no section 3")],
)
def test_bad_data_names_the_file(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(DataError, match=f"bad.json: {re.escape(problem)}"):
        load_collection(path)


def test_missing_file_and_builtin_only_keys(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nope.json: file not found"):
        DocQAEnvironment.create(EnvCommon(name=ENV_NAME),
                                DocQAOptions(data_path=Path("nope.json")), tmp_path)
    with pytest.raises(ValidationError, match="env.companies applies only to the built-in"):
        DocQAOptions(data_path=Path("c.json"), companies=3)
    with pytest.raises(ValidationError):
        DocQAOptions(parts=("wikipedia",))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="env.companies: only for the built-in collection"):
        DocQAEnvironment.create(EnvCommon(name=ENV_NAME, split_mode="split_dir",
                                          split_dir=tmp_path), DocQAOptions(companies=2), tmp_path)


def test_a_long_section_says_where_it_was_cut(tmp_path: Path) -> None:
    data = _collection(10)
    data["documents"][0]["sections"][1]["text"] = "word " * 100
    (tmp_path / "c.json").write_text(json.dumps(data))
    env = DocQAEnvironment.create(EnvCommon(name=ENV_NAME), DocQAOptions(
        data_path=Path("c.json"), section_chars=120), tmp_path)
    assert env.index.read_section("d0", 2).endswith("… (cut at 120 of 500 characters)")


# ----------------------------------------------------------------------------- a training run

ORACLE: dict[str, dict[str, Any]] = {}


def doc_qa_target(request: ChatRequest) -> str:
    """Reads the section the first search hit points to only when the skill says so; answers
    with the gold when what it read holds the answer."""
    skill = request.messages[0].text()
    question = request.messages[1].text()
    if READ_RULE not in skill:
        return "ANSWER: I am not sure"
    last = request.messages[-1].text()
    if len(request.messages) == 2:
        return _act("search", query=question[len("Question: "):])
    if len(request.messages) == 4:  # the search results: read the first hit's best section
        hit = re.search(r"^\[(\S+)\] .*\n  section (\d+)", last, re.MULTILINE)
        if hit is None:
            return "ANSWER: unknown"
        return _act("read_section", doc=hit.group(1), section=int(hit.group(2)))
    ref = ORACLE[question]
    doc = ref["docs"][0]
    read = re.search(r"^\[(\S+)\] section (\d+) of", last, re.MULTILINE)
    if read and read.group(1) == doc and int(read.group(2)) in ref["sections"].get(doc, []):
        return f"ANSWER: {ref['answers'][0]}"
    return "ANSWER: unknown"


doc_qa_optimizer = rule_optimizer(READ_RULE, support=4, cue="it never searched")


def test_one_epoch_of_training_learns_to_read(tmp_path: Path, env: DocQAEnvironment) -> None:
    ORACLE.update({t.prompt: t.reference for s in SPLITS for t in env.tasks(s)})
    train_end_to_end(tmp_path, one_epoch({"name": ENV_NAME}, 8, steps_per_epoch=2, eval_tasks=16),
                     target="test_doc_qa:doc_qa_target", optimizer="test_doc_qa:doc_qa_optimizer",
                     rule=READ_RULE, best_above=0.5)
