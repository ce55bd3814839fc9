"""The ``openai_compatible`` backend: any server that speaks the OpenAI chat-completions API
(OpenAI, Azure OpenAI, vLLM, llama.cpp's server, SGLang, Ollama, LM Studio, ...).

This is the forward pass's device driver: it turns a :class:`ChatRequest` into one HTTP call
and the reply into a :class:`Completion`, and maps every failure onto the two error families of
:mod:`skillgrad.errors`, naming its kind (rate limit, 5xx, timeout, connection, a broken reply).
A reply that says it was cut off at the token limit far below that limit is such a broken
reply (:func:`~skillgrad.models.limits.bogus_truncation`), not the model's answer. It never
retries (the SDK client is built with ``max_retries=0``): retries, backoff, concurrency limits,
the prompt-size guard and ``<think>`` stripping belong to the shared
:class:`~skillgrad.models.client.ModelClient` above it.

The API key is read from the environment variable named by ``api_key_env`` when the model is
created; it is never a config value. So are the values of ``base_url``, ``azure_endpoint`` and
``extra_headers`` written as ``${VAR}``: the options (and every copy of the config) keep the
reference, and only the model's own copy of the options holds the values. A URL may not write
out a credential (a user:password@ would be sent as HTTP Basic authentication in place of the
key; a query credential belongs in ``${VAR}``). The key, and every other credential the
options carry (a query credential, headers not known to be harmless, secret fields of the
extra body), never appears in an error, in ``endpoint`` or in ``identity``: they are built from
redacted values (:mod:`skillgrad.redact`), and a server's own error text is scrubbed of them,
as written and in base64.

(Over the house limit of ~400 lines: the checks of the options' URLs and credentials stay next
to the one model that uses them.)
"""

from __future__ import annotations

import ipaddress
import json
import logging
import math
import os
import re
import threading
import time
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit, urlunsplit

import openai
from openai.types.chat import ChatCompletion
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from skillgrad.errors import ConfigError, FatalModelError, TransientModelError
from skillgrad.models.limits import bogus_truncation
from skillgrad.models.messages import ChatRequest, Completion, Message, Usage
from skillgrad.redact import (
    HARMLESS_HEADERS,
    expand_references,
    masked_values,
    no_url_credential,
    redact,
    redact_query,
    redact_text,
    url_credential,
    url_secrets,
)

log = logging.getLogger(__name__)

PLACEHOLDER_KEY = "unused"  # what local servers without authentication are sent
_MAX_SERVER_MESSAGE = 300
# Statuses the SDK itself would retry: request timeout, lock conflict, rate limit, 5xx.
_TRANSIENT_STATUSES = frozenset({408, 409, 429})
_SCHEMA_NAME = re.compile(r"[^a-zA-Z0-9_-]+")
_IPV4_LIKE = re.compile(r"[0-9.]+")
_USE_VARIABLES = ("give secrets through environment variables: the API key in the one "
                  "api_key_env names, a header or a query value as ${VAR}")


def _variables_set(value: str) -> str:
    """``value``, once every ``${VAR}`` in it is set (read again when the model is made)."""
    expand_references(value)
    return value


