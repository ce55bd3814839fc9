"""A small OpenAI-compatible chat-completions server on 127.0.0.1, for tests and benchmarks.

Stdlib only. It answers ``POST /v1/chat/completions`` (and Azure's
``/openai/deployments/NAME/chat/completions``) and ``GET /v1/models`` the way an
OpenAI-compatible server does, so a backend is exercised over real HTTP through the real SDK:

    with FakeOpenAIServer(responder=lambda body: "42") as server:
        server.push(Fault.status(429, retry_after=2))   # the next request gets a 429
        ...  # point a client at server.url

Each request body is recorded in ``requests`` (and its headers in ``headers``; when its body
began to be read and its answer was sent, in :func:`time.perf_counter` seconds, in
``served``, for every POST: what a benchmark counts as the endpoint's own time). A request is
answered by the next queued :class:`Fault` if there is one, else by ``responder(body)``: a
string is the reply text, a dict is sent verbatim as the response body (build one with
:func:`completion_body`). The default responder echoes the last user message. ``faults``, a
function of the request body, may choose a fault for any request the queue does not answer
(faults at a seeded rate, say).

Stopping never waits on a client: hanging handlers wake up, and idle keep-alive connections are
closed, so ``stop()`` returns promptly and leaves no thread behind.
(Over the house limit of ~400 lines: one loopback server, its queue of answers, its faults
and its clean stop are one test double.)
"""

from __future__ import annotations

import json
import logging
import socket
import struct
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

log = logging.getLogger(__name__)

Responder = Callable[[dict[str, Any]], "str | dict[str, Any]"]
FaultKind = Literal["status", "hang", "malformed", "truncated", "text", "reset"]
FaultChooser = Callable[[dict[str, Any]], "Fault | None"]

_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error",
                403: "permission_error", 404: "not_found_error", 429: "rate_limit_error"}


@dataclass(frozen=True)
class Fault:
    """One scripted answer that overrides the responder for a single request.

    Build one with the class methods: :meth:`status`, :meth:`hang`, :meth:`malformed`,
    :meth:`truncated`, :meth:`bogus_truncation`, :meth:`text`, :meth:`reset`.
    """

    kind: FaultKind
    code: int = 500
    message: str = "fault injected by FakeOpenAIServer"
    headers: tuple[tuple[str, str], ...] = ()
    error_code: str | None = None
    seconds: float = 0.0
    reply: str = ""
    body: str = '{"id": "chatcmpl-broken", "choices": ['
    content_type: str = "application/json"
    completion_tokens: int | None = None  # the usage reported (default: 4 characters a token)

    @classmethod
    def status(
        cls, code: int, message: str = "fault injected by FakeOpenAIServer",
        retry_after: float | str | None = None, error_code: str | None = None,
    ) -> Fault:
        """An HTTP error with an OpenAI-style error body (``error_code`` is its ``code``, e.g.
        ``"insufficient_quota"``) and, when given, a ``Retry-After`` header."""
        headers = () if retry_after is None else (("Retry-After", str(retry_after)),)
        return cls("status", code=code, message=message, headers=headers, error_code=error_code)

    @classmethod
    def hang(cls, seconds: float) -> Fault:
        """Wait ``seconds`` before answering normally (or until the server stops)."""
        return cls("hang", seconds=seconds)

    @classmethod
    def malformed(
        cls, body: str = '{"id": "chatcmpl-broken", "choices": [',
        content_type: str = "application/json",
    ) -> Fault:
        """Status 200 with a body that is not a valid completion."""
        return cls("malformed", body=body, content_type=content_type)

    @classmethod
    def truncated(cls, text: str, completion_tokens: int | None = None) -> Fault:
        """A reply cut off by the token limit (``finish_reason="length"``), reporting
        ``completion_tokens`` (default: 4 characters a token)."""
        return cls("truncated", reply=text, completion_tokens=completion_tokens)

    @classmethod
    def bogus_truncation(cls, text: str = "The", completion_tokens: int = 1) -> Fault:
        """What a broken proxy returns: ``finish_reason="length"`` after a token or so, far
        below any completion limit the request set."""
        return cls("truncated", reply=text, completion_tokens=completion_tokens)

    @classmethod
    def text(cls, text: str) -> Fault:
        """A normal reply with this exact text (a ``<think>`` block, say)."""
        return cls("text", reply=text)

    @classmethod
    def reset(cls) -> Fault:
        """The connection is reset (TCP RST) once the request has been read; no answer."""
        return cls("reset")


