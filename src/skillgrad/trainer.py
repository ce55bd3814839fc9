"""The trainer: it only sequences the stages (rollout, reflect, aggregate, select, update, gate)
and checkpoints after every step, plus the start-of-epoch work (longitudinal comparison, meta
skill, slow update). Each stage is a pure function of its inputs and the model it is handed
(:mod:`skillgrad.stages`); the config becomes stage settings in :mod:`skillgrad.settings`; all
file writes go through :class:`~skillgrad.rundir.RunDir`.

Nothing enters the current skill without the gate: step candidates and slow updates alike go
through :meth:`Trainer._adopt`. An optimizer none of whose replies can be used for
``optimizer.max_unusable_steps`` steps in a row stops the run (:class:`OptimizerUnusable`)
rather than train on in silence. (Over the house limit of ~400 lines because the loop, its
epoch-level work and the bookkeeping they share read best in one place.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from skillgrad import settings
from skillgrad.build import build_environment
from skillgrad.callbacks import TrainerCallback
from skillgrad.clients import build_clients
from skillgrad.config import ResolvedConfig, SkillgradConfig, load_config
from skillgrad.envs.base import Environment
from skillgrad.errors import ConfigError, DataError, RunStopped
from skillgrad.execution import rollout_environment
from skillgrad.export import default_description, export_skill, skill_name
from skillgrad.models.client import CallJournal, Meter, ModelClient, StageModel
from skillgrad.package import is_package
from skillgrad.parallel import fan_out
from skillgrad.records import (
    EpochUpdate,
    EvalScore,
    GateDecision,
    Patch,
    RejectedStep,
    RolloutResult,
    StepRecord,
    Task,
)
from skillgrad.rundir import RunDir, WorkDir
from skillgrad.skill import estimate_tokens, skill_hash
from skillgrad.stages.candidate import (
    Proposal,
    aggregate_stage,
    select_stage,
    size_note,
    size_refusal,
    update_stage,
)
from skillgrad.stages.gate import (
    GateRule,
    decide,
    directive_density,
    second_look,
    second_look_due,
)
from skillgrad.stages.hygiene import Evidence, find_quote, refused_texts
from skillgrad.stages.judge import judge_failures
from skillgrad.stages.meta_skill import render_epoch, update_notes
from skillgrad.stages.reflect import reflect
from skillgrad.stages.rollout import references_read, rollout, score, skill_loads
from skillgrad.stages.screen import (
    Screening,
    ablations,
    new_skill,
    screen,
    screened_roles,
    without_riders,
)
from skillgrad.stages.slow_update import count, pair_up, sample_tasks, write_guidance
from skillgrad.state import (
    BatchOrder,
    TrainerState,
    best_skill,
    claim_run,
    read_state,
    resume_state,
    run_metrics,
    step_rng,
    steps_per_epoch,
)
from skillgrad.summary import build_summary
from skillgrad.tracking import tracker_callbacks
from skillgrad.version import __version__

log = logging.getLogger(__name__)
T = TypeVar("T")
_QUOTED = 60  # characters of an unusable reply quoted in the step's record


class OptimizerUnusable(RunStopped):
    """No analyst reply could be used for ``optimizer.max_unusable_steps`` steps in a row. The
    run stopped after the last step's checkpoint; the same command resumes it."""


def unusable_reason(patches: Sequence[Patch]) -> str:
    """Why none of a step's analyst replies (``patches``) can be used: the first one's error
    and how that reply began; "" when one can, or none was asked for."""
    if not patches or not all(p.error for p in patches):
        return ""
    first = patches[0]
    began = " ".join((first.raw or "").split())[:_QUOTED]
    return f"{first.error}; the reply began {began!r}"


