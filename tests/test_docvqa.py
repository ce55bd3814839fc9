"""The docvqa environment: DocVQA's annotation format, document-grouped splits, images sent as
data URIs (through the real OpenAI SDK to a local server), ANLS scoring with reasons, bad data,
text-only backends refusing images, and a short training run with scripted models."""

from __future__ import annotations

import base64
import csv
import io
import json
import logging
import shutil
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e import one_epoch, rule_optimizer, train_end_to_end

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.envs.base import EnvCommon
from skillgrad.envs.docvqa import DocVQAEnvironment, DocVQAOptions, load_docvqa
from skillgrad.envs.scoring import anls, levenshtein
from skillgrad.errors import ConfigError, DataError, FatalModelError, ScriptExhausted
from skillgrad.models.command import CommandBackend, CommandOptions
from skillgrad.models.messages import ChatRequest, Completion, Message
from skillgrad.models.openai_compat import OpenAICompatibleBackend, OpenAICompatibleOptions
from skillgrad.models.scripted import ScriptedModel
from skillgrad.models.store import request_key
from skillgrad.testing import FakeOpenAIServer

COPY_RULE = "Answer with the exact text printed on the page, nothing else."
ENV_NAME = "skillgrad.envs.docvqa:DocVQAEnvironment"


# ----------------------------------------------------------------------------- data


