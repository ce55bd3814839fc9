"""``skillgrad serve``: one model role behind a loopback endpoint that agent CLIs can use. This
module imports without the ``serve`` extra, so that the command can say how to install it;
the web stack is imported when the command runs."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.table import Table

from skillgrad.cli.config import SetOpt
from skillgrad.cli.dashboard import LOOPBACK, address, listen, make_server
from skillgrad.console import console, out_console
from skillgrad.errors import ConfigError, SkillgradError
from skillgrad.models.agent_clis import AGENT_CLIS, MODEL_WINDOW

if TYPE_CHECKING:
    from skillgrad.config import ResolvedConfig

INSTALL = "pip install 'skillgrad[serve]'"
KEY_ENV = "SKILLGRAD_SERVE_KEY"
# The embedded model's window when no config and no --agent says otherwise: an agent CLI's
# first prompt (its instructions and tool list, rendered by Qwen2.5's template) measured 7,216
# tokens (OpenCode 1.18) to 18,884 (Claude Code 2.1), mostly over the training default of
# 8,192; 32,768 is the model's own trained window. With --agent, the CLI's preset says.
AGENT_WINDOW = MODEL_WINDOW


def serve_command(
    config: Annotated[Optional[Path], typer.Argument(  # noqa: UP045 - typer needs it
        help="YAML config whose model section to serve (default: none, the embedded model "
        f"with a {AGENT_WINDOW:,}-token window, which an agent's first prompt needs).",
        show_default=False)] = None,
    role: Annotated[str, typer.Option(
        metavar="ROLE", help="The role section to serve: target or optimizer.")] = "target",
    host: Annotated[str, typer.Option(
        metavar="HOST", help="The address to listen on; any but 127.0.0.1, localhost or ::1 "
        "needs --allow-remote.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="The port (0: any free one).")
                    ] = 8400,
    allow_remote: Annotated[bool, typer.Option(
        "--allow-remote", help="Listen on an address other machines can reach (set a key: "
        f"${KEY_ENV}).")] = False,
    key: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--key", envvar=KEY_ENV, show_envvar=True, show_default=False, metavar="KEY",
        help=f"The API key clients must send (better in ${KEY_ENV}); unset: any key, as "
        "agents send dummies.")] = None,
    record: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--record", metavar="DIR", help="Journal every answered call in DIR/<tag>/calls.jsonl "
        "(a restarted server answers repeated requests from it; --replay reads it).",
        show_default=False)] = None,
    replay: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--replay", metavar="DIR", help="Answer only from the calls recorded in DIR (a run "
        "directory or a --record folder); no model is loaded.", show_default=False)] = None,
    model_name: Annotated[str, typer.Option(
        "--model-name", metavar="NAME", help="The model name the model lists show.")
                          ] = "skillgrad",
    unix_socket: Annotated[Optional[Path], typer.Option(  # noqa: UP045
        "--socket", metavar="PATH", help="Listen on this UNIX socket (mode 0600) instead of a "
        "port: an agent CLI in a network namespace of its own reaches it through a relay "
        "(the agent backend's isolate).", show_default=False)] = None,
    keepalive: Annotated[float, typer.Option(
        "--keepalive", metavar="SECONDS", min=0.05, help="A streamed answer not ready after "
        "SECONDS gets its headers at once and an SSE comment as often until it is.")] = 5.0,
    max_calls: Annotated[Optional[int], typer.Option(  # noqa: UP045
        "--max-calls", metavar="N", min=1, help="An agent's turns (calls with tools) past N "
        "for one rollout tag are answered with words that end its loop, without the model.",
        show_default=False)] = None,
    agent: Annotated[Optional[str], typer.Option(  # noqa: UP045
        "--agent", metavar="CLI", help="The agent CLI this serves (" + ", ".join(AGENT_CLIS)
        + "): an embedded model whose n_ctx no config sets gets a window that holds its "
        "first prompt and turns; a set one too small for it is refused.",
        show_default=False)] = None,
    no_tools: Annotated[bool, typer.Option(
        "--no-tools", help="Offer the model none of the tools a request lists, so that the "
        "agent answers in text only.")] = False,
    set_: SetOpt = None,
) -> None:
    """Serve a model role to agent CLIs on 127.0.0.1: OpenAI Chat Completions and Responses,
    Anthropic Messages and Gemini, streaming and tool calls included. Every call goes through
    skillgrad's client layer (metering, budget, cache, journal); put /r/TAG in an agent's base
    URL (or send X-Skillgrad-Rollout: TAG) to meter and record its calls under TAG."""
    from skillgrad.clients import ROLES, build_clients
    from skillgrad.config import load_config

    if role not in ROLES:
        raise SkillgradError(f"--role {role}: use one of {', '.join(ROLES)}")
    if host not in LOOPBACK and not allow_remote:
        raise SkillgradError(f"--host {host}: not a loopback address; add --allow-remote to "
                             "serve other machines (and set a key in $" + KEY_ENV + ")")
    _require_extra()
    from skillgrad.serve.app import create_app
    from skillgrad.serve.scopes import ClientScopes

    if agent is not None and agent not in AGENT_CLIS:
        raise SkillgradError(f"--agent {agent}: use one of {', '.join(AGENT_CLIS)}")
    resolved = load_config(config, list(set_ or []))
    window = _window(resolved, role, agent)
    if window is not None:
        resolved = load_config(config, [f"model.{role}.n_ctx={window}", *(set_ or [])])
    client = build_clients(resolved, replay=replay, roles=(role,))[role]
    sock = listen(host, port) if unix_socket is None else _listen_unix(unix_socket)
    app = create_app(ClientScopes(client, record), key=key or None, model_name=model_name,
                     count_tokens=getattr(client.model, "count_tokens", None),
                     loopback_only=host in LOOPBACK, no_tools=no_tools,
                     keepalive=keepalive, max_calls=max_calls)
    base = (address(host, sock.getsockname()[1]).rstrip("/") if unix_socket is None
            else f"unix:{unix_socket}")
    backend = "replay" if replay else getattr(resolved.config.model, role).backend
    n_ctx = getattr(resolved.role_options.get(role), "n_ctx", None)
    _print_start(role, backend + (f", n_ctx {n_ctx:,}" if n_ctx and not replay else ""), base,
                 key is not None)
    try:
        make_server(app).run(sockets=[sock])
    finally:
        _print_usage(client.meter.stages.get(role, {}))


def _window(resolved: ResolvedConfig, role: str, agent: str | None) -> int | None:
    """The ``n_ctx`` to give an embedded ``role`` that no config or ``--set`` sized: the agent
    CLI's preset window (:attr:`AgentCLI.window`), or :data:`AGENT_WINDOW` for any agent.
    None when the backend has no window or one is set; a set one smaller than the agent's
    first prompt needs is refused, naming where it was set."""
    options = resolved.role_options.get(role)
    if options is None or "n_ctx" not in type(options).model_fields:
        return None
    key = f"model.{role}.n_ctx"
    if "n_ctx" not in options.model_fields_set:
        return AGENT_CLIS[agent].window if agent else AGENT_WINDOW
    preset = AGENT_CLIS[agent] if agent else None
    n_ctx = int(options.model_dump()["n_ctx"])
    if preset is not None and n_ctx < preset.least_window:
        raise ConfigError(
            f"{key} = {n_ctx} ({resolved.origin(key)}): {agent}'s first prompt alone "
            f"is about {preset.first_prompt:,} tokens; set at least {preset.least_window:,} "
            f"(or leave it unset: {preset.window:,})")
    return None


def _listen_unix(path: Path) -> socket.socket:
    """A UNIX socket at ``path`` that only this user may connect to, listening; a stale
    socket file is replaced, anything else there is refused."""
    if path.exists() and not path.is_socket():
        raise SkillgradError(f"--socket {path}: exists and is not a socket")
    path.unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)  # created 0600: no moment in which another user may connect
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        raise SkillgradError(f"--socket {path}: cannot listen there "
                             f"({exc.strerror or exc})") from None
    finally:
        os.umask(old)
    sock.listen(128)
    return sock


def _require_extra() -> None:
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise SkillgradError(f"skillgrad serve needs {exc.name or 'its web stack'}: "
                             f"{INSTALL}") from None


def _print_start(role: str, backend: str, base: str, keyed: bool) -> None:
    out_console.print(f"serving the {role} model ({backend}) at {base} (Ctrl-C stops it)",
                      markup=False)
    for wire, url, who in (
            ("OpenAI Chat Completions", f"{base}/v1", "OpenCode, Copilot CLI"),
            ("OpenAI Responses", f"{base}/v1", 'Codex CLI: a model provider with wire_api = '
             '"responses"'),
            ("Anthropic Messages", base, "Claude Code: ANTHROPIC_BASE_URL"),
            ("Gemini", base, "Gemini CLI: GOOGLE_GEMINI_BASE_URL")):
        out_console.print(f"  {wire:<24} {url:<{len(base) + 4}} {who}", markup=False,
                          highlight=False)
    out_console.print(f"  tag a rollout: {base}/r/TAG in place of {base} (or the header "
                      f"X-Skillgrad-Rollout: TAG); key: {'required' if keyed else 'any'}",
                      markup=False)


def _print_usage(stages: Mapping[str, object]) -> None:
    if not stages:
        return
    table = Table("rollout", "calls", "prompt tokens", "completion tokens", "replayed",
                  "cached", title="calls served")
    for stage, meter in sorted(stages.items()):
        table.add_row(stage, *(str(getattr(meter, f)) for f in (
            "calls", "prompt_tokens", "completion_tokens", "replayed", "cached")))
    console.print(table)
