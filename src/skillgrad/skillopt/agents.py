"""SkillOpt's agent-CLI backends, as skillgrad's ``agent`` backend (``command`` for Cursor).

SkillOpt (``skillopt/model/backend_config.py``, ``codex_backend.py``, ``codex_harness.py``,
``claude_backend.py``, ``copilot_backend.py``, ``engine/trainer.py``) drives five CLIs, each
talking to its vendor's hosted models with the user's own login:

* ``codex_exec`` (either role): ``codex exec``; as the target, in a workspace holding the task
  and the skill (``.agents/skills/skillopt-target/SKILL.md``), with its sandbox, approval
  policy, network and web-search switches, reasoning effort and profile;
* ``claude_code_exec`` (target): Claude Code (its SDK, else ``claude -p``) in such a
  workspace, with ``--effort`` and ``--max-thinking-tokens``;
* ``claude_chat`` (either role): ``claude -p`` as a chat model (no tools; ``--effort`` from
  ``model.reasoning_effort``; 300 s a call);
* ``copilot_chat`` (either role): ``copilot -p`` as a chat model (an empty tool allowlist;
  ``copilot_chat_timeout`` s a call); ``copilot_exec`` (target): ``copilot -p`` as an agent
  in the workspace;
* ``cursor_exec`` (target): ``cursor-agent -p --output-format stream-json`` in Ask mode.

Each becomes ``backend: agent`` with the preset of that CLI (``codex``, ``claude``,
``copilot``): the path is ``binary`` (config key, then SkillOpt's environment variables), the
effort and thinking flags SkillOpt passes and Codex's sandbox and approval policy are
``extra_args`` for the same CLI, ``codex_trace_to_optimizer`` is ``trace``. A chat use (and
every optimizer) answers without tools (``tools: false``); the skill reaches every request
(``placement: instructions``), as SkillOpt's prompt has the agent read it before answering.
What has no meaning for a CLI run offline against a local model (the hosted model's name,
profiles of the user's own CLI config, the SDK, web search, Copilot's home) is a note.

skillgrad runs an agent against a model on this machine only, never the vendor's, so the
translated role needs ``serve`` (a skillgrad config whose target model is served to the CLI)
or ``endpoint`` (a loopback endpoint): SkillOpt's config cannot say which, so the user gives
it as the role's section beside SkillOpt's keys (``--set 'model.target={serve: FILE}'``, or
``model: {target: {serve: FILE}}`` in a file with ``_base_``), and without one the config is an
error naming both. Cursor Agent has no local-endpoint setting: ``cursor_exec`` becomes the
``command`` backend running ``cursor-agent`` as SkillOpt does (Cursor's hosted models, the
user's Cursor login).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from skillgrad.errors import ConfigError
from skillgrad.skillopt.notes import NoteKind

if TYPE_CHECKING:
    from skillgrad.skillopt.role import Role

# SkillOpt's backend -> the agent preset that runs its CLI.
AGENT_CLI = {"codex_exec": "codex", "claude_code_exec": "claude", "claude_chat": "claude",
             "copilot_chat": "copilot", "copilot_exec": "copilot"}
# The backends that use the CLI as a chat model (no tools).
CHAT = ("claude_chat", "copilot_chat")
# The backends translated into a skillgrad role section that the user completes.
SECTION = (*AGENT_CLI, "cursor_exec")
# Where SkillOpt's exec harnesses put the skill: .agents/skills/<this>/SKILL.md.
SKILL_NAME = "skillopt-target"
CODEX_SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
CURSOR_SANDBOXES = ("enabled", "disabled")
_SENTINELS = ("gpt-5.4", "gpt-5.5")  # SkillOpt's OpenAI defaults, swapped per backend
_CLAUDE_EFFORTS = ("low", "medium", "high", "max")
_CLAUDE_CHAT_EFFORTS = ("low", "medium", "high", "xhigh", "max")
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_OFFLINE = "the hosted model SkillOpt's {backend} asks for; here the agent asks the model " \
           "behind serve/endpoint (model.{role}.model names another)"


def translate(r: Role) -> None:
    """Write role ``r`` (a SkillOpt agent-CLI backend) as an ``agent`` or ``command``
    section."""
    if r.backend == "cursor_exec":
        _cursor(r)
        return
    cli = AGENT_CLI[r.backend]
    r.assign("backend", ("agent", r.key))
    r.assign("cli", (cli, r.key))
    chat = r.backend in CHAT or r.role == "optimizer"
    if chat:
        r.assign("tools", (False, f"SkillOpt's {r.backend} {r.role}: the CLI answers without "
                                  "tools"))
    r.assign("placement", ("instructions", "SkillOpt has the agent read the skill before "
                                           "every answer"))
    if not chat:
        r.assign("skill_name", (SKILL_NAME, "SkillOpt's skill folder .agents/skills/"
                                            f"{SKILL_NAME}"))
    args: list[str] = []
    sources: list[str] = []
    {"codex_exec": _codex, "claude_code_exec": _claude_code, "claude_chat": _claude_chat,
     "copilot_chat": _copilot, "copilot_exec": _copilot}[r.backend](r, args, sources)
    if args:
        r.work.derive(r.prefix + "extra_args", args,
                      "SkillOpt's " + ", ".join(dict.fromkeys(sources)))
    if r.role == "target":
        _trace(r)
    _name_note(r)


def require_brain(r: Role) -> None:
    """Refuse an agent role with neither ``serve`` nor ``endpoint`` (one line)."""
    out = r.work.out
    if r.backend not in AGENT_CLI or out.get(r.prefix + "serve") or \
            out.get(r.prefix + "endpoint"):
        return
    served = (f"--set 'model.{r.role}={{serve: FILE}}' (a skillgrad config whose target "
              "model is served to it)")
    other = (f" or --set 'model.{r.role}={{endpoint: unix:PATH}}' (skillgrad serve --socket "
             "PATH)" if out.get(r.prefix + "tools") is not False else
             " (an agent without tools needs serve)")
    raise r.work.refuse(
        r.key, f"SkillOpt's {r.backend} runs {AGENT_CLI[r.backend]} against its vendor's "
        "hosted models; skillgrad runs it against a model on this machine: give the role "
        f"as a section beside SkillOpt's keys, {served}{other}")


# ----------------------------------------------------------------------------- helpers


def _binary(r: Role, keys: tuple[str, ...], env: tuple[str, ...]) -> None:
    found = r.config(*keys) or r.environ(*env)
    if found is None:
        return  # the preset's own program
    value = str(found[0]).strip()
    if os.sep in value and not os.path.isabs(value):
        value = str(r.work.path(value))  # SkillOpt runs from its checkout's root
    r.assign("binary", (value, found[1]))


def _flag(r: Role, found: tuple[Any, str], flags: list[str], args: list[str],
          sources: list[str]) -> None:
    """Append ``flags`` to the extra arguments, noting the key they come from."""
    args.extend(flags)
    if found[1].startswith("model."):
        sources.append(found[1])
        r.note(found[1], "mapped", "the same flag of the same CLI",
               f"model.{r.role}.extra_args: {' '.join(flags)}")
    else:
        sources.append(found[1].removeprefix("SkillOpt's "))


def _bool(r: Role, key: str, env: str) -> tuple[bool, str]:
    """A boolean as SkillOpt's Codex settings read one: the key, else the variable, else
    false; anything but a boolean word is an error, as there."""
    value: Any = None
    source = f"model.{key}"
    if r.work.has(source):
        r.read.add(source)
        value = r.work.peek(source)
    if value is None:
        value, source = r.work.environ.get(env), f"${env}"
        if value is None:
            return False, "SkillOpt's default"
    if isinstance(value, bool):
        return value, source
    text = str(value).strip().lower()
    if text in _TRUE or text in _FALSE:
        return text in _TRUE, source
    raise ConfigError(f"{_where(r, source)}: {key}: expected true or false (got {value!r})")


def _where(r: Role, source: str) -> str:
    return source if source.startswith("$") else r.work.at(source)


def _optional(r: Role, key: str, reason: str, kind: NoteKind = "ignored") -> None:
    """A key read only to be named: empty is unset, else ``reason``."""
    found = r.present(key)
    if found is None:
        return
    if found[0] in ("", None):
        r.note(found[1], "inert", "empty: unset")
    else:
        r.note(found[1], kind, reason)


def _name_note(r: Role) -> None:
    name, source = r.model_name()
    if not source:
        return
    if r.backend == "copilot_chat":
        r.note(source, "inert", f"copilot_chat asks for copilot_chat_{r.role}_model, not this")
    elif name:
        r.note(source, "differs", _OFFLINE.format(backend=r.backend, role=r.role))
    else:
        r.note(source, "inert", "empty: unset")


def _sdk(r: Role, key: str, what: str) -> None:
    found = r.present(key)
    if found is None:
        return
    mode = str(found[0] or "auto").strip().lower()
    if mode in ("0", "false", "no", "off", "cli"):
        r.note(found[1], "inert", "SkillOpt runs the CLI, as here")
    else:
        r.note(found[1], "differs", f"SkillOpt tries the {what} SDK first (a structured "
               "answer); skillgrad runs the CLI")


def _trace(r: Role) -> None:
    if r.backend == "codex_exec":
        found = r.present("codex_trace_to_optimizer")
        if found is not None and found[0] not in ("", None):
            on = found[0] is True or str(found[0]).strip().lower() in _TRUE
            r.assign("trace", (on, found[1]))
            return
        r.assign("trace", (False, "SkillOpt's default (no codex_trace_to_optimizer)"))
        return
    r.assign("trace", (False, f"SkillOpt shows its optimizer no trace of {r.backend} runs "
                              "(codex_trace_to_optimizer is read for codex_exec only)"))


# ----------------------------------------------------------------------------- the CLIs


def _codex(r: Role, args: list[str], sources: list[str]) -> None:
    _binary(r, ("codex_exec_path", "codex_path", "codex_cli_bin", "codex_bin"),
            ("CODEX_EXEC_PATH", "CODEX_CLI_BIN", "CODEX_PATH"))
    sandbox = (r.config("codex_exec_sandbox", "sandbox", "codex_sandbox")
               or r.environ("CODEX_EXEC_SANDBOX", "CODEX_SANDBOX_MODE", "CODEX_SANDBOX")
               or ("workspace-write", "SkillOpt's default sandbox"))
    value = str(sandbox[0]).strip()
    if value not in CODEX_SANDBOXES:
        raise ConfigError(f"{_where(r, sandbox[1])}: {sandbox[1]}: Codex sandbox {value!r} "
                          f"(allowed: {', '.join(CODEX_SANDBOXES)})")
    approval = (r.config("codex_exec_approval_policy")
                or r.environ("CODEX_EXEC_APPROVAL_POLICY") or ("never", "SkillOpt's default"))
    if r.role == "optimizer":
        effort = (r.config("reasoning_effort", "codex_exec_reasoning_effort")
                  or r.environ("CODEX_EXEC_REASONING_EFFORT") or ("none", "default"))
        for found in (sandbox, approval):
            if found[1].startswith("model."):
                r.note(found[1], "inert", "the optimizer's agent has no tools here")
    else:
        effort = (r.config("codex_exec_reasoning_effort")
                  or r.environ("CODEX_EXEC_REASONING_EFFORT") or ("none", "default"))
        _flag(r, (value, sandbox[1]), ["--sandbox", value], args, sources)
        policy = str(approval[0]).strip()
        if policy != "never":
            _flag(r, (policy, approval[1]), ["-c", f'approval_policy="{policy}"'], args,
                  sources)
        elif approval[1].startswith("model."):
            r.note(approval[1], "inert", "never: codex exec asks no one, as here")
    level = str(effort[0]).strip().lower()
    if level not in ("", "none"):
        _flag(r, (level, effort[1]), ["-c", f'model_reasoning_effort="{level}"'], args,
              sources)
    elif effort[1].startswith("model."):
        r.note(effort[1], "inert", "none: no reasoning effort is sent")
    network = _bool(r, "codex_exec_network_access", "CODEX_EXEC_NETWORK_ACCESS")
    search = _bool(r, "codex_exec_web_search", "CODEX_EXEC_WEB_SEARCH")
    for (on, source), what in ((network, "the network"), (search, "web search")):
        if not source.startswith("model."):
            continue
        if on and r.role == "target":
            r.note(source, "ignored", f"the agent runs loopback only here (isolate: true), "
                   f"without {what}; model.target.isolate: false lets its commands out")
        else:
            r.note(source, "inert", f"no {what} for the agent, as here")
    _optional(r, "codex_exec_profile", "a profile of your own Codex config; skillgrad runs "
              "codex with a config of its own, pointed at the endpoint")
    _optional(r, "codex_exec_full_auto", "SkillOpt ignores it (deprecated)", "inert")
    _sdk(r, "codex_exec_use_sdk", "Codex")
    if r.role == "optimizer":
        r.note(r.key, "differs", "SkillOpt's codex_exec optimizer runs in its working "
               "directory with the sandbox's tools; skillgrad's optimizer agent has none")


def _claude_code(r: Role, args: list[str], sources: list[str]) -> None:
    found = r.present("claude_code_exec_path")
    if found is not None and str(found[0] or "").strip():
        _binary(r, ("claude_code_exec_path",), ())
    elif found is not None:
        r.note(found[1], "inert", "empty: claude")
    effort = r.present("claude_code_exec_effort") or r.config("reasoning_effort") or (
        "medium", "SkillOpt's default effort")
    level = str(effort[0] or "medium").strip().lower() or "medium"
    level = {"xhigh": "max", "off": "", "none": ""}.get(level, level)
    if level and level not in _CLAUDE_EFFORTS:
        level = "medium"  # SkillOpt's reading of any other word
    if level:
        _flag(r, (level, effort[1]), ["--effort", level], args, sources)
    elif effort[1].startswith("model."):
        r.note(effort[1], "inert", "no effort flag, as SkillOpt sends none")
    tokens = r.present("claude_code_exec_max_thinking_tokens") or (
        16384, "SkillOpt's default thinking tokens")
    try:
        count = max(0, int(str(tokens[0]).strip())) if tokens[0] is not None else 16384
    except ValueError:
        count = 16384  # SkillOpt's reading of a value that is not a number
    if count > 0:
        _flag(r, (count, tokens[1]), ["--max-thinking-tokens", str(count)], args, sources)
    elif tokens[1].startswith("model."):
        r.note(tokens[1], "inert", "0: no thinking-token cap is sent")
    _optional(r, "claude_code_exec_profile", "SkillOpt's CLI path turns Bedrock off and "
              "names the profile in the system prompt; not reproduced")
    _sdk(r, "claude_code_exec_use_sdk", "Claude Agent")


def _claude_chat(r: Role, args: list[str], sources: list[str]) -> None:
    _binary(r, (), ("CLAUDE_CLI_BIN",))
    effort = r.config("reasoning_effort")
    if effort is not None:
        level = str(effort[0]).strip().lower()
        if level in _CLAUDE_CHAT_EFFORTS:
            _flag(r, (level, effort[1]), ["--effort", level], args, sources)
    r.assign("timeout", (300.0, "SkillOpt's claude_chat: 300 s a call"))


def _copilot(r: Role, args: list[str], sources: list[str]) -> None:
    del args, sources  # Copilot takes no flag from SkillOpt's keys
    _binary(r, ("copilot_exec_path",), ("COPILOT_EXEC_PATH",))
    _optional(r, "copilot_exec_home", "skillgrad gives Copilot a home of its own "
              "(COPILOT_HOME) for every request", "differs")
    if r.backend == "copilot_exec":
        found = r.present("copilot_exec_allow_all_tools")
        if found is not None:
            r.note(found[1], "differs", "skillgrad's Copilot preset allows every tool (the "
                   "agent runs loopback only); SkillOpt allows them for file-edit rollouts "
                   "with this on")
        return
    model = r.present(f"copilot_chat_{r.role}_model")
    if model is not None:
        r.note(model[1], "inert" if model[0] in ("", None) else "differs",
               "empty: unset" if model[0] in ("", None) else
               _OFFLINE.format(backend="copilot_chat", role=r.role))
    timeout = (r.config("copilot_chat_timeout") or r.environ("COPILOT_CHAT_TIMEOUT")
               or (600, "SkillOpt's default: 600 s a call"))
    text = str(timeout[0]).strip()
    if not text.isdigit() or int(text) <= 0:
        raise ConfigError(f"{_where(r, timeout[1])}: {timeout[1]}: expected a whole number of "
                          f"seconds > 0 (got {timeout[0]!r})")
    r.assign("timeout", (float(text), timeout[1]))


def _cursor(r: Role) -> None:
    r.assign("backend", ("command", r.key))
    binary = (r.config("cursor_exec_path") or r.environ("CURSOR_EXEC_PATH")
              or ("cursor-agent", "SkillOpt's default"))
    program = str(binary[0]).strip()
    if os.sep in program and not os.path.isabs(program):
        program = str(r.work.path(program))
    sandbox = (r.config("cursor_exec_sandbox") or r.environ("CURSOR_EXEC_SANDBOX")
               or ("enabled", "SkillOpt's default"))
    mode = str(sandbox[0]).strip().lower()
    if mode not in CURSOR_SANDBOXES:
        raise ConfigError(f"{_where(r, sandbox[1])}: {sandbox[1]}: Cursor sandbox {mode!r} "
                          f"(allowed: {', '.join(CURSOR_SANDBOXES)})")
    name, source = r.model_name()
    model = "composer-2.5" if not name or name in _SENTINELS else name
    argv = [program, "-p", "--output-format", "stream-json", "--trust", "--workspace",
            "{workspace}", "--sandbox", mode, "--mode", "ask", "--model", model]
    used = [s for s in (binary[1], sandbox[1], source) if s.startswith("model.")]
    r.work.derive(r.prefix + "argv", argv, "SkillOpt's cursor_exec"
                  + (f" ({', '.join(used)})" if used else ""))
    for key in used:
        r.note(key, "mapped", "in cursor-agent's arguments, as SkillOpt runs it",
               f"model.{r.role}.argv")
    r.assign("input", ("stdin", "SkillOpt's cursor_exec: the prompt on stdin"))
    r.assign("output", ("jsonl", "SkillOpt's cursor_exec: stream-json"))
    r.assign("text_field", ("result", "SkillOpt's cursor_exec: the result event"))
    r.assign("skill_file", (f".agents/skills/{SKILL_NAME}/SKILL.md",
                            "SkillOpt's cursor_exec workspace"))
    r.assign("skill_name", (SKILL_NAME, "SkillOpt's cursor_exec workspace"))
    r.note(r.key, "differs", "cursor-agent runs with your Cursor login against Cursor's "
           "hosted models, as in SkillOpt (it has no local-endpoint setting); the task goes "
           "on stdin as the environment words it, without SkillOpt's preamble to read the "
           "skill (Cursor lists .agents/skills itself)")
