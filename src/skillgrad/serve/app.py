"""The HTTP face of ``skillgrad serve``: one Starlette app that reads each wire format into a
:class:`ChatRequest`, asks the model of the call's rollout (:mod:`.scopes`) through the client
layer, and writes the answer back in the same format, whole or as its SSE stream.

Every route also lives under ``/r/<tag>``, so an agent whose base URL is
``http://127.0.0.1:PORT/r/<tag>`` (or ``.../r/<tag>/v1``) has every call tagged.

Routes: ``POST /v1/chat/completions``, ``POST /v1/responses``, ``POST /v1/messages``,
``POST /v1/messages/count_tokens``, ``POST /v1beta/models/<model>:generateContent`` /
``:streamGenerateContent`` / ``:countTokens`` (also under ``/v1/models/``), and what agents
probe at start: ``GET /v1/models`` (one list readable as OpenAI's and Anthropic's),
``GET /v1beta/models``, ``GET`` / ``HEAD /``.

The answer is computed whole, then streamed: the client layer's journal, cache and replay
hold whole answers, so a stream is the same answer cut into the format's events. A stream
whose answer takes more than a few seconds gets its headers at once and SSE comments while
the model works (a local model reads an agent's first prompt for minutes, longer than a
client waits for a first byte).
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route

from skillgrad.errors import FatalModelError, ModelError, RunStopped, SkillgradError
from skillgrad.models.accounting import BudgetExhausted
from skillgrad.models.limits import TOKENS_PER_MESSAGE, PromptTooLarge
from skillgrad.models.messages import ChatRequest, Completion
from skillgrad.serve.anthropic import Messages
from skillgrad.serve.chat import ChatCompletions
from skillgrad.serve.gemini import Gemini
from skillgrad.serve.responses import Responses
from skillgrad.serve.scopes import HEADER, Scopes, check_tag
from skillgrad.serve.wire import FINAL, Answer, WireError, WireFormat
from skillgrad.skill import estimate_tokens

log = logging.getLogger(__name__)

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
# A streamed answer not ready after this many seconds gets its headers at once, and an SSE
# comment as often until it is.
KEEPALIVE = 5.0
AT_LIMIT = "I stop here: the limit of model calls is reached"
_GEMINI_METHODS = ("generateContent", "streamGenerateContent", "countTokens")


class Server:
    """The routes' state: the scopes, the key (``None``: any key, agents send dummies), the
    model name the lists show, a token counter (the model's tokenizer, else an estimate) and
    whether only loopback ``Host`` names are served (a browser page cannot rebind a name to
    127.0.0.1 and read the answers)."""

    def __init__(self, scopes: Scopes, *, key: str | None = None, model_name: str = "skillgrad",
                 count_tokens: Callable[[str], int] | None = None,
                 loopback_only: bool = True, no_tools: bool = False,
                 keepalive: float = KEEPALIVE, max_calls: int | None = None) -> None:
        self.scopes = scopes
        self.keepalive = keepalive
        self.max_calls = max_calls
        self._calls: dict[str | None, int] = {}
        self._calls_lock = threading.Lock()
        self.no_tools = no_tools
        self.key = key
        self.model_name = model_name
        self.count = count_tokens or estimate_tokens
        self.loopback_only = loopback_only

    # -- the answering path, shared by every format

    async def answer(self, request: Request, fmt: WireFormat, model: str | None = None,
                     stream: bool | None = None) -> Response:
        try:
            self._admit(request)
            turn = _read(fmt, await _body(request), model)
            if stream is not None:
                turn = replace(turn, stream=stream)
            if self.no_tools and turn.request.tools:  # the agent is to answer in text only
                turn = replace(turn, request=turn.request.model_copy(update={"tools": None}))
            tag = _tag(request)
            chat_model = self.scopes.model_for(tag)
            if self.max_calls is not None and turn.request.tools:
                with self._calls_lock:  # an agent's turns of one rollout, counted
                    self._calls[tag] = n = self._calls.get(tag, 0) + 1
                if n > self.max_calls:
                    chat_model = _AtLimit(self.max_calls)
            log.debug("serve: %s call (rollout %s): %d messages, %d tools", type(fmt).__name__,
                      tag or "-", len(turn.request.messages), len(turn.request.tools or ()))
            work = asyncio.ensure_future(run_in_threadpool(_complete, chat_model, turn.request))
            if turn.stream:  # answered soon: as usual; else headers now, the answer later
                await asyncio.wait({work}, timeout=self.keepalive)
                if not work.done():
                    return _stream(_late(fmt, turn, work, self.keepalive))
            completion = await work
        except WireError as exc:
            return _refusal(fmt, exc)
        answer = Answer.of(completion, turn.request)
        if not turn.stream:
            return JSONResponse(fmt.reply(turn, answer))
        return _stream(fmt.events(turn, answer))

    async def count_tokens(self, request: Request, fmt: WireFormat, field: str,
                           model: str | None = None) -> Response:
        try:
            self._admit(request)
            turn = _read(fmt, await _body(request), model)
        except WireError as exc:
            return _refusal(fmt, exc)
        tokens = await run_in_threadpool(prompt_tokens, turn.request, self.count)
        return JSONResponse({field: tokens})

    def _admit(self, request: Request) -> None:
        if self.loopback_only and _hostname(request.headers.get("host", "")) not in \
                LOOPBACK_HOSTS:
            raise WireError("this server answers requests to 127.0.0.1 or localhost only",
                            "authentication")
        if self.key is None:
            return
        auth = request.headers.get("authorization", "")
        offered = [auth[7:] if auth.lower().startswith("bearer ") else auth,
                   request.headers.get("x-api-key", ""), request.headers.get("x-goog-api-key", ""),
                   request.query_params.get("key", "")]
        if not any(o and secrets.compare_digest(o.encode(), self.key.encode()) for o in offered):
            raise WireError("missing or wrong API key", "authentication")

    # -- the routes

    async def chat(self, request: Request) -> Response:
        return await self.answer(request, ChatCompletions())

    async def responses(self, request: Request) -> Response:
        return await self.answer(request, Responses())

    async def messages(self, request: Request) -> Response:
        return await self.answer(request, Messages())

    async def messages_count(self, request: Request) -> Response:
        return await self.count_tokens(request, Messages(), "input_tokens")

    async def gemini(self, request: Request) -> Response:
        model, _, method = request.path_params["target"].rpartition(":")
        if method not in _GEMINI_METHODS or not model:
            return _refusal(Gemini(), WireError(f"no method {method!r} here", "not_found"))
        if method == "countTokens":
            return await self.count_tokens(request, Gemini(), "totalTokens", model)
        if method == "generateContent" or request.query_params.get("alt") == "sse":
            return await self.answer(request, Gemini(), model, method != "generateContent")
        response = await self.answer(request, Gemini(), model, False)
        if response.status_code != 200:  # without alt=sse the stream is one JSON array
            return response
        return Response(b"[" + bytes(response.body) + b"]", media_type="application/json")

    async def models(self, request: Request) -> Response:
        name = self.model_name
        entry = {"id": name, "object": "model", "created": 0, "owned_by": "skillgrad",
                 "type": "model", "display_name": name, "created_at": "1970-01-01T00:00:00Z"}
        if "model" in request.path_params:
            return JSONResponse({**entry, "id": request.path_params["model"]})
        return JSONResponse({"object": "list", "data": [entry], "has_more": False,
                             "first_id": name, "last_id": name})

    async def gemini_models(self, request: Request) -> Response:
        entry = {"name": f"models/{self.model_name}", "displayName": self.model_name,
                 "supportedGenerationMethods": list(_GEMINI_METHODS)}
        return JSONResponse({"models": [entry]})

    async def root(self, request: Request) -> Response:
        return JSONResponse({"service": "skillgrad serve", "model": self.model_name})

    def routes(self) -> list[BaseRoute]:
        return [
            Route("/", self.root, methods=["GET", "HEAD"]),
            *[Route(f"{p}/chat/completions", self.chat, methods=["POST"]) for p in ("", "/v1")],
            *[Route(f"{p}/responses", self.responses, methods=["POST"]) for p in ("", "/v1")],
            Route("/v1/messages", self.messages, methods=["POST"]),
            Route("/v1/messages/count_tokens", self.messages_count, methods=["POST"]),
            *[Route(f"{p}/models", self.models, methods=["GET"]) for p in ("", "/v1")],
            Route("/v1/models/{model}", self.models, methods=["GET"]),
            Route("/v1beta/models", self.gemini_models, methods=["GET"]),
            *[Route(f"/{v}/models/{{target:path}}", self.gemini, methods=["POST"])
              for v in ("v1beta", "v1")],
        ]


def create_app(scopes: Scopes, **options: Any) -> Starlette:
    """The ASGI app: every route at the root and under ``/r/<tag>`` (see :class:`Server` for
    ``options``)."""
    server = Server(scopes, **options)
    return Starlette(routes=[*server.routes(),
                             Route("/r/{tag}", server.root, methods=["GET", "HEAD"]),
                             Mount("/r/{tag}", routes=server.routes())])


@contextmanager
def running(app: Starlette, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """``app`` served in a background thread while the block runs (port 0: a free one);
    yields its base URL. What a trainer running agent CLIs in process, and the tests, use."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False,
                                           lifespan="off", server_header=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True,
                              name="skillgrad-serve")
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError(f"skillgrad serve: the server on {host} did not start")
            time.sleep(0.01)
        bound = sock.getsockname()[1]
        yield f"http://[{host}]:{bound}" if ":" in host else f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def prompt_tokens(request: ChatRequest, count: Callable[[str], int]) -> int:
    """The prompt's length as ``count`` measures it: every message, call and tool definition,
    plus the chat template's share per message."""
    texts = [m.text() for m in request.messages]
    texts += [json.dumps(m.tool_calls) for m in request.messages if m.tool_calls]
    if request.tools:
        texts.append(json.dumps(list(request.tools)))
    return sum(count(t) for t in texts) + TOKENS_PER_MESSAGE * (len(request.messages) + 1)


