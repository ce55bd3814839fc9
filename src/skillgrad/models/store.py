"""Answers kept on disk: a response cache shared between runs, and the recording of a run that
``--replay`` serves from.

* :class:`ResponseCache` is keyed by the model's identity and the full request. Entries are
  written atomically (a killed process leaves no half entry) and only for answers: a failure
  is never cached.
* :class:`Recording` reads every call journal of a finished or interrupted run directory and
  answers the same requests, in the same order per request, with the recorded replies. A
  request that is not in the recording is an error, never a guess.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from pathlib import Path

from skillgrad.errors import DataError, FatalModelError
from skillgrad.files import atomic_write_text
from skillgrad.models.messages import ChatRequest, Completion
from skillgrad.rundir import CALLS

log = logging.getLogger(__name__)


def _request_json(request: ChatRequest) -> str:
    return json.dumps(request.identity(), sort_keys=True)


def request_key(role: str, request: ChatRequest) -> str:
    """The identity of one role's request: the journal and the recording are keyed by it."""
    payload = json.dumps({"role": role, "request": request.identity()}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


class ResponseCache:
    """A folder of answers keyed by ``sha256(identity, request)``."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder).expanduser()

    def key(self, identity: str, request: ChatRequest) -> str:
        payload = json.dumps({"model": identity, "request": _request_json(request)})
        return hashlib.sha256(payload.encode()).hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> Completion | None:
        path = self._path(key)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            log.warning("%s: unreadable cache entry ignored", path)
            return None
        return Completion.model_validate(data["completion"])

    def put(self, key: str, completion: Completion) -> None:
        atomic_write_text(self._path(key),
                          json.dumps({"completion": completion.model_dump(mode="json")}))


class Recording:
    """The recorded calls of a run directory, served in order per (role, request)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        journals = sorted(self.run_dir.rglob(CALLS), key=self._scope_order)
        if not journals:
            raise DataError(f"--replay {run_dir}: no recorded calls (no calls.jsonl) in it")
        self._answers: dict[str, list[Completion]] = {}
        self._served: dict[str, int] = {}
        self._lock = threading.Lock()
        for path in journals:
            self._load(path)

    def _scope_order(self, path: Path) -> tuple[int, str]:
        # The order the scopes were run in: initial evaluation, steps, final evaluation.
        first = path.relative_to(self.run_dir).parts[0]
        return ({"init": 0, "steps": 1, "final": 2}.get(first, 3), str(path))

    def _load(self, path: Path) -> None:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                entry = json.loads(line)
                key = request_key(entry["role"], ChatRequest.model_validate(entry["request"]))
                completion = Completion.model_validate(entry["completion"])
            except (ValueError, KeyError):
                log.warning("%s:%d: unreadable recorded call skipped", path, n)
                continue
            self._answers.setdefault(key, []).append(completion)

    def __len__(self) -> int:
        return sum(len(v) for v in self._answers.values())

    def answer(self, role: str, request: ChatRequest) -> Completion:
        key = request_key(role, request)
        with self._lock:
            answers = self._answers.get(key, [])
            n = self._served.get(key, 0)
            if n < len(answers):
                self._served[key] = n + 1
                return answers[n]
        asked = "asked again" if answers else "never asked"
        raise FatalModelError(
            f"replay of {self.run_dir}: the {role} model was sent a request the recorded run "
            f"{asked} (the config, data or skill differ from the recorded run's)"
        )


class ReplayModel:
    """A :class:`~skillgrad.models.base.ChatModel` that answers from a :class:`Recording`."""

    def __init__(self, recording: Recording, role: str) -> None:
        self.recording = recording
        self.role = role
        self.identity = f"replay|{recording.run_dir}"
        self.endpoint = f"replay:{role}"

    def complete(self, request: ChatRequest) -> Completion:
        return self.recording.answer(self.role, request)
