"""A run's config read back (the hyperparameters of a finished training): the model each role
ran, the few settings runs are told apart by, the keys set differently from the defaults, and
the whole resolved config, from the ``config.yaml`` the run directory holds. It is redacted
again here: a run directory written by an older skillgrad may hold a value it did not yet
mask, and nothing read back shows a secret."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from skillgrad.config import MISSING, default_config, dump_yaml, set_keys
from skillgrad.dotted import flatten
from skillgrad.redact import redact
from skillgrad.rundir import RunDir

ROLES = ("target", "optimizer")
# The keys that say which model a role ran, the first one set naming it: a file of weights
# before the catalogue name it replaces, an agent CLI, a program, a scripted function.
NAMING = ("model_path", "model", "cli", "function", "script", "argv", "dir")
# Where it ran, shown beside the name.
WHERE = ("base_url", "azure_endpoint", "endpoint", "serve", "binary")
LONGEST = 80  # characters of a value shown in a cell


@dataclass(frozen=True)
class RoleModel:
    """The model a role ran: its backend, its name (``""`` when the config names none) and
    the other keys that say where it ran, as ``(key, value)``."""

    role: str
    backend: str
    name: str
    where: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SetKey:
    """A key set differently from the default: ``default`` is ``None`` when it has none."""

    key: str
    value: str
    default: str | None


@dataclass(frozen=True)
class RunConfig:
    """The redacted resolved config of a run (``data``) and what is read from it."""

    data: dict[str, Any]

    def get(self, dotted: str, default: Any = None) -> Any:
        node: Any = self.data
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def models(self) -> tuple[RoleModel, ...]:
        return tuple(role_model(role, self.get(f"model.{role}") or {}) for role in ROLES)

    @property
    def settings(self) -> tuple[tuple[str, str], ...]:
        """(what, value) of the settings runs are compared by: the environment, each role's
        model, the epochs and steps, the batch and the learning rate (the edit budget)."""
        out = [("env", str(self.get("env.name", "-")))]
        out += [(m.role, " ".join(filter(None, (m.backend, m.name)))) for m in self.models]
        steps = self.get("train.steps_per_epoch")
        out.append(("epochs", f"{self.get('train.num_epochs', '-')} × "
                              f"{steps if steps is not None else 'auto'} steps"))
        batch, accumulation = self.get("train.batch_size", "-"), self.get("train.accumulation", 1)
        out.append(("batch", f"{batch} × {accumulation}" if accumulation not in (1, None)
                    else str(batch)))
        out.append(("lr", learning_rate(self)))
        return tuple(out)

    @property
    def text(self) -> str:
        """The whole config as YAML."""
        return dump_yaml(self.data)

    def set_keys(self) -> tuple[SetKey, ...]:
        """The keys whose values differ from the defaults of a config that sets only this
        one's environment and backends (:func:`skillgrad.config.default_config`)."""
        backends = {role: str(self.get(f"model.{role}.backend", "")) for role in ROLES}
        defaults = default_config(str(self.get("env.name", "")), backends)
        found = set_keys(self.data, defaults)
        return tuple(SetKey(key, shown(value), None if default is MISSING else shown(default))
                     for key, (value, default) in found.items())


def read_run_config(run: RunDir) -> RunConfig | None:
    """The config ``run`` holds; None when it has none or it cannot be read."""
    data = run.read_config()
    return RunConfig(redact(data)) if isinstance(data, dict) else None


def role_model(role: str, section: dict[str, Any]) -> RoleModel:
    set_ = {k: v for k, v in section.items() if v not in (None, "", [], {})}
    name_key = next((k for k in NAMING if k in set_), None)
    name = "" if name_key is None else shown(set_[name_key])
    where = tuple((k, shown(set_[k])) for k in WHERE if k in set_)
    return RoleModel(role, str(section.get("backend", "-")), name, where)


def learning_rate(config: RunConfig) -> str:
    """The edit budget per step, in a few words: ``4 → 2 cosine``, ``autonomous, up to 6``."""
    lr, low = config.get("optimizer.learning_rate"), config.get("optimizer.min_learning_rate")
    control = config.get("optimizer.lr_control_mode", "fixed")
    if control == "none":
        return "every merged edit"
    if control == "autonomous":
        return f"autonomous, up to {config.get('optimizer.lr_ceiling') or lr}"
    scheduler = config.get("optimizer.lr_scheduler", "")
    if scheduler == "constant" or low == lr:
        return f"{lr} constant" if scheduler == "constant" else str(lr)
    return f"{lr} → {low} {scheduler}".strip()


def shown(value: Any) -> str:
    """A config value in a table cell: a string as it is, a list as its items, each cut to
    :data:`LONGEST` characters."""
    if isinstance(value, list):
        text = " ".join(str(v) for v in value)
    elif isinstance(value, dict):
        text = ", ".join(f"{k}: {v}" for k, v in flatten(value).items()) or "{}"
    elif value is None:
        text = "null"
    elif isinstance(value, bool):
        text = str(value).lower()
    else:
        text = str(value)
    return text if len(text) <= LONGEST else text[:LONGEST - 1] + "…"
