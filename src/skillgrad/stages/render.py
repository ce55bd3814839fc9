"""How the optimizer sees things: trajectories, edits, the rejected buffer and its own notes,
rendered as prompt text. Every stage that writes an optimizer prompt uses these, so the same
thing reads the same way in every call.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from skillgrad.package import split_package
from skillgrad.records import (
    Edit,
    RejectedStep,
    RolloutResult,
    Suggestion,
    Task,
    render_expected,
)
from skillgrad.stages.hygiene import quoted_alone
from skillgrad.stages.relation import compare_reply, number_widths, widths_line

FAILURE_MODE = "failure_mode"  # the rollout metadata that holds the judge's verdict
NO_MODE = "none visible"  # the judge's mode for an episode that shows no cause


def render_trajectories(batch: Sequence[RolloutResult], max_chars: int) -> str:
    """The batch's trajectories, after how many of them failed each way where a reviewer
    named it (:func:`judged_counts`)."""
    counts = judged_counts(batch)
    return ((counts + "\n" if counts else "")
            + "\n".join(render_trajectory(r, max_chars, n) for n, r in enumerate(batch, 1)))


def render_trajectory(result: RolloutResult, max_chars: int, number: int) -> str:
    """A trajectory as the optimizer sees it, without the skill (shown once, above)."""
    body = render_episode(result, max_chars, system=False)
    judged = judged_line(result)
    if judged:
        body += "\n" + judged
    # The verdict follows the answer it judges: read in order, the failure explains itself.
    verdict = "solved" if result.success else f"FAILED: {result.reason or 'wrong answer'}"
    return (
        f"### Task {number} (id {result.task_id}; hard {result.hard:.2f}, soft {result.soft:.2f})"
        f"\n{body}\nResult: {verdict}\n"
    )


def render_episode(result: RolloutResult, max_chars: int, system: bool = True) -> str:
    """An episode's messages in order, clipped in the middle to ``max_chars``, and what an
    agent target adds (:func:`agent_note`), without its score or the scorer's account. With
    ``system``, what the agent was told first (its skill and tools) opens it, clipped to a
    third of that."""
    lines = []
    for msg in result.messages:
        if msg.role == "system":
            if system:
                lines.append(f"[system] {clip_middle(msg.text(), max_chars // 3)}")
            continue
        text = msg.text()
        if msg.tool_calls:
            text += "\n(tool calls: " + ", ".join(str(c) for c in msg.tool_calls) + ")"
        lines.append(f"[{msg.role}] {text}")
    body = clip_middle("\n".join(lines), max_chars)
    note = agent_note(result)
    return body + "\n" + note if note else body


def render_setting(batch: Sequence[RolloutResult], skill: str, max_chars: int = 2000) -> str:
    """What the agent was told after its skill, in the system message of the batch's first
    rollout that has one (the tools and how it calls them, a package's file list), as a block
    of the analyst's prompt; empty when the system message is the skill alone. The analyst
    then knows how the agent acts, and a rule may say which tool to call and how."""
    heads = sorted({skill.rstrip(), split_package(skill).main.rstrip()}, key=len, reverse=True)
    for r in batch:
        system = next((m.text() for m in r.messages if m.role == "system"), None)
        head = next((h for h in heads if system is not None and system.startswith(h)), None)
        if system is None or head is None:
            continue
        rest = system[len(head):].strip()
        if not rest:
            return ""
        return ("\n## What the agent is told after the skill\n"
                "The agent sees this after its skill on every task; a rule may say which of "
                "these tools to call, and how.\n<told>\n"
                f"{clip_middle(rest, max_chars)}\n</told>\n")
    return ""


def render_contrast(batch: Sequence[RolloutResult], tasks: Mapping[str, Task],
                    max_chars: int) -> str:
    """Failed tasks as ``proposal_form: rules`` shows them: the end of the task, the tools the
    agent called, its final reply (and the answer read from it), the expected answer (from the task's reference) and how
    the two relate (:func:`compare_reply`, counted over the batch first, with the numbers
    written with another count of digits, :func:`widths_line`), without the
    scorer's wording, so that what differs is seen rather than read. Where the reference is no
    answer to set the reply beside (a purchase, a workbook), the environment's account of what
    went wrong is shown instead, and its parts are counted over the batch."""
    parts, relations, widths = [], [], []
    accounts: Counter[str] = Counter()
    worded: dict[str, str] = {}  # a kind of failure, in its episodes' words where they agree
    for n, r in enumerate(batch, 1):
        shown = [m.text() for m in r.messages if m.role == "user"]
        lines = [f"### Task {n}", clip_head(shown[0] if shown else "", max_chars // 6)]
        calls = [str(c) for m in r.messages if m.role == "assistant" for c in m.tool_calls or ()]
        if calls:
            lines.append(f"The agent called {len(calls)} tools: "
                         + clip_middle("; ".join(calls), max_chars // 4))
        # A multi-turn episode acted in text (search[...], click[...]): its earlier turns are
        # the route to the reply, which the reply alone does not show.
        said = [one_line(m.text(), 120) for m in r.messages
                if m.role == "assistant" and m.text().strip() and not m.tool_calls]
        if len(said) > 1:
            lines.append(f"Its {len(said) - 1} turns before the reply: "
                         + clip_middle(" | ".join(said[:-1]), max_chars // 4))
        task = tasks.get(r.task_id)
        reference = task.reference if task is not None else None
        expected = render_expected(reference) or "(not given)"
        alternatives = _alternatives(reference)
        final = next((m.text() for m in reversed(r.messages)
                      if m.role == "assistant" and m.text().strip()), "")
        if final.strip() and final.strip() != r.answer.strip():  # the work, then what was read
            lines.append(f"Its reply: {clip_middle(final.strip(), max_chars // 2)}")
            if alternatives or len(said) < 2:  # (a route's actions read back add nothing)
                lines.append(f"Its answer, as read from the reply: {clip_middle(r.answer, 300)}")
        else:
            lines.append(f"Its reply: {clip_middle(r.answer or '(none)', 300)}")
        lines.append(f"Expected: {clip_middle(expected, 300)}")
        note = agent_note(r)
        if note:
            lines.append(note)
        if judgement := judged_line(r):
            lines.append(judgement)
        kind, relation = compare_reply(r.answer, alternatives)
        if kind:
            lines.append(f"So: its reply {relation}.")
            relations.append(kind)
            widths.append(number_widths(r.answer, alternatives))
        elif not alternatives and r.reason.strip():
            # No answer to set the reply beside (a purchase, a workbook, a room's state): the
            # environment's account of the episode is what tells the route from the goal.
            lines.append(f"What went wrong: {clip_middle(one_line(r.reason, 400), 400)}")
            for kind, clause in reason_clauses(r.reason).items():
                accounts[kind] += 1
                worded[kind] = (clause if worded.get(kind, clause) == clause
                                else f"{kind} (N varies)")
        parts.append("\n".join(lines) + "\n")
    kinds = Counter(relations).most_common(3)
    head = "".join(f"- {n} of {len(batch)} replies {kind}\n" for kind, n in kinds)
    head += widths_line(widths, len(batch))
    common = [(kind, n) for kind, n in accounts.most_common(4) if n > 1 or len(batch) == 1]
    head += "".join(f"- {n} of {len(batch)} episodes: {worded[kind]}\n" for kind, n in common)
    head += judged_counts(batch)
    return (head + "\n" if head else "") + "\n".join(parts)


def reason_clauses(reason: str) -> dict[str, str]:
    """The parts of an environment's failure reason ("no purchase within 8 turns (…); never
    opened an item; 3 of 8 actions were invalid (e.g. '…')"), without their parenthesised
    detail, each keyed by its kind (its particulars blanked, :func:`reason_kind`), so that
    episodes that failed the same way count together."""
    clauses, depth, start = [], 0, 0
    for i, ch in enumerate(reason + ";"):
        depth += (ch == "(") - (ch == ")")
        if ch == ";" and depth <= 0:
            clauses.append(reason[start:i])
            start, depth = i + 1, 0
    out: dict[str, str] = {}
    for clause in clauses:
        bare = clause
        while (shorter := re.sub(r"\s*\([^()]*\)", "", bare)) != bare:  # nested ones too
            bare = shorter
        bare = bare.strip(" .")
        if bare and not re.match(r"(?:and|or)\s", bare):  # "and 9 more" ends a list
            out.setdefault(reason_kind(bare), bare)
    return out


def agent_note(result: RolloutResult) -> str:
    """What an agent target's rollout adds: its calls, the files it changed, and above all
    whether it loaded the skill (a rule the agent never read cannot have helped or hurt)."""
    agent = result.metadata.get("agent")
    if not isinstance(agent, dict):
        return _reads_note(result)
    files = agent.get("files_changed") or []
    line = (f"(The agent, {agent.get('cli')}, made {agent.get('calls', 0)} model calls and "
            f"{agent.get('tool_calls', 0)} tool calls; files it changed: "
            f"{', '.join(files[:8]) if files else 'none'}.)")
    if _reads_note(result):
        line += "\n" + _reads_note(result)
    if agent.get("skill_loaded") is False:
        line += ("\nThe agent never loaded the skill on this task: it saw only the skill's "
                 "name and description, not its body, so no rule of the body was followed or "
                 "broken here. Whether an agent loads the skill is decided by the description "
                 "in its front matter.")
    return line


def _reads_note(result: RolloutResult) -> str:
    """Which files of a skill package the agent opened, where it could ("" otherwise)."""
    reads = result.metadata.get("references_read")
    if not isinstance(reads, dict) or not reads:
        return ""
    opened = [p for p, r in reads.items() if r]
    unread = [p for p, r in reads.items() if not r]
    return ("Of the skill's other files it read " + (", ".join(opened) or "none")
            + ("; it never opened " + ", ".join(unread) if unread else "") + ".")


def _alternatives(reference: Any) -> list[str]:
    """The answers a reference accepts, when it is one or a list of them ([] otherwise)."""
    if isinstance(reference, Mapping) and len(reference) == 1:
        return _alternatives(next(iter(reference.values())))
    if isinstance(reference, (str, int, float)) and not isinstance(reference, bool):
        return [str(reference)]
    if isinstance(reference, (list, tuple)) and all(
            isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in reference):
        return [str(v) for v in reference]
    return []


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def clip_head(text: str, max_chars: int) -> str:
    """The end of a long text (where a task's question usually is), and how much was cut."""
    if len(text) <= max_chars:
        return text
    return f"[... {len(text) - max_chars} characters cut ...] {text[-max_chars:]}"


def clip_middle(text: str, max_chars: int) -> str:
    """Keep the informative head and tail of a long text and say how much was cut."""
    if len(text) <= max_chars:
        return text
    head = int(max_chars * 0.6)
    tail = max_chars - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters cut ...]\n{text[-tail:]}"


def render_rejected(rejected: Sequence[RejectedStep]) -> str:
    """The rejected buffer. A text refused for a training item's own words (its gold answer,
    its input, the agent's reply to it) is counted, not shown: the analysts wrote such a text
    back ("Reply with 'An architect'", refused, came back as "... which is 'An architect'"),
    and with the words masked they wrote the mask back."""
    if not rejected:
        return ""
    lines = ["", "## Changes already tried this epoch and rejected by validation (do not repeat)"]
    hidden = 0
    for r in rejected:
        if r.quoted and quoted_alone(r.note):
            hidden += len(r.edits)
            continue
        change = "no score" if r.delta is None else f"score change {r.delta:+.3f}"
        why = f"{r.note}; {change}" if r.note else change
        for e in r.edits:
            if isinstance(e, Suggestion):
                lines.append(f"- {e.type}: {e.description!r} ({why})")
            else:
                anchor = f" after/at {e.anchor!r}" if e.anchor else ""
                lines.append(f"- {e.op}{anchor}: {e.content!r} ({why})")
        for text in r.reminders:
            lines.append(f"- reminder: {text!r} ({why})")
        if not r.edits and not r.reminders:
            lines.append(f"- {why}")
    if hidden:
        lines.append(f"({hidden} more refused before rollout for holding the words of a training "
                     "item, not shown)")
    return "\n".join(lines) + "\n"


def render_meta(meta: str) -> str:
    """The optimizer's notes as a prompt section ("" when there are none)."""
    if not meta.strip():
        return ""
    return ("\n## Your notes from earlier epochs (optimizer memory; the agent never sees them)\n"
            f"{meta.strip()}\n")


def render_edits(edits: Sequence[Edit | Suggestion]) -> str:
    out = []
    for n, e in enumerate(edits, 1):
        if isinstance(e, Suggestion):
            out.append(f"{n}. [{e.type}] support {e.support}\n   description: {e.description!r}"
                       + (f"\n   rationale: {e.rationale}" if e.rationale else ""))
            continue
        anchor = f"\n   anchor: {e.anchor!r}" if e.anchor else ""
        anchor += f"\n   file: {e.file}" if e.file else ""
        out.append(f"{n}. [{e.op}] support {e.support}{anchor}\n   content: {e.content!r}"
                   + (f"\n   rationale: {e.rationale}" if e.rationale else ""))
    return "\n".join(out) if out else "(none)"


_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_NUMBER = re.compile(r"(?<![A-Za-z])\d+(?:[.,]\d+)*")


def reason_kind(reason: str) -> str:
    """A failure reason with its particulars (quoted text, numbers) blanked: the kind of
    failure it reports, so that reasons of one kind count together."""
    return " ".join(_NUMBER.sub("N", _QUOTED.sub("'…'", reason)).split())


def render_breakdown(batch: Sequence[RolloutResult], most: int = 5) -> str:
    """How the failures of a minibatch divide into kinds, most common first ("" when they are
    all of one kind or there are fewer than two)."""
    kinds = Counter(reason_kind(r.reason or "wrong answer") for r in batch)
    if len(batch) < 2 or len(kinds) < 2:
        return ""
    lines = [f"- {n} x {kind}" for kind, n in kinds.most_common(most)]
    if len(kinds) > most:
        lines.append(f"- {sum(n for _, n in kinds.most_common()[most:])} x other kinds")
    return "Kinds of failure, most common first:\n" + "\n".join(lines) + "\n\n"


def judged(result: RolloutResult) -> dict[str, str] | None:
    """A rollout's judgement with a mode (None when it was not judged or the judge failed)."""
    value: Any = result.metadata.get(FAILURE_MODE)
    if isinstance(value, dict) and isinstance(value.get("mode"), str):
        return {"mode": value["mode"], "evidence": str(value.get("evidence", ""))}
    return None


def judged_line(result: RolloutResult) -> str:
    """The line the analysts read under a judged episode ("" when there is none)."""
    verdict = judged(result)
    if verdict is None:
        return ""
    quote = f' ("{verdict["evidence"]}")' if verdict["evidence"] else ""
    return (f"How it failed, as a reviewer named it without seeing the expected result: "
            f"{verdict['mode']}{quote}")


def judged_counts(batch: Sequence[RolloutResult]) -> str:
    """One "- N of M episodes ..." line per mode the reviewer named more than once in
    ``batch`` (once, for a batch of one), commonest first; "" when none was judged."""
    modes = Counter(v["mode"] for r in batch if (v := judged(r)) is not None
                    and v["mode"] != NO_MODE)
    return "".join(f"- {n} of {len(batch)} episodes, as a reviewer named them: {mode}\n"
                   for mode, n in modes.most_common(3) if n > 1 or len(batch) == 1)
