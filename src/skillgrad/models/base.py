"""The one-method model interface every backend implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from skillgrad.errors import FatalModelError
from skillgrad.models.messages import ChatRequest, Completion


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


@runtime_checkable
class Metered(Protocol):
    """A model that also counts what its callers made of its replies: the client's
    :class:`~skillgrad.models.client.StageModel` (a bare backend counts nothing).

    Contract: ``count_outcome(name)`` adds one to the count ``name`` of the role and stage
    (``cut_off_dropped``: a JSON reply given up because it was cut off at the token limit)."""

    def count_outcome(self, name: str) -> None: ...


def non_text_parts(request: ChatRequest) -> list[str]:
    """The types of the content parts of ``request`` that are not text (``image_url``, ...).

    A text-only backend calls this to refuse such a request with a clear error instead of
    silently sending only the text (a question about an image, without the image, would be
    answered and scored as if the model had seen it).
    """
    return [str(part.get("type", "?")) for message in request.messages
            if not isinstance(message.content, str)
            for part in message.content if part.get("type", "text") != "text"]


def refuse_tools(request: ChatRequest, backend: str) -> None:
    """Raise :class:`~skillgrad.errors.FatalModelError` when ``request`` offers native tools to
    a backend without tool calling: dropping them would leave the model unable to act, and its
    episodes would be scored as if it had chosen not to. build.py refuses such a config before
    a run; this guards direct use."""
    if request.tools:
        names = ", ".join(str(t.get("function", {}).get("name", "?")) for t in request.tools)
        raise FatalModelError(
            f"{backend} has no native tool calling: the request offers tools ({names}); use the "
            "plain-text action protocol (env.tool_mode: text) or an openai_compatible target")
