"""One document-QA episode and its score: the forward pass and loss shared by ``doc_qa`` and
``officeqa``.

The agent gets the question, acts with ``search`` / ``open_document`` / ``read_section``
(:func:`skillgrad.envs.tools.run_episode`) and answers. The answer is scored by
:func:`skillgrad.envs.doc_qa.answers.score_answer`; a miss gets a ``reason`` that says where
the evidence was and how far the agent got (never searched; the document holding the answer
never came up / was never opened; the section holding it was never read; the value was off or
had extra words), which is what the optimizer learns from.

A task's ``reference`` holds ``answers`` (gold strings), ``docs`` (ids of the documents that
hold the answer) and ``sections`` (``{doc id: [section numbers]}``, empty when unknown).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from skillgrad.envs.base import EnvOptions, Split
from skillgrad.envs.data import SplitTasksMixin
from skillgrad.envs.doc_qa.answers import Verdict, score_answer
from skillgrad.envs.doc_qa.corpus import DocumentIndex
from skillgrad.envs.scoring import extract_final_answer
from skillgrad.envs.tools import Action, Episode, ToolError, run_episode
from skillgrad.models.base import ChatModel
from skillgrad.records import RolloutResult, Task


class DocToolOptions(EnvOptions):
    """The ``env:`` keys shared by the document-QA environments."""

    tool_mode: Literal["text", "native"] = Field(
        "text", description="text: ACTION/ANSWER lines; native: the endpoint's tool calling")
    max_turns: int = Field(6, ge=1, description="model replies per question")
    skill_files: Literal["tool", "inline"] = Field(
        "tool", description="a skill package's other files: tool, listed and read with the "
        "read_skill_file tool; inline, all in the system message")
    top_k: int = Field(3, ge=1, le=10, description="documents per search")
    snippet_chars: int = Field(160, ge=40, description="characters of the snippet per hit")
    section_chars: int = Field(1500, ge=100, description="characters shown by read_section")
    list_sections: int = Field(30, ge=1, description="sections listed by open_document")
    max_tokens: int = Field(96, ge=1, description="token limit of each reply")
    temperature: float = Field(0.0, ge=0.0)
    tolerance: float = Field(0.001, ge=0.0, le=0.5,
                             description="relative tolerance when the gold is a number")


class DocToolEnvironment(SplitTasksMixin[DocToolOptions]):
    """What ``doc_qa`` and ``officeqa`` share once their data is loaded: the splits, the
    document index, the shipped skill and the rollout; each adds only its ``create``."""

    SKILL_PACKAGE = "skillgrad.envs.doc_qa"

    def __init__(self, splits: dict[Split, list[Task]], index: DocumentIndex,
                 options: DocToolOptions, skill_path: Path | None = None) -> None:
        super().__init__(splits, options, skill_path)
        self.index = index

    def rollout(self, task: Task, skill: str, model: ChatModel) -> RolloutResult:
        return doc_rollout(task, skill, model, self.index, self.options)


def doc_rollout(task: Task, skill: str, model: ChatModel, index: DocumentIndex,
                options: DocToolOptions) -> RolloutResult:
    """Run one episode on ``task`` and score it (see the module docstring)."""
    o = options
    episode = run_episode(model, skill, task.prompt, index.tools(), mode=o.tool_mode,
                          max_turns=o.max_turns, max_tokens=o.max_tokens,
                          temperature=o.temperature, skill_files=o.skill_files)
    ref = task.reference
    golds = [str(a) for a in ref["answers"]]
    answer = extract_final_answer(episode.answer or "")
    verdict = (score_answer(answer, golds, o.tolerance) if episode.answer is not None
               else Verdict(0.0, 0.0))
    trail = _Trail(episode.actions, index)
    return RolloutResult(
        task_id=task.id, messages=episode.messages, answer=answer, hard=verdict.hard,
        soft=verdict.soft, turns=episode.turns, usage=episode.usage,
        reason="" if verdict.hard >= 1.0 else _reason(episode, answer, golds, verdict, trail,
                                                       ref, index),
        metadata={"searches": trail.searches, "opened": sorted(trail.opened),
                  "read": [list(r) for r in trail.read]},
    )


class _Trail:
    """What the agent looked at: queries, documents surfaced, opened and sections read."""

    def __init__(self, actions: Sequence[Action], index: DocumentIndex) -> None:
        self.searches: list[str] = []
        self.surfaced: set[str] = set()
        self.opened: set[str] = set()
        self.read: list[tuple[str, int]] = []
        for action in actions:
            if not action.ok:
                continue
            args = action.arguments
            try:
                if action.tool == "search":
                    self.searches.append(str(args.get("query")))
                    self.surfaced |= {d for d, _ in index.hits(str(args.get("query")))}
                elif action.tool in ("open_document", "read_section"):
                    doc = index.resolve(args.get("doc"))
                    self.opened.add(doc.id)
                    if action.tool == "read_section":
                        number = index.section_number(doc, args.get("section"))
                        self.read.append((doc.id, number))
            except ToolError:  # cannot happen for an action that succeeded; be safe
                continue


def _reason(episode: Episode, answer: str, golds: Sequence[str], verdict: Verdict,
            trail: _Trail, ref: dict[str, Any], index: DocumentIndex) -> str:
    gold = " or ".join(repr(g) for g in golds[:3])
    if episode.answer is None:
        what = episode.problems[0] if episode.problems else "the reply was cut off (token limit)"
        head = f"{what}; gold is {gold}"
    else:
        note = f" ({verdict.note})" if verdict.note else ""
        head = f"answer {answer!r} does not match gold {gold}{note}"
    failed = [a for a in episode.actions if not a.ok]
    # Malformed tool calls are a frequent cause of getting nowhere; say so, with the first
    # error, so that the optimizer can teach the call format.
    calls = (f"; {len(failed)} of {len(episode.actions)} tool calls failed (first: "
             f"{failed[0].tool}: {failed[0].observation[:140]})" if failed else "")
    return f"{head}; {_evidence(trail, ref, index)}{calls}"


def _evidence(trail: _Trail, ref: dict[str, Any], index: DocumentIndex) -> str:
    docs = [d for d in ref.get("docs", []) if d in index.documents]
    if not trail.searches and not trail.opened:
        return "it never searched or opened a document"
    if not docs:
        return "the source document is unknown"
    where = ", ".join(f"{d} ({index.documents[d].title[:60]})" for d in docs)
    if not set(docs) & trail.opened:
        if set(docs) & trail.surfaced:
            return f"search showed the document holding the answer, {where}, but it never " \
                   "opened or read it"
        tried = "; ".join(repr(q) for q in trail.searches[:3]) or "none"
        return f"it never found the document holding the answer, {where} (its searches: {tried})"
    sections = {d: list(s) for d, s in (ref.get("sections") or {}).items()}
    wanted = [(d, n) for d in docs for n in sections.get(d, [])]
    if not wanted:
        return f"it opened the document holding the answer, {where}"
    missing = [(d, n) for d, n in wanted if (d, n) not in trail.read]
    if missing:
        shown = ", ".join(f"section {n} ({index.documents[d].sections[n - 1].title}) of {d}"
                          for d, n in missing[:3])
        return f"the answer is in {shown}, which it never read"
    return "it read the section holding the answer"
