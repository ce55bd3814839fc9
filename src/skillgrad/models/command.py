"""The ``command`` backend: an agent CLI (``codex exec``, ``claude -p``, ``cursor-agent``, ...)
as the target model.

In deep-learning terms the forward pass is delegated to a black-box module: skillgrad trains
the weights (the skill), and an external program runs the forward pass with them. Each call
gets a fresh workspace holding the skill as a skill file with YAML front matter (where the
agent looks for skills), the program is started there from an argv template (never through a
shell), and its stdout is the answer: plain text, one JSON object, or JSON lines.

What the program prints is shown in error messages only after every credential in its
environment (a variable named like a key or token, a URL's password) is scrubbed from it: agent
CLIs tend to repeat the key they were refused with.

Token usage is whatever the program reports; when it reports none, both counts are estimated
as characters // 4 (the prompt from the skill plus the task, the completion from the answer),
so metering stays meaningful but approximate.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from skillgrad.errors import ConfigError, FatalModelError, TransientModelError
from skillgrad.models.base import non_text_parts, refuse_tools
from skillgrad.models.messages import ChatRequest, Completion, Message, Usage
from skillgrad.redact import masked_values, redact_text

log = logging.getLogger(__name__)

__all__ = ["CommandBackend", "CommandModel", "CommandOptions", "task_text"]

TASK_FILE = "TASK.md"
# One pass over the template, so that a placeholder inside substituted text (a task that says
# "{workspace}") is left as it is; no str.format, so other braces are plain text.
_PLACEHOLDER = re.compile(r"\{(task|workspace|skill_file|task_file)\}")
_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TAIL = 300


def _relative_path(value: str, what: str) -> str:
    path = PurePosixPath(value)
    if not value or path.is_absolute() or ".." in path.parts or str(path) == ".":
        raise ValueError(f"{what} must be a relative path inside the workspace")
    return value


class CommandOptions(BaseModel):
    """Config keys of the ``command`` backend (``model.target: {backend: command, ...}``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    argv: list[str] = Field(
        min_length=1,
        description="program and arguments; {task}, {workspace}, {skill_file} and {task_file} "
        "are replaced in each element",
    )
    input: Literal["stdin", "argv"] = Field(
        "stdin", description="'stdin': the task is written to stdin; 'argv': stdin is empty"
    )
    output: Literal["text", "json", "jsonl"] = "text"
    text_field: str = Field("result", description="dotted path of the answer in json/jsonl")
    usage_field: str = Field("usage", description="dotted path of token usage in json/jsonl")
    skill_file: str = Field("SKILL.md", description="where the skill is written, workspace-relative")
    skill_name: str = "skillgrad-skill"
    skill_description: str = (
        "Instructions for this kind of task, learned by skillgrad. Read and follow them."
    )
    files: dict[str, Path] = Field(
        default_factory=dict,
        description="workspace-relative path -> file or folder (relative to the config folder) "
        "copied into every workspace",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="extra environment variables; ${VAR} is expanded"
    )
    timeout: float = Field(600.0, gt=0, description="seconds before the program is killed")
    transient_exit_codes: list[int] = Field(
        default_factory=list, description="exit codes worth retrying"
    )
    keep_workspaces: bool = False

    @field_validator("skill_file")
    @classmethod
    def _skill_file_inside(cls, value: str) -> str:
        return _relative_path(value, "skill_file")  # the error shows the value

    @field_validator("files")
    @classmethod
    def _files_inside(cls, value: dict[str, Path]) -> dict[str, Path]:
        for key in value:
            _relative_path(key, f"files key {key!r}")
        return value

    @field_validator("argv")
    @classmethod
    def _program_named(cls, value: list[str]) -> list[str]:
        if not value[0].strip():
            raise ValueError("argv[0] must name a program")
        return value

    @model_validator(mode="after")
    def _argv_carries_task(self) -> CommandOptions:
        if self.input == "argv" and not any(
            "{task}" in arg or "{task_file}" in arg for arg in self.argv
        ):
            raise ValueError(
                "input is 'argv' but no argv element contains {task} (or {task_file}): "
                "the program would never see the task"
            )
        return self


def task_text(messages: tuple[Message, ...]) -> str:
    """The task given to the program: the non-system messages.

    A single message is passed as its bare text; several are each headed by their role.
    """
    turns = [m for m in messages if m.role != "system"]
    if len(turns) == 1:
        return turns[0].text()
    return "\n\n".join(f"[{m.role}]\n{m.text()}" for m in turns)


def skill_document(skill: str, name: str, description: str) -> str:
    """The skill file: YAML front matter (``name``, ``description``) and the skill body."""
    front = yaml.safe_dump(
        {"name": name, "description": description},
        sort_keys=False, allow_unicode=True, width=1_000_000,
    )
    body = skill if skill.endswith("\n") or not skill else skill + "\n"
    return f"---\n{front}---\n\n{body}"


class CommandModel:
    """A :class:`~skillgrad.models.base.ChatModel` that runs an agent CLI once per request.

    Holds only its options; every call works in its own temporary workspace, so one instance
    may be called from several threads.
    """

    def __init__(self, options: CommandOptions, argv: list[str], env: dict[str, str]) -> None:
        self._options = options
        self._argv = argv  # argv[0] resolved against the config folder when it is a path
        self._env = env
        self._secrets = masked_values(env)
        self._program = Path(options.argv[0]).name
        self.identity: str = "command|" + json.dumps(
            {"argv": options.argv, "skill_file": options.skill_file,
             "output": options.output, "text_field": options.text_field},
            sort_keys=True,
        )
        self.endpoint: str = "command:" + options.argv[0]

    def complete(self, request: ChatRequest) -> Completion:
        parts = non_text_parts(request)
        if parts:
            # The program is handed text (stdin, argv, a task file); an image would be lost.
            raise FatalModelError(
                f"command backend is text only: the request carries {len(parts)} non-text "
                f"part(s) ({', '.join(sorted(set(parts)))}) that {self._program} would never "
                "see; use a vision-capable target (backend: openai_compatible)")
        refuse_tools(request, "command backend")
        opts = self._options
        skill = "\n\n".join(m.text() for m in request.messages if m.role == "system")
        task = task_text(request.messages)
        if request.workspace is not None:  # the caller's working copy, left as the run ends
            stdout = self._run_in(Path(request.workspace), skill, task)
        else:
            workspace = Path(tempfile.mkdtemp(prefix="skillgrad-command-"))
            try:
                stdout = self._run_in(workspace, skill, task)
            finally:
                if opts.keep_workspaces:
                    log.info("command backend: kept workspace %s", workspace)
                else:
                    shutil.rmtree(workspace, ignore_errors=True)
        text, usage = self._parse(stdout)
        if usage is None:  # not reported: estimate from characters, ~4 per token
            usage = Usage(prompt_tokens=(len(skill) + len(task)) // 4,
                          completion_tokens=len(text) // 4)
        return Completion(text=text, usage=usage, finish_reason="stop", model=self._program)

    # ------------------------------------------------------------------------- running

    def _run_in(self, workspace: Path, skill: str, task: str) -> str:
        opts = self._options
        skill_path = workspace / opts.skill_file
        skill_path.parent.mkdir(parents=True, exist_ok=True)
        doc = skill_document(skill, opts.skill_name, opts.skill_description)
        skill_path.write_bytes(doc.encode("utf-8"))
        for rel, source in opts.files.items():
            _copy(source, workspace / rel)
        values = {"task": task, "workspace": str(workspace), "skill_file": str(skill_path),
                  "task_file": str(workspace / TASK_FILE)}
        if any("{task_file}" in arg for arg in self._argv):
            (workspace / TASK_FILE).write_bytes(task.encode("utf-8"))
        argv = [_PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in self._argv]
        stdin = task.encode("utf-8") if opts.input == "stdin" else None
        code, out, err = self._execute(argv, workspace, stdin)
        if code != 0:
            self._raise_for_exit(code, out, err)
        return out.decode("utf-8", errors="replace")

    def _execute(self, argv: list[str], cwd: Path, stdin: bytes | None) -> tuple[int, bytes, bytes]:
        try:
            proc = subprocess.Popen(  # PWD too: some CLIs (OpenCode) take their folder from it
                argv, cwd=cwd, env={**self._env, "PWD": str(cwd)}, shell=False,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group, so a timeout kills it all
            )
        except FileNotFoundError:
            raise FatalModelError(
                f"command backend: program {argv[0]!r} not found"
            ) from None
        except (OSError, ValueError) as exc:  # not executable; a NUL byte in an argument
            raise FatalModelError(f"command backend: cannot start {argv[0]!r}: {exc}") from None
        try:
            out, err = proc.communicate(stdin, timeout=self._options.timeout)
        except subprocess.TimeoutExpired:
            raise TransientModelError(
                f"command {self._program!r} timed out after {self._options.timeout:g} s"
            ) from None
        finally:
            # On timeout or interruption, and for helpers the program left running.
            stop_group(proc)
        return proc.returncode, out, err

    def _clean(self, text: str) -> str:
        return redact_text(text, self._secrets)

    def _raise_for_exit(self, code: int, out: bytes, err: bytes) -> None:
        text = self._clean((err or out).decode("utf-8", errors="replace"))
        tail = text.strip()[-_TAIL:]
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        message = f"command {self._program!r} {how}" + (f": {tail}" if tail else " (no output)")
        if code in self._options.transient_exit_codes:
            raise TransientModelError(message)
        raise FatalModelError(message)

    # ------------------------------------------------------------------------- output

    def _parse(self, stdout: str) -> tuple[str, Usage | None]:
        opts = self._options
        if opts.output == "text":
            return stdout.strip(), None
        if opts.output == "json":
            try:
                event = json.loads(stdout)
            except json.JSONDecodeError:
                raise FatalModelError(f"command {self._program!r}: output is not JSON: "
                                      f"{_excerpt(self._clean(stdout))}") from None
            if not isinstance(event, dict):
                raise FatalModelError(f"command {self._program!r}: output is not a JSON "
                                      f"object: {_excerpt(self._clean(stdout))}")
            events = [event]
        else:
            events = _json_lines(stdout, self._clean)
        texts = [t for t in (_dig(e, opts.text_field) for e in events) if isinstance(t, str)]
        if not texts:
            raise FatalModelError(
                f"command {self._program!r}: no text at {opts.text_field!r} in the "
                f"{opts.output} output: {_excerpt(self._clean(stdout))}"
            )
        usages = [u for u in (_dig(e, opts.usage_field) for e in events) if isinstance(u, dict)]
        usage = sum((_usage(u) for u in usages), Usage()) if usages else None
        return texts[-1].strip(), usage


def _json_lines(stdout: str, clean: Callable[[str], str]) -> list[dict[str, Any]]:
    events = []
    for line in stdout.splitlines():
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:  # CLIs print the odd warning among their events
            log.debug("command backend: skipped a non-JSON line: %s", clean(line)[:200])
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _dig(data: Any, path: str) -> Any:
    """The value at a dotted path (``item.text``, ``choices.0.text``), or None."""
    for part in path.split("."):
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


def _usage(raw: dict[str, Any]) -> Usage:
    def count(*keys: str) -> int:
        for key in keys:
            value = raw.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
        return 0

    # Anthropic reports cache reads and writes beside input_tokens, not inside it. (OpenAI's
    # cached_input_tokens is already part of input_tokens and is not added.)
    prompt = (count("input_tokens", "prompt_tokens") + count("cache_read_input_tokens")
              + count("cache_creation_input_tokens"))
    return Usage(prompt_tokens=prompt, completion_tokens=count("output_tokens", "completion_tokens"))


def _excerpt(text: str, limit: int = 200) -> str:
    text = text.strip()
    if not text:
        return "(empty)"
    return repr(text if len(text) <= limit else text[:limit] + "...")


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the program's whole process group and reap the program."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):  # the group is already gone
        pass
    if proc.returncode is None:
        try:
            proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a helper in its own session holds the pipes
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


def _copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
    else:
        shutil.copy2(source, target)


def _expand(name: str, value: str) -> str:
    def lookup(match: re.Match[str]) -> str:
        var = match.group(1)
        if var not in os.environ:
            raise ConfigError(f"env.{name}: ${{{var}}} is not set in the environment")
        return os.environ[var]

    return _ENV_REF.sub(lookup, value)


class CommandBackend:
    """Registry entry of the agent-CLI target (``backend: command``)."""

    Options = CommandOptions
    accepts_images = False  # the task reaches the program as text only (see build.py)
    accepts_tools = False  # and its reply is text: no native tool calls
    accepts_workspace = True  # it runs the program in a request's folder when one is given

    @classmethod
    def create(cls, options: CommandOptions, base_dir: Path) -> CommandModel:
        env = dict(os.environ)
        env.update({name: _expand(name, value) for name, value in options.env.items()})
        argv = list(options.argv)
        program = argv[0]
        if os.sep in program and not Path(program).is_absolute():
            # cwd is the workspace at run time: a relative path means the config folder.
            argv[0] = program = str((base_dir / program).resolve())
        if shutil.which(program, path=env.get("PATH", os.defpath)) is None:
            raise ConfigError(f"argv[0]: program {options.argv[0]!r} not found on PATH")
        for rel, source in options.files.items():
            path = source if source.is_absolute() else base_dir / source
            if not path.exists():
                raise ConfigError(f"files.{rel}: {path} does not exist")
        files = {rel: (src if src.is_absolute() else (base_dir / src).resolve())
                 for rel, src in options.files.items()}
        resolved = options.model_copy(update={"files": files})
        return CommandModel(resolved, argv, env)
