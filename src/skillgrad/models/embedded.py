"""The embedded backend: a GGUF model run in process by llama.cpp (``llama-cpp-python``).

It needs no server, key or network, which is why it is the default when no endpoint is
configured. Two properties shape how it is used:

* Prompt processing is compute-bound (about 41 tokens/s for the 1.5B model on 2 cores), but
  llama.cpp keeps the KV cache of the previous prompt and only evaluates the part of a new
  prompt after the longest common prefix. The skill is the system message, so the tasks of one
  skill version, run back to back, pay for the skill once. Each role gets its own model
  instance so that the optimizer's calls do not evict the target's cached skill, and each
  instance keeps ``prefix_slots`` contexts, one per system message served last: the current
  skill and a candidate evaluated in turn (rollouts, screening, the gate) each keep their
  prefix. The weights file is memory-mapped, so its pages are shared; each context adds its
  own KV cache and buffers.
* Structured output is enforced by a grammar compiled from the request's JSON schema, so the
  optimizer's replies parse even from a small model.
* Tools offered in a request reach the model through its chat template, and the calls in its
  reply come back as :attr:`Completion.tool_calls` (:mod:`skillgrad.models.toolcalls`), so an
  agent CLI can drive it through ``skillgrad serve``.

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
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from skillgrad.errors import ConfigError, DataError, FatalModelError
from skillgrad.models.base import non_text_parts
from skillgrad.models.limits import PromptTooLarge
from skillgrad.models.messages import ChatRequest, Completion, Message, Usage
from skillgrad.models.toolcalls import split_tool_calls, template_message, tools_preamble
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
    prefix_slots: int | None = Field(
        None, ge=1, le=8, description="contexts kept, each caching the prompt of one system "
        "message (skill), so that skill versions evaluated in turn (the current one and a "
        "candidate) each pay their prefix once; each costs its own KV cache and buffers (about "
        "0.9 GB at n_ctx 8192). Default: 2 for the target, 1 for the optimizer")
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
        self._llama_class = Llama
        self._slots: list[_Slot] = []
        self._route = threading.Lock()
        self._tick = 0
        self._last: _Slot = self._slot(None)  # the first context is made at once

    def _new_context(self) -> Any:
        o = self.options
        threads = o.n_threads or os.cpu_count() or 1
        # The weights file is memory-mapped (its pages are shared); a context adds its own KV
        # cache and compute buffers.
        return self._llama_class(model_path=str(self.path), n_ctx=o.n_ctx, n_threads=threads,
                                 n_threads_batch=threads, n_batch=o.n_batch, seed=o.seed,
                                 verbose=False)

    def _slot(self, key: str | None) -> _Slot:
        """The context for a prompt whose system message is ``key``: the one that served that
        system message last, else one that served none yet, else a new one (up to
        ``prefix_slots``), else the one used least recently."""
        with self._route:
            self._tick += 1
            slot = next((s for s in self._slots if key is not None and s.key == key), None)
            if slot is None:  # a context that holds no system message yet
                slot = next((s for s in self._slots if s.key is None), None)
            if slot is None and len(self._slots) < (self.options.prefix_slots or 1):
                slot = _Slot(self._new_context())
                self._slots.append(slot)
            if slot is None:
                slot = min(self._slots, key=lambda s: s.used)
            slot.key, slot.used = key, self._tick
            return slot

    def complete(self, request: ChatRequest) -> Completion:
        parts = non_text_parts(request)
        if parts:
            # Sending only the text would score the model on a question about an image it
            # never saw; build.py refuses such a config earlier, this guards direct use.
            raise FatalModelError(
                f"embedded model has no vision: the request carries {len(parts)} non-text "
                f"part(s) ({', '.join(sorted(set(parts)))}); use a vision-capable target "
                "(backend: openai_compatible)")
        o = self.options
        kwargs: dict[str, Any] = {
            "messages": [template_message(m) for m in request.messages],
            "max_tokens": o.max_tokens or request.max_tokens,
            "temperature": o.temperature if o.temperature is not None else (
                request.temperature if request.temperature is not None else 0.0),
            "seed": o.seed,
        }
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": request.json_schema}
        slot = self._slot(request.messages[0].text() if request.messages else None)
        with slot.lock:
            self._last = slot
            if request.tools:
                _offer_tools(kwargs, request.tools, slot.llama)
            try:
                out: Any = slot.llama.create_chat_completion(**kwargs)
            except ValueError as exc:  # e.g. the prompt does not fit the context window
                too_long = _TOO_LONG.search(str(exc))
                if too_long:
                    raise PromptTooLarge(int(too_long.group(1)), int(too_long.group(2)),
                                         "tokens", estimated=False) from exc
                raise FatalModelError(f"embedded model: {exc}") from exc
        choice = out["choices"][0]
        usage = out.get("usage") or {}
        text, calls = choice["message"].get("content") or "", None
        finish = choice.get("finish_reason") or "stop"
        if request.tools:
            text, calls = split_tool_calls(text, request)
            finish = "tool_calls" if calls and finish == "stop" else finish
        return Completion(
            text=text,
            usage=Usage(prompt_tokens=usage.get("prompt_tokens", 0),
                        completion_tokens=usage.get("completion_tokens", 0)),
            finish_reason=finish,
            model=self.path.name,
            tool_calls=calls or None,
        )

    def measure_speed(self) -> tuple[float, float]:
        """This model's prompt and generation speed on this machine, in tokens per second: a
        300-word prompt evaluated whole, then the same prompt (now cached) with 64 tokens to
        generate. About ten seconds for the 1.5B model on 2 cores; its caches are cleared."""
        filler = " ".join(f"word{i}" for i in range(300))
        request = ChatRequest(messages=(Message(role="user", content=f"Repeat: {filler}"),),
                              max_tokens=1, temperature=0.0)
        self.reset()
        started = time.perf_counter()
        out = self.complete(request)
        prompt_rate = out.usage.prompt_tokens / (time.perf_counter() - started)
        started = time.perf_counter()
        out = self.complete(request.model_copy(update={"max_tokens": 64}))
        generation_rate = max(1, out.usage.completion_tokens) / (time.perf_counter() - started)
        self.reset()
        return prompt_rate, generation_rate

    def reset(self) -> None:
        """Forget every cached prompt: the next calls evaluate their whole prompt (benchmarks)."""
        for slot in list(self._slots):
            with slot.lock:
                slot.llama.reset()
                slot.key = None

    def cached_tokens(self, key: str | None = None) -> list[int]:
        """The tokens whose KV state is cached in the context that served the last call (the
        last prompt and its answer), or in the one that holds the system message ``key``."""
        slot = next((s for s in self._slots if s.key == key), None) if key else self._last
        if slot is None:
            return []
        with slot.lock:
            return [int(t) for t in slot.llama._input_ids]

    @property
    def contexts(self) -> int:
        """How many contexts (prefix slots) are made so far."""
        return len(self._slots)

    def count_tokens(self, text: str) -> int:
        """``text``'s length in this model's tokens (the client's check of a prompt near the
        window); waits for a call in progress, since llama.cpp objects are not thread-safe."""
        slot = self._slots[0]
        with slot.lock:
            return len(slot.llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))


class _Slot:
    """One llama.cpp context and the system message whose prompt it caches."""

    def __init__(self, llama: Any) -> None:
        self.llama = llama
        self.lock = threading.Lock()
        self.key: str | None = None
        self.used = 0


def _offer_tools(kwargs: dict[str, Any], tools: tuple[dict[str, Any], ...], llama: Any) -> None:
    """Offer ``tools`` the way the model was trained to see them: through its chat template
    when the template renders tools (Qwen2.5's does, in the ``<tool_call>`` convention),
    else as a system preamble in that convention. The reply's calls are cut out of its text
    (:func:`~skillgrad.models.toolcalls.split_tool_calls`)."""
    template = str((getattr(llama, "metadata", None) or {}).get("tokenizer.chat_template", ""))
    if "tools" in template:
        kwargs["tools"] = list(tools)
        return
    messages = kwargs["messages"]
    preamble = tools_preamble(tools)
    if messages and messages[0]["role"] == "system":
        messages[0] = {**messages[0], "content": f"{messages[0]['content']}\n\n{preamble}"}
    else:
        messages.insert(0, {"role": "system", "content": preamble})


class EmbeddedBackend:
    """Registry entry of ``backend: embedded``."""

    Options = EmbeddedOptions
    accepts_images = False  # llama.cpp's text models here have no vision (see build.py)
    # Native tool calls in the <tool_call> convention of its chat template (models/toolcalls.py).
    accepts_tools = True
    # As optimizer, a small local model learns more from sampled plain rules, screened on the
    # step's tasks, than from one set of anchored edits (config.SMALL_OPTIMIZER_GRADIENT).
    small_optimizer = True
    # Its speed on this machine can be measured before a run (``train --dry-run``'s time).
    measures_speed = True

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
