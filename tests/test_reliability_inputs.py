"""Secrets never written or shown, duplicate YAML keys refused, unusable inputs refused in one
line: a skill file that is not text, a base URL that is not a usable http(s) URL."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import toy
import yaml
from conftest import toy_config
from e2e import cli, one_line_error

from skillgrad.config import config_changes, load_config
from skillgrad.errors import ConfigError, DataError, FatalModelError
from skillgrad.models.command import CommandBackend, CommandOptions
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.models.openai_compat import OpenAICompatibleBackend, OpenAICompatibleOptions
from skillgrad.redact import RedactingFilter, is_secret_name, redact_text, redact_url
from skillgrad.skill import MAX_SKILL_BYTES, read_skill_file
from skillgrad.testing import FakeOpenAIServer, Fault

KEY_ENV = "SKILLGRAD_TEST_RELIABILITY_KEY"
QUERY_ENV = "SKILLGRAD_TEST_RELIABILITY_QUERY"
TOKEN_ENV = "SKILLGRAD_TEST_RELIABILITY_TOKEN"
# One unique canary for each place a secret can enter a config, and one for the API key.
CANARY = {
    "password": "cnry0password7341",  # a header value read from $TOKEN_ENV
    "header": "cnry0header8825",
    "query": "cnry0query5190",  # query values read from $QUERY_ENV
    "body": "cnry0body6602",
    "key": "cnry0apikey4418",
}
# The variables the ${VAR} of secret_roles read.
SECRET_ENV = {KEY_ENV: CANARY["key"], QUERY_ENV: CANARY["query"], TOKEN_ENV: CANARY["password"]}


def ask(text: str = "hi") -> ChatRequest:
    return ChatRequest(messages=(Message(role="user", content=text),))


def secret_roles(url: str, cache_dir: Path) -> dict[str, Any]:
    """Target and optimizer on ``url``, with a canary in every place a secret can enter (those
    a URL may carry only through ``${VAR}``; set :data:`SECRET_ENV`)."""
    shared = {"backend": "openai_compatible", "model": "toy", "retry_base_delay": 0.0,
              "cache": True, "cache_dir": str(cache_dir)}
    target = {**shared, "base_url": f"{url}?sig=${{{QUERY_ENV}}}",
              "extra_headers": {"Ocp-Apim-Subscription-Key": CANARY["header"],
                                "X-Proxy-Token": f"Bearer ${{{TOKEN_ENV}}}",
                                "Content-Type": "application/json"}}
    optimizer = {**shared, "base_url": f"{url}?api-version=1&code=${{{QUERY_ENV}}}",
                 "api_key_env": KEY_ENV,
                 "extra_body": {"metadata": {"auth_token": CANARY["body"]}, "seed": 1}}
    return {"target": target, "optimizer": optimizer}


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRET_ENV.items():
        monkeypatch.setenv(name, value)


def echo_of(*names: str) -> str:
    """A server error message that repeats the secrets it was sent (some servers do)."""
    return "bad request: " + " ".join(CANARY[n] for n in names)


TARGET_SECRETS = ("password", "header", "query")  # what the target's requests carry


def files_holding(folder: Path, text: str) -> list[str]:
    return [str(p) for p in folder.rglob("*")
            if p.is_file() and text.encode() in p.read_bytes()]


# ----------------------------------------------------------------------------- secrets


def test_no_secret_reaches_the_run_directory_the_cache_or_the_console(tmp_path: Path) -> None:
    """A training over HTTP with a canary in the URL's password, a custom header, a query
    parameter, an extra_body field and the API key, through a retried and a fatal failure
    whose messages echo the secrets: none is in any file of the run, the evaluation or the
    response cache, nor on the console; each did reach the server; and the run resumes."""
    work, cache = tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    env = dict(SECRET_ENV)
    with FakeOpenAIServer(responder=toy.http_responder) as server:
        cfg = toy_config(work, model=secret_roles(server.url, cache))
        server.push(Fault.status(503, echo_of(*TARGET_SECRETS)))  # retried, and logged
        # -v: the console logs each HTTP request's URL too
        trained = cli("train", str(cfg), "--out", "run", "-v", cwd=work, env=env)
        assert trained.returncode == 0, trained.stderr
        assert "HTTP Request" in trained.stderr + trained.stdout
        assert "retry" in trained.stderr and "bad request: *** *** ***" in trained.stderr
        resumed = cli("train", str(cfg), "--out", "run", cwd=work, env=env)
        assert resumed.returncode == 0, resumed.stderr  # same fingerprint: nothing to redo
        server.push(Fault.status(400, echo_of(*TARGET_SECRETS)))  # fatal: a one-line error
        failed = cli("eval", str(cfg), "--initial", "--out", "eval", "--set",
                     "model.target.cache=false", cwd=work, env=env)
        line = one_line_error(failed, code=1)
        assert "rejected the request (HTTP 400)" in line and "***" in line
        sent_headers, sent_bodies = list(server.headers), list(server.requests)
    assert any(h.get("x-proxy-token") == f"Bearer {CANARY['password']}" for h in sent_headers)
    assert any(h.get("ocp-apim-subscription-key") == CANARY["header"] for h in sent_headers)
    assert any(h.get("authorization") == f"Bearer {CANARY['key']}" for h in sent_headers)
    assert any(b.get("metadata", {}).get("auth_token") == CANARY["body"] for b in sent_bodies)
    assert list(cache.rglob("*.json"))  # the cache was written, and is searched below
    shown = (work / "run" / "config.yaml").read_text()
    assert "Content-Type: application/json" in shown and shown.count("***") >= 2
    assert shown.count(f"${{{QUERY_ENV}}}") == 2 and f"Bearer ${{{TOKEN_ENV}}}" in shown
    consoles = [trained.stdout, trained.stderr, resumed.stdout, resumed.stderr, failed.stdout,
                failed.stderr]
    for name, canary in CANARY.items():
        for folder in (work / "run", work / "eval", cache):
            assert files_holding(folder, canary) == [], name
        assert not any(canary in text for text in consoles), name


def test_redacted_config_masks_every_credential_and_keeps_the_rest(
        toy_dir: Path, secret_env: None) -> None:
    roles = secret_roles("http://127.0.0.1:9/v1", toy_dir / "cache")
    resolved = load_config(toy_config(toy_dir, model=roles))
    shown = resolved.redacted()["model"]
    target, optimizer = shown["target"], shown["optimizer"]
    assert target["base_url"] == f"http://127.0.0.1:9/v1?sig=${{{QUERY_ENV}}}"
    assert target["extra_headers"] == {"Ocp-Apim-Subscription-Key": "***",
                                       "X-Proxy-Token": f"Bearer ${{{TOKEN_ENV}}}",
                                       "Content-Type": "application/json"}
    assert optimizer["base_url"] == f"http://127.0.0.1:9/v1?api-version=1&code=${{{QUERY_ENV}}}"
    assert optimizer["extra_body"] == {"metadata": {"auth_token": "***"}, "seed": 1}
    assert optimizer["api_key_env"] == KEY_ENV and target["max_retries"] == 4
    # A masked value counts by its place, not its value: a rotated key keeps the fingerprint.
    other = dict(roles, target={**roles["target"], "extra_headers": {
        **roles["target"]["extra_headers"], "Ocp-Apim-Subscription-Key": "another"}})
    assert load_config(toy_config(toy_dir, model=other)).fingerprint() == resolved.fingerprint()
    gone = dict(roles, target={**roles["target"], "extra_headers": {}})
    assert load_config(toy_config(toy_dir, model=gone)).fingerprint() != resolved.fingerprint()
    # A run directory written before these values were masked compares equal to the new copy.
    assert config_changes(resolved.resolved(), resolved.redacted()) == []


def test_a_servers_echo_and_the_endpoint_never_show_a_secret(secret_env: None) -> None:
    with FakeOpenAIServer() as server:
        options = OpenAICompatibleOptions(**{
            k: v for k, v in secret_roles(server.url, Path("unused"))["target"].items()
            if k in OpenAICompatibleOptions.model_fields}, api_key_env=KEY_ENV,
            extra_body={"password": CANARY["body"]})
        model = OpenAICompatibleBackend.create(options, Path("."))
        try:
            server.push(Fault.status(400, echo_of(*CANARY)))
            with pytest.raises(FatalModelError) as caught:
                model.complete(ask())
        finally:
            model.close()
    shown = f"{caught.value} {model.endpoint} {model.identity}"
    assert "bad request" in shown
    assert not [name for name, canary in CANARY.items() if canary in shown]


def test_bad_values_and_overrides_are_reported_without_their_secret(toy_dir: Path) -> None:
    target = {"backend": "openai_compatible", "model": "m",
              "base_url": f"http://user:{CANARY['password']}@127.0.0.1:PORT/v1"}
    with pytest.raises(ConfigError) as bad_url:
        load_config(toy_config(toy_dir, model={"target": target}))
    target = {"backend": "openai_compatible", "model": "m", "base_url": "http://127.0.0.1:9/v1",
              "extra_headers": {"X-Secret-Header": 73419}}
    with pytest.raises(ConfigError) as bad_header:
        load_config(toy_config(toy_dir, model={"target": target}))
    with pytest.raises(ConfigError) as bad_override:
        load_config(toy_config(toy_dir), [f"env.name.x={CANARY['query']}"])
    assert "model.target.base_url" in str(bad_url.value) and "***@" in str(bad_url.value)
    assert "X-Secret-Header" in str(bad_header.value) and "73419" not in str(bad_header.value)
    assert "env.name is not a section" in str(bad_override.value)
    for caught in (bad_url, bad_header, bad_override):
        assert not [c for c in CANARY.values() if c in str(caught.value)]


def test_an_agent_clis_output_is_scrubbed_of_its_credentials(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SKILLGRAD_TEST_AGENT_TOKEN", CANARY["key"])
    options = CommandOptions(
        argv=["sh", "-c", "echo \"refused key $SKILLGRAD_TEST_AGENT_TOKEN and $PROXY\" >&2; "
              "exit 1"],
        env={"PROXY": f"http://me:{CANARY['password']}@proxy:3128"})
    model = CommandBackend.create(options, tmp_path)
    with pytest.raises(FatalModelError) as caught:
        model.complete(ask())
    assert str(caught.value).endswith("refused key *** and ***")


def test_names_that_hold_credentials_and_names_that_do_not() -> None:
    secret = ["key", "api_key", "X-Api-Key", "subscriptionKey", "AWS_SECRET_ACCESS_KEY", "sig",
              "accessToken", "hf_token", "code", "X-Amz-Signature", "clientSecret", "passwd"]
    plain = ["removed_key", "sort_key", "max_tokens", "keyword", "tokens", "text_field"]
    assert [n for n in secret if not is_secret_name(n)] == []
    assert [n for n in plain if is_secret_name(n)] == []


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:pw@h:8/v1?api-version=1&sig=s1&Api-Key=k1",
         "http://***@h:8/v1?api-version=1&sig=***&Api-Key=***"),
        ("http://u:pa/ss@h/v1", "http://***@h/v1"),  # unencoded / and # in a password
        ("http://u:pa#ss@h/v1", "http://***@h/v1"),
        ("http://h/v1?email=a@b.c&token=t1", "http://h/v1?email=a@b.c&token=***"),
        ("http://[::1]:8/v1?x=1", "http://[::1]:8/v1?x=1"),
    ],
)
def test_a_urls_credentials_are_masked_however_they_are_written(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert redact_text(f"failed at {url}: no answer.") == f"failed at {shown}: no answer."


def test_log_lines_of_other_libraries_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    """httpx logs every request's full URL; the filter masks its credentials."""
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "HTTP Request: POST %s",
                               (f"http://u:{CANARY['password']}@h/v1?sig={CANARY['query']}",),
                               None)
    assert RedactingFilter([CANARY["header"]]).filter(record)
    assert record.getMessage() == "HTTP Request: POST http://***@h/v1?sig=***"


