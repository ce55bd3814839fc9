"""Mining: recurring, checkable requests out of harvested sessions.

Every prompt a person typed is a request; a sub-agent's conversation holds none (what its
parent agent asked it is not the user's request), so it is never mined. What followed a
prompt in the log says how it went, with no guessing from wording: an interrupt; a re-ask
(the next prompt says nearly the same thing); the exit codes of the commands the agent ran (a
failing test or build, then a passing one); the files its tools changed. Requests are
clustered across sessions by their words, and a cluster seen at least ``min_occurrences``
times becomes a task.

The heuristic miner writes each task's checks (rule checks first: no refusal, the files the
satisfying work changed) and a rubric from those outcomes. The LLM miner (the optimizer
model) rewrites intent, checks and rubric from the same evidence; where its reply cannot be
used, the heuristic task stands in and the tasks file's notes say so, per task.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from pydantic import BaseModel, Field, ValidationError

from skillgrad.envs.workspace import AGENT_CHECKS, describe
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.prompts import render
from skillgrad.sleep.judge import check
from skillgrad.sleep.tasks import Check, Outcome, SessionEvidence, SleepTask, TasksFile, task_id
from skillgrad.traces.sessions import Session, ToolCall, Turn, valid_text
from skillgrad.words import FUNCTION_WORDS, QUESTION_WORDS

_WORD = re.compile(r"[a-z0-9_]+")
# Words that carry no request of their own: the shared function words (less "as") and the
# question words (less "whom" and "whose"), plus the fillers of a typed request.
_STOP = ((FUNCTION_WORDS - {"as"}) | (QUESTION_WORDS - {"whom", "whose"})
         | frozenset("again also done into just now ok okay onto please still yes".split()))
_FILE_KEYS = ("file_path", "path", "filename", "notebook_path", "target_file")
REASK_SIMILARITY = 0.5
CLUSTER_SIMILARITY = 0.6
MIN_WORDS = 3
# A shorter request ("please run the tests") has too few words to compare by; it is kept when
# it has at least this many, grouped only with the same words, and a task only when its log
# shows work an answer can be checked against (a command ran or a file changed).
MIN_SHORT_WORDS = 2


@dataclass
class Occurrence:
    """One prompt and what followed it."""

    session: Session
    index: int  # the prompt's turn index
    text: str
    outcome: Outcome
    commands: list[tuple[str, int | None]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    reply: str = ""

    @property
    def words(self) -> frozenset[str]:
        return content_words(self.text)

    @property
    def short(self) -> bool:
        return len(self.words) < MIN_WORDS


def content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 1)


def similarity(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def occurrences(session: Session) -> list[Occurrence]:
    """Each typed prompt of a session with the outcome the log shows for it; none for a
    sub-agent's conversation (its "prompts" were written by the agent that started it)."""
    if session.sidechain:
        return []
    prompts = [i for i, t in enumerate(session.turns) if t.role == "user" and not t.interrupt]
    found = []
    for n, index in enumerate(prompts):
        text = session.turns[index].text.strip()
        if len(content_words(text)) < MIN_SHORT_WORDS:
            continue  # "yes", "go on", "thanks", "fix it": not a request of its own
        end = prompts[n + 1] if n + 1 < len(prompts) else len(session.turns)
        segment = session.turns[index + 1:end]
        following = session.turns[end].text if end < len(session.turns) else None
        found.append(_occurrence(session, index, text, segment, following))
    return found


def _occurrence(session: Session, index: int, text: str, segment: Sequence[Turn],
                following: str | None) -> Occurrence:
    calls = [c for t in segment for c in t.tool_calls]
    commands = [(c.command or "", c.exit_code) for c in calls if c.command]
    files = sorted({f for c in calls for f in _files(c)})
    replies = [t.text for t in segment if t.role == "assistant" and t.text.strip()]
    if any(t.interrupt for t in segment):
        outcome: Outcome = "interrupted"
    elif following is not None and similarity(content_words(following),
                                              content_words(text)) >= REASK_SIMILARITY:
        outcome = "corrected"
    elif any(code not in (None, 0) for _, code in commands[-1:]):
        outcome = "failed"
    elif commands and commands[-1][1] == 0 or files:
        outcome = "satisfied"
    else:
        outcome = "unknown"
    return Occurrence(session, index, text, outcome, commands, files,
                      replies[-1] if replies else "")


def _files(call: ToolCall) -> list[str]:
    args = call.arguments if isinstance(call.arguments, dict) else {}
    return [str(args[k]) for k in _FILE_KEYS if isinstance(args.get(k), str) and args[k]]


