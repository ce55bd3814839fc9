"""Configuration: YAML files with ``_base_`` inheritance, dotted overrides, strict validation.

Defaults live here and only here (the reference system's defaults: 4 epochs, batch 40,
minibatch 8, merge batch 8, edit budget 4 -> 2 cosine, hard gate). YAML and ``--set a.b=v``
only override them. Every key is validated before any model is called: an unknown key or a bad
value stops the run with one line that names the key, the file it came from and what is allowed.

(Over the house limit of ~400 lines: every section model, and so every default, is kept in
this one file on purpose, next to the validation that names a key's file in its errors.)
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import to_jsonable_python

from skillgrad.dotted import flatten as _flatten
from skillgrad.envs.base import EnvCommon, EnvOptions
from skillgrad.errors import ConfigError
from skillgrad.models.accounting import Budget, Prices
from skillgrad.redact import credentials_in_text, no_url_credential, redact, redact_at
from skillgrad.skill import read_capped
from skillgrad.skillopt import CompatNote, translate
from skillgrad.yamlfile import DuplicateKeyError, load_yaml_lines, load_yaml_text

# ----------------------------------------------------------------------------- sections


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TrainSection(Section):
    num_epochs: int = Field(4, ge=1)
    batch_size: int = Field(40, ge=1)
    steps_per_epoch: int | None = Field(None, ge=1, description="default: ceil(train / batch)")
    train_size: int | None = Field(None, ge=1, description="use only the first N train tasks "
                                   "(0 or null: all)")
    seed: int = 42
    accumulation: int = Field(
        1, ge=1, description="rollout + reflect batches gathered before one aggregate and update"
    )

    _zero_is_all = field_validator("train_size", mode="before")(lambda v: None if v == 0 else v)


class GradientSection(Section):
    minibatch_size: int = Field(8, ge=1)
    merge_batch_size: int = Field(8, ge=2)
    analyst_workers: int = Field(4, ge=1)
    failure_only: bool = False
    max_trajectory_chars: int = Field(4000, ge=200, description="per trajectory shown")
    max_edits_per_call: int | None = Field(
        None, ge=1, description="most edits one analyst or merge call may propose (default: "
        "twice optimizer.learning_rate, at least 2)")
    proposals: int = Field(
        1, ge=1, le=8, description="candidates made per step, each from its own sampled "
        "reflection; with more than one, each is rolled out on the step's training tasks and "
        "the best that beats the current skill there goes to the gate; a step where none is a "
        "new skill samples as many once more, hotter (default 1; 3 with a small local "
        "optimizer)")
    line_ablations: int = Field(
        0, ge=0, le=8, description="also screen candidates that each delete one instruction "
        "(a paragraph or list item, wrapped lines included) of the current skill (the latest "
        "first, up to this many a step)")
    skill_ablation: bool = Field(
        False, description="also screen, each step, no skill at all (a package keeps its "
        "files and headings, without their instructions): a step can find that the skill as a "
        "whole hurts, which no deletion of one instruction shows")
    tie_break: int = Field(
        0, ge=0, le=8, description="screened candidates that tie the current skill on the "
        "step's tasks (up to this many, line ablations included) get a second look: they and "
        "the current skill are rolled out on as many other training tasks, and one that is "
        "then ahead goes to the gate (0: ties are not looked at again)")
    shorter_on_tie: bool = Field(
        False, description="when no screened candidate is ahead of the current skill, the "
        "shortest one that only deletes (a line or skill ablation) and tied it, on the second "
        "look too, goes to the gate: at equal training scores the shorter skill is tried, and "
        "the selection split decides")
    drop_riders: bool = Field(
        False, description="when the screen chooses a candidate that adds two rules or more, "
        "or a rule of several sentences, each rule and sentence is left out in turn on the "
        "step's tasks, and one the rest scores as well without is dropped before the gate, "
        "and reported (at most one rollout of the step's tasks per rule or sentence and round)")
    failure_judge: bool = Field(
        False, description="before reflection, the optimizer reviews each failed episode "
        "without its expected result or score and names how it went wrong (it repeated "
        "itself, answered before acting, broke the protocol, ...), quoting the agent; the "
        "analysts see each mode and how many episodes failed each way (at most one optimizer "
        "call per failure: none where the episode's counts establish the mode)")
    proposal_form: Literal["edits", "rules"] = Field(
        "edits", description="what failure analysts write: edits with anchors, or plain rules "
        "from each failed reply set beside its expected answer, appended as bullets (default "
        "edits; rules with a small local optimizer, where the update mode allows them)")


class OptimizerSection(Section):
    learning_rate: int = Field(4, ge=1, description="edit budget at the first step")
    min_learning_rate: int = Field(2, ge=0, description="edit budget at the last step")
    lr_scheduler: Literal["constant", "linear", "cosine"] = "cosine"
    lr_control_mode: Literal["fixed", "autonomous", "none"] = Field(
        "fixed", description="fixed: the schedule's budget; autonomous: the optimizer decides "
        "how many ranked edits to apply, up to lr_ceiling; none: apply every merged edit")
    lr_ceiling: int | None = Field(None, ge=1, description="autonomous: most edits per step "
                                   "(default: learning_rate)")
    skill_update_mode: Literal["patch", "rewrite_from_suggestions", "full_rewrite_minibatch"] = (
        "patch")
    max_tokens: int = Field(2048, ge=64, description="completion limit of optimizer calls")
    rewrite_max_tokens: int | None = Field(
        None, ge=64, description="completion limit of whole-document rewrites (default: "
        "max_tokens)")
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    fuzzy_threshold: float = Field(0.82, gt=0.0, le=1.0)
    use_rejected_buffer: bool = Field(True, description="show edits the gate rejected this epoch "
                                      "to later optimizer calls")
    max_skill_tokens: int | None = Field(
        None, ge=16, description="cap on the skill's estimated tokens; a bigger candidate is "
        "refused before the gate")
    use_slow_update: bool = False
    slow_update_samples: int = Field(8, ge=1, description="training tasks compared per epoch")
    longitudinal_pair_policy: Literal["mixed", "changed", "unchanged"] = "mixed"
    use_meta_skill: bool = False
    use_skill_aware_reflection: bool = False
    skill_aware_appendix_source: Literal["both", "failure_only"] = "both"
    skill_aware_consolidate_threshold: int = Field(
        8, ge=0, description="reminders in the appendix before one call consolidates them "
        "(0: never)")
    train_description: bool = Field(
        True, description="an agent target that loaded the skill on fewer than half of a "
        "step's tasks: one optimizer call rewrites the description in the skill's front matter "
        "(when the agent loads it), judged by the gate with the step's edits")
    max_unusable_steps: int | None = Field(
        3, ge=1, description="stop the run (resumable) after this many steps in a row in which "
        "no analyst reply could be used (every one failed to parse); null: never stop")

    @model_validator(mode="after")
    def _consistent(self) -> OptimizerSection:
        if self.min_learning_rate > self.learning_rate:
            raise ValueError(
                f"min_learning_rate ({self.min_learning_rate}) must not exceed "
                f"learning_rate ({self.learning_rate})"
            )
        if self.skill_update_mode == "full_rewrite_minibatch":
            if self.lr_control_mode != "fixed":
                raise ValueError("lr_control_mode applies to the patch and "
                                 "rewrite_from_suggestions modes; full_rewrite_minibatch "
                                 "proposes whole documents (set lr_control_mode: fixed)")
            if self.use_skill_aware_reflection:
                raise ValueError("use_skill_aware_reflection works with skill_update_mode "
                                 "patch or rewrite_from_suggestions, not full_rewrite_minibatch")
        if self.lr_ceiling is not None and self.lr_control_mode != "autonomous":
            raise ValueError("lr_ceiling is only used with lr_control_mode: autonomous")
        return self

    @property
    def ceiling(self) -> int:
        return self.lr_ceiling if self.lr_ceiling is not None else self.learning_rate


class EvaluationSection(Section):
    use_gate: bool = True
    gate_metric: Literal["hard", "soft", "mixed"] = "hard"
    gate_mixed_weight: float = Field(0.5, ge=0.0, le=1.0)
    gate_test: Literal["strict", "sign", "bootstrap"] = Field(
        "bootstrap", description="bootstrap or sign: the honest gate (the paired per-task "
        "improvement must pass this test); strict: any higher mean is accepted (SkillOpt's gate)")
    gate_alpha: float = Field(0.05, gt=0.0, lt=1.0, description="significance level of gate_test")
    gate_min_margin: float | None = Field(
        None, gt=0.0, description="accept when the mean improvement reaches this margin "
        "(alone, or as an alternative to gate_test)")
    gate_bootstrap_samples: int = Field(2000, ge=100)
    gate_no_regression: bool = Field(
        False, description="also reject a candidate that scores lower than the current skill "
        "on any selection task")
    gate_second_look: int = Field(
        0, ge=0, le=512, description="a candidate gate_test finds ahead on selection but not "
        "significantly (p above gate_alpha, at most gate_second_look_below) is scored, with the "
        "current skill, on this many training tasks no analyst of the run has seen yet; both "
        "sets together then decide, at the level that adds at most gate_second_look_alpha "
        "false accepts (0: no second look)")
    gate_second_look_below: float = Field(
        0.25, gt=0.0, lt=1.0, description="the largest selection p-value that gets a second look")
    gate_second_look_alpha: float = Field(
        0.01, gt=0.0, lt=1.0, description="what the second look may add to the chance that a "
        "candidate with no real gain is accepted (a normal approximation sets the pooled level)")
    density_bonus_weight: float = Field(
        0.0, ge=0.0, description="gate bonus per unit share of directive words (MUST, ALWAYS, "
        "NEVER, VERIFY, ...) outside protected blocks; 0 = off")
    sel_env_num: int | None = Field(None, ge=1, description="cap on selection tasks (0 or "
                                    "null: all)")
    test_env_num: int | None = Field(None, ge=1, description="cap on test tasks (0 or null: all)")
    eval_test: bool = True

    _zero_is_all = field_validator("sel_env_num", "test_env_num", mode="before")(
        lambda v: None if v == 0 else v)

    @model_validator(mode="after")
    def _honest_needs_gate(self) -> EvaluationSection:
        # The default test is no choice of the user's: only one set explicitly contradicts it.
        chosen = "gate_test" in self.model_fields_set and self.gate_test != "strict"
        if not self.use_gate and (chosen or self.gate_min_margin is not None
                                  or self.gate_no_regression):
            raise ValueError("gate_test, gate_min_margin and gate_no_regression need "
                             "use_gate: true")
        if self.gate_second_look:
            if not self.use_gate or self.gate_test == "strict":
                raise ValueError("gate_second_look needs use_gate: true and gate_test sign or "
                                 f"bootstrap (it has a p-value to look at again), not "
                                 f"{'use_gate: false' if not self.use_gate else 'strict'}")
            if self.gate_second_look_below <= self.gate_alpha:
                raise ValueError(f"gate_second_look_below ({self.gate_second_look_below:g}) "
                                 f"must be above gate_alpha ({self.gate_alpha:g}): a p-value at "
                                 "most gate_alpha is accepted without a second look")
        return self


class RoleSection(BaseModel):
    """One model role. ``backend`` picks the implementation; its own keys sit beside it."""

    model_config = ConfigDict(extra="allow", frozen=True)

    backend: str = "embedded"
    concurrency: int = Field(1, ge=1, description="parallel calls to this endpoint")
    max_retries: int = Field(4, ge=0)
    retry_base_delay: float = Field(1.0, ge=0.0)
    budget: Budget = Budget()
    prices: Prices | None = Field(None, description="per million tokens; enables cost metering")
    cache: bool = Field(False, description="answer repeated requests from the response cache")
    cache_dir: Path | None = Field(None, description="default: <skillgrad home>/responses")

    @model_validator(mode="after")
    def _cost_needs_prices(self) -> RoleSection:
        if self.budget.cost is not None and self.prices is None:
            raise ValueError("budget.cost needs prices (prices: {prompt: ..., completion: ...})")
        return self


class ModelSection(Section):
    """Without a role section the embedded local model serves that role."""

    target: RoleSection = RoleSection()
    optimizer: RoleSection = RoleSection()


class ExecutionSection(Section):
    """Where and how many rollouts run at once. Resume-safe: a run may continue under another
    backend, and its results do not change (every model call goes through this process's
    client layer, wherever the model itself runs)."""

    rollout_workers: int = Field(1, ge=1, description="rollouts in flight at once")
    backend: Literal["local", "ray"] = Field(
        "local", description="local: threads of this process; ray: Ray actors (the ray extra)")
    ray_address: str | None = Field(
        None, description="the cluster to join (auto, ray://host:10001, host:6379); default: a "
        "local cluster started for the run")
    ray_workers: int | None = Field(
        None, ge=1, description="Ray actors, each holding the environment; default: "
        "rollout_workers")
    ray_cpus_per_worker: float = Field(1.0, gt=0, description="CPUs each actor reserves")
    ray_start_timeout: float = Field(120.0, gt=0, description="seconds for the actors to start")
    ray_target: Literal["driver", "workers"] = Field(
        "driver", description="where the target model runs: in this process, or loaded once "
        "in each Ray worker (an embedded model, an agent CLI), its calls still journaled, "
        "metered and budgeted here")
    ray_runtime_env: dict[str, Any] = Field(
        default_factory=dict, description="Ray's runtime_env for the job (pip, working_dir, "
        "py_modules, ...; not env_vars)")

    @field_validator("ray_address")
    @classmethod
    def _no_credentials(cls, value: str | None) -> str | None:
        return no_url_credential(value, "give it to Ray through its own environment "
                                        "variables instead")

    @model_validator(mode="after")
    def _target_on_workers_needs_ray(self) -> ExecutionSection:
        if self.ray_target == "workers" and self.backend != "ray":
            raise ValueError("ray_target: workers needs backend: ray")
        return self

    @field_validator("ray_runtime_env")
    @classmethod
    def _no_env_vars(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "env_vars" in value:
            raise ValueError("env_vars is not allowed here (the run's config is written to its "
                             "run directory); set the variables on the cluster's nodes")
        return value


class EnvSection(EnvCommon):
    model_config = ConfigDict(extra="allow", frozen=True)


class MlflowTracking(Section):
    """``tracking.mlflow``: log the run to MLflow. Credentials come from MLflow's own
    variables (MLFLOW_TRACKING_TOKEN, MLFLOW_TRACKING_USERNAME / _PASSWORD), never the file."""

    tracking_uri: str | None = Field(
        None, description="a server (http://, https://), a database (sqlite:///...) or a folder "
        "(relative: to the config's folder); default: $MLFLOW_TRACKING_URI, else MLflow's own")
    experiment: str = Field("skillgrad", min_length=1, description="the experiment's name")
    run_name: str | None = Field(None, description="default: the run directory's name")
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator("tracking_uri")
    @classmethod
    def _no_credentials(cls, value: str | None) -> str | None:
        return no_url_credential(value, "set MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME "
                                        "and MLFLOW_TRACKING_PASSWORD, instead")


class WandbTracking(Section):
    """``tracking.wandb``: log the run to Weights & Biases. The API key comes from
    WANDB_API_KEY (or ``wandb login``), never the file."""

    project: str = Field("skillgrad", min_length=1)
    entity: str | None = Field(None, description="default: the logged-in user's")
    mode: Literal["online", "offline", "disabled"] | None = Field(
        None, description="default: $WANDB_MODE, else online")
    run_name: str | None = Field(None, description="default: the run directory's name")
    tags: tuple[str, ...] = ()
    dir: Path | None = Field(None, description="where W&B keeps its files (relative: to the "
                             "config's folder); default: $WANDB_DIR, else ./wandb")


class TensorboardTracking(Section):
    """``tracking.tensorboard``: write the run as TensorBoard event files, which
    ``tensorboard --logdir LOG_DIR`` shows (runs that share a ``log_dir`` side by side)."""

    log_dir: Path | None = Field(None, description="the folder TensorBoard is pointed at "
                                 "(relative: to the config's folder); the run's event files go "
                                 "in its folder run_name; default: the run directory's "
                                 "tensorboard/")
    run_name: str | None = Field(None, description="the run's folder in log_dir, its name in "
                                 "TensorBoard; default: the run directory's name")

    @field_validator("run_name")
    @classmethod
    def _one_folder(cls, value: str | None) -> str | None:
        if value is not None and (value.strip() in ("", ".", "..") or any(
                c in value for c in "/\\\0")):
            raise ValueError("not a single folder name (no /, not . or ..)")
        return value


class TrackingSection(Section):
    """Experiment trackers the run is logged to (none unless a tracker's section is given)."""

    mlflow: MlflowTracking | None = None
    wandb: WandbTracking | None = None
    tensorboard: TensorboardTracking | None = None


class SkillgradConfig(Section):
    model: ModelSection = ModelSection()
    train: TrainSection = TrainSection()
    gradient: GradientSection = GradientSection()
    optimizer: OptimizerSection = OptimizerSection()
    evaluation: EvaluationSection = EvaluationSection()
    env: EnvSection = EnvSection()
    execution: ExecutionSection = ExecutionSection()
    tracking: TrackingSection = TrackingSection()

    @model_validator(mode="after")
    def _rules_are_edits(self) -> SkillgradConfig:
        o = self.optimizer
        if self.gradient.proposal_form == "rules" and (
                o.skill_update_mode != "patch" or o.use_skill_aware_reflection):
            raise ValueError("gradient.proposal_form: rules writes edits: it needs "
                             "optimizer.skill_update_mode: patch without "
                             "use_skill_aware_reflection")
        return self


# Keys that may change between a run and its resumption without changing its result. (The
# limits that only stop a run, a prompt too large for the window or an optimizer gone silent,
# are among them: raising one is how a stopped run goes on; so are the trackers it is logged to.)
RESUME_SAFE = tuple(
    f"model.{role}.{key}" for role in ("target", "optimizer")
    for key in ("concurrency", "max_retries", "retry_base_delay", "budget.", "prices.", "cache",
                "cache_dir", "timeout", "context_tokens", "prefix_slots")
) + ("execution.", "optimizer.max_unusable_steps", "tracking.")


# ----------------------------------------------------------------------------- resolved config


@dataclass(frozen=True)
class ResolvedConfig:
    """A validated config plus what validation resolved: the environment's and the backends'
    classes (looked up once, here) and own option models, and the folder relative paths are
    read from."""

    config: SkillgradConfig
    env_options: EnvOptions
    role_options: dict[str, BaseModel]
    base_dir: Path
    source: Path | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    env_class: Any = None
    backend_classes: dict[str, Any] = field(default_factory=dict)
    origins: dict[str, str] = field(default_factory=dict)
    notes: tuple[CompatNote, ...] = ()
    skillopt: bool = False  # the file was SkillOpt's, translated (see skillgrad.skillopt)

    def origin(self, key: str) -> str:
        """Where a dotted key's value came from: ``FILE:LINE``, ``--set``, ``FILE:LINE (as
        SkillOpt's KEY)`` for a value mapped from a SkillOpt key, or ``default``."""
        return self.origins.get(key, "default")

    @property
    def warnings(self) -> list[str]:
        """One line per key that was read but has no effect here, naming it and why."""
        return [n.line() for n in self.notes if n.kind == "ignored"]

    def resolved(self) -> dict[str, Any]:
        """Every key with its effective value, defaults included."""
        data = self.config.model_dump(mode="json")
        data["env"].update(self.env_options.model_dump(mode="json"))
        for role, options in self.role_options.items():
            data["model"][role].update(options.model_dump(mode="json"))
        return data

    def redacted(self) -> dict[str, Any]:
        """The resolved config with every credential masked (:func:`skillgrad.redact.redact`),
        as written to the run directory."""
        return redact(self.resolved())

    def fingerprint(self, without: Collection[str] = ()) -> str:
        """A hash of every key that changes what a run computes (less the dotted keys
        ``without``: the fingerprint a run that predates them had).

        It hashes the redacted config, as ``config.yaml`` holds it: a secret counts by where
        it is and how it is given (a masked value, a ``${VAR}`` reference), never by its
        value, so the fingerprint (in ``run.json``, the checkpoint and the trackers' params)
        gives nothing to guess a secret against, and a secret that changes (a rotated key)
        does not stop a resume. A config without masked values has the fingerprint it had
        when the values themselves were hashed."""
        flat = {k: v for k, v in _flatten(self.redacted()).items()
                if not k.startswith(RESUME_SAFE) and k not in without}
        text = json.dumps(flat, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


MISSING = object()  # a key a config lacks, in :func:`changed_keys`


def changed_keys(previous: dict[str, Any], current: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The keys, resume-safe ones aside, whose values differ between two resolved configs (as
    written to run directories): ``key: (old, new)``, :data:`MISSING` for a key one of them
    lacks. Both are redacted again first: a run directory written by an older skillgrad may
    hold values it did not yet mask."""
    old, new = (_flatten(redact(c)) for c in (previous, current))
    return {key: (old.get(key, MISSING), new.get(key, MISSING))
            for key in sorted(old.keys() | new.keys())
            if not key.startswith(RESUME_SAFE) and old.get(key, MISSING) != new.get(key, MISSING)}


def config_changes(previous: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """:func:`changed_keys`, each as one short phrase."""
    changes = []
    for key, (was, now) in changed_keys(previous, current).items():
        if was is MISSING:
            changes.append(f"{key} is new (now {now!r}; that run predates it)")
        elif now is MISSING:
            changes.append(f"{key} is no longer a key (was {was!r})")
        else:
            changes.append(f"{key}: {was!r} -> {now!r}")
    return changes


def default_config(env: str, backends: Mapping[str, str]) -> dict[str, Any]:
    """What every key of a resolved config (as :meth:`ResolvedConfig.resolved` writes it)
    is when the config sets only ``env.name`` and each role's backend (``backends``): the
    defaults a run's stored config is compared with, so that the keys it sets differently are
    the keys its file set (``env.name`` and the backends themselves are given their own
    defaults here). A key with no default (an OpenAI-compatible backend's ``model``) is absent,
    and so are the own keys of an environment or backend not registered here. A
    ``module:Class`` name is never imported: the config may be someone else's."""
    from skillgrad import registry  # late import, as in validate

    def known(load: Any, name: str) -> Any:
        if ":" in name:
            return None
        try:
            return load(name)
        except (ConfigError, ImportError):  # not installed here: its own keys have no default
            return None

    cfg = SkillgradConfig.model_validate(
        {"env": {"name": env}, "model": {role: {"backend": b} for role, b in backends.items()}})
    classes = {role: known(registry.backend_class, b) for role, b in backends.items()}
    data = _small_optimizer_defaults(cfg, classes.get("optimizer")).model_dump(mode="json")
    env_cls = known(registry.environment_class, env)
    if env_cls is not None:
        data["env"].update(_field_defaults(env_cls.Options))
    for role, cls in classes.items():
        if cls is not None:
            own = _field_defaults(cls.Options)
            if "prefix_slots" in own and own["prefix_slots"] is None:  # as _role_defaults
                own["prefix_slots"] = PREFIX_SLOTS[role]
            data["model"][role].update(own)
        data["model"][role]["backend"] = RoleSection.model_fields["backend"].default
    data["env"]["name"] = EnvCommon.model_fields["name"].default
    return data


def _field_defaults(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON value of each key of ``model`` that has a default."""
    return {name: to_jsonable_python(info.get_default(call_default_factory=True))
            for name, info in model.model_fields.items() if not info.is_required()}


def set_keys(resolved: dict[str, Any], defaults: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """The dotted keys of ``resolved`` whose values differ from ``defaults``'
    (:func:`default_config`): ``key: (value, default)``, :data:`MISSING` for a key without
    a default. Both are redacted first, as in :func:`changed_keys`."""
    now, was = (_flatten(redact(c)) for c in (resolved, defaults))
    return {key: (value, was.get(key, MISSING)) for key, value in now.items()
            if was.get(key, MISSING) != value}


def load_config(
    path: Path | None, overrides: list[str] | tuple[str, ...] = (), *, base_dir: Path | None = None
) -> ResolvedConfig:
    """Read, merge and validate a config file and its overrides."""
    origins: dict[str, str] = {}
    lines: dict[str, str] = {}
    raw: dict[str, Any] = {}
    if path is not None:
        raw = _load_yaml(Path(path), (), origins, lines)
    for item in overrides:
        _apply_override(raw, item, origins)
        lines.update({k: v for k, v in origins.items() if v == "--set"})
        for stale in [k for k in lines if k not in origins]:
            del lines[stale]
    folder = base_dir or (Path(path).resolve().parent if path is not None else Path.cwd())
    return validate(raw, origins, folder, Path(path) if path is not None else None, lines=lines)


def validate(
    raw: dict[str, Any], origins: dict[str, str], base_dir: Path, source: Path | None = None,
    *, lines: dict[str, str] | None = None,
) -> ResolvedConfig:
    """``origins``: the file (or ``--set``) each dotted key came from, for error messages;
    ``lines``: the same with the line (``FILE:LINE``), for ``skillgrad config check``.

    A config written for SkillOpt (its flat ``model:`` keys, its 0 = all, its environment
    names and keys) is first translated into skillgrad's own keys
    (:mod:`skillgrad.skillopt`); what has no effect here is kept as a note."""
    from skillgrad import registry  # late import: the registry imports environment modules

    lines = dict(lines if lines is not None else origins)
    moved = translate(raw, origins, lines, _env_keys)
    raw, origins, lines = moved.raw, moved.origins, moved.where
    try:
        cfg = SkillgradConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, origins, SkillgradConfig)) from None
    env_cls = registry.environment_class(cfg.env.name, origin=_origin(origins, "env.name"))
    env_extra = dict(cfg.env.model_extra or {})
    env_options = _validate_section(
        env_cls.Options, env_extra, "env", origins, also=tuple(EnvCommon.model_fields)
    )
    roles: dict[str, BaseModel] = {}
    classes: dict[str, Any] = {}
    for role in ("target", "optimizer"):
        spec = getattr(cfg.model, role)
        key = f"model.{role}.backend"
        classes[role] = registry.backend_class(spec.backend, key=key,
                                               origin=_origin(origins, key))
        extra = dict(spec.model_extra or {})
        roles[role] = _role_defaults(role, _validate_section(
            classes[role].Options, extra, f"model.{role}", origins,
            also=tuple(RoleSection.model_fields),
        ))
    _refuse_url_credentials(raw, origins)
    cfg = _small_optimizer_defaults(cfg, classes["optimizer"])
    _check_target_vision(cfg, env_cls, classes["target"])
    _check_target_tools(cfg, env_options, classes["target"])
    if getattr(env_options, "mode", None) == "agent" and not getattr(
            classes["target"], "accepts_workspace", False):
        raise ConfigError(f"env.mode 'agent' runs an agent CLI in a working copy, but "
                          f"model.target.backend {cfg.model.target.backend!r} does not run "
                          "programs; use backend: command (e.g. argv: [claude, -p])")
    return ResolvedConfig(cfg, env_options, roles, base_dir, source, raw, env_cls, classes,
                          origins=lines, notes=tuple(moved.notes), skillopt=moved.skillopt)


# A local model's contexts kept per role, each caching one system message's prompt: the target
# sees the current skill and a candidate in turn; the optimizer's prompts share little.
PREFIX_SLOTS = {"target": 2, "optimizer": 1}


def _refuse_url_credentials(data: Any, origins: dict[str, str], key: str = "") -> None:
    """Refuse a credential written out in a URL anywhere in the config, a file's or a
    ``--set``'s (the keys that hold a URL check theirs first, with their own advice)."""
    if isinstance(data, dict):
        for name, value in data.items():
            _refuse_url_credentials(value, origins, f"{key}.{name}" if key else str(name))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            _refuse_url_credentials(value, origins, f"{key}.{i}")
    elif isinstance(data, str) and (found := credentials_in_text(data)) is not None:
        where = _origin(origins, key)
        raise ConfigError(f"{where}: {key}: holds a credential in a URL ({found}); a URL may "
                          "not carry one: give it through an environment variable (a "
                          "header or a query value of a model's base_url may be ${VAR})")


def _role_defaults(role: str, options: BaseModel) -> BaseModel:
    """``options`` with the defaults that depend on the role filled in."""
    if "prefix_slots" in type(options).model_fields and getattr(options, "prefix_slots", 0) is None:
        return options.model_copy(update={"prefix_slots": PREFIX_SLOTS[role]})
    return options


# The gradient keys a config leaves unset take these values when the optimizer's backend says
# it is a small local model (``small_optimizer = True``, the embedded one): asked once for
# anchored edits, it pastes the scorer's reasons and replaces lines by themselves; asked three
# times at rising temperatures for plain rules, each failed reply beside its expected answer,
# it usually writes one that helps, and the screen finds it. Its success analyses add little
# but cost and runaway replies (docs/proposals.md).
SMALL_OPTIMIZER_GRADIENT: dict[str, Any] = {"proposals": 3, "proposal_form": "rules",
                                            "failure_only": True}


def _small_optimizer_defaults(cfg: SkillgradConfig, optimizer_cls: Any) -> SkillgradConfig:
    """``cfg`` with :data:`SMALL_OPTIMIZER_GRADIENT` filled in for the keys it leaves unset,
    when the optimizer is a small local model. The rules form is left out where the update
    mode cannot take it (a rewrite mode, or skill-aware reflection)."""
    if not getattr(optimizer_cls, "small_optimizer", False):
        return cfg
    o = cfg.optimizer
    update = {k: v for k, v in SMALL_OPTIMIZER_GRADIENT.items()
              if k not in cfg.gradient.model_fields_set}
    if o.skill_update_mode != "patch" or o.use_skill_aware_reflection:
        update.pop("proposal_form", None)
    if not update:
        return cfg
    return cfg.model_copy(update={"gradient": cfg.gradient.model_copy(update=update)})


def _env_keys(name: str) -> dict[str, Any] | None:
    """The ``env:`` keys environment ``name`` accepts, each with its type (None: no such
    environment)."""
    from skillgrad import registry

    try:
        cls = registry.environment_class(name)
    except ConfigError:
        return None
    fields = {**EnvCommon.model_fields, **cls.Options.model_fields}
    return {key: info.annotation for key, info in fields.items()}


def _check_target_vision(cfg: SkillgradConfig, env_cls: Any, target_cls: Any) -> None:
    """Refuse, before any data is read or model loaded, an environment that sends images
    (class attribute ``needs_vision = True``) with a target backend that cannot take them
    (``accepts_images = False``). A backend that does not say is trusted to (an
    OpenAI-compatible server may serve a vision model)."""
    if not getattr(env_cls, "needs_vision", False) or getattr(target_cls, "accepts_images", True):
        return
    raise ConfigError(
        f"env.name {cfg.env.name!r} sends images to the target, but "
        f"model.target.backend {cfg.model.target.backend!r} has no vision (text only); use a "
        "vision-capable model through backend openai_compatible")


def _check_target_tools(cfg: SkillgradConfig, env_options: Any, target_cls: Any) -> None:
    """Refuse ``tool_mode: native`` with a target backend that has no native tool calling
    (``accepts_tools = False``): the tools would never reach the model, and every episode would
    end without a single action. A backend that does not say is trusted to have it."""
    if getattr(env_options, "tool_mode", None) != "native":
        return
    if getattr(target_cls, "accepts_tools", True):
        return
    raise ConfigError(
        f"env.tool_mode 'native' needs a target with native tool calling, but "
        f"model.target.backend {cfg.model.target.backend!r} has none; use env.tool_mode: text "
        "(the plain-text action protocol) or an openai_compatible endpoint as the target")


def _validate_section(
    model: type[BaseModel], data: dict[str, Any], prefix: str, origins: dict[str, str],
    also: tuple[str, ...] = (),
) -> Any:
    """``also``: keys of the same section validated elsewhere (shown as allowed, too)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, origins, model, prefix, also)) from None


# ----------------------------------------------------------------------------- YAML and overrides


def _load_yaml(path: Path, chain: tuple[Path, ...], origins: dict[str, str],
               lines: dict[str, str]) -> dict[str, Any]:
    resolved = Path(os.path.realpath(path))  # a loop of links is refused when it is read
    if resolved in chain:
        cycle = " -> ".join(str(p) for p in (*chain, resolved))
        raise ConfigError(f"{path}: _base_ inheritance cycle: {cycle}")
    data, at = _read_yaml_file(path, chain)
    base_ref = data.pop("_base_", None)
    merged: dict[str, Any] = {}
    if base_ref is not None:
        if not isinstance(base_ref, str) or not base_ref:
            raise ConfigError(f"{path}: _base_ must be a relative or absolute file path")
        base = Path(os.path.normpath(resolved.parent / base_ref))
        merged = _load_yaml(base, (*chain, resolved), origins, lines)
    for key, value in _flatten(data).items():
        if not isinstance(value, dict):  # a value in place of a base's section replaces it
            for stale in [k for k in origins if k.startswith(key + ".")]:
                origins.pop(stale)
                lines.pop(stale, None)
        origins[key] = str(path)
        lines[key] = f"{path}:{at[key]}" if key in at else str(path)
    return _deep_merge(merged, data)


MAX_CONFIG_BYTES = 1_000_000  # a config is a few kilobytes: /dev/zero is never read whole


def _read_yaml_file(path: Path, chain: tuple[Path, ...]) -> tuple[dict[str, Any], dict[str, int]]:
    """A config file or a base of one: a regular file (never a FIFO or a device) of at most
    :data:`MAX_CONFIG_BYTES`, parsed; every refusal names the file and who named it."""
    who = f" (the _base_ of {chain[-1]})" if chain else ""
    try:
        data = read_capped(path, MAX_CONFIG_BYTES, ConfigError, "config file")
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found{who}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:  # a loop of links, no permission
        raise ConfigError(f"{path}: cannot read config file ({exc.strerror or exc}){who}"
                          ) from None
    except ConfigError as exc:  # not a regular file
        raise ConfigError(f"{exc}{who}") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: config file is larger than {MAX_CONFIG_BYTES:,} bytes{who}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: config file is not UTF-8 text") from None
    data, lines = load_yaml_lines(text, str(path))
    if data is None:
        return {}, {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping of sections, not {type(data).__name__}")
    return data, lines


def parse_override(item: str) -> tuple[str, Any]:
    """The dotted key and the value of ``--set KEY=VALUE`` (the value read as YAML, else the
    text itself). Messages name the key, never the value: a value may be a credential."""
    key, sep, text = item.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        shown = f"{key!r}=..." if sep else repr(item)
        raise ConfigError(f"--set {shown}: expected dotted.key=value")
    try:
        value = load_yaml_text(text, f"--set {key}") if text.strip() else ""
    except DuplicateKeyError:
        raise
    except ConfigError:  # not YAML: the text itself is the value
        value = text
    return key, value


def secret_overrides(args: list[str]) -> tuple[list[str], list[str]]:
    """A command line without its ``--set KEY=VALUE`` items whose value holds a secret (what
    :func:`~skillgrad.redact.redact` masks there), and the keys of those: a command shown
    to the user (how to resume) must not repeat them."""
    kept: list[str] = []
    hidden: list[str] = []
    i = 0
    while i < len(args):
        arg, step = args[i], 1
        if arg in ("--set", "-s") and i + 1 < len(args):
            item, step = args[i + 1], 2
        elif arg.startswith(("--set=", "-s")) and arg not in ("--set", "-s"):
            item = arg.removeprefix("--set=") if arg.startswith("--set=") else arg[2:]
        else:
            kept.append(arg)
            i += 1
            continue
        try:
            key, value = parse_override(item)
            secret = redact_at(key.split("."), value) != value
        except ConfigError:  # cannot tell: not shown
            key, secret = item.partition("=")[0].strip(), True
        if secret:
            hidden.append(key or "--set")
        else:
            kept += args[i:i + step]
        i += step
    return kept, hidden


def _apply_override(raw: dict[str, Any], item: str, origins: dict[str, str]) -> None:
    key, value = parse_override(item)
    node = raw
    parts = key.split(".")
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {key}: {'.'.join(parts[: i + 1])} is not a section")
        node = child
    node[parts[-1]] = value
    # The override replaces the whole subtree: origins of keys it removed are stale.
    for stale in [k for k in origins if k.startswith(key + ".")]:
        del origins[stale]
    origins[key] = "--set"


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


# ----------------------------------------------------------------------------- error messages


def _origin(origins: dict[str, str], key: str) -> str:
    """Where ``key`` was set. An error about a whole section (a cross-field check, an unknown
    key holding a mapping) is located by the keys inside it, else by the nearest parent."""
    if key in origins:
        return origins[key]
    inside = [where for k, where in origins.items() if k.startswith(key + ".")]
    if inside:
        return inside[-1]
    parts = key.split(".")
    for n in range(len(parts) - 1, 0, -1):
        parent = ".".join(parts[:n])
        if parent in origins:
            return origins[parent]
    return "defaults"


def _describe(
    exc: ValidationError, origins: dict[str, str], model: type[BaseModel], prefix: str = "",
    also: tuple[str, ...] = (),
) -> str:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    key = ".".join([prefix, *loc] if prefix else loc)
    where = _origin(origins, key)
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(model, loc[:-1])
        if len(loc) == 1:  # the section's own keys: add those validated by the caller
            allowed = sorted({*allowed, *also})
        return f"{where}: unknown key '{key}' (allowed here: {', '.join(allowed)})"
    value = err.get("input")
    shown = "" if isinstance(value, dict) else f" (got {redact_at(key.split('.'), value)!r})"
    message = str(err["msg"]).removeprefix("Value error, ")  # pydantic's wrapping of our own
    return f"{where}: {key}: {message}{shown}"


def _allowed_keys(model: type[BaseModel], path: list[str]) -> list[str]:
    current: Any = model
    for part in path:
        fields = getattr(current, "model_fields", {})
        if part not in fields:
            return []
        current = fields[part].annotation
        args = getattr(current, "__args__", None)
        if args:  # Optional[Section]
            current = next((a for a in args if hasattr(a, "model_fields")), current)
    return sorted(getattr(current, "model_fields", {}))


def dump_yaml(data: dict[str, Any]) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
