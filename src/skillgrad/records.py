"""Records that cross a stage boundary.

Every record is a frozen pydantic model that round-trips through JSON, so that what one stage
hands the next is also exactly what lands in the run directory.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from skillgrad.models.messages import Message, Usage


class Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# ----------------------------------------------------------------------------- tasks, rollouts


class Task(Record):
    """One task of an environment.

    ``prompt`` is what the target is shown; ``reference`` is what the scorer needs (gold answers,
    expected cells, ...); ``group`` keeps related tasks in one split.
    """

    id: str
    prompt: str
    reference: Any = None
    group: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


def render_expected(reference: Any) -> str:
    """A task's reference as a person reads it: alternatives joined by "or", keyed values as
    key: value (a single key's value alone)."""
    if reference is None or isinstance(reference, bool):
        return ""
    if isinstance(reference, Mapping) and len(reference) == 1:
        return render_expected(next(iter(reference.values())))
    if isinstance(reference, Mapping):
        return "; ".join(f"{k}: {render_expected(v)}" for k, v in reference.items())
    if isinstance(reference, (list, tuple, set)):
        return " or ".join(repr(v) if isinstance(v, str) else render_expected(v)
                           for v in reference)
    return str(reference)


class Score(Record):
    """A scored outcome. ``reason`` says why a task was not fully solved (empty when it was)."""

    hard: float
    soft: float
    reason: str = ""


class RolloutResult(Record):
    """The forward pass on one task: full trajectory plus its score."""

    task_id: str
    messages: tuple[Message, ...]
    answer: str
    hard: float
    soft: float
    reason: str = ""
    turns: int = 1
    usage: Usage = Usage()
    metadata: dict[str, Any] = Field(default_factory=dict)
    # The task's reference as a person reads it (what ``show --rollouts`` and the dashboard
    # print next to the reply); the rollout stage fills it in, an environment need not.
    expected: str = ""

    @property
    def success(self) -> bool:
        return self.hard >= 1.0


# ----------------------------------------------------------------------------- edits


EditOp = Literal["append", "insert_after", "replace", "delete"]


class Edit(Record):
    """One bounded change to the skill document (a component of the textual gradient)."""

    op: EditOp
    anchor: str = ""
    content: str = ""
    support: int = 1
    rationale: str = ""
    # The file of a skill package it changes: "" is SKILL.md for an append, and the file its
    # anchor is found in otherwise. An append to a path the package lacks creates that file;
    # a delete with no anchor removes it. Left out of the record when empty, so a single-file
    # skill's records read as they always have.
    file: str = ""

    @model_serializer(mode="wrap")
    def _without_empty_file(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not self.file:
            data.pop("file", None)
        return data


SuggestionType = Literal["add_rule", "remove_rule", "merge_rules", "reorganize", "compress",
                         "clarify"]


class Suggestion(Record):
    """A typed revision suggestion (``rewrite_from_suggestions`` mode): what to change in the
    document, not the exact text; one rewrite call later carries out the ranked ones."""

    type: SuggestionType
    description: str
    support: int = 1
    rationale: str = ""


class Refused(Record):
    """A proposed change that skill hygiene refused before any rollout, and why.
    ``repaired``: only this part of it was refused, and the rest went on with it dropped or
    given the task's form in its place (``item`` holds the part)."""

    item: Edit | Suggestion
    reason: str
    repaired: bool = False
    quoted: str = ""  # the words that got it refused, as hygiene read them


class Patch(Record):
    """An analyst's or a merge's proposal. ``error`` and ``raw`` are kept when parsing failed.

    ``reminders`` are short execution reminders for the protected appendix (skill-aware
    reflection); ``suggestions`` replace ``edits`` in ``rewrite_from_suggestions`` mode;
    ``document`` is a whole proposed skill in ``full_rewrite_minibatch`` mode."""

    source: Literal["failure", "success", "merged"]
    reasoning: str = ""
    edits: tuple[Edit, ...] = ()
    reminders: tuple[str, ...] = ()
    suggestions: tuple[Suggestion, ...] = ()
    document: str | None = None
    error: str | None = None
    raw: str | None = None
    minibatch: int | None = None
    refused: tuple[Refused, ...] = ()  # what the analyst proposed first and hygiene refused
    tasks: tuple[str, ...] = ()  # the tasks the analyst read (what a merge shows it came from)
    # What skillgrad put back after a merge: a proposal the merge left out, or an edit whose op
    # or anchor the merge changed into one that cannot be applied (one line each).
    repaired: tuple[str, ...] = ()
    # The rules an analyst wrote that were left out because they restate another of its rules
    # or a part of the skill (one line each).
    restated: tuple[str, ...] = ()


class EditOutcome(Record):
    index: int
    edit: Edit
    status: Literal["applied", "applied_fuzzy", "skipped", "refused"]
    matched: str | None = None
    similarity: float | None = None
    reason: str | None = None


class ApplyReport(Record):
    outcomes: tuple[EditOutcome, ...] = ()

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def n_applied(self) -> int:
        return self.count("applied") + self.count("applied_fuzzy")

    @property
    def all_missed(self) -> bool:
        return bool(self.outcomes) and self.n_applied == 0


class RateDecision(Record):
    """How many ranked items a step applies and why (the learning-rate controller's output)."""

    mode: Literal["fixed", "autonomous", "none"]
    schedule_budget: int
    applied: int
    ceiling: int | None = None
    confidence: float | None = None
    reasoning: str = ""
    error: str | None = None


class Selection(Record):
    """Ranked items cut to the step's budget (the clipped, learning-rate-scaled gradient).

    The items are edits, or suggestions in ``rewrite_from_suggestions`` mode."""

    budget: int
    ranked: tuple[Edit | Suggestion, ...] = ()
    kept: tuple[Edit | Suggestion, ...] = ()
    reasoning: str = ""
    error: str | None = None
    raw: str | None = None
    rate: RateDecision | None = None


# ----------------------------------------------------------------------------- evaluation


class EvalScore(Record):
    """A skill's score on one split: means plus per-task (hard, soft)."""

    split: str
    skill_hash: str
    n: int
    hard: float
    soft: float
    per_task: dict[str, tuple[float, float]] = Field(default_factory=dict)
    # (rollouts that loaded the skill, rollouts whose agent chose whether to): an agent
    # target's skill placed as an agent skill; None otherwise
    skill_loads: tuple[int, int] | None = None
    # the skill's body reached the agent only where it loaded the skill (placed as an agent
    # skill alone, not also in its memory file)
    body_on_load: bool = False

    def metric(self, name: str, mixed_weight: float = 0.5) -> float:
        if name == "hard":
            return self.hard
        if name == "soft":
            return self.soft
        if name == "mixed":
            return (1.0 - mixed_weight) * self.hard + mixed_weight * self.soft
        raise ValueError(f"unknown metric {name!r}")


Decision = Literal["accept_new_best", "accept", "reject", "refused", "skip"]


class GateDecision(Record):
    """``refused``: the candidate was invalid (over the size cap, a broken rewrite) and was
    never rolled out; ``skip``: there was no candidate. ``p_value`` and ``mean_gain`` come from
    the honest gate's paired comparison with the current skill; ``second_look``, when the
    candidate got one, what it found on training tasks no analyst had seen (their count, both
    skills' scores there, tasks better and worse, the pooled p-value and the level it met)."""

    decision: Decision
    metric: str
    candidate: float | None = None
    current: float | None = None
    best: float | None = None
    gated: bool = True
    reason: str = ""
    rule: str = ""
    p_value: float | None = None
    mean_gain: float | None = None
    bonus: float | None = None
    second_look: dict[str, Any] | None = None

    @property
    def delta(self) -> float | None:
        """The candidate's score minus the current skill's (``None`` when either is unknown)."""
        if self.candidate is None or self.current is None:
            return None
        return self.candidate - self.current


class StepRecord(Record):
    """One optimisation step as it ends up in the checkpoint and in ``show`` (``epoch`` and
    ``step`` are 1-based; ``global_step`` counts steps over the whole run)."""

    epoch: int
    step: int
    global_step: int
    budget: int
    train_hard: float
    train_soft: float
    n_proposed: int
    n_selected: int
    n_applied: int
    n_fuzzy: int
    n_skipped: int
    n_parse_errors: int
    decision: Decision
    candidate_hash: str | None
    candidate_score: float | None
    current_score: float | None
    best_score: float | None
    seconds: float
    n_reminders: int = 0
    rate: RateDecision | None = None
    reason: str = ""
    changes: tuple[str, ...] = ()
    n_refused: int = 0  # edits refused before rollout (they quote a training item, ...), less
    # the parts hygiene replaced or dropped while the rule went on (Refused.repaired)
    # Why no analyst reply of the step could be used (every one failed to parse): the first
    # error and how the reply began; empty when one could, or none was asked for.
    unusable: str = ""
    # (train rollouts that loaded the skill, those whose agent chose whether to): an agent
    # target with the skill placed as an agent skill; None otherwise
    skill_loads: tuple[int, int] | None = None
    # An agent target given a skill package: of the train rollouts ("rollouts"), how many
    # opened each of its other files, by path (0: a file nobody read); None otherwise.
    references_read: dict[str, int] | None = None
    # What the step did with an agent skill's description when the agent seldom loaded it
    # ("loaded 0/3; description rewritten: ...", or why it was not); empty otherwise.
    trigger: str = ""
    # Where proposals were lost or put back on their way to the candidate, one phrase per
    # stage ("hygiene refused 2", "update skipped 1: empty anchor", "merge: 1 put back").
    losses: tuple[str, ...] = ()


class RejectedStep(Record):
    """What the gate rejected (or refused before rolling it out) and the score change it
    caused, shown to later optimizer calls so they do not propose it again."""

    global_step: int
    edits: tuple[Edit | Suggestion, ...] = ()
    delta: float | None = None
    reminders: tuple[str, ...] = ()
    note: str = ""
    quoted: str = ""  # refused before rollout: the words that got it refused (Refused.quoted)


class PairCounts(Record):
    improved: int = 0
    regressed: int = 0
    persistent_failure: int = 0
    stable_success: int = 0


class EpochUpdate(Record):
    """The epoch-level work done before ``epoch`` started: the longitudinal comparison of the
    previous and the current epoch's skill, the meta skill and the gated slow update."""

    epoch: int
    previous_hash: str
    current_hash: str
    tasks: tuple[str, ...]
    pairs: PairCounts
    meta_skill_updated: bool = False
    slow_update: GateDecision | None = None
    guidance: str = ""
    error: str | None = None
    seconds: float = 0.0
