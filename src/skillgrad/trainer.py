"""The trainer: it only sequences the stages (rollout, reflect, aggregate, select, update, gate)
and checkpoints after every step, plus the start-of-epoch work (longitudinal comparison, meta
skill, slow update). Each stage is a pure function of its inputs and the model it is handed;
all file writes go through :class:`~skillgrad.rundir.RunDir`.

Nothing enters the current skill without the gate: step candidates, slow updates and appendix
reminders alike. (Longer than the house limit of ~400 lines because the loop, its epoch-level
work and its bookkeeping read best in one place.)
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import yaml

from skillgrad import __version__
from skillgrad.aggregate import MergeSettings
from skillgrad.callbacks import TrainerCallback
from skillgrad.config import ResolvedConfig, config_changes, dump_yaml
from skillgrad.envs.base import Environment
from skillgrad.errors import DataError, RunDirError, RunStopped
from skillgrad.gate import GateRule, decide, directive_density
from skillgrad.meta_skill import render_epoch, update_notes
from skillgrad.models.client import CallJournal, Meter, ModelClient
from skillgrad.propose import (
    Proposal,
    ProposeSettings,
    propose_full,
    propose_patch,
    propose_rewrite,
    size_note,
    size_refusal,
)
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
from skillgrad.reflect import ReflectSettings, reflect, render_meta, render_rejected
from skillgrad.rollout import rollout, score
from skillgrad.rundir import RunDir
from skillgrad.schedule import edit_budget
from skillgrad.selection import SelectSettings, render_history
from skillgrad.skill import estimate_tokens, skill_hash
from skillgrad.slow_update import count, pair_up, sample_tasks, write_guidance
from skillgrad.state import TrainerState, batch_for, step_rng, steps_per_epoch
from skillgrad.summary import build_summary

log = logging.getLogger(__name__)
T = TypeVar("T")


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
    ) -> None:
        self.resolved = config
        self.cfg = config.config
        self.env = env
        self.target = target
        self.optimizer = optimizer
        self.run = run_dir
        self.callbacks = list(callbacks)
        self.allow_config_change = allow_config_change
        self.meter = Meter()
        target.meter = optimizer.meter = self.meter
        self.train_tasks = self._split("train", self.cfg.train.train_size)
        self.val_tasks = self._split("val", self.cfg.evaluation.sel_env_num)
        self.state: TrainerState | None = None

    # ------------------------------------------------------------------ the loop
    def fit(self) -> dict[str, Any]:
        """Train to the end (or continue to it) and return the summary."""
        try:
            self._fit()
        except RunStopped as exc:
            # The checkpoint of the last finished step and this step's call journal are on
            # disk: running again resumes here.
            self.run.event("stopped", reason=str(exc))
            raise
        return self._read_summary()

    def _fit(self) -> None:
        state = self._start_or_resume()
        while state.phase == "train" and not state.training_done:
            if state.step == 0 and state.epoch > state.epoch_update_done:
                self.epoch_update()
            self.step()
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

    def step(self) -> StepRecord:
        """One optimisation step: rollout and reflect (once per accumulated batch), then
        aggregate, select and update into one candidate, the gate, and a checkpoint."""
        s = self._require_state()
        started = time.monotonic()
        folder = self.run.step_dir(s.epoch, s.step + 1)
        self._open_scope(folder)
        self.run.event("step_start", epoch=s.epoch, step=s.step, global_step=s.global_step)
        skill = self.run.load_skill(s.current_hash)
        results, patches = self._forward_backward(skill)
        self.run.write_jsonl(folder / "rollouts.jsonl", results)
        self.run.write_json(folder / "patches.json", patches)
        budget = edit_budget(s.global_step, s.total_steps, self.cfg.optimizer.learning_rate,
                             self.cfg.optimizer.min_learning_rate, self.cfg.optimizer.lr_scheduler)
        proposal = self._stage("update", None, lambda: self._propose(skill, patches, budget))
        for name, data in proposal.files.items():
            self.run.write_json(folder / name, data)
        self.run.write_text(folder / "candidate.md", proposal.candidate)
        decision = self._stage("gate", None, lambda: self._gate(
            proposal.candidate, proposal.refusal, proposal.score, _unchanged(proposal)))
        self.run.write_json(folder / "gate.json", decision)

        record = self._record(results, patches, proposal, decision, budget,
                              time.monotonic() - started)
        self.run.write_json(folder / "record.json", record)
        self._commit(record, proposal, decision)
        for cb in self.callbacks:
            cb.on_step_end(record)
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
        before = self._stage("longitudinal", len(tasks), lambda: rollout(
            self.env, tasks, previous, self.target.for_stage("longitudinal"),
            workers=self.cfg.execution.rollout_workers))
        after = before if prev_hash == cur_hash else self._stage(
            "longitudinal", len(tasks), lambda: rollout(
                self.env, tasks, current, self.target.for_stage("longitudinal"),
                workers=self.cfg.execution.rollout_workers))
        pairs = pair_up(before, after)
        self.run.write_jsonl(folder / "pairs.jsonl", [
            {"task_id": p.task_id, "kind": p.kind, "previous": p.previous, "current": p.current}
            for p in pairs])
        errors: list[str] = []
        meta_updated = False
        if o.use_meta_skill:
            notes, error = self._stage("meta_skill", None, lambda: update_notes(
                s.meta_skill, render_epoch(s.history, epoch - 1), pairs,
                self.optimizer.for_stage("meta_skill"),
                max_chars=self.cfg.gradient.max_trajectory_chars, **self._opt_sampling()))
            if notes is not None:
                s.meta_skill, meta_updated = notes, True
                self.run.write_text(folder / "meta_skill.md", notes + "\n")
                self.run.write_text(self.run.meta_skill_path, notes + "\n")
            if error:
                errors.append(error)
        decision, guidance = None, ""
        if o.use_slow_update:
            decision, guidance = self._slow_update(previous, current, pairs, folder, errors)
        update = EpochUpdate(
            epoch=epoch, previous_hash=prev_hash, current_hash=cur_hash,
            tasks=tuple(t.id for t in tasks), pairs=count(pairs),
            meta_skill_updated=meta_updated, slow_update=decision, guidance=guidance,
            error="; ".join(errors) or None, seconds=round(time.monotonic() - started, 3))
        self.run.write_json(folder / "epoch_update.json", update)
        s.epoch_updates.append(update)
        s.wall_seconds += update.seconds
        self._epoch_started(epoch)
        self._checkpoint()
        self.run.event("epoch_update_end", epoch=epoch, decision=decision and decision.decision)
        self._notify("on_epoch_update", update)
        return update

    def _slow_update(self, previous: str, current: str, pairs: list[Any], folder: Any,
                     errors: list[str]) -> tuple[GateDecision, str]:
        s = self._require_state()
        o = self.cfg.optimizer
        candidate, guidance, why = self._stage("slow_update", None, lambda: write_guidance(
            previous, current, pairs, o.longitudinal_pair_policy,
            self.optimizer.for_stage("slow_update"), meta=self._meta(),
            constraints=size_note(current, o.max_skill_tokens),
            max_chars=self.cfg.gradient.max_trajectory_chars, **self._opt_sampling()))
        if candidate is None:
            errors.append(str(why))
            candidate = current
        self.run.write_text(folder / "candidate.md", candidate)
        decision = self._stage("gate", None, lambda: self._gate(candidate, None, None))
        self.run.write_json(folder / "gate.json", decision)
        if decision.decision in ("accept", "accept_new_best"):
            s.current_hash = self.run.save_skill(candidate)
            self.run.write_text(self.run.current_skill_path, candidate)
        if decision.decision == "accept_new_best":
            s.best_hash, s.best_step = s.current_hash, s.global_step
            self.run.write_text(self.run.best_skill_path, candidate)
        if decision.decision in ("reject", "refused"):
            s.rejected.append(RejectedStep(
                global_step=s.global_step, delta=_delta(decision),
                note=f"slow-update guidance {guidance!r} ({decision.reason})"))
        self.run.event("slow_update", epoch=s.epoch, decision=decision)
        return decision, guidance

    def _epoch_started(self, epoch: int) -> None:
        s = self._require_state()
        s.epoch_start[str(epoch)] = s.current_hash
        s.epoch_update_done = epoch

    # ------------------------------------------------------------------ stages
    def _rollout(self, tasks: Sequence[Task], skill: str) -> list[RolloutResult]:
        return rollout(self.env, tasks, skill, self.target.for_stage("rollout"),
                       workers=self.cfg.execution.rollout_workers,
                       on_result=lambda _r: self._notify("on_task_done", "rollout"))

    def _forward_backward(self, skill: str) -> tuple[list[RolloutResult], list[Patch]]:
        """Rollout and reflect on each of the step's ``train.accumulation`` batches."""
        results: list[RolloutResult] = []
        patches: list[Patch] = []
        for j in range(self.cfg.train.accumulation):
            out, found = self._batch(skill, j)
            results += out
            patches += found
        return results, patches

    def _batch(self, skill: str, j: int) -> tuple[list[RolloutResult], list[Patch]]:
        s = self._require_state()
        t = self.cfg.train
        batch = batch_for(self.train_tasks, t.seed, s.epoch, s.step * t.accumulation + j,
                          t.batch_size)
        rng = step_rng(t.seed, s.epoch, s.step, "minibatch" if j == 0 else f"minibatch{j}")
        out = self._stage("rollout", len(batch), lambda: self._rollout(batch, skill))
        patches = self._stage("reflect", None, lambda: reflect(
            out, skill, self.optimizer.for_stage("reflect"), self._reflect_settings(skill),
            rng, self._rejected()))
        return out, patches

    def _propose(self, skill: str, patches: list[Patch], budget: int) -> Proposal:
        mode = self.cfg.optimizer.skill_update_mode
        settings = self._propose_settings(skill)
        if mode == "full_rewrite_minibatch":
            return propose_full(skill, patches, lambda doc: self.evaluate(doc, "val", self.val_tasks),
                                lambda score, doc: self._metric(score, doc), settings)
        make = propose_rewrite if mode == "rewrite_from_suggestions" else propose_patch
        return make(skill, patches, budget, self.optimizer.for_stage, settings)

    def _gate(self, candidate: str, refusal: str | None, known: EvalScore | None,
              unchanged: str = "no change could be applied") -> GateDecision:
        s = self._require_state()
        rule = self.gate_rule
        common: dict[str, Any] = {"metric": rule.metric, "gated": rule.use_gate,
                                  "rule": rule.describe()}
        refusal = refusal or size_refusal(candidate, self.cfg.optimizer.max_skill_tokens)
        if refusal is not None:
            return GateDecision(decision="refused", reason=refusal, **common)
        if skill_hash(candidate) == s.current_hash:
            return GateDecision(decision="skip", **common,
                                reason=f"{unchanged}; the skill is unchanged")
        cand = known or self.evaluate(candidate, "val", self.val_tasks)
        current = self._known_score("val", s.current_hash)
        best = self._known_score("val", s.best_hash)
        density = (0.0, 0.0, 0.0)
        if rule.density_weight:
            density = (directive_density(candidate),
                       directive_density(self.run.load_skill(s.current_hash)),
                       directive_density(self.run.load_skill(s.best_hash)))
        return decide(cand, current, best, rule, density=density)

    def evaluate(self, skill: str, split: str, tasks: Sequence[Task]) -> EvalScore:
        """Score ``skill`` on ``tasks``; a skill already scored on the split is not re-run."""
        s = self._require_state()
        digest = self.run.save_skill(skill)
        known = s.score(split, digest)
        if known is not None:
            return known
        self._notify("on_stage_start", f"eval:{split}", len(tasks))
        results = rollout(self.env, tasks, skill, self.target.for_stage(f"eval_{split}"),
                          workers=self.cfg.execution.rollout_workers,
                          on_result=lambda _r: self._notify("on_task_done", f"eval:{split}"))
        self._notify("on_stage_end", f"eval:{split}", 0.0)
        self.run.write_jsonl(self.run.eval_dir(split, digest) / "rollouts.jsonl", results)
        result = score(results, split, digest)
        s.put_score(result)
        self._notify("on_evaluate", result)
        return result

    # ------------------------------------------------------------------ bookkeeping
    def _commit(self, record: StepRecord, proposal: Proposal, decision: GateDecision) -> None:
        s = self._require_state()
        candidate = proposal.candidate
        if decision.decision in ("accept", "accept_new_best"):
            s.current_hash = self.run.save_skill(candidate)
            self.run.write_text(self.run.current_skill_path, candidate)
        if decision.decision == "accept_new_best":
            s.best_hash, s.best_step = s.current_hash, s.global_step + 1
            self.run.write_text(self.run.best_skill_path, candidate)
        if decision.decision in ("reject", "refused"):
            note = decision.reason if decision.decision == "refused" else ""
            if self.cfg.optimizer.skill_update_mode == "full_rewrite_minibatch":
                note = f"whole-document rewrite{'; ' + note if note else ''}"
            s.rejected.append(RejectedStep(
                global_step=s.global_step + 1, edits=proposal.kept, delta=_delta(decision),
                reminders=proposal.reminders, note=note))
        s.history.append(record)
        s.wall_seconds += record.seconds
        self.run.event("gate", global_step=record.global_step, decision=decision)
        s.advance()
        self._checkpoint()
        self.run.event("step_end", global_step=record.global_step, decision=decision.decision)

    def _record(self, results: list[RolloutResult], patches: list[Patch], proposal: Proposal,
                decision: GateDecision, budget: int, seconds: float) -> StepRecord:
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
            changes=proposal.changes(),
        )

    def _start_or_resume(self) -> TrainerState:
        fingerprint = self.resolved.fingerprint()
        data = self.run.load_checkpoint_data()
        if data is not None:
            state = TrainerState.model_validate(data)
            self._check_fingerprint(state.fingerprint, fingerprint)
            state.fingerprint = fingerprint
            self.meter.stages = Meter.from_json(state.meter).stages
            self.state = state
            self.run.event("resume", epoch=state.epoch, step=state.step, phase=state.phase)
            self._notify("on_resume", state)
            return state
        skill = self.env.initial_skill()
        if not skill.strip():
            raise DataError("the initial skill is empty")
        cap = self.cfg.optimizer.max_skill_tokens
        if cap is not None and estimate_tokens(skill) > cap:
            raise DataError(f"the initial skill is {estimate_tokens(skill)} estimated tokens, "
                            f"over optimizer.max_skill_tokens ({cap})")
        self._prepare_new_dir(fingerprint)
        digest = self.run.save_skill(skill)
        t = self.cfg.train
        total = steps_per_epoch(len(self.train_tasks), t.batch_size * t.accumulation,
                                t.steps_per_epoch)
        self.state = TrainerState(
            fingerprint=fingerprint, steps_per_epoch=total, num_epochs=self.cfg.train.num_epochs,
            initial_hash=digest, current_hash=digest, best_hash=digest, epoch_start={"1": digest},
        )
        self.run.event("run_start", version=__version__, steps=self.state.total_steps)
        self._open_scope(self.run.scope_dir("init"))
        self.evaluate(skill, "val", self.val_tasks)
        self.run.write_text(self.run.best_skill_path, skill)
        self.run.write_text(self.run.current_skill_path, skill)
        self._checkpoint()
        return self.state

    def _prepare_new_dir(self, fingerprint: str) -> None:
        root = self.run.root
        marker = root / "run.json"
        if marker.exists():
            previous = json.loads(marker.read_text(encoding="utf-8")).get("fingerprint")
            self._check_fingerprint(previous, fingerprint)
        elif root.exists() and any(root.iterdir()):
            raise RunDirError(f"{root}: exists, is not empty and is not a skillgrad run directory")
        self.run.write_json(marker, {"fingerprint": fingerprint, "skillgrad": __version__})
        self.run.write_text(self.run.config_path, dump_yaml(self.resolved.redacted()))

    def _check_fingerprint(self, previous: str | None, current: str) -> None:
        if previous == current:
            return
        if not self.allow_config_change:
            raise RunDirError(
                f"{self.run.root}: this run directory was made with a different config"
                f"{self._config_changes()}; use another --out, or pass --allow-config-change "
                "to continue with this one"
            )
        self.run.event("config_changed", previous=previous, current=current)
        self.run.write_text(self.run.config_path, dump_yaml(self.resolved.redacted()))

    def _config_changes(self, shown: int = 3) -> str:
        """What differs from the config the run directory holds, for the refusal message."""
        try:
            previous = yaml.safe_load(self.run.config_path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            return ""  # no readable record of the old config: the refusal still stands
        if not isinstance(previous, dict):
            return ""
        changes = config_changes(previous, self.resolved.redacted())
        if not changes:
            return ""
        more = f"; {len(changes) - shown} more" if len(changes) > shown else ""
        return f" ({'; '.join(changes[:shown])}{more})"

    def _final_evaluation(self) -> dict[str, EvalScore]:
        s = self._require_state()
        if not self.cfg.evaluation.eval_test:
            return {}
        tasks = self._split("test", self.cfg.evaluation.test_env_num)
        self._open_scope(self.run.scope_dir("final"))
        out = {}
        for name, digest in (("initial", s.initial_hash), ("best", s.best_hash),
                             ("final", s.current_hash)):
            out[name] = self.evaluate(self.run.load_skill(digest), "test", tasks)
            self._checkpoint()
        return out

    def _split(self, split: str, cap: int | None) -> list[Task]:
        tasks = self.env.tasks(split)  # type: ignore[arg-type]
        if not tasks:
            raise DataError(f"the {split} split is empty")
        return tasks[:cap] if cap else tasks

    def _known_score(self, split: str, digest: str) -> EvalScore:
        known = self._require_state().score(split, digest)
        if known is None:  # the checkpoint always holds the current and best skill's scores
            return self.evaluate(self.run.load_skill(digest), split, self.val_tasks)
        return known

    def _open_scope(self, folder: Any) -> None:
        journal = CallJournal(folder / "calls.jsonl")
        self.target.journal = self.optimizer.journal = journal

    def _checkpoint(self) -> None:
        s = self._require_state()
        s.meter = self.meter.to_json()
        self.run.save_checkpoint(s)

    def _read_summary(self) -> dict[str, Any]:
        return json.loads(self.run.summary_path.read_text(encoding="utf-8"))

    def _stage(self, name: str, total: int | None, fn: Callable[[], T]) -> T:
        self._notify("on_stage_start", name, total)
        started = time.monotonic()
        out = fn()
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

    def _reflect_settings(self, skill: str) -> ReflectSettings:
        g, o = self.cfg.gradient, self.cfg.optimizer
        return ReflectSettings(
            minibatch_size=g.minibatch_size, workers=g.analyst_workers,
            failure_only=g.failure_only, max_trajectory_chars=g.max_trajectory_chars,
            max_edits=self._max_edits(), **self._opt_sampling(),
            mode=o.skill_update_mode, skill_aware=o.use_skill_aware_reflection,
            reminders_from=o.skill_aware_appendix_source, meta=self._meta(),
            constraints=size_note(skill, o.max_skill_tokens),
            rewrite_max_tokens=o.rewrite_max_tokens,
        )

    def _propose_settings(self, skill: str) -> ProposeSettings:
        g, o = self.cfg.gradient, self.cfg.optimizer
        s = self._require_state()
        sampling = self._opt_sampling()
        kind = "suggestions" if o.skill_update_mode == "rewrite_from_suggestions" else "edits"
        return ProposeSettings(
            mode=o.skill_update_mode,
            merge=MergeSettings(merge_batch_size=g.merge_batch_size, workers=g.analyst_workers,
                                max_edits=self._max_edits(), meta=self._meta(), **sampling),
            select=SelectSettings(mode=o.lr_control_mode, ceiling=o.ceiling, kind=kind,
                                  rejected_text=render_rejected(self._rejected()),
                                  meta=self._meta(), history=render_history(s.history),
                                  **sampling),
            fuzzy_threshold=o.fuzzy_threshold, skill_aware=o.use_skill_aware_reflection,
            reminders_from=o.skill_aware_appendix_source,
            consolidate_threshold=o.skill_aware_consolidate_threshold, meta=self._meta(),
            constraints=size_note(skill, o.max_skill_tokens),
            rewrite_max_tokens=o.rewrite_max_tokens, max_skill_tokens=o.max_skill_tokens,
            **sampling,
        )

    @property
    def gate_rule(self) -> GateRule:
        ev = self.cfg.evaluation
        return GateRule(metric=ev.gate_metric, mixed_weight=ev.gate_mixed_weight,
                        use_gate=ev.use_gate, test=ev.gate_test, alpha=ev.gate_alpha,
                        min_margin=ev.gate_min_margin,
                        bootstrap_samples=ev.gate_bootstrap_samples,
                        density_weight=ev.density_bonus_weight, seed=self.cfg.train.seed)

    def _metric(self, score: EvalScore, skill: str) -> float:
        rule = self.gate_rule
        return rule.value(score, directive_density(skill) if rule.density_weight else 0.0)

    def _max_edits(self) -> int:
        return max(2, self.cfg.optimizer.learning_rate * 2)

    def _meta(self) -> str:
        s = self._require_state()
        return render_meta(s.meta_skill) if self.cfg.optimizer.use_meta_skill else ""

    def _rejected(self) -> list[RejectedStep]:
        s = self._require_state()
        return s.rejected if self.cfg.optimizer.use_rejected_buffer else []

    def _opt_sampling(self) -> dict[str, Any]:
        o = self.cfg.optimizer
        return {"max_tokens": o.max_tokens, "temperature": o.temperature}


def _delta(decision: GateDecision) -> float | None:
    if decision.candidate is None or decision.current is None:
        return None
    return decision.candidate - decision.current


def _unchanged(proposal: Proposal) -> str:
    """Why a step's candidate is the skill it started from, for a skip's reason: no edit was
    proposed, or the edits did not apply (and why: anchor not found, duplicate content, ...)."""
    report = proposal.report
    skipped = [o for o in report.outcomes if o.status == "skipped"] if report else []
    if not skipped:
        return "no edit was proposed" if proposal.n_proposed == 0 else "no change could be applied"
    reasons = list(dict.fromkeys(o.reason or "no reason given" for o in skipped))
    noun = "edit" if len(skipped) == 1 else "edits"
    return f"no change could be applied ({len(skipped)} {noun} skipped: {'; '.join(reasons)})"
