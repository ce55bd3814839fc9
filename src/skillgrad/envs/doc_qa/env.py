"""The built-in ``doc_qa`` environment: questions over a local document collection, answered by
searching, opening documents and reading sections (the OfficeQA family).

In deep-learning terms it is a data set plus a loss. The built-in collection has real prose
(NYT articles and Amazon review digests from SQuAD-Shifts, CC BY 4.0, ``data/``) and
seeded quarterly business reports with markdown tables whose questions have computed numeric
answers (:mod:`skillgrad.envs.doc_qa.reports`). Scoring: normalised exact match (numbers within
a relative tolerance) for ``hard``, token F1 for ``soft``. Questions are split by document
family (an article, a review digest, a company's reports), so nothing crosses splits.

Any file in the doc_qa JSON format can be used instead (``data_path``, or one file per split
with ``split_mode: split_dir``)::

    {"documents": [{"id": "d1", "title": "...", "kind": "...",
                    "sections": [{"title": "...", "text": "..."}]}],
     "questions": [{"id": "q1", "question": "...", "answers": ["..."], "doc": "d1",
                    "sections": [2], "group": "optional split group"}]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from skillgrad.envs.base import EnvCommon, EnvOptions, Split
from skillgrad.envs.data import (
    load_splits,
    package_file,
    require_nonempty,
    skill_file,
    split_by_ratio,
)
from skillgrad.envs.doc_qa.corpus import Document, DocumentIndex, Section
from skillgrad.envs.doc_qa.reports import generate_reports
from skillgrad.envs.doc_qa.rollout import DocToolEnvironment, DocToolOptions
from skillgrad.errors import ConfigError, DataError
from skillgrad.records import Task

BUNDLED = "squad_shifts_docs.json"
Part = Literal["nyt", "amazon", "reports"]
_BUILTIN_KEYS = {"parts", "companies", "reports_seed"}


class DocQAOptions(DocToolOptions):
    """The ``env:`` keys of ``doc_qa``."""

    data_path: Path | None = Field(None, description="doc_qa JSON file; default: the built-in "
                                   "collection")
    parts: tuple[Part, ...] = Field(("nyt", "amazon", "reports"), min_length=1,
                                    description="parts of the built-in collection")
    companies: int = Field(5, ge=1, le=200, description="generated companies (two quarterly "
                           "reports and eight questions each)")
    reports_seed: int = Field(0, description="seed of the generated reports")

    @model_validator(mode="after")
    def _builtin_only(self) -> DocQAOptions:
        given = sorted(_BUILTIN_KEYS & self.model_fields_set)
        if self.data_path is not None and given:
            keys = ", ".join(f"env.{k}" for k in given)
            verb = "applies" if len(given) == 1 else "apply"
            raise ValueError(f"{keys} {verb} only to the built-in collection; remove "
                             f"{'it' if len(given) == 1 else 'them'} or env.data_path")
        return self


def load_collection(path: Path) -> tuple[list[Document], list[Task]]:
    """Documents and tasks of a doc_qa JSON file; a malformed file names the problem."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a JSON file ({exc.__class__.__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("documents"), list) \
            or not isinstance(data.get("questions"), list):
        raise DataError(f"{path}: not doc_qa format (expected an object with 'documents' and "
                        "'questions' lists)")
    documents = [_document(path, i, d) for i, d in enumerate(data["documents"])]
    by_id = {d.id: d for d in documents}
    if len(by_id) != len(documents):
        raise DataError(f"{path}: document ids are not unique")
    tasks = [_task(path, i, q, by_id) for i, q in enumerate(data["questions"])]
    if not tasks:
        raise DataError(f"{path}: no questions")
    return documents, tasks


def _document(path: Path, index: int, raw: Any) -> Document:
    try:
        sections = tuple(Section(str(s["title"]), str(s["text"])) for s in raw["sections"])
        doc = Document(str(raw["id"]), str(raw["title"]), sections, str(raw.get("kind", "")))
    except (KeyError, TypeError):
        raise DataError(f"{path}: document {index}: expected id, title and sections[] with "
                        "title and text") from None
    if not sections:
        raise DataError(f"{path}: document {doc.id!r} has no sections")
    return doc


