"""The model behind an agent target: ``skillgrad serve`` run as a child process for the
length of a run, on a UNIX socket in a private folder (or on a free loopback port), recording
each request's calls under its tag.

A separate process, not a thread: the served model keeps its own client layer (metering,
cache, journal) and its processed prompt prefix between requests, which is what makes an
agent's large first prompt affordable on a local model; and the trainer's process stays free
of the web stack.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from skillgrad.errors import ConfigError

_START_TIMEOUT = 600.0  # a local model's first load can be slow on a small machine
_PR_SET_PDEATHSIG = 1
_URL = re.compile(r"at (http://127\.0\.0\.1:\d+)")


class ServedModel:
    """A running ``skillgrad serve`` child: ``socket`` (or ``url``) to reach it,
    :meth:`journal` for the calls of one tag."""

    def __init__(self, proc: subprocess.Popen[bytes], folder: Path, socket_path: str,
                 url: str) -> None:
        self._proc = proc
        self._folder = folder
        self.socket = socket_path
        self.url = url
        atexit.register(self.stop)

    @classmethod
    def start(cls, config: Path, *, no_tools: bool = False, tcp: bool = False,
              max_calls: int | None = None, agent: str | None = None) -> ServedModel:
        """Start serving the target of ``config`` (to the agent CLI ``agent``, which sizes an
        embedded model's window); returns once it answers."""
        folder = Path(tempfile.mkdtemp(prefix="skillgrad-served-"))  # 0700: ours alone
        sock = str(folder / "serve.sock")
        where = ["--port", "0"] if tcp else ["--socket", sock]
        argv = [sys.executable, "-m", "skillgrad.cli", "serve", str(config), *where,
                "--record", str(folder / "calls")] + (["--no-tools"] if no_tools else []) + (
                    ["--max-calls", str(max_calls)] if max_calls else []) + (
                    ["--agent", agent] if agent else [])
        log = (folder / "serve.log").open("wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_die_with_parent)
        log.close()
        deadline = time.monotonic() + _START_TIMEOUT
        while time.monotonic() < deadline:
            text = (folder / "serve.log").read_text(errors="replace")
            if proc.poll() is not None:
                shutil.rmtree(folder, ignore_errors=True)
                lines = [ln for ln in text.strip().splitlines() if ln.strip()]
                raise ConfigError(f"serve: {config}: skillgrad serve stopped: "
                                  f"{lines[-1] if lines else f'exit code {proc.returncode}'}")
            found = _URL.search(text)
            if (tcp and found) or (not tcp and "serving" in text and _answers(sock)):
                return cls(proc, folder, sock, found.group(1) if found else "")
            time.sleep(0.2)
        proc.kill()
        shutil.rmtree(folder, ignore_errors=True)
        raise ConfigError(f"serve: {config}: skillgrad serve did not start within "
                          f"{_START_TIMEOUT:g} s")

    def journal(self, tag: str) -> list[dict[str, Any]]:
        """The calls served under ``tag``, as recorded (request, completion)."""
        path = self._folder / "calls" / tag / "calls.jsonl"
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def tags(self) -> list[str]:
        """The tags served so far."""
        calls = self._folder / "calls"
        return sorted(p.name for p in calls.iterdir()) if calls.is_dir() else []

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        shutil.rmtree(self._folder, ignore_errors=True)


def _die_with_parent() -> None:
    """In the child: be stopped when the process that started it dies, however it dies (a
    killed trainer must not leave a model serving)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _answers(path: str) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(path)
        return True
    except OSError:
        return False
