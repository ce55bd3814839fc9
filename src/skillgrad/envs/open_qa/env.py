"""The built-in ``open_qa`` environment: open-domain questions over real Wikipedia paragraphs,
answered with a search tool (the SearchQA / HotpotQA family).

In deep-learning terms it is a data set plus a loss: the target sees only the question, calls
``search(query)`` (BM25 over title + paragraph of the whole corpus) as often as it needs within
a turn limit, and answers; the loss is SQuAD-style exact match (``hard``) and token F1
(``soft``) against any gold answer. Questions are split by article, so no article is seen in
more than one split and the gate is not fooled by near-duplicates.

The bundled data is a deterministic subset of SQuAD v1.1 dev (CC BY-SA 4.0) and SQuAD-Shifts
new_wiki (CC BY 4.0): 20 articles, 160 paragraphs, 320 questions (see ``data/DATA_CARD.md``). Any
file in SQuAD's JSON format can be used instead with ``data_path``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from skillgrad.envs.base import EnvCommon, EnvOptions, Split
from skillgrad.envs.data import SplitTasksMixin, load_splits, package_file, skill_file
from skillgrad.envs.scoring import exact_match, extract_final_answer, normalize_answer, token_f1
from skillgrad.envs.search import BM25Index
from skillgrad.envs.tools import Episode, Tool, ToolError, run_episode
from skillgrad.errors import DataError
from skillgrad.models.base import ChatModel
from skillgrad.records import RolloutResult, Task
from skillgrad.words import QUESTION_WORDS, STOP_WORDS

BUNDLED = "squad_subset.json"
_WORD = re.compile(r"[a-z0-9]+")
# The shared stop words less the first person and "this", plus "has", "have" and the question
# words, which almost every question holds.
_STOP = (STOP_WORDS - {"i", "me", "my", "this"}) | {"has", "have"} | QUESTION_WORDS


class OpenQAOptions(EnvOptions):
    """The ``env:`` keys of ``open_qa``."""

    data_path: Path | None = Field(None, description="SQuAD-format JSON; default: the bundled "
                                   "subset")
    tool_mode: Literal["text", "native"] = Field(
        "text", description="text: ACTION/ANSWER lines; native: the endpoint's tool calling")
    max_turns: int = Field(4, ge=1, description="model replies per question")
    skill_files: Literal["tool", "inline"] = Field(
        "tool", description="a skill package's other files: tool, listed and read with the "
        "read_skill_file tool; inline, all in the system message")
    top_k: int = Field(2, ge=1, le=10, description="paragraphs per search")
    snippet_chars: int = Field(500, ge=50, description="characters shown per paragraph")
    max_tokens: int = Field(96, ge=1, description="token limit of each reply")
    temperature: float = Field(0.0, ge=0.0)


@dataclass(frozen=True)
class Paragraph:
    title: str
    text: str


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    answers: tuple[str, ...]
    article: str
    context: str = ""  # the gold paragraph (the reading environment shows it)


def tokens(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


class SearchIndex:
    """BM25 over title + paragraph (:class:`~skillgrad.envs.search.BM25Index`)."""

    def __init__(self, paragraphs: Sequence[Paragraph]) -> None:
        self.paragraphs = list(paragraphs)
        self._bm25 = BM25Index(
            (tokens(f"{p.title} {p.text}") for p in self.paragraphs),
            missing='env open_qa needs rank-bm25: pip install "skillgrad[open_qa]"')

    def search(self, query: str, k: int) -> list[Paragraph]:
        words = tokens(query)
        if not words:
            return []
        return [self.paragraphs[i] for i in self._bm25.top(words, k)]


def load_squad(path: Path) -> tuple[list[Question], list[Paragraph]]:
    """Questions and paragraphs of a SQuAD-format file; a malformed file names the problem."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a JSON file ({exc.__class__.__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(f"{path}: not SQuAD format (expected an object with a 'data' list)")
    questions: list[Question] = []
    paragraphs: list[Paragraph] = []
    for a, article in enumerate(data["data"]):
        try:
            title = str(article["title"]).replace("_", " ")
            for p in article["paragraphs"]:
                context = str(p["context"])
                paragraphs.append(Paragraph(title, context))
                for qa in p["qas"]:
                    answers = tuple(dict.fromkeys(
                        (x["text"] if isinstance(x, dict) else str(x)).strip()
                        for x in qa["answers"]))
                    if answers:
                        questions.append(Question(str(qa["id"]), str(qa["question"]).strip(),
                                                  answers, title, context))
        except (KeyError, TypeError):
            raise DataError(f"{path}: article {a}: expected title, paragraphs[].context and "
                            "paragraphs[].qas[] with question, id and answers") from None
    if not questions:
        raise DataError(f"{path}: no questions with answers")
    return questions, paragraphs


