"""The ``officeqa`` environment: Databricks OfficeQA (grounded questions over U.S. Treasury
Bulletins) from the user's own copy, served through the doc_qa tools (search / open / read).

In deep-learning terms it is a data set plus a loss, read from OfficeQA's published layout:

* a question CSV (``officeqa_full.csv``, ``officeqa_pro.csv`` or the older ``officeqa.csv``)
  with the columns ``uid``, ``question``, ``answer`` and ``source_files`` (parsed file names
  such as ``treasury_bulletin_1941_01.txt``, several separated by newlines, commas or
  semicolons) or, in older copies, only ``source_docs`` (FRASER URLs such as
  ``.../treasury-bulletin-407/january-1941-6529?page=15``, mapped to those names the way the
  OfficeQA README describes); ``difficulty`` (easy / hard) is optional;
* a folder of parsed documents (``treasury_bulletins_parsed/transformed/*.txt``; ``.md``
  works too), each cut into sections at markdown headings or into chunks of ``chunk_chars``.

Scoring is doc_qa's: numbers within ``tolerance`` (default 1%, the level OfficeQA's README uses
in its example) for ``hard``, token F1 / matched numbers for ``soft``. Questions are split by
their source files (questions sharing a file stay in one split); with ``split_mode:
split_dir`` the folder holds ``train.csv``, ``val.csv`` and ``test.csv`` instead.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions, Split
from skillgrad.envs.data import require_nonempty, resolve_path, skill_file, split_by_ratio
from skillgrad.envs.doc_qa.corpus import Document, DocumentIndex, sections_from_text
from skillgrad.envs.doc_qa.rollout import DocToolEnvironment, DocToolOptions
from skillgrad.errors import ConfigError, DataError
from skillgrad.records import Task

DOC_SUFFIXES = (".txt", ".md", ".markdown")
_MONTHS = {m: i for i, m in enumerate(
    "january february march april may june july august september october november december"
    .split(), start=1)}
_URL = re.compile(r"treasury-bulletin-\d+/([a-z]+)-(\d{4})-", re.IGNORECASE)
_SPLIT_NAMES = re.compile(r"[\n,;]+")


class OfficeQAOptions(DocToolOptions):
    """The ``env:`` keys of ``officeqa``."""

    csv_path: Path | None = Field(None, description="question CSV (split_mode: ratio)")
    docs_dir: Path = Field(description="folder of parsed documents (.txt / .md)")
    corpus: Literal["folder", "sources"] = Field(
        "folder", description="search every document in docs_dir, or only those the "
        "questions cite (smaller and faster)")
    difficulty: Literal["all", "easy", "hard"] = "all"
    chunk_chars: int = Field(1500, ge=200, description="section size when a file has no "
                             "markdown headings")
    max_turns: int = Field(10, ge=1, description="model replies per question")
    max_tokens: int = Field(256, ge=1, description="token limit of each reply")
    tolerance: float = Field(0.01, ge=0.0, le=0.5,
                             description="relative tolerance when the gold is a number")

    @model_validator(mode="after")
    def _chunks_fit(self) -> OfficeQAOptions:
        if self.chunk_chars > self.section_chars:
            raise ValueError(f"env.chunk_chars ({self.chunk_chars}) must not exceed "
                             f"env.section_chars ({self.section_chars}), or read_section would "
                             "cut every chunk")
        return self


def source_names(row: dict[str, str]) -> list[str]:
    """The parsed file names a CSV row cites (``source_files``, else from ``source_docs``)."""
    files = (row.get("source_files") or "").strip()
    if files:
        return list(dict.fromkeys(n.strip() for n in _SPLIT_NAMES.split(files) if n.strip()))
    names = [f"treasury_bulletin_{year}_{_MONTHS[month.lower()]:02d}.txt"
             for month, year in _URL.findall(row.get("source_docs") or "")
             if month.lower() in _MONTHS]
    return list(dict.fromkeys(names))


def load_questions(path: Path, difficulty: str = "all") -> list[dict[str, Any]]:
    """Rows of an OfficeQA CSV as ``{uid, question, answer, sources, difficulty}``."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, expected a CSV file") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 (bad byte at offset {exc.start})") from None
    reader = csv.DictReader(text.splitlines(keepends=True))
    columns = set(reader.fieldnames or [])
    missing = [c for c in ("uid", "question", "answer") if c not in columns]
    if not columns & {"source_files", "source_docs"}:
        missing.append("source_files (or source_docs)")
    if missing:
        raise DataError(f"{path}: missing column {', '.join(missing)} (found: "
                        f"{', '.join(sorted(columns)) or 'no header'})")
    rows = []
    for line, row in enumerate(reader, start=2):
        uid = (row.get("uid") or "").strip()
        if not uid or not (row.get("question") or "").strip() or not (row.get("answer") or ""
                                                                         ).strip():
            raise DataError(f"{path}: row {line}: uid, question and answer must not be empty")
        level = (row.get("difficulty") or "").strip().lower()
        if difficulty != "all" and level != difficulty:
            continue
        sources = source_names(row)
        if not sources:
            raise DataError(f"{path}: row {uid}: no source file (source_files is empty and "
                            "source_docs has no treasury-bulletin URL)")
        rows.append({"uid": uid, "question": row["question"].strip(),
                     "answer": row["answer"].strip(), "sources": sources,
                     "difficulty": level})
    if not rows:
        shown = "" if difficulty == "all" else f" with difficulty {difficulty!r}"
        raise DataError(f"{path}: no questions{shown}")
    return rows


