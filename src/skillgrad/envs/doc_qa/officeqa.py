"""The ``officeqa`` environment: Databricks OfficeQA (grounded questions over U.S. Treasury
Bulletins) from the user's own copy, served through the doc_qa tools (search / open / read).

In deep-learning terms it is a data set plus a loss. It reads OfficeQA's published layout and
SkillOpt's split layout of it:

* questions, as OfficeQA's CSV (``officeqa_full.csv``, ``officeqa_pro.csv`` or the older
  ``officeqa.csv``) or, with ``split_mode: split_dir``, one file per split: ``train.csv``,
  ``val.csv`` and ``test.csv``, or SkillOpt's folders ``train/``, ``val/`` and ``test/``,
  each read from its first ``*.csv`` (by name) or, without one, its first ``*.json`` (a JSON
  array, usually ``items.json``). A row has ``uid`` (or ``id``), ``question``,
  ``ground_truth`` (or ``answer``), optionally ``category`` (or ``difficulty``: easy / hard),
  and ``source_files`` (parsed file names such as ``treasury_bulletin_1941_01.txt``) or, in
  older copies, only ``source_docs`` (FRASER URLs such as
  ``.../treasury-bulletin-407/january-1941-6529?page=15``, mapped to those names the way the
  OfficeQA README describes). Both are lists: a JSON list, a JSON array in a string, or a
  string of names separated by newlines or commas (``source_files`` also by semicolons).
  Other fields (``split``, ``source_split``, ...) are ignored: the folder decides the split;
* parsed documents (``.txt``; ``.md`` works too), each cut into sections at markdown headings
  or into chunks of ``chunk_chars``: either one folder (``docs_dir``, e.g.
  ``treasury_bulletins_parsed/transformed``) or SkillOpt's document roots (``data_dirs``),
  searched in order, each through its ``transformed/`` folder when it has one, subfolders
  included; a document found in an earlier root hides one of the same name in a later root.

Scoring is doc_qa's: numbers within ``tolerance`` (default 1%, the level OfficeQA's README uses
in its example) for ``hard``, token F1 / matched numbers for ``soft``. In ratio mode questions
are split by their source files (questions sharing a file stay in one split).
(Over the house limit of ~400 lines: OfficeQA's published layout (question CSV, document
roots, source-file splits) is read in one module, as its loader's contract.)
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions, Split
from skillgrad.envs.data import (
    DATA_SUFFIXES,
    located_records,
    read_data_bytes,
    require_nonempty,
    resolve_path,
    skill_file,
    split_by_ratio,
    warn_shared_groups,
)
from skillgrad.envs.doc_qa.corpus import Document, DocumentIndex, sections_from_text
from skillgrad.envs.doc_qa.rollout import DocToolEnvironment, DocToolOptions
from skillgrad.errors import ConfigError, DataError
from skillgrad.records import Task

log = logging.getLogger(__name__)

DOC_SUFFIXES = (".txt", ".md", ".markdown")
_MONTHS = {m: i for i, m in enumerate(
    "january february march april may june july august september october november december"
    .split(), start=1)}
_URL = re.compile(r"treasury-bulletin-\d+/([a-z]+)-(\d{4})-", re.IGNORECASE)
_FILE_SEPARATORS = re.compile(r"[\r\n,;]+")
_URL_SEPARATORS = re.compile(r"[\r\n,]+")  # a URL may hold a semicolon
# The fields every question needs: (keys tried in order, as SkillOpt does; the error's name).
_ID = (("uid", "id"), "uid (or id)")
_QUESTION = (("question",), "question")
_GOLD = (("ground_truth", "answer"), "ground_truth (or answer)")
_SOURCES = (("source_files", "source_docs"), "source_files (or source_docs)")
_LEVEL = ("category", "difficulty")


class OfficeQAOptions(DocToolOptions):
    """The ``env:`` keys of ``officeqa``."""

    csv_path: Path | None = Field(None, description="question CSV (split_mode: ratio)")
    docs_dir: Path | None = Field(None, description="folder of parsed documents (.txt / .md); "
                                  "give this or data_dirs")
    data_dirs: tuple[Path, ...] | None = Field(
        None, description="document roots searched in order (SkillOpt's key): each root's "
        "transformed/ folder when it has one, subfolders included; a string is split at "
        "os.pathsep and commas; give this or docs_dir")
    corpus: Literal["folder", "sources"] = Field(
        "folder", description="search every document found, or only those the questions cite "
        "(smaller and faster)")
    difficulty: Literal["all", "easy", "hard"] = Field(
        "all", description="keep only questions whose category (or difficulty) is this")
    chunk_chars: int = Field(1500, ge=200, description="section size when a file has no "
                             "markdown headings")
    max_turns: int = Field(10, ge=1, description="model replies per question")
    max_tokens: int = Field(256, ge=1, description="token limit of each reply")
    tolerance: float = Field(0.01, ge=0.0, le=0.5,
                             description="relative tolerance when the gold is a number")

    @field_validator("data_dirs", mode="before")
    @classmethod
    def _folders(cls, value: Any) -> Any:
        if isinstance(value, str):  # SkillOpt's string form: "a:b" or "a,b"
            value = [p.strip() for part in value.split(os.pathsep) for p in part.split(",")]
            value = [p for p in value if p]
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError("names no folder")
            if any(isinstance(v, str) and not v.strip() for v in value):
                raise ValueError("an entry is empty")
        return value

    @model_validator(mode="after")
    def _chunks_fit(self) -> OfficeQAOptions:
        if self.chunk_chars > self.section_chars:
            raise ValueError(f"env.chunk_chars ({self.chunk_chars}) must not exceed "
                             f"env.section_chars ({self.section_chars}), or read_section would "
                             "cut every chunk")
        return self


# ----------------------------------------------------------------------------- questions


def list_field(value: object, separators: re.Pattern[str] = _FILE_SEPARATORS) -> list[str]:
    """A list-valued field as OfficeQA and SkillOpt write it: a JSON list, a JSON array in a
    string, or a string split at ``separators``. Raises :class:`TypeError` for anything else.

    SkillOpt does not split ``"a.txt, b.txt"`` at the comma (a string ending in ``.txt`` is one
    name there, which then matches no file); here it is the two names it evidently means."""
    if value is None:
        return []
    if isinstance(value, list):
        if not all(isinstance(v, str | int | float) and not isinstance(v, bool) for v in value):
            raise TypeError("expected a list of names")
        return [str(v).strip() for v in value if str(v).strip()]
    if not isinstance(value, str):
        raise TypeError("expected a list or a string")
    text = value.strip()
    if text.startswith("["):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError:
            loaded = None  # not JSON after all: a name that starts with "["
        if isinstance(loaded, list):
            return list_field(loaded, separators)
    return [p.strip() for p in separators.split(text) if p.strip()]


def source_names(row: Mapping[str, object]) -> list[str]:
    """The parsed file names a row cites (``source_files``, else from ``source_docs``)."""
    files = list_field(row.get("source_files"))
    if files:
        return list(dict.fromkeys(files))
    names = [f"treasury_bulletin_{year}_{_MONTHS[month.lower()]:02d}.txt"
             for url in list_field(row.get("source_docs"), _URL_SEPARATORS)
             for month, year in _URL.findall(url) if month.lower() in _MONTHS]
    return list(dict.fromkeys(names))


def load_questions(path: Path, difficulty: str = "all") -> list[dict[str, Any]]:
    """The questions of one file, a CSV or (``.json``, ``.jsonl``) JSON rows, as ``{uid,
    question, answer, sources, source_docs, difficulty, where}``; ``where`` names the row
    (``"<file>: row 2"`` in a CSV, the header being row 1; ``"<file>: record 1"`` in JSON)."""
    path = Path(path)
    located = located_records(path) if path.suffix.lower() in DATA_SUFFIXES else _csv_rows(path)
    rows = [_question(where, raw) for where, raw in located]
    kept = [r for r in rows if difficulty == "all" or r["difficulty"] == difficulty]
    if not kept:
        shown = "" if difficulty == "all" else f" with difficulty {difficulty!r}"
        raise DataError(f"{path}: no questions{shown}")
    return kept


def _csv_rows(path: Path) -> list[tuple[str, dict[str, Any]]]:
    raw = read_data_bytes(path, "a CSV file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 (bad byte at offset {exc.start})") from None
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        columns = set(reader.fieldnames or [])
        missing = [label for keys, label in (_ID, _QUESTION, _GOLD, _SOURCES)
                   if not columns & set(keys)]
        if missing:
            raise DataError(f"{path}: missing column {', '.join(missing)} (found: "
                            f"{', '.join(sorted(columns)) or 'no header'})")
        rows = [(f"{path}: row {n}", row) for n, row in enumerate(reader, start=2)]
    except csv.Error as exc:
        raise DataError(f"{path}: line {reader.line_num}: not readable as CSV ({exc})") from None
    for where, row in rows:
        if row.get(None):  # DictReader's place for fields beyond the header's: a stray quote?
            width = len(reader.fieldnames or [])
            raise DataError(f"{where}: {width + len(row[None])} fields, but the header has "
                            f"{width}")
    return rows


def _question(where: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """One row in the form above; a missing field or a cited file that is neither named nor
    derivable is a :class:`DataError` naming the row."""
    uid, question, answer = (_text(where, raw, keys, label)
                             for keys, label in (_ID, _QUESTION, _GOLD))
    try:
        files = list_field(raw.get("source_files"))
    except TypeError as exc:
        raise DataError(f"{where} ({uid}): source_files: {exc}") from None
    try:
        docs = list_field(raw.get("source_docs"), _URL_SEPARATORS)
    except TypeError as exc:
        raise DataError(f"{where} ({uid}): source_docs: {exc}") from None
    sources = source_names({"source_files": files, "source_docs": docs})
    if not sources:
        raise DataError(f"{where} ({uid}): no source file (source_files is empty and "
                        "source_docs has no treasury-bulletin URL)")
    level = _text(where, raw, _LEVEL, "", required=False).lower()
    return {"uid": uid, "question": question, "answer": answer, "sources": sources,
            "source_docs": docs, "difficulty": level, "where": where}


def _text(where: str, raw: Mapping[str, Any], keys: tuple[str, ...], label: str,
          required: bool = True) -> str:
    """The first of ``keys`` with a non-empty value (text or a number), as text."""
    for key in keys:
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, str | int | float | None):
            raise DataError(f"{where}: {key} must be text or a number, got "
                            f"{type(value).__name__}")
        if value is not None and str(value).strip():
            return str(value).strip()
    if required:
        raise DataError(f"{where}: {label} is missing or empty")
    return ""


# ----------------------------------------------------------------------------- documents


def docs_roots(data_dirs: tuple[Path, ...], base_dir: Path) -> list[Path]:
    """SkillOpt's document roots: each folder (relative to the config's folder), or its
    ``transformed/`` folder when it has one; a root named twice counts once."""
    roots: list[Path] = []
    for entry in data_dirs:
        folder = resolve_path(entry, base_dir)
        if not folder.is_dir():
            raise DataError(f"{folder}: document folder not found (env.data_dirs)")
        transformed = folder / "transformed"
        root = (transformed if transformed.is_dir() else folder).resolve()
        if root not in roots:
            roots.append(root)
    return roots


def document_files(options: OfficeQAOptions, base_dir: Path) -> tuple[dict[str, Path], str]:
    """Every document file by name, and where they were looked for (for messages)."""
    if options.docs_dir is not None and options.data_dirs is not None:
        raise ConfigError("env.docs_dir and env.data_dirs are alternatives; give only one")
    if options.docs_dir is not None:
        folder = resolve_path(options.docs_dir, base_dir)
        if not folder.is_dir():
            raise DataError(f"{folder}: document folder not found")
        return _collect([folder], recursive=False), str(folder)
    if options.data_dirs is None:
        raise ConfigError("officeqa needs env.docs_dir (a folder of parsed documents) or "
                          "env.data_dirs (SkillOpt's list of document roots)")
    roots = docs_roots(options.data_dirs, base_dir)
    return _collect(roots, recursive=True), ", ".join(str(r) for r in roots)


def _collect(roots: list[Path], recursive: bool) -> dict[str, Path]:
    """Documents by file name; a document id (the file's stem) found in an earlier root hides
    the same id in later ones, and twice in one root is an error (which one is meant?)."""
    chosen: dict[str, Path] = {}
    for root in roots:
        mine: dict[str, Path] = {}
        for path in _document_paths(root, recursive):
            if path.stem in mine:
                raise DataError(f"{root}: two documents named {path.stem!r} "
                                f"({mine[path.stem].relative_to(root)} and "
                                f"{path.relative_to(root)}); keep one")
            mine[path.stem] = path
        for stem, path in mine.items():
            chosen.setdefault(stem, path)
    return {p.name: p for p in chosen.values()}


def _document_paths(root: Path, recursive: bool) -> list[Path]:
    def wanted(name: str) -> bool:
        return not name.startswith(".") and Path(name).suffix.lower() in DOC_SUFFIXES

    if not recursive:
        return [p for p in sorted(root.iterdir()) if p.is_file() and wanted(p.name)]
    found: list[Path] = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if not d.startswith("."))
        found += [Path(folder, n) for n in sorted(names) if wanted(n)]
    return found


def load_document(path: Path, chunk_chars: int) -> Document:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 (bad byte at offset {exc.start})") from None
    sections = sections_from_text(text, chunk_chars)
    title = next((s.title for s in sections if s.title and not s.title.endswith("…")), path.stem)
    return Document(path.stem, f"{path.stem} — {title}" if title != path.stem else path.stem,
                    tuple(sections), kind="parsed document")


# ----------------------------------------------------------------------------- the environment


class OfficeQAEnvironment(DocToolEnvironment):
    """OfficeQA through search / open / read tools; built from config with :meth:`create`."""

    Options: ClassVar[type[EnvOptions]] = OfficeQAOptions

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> OfficeQAEnvironment:
        files, looked_in = document_files(options, base_dir)
        sources = _split_sources(common, options, base_dir)
        built: dict[str, list[Task]] = {}
        cited: set[str] = set()
        seen: dict[str, str] = {}
        for split, (_, rows) in sources.items():
            tasks = []
            for row in rows:
                if row["uid"] in seen:
                    raise DataError(f"{row['where']}: uid {row['uid']!r} is already used at "
                                    f"{seen[row['uid']]}")
                seen[row["uid"]] = row["where"]
                found = [_find(files, name, row, looked_in) for name in row["sources"]]
                cited |= {p.name for p in found}
                tasks.append(_task(row, [p.stem for p in found]))
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
            assert common.split_dir is not None  # _split_sources refused it otherwise
            warn_shared_groups(splits, lambda t: t.group, resolve_path(common.split_dir, base_dir))
        chosen = files.values() if options.corpus == "folder" else \
            [files[n] for n in sorted(cited)]
        index = DocumentIndex([load_document(p, options.chunk_chars) for p in chosen],
                              top_k=options.top_k, snippet_chars=options.snippet_chars,
                              section_chars=options.section_chars,
                              list_sections=options.list_sections)
        return cls(splits, index, options, skill_file(common, base_dir))


def _task(row: dict[str, Any], docs: list[str]) -> Task:
    return Task(id=row["uid"], prompt=f"Question: {row['question']}",
                group="+".join(sorted(docs)),
                reference={"answers": [row["answer"]], "docs": docs, "sections": {}},
                metadata={"difficulty": row["difficulty"], "source_docs": row["source_docs"]})


def _split_sources(common: EnvCommon, options: OfficeQAOptions, base_dir: Path
                   ) -> dict[str, tuple[Path, list[dict[str, Any]]]]:
    """``{"all": (csv, rows)}`` for ratio mode, ``{split: (file, rows)}`` for split_dir."""
    if common.split_mode == "split_dir":
        if common.split_dir is None:
            raise ConfigError("env.split_dir is required when env.split_mode is 'split_dir'")
        if options.csv_path is not None:
            raise ConfigError("env.csv_path is not used when env.split_mode is 'split_dir' "
                              "(the folder holds the train, val and test questions)")
        folder = resolve_path(common.split_dir, base_dir)
        if not folder.is_dir():
            raise DataError(f"{folder}: split directory not found")
        files = {s: split_file(folder, s) for s in SPLITS}
        return {s: (f, load_questions(f, options.difficulty)) for s, f in files.items()}
    if options.csv_path is None:
        raise ConfigError("env.csv_path is required when env.split_mode is 'ratio'")
    path = resolve_path(options.csv_path, base_dir)
    return {"all": (path, load_questions(path, options.difficulty))}


def split_file(folder: Path, split: Split) -> Path:
    """The file holding one split: ``<split>.csv``, or in SkillOpt's ``<split>/`` folder its
    first ``*.csv`` by name or, without one, its first ``*.json``."""
    flat, sub = folder / f"{split}.csv", folder / split
    if flat.is_file() and sub.is_dir():
        raise DataError(f"{folder}: {split} split is ambiguous ({flat.name} and {split}/); "
                        "keep only one")
    if flat.is_file():
        return flat
    if not sub.is_dir():
        raise DataError(f"{folder}: no {split} split found (looked for {flat.name} and "
                        f"{split}/)")
    candidates = [sorted(p for p in sub.glob(f"*.{kind}")
                         if p.is_file() and not p.name.startswith(".")) for kind in ("csv", "json")]
    found = candidates[0] or candidates[1]
    if not found:
        raise DataError(f"{sub}: no .csv or .json file (a split folder holds a CSV or a JSON "
                        "array such as items.json)")
    ignored = [p.name for p in candidates[0] + candidates[1] if p != found[0]]
    if ignored:  # SkillOpt reads only the first file too; say so rather than skip silently
        log.warning("%s: reading %s only; ignoring %s", sub, found[0].name, ", ".join(ignored))
    return found[0]


def _find(files: dict[str, Path], name: str, row: dict[str, Any], looked_in: str) -> Path:
    stem = Path(name).stem
    for candidate in (name, *(stem + s for s in DOC_SUFFIXES)):
        if candidate in files:
            return files[candidate]
    raise DataError(f"{row['where']} ({row['uid']}): source file {name!r} not found in "
                    f"{looked_in}")


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
