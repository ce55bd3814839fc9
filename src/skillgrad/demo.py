"""Scripted stand-ins for a target and an optimizer model, for demos that need no model at all.

The demo *reader* knows the gold answers of a QA data file but formats them the way a chatty
model does, unless the skill tells it otherwise: it answers in a full sentence until the skill
asks for the bare answer, and writes years as "in 1903" until the skill asks for four digits.
The demo *optimizer* reads the failed trajectories it is shown and proposes exactly the rule
that would fix the pattern it sees. Together they show the whole loop (rollout, reflect,
aggregate, select, update, gate) on a laptop in seconds. They are scripted models: use a real
backend for real training.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillgrad.envs.data import load_records
from skillgrad.records import ChatRequest

CONCISE_RULE = "Reply with only the answer itself: no full sentence and no restated question."
YEAR_RULE = "Write a year as its four digits alone (1903, not 'in 1903')."
_CONCISE = re.compile(r"only the answer|answer only|bare answer|no full sentence", re.I)
_YEAR = re.compile(r"four digits", re.I)


def make_reader(data: str, base_dir: Path) -> Callable[[ChatRequest], str]:
    """A scripted target that knows the answers in ``data`` and follows two format rules."""
    path = Path(data) if Path(data).is_absolute() else base_dir / data
    gold: dict[str, tuple[str, str]] = {}
    for rec in load_records(path):
        answer = rec["answer"][0] if isinstance(rec["answer"], list) else rec["answer"]
        gold[str(rec["question"]).strip()] = (str(answer), str(rec.get("kind", "")))

    def reply(request: ChatRequest) -> str:
        skill = request.messages[0].text()
        user = request.messages[-1].text()
        question = user.rsplit("Question:", 1)[-1].strip()
        answer, kind = gold.get(question, ("I do not know", ""))
        if kind == "year" and not _YEAR.search(skill):
            answer = f"in {answer}"
        if not _CONCISE.search(skill):
            return f"The answer to the question '{question}' is {answer}."
        return f"Answer: {answer}"

    return reply


FailureAnalyst = Callable[[str, str, str], dict[str, Any]]


def scripted_optimizer(analyse_failures: FailureAnalyst) -> Callable[[ChatRequest], Any]:
    """An optimizer reply function: ranks keep the given order, merges fold duplicates, success
    analysts propose nothing, and ``analyse_failures(skill, failed_tasks, prompt)`` answers the
    failure analysts (as edits, or as suggestions when those are asked for). The epoch-level
    and rewrite calls get plain, predictable answers: every edit that fits is applied, the
    guidance restates the skill's rules, whole documents append the proposed rules."""

    def reply(request: ChatRequest) -> Any:
        prompt = request.messages[-1].text()
        special = _special_call(prompt, analyse_failures)
        if special is not None:
            return special
        if '"order"' in prompt:
            found = re.search(r"of the (\d+) candidate", prompt)
            count = int(found.group(1)) if found else 0
            return {"reasoning": "as given", "order": list(range(1, count + 1))}
        if "## Proposals" in prompt or "Fixes from failed tasks" in prompt:
            return {"reasoning": "merged duplicates", "edits": edits_in_prompt(prompt)}
        suggest = '"suggestions"' in prompt
        if "FAILED" not in prompt.split("## Current skill")[0]:
            return {"reasoning": "the skill already covers what worked",
                    "suggestions" if suggest else "edits": []}
        out = analyse_failures(_skill_of(prompt), prompt.split("## Failed tasks", 1)[1], prompt)
        if suggest:
            return {"reasoning": out["reasoning"], "suggestions": [
                {"type": "add_rule", "description": e["content"], "support": e["support"]}
                for e in out["edits"] if e["op"] == "append"]}
        return out

    return reply


