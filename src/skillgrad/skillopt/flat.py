"""SkillOpt's legacy flat configs: every key at the top level (``edit_budget: 4``,
``env: searchqa``, ``target_model: gpt-5.5``, ...), as its loader still accepts them.

Each flat key goes to its section key by SkillOpt 0.2.0's own key map (the inverse of its
``skillopt/config.py`` flattening); a flat key outside that map is an ``env:`` key, as SkillOpt
hands such keys to the environment (where an unknown one is still named by the validator)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skillgrad.skillopt.models import KEYS as MODEL_KEYS

SECTIONS = ("model", "train", "gradient", "optimizer", "evaluation", "env", "execution")

_RENAMED = {
    "model_backend": "model.backend", "optimizer_model": "model.optimizer",
    "target_model": "model.target", "edit_budget": "optimizer.learning_rate",
    "min_edit_budget": "optimizer.min_learning_rate",
    "meta_edit_budget": "optimizer.meta_learning_rate", "env": "env.name",
}
_SECTION_OF = {
    **{k: "train" for k in ("num_epochs", "train_size", "steps_per_epoch", "batch_size",
                            "accumulation", "seed")},
    **{k: "gradient" for k in ("minibatch_size", "merge_batch_size", "analyst_workers",
                               "failure_only", "max_analyst_rounds")},
    **{k: "optimizer" for k in ("lr_scheduler", "lr_control_mode", "skill_update_mode",
                                "use_slow_update", "slow_update_samples",
                                "slow_update_gate_with_selection", "longitudinal_pair_policy",
                                "use_meta_skill", "use_skill_aware_reflection",
                                "skill_aware_appendix_source",
                                "skill_aware_consolidate_threshold")},
    **{k: "evaluation" for k in ("use_gate", "gate_metric", "gate_mixed_weight", "sel_env_num",
                                 "test_env_num", "eval_test")},
    **{k: "model" for k in MODEL_KEYS if k not in ("backend", "optimizer", "target")},
}


def is_flat(raw: Mapping[str, Any]) -> bool:
    """A config in SkillOpt's legacy flat form: ``env`` names a benchmark, or a top-level key
    is one of SkillOpt's flat keys."""
    if isinstance(raw.get("env"), str):
        return True
    return any(k not in SECTIONS and (k in _RENAMED or k in _SECTION_OF) for k in raw)


def sectioned(raw: Mapping[str, Any], origins: dict[str, str],
              where: dict[str, str]) -> dict[str, Any]:
    """The flat config as sections; ``origins`` and ``where`` are rekeyed to match, each
    saying which flat key a value came from."""
    out: dict[str, Any] = {}
    # A key given both ways: the section's wins, as in SkillOpt's loader (and a --set of a
    # section, model.target={serve: ...}, replaces the flat target_model).
    given = {f"{key}.{inner}" for key, value in raw.items()
             if key in SECTIONS and isinstance(value, dict) for inner in value}
    for key, value in raw.items():
        if key in SECTIONS and isinstance(value, dict):
            for inner, item in value.items():
                out[f"{key}.{inner}"] = item
            continue
        dotted = _RENAMED.get(key) or (f"{_SECTION_OF[key]}.{key}" if key in _SECTION_OF
                                       else f"env.{key}")
        if dotted in given:
            for table in (origins, where):
                table.pop(key, None)
            continue
        out[dotted] = value
        for table in (origins, where):
            if key in table:
                table[dotted] = f"{table.pop(key)} (as SkillOpt's flat {key})"
    return out
