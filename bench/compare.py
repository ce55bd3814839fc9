"""Side-by-side comparison of skill optimizers on one config: the same splits, the same target
and optimizer models and the same target budget for every method; test scores over several
seeds with paired bootstrap intervals against the initial skill.

    python bench/compare.py CONFIG [--set k=v ...] [--seeds 3] [--methods none,initial,...]
                            [--out runs/compare] [--budget N | --budget N1,N2,...]

Methods:
  none       no skill (an empty system prompt)
  initial    the skill training would start from (env.skill_init, else the environment's own)
  oneshot    the optimizer writes a skill once from the initial skill and a few training tasks
             (their prompts and references); no rollouts, no iteration
  skillgrad  a normal training run (train.seed = the config's seed + k for seed k)
  gepa       GEPA (pip install -e ".[bench]") over skillgrad's own rollouts and scorer; the
             candidate is {"skill": text}, the feedback each rollout's reason

Budget: one counter sees every target call a method makes before the test (training and
validation rollouts alike). skillgrad runs at the config's own size (or under --budget N) and
reports what it used; the default budget of the other methods is what skillgrad used in the
same seed. --budget N1,N2,... gives each seed its own (one number per seed), so GEPA can be
given what a skillgrad run recorded elsewhere used, seed by seed. GEPA gets max_metric_calls =
budget and is stopped cleanly when the counter runs out mid-iteration (its best fully
validated candidate is kept). Test rollouts are not counted: every method is scored the same
way, by the environment's scorer on the whole test split (or evaluation.test_env_num). Skills that do not depend on a seed (none, initial) are scored once
unless --rescore-baselines.

Each method and seed works in OUT/<method>/seed<k>/ (skillgrad's run directory itself); a
finished run leaves compare_result.json there and is read back when the command runs again.
Every model call is journaled there too, so an interrupted run repeats itself for free. The
table and OUT/compare.json list, per method, the test scores (mean ± sd over seeds), the paired
bootstrap 95% interval of the mean gain against `initial` (per test task, seeds pooled), the
cost, and each adopted skill's lines that quote a training item or the scorer's feedback.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import random
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from skillgrad import prompts
from skillgrad.build import build_environment
from skillgrad.clients import build_clients
from skillgrad.config import ResolvedConfig, load_config
from skillgrad.envs.base import Environment
from skillgrad.errors import ModelError, RunStopped, SkillgradError
from skillgrad.models.accounting import BudgetExhausted
from skillgrad.models.ask_json import ask_json
from skillgrad.models.client import CallJournal, Meter, ModelClient, StageModel
from skillgrad.models.messages import ChatRequest, Completion, Message
from skillgrad.records import RolloutResult, Task
from skillgrad.rundir import RunDir, read_jsonl, write_json, write_jsonl
from skillgrad.settings import split_cap
from skillgrad.skill import skill_hash
from skillgrad.stages.hygiene import Evidence, find_quote
from skillgrad.stages.render import clip_middle
from skillgrad.stages.rollout import rollout, score
from skillgrad.state import keys_added_since
from skillgrad.trainer import Trainer

METHODS = ("none", "initial", "oneshot", "skillgrad", "gepa")
BASELINES = ("none", "initial")  # their skill does not depend on the seed
RESULT = "compare_result.json"
CALLS = "compare_calls.jsonl"  # the journal of a method's own model calls (oneshot, gepa)
TEST_CALLS = "compare_test_calls.jsonl"
TEST_ROLLOUTS = "compare_test_rollouts.jsonl"
TEST_STAGE = "compare_test"


# ----------------------------------------------------------------------------- the budget


class CompareBudgetStop(BudgetExhausted):
    """The comparison's target budget ran out (a clean stop, like any budget)."""


class RolloutBudget:
    """Counts every target call of one method's training, validation included, and refuses
    the call that would go past ``limit`` (None: count only)."""

    def __init__(self, limit: int | None, used: int = 0) -> None:
        self.limit = limit
        self.used = used
        self.by_stage: dict[str, int] = {}
        self.exhausted = False
        self._lock = threading.Lock()

    def take(self, stage: str) -> None:
        with self._lock:
            if self.limit is not None and self.used >= self.limit:
                self.exhausted = True
                raise CompareBudgetStop(
                    f"the comparison's target budget ran out ({self.limit} calls)")
            self.used += 1
            self.by_stage[stage] = self.by_stage.get(stage, 0) + 1


