"""The embedded backend: a GGUF model run in process by llama.cpp (``llama-cpp-python``).

It needs no server, key or network, which is why it is the default when no endpoint is
configured. Two properties shape how it is used:

* Prompt processing is compute-bound (about 41 tokens/s for the 1.5B model on 2 cores), but
  llama.cpp keeps the KV cache of the previous prompt and only evaluates the part of a new
  prompt after the longest common prefix. The skill is the system message, so the tasks of one
  skill version, run back to back, pay for the skill once. Each role gets its own model
  instance so that the optimizer's calls do not evict the target's cached skill.
* Structured output is enforced by a grammar compiled from the request's JSON schema, so the
  optimizer's replies parse even from a small model.

One model instance does one call at a time (llama.cpp contexts are not thread-safe). Its window
is ``n_ctx``: the client refuses a longer prompt before the call (counted with this model's own
tokenizer near the limit), and what llama.cpp itself refuses as too long is refused the same way.
A reply cut off here is always genuine: no transport lies between the model and skillgrad.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skillgrad.errors import ConfigError, DataError, FatalModelError
from skillgrad.models.base import non_text_parts, refuse_tools
from skillgrad.models.limits import PromptTooLarge
from skillgrad.models.messages import ChatRequest, Completion, Message, Usage
from skillgrad.models.weights import CATALOG, DEFAULT_MODEL, locate

log = logging.getLogger(__name__)

INSTALL_HINT = 'pip install "skillgrad[local]"'
# llama-cpp-python's refusal of a prompt longer than the window (its own exact count).
_TOO_LONG = re.compile(r"Requested tokens \((\d+)\) exceed context window of (\d+)")


class EmbeddedOptions(BaseModel):
    """The ``model.<role>`` keys of ``backend: embedded``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(DEFAULT_MODEL, description=f"one of: {', '.join(sorted(CATALOG))}")
    model_path: Path | None = Field(None, description="any GGUF file instead of a known model")
    n_ctx: int = Field(8192, ge=256, description="context window in tokens")
    n_threads: int | None = Field(None, ge=1, description="default: all cores")
    n_batch: int = Field(512, ge=8)
    seed: int = 0
    temperature: float | None = Field(None, ge=0.0, description="replaces the request's value")
    max_tokens: int | None = Field(None, ge=1, description="replaces the request's value")

    @model_validator(mode="after")
    def _known(self) -> EmbeddedOptions:
        if self.model_path is None and self.model not in CATALOG:
            raise ValueError(f"model: unknown embedded model {self.model!r} "
                             f"(known: {', '.join(sorted(CATALOG))}; or set model_path)")
        return self


class EmbeddedModel:
    """A llama.cpp model in this process; satisfies :class:`~skillgrad.models.base.ChatModel`.

    ``context_tokens`` (``n_ctx``) and ``count_tokens`` let the client check a prompt's size."""

    context_key = "n_ctx"  # the option that states the window, named in refusals

    def __init__(self, path: Path, options: EmbeddedOptions) -> None:
        try:
            from llama_cpp import Llama
        except ImportError:
            raise ConfigError(
                f"backend embedded needs llama-cpp-python; install it with: {INSTALL_HINT}"
            ) from None
        self.options = options
        self.path = path
        # What determines the answers (the response cache's key): the weights, the sampling
        # seed and the values that replace the request's.
        self.identity = (f"embedded|{path.name}|{path.stat().st_size}|{options.seed}|"
                         f"{options.temperature}|{options.max_tokens}")
        self.endpoint = f"embedded:{path}"
        self.context_tokens = options.n_ctx
        threads = options.n_threads or os.cpu_count() or 1
        self._lock = threading.Lock()
        self._llama = Llama(model_path=str(path), n_ctx=options.n_ctx, n_threads=threads,
                            n_threads_batch=threads, n_batch=options.n_batch, seed=options.seed,
                            verbose=False)

    def complete(self, request: ChatRequest) -> Completion:
        parts = non_text_parts(request)
        if parts:
            # Sending only the text would score the model on a question about an image it
            # never saw; build.py refuses such a config earlier, this guards direct use.
            raise FatalModelError(
                f"embedded model has no vision: the request carries {len(parts)} non-text "
                f"part(s) ({', '.join(sorted(set(parts)))}); use a vision-capable target "
                "(backend: openai_compatible)")
        refuse_tools(request, "embedded model")
        o = self.options
        kwargs: dict[str, Any] = {
            "messages": [_message(m) for m in request.messages],
            "max_tokens": o.max_tokens or request.max_tokens,
            "temperature": o.temperature if o.temperature is not None else (
                request.temperature if request.temperature is not None else 0.0),
            "seed": o.seed,
        }
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": request.json_schema}
        with self._lock:
            try:
                out: Any = self._llama.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. the prompt does not fit the context window
                too_long = _TOO_LONG.search(str(exc))
                if too_long:
                    raise PromptTooLarge(int(too_long.group(1)), int(too_long.group(2)),
                                         "tokens", estimated=False) from exc
                raise FatalModelError(f"embedded model: {exc}") from exc
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            usage=Usage(prompt_tokens=usage.get("prompt_tokens", 0),
                        completion_tokens=usage.get("completion_tokens", 0)),
            finish_reason=choice.get("finish_reason") or "stop",
            model=self.path.name,
        )

    def reset(self) -> None:
        """Forget the cached prompt: the next call evaluates its whole prompt (benchmarks)."""
        with self._lock:
            self._llama.reset()

    def cached_tokens(self) -> list[int]:
        """The tokens whose KV state is cached (the last prompt and its answer)."""
        with self._lock:
            return [int(t) for t in self._llama._input_ids]

    def count_tokens(self, text: str) -> int:
        """``text``'s length in this model's tokens (the client's check of a prompt near the
        window); waits for a call in progress, since llama.cpp objects are not thread-safe."""
        with self._lock:
            return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def _message(m: Message) -> dict[str, Any]:
    return {"role": m.role, "content": m.text()}


class EmbeddedBackend:
    """Registry entry of ``backend: embedded``."""

    Options = EmbeddedOptions
    accepts_images = False  # llama.cpp's text models here have no vision (see build.py)
    accepts_tools = False  # no native tool calling: environments use the text protocol

    @classmethod
    def create(cls, options: EmbeddedOptions, base_dir: Path) -> EmbeddedModel:
        if options.model_path is not None:
            path = options.model_path if options.model_path.is_absolute() else (
                base_dir / options.model_path)
            if not path.is_file():
                raise DataError(f"model_path: {path} is not a file")
        else:
            path = locate(options.model)
        return EmbeddedModel(path, options)
