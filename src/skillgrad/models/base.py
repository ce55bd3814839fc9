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


def non_text_parts(request: ChatRequest) -> list[str]:
    """The types of the content parts of ``request`` that are not text (``image_url``, ...).

    A text-only backend calls this to refuse such a request with a clear error instead of
    silently sending only the text (a question about an image, without the image, would be
    answered and scored as if the model had seen it).
    """
    return [str(part.get("type", "?")) for message in request.messages
            if not isinstance(message.content, str)
            for part in message.content if part.get("type", "text") != "text"]