# ----------------------------------------------------------------------------- duplicate keys


def test_a_duplicate_key_names_the_key_the_file_and_both_lines(tmp_path: Path) -> None:
    cfg = tmp_path / "dup.yaml"
    cfg.write_text("train:\n  num_epochs: 2\n  batch_size: 4\n  num_epochs: 3\n")
    with pytest.raises(ConfigError) as caught:
        load_config(cfg)
    assert str(caught.value) == (
        f"{cfg}: duplicate key 'train.num_epochs' at lines 2 and 4 "
        "(each key may appear once in a mapping)")


def test_duplicates_are_refused_in_a_base_file_at_the_top_and_in_an_override(
        tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text("env:\n  name: qa\nenv:\n  name: qa\n")
    child = tmp_path / "child.yaml"
    child.write_text("_base_: base.yaml\ntrain: {num_epochs: 2}\n")
    with pytest.raises(ConfigError, match=r"base\.yaml: duplicate key 'env' at lines 1 and 3"):
        load_config(child)
    with pytest.raises(ConfigError, match=r"^--set train: duplicate key 'seed' at lines 1 and 1"):
        load_config(None, ["train={seed: 1, seed: 2}"])


def test_a_scripted_models_script_may_not_name_a_key_twice(tmp_path: Path) -> None:
    from skillgrad.models.scripted import read_script

    script = tmp_path / "script.yaml"
    script.write_text("default: a\nreplies: [x]\ndefault: b\n")
    with pytest.raises(ConfigError, match=r"script\.yaml: duplicate key 'default' at lines 1 and 3"):
        read_script(script)


def test_a_change_in_a_masked_value_alone_does_not_refuse_a_resume(toy_dir: Path) -> None:
    from skillgrad.errors import RunDirError
    from skillgrad.rundir import RunDir
    from skillgrad.state import claim_run

    def config(key: str, model: str = "m") -> Any:
        return load_config(toy_config(toy_dir, model={"target": {
            "backend": "openai_compatible", "base_url": "http://127.0.0.1:9/v1",
            "model": model, "extra_headers": {"X-Api-Key": key}}}))

    run = RunDir(toy_dir / "run")
    claim_run(run, config("first"), "0", allow_change=False)
    claim_run(run, config("second"), "0", allow_change=False)  # a rotated key
    with pytest.raises(RunDirError, match=r"different config \(model.target.model: 'm' -> 'n'"):
        claim_run(run, config("second", "n"), "0", allow_change=False)


def test_a_merge_key_may_still_be_overridden(tmp_path: Path) -> None:
    cfg = tmp_path / "merge.yaml"
    cfg.write_text("defaults: &d {num_epochs: 2, batch_size: 4}\n"
                   "train:\n  <<: *d\n  num_epochs: 3\n")
    data = yaml.safe_load(cfg.read_text())  # what YAML itself means: the explicit key wins
    assert data["train"] == {"num_epochs": 3, "batch_size": 4}
    with pytest.raises(ConfigError, match="unknown key 'defaults'"):  # not a duplicate
        load_config(cfg)


# ----------------------------------------------------------------------------- skill files


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\x00" * 64, "binary, not text (control byte 0x00 at offset 0)"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "binary, not text (control byte 0x1a at offset 6)"),
        ("Answer briefly.".encode("utf-16"), "binary, not text"),
        (b"caf\xe9\n", "not valid UTF-8 (bad byte at offset 3)"),
        (b"x" * (MAX_SKILL_BYTES + 1), f"larger than {MAX_SKILL_BYTES:,} bytes"),
    ],
)
def test_a_skill_file_that_is_not_text_is_refused(
        tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "skill.md"
    path.write_bytes(content)
    with pytest.raises(DataError, match=rf"^{path}: skill file is ") as caught:
        read_skill_file(path)
    assert expected in str(caught.value)


def test_text_skill_files_are_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "skill.md"
    path.write_bytes("\ufeffRules:\r\n\t- be brief\x0c\n".encode())
    assert read_skill_file(path) == "Rules:\r\n\t- be brief\x0c\n"


# ----------------------------------------------------------------------------- base URLs


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("127.0.0.1:8000/v1", "does not start with http:// or https://"),
        ("localhost:8000/v1", "does not start with http:// or https://"),
        ("ftp://127.0.0.1/v1", "does not start with http:// or https://"),
        ("http:///v1", "has no host"),
        ("http://127.0.0.1:PORT/v1", "has an invalid port"),
        ("http://127.0.0.1:99999/v1", "has an invalid port"),
        ("http://127.0.0.1:0/v1", "has an invalid port"),
        ("http://[::1/v1", "has a malformed host"),
        ("http://[zz]:8000/v1", "has a malformed host"),
        ("http://999.1.1.1/v1", "has a malformed host"),
        ("http://127.0.0.1:8000/v1 ", "is empty or holds spaces or control characters"),
    ],
)
def test_an_unusable_base_url_is_a_config_error_naming_the_key(
        toy_dir: Path, url: str, problem: str) -> None:
    role = {"backend": "openai_compatible", "model": "m", "base_url": url}
    cfg = toy_config(toy_dir, model={"optimizer": role})
    with pytest.raises(ConfigError) as caught:
        load_config(cfg)
    assert str(caught.value).startswith(f"{cfg}: model.optimizer.base_url: {problem}")
    assert "expected an http:// or https:// URL with a host" in str(caught.value)


