"""DocVQA questions as CSV rows: the split layout SkillOpt materialises (``data/docvqa/splits``
with ``train/``, ``val/`` and ``test/``, each holding one ``.csv``).

Columns (by header name; others are ignored):

* ``questionId``, else ``id``: the question id;
* ``question``: the question, which may end with ``document_path:<path>`` naming the page
  image (the text before the marker is the question);
* ``answer``, else ``ground_truth``: the gold answers as a Python list literal such as
  ``['$1,000', '1000']`` (read with :func:`ast.literal_eval`, never evaluated); a value that
  does not start with ``[`` is one answer as it stands;
* ``image_path``: the page image (else the question's ``document_path``);
* ``topic``, else ``category``: the question type(s), several joined by ``|``;
* ``docId``, ``ucsf_document_id``, ``ucsf_document_page_no``: the page, as in DocVQA.

Each row becomes a record in the shape of DocVQA's annotation files, so the rest of the
environment treats both formats alike. Rows are counted as a spreadsheet shows them: the header
is row 1, the first question row 2.
"""

from __future__ import annotations

import ast
import csv
import io
import logging
from pathlib import Path
from typing import Any

from skillgrad.envs.base import SPLITS, Split
from skillgrad.envs.data import read_data_bytes
from skillgrad.errors import DataError

log = logging.getLogger(__name__)

ID_COLUMNS = ("questionId", "id")
ANSWER_COLUMNS = ("answer", "ground_truth")
TYPE_COLUMNS = ("topic", "category")
PAGE_COLUMNS = ("docId", "ucsf_document_id", "ucsf_document_page_no")
DOCUMENT_MARKER = "document_path:"


def parse_answers(text: str) -> list[str]:
    """``"['a', 'b']"`` -> ``["a", "b"]``; text not starting with ``[`` is one answer. Raises
    :class:`ValueError` saying what is wrong with an empty or malformed list."""
    text = text.strip()
    if not text:
        raise ValueError("is empty")
    if not text.startswith("["):
        return [text]
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ValueError("is not a Python list literal such as ['a', 'b']") from None
    if not isinstance(value, list):
        raise ValueError(f"is a {type(value).__name__}, expected a list such as ['a', 'b']")
    answers = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise ValueError(f"holds {item!r}; expected strings")
        if str(item).strip():
            answers.append(str(item).strip())
    if not answers:
        raise ValueError("lists no non-empty answer")
    return answers


def read_questions(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The rows of a DocVQA question CSV as ``(where, record)``, ``where`` being
    ``"<file>: row N"``; the record has the keys of an annotation file (``questionId``,
    ``question``, ``image`` as written, ``answers``, ``question_types`` and the page keys).
    Any problem is one :class:`DataError` naming the file and the row."""
    reader = _reader(path)
    try:
        header = reader.fieldnames
    except csv.Error as exc:
        raise DataError(f"{path}: row 1: malformed CSV header ({exc})") from None
    if not header:
        raise DataError(f"{path}: file is empty (expected a header row)")
    columns = set(header)
    missing = [" (or ".join(names) + ")" * (len(names) - 1)
               for names in (ID_COLUMNS, ("question",), ANSWER_COLUMNS)
               if not columns & set(names)]
    if missing:
        raise DataError(f"{path}: missing column {', '.join(missing)} (found: "
                        f"{', '.join(header)})")
    records = []
    row_number = 1
    try:
        for row_number, row in enumerate(reader, start=2):
            where = f"{path}: row {row_number}"
            fields = sum(v is not None for k, v in row.items() if k is not None)
            fields += len(row.get(None) or ())  # fields beyond the header's
            if fields != len(header):
                raise DataError(f"{where}: {fields} fields, the header has {len(header)}")
            records.append((where, _record(row, where)))
    except csv.Error as exc:
        raise DataError(f"{path}: row {row_number + 1}: malformed CSV ({exc})") from None
    if not records:
        raise DataError(f"{path}: no question rows after the header")
    return records


def _reader(path: Path) -> csv.DictReader[str]:
    raw = read_data_bytes(Path(path), "a CSV file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 (bad byte at offset {exc.start})") from None
    return csv.DictReader(io.StringIO(text, newline=""))


def _first(row: dict[str, Any], names: tuple[str, ...]) -> str:
    """The first non-empty value of ``names`` in ``row``, stripped ("" when none is)."""
    return next((row[n].strip() for n in names if (row.get(n) or "").strip()), "")


def _record(row: dict[str, Any], where: str) -> dict[str, Any]:
    qid = _first(row, ID_COLUMNS)
    if not qid:
        raise DataError(f"{where}: empty {' and '.join(n for n in ID_COLUMNS if n in row)}")
    question, _, document = (row.get("question") or "").partition(DOCUMENT_MARKER)
    if not question.strip():
        raise DataError(f"{where}: empty question")
    value = _first(row, ANSWER_COLUMNS)
    try:
        answers = parse_answers(value)
    except ValueError as exc:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        columns = " / ".join(n for n in ANSWER_COLUMNS if n in row)
        raise DataError(f"{where}: {columns} {exc}" + (f" (got {shown})" if value else "")
                        ) from None
    image = _first(row, ("image_path",)) or document.strip()
    if not image:
        raise DataError(f"{where}: no image (image_path is empty and the question has no "
                        f"{DOCUMENT_MARKER}<path>)")
    topic = _first(row, TYPE_COLUMNS)
    record: dict[str, Any] = {
        "questionId": qid, "question": question.strip(), "image": image, "answers": answers,
        "question_types": [t.strip() for t in topic.split("|") if t.strip()]}
    record.update({k: row[k].strip() for k in PAGE_COLUMNS if (row.get(k) or "").strip()})
    return record


def split_files(split_dir: Path) -> dict[Split, Path] | None:
    """The question CSV of each split folder of ``split_dir`` (the first ``*.csv`` by name, as
    SkillOpt reads it; others are named in a warning), or None when no split folder holds a
    CSV (the annotation-file layout). Some splits with a CSV and some without is a
    :class:`DataError`."""
    found: dict[Split, list[Path]] = {}
    for split in SPLITS:
        folder = split_dir / split
        files = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
        found[split] = [p for p in files if p.suffix.lower() == ".csv"
                        and not p.name.startswith(".")]
        others = [p.name for p in files if p.suffix.lower() in (".json", ".jsonl", ".ndjson")]
        if found[split] and (len(found[split]) > 1 or others):
            ignored = [p.name for p in found[split][1:]] + others
            log.warning("%s: reading the questions of %s; ignoring %s", folder,
                        found[split][0].name, ", ".join(ignored))
    with_csv = [s for s in SPLITS if found[s]]
    if not with_csv:
        return None
    lacking = [s for s in SPLITS if not found[s]]
    if lacking:
        raise DataError(f"{split_dir}: {', '.join(f'{s}/' for s in with_csv)} hold a .csv of "
                        f"questions but {', '.join(f'{s}/' for s in lacking)} do not; use one "
                        "layout (CSV, or annotation JSON) for all three splits")
    return {s: found[s][0] for s in SPLITS}
