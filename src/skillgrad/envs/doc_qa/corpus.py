"""A document collection the agent can search, open and read: the input space of the
document-QA environments (the "images" the agent looks at, one section at a time).

A :class:`Document` is a titled list of :class:`Section` s. :func:`sections_from_text` cuts a
plain-text or markdown file into sections (at markdown headings, else into chunks of about
``chunk_chars`` on line boundaries; a chunk that starts inside a markdown table repeats the
table's header so every chunk can be read on its own). :class:`DocumentIndex` ranks sections
with BM25 (``rank-bm25``, through :class:`skillgrad.envs.open_qa.SearchIndex`) and offers the
three tools ``search``, ``open_document`` and ``read_section``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from skillgrad.envs.open_qa import Paragraph, SearchIndex, tokens
from skillgrad.envs.search import require_rank_bm25
from skillgrad.envs.tools import Tool, ToolError

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{3,}")
_FILE_SUFFIX = re.compile(r"\.(txt|md|markdown|json|pdf)$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class Section:
    title: str
    text: str


@dataclass(frozen=True)
class Document:
    id: str
    title: str
    sections: tuple[Section, ...]
    kind: str = ""


def sections_from_text(text: str, chunk_chars: int = 1500) -> list[Section]:
    """Sections of a text file: one per markdown heading (long ones chunked), or chunks."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[tuple[str, list[str]]] = []
    for line in lines:
        heading = _HEADING.match(line)
        if heading is not None:
            blocks.append((heading.group(2).strip(), []))
        elif blocks:
            blocks[-1][1].append(line)
        else:
            blocks.append(("", [line]))
    sections: list[Section] = []
    for title, body in blocks:
        chunks = _chunks(body, chunk_chars)
        for n, chunk in enumerate(chunks, start=1):
            name = title or _preview(chunk, 48)
            if title and len(chunks) > 1:
                name = f"{title} (part {n})"
            sections.append(Section(name, chunk))
    return [s for s in sections if s.text.strip() or s.title]


def _chunks(lines: list[str], limit: int) -> list[str]:
    """Cut lines into chunks of at most about ``limit`` characters, at line boundaries (a
    single longer line is cut hard); a chunk starting inside a table repeats its header."""
    out: list[str] = []
    current: list[str] = []
    size = 0
    header: list[str] = []  # header + separator of the table we are in, if any
    for i, line in enumerate(lines):
        if _TABLE_SEP.match(line) and i > 0 and lines[i - 1].lstrip().startswith("|"):
            header = [lines[i - 1], line]
        elif not line.lstrip().startswith("|"):
            header = []
        for piece in [line[j:j + limit] for j in range(0, max(len(line), 1), limit)]:
            if current and size + len(piece) + 1 > limit:
                out.append("\n".join(current).strip("\n"))
                current = list(header) if piece.lstrip().startswith("|") and header else []
                size = sum(len(h) + 1 for h in current)
            current.append(piece)
            size += len(piece) + 1
    if current:
        out.append("\n".join(current).strip("\n"))
    return [c for c in out if c.strip()] or [""]