def completion_body(
    text: str, *, model: str = "fake", finish_reason: str = "stop", prompt_tokens: int = 0,
    completion_tokens: int | None = None, tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A chat-completion response body as an OpenAI-compatible server sends it."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = tool_calls
    completion = len(text) // 4 if completion_tokens is None else completion_tokens
    return {
        "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion,
                  "total_tokens": prompt_tokens + completion},
    }


def _message_text(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _messages(body: dict[str, Any]) -> list[Any]:
    messages = body.get("messages")
    return messages if isinstance(messages, list) else []


def echo_last_user(body: dict[str, Any]) -> str:
    """The default responder: the text of the last user message."""
    users = [m for m in _messages(body) if isinstance(m, dict) and m.get("role") == "user"]
    return _message_text(users[-1]) if users else ""


def _is_azure_chat(route: str) -> bool:
    """Azure's form of the route: ``/openai/deployments/NAME/chat/completions``."""
    parts = route.split("/")
    return len(parts) == 6 and parts[1:3] == ["openai", "deployments"] and \
        parts[4:] == ["chat", "completions"]


@dataclass(frozen=True)
class _Answer:
    status: int
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()
    content_type: str = "application/json"


_RESET = _Answer(0, b"")  # not sent: the handler resets the connection instead


def _json_answer(status: int, data: Any, headers: tuple[tuple[str, str], ...] = ()) -> _Answer:
    return _Answer(status, json.dumps(data).encode(), headers)


def _error(
    status: int, message: str, headers: tuple[tuple[str, str], ...] = (),
    code: str | None = None,
) -> _Answer:
    error = {"message": message, "type": _ERROR_TYPES.get(status, "server_error"),
             "param": None, "code": code}
    return _json_answer(status, {"error": error}, headers)


class FakeOpenAIServer:
    """An OpenAI-compatible server on a daemon thread; a context manager.

    Args:
        responder: ``body -> str | dict``; a string is the reply text, a dict the whole
            response body. Default: echo the last user message.
        latency: seconds to wait before answering each chat request.
        api_key: when set, requests whose ``Authorization: Bearer`` (or Azure ``api-key``)
            header differs get a 401.
        host, port: where to listen; port 0 picks a free port.
        models: the ids ``GET /v1/models`` lists.
        faults: ``body -> Fault | None``, asked for every chat request no queued fault
            answers; ``None`` lets the responder answer.
    """

    def __init__(
        self, responder: Responder | None = None, *, latency: float = 0.0,
        api_key: str | None = None, host: str = "127.0.0.1", port: int = 0,
        models: Iterable[str] = ("fake",), faults: FaultChooser | None = None,
    ) -> None:
        self.responder: Responder = responder or echo_last_user
        self.latency = latency
        self.api_key = api_key
        self.models = tuple(models)
        self.faults = faults
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.served: list[tuple[float, float]] = []  # POSTs: (body read from, answer sent at)
        self._address = (host, port)
        self._faults: deque[Fault] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------- lifecycle

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The base URL clients use, e.g. ``http://127.0.0.1:PORT/v1``."""
        return f"http://{self._address[0]}:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        if self._httpd is not None:
            raise RuntimeError("the server is already running")
        self._stopping.clear()
        self._httpd = _HTTPServer(self._address, self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01},
            name=f"fake-openai-server-{self.port}", daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake hanging handlers, close open connections, join all threads."""
        httpd, thread = self._httpd, self._thread
        if httpd is None or thread is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        thread.join()
        self._httpd = self._thread = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------------- scripting

    def push(self, *faults: Fault) -> None:
        """Queue faults; each answers one request, in order, before the responder does."""
        with self._lock:
            self._faults.extend(faults)

    def take_served(self) -> list[tuple[float, float]]:
        """``served`` so far, and start it afresh (one measurement's requests at a time)."""
        with self._lock:
            served, self.served = self.served, []
        return served

    def _next_fault(self) -> Fault | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    # ------------------------------------------------------------------------- answers

    def answer(self, method: str, path: str, headers: dict[str, str], raw: bytes) -> _Answer | None:
        """The answer to one request; ``None`` drops the connection (the server is stopping)."""
        route = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and route == "/v1/models":
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "skillgrad"}
                    for m in self.models]
            return _json_answer(200, {"object": "list", "data": data})
        if method == "POST" and (route == "/v1/chat/completions" or _is_azure_chat(route)):
            return self._chat(headers, raw)
        return _error(404, f"no route for {method} {route}")

    def _chat(self, headers: dict[str, str], raw: bytes) -> _Answer | None:
        try:
            body = json.loads(raw)
        except ValueError:
            return _error(400, "request body is not valid JSON")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object")
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
        given = self._given_key(headers)
        if self.api_key is not None and given != self.api_key:
            # Like some servers, echo the key: the client must never repeat this message.
            return _error(401, f"Incorrect API key provided: {given}")
        if self.latency and self._stopping.wait(self.latency):
            return None
        fault = self._next_fault()
        if fault is None and self.faults is not None:
            fault = self.faults(body)
        if fault is not None:
            return self._fault_answer(fault, body)
        return self._reply(self.responder(body), body)

    @staticmethod
    def _given_key(headers: dict[str, str]) -> str:
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            return auth[7:].strip()
        return headers.get("api-key", "")

    def _fault_answer(self, fault: Fault, body: dict[str, Any]) -> _Answer | None:
        if fault.kind == "status":
            return _error(fault.code, fault.message, fault.headers, fault.error_code)
        if fault.kind == "hang":
            if self._stopping.wait(fault.seconds):
                return None
            return self._reply(self.responder(body), body)
        if fault.kind == "malformed":
            return _Answer(200, fault.body.encode(), content_type=fault.content_type)
        if fault.kind == "reset":
            return _RESET
        finish = "length" if fault.kind == "truncated" else "stop"
        return self._reply(fault.reply, body, finish_reason=finish,
                           completion_tokens=fault.completion_tokens)

    @staticmethod
    def _reply(
        reply: str | dict[str, Any], body: dict[str, Any], finish_reason: str = "stop",
        completion_tokens: int | None = None,
    ) -> _Answer:
        if isinstance(reply, dict):
            return _json_answer(200, reply)
        prompt_chars = sum(len(_message_text(m)) for m in _messages(body))
        data = completion_body(reply, model=str(body.get("model", "fake")),
                               finish_reason=finish_reason, prompt_tokens=prompt_chars // 4,
                               completion_tokens=completion_tokens)
        return _json_answer(200, data)


