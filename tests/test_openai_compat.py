"""The ``openai_compatible`` backend over real HTTP, against the loopback fake server."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import openai
import pytest
import toy
import yaml
from conftest import toy_config
from pydantic import ValidationError

from skillgrad.config import load_config
from skillgrad.errors import ConfigError, FatalModelError, TransientModelError
from skillgrad.models.base import ChatModel
from skillgrad.models.client import ModelClient
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.models.openai_compat import (
    OpenAICompatibleBackend,
    OpenAICompatibleModel,
    OpenAICompatibleOptions,
    parse_retry_after,
)
from skillgrad.testing import FakeOpenAIServer, Fault, completion_body

KEY_ENV = "SKILLGRAD_TEST_OPENAI_KEY"

Make = Callable[..., OpenAICompatibleModel]


def ask(text: str = "hello there", **fields: Any) -> ChatRequest:
    return ChatRequest(messages=(Message(role="user", content=text),), **fields)


def server_threads(port: int | None = None) -> list[threading.Thread]:
    """Threads of the fake server on ``port`` (of any fake server when ``None``)."""
    suffix = "" if port is None else f"-{port}"
    return [t for t in threading.enumerate()
            if t.name.startswith("fake-openai") and t.name.endswith(suffix)]


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as srv:
        port = srv.port
        yield srv
    assert server_threads(port) == []


@pytest.fixture
def make(server: FakeOpenAIServer) -> Iterator[Make]:
    """Build models against ``server``; their connection pools are closed afterwards."""
    built: list[OpenAICompatibleModel] = []

    def build(**options: Any) -> OpenAICompatibleModel:
        options.setdefault("base_url", server.url)
        options.setdefault("model", "m")
        model = OpenAICompatibleBackend.create(OpenAICompatibleOptions(**options), Path("."))
        built.append(model)
        return model

    yield build
    for model in built:
        model.close()


# ----------------------------------------------------------------------------- replies


def test_plain_reply_with_usage(
    server: FakeOpenAIServer, make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")  # not sent: api_key_env is unset
    model = make()
    assert isinstance(model, ChatModel)
    request = ChatRequest(messages=(Message(role="system", content="Be brief."),
                                    Message(role="user", content="hello there, model")))
    out = model.complete(request)
    assert out.text == "hello there, model"
    assert out.usage.prompt_tokens == len("Be brief.hello there, model") // 4
    assert out.usage.completion_tokens == len(out.text) // 4
    assert (out.finish_reason, out.model, out.truncated) == ("stop", "m", False)
    assert out.tool_calls is None
    body = server.requests[0]
    assert body["model"] == "m"
    assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "hello there, model"}]
    assert not {"max_tokens", "temperature", "response_format", "stop", "tools"} & set(body)
    assert server.headers[0]["authorization"] == "Bearer unused"


def test_messages_tools_and_tool_calls_are_mapped(server: FakeOpenAIServer, make: Make) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    tool = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
    server.responder = lambda body: completion_body("", finish_reason="tool_calls",
                                                    tool_calls=[call])
    request = ChatRequest(
        messages=(
            Message(role="user", content=[{"type": "text", "text": "add"}], name="alice"),
            Message(role="assistant", content="", tool_calls=[call]),
            Message(role="tool", content="2", tool_call_id="c1"),
        ),
        tools=(tool,), stop=("###",),
    )
    out = make().complete(request)
    assert out.tool_calls == [call] and out.finish_reason == "tool_calls" and out.text == ""
    body = server.requests[0]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "add"}], "name": "alice"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "2", "tool_call_id": "c1"},
    ]
    assert body["tools"] == [tool] and body["stop"] == ["###"]


def test_missing_usage_is_estimated_with_one_warning(
    server: FakeOpenAIServer, make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    def no_usage(body: dict[str, Any]) -> dict[str, Any]:
        reply = completion_body("twelve chars")
        del reply["usage"]
        return reply

    server.responder = no_usage
    model = make()
    with caplog.at_level(logging.WARNING, logger="skillgrad.models.openai_compat"):
        outs = [model.complete(ask("sixteen chars!!!")) for _ in range(2)]
    assert outs[0].usage.prompt_tokens == 4 and outs[0].usage.completion_tokens == 3
    assert len([r for r in caplog.records if "no token usage" in r.message]) == 1


def test_truncated_reply(server: FakeOpenAIServer, make: Make) -> None:
    server.push(Fault.truncated("The answer is"))
    out = make().complete(ask())
    assert out.text == "The answer is" and out.truncated


def test_think_block_passes_the_backend_and_is_stripped_by_the_client(
    server: FakeOpenAIServer, make: Make
) -> None:
    reply = "<think>2 + 2, carry nothing</think>The answer is 4"
    model = make()
    server.push(Fault.text(reply))
    assert model.complete(ask()).text == reply
    server.push(Fault.text(reply))
    assert ModelClient(model, "target").call(ask(), stage="x").text == "The answer is 4"


# ----------------------------------------------------------------------------- request mapping


def test_request_values_are_sent(server: FakeOpenAIServer, make: Make) -> None:
    make().complete(ask(max_tokens=50, temperature=0.3))
    assert server.requests[0]["max_tokens"] == 50
    assert server.requests[0]["temperature"] == 0.3


def test_option_values_replace_request_values(server: FakeOpenAIServer, make: Make) -> None:
    model = make(max_tokens=7, temperature=0.9)
    model.complete(ask(max_tokens=50, temperature=0.3))
    model.complete(ask())
    for body in server.requests:
        assert (body["max_tokens"], body["temperature"]) == (7, 0.9)


SCHEMA = {"title": "Answer v2", "type": "object", "properties": {"x": {"type": "integer"}}}


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("json_schema", {"type": "json_schema",
                         "json_schema": {"name": "Answer_v2", "schema": SCHEMA, "strict": False}}),
        ("json_object", {"type": "json_object"}),
        ("none", None),
    ],
)
def test_json_schema_becomes_response_format(
    server: FakeOpenAIServer, make: Make, mode: str, expected: dict[str, Any] | None
) -> None:
    model = make(structured_output=mode)
    model.complete(ask(json_schema=SCHEMA))
    model.complete(ask())
    assert server.requests[0].get("response_format") == expected
    assert "response_format" not in server.requests[1]


def test_extra_body_headers_and_reasoning_effort_arrive(
    server: FakeOpenAIServer, make: Make
) -> None:
    model = make(extra_body={"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20},
                 extra_headers={"X-Team": "skills"}, reasoning_effort="low")
    model.complete(ask())
    body = server.requests[0]
    assert body["chat_template_kwargs"] == {"enable_thinking": False} and body["top_k"] == 20
    assert body["reasoning_effort"] == "low"
    assert server.headers[0]["x-team"] == "skills"


def test_identity_and_endpoint(server: FakeOpenAIServer, make: Make,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-very-secret")
    a = make(api_key_env=KEY_ENV, extra_body={"b": 1, "a": 2})
    b = make(api_key_env=KEY_ENV, extra_body={"a": 2, "b": 1})
    c = make(api_key_env=KEY_ENV, extra_body={"a": 3, "b": 1})
    assert a.identity == b.identity != c.identity
    assert "sk-very-secret" not in a.identity and server.url in a.identity
    assert a.endpoint == server.url
    monkeypatch.setenv("SKILLGRAD_TEST_SIG", "sig-very-secret")
    creds = make(base_url=server.url + "?sig=${SKILLGRAD_TEST_SIG}")
    assert "sig-very-secret" not in creds.identity
    assert creds.endpoint == server.url + "?sig=***"


# ----------------------------------------------------------------------------- failures


def test_rate_limit_is_transient_with_retry_after(server: FakeOpenAIServer, make: Make) -> None:
    server.push(Fault.status(429, "slow down", retry_after=3))
    with pytest.raises(TransientModelError) as info:
        make().complete(ask())
    assert info.value.retry_after == 3.0
    assert "429" in str(info.value) and "slow down" in str(info.value)


def test_retry_after_header_forms() -> None:
    soon = datetime.now(timezone.utc) + timedelta(seconds=30)
    assert 25 <= (parse_retry_after({"retry-after": format_datetime(soon, usegmt=True)}) or 0) <= 30
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "whenever"}) is None
    assert parse_retry_after({}) is None


def test_exhausted_quota_is_fatal_not_a_rate_limit(server: FakeOpenAIServer, make: Make) -> None:
    server.push(Fault.status(429, "You exceeded your current quota",
                             error_code="insufficient_quota"))
    with pytest.raises(FatalModelError, match="quota"):
        make().complete(ask())


@pytest.mark.parametrize("status", [500, 503])
def test_server_error_is_transient(server: FakeOpenAIServer, make: Make, status: int) -> None:
    server.push(Fault.status(status, "boom"))
    with pytest.raises(TransientModelError) as info:
        make().complete(ask())
    assert info.value.retry_after is None and f"HTTP {status}" in str(info.value)


def test_timeout_is_transient_and_quick(server: FakeOpenAIServer, make: Make) -> None:
    server.push(Fault.hang(3.0))
    started = time.monotonic()
    with pytest.raises(TransientModelError, match="no answer within 0.5s"):
        make(timeout=0.5).complete(ask())
    assert time.monotonic() - started < 2.0


def test_refused_connection_is_transient(make: Make) -> None:
    with FakeOpenAIServer() as gone:
        url = gone.url
    with pytest.raises(TransientModelError, match="connection failed"):
        make(base_url=url).complete(ask())


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ('{"id": "chatcmpl-1", "choices": [', "application/json"),  # SDK: bare JSONDecodeError
        ("", "application/json"),
        ("<html>502 Bad Gateway</html>", "text/html"),  # SDK: returns the text as a str
        ('{"choices": []}', "application/json"),  # SDK: a ChatCompletion with no choices
        ('{"object": "error"}', "application/json"),  # SDK: a ChatCompletion with choices=None
        ("[1, 2]", "application/json"),  # SDK: returns a list
        ('{"choices": [{"index": 0, "message": null}]}', "application/json"),
        ('{"choices": [{"message": {"content": ["a"]}}]}', "application/json"),  # not a str
        ('{"choices": [1]}', "application/json"),
    ],
)
def test_unusable_200_is_transient(
    server: FakeOpenAIServer, make: Make, body: str, content_type: str
) -> None:
    server.push(Fault.malformed(body, content_type=content_type))
    with pytest.raises(TransientModelError):
        make().complete(ask())


def test_wrong_key_is_fatal_and_never_shown(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "wrong")
    with FakeOpenAIServer(api_key="right") as guarded:
        model = make(base_url=guarded.url, api_key_env=KEY_ENV)
        with pytest.raises(FatalModelError) as info:
            model.complete(ask())
        assert guarded.headers[0]["authorization"] == "Bearer wrong"
    message = str(info.value)
    assert "HTTP 401" in message and f"${KEY_ENV}" in message
    assert "wrong" not in message and "right" not in message


def test_right_key_is_sent(make: Make, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "right")
    with FakeOpenAIServer(api_key="right") as guarded:
        assert make(base_url=guarded.url, api_key_env=KEY_ENV).complete(ask("hi")).text == "hi"


def test_bad_request_is_fatal_with_the_servers_message(
    server: FakeOpenAIServer, make: Make
) -> None:
    server.push(Fault.status(400, "max_tokens is too large: 99999"))
    with pytest.raises(FatalModelError, match=r"HTTP 400.*max_tokens is too large: 99999"):
        make().complete(ask())
    server.push(Fault.status(404, "x" * 2000))
    with pytest.raises(FatalModelError) as info:
        make().complete(ask())
    assert "HTTP 404" in str(info.value) and len(str(info.value)) < 400


# ----------------------------------------------------------------------------- configuration


def test_unset_key_variable_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    options = OpenAICompatibleOptions(base_url="http://127.0.0.1:9/v1", model="m",
                                      api_key_env=KEY_ENV)
    expected = f"^api_key_env: environment variable {KEY_ENV} is not set$"
    with pytest.raises(ConfigError, match=expected):
        OpenAICompatibleBackend.create(options, Path("."))


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({}, "base_url"),
        ({"azure_api_version": "2024-10-21"}, "azure_endpoint"),
        ({"azure_endpoint": "https://x.openai.azure.com"}, "azure_api_version"),
    ],
)
def test_missing_endpoint_is_a_config_error(
    options: dict[str, Any], key: str, tmp_path: Path
) -> None:
    with pytest.raises(ValidationError, match=f"{key}: required"):
        OpenAICompatibleOptions(model="m", **options)
    # In a config file it is caught before any model is built, naming the role.
    (tmp_path / "d.jsonl").write_text('{"question": "q", "answer": "a"}\n' * 5)
    config = {"env": {"name": "qa", "data_path": "d.jsonl"},
              "model": {"target": {"backend": "openai_compatible", "model": "m", **options}}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ConfigError, match=f"model.target: .*{key}: required"):
        load_config(tmp_path / "c.yaml")


def test_azure_sends_the_deployment_version_and_key(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "az-key")
    with FakeOpenAIServer(api_key="az-key") as azure:
        root = azure.url.removesuffix("/v1")
        model = make(base_url=None, model="deploy", api_key_env=KEY_ENV,
                     azure_api_version="2024-10-21", azure_endpoint=root + "/")
        assert model.complete(ask("hi")).text == "hi"
        assert azure.headers[0]["api-key"] == "az-key"
    assert model.endpoint == root and "2024-10-21" in model.identity


def test_config_file_validates_backend_keys(toy_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-live-123456")
    target = {"backend": "openai_compatible", "base_url": "http://127.0.0.1:8000/v1",
              "model": "m", "api_key_env": KEY_ENV,
              "extra_headers": {"Authorization": "Bearer hdr-secret-987"}}
    resolved = load_config(toy_config(toy_dir, model={"target": target}))
    options = resolved.role_options["target"]
    assert isinstance(options, OpenAICompatibleOptions)
    assert options.api_key_env == KEY_ENV and options.timeout == 120
    shown = json.dumps(resolved.redacted())
    assert KEY_ENV in shown and "sk-live-123456" not in shown and "hdr-secret-987" not in shown

    bad = toy_config(toy_dir, model={"target": {**target, "api_key": "sk-inline"}})
    with pytest.raises(ConfigError, match=r"unknown key 'model\.target\.api_key'"):
        load_config(bad)


# ----------------------------------------------------------------------------- shared layer


def test_client_retries_a_rate_limit_then_answers(server: FakeOpenAIServer, make: Make) -> None:
    server.push(Fault.status(429, "slow down", retry_after=0))
    delays: list[float] = []
    client = ModelClient(make(), "target", sleep=delays.append)
    out = client.call(ask("hi again"), stage="x")
    assert out.text == "hi again" and delays == [0.0]
    assert client.meter.totals().retries == 1 and client.meter.totals().calls == 1
    assert len(server.requests) == 2


def test_models_endpoint_lists_models(server: FakeOpenAIServer) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
    try:
        assert [m.id for m in client.models.list()] == ["fake"]
    finally:
        client.close()


def test_stop_does_not_wait_for_a_hanging_request(make: Make) -> None:
    srv = FakeOpenAIServer().start()
    port = srv.port
    srv.push(Fault.hang(30.0))
    model = make(base_url=srv.url, timeout=0.2)
    with pytest.raises(TransientModelError):
        model.complete(ask())
    started = time.monotonic()
    srv.stop()
    assert time.monotonic() - started < 1.0 and server_threads(port) == []


# ----------------------------------------------------------------------------- a whole run


def test_a_whole_training_run_over_http_matches_the_scripted_run(tmp_path: Path) -> None:
    from skillgrad.trainer import build_trainer

    scripted_dir, http_dir = tmp_path / "scripted", tmp_path / "http"
    scripted_dir.mkdir()
    http_dir.mkdir()
    expected = build_trainer(load_config(toy_config(scripted_dir)), scripted_dir / "run").fit()
    with FakeOpenAIServer(responder=toy.http_responder) as server:
        server.push(Fault.status(429, retry_after=0), Fault.status(503))  # retried, not scored
        role = {"backend": "openai_compatible", "base_url": server.url, "model": "toy",
                "concurrency": 4, "retry_base_delay": 0.0}
        cfg = toy_config(http_dir, model={"target": role, "optimizer": role},
                         execution={"rollout_workers": 4})
        summary = build_trainer(load_config(cfg), http_dir / "run").fit()
    assert (http_dir / "run" / "best_skill.md").read_text() == (
        scripted_dir / "run" / "best_skill.md").read_text()
    assert summary["test"] == expected["test"]
    assert summary["models"]["target"]["retries"] + summary["models"]["optimizer"]["retries"] == 2


def test_reasoning_models_get_no_temperature_and_max_completion_tokens(
    server: FakeOpenAIServer, make: Make
) -> None:
    model = make(send_temperature=False, max_tokens_field="max_completion_tokens",
                 max_tokens_cap=50, reasoning_effort="xhigh")
    model.complete(ask("hi", temperature=0.3, max_tokens=400))
    body = server.requests[-1]
    assert "temperature" not in body and "max_tokens" not in body
    assert body["max_completion_tokens"] == 50  # lowered to the cap
    assert body["reasoning_effort"] == "xhigh"
    model.complete(ask("hi", max_tokens=20))
    assert server.requests[-1]["max_completion_tokens"] == 20  # under the cap: as asked
    plain = make()
    assert plain.identity != model.identity  # the options change replies: the cache keys differ


def test_azure_entra_login_sends_a_token_not_a_key(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import types

    asked: list[tuple[str, Any]] = []

    class Credential:
        def __init__(self, **kwargs: Any) -> None:
            asked.append((type(self).__name__, kwargs))

    class AzureCliCredential(Credential):
        pass

    class ManagedIdentityCredential(Credential):
        pass

    def get_bearer_token_provider(credential: Any, scope: str) -> Callable[[], str]:
        asked.append(("scope", scope))
        return lambda: "entra-token"

    identity = types.ModuleType("azure.identity")
    identity.AzureCliCredential = AzureCliCredential  # type: ignore[attr-defined]
    identity.ManagedIdentityCredential = ManagedIdentityCredential  # type: ignore[attr-defined]
    identity.get_bearer_token_provider = get_bearer_token_provider  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "azure", types.ModuleType("azure"))
    monkeypatch.setitem(sys.modules, "azure.identity", identity)
    with FakeOpenAIServer() as azure:
        root = azure.url.removesuffix("/v1")
        model = make(base_url=None, model="deploy", azure_api_version="2024-10-21",
                     azure_endpoint=root, azure_login="azure_cli")
        assert model.complete(ask("hi")).text == "hi"
        assert azure.headers[0]["authorization"] == "Bearer entra-token"
        assert "api-key" not in azure.headers[0]
        make(base_url=None, model="deploy", azure_api_version="2024-10-21", azure_endpoint=root,
             azure_login="managed_identity", azure_managed_identity_client_id="cid")
    assert asked[0] == ("AzureCliCredential", {})
    assert ("ManagedIdentityCredential", {"client_id": "cid"}) in asked
    assert ("scope", "https://cognitiveservices.azure.com/.default") in asked


def test_azure_entra_login_without_azure_identity_names_the_extra(
    make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "azure.identity", None)  # import fails
    with pytest.raises(ConfigError, match=r'azure_login azure_cli needs azure-identity: pip '
                       r'install "skillgrad\[azure\]"'):
        make(base_url=None, model="d", azure_api_version="2024-10-21",
             azure_endpoint="https://x.openai.azure.com", azure_login="azure_cli")


@pytest.mark.parametrize(("options", "match"), [
    ({"azure_login": "azure_cli"}, "azure_login: only for Azure OpenAI"),
    ({"azure_login": "azure_cli", "azure_api_version": "2024-10-21",
      "azure_endpoint": "https://x.openai.azure.com", "api_key_env": "K"},
     "api_key_env: not used with azure_login azure_cli"),
])
def test_azure_login_options_are_checked(options: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        OpenAICompatibleOptions.model_validate(
            {"base_url": "http://127.0.0.1:1/v1", "model": "m", **options})