def cluster(found: Iterable[Occurrence]) -> list[list[Occurrence]]:
    """Greedy clusters of the same request, each occurrence compared with a cluster's first
    member. Words are weighted by how rare they are among all the prompts (inverse document
    frequency), so "fix the failing test in billing" and "... in refunds" are two requests
    while two wordings of one request are one. A short request is too few words to weigh: it
    is grouped only with the same words ("Please run the tests." and "run the tests")."""
    everything = sorted(found, key=lambda o: (o.session.started or datetime.min.replace(
        tzinfo=timezone.utc), o.session.id, o.index))
    ordered = [o for o in everything if not o.short]
    df = Counter(w for o in ordered for w in o.words)
    weight = {w: math.log((len(ordered) + 1) / n) for w, n in df.items()}

    def alike(a: frozenset[str], b: frozenset[str]) -> float:
        # The weighted share of the smaller prompt's words the other has too: a wording with
        # one detail more ("... my key is X") is still the same request.
        smaller = min(sum(weight[w] for w in a), sum(weight[w] for w in b))
        return sum(weight[w] for w in a & b) / smaller if smaller else 0.0

    groups: list[list[Occurrence]] = []
    for occ in ordered:
        best = max(groups, key=lambda g: alike(g[0].words, occ.words), default=None)
        if best is not None and alike(best[0].words, occ.words) >= CLUSTER_SIMILARITY:
            best.append(occ)
        else:
            groups.append([occ])
    same: dict[frozenset[str], list[Occurrence]] = {}
    for occ in everything:
        if occ.short:
            same.setdefault(occ.words, []).append(occ)
    return groups + list(same.values())


def checkable(group: Sequence[Occurrence]) -> bool:
    """Whether a cluster's log shows something to check an answer against. A short request
    needs it (a command ran or a file changed), so "looks good" or "thanks", however often
    typed, is not a task; a longer one states what it wants in its words."""
    return not group[0].short or any(o.commands or o.files for o in group)


def task_commit(group: Sequence[Occurrence], chosen: Occurrence) -> str | None:
    """The commit a task is replayed at: the chosen wording's session's, where the log has
    it; else the latest satisfied occurrence's that has one (its work is what the checks
    were written from); else the latest occurrence's that has one. None only where no
    occurrence's session recorded a commit."""
    if chosen.session.git_commit:
        return chosen.session.git_commit
    satisfied = [o for o in group if o.outcome == "satisfied"]
    for o in [*reversed(satisfied), *reversed(group)]:
        if o.session.git_commit:
            return o.session.git_commit
    return None


def heuristic_task(group: Sequence[Occurrence], project: str) -> SleepTask:
    """A task from a cluster: its latest satisfied wording (else its latest), rule checks from
    what satisfied it, and a rubric that states the evidence."""
    satisfied = [o for o in group if o.outcome == "satisfied"]
    chosen = (satisfied or list(group))[-1]
    counts = Counter(f for o in satisfied for f in set(o.files))
    files = [f for f, n in counts.most_common(2)]
    checks = [Check(op="no_refusal")] + [Check(op="mentions_file", arg=_short(f)) for f in files]
    good = [c for o in satisfied for c, code in o.commands if code == 0]
    if good:  # what confirmed the satisfying work, run again in agent mode
        checks.append(Check(op="command_passes", arg=good[-1]))
    bad = [o for o in group if o.outcome in ("corrected", "interrupted", "failed")]
    rubric = [f"A good answer does what was asked: {chosen.text}"]
    if files:
        rubric.append("In the user's sessions the work that satisfied this request changed "
                      + ", ".join(files) + ".")
    if good:
        rubric.append(f"It was confirmed by running: {good[-1]}.")
    if bad:
        rubric.append(f"{len(bad)} of {len(group)} attempts were corrected, interrupted or "
                      "failed; an answer like those is not good enough.")
    outcomes = Counter(o.outcome for o in group)
    context = "; ".join(f"{n} {k}" for k, n in outcomes.most_common())
    skills = Counter(s for o in group for s in o.session.skills)
    return SleepTask(
        id=task_id(chosen.text, project), intent=chosen.text,
        context=f"seen {len(group)} times ({context})", checks=checks, rubric=" ".join(rubric),
        outcome=outcomes.most_common(1)[0][0], occurrences=len(group),
        evidence=[SessionEvidence(agent=o.session.agent, session=o.session.id, source=valid_text(
            str(o.session.source)), turn=o.index, time=o.session.turns[o.index].time,
            outcome=o.outcome) for o in group],
        skill=skills.most_common(1)[0][0] if skills else None,
        agent=Counter(o.session.agent for o in group).most_common(1)[0][0],
        commit=task_commit(group, chosen), miner="heuristic")


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