def _complete(model: Any, request: ChatRequest) -> Any:
    """One call through the client layer, its failures as the refusals agents understand."""
    try:
        return model.complete(request)
    except BudgetExhausted as exc:
        raise WireError(str(exc), "budget") from exc
    except PromptTooLarge as exc:
        raise WireError(str(exc), "too_large") from exc
    except FatalModelError as exc:
        raise WireError(str(exc), "model") from exc
    except ModelError as exc:  # transient failures the client's retries did not overcome
        raise WireError(str(exc), "unavailable") from exc
    except (RunStopped, SkillgradError) as exc:  # e.g. a handoff backend waiting for answers
        raise WireError(str(exc), "unavailable") from exc


class _AtLimit:
    """The answer to an agent's turn past its rollout's limit of model calls: words that end
    its loop (a small model can repeat one tool call until its time runs out)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def complete(self, request: ChatRequest) -> Completion:
        return Completion(text=f"{AT_LIMIT} ({self.limit} model calls for this task).")


def _stream(events: Any) -> StreamingResponse:
    return StreamingResponse(events, media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


async def _late(fmt: WireFormat, turn: Any, work: asyncio.Future[Any],
                every: float) -> AsyncIterator[bytes]:
    """The stream of an answer that takes long (a local model reading an agent's first
    prompt): an SSE comment now and then until it is ready, so that no client gives up
    waiting for its first byte (Node's fetch does after 300 s), then the answer's events; a
    refusal that comes after the headers went out is the format's error event."""
    # Gemini's client reads only "data:" lines after any whitespace, so it gets a newline;
    # the others, an SSE comment.
    beat = b"\n" if isinstance(fmt, Gemini) else b": the model is working\n\n"
    while not work.done():
        yield beat
        await asyncio.wait({work}, timeout=every)
    try:
        completion = work.result()
    except WireError as exc:
        log.warning("serve: refused (%s): %s", exc.kind, exc)
        body = json.dumps(fmt.error(exc)[1]).encode()
        yield (b"event: error\n" if isinstance(fmt, Messages) else b"") + b"data: " + body + \
            b"\n\n"
        return
    for chunk in fmt.events(turn, Answer.of(completion, turn.request)):
        yield chunk


def _refusal(fmt: WireFormat, error: WireError) -> Response:
    log.warning("serve: refused (%s): %s", error.kind, error)
    status, body = fmt.error(error)
    headers = {"x-should-retry": "false"} if error.kind in FINAL else {}
    return JSONResponse(body, status_code=status, headers=headers)


def _read(fmt: WireFormat, body: dict[str, Any], model: str | None) -> Any:
    """``fmt.read``, with a body of an unexpected shape (a string where an object belongs)
    refused as a bad request instead of failing as the server's error."""
    try:
        return fmt.read(body, model)
    except WireError:
        raise
    except (AttributeError, TypeError, KeyError, ValueError) as exc:  # pydantic's too
        raise WireError(f"the request does not have the expected shape: "
                        f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                        ) from None


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        raise WireError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise WireError("the request body is not a JSON object")
    return body


def _tag(request: Request) -> str | None:
    tag = request.path_params.get("tag") or request.headers.get(HEADER)
    return check_tag(tag) if tag else None


def _hostname(host: str) -> str:
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host
