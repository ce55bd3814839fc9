"""The ``mcq`` environment: multiple-choice questions scored by the chosen label, in the format
of LiveMathematicianBench (and any benchmark shaped like it).

An item is ``{"id", "question", "choices", "correct_choice"}``, at the top level or under
``"mcq"``; ``choices`` is a list of ``{"label", "text"}`` (or of strings, or a label -> text
mapping) and ``correct_choice`` a ``{"label", "text"}`` or a label. The choices are shuffled
with a seed per item (so a model cannot learn "the answer is usually A", and the same item is
always shown the same way), relabelled A, B, C, ...; the answer is read from ``<answer>X</answer>``,
an ``Answer: X`` line, or the last line, as a label or as the text of a choice.

LiveMathematicianBench items also carry the ``theorem`` the question is built on and a proof
``sketch`` (top-level keys). With ``use_theorem`` / ``use_sketch`` they are shown after the
choices, under ``## Theorem`` / ``## Proof Sketch``: reference material that makes the task
easier, off by default. SkillOpt's ``split_dir`` layout (``train/``, ``val/``, ``test/``, each
with a JSON list of items) is read as it is. SkillOpt seeds its shuffle otherwise (and shuffles
again for every training batch), so an item may be shown there in another order than here.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from skillgrad.envs.base import EnvCommon, EnvOptions, single_turn
from skillgrad.envs.data import SplitTasksMixin, load_splits, located_records, skill_file
from skillgrad.envs.scoring import extract_final_answer, normalize_answer
from skillgrad.errors import DataError
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.records import RolloutResult, Task

LABELS = "ABCDEFGHIJ"
_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


class MCQOptions(EnvOptions):
    """The ``env:`` keys of ``mcq``."""

    data_path: Path | None = Field(None, description="JSON / JSONL items (split_mode ratio)")
    shuffle_choices: bool = Field(True, description="shuffle each item's choices (seeded)")
    choice_seed: int = 0
    use_theorem: bool = Field(False, description="show the item's theorem after the choices")
    use_sketch: bool = Field(False, description="show the item's proof sketch after the choices")
    max_tokens: int = Field(512, ge=1, description="token limit of the target's reply")
    temperature: float = Field(0.0, ge=0.0)


@dataclass(frozen=True)
class MCQItem:
    id: str
    question: str
    choices: tuple[str, ...]  # texts, in the order shown (labels A, B, ...)
    correct: int
    group: str | None
    sections: tuple[tuple[str, str], ...] = ()  # (heading, text) shown after the choices


# The reference sections an option adds to the prompt: option -> (item key, heading).
REFERENCE_SECTIONS = {"use_theorem": ("theorem", "Theorem"),
                      "use_sketch": ("sketch", "Proof Sketch")}


def parse_item(raw: dict[str, Any], where: str, seed: int, shuffle: bool,
               show: tuple[str, ...] = ()) -> MCQItem:
    """An item; ``show`` names the :data:`REFERENCE_SECTIONS` options that are on."""
    nested = raw.get("mcq")
    body: dict[str, Any] = nested if isinstance(nested, dict) else raw
    question = str(body.get("question") or "").strip()
    if not question:
        raise DataError(f"{where}: missing 'question'")
    labelled = _choices(body.get("choices"), where)
    correct_label, correct_text = _correct(body.get("correct_choice"), where)
    texts = [t for _, t in labelled]
    index = next((i for i, (label, text) in enumerate(labelled)
                  if (correct_label and label == correct_label)
                  or (not correct_label and text == correct_text)), None)
    if index is None:
        raise DataError(f"{where}: correct_choice {correct_label or correct_text!r} is not one "
                        "of the choices")
    item_id = str(raw.get("id") or hashlib.sha1(question.encode()).hexdigest()[:12])
    order = list(range(len(texts)))
    if shuffle:
        random.Random(f"{seed}:{item_id}").shuffle(order)
    return MCQItem(item_id, question, tuple(texts[i] for i in order), order.index(index),
                   str(raw["group"]) if raw.get("group") is not None else None,
                   tuple(_section(raw, option, where) for option in show))


def _section(raw: dict[str, Any], option: str, where: str) -> tuple[str, str]:
    key, heading = REFERENCE_SECTIONS[option]
    text = raw.get(key)
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"{where}: env.{option} is on but the item has no {key!r} text")
    return heading, text.strip()


def _choices(raw: Any, where: str) -> list[tuple[str, str]]:
    if isinstance(raw, dict):
        pairs = [(_label(k), str(v).strip()) for k, v in sorted(raw.items())]
    elif isinstance(raw, list):
        pairs = [(_label(c.get("label") or LABELS[i]), str(c.get("text", "")).strip())
                 if isinstance(c, dict) else (LABELS[i], str(c).strip())
                 for i, c in enumerate(raw[: len(LABELS)])]
    else:
        raise DataError(f"{where}: 'choices' must be a list or a label -> text mapping")
    pairs = [(label, text) for label, text in pairs if text]
    if len(pairs) < 2:
        raise DataError(f"{where}: needs at least two non-empty choices")
    return pairs


def _correct(raw: Any, where: str) -> tuple[str, str]:
    if isinstance(raw, dict):
        return _label(raw.get("label", "")), str(raw.get("text") or "").strip()
    if isinstance(raw, str) and raw.strip():
        return _label(raw), ""
    raise DataError(f"{where}: missing 'correct_choice' (a label or {{label, text}})")


def _label(text: Any) -> str:
    return str(text).strip().upper().rstrip(".):")


def read_choice(reply: str, choices: tuple[str, ...]) -> int | None:
    """The index of the choice a reply picks, or None."""
    tagged = _TAG.findall(reply)
    answer = tagged[-1].strip() if tagged else extract_final_answer(reply)
    lines = [ln for ln in answer.strip().splitlines() if ln.strip()]
    answer = lines[-1] if lines else ""
    label = _label(answer.strip("*`() "))
    if len(label) == 1 and label in LABELS[: len(choices)]:
        return LABELS.index(label)
    said = normalize_answer(answer)
    for i, text in enumerate(choices):
        if said and said == normalize_answer(text):
            return i
    first = _label(answer.split()[0]) if answer.split() else ""
    return LABELS.index(first) if len(first) == 1 and first in LABELS[: len(choices)] else None


class MCQEnvironment(SplitTasksMixin[MCQOptions]):
    """Multiple-choice questions; built from config with :meth:`create`."""

    SKILL_PACKAGE = "skillgrad.envs.mcq"
    Options: ClassVar[type[EnvOptions]] = MCQOptions

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> MCQEnvironment:
        show = tuple(o for o in REFERENCE_SECTIONS if getattr(options, o))

        def load(path: Path) -> list[Task]:
            return [_task(parse_item(raw, where, options.choice_seed, options.shuffle_choices,
                                     show))
                    for where, raw in located_records(path)]

        splits = load_splits(common, options.data_path, base_dir, load, lambda t: t.group)
        return cls(splits, options, skill_file(common, base_dir))

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        system, user, completion = single_turn(model, skill, task.prompt,
                                               max_tokens=self.options.max_tokens,
                                               temperature=self.options.temperature)
        choices = tuple(task.reference["choices"])
        correct = int(task.reference["correct"])
        picked = read_choice(completion.text, choices)
        hard = float(picked == correct)
        right = f"{LABELS[correct]} ({choices[correct][:80]!r})"
        if picked is None:
            cut = " (the reply was cut off at the token limit)" if completion.truncated else ""
            reason = f"no choice label found in the reply{cut}; correct is {right}"
        else:
            reason = "" if hard else (f"chose {LABELS[picked]} ({choices[picked][:80]!r}); "
                                      f"correct is {right}")
        return RolloutResult(
            task_id=task.id, answer="" if picked is None else LABELS[picked], hard=hard,
            soft=hard, reason=reason, usage=completion.usage,
            messages=(system, user, Message(role="assistant", content=completion.text)),
        )


def _task(item: MCQItem) -> Task:
    shown = "\n".join(f"{LABELS[i]}. {text}" for i, text in enumerate(item.choices))
    extra = "".join(f"\n\n## {heading}\n{text}" for heading, text in item.sections)
    return Task(id=item.id, prompt=f"{item.question}\n\nChoices:\n{shown}{extra}",
                group=item.group,
                reference={"choices": list(item.choices), "correct": item.correct})
