"""A toy task family whose scripted models make the training loop's behaviour predictable.

Each question asks for one attribute ("topic") of an item; the context holds the value. The
scripted target answers a topic exactly only when the skill has a rule for it, and refuses
everything when the skill contains the harmful line. The scripted optimizer proposes the rule
for the most common failing topic, except that for "year" it first proposes the harmful line,
unless validation already rejected it (the rejected-edit buffer shows it in the prompt).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from skillgrad.models.messages import ChatRequest, Message
from skillgrad.testing import kind_of_prompt, scripted_optimizer

HARMFUL = "NEVER ANSWER questions."
TOPICS = {"year": 5, "city": 3, "animal": 2, "color": 2}
VALUES = {"year": "19{:02d}", "city": "Town{}", "animal": "beast{}", "color": "hue{}"}
INITIAL_SKILL = "# Toy skill\n\nAnswer the question about the item.\n\nRule color: reply with the bare value.\n"


def rule(topic: str) -> str:
    return f"Rule {topic}: reply with the bare value."


def write_data(folder: Path, items_per_unit: int = 3) -> Path:
    """A JSONL file: every topic in proportion, grouped by item."""
    rows = []
    n = 0
    for topic, weight in TOPICS.items():
        for _ in range(weight * items_per_unit):
            n += 1
            value = VALUES[topic].format(n)
            rows.append({"id": f"t{n:03d}", "question": f"What is the {topic} of item {n}?",
                         "answer": value, "context": f"item {n}: {topic}: {value}",
                         "group": f"g{n}"})
    path = folder / "toy.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (folder / "toy_skill.md").write_text(INITIAL_SKILL, encoding="utf-8")
    return path


def target(request: ChatRequest) -> str:
    skill = request.messages[0].text()
    user = request.messages[-1].text()
    topic = re.search(r"What is the (\w+) of", user).group(1)  # type: ignore[union-attr]
    value = re.search(rf"{topic}: (\S+)", user).group(1)  # type: ignore[union-attr]
    if HARMFUL in skill:
        return "Answer: unknown"
    if rule(topic) in skill:
        return f"Answer: {value}"
    return f"Answer: {value} probably"


def _failures(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    if HARMFUL in skill:
        return {"reasoning": "the refusal line breaks everything",
                "edits": [{"op": "delete", "anchor": HARMFUL, "content": "", "support": 9}]}
    failing = Counter(re.findall(r"What is the (\w+) of", tasks))
    for topic, count in sorted(failing.items(), key=lambda kv: (-kv[1], kv[0])):
        if rule(topic) in skill:
            continue
        if topic == "year" and HARMFUL not in prompt:
            return {"reasoning": "refuse risky questions",
                    "edits": [{"op": "append", "content": HARMFUL, "support": count}]}
        return {"reasoning": f"{topic} answers carry extra words",
                "edits": [{"op": "append", "content": rule(topic), "support": count}]}
    return {"reasoning": "no pattern", "edits": []}


optimizer = scripted_optimizer(_failures)
"""The toy optimizer, routed on ``request.kind``."""


# ----------------------------------------------------------------------------- Training II
#
# ``make_optimizer`` extends the toy optimizer to every call the epoch-level and alternative
# update mechanisms make. Options choose its behaviour:
#   slow:      "fix" writes the rule of a topic still failing in the pairs; "harm" writes the
#              harmful line (validation must reject it); "leak" a gold answer it saw
#   rate:      the number of edits the learning-rate call asks for, or "garbage"
#   reminders: reminders every failure analyst adds (skill-aware reflection)
#   rewrite:   "follow" carries out the suggestions; "drop_block", "truncated", "empty" break it

SKILL_RE = re.compile(r"<skill>\n(.*?)\n</skill>", re.DOTALL)


def _skill_in(prompt: str) -> str:
    found = SKILL_RE.search(prompt)
    return found.group(1) if found else ""


def _failing_topics(text: str) -> list[str]:
    failing = Counter(re.findall(r"What is the (\w+) of[^\n]*\n\[assistant\] Answer: \S+ probably",
                                 text))
    return [t for t, _ in sorted(failing.items(), key=lambda kv: (-kv[1], kv[0]))]


def make_optimizer(
    slow: str = "fix", rate: Any = 1, reminders: list[str] | None = None,
    rewrite: str = "follow", base_dir: Any = None,
) -> Any:
    from skillgrad.models.messages import Completion

    def reply(request: ChatRequest) -> Any:
        kind = request.kind
        prompt = request.messages[0].text()
        if kind == "slow_update":
            if slow == "harm":
                return {"reasoning": "refuse", "guidance": f"- {HARMFUL}"}
            if slow == "leak":  # a fact of one training item, not a procedure
                year = re.search(r"year: (\d{4})", prompt)
                return {"reasoning": "remember it",
                        "guidance": f"- The year asked about is {year.group(1) if year else 1901}."}
            pairs = prompt.split("## Task pairs", 1)[1]
            skill = _skill_in(prompt)
            todo = [t for t in _failing_topics(pairs) if rule(t) not in skill]
            kept = re.findall(r"^- Rule .*$", skill, re.MULTILINE)  # the guidance so far
            lines = kept + [f"- {rule(t)}" for t in todo[:1]] or ["- Keep answers short."]
            return {"reasoning": "persistent failures", "guidance": "\n".join(lines)}
        if kind == "meta_skill":
            steps = prompt.count("- step ")
            return {"reasoning": "noted", "notes": f"- NOTE: the last epoch had {steps} steps."}
        if kind == "learning_rate":
            if rate == "garbage":
                return "I would apply a few of them."
            return {"reasoning": "the top ones are safe", "confidence": 0.7, "n_edits": rate}
        if kind == "consolidate":
            listed = re.findall(r"^- (.*)$", prompt.split("## Reminders", 1)[1], re.MULTILINE)
            return {"reasoning": "merged", "reminders": listed[:2]}
        if kind == "rewrite":
            return _rewrite(prompt, rewrite, Completion)
        if kind == "rewrite_minibatch":
            skill = _skill_in(prompt)
            todo = [t for t in _failing_topics(prompt) if rule(t) not in skill]
            add = rule(todo[0]) if todo else "Answer briefly."
            return {"document": _before_blocks(skill, add)}
        out = optimizer(request)
        aware = "reminders" in (request.json_schema or {}).get("properties", {})
        if aware and kind in ("analyst_failure", "suggest_failure"):
            out = {**out, "patterns": [{"pattern": "format", "kind": "EXECUTION_LAPSE"}],
                   "reminders": list(reminders or [])}
        return out

    return reply


def _before_blocks(skill: str, line: str) -> str:
    """``skill`` with ``line`` added before any protected block at its end."""
    head, sep, tail = skill.partition("<!--")
    return f"{head.rstrip()}\n\n{line}\n\n{sep}{tail}".rstrip() if sep else f"{skill.rstrip()}\n\n{line}"


def _rewrite(prompt: str, mode: str, completion: Any) -> Any:
    skill = _skill_in(prompt)
    if mode == "truncated":
        return completion(text='{"document": "# Toy skill\\n\\nAnswer', finish_reason="length")
    if mode == "empty":
        return {"document": "\n\n"}
    revisions = prompt.split("## Revisions to carry out", 1)[1]
    doc = skill
    for kind, value in re.findall(r"^\d+\. (add rule|remove rule): (.*)$", revisions, re.MULTILINE):
        if kind == "add rule":
            doc = _before_blocks(doc, value)
        else:
            doc = doc.replace(value.split("'")[1] + "\n", "")
    if mode == "drop_block":  # writes the blocks itself, but loses the first one
        blocks = re.findall(r"<!-- \w+_START -->.*?<!-- \w+_END -->", prompt, flags=re.DOTALL)
        doc = "\n\n".join([doc, *blocks[1:]])
    return {"document": doc}


# ----------------------------------------------------------------------------- proposals
POLITE = "Greet the user before you answer."


def make_sampled_optimizer(helpful: bool = True, base_dir: Any = None) -> Any:
    """The toy optimizer with ``proposal_form: rules``, whose rule depends on the temperature
    it is sampled at: greedy, a rule that changes nothing the scorer sees; at 0.7, the harmful
    line; hotter, the rule for the most common failing topic (``helpful``) or another no-op."""

    def reply(request: ChatRequest) -> Any:
        if request.kind != "analyst_rules":
            return optimizer(request)
        t = request.temperature or 0.0
        failing = Counter(re.findall(r"What is the (\w+) of", request.messages[0].text()))
        topic = sorted(failing.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        if t < 0.5:
            rules = [POLITE]
        elif t < 0.8:
            rules = [HARMFUL]
        else:
            rules = [rule(topic) if helpful else "Answer in a calm tone."]
        return {"difference": "the answers carry extra words", "rules": rules}

    return reply


def make_late_optimizer(base_dir: Any = None) -> Any:
    """The toy optimizer with ``proposal_form: rules`` that writes no rule below temperature
    1.0 and, from there, the rule for the most common failing topic: only a hotter sample
    finds it."""

    def reply(request: ChatRequest) -> Any:
        if request.kind != "analyst_rules" or (request.temperature or 0.0) >= 1.0:
            return make_sampled_optimizer()(request)
        return {"difference": "the answers carry extra words", "rules": []}

    return reply


def http_responder(body: dict[str, Any]) -> str:
    """The toy's target and optimizer served over HTTP (a ``FakeOpenAIServer`` responder)."""
    request = ChatRequest(messages=tuple(
        Message(role=m["role"], content=m["content"]) for m in body["messages"]))
    if body.get("response_format"):  # the optimizer's calls ask for JSON
        # The request's kind labels a call inside skillgrad and never goes over the wire:
        # the server side tells the call by the template its prompt opens with.
        kind = kind_of_prompt(request.messages[0].text())
        return json.dumps(optimizer(request.model_copy(update={"kind": kind})))
    return target(request)
