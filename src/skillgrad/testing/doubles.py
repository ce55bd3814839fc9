"""Scripted stand-ins for the target and the optimizer, for tests and the scripted quickstart.

:func:`make_reader` is a target that knows the gold answers of a QA file but answers in a full
sentence, and writes years as "in 1903", until the skill says otherwise.
:func:`scripted_optimizer` answers each optimizer call by ``request.kind`` (the name of the
prompt template, never its wording), building the answer from what the prompt shows (the
skill, the tasks, the listed edits); an unknown kind raises
:class:`~skillgrad.errors.ScriptExhausted`. :data:`reader_optimizer` proposes the rules that
fix the reader (its analyst, :func:`reader_failures`, can be wrapped by another optimizer).
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillgrad import prompts
from skillgrad.envs.data import load_records
from skillgrad.errors import ScriptExhausted
from skillgrad.models.messages import ChatRequest, Message

CONCISE_RULE = "Reply with only the answer itself: no full sentence and no restated question."
YEAR_RULE = "Write a year as its four digits alone (1903, not 'in 1903')."
_CONCISE = re.compile(r"only the answer|answer only|bare answer|no full sentence", re.I)
_YEAR = re.compile(r"four digits", re.I)

FailureAnalyst = Callable[[str, str, str], dict[str, Any]]
"""``(skill, failed tasks, prompt) -> {"reasoning": ..., "edits": [...]}``."""


def make_reader(data: str, base_dir: Path) -> Callable[[ChatRequest], str]:
    """A scripted target that knows the answers in ``data`` and follows two format rules."""
    path = Path(data) if Path(data).is_absolute() else base_dir / data
    gold: dict[str, tuple[str, str]] = {}
    for rec in load_records(path):
        answer = rec["answer"][0] if isinstance(rec["answer"], list) else rec["answer"]
        gold[str(rec["question"]).strip()] = (str(answer), str(rec.get("kind", "")))

    def reply(request: ChatRequest) -> str:
        if request.kind is not None:
            raise ScriptExhausted(f"the scripted reader answers tasks, not {request.kind!r} calls")
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


def scripted_optimizer(analyse_failures: FailureAnalyst) -> Callable[[ChatRequest], Any]:
    """An optimizer reply function, routed on ``request.kind``.

    ``analyse_failures(skill, failed_tasks, prompt)`` answers the failure analysts (as edits,
    or as suggestions or plain rules when those are asked for) and the whole-document rewrite of a minibatch;
    success analysts propose nothing; merges (of edits or of plain rules) fold duplicates; ranks keep the given order; the
    learning rate applies every edit that fits; the epoch-level calls restate the skill's
    rules, count the decisions and keep the first reminders; rewrites append the proposed
    rules; an agent skill's new description is the analyst's ``description`` (asked with the
    requests the agent did not load it for), or the skill's first heading; the outcome-blind
    reviewer names an episode that sent one reply again unchanged "repeated itself"."""

    def reply(request: ChatRequest) -> Any:
        answer = _ANSWERS.get(request.kind or "")
        if answer is None:
            known = ", ".join(sorted(_ANSWERS))
            raise ScriptExhausted(f"the scripted optimizer has no answer for a call of kind "
                                  f"{request.kind!r} (it answers {known})")
        return answer(_Call(request), analyse_failures)

    return reply


class _Call:
    """One optimizer call: its kind, its prompt and the request's JSON schema."""

    def __init__(self, request: ChatRequest) -> None:
        self.kind = str(request.kind)
        self.prompt = request.messages[0].text()  # a repair retry appends; the prompt stays first
        self.schema = request.json_schema or {}

    def skill(self) -> str:
        """The skill shown inside ``<skill>...</skill>``."""
        if "<skill>" not in self.prompt:
            raise ScriptExhausted(f"the {self.kind!r} prompt shows no <skill> block")
        return self.prompt.split("<skill>", 1)[1].split("</skill>", 1)[0].strip("\n")

    def outside_skill(self) -> str:
        """The prompt without its ``<skill>`` block (so the skill's own lines never count)."""
        head, _, rest = self.prompt.partition("<skill>")
        return head + rest.partition("</skill>")[2]

    def after(self, heading: str) -> str:
        """Everything after the first ``heading`` of the prompt."""
        if heading not in self.prompt:
            raise ScriptExhausted(f"the {self.kind!r} prompt has no {heading!r} heading")
        return self.prompt.split(heading, 1)[1]

    def number(self, pattern: str, what: str) -> int:
        found = re.search(pattern, self.prompt)
        if found is None:
            raise ScriptExhausted(f"the {self.kind!r} prompt does not state {what}")
        return int(found.group(1))


