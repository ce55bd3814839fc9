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

from skillgrad.demo import scripted_optimizer
from skillgrad.records import ChatRequest

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