class OpenAICompatibleOptions(BaseModel):
    """Config keys of the ``openai_compatible`` backend.

    ``temperature`` and ``max_tokens``, when set, REPLACE the values a request carries (the
    optimizer's own ``optimizer.temperature``/``max_tokens`` included): use them to pin a
    server to what it supports.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = Field(
        None, description="the server's OpenAI-compatible URL, e.g. http://127.0.0.1:8000/v1 "
        "(required unless azure_api_version is set)")
    model: str = Field(description="model name sent to the server (Azure: the deployment name)")
    api_key_env: str | None = Field(
        None, description="NAME of the environment variable holding the API key; unset: a "
        f"placeholder key ({PLACEHOLDER_KEY!r}) is sent, which keyless local servers accept")
    temperature: float | None = Field(
        None, ge=0.0, description="when set, replaces every request's temperature")
    send_temperature: bool = Field(
        True, description="false: never send a temperature (models that accept only their "
        "own, such as OpenAI's reasoning models)")
    max_tokens: int | None = Field(
        None, ge=1, description="when set, replaces every request's completion-token limit")
    max_tokens_cap: int | None = Field(
        None, ge=1, description="the most completion tokens a request may ask for; a larger "
        "limit is lowered to this")
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens", description="the request field of the completion limit "
        "(max_completion_tokens: OpenAI's reasoning models)")
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    extra_body: dict[str, Any] = Field(
        default_factory=dict, description="extra request-body keys, e.g. "
        "chat_template_kwargs: {enable_thinking: false}")
    extra_headers: dict[str, Annotated[str, AfterValidator(_variables_set)]] = Field(
        default_factory=dict, description="headers sent with every request; a value may be "
        "${VAR} (or Bearer ${VAR}): read from the environment, never written down")
    timeout: float = Field(120.0, gt=0.0, description="seconds to wait for one reply")
    context_tokens: int | None = Field(
        None, ge=1, description="the model's context window in tokens: a longer prompt is "
        "refused before it is sent; unset: only prompts over 4,000,000 characters are")
    structured_output: Literal["json_schema", "json_object", "none"] = Field(
        "json_schema", description="how a request's JSON schema is passed: as response_format "
        "json_schema (non-strict), as json_object, or not at all")
    azure_api_version: str | None = Field(
        None, description="set to use Azure OpenAI (with azure_endpoint)")
    azure_endpoint: str | None = Field(
        None, description="Azure resource URL, e.g. https://NAME.openai.azure.com")
    azure_login: Literal["api_key", "azure_cli", "managed_identity"] = Field(
        "api_key", description="Azure: the key in api_key_env, or a Microsoft Entra token "
        "from the Azure CLI's login or a managed identity (the azure extra)")
    azure_ad_scope: str = Field("https://cognitiveservices.azure.com/.default",
                                description="Azure: the scope of the Entra token")
    azure_managed_identity_client_id: str | None = Field(
        None, description="Azure, managed_identity: a user-assigned identity's client id")

    @field_validator("base_url", "azure_endpoint")
    @classmethod
    def _usable_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        no_url_credential(value, _USE_VARIABLES)
        url = expand_references(value)  # a ${VAR} must be set; its value is not kept here
        problem = url_problem(url)
        if problem is not None:
            raise ValueError(f"{problem}; expected an http:// or https:// URL with a host, "
                             "e.g. http://127.0.0.1:8000/v1")
        if url_credential(url, query=False) is not None:
            raise ValueError("the value of its ${VAR} holds a user:password@ (it would be sent "
                             f"as HTTP Basic authentication in place of the key); {_USE_VARIABLES}")
        return value

    @model_validator(mode="after")
    def _endpoint_given(self) -> OpenAICompatibleOptions:
        if self.azure_api_version is not None and not self.azure_endpoint:
            raise ValueError("azure_endpoint: required when azure_api_version is set")
        if self.azure_api_version is None and self.azure_endpoint is not None:
            raise ValueError("azure_api_version: required when azure_endpoint is set")
        if self.azure_api_version is None and not self.base_url:
            raise ValueError("base_url: required (the server's OpenAI-compatible URL, "
                             "e.g. http://127.0.0.1:8000/v1)")
        if self.azure_login != "api_key" and self.azure_api_version is None:
            raise ValueError("azure_login: only for Azure OpenAI (set azure_endpoint and "
                             "azure_api_version)")
        if self.azure_login != "api_key" and self.api_key_env is not None:
            raise ValueError(f"api_key_env: not used with azure_login {self.azure_login} "
                             "(a token is sent instead of a key)")
        return self


# ----------------------------------------------------------------------------- helpers


def url_problem(url: str) -> str | None:
    """What makes ``url`` unusable as an endpoint, or ``None``. The answer never quotes the
    URL: a part of it may be a password."""
    if not url.strip() or any(ch.isspace() or not ch.isprintable() for ch in url):
        return "is empty or holds spaces or control characters"
    try:
        parts = urlsplit(url)
    except ValueError:  # urlsplit's only complaint: a bad IPv6 address or unbalanced [ ]
        return "has a malformed host (an IPv6 address goes in brackets: http://[::1]:8000/v1)"
    if parts.scheme not in ("http", "https"):
        return "does not start with http:// or https://"
    if not parts.hostname:
        return "has no host"
    if _IPV4_LIKE.fullmatch(parts.hostname) and not _is_ipv4(parts.hostname):
        return "has a malformed host (not an IPv4 address)"
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        return "has an invalid port (a number from 1 to 65535 after the host)"
    return None


def _is_ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


def public_url(url: str) -> str:
    """``url`` without user:password and with key-like query values masked, so it can be
    shown and used as a key."""
    parts = urlsplit(url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=host, query=redact_query(parts.query))).rstrip("/")


def split_query(url: str) -> tuple[str, dict[str, str]]:
    """``url`` without its query and fragment, and the query's parameters.

    The SDK appends the route to the base URL as text (``/v1?sig=X`` would become
    ``/v1?sig=Xchat/completions``), so a query given in the base URL is sent as the client's
    default query instead."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit(parts._replace(query="", fragment="")), query