def _special_call(prompt: str, analyse_failures: FailureAnalyst) -> Any:
    """Answers to the learning-rate, epoch-level, appendix and rewrite calls (else None)."""
    if '"n_edits"' in prompt:
        most = re.search(r"you may apply between 0 and (\d+)", prompt)
        return {"reasoning": "all of them fit", "confidence": 0.5,
                "n_edits": int(most.group(1)) if most else 1}
    if prompt.startswith("You are writing the longitudinal guidance"):
        rules = [line for line in _skill_of(prompt).splitlines() if line.strip()
                 and not line.startswith(("#", "<!--", "- "))]
        return {"reasoning": "the rules that held over the epoch",
                "guidance": "\n".join(f"- {r.strip()}" for r in rules[-3:])}
    if prompt.startswith("You are keeping the notes"):
        steps = prompt.split("## Steps of the last epoch", 1)[1].split("\n## ", 1)[0]
        accepted = len(re.findall(r": accept", steps))
        rejected = len(re.findall(r": reject", steps))
        return {"reasoning": "counted the decisions",
                "notes": f"- Last epoch: {accepted} steps accepted, {rejected} rejected."}
    if prompt.startswith("You are tidying the reminder appendix"):
        limit = re.search(r"into at most (\d+)", prompt)
        listed = re.findall(r"^- (.*)$", prompt.split("## Reminders", 1)[1], re.MULTILINE)
        return {"reasoning": "kept the first", "reminders": listed[: int(limit.group(1))
                                                                   if limit else 1]}
    if prompt.startswith("You are revising a SKILL document"):
        rules = re.findall(r"^\d+\. add rule: (.*)$", prompt, re.MULTILINE)
        return {"document": _with_rules(_skill_of(prompt), rules)}
    if "Write a complete new\nversion of the skill" in prompt:
        out = analyse_failures(_skill_of(prompt), prompt.split("## Tasks", 1)[1], prompt)
        rules = [e["content"] for e in out["edits"] if e["op"] == "append"]
        return {"document": _with_rules(_skill_of(prompt), rules)}
    return None


def _skill_of(prompt: str) -> str:
    return prompt.split("<skill>", 1)[1].split("</skill>", 1)[0].strip("\n")


def _with_rules(skill: str, rules: list[str]) -> str:
    """``skill`` with ``rules`` added before the protected blocks that end it."""
    head, sep, tail = skill.partition("<!--")
    added = "\n\n".join(r for r in rules if r not in skill)
    if not added:
        return skill
    return f"{head.rstrip()}\n\n{added}\n\n{sep}{tail}".rstrip() if sep else (
        f"{skill.rstrip()}\n\n{added}")


def _demo_failures(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    edits = []
    sentences = tasks.count("The answer to the question")
    if sentences and not _CONCISE.search(skill):
        edits.append({"op": "append", "anchor": "", "content": CONCISE_RULE, "support": sentences,
                      "rationale": "answers were full sentences; exact match needs the bare span"})
    years = len(re.findall(r"\bin \d{4}\b", tasks))
    if years and not _YEAR.search(skill):
        edits.append({"op": "append", "anchor": "", "content": YEAR_RULE, "support": years,
                      "rationale": "years were given with a preposition"})
    return {"reasoning": f"{sentences} sentence answers, {years} prefixed years", "edits": edits}


optimizer = scripted_optimizer(_demo_failures)
"""The demo optimizer: proposes the format rule behind the failures it is shown."""


def edits_in_prompt(prompt: str) -> list[dict[str, Any]]:
    """Edits listed in a merge prompt, duplicates folded, support summed."""
    merged: dict[str, dict[str, Any]] = {}
    pattern = r"\[(\w+)\] support (\d+)\n(?:   anchor: (.*)\n)?   content: (.*)"
    for op, support, anchor, content in re.findall(pattern, prompt):
        text = ast.literal_eval(content)
        entry = merged.setdefault(text, {"op": op, "anchor": ast.literal_eval(anchor or "''"),
                                         "content": text, "support": 0})
        entry["support"] += int(support)
    return sorted(merged.values(), key=lambda e: -e["support"])