class OpenQAEnvironment(SplitTasksMixin[OpenQAOptions]):
    """Open-domain QA with a search tool; built from config with :meth:`create`."""

    SKILL_PACKAGE = "skillgrad.envs.open_qa"
    Options: ClassVar[type[EnvOptions]] = OpenQAOptions

    def __init__(self, splits: dict[Split, list[Task]], index: SearchIndex,
                 options: OpenQAOptions, skill_path: Path | None = None) -> None:
        super().__init__(splits, options, skill_path)
        self.index = index
        self.search_tool = Tool(
            "search", "Search the encyclopedia; returns the best matching paragraphs.",
            {"type": "object", "properties": {"query": {"type": "string"}},
             "required": ["query"]}, self._search)

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> OpenQAEnvironment:
        data_path = options.data_path
        if data_path is None and common.split_mode == "ratio":
            data_path = package_file("skillgrad.envs.open_qa", "data", BUNDLED)
        corpus = _Corpus()
        splits = load_splits(common, data_path, base_dir, corpus.load, lambda t: t.group)
        return cls(splits, SearchIndex(corpus.paragraphs), options, skill_file(common, base_dir))

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        o = self.options
        episode = run_episode(model, skill, task.prompt, [self.search_tool], mode=o.tool_mode,
                              max_turns=o.max_turns, max_tokens=o.max_tokens,
                              temperature=o.temperature, skill_files=o.skill_files)
        golds = list(task.reference["answers"])
        answer = extract_final_answer(episode.answer or "")
        hard = exact_match(answer, golds) if episode.answer is not None else 0.0
        soft = token_f1(answer, golds) if episode.answer is not None else 0.0
        return RolloutResult(
            task_id=task.id, messages=episode.messages, answer=answer, hard=hard, soft=soft,
            reason="" if hard >= 1.0 else _reason(episode, answer, golds),
            turns=episode.turns, usage=episode.usage,
            metadata={"searches": [a.arguments.get("query") for a in episode.actions]},
        )

    def _search(self, query: str) -> str:
        hits = self.index.search(str(query), self.options.top_k)
        if not hits:
            raise ToolError(f"no paragraph matches {query!r}; try other words")
        n = self.options.snippet_chars
        return "\n\n".join(f"[{p.title}] {p.text[:n]}{'…' if len(p.text) > n else ''}"
                           for p in hits)


class _Corpus:
    """Reads SQuAD files into tasks and keeps every paragraph for the search index (all
    splits' paragraphs: retrieval is over the whole encyclopedia, as in open-domain QA)."""

    def __init__(self) -> None:
        self.paragraphs: list[Paragraph] = []

    def load(self, path: Path) -> list[Task]:
        questions, paragraphs = load_squad(path)
        self.paragraphs += paragraphs
        return [Task(id=q.id, prompt=f"Question: {q.question}", group=q.article,
                     reference={"answers": list(q.answers)}) for q in questions]


def _reason(episode: Episode, answer: str, golds: Sequence[str]) -> str:
    gold = " or ".join(repr(g) for g in golds[:3])
    searched = [a for a in episode.actions if a.ok]
    seen = any(normalize_answer(g) in normalize_answer(a.observation)
               for a in searched for g in golds)
    if episode.answer is None:
        what = episode.problems[0] if episode.problems else "no answer"
        return f"{what}; gold is {gold}"
    evidence = ("it never searched" if not episode.actions else
                "the search results contained the gold answer" if seen else
                "no search result contained the gold answer")
    said = normalize_answer(answer)
    extra = (" (the answer contains the gold answer plus extra words; scoring is exact match)"
             if any(normalize_answer(g) in said for g in golds) else "")
    return f"answer {answer!r} does not match gold {gold}{extra}; {evidence}"