def secret_values(options: OpenAICompatibleOptions, key: str) -> list[str]:
    """Every credential ``options`` carry, with the API key: what a server's error text is
    scrubbed of before it is shown."""
    found = [key] if key != PLACEHOLDER_KEY else []
    for url in (options.base_url, options.azure_endpoint):
        found += url_secrets(url) if url else []
    for name, value in options.extra_headers.items():
        if name.lower() not in HARMLESS_HEADERS:  # the value, and its credential after a
            found += [value, value.partition(" ")[2]]  # scheme ("Bearer TOKEN")
    found += masked_values(options.extra_body, "extra_body")
    return found


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _server_message(exc: openai.APIStatusError, secrets: list[str]) -> str:
    """The server's own error text (credentials scrubbed), shortened for a one-line error."""
    body = exc.body
    text: Any = body.get("message") if isinstance(body, dict) else body
    if not text:
        text = exc.message
    text = redact_text(" ".join(str(text).split()), secrets)
    if len(text) > _MAX_SERVER_MESSAGE:
        text = text[: _MAX_SERVER_MESSAGE - 3] + "..."
    return text


def _message_param(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.name is not None:
        out["name"] = message.name
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.tool_calls is not None:
        out["tool_calls"] = message.tool_calls
    return out


def _estimate_tokens(text: str) -> int:
    return len(text) // 4


# ----------------------------------------------------------------------------- model


class OpenAICompatibleModel:
    """A :class:`~skillgrad.models.base.ChatModel` answering through an OpenAI-compatible API.

    Attributes:
        identity: a stable description of what answers (endpoint, model and every option that
            changes replies); a response-cache key. Never contains the key.
        endpoint: the server URL; calls to one endpoint share one concurrency limit.
        context_tokens: the model's window (the option), checked by the client before a call.
    """

    context_key = "context_tokens"  # the option that states the window, named in refusals

    def __init__(self, options: OpenAICompatibleOptions, client: openai.OpenAI, api_key: str,
                 endpoint: str) -> None:
        self.options = options
        self.endpoint = endpoint
        self.identity = self._identity(options, endpoint)
        self.context_tokens = options.context_tokens
        self._client = client
        self._secrets = secret_values(options, api_key)
        self._usage_warned = False
        self._lock = threading.Lock()

    @staticmethod
    def _identity(o: OpenAICompatibleOptions, endpoint: str) -> str:
        parts = ["openai_compatible", endpoint, o.model,
                 json.dumps(redact(o.extra_body, "extra_body"), sort_keys=True, default=str),
                 str(o.reasoning_effort), str(o.temperature), str(o.max_tokens),
                 o.structured_output]
        if o.azure_api_version:
            parts.append(f"azure={o.azure_api_version}")
        if not o.send_temperature:
            parts.append("no_temperature")
        if o.max_tokens_cap is not None:
            parts.append(f"cap={o.max_tokens_cap}")
        return "|".join(parts)

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def complete(self, request: ChatRequest) -> Completion:
        try:
            response = self._client.chat.completions.create(**self.request_kwargs(request))
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from None
        except openai.APITimeoutError:
            raise TransientModelError(
                f"{self.endpoint}: no answer within {self.options.timeout:g}s",
                kind="timeout") from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            reason = redact_text(f"{type(cause).__name__}: {cause}", self._secrets)
            raise TransientModelError(f"{self.endpoint}: connection failed ({reason})",
                                      kind="connection") from None
        except (openai.APIResponseValidationError, json.JSONDecodeError) as exc:
            # The SDK raises a bare JSONDecodeError for a 200 whose JSON body is cut off.
            raise TransientModelError(
                f"{self.endpoint}: unusable reply ({type(exc).__name__})",
                kind="bad_reply") from None
        return self._to_completion(response, request)

    # ------------------------------------------------------------------------- request

    def request_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for ``request``."""
        o = self.options
        kwargs: dict[str, Any] = {
            "model": o.model, "messages": [_message_param(m) for m in request.messages]}
        max_tokens = self._limit(request)
        if max_tokens is not None:
            kwargs[o.max_tokens_field] = max_tokens
        temperature = o.temperature if o.temperature is not None else request.temperature
        if temperature is not None and o.send_temperature:
            kwargs["temperature"] = temperature
        if request.stop:
            kwargs["stop"] = list(request.stop)
        if request.tools:
            kwargs["tools"] = list(request.tools)
        response_format = self._response_format(request.json_schema)
        if response_format is not None:
            kwargs["response_format"] = response_format
        if o.reasoning_effort is not None:
            kwargs["reasoning_effort"] = o.reasoning_effort
        if o.extra_body:
            kwargs["extra_body"] = dict(o.extra_body)
        if o.extra_headers:
            kwargs["extra_headers"] = dict(o.extra_headers)
        return kwargs

    def _limit(self, request: ChatRequest) -> int | None:
        """The completion limit sent: the request's, replaced by ``max_tokens`` and lowered
        to ``max_tokens_cap`` when they are set."""
        o = self.options
        limit = o.max_tokens if o.max_tokens is not None else request.max_tokens
        if limit is not None and o.max_tokens_cap is not None:
            limit = min(limit, o.max_tokens_cap)
        return limit

    def _response_format(self, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        mode = self.options.structured_output
        if schema is None or mode == "none":
            return None
        if mode == "json_object":
            return {"type": "json_object"}
        # The API wants a name matching [a-zA-Z0-9_-]{1,64}; a pydantic schema has a title.
        name = _SCHEMA_NAME.sub("_", str(schema.get("title") or ""))[:64] or "response"
        return {"type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": False}}

    # ------------------------------------------------------------------------- reply

    def _to_completion(self, response: Any, request: ChatRequest) -> Completion:
        # A 200 with a non-JSON content type comes back as a str, a JSON array as a list, and
        # JSON of the wrong shape as a ChatCompletion built without validation (any field may
        # be missing or of the wrong type): all of that is a broken reply, not an answer.
        if not isinstance(response, ChatCompletion):
            raise TransientModelError(f"{self.endpoint}: unusable reply (not a chat completion)",
                                      kind="bad_reply")
        try:
            completion = self._convert(response, request)
        except (ValidationError, AttributeError, TypeError, IndexError) as exc:
            raise TransientModelError(
                f"{self.endpoint}: unusable reply ({type(exc).__name__})",
                kind="bad_reply") from None
        if completion.truncated:
            self._check_cut(response, request)
        return completion

    def _check_cut(self, response: ChatCompletion, request: ChatRequest) -> None:
        """Raise a transient error for a reply that says it was cut off at the token limit
        far below that limit: a proxy or server broke it (see
        :func:`~skillgrad.models.limits.bogus_truncation`). Judged only on the usage the
        server reported, never on an estimate."""
        usage = response.usage
        limit = self._limit(request)
        why = bogus_truncation(
            usage.completion_tokens if usage is not None else None, limit,
            prompt_tokens=usage.prompt_tokens if usage is not None else None,
            context_tokens=self.context_tokens)
        if why is not None:
            raise TransientModelError(f"{self.endpoint}: broken reply: {why}",
                                      kind="bogus_truncation")

    def _convert(self, response: ChatCompletion, request: ChatRequest) -> Completion:
        if not response.choices or response.choices[0].message is None:
            raise TransientModelError(f"{self.endpoint}: unusable reply (no choices)",
                                      kind="bad_reply")
        choice = response.choices[0]
        message = choice.message
        text = message.content or ""
        tool_calls = [tc.model_dump(mode="json", exclude_none=True)
                      for tc in message.tool_calls] if message.tool_calls else None
        return Completion(
            text=text, usage=self._usage(response, request, text),
            finish_reason=choice.finish_reason or "stop",
            model=response.model or self.options.model, tool_calls=tool_calls,
        )

    def _usage(self, response: ChatCompletion, request: ChatRequest, text: str) -> Usage:
        usage = response.usage
        if usage is not None and usage.prompt_tokens is not None:
            return Usage(prompt_tokens=usage.prompt_tokens,
                         completion_tokens=usage.completion_tokens or 0)
        with self._lock:
            warn, self._usage_warned = not self._usage_warned, True
        if warn:
            log.warning("%s (%s) reports no token usage; estimating 4 characters per token",
                        self.endpoint, self.options.model)
        prompt = sum(len(m.text()) for m in request.messages)
        return Usage(prompt_tokens=prompt // 4, completion_tokens=_estimate_tokens(text))

    # ------------------------------------------------------------------------- errors

    def _status_error(self, exc: openai.APIStatusError) -> Exception:
        status = exc.status_code
        detail = _server_message(exc, self._secrets)
        if isinstance(exc, (openai.AuthenticationError, openai.PermissionDeniedError)):
            # Never repeat the server's text here: some servers echo the key they were sent.
            env = self.options.api_key_env
            hint = (f"check the key in ${env}" if env
                    else "set api_key_env to the variable holding the key")
            return FatalModelError(
                f"authentication failed at {self.endpoint} (HTTP {status}): {hint}")
        if status == 429 and exc.code == "insufficient_quota":
            return FatalModelError(f"{self.endpoint}: quota exhausted (HTTP 429): {detail}")
        if status in _TRANSIENT_STATUSES or status >= 500:
            return TransientModelError(
                f"{self.endpoint}: HTTP {status}: {detail}",
                retry_after=parse_retry_after(exc.response.headers), kind=_status_kind(status))
        return FatalModelError(f"{self.endpoint} rejected the request (HTTP {status}): {detail}")


def _status_kind(status: int) -> str:
    """The kind a transient HTTP status is counted under."""
    return {429: "rate_limit", 408: "timeout"}.get(
        status, "server_error" if status >= 500 else "transient")


# ----------------------------------------------------------------------------- backend


def with_environment(options: OpenAICompatibleOptions) -> OpenAICompatibleOptions:
    """A copy of ``options`` whose ``base_url``, ``azure_endpoint`` and header values have
    their ``${VAR}`` references replaced by the variables' values: the model's own, never
    written, logged or hashed. An unset variable is a :class:`ConfigError` naming the key."""
    update: dict[str, Any] = {"extra_headers": {}}
    key = ""
    try:
        for key in ("base_url", "azure_endpoint"):
            value = getattr(options, key)
            if value is not None:
                update[key] = expand_references(value)
        for name, value in options.extra_headers.items():
            key = f"extra_headers.{name}"
            update["extra_headers"][name] = expand_references(value)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    return options.model_copy(update=update)


def _read_key(options: OpenAICompatibleOptions) -> str:
    name = options.api_key_env
    if name is None:
        return PLACEHOLDER_KEY
    value = os.environ.get(name)
    if value is None:
        raise ConfigError(f"api_key_env: environment variable {name} is not set")
    if not value.strip():
        raise ConfigError(f"api_key_env: environment variable {name} is empty")
    return value.strip()


def entra_token_provider(options: OpenAICompatibleOptions) -> Any:
    """A Microsoft Entra token provider for Azure OpenAI: the Azure CLI's login or a managed
    identity, through ``azure-identity`` (the ``azure`` extra)."""
    try:
        from azure.identity import (  # type: ignore[import-not-found,unused-ignore]
            AzureCliCredential,
            ManagedIdentityCredential,
            get_bearer_token_provider,
        )
    except ImportError:
        raise ConfigError(f"azure_login {options.azure_login} needs azure-identity: "
                          'pip install "skillgrad[azure]"') from None
    if options.azure_login == "azure_cli":
        credential = AzureCliCredential()
    else:
        client_id = options.azure_managed_identity_client_id
        credential = (ManagedIdentityCredential(client_id=client_id) if client_id
                      else ManagedIdentityCredential())
    return get_bearer_token_provider(credential, options.azure_ad_scope)


def _make_client(options: OpenAICompatibleOptions, key: str) -> tuple[openai.OpenAI, str]:
    """The SDK client (never retrying: the shared layer does) and the endpoint it talks to."""
    # The options validator guarantees an endpoint: Azure's, or base_url.
    if options.azure_api_version is not None and options.azure_endpoint:
        url, query = split_query(options.azure_endpoint)
        credential: dict[str, Any] = (
            {"api_key": key} if options.azure_login == "api_key"
            else {"azure_ad_token_provider": entra_token_provider(options)})
        client: openai.OpenAI = openai.AzureOpenAI(
            azure_endpoint=url, api_version=options.azure_api_version, max_retries=0,
            timeout=options.timeout, default_query=query or None, **credential)
        return client, public_url(options.azure_endpoint)
    base_url = options.base_url or ""
    url, query = split_query(base_url)
    client = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=options.timeout,
                           default_query=query or None)
    return client, public_url(base_url)


class OpenAICompatibleBackend:
    """Registry entry of the OpenAI-compatible model (``backend: openai_compatible``)."""

    Options = OpenAICompatibleOptions

    @classmethod
    def create(cls, options: OpenAICompatibleOptions, base_dir: Path) -> OpenAICompatibleModel:
        options = with_environment(options)
        key = _read_key(options)
        client, endpoint = _make_client(options, key)
        return OpenAICompatibleModel(options, client, key, endpoint)
