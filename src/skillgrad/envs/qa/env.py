"""The built-in ``qa`` environment: question answering over the user's JSON / JSONL file.

In deep-learning terms this is a data set plus a loss: each record is one task, the rollout is
a single chat call with the skill as the system message, and the loss is SQuAD-style exact
match (``hard``) and token F1 (``soft``) against the gold answers.

A record is an object with

* ``question`` (string, required),
* ``answer`` (a string, or a non-empty list of acceptable strings; required),
* ``id`` (string or integer, optional; default: the first 12 hex digits of the SHA-1 of the
  context and question, so a record keeps its id when the file is reordered),
* ``context`` (string or null, optional): a passage shown before the question,
* ``group`` (string or null, optional): records of one group stay in one split.

Other keys are ignored. A bad record raises :class:`~skillgrad.errors.DataError` naming the
file, the record's line (JSONL) or number (JSON) and the key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from skillgrad.envs.base import SPLITS, EnvCommon, EnvOptions, single_turn
from skillgrad.envs.data import (
    SplitTasksMixin,
    iter_parsed,
    load_splits,
    parse_records,
    skill_file,
)
from skillgrad.envs.scoring import exact_match, extract_final_answer, normalize_answer, token_f1
from skillgrad.errors import DataError
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.records import RolloutResult, Task


class QAOptions(EnvOptions):
    """The ``env:`` keys of the ``qa`` environment."""

    data_path: Path | None = Field(
        default=None, description="JSON / JSONL records; required when split_mode is 'ratio'"
    )
    max_tokens: int = Field(default=64, ge=1, description="token limit of the target's answer")
    temperature: float = Field(
        default=0.0, ge=0.0, description="sampling temperature of the target"
    )
    context_chars: int = Field(
        default=4000, ge=1, description="longer contexts are cut to this many characters"
    )


@dataclass(frozen=True)
class QARecord:
    """One validated record; ``where`` locates it for error messages."""

    id: str
    question: str
    answers: tuple[str, ...]
    context: str | None
    group: str | None
    where: str


class QAEnvironment(SplitTasksMixin[QAOptions]):
    """Single-turn question answering scored by exact match and token F1.

    Build it with :meth:`create` from config, or directly from tasks (tests, other loaders).
    """

    SKILL_PACKAGE = "skillgrad.envs.qa"
    Options: ClassVar[type[EnvOptions]] = QAOptions

    @staticmethod
    def load_file(path: Path) -> Iterable[QARecord]:
        """Read and validate one data file, a record at a time (a subclass reads another
        published format, and may return a list)."""
        return iter_parsed(path, parse_record)

    @classmethod
    def create(cls, common: EnvCommon, options: QAOptions, base_dir: Path) -> QAEnvironment:
        """Load and split the records named by the config; relative paths are resolved against
        ``base_dir`` (the config file's folder). Each record becomes its task as it is read,
        so the records' text is not held beside the tasks'."""
        base_dir = Path(base_dir)
        cut = options.context_chars
        located = load_splits(
            common, options.data_path, base_dir,
            lambda path: [(r.where, to_task(r, cut)) for r in cls.load_file(path)],
            lambda pair: pair[1].group)
        _check_unique_ids([pair for split in SPLITS for pair in located[split]])
        tasks = {split: [task for _, task in located[split]] for split in SPLITS}
        return cls(tasks, options, skill_file(common, base_dir))

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        # No try/except: a model failure is infrastructure and must propagate, never be scored.
        system, user, completion = single_turn(model, skill, task.prompt,
                                               max_tokens=self.options.max_tokens,
                                               temperature=self.options.temperature)
        golds = _golds(task)
        answer = extract_final_answer(completion.text)
        hard = exact_match(answer, golds)
        soft = token_f1(answer, golds)
        reason = (
            "" if hard >= 1.0 else _reason(answer, golds, soft, completion.truncated, self.options)
        )
        return RolloutResult(
            task_id=task.id,
            messages=(system, user, Message(role="assistant", content=completion.text)),
            answer=answer,
            hard=hard,
            soft=soft,
            reason=reason,
            turns=1,
            usage=completion.usage,
        )


# ----------------------------------------------------------------------------- loading


def load_qa_records(path: Path) -> list[QARecord]:
    """Read and validate the QA records of one file, a record at a time."""
    return parse_records(path, parse_record)


def parse_record(raw: dict[str, Any], where: str) -> QARecord:
    """Validate one raw record; ``where`` prefixes every error message."""
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise DataError(
            f"{where}: key 'question' must be a non-empty string{_got(raw, 'question')}"
        )
    answers = _answers(raw, where)
    context = raw.get("context")
    if context is not None and not isinstance(context, str):
        raise DataError(f"{where}: key 'context' must be a string or null{_got(raw, 'context')}")
    group = raw.get("group")
    if group is not None and not isinstance(group, str):
        raise DataError(f"{where}: key 'group' must be a string or null{_got(raw, 'group')}")
    record_id = raw.get("id")
    if record_id is None:
        record_id = hashlib.sha1(f"{context or ''}\n{question}".encode()).hexdigest()[:12]
    elif isinstance(record_id, int) and not isinstance(record_id, bool):
        record_id = str(record_id)
    elif not isinstance(record_id, str) or not record_id.strip():
        raise DataError(
            f"{where}: key 'id' must be a non-empty string or an integer{_got(raw, 'id')}"
        )
    return QARecord(record_id, question, answers, context or None, group, where)


def _answers(raw: dict[str, Any], where: str) -> tuple[str, ...]:
    if "answer" not in raw:
        hint = " (found 'answers'; rename it to 'answer')" if "answers" in raw else ""
        raise DataError(f"{where}: missing key 'answer'{hint}")
    value = raw["answer"]
    items = [value] if isinstance(value, str) else value
    if (
        not isinstance(items, list)
        or not items
        or not all(isinstance(a, str) and a.strip() for a in items)
    ):
        raise DataError(
            f"{where}: key 'answer' must be a non-empty string or a non-empty list of "
            f"non-empty strings (quote numbers){_got(raw, 'answer')}"
        )
    return tuple(items)


def _got(raw: dict[str, Any], key: str) -> str:
    if key not in raw:
        return " (missing)"
    shown = repr(raw[key])
    return f" (got {shown if len(shown) <= 40 else shown[:37] + '...'})"


def _check_unique_ids(located: Sequence[tuple[str, Task]]) -> None:
    """Refuse a repeated task id, or a record that repeats another's question and context under
    an id of its own, naming both records (``located``: where each task's record is, and the
    task). A repeat counts twice in the gate's paired test, or puts a training question in the
    test: a rule that changes the target's guess on three selection questions, each there
    twice, passed the gate at p = 0.001 and lost on test."""
    seen: dict[str, str] = {}
    asked: dict[str, str] = {}
    for where, task in located:
        first = seen.get(task.id)
        if first is not None:
            raise DataError(
                f"{where}: key 'id' {task.id!r} duplicates {first}; give each record a "
                "unique 'id'"
            )
        seen[task.id] = where
        prompt = str(task.prompt)
        if prompt in asked:
            raise DataError(
                f"{where}: keys 'question' and 'context' repeat those of {asked[prompt]}; a "
                "repeated question counts twice when skills are compared: leave one out"
            )
        asked[prompt] = where


def to_task(record: QARecord, context_chars: int) -> Task:
    """The task the target sees: a short user message (the skill comes first, as system)."""
    prompt = f"Question: {record.question}"
    if record.context:
        context = record.context
        if len(context) > context_chars:
            context = (
                context[:context_chars]
                + f"\n[context cut to its first {context_chars} of {len(record.context)} characters]"
            )
        prompt = f"Context:\n{context}\n\n{prompt}"
    return Task(
        id=record.id,
        prompt=prompt,
        reference={"answers": list(record.answers)},
        group=record.group,
        metadata={},
    )


# ----------------------------------------------------------------------------- scoring


def _golds(task: Task) -> list[str]:
    reference = task.reference
    if not isinstance(reference, dict) or not isinstance(reference.get("answers"), list):
        raise DataError(f"task {task.id!r}: reference must be {{'answers': [...]}} for the qa env")
    return reference["answers"]


def _reason(
    answer: str, golds: Sequence[str], soft: float, truncated: bool, options: QAOptions
) -> str:
    gold = " or ".join(_quote(g) for g in golds[:3]) + (" (or others)" if len(golds) > 3 else "")
    if truncated:
        got = f"; the answer read was {_quote(answer)}" if answer else " before any answer"
        return f"reply was cut off at the token limit (max_tokens={options.max_tokens}){got}; gold is {gold}"
    if not answer:
        return f"empty answer; gold is {gold}"
    said = normalize_answer(answer)
    if any(normalize_answer(g) and normalize_answer(g) in said for g in golds):
        # The most common failure of chatty models; saying so is the useful feedback.
        return (f"answer {_quote(answer)} does not match gold {gold}: it contains the gold "
                f"answer plus extra words, and scoring is exact match, so only the answer "
                f"alone counts (token F1 {soft:.2f})")
    partial = f" (partial overlap, token F1 {soft:.2f})" if soft > 0 else ""
    return f"answer {_quote(answer)} does not match gold {gold}{partial}"


def _quote(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")
