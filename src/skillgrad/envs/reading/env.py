"""The built-in ``reading`` environment: reading comprehension over real Wikipedia paragraphs,
the gold paragraph given as context (SQuAD's own task).

In deep-learning terms it is a data set plus a loss: each task is one paragraph and one
question about it, answered in a single reply with the skill as the system message; the loss
is SQuAD-style exact match (``hard``) and token F1 (``soft``) against any gold answer, with the
``qa`` environment's rollout and failure reasons, plus whether the answer was a phrase of the
paragraph. Questions are split by article, so no article is seen in more than one split.

The data is ``open_qa``'s bundled subset of SQuAD v1.1 dev (CC BY-SA 4.0) and SQuAD-Shifts
new_wiki (CC BY 4.0): 20 articles, 160 paragraphs, 320 questions (see
``envs/open_qa/data/DATA_CARD.md``); any file in SQuAD's JSON format can be used instead with
``data_path``. ``questions_per_article`` and ``max_train`` / ``max_val`` / ``max_test`` make
small splits that still cover many articles and paragraphs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar, TypeVar

from pydantic import Field

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions
from skillgrad.envs.data import load_splits, package_file, skill_file
from skillgrad.envs.open_qa.env import BUNDLED, load_squad
from skillgrad.envs.qa import QAEnvironment, QAOptions, QARecord
from skillgrad.envs.qa.env import to_task
from skillgrad.envs.scoring import normalize_answer
from skillgrad.errors import DataError
from skillgrad.models.base import ChatModel
from skillgrad.records import RolloutResult, Task

T = TypeVar("T")
QUESTION = "\n\nQuestion: "  # what ``to_task`` puts between the paragraph and the question


class ReadingOptions(QAOptions):
    """The ``env:`` keys of ``reading`` (those of ``qa``, plus the sizes)."""

    data_path: Path | None = Field(
        default=None, description="SQuAD-format JSON; default: open_qa's bundled subset")
    questions_per_article: int | None = Field(
        default=None, ge=1, description="keep at most this many questions of each article, "
        "one per paragraph in turn (before splitting); default: all")
    max_train: int | None = Field(
        default=None, ge=1, description="cap on the train split, one question per article "
        "in turn; default: all")
    max_val: int | None = Field(default=None, ge=1, description="cap on the val split")
    max_test: int | None = Field(default=None, ge=1, description="cap on the test split")


class ReadingEnvironment(QAEnvironment):
    """Reading comprehension: a SQuAD paragraph and a question, answered in one reply.

    Built with :meth:`create`. Each split lists its questions one article in turn and, within
    an article, one paragraph in turn (:func:`in_turn`), so a cap (``max_*``,
    ``evaluation.test_env_num``) keeps as many articles and paragraphs as it can."""

    SKILL_PACKAGE = "skillgrad.envs.reading"
    Options: ClassVar[type[EnvOptions]] = ReadingOptions

    @classmethod
    def create(cls, common: EnvCommon, options: QAOptions, base_dir: Path
               ) -> ReadingEnvironment:
        assert isinstance(options, ReadingOptions)
        data_path = options.data_path
        if data_path is None and common.split_mode == "ratio":
            data_path = package_file("skillgrad.envs.open_qa", "data", BUNDLED)
        records = load_splits(common, data_path, Path(base_dir),
                              lambda path: load_reading(path, options.questions_per_article),
                              lambda r: r.group)
        _check_unique_ids([r for split in SPLITS for r in records[split]])
        caps = {"train": options.max_train, "val": options.max_val, "test": options.max_test}
        tasks = {split: [to_task(r, options.context_chars)
                         for r in in_turn(records[split])[:caps[split]]] for split in SPLITS}
        return cls(tasks, options, skill_file(common, base_dir))

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        result = super().rollout(task, skill, model)
        if result.hard >= 1.0 or not result.answer:
            return result
        note = _passage_note(result.answer, task.reference["answers"], task.prompt)
        return result.model_copy(update={"reason": result.reason + note})


def load_reading(path: Path, per_article: int | None = None) -> list[QARecord]:
    """The questions of one SQuAD-format file as records whose context is their paragraph and
    whose group is their article; with ``per_article``, at most that many per article, taken
    one per paragraph in turn. File order is kept."""
    questions = load_squad(path)[0]
    if per_article is not None:
        kept: set[str] = set()
        for article in dict.fromkeys(q.article for q in questions):
            mine = [q for q in questions if q.article == article]
            kept.update(q.id for q in spread(mine, lambda q: q.context)[:per_article])
        questions = [q for q in questions if q.id in kept]
    return [QARecord(q.id, q.question, q.answers, q.context, q.article,
                     f"{path}: article {q.article!r}, question {q.id!r}") for q in questions]


def in_turn(records: Sequence[QARecord]) -> list[QARecord]:
    """``records`` one article in turn, each article's one paragraph in turn: a prefix covers
    as many articles, then paragraphs, as it can."""
    return spread(spread(records, lambda r: r.context), lambda r: r.group)


def spread(items: Sequence[T], key: Callable[[T], str | None]) -> list[T]:
    """``items`` one ``key`` in turn (keys in order of first appearance, each key's items in
    their order): the first of each key, then the second of each, and so on."""
    queues: dict[str | None, list[T]] = {}
    for item in items:
        queues.setdefault(key(item), []).append(item)
    longest = max((len(q) for q in queues.values()), default=0)
    return [q[rank] for rank in range(longest) for q in queues.values() if rank < len(q)]


def _check_unique_ids(records: Sequence[QARecord]) -> None:
    seen: dict[str, QARecord] = {}
    for record in records:
        first = seen.setdefault(record.id, record)
        if first is not record:
            raise DataError(f"{record.where}: id {record.id!r} is used twice (also "
                            f"{first.where}); give each question a unique id")


def _passage_note(answer: str, golds: Sequence[str], prompt: str) -> str:
    """Whether a wrong answer is a phrase of the paragraph (a wrong or too long span) or not
    (paraphrased, or not read from it), which the gold answer alone does not tell."""
    passage = f" {normalize_answer(prompt.rpartition(QUESTION)[0] or prompt)} "
    said = normalize_answer(answer)
    if f" {said} " in passage:
        return "; it is a phrase of the context"
    if any(f" {normalize_answer(g)} " in passage for g in golds):
        return "; unlike the gold answer, it is not a phrase of the context"
    return "; it is not a phrase of the context"