@contextmanager
def _meanwhile(work: Callable[[], None]) -> Iterator[None]:
    """Do ``work`` on a thread of its own while the block runs; an error of the work is raised
    once both are done (an error of the block's goes first)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="meanwhile") as pool:
        done = pool.submit(work)
        yield
    done.result()


class Trainer:
    """Trains the skill of ``env`` with a target and an optimizer model into ``run_dir``.

    Running a trainer into a directory that holds a checkpoint resumes it.
    """

    def __init__(
        self,
        config: ResolvedConfig,
        env: Environment,
        target: ModelClient,
        optimizer: ModelClient,
        run_dir: RunDir,
        *,
        callbacks: Sequence[TrainerCallback] = (),
        allow_config_change: bool = False,
        prior_rejected: Sequence[RejectedStep] = (),
    ) -> None:
        self.resolved = config
        self.prior_rejected = list(prior_rejected)  # shown in the first epoch of a new run
        self.cfg = config.config
        self.env = env
        self.target = target
        self.optimizer = optimizer
        self.run = run_dir
        self.callbacks = list(callbacks)
        self.allow_config_change = allow_config_change
        self.gate_rule: GateRule = settings.gate_rule(self.cfg)
        self._journal: CallJournal | None = None  # the open scope's call journal
        self._placement: dict[str, Any] | None = None  # where rollouts run, when not here
        self.train_tasks = self._split("train")
        self._train_by_id = {t.id: t for t in self.train_tasks}
        self._requests = {t.id: t.prompt for t in self.train_tasks}  # what a rules merge shows
        self._batches = BatchOrder(self.train_tasks, self.cfg.train.seed)
        self.val_tasks = self._split("val")
        self.state: TrainerState | None = None

    # ------------------------------------------------------------------ the loop
    @classmethod
    def from_config(cls, path: str | Path, overrides: Sequence[str] = (),
                    out: str | Path | None = None, *,
                    callbacks: Sequence[TrainerCallback] = (),
                    allow_config_change: bool = False) -> Trainer:
        """The trainer of the config file ``path`` with dotted ``key=value`` ``overrides`` (as
        ``--set`` takes them), training into ``out`` (default ``runs/<config name>``, as
        ``skillgrad train``); built by :func:`~skillgrad.build.build_trainer`."""
        config = Path(path)
        resolved = load_config(config, list(overrides))
        run_dir = Path(out) if out is not None else Path("runs") / config.stem
        return build_trainer(resolved, run_dir, callbacks=callbacks,
                             allow_config_change=allow_config_change)

    def fit(self) -> dict[str, Any]:
        """Train to the end (or continue to it) and return the summary. The run directory is
        locked meanwhile: a second process training into it is refused."""
        with self._locked():
            self._fit()
        return self.run.read_summary()

    def run_epoch(self) -> list[StepRecord]:
        """Train one epoch (the rest of it, when the run stopped inside one) and return its
        step records; after the last epoch also the final evaluation and the summary.

        Called until it returns ``[]`` (the run is done), it trains the run epoch by epoch to
        the skills and scores :meth:`fit` reaches. Each call continues from the checkpoint, as
        :meth:`fit` does, so one that raised is resumed by the next (or by :meth:`fit`)."""
        records: list[StepRecord] = []
        with self._locked():
            state = self._start_or_resume()
            epoch = state.epoch
            while state.phase == "train" and not state.training_done and state.epoch == epoch:
                if state.step == 0 and state.epoch > state.epoch_update_done:
                    self.epoch_update()
                records.append(self.step())
            if state.training_done:
                self._finish(state)
        return records

    @property
    def metrics(self) -> dict[str, Any]:
        """The run's scores so far, as plain data: ``selection`` (the gate metric of the
        initial, best and current skill), ``steps`` (per step: decision, candidate / current /
        best selection score, training score), ``best_step``, ``done``, and ``test`` (initial,
        best and final hard / soft / n) once the run is done. Read from the checkpoint before
        the trainer has run."""
        return run_metrics(self._read_state(), self.cfg.evaluation)

    @property
    def best_skill(self) -> str:
        """The text of the best skill so far (the initial skill before training)."""
        return best_skill(self.run, self._read_state(), self.env.initial_skill())

    def export(self, fmt: Literal["skill-folder", "agents-md"] = "skill-folder", *,
               out: str | Path, name: str | None = None,
               description: str | None = None, keep_blocks: bool = False) -> Path:
        """Write the best skill as ``fmt`` (``skill-folder``: ``out/<name>/SKILL.md``;
        ``agents-md``: a section of the memory file ``out``) and return the path written.
        ``name`` defaults to the run directory's name, ``description`` to one made from the
        skill's first heading; ``keep_blocks`` keeps the protected blocks' markers."""
        skill = self.best_skill
        path: Path = export_skill(
            skill, fmt, Path(out), keep_blocks=keep_blocks,
            name=name if name is not None else skill_name(self.run.root.resolve().name),
            description=(description if description is not None
                         else default_description(skill, self.cfg.env.name)))
        return path

    def _read_state(self) -> TrainerState | None:
        """The state in memory, else the checkpoint's (checked against the config)."""
        if self.state is not None:
            return self.state
        return read_state(self.run, self.resolved, self.allow_config_change)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the run directory's lock (a second process training into it is refused)."""
        try:
            with self.run.lock(), self._executing():
                yield
        except RunStopped as exc:
            # The checkpoint of the last finished step and this step's call journal are on
            # disk: running again resumes here.
            self.run.event("stopped", reason=str(exc))
            raise

    @contextmanager
    def _executing(self) -> Iterator[None]:
        """Rollouts run where ``execution:`` says while the lock is held: with the Ray
        backend ``self.env`` is, meanwhile, the view of it whose rollouts Ray workers do."""
        local = self.env
        with rollout_environment(local, settings.execution_settings(self.resolved)) as env:
            self._placement = getattr(env, "placement", None) if env is not local else None
            self.env = env
            try:
                yield
            finally:
                self.env = local

    def _placed(self) -> None:
        """Say in the run's events where its rollouts run, when not in this process."""
        if self._placement:
            self.run.event("execution", **self._placement)

    def _fit(self) -> None:
        state = self._start_or_resume()
        while state.phase == "train" and not state.training_done:
            if state.step == 0 and state.epoch > state.epoch_update_done:
                self.epoch_update()
            self.step()
        self._finish(state)

    def _finish(self, state: TrainerState) -> None:
        """After the last step: the final evaluation and the summary, each checkpointed."""
        if state.phase == "train":
            state.phase = "final"
            self._checkpoint()
        if state.phase == "final":
            test = self._final_evaluation()
            summary = build_summary(state, self.resolved, test, __version__, self.gate_rule)
            self.run.write_json(self.run.summary_path, summary)
            state.phase = "done"
            self._checkpoint()
            self.run.event("run_end", best_hash=state.best_hash)
            self._notify("on_train_end", summary)

    def step(self) -> StepRecord:
        """One optimisation step: rollout and reflect (once per accumulated batch), aggregate,
        select and update into one candidate, the gate, and a checkpoint."""
        s = self._require_state()
        started = time.monotonic()
        folder = self.run.step_dir(s.epoch, s.step + 1)
        self._open_scope(folder)
        self.run.event("step_start", epoch=s.epoch, step=s.step, global_step=s.global_step)
        skill = self.run.load_skill(s.current_hash)
        outs: list[list[RolloutResult]] = []
        tasks: list[Task] = []
        patches: list[Patch] = []
        for j in range(self.cfg.train.accumulation):
            batch, rng = self._batch(j)
            tasks += batch
            outs.append(self._stage("rollout", len(batch), self._rollout, batch, skill))
            if self.cfg.gradient.failure_judge:  # how each failure went, named for the analysts
                outs[-1] = self._stage("judge", None, judge_failures, outs[-1],
                                       self._optimizer("judge"),
                                       settings.judge_settings(self.resolved))
            patches += self._reflect(outs[-1], skill, rng, 0)
        results = [r for out in outs for r in out]
        folder.rollouts(results)

        budget = settings.step_budget(self.cfg, s.global_step, s.total_steps)
        made = [(patches, self._propose(skill, patches, budget, results))]
        n = self.cfg.gradient.proposals
        made += [self._sample(k, outs, skill, budget, results) for k in range(1, n)]
        # When no analysis made a new skill (each unchanged, refused, or rejected by the gate
        # before), one more round is sampled, hotter, rather than a step wasted.
        again: list[int] = []
        rejected = self._rejected_hashes()
        if n > 1 and not any(new_skill(p, skill, rejected) for _, p in made):
            again = settings.resamples(self.cfg)
            made += [self._sample(k, outs, skill, budget, results) for k in again]
        unusable = unusable_reason([p for asked, _ in made for p in asked])
        made += [([], p) for p in ablations(skill, self.cfg.gradient.line_ablations,
                                             self.cfg.gradient.skill_ablation)]
        screened_out, chosen = None, 0
        if len(made) > 1:
            screening = self._stage("screen", None, lambda: self._screen(
                made, skill, results, tasks, folder, again))
            folder.artifact("screen", screening)
            if screening.chosen is None:
                screened_out = screening.reason
            else:
                chosen = screening.chosen
        patches, proposal = made[chosen]
        # The gate's evaluation of the candidate starts as soon as the candidate exists; what
        # it was made from goes to the step's folder meanwhile.
        with _meanwhile(lambda: self._write_proposal(folder, patches, proposal)):
            decision = self._stage("gate", None, lambda: self._gate(
                proposal.candidate, proposal.refusal, proposal.score,
                proposal.unchanged_reason(), screened_out, folder))
        folder.gate(decision)

        record = self._record(results, patches, proposal, decision, budget,
                              time.monotonic() - started, unusable)
        folder.record(record)
        self._commit(record, proposal, decision)
        for cb in self.callbacks:
            cb.on_step_end(record)
        self._stop_if_unusable()
        return record

    def epoch_update(self) -> EpochUpdate | None:
        """Before epoch 2, 3, ...: compare the previous and the current epoch's skill on the
        same training tasks, update the meta skill, and gate a slow update."""
        s = self._require_state()
        o = self.cfg.optimizer
        epoch = s.epoch
        if not (o.use_slow_update or o.use_meta_skill):
            self._epoch_started(epoch)
            return None
        started = time.monotonic()
        folder = self.run.epoch_dir(epoch)
        self._open_scope(folder)
        self.run.event("epoch_update_start", epoch=epoch)
        prev_hash, cur_hash = s.epoch_start.get(str(epoch - 1), s.initial_hash), s.current_hash
        previous, current = self.run.load_skill(prev_hash), self.run.load_skill(cur_hash)
        tasks = sample_tasks(self.train_tasks, o.slow_update_samples, self.cfg.train.seed, epoch)
        compared = [previous] if prev_hash == cur_hash else [previous, current]
        outs = self._stage("longitudinal", len(tasks) * len(compared), lambda: self._rollouts(
            [(skill, tasks) for skill in compared], "longitudinal"))
        before, after = outs[0], outs[-1]
        pairs = pair_up(before, after)
        folder.pairs([
            {"task_id": p.task_id, "kind": p.kind, "previous": p.previous, "current": p.current}
            for p in pairs])
        errors: list[str] = []
        meta_updated = False
        if o.use_meta_skill:
            notes, error = self._stage("meta_skill", None, lambda: update_notes(
                s.meta_skill, render_epoch(s.history, epoch - 1), pairs,
                self._optimizer("meta_skill"),
                max_chars=self.cfg.gradient.max_trajectory_chars, **settings.sampling(self.cfg)))
            if notes is not None:
                s.meta_skill, meta_updated = notes, True
                folder.meta_skill(notes + "\n")
                self.run.write_text(self.run.meta_skill_path, notes + "\n")
            if error:
                errors.append(error)
        decision, guidance = None, ""
        if o.use_slow_update:
            decision, guidance = self._slow_update(previous, current, pairs, folder, errors,
                                                   self._evidence([*before, *after]))
        update = EpochUpdate(
            epoch=epoch, previous_hash=prev_hash, current_hash=cur_hash,
            tasks=tuple(t.id for t in tasks), pairs=count(pairs),
            meta_skill_updated=meta_updated, slow_update=decision, guidance=guidance,
            error="; ".join(errors) or None, seconds=round(time.monotonic() - started, 3))
        folder.epoch_update(update)
        s.epoch_updates.append(update)
        s.wall_seconds += update.seconds
        self._epoch_started(epoch)
        self._checkpoint()
        self.run.event("epoch_update_end", epoch=epoch, decision=decision and decision.decision)
        self._notify("on_epoch_update", update)
        return update

    def _slow_update(self, previous: str, current: str, pairs: list[Any], folder: WorkDir,
                     errors: list[str], shown: Evidence) -> tuple[GateDecision, str]:
        s = self._require_state()
        o = self.cfg.optimizer
        candidate, guidance, why = self._stage("slow_update", None, lambda: write_guidance(
            previous, current, pairs, o.longitudinal_pair_policy,
            self._optimizer("slow_update"), meta=settings.meta_text(self.cfg, self._context()),
            constraints=size_note(current, o.max_skill_tokens),
            max_chars=self.cfg.gradient.max_trajectory_chars, **settings.sampling(self.cfg)))
        if candidate is None:
            errors.append(str(why))
            candidate = current
        folder.candidate(candidate)
        quote = find_quote(guidance, shown, current) if guidance else None
        refusal = f"the guidance {quote.reason()}" if quote else None
        decision = self._stage("gate", None, lambda: self._gate(candidate, refusal, None,
                                                                folder=folder))
        folder.gate(decision)
        # Done between steps: the slow update counts as made after the last finished step.
        self._adopt(candidate, decision, s.global_step, RejectedStep(
            global_step=s.global_step, delta=decision.delta,
            note=f"slow-update guidance {guidance!r} ({decision.reason})"))
        self.run.event("slow_update", epoch=s.epoch, decision=decision)
        return decision, guidance

    def _stop_if_unusable(self) -> None:
        """Stop (after the checkpoint) when the last ``optimizer.max_unusable_steps`` steps
        had no usable analyst reply: more steps would only pay for more of the same."""
        limit = self.cfg.optimizer.max_unusable_steps
        history = self._require_state().history
        streak = next((n for n, r in enumerate(reversed(history)) if not r.unusable),
                      len(history))
        if limit is None or streak < limit:
            return
        last = history[-1]
        replies = sum(r.n_parse_errors for r in history[-streak:])
        raise OptimizerUnusable(
            f"the optimizer gave no usable reply in {streak} steps in a row (global steps "
            f"{last.global_step - streak + 1}-{last.global_step}, {replies} analyst replies; "
            f"optimizer.max_unusable_steps: {limit}); the last step's first error: {last.unusable}")

    def _epoch_started(self, epoch: int) -> None:
        s = self._require_state()
        s.epoch_start[str(epoch)] = s.current_hash
        s.epoch_update_done = epoch

    # ------------------------------------------------------------------ stages
    def _reflect(self, out: list[RolloutResult], skill: str, rng: Any,
                 sample: int) -> list[Patch]:
        """Proposal ``sample``'s reflection on one accumulated batch."""
        reflecting = settings.reflect_settings(self.cfg, skill, self._context(), sample)
        return self._stage("reflect", None, reflect, out, skill, self._optimizer("reflect"),
                           reflecting, rng, self._rejected(), self._evidence(out),
                           self._train_by_id)

    def _sample(self, k: int, outs: list[list[RolloutResult]], skill: str, budget: int,
                results: list[RolloutResult]) -> tuple[list[Patch], Proposal]:
        """Proposal ``k`` of the step: its own reflection on each accumulated batch (at
        proposal ``k``'s temperature) and the candidate it makes."""
        patches = [p for j, out in enumerate(outs)
                   for p in self._reflect(out, skill, self._batch(j)[1], k)]
        return patches, self._propose(skill, patches, budget, results)

    def _screen(self, made: list[tuple[list[Patch], Proposal]], skill: str,
                results: list[RolloutResult], tasks: list[Task], folder: WorkDir,
                again: Sequence[int] = ()) -> Screening:
        """The step's candidates screened on its training tasks; with
        ``gradient.drop_riders``, the chosen one without the edits that add nothing there
        (``made`` holds the leaner proposal then, and its row says what was left out).
        ``again``: the proposals sampled once more, the first holding no new skill (said in
        the reason). What the target answered in each rollout goes to ``folder``."""
        g = self.cfg.gradient
        ran: list[tuple[str, Sequence[Task], list[RolloutResult]]] = []
        candidates = [p.candidate for _, p in made]  # as sampled: riders may leave parts out

        def run(doc: str, ts: Sequence[Task]) -> list[RolloutResult]:
            out = rollout(self.env, ts, doc, self._target("screen"),
                          workers=self.cfg.execution.rollout_workers)
            ran.append((doc, ts, out))
            return out

        def value(rs: Sequence[RolloutResult]) -> float:
            return self.gate_rule.value(score(rs, "screen", ""))

        rejected = self._rejected_hashes()
        screening = screen([m[1] for m in made], skill, results, tasks, run, value, rejected,
                           self._extra_tasks(tasks), g.tie_break, g.shorter_on_tie)
        if again:
            n = g.proposals
            which = f"{again[0]}-{again[-1]}" if len(again) > 1 else f"{again[0]}"
            screening = replace(screening, sampled_again=len(again), reason=(
                f"{screening.reason} (proposals {which} sampled again: none of the first {n} "
                "was a new skill)"))
        i = screening.chosen
        # Only a candidate ahead on the step's tasks: one chosen by a second look won on
        # other tasks, where its rules were not each looked at.
        if (g.drop_riders and i is not None and "score" in screening.rows[i]
                and screening.rows[i]["score"] > screening.current):
            patches, proposal = made[i]
            lean, left = without_riders(proposal, skill, screening.rows[i]["score"], tasks,
                                        run, value, rejected)
            if left:
                made[i] = (patches, lean)
                screening.rows[i]["reason"] = "left out " + "; ".join(left)
        folder.labelled("screen", screened_roles(ran, skill, candidates, tasks, i))
        return screening

    def _propose(self, skill: str, patches: list[Patch], budget: int,
                 results: list[RolloutResult]) -> Proposal:
        """Aggregate, select and update: the candidate the patches make (``results``: the
        step's rollouts, whose tasks no edit may quote)."""
        making = settings.candidate_settings(self.cfg, skill, self._context())
        shown = self._evidence(results)
        merged = self._stage("aggregate", None, lambda: aggregate_stage(
            skill, patches, self._optimizer("aggregate"), making, shown, self._requests))
        chosen = self._stage("select", None, lambda: select_stage(
            merged, budget, skill, self._optimizer("select"), making,
            lambda doc: self.evaluate(doc, "val", self.val_tasks), self._metric))
        return self._stage("update", None, lambda: update_stage(
            chosen, skill, patches, self._optimizer, making, shown, results))

    def _rollout(self, tasks: Sequence[Task], skill: str) -> list[RolloutResult]:
        return rollout(self.env, tasks, skill, self._target("rollout"),
                       workers=self.cfg.execution.rollout_workers,
                       on_result=lambda _r: self._notify("on_task_done", "rollout"))

    def _rollouts(self, runs: Sequence[tuple[str, Sequence[Task]]], stage: str,
                  on_result: Callable[[RolloutResult], None] | None = None,
                  ) -> list[list[RolloutResult]]:
        """The rollouts of every (skill, tasks) of ``runs``, in task order per run. Runs
        that do not depend on each other share the rollout workers (and the endpoint): no
        skill's rollouts wait for another's slowest one."""
        model, workers = self._target(stage), self.cfg.execution.rollout_workers
        if len(runs) == 1:
            skill, tasks = runs[0]
            return [rollout(self.env, tasks, skill, model, workers=workers, on_result=on_result)]
        jobs = [(i, skill, task) for i, (skill, tasks) in enumerate(runs) for task in tasks]
        done = fan_out(lambda job: rollout(self.env, [job[2]], job[1], model,
                                           on_result=on_result)[0], jobs, workers, "rollouts")
        out: list[list[RolloutResult]] = [[] for _ in runs]
        for (i, _, _), result in zip(jobs, done, strict=True):
            out[i].append(result)
        return out

    def _extra_tasks(self, batch: Sequence[Task], epoch: int | None = None,
                     step: int | None = None) -> list[Task]:
        """As many training tasks as ``batch``, none of them in it, for the screen's second
        look at candidates that tie (a seeded draw per step, this one's unless ``epoch`` and
        ``step`` say which; none when ties are not looked at again)."""
        if not self.cfg.gradient.tie_break:
            return []
        s = self._require_state()
        taken = {t.id for t in batch}
        rest = [t for t in self.train_tasks if t.id not in taken]
        step_rng(self.cfg.train.seed, s.epoch if epoch is None else epoch,
                 s.step if step is None else step, "tie_break").shuffle(rest)
        return rest[:len(batch)]

    def _batch(self, j: int) -> tuple[list[Task], Any]:
        """Batch ``j`` of the step's ``train.accumulation`` and its minibatch shuffler."""
        s = self._require_state()
        t = self.cfg.train
        batch = self._batch_at(s.epoch, s.step, j)
        rng = step_rng(t.seed, s.epoch, s.step, "minibatch" if j == 0 else f"minibatch{j}")
        return batch, rng

    def _batch_at(self, epoch: int, step: int, j: int) -> list[Task]:
        """The tasks of batch ``j`` of 0-based ``step``'s accumulation in ``epoch``."""
        t = self.cfg.train
        return self._batches.batch(epoch, step * t.accumulation + j, t.batch_size)

    def _gate(self, candidate: str, refusal: str | None, known: EvalScore | None,
              unchanged: str = "no change could be applied",
              screened_out: str | None = None, folder: WorkDir | None = None) -> GateDecision:
        s = self._require_state()
        rule = self.gate_rule
        common: dict[str, Any] = {"metric": rule.metric, "gated": rule.use_gate,
                                  "rule": rule.describe()}
        if screened_out is not None:
            return GateDecision(decision="skip", reason=screened_out, **common)
        refusal = refusal or size_refusal(candidate, self.cfg.optimizer.max_skill_tokens)
        if refusal is not None:
            return GateDecision(decision="refused", reason=refusal, **common)
        if skill_hash(candidate) == s.current_hash:
            return GateDecision(decision="skip", **common,
                                reason=f"{unchanged}; the skill is unchanged")
        before = self._rejected_hashes().get(skill_hash(candidate))
        if before is not None:  # judged on the same selection tasks: the same verdict
            return GateDecision(decision="skip", **common, reason=(
                f"the gate rejected this same skill at step {before}; it is not judged again"))
        # The candidate and the skills it is compared with, those not scored yet, share one
        # evaluation (the checkpoint usually holds the current and the best skill's scores).
        unknown = [d for d in dict.fromkeys((s.current_hash, s.best_hash))
                   if s.score("val", d) is None]
        self._evaluate_all([*([] if known else [candidate]),
                            *(self.run.load_skill(d) for d in unknown)], "val", self.val_tasks)
        cand = known or self.evaluate(candidate, "val", self.val_tasks)
        current = self._known_score("val", s.current_hash)
        best = self._known_score("val", s.best_hash)
        density = (0.0, 0.0, 0.0)
        if rule.density_weight:
            density = (directive_density(candidate),
                       directive_density(self.run.load_skill(s.current_hash)),
                       directive_density(self.run.load_skill(s.best_hash)))
        decision = decide(cand, current, best, rule, density=density)
        if second_look_due(decision, cand, rule):
            return self._second_look(candidate, decision, cand, current,
                                     (density[0], density[1]), folder)
        return decision

    def _second_look(self, candidate: str, first: GateDecision, cand: EvalScore,
                     current: EvalScore, density: tuple[float, float],
                     folder: WorkDir | None) -> GateDecision:
        """``first`` (a rejection the gate's rule looks at again) decided on the selection
        tasks and on ``evaluation.gate_second_look`` training tasks no analyst has seen (their
        rollouts go to ``folder``, the gate's)."""
        s = self._require_state()
        tasks = self._unseen_tasks(self.gate_rule.second_look)
        if not tasks:
            return first.model_copy(update={"reason": (
                f"{first.reason}; no training task is left that no analyst has seen, for a "
                "second look")})
        skill = self.run.load_skill(s.current_hash)
        stage = "eval:second_look"
        self._notify("on_stage_start", stage, 2 * len(tasks))
        outs = self._rollouts([(candidate, tasks), (skill, tasks)], "second_look",
                              lambda _r: self._notify("on_task_done", stage))
        self._notify("on_stage_end", stage, 0.0)
        digest = skill_hash(candidate)
        if folder is not None:
            folder.labelled("second look", [(digest, "candidate", outs[0]),
                                            (s.current_hash, "current skill", outs[1])])
        more = score(outs[0], "second_look", digest)
        more_current = score(outs[1], "second_look", s.current_hash)
        return second_look(first, cand, current, more, more_current, self.gate_rule,
                           density=density)

    def _unseen_tasks(self, n: int) -> list[Task]:
        """Up to ``n`` training tasks (a seeded draw per step) that no part of the run has
        used so far: in no batch up to this step's, no screen's second look and no epoch
        update's sample. Tasks a later step may show an analyst are unseen still: the
        candidate was made without them."""
        s = self._require_state()
        t = self.cfg.train
        used: set[str] = set()
        for epoch in range(1, s.epoch + 1):
            last = s.step if epoch == s.epoch else s.steps_per_epoch - 1
            for step in range(last + 1):
                batch = [task for j in range(t.accumulation)
                         for task in self._batch_at(epoch, step, j)]
                used |= {task.id for task in batch}
                used |= {task.id for task in self._extra_tasks(batch, epoch, step)}
        o = self.cfg.optimizer
        if o.use_slow_update or o.use_meta_skill:  # each epoch update's sample, this one's too
            for epoch in range(2, s.epoch + 1):
                used |= {task.id for task in sample_tasks(
                    self.train_tasks, o.slow_update_samples, t.seed, epoch)}
        rest = [task for task in self.train_tasks if task.id not in used]
        step_rng(t.seed, s.epoch, s.step, "second_look").shuffle(rest)
        return rest[:n]

    def _rejected_hashes(self) -> dict[str, int]:
        """The skills the gate rejected in this run (hash -> the global step)."""
        return {r.candidate_hash: r.global_step for r in self._require_state().history
                if r.decision == "reject" and r.candidate_hash}

    def evaluate(self, skill: str, split: str, tasks: Sequence[Task]) -> EvalScore:
        """Score ``skill`` on ``tasks``; a skill already scored on the split is not re-run."""
        return self._evaluate_all([skill], split, tasks)[0]

    def _evaluate_all(self, skills: Sequence[str], split: str,
                      tasks: Sequence[Task]) -> list[EvalScore]:
        """:meth:`evaluate` each of ``skills``: the rollouts of those not scored yet run at
        once (no skill's score depends on another's), then each is scored in turn."""
        s = self._require_state()
        digests = [skill_hash(skill) for skill in skills]
        todo = {d: skill for d, skill in zip(digests, skills, strict=True)
                if s.score(split, d) is None}
        stage = f"eval:{split}"
        outs: list[list[RolloutResult]] = []
        if todo:
            self._notify("on_stage_start", stage, len(tasks) * len(todo))
            outs = self._rollouts([(skill, tasks) for skill in todo.values()], f"eval_{split}",
                                  lambda _r: self._notify("on_task_done", stage))
            self._notify("on_stage_end", stage, 0.0)
        for skill in skills:  # written after the rollouts: the write delays no call
            self.run.save_skill(skill)
        for digest, results in zip(todo, outs, strict=True):
            self.run.eval_dir(split, digest).rollouts(results)
            result = score(results, split, digest)
            s.put_score(result)
            self._notify("on_evaluate", result)
        scores = [s.score(split, d) for d in digests]
        return [found for found in scores if found is not None]  # all of them, by now

    # ------------------------------------------------------------------ bookkeeping
    @staticmethod
    def _write_proposal(folder: WorkDir, patches: list[Patch], proposal: Proposal) -> None:
        """The step's patches, the artifacts its candidate was made from, the candidate."""
        folder.patches(patches)
        for kind, data in proposal.artifacts:
            folder.artifact(kind, data)
        folder.candidate(proposal.candidate)

    def _commit(self, record: StepRecord, proposal: Proposal, decision: GateDecision) -> None:
        s = self._require_state()
        note = decision.reason if decision.decision == "refused" else ""
        if self.cfg.optimizer.skill_update_mode == "full_rewrite_minibatch":
            note = f"whole-document rewrite{'; ' + note if note else ''}"
        self._adopt(proposal.candidate, decision, record.global_step, RejectedStep(
            global_step=record.global_step, edits=proposal.kept, delta=decision.delta,
            reminders=proposal.reminders, note=note))
        # Refused before rollout, whatever the gate said of the rest: later calls see why.
        s.rejected += [RejectedStep(global_step=record.global_step, edits=(r.item,), note=r.reason,
                                    quoted=r.quoted) for r in proposal.refused]
        s.history.append(record)
        s.wall_seconds += record.seconds
        self.run.event("gate", global_step=record.global_step, decision=decision)
        s.advance()
        self._checkpoint()
        self.run.event("step_end", global_step=record.global_step, decision=decision.decision)

    def _adopt(self, candidate: str, decision: GateDecision, at_step: int,
               rejected: RejectedStep) -> None:
        """Carry out the gate's decision: an accepted candidate becomes the current skill (and
        the best, with ``accept_new_best``, found at global step ``at_step``); a rejected or
        refused one goes into the rejected buffer as ``rejected``."""
        s = self._require_state()
        if decision.decision in ("accept", "accept_new_best"):
            s.current_hash = self.run.save_skill(candidate)
            self.run.write_text(self.run.current_skill_path, candidate)
        if decision.decision == "accept_new_best":
            s.best_hash, s.best_step = s.current_hash, at_step
            self.run.write_text(self.run.best_skill_path, candidate)
        if decision.decision in ("reject", "refused"):
            s.rejected.append(rejected)

    def _record(self, results: list[RolloutResult], patches: list[Patch], proposal: Proposal,
                decision: GateDecision, budget: int, seconds: float,
                unusable: str = "") -> StepRecord:
        s = self._require_state()
        n = len(results) or 1
        return StepRecord(
            epoch=s.epoch, step=s.step + 1, global_step=s.global_step + 1, budget=budget,
            train_hard=sum(r.hard for r in results) / n, train_soft=sum(r.soft for r in results) / n,
            n_proposed=proposal.n_proposed, n_selected=len(proposal.kept),
            n_applied=proposal.n_applied, n_fuzzy=proposal.n_fuzzy,
            n_skipped=proposal.n_skipped,
            n_parse_errors=sum(1 for p in patches if p.error),
            decision=decision.decision,
            candidate_hash=(None if decision.decision in ("skip", "refused")
                            else skill_hash(proposal.candidate)),
            candidate_score=decision.candidate, current_score=decision.current,
            best_score=decision.best, seconds=round(seconds, 3),
            n_reminders=len(proposal.reminders),
            rate=proposal.selection.rate if proposal.selection else None,
            reason=decision.reason if decision.decision in ("refused", "skip") else "",
            changes=proposal.changes(), n_refused=sum(not r.repaired for r in proposal.refused), unusable=unusable,
            skill_loads=skill_loads(results), references_read=references_read(results),
            trigger=proposal.trigger,
            losses=proposal.losses(),
        )

    def _start_or_resume(self) -> TrainerState:
        state = resume_state(self.run, self.resolved, self.allow_config_change)
        if state is not None:
            self._load_meter(state.meter)
            self.state = state
            self.run.event("resume", epoch=state.epoch, step=state.step, phase=state.phase)
            self._placed()
            self._notify("on_resume", state)
            return state
        skill = self.env.initial_skill()
        if not skill.strip():
            raise DataError("the initial skill is empty")
        if is_package(skill):
            _check_package_modes(self.cfg)
        cap = self.cfg.optimizer.max_skill_tokens
        if cap is not None and estimate_tokens(skill) > cap:
            raise DataError(f"the initial skill is {estimate_tokens(skill)} estimated tokens, "
                            f"over optimizer.max_skill_tokens ({cap})")
        self._notify("on_train_begin")
        claim_run(self.run, self.resolved, __version__, self.allow_config_change)
        self._load_meter({})
        digest = self.run.save_skill(skill)
        t = self.cfg.train
        total = steps_per_epoch(len(self.train_tasks), t.batch_size * t.accumulation,
                                t.steps_per_epoch)
        self.state = TrainerState(
            fingerprint=self.resolved.fingerprint(), steps_per_epoch=total,
            num_epochs=self.cfg.train.num_epochs, initial_hash=digest, current_hash=digest,
            best_hash=digest, epoch_start={"1": digest}, rejected=list(self.prior_rejected),
        )
        self.run.event("run_start", version=__version__, steps=self.state.total_steps)
        self._placed()
        self._open_scope(self.run.scope_dir("init"))
        self.evaluate(skill, "val", self.val_tasks)
        self.run.write_text(self.run.best_skill_path, skill)
        self.run.write_text(self.run.current_skill_path, skill)
        self._checkpoint()
        return self.state

    def _final_evaluation(self) -> dict[str, EvalScore]:
        s = self._require_state()
        if not self.cfg.evaluation.eval_test:
            return {}
        tasks = self._split("test")
        self._open_scope(self.run.scope_dir("final"))
        named = {"initial": s.initial_hash, "best": s.best_hash, "final": s.current_hash}
        scores = self._evaluate_all([self.run.load_skill(d) for d in named.values()], "test",
                                    tasks)
        self._checkpoint()
        return dict(zip(named, scores, strict=True))

    def _split(self, split: str) -> list[Task]:
        tasks = self.env.tasks(split)  # type: ignore[arg-type]
        if not tasks:
            raise DataError(f"the {split} split is empty")
        cap = settings.split_cap(self.cfg, split)
        return tasks[:cap] if cap else tasks

    def _known_score(self, split: str, digest: str) -> EvalScore:
        known = self._require_state().score(split, digest)
        if known is None:  # the checkpoint always holds the current and best skill's scores
            return self.evaluate(self.run.load_skill(digest), split, self.val_tasks)
        return known

    def _open_scope(self, folder: WorkDir) -> None:
        """Journal the model calls from here on in ``folder`` (what resume and replay read)."""
        self._journal = CallJournal(folder.calls_path)

    def _target(self, stage: str) -> StageModel:
        return self.target.for_stage(stage, journal=self._journal)

    def _optimizer(self, stage: str) -> StageModel:
        return self.optimizer.for_stage(stage, journal=self._journal)

    def _meters(self) -> list[Meter]:
        """The clients' meters, once each (both roles usually share one)."""
        meters = [self.target.meter]
        if self.optimizer.meter is not self.target.meter:
            meters.append(self.optimizer.meter)
        return meters

    def _load_meter(self, data: dict[str, Any]) -> None:
        """Set the clients' counts to the checkpoint's (``{}``: a new run starts from zero)."""
        stages = Meter.from_json(data).stages
        for meter in self._meters():
            roles = {c.role for c in (self.target, self.optimizer) if c.meter is meter}
            meter.stages = {r: v for r, v in stages.items() if r in roles}

    def _checkpoint(self) -> None:
        s = self._require_state()
        s.meter = {k: v for m in self._meters() for k, v in m.to_json().items()}
        s.compact(self.run)  # per-task results of skills the gate no longer compares with
        self.run.save_checkpoint(s)

    def _stage(self, name: str, total: int | None, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, timed under ``name`` and announced to the callbacks."""
        self._notify("on_stage_start", name, total)
        started = time.monotonic()
        out = fn(*args)
        seconds = time.monotonic() - started
        s = self._require_state()
        s.stage_seconds[name] = round(s.stage_seconds.get(name, 0.0) + seconds, 3)
        self._notify("on_stage_end", name, seconds)
        return out

    def _notify(self, hook: str, *args: Any) -> None:
        for cb in self.callbacks:
            getattr(cb, hook)(*args)

    def _require_state(self) -> TrainerState:
        if self.state is None:
            raise RuntimeError("trainer state is not initialised; call fit()")
        return self.state

    def _metric(self, score: EvalScore, skill: str) -> float:
        rule = self.gate_rule
        return rule.value(score, directive_density(skill) if rule.density_weight else 0.0)

    def _context(self) -> settings.OptimizerContext:
        s = self._require_state()
        return settings.OptimizerContext(meta_skill=s.meta_skill, rejected=s.rejected,
                                         history=s.history)

    def _rejected(self) -> Sequence[RejectedStep]:
        return settings.rejected(self.cfg, self._context())

    def _evidence(self, results: Sequence[RolloutResult]) -> Evidence:
        """What the optimizer is shown with ``results``: their tasks, gold answers and failure
        reasons, and the refused texts the rejected buffer shows it again."""
        return Evidence.of(results, self._train_by_id, refused_texts(self._rejected()))


def build_trainer(
    resolved: ResolvedConfig,
    out: Path,
    *,
    callbacks: Sequence[TrainerCallback] = (),
    allow_config_change: bool = False,
    replay: Path | None = None,
    prior_rejected: Sequence[RejectedStep] = (),
) -> Trainer:
    """``prior_rejected``: changes an earlier run rejected, shown to the optimizer from the
    start (a sleep night carries the last night's over). The trackers of the config's
    ``tracking:`` section follow ``callbacks``; a replay has none (it reproduces a recorded
    run and logs no second one)."""
    run = RunDir(out)
    env = build_environment(resolved)
    clients = build_clients(resolved, replay=replay)
    trackers = [] if replay is not None else tracker_callbacks(
        resolved, run, [c.meter for c in clients.values()])
    return Trainer(resolved, env, clients["target"], clients["optimizer"], run,
                   callbacks=[*callbacks, *trackers], allow_config_change=allow_config_change,
                   prior_rejected=prior_rejected)


def _check_package_modes(cfg: SkillgradConfig) -> None:
    """A skill package trains by edits, each in one of its files: the modes that rewrite the
    whole document, or write protected blocks at its end, would write across its files."""
    o = cfg.optimizer
    found = [f"optimizer.skill_update_mode: {o.skill_update_mode}"] \
        if o.skill_update_mode != "patch" else []
    found += [f"optimizer.{key}: true" for key in ("use_slow_update",
                                                    "use_skill_aware_reflection")
              if getattr(o, key)]
    if found:
        raise ConfigError(f"{found[0]}: a skill package (env.skill_init names a folder) trains "
                          "with skill_update_mode: patch, without use_slow_update and "
                          "use_skill_aware_reflection, which write across its files")