# ----------------------------------------------------------------------------- HTTP plumbing


class _HTTPServer(ThreadingHTTPServer):
    """Tracks its connections and handler threads, so that stopping can close idle keep-alive
    connections and then join every handler."""

    # Handlers run on daemon threads (a server never stopped does not block interpreter exit);
    # the stdlib does not join daemon threads, so this class tracks and joins them itself.
    daemon_threads = True
    block_on_close = False
    # The stdlib's backlog of 5 drops simultaneous connects beyond it, and a dropped SYN is
    # retried only after a second: many concurrent clients would measure that, not the server.
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], owner: FakeOpenAIServer) -> None:
        self.owner = owner
        self._open: set[socket.socket] = set()
        self._handlers: list[threading.Thread] = []
        self._open_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self.process_request_thread,
                                  args=(request, client_address), daemon=True,
                                  name=f"fake-openai-handler-{self.server_address[1]}")
        with self._open_lock:
            self._open.add(request)
            self._handlers = [t for t in self._handlers if t.is_alive()]
            self._handlers.append(thread)
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self, timeout: float = 5.0) -> None:
        """Shut every open connection (waking handlers blocked on a read) and join them."""
        with self._open_lock:
            open_now, handlers = list(self._open), list(self._handlers)
        for sock in open_now:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed by the peer
                pass
        for thread in handlers:
            thread.join(timeout)
            if thread.is_alive():
                log.warning("fake server: a handler thread did not stop within %.0fs", timeout)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # the client went away (timed out, closed): expected
            log.debug("fake server: connection from %s ended: %r", client_address, exc)
            return
        log.error("fake server: error handling a request from %s", client_address,
                  exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers and the SDK's pool expect
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stall
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging."""

    def do_GET(self) -> None:
        self._respond(self.server.owner.answer("GET", self.path, self._headers(), b""))

    def do_POST(self) -> None:
        started = time.perf_counter()
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._respond(self.server.owner.answer("POST", self.path, self._headers(), raw))
        owner = self.server.owner
        with owner._lock:
            owner.served.append((started, time.perf_counter()))

    def _headers(self) -> dict[str, str]:
        return {k.lower(): v for k, v in self.headers.items()}

    def _respond(self, answer: _Answer | None) -> None:
        if answer is None:
            self.close_connection = True
            return
        if answer is _RESET:
            # Linger 0: closing sends RST, not FIN; the client's read fails with a reset.
            self.close_connection = True
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       struct.pack("ii", 1, 0))
            self.connection.close()
            return
        self.send_response(answer.status)
        for name, value in answer.headers:
            self.send_header(name, value)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        self.end_headers()
        self.wfile.write(answer.body)