class CountedClient:
    """A target :class:`ModelClient` whose every call (answered by the model, the journal or
    the cache) is counted by ``budget`` first. Everything else is the wrapped client's."""

    def __init__(self, client: ModelClient, budget: RolloutBudget) -> None:
        self.client = client
        self.budget = budget

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def for_stage(self, stage: str, journal: CallJournal | None = None) -> StageModel:
        return StageModel(self, stage, journal)  # type: ignore[arg-type]  # duck-typed client

    def call(self, request: ChatRequest, *, stage: str,
             journal: CallJournal | None = None) -> Completion:
        self.budget.take(stage)
        return self.client.call(request, stage=stage, journal=journal)


def fresh_clients(base: Mapping[str, ModelClient]) -> dict[str, ModelClient]:
    """Clients over the same loaded models with the same settings and a new meter, so each
    method and seed is metered on its own (and no model is loaded twice)."""
    meter = Meter()
    return {role: ModelClient(
        c.model, c.role, max_retries=c.max_retries, retry_base_delay=c.retry_base_delay,
        meter=meter, limit=c._limit, budget=c.budget, prices=c.prices, cache=c.cache)
        for role, c in base.items()}


def usage(meter: Meter, role: str, skip: tuple[str, ...] = (TEST_STAGE,)) -> tuple[int, int]:
    """(calls, tokens) of ``role`` in ``meter``, stages ``skip`` left out."""
    calls = tokens = 0
    for stage, e in meter.stages.get(role, {}).items():
        if stage not in skip:
            calls += e.calls
            tokens += e.prompt_tokens + e.completion_tokens
    return calls, tokens


# ----------------------------------------------------------------------------- statistics


def paired_bootstrap(gains: Mapping[str, Sequence[float]], *, samples: int = 2000,
                     seed: int = 0, level: float = 0.95) -> tuple[float, float, float]:
    """The mean paired gain and its percentile bootstrap interval.

    ``gains`` maps each test task to its gains (method minus reference), one per seed. Tasks
    are resampled with replacement, each with all of its seeds, so a task's seeds stay
    together and the interval reflects how many tasks there are, not tasks × seeds."""
    tasks = [list(gains[t]) for t in sorted(gains) if gains[t]]
    if not tasks:
        return math.nan, math.nan, math.nan
    sums = [(sum(g), len(g)) for g in tasks]
    mean = sum(s for s, _ in sums) / sum(n for _, n in sums)
    rng = random.Random(seed)
    stats = []
    for _ in range(samples):
        total = count = 0.0
        for _ in sums:
            s, n = sums[rng.randrange(len(sums))]
            total += s
            count += n
        stats.append(total / count)
    stats.sort()
    lo = stats[max(0, math.floor((1 - level) / 2 * samples))]
    hi = stats[min(samples, math.ceil((1 + level) / 2 * samples)) - 1]
    return mean, lo, hi


def paired_gains(runs: Sequence[dict[str, Any]], reference: Sequence[dict[str, Any]],
                 metric: int) -> dict[str, list[float]]:
    """Per test task, the gain of each run over the reference run of the same seed (or the
    reference's only run, when it was scored once). ``metric``: 0 hard, 1 soft."""
    by_seed = {r["seed_index"]: r for r in reference}
    gains: dict[str, list[float]] = {}
    for run in runs:
        ref = by_seed.get(run["seed_index"]) or reference[0]
        theirs = ref["test"]["per_task"]
        for task_id, scores in run["test"]["per_task"].items():
            if task_id in theirs:
                gains.setdefault(task_id, []).append(scores[metric] - theirs[task_id][metric])
    return gains