def _preview(text: str, n: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= n else flat[: n - 1].rstrip() + "…"


def _cap(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


class DocumentIndex:
    """The searchable collection, and the agent's tools over it.

    ``snippet_chars`` caps the sentence shown per search hit, ``section_chars`` the text shown
    by ``read_section`` and ``list_sections`` the lines of an ``open_document`` listing, so that
    observations stay short for small models.
    """

    def __init__(self, documents: Sequence[Document], *, top_k: int = 3,
                 snippet_chars: int = 160, section_chars: int = 1500,
                 list_sections: int = 30) -> None:
        require_rank_bm25('the document-QA environments need rank-bm25: pip install '
                          '"skillgrad[doc_qa]"')
        self.documents = {d.id: d for d in documents}
        self.top_k, self.snippet_chars = top_k, snippet_chars
        self.section_chars, self.list_sections = section_chars, list_sections
        self._where: list[tuple[str, int]] = []
        paragraphs: list[Paragraph] = []
        for doc in documents:
            for number, section in enumerate(doc.sections, start=1):
                paragraphs.append(Paragraph(f"{doc.title} {section.title}", section.text))
                self._where.append((doc.id, number))
        self._index = SearchIndex(paragraphs)
        # SearchIndex returns the very objects it was given, so identity finds a hit's
        # position even when two sections have the same text.
        self._positions = {id(p): i for i, p in enumerate(self._index.paragraphs)}
        self._by_key = {_key(d.id): d.id for d in documents}
        self._by_key.update({_key(d.title): d.id for d in documents
                             if sum(_key(o.title) == _key(d.title) for o in documents) == 1})

    # ------------------------------------------------------------------------- the tools

    def tools(self) -> list[Tool]:
        doc = {"type": "string", "description": "document id, e.g. from search"}
        return [
            Tool("search", "Search all documents; returns the best matching documents with "
                 "their ids and the best section.",
                 {"type": "object", "properties": {"query": {"type": "string"}},
                  "required": ["query"]}, self.search),
            Tool("open_document", "List a document's numbered sections.",
                 {"type": "object", "properties": {"doc": doc}, "required": ["doc"]},
                 self.open_document),
            Tool("read_section", "Read one section of a document.",
                 {"type": "object", "properties": {"doc": doc, "section": {"type": "integer"}},
                  "required": ["doc", "section"]}, self.read_section),
        ]

    def hits(self, query: str) -> list[tuple[str, int]]:
        """(document id, best section number) of the best ``top_k`` documents for ``query``."""
        seen: dict[str, int] = {}
        for paragraph in self._index.search(str(query), len(self._where)):
            doc_id, number = self._where[self._positions[id(paragraph)]]
            seen.setdefault(doc_id, number)
            if len(seen) == self.top_k:
                break
        return list(seen.items())

    def search(self, query: str) -> str:
        found = self.hits(query)
        if not found:
            raise ToolError(f"no document matches {query!r}; try other words")
        lines = []
        for doc_id, number in found:
            doc = self.documents[doc_id]
            section = doc.sections[number - 1]
            lines.append(f"[{doc_id}] {_cap(doc.title, 80)}\n  section {number} "
                         f"({_cap(section.title, 40)}): {self._snippet(section.text, query)}")
        return "\n".join(lines)

    def open_document(self, doc: str) -> str:
        document = self.resolve(doc)
        shown = document.sections[: self.list_sections]
        lines = [f"[{document.id}] {document.title}"
                 + (f" ({document.kind})" if document.kind else "")
                 + f": {len(document.sections)} sections"]
        for number, section in enumerate(shown, start=1):
            preview = _preview(section.text, 60)
            label = section.title if section.title != preview else ""
            lines.append(f"{number}. {label}{' — ' if label else ''}{preview}")
        if len(document.sections) > len(shown):
            lines.append(f"… {len(document.sections) - len(shown)} more sections; use search "
                         "to find the right one")
        lines.append(f'Read one with read_section {{"doc": "{document.id}", "section": N}}.')
        return "\n".join(lines)

    def read_section(self, doc: str, section: int | str) -> str:
        document = self.resolve(doc)
        number = self.section_number(document, section)
        part = document.sections[number - 1]
        text = part.text
        if len(text) > self.section_chars:
            # Say so rather than cut silently: the agent may need to know the rest is missing.
            text = (f"{text[: self.section_chars].rstrip()}… (cut at {self.section_chars} of "
                    f"{len(part.text)} characters)")
        return f"[{document.id}] section {number} of {len(document.sections)}: {part.title}\n{text}"

    # ------------------------------------------------------------------------- lookups

    def resolve(self, doc: object) -> Document:
        """The document an agent named (its id or unique title; case and brackets ignored)."""
        key = _key(str(doc))
        # Agents often add the file suffix they saw in a question ("..._1941_01.txt").
        found = self._by_key.get(key) or self._by_key.get(_FILE_SUFFIX.sub("", key))
        if found is None:
            raise ToolError(f"there is no document {str(doc)!r}; use the ids shown by search")
        return self.documents[found]

    def section_number(self, document: Document, section: object) -> int:
        text = str(section).strip()
        titles = [_key(s.title) for s in document.sections]
        if _key(text) in titles:
            return titles.index(_key(text)) + 1
        digits = re.search(r"\d+", text)
        number = int(digits.group()) if digits else 0
        if not 1 <= number <= len(document.sections):
            raise ToolError(f"{document.id} has sections 1 to {len(document.sections)}; "
                            f"{text!r} is not one of them")
        return number

    def _snippet(self, text: str, query: str) -> str:
        """The sentence (or table row) of ``text`` sharing most words with the query."""
        wanted = set(tokens(query))
        pieces = [p.strip() for p in _SENTENCE.split(text) if p.strip()]
        best = max(pieces, key=lambda p: len(wanted & set(tokens(p))), default="")
        return _cap(" ".join(best.split()), self.snippet_chars)


def _key(text: str) -> str:
    return " ".join(re.sub(r"[\[\]\"'`§]", " ", text).lower().split())
