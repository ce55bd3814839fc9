"""SkillOpt's ``env:`` keys: its benchmark names, its common keys and each benchmark's own.

A key the chosen skillgrad environment has is carried over (its paths read from the current
directory, as SkillOpt reads them). The others, with SkillOpt 0.2.0's meaning (its
``scripts/train.py``, ``skillopt/datasets/base.py`` and ``skillopt/envs/<name>/adapter.py``):

* ``exec_timeout``: the seconds one target call may take -> the target backend's ``timeout``;
* ``max_completion_tokens``: the target's completion limit -> the environment's ``max_tokens``
  (16384, SkillOpt's default, when unset);
* ``workers``: rollouts in parallel -> ``execution.rollout_workers``; ``max_api_workers``
  (alfworld): target calls in parallel -> ``model.target.concurrency``;
* ``limit``: the first N items of every split -> the caps ``train.train_size``,
  ``evaluation.sel_env_num`` and ``evaluation.test_env_num`` (the smaller of each);
* ``split_seed: 0`` means ``train.seed``; ``split_ratio`` is a string ``"train:val:test"``;
* ``out_root`` and ``split_output_dir`` place SkillOpt's output: here the run directory is
  ``--out`` and splits are recorded in it;
* each benchmark's rollout keys that skillgrad's environment does not have are noted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from skillgrad.errors import ConfigError
from skillgrad.skillopt.notes import CompatNote

if TYPE_CHECKING:
    from skillgrad.skillopt.work import EnvFields, Work

# SkillOpt's benchmark names that are called otherwise here.
RENAMED = {"livemathematicianbench": "mcq"}

# SkillOpt's completion limit of a target call (the adapters' default).
TARGET_MAX_TOKENS = 16384

COMMON = frozenset({"exec_timeout", "out_root", "split_output_dir", "limit", "workers",
                    "max_completion_tokens", "max_turns"})
# Each benchmark's own keys (besides COMMON), as SkillOpt's adapter reads them.
OWN: dict[str, frozenset[str]] = {
    "searchqa": frozenset(),
    "alfworld": frozenset({"max_steps", "max_api_workers"}),
    "spreadsheetbench": frozenset({"data_root", "mode"}),
    "officeqa": frozenset({"data_dirs", "docs_dirs", "max_tool_turns", "search_mode",
                           "max_queries_per_turn", "search_api_url", "search_auth_env",
                           "search_provider", "search_max_num_results",
                           "search_timeout_seconds", "use_local_tools"}),
    "livemathematicianbench": frozenset({"shuffle_choices", "use_theorem", "use_sketch"}),
    "docvqa": frozenset({"image_detail"}),
}
_SEARCH_KEYS = ("max_queries_per_turn", "search_api_url", "search_auth_env", "search_provider",
                "search_max_num_results", "search_timeout_seconds")
# Benchmarks whose SkillOpt rollout asks again (up to max_turns) where skillgrad's answers once.
_ONE_REPLY = ("searchqa", "docvqa", "livemathematicianbench")
# Benchmarks whose SkillOpt adapter limits each target call to exec_timeout seconds.
_CALL_TIMEOUT = ("searchqa", "docvqa", "livemathematicianbench")


def native_name(name: str) -> str:
    return RENAMED.get(name, name)


def is_skillopt_env_key(name: str, key: str) -> bool:
    """Whether ``key`` is an ``env:`` key SkillOpt's benchmark ``name`` reads (for another
    environment a key it does not have is an unknown key, not a sign of SkillOpt)."""
    return name in OWN and (key in COMMON or key in OWN[name])


def translate(work: Work, env_fields: EnvFields) -> None:
    name = work.peek("env.name")
    if name is None or name == "":
        raise ConfigError(f"{work.at('env.name')}: env.name: a SkillOpt config names its "
                          f"benchmark ({', '.join(sorted(OWN))})")
    if not isinstance(name, str):
        return  # the validator names the bad value
    native = native_name(name)
    if native != name:
        work.keep("env.name", native)
        work.notes.append(CompatNote("env.name", work.at("env.name"), "mapped",
                                     f"SkillOpt's {name} is skillgrad's {native}",
                                     f"env.name: {native}"))
    fields = env_fields(native)
    if fields is None:
        return  # an unknown environment: the validator names it
    for key in [k for k in work.keys_under("env.") if work.peek(k) == ""]:
        work.note(key, "inert", "empty: unset")
    _common(work, name, fields)
    _own(work, name, fields)
    for key in work.keys_under("env."):
        field = key.split(".")[1]
        if field in fields and _is_path(fields[field]):
            work.keep(key, work.path(work.peek(key)))
    if "max_tokens" in fields and not work.has("env.max_tokens") and \
            "env.max_tokens" not in work.out:
        work.put("env.max_tokens", TARGET_MAX_TOKENS,
                 "SkillOpt's completion limit of a target call")


def _common(work: Work, name: str, fields: Mapping[str, Any]) -> None:
    if work.peek("env.split_seed") == 0:
        work.keep("env.split_seed", work.peek("train.seed", 42))
        work.notes.append(CompatNote("env.split_seed", work.at("env.split_seed"), "mapped",
                                     "0 means train.seed in SkillOpt", "env.split_seed"))
    ratio = work.peek("env.split_ratio")
    if isinstance(ratio, str):
        work.keep("env.split_ratio", _ratio(work, ratio))
    if work.peek("env.split_mode", "ratio") == "ratio" and (
            work.has("env.data_path") or work.has("env.split_ratio")):
        work.notes.append(CompatNote(
            "env.split_mode", work.at("env.split_mode"), "differs",
            "skillgrad draws ratio splits with its own seeded splitter (whole groups stay "
            "together): the same ratio and seed give other splits than SkillOpt's"))
    for key, why in (("out_root", "the run directory is the --out of skillgrad train"),
                     ("split_output_dir", "skillgrad writes no split files; each run "
                      "directory records its splits")):
        if work.has(f"env.{key}") and key not in fields:
            work.note(f"env.{key}", "ignored", why)
    _timeout(work, name, fields)
    if work.has("env.max_completion_tokens") and "max_completion_tokens" not in fields:
        if "max_tokens" in fields:
            work.keep("env.max_completion_tokens", target="env.max_tokens")
        else:
            work.note("env.max_completion_tokens", "ignored",
                      f"skillgrad's {native_name(name)} sets no completion limit")
    if work.has("env.workers") and "workers" not in fields:
        work.keep("env.workers", target="execution.rollout_workers")
    if work.has("env.limit") and "limit" not in fields:
        _limit(work, name)
    if work.has("env.max_turns") and "max_turns" not in fields:
        turns = work.peek("env.max_turns")
        if name in _ONE_REPLY and turns == 1:
            work.note("env.max_turns", "inert", "one reply per task, as here")
        elif name in _ONE_REPLY:
            work.note("env.max_turns", "ignored",
                      f"skillgrad's {native_name(name)} takes one reply per task; SkillOpt "
                      "asks again until the reply holds an <answer> tag")
    for key in COMMON:  # what this benchmark's SkillOpt adapter does not read
        if name in OWN and work.has(f"env.{key}") and key not in fields:
            work.note(f"env.{key}", "inert", f"SkillOpt's {name} does not read it")


def _timeout(work: Work, name: str, fields: Mapping[str, Any]) -> None:
    if not work.has("env.exec_timeout") or "exec_timeout" in fields:
        return
    if name == "spreadsheetbench":
        work.note("env.exec_timeout", "ignored",
                  "SkillOpt's time limit of a whole task; skillgrad limits each call "
                  "(model.target.timeout)")
        return
    if name in OWN and name not in _CALL_TIMEOUT:
        return  # not read by this benchmark's adapter: noted with the other common keys
    backend = work.out.get("model.target.backend", work.peek("model.target.backend"))
    origin = work.origins.get("model.target.timeout", "SkillOpt's")
    if work.backends.get("target") == "minimax_chat":
        work.note("env.exec_timeout", "inert", "SkillOpt does not hand it to its minimax_chat "
                  "target ($MINIMAX_TIMEOUT_SECONDS, 300 s, limits each call)")
    elif "model.target.timeout" in work.out and "SkillOpt's" not in origin and \
            not origin.startswith("$"):  # a variable SkillOpt reads is SkillOpt's setting
        work.note("env.exec_timeout", "inert", "model.target.timeout, given beside it, decides")
    elif backend in ("openai_compatible", "command", "agent"):
        work.keep("env.exec_timeout", target="model.target.timeout")
    else:
        work.note("env.exec_timeout", "ignored",
                  f"the target backend {backend or 'embedded'} has no per-call time limit")


def _limit(work: Work, name: str) -> None:
    limit = work.peek("env.limit")
    if limit in (0, None):
        work.note("env.limit", "inert", "0: every item")
        return
    if name == "spreadsheetbench":
        work.note("env.limit", "inert", "SkillOpt's spreadsheetbench does not read it")
        return
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise work.refuse("env.limit", f"expected a whole number >= 0 (got {limit!r})")
    for cap in ("train.train_size", "evaluation.sel_env_num", "evaluation.test_env_num"):
        current = work.out.get(cap, work.peek(cap))
        value = limit if current in (None, 0, "") else min(int(current), limit)
        work.put(cap, value, f"limit {limit}: the first {limit} items of each split",
                 source="env.limit")
        work.src.pop(cap, None)
    work.take("env.limit")


def _own(work: Work, name: str, fields: Mapping[str, Any]) -> None:
    if name == "alfworld" and work.has("env.max_api_workers"):
        work.keep("env.max_api_workers", target="model.target.concurrency")
    if name == "spreadsheetbench" and work.has("env.mode") and "mode" not in fields:
        work.note("env.mode", "ignored",
                  f"skillgrad's spreadsheetbench agent reads and writes cells with tools "
                  f"(SkillOpt's react mode); its {work.peek('env.mode')!r} code-writing mode "
                  "is not reproduced")
    if name == "officeqa":
        _officeqa(work, fields)
    if name == "docvqa" and "image_root" in fields and not work.has("env.image_root"):
        work.put("env.image_root", str(work.cwd),
                 "SkillOpt reads a CSV's image paths from the directory it runs in")


def _officeqa(work: Work, fields: Mapping[str, Any]) -> None:
    if work.has("env.docs_dirs") and "docs_dirs" not in fields:
        work.keep("env.docs_dirs", target="env.data_dirs")
    roots = work.out.get("env.data_dirs", work.peek("env.data_dirs"))
    if isinstance(roots, str):  # SkillOpt splits one string at os.pathsep and commas
        parts = [p.strip() for p in roots.replace(os.pathsep, ",").split(",") if p.strip()]
        if work.has("env.data_dirs"):
            work.keep("env.data_dirs", parts)
        else:
            work.out["env.data_dirs"] = parts
    if work.has("env.max_tool_turns") and "max_tool_turns" not in fields:
        work.keep("env.max_tool_turns", target="env.max_turns")
    mode = str(work.peek("env.search_mode", "offline")).strip().lower()
    if work.has("env.search_mode") and "search_mode" not in fields:
        if mode in ("custom_search", "custom", "azure_search", "azure"):
            raise work.refuse("env.search_mode", f"{mode!r} searches a web service; skillgrad's "
                              "officeqa searches the local documents (search_mode: offline)")
        work.note("env.search_mode", "differs",
                  "the agent searches and reads the local documents with tools; SkillOpt's "
                  "offline mode also puts the gold source page into the prompt, skillgrad "
                  "does not")
    for key in _SEARCH_KEYS:
        if work.has(f"env.{key}") and key not in fields:
            work.note(f"env.{key}", "inert", "used only by SkillOpt's custom_search mode")
    if work.has("env.use_local_tools") and "use_local_tools" not in fields:
        if work.peek("env.use_local_tools") is False:
            raise work.refuse("env.use_local_tools", "false answers without tools; "
                              "skillgrad's officeqa agent always has its search tools")
        work.note("env.use_local_tools", "inert", "the agent has its tools, as here")


def _ratio(work: Work, text: str) -> list[float]:
    parts = text.split(":")
    try:
        numbers = [float(p) for p in parts]
    except ValueError:
        numbers = []
    if len(numbers) != 3 or any(n < 0 for n in numbers) or sum(numbers) <= 0:
        raise work.refuse("env.split_ratio", f"expected \"train:val:test\" with three "
                          f"non-negative numbers, as SkillOpt writes it (got {text!r})")
    total = sum(numbers)
    return [round(n / total, 12) for n in numbers]


def _is_path(annotation: Any) -> bool:
    if annotation is Path:
        return True
    return any(_is_path(a) for a in get_args(annotation))