def load_document(path: Path, chunk_chars: int) -> Document:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 (bad byte at offset {exc.start})") from None
    sections = sections_from_text(text, chunk_chars)
    title = next((s.title for s in sections if s.title and not s.title.endswith("…")), path.stem)
    return Document(path.stem, f"{path.stem} — {title}" if title != path.stem else path.stem,
                    tuple(sections), kind="parsed document")


class OfficeQAEnvironment(DocToolEnvironment):
    """OfficeQA through search / open / read tools; built from config with :meth:`create`."""

    Options: ClassVar[type[EnvOptions]] = OfficeQAOptions

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> OfficeQAEnvironment:
        docs_dir = resolve_path(options.docs_dir, base_dir)
        if not docs_dir.is_dir():
            raise DataError(f"{docs_dir}: document folder not found")
        files = {p.name: p for p in sorted(docs_dir.iterdir())
                 if p.is_file() and p.suffix.lower() in DOC_SUFFIXES}
        sources = _split_sources(common, options, base_dir)
        built: dict[str, list[Task]] = {}
        cited: set[str] = set()
        for split, (csv_path, rows) in sources.items():
            tasks = []
            for row in rows:
                found = [_find(files, name, csv_path, row["uid"], docs_dir)
                         for name in row["sources"]]
                cited |= {p.name for p in found}
                docs = [p.stem for p in found]
                tasks.append(Task(id=row["uid"], prompt=f"Question: {row['question']}",
                                  group="+".join(sorted(docs)),
                                  reference={"answers": [row["answer"]], "docs": docs,
                                             "sections": {}},
                                  metadata={"difficulty": row["difficulty"]}))
            built[split] = tasks
        splits: dict[Split, list[Task]]
        if "all" in built:
            everything = _merge_groups(built["all"])
            splits = split_by_ratio(everything, common.split_ratio, common.split_seed,
                                    lambda t: t.group)
            ratio = "/".join(f"{r:g}" for r in common.split_ratio)
            require_nonempty(splits, str(sources["all"][0]),
                             hint=f"{len(everything)} questions, env.split_ratio {ratio}")
        else:
            splits = {s: built[s] for s in SPLITS}
        chosen = files.values() if options.corpus == "folder" else \
            [files[n] for n in sorted(cited)]
        index = DocumentIndex([load_document(p, options.chunk_chars) for p in chosen],
                              top_k=options.top_k, snippet_chars=options.snippet_chars,
                              section_chars=options.section_chars,
                              list_sections=options.list_sections)
        return cls(splits, index, options, skill_file(common, base_dir))


def _split_sources(common: EnvCommon, options: OfficeQAOptions, base_dir: Path
                   ) -> dict[str, tuple[Path, list[dict[str, Any]]]]:
    """``{"all": (csv, rows)}`` for ratio mode, ``{split: (csv, rows)}`` for split_dir."""
    if common.split_mode == "split_dir":
        if common.split_dir is None:
            raise ConfigError("env.split_dir is required when env.split_mode is 'split_dir'")
        if options.csv_path is not None:
            raise ConfigError("env.csv_path is not used when env.split_mode is 'split_dir' "
                              "(the folder holds train.csv, val.csv and test.csv)")
        folder = resolve_path(common.split_dir, base_dir)
        return {s: (folder / f"{s}.csv", load_questions(folder / f"{s}.csv", options.difficulty))
                for s in SPLITS}
    if options.csv_path is None:
        raise ConfigError("env.csv_path is required when env.split_mode is 'ratio'")
    path = resolve_path(options.csv_path, base_dir)
    return {"all": (path, load_questions(path, options.difficulty))}


def _find(files: dict[str, Path], name: str, csv_path: Path, uid: str, docs_dir: Path) -> Path:
    stem = Path(name).stem
    for candidate in (name, *(stem + s for s in DOC_SUFFIXES)):
        if candidate in files:
            return files[candidate]
    raise DataError(f"{csv_path}: row {uid}: source file {name!r} not found in {docs_dir}")


def _merge_groups(tasks: list[Task]) -> list[Task]:
    """Questions that share any source file get one group (union-find over files), so that no
    document is seen in two splits."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for task in tasks:
        docs = task.reference["docs"]
        for other in docs[1:]:
            parent[root(other)] = root(docs[0])
    return [t.model_copy(update={"group": root(t.reference["docs"][0])}) for t in tasks]
