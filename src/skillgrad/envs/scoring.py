"""Answer scoring for question answering (the loss function of the QA environments).

The split of responsibilities is deliberate:

* :func:`extract_final_answer` is *lenient about format*: it finds the answer behind an
  ``Answer:`` / ``Final answer:`` marker and drops quotes, markdown emphasis and a trailing
  period, so a skill is never punished for harmless wrapping.
* :func:`exact_match` and :func:`token_f1` are *strict about content* (SQuAD-style): a reply
  like "The company was founded in 1987." does not exactly match "1987". A skill that teaches
  the target to answer with only the exact span is therefore rewarded, which is what the
  optimizer is meant to learn.
* :func:`anls` is the document-VQA loss (DocVQA's ANLS term): tolerant of a few wrong
  characters, as OCR-like misreadings are, but zero for an answer far from every gold.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)

# A line that starts with an answer marker, optionally wrapped in markdown ("**Answer:**",
# "## Final answer:", "- Answer:").
_MARKER = re.compile(
    r"^[\s>#*_\-]*(?:final\s+)?answer\s*[*_]*\s*[:：]\s*(?:[*_]+(?=\s|$))?(?P<rest>.*)$",
    re.IGNORECASE,
)
_WRAPPERS = (
    ("**", "**"),
    ("__", "__"),
    ("*", "*"),
    ("_", "_"),
    ("`", "`"),
    ('"', '"'),
    ("'", "'"),
    ("\u201c", "\u201d"),
    ("\u2018", "\u2019"),
)


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation and the articles a / an / the, collapse whitespace."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: Iterable[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return max((1.0 if pred == normalize_answer(g) else 0.0 for g in golds), default=0.0)


def token_f1(prediction: str, golds: Iterable[str]) -> float:
    """The best SQuAD token-overlap F1 of the prediction against any gold answer."""
    pred_tokens = normalize_answer(prediction).split()
    return max((_f1(pred_tokens, normalize_answer(g).split()) for g in golds), default=0.0)


def _f1(pred: list[str], gold: list[str]) -> float:
    if not pred or not gold:
        # Both empty counts as agreement (SQuAD convention); one empty is a miss.
        return float(pred == gold)
    common = sum((Counter(pred) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def extract_final_answer(text: str) -> str:
    """The answer in a model's reply.

    If a line starts with ``Answer:`` or ``Final answer:`` (any case, optionally in markdown
    bold or after a heading / bullet mark) the text after the *last* such marker is used; when
    that line is otherwise empty, the next non-empty line is. Otherwise the whole reply is used.
    Surrounding quotes, backticks, markdown emphasis and one trailing period are removed.
    """
    lines = text.strip().splitlines()
    answer = text
    for i in range(len(lines) - 1, -1, -1):
        match = _MARKER.match(lines[i])
        if match is None:
            continue
        answer = match.group("rest")
        if not _clean(answer):
            answer = next((line for line in lines[i + 1 :] if line.strip()), "")
        break
    return _clean(answer)


def _clean(answer: str) -> str:
    previous = None
    while answer != previous:
        previous = answer
        answer = answer.strip()
        if answer.endswith(".") and not answer.endswith(".."):
            answer = answer[:-1].rstrip()
        for left, right in _WRAPPERS:
            if (
                len(answer) > len(left) + len(right) - 1
                and answer.startswith(left)
                and answer.endswith(right)
            ):
                answer = answer[len(left) : len(answer) - len(right)]
                break
    return answer


# ----------------------------------------------------------------------------- ANLS


def levenshtein(a: str, b: str) -> int:
    """The edit distance (insertions, deletions, substitutions) between ``a`` and ``b``.

    A two-row dynamic programme: answers are short, so O(len(a) * len(b)) is cheap, and it
    saves a compiled dependency for one function.
    """
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1,
                               previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def anls_normalize(text: str) -> str:
    """What ANLS compares: lowercased, trimmed, inner whitespace collapsed to one space (the
    DocVQA evaluation's normalisation; punctuation and articles count, unlike SQuAD's)."""
    return " ".join(text.lower().split())


def anls(prediction: str, golds: Iterable[str], tau: float = 0.5) -> float:
    """Normalized Levenshtein similarity of one answer, the per-question term of ANLS.

    For each gold answer NL = levenshtein(pred, gold) / max(len(pred), len(gold)) on
    :func:`anls_normalize`-d strings; the score is ``1 - NL`` when ``NL < tau`` and 0 otherwise
    (a far-off answer is wrong, not partly right); the best gold counts. Two empty strings
    agree (score 1). No gold answers score 0.
    """
    pred = anls_normalize(prediction)
    best = 0.0
    for gold in golds:
        target = anls_normalize(gold)
        longest = max(len(pred), len(target))
        distance = levenshtein(pred, target) / longest if longest else 0.0
        if distance < tau:
            best = max(best, 1.0 - distance)
    return best
