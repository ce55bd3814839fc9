"""The dashboard's web application: GET routes only, server-rendered pages (Jinja2, escaped),
and a small script that polls a cheap fingerprint of the run and swaps the page's content
when it changes, so that a running training shows its new steps.

Runs are found again on every request (:mod:`.discover`); a URL names a run by its id only.
:func:`create_app` keeps everything it needs on the app it returns: two apps can serve
different folders in one process.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from skillgrad.dashboard import compare, nights, pages, runlist, skills
from skillgrad.dashboard.discover import Catalog, LockTable, RunRef, SleepRef, discover, fingerprint
from skillgrad.errors import SkillgradError
from skillgrad.rundir import confined_reads
from skillgrad.runview import jsonable, read_rollouts, read_run

HERE = Path(__file__).parent
COOKIE = "skillgrad_dashboard"
POLL_MS = 1500
SECURITY_HEADERS = (
    ("content-security-policy", "default-src 'none'; script-src 'self'; style-src 'self'; "
     "img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
     "frame-ancestors 'none'"),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cache-control", "no-store"),
)


def create_app(sources: Sequence[Path], *, token: str | None = None,
               sleep: Sequence[Path] = (), hosts: Collection[str] | None = None) -> Starlette:
    """The dashboard over the runs under ``sources`` and the sleep projects ``sleep``. With
    ``token``, every request must carry it (``?token=``, which sets a cookie, the cookie, or
    ``Authorization: Bearer``); with ``hosts``, a request's Host header must name one of them
    (a page of another site that rebinds its name to this address gets nothing)."""
    site = Site(list(sources), list(sleep))
    routes = [
        Route("/", site.index, methods=["GET"]),
        Route("/run/{run_id}", site.run, methods=["GET"]),
        Route("/run/{run_id}/skill", site.skill, methods=["GET"]),
        Route("/run/{run_id}/diff", site.diff, methods=["GET"]),
        Route("/run/{run_id}/rollouts", site.rollouts, methods=["GET"]),
        Route("/compare", site.compare, methods=["GET"]),
        Route("/sleep/{project_id}", site.sleep, methods=["GET"]),
        Route("/sleep/{project_id}/{night_id}", site.night, methods=["GET"]),
        Route("/api/runs/version", site.index_version, methods=["GET"]),
        Route("/api/run/{run_id}", site.run_json, methods=["GET"]),
        Route("/api/run/{run_id}/version", site.run_version, methods=["GET"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: site.error})
    app.add_middleware(Guard, token=token, hosts=hosts)
    return app


class Site:
    """The pages: each reads what it shows when it is asked for, and writes nothing."""

    def __init__(self, sources: list[Path], sleep: list[Path]) -> None:
        self.sources, self.sleep_projects = sources, sleep
        self.env = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True,
                               undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self.env.filters.update(num=_num, signed=_signed, count=_count, money=_money,
                                short=lambda d: str(d or "")[:8])
        self.env.globals.update(poll_ms=POLL_MS, mark=pages.mark)

    # ------------------------------------------------------------------ lookups
    def catalog(self) -> Catalog:
        return discover(self.sources, self.sleep_projects)

    def find_run(self, catalog: Catalog, run_id: str) -> RunRef:
        ref = catalog.runs.get(run_id)
        if ref is None:
            raise HTTPException(404, f"no run {run_id!r} here; the runs list names them all")
        return ref

    def find_project(self, catalog: Catalog, project_id: str) -> SleepRef:
        ref = catalog.projects.get(project_id)
        if ref is None:
            raise HTTPException(404, f"no sleep project {project_id!r} here")
        return ref

    def render(self, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("version_url", "")
        context.setdefault("version", "")
        html = self.env.get_template(template).render(**context)
        return HTMLResponse(html, status_code=status)

    def error(self, request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
        return self.render("error.html", status=exc.status_code, title=f"{exc.status_code}",
                           message=exc.detail, code=exc.status_code)

    # ------------------------------------------------------------------ pages
    def index(self, request: Request) -> Response:
        catalog = self.catalog()
        rows = runlist.run_rows(catalog, LockTable.read())
        return self.render("index.html", title="runs", rows=rows,
                           projects=list(catalog.projects.values()),
                           version_url="/api/runs/version", version=self._index_version(catalog))

    def run(self, request: Request) -> Response:
        catalog = self.catalog()
        ref = self.find_run(catalog, request.path_params["run_id"])
        locks = LockTable.read()
        live: dict[str, Any] = {"version_url": f"/api/run/{ref.id}/version",
                "version": fingerprint(ref.path, locks)}
        row = runlist.run_row(ref, locks)
        if row.steps_done is None:  # no checkpoint yet, or not readable
            return self.render("waiting.html", title=ref.label, row=row, **live)
        page = _reading(lambda: pages.run_page(ref, locks), [ref])
        return self.render("run.html", title=ref.label, page=page, **live)

    def skill(self, request: Request) -> Response:
        ref = self.find_run(self.catalog(), request.path_params["run_id"])
        name = request.query_params.get("v") or "best"
        page = _reading(lambda: skills.skill_page(ref, name), [ref], missing=404)
        return self.render("skill.html", title=f"{ref.label}: {page.label}", page=page)

    def diff(self, request: Request) -> Response:
        ref = self.find_run(self.catalog(), request.path_params["run_id"])
        a = request.query_params.get("a") or "initial"
        b = request.query_params.get("b") or "best"
        page = _reading(lambda: skills.diff_page(ref, a, b), [ref], missing=404)
        return self.render("diff.html", title=f"{ref.label}: {a} -> {b}", page=page)

    def rollouts(self, request: Request) -> Response:
        ref = self.find_run(self.catalog(), request.path_params["run_id"])
        query = request.query_params
        asked = {key: query.get(key) or None for key in ("step", "skill", "split")}
        failed = query.get("failed") in ("1", "on", "true")
        view = _reading(lambda: read_rollouts(ref.path, **asked, failed_only=failed), [ref],
                        missing=404)
        return self.render("rollouts.html", title=f"{ref.label}: rollouts", ref=ref,
                           view=view, asked=asked, failed=failed)

    def compare(self, request: Request) -> Response:
        catalog = self.catalog()
        refs = [self.find_run(catalog, i) for i in request.query_params.getlist("run")]
        if len(refs) < 2:
            return self.render("choose.html", title="compare", chosen={r.id for r in refs},
                               runs=list(catalog.runs.values()))
        page = _reading(lambda: compare.compare_page(refs), refs)
        return self.render("compare.html", title="compare", page=page)

    def sleep(self, request: Request) -> Response:
        catalog = self.catalog()
        ref = self.find_project(catalog, request.path_params["project_id"])
        return self.render("sleep.html", title=f"sleep: {ref.label}",
                           page=nights.sleep_page(ref, catalog))

    def night(self, request: Request) -> Response:
        catalog = self.catalog()
        ref = self.find_project(catalog, request.path_params["project_id"])
        night_id = request.path_params["night_id"]
        page = nights.night_page(ref, night_id, catalog)
        if page is None:
            raise HTTPException(404, f"no night {night_id!r} in {ref.label}")
        return self.render("night.html", title=f"night {night_id}", page=page)

    # ------------------------------------------------------------------ JSON
    def index_version(self, request: Request) -> Response:
        return JSONResponse({"version": self._index_version(self.catalog())})

    def run_json(self, request: Request) -> Response:
        catalog = self.catalog()
        ref = self.find_run(catalog, request.path_params["run_id"])
        view = _reading(lambda: read_run(ref.path), [ref])
        row = runlist.run_row(ref, LockTable.read())
        return JSONResponse({"id": ref.id, "label": ref.label, "status": row.status,
                             "run": jsonable(view)})

    def run_version(self, request: Request) -> Response:
        ref = self.find_run(self.catalog(), request.path_params["run_id"])
        return JSONResponse({"version": fingerprint(ref.path, LockTable.read())})

    def _index_version(self, catalog: Catalog) -> str:
        locks = LockTable.read()
        parts = [f"{i}:{fingerprint(r.path, locks)}" for i, r in sorted(catalog.runs.items())]
        for ref in catalog.projects.values():
            folders = [ref.folder / "nights", ref.folder / "work"]
            parts += sorted(f"{p.name}:{(p / 'manifest.json').exists()}" for f in folders
                            if f.is_dir() for p in f.iterdir())
        return hashlib.sha256("|".join(parts).encode("utf-8")).hexdigest()[:16]


def _reading(read: Callable[[], Any], runs: Sequence[RunRef], missing: int = 500) -> Any:
    """``read()`` of the files of ``runs``, each taken only where it really lies inside one of
    them (a link out of a run directory is not followed: :func:`confined_reads`), with a
    refusal (an unknown version name, a missing or unreadable file, a link out) as a page of
    status ``missing`` that says why."""
    roots = [ref.path for ref in runs]
    try:
        with confined_reads(*roots):
            return read()
    except SkillgradError as exc:
        raise HTTPException(missing, str(exc)) from None


class Guard:
    """Around every request: the token (when one is set) and the Host check (when hosts are
    given), then the security headers on every response (no script or style but the
    dashboard's own, no framing, no referrer, no caching)."""

    def __init__(self, app: ASGIApp, token: str | None = None,
                 hosts: Collection[str] | None = None) -> None:
        self.app, self.token = app, token
        self.hosts = None if hosts is None else {h.strip().lower().strip("[]") for h in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        set_cookie = False

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for key, value in SECURITY_HEADERS:
                    headers[key] = value
                if set_cookie:
                    headers.append("set-cookie", f"{COOKIE}={self.token}; Path=/; HttpOnly; "
                                   "SameSite=Strict")
            await send(message)

        if self.hosts is not None and _host_name(request.headers.get("host", "")) \
                not in self.hosts:  # None (not a host at all) is in no set of names
            await PlainTextResponse("400: this dashboard answers only to the address it "
                                    "listens on\n", 400)(scope, receive, guarded)
            return
        if self.token is not None:
            query = request.query_params.get("token")
            set_cookie = query is not None and self._valid(query)
            if not (set_cookie or self._valid(request.cookies.get(COOKIE))
                    or self._valid(_bearer(request))):
                await PlainTextResponse(
                    "401: this dashboard needs its token; open the address it printed when "
                    "it started (ending in ?token=...)\n", 401,
                    headers={"www-authenticate": "Bearer"})(scope, receive, guarded)
                return
        await self.app(scope, receive, guarded)

    def _valid(self, given: str | None) -> bool:
        if given is None or self.token is None:
            return False
        return secrets.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))


def _bearer(request: Request) -> str | None:
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


_HOST = re.compile(r"(?:\[(?P<address>[0-9a-f:.]+)\]|(?P<name>[a-z0-9.-]+))(?::[0-9]{1,5})?",
                   re.ASCII)


def _host_name(host: str) -> str | None:
    """The name in a Host header without its port (``[::1]:8765`` -> ``::1``); None unless
    the whole header is a name or a bracketed address, then at most ``:`` and the port's
    digits (``127.0.0.1:8765@evil.example`` names no host)."""
    found = _HOST.fullmatch(host.strip(" \t").lower())
    return None if found is None else found["address"] or found["name"]


# ----------------------------------------------------------------------------- filters


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _signed(x: float | None, digits: int = 3) -> str:
    return "-" if x is None else f"{x:+.{digits}f}"


def _count(x: int | float | None) -> str:
    return "-" if x is None else f"{int(x):,}"


def _money(x: float | None) -> str:
    return "-" if not x else f"{x:.4f}"