def png(width: int, height: int, shade: int) -> bytes:
    """A valid greyscale PNG (no Pillow needed): signature, IHDR, one IDAT, IEND."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    rows = b"".join(b"\x00" + bytes([(shade + x + y) % 256 for x in range(width)])
                    for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0,
                                                             0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def record(qid: int, doc: str, page: int, question: str, answers: list[str]) -> dict[str, Any]:
    return {"questionId": qid, "question": question, "docId": qid // 2 + 1000,
            "ucsf_document_id": doc, "ucsf_document_page_no": str(page),
            "image": f"documents/{doc}_p{page}.png", "answers": answers,
            "question_types": ["form"], "data_split": "val"}


def write_set(folder: Path, name: str, n_docs: int, start: int = 0,
              answers: bool = True) -> Path:
    """A DocVQA-format annotation file with ``n_docs`` two-page documents, one question per
    page, and its images under ``documents/``."""
    (folder / "documents").mkdir(parents=True, exist_ok=True)
    data = []
    for d in range(start, start + n_docs):
        doc = f"d{d:03d}"
        for page in (1, 2):
            (folder / "documents" / f"{doc}_p{page}.png").write_bytes(png(6, 4, d * 2 + page))
            rec = record(d * 10 + page, doc, page, f"What is the total on page {page} of {doc}?",
                         [f"${d},{page}00", f"{d},{page}00 dollars"])
            if not answers:
                del rec["answers"]
            data.append(rec)
    path = folder / name
    path.write_text(json.dumps({"dataset_name": "docvqa", "dataset_split": "val",
                                "dataset_version": "1.0", "data": data}))
    return path


def parts(message: Message) -> list[dict[str, Any]]:
    assert isinstance(message.content, list), message.content
    return message.content


def make_env(path: Path, base_dir: Path, **options: Any) -> DocVQAEnvironment:
    return DocVQAEnvironment.create(EnvCommon(name=ENV_NAME),
                                    DocVQAOptions(data_path=path, **options), base_dir)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return write_set(tmp_path / "val", "val_v1.0.json", 10)


# ----------------------------------------------------------------------------- ANLS


def test_levenshtein() -> None:
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == levenshtein("abc", "") == 3
    assert levenshtein("same", "same") == 0


def test_anls_exact_near_miss_threshold_and_several_golds() -> None:
    assert anls("  Denver   BRONCOS ", ["denver broncos"]) == 1.0  # case and spaces ignored
    assert anls("$1.000", ["$1,000"]) == pytest.approx(1 - 1 / 6)  # one misread character
    assert anls("banana", ["apple"]) == 0.0  # far off: wrong, not partly right
    assert anls("ab", ["ac"]) == 0.0  # NL = 0.5 is not below tau
    assert anls("ab", ["ac"], tau=0.6) == pytest.approx(0.5)
    assert anls("Dr. Lobo", ["Dear Dr. Lobo", "dr. lobo"]) == 1.0  # best gold counts
    assert anls("12/15/89", ["12/15/88", "nothing alike"]) == pytest.approx(7 / 8)
    assert anls("", [""]) == 1.0 and anls("", ["x"]) == 0.0 and anls("x", []) == 0.0


# ----------------------------------------------------------------------------- loading


def test_ratio_split_keeps_documents_together(data: Path, tmp_path: Path) -> None:
    env = make_env(Path("val/val_v1.0.json"), tmp_path)  # relative to the config folder
    tasks = {s: env.tasks(s) for s in ("train", "val", "test")}
    assert sum(len(t) for t in tasks.values()) == 20
    assert all(tasks.values())
    docs = {s: {t.group for t in ts} for s, ts in tasks.items()}
    assert not (docs["train"] & docs["val"] or docs["train"] & docs["test"]
                or docs["val"] & docs["test"])
    task = tasks["train"][0]
    assert task.prompt.startswith("Question: What is the total on page")
    assert Path(task.metadata["image"]) == data.parent / task.metadata["source"]
    assert task.group is not None and task.group.startswith("ucsf_document_id:")


def test_split_dir_with_the_official_layout(tmp_path: Path) -> None:
    root = tmp_path / "docvqa"
    write_set(root / "train", "train_v1.0.json", 4)
    write_set(root / "val", "val_v1.0.json", 2, start=10)
    write_set(root / "test", "test_v1.0.json", 2, start=20)
    env = DocVQAEnvironment.create(
        EnvCommon(name=ENV_NAME, split_mode="split_dir", split_dir=Path("docvqa")),
        DocVQAOptions(), tmp_path)
    assert [len(env.tasks(s)) for s in ("train", "val", "test")] == [8, 4, 4]
    assert Path(env.tasks("val")[0].metadata["image"]).parent == root / "val" / "documents"


def test_official_test_annotations_without_answers_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "docvqa"
    write_set(root / "train", "train_v1.0.json", 4)
    write_set(root / "val", "val_v1.0.json", 2, start=10)
    write_set(root / "test", "test_v1.0.json", 2, start=20, answers=False)
    with pytest.raises(DataError, match=r"test_v1\.0\.json: record 1: no 'answers' "
                       r"\(the official DocVQA test annotations withhold"):
        DocVQAEnvironment.create(
            EnvCommon(name=ENV_NAME, split_mode="split_dir", split_dir=root), DocVQAOptions(),
            tmp_path)


def test_duplicate_question_ids_across_splits(tmp_path: Path) -> None:
    root = tmp_path / "docvqa"
    write_set(root / "train", "train.json", 3)
    write_set(root / "val", "val.json", 1)  # same ids as train's first document
    write_set(root / "test", "test.json", 1, start=9)
    with pytest.raises(DataError, match=r"val\.json: record 1: questionId '1' duplicates "
                       r".*train\.json: record 1"):
        DocVQAEnvironment.create(
            EnvCommon(name=ENV_NAME, split_mode="split_dir", split_dir=root), DocVQAOptions(),
            tmp_path)


def _edit(path: Path, change: Any) -> None:
    obj = json.loads(path.read_text())
    change(obj)
    path.write_text(json.dumps(obj))


@pytest.mark.parametrize(("change", "problem"), [
    (lambda o: o["data"][1].pop("question"), r"record 2: key 'question' must be a "
     r"non-empty string \(missing\)"),
    (lambda o: o["data"][0].pop("questionId"), r"record 1: key 'questionId'"),
    (lambda o: o["data"][0].pop("image"), r"record 1: key 'image' must be a path"),
    (lambda o: o["data"][2].update(answers="$1"), r"record 3: key 'answers' must be a "
     r"non-empty list"),
    (lambda o: o["data"][2].update(answers=[]), r"record 3: key 'answers'"),
    (lambda o: o["data"][3].update(image="documents/nope.png"),
     r"record 4: image 'documents/nope.png' not found"),
    (lambda o: o["data"][0].update(question_types="form"), r"record 1: key 'question_types' must be a list"),
])
def test_bad_records_name_the_file_and_record(data: Path, change: Any, problem: str) -> None:
    _edit(data, change)
    with pytest.raises(DataError, match=f"val_v1.0.json: {problem}"):
        load_docvqa(data)


@pytest.mark.parametrize(("content", "problem"), [
    ('{"dataset_name": "docvqa", "questions": []}', "top level is an object with none of"),
    ('["a", "b"]', "record 1 is a string"),
    ("{", "invalid JSON"),
])
def test_wrong_top_level_is_one_error_naming_the_file(tmp_path: Path, content: str,
                                                       problem: str) -> None:
    path = tmp_path / "ann.json"
    path.write_text(content)
    with pytest.raises(DataError, match=f"ann.json: {problem}"):
        load_docvqa(path)


def test_a_file_that_is_not_an_image_is_refused_at_load(data: Path) -> None:
    (data.parent / "documents" / "d000_p1.png").write_bytes(b"<html>not found</html>")
    with pytest.raises(DataError, match=r"val_v1.0.json: record 1: image "
                       r"'documents/d000_p1.png' is not a PNG, JPEG"):
        load_docvqa(data)


def test_missing_data_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="env.data_path is required.*not bundled"):
        DocVQAEnvironment.create(EnvCommon(name=ENV_NAME), DocVQAOptions(), tmp_path)


def test_tiff_without_pillow_is_refused_at_load(data: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (data.parent / "documents" / "d001_p2.png").write_bytes(b"II*\x00" + b"\x00" * 64)
    monkeypatch.setitem(sys.modules, "PIL", None)  # as if Pillow were not installed
    with pytest.raises(DataError, match=r"record 4: image 'documents/d001_p2.png' is "
                       r"TIFF, which OpenAI-compatible APIs do not accept; install Pillow"):
        load_docvqa(data)


def test_tiff_is_sent_as_png_when_pillow_is_installed(data: Path, tmp_path: Path) -> None:
    image_mod = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    image_mod.new("CMYK", (5, 3)).save(buf, format="TIFF")
    (data.parent / "documents" / "d000_p1.png").write_bytes(buf.getvalue())
    env = make_env(data, tmp_path)
    task = next(t for s in ("train", "val", "test") for t in env.tasks(s) if t.id == "1")
    model = ScriptedModel(["Answer: $0,100"])
    assert env.rollout(task, env.initial_skill(), model).hard == 1.0
    url = parts(model.calls[0].messages[1])[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]).startswith(b"\x89PNG")


# ----------------------------------------------------------------------------- rollouts


def test_rollout_sends_the_image_and_scores_by_anls(data: Path, tmp_path: Path) -> None:
    env = make_env(data, tmp_path)
    task = env.tasks("test")[0]
    gold = task.reference["answers"][0]
    model = ScriptedModel([f"Answer: {gold}"])
    right = env.rollout(task, env.initial_skill(), model)
    assert (right.hard, right.soft, right.reason) == (1.0, 1.0, "")
    sent = model.calls[0].messages
    assert sent[0] == Message(role="system", content=env.initial_skill())
    text, image = parts(sent[1])
    assert text == {"type": "text", "text": task.prompt}
    assert image["type"] == "image_url" and "detail" not in image["image_url"]
    prefix, encoded = image["image_url"]["url"].split(",", 1)
    assert prefix == "data:image/png;base64"
    assert base64.b64decode(encoded) == Path(task.metadata["image"]).read_bytes()
    # The kept trajectory names the image instead of carrying it.
    kept = json.dumps([m.model_dump() for m in right.messages])
    assert "base64" not in kept and task.metadata["source"] in right.messages[1].text()
    assert right.metadata["image"] == task.metadata["source"]


def test_wrong_answers_get_reasons_the_optimizer_can_use(data: Path, tmp_path: Path) -> None:
    env = make_env(data, tmp_path)
    task = env.tasks("val")[0]
    gold = task.reference["answers"][0]
    near = gold.replace(",", ".")
    miss = env.rollout(task, "", ScriptedModel([near]))
    assert miss.hard == 0.0 and 0.5 < miss.soft < 1.0
    assert "near miss: 1 character edit(s)" in miss.reason and repr(gold) in miss.reason
    assert "hard needs ANLS >= 1" in miss.reason and "[question type: form]" in miss.reason
    chatty = env.rollout(task, "", ScriptedModel([f"The total shown is {gold}."]))
    assert chatty.hard == 0.0 and "gold text plus extra words" in chatty.reason
    far = env.rollout(task, "", ScriptedModel(["Paris"]))
    assert far.soft == 0.0 and "no gold answer is close" in far.reason
    cut = env.rollout(task, "", ScriptedModel([Completion(text="The", finish_reason="length")]))
    assert "cut off at the token limit (max_tokens=64)" in cut.reason
    lenient = make_env(data, tmp_path, anls_threshold=0.8)
    assert lenient.rollout(task, "", ScriptedModel([near])).hard == 1.0


def test_image_detail_is_sent_and_model_failures_propagate(data: Path, tmp_path: Path) -> None:
    env = make_env(data, tmp_path, image_detail="low")
    model = ScriptedModel(["x"])
    env.rollout(env.tasks("test")[0], "", model)
    assert parts(model.calls[0].messages[1])[1]["image_url"]["detail"] == "low"
    with pytest.raises(ScriptExhausted):
        env.rollout(env.tasks("test")[0], "", ScriptedModel())


def test_data_uri_reaches_an_openai_compatible_server(data: Path, tmp_path: Path) -> None:
    env = make_env(data, tmp_path)
    task = env.tasks("test")[0]
    gold = task.reference["answers"][0]
    with FakeOpenAIServer(responder=lambda body: f"Answer: {gold}") as server:
        model = OpenAICompatibleBackend.create(
            OpenAICompatibleOptions(base_url=server.url, model="vision"), tmp_path)
        try:
            result = env.rollout(task, env.initial_skill(), model)
        finally:
            model.close()
    assert result.hard == 1.0
    (body,) = server.requests
    assert body["messages"][0] == {"role": "system", "content": env.initial_skill()}
    text, image = body["messages"][1]["content"]
    assert text == {"type": "text", "text": task.prompt}
    url = image["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == Path(task.metadata["image"]).read_bytes()


def test_request_key_covers_the_image(data: Path, tmp_path: Path) -> None:
    env = make_env(data, tmp_path)
    requests = []
    for task in env.tasks("test")[:2]:
        model = ScriptedModel(["x"])
        env.rollout(task.model_copy(update={"prompt": "Question: same"}), "", model)
        requests.append(model.calls[0])
    again = ChatRequest.model_validate_json(requests[0].model_dump_json())
    assert again == requests[0]  # list content round-trips through the journal's JSON
    assert request_key("target", again) == request_key("target", requests[0])
    assert request_key("target", requests[0]) != request_key("target", requests[1])


# ----------------------------------------------------------------------------- text-only backends


def _image_request() -> ChatRequest:
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    return ChatRequest(messages=(Message(role="system", content="skill"), Message(
        role="user", content=[{"type": "text", "text": "Question: q"}, part])))


def test_embedded_backend_refuses_images_in_one_line(tmp_path: Path,
                                                     fake_llama: list[dict[str, Any]]) -> None:
    calls = fake_llama
    from skillgrad.models.embedded import EmbeddedBackend, EmbeddedOptions

    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    model = EmbeddedBackend.create(EmbeddedOptions(model_path=Path("m.gguf")), tmp_path)
    with pytest.raises(FatalModelError) as info:
        model.complete(_image_request())
    assert str(info.value).startswith("embedded model has no vision: the request carries 1 "
                                      "non-text part(s) (image_url)")
    assert "\n" not in str(info.value) and calls == []
    text_only = ChatRequest(messages=(Message(role="user", content="hello"),))
    assert model.complete(text_only).text == "ok" and len(calls) == 1


def test_command_backend_refuses_images(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    model = CommandBackend.create(CommandOptions(argv=[
        sys.executable, "-c", f"open({str(marker)!r}, 'w').write('x')"]), tmp_path)
    with pytest.raises(FatalModelError, match=r"^command backend is text only: the request "
                       r"carries 1 non-text part\(s\) \(image_url\)"):
        model.complete(_image_request())
    assert not marker.exists()


@pytest.mark.parametrize("backend", ["embedded", "command"])
def test_config_with_a_text_only_target_is_refused_before_loading(
    tmp_path: Path, backend: str
) -> None:
    target: dict[str, Any] = {"backend": backend}
    if backend == "command":
        target["argv"] = ["agent"]
    config = {"env": {"name": ENV_NAME, "data_path": "missing.json"},
              "model": {"target": target}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    # A ConfigError, not the DataError of the missing file: refused before any data is read.
    with pytest.raises(ConfigError, match=f"model.target.backend '{backend}' has no vision"):
        build_environment(load_config(tmp_path / "c.yaml"))


def test_config_with_a_scripted_target_builds(data: Path, tmp_path: Path) -> None:
    config = {"env": {"name": ENV_NAME, "data_path": str(data)},
              "model": {"target": {"backend": "scripted", "default": "x"}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    env = build_environment(load_config(tmp_path / "c.yaml"))
    assert isinstance(env, DocVQAEnvironment) and len(env.tasks("train")) > 0


# ----------------------------------------------------------------------------- a training run

ORACLE: dict[str, list[str]] = {}


def docvqa_target(request: ChatRequest) -> str:
    """Reads the page only when it was sent; copies the text exactly only when the skill says
    so, otherwise answers in a sentence (ANLS then scores it wrong)."""
    skill = request.messages[0].text()
    user = request.messages[1]
    images = [] if isinstance(user.content, str) else [
        p for p in user.content if p.get("type") == "image_url"
        and p["image_url"]["url"].startswith("data:image/png;base64,")]
    if not images:
        return "I cannot see any document."
    gold = ORACLE[user.text()][0]
    return f"Answer: {gold}" if COPY_RULE in skill else f"The document says the total is {gold}."


docvqa_optimizer = rule_optimizer(COPY_RULE, support=4, cue="plus extra words")


def test_one_epoch_of_training_learns_to_copy_the_answer(tmp_path: Path) -> None:
    path = write_set(tmp_path / "val", "val_v1.0.json", 30)
    env = make_env(path, tmp_path)
    ORACLE.update({t.prompt: t.reference["answers"] for s in ("train", "val", "test")
                   for t in env.tasks(s)})
    config = one_epoch({"name": ENV_NAME, "data_path": "val/val_v1.0.json"}, 8,
                       steps_per_epoch=2, eval_tasks=12)
    train_end_to_end(tmp_path, config, target="test_docvqa:docvqa_target",
                     optimizer="test_docvqa:docvqa_optimizer", rule=COPY_RULE)


# ----------------------------------------------------------------------------- SkillOpt's layout

SKILLOPT = Path(__file__).parent / "fixtures" / "skillopt" / "docvqa"
CSV_SPLITS = Path("data/docvqa/splits")


def skillopt_env(base_dir: Path = SKILLOPT, **options: Any) -> DocVQAEnvironment:
    """The env as SkillOpt's config names it; its image paths are relative to ``base_dir``
    (the folder SkillOpt runs in), hence ``image_root: .``."""
    common = EnvCommon(name=ENV_NAME, split_mode="split_dir", split_dir=CSV_SPLITS)
    return DocVQAEnvironment.create(
        common, DocVQAOptions(**{"image_root": Path("."), **options}), base_dir)


def copy_skillopt(tmp_path: Path) -> Path:
    shutil.copytree(SKILLOPT / "data", tmp_path / "data")
    return tmp_path


def edit_csv(path: Path, change: Any) -> None:
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    change(rows)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_skillopt_csv_splits_load_with_either_column_names() -> None:
    env = skillopt_env()
    tasks = {s: {t.id: t for t in env.tasks(s)} for s in ("train", "val", "test")}
    assert {s: list(ts) for s, ts in tasks.items()} == {
        "train": ["101", "102", "103", "104"], "val": ["201", "202"], "test": ["301", "302"]}
    first = tasks["train"]["101"]
    assert first.prompt == "Question: What is written in box 101 of the page?"
    assert first.reference["answers"] == ["$1,200", "1200"]  # a list literal, commas kept
    assert Path(first.metadata["image"]) == SKILLOPT / "data" / "docvqa_images" / "q101_d11.png"
    assert first.metadata["source"] == "data/docvqa_images/q101_d11.png"
    assert first.metadata["where"].endswith("train/questions.csv: row 2")
    second = tasks["train"]["102"]
    assert second.group == first.group == "ucsf_document_id:abcd0001"  # two pages, one doc
    assert second.metadata["question_types"] == ["handwritten", "form"]  # topic a|b
    # test/ has id, ground_truth, category and the image inside the question.
    alt = tasks["test"]["301"]
    assert alt.prompt == "Question: What is written in box 301 of the page?"
    assert alt.reference["answers"] == ["4,500"]
    assert alt.metadata["question_types"] == ["table/list"]
    assert Path(alt.metadata["image"]) == SKILLOPT / "data" / "docvqa_images" / "q301_d31.png"


def test_image_paths_default_to_the_csvs_folder(tmp_path: Path) -> None:
    with pytest.raises(DataError) as info:
        skillopt_env(image_root=None)
    assert str(info.value).startswith(f"{SKILLOPT / CSV_SPLITS / 'train' / 'questions.csv'}: "
                                      "row 2: image 'data/docvqa_images/q101_d11.png' not found "
                                      f"(looked for {SKILLOPT / CSV_SPLITS / 'train' / 'data'}")
    # A CSV with its pages beside it needs no image_root, in ratio mode too.
    (tmp_path / "page.png").write_bytes(png(4, 4, 9))
    rows = "".join(f'{q},Total {q}?,"[\'{q}\']",page.png,form,{q}\n' for q in range(1, 6))
    (tmp_path / "q.csv").write_text("questionId,question,answer,image_path,topic,docId\n" + rows)
    env = make_env(Path("q.csv"), tmp_path)
    assert sum(len(env.tasks(s)) for s in ("train", "val", "test")) == 5
    assert Path(env.tasks("test")[0].metadata["image"]) == tmp_path / "page.png"


def test_image_root_is_checked_and_only_for_csv(data: Path, tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"nowhere: env.image_root is not a folder"):
        skillopt_env(image_root=Path("nowhere"))
    with pytest.raises(ConfigError, match=r"val_v1.0.json is an annotation file .* remove "
                       "env.image_root"):
        make_env(data, tmp_path, image_root=tmp_path)
    with pytest.raises(ConfigError, match=r"env.data_path is not used when env.split_mode is "
                       "'split_dir'"):
        skillopt_env(data_path=Path("q.csv"))


@pytest.mark.parametrize(("change", "problem"), [
    (lambda r: r[1].update(answer="['a', 'b'"), r"row 3: answer is not a Python list literal"),
    (lambda r: r[0].update(answer="[__import__('os').getcwd()]"),
     r"row 2: answer is not a Python list literal"),
    (lambda r: r[0].update(answer="['a', ['b']]"), r"row 2: answer holds \['b'\]; expected "
     "strings"),
    (lambda r: r[0].update(answer="[' ']"), r"row 2: answer lists no non-empty answer"),
    (lambda r: r[3].update(answer=""), r"row 5: answer is empty"),
    (lambda r: r[0].update(questionId=" "), r"row 2: empty questionId"),
    (lambda r: r[2].update(question="document_path:x.png"), r"row 4: empty question"),
    (lambda r: r[0].update(image_path=""), r"row 2: no image \(image_path is empty and the "
     "question has no document_path:<path>\\)"),
    (lambda r: r[0].update(image_path="data/docvqa_images/none.png"),
     r"row 2: image 'data/docvqa_images/none.png' not found"),
    (lambda r: [row.pop("answer") for row in r], r"missing column answer \(or ground_truth\) "
     r"\(found: questionId, question, image_path"),
])
def test_bad_csv_rows_name_the_file_and_row(tmp_path: Path, change: Any, problem: str) -> None:
    base = copy_skillopt(tmp_path)
    edit_csv(base / CSV_SPLITS / "train" / "questions.csv", change)
    with pytest.raises(DataError, match=r"train/questions.csv: " + problem) as info:
        skillopt_env(base)
    assert "\n" not in str(info.value)


def test_bad_csv_shapes_and_layouts(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    base = copy_skillopt(tmp_path)
    val = base / CSV_SPLITS / "val" / "questions.csv"
    edit_csv(val, lambda r: r[0].update(questionId="101"))
    with pytest.raises(DataError, match=r"val/questions.csv: row 2: questionId '101' duplicates "
                       r".*train/questions.csv: row 2"):
        skillopt_env(base)
    val.write_text(val.read_text().replace("efgh0002,1,validation", "efgh0002,1,validation,x"))
    with pytest.raises(DataError, match=r"val/questions.csv: row 3: 10 fields, the header has 9"):
        skillopt_env(base)
    val.write_text(val.read_text().splitlines()[0] + "\n")
    with pytest.raises(DataError, match=r"val/questions.csv: no question rows after the header"):
        skillopt_env(base)
    val.rename(val.with_suffix(".json"))
    with pytest.raises(DataError, match=r"splits: train/, test/ hold a .csv of questions but "
                       r"val/ do not"):
        skillopt_env(base)
    # SkillOpt reads the first CSV by name and nothing else; what is left out is named.
    shutil.copy(SKILLOPT / CSV_SPLITS / "val" / "questions.csv", val)
    (base / CSV_SPLITS / "val" / "z_more.csv").write_text("not,read\n")
    with caplog.at_level(logging.WARNING):
        env = skillopt_env(base)
    assert [t.id for t in env.tasks("val")] == ["201", "202"]
    assert "reading the questions of questions.csv; ignoring z_more.csv, questions.json" in (
        caplog.text)


def test_a_scripted_rollout_on_a_skillopt_row(tmp_path: Path) -> None:
    env = skillopt_env()
    task = env.tasks("train")[0]
    model = ScriptedModel(["Answer: $1,200"])
    right = env.rollout(task, env.initial_skill(), model)
    assert (right.hard, right.soft, right.reason) == (1.0, 1.0, "")
    image = parts(model.calls[0].messages[1])[1]["image_url"]
    assert "detail" not in image  # image_detail auto: SkillOpt sends none
    assert base64.b64decode(image["url"].split(",", 1)[1]) == Path(
        task.metadata["image"]).read_bytes()
    wrong = env.rollout(task, "", ScriptedModel(["Answer: $1,280"]))
    assert wrong.hard == 0.0 and 0.5 < wrong.soft < 1.0 and "near miss" in wrong.reason
    high = ScriptedModel(["x"])
    skillopt_env(image_detail="high").rollout(task, "", high)
    assert parts(high.calls[0].messages[1])[1]["image_url"]["detail"] == "high"


def test_skillopt_keys_in_a_config_resolve_against_its_folder(tmp_path: Path) -> None:
    base = copy_skillopt(tmp_path / "checkout")
    config = {"env": {"name": ENV_NAME, "split_mode": "split_dir", "split_dir": str(CSV_SPLITS),
                      "image_root": ".", "image_detail": "auto"},
              "model": {"target": {"backend": "scripted", "default": "x"}}}
    (base / "c.yaml").write_text(yaml.safe_dump(config))
    env = build_environment(load_config(base / "c.yaml"))
    assert isinstance(env, DocVQAEnvironment)
    assert Path(env.tasks("val")[0].metadata["image"]) == base / "data" / "docvqa_images" / (
        "q201_d21.png")


def test_one_epoch_on_skillopt_csv_splits(tmp_path: Path) -> None:
    base = copy_skillopt(tmp_path)
    env = skillopt_env(base)
    ORACLE.update({t.prompt: t.reference["answers"] for s in ("train", "val", "test")
                   for t in env.tasks(s)})
    config = one_epoch({"name": ENV_NAME, "split_mode": "split_dir",
                        "split_dir": str(CSV_SPLITS), "image_root": "."}, 4, steps_per_epoch=1)
    train_end_to_end(base, config, target="test_docvqa:docvqa_target",
                     optimizer="test_docvqa:docvqa_optimizer", rule=COPY_RULE)
