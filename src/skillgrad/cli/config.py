"""``skillgrad config check`` and ``skillgrad config migrate``: a config validated and shown
with the origin of every value, and a SkillOpt config written out in skillgrad's own keys.

Neither runs a model. ``check`` also reads the environment's data (the task count of every
split), so a path that points nowhere is found before a run starts."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from skillgrad.config import ResolvedConfig, load_config
from skillgrad.dotted import flatten
from skillgrad.errors import ConfigError

config_app = typer.Typer(help="Configs: check one, migrate a SkillOpt one.",
                         no_args_is_help=True)

ConfigArg = Annotated[Path, typer.Argument(help="YAML config file (skillgrad's or SkillOpt's).")]
SetOpt = Annotated[
    Optional[list[str]],  # noqa: UP045 - typer needs Optional here
    typer.Option("--set", "-s", metavar="KEY=VALUE",
                 help="Override a config key: --set optimizer.learning_rate=6"),
]
Print = Callable[[str], None]


def compat_lines(resolved: ResolvedConfig) -> list[str]:
    """What a command prints about a SkillOpt config it was given: a warning per key that
    has an effect in SkillOpt and none here, a note per key skillgrad treats otherwise on
    purpose, and one line for the keys that have no effect in either."""
    lines = [f"warning: {n.line()}" for n in resolved.notes if n.kind == "ignored"]
    lines += [f"note: {n.line()}" for n in resolved.notes if n.kind == "differs"]
    inert = [n.key for n in resolved.notes if n.kind == "inert"]
    if inert:
        lines.append(f"note: {len(inert)} SkillOpt keys have no effect in SkillOpt either with "
                     f"this config (empty, unused, or for a backend no role uses): "
                     f"{', '.join(inert)}")
    return lines


@config_app.command("check")
def check(config: ConfigArg, set_: SetOpt = None, all_: Annotated[bool, typer.Option(
        "--all", help="Show every key, the defaults too.")] = False) -> None:
    """Validate a config without running a model: the values it sets, with where each came
    from (FILE:LINE, --set), credentials masked; the data's task counts; what a SkillOpt
    config's keys became; and what the run needs that is missing here (a library, a model
    file, an agent CLI)."""
    from skillgrad.build import build_environment
    from skillgrad.envs.base import SPLITS
    from skillgrad.settings import split_cap

    resolved = load_config(config, set_ or [])
    environment = build_environment(resolved)
    counts = {split: len(environment.tasks(split)) for split in SPLITS}
    say = _printer()
    form = "SkillOpt's, read in skillgrad's keys" if resolved.skillopt else "skillgrad's"
    say(f"config: {config} ({form}); fingerprint {resolved.fingerprint()}")
    flat = flatten(resolved.redacted())
    shown = {k: v for k, v in flat.items() if all_ or resolved.origin(k) != "default"}
    width = max((len(k) for k in shown), default=0)
    for key, value in shown.items():
        say(f"  {key.ljust(width)}  {json.dumps(value, default=str)}  # {resolved.origin(key)}")
    if len(shown) < len(flat):
        say(f"  ({len(flat) - len(shown)} more keys at their defaults: --all shows them)")
    say(f"env {resolved.config.env.name}: " + ", ".join(
        _count(split, n, split_cap(resolved.config, split)) for split, n in counts.items()))
    for line in _credentials(resolved) + compat_lines(resolved):
        say(line)
    missing = preflight(resolved)
    for line in missing:
        say(f"missing: {line}")
    if missing:
        raise ConfigError(f"{config}: the run would stop: {missing[0]}"
                          + (f" (and {len(missing) - 1} more above)" if len(missing) > 1
                             else ""))
    say("ok")


def preflight(resolved: ResolvedConfig) -> list[str]:
    """What the run needs that this machine lacks, one line each: a library of an extra, an
    embedded model's weights, an agent CLI or its serve config, a tracker's library."""
    import importlib.util
    import shutil

    from skillgrad.errors import SkillgradError

    def lacks(module: str) -> bool:
        return importlib.util.find_spec(module) is None

    found = []
    for role, options in resolved.role_options.items():
        backend = getattr(resolved.config.model, role).backend
        key = f"model.{role}"
        if backend == "embedded":
            if lacks("llama_cpp"):
                found.append(f"{key}: the embedded backend needs llama-cpp-python: pip "
                             "install 'skillgrad[local]'")
            path = getattr(options, "model_path", None)
            if path is not None:
                if not (resolved.base_dir / path).is_file():
                    found.append(f"{key}.model_path: {path} does not exist")
            else:
                from skillgrad.models.weights import locate
                try:
                    locate(str(getattr(options, "model", "")))
                except SkillgradError as exc:
                    found.append(f"{key}.model: {exc}")
        elif backend == "agent":
            from skillgrad.models.agent import search_path
            from skillgrad.models.agent_clis import AGENT_CLIS

            cli_name = str(getattr(options, "cli", ""))
            program = getattr(options, "binary", None) or AGENT_CLIS[cli_name].binary
            if shutil.which(str(program), path=search_path()) is None:
                found.append(f"{key}.binary: {program!r} not found on PATH (the {cli_name} "
                             "CLI)")
            serve = getattr(options, "serve", None)
            if serve is not None and not (resolved.base_dir / serve).is_file():
                found.append(f"{key}.serve: {resolved.base_dir / serve} does not exist")
            if serve is not None and lacks("starlette"):
                found.append(f"{key}.serve: needs the serve extra: pip install "
                             "'skillgrad[serve]'")
    from skillgrad.tracking import missing_libraries

    found.extend(missing_libraries(resolved))
    return found


@config_app.command("migrate")
def migrate(
    config: ConfigArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="The skillgrad config to write.")],
    set_: SetOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
) -> None:
    """Write a SkillOpt config in skillgrad's own keys, a comment on every value that was
    mapped; training on either file gives the same fingerprint and the same run."""
    resolved = load_config(config, set_ or [])
    if not resolved.skillopt:
        raise ConfigError(f"{config}: already in skillgrad's keys: nothing to migrate")
    if out.exists() and not force:
        raise ConfigError(f"--out {out}: exists; give another path or --force")
    text = render(resolved, config)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    try:
        again = load_config(tmp)
    except ConfigError as exc:
        tmp.unlink()
        raise ConfigError(f"the migrated config does not load ({exc})") from None
    if again.fingerprint() != resolved.fingerprint():
        tmp.unlink()
        raise ConfigError("the migrated config would train differently (fingerprints "
                          f"{again.fingerprint()} and {resolved.fingerprint()})")
    os.replace(tmp, out)
    say = _printer()
    say(f"written: {out} (fingerprint {resolved.fingerprint()}, the same as {config})")
    for line in compat_lines(resolved):
        say(line)


def render(resolved: ResolvedConfig, source: Path) -> str:
    """The config's own keys (not the defaults) as YAML, each mapped value with a comment
    naming where it came from, and the SkillOpt keys left out at the end."""
    head = [f"# skillgrad config migrated from SkillOpt's {source}.",
            "# Paths are absolute: SkillOpt reads them from the directory it runs in.", ""]
    order = ("model", "train", "gradient", "optimizer", "evaluation", "env", "execution")
    raw = resolved.raw
    data = {k: raw[k] for k in (*order, *sorted(set(raw) - set(order))) if k in raw}
    body = _emit(data, resolved, "", 0)
    tail = [f"# not carried over: {n.line()}" for n in resolved.notes
            if n.kind in ("ignored", "inert")]
    tail += [f"# differs on purpose: {n.line()}" for n in resolved.notes if n.kind == "differs"]
    return "\n".join([*head, *body, "", *tail]) + "\n"


def _emit(data: dict[str, Any], resolved: ResolvedConfig, prefix: str, depth: int) -> list[str]:
    lines: list[str] = []
    pad = "  " * depth
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            lines.append(f"{pad}{key}:")
            lines.extend(_emit(value, resolved, dotted + ".", depth + 1))
            continue
        origin = resolved.origin(dotted)
        mapped = "SkillOpt's" in origin or origin.startswith("$")
        comment = f"  # {origin.split(' (as ', 1)[-1].rstrip(')')}" if mapped else ""
        if origin.startswith("$"):
            comment = f"  # from {origin}"
        lines.append(f"{pad}{key}: {json.dumps(value, default=str)}{comment}")
    return lines


def _count(split: str, tasks: int, cap: int | None) -> str:
    used = f" (the run uses the first {cap})" if cap is not None and cap < tasks else ""
    return f"{split} {tasks} tasks{used}"


def _credentials(resolved: ResolvedConfig) -> list[str]:
    lines = []
    for role, options in resolved.role_options.items():
        name = getattr(options, "api_key_env", None)
        if name and not os.environ.get(name, "").strip():
            lines.append(f"warning: model.{role}.api_key_env: ${name} is not set here; the "
                         "run needs it")
    return lines


def _printer() -> Print:
    from skillgrad.console import say

    return say