def mean_sd(values: Sequence[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


# ----------------------------------------------------------------------------- hygiene


def quoted_lines(skill: str, initial: str, results: Sequence[RolloutResult],
                 tasks: Mapping[str, Task], prompts_shown: Sequence[str] = ()
                 ) -> list[dict[str, Any]]:
    """Every line of ``skill`` that ``initial`` does not have and that quotes a training item,
    a gold answer or the scorer's feedback in ``results`` (what the method was shown), or the
    instructions of skillgrad's prompts or of ``prompts_shown`` (the method's own)."""
    evidence = Evidence.of(results, tasks, system=False,  # they hold the run's many skills
                           instructions=[*prompts.fixed_texts(), *prompts_shown])
    own = set(initial.splitlines())
    found = []
    for number, line in enumerate(skill.splitlines(), 1):
        if not line.strip() or line in own:
            continue
        quote = find_quote(line, evidence, skill=initial)
        if quote is not None:
            found.append({"line_number": number, "line": line, "kind": quote.kind,
                          "task_id": quote.task_id, "quoted": quote.quoted,
                          "reason": quote.reason()})
    return found


def method_prompts(method: str) -> list[str]:
    """The fixed text of the prompts a method writes its skill from, beside skillgrad's: a
    small model copies its instructions into the skill."""
    if method == "oneshot":
        return [ONESHOT_PROMPT.replace("{skill}", "\n").replace("{examples}", "\n")]
    if method == "gepa" and importlib.util.find_spec("gepa") is not None:
        from gepa.strategies.instruction_proposal import InstructionProposalSignature

        return [str(InstructionProposalSignature.default_prompt_template)]
    return []


def new_lines(skill: str, initial: str) -> int:
    own = set(initial.splitlines())
    return sum(1 for line in skill.splitlines() if line.strip() and line not in own)


def shown_as_rollouts(tasks: Sequence[Task]) -> list[RolloutResult]:
    """Tasks shown to the optimizer without a rollout (oneshot), as hygiene's evidence."""
    return [RolloutResult(task_id=t.id, messages=(Message(role="user", content=t.prompt),),
                          answer="", hard=0.0, soft=0.0) for t in tasks]


def run_rollouts(folder: Path) -> list[RolloutResult]:
    """The training rollouts a skillgrad run showed its optimizer: every step's rollouts and
    the epoch-level comparisons' pairs."""
    rows = [row for path in sorted(folder.glob("steps/*/rollouts.jsonl"))
            for row in read_jsonl(path)]
    for path in sorted(folder.glob("epochs/*/pairs.jsonl")):
        rows += [p[side] for p in read_jsonl(path) for side in ("previous", "current")]
    return [RolloutResult.model_validate(r) for r in rows]


# ----------------------------------------------------------------------------- oneshot

ONESHOT_PROMPT = """You are writing a SKILL document: the instructions a frozen agent reads, as \
its system prompt, before every task of one kind. Below are its current skill and a few \
example tasks of that kind, each with the reference its answer is checked against.

## Current skill
<skill>
{skill}
</skill>

## Example tasks
{examples}
## Rules
- Write the complete improved skill: the procedure and the answer form that let the agent \
solve tasks like these, and new tasks of the same kind.
- State general rules. Do not copy the examples' particulars or reference answers into the \
skill: it must transfer to tasks you have not seen.
- Write instructions in the imperative, in markdown.

Reply with one JSON object: {{"document": "<the complete skill, in markdown>"}}
"""


class OneShotReply(BaseModel):
    document: str


_WRAPPER = re.compile(r"^\s*(?:<skill>|```[a-z]*)\s*\n(.*?)\n\s*(?:</skill>|```)\s*$", re.DOTALL)


def unwrap(document: str) -> str:
    """The document without the ``<skill>`` tags or code fence a small model may copy around
    it from the prompt."""
    found = _WRAPPER.match(document)
    return (found.group(1) if found else document).strip()


def oneshot_prompt(skill: str, tasks: Sequence[Task], max_chars: int) -> str:
    examples = "".join(
        f"### Example {n}\n<task>\n{clip_middle(t.prompt, max_chars)}\n</task>\n"
        f"Reference: {clip_middle(json.dumps(t.reference, ensure_ascii=False), 500)}\n\n"
        for n, t in enumerate(tasks, 1))
    return ONESHOT_PROMPT.format(skill=skill.strip(), examples=examples)


# ----------------------------------------------------------------------------- gepa


class _GepaHalt(BaseException):
    """Carries a clean stop or a model failure out of GEPA, which catches ``Exception`` in its
    loop and in its proposer (and would go on as if nothing had happened)."""

    def __init__(self, cause: SkillgradError) -> None:
        super().__init__(str(cause))
        self.cause = cause


class SkillAdapter:
    """A ``gepa.GEPAAdapter`` over a skillgrad environment: the candidate is ``{"skill":
    text}``, a rollout is ``env.rollout(task, skill, target)``, its score the config's gate
    metric and its feedback the scorer's reason."""

    propose_new_texts = None

    def __init__(self, env: Environment, target: Any, journal: CallJournal | None,
                 metric: Callable[[RolloutResult], float], train_ids: set[str], *,
                 workers: int = 1, max_chars: int = 4000) -> None:
        self.env = env
        self.target = target
        self.journal = journal
        self.metric = metric
        self.train_ids = train_ids
        self.workers = workers
        self.max_chars = max_chars
        self.train_results: list[RolloutResult] = []  # what reflection may have been shown

    def evaluate(self, batch: list[Task], candidate: dict[str, str],
                 capture_traces: bool = False) -> Any:
        from gepa import EvaluationBatch

        train = all(t.id in self.train_ids for t in batch)
        model = self.target.for_stage("gepa_train" if train else "gepa_val", self.journal)
        try:
            results = rollout(self.env, batch, candidate["skill"], model, workers=self.workers)
        except (ModelError, RunStopped) as exc:
            raise _GepaHalt(exc) from exc
        if train:
            self.train_results += results
        return EvaluationBatch(outputs=[r.answer for r in results],
                               scores=[self.metric(r) for r in results],
                               trajectories=list(results) if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        records = [self._record(r) for r in eval_batch.trajectories or []]
        return {name: records for name in components_to_update}

    def _record(self, r: RolloutResult) -> dict[str, Any]:
        shown = [m for m in r.messages if m.role != "system"]
        first = shown[0].text() if shown else ""
        rest = "\n".join(f"[{m.role}] {m.text()}" for m in shown[1:]) or r.answer
        verdict = "solved" if r.success else "not solved"
        return {"Inputs": clip_middle(first, self.max_chars),
                "Generated Outputs": clip_middle(rest, self.max_chars),
                "Feedback": f"{verdict} (hard {r.hard:.2f}, soft {r.soft:.2f})"
                            + (f": {r.reason}" if r.reason else "")}


class _StateCapture:
    """A GEPA callback that keeps the engine's state, to read the best candidate from when
    the budget stops GEPA mid-iteration."""

    def __init__(self) -> None:
        self.state: Any = None

    def on_iteration_start(self, event: Any) -> None:
        self.state = event["state"]


class _FileLogger:
    def __init__(self, path: Path) -> None:
        self.path = path

    def log(self, message: str) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(f"{message}\n")


def halting(lm: Callable[[Any], str]) -> Callable[[Any], str]:
    """``lm`` with a model failure or a clean stop carried out of GEPA (see _GepaHalt)."""

    def call(prompt: Any) -> str:
        try:
            return lm(prompt)
        except (ModelError, RunStopped) as exc:
            raise _GepaHalt(exc) from exc

    return call


def reflection_lm(model: Any, max_tokens: int, temperature: float) -> Callable[[Any], str]:
    """GEPA's reflection LM (``str -> str``) over a skillgrad optimizer model."""

    def ask(prompt: Any) -> str:
        if isinstance(prompt, str):
            messages: tuple[Message, ...] = (Message(role="user", content=prompt),)
        else:  # GEPA may pass chat messages
            messages = tuple(Message(role=m["role"], content=m["content"]) for m in prompt)
        request = ChatRequest(messages=messages, max_tokens=max_tokens,
                              temperature=temperature, kind="gepa_reflect")
        return str(model.complete(request).text)

    return ask


# ----------------------------------------------------------------------------- the harness


@dataclass
class Harness:
    config: Path
    overrides: list[str]
    out: Path
    oneshot_examples: int = 4
    gepa_minibatch: int = 3
    reflection: Callable[[Any], str] | None = None  # GEPA's reflection LM (tests: scripted)
    base: ResolvedConfig = field(init=False)
    env: Environment = field(init=False)
    clients: dict[str, ModelClient] = field(init=False)

    def __post_init__(self) -> None:
        self.base = load_config(self.config, self.overrides)
        self.env = build_environment(self.base)
        self.clients = build_clients(self.base)
        self.train_tasks = self._split("train")
        self.val_tasks = self._split("val")
        self.test_tasks = self._split("test")
        self.train_by_id = {t.id: t for t in self.train_tasks}
        self.initial = self.env.initial_skill()

    def _split(self, split: str) -> list[Task]:
        tasks = self.env.tasks(split)  # type: ignore[arg-type]
        cap = split_cap(self.base.config, split)
        return tasks[:cap] if cap else tasks

    def seed(self, k: int) -> int:
        return self.base.config.train.seed + k

    def folder(self, method: str, k: int) -> Path:
        return self.out / method / f"seed{k}"

    # ------------------------------------------------------------------ one run
    def run(self, method: str, k: int, budget: int | None) -> dict[str, Any]:
        """The result of ``method`` in seed ``k``: read back when it is done, else run."""
        folder = self.folder(method, k)
        done = folder / RESULT
        if done.exists():
            result: dict[str, Any] = json.loads(done.read_text(encoding="utf-8"))
            if result.get("budget") != budget:
                raise SystemExit(f"{folder} ran with budget {result.get('budget')}, this "
                                 f"comparison's is {budget}: use another --out or remove it")
            result["read_back"] = True
            return result
        folder.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        trained = getattr(self, f"_train_{method}")(k, folder, budget)
        seconds = time.monotonic() - started
        skill = trained.pop("skill")
        shown = trained.pop("shown", [])
        result = {"method": method, "seed_index": k, "seed": self.seed(k), "budget": budget,
                  "skill": skill, "skill_hash": skill_hash(skill),
                  "stopped": trained.pop("stopped", None),
                  "train": {**trained.pop("usage"), "seconds": round(seconds, 3)},
                  "test": self.score_test(skill, folder),
                  "new_lines": new_lines(skill, self.initial) if method != "none" else 0,
                  "quotes": quoted_lines(skill, self.initial, shown, self.train_by_id,
                                         method_prompts(method))
                  if method != "none" else [],
                  **trained}
        (folder / "compare_skill.md").write_text(skill, encoding="utf-8")
        write_json(done, result)
        return result

    def score_test(self, skill: str, folder: Path) -> dict[str, Any]:
        """Score ``skill`` on the test split with the environment's scorer (not counted)."""
        client = fresh_clients(self.clients)["target"]
        journal = CallJournal(folder / TEST_CALLS)
        started = time.monotonic()
        results = rollout(self.env, self.test_tasks, skill,
                          client.for_stage(TEST_STAGE, journal),
                          workers=self.base.config.execution.rollout_workers)
        write_jsonl(folder / TEST_ROLLOUTS, results)
        s = score(results, "test", skill_hash(skill))
        calls, tokens = usage(client.meter, "target", skip=())
        return {"n": s.n, "hard": s.hard, "soft": s.soft,
                "per_task": {t: list(v) for t, v in s.per_task.items()},
                "target_calls": calls, "target_tokens": tokens,
                "seconds": round(time.monotonic() - started, 3)}

    @staticmethod
    def _usage(meter: Meter, target_calls: int | None = None) -> dict[str, int]:
        t_calls, t_tokens = usage(meter, "target")
        o_calls, o_tokens = usage(meter, "optimizer")
        return {"target_calls": t_calls if target_calls is None else target_calls,
                "target_tokens": t_tokens, "optimizer_calls": o_calls,
                "optimizer_tokens": o_tokens}

    # ------------------------------------------------------------------ the methods
    def _train_none(self, k: int, folder: Path, budget: int | None) -> dict[str, Any]:
        return {"skill": "", "usage": self._usage(Meter())}

    def _train_initial(self, k: int, folder: Path, budget: int | None) -> dict[str, Any]:
        return {"skill": self.initial, "usage": self._usage(Meter())}

    def _train_oneshot(self, k: int, folder: Path, budget: int | None) -> dict[str, Any]:
        cfg = self.base.config
        rng = random.Random(f"oneshot:{self.seed(k)}")
        shown = rng.sample(self.train_tasks, min(self.oneshot_examples, len(self.train_tasks)))
        clients = fresh_clients(self.clients)
        journal = CallJournal(folder / CALLS)
        prompt = oneshot_prompt(self.initial, shown, cfg.gradient.max_trajectory_chars)
        (folder / "oneshot_prompt.md").write_text(prompt, encoding="utf-8")
        o = cfg.optimizer
        reply = ask_json(clients["optimizer"].for_stage("oneshot", journal),
                         [Message(role="user", content=prompt)], OneShotReply, kind="oneshot",
                         max_tokens=o.rewrite_max_tokens or o.max_tokens,
                         temperature=o.temperature)
        document = unwrap(reply.value.document) if reply.value is not None else ""
        error = reply.error or (None if document else "the reply's document is empty")
        return {"skill": document + "\n" if document else self.initial,
                "usage": self._usage(clients["optimizer"].meter),
                "shown": shown_as_rollouts(shown), "shown_tasks": [t.id for t in shown],
                "error": error}

    def _train_skillgrad(self, k: int, folder: Path, budget: int | None) -> dict[str, Any]:
        resolved = load_config(self.config, [*self.overrides, f"train.seed={self.seed(k)}",
                                             "evaluation.eval_test=false"])
        clients = fresh_clients(self.clients)
        run = RunDir(folder)
        checkpoint = run.load_checkpoint_data() or {}
        before = Meter.from_json(checkpoint.get("meter") or {}).totals("target").calls
        counter = RolloutBudget(budget, used=before)
        trainer = Trainer(resolved, self.env, CountedClient(clients["target"], counter),  # type: ignore[arg-type]
                          clients["optimizer"], run)
        stopped = None
        try:
            summary = trainer.fit()
            calls = int(summary["models"].get("target", {}).get("calls", 0))
        except CompareBudgetStop as exc:
            stopped, calls = str(exc), counter.used
        best = run.best_skill_path
        skill = best.read_text(encoding="utf-8") if best.exists() else self.initial
        return {"skill": skill, "stopped": stopped, "counted": counter.used,
                "usage": self._usage(clients["target"].meter, calls),
                "shown": run_rollouts(folder)}

    def _train_gepa(self, k: int, folder: Path, budget: int | None) -> dict[str, Any]:
        import gepa
        from gepa.core.result import GEPAResult

        if budget is None:
            raise SystemExit("gepa needs a budget: give --budget N or run skillgrad first")
        cfg = self.base.config
        clients = fresh_clients(self.clients)
        journal = CallJournal(folder / CALLS)
        counter = RolloutBudget(budget)
        ev = cfg.evaluation

        def metric(r: RolloutResult) -> float:
            if ev.gate_metric == "mixed":
                return (1 - ev.gate_mixed_weight) * r.hard + ev.gate_mixed_weight * r.soft
            return r.hard if ev.gate_metric == "hard" else r.soft

        adapter = SkillAdapter(self.env, CountedClient(clients["target"], counter), journal,
                               metric, set(self.train_by_id),
                               workers=cfg.execution.rollout_workers,
                               max_chars=cfg.gradient.max_trajectory_chars)
        o = cfg.optimizer
        lm = self.reflection or reflection_lm(clients["optimizer"].for_stage("gepa", journal),
                                              o.rewrite_max_tokens or o.max_tokens, o.temperature)
        capture = _StateCapture()
        log = folder / "gepa_log.txt"
        log.write_text("", encoding="utf-8")
        stopped = None
        result: Any = None
        optimize: Any = gepa.optimize  # duck-typed adapter, callback and reflection LM
        try:
            result = optimize(
                seed_candidate={"skill": self.initial}, trainset=self.train_tasks,
                valset=self.val_tasks, adapter=adapter, reflection_lm=halting(lm),
                max_metric_calls=budget, reflection_minibatch_size=self.gepa_minibatch,
                seed=self.seed(k), logger=_FileLogger(log), callbacks=[capture],
                track_best_outputs=False, display_progress_bar=False)
        except _GepaHalt as halt:
            if not isinstance(halt.cause, CompareBudgetStop):
                raise halt.cause from None
            stopped = str(halt.cause)
            result = (GEPAResult.from_state(capture.state, seed=self.seed(k))
                      if capture.state is not None else None)
        info: dict[str, Any] = {"candidates": 1}
        if result is None:  # stopped while scoring the seed candidate
            skill = self.initial
        else:
            skill = result.candidates[result.best_idx]["skill"]
            info = {"candidates": len(result.candidates), "best_idx": result.best_idx,
                    "val_scores": list(result.val_aggregate_scores),
                    "parents": [list(p) for p in result.parents],
                    "metric_calls": result.total_metric_calls}
            write_json(folder / "gepa_candidates.json",
                       [c["skill"] for c in result.candidates])
        write_jsonl(folder / "gepa_train_rollouts.jsonl", adapter.train_results)
        return {"skill": skill, "stopped": stopped, "counted": counter.used,
                "usage": self._usage(clients["target"].meter, counter.used),
                "shown": adapter.train_results, "gepa": info}


# ----------------------------------------------------------------------------- report


def summarise(method: str, runs: list[dict[str, Any]], reference: list[dict[str, Any]] | None,
              samples: int) -> dict[str, Any]:
    hard = mean_sd([r["test"]["hard"] for r in runs])
    soft = mean_sd([r["test"]["soft"] for r in runs])
    out: dict[str, Any] = {
        "runs": len(runs), "test_n": runs[0]["test"]["n"],
        "test_hard": {"mean": hard[0], "sd": hard[1]},
        "test_soft": {"mean": soft[0], "sd": soft[1]},
    }
    if reference:
        for i, name in enumerate(("hard", "soft")):
            mean, lo, hi = paired_bootstrap(paired_gains(runs, reference, i), samples=samples)
            out[f"gain_{name}"] = {"mean": mean, "lo": lo, "hi": hi, "level": 0.95}
    for key in ("target_calls", "target_tokens", "optimizer_calls", "optimizer_tokens",
                "seconds"):
        out[key] = statistics.fmean(r["train"][key] for r in runs)
    out["quoting_lines"] = sum(len(r["quotes"]) for r in runs)
    out["new_lines"] = sum(r["new_lines"] for r in runs)
    out["stopped_by_budget"] = sum(1 for r in runs if r.get("stopped"))
    return out


def _pm(s: dict[str, float]) -> str:
    return f"{s['mean']:.3f} ± {s['sd']:.3f}"


def _gain(g: dict[str, float] | None) -> str:
    if g is None:
        return "—"
    return f"{g['mean']:+.3f} [{g['lo']:+.3f}, {g['hi']:+.3f}]"


def table(title: str, summaries: dict[str, dict[str, Any]]) -> Table:
    t = Table(title=title)
    for col in ("method", "runs", "test hard", "test soft", "Δ hard vs initial [95%]",
                "Δ soft vs initial [95%]", "target calls", "target tokens", "optimizer calls",
                "optimizer tokens", "quoting / new lines", "train s"):
        t.add_column(col, justify="left" if col == "method" else "right")
    for method, s in summaries.items():
        ref = method == "initial"
        t.add_row(method, str(s["runs"]), _pm(s["test_hard"]), _pm(s["test_soft"]),
                  "(reference)" if ref else _gain(s.get("gain_hard")),
                  "(reference)" if ref else _gain(s.get("gain_soft")),
                  f"{s['target_calls']:.0f}", f"{s['target_tokens']:.0f}",
                  f"{s['optimizer_calls']:.0f}", f"{s['optimizer_tokens']:.0f}",
                  f"{s['quoting_lines']} / {s['new_lines']}", f"{s['seconds']:.1f}")
    return t


def _gepa_available() -> bool:
    try:
        import gepa  # noqa: F401
    except ImportError:
        return False
    return True


def _predates(out: Path, resolved: ResolvedConfig, previous: dict[str, Any]) -> bool:
    """Whether the comparison in ``out`` is of this config as an older skillgrad wrote it: it
    lacks only keys this config leaves at their defaults (read from a training run of it)."""
    runs = sorted((out / "skillgrad").glob("seed*/config.yaml"))
    if not runs:
        return False
    added = keys_added_since(RunDir(runs[0].parent), resolved)
    return bool(added) and previous.get("fingerprint") == resolved.fingerprint(without=added)


def compare(config: Path, *, overrides: Sequence[str] = (), seeds: int = 3,
            methods: Sequence[str] = METHODS, out: Path = Path("runs/compare"),
            budget: int | Sequence[int] | None = None, rescore_baselines: bool = False,
            oneshot_examples: int = 4, gepa_minibatch: int = 3, bootstrap_samples: int = 2000,
            reflection: Callable[[Any], str] | None = None,
            console: Console | None = None) -> dict[str, Any]:
    """Run (or read back) every method and seed and write OUT/compare.json. ``budget`` is one
    number for every seed, or one per seed."""
    console = console or Console(width=200)
    given = seed_budgets(budget, seeds)
    out.mkdir(parents=True, exist_ok=True)
    h = Harness(config, list(overrides), out, oneshot_examples, gepa_minibatch, reflection)
    marker = out / "compare_config.json"
    fingerprint = h.base.fingerprint()
    if marker.exists():
        previous = json.loads(marker.read_text(encoding="utf-8"))
        if previous.get("fingerprint") != fingerprint and not _predates(out, h.base,
                                                                         previous):
            raise SystemExit(f"{out} holds a comparison of another config "
                             f"({previous.get('config')}): use another --out")
        write_json(marker, {**previous, "fingerprint": fingerprint})
    else:
        write_json(marker, {"fingerprint": fingerprint, "config": str(config),
                            "overrides": list(overrides)})
    order = [m for m in METHODS if m in methods]
    runs: dict[str, list[dict[str, Any]]] = {}
    budgets: dict[int, int | None] = {}
    for method in order:
        ks = [0] if method in BASELINES and not rescore_baselines else range(seeds)
        for k in ks:
            # none, initial and oneshot make no target call before the test
            limit = given[k] if method == "skillgrad" else None
            if method == "gepa":
                limit = given[k] if given[k] is not None else _skillgrad_used(h, runs, k)
            result = h.run(method, k, limit)
            if method == "skillgrad":
                budgets[k] = given[k] if given[k] is not None else result["train"]["target_calls"]
            runs.setdefault(method, []).append(result)
            used = result["train"]["target_calls"]
            note = " (read back)" if result.get("read_back") else ""
            stop = f"; stopped: {result['stopped']}" if result.get("stopped") else ""
            console.print(
                f"{method} seed{k}: target calls {used}"
                + (f" of {limit}" if limit is not None else "")
                + f", test hard {result['test']['hard']:.3f} soft {result['test']['soft']:.3f}"
                + f"{stop}{note}")
    reference = runs.get("initial")
    summaries = {m: summarise(m, rs, reference if m != "initial" else None, bootstrap_samples)
                 for m, rs in runs.items()}
    title = (f"compare: {config} · {len(h.test_tasks)} test tasks · seeds {seeds} · "
             f"budget {_budget_label(budget)}")
    console.print(table(title, summaries))
    for method, rs in runs.items():
        for r in rs:
            if r["quotes"]:
                console.print(f"{method} seed{r['seed_index']}: {len(r['quotes'])} of "
                              f"{r['new_lines']} new lines quote what training showed:")
                for q in r["quotes"]:
                    console.print(f"  line {q['line_number']}: {q['line'].strip()!r}\n"
                                  f"    {q['reason']}", markup=False, highlight=False)
    report = {
        "config": str(config), "overrides": list(overrides), "fingerprint": fingerprint,
        "seeds": seeds, "methods": order,
        "budget": budget if budget is None or isinstance(budget, int) else list(budget),
        "budget_per_seed": {str(k): v for k, v in budgets.items()},
        "splits": {"train": len(h.train_tasks), "val": len(h.val_tasks),
                   "test": len(h.test_tasks)},
        "summary": summaries,
        "runs": {m: [{k: v for k, v in r.items() if k != "read_back"} for r in rs]
                 for m, rs in runs.items()},
    }
    write_json(out / "compare.json", report)
    return report


def seed_budgets(budget: int | Sequence[int] | None, seeds: int) -> list[int | None]:
    """Each seed's target budget: None (what skillgrad uses), one number for all, or one per
    seed."""
    if budget is None or isinstance(budget, int):
        return [budget] * seeds
    if len(budget) != seeds:
        raise SkillgradError(f"--budget gives {len(budget)} numbers for {seeds} seeds: give one "
                             "number, or one per seed")
    return list(budget)


def _budget_label(budget: int | Sequence[int] | None) -> str:
    if budget is None:
        return "skillgrad run"
    return str(budget) if isinstance(budget, int) else "/".join(map(str, budget))


def _parse_budget(text: str) -> int | list[int]:
    """``--budget``: N, or N1,N2,... (one per seed); every number at least 1."""
    try:
        numbers = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a number or a comma-separated list of numbers") from None
    if any(n < 1 for n in numbers):
        raise argparse.ArgumentTypeError(f"{text!r}: every budget must be at least 1")
    return numbers[0] if len(numbers) == 1 else numbers


def _skillgrad_used(h: Harness, runs: dict[str, list[dict[str, Any]]], k: int) -> int | None:
    """What skillgrad used in seed ``k``: this comparison's run, or one already on disk."""
    for r in runs.get("skillgrad", []):
        if r["seed_index"] == k:
            return int(r["train"]["target_calls"])
    done = h.folder("skillgrad", k) / RESULT
    if done.exists():
        return int(json.loads(done.read_text(encoding="utf-8"))["train"]["target_calls"])
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for every method")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--methods", default="",
                        help=f"comma-separated, from {', '.join(METHODS)} (default: all; gepa "
                        "when installed)")
    parser.add_argument("--out", type=Path, default=Path("runs/compare"))
    parser.add_argument("--budget", type=_parse_budget, default=None,
                        help="target calls per method and seed, validation included: N, or "
                        "N1,N2,... one per seed (default: what the skillgrad run uses)")
    parser.add_argument("--rescore-baselines", action="store_true",
                        help="score none and initial in every seed (a sampled target)")
    parser.add_argument("--oneshot-examples", type=int, default=4)
    parser.add_argument("--gepa-minibatch", type=int, default=3)
    parser.add_argument("--bootstrap-samples", type=int, default=2000)
    args = parser.parse_args(argv)
    methods = [m for m in args.methods.split(",") if m]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown method {unknown[0]!r} (allowed: {', '.join(METHODS)})")
    if not methods:
        methods = [m for m in METHODS if m != "gepa" or _gepa_available()]
    if "gepa" in methods and not _gepa_available():
        parser.error('gepa is not installed: pip install -e ".[bench]"')
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    try:
        compare(args.config, overrides=args.set, seeds=args.seeds, methods=methods,
                out=args.out, budget=args.budget, rescore_baselines=args.rescore_baselines,
                oneshot_examples=args.oneshot_examples, gepa_minibatch=args.gepa_minibatch,
                bootstrap_samples=args.bootstrap_samples)
    except RunStopped as exc:  # a config budget, or calls waiting for handoff answers
        print(f"stopped: {exc}; run the same command again to continue", file=sys.stderr)
        return 3
    except SkillgradError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