class MinedTask(BaseModel):
    """What the LLM miner writes for one cluster."""

    intent: str = Field(min_length=1)
    checks: list[Check]
    rubric: str = Field(min_length=1)
    checkable: bool


def llm_task(base: SleepTask, group: Sequence[Occurrence], model: ChatModel,
             max_tokens: int = 1024) -> tuple[SleepTask, str | None]:
    """The optimizer's version of a task (intent, checks, rubric) from the cluster's evidence;
    the heuristic task and the reason when its reply cannot be used or it finds the request
    not checkable."""
    prompt = render("sleep_mine", evidence=_digest(group), draft=base.model_dump_json(
        include={"intent", "checks", "rubric"}, indent=1))
    reply = ask_json(model, [Message(role="user", content=prompt)], MinedTask,
                     kind="sleep_mine", max_tokens=max_tokens)
    if reply.value is None:
        return base, f"the miner's reply was unusable ({reply.error})"
    if not reply.value.checkable:
        return base, "the miner found it not checkable"
    try:
        mined = base.model_copy(update={"intent": reply.value.intent, "checks": [
            Check.model_validate(c.model_dump()) for c in reply.value.checks],
            "rubric": reply.value.rubric, "miner": "llm"})
    except ValidationError as exc:
        return base, f"the miner's checks were invalid ({exc.errors()[0]['msg']})"
    wrong = _failed_by_the_work(mined.checks, group)
    if wrong:
        kept = [c for c in mined.checks if describe(c) not in wrong]
        if not kept:
            return base, (f"every check of the miner fails the agent's own satisfied replies "
                          f"({'; '.join(wrong)})")
        return mined.model_copy(update={"checks": kept}), (
            f"left out the miner's checks that the agent's own satisfied replies fail: "
            f"{'; '.join(wrong)}")
    return mined, None


def _failed_by_the_work(checks: Sequence[Check], group: Sequence[Occurrence]) -> list[str]:
    """The reply checks (on the answer's text) that a satisfied occurrence's own last words
    fail: the work the user was content with would not pass them, so they test something else
    (often the request's own wording: "contains 'CHANGELOG entry under Unreleased about ...'")."""
    replies = [o.reply for o in group if o.outcome == "satisfied" and o.reply.strip()]
    if not replies:
        return []
    return [describe(c) for c in checks
            if c.op not in AGENT_CHECKS and not all(check(c, r) for r in replies)]


def _digest(group: Sequence[Occurrence], limit: int = 6) -> str:
    lines = []
    for n, o in enumerate(group[-limit:], 1):
        lines.append(f"### Occurrence {n} ({o.outcome})\nRequest: {o.text[:600]}")
        for command, code in o.commands[-3:]:
            lines.append(f"Ran: {command[:200]} (exit {code if code is not None else '?'})")
        if o.files:
            lines.append("Changed: " + ", ".join(o.files[:5]))
        if o.reply:
            lines.append(f"Agent's last words: {o.reply[:400]}")
    return "\n".join(lines)


def mine(sessions: Iterable[Session], project: str, *, min_occurrences: int = 2,
         max_tasks: int = 40, model: ChatModel | None = None) -> TasksFile:
    """The tasks of a night. With ``model`` the LLM miner writes them, the heuristic one
    standing in (and said so) wherever it cannot."""
    groups = [g for g in cluster(o for s in sessions for o in occurrences(s))
              if len(g) >= min_occurrences and checkable(g)]
    groups.sort(key=lambda g: (-len(g), g[0].text))
    notes = []
    if len(groups) > max_tasks:
        notes.append(f"{len(groups)} recurring requests; the {max_tasks} seen most often kept")
        groups = groups[:max_tasks]
    tasks = []
    for group in groups:
        task = heuristic_task(group, project)
        if model is not None:
            task, why = llm_task(task, group, model)
            if why:
                stands = "heuristic task stands in: " if task.miner != "llm" else ""
                notes.append(f"{task.id}: {stands}{why}")
        tasks.append(task)
    return TasksFile(project=project, created=datetime.now(timezone.utc), notes=notes, tasks=tasks,
                     miner="llm" if model is not None else "heuristic")