def _task(path: Path, index: int, raw: Any, docs: dict[str, Document]) -> Task:
    try:
        answers = [str(a).strip() for a in raw["answers"] if str(a).strip()]
        doc_id = str(raw["doc"])
        sections = [int(s) for s in raw.get("sections", [])]
        task_id, question = str(raw["id"]), str(raw["question"]).strip()
    except (KeyError, TypeError, ValueError):
        raise DataError(f"{path}: question {index}: expected id, question, answers[], doc and "
                        "optional sections[] (numbers)") from None
    if not answers:
        raise DataError(f"{path}: question {task_id!r} has no answers")
    if doc_id not in docs:
        raise DataError(f"{path}: question {task_id!r} names unknown document {doc_id!r}")
    bad = [s for s in sections if not 1 <= s <= len(docs[doc_id].sections)]
    if bad:
        raise DataError(f"{path}: question {task_id!r}: {doc_id!r} has no section {bad[0]}")
    return Task(id=task_id, prompt=f"Question: {question}",
                group=str(raw.get("group") or doc_id),
                reference={"answers": answers, "docs": [doc_id],
                           "sections": {doc_id: sections} if sections else {}})


class DocQAEnvironment(DocToolEnvironment):
    """Document QA with search / open / read tools; built from config with :meth:`create`."""

    Options: ClassVar[type[EnvOptions]] = DocQAOptions

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> DocQAEnvironment:
        given = sorted(_BUILTIN_KEYS & options.model_fields_set)
        if common.split_mode == "split_dir" and given:
            raise ConfigError(f"{', '.join('env.' + k for k in given)}: only for the built-in "
                              "collection, not with env.split_mode 'split_dir'")
        if options.data_path is None and common.split_mode == "ratio":
            documents, splits = _builtin_splits(common, options)
        else:
            collected: list[Document] = []

            def load(path: Path) -> list[Task]:
                docs, tasks = load_collection(path)
                collected.extend(docs)
                return tasks

            splits = load_splits(common, options.data_path, base_dir, load, lambda t: t.group)
            documents = collected
        ids = [d.id for d in documents]
        if len(set(ids)) != len(ids):
            raise DataError("doc_qa: the same document id appears in more than one file")
        index = DocumentIndex(documents, top_k=options.top_k,
                              snippet_chars=options.snippet_chars,
                              section_chars=options.section_chars,
                              list_sections=options.list_sections)
        return cls(splits, index, options, skill_file(common, base_dir))


def _builtin_splits(common: EnvCommon, options: DocQAOptions
                    ) -> tuple[list[Document], dict[Split, list[Task]]]:
    """The built-in collection: the bundled real documents of the chosen parts plus the
    generated reports, split by ratio with document families kept together."""
    path = package_file("skillgrad.envs.doc_qa", "data", BUNDLED)
    documents: list[Document] = []
    tasks: list[Task] = []
    real = [p for p in options.parts if p != "reports"]
    if real:
        docs, loaded = load_collection(path)
        prefix = tuple("nyt-" if p == "nyt" else "reviews-" for p in real)
        documents += [d for d in docs if d.id.startswith(prefix)]
        tasks += [t for t in loaded if t.reference["docs"][0].startswith(prefix)]
    if "reports" in options.parts:
        docs_r, records = generate_reports(options.reports_seed, options.companies)
        by_id = {d.id: d for d in docs_r}
        documents += docs_r
        tasks += [_task(Path(f"reports seed {options.reports_seed}"), i, r, by_id)
                  for i, r in enumerate(records)]
    if not tasks:
        raise ConfigError("env.parts selects no questions")
    splits = split_by_ratio(tasks, common.split_ratio, common.split_seed, lambda t: t.group)
    ratio = "/".join(f"{r:g}" for r in common.split_ratio)
    require_nonempty(splits, f"{path} + reports seed {options.reports_seed}",
                     hint=f"{len(tasks)} questions, env.split_ratio {ratio}, env.split_seed "
                     f"{common.split_seed}; add parts or companies")
    return documents, splits
