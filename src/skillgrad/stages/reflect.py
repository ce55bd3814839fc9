"""Reflect: the backward pass. The optimizer model reads scored trajectories in minibatches and
proposes changes to the skill (a textual gradient).

Results are shuffled into minibatches; each minibatch gets a failure-analyst call over its failed
trajectories and a success-analyst call over its solved ones (unless ``failure_only``), all run
concurrently. The analyst sees patterns across a minibatch, never one task at a time.

What an analyst proposes depends on the update mode: edits (``patch``), typed revision
suggestions (``rewrite_from_suggestions``), or, in ``full_rewrite_minibatch``, one call per
minibatch over all its tasks that writes a complete new document. With skill-aware reflection
the analysts also classify each failure pattern: a SKILL_DEFECT becomes an edit, an
EXECUTION_LAPSE a short reminder for the protected appendix.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel

from skillgrad import prompts
from skillgrad.models.ask_json import ask_json
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import Message
from skillgrad.package import is_package
from skillgrad.parallel import fan_out
from skillgrad.records import (
    Edit,
    Patch,
    Refused,
    RejectedStep,
    RolloutResult,
    Suggestion,
    Task,
)
from skillgrad.stages.hygiene import (
    NO_EVIDENCE,
    REFUSED,
    Evidence,
    clean_items,
    distinct,
)
from skillgrad.stages.render import (
    render_breakdown,
    render_contrast,
    render_rejected,
    render_setting,
    render_trajectories,
)
from skillgrad.stages.replies import (
    AWARE_REPLY,
    PACKAGE_SHAPES,
    AwarePatchReply,
    AwareSuggestionsReply,
    PatchReply,
    RulesReply,
    SuggestionsReply,
    patch_schema,
    rules_schema,
    suggestions_schema,
)
from skillgrad.stages.restated import (
    OPPOSITE,
    against_skill,
    cut_to_own,
    first_of_each,
    left_out,
    quoted_text,
    restates,
    text_of,
)
from skillgrad.stages.rewrite import ask_document, prompt_parts
from skillgrad.stages.update import IDLE_REASONS, apply_edits

Mode = Literal["patch", "rewrite_from_suggestions", "full_rewrite_minibatch"]
Form = Literal["edits", "rules"]
# What an analyst of a skill package is told (after the prompt's other constraints).
PACKAGE_NOTE = (
    "- The skill is a package of files: SKILL.md, then each other file after a line "
    "<!-- skillgrad:file PATH -->. An edit changes the file its anchor is in; give \"file\" "
    "(a path) to append to that file, or to start a new reference file (references/NAME.md), "
    "and then say in SKILL.md when to read it. Leave \"file\" empty otherwise.\n")
RETRY_TEMPERATURE = 0.7  # the analyst asked again after a refusal samples at least this hot


@dataclass(frozen=True)
class ReflectSettings:
    """``meta``: the optimizer's notes (rendered, or ""); ``constraints``: extra rules for the
    analysts, one "- ..." line each (the size cap); ``skill_aware`` and ``reminders_from``:
    skill-aware reflection and which analysts may write reminders; ``form``: what failure
    analysts write (``rules``: plain rules, appended as bullets)."""

    minibatch_size: int = 8
    workers: int = 4
    failure_only: bool = False
    max_trajectory_chars: int = 4000
    max_edits: int = 8
    max_tokens: int | None = None
    temperature: float | None = None
    mode: Mode = "patch"
    form: Form = "edits"
    skill_aware: bool = False
    reminders_from: Literal["both", "failure_only"] = "both"
    meta: str = ""
    constraints: str = ""
    rewrite_max_tokens: int | None = None


def minibatches(
    results: Sequence[RolloutResult], size: int, rng: random.Random
) -> list[list[RolloutResult]]:
    shuffled = list(results)
    rng.shuffle(shuffled)
    return [shuffled[i : i + size] for i in range(0, len(shuffled), size)]


def reflect(
    results: Sequence[RolloutResult],
    skill: str,
    model: ChatModel,
    settings: ReflectSettings,
    rng: random.Random,
    rejected: Sequence[RejectedStep] = (),
    evidence: Evidence = NO_EVIDENCE,
    tasks: Mapping[str, Task] | None = None,
) -> list[Patch]:
    """One patch per analyst call, in a deterministic order (minibatch, then failure/success).
    ``tasks`` by id supply the expected answers that ``form: rules`` shows.

    In ``full_rewrite_minibatch`` mode there is one call per minibatch, over all its tasks,
    and each patch carries a whole document (or the reason there is none)."""
    jobs: list[tuple[int, Literal["failure", "success", "merged"], list[RolloutResult]]] = []
    for i, batch in enumerate(minibatches(results, settings.minibatch_size, rng)):
        if settings.mode == "full_rewrite_minibatch":
            jobs.append((i, "merged", batch))
            continue
        failed = [r for r in batch if not r.success]
        solved = [r for r in batch if r.success]
        if failed:
            jobs.append((i, "failure", failed))
        if solved and not settings.failure_only:
            jobs.append((i, "success", solved))
    rejected_text = render_rejected(rejected)

    def run(job: tuple[int, Literal["failure", "success", "merged"], list[RolloutResult]]) -> Patch:
        index, kind, batch = job
        if kind == "merged":
            return propose_document(batch, skill, model, settings, rejected_text, index)
        return analyse(kind, batch, skill, model, settings, rejected_text, index, evidence,
                       tasks or {})

    return fan_out(run, jobs, settings.workers, "reflect")


def analyse(
    kind: Literal["failure", "success"],
    batch: Sequence[RolloutResult],
    skill: str,
    model: ChatModel,
    settings: ReflectSettings,
    rejected_text: str,
    index: int,
    evidence: Evidence = NO_EVIDENCE,
    tasks: Mapping[str, Task] | None = None,
) -> Patch:
    """One analyst call. When hygiene refuses some of its proposals (they quote a task or the
    scorer: ``evidence``), the analyst is asked once more, told which and why; the refused
    ones are kept in the patch for the apply report."""
    aware = settings.skill_aware and (kind == "failure" or settings.reminders_from == "both")
    suggest = settings.mode == "rewrite_from_suggestions"
    rules = settings.form == "rules" and kind == "failure" and not suggest and not aware
    name = f"suggest_{kind}" if suggest else "analyst_rules" if rules else f"analyst_{kind}"
    shape: type[BaseModel]
    if is_package(skill) and not rules and not suggest:
        settings = replace(settings, constraints=settings.constraints + PACKAGE_NOTE)
    if rules:
        prompt = prompts.render(
            name, skill=skill, meta=settings.meta, rejected=rejected_text, count=str(len(batch)),
            setting=render_setting(batch, skill),
            contrast=render_contrast(batch, tasks or {}, settings.max_trajectory_chars),
            max_edits=str(settings.max_edits), constraints=settings.constraints)
        shape, schema = RulesReply, rules_schema(settings.max_edits)
    else:
        prompt = prompts.render(
            name, skill=skill, meta=settings.meta, rejected=rejected_text, count=str(len(batch)),
            trajectories=render_trajectories(batch, settings.max_trajectory_chars),
            max_edits=str(settings.max_edits), constraints=settings.constraints,
            aware=prompts.render(f"skill_aware_{kind}") if aware else "",
            aware_reply=AWARE_REPLY if aware else "",
            **({"breakdown": render_breakdown(batch)} if kind == "failure" else {}))
        if suggest:
            shape = AwareSuggestionsReply if aware else SuggestionsReply
            schema = suggestions_schema(settings.max_edits, shape)
        else:
            shape = AwarePatchReply if aware else PatchReply
            if is_package(skill):  # an edit may name the file it changes or creates
                shape = PACKAGE_SHAPES[shape]
            schema = patch_schema(skill, settings.max_edits, shape)
    messages = [Message(role="user", content=prompt)]
    reply = ask_json(model, messages, shape, kind=name, max_tokens=settings.max_tokens,
                     temperature=settings.temperature, schema=schema)
    if reply.value is None:
        return Patch(source=kind, error=reply.error, raw=reply.raw, minibatch=index)
    proposed, cut = cut_to_own(_items(reply.value, len(batch)), skill)
    items, refused = clean_items(proposed, evidence, skill)
    whole = len(items) < len(proposed)  # some refused whole
    items, restated = first_of_each(items)
    idle = _idle(items, skill)
    if whole or idle:
        reply, items, refused, again = _ask_once_more(
            messages, reply, items, refused, idle, skill, model, settings, evidence,
            len(batch), shape, schema, name)
        restated = list(dict.fromkeys([*restated, *again]))  # a rule written in both replies
    restated = list(dict.fromkeys([*cut, *restated]))  # a cut written again is one cut
    value: Any = reply.value
    reminders = tuple(r.strip() for r in getattr(value, "reminders", []) if r.strip())
    reasoning = value.reasoning
    patterns = getattr(value, "patterns", [])
    if patterns:
        reasoning += "\n" + "\n".join(f"[{p.kind}] {p.pattern}" for p in patterns)
    if suggest:
        return Patch(source=kind, reasoning=reasoning, reminders=reminders, minibatch=index,
                     suggestions=tuple(i for i in items if isinstance(i, Suggestion)),
                     refused=tuple(refused), tasks=tuple(r.task_id for r in batch))
    return Patch(source=kind, reasoning=reasoning, reminders=reminders, minibatch=index,
                 edits=tuple(i for i in items if isinstance(i, Edit)), refused=tuple(refused),
                 tasks=tuple(r.task_id for r in batch), restated=tuple(restated))


def _ask_once_more(
    messages: list[Message], reply: Any, items: list[Edit | Suggestion], refused: list[Refused],
    idle: list[Idle], skill: str, model: ChatModel, settings: ReflectSettings,
    evidence: Evidence, count: int, shape: type[BaseModel], schema: dict[str, Any], name: str,
) -> tuple[Any, list[Edit | Suggestion], list[Refused], list[str]]:
    """The analyst asked again after hygiene refused some of its items or some would change
    nothing: told which and why, and which were kept. What passed is kept whatever the second
    reply says (a small model asked again often writes other rules and drops the good one);
    the second reply's items are added after them, less those that restate a kept one or a
    part of the skill (one line each in the last list, with the idle ones that restate the
    skill)."""
    kept = [i for i in items if all(i is not e for e, _, _ in idle)]
    # Sampled: a greedy model told what was wrong tends to write the same reply again.
    again = ask_json(model, [*messages, Message(role="assistant", content=reply.raw),
                             Message(role="user", content=_ask_again(refused, idle, kept))],
                     shape, kind=name, max_tokens=settings.max_tokens,
                     temperature=max(settings.temperature or 0.0, RETRY_TEMPERATURE),
                     schema=schema)
    said = [(e, line) for e, _, line in idle if line is not None]
    restated = [line for _, line in said]
    if again.value is None:  # the first reply's items, less those the skill says or denies
        return (reply, [i for i in items if all(i is not e for e, _ in said)], refused,
                restated)
    more, cut = cut_to_own(_items(again.value, count), skill)
    restated += cut
    more, later = clean_items(more, evidence, skill)
    out = list(kept)
    for item in more:
        if any(text_of(item) == text_of(k) for k in out):
            continue  # a kept rule written again: nothing is lost
        twin = next((k for k in out if restates(text_of(item), text_of(k))), None)
        against = against_skill(item, skill)
        if against is not None:
            restated.append(against[1])
        elif twin is None:
            out.append(item)
        elif text_of(item) != text_of(twin):
            which = "the kept" if any(twin is k for k in kept) else "the same reply's"
            restated.append(left_out(item, which, quoted_text(text_of(twin))))
    # The same rule written again is refused once.
    return again, out[: settings.max_edits], distinct([*refused, *later]), restated


def _items(value: Any, count: int) -> list[Edit | Suggestion]:
    """The edits or suggestions of an analyst's reply, as records (a plain rule is taken to
    address all ``count`` tasks of its call)."""
    if isinstance(value, RulesReply):
        return list(value.to_edits(count))
    if hasattr(value, "suggestions"):
        return [Suggestion(**s.model_dump()) for s in value.suggestions]
    return [e.to_edit() for e in value.edits]


# An edit the analyst is asked about again: the edit, why, and for an added rule left out
# because of a part of the skill, the line the patch keeps of it (None for the other edits).
Idle = tuple[Edit, str, str | None]


def _idle(items: Sequence[Edit | Suggestion], skill: str) -> list[Idle]:
    """The edits that would change nothing (a line replaced by itself, content the skill
    already holds), each with the reason ``apply_edits`` gives, and the added rules that say
    again what a part of the skill says (:func:`restated_part`) or its opposite
    (:func:`contradicted_part`)."""
    out: list[Idle] = []
    for item in items:
        if isinstance(item, Edit):
            _, report = apply_edits(skill, [item])
            reason = report.outcomes[0].reason or ""
            if report.outcomes[0].status == "skipped" and reason.startswith(IDLE_REASONS):
                out.append((item, reason, None))
            elif (against := against_skill(item, skill)) is not None:
                out.append((item, *against))
    return out


def _ask_again(refused: Sequence[Refused], idle: Sequence[Idle] = (),
               kept: Sequence[Edit | Suggestion] = ()) -> str:
    listed = [f"- {text_of(r.item)!r}: {r.reason.removeprefix(REFUSED + ': ')}" for r in refused]
    listed += [f"- {e.content!r}: " + (f"{why}, and a skill must not say both"
                                        if why.startswith(OPPOSITE)
                                        else f"changes nothing in the skill ({why})")
               for e, why, _ in idle]
    took = "".join(f"- {text_of(i)!r}\n" for i in kept)
    return ((f"Kept (no need to write them again):\n{took}" if took else "")
            + "Some of those cannot go into the skill:\n" + "\n".join(listed) + "\nA skill must "
            "work on tasks it has never seen, and an edit must change what the agent does. Say "
            "in your own words what the agent should do differently, without the facts of one "
            "task and without the wording of the Result lines. Reply again with the whole JSON "
            "object.")


def propose_document(
    batch: Sequence[RolloutResult],
    skill: str,
    model: ChatModel,
    settings: ReflectSettings,
    rejected_text: str,
    index: int,
) -> Patch:
    """``full_rewrite_minibatch``: one call writes a complete new skill from a minibatch."""
    body, blocks = prompt_parts(skill)
    prompt = prompts.render(
        "rewrite_minibatch", skill=body, blocks=blocks, meta=settings.meta, rejected=rejected_text,
        count=str(len(batch)),
        trajectories=render_trajectories(batch, settings.max_trajectory_chars),
        constraints=settings.constraints,
    )
    result = ask_document(model, prompt, kind="rewrite_minibatch", temperature=settings.temperature,
                          max_tokens=settings.rewrite_max_tokens or settings.max_tokens)
    return Patch(source="merged", document=result.document, error=result.error, minibatch=index,
                 raw=result.raw if result.error else None,
                 reasoning=f"whole document from minibatch {index}")


