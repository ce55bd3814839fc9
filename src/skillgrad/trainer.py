"""The trainer: it only sequences the stages (rollout, reflect, aggregate, select, update, gate)
and checkpoints after every step. Each stage is a pure function of its inputs and the model it
is handed; all file writes go through :class:`~skillgrad.rundir.RunDir`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from skillgrad import __version__
from skillgrad.aggregate import MergeSettings, aggregate
from skillgrad.callbacks import TrainerCallback
from skillgrad.config import ResolvedConfig, dump_yaml
from skillgrad.envs.base import Environment
from skillgrad.errors import DataError, RunDirError, RunStopped
from skillgrad.gate import decide
from skillgrad.models.client import CallJournal, Meter, ModelClient
from skillgrad.records import (
    EvalScore,
    GateDecision,
    RejectedStep,
    RolloutResult,
    Selection,
    StepRecord,
    Task,
)
from skillgrad.reflect import ReflectSettings, reflect, render_rejected
from skillgrad.rollout import rollout, score
from skillgrad.rundir import RunDir
from skillgrad.schedule import edit_budget
from skillgrad.selection import select
from skillgrad.skill import skill_hash
from skillgrad.state import TrainerState, batch_for, step_rng, steps_per_epoch
from skillgrad.summary import build_summary
from skillgrad.update import apply_edits

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
            self.step()
        if state.phase == "train":
            state.phase = "final"
            self._checkpoint()
        if state.phase == "final":
            test = self._final_evaluation()
            summary = build_summary(state, self.resolved, test, __version__)
            self.run.write_json(self.run.summary_path, summary)
            state.phase = "done"
            self._checkpoint()
            self.run.event("run_end", best_hash=state.best_hash)

    def step(self) -> StepRecord:
        """One optimisation step: the six stages, then a checkpoint."""
        s = self._require_state()
        started = time.monotonic()
        folder = self.run.step_dir(s.epoch, s.step + 1)
        self._open_scope(folder)
        self.run.event("step_start", epoch=s.epoch, step=s.step, global_step=s.global_step)
        skill = self.run.load_skill(s.current_hash)
        batch = batch_for(self.train_tasks, self.cfg.train.seed, s.epoch, s.step,
                          self.cfg.train.batch_size)

        results = self._stage("rollout", len(batch), lambda: self._rollout(batch, skill))
        self.run.write_jsonl(folder / "rollouts.jsonl", results)
        patches = self._stage("reflect", None, lambda: reflect(
            results, skill, self.optimizer.for_stage("reflect"), self._reflect_settings(),
            step_rng(self.cfg.train.seed, s.epoch, s.step, "minibatch"), s.rejected))
        self.run.write_json(folder / "patches.json", patches)
        agg = self._stage("aggregate", None, lambda: aggregate(
            patches, skill, self.optimizer.for_stage("aggregate"), self._merge_settings()))
        self.run.write_json(folder / "merged_patch.json",
                            {"merged": agg.merged, "levels": agg.levels})
        budget = edit_budget(s.global_step, s.total_steps, self.cfg.optimizer.learning_rate,
                             self.cfg.optimizer.min_learning_rate, self.cfg.optimizer.lr_scheduler)
        selection = self._stage("select", None, lambda: select(
            agg.merged, budget, skill, self.optimizer.for_stage("select"),
            rejected_text=render_rejected(s.rejected), **self._opt_sampling()))
        self.run.write_json(folder / "ranked_edits.json", selection)
        candidate, report = self._stage("update", None, lambda: apply_edits(
            skill, selection.kept, fuzzy_threshold=self.cfg.optimizer.fuzzy_threshold))
        self.run.write_text(folder / "candidate.md", candidate)
        self.run.write_json(folder / "apply_report.json", report)
        decision = self._stage("gate", None, lambda: self._gate(candidate, report.n_applied))
        self.run.write_json(folder / "gate.json", decision)

        record = self._record(results, patches, selection, report, decision, candidate,
                              budget, time.monotonic() - started)
        self.run.write_json(folder / "record.json", record)
        self._commit(record, selection, candidate, decision)
        for cb in self.callbacks:
            cb.on_step_end(record)
        return record

    # ------------------------------------------------------------------ stages
    def _rollout(self, tasks: Sequence[Task], skill: str) -> list[RolloutResult]:
        return rollout(self.env, tasks, skill, self.target.for_stage("rollout"),
                       workers=self.cfg.execution.rollout_workers,
                       on_result=lambda _r: self._notify("on_task_done", "rollout"))

    def _gate(self, candidate: str, n_applied: int) -> GateDecision:
        s = self._require_state()
        metric, weight = self.cfg.evaluation.gate_metric, self.cfg.evaluation.gate_mixed_weight
        if n_applied == 0 or skill_hash(candidate) == s.current_hash:
            return GateDecision(decision="skip", metric=metric, gated=self.cfg.evaluation.use_gate,
                                reason="no edit could be applied; the skill is unchanged")
        cand = self.evaluate(candidate, "val", self.val_tasks)
        current = self._known_score("val", s.current_hash)
        best = self._known_score("val", s.best_hash)
        return decide(cand, current, best, metric=metric, mixed_weight=weight,
                      use_gate=self.cfg.evaluation.use_gate)

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
    def _commit(self, record: StepRecord, selection: Selection, candidate: str,
                decision: GateDecision) -> None:
        s = self._require_state()
        if decision.decision in ("accept", "accept_new_best"):
            s.current_hash = self.run.save_skill(candidate)
            self.run.write_text(self.run.current_skill_path, candidate)
        if decision.decision == "accept_new_best":
            s.best_hash, s.best_step = s.current_hash, s.global_step + 1
            self.run.write_text(self.run.best_skill_path, candidate)
        if decision.decision == "reject":
            delta = (decision.candidate or 0.0) - (decision.current or 0.0)
            s.rejected.append(RejectedStep(global_step=s.global_step + 1,
                                           edits=selection.kept, delta=delta))
        s.history.append(record)
        s.wall_seconds += record.seconds
        self.run.event("gate", global_step=record.global_step, decision=decision)
        s.advance()
        self._checkpoint()
        self.run.event("step_end", global_step=record.global_step, decision=decision.decision)

    def _record(self, results: list[RolloutResult], patches: list[Any], selection: Selection,
                report: Any, decision: GateDecision, candidate: str, budget: int,
                seconds: float) -> StepRecord:
        s = self._require_state()
        n = len(results) or 1
        return StepRecord(
            epoch=s.epoch, step=s.step + 1, global_step=s.global_step + 1, budget=budget,
            train_hard=sum(r.hard for r in results) / n, train_soft=sum(r.soft for r in results) / n,
            n_proposed=sum(len(p.edits) for p in patches), n_selected=len(selection.kept),
            n_applied=report.count("applied"), n_fuzzy=report.count("applied_fuzzy"),
            n_skipped=report.count("skipped"),
            n_parse_errors=sum(1 for p in patches if p.error),
            decision=decision.decision,
            candidate_hash=None if decision.decision == "skip" else skill_hash(candidate),
            candidate_score=decision.candidate, current_score=decision.current,
            best_score=decision.best, seconds=round(seconds, 3),
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
        self._prepare_new_dir(fingerprint)
        digest = self.run.save_skill(skill)
        total = steps_per_epoch(len(self.train_tasks), self.cfg.train.batch_size,
                                self.cfg.train.steps_per_epoch)
        self.state = TrainerState(
            fingerprint=fingerprint, steps_per_epoch=total, num_epochs=self.cfg.train.num_epochs,
            initial_hash=digest, current_hash=digest, best_hash=digest,
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
                f"{self.run.root}: this run directory was made with a different config; "
                "use another --out, or pass --allow-config-change to continue with this one"
            )
        self.run.event("config_changed", previous=previous, current=current)
        self.run.write_text(self.run.config_path, dump_yaml(self.resolved.redacted()))

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

    def _reflect_settings(self) -> ReflectSettings:
        g, o = self.cfg.gradient, self.cfg.optimizer
        return ReflectSettings(
            minibatch_size=g.minibatch_size, workers=g.analyst_workers,
            failure_only=g.failure_only, max_trajectory_chars=g.max_trajectory_chars,
            max_edits=max(2, o.learning_rate * 2), **self._opt_sampling(),
        )

    def _merge_settings(self) -> MergeSettings:
        g, o = self.cfg.gradient, self.cfg.optimizer
        return MergeSettings(merge_batch_size=g.merge_batch_size, workers=g.analyst_workers,
                             max_edits=max(2, o.learning_rate * 2), **self._opt_sampling())

    def _opt_sampling(self) -> dict[str, Any]:
        o = self.cfg.optimizer
        return {"max_tokens": o.max_tokens, "temperature": o.temperature}