def _failure_edits(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    return analyse(call.skill(), call.after("## Failed tasks"), call.prompt)


def _failure_suggestions(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    out = _failure_edits(call, analyse)
    return {"reasoning": out["reasoning"], "suggestions": [
        {"type": "add_rule", "description": e["content"], "support": e["support"]}
        for e in out["edits"] if e["op"] == "append"]}


def _failure_rules(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    out = _failure_edits(call, analyse)
    return {"difference": out["reasoning"],
            "rules": [e["content"] for e in out["edits"] if e["op"] == "append"]}


def _no_edits(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    return {"reasoning": "the skill already covers what worked", "edits": []}


def _no_suggestions(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    return {"reasoning": "the skill already covers what worked", "suggestions": []}


def _merged(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    return {"reasoning": "merged duplicates", "edits": edits_in_prompt(call.prompt)}


def _merged_rules(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    """The rules listed in a merge of rules, duplicates folded, most supported first."""
    support: dict[str, int] = {}
    for rule, n in re.findall(r"^- (.*) \(support (\d+)\)$", call.after("## Proposals"),
                              re.MULTILINE):
        support[rule] = support.get(rule, 0) + int(n)
    return {"difference": "merged duplicates",
            "rules": sorted(support, key=lambda r: -support[r])}


def _ranked(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    count = len(re.findall(r"^\d+\. \[", call.outside_skill(), re.MULTILINE))  # listed items
    return {"reasoning": "as given", "order": list(range(1, count + 1))}


def _rate(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    most = call.number(r"you may apply between 0 and (\d+)", "how many edits it may apply")
    return {"reasoning": "all of them fit", "confidence": 0.5, "n_edits": most}


def _guidance(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    rules = [line for line in call.skill().splitlines() if line.strip()
             and not line.startswith(("#", "<!--", "- "))]
    return {"reasoning": "the rules that held over the epoch",
            "guidance": "\n".join(f"- {r.strip()}" for r in rules[-3:])}


def _notes(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    accepted = len(re.findall(r"^- step \d+: accept", call.prompt, re.MULTILINE))
    rejected = len(re.findall(r"^- step \d+: reject", call.prompt, re.MULTILINE))
    return {"reasoning": "counted the decisions",
            "notes": f"- Last epoch: {accepted} steps accepted, {rejected} rejected."}


def _reminders(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    limit = call.schema.get("properties", {}).get("reminders", {}).get("maxItems")
    if not isinstance(limit, int):
        raise ScriptExhausted("the 'consolidate' request's schema caps no reminders list")
    listed = re.findall(r"^- (.*)$", call.after("## Reminders"), re.MULTILINE)
    return {"reasoning": "kept the first", "reminders": listed[:limit]}


def _revised(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    rules = re.findall(r"^\d+\. add rule: (.*)$", call.prompt, re.MULTILINE)
    return {"document": _with_rules(call.skill(), rules)}


def _rewritten(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    out = analyse(call.skill(), call.after("## Tasks"), call.prompt)
    rules = [e["content"] for e in out["edits"] if e["op"] == "append"]
    return {"document": _with_rules(call.skill(), rules)}


def _trigger(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    """A new description for a skill the agent seldom loaded: the analyst's, when its reply
    to the requests holds a ``description``; else the skill's first heading and when to use
    it."""
    out = analyse(call.skill(), call.after("## Requests for which"), call.prompt)
    if isinstance(out.get("description"), str):
        return {"description": out["description"]}
    lines = [ln.strip("# ").strip() for ln in call.skill().splitlines() if ln.startswith("#")]
    head = lines[0] if lines else "How to handle these requests"
    return {"description": f"{head}. Use it for every request of the kind it was written for."}


def _judged(call: _Call, analyse: FailureAnalyst) -> dict[str, Any]:
    """A failed episode's mode: "repeated itself" where the counted facts show one reply sent
    again unchanged (quoting the episode's last agent turn), else "none visible"."""
    facts = call.after("## Counted from the episode").split("## Failure modes", 1)[0]
    if "times in a row" not in facts:
        return {"mode": "none visible", "evidence": ""}
    turns = re.findall(r"^\[assistant\] (.*)$", call.prompt, flags=re.MULTILINE)
    return {"mode": "repeated itself", "evidence": turns[-1][:80] if turns else ""}


_ANSWERS: dict[str, Callable[[_Call, FailureAnalyst], dict[str, Any]]] = {
    "analyst_failure": _failure_edits,
    "analyst_rules": _failure_rules,
    "suggest_failure": _failure_suggestions,
    "analyst_success": _no_edits,
    "suggest_success": _no_suggestions,
    "merge": _merged,
    "merge_final": _merged,
    "merge_rules": _merged_rules,
    "rank": _ranked,
    "learning_rate": _rate,
    "slow_update": _guidance,
    "meta_skill": _notes,
    "consolidate": _reminders,
    "rewrite": _revised,
    "rewrite_minibatch": _rewritten,
    "trigger": _trigger,
    "judge": _judged,
}


def kind_of_prompt(prompt: str) -> str:
    """The optimizer template ``prompt`` was rendered from, for a request whose kind was lost on
    the way (an OpenAI-compatible server never sees it): the template whose text before its
    first placeholder opens the prompt, read from the templates themselves, so it follows
    their rewording. Raises :class:`~skillgrad.errors.ScriptExhausted` when none does."""
    openings = {kind: prompts.template(kind).split("{{", 1)[0] for kind in _ANSWERS}
    found = sorted((k for k, text in openings.items() if prompt.startswith(text)),
                   key=lambda k: -len(openings[k]))
    if not found:
        raise ScriptExhausted(f"no optimizer template opens the prompt {prompt[:80]!r}...")
    return found[0]


def http_responder(
    target: Callable[[ChatRequest], str], optimizer: Callable[[ChatRequest], Any]
) -> Callable[[dict[str, Any]], str]:
    """A :class:`~skillgrad.testing.FakeOpenAIServer` responder that serves a scripted target
    and optimizer on one endpoint. A request that asks for JSON (a ``response_format``) is the
    optimizer's: its kind never goes over the wire, so it is read back with
    :func:`kind_of_prompt`, and its JSON schema from the ``response_format``; a dict answer is
    sent as JSON text. Any other request is the target's."""

    def respond(body: dict[str, Any]) -> str:
        messages = tuple(Message(role=m["role"], content=m["content"]) for m in body["messages"])
        wanted = body.get("response_format")
        if not wanted:
            return target(ChatRequest(messages=messages))
        schema = wanted.get("json_schema", {}).get("schema") if isinstance(wanted, dict) else None
        request = ChatRequest(messages=messages, json_schema=schema,
                              kind=kind_of_prompt(messages[0].text()))
        answer = optimizer(request)
        return answer if isinstance(answer, str) else json.dumps(answer)

    return respond


def _with_rules(skill: str, rules: list[str]) -> str:
    """``skill`` with ``rules`` added before the protected blocks that end it."""
    head, sep, tail = skill.partition("<!--")
    added = "\n\n".join(r for r in rules if r not in skill)
    if not added:
        return skill
    return f"{head.rstrip()}\n\n{added}\n\n{sep}{tail}".rstrip() if sep else (
        f"{skill.rstrip()}\n\n{added}")


def reader_failures(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    """The failure analyst of the reader (a :data:`FailureAnalyst`): the format rule behind
    each kind of failure it is shown, while the skill lacks it; no edit once it has both."""
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


reader_optimizer = scripted_optimizer(reader_failures)
"""The optimizer of the reader: proposes the format rule behind the failures it is shown."""


def edits_in_prompt(prompt: str) -> list[dict[str, Any]]:
    """Edits listed in a merge prompt, duplicates folded, support summed."""
    merged: dict[str, dict[str, Any]] = {}
    pattern = (r"\[(\w+)\] support (\d+)\n(?:   anchor: (.*)\n)?(?:   file: (.*)\n)?"
               r"   content: (.*)")
    for op, support, anchor, file, content in re.findall(pattern, prompt):
        text = ast.literal_eval(content)
        entry = merged.setdefault(text, {"op": op, "anchor": ast.literal_eval(anchor or "''"),
                                         "content": text, "support": 0,
                                         **({"file": file} if file else {})})
        entry["support"] += int(support)
    return sorted(merged.values(), key=lambda e: -e["support"])
