"""BM25 ranking for the environments whose agents search a corpus (the shop's products, the
encyclopedia's paragraphs, the document collections' sections).

:class:`BM25Index` is ``rank-bm25``'s Okapi BM25 (its idf, document lengths and term
frequencies) over documents given as token lists; each environment tokenizes in its own way.
Each term's contribution to every document's score is computed once when the index is built,
so a query adds a few arrays instead of looping over all documents per query word as
``get_scores`` does; the scores are the same. Read-only once built, so rollouts in several
threads can share one.

``rank-bm25`` is an optional extra: it is imported only when an index is built, and a missing
install is a :class:`~skillgrad.errors.ConfigError` that names the extra to install.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from skillgrad.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np


def require_rank_bm25(missing: str) -> Any:
    """``rank_bm25.BM25Okapi``; without ``rank-bm25`` a ConfigError saying ``missing`` (which
    names the extra to install)."""
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        raise ConfigError(missing) from None
    return BM25Okapi


class BM25Index:
    """Okapi BM25 over ``documents`` (token lists); documents are named by their position.
    ``missing`` is the error when ``rank-bm25`` is not installed, raised before
    ``documents`` is read."""

    def __init__(self, documents: Iterable[Sequence[str]], *, missing: str) -> None:
        bm25_okapi = require_rank_bm25(missing)
        import numpy as np  # a dependency of rank-bm25

        corpus = [list(d) for d in documents]
        self.size = len(corpus)
        bm25 = bm25_okapi(corpus)
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for doc, frequencies in enumerate(bm25.doc_freqs):
            for term, count in frequencies.items():
                docs, counts = postings.setdefault(term, ([], []))
                docs.append(doc)
                counts.append(count)
        norm = bm25.k1 * (1 - bm25.b + bm25.b * np.array(bm25.doc_len) / bm25.avgdl)
        self._terms: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for term, (docs, counts) in postings.items():
            at, tf = np.array(docs), np.array(counts, dtype=float)
            weight = (bm25.idf.get(term) or 0) * (tf * (bm25.k1 + 1) / (tf + norm[at]))
            self._terms[term] = (at, weight)

    def scores(self, query: Sequence[str]) -> np.ndarray:
        """Every document's BM25 score for ``query`` (a repeated word counts again)."""
        import numpy as np

        scores = np.zeros(self.size)
        for word in query:
            if word in self._terms:
                at, weight = self._terms[word]
                scores[at] += weight
        return scores

    def top(self, query: Sequence[str], k: int) -> list[int]:
        """The positions of the best ``k`` documents with a positive score, best first; equal
        scores keep the documents' order."""
        import numpy as np

        scores = self.scores(query)
        ranked = np.argsort(-scores, kind="stable")[:k]
        return [int(i) for i in ranked if scores[i] > 0]
