"""The ``math`` environment: competition problems with a final answer, checked for
mathematical equivalence (the MATH family).

Items are read in the MATH format: ``{"problem", "solution"}`` where the gold answer is the last
``\\boxed{...}`` of the solution, or with an explicit ``"answer"``. The target's final answer
is the last ``\\boxed{...}`` of its reply (else an ``Answer:`` line, else its last line), and
``math-verify`` decides whether it equals the gold answer (``1/2`` = ``0.5`` = ``\\frac12``).
hard = soft = 1 for an equivalent answer.

Without ``data_path`` it serves a bundled set (``dataset``, see ``data/DATA_CARD.md``):
``champ``, the 79 CHAMP competition problems (``champ-dataset``, MIT) whose answer is an
integer, or ``gsm_symbolic``, 200 GSM8K-style word problems from reasoning-gym's generator
(Apache-2.0), grouped by template so that no template crosses splits.

``math-verify`` is in the ``math`` extra. Its timeouts use signals, which only work in the main
thread; in rollout worker threads the check runs without one.
"""

from __future__ import annotations

import hashlib
import re
import threading
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from skillgrad.envs.base import EnvCommon, EnvOptions, single_turn
from skillgrad.envs.data import (
    SplitTasksMixin,
    load_splits,
    located_records,
    package_file,
    skill_file,
)
from skillgrad.envs.scoring import extract_final_answer
from skillgrad.errors import ConfigError, DataError
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.records import RolloutResult, Task

# \boxed{...} and \fbox{...} (the MATH data set uses both), and the brace-less \boxed 5
_BOXED = re.compile(r"\\(?:boxed|fbox)(?:\s*\{|\s+([^\s${}]+))")
BUNDLED = {"champ": "champ_integer.jsonl", "gsm_symbolic": "gsm_symbolic.jsonl"}


class MathOptions(EnvOptions):
    """The ``env:`` keys of ``math``."""

    data_path: Path | None = Field(None, description="JSON / JSONL items in the MATH format "
                                   "instead of a bundled data set")
    dataset: Literal["champ", "gsm_symbolic"] = Field(
        "champ", description="bundled problems used without data_path")
    max_tokens: int = Field(1024, ge=1, description="token limit of the target's reply")
    temperature: float = Field(0.0, ge=0.0)


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` or ``\\fbox{...}`` in ``text`` (braces
    balanced; ``\\boxed 5`` without braces too), or None."""
    matches = list(_BOXED.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    if last.group(1) is not None:
        return last.group(1).rstrip(".,;:") or None
    depth, start = 1, last.end()
    for i in range(start, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[start:i].strip()
    return None


def final_answer(reply: str) -> str:
    boxed = last_boxed(reply)
    if boxed is not None:
        return boxed
    answer = extract_final_answer(reply)
    lines = [ln.strip() for ln in answer.splitlines() if ln.strip()]
    return lines[-1].strip("$ ") if lines else ""


def equivalent(answer: str, gold: str) -> bool:
    """Whether ``answer`` equals ``gold`` mathematically (``math-verify``), or as text."""
    if not answer:
        return False
    if answer.replace(" ", "") == gold.replace(" ", ""):
        return True
    try:
        from math_verify import parse, verify
    except ImportError:
        raise ConfigError('env math needs math-verify: pip install "skillgrad[math]"') from None
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    parsed_gold = parse(f"${gold}$", parsing_timeout=timeout)  # type: ignore[arg-type]
    parsed = parse(f"${answer}$", parsing_timeout=timeout)  # type: ignore[arg-type]
    return bool(parsed_gold and parsed and verify(parsed_gold, parsed, timeout_seconds=timeout))


def parse_item(raw: dict[str, Any], where: str) -> Task:
    problem = str(raw.get("problem") or raw.get("question") or "").strip()
    if not problem:
        raise DataError(f"{where}: missing 'problem'")
    gold = raw.get("answer")
    if gold is None and isinstance(raw.get("solution"), str):
        gold = last_boxed(raw["solution"])
    if gold is None or not str(gold).strip():
        raise DataError(f"{where}: no gold answer ('answer', or a \\boxed{{}} in 'solution')")
    item_id = str(raw.get("id") or raw.get("unique_id")
                  or hashlib.sha1(problem.encode()).hexdigest()[:12])
    meta = {k: raw[k] for k in ("level", "type", "subject") if k in raw}
    return Task(id=item_id, prompt=problem, reference={"answer": str(gold).strip()},
                group=str(raw["group"]) if raw.get("group") is not None else None,
                metadata=meta)


class MathEnvironment(SplitTasksMixin[MathOptions]):
    """Problems with one final answer, checked for equivalence; built with :meth:`create`."""

    SKILL_PACKAGE = "skillgrad.envs.math"
    Options: ClassVar[type[EnvOptions]] = MathOptions

    @classmethod
    def create(cls, common: EnvCommon, options: Any, base_dir: Path) -> MathEnvironment:
        def load(path: Path) -> list[Task]:
            return [parse_item(raw, where) for where, raw in located_records(path)]

        data_path = options.data_path
        if data_path is None and common.split_mode == "ratio":
            data_path = package_file("skillgrad.envs.math", "data", BUNDLED[options.dataset])
        splits = load_splits(common, data_path, base_dir, load, lambda t: t.group)
        return cls(splits, options, skill_file(common, base_dir))

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        system, user, completion = single_turn(model, skill, task.prompt,
                                               max_tokens=self.options.max_tokens,
                                               temperature=self.options.temperature)
        gold = task.reference["answer"]
        answer = final_answer(completion.text)
        hard = float(equivalent(answer, gold))
        if hard:
            reason = ""
        elif not answer:
            reason = f"no final answer found; gold is {gold!r}"
        else:
            boxed = "" if last_boxed(completion.text) is not None else " (no \\boxed{} answer)"
            reason = f"answer {answer!r} is not equivalent to gold {gold!r}{boxed}"
        if completion.truncated and not hard:
            reason += f"; the reply was cut off at {self.options.max_tokens} tokens"
        return RolloutResult(
            task_id=task.id, answer=answer, hard=hard, soft=hard, reason=reason,
            messages=(system, user, Message(role="assistant", content=completion.text)),
            usage=completion.usage,
        )