@pytest.mark.parametrize("url", ["http://[::1]:8000/v1", "https://x.openai.azure.com/v1",
                                 "http://localhost:8000/v1?api-version=1", "HTTP://H/v1"])
def test_usable_base_urls_pass(url: str) -> None:
    assert OpenAICompatibleOptions(base_url=url, model="m").base_url == url


def test_an_unusable_azure_endpoint_is_refused_too() -> None:
    with pytest.raises(ValueError, match="(?s)azure_endpoint.*does not start with http"):
        OpenAICompatibleOptions(model="m", azure_api_version="2024-10-21",
                                azure_endpoint="NAME.openai.azure.com")


def test_bad_inputs_stop_the_cli_in_one_line_before_any_run_directory(toy_dir: Path) -> None:
    port = {"backend": "openai_compatible", "model": "m", "base_url": "http://127.0.0.1:x/v1"}
    bad_url = toy_config(toy_dir, model={"target": port})
    line = one_line_error(cli("train", str(bad_url), "--out", "run-url", cwd=toy_dir))
    assert "model.target.base_url: has an invalid port" in line
    dup = toy_dir / "dup.yaml"
    dup.write_text(toy_config(toy_dir).read_text() + "train:\n  num_epochs: 3\n")
    line = one_line_error(cli("train", str(dup), "--out", "run-dup", cwd=toy_dir))
    assert "duplicate key 'train'" in line and "dup.yaml" in line
    (toy_dir / "nul.md").write_bytes(b"\x00" * 32)
    line = one_line_error(cli("train", str(toy_config(toy_dir)), "--out", "run-nul",
                              "--set", "env.skill_init=nul.md", cwd=toy_dir))
    assert "nul.md: skill file is binary" in line
    assert not [p for p in ("run-url", "run-dup") if (toy_dir / p).exists()]
