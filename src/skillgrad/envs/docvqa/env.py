"""The ``docvqa`` environment: questions about document images in DocVQA's published format,
scored by ANLS.

In deep-learning terms it is a data set plus a loss: each record is one scanned page and one
question; the rollout is a single chat call whose user message carries the question and the
page image (an OpenAI ``image_url`` part holding a ``data:`` URI); the loss is DocVQA's ANLS
(``soft``) and ``hard = 1`` when ANLS reaches ``anls_threshold`` (default 1.0: the answer
equals a gold answer after lowercasing and collapsing whitespace, DocVQA's "accuracy").

**The target must see images.** The embedded model (llama.cpp, text only) has no vision, and
neither has the ``command`` backend: a config that pairs this environment with either is
refused before anything is loaded. Use ``backend: openai_compatible`` with a vision model.

Data (not bundled: the DocVQA images cannot be shipped here), in one of two formats:

* an annotation file as released by DocVQA, ``{"dataset_name": "docvqa", "dataset_split": ...,
  "data": [{"questionId": ..., "question": ..., "image": "documents/xxx.png", "docId": ...,
  "ucsf_document_id": ..., "ucsf_document_page_no": ..., "answers": [...],
  "question_types": [...]}, ...]}`` (a list of such records, or JSONL, also works); ``image``
  is relative to the annotation file's folder;
* a question CSV as SkillOpt materialises it (columns in :mod:`.csvfile`: ``questionId``,
  ``question``, ``answer`` as a list literal, ``image_path``, ``topic``, ``docId``, ...); a
  relative ``image_path`` is read from ``image_root`` when it is set, else from the CSV's
  folder. SkillOpt writes image paths relative to the folder it runs in (its checkout), so
  for its files set ``image_root`` to that folder.

* ``split_mode: ratio`` splits one file (``data_path``: ``val/val_v1.0.json`` or a ``.csv``)
  by document: all pages of one UCSF document (``ucsf_document_id``, else ``docId``, else the
  image) land in one split, so the gate never scores a page whose neighbour was trained on.
* ``split_mode: split_dir`` reads ``train/``, ``val/`` and ``test/``: either the layout of the
  official release (a folder or a ``<split>.json`` each, e.g. ``train/train_v1.0.json``
  beside ``train/documents/``), or SkillOpt's (``data/docvqa/splits``: each folder holds a
  ``.csv``, of which the first by name is read).

Every split is scored (train rollouts feed the optimizer, val gates, test reports), so every
record needs gold ``answers``. The official *test* annotations withhold them: a record
without answers is a :class:`~skillgrad.errors.DataError` naming the file and saying so
(never silently skipped, which would shrink a split unnoticed); carve a test split out of
train/val instead. Images are checked when the data is loaded: a missing file, or one that is
not PNG, JPEG, GIF, WEBP or TIFF by its first bytes, is a DataError naming the data file
and its record (or CSV row). OpenAI-compatible servers do not accept TIFF, so a TIFF page is
converted to PNG when Pillow is installed and refused at load time otherwise.

``image_detail: auto`` (the default) sends no ``detail`` with the image, as SkillOpt does;
``low`` or ``high`` is sent as the image's ``detail``.

The trajectory kept in a :class:`RolloutResult` names the image instead of holding its bytes,
so run directories and the optimizer's prompts stay small; the call journal keeps the full
request, which is what ``--replay`` needs.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions, Split, single_turn
from skillgrad.envs.data import (
    SplitTasksMixin,
    load_splits,
    located_records,
    require_nonempty,
    resolve_path,
    skill_file,
    warn_shared_groups,
)
from skillgrad.envs.docvqa.csvfile import read_questions, split_files
from skillgrad.envs.scoring import anls, anls_normalize, extract_final_answer, levenshtein
from skillgrad.errors import ConfigError, DataError
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Completion, Message
from skillgrad.records import RolloutResult, Task

# First bytes of each image format the chat APIs take (TIFF only after conversion).
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"),
    (b"II*\x00", "image/tiff"), (b"MM\x00*", "image/tiff"),
)
_NO_ANSWERS_HINT = ("the official DocVQA test annotations withhold their answers, so they "
                    "cannot be scored; use train/val files (e.g. split_mode ratio over "
                    "val_v1.0.json)")


class DocVQAOptions(EnvOptions):
    """The ``env:`` keys of ``docvqa``."""

    data_path: Path | None = Field(
        None, description="DocVQA annotation JSON (e.g. val/val_v1.0.json); required when "
        "split_mode is 'ratio'")
    anls_threshold: float = Field(
        1.0, gt=0.0, le=1.0, description="hard = 1 when ANLS >= this; 1.0: exact after "
        "lowercasing and whitespace collapsing (DocVQA accuracy)")
    image_root: Path | None = Field(
        None, description="the folder relative image paths in a question CSV are read from; "
        "unset: the CSV's own folder (for SkillOpt's CSVs: the folder SkillOpt runs in)")
    image_detail: Literal["auto", "low", "high"] = Field(
        "auto", description="auto: no detail is sent (the server decides); low / high: sent "
        "as the image's OpenAI detail level")
    max_tokens: int = Field(64, ge=1, description="token limit of the target's answer")
    temperature: float = Field(0.0, ge=0.0, description="sampling temperature of the target")


class DocVQAEnvironment(SplitTasksMixin[DocVQAOptions]):
    """Document-image question answering scored by ANLS; built from config with
    :meth:`create`, or directly from tasks made by :func:`load_docvqa`."""

    SKILL_PACKAGE = "skillgrad.envs.docvqa"
    Options: ClassVar[type[EnvOptions]] = DocVQAOptions
    needs_vision: ClassVar[bool] = True  # build.py refuses a text-only target backend

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> DocVQAEnvironment:
        if common.split_mode == "ratio" and options.data_path is None:
            raise ConfigError(
                "env.data_path is required when env.split_mode is 'ratio': DocVQA is not "
                "bundled; point it at an annotation file such as val/val_v1.0.json or at a "
                "question CSV, or use split_mode: split_dir with train/, val/ and test/")
        image_root = None
        if options.image_root is not None:
            image_root = resolve_path(options.image_root, base_dir)
            if not image_root.is_dir():
                raise DataError(f"{image_root}: env.image_root is not a folder")

        def loader(path: Path) -> list[Task]:
            return load_docvqa(path, image_root)

        splits = _csv_splits(common, options, Path(base_dir), loader)
        if splits is None:
            splits = load_splits(common, options.data_path, Path(base_dir), loader,
                                 lambda t: t.group)
        _check_unique_ids(splits)
        return cls(splits, options, skill_file(common, base_dir))

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        o = self.options
        image = task.metadata["image"]
        text_part = {"type": "text", "text": task.prompt}
        # No try/except: a model failure is infrastructure and must propagate, never be scored.
        detail = None if o.image_detail == "auto" else o.image_detail
        system, _, completion = single_turn(
            model, skill, [text_part, image_part(Path(image), detail)],
            max_tokens=o.max_tokens, temperature=o.temperature)
        golds = list(task.reference["answers"])
        answer = extract_final_answer(completion.text)
        soft = anls(answer, golds)
        hard = 1.0 if soft >= o.anls_threshold else 0.0
        # The kept trajectory names the image instead of carrying its bytes (see module doc).
        shown = Message(role="user", content=[
            text_part, {"type": "text", "text": f"\n[document image: {task.metadata['source']}]"}])
        return RolloutResult(
            task_id=task.id, messages=(system, shown, Message(role="assistant",
                                                                content=completion.text)),
            answer=answer, hard=hard, soft=soft,
            reason="" if hard >= 1.0 else _reason(task, answer, golds, soft, completion, o),
            turns=1, usage=completion.usage,
            metadata={"image": task.metadata["source"], "anls": soft},
        )


# ----------------------------------------------------------------------------- images


def sniff_image(path: Path) -> str | None:
    """The MIME type of an image file by its first bytes (PNG, JPEG, GIF, WEBP, TIFF), or
    None when it is none of them. Raises OSError when the file cannot be read."""
    with open(path, "rb") as f:
        head = f.read(12)
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for magic, mime in _MAGIC if head.startswith(magic)), None)


def image_part(path: Path, detail: str | None = None) -> dict[str, Any]:
    """The OpenAI content part carrying the image at ``path`` as a base64 ``data:`` URI.

    TIFF (not accepted by OpenAI-compatible APIs) is converted to PNG with Pillow. A file that
    vanished since loading is a :class:`DataError`: a systemic fault, not the agent's."""
    try:
        mime = sniff_image(path)
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read image ({exc.strerror or exc})") from None
    if mime is None:
        raise DataError(f"{path}: not a PNG, JPEG, GIF, WEBP or TIFF image")
    if mime == "image/tiff":
        data, mime = _tiff_to_png(path, data), "image/png"
    url: dict[str, Any] = {"url": f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"}
    if detail is not None:
        url["detail"] = detail
    return {"type": "image_url", "image_url": url}


def _pillow() -> Any:
    try:
        from PIL import Image
    except ImportError:
        return None
    return Image


def _tiff_to_png(path: Path, data: bytes) -> bytes:
    pil = _pillow()
    if pil is None:
        raise DataError(f"{path}: TIFF images need Pillow to be converted to PNG (pip install "
                        "pillow), or convert the images to PNG yourself")
    try:
        with pil.open(io.BytesIO(data)) as img:  # a multi-page TIFF: its first page
            if img.mode not in ("1", "L", "LA", "P", "RGB", "RGBA"):
                img = img.convert("RGB")  # e.g. CMYK, which PNG cannot hold
            out = io.BytesIO()
            img.save(out, format="PNG")
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: unreadable TIFF image ({exc})") from None
    return out.getvalue()


# ----------------------------------------------------------------------------- loading


def _csv_splits(common: EnvCommon, options: DocVQAOptions, base_dir: Path,
                loader: Callable[[Path], list[Task]]) -> dict[Split, list[Task]] | None:
    """SkillOpt's layout, a question CSV in each split folder; None for any other layout."""
    if common.split_mode != "split_dir" or common.split_dir is None:
        return None
    folder = resolve_path(common.split_dir, base_dir)
    files = split_files(folder) if folder.is_dir() else None
    if files is None:
        return None
    if options.data_path is not None:
        raise ConfigError("env.data_path is not used when env.split_mode is 'split_dir'; "
                          "remove it or set env.split_mode to 'ratio'")
    splits = {split: loader(path) for split, path in files.items()}
    require_nonempty(splits, {s: str(p) for s, p in files.items()})
    warn_shared_groups(splits, lambda t: t.group, folder)
    return splits


def load_docvqa(path: Path, image_root: Path | None = None) -> list[Task]:
    """The tasks of one DocVQA annotation file or question CSV (by its suffix, ``.csv``);
    any problem is one DataError naming the file (and the record or row), including a
    missing or unusable image. ``image_root`` is the folder a CSV's relative image paths are
    read from (default: the CSV's folder); an annotation file's are relative to its own."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        records = read_questions(path)
        images = image_root if image_root is not None else path.parent
    elif image_root is not None:
        raise ConfigError(f"env.image_root applies to question CSVs only, and {path} is an "
                          "annotation file (its image paths are relative to its own folder); "
                          "remove env.image_root")
    else:
        records = located_records(path)
        images = path.parent
    tasks = [_task(raw, images, where) for where, raw in records]
    checked: set[str] = set()  # pages carry several questions: read each header once
    for (where, _), task in zip(records, tasks, strict=True):
        image = task.metadata["image"]
        if image not in checked:
            _check_image(Path(image), where, task.metadata["source"])
            checked.add(image)
    return tasks


def _task(raw: dict[str, Any], images: Path, where: str) -> Task:
    qid = raw.get("questionId")
    if isinstance(qid, bool) or not isinstance(qid, (int, str)) or not str(qid).strip():
        raise DataError(f"{where}: key 'questionId' must be an integer or a non-empty "
                        f"string{_got(raw, 'questionId')}")
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise DataError(f"{where}: key 'question' must be a non-empty string"
                        f"{_got(raw, 'question')}")
    image = raw.get("image")
    if not isinstance(image, str) or not image.strip():
        raise DataError(f"{where}: key 'image' must be a path relative to the annotation "
                        f"file's folder{_got(raw, 'image')}")
    answers = raw.get("answers")
    if answers is None:
        raise DataError(f"{where}: no 'answers' ({_NO_ANSWERS_HINT})")
    if (not isinstance(answers, list) or not answers
            or not all(isinstance(a, str) and a.strip() for a in answers)):
        raise DataError(f"{where}: key 'answers' must be a non-empty list of non-empty "
                        f"strings{_got(raw, 'answers')}")
    types = raw.get("question_types") or []
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise DataError(f"{where}: key 'question_types' must be a list of strings"
                        f"{_got(raw, 'question_types')}")
    return Task(
        id=str(qid).strip(), prompt=f"Question: {question.strip()}",
        reference={"answers": list(dict.fromkeys(a.strip() for a in answers))},
        group=_document(raw, image),
        metadata={"image": str(resolve_path(Path(image), images)), "source": image,
                  "question_types": types, "where": where},
    )


def _document(raw: dict[str, Any], image: str) -> str:
    """The split group: the UCSF document (all its pages), else the page, else the image."""
    for key in ("ucsf_document_id", "docId"):
        value = raw.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return f"{key}:{value}"
    return f"image:{image}"


def _check_image(image: Path, where: str, source: str) -> None:
    try:
        mime = sniff_image(image)
    except FileNotFoundError:
        raise DataError(f"{where}: image {source!r} not found (looked for {image})") from None
    except OSError as exc:
        raise DataError(f"{where}: image {source!r} cannot be read ({exc.strerror or exc})"
                        ) from None
    if mime is None:
        raise DataError(f"{where}: image {source!r} is not a PNG, JPEG, GIF, WEBP or TIFF file "
                        "(judged by its first bytes)")
    if mime == "image/tiff" and _pillow() is None:
        raise DataError(f"{where}: image {source!r} is TIFF, which OpenAI-compatible APIs do "
                        "not accept; install Pillow (pip install pillow) to convert it to PNG, "
                        "or convert the images yourself")


def _got(raw: dict[str, Any], key: str) -> str:
    if key not in raw:
        return " (missing)"
    shown = repr(raw[key])
    return f" (got {shown if len(shown) <= 40 else shown[:37] + '...'})"


def _check_unique_ids(splits: dict[Split, list[Task]]) -> None:
    seen: dict[str, Task] = {}
    for split in SPLITS:
        for task in splits[split]:
            first = seen.setdefault(task.id, task)
            if first is not task:
                raise DataError(f"{task.metadata['where']}: questionId {task.id!r} duplicates "
                                f"{first.metadata['where']}; question ids must be unique")


# ----------------------------------------------------------------------------- feedback


def _reason(task: Task, answer: str, golds: Sequence[str], soft: float, completion: Completion,
            o: DocVQAOptions) -> str:
    """Why the answer did not count, in terms the optimizer can turn into a rule."""
    gold = " or ".join(repr(g) for g in golds[:3]) + (" (or others)" if len(golds) > 3 else "")
    kinds = task.metadata.get("question_types") or []
    about = f" [question type: {', '.join(kinds)}]" if kinds else ""
    need = f"; hard needs ANLS >= {o.anls_threshold:g}"
    if completion.truncated:
        got = f"; the answer read was {answer!r}" if answer else " before any answer"
        return (f"reply was cut off at the token limit (max_tokens={o.max_tokens}){got}; gold "
                f"is {gold}{about}")
    if not answer:
        return f"empty answer; gold is {gold}{about}"
    said = anls_normalize(answer)
    best = min(golds, key=lambda g: levenshtein(said, anls_normalize(g)))
    if any(anls_normalize(g) in said for g in golds):
        what = ("it contains the gold text plus extra words, and ANLS compares whole strings, "
                "so only the text alone counts")
    elif soft > 0:
        edits = levenshtein(said, anls_normalize(best))
        what = (f"a near miss: {edits} character edit(s) from {best!r} (copy the text exactly "
                "as printed: spelling, punctuation, digits, units)")
    else:
        what = "no gold answer is close (normalized edit distance >= 0.5 from each)"
    return f"answer {answer!r} vs gold {gold}: ANLS {soft:.2f}, {what}{need}{about}"
