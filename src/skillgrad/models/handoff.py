"""The handoff backend: a person or another agent answers the model calls.

Every call the run needs and has no answer for is written to ``<dir>/prompts.md`` (readable)
and ``<dir>/pending.json`` (machine-readable: id, request file, answer file), with the full
request in ``<dir>/requests/<id>.json``; the run then stops with exit code 3. The answer to a
call goes in ``<dir>/answers/<id>.txt`` (the reply text) or ``<dir>/answers/<id>.json``
(``{"text": ..., "usage": {"prompt_tokens": .., "completion_tokens": ..}}``). Running the same
command again picks the answers up and continues where the run stopped.

Calls that can be asked together (the rollouts of a batch, the analysts of a step) are asked
together; calls that depend on earlier answers come in later rounds. The id of a call is a
hash of its request, so an answer is never given to a different question.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from skillgrad.errors import AnswersPending, FatalModelError
from skillgrad.files import atomic_write_text
from skillgrad.models.base import refuse_tools
from skillgrad.models.messages import ChatRequest, Completion, Usage

log = logging.getLogger(__name__)


class HandoffOptions(BaseModel):
    """The ``model.<role>`` keys of ``backend: handoff``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dir: Path = Field(Path("handoff"), description="folder of prompts and answers, relative to "
                      "the config file")


def call_id(request: ChatRequest) -> str:
    payload = json.dumps(request.identity(), sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


class HandoffModel:
    """A :class:`~skillgrad.models.base.ChatModel` whose answers are written by hand."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.identity = f"handoff|{folder}"
        self.endpoint = f"handoff:{folder}"
        self._lock = threading.Lock()
        self._pending: dict[str, ChatRequest] = {}
        (folder / "answers").mkdir(parents=True, exist_ok=True)
        # What was pending in an earlier process is either answered now or asked again.
        for stale in ("pending.json", "prompts.md"):
            (folder / stale).unlink(missing_ok=True)
        for answer in sorted((folder / "answers").iterdir()):
            if answer.suffix in (".txt", ".json") and not (
                    folder / "requests" / f"{answer.stem}.json").exists():
                log.warning("%s answers no call that was asked here (its prompt no longer "
                            "exists); it is kept and not used", answer)

    def complete(self, request: ChatRequest) -> Completion:
        refuse_tools(request, "handoff backend")
        cid = call_id(request)
        answer = self._answer(cid)
        if answer is not None:
            return answer
        with self._lock:
            self._pending[cid] = request
            atomic_write_text(self.folder / "requests" / f"{cid}.json",
                   json.dumps(request.model_dump(mode="json"), indent=1))
            self._write_lists()
        raise AnswersPending({str(self.folder): [cid]})

    def _answer(self, cid: str) -> Completion | None:
        text_file = self.folder / "answers" / f"{cid}.txt"
        json_file = self.folder / "answers" / f"{cid}.json"
        if json_file.is_file():
            try:
                data = json.loads(json_file.read_text(encoding="utf-8"))
                return Completion(text=str(data["text"]),
                                  usage=Usage.model_validate(data.get("usage") or {}),
                                  finish_reason=str(data.get("finish_reason", "stop")),
                                  model="handoff")
            except (ValueError, KeyError, TypeError, ValidationError) as exc:
                raise FatalModelError(f"{json_file}: not an answer object with a 'text' key "
                                      f"({exc.__class__.__name__})") from None
        if text_file.is_file():
            text = text_file.read_text(encoding="utf-8")
            return Completion(text=text.strip(), usage=_estimate(text), model="handoff")
        return None

    def _write_lists(self) -> None:
        entries: list[dict[str, Any]] = []
        blocks = ["# Model calls waiting for answers", "",
                  "Write each answer to the file named under its heading, then run the same "
                  "command again.", ""]
        for cid, request in self._pending.items():
            entries.append({
                "id": cid, "request": f"requests/{cid}.json", "answer": f"answers/{cid}.txt",
                "json_schema": request.json_schema is not None,
                "max_tokens": request.max_tokens,
            })
            blocks += [f"## {cid}", f"answer file: answers/{cid}.txt", ""]
            for m in request.messages:
                blocks += [f"### {m.role}", "", m.text(), ""]
            if request.json_schema is not None:
                blocks += ["### reply format", "",
                           "One JSON object matching this schema:", "",
                           "```json", json.dumps(request.json_schema, indent=1), "```", ""]
        atomic_write_text(self.folder / "pending.json", json.dumps({"pending": entries}, indent=1))
        atomic_write_text(self.folder / "prompts.md", "\n".join(blocks))


def _estimate(text: str) -> Usage:
    # A hand-written answer has no token count; a stable estimate keeps metering meaningful.
    return Usage(prompt_tokens=0, completion_tokens=max(1, len(text) // 4))


class HandoffBackend:
    """Registry entry of ``backend: handoff``."""

    Options = HandoffOptions
    accepts_tools = False  # an answer is text: no native tool calls (see build.py)

    @classmethod
    def create(cls, options: HandoffOptions, base_dir: Path) -> HandoffModel:
        folder = options.dir if options.dir.is_absolute() else base_dir / options.dir
        return HandoffModel(folder.resolve())
