"""The ``searchqa`` environment: SearchQA in its materialised layout, as single-turn QA with
the retrieved snippets as context.

The layout is a folder with ``train/``, ``val/`` and ``test/``, each holding JSON files (an
array of items, or JSON Lines) of ``{"id", "question", "context", "answers"}``, where
``context`` is the snippets as the SearchQA release writes them (``[DOC] [TLE] title [PAR]
text ...``). The snippets are rewritten as one ``title: text`` line each, and the task is
scored like ``qa``: exact match (``hard``) and token F1 (``soft``) against any answer.

    env: {name: searchqa, split_mode: split_dir, split_dir: data/searchqa_split}
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from skillgrad.envs.base import EnvOptions
from skillgrad.envs.data import located_records
from skillgrad.envs.qa.env import QAEnvironment, QAOptions, QARecord, parse_record
from skillgrad.errors import DataError

_DOC = re.compile(r"\[DOC\]")
_TITLE = re.compile(r"\[TLE\]\s*(.*?)\s*\[PAR\]\s*(.*)", re.DOTALL)


class SearchQAOptions(QAOptions):
    """The ``env:`` keys of ``searchqa`` (those of ``qa``; contexts are snippets)."""

    context_chars: int = Field(default=3000, ge=1, description="snippets are cut to this")


def snippets(context: str) -> str:
    """SearchQA's ``[DOC] [TLE] title [PAR] text`` snippets as ``title: text`` lines."""
    if "[DOC]" not in context:
        return context.strip()
    lines = []
    for doc in _DOC.split(context):
        doc = doc.strip()
        if not doc:
            continue
        match = _TITLE.match(doc)
        title, text = (match.group(1), match.group(2)) if match else ("", doc)
        text = " ".join(text.split())
        lines.append(f"- {title}: {text}" if title else f"- {text}")
    return "\n".join(lines)


def load_searchqa_records(path: Path) -> list[QARecord]:
    """Validate the items of one materialised SearchQA file."""
    records = []
    for where, raw in located_records(path):
        if "answers" not in raw:
            hint = " (found 'answer': this is the qa layout, use env.name qa)" if (
                "answer" in raw) else ""
            raise DataError(f"{where}: missing key 'answers'{hint}")
        context = raw.get("context")
        if not isinstance(context, str):
            raise DataError(f"{where}: key 'context' must be the snippets as a string")
        item: dict[str, Any] = {"id": raw.get("id"), "question": raw.get("question"),
                                "answer": raw["answers"], "context": snippets(context)}
        records.append(parse_record(item, where))
    return records


class SearchQAEnvironment(QAEnvironment):
    """SearchQA questions answered from their retrieved snippets."""

    Options: ClassVar[type[EnvOptions]] = SearchQAOptions

    @staticmethod
    def load_file(path: Path) -> list[QARecord]:
        return load_searchqa_records(path)
