"""A scripted model for tests and demos (the analogue of DSPy's ``DummyLM``).

Replies come from a list (in order), from substring rules (first match wins), or from a
function of the request. A reply may call tools: a :class:`Completion` with ``tool_calls``, or
(in YAML too) a mapping of ``tool_calls`` (each ``{name, arguments}``) and an optional
``text``. Every call is recorded. When the script has no answer the model fails
loudly, showing the prompt it could not answer.
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from skillgrad.errors import ConfigError, ScriptExhausted
from skillgrad.models.messages import ChatRequest, Completion, Usage
from skillgrad.models.toolcalls import call_ids, normal_call
from skillgrad.yamlfile import load_yaml_text

log = logging.getLogger(__name__)
KEPT_CALLS = 100  # requests a scripted model keeps for inspection

Reply = str | dict[str, Any] | list[Any] | Completion


class Rule(BaseModel):
    """Reply with ``reply`` when every string of ``when`` occurs in the prompt and none of
    ``unless`` does. A dict or list reply is sent as JSON text, except a mapping of only
    ``tool_calls`` and ``text``, which calls those tools."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    when: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    reply: Any

    @field_validator("when", "unless", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return (v,) if isinstance(v, str) else v

    def matches(self, prompt: str) -> bool:
        return all(s in prompt for s in self.when) and not any(s in prompt for s in self.unless)


def prompt_text(request: ChatRequest) -> str:
    """All message texts of a request, joined; what rules are matched against."""
    return "\n\n".join(f"[{m.role}]\n{m.text()}" for m in request.messages)


def _estimate_tokens(text: str) -> int:
    # A scripted model has no tokenizer; a stable estimate keeps metering meaningful in tests.
    return max(1, len(text) // 4) if text else 0


class ScriptedModel:
    """A :class:`~skillgrad.models.base.ChatModel` whose answers are scripted.

    Args:
        replies: answers given in order, one per call.
        rules: substring rules tried before ``replies`` (first match wins).
        fn: a function of the request returning a reply, or ``None`` to fall through.
        default: the answer when nothing else matches; without it the model raises.
        delay: seconds to wait before answering (to watch progress or test interruption).
    """

    def __init__(
        self,
        replies: Sequence[Reply] = (),
        *,
        rules: Sequence[Rule | dict[str, Any]] = (),
        fn: Callable[[ChatRequest], Reply | None] | None = None,
        default: Reply | None = None,
        delay: float = 0.0,
    ) -> None:
        self._replies = list(replies)
        self._rules = [r if isinstance(r, Rule) else Rule.model_validate(r) for r in rules]
        self._fn = fn
        self._default = default
        self._delay = delay
        self._lock = threading.Lock()
        # The latest requests, for tests to read (bounded: a long run must not keep them all);
        # ``n_calls`` counts every one.
        self.calls: deque[ChatRequest] = deque(maxlen=KEPT_CALLS)
        self.n_calls = 0

    def complete(self, request: ChatRequest) -> Completion:
        prompt = prompt_text(request)
        if self._delay:
            time.sleep(self._delay)
        with self._lock:
            self.calls.append(request)
            self.n_calls += 1
            reply = self._pick(request, prompt)
        return self._to_completion(reply, prompt, request)

    def _pick(self, request: ChatRequest, prompt: str) -> Reply:
        if self._fn is not None:
            out = self._fn(request)
            if out is not None:
                return out
        for rule in self._rules:
            if rule.matches(prompt):
                return rule.reply
        if self._replies:
            return self._replies.pop(0)
        if self._default is not None:
            return self._default
        # One line for the error; the whole prompt, to write the missing rule from, in the log.
        log.info("scripted model: no reply for call #%d; the prompt was:\n%s",
                 self.n_calls, prompt)
        opening = " ".join(prompt.split())[:100]
        raise ScriptExhausted(
            f"scripted model has no reply for call #{self.n_calls} (the prompt begins "
            f"{opening!r}; -v logs it whole)")

    @staticmethod
    def _to_completion(reply: Reply, prompt: str, request: ChatRequest) -> Completion:
        if isinstance(reply, Completion):
            return reply
        calls = None
        if isinstance(reply, dict) and "tool_calls" in reply and set(reply) <= {"text",
                                                                              "tool_calls"}:
            calls = [normal_call(c) for c in reply["tool_calls"]]
            for call, call_id in zip(calls, call_ids(request, len(calls)), strict=True):
                call.setdefault("id", call_id)
            reply = str(reply.get("text") or "")
        text = reply if isinstance(reply, str) else json.dumps(reply)
        return Completion(
            text=text,
            usage=Usage(prompt_tokens=_estimate_tokens(prompt),
                        completion_tokens=_estimate_tokens(text) + (
                            _estimate_tokens(json.dumps(calls)) if calls else 0)),
            finish_reason="tool_calls" if calls else "stop",
            model="scripted",
            tool_calls=calls,
        )


class ScriptFile(BaseModel):
    """The YAML form of a script: ``rules``, ``replies`` and ``default``."""

    model_config = ConfigDict(extra="forbid")

    rules: list[Rule] = Field(default_factory=list)
    replies: list[Any] = Field(default_factory=list)
    default: Any = None


def read_script(path: Path) -> ScriptFile:
    """Read a YAML or JSON script file."""
    try:
        raw = load_yaml_text(path.read_text(encoding="utf-8"), str(path))
    except FileNotFoundError:
        raise ConfigError(f"{path}: script file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a valid YAML script (not UTF-8 text)") from None
    try:
        return ScriptFile.model_validate(raw or {})
    except ValueError as exc:
        raise ConfigError(f"{path}: invalid script: {exc}") from None


class ScriptedOptions(BaseModel):
    """Config keys of the ``scripted`` backend: a script file and/or inline rules."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    script: Path | None = None
    function: str | None = Field(
        default=None, description="'module:callable' taking a ChatRequest, returning a reply"
    )
    function_args: dict[str, Any] | None = Field(
        default=None,
        description="when set, `function` is a factory called with these keyword arguments "
        "(plus base_dir, the config's folder) that returns the reply function",
    )
    rules: list[Rule] = Field(default_factory=list)
    replies: list[Any] = Field(default_factory=list)
    default: Any = None
    delay: float = Field(0.0, ge=0.0, description="seconds to wait before each reply")

    @model_validator(mode="after")
    def _args_need_function(self) -> ScriptedOptions:
        if self.function_args is not None and self.function is None:
            raise ValueError("function_args is set but function is not")
        return self


def import_function(spec: str) -> Callable[[ChatRequest], Reply | None]:
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"function {spec!r}: expected 'module:callable'")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"function {spec!r}: cannot import ({exc})") from None
    if not callable(fn):
        raise ConfigError(f"function {spec!r}: not callable")
    return fn  # type: ignore[no-any-return]


class ScriptedBackend:
    """Registry entry of the scripted model (``backend: scripted``)."""

    Options = ScriptedOptions

    @classmethod
    def create(cls, options: ScriptedOptions, base_dir: Path) -> ScriptedModel:
        rules, replies, default = list(options.rules), list(options.replies), options.default
        if options.script is not None:
            path = options.script if options.script.is_absolute() else base_dir / options.script
            script = read_script(path)
            rules += script.rules
            replies += script.replies
            default = default if default is not None else script.default
        fn: Any = import_function(options.function) if options.function else None
        if fn is not None and options.function_args is not None:
            fn = fn(**options.function_args, base_dir=base_dir)
            if not callable(fn):
                raise ConfigError(f"function {options.function!r}: the factory did not return "
                                  "a callable")
        return ScriptedModel(replies, rules=rules, fn=fn, default=default, delay=options.delay)
