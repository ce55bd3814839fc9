"""The one-method model interface every backend implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from skillgrad.records import ChatRequest, Completion


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: messages in; text, usage and finish reason out.

    Contract:
    * Return a :class:`Completion` for every answer the model gave, including a wrong or
      truncated one (``finish_reason="length"``); judging the answer is not the backend's job.
    * Raise :class:`~skillgrad.errors.TransientModelError` for failures worth retrying (rate
      limit, 5xx, timeout, reset connection) and :class:`~skillgrad.errors.FatalModelError`
      for the rest. Never turn an infrastructure failure into an empty answer.
    * Hold no module-level state: two instances must be usable in one process.
    """

    def complete(self, request: ChatRequest) -> Completion: ...
