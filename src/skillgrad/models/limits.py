"""What a model can be asked, and when a cut-off reply is the model's answer.

* **Prompt size.** Every request is checked against the model's context window before it is
  sent, so an impossible request is refused in one line and never paid for (the server would
  reject it, or worse, cut it silently and answer a question it never saw whole). The window is
  the backend's ``context_tokens`` (``n_ctx`` of the embedded model, the ``context_tokens``
  option of an OpenAI-compatible endpoint). The prompt is estimated without a tokenizer
  (:func:`skillgrad.skill.estimate_tokens` over every message, plus
  :data:`TOKENS_PER_MESSAGE` for the chat template); a backend with its own tokenizer
  (``count_tokens``) has a prompt near the window counted exactly, so the estimate's error
  never refuses a prompt that fits. A model whose window is not known gets only a hard cap of
  :data:`MAX_PROMPT_CHARS` characters, beyond any context window offered today.
* **Cut-off replies.** A reply with ``finish_reason="length"`` far below the completion limit
  (:func:`bogus_truncation`) was not cut off by the limit: a proxy or server broke it. That is
  a transport fault, retried like a 5xx, never scored, cached or journaled as an answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from skillgrad.errors import FatalModelError
from skillgrad.models.messages import ChatRequest
from skillgrad.skill import estimate_tokens

# The hard cap on a prompt to a model whose window is not known: about a million tokens of
# English, as much as the largest windows offered today. Set the model's window to go beyond.
MAX_PROMPT_CHARS = 4_000_000
# What a chat template adds per message (role markers, separators), counted generously.
TOKENS_PER_MESSAGE = 8
# A prompt is counted exactly (when the backend can) only while its estimate is under this many
# times the window: on skillgrad's prompts the estimate is within 0.8-1.45 of Qwen2.5's count,
# so a prompt estimated at twice the window cannot fit, and is not tokenized to prove it.
_EXACT_BELOW = 2


class PromptTooLarge(FatalModelError):
    """A request that cannot fit the model's context window (or, for a model whose window is
    not known, the hard cap on characters). Refused before it is sent; never retried, never a
    score. The client adds the role and stage, the rollout the task."""

    def __init__(self, size: int, limit: int, unit: str, *, estimated: bool,
                 setting: str | None = None, role: str = "", stage: str = "",
                 task: str | None = None) -> None:
        super().__init__(f"prompt of {size} {unit} over the limit of {limit}")
        self.size, self.limit, self.unit, self.estimated = size, limit, unit, estimated
        self.setting, self.role, self.stage, self.task = setting, role, stage, task

    def __reduce__(self) -> tuple[Any, ...]:  # pickled whole (it crosses to Ray workers)
        return (_restore, (self.size, self.limit, self.unit, self.estimated, self.setting,
                           self.role, self.stage, self.task))

    def at(self, *, role: str | None = None, stage: str | None = None,
           task: str | None = None, setting: str | None = None) -> PromptTooLarge:
        """The same refusal with more of where it happened known."""
        return PromptTooLarge(
            self.size, self.limit, self.unit, estimated=self.estimated,
            setting=setting or self.setting, role=role or self.role,
            stage=stage or self.stage, task=task or self.task)

    def __str__(self) -> str:
        who = f"the {self.role} model's prompt" if self.role else "the prompt"
        if self.task is not None:
            who += f" for task {self.task!r}"
        if self.stage:
            who += f" (stage {self.stage})"
        size = f"{self.size:,} {self.unit}" + (" (estimated)" if self.estimated else "")
        if self.unit == "tokens":
            over = f"over its context window of {self.limit:,} tokens"
            hint = f" ({self.setting})" if self.setting else ""
        else:
            over = (f"over the cap of {self.limit:,} characters on a prompt to a model whose "
                    "context window is not known")
            hint = f" (set {self.setting} to its window)" if self.setting else ""
        return f"{who} is {size}, {over}{hint}; refused, not sent"


def _restore(size: int, limit: int, unit: str, estimated: bool, setting: str | None,
             role: str, stage: str, task: str | None) -> PromptTooLarge:
    return PromptTooLarge(size, limit, unit, estimated=estimated, setting=setting, role=role,
                          stage=stage, task=task)


def _texts(request: ChatRequest) -> Iterator[str]:
    """Everything of ``request`` that a chat template turns into prompt tokens."""
    for message in request.messages:
        yield message.text()
        if message.tool_calls:
            yield json.dumps(message.tool_calls)
    if request.tools:
        yield json.dumps(list(request.tools))


def prompt_chars(request: ChatRequest) -> int:
    return sum(len(text) for text in _texts(request))


def check_prompt(request: ChatRequest, context_tokens: int | None,
                 count_tokens: Callable[[str], int] | None = None) -> None:
    """Raise :class:`PromptTooLarge` when ``request`` leaves no room for a reply in a window of
    ``context_tokens`` (``None``: the window is not known, only :data:`MAX_PROMPT_CHARS`
    applies). ``count_tokens`` is the backend's own tokenizer, if it has one."""
    chars = prompt_chars(request)
    overhead = TOKENS_PER_MESSAGE * (len(request.messages) + 1)
    if context_tokens is None:
        if chars > MAX_PROMPT_CHARS:
            raise PromptTooLarge(chars, MAX_PROMPT_CHARS, "characters", estimated=False)
        return
    if chars + overhead < context_tokens:  # every estimated token covers a character at least
        return
    size = sum(estimate_tokens(text) for text in _texts(request)) + overhead
    if size < context_tokens:
        return
    estimated = True
    if count_tokens is not None and size < _EXACT_BELOW * context_tokens:
        size = sum(count_tokens(text) for text in _texts(request)) + overhead
        estimated = False
        if size < context_tokens:
            return
    raise PromptTooLarge(size, context_tokens, "tokens", estimated=estimated)


def bogus_truncation(completion_tokens: int | None, max_tokens: int | None, *,
                     prompt_tokens: int | None = None,
                     context_tokens: int | None = None) -> str | None:
    """Why a reply with ``finish_reason="length"`` cannot have been cut off by the limit, or
    ``None`` when it may have been.

    A genuine cut comes at the completion limit, ``max_tokens``: a reply of fewer than half of
    them (1 token of 64, as a broken proxy returns it) was cut by something else. Nothing is
    judged when the completion's length is not reported or no limit was sent (the server's
    own default applies), nor when the prompt and the reply together fill the context window
    (``context_tokens``, when known): then the window, not the limit, ended the reply."""
    if completion_tokens is None or max_tokens is None or 2 * completion_tokens >= max_tokens:
        return None
    if (context_tokens is not None and prompt_tokens is not None
            and prompt_tokens + completion_tokens >= context_tokens - TOKENS_PER_MESSAGE):
        return None
    return (f"the reply says it was cut off at the token limit after {completion_tokens} of "
            f"{max_tokens} tokens")
