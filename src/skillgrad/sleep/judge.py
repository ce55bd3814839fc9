"""Scoring an answer to a mined task: rule checks first, a rubric judge second.

The checks are plain rules on the answer's text. The rubric is scored by a judge model (it can
be another model than the target) as a number from 0 to 1 with a reason. hard = every check
passes and the judge's score is at least :data:`PASS`; soft = the mean of the share of checks
passed and the judge's score. A judge reply that cannot be read is an infrastructure failure,
never a score of 0: it is asked once more and then stops the run (resumable).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from skillgrad.envs.workspace import AGENT_CHECKS, Check, describe
from skillgrad.errors import ModelError
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.prompts import render
from skillgrad.sleep.tasks import SleepTask

PASS = 0.8
# Openings of a refusal to do the work (the reply declines instead of answering).
_REFUSAL = re.compile(r"(?i)^\W*(i\s*(?:am|'m)\s+(?:sorry|unable|not able)|i\s+can(?:no|')t\b|"
                      r"i\s+cannot\b|as an ai\b|i\s+won't\b)")


def check(rule: Check, answer: str) -> bool:
    text = answer.lower()
    arg = rule.arg
    if rule.op == "contains":
        return str(arg).lower() in text
    if rule.op == "not_contains":
        return str(arg).lower() not in text
    if rule.op == "mentions_file":
        return str(arg).lower() in text
    if rule.op == "regex":
        return re.search(str(arg), answer, re.MULTILINE) is not None
    if rule.op == "max_chars":
        return len(answer) <= int(arg or 0)
    if rule.op == "min_chars":
        return len(answer) >= int(arg or 0)
    return not _REFUSAL.search(answer.strip())  # no_refusal


class Verdict(BaseModel):
    score: float = Field(ge=0.0, le=1.0)
    reason: str


def judge(model: ChatModel, task: SleepTask, answer: str, *, temperature: float | None = None,
          max_tokens: int = 512) -> Verdict:
    """The judge's score of ``answer`` against the task's rubric."""
    prompt = render("sleep_judge", intent=task.intent, rubric=task.rubric or "", answer=answer)
    reply = ask_json(model, [Message(role="user", content=prompt)], Verdict, kind="sleep_judge",
                     max_tokens=max_tokens, temperature=temperature)
    if reply.value is None:
        raise ModelError(f"the judge's reply for task {task.id} could not be read "
                         f"({reply.error}); it is never scored")
    return reply.value


def score(task: SleepTask, answer: str, judge_model: ChatModel | None,
          samples: int = 1, agent: dict[str, bool] | None = None) -> tuple[float, float, str]:
    """(hard, soft, reason) of an answer. ``agent``: the outcome of each working-copy check
    (agent mode), by :func:`describe`; without it those checks are not counted."""
    texts = [c for c in task.checks if c.op not in AGENT_CHECKS]
    failed = [describe(c) for c in texts if not check(c, answer)]
    outcomes = agent or {}
    failed += [name for name, passed in outcomes.items() if not passed]
    total = len(texts) + len(outcomes)
    share = 1.0 - len(failed) / total if total else 1.0
    reasons = [f"failed checks: {', '.join(failed)}"] if failed else []
    if task.rubric and judge_model is not None:
        verdicts = [judge(judge_model, task, answer, temperature=None if k == 0 else 0.7)
                    for k in range(samples)]
        mean = sum(v.score for v in verdicts) / len(verdicts)
        if mean < PASS:
            reasons.append(f"judge {mean:.2f} < {PASS}: {verdicts[0].reason}")
        hard = float(not failed and mean >= PASS)
        return hard, (share + mean) / 2, "; ".join(reasons)
    return float(not failed), share, "; ".join(reasons)
