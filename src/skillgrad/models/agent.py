"""The ``agent`` backend: a real coding-agent CLI (Codex, Claude Code, OpenCode, Copilot CLI,
Gemini CLI) as the target, offline, with the skill placed where the agent reads it and the
agent's own session log read back as the trajectory.

In deep-learning terms the forward pass is a black-box module that acts: it reads files, runs
commands and edits the workspace. skillgrad trains its skill; the agent's brain is a model
skillgrad serves to it (``serve``: a config whose target ``skillgrad serve`` answers on a
private UNIX socket) or an endpoint already running on loopback (``endpoint``).

Per request: a fresh HOME holds the CLI's config (pointing it at the endpoint, with updates
and telemetry off) and the skill, placed by ``placement``:

* ``skill``: an agent skill (``<skills>/<name>/SKILL.md`` in the CLI's user skill folder).
  Agents list a skill by name and description and read its body only when they decide to,
  so whether they did is recorded per request (``trace.skill_loaded``);
* ``instructions``: the user memory file the CLI puts into every request (``AGENTS.md``,
  ``CLAUDE.md``, ``GEMINI.md``, ...): the body always reaches the model;
* ``both``.

A skill that starts with YAML front matter gives its own ``name`` and ``description`` (the
trigger that decides whether an agent loads it, trainable like the body); otherwise the
options' are used. The CLI runs in the request's workspace (an environment's worktree) or an
empty folder, by default in a network namespace of its own with loopback only
(:mod:`skillgrad.models.netns`), so nothing it opens can leave the machine. Afterwards its
session log is read with the same adapters Sleep harvests with (:mod:`skillgrad.traces`), and
the served calls of this request (tagged ``/r/<tag>``) give its calls and tokens.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from skillgrad.agentskills import SkillFileError, parse_skill, render_skill, validate_skill
from skillgrad.errors import ConfigError, FatalModelError, TransientModelError
from skillgrad.models.agent_clis import AGENT_CLIS, AgentCLI
from skillgrad.models.agent_trace import (
    read_trace,
    reply_from_stdout,
    served_usage,
    trace_reply,
)
from skillgrad.models.base import non_text_parts, refuse_tools
from skillgrad.models.command import stop_group, task_text
from skillgrad.models.messages import ChatRequest, Completion, Usage
from skillgrad.models.served import ServedModel
from skillgrad.package import split_package
from skillgrad.redact import masked_values, redact_text

__all__ = ["AgentBackend", "AgentModel", "AgentOptions"]

CLI = Literal["codex", "claude", "opencode", "copilot", "gemini"]
Placement = Literal["skill", "instructions", "both"]
INNER_PORT = 8400  # the relay's port inside the CLI's own network namespace
# Where an isolated CLI finds its HOME and its work folder (mounted there in its own mount
# namespace): the same paths for every task, so the prompt prefix it sends is the same too.
FIXED = Path(tempfile.gettempdir()) / f"skillgrad-agent-{os.getuid()}"
_KEEP_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR")
_TAIL = 300


class AgentOptions(BaseModel):
    """Config keys of the ``agent`` backend (``model.target: {backend: agent, cli: ...}``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cli: CLI = Field(description="which agent CLI: codex, claude, opencode, copilot, gemini")
    binary: str | None = Field(None, description="the program, a path or a name on PATH "
                               "(default: the CLI's own name)")
    serve: Path | None = Field(None, description="a skillgrad config whose target model is "
                               "served to the agent (skillgrad starts it on a private socket)")
    endpoint: str | None = Field(None, description="or: a loopback endpoint already serving "
                                 "(http://127.0.0.1:PORT, or unix:PATH of skillgrad serve "
                                 "--socket)")
    placement: Placement = Field("skill", description="skill: an agent skill (loaded on "
                                 "demand); instructions: the memory file of every request; "
                                 "both")
    skill_name: str = Field("skillgrad-skill", description="the skill's name, unless its "
                            "front matter names it")
    description: str = Field(
        "Instructions for this kind of task, learned by skillgrad. Use them for every task.",
        description="the skill's description, unless its front matter gives one")
    timeout: float = Field(600.0, gt=0, description="seconds one request may take")
    isolate: bool = Field(True, description="run the CLI in a network namespace of its own, "
                          "loopback only (needs serve, or an endpoint on a unix: socket)")
    tools: bool = Field(True, description="false: the served model is offered no tools, so "
                        "the agent answers in text only (needs serve)")
    max_calls: int | None = Field(30, ge=1, description="with serve: an agent's turns past "
                                  "this many in one task are answered with words that end "
                                  "its loop, not by the model (None: no limit)")
    trace: bool = Field(True, description="put the agent's own turns, tool calls and "
                        "outputs into the trajectory reflection reads (false: only its final "
                        "answer; the skill loads, calls and files changed are recorded "
                        "either way)")
    extra_args: list[str] = Field(default_factory=list, description="appended to the CLI's "
                                  "arguments")
    role: Literal["target", "optimizer"] = Field(
        "target", description="target: the system message is the skill, placed as "
        "placement says; optimizer: the whole request is the agent's prompt (nothing is "
        "placed) and a reply format the caller asks for is stated in it")

    @field_validator("endpoint")
    @classmethod
    def _loopback(cls, value: str | None) -> str | None:
        if value is None or value.startswith("unix:"):
            return value
        parts = urlsplit(value)
        if parts.scheme != "http" or parts.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError("must be http://127.0.0.1:PORT (or localhost, ::1) or unix:PATH: "
                             "an agent target is never pointed at a vendor or another machine")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _one_brain(self) -> AgentOptions:
        if (self.serve is None) == (self.endpoint is None):
            raise ValueError("set exactly one of serve (a config skillgrad serves to the "
                             "agent) and endpoint (a loopback endpoint already serving)")
        if self.isolate and self.endpoint is not None and not self.endpoint.startswith("unix:"):
            raise ValueError("isolate: a CLI in its own network namespace reaches no TCP "
                             "port outside it; use serve, an endpoint unix:PATH (skillgrad "
                             "serve --socket PATH), or isolate: false")
        if not self.isolate and (self.endpoint or "").startswith("unix:"):
            raise ValueError("endpoint unix:PATH is reached through the relay of isolate; "
                             "set isolate: true, or give an http:// endpoint")
        if not self.tools and self.serve is None:
            raise ValueError("tools: false needs serve (skillgrad then offers the model no "
                             "tools)")
        return self


class AgentModel:
    """A :class:`~skillgrad.models.base.ChatModel` that runs one agent CLI per request."""

    def __init__(self, options: AgentOptions, preset: AgentCLI, binary: str,
                 served: ServedModel | None, identity: str) -> None:
        self._options = options
        self._preset = preset
        self._binary = binary
        self._served = served
        self._tags = itertools.count(1)
        self._lock = threading.Lock()
        self.identity = identity
        self.endpoint = f"agent:{options.cli}"

    @property
    def served(self) -> ServedModel | None:
        """The model skillgrad serves to the agent (None with an endpoint of one's own)."""
        return self._served

    def close(self) -> None:
        """Stop the served model (also done at exit)."""
        if self._served is not None:
            self._served.stop()

    def complete(self, request: ChatRequest) -> Completion:
        parts = non_text_parts(request)
        if parts:
            raise FatalModelError(f"agent backend: the request carries {len(parts)} non-text "
                                  f"part(s), which {self._options.cli} would never see")
        refuse_tools(request, "agent backend")
        if self._options.role == "optimizer":
            skill, task = "", optimizer_prompt(request)
        else:
            skill = "\n\n".join(m.text() for m in request.messages if m.role == "system")
            task = task_text(request.messages)
        with self._lock:
            tag = f"{self._options.cli}-{os.getpid()}-{next(self._tags)}"
        with tempfile.TemporaryDirectory(prefix="skillgrad-agent-") as scratch:
            home = Path(scratch) / "home"
            home.mkdir()
            work = Path(request.workspace) if request.workspace else Path(scratch) / "work"
            work.mkdir(parents=True, exist_ok=True)
            env = self._environment(home, tag)
            name = self._place(skill, home) if self._options.role == "target" else ""
            stdout = self._run(task, work, home, env)
            trace = read_trace(self._preset, home, _outside(env, home), name,
                               self._options.placement != "instructions" and bool(name))
        calls, usage = served_usage(self._served.journal(tag)) if self._served else (0, None)
        text = trace_reply(trace)
        if not self._options.trace:  # recorded (loads, calls, files), not shown to reflection
            trace = trace.model_copy(update={"messages": ()})
        if text is None:
            text = reply_from_stdout(self._options.cli, stdout)
        if usage is None:  # not served by skillgrad: estimated, ~4 characters a token
            usage = Usage(prompt_tokens=(len(skill) + len(task)) // 4,
                          completion_tokens=len(text) // 4)
        trace = trace.model_copy(update={"calls": calls, "placement": self._options.placement})
        return Completion(text=text, usage=usage, model=self._options.cli, trace=trace)

    # ------------------------------------------------------------------ one request

    def _environment(self, home: Path, tag: str) -> dict[str, str]:
        opts = self._options
        if opts.isolate:  # the relay in the CLI's namespace leads to the socket
            base = f"http://127.0.0.1:{INNER_PORT}"
        else:
            base = self._served.url if self._served is not None else str(opts.endpoint)
        env = {k: os.environ[k] for k in _KEEP_ENV if k in os.environ}
        env.update({"NO_COLOR": "1", "TERM": "dumb"})
        prepared = self._preset.prepare(home, f"{base}/r/{tag}")
        if opts.isolate:  # as the CLI sees its HOME: at the same place every time
            prepared = {k: v.replace(str(home), str(FIXED / "home")) for k, v in prepared.items()}
        env.update(prepared)
        return env

    def _place(self, skill: str, home: Path) -> str:
        """Write the skill where the CLI reads it; the skill's name. A skill package is placed
        as its folder: ``SKILL.md`` and the files beside it (in the memory file, its body
        and then each file under a heading of its path)."""
        opts = self._options
        package = split_package(skill)
        skill = package.main
        front, body = split_front_matter(skill)
        name = str(front.get("name") or opts.skill_name)
        front = {"name": name, "description": front.get("description") or opts.description}
        problems = [p for p in validate_skill(front, body, name) if not p.startswith("warn")]
        if problems:
            raise FatalModelError(f"agent backend: the skill cannot be placed: {problems[0]}")
        if opts.placement in ("skill", "both"):
            path = home / self._preset.skills / name / "SKILL.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render_skill(front, body), encoding="utf-8")
            for rel, text in package.files.items():
                (path.parent / rel).parent.mkdir(parents=True, exist_ok=True)
                (path.parent / rel).write_text(text, encoding="utf-8")
        if opts.placement in ("instructions", "both"):
            path = home / self._preset.memory
            path.parent.mkdir(parents=True, exist_ok=True)
            files = "".join(f"\n## {rel}\n\n{text.strip()}\n"
                            for rel, text in package.files.items())
            path.write_text(f"# {name}\n\n{body.strip()}\n{files}", encoding="utf-8")
        return name

    def _run(self, task: str, work: Path, home: Path, env: dict[str, str]) -> str:
        opts = self._options
        argv = [*self._preset.command(self._binary, task), *opts.extra_args]
        if opts.isolate:
            socket = self._served.socket if self._served else str(opts.endpoint)[5:]
            for mount in ("home", "work"):
                (FIXED / mount).mkdir(parents=True, exist_ok=True)
            argv = ["unshare", "-rnm", sys.executable, "-m", "skillgrad.models.netns", socket,
                    str(INNER_PORT), "--bind", str(home), str(FIXED / "home"), "--bind",
                    str(work), str(FIXED / "work"), "--cd", str(FIXED / "work"), "--", *argv]
        env = {**env, "PWD": str(FIXED / "work" if opts.isolate else work)}  # OpenCode reads it
        try:
            proc = subprocess.Popen(argv, cwd=work, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
        except OSError as exc:
            raise FatalModelError(f"agent backend: cannot start {argv[0]!r}: {exc}") from None
        try:
            out, err = proc.communicate(timeout=opts.timeout)
        except subprocess.TimeoutExpired:
            raise TransientModelError(f"{opts.cli} timed out after {opts.timeout:g} s") \
                from None
        finally:
            stop_group(proc)
        if proc.returncode != 0:
            secrets = masked_values(env)
            tail = redact_text((err or out).decode("utf-8", "replace"), secrets).strip()
            raise TransientModelError(f"{opts.cli} exited with code {proc.returncode}: "
                                      f"{tail[-_TAIL:] or '(no output)'}")
        return out.decode("utf-8", "replace")


def _outside(env: dict[str, str], home: Path) -> dict[str, str]:
    """The CLI's environment as seen from outside its namespace (where its HOME really is)."""
    return {k: v.replace(str(FIXED / "home"), str(home)) for k, v in env.items()}


def optimizer_prompt(request: ChatRequest) -> str:
    """The whole request as one prompt (each message headed by its role), and the JSON the
    caller asks for: an agent CLI has no structured-output switch, so its reply is read by
    the caller's tolerant JSON reading."""
    text = "\n\n".join(f"[{m.role}]\n{m.text()}" for m in request.messages)
    if request.json_schema is not None:
        schema = json.dumps(request.json_schema)
        text += ("\n\nReply with one JSON object only, no other text, matching this JSON "
                 f"schema:\n{schema}")
    return text


def split_front_matter(skill: str) -> tuple[dict[str, object], str]:
    """(front matter, body) of a skill; no front matter: ({}, the skill)."""
    if not skill.startswith("---"):
        return {}, skill
    try:
        front, body, _ = parse_skill(skill, "the skill")
    except SkillFileError as exc:
        raise FatalModelError(f"agent backend: {exc}") from None
    return front, body


class AgentBackend:
    """Registry entry of the agent-CLI target (``backend: agent``)."""

    Options = AgentOptions
    accepts_images = False
    accepts_tools = False  # the agent has its own tools; a request brings none
    accepts_workspace = True  # it works in a request's folder when one is given

    @classmethod
    def create(cls, options: AgentOptions, base_dir: Path) -> AgentModel:
        preset = AGENT_CLIS[options.cli]
        program = options.binary or preset.binary
        if os.sep in program and not Path(program).is_absolute():
            program = str((base_dir / program).resolve())
        found = shutil.which(program, path=search_path())
        if found is None:
            raise ConfigError(f"binary: {program!r} not found on PATH (install the CLI: "
                              f"{_PACKAGES[options.cli]})")
        if options.isolate and subprocess.run(["unshare", "-rnm", "true"], capture_output=True,
                                              check=False).returncode != 0:
            raise ConfigError("isolate: this machine does not allow a network namespace "
                              "(unshare -rn); set isolate: false to run the CLI with its "
                              "telemetry and update switches off only")
        digest = ""
        served = None
        if options.serve is not None:
            config = options.serve if options.serve.is_absolute() else base_dir / options.serve
            if not config.is_file():
                raise ConfigError(f"serve: {config} does not exist")
            digest = hashlib.sha256(config.read_bytes()).hexdigest()[:16]
            served = ServedModel.start(config, no_tools=not options.tools,
                                       tcp=not options.isolate, max_calls=options.max_calls,
                                       agent=options.cli)
        identity = "agent|" + json.dumps(
            {"cli": options.cli, "placement": options.placement, "name": options.skill_name,
             "description": options.description, "serve": digest,
             "endpoint": options.endpoint, "tools": options.tools,
             "role": options.role, "max_calls": options.max_calls,
             "extra_args": options.extra_args}, sort_keys=True)
        return AgentModel(options, preset, found, served, identity)


_PACKAGES = {"codex": "npm install -g @openai/codex", "claude": "npm install -g "
             "@anthropic-ai/claude-code", "opencode": "npm install -g opencode-ai",
             "copilot": "npm install -g @github/copilot", "gemini": "npm install -g "
             "@google/gemini-cli"}


def search_path() -> str:
    """PATH, then the folders of SKILLGRAD_AGENT_CLIS (where CI installs the CLIs)."""
    extra = os.environ.get("SKILLGRAD_AGENT_CLIS", "")
    return os.pathsep.join(p for p in (os.environ.get("PATH", os.defpath), extra) if p)
