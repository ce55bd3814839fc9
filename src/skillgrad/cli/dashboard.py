"""``skillgrad dashboard``: serve the dashboard over run directories. This module imports
without the ``dashboard`` extra, so that the command can say how to install it; the web
stack is imported when the command runs."""

from __future__ import annotations

import secrets
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from skillgrad.errors import SkillgradError

if TYPE_CHECKING:
    import uvicorn

LOOPBACK = ("127.0.0.1", "localhost", "::1")
INSTALL = "pip install 'skillgrad[dashboard]'"


def dashboard_command(
    sources: Annotated[Optional[list[Path]], typer.Argument(  # noqa: UP045 - typer needs it
        help="Run directories, or folders searched for them a few levels deep (default: "
             "runs, unless --sleep is given).", metavar="RUN_OR_FOLDER",
        show_default=False)] = None,
    host: Annotated[str, typer.Option(
        metavar="HOST", help="The address to listen on; any but 127.0.0.1, localhost or ::1 needs the "
             "token printed at start.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(metavar="PORT", help="The port (0: any free one).")
                    ] = 8765,
    sleep: Annotated[Optional[list[Path]], typer.Option(  # noqa: UP045
        "--sleep", help="A project whose sleep nights to show as well (repeatable).",
        metavar="PROJECT", show_default=False)] = None,
) -> None:
    """Serve a read-only web dashboard of runs: score curves, decisions and their reasons,
    each step's edits, skill versions and diffs, cost, comparisons and sleep nights. Pages
    update while a run trains."""
    require_extra()
    from skillgrad.dashboard.app import create_app
    from skillgrad.dashboard.discover import check_sources

    projects = sleep or []
    folders = sources or ([] if projects else [Path("runs")])
    check_sources(folders, projects)
    token = None if host in LOOPBACK else secrets.token_urlsafe(24)
    sock = listen(host, port)
    hosts = None if token is not None else set(LOOPBACK)
    app = create_app(folders, token=token, sleep=projects, hosts=hosts)
    url = address(host, sock.getsockname()[1]) + (f"?token={token}" if token else "")
    typer.echo(f"dashboard: {url} (Ctrl-C stops it)")
    sys.stdout.flush()
    make_server(app).run(sockets=[sock])


def require_extra() -> None:
    """Refuse, in one line, when the web stack is not installed."""
    try:
        import jinja2  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise SkillgradError(f"the dashboard needs {exc.name or 'its web stack'}: "
                             f"{INSTALL}") from None


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` and listening (port 0: a free one), or a one-line
    refusal."""
    try:
        family, kind, proto, _, where = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise SkillgradError(f"--host {host}: cannot listen there ({exc.strerror or exc})") \
            from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(where)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise SkillgradError(f"--port {port}: cannot listen on {host} "
                             f"({exc.strerror or exc})") from None
    return sock


def make_server(app: Any) -> uvicorn.Server:
    """A quiet server: no access log, since a request's address may carry the token."""
    import uvicorn

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                            server_header=False)
    return uvicorn.Server(config)


def address(host: str, port: int) -> str:
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"

