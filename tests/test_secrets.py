"""Secrets come from environment variables and reach no file, log, tracker or printed command,
in any form: as written, in base64, or hashed.

* a stopped run's "resume with:" command leaves out the ``--set`` values that are secrets;
* the config's fingerprint hashes where a secret is, never its value: a rotated key resumes;
* a credential written out in a URL (a user:password@, a query token) is refused in one line;
* a server's echo of a secret in base64 (an HTTP Basic header) is scrubbed;
* ``${VAR}`` in a header or a base URL is read from the environment, and an unset one is one
  line naming the key and the variable;
* end to end, over HTTP and logged to W&B offline and MLflow: no secret, no base64 of one and
  no sha256 of one is in the run directory, the trackers' files or the console.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toy
import yaml
from conftest import toy_config
from test_secrets_tracking import written_out

from skillgrad import Trainer
from skillgrad.config import load_config
from skillgrad.errors import ConfigError, FatalModelError, RunDirError
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.models.openai_compat import OpenAICompatibleBackend, OpenAICompatibleOptions
from skillgrad.redact import redact_text
from skillgrad.rundir import RunDir
from skillgrad.testing import FakeOpenAIServer, Fault

# Unique canaries: one per way a secret enters a run.
LITERAL = "cnry1literal5530"  # a header value given on the command line
ROTATED = "cnry1rotated2291"  # the same header's next value
TOKEN = "cnry1token7718"  # a header value read from $TOKEN_ENV
SIG = "cnry1sig4406"  # a query value read from $SIG_ENV
KEY = "cnry1apikey9047"  # the API key, from $KEY_ENV
PASSWORD = "cnry1password3362"  # a URL's password, which is refused
TOKEN_ENV, SIG_ENV, KEY_ENV = ("SKILLGRAD_TEST_SECRET_TOKEN", "SKILLGRAD_TEST_SECRET_SIG",
                               "SKILLGRAD_TEST_SECRET_KEY")
ENV = {TOKEN_ENV: TOKEN, SIG_ENV: SIG, KEY_ENV: KEY}


def http_roles(url: str) -> dict[str, Any]:
    """Target and optimizer on ``url`` with no secret written in the config: the key, a
    header and a query value are all ``${VAR}`` or ``api_key_env``."""
    shared = {"backend": "openai_compatible", "model": "toy", "retry_base_delay": 0.0,
              "max_retries": 0}
    return {"target": {**shared, "base_url": f"{url}?sig=${{{SIG_ENV}}}",
                       "api_key_env": KEY_ENV},
            "optimizer": {**shared, "base_url": url,
                          "extra_headers": {"X-Proxy-Token": f"Bearer ${{{TOKEN_ENV}}}"}}}


def forms(secret: str) -> dict[str, bytes]:
    """The ways a secret could be written down: as is, in base64 (alone and as a Basic
    password), and its sha256."""
    raw = secret.encode()
    return {"value": raw, "base64": base64.b64encode(raw),
            "basic": base64.b64encode(b"user:" + raw),
            "sha256": hashlib.sha256(raw).hexdigest().encode()}


def leaks(secrets: dict[str, str], folders: list[Path], texts: list[str]) -> list[str]:
    """Where any form of any secret occurs: files under ``folders``, or ``texts``."""
    found = []
    blobs = [(str(p), p.read_bytes()) for f in folders for p in f.rglob("*") if p.is_file()]
    blobs += [(f"output {i}", t.encode()) for i, t in enumerate(texts)]
    for name, secret in secrets.items():
        for kind, form in forms(secret).items():
            found += [f"{name} ({kind}) in {where}" for where, blob in blobs if form in blob]
    return found


def cli(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m skillgrad.cli ARGS`` with the tests folder importable and ``env`` added."""
    path = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                         os.environ.get("PYTHONPATH")]))
    full = {**os.environ, "PYTHONPATH": path, "COLUMNS": "200", **env}
    full.pop("WANDB_SERVICE", None)  # a W&B service of this process's: each run starts its own
    return subprocess.run([sys.executable, "-m", "skillgrad.cli", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=300)


def one_line_error(proc: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert proc.returncode == code, proc.stderr
    assert "Traceback" not in proc.stderr
    return proc.stderr.strip().splitlines()[0]


def ask(text: str = "hi") -> ChatRequest:
    return ChatRequest(messages=(Message(role="user", content=text),))


# ----------------------------------------------------------------------------- resume hint


def test_the_resume_command_leaves_out_secret_set_values(toy_dir: Path) -> None:
    """A run that stops prints the command that resumes it: every --set that holds a secret
    (a header, however given) is named, not shown; the others and ${VAR} stay as given."""
    with FakeOpenAIServer(responder=toy.http_responder) as server:
        server.push(Fault.status(400, "no such model"))  # the first call stops the run
        cfg = toy_config(toy_dir, model=http_roles(server.url))
        proc = cli("train", str(cfg), "--out", "run",
                   "--set", f"model.target.extra_headers.X-Api-Key={LITERAL}",
                   "--set", f"model.optimizer.extra_headers={{Authorization: {ROTATED}}}",
                   "--set", "model.target.extra_headers.X-Trace=${" + TOKEN_ENV + "}",
                   "--set=train.seed=7", cwd=toy_dir, env=ENV)
    line = one_line_error(proc, code=1)
    assert "model call failed" in line
    assert leaks({"literal": LITERAL, "rotated": ROTATED, **ENV}, [],
                 [proc.stdout, proc.stderr]) == []
    hint = proc.stderr.strip().splitlines()[-1]
    assert f"resume with: skillgrad train {cfg} --out run --set " in hint
    assert "'model.target.extra_headers.X-Trace=${" + TOKEN_ENV + "}'" in hint
    assert "--set=train.seed=7" in hint
    assert ("plus --set model.target.extra_headers.X-Api-Key, model.optimizer.extra_headers "
            "(secret values, not shown") in hint


def test_every_form_of_a_secret_set_is_left_out_of_the_command() -> None:
    from skillgrad.config import secret_overrides

    args = ["train", "c.yaml", "-s", "model.target.extra_headers.Authorization=Bearer x1",
            "-smodel.target.extra_body.auth_token=x2", "--set=model.optimizer.api_key_env=K",
            "--set", "model.target.extra_headers.Accept=text/plain", "--set",
            "model.target.extra_headers={X-Key: x3}", "--out", "run"]
    kept, hidden = secret_overrides(args)
    assert kept == ["train", "c.yaml", "--set=model.optimizer.api_key_env=K", "--set",
                    "model.target.extra_headers.Accept=text/plain", "--out", "run"]
    assert hidden == ["model.target.extra_headers.Authorization",
                      "model.target.extra_body.auth_token", "model.target.extra_headers"]


# ----------------------------------------------------------------------------- fingerprint


def test_the_fingerprint_counts_where_a_secret_is_never_its_value(toy_dir: Path) -> None:
    def config(headers: dict[str, str]) -> Any:
        return load_config(toy_config(toy_dir, model={"target": {
            "backend": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "m",
            "extra_headers": headers}}))

    first = config({"X-Api-Key": LITERAL})
    assert config({"X-Api-Key": ROTATED}).fingerprint() == first.fingerprint()
    assert config({}).fingerprint() != first.fingerprint()
    assert config({"X-Other-Key": LITERAL}).fingerprint() != first.fingerprint()
    # Nothing to guess against: the fingerprint is the hash of the redacted config.
    assert first.fingerprint() == config({"X-Api-Key": "***"}).fingerprint()


def stopping_server(after_optimizer_calls: int = 12) -> FakeOpenAIServer:
    """The toy over HTTP, failing (HTTP 400) the optimizer's call ``after_optimizer_calls``:
    step 2 of the toy run (step 1 makes 9)."""
    calls = 0

    def fault(body: dict[str, Any]) -> Fault | None:
        nonlocal calls
        calls += bool(body.get("response_format"))
        return Fault.status(400, "bad request") if calls == after_optimizer_calls else None

    return FakeOpenAIServer(responder=toy.http_responder, faults=fault)


def legacy_fingerprint(cfg: Path, overrides: list[str]) -> str:
    """The fingerprint as skillgrad computed it before: a hash of the values themselves,
    secrets included."""
    from skillgrad.config import RESUME_SAFE
    from skillgrad.dotted import flatten

    flat = {k: v for k, v in flatten(load_config(cfg, overrides).resolved()).items()
            if not k.startswith(RESUME_SAFE)}
    return hashlib.sha256(json.dumps(flat, sort_keys=True, default=str).encode()).hexdigest()[:16]


def test_a_config_without_masked_values_keeps_the_fingerprint_it_had(
        toy_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run directories made before the fingerprint was taken of the redacted config resume as
    they did, unless their config had a masked value (the test after the next)."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    plain = toy_config(toy_dir)
    assert legacy_fingerprint(plain, []) == load_config(plain).fingerprint()
    cfg = toy_config(toy_dir, model=http_roles("http://127.0.0.1:9/v1"))  # ${VAR} only
    overrides = ["model.target.extra_headers.Content-Type=text/plain"]
    assert legacy_fingerprint(cfg, overrides) == load_config(cfg, overrides).fingerprint()


def test_a_run_resumes_after_only_its_secret_changed(
        toy_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    run = toy_dir / "run"
    with stopping_server() as server:
        cfg = toy_config(toy_dir, model=http_roles(server.url))
        header = "model.target.extra_headers.X-Api-Key"
        with pytest.raises(FatalModelError):
            Trainer.from_config(cfg, [f"{header}={LITERAL}"], out=run).fit()
        assert json.loads((run / "checkpoint.json").read_text())["global_step"] == 1
        summary = Trainer.from_config(cfg, [f"{header}={ROTATED}"], out=run).fit()
        url = server.url
    assert summary["steps"] == 6
    assert leaks({"literal": LITERAL, "rotated": ROTATED, **ENV,
                  "url": f"{url}?sig={SIG}"}, [run], []) == []


def test_a_run_directory_whose_fingerprint_hashed_a_secret_still_resumes(
        toy_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run made before fingerprints were taken of the redacted config: its fingerprint
    hashed the secret. The same config resumes it, and the old fingerprint is dropped."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    run = toy_dir / "run"
    overrides = [f"model.target.extra_headers.X-Api-Key={LITERAL}"]
    with stopping_server() as server:
        cfg = toy_config(toy_dir, model=http_roles(server.url))
        with pytest.raises(FatalModelError):
            Trainer.from_config(cfg, overrides, out=run).fit()
        old = legacy_fingerprint(cfg, overrides)
        assert old != load_config(cfg, overrides).fingerprint()
        for name in ("run.json", "checkpoint.json"):
            data = json.loads((run / name).read_text())
            (run / name).write_text(json.dumps({**data, "fingerprint": old}))
        with pytest.raises(RunDirError, match="different config"):  # a real change still is
            Trainer.from_config(cfg, [*overrides, "train.seed=8"], out=run).fit()
        summary = Trainer.from_config(cfg, overrides, out=run).fit()
    assert summary["steps"] == 6
    assert "fingerprint_renewed" in [e["event"] for e in RunDir(run).events()]
    assert [p.name for p in run.rglob("*") if p.is_file() and old.encode() in p.read_bytes()] == []
    assert json.loads((run / "run.json").read_text())["fingerprint"] == (
        load_config(cfg, overrides).fingerprint())


# ----------------------------------------------------------------------------- URLs


@pytest.mark.parametrize(("key", "url", "what"), [
    ("model.target.base_url", f"http://user:{PASSWORD}@127.0.0.1:9/v1", "a user:password@"),
    ("model.target.base_url", f"http://127.0.0.1:9/v1?sig={PASSWORD}",
     "a credential in the query (sig=)"),
    ("model.optimizer.base_url", f"https://{PASSWORD}@example.com/v1", "a user:password@"),
    ("env.data_path", f"https://me:{PASSWORD}@example.com/toy.jsonl", "a user:password@"),
])
@pytest.mark.parametrize("given", ["file", "--set"])
def test_a_credential_written_in_a_url_is_refused_naming_the_key(
        toy_dir: Path, key: str, url: str, what: str, given: str) -> None:
    roles = {r: {"backend": "openai_compatible", "base_url": "http://127.0.0.1:9/v1",
                 "model": "m"} for r in ("target", "optimizer")}
    cfg = toy_config(toy_dir, model=roles)
    if given == "file":
        data = yaml.safe_load(cfg.read_text())
        *path, leaf = key.split(".")
        node = data
        for part in path:
            node = node[part]
        node[leaf] = url
        cfg.write_text(yaml.safe_dump(data))
    overrides = [f"{key}={url}"] if given == "--set" else []
    with pytest.raises(ConfigError) as caught:
        load_config(cfg, overrides)
    message = str(caught.value)
    assert message.startswith(f"{cfg if given == 'file' else '--set'}: {key}: holds a credential")
    assert what in message and "environment variable" in message
    assert PASSWORD not in message


def test_the_cli_refuses_a_url_password_in_one_line_before_any_call(toy_dir: Path) -> None:
    with FakeOpenAIServer(responder=toy.http_responder) as server:
        cfg = toy_config(toy_dir, model=http_roles(server.url))
        url = server.url.replace("http://", f"http://user:{PASSWORD}@")
        proc = cli("train", str(cfg), "--out", "run", "--set", f"model.target.base_url={url}",
                   cwd=toy_dir, env=ENV)
        line = one_line_error(proc)
        assert server.requests == []
    assert "--set: model.target.base_url: holds a credential (a user:password@)" in line
    assert PASSWORD not in proc.stdout + proc.stderr
    assert not (toy_dir / "run").exists()


def test_a_servers_base64_echo_of_a_secret_is_scrubbed() -> None:
    """A server that echoes the credentials it was sent may encode them (HTTP Basic)."""
    basic = base64.b64encode(f"user:{LITERAL}".encode()).decode()
    urlsafe = base64.urlsafe_b64encode(LITERAL.encode()).decode()
    with FakeOpenAIServer() as server:
        options = OpenAICompatibleOptions(base_url=server.url, model="m",
                                          extra_headers={"X-Api-Key": LITERAL})
        model = OpenAICompatibleBackend.create(options, Path("."))
        try:
            server.push(Fault.status(400, f"refused: Basic {basic} and {urlsafe}"))
            with pytest.raises(FatalModelError) as caught:
                model.complete(ask())
        finally:
            model.close()
    assert "refused: Basic " in str(caught.value)
    assert leaks({"literal": LITERAL}, [], [str(caught.value)]) == []


@pytest.mark.parametrize("offset", range(6))
def test_base64_of_a_secret_is_scrubbed_at_any_offset(offset: int) -> None:
    encoded = base64.b64encode(b"x" * offset + LITERAL.encode() + b"!").decode()
    shown = redact_text(f"echo {encoded} end", [LITERAL])
    assert encoded not in shown and "***" in shown and shown.endswith(" end")


# ----------------------------------------------------------------------------- ${VAR}


def test_headers_and_base_url_read_their_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIServer() as server:
        monkeypatch.setenv("SKILLGRAD_TEST_SECRET_URL", server.url)
        monkeypatch.setenv(TOKEN_ENV, TOKEN)
        options = OpenAICompatibleOptions(
            base_url="${SKILLGRAD_TEST_SECRET_URL}", model="m",
            extra_headers={"X-Proxy-Token": f"Bearer ${{{TOKEN_ENV}}}"})
        model = OpenAICompatibleBackend.create(options, Path("."))
        try:
            model.complete(ask())
        finally:
            model.close()
        assert server.headers[0]["x-proxy-token"] == f"Bearer {TOKEN}"
        assert model.endpoint == server.url and TOKEN not in model.identity
    assert options.extra_headers == {"X-Proxy-Token": f"Bearer ${{{TOKEN_ENV}}}"}


@pytest.mark.parametrize(("key", "value"), [
    ("model.target.extra_headers.X-Api-Key", "${SKILLGRAD_TEST_SECRET_UNSET}"),
    ("model.target.base_url", "http://127.0.0.1:9/v1?key=${SKILLGRAD_TEST_SECRET_UNSET}"),
])
def test_an_unset_variable_is_one_error_naming_the_key_and_the_variable(
        toy_dir: Path, monkeypatch: pytest.MonkeyPatch, key: str, value: str) -> None:
    monkeypatch.delenv("SKILLGRAD_TEST_SECRET_UNSET", raising=False)
    role = {"backend": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    cfg = toy_config(toy_dir, model={"target": role})
    with pytest.raises(ConfigError) as caught:
        load_config(cfg, [f"{key}={value}"])
    assert str(caught.value).startswith(
        f"--set: {key}: ${{SKILLGRAD_TEST_SECRET_UNSET}} is not set in the environment")


def test_a_value_read_from_the_environment_is_scrubbed_from_log_lines(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx logs each request's URL: a query value read through ${VAR} is masked there even
    when its parameter is not named like a key."""
    import logging

    from skillgrad.redact import RedactingFilter, expand_references

    monkeypatch.setenv("SKILLGRAD_TEST_SECRET_TENANT", "cnry1tenant6604")
    url = expand_references("http://h/v1/chat?tenant=${SKILLGRAD_TEST_SECRET_TENANT}")
    record = logging.LogRecord("httpx", logging.INFO, __file__, 1, "HTTP Request: POST %s",
                               (url,), None)
    assert RedactingFilter().filter(record)
    assert record.getMessage() == "HTTP Request: POST http://h/v1/chat?tenant=***"


def test_a_url_password_from_a_variable_is_refused_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLGRAD_TEST_SECRET_URL", f"http://u:{PASSWORD}@127.0.0.1:9/v1")
    with pytest.raises(ValueError, match=r"its \$\{VAR\} holds a user:password@") as caught:
        OpenAICompatibleOptions(base_url="${SKILLGRAD_TEST_SECRET_URL}", model="m")
    assert PASSWORD not in str(caught.value)


# ----------------------------------------------------------------------------- end to end


def tracked_env(base: Path) -> dict[str, str]:
    """W&B offline and MLflow in a folder, both silent and writing only under ``base``."""
    return {**ENV, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONSOLE": "off",
            "WANDB_DISABLE_GIT": "true", "WANDB_X_DISABLE_STATS": "true", "DO_NOT_TRACK": "1",
            "WANDB_DIR": str(base / "wandb-default"), "WANDB_CONFIG_DIR": str(base / "wb-cfg"),
            "WANDB_CACHE_DIR": str(base / "wb-cache"), "WANDB_DATA_DIR": str(base / "wb-data"),
            "MLFLOW_ALLOW_FILE_STORE": "true", "MLFLOW_DISABLE_TELEMETRY": "true",
            "HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost", "WANDB_API_KEY": ""}


def test_no_form_of_a_secret_reaches_the_run_the_trackers_or_the_console(
        tmp_path: Path) -> None:
    """A training over HTTP whose key, header and query value come from ${VAR} and a header
    from --set, logged to W&B (offline) and MLflow; stopped by a failure that echoes the
    secrets (in base64 too), then resumed with that --set header rotated."""
    work = tmp_path / "work"
    work.mkdir()
    sets = ["--set", "tracking.wandb.mode=offline", "--set", f"tracking.wandb.dir={tmp_path}",
            "--set", f"tracking.mlflow.tracking_uri={tmp_path / 'mlruns'}"]
    echo = f"bad request {TOKEN} {base64.b64encode(f'u:{TOKEN}'.encode()).decode()}"
    optimizer_calls = 0

    def stop_in_the_second_step(body: dict[str, Any]) -> Fault | None:
        nonlocal optimizer_calls
        optimizer_calls += bool(body.get("response_format"))
        return Fault.status(400, echo) if optimizer_calls == 12 else None  # step 1 has 9

    env = tracked_env(tmp_path)
    with FakeOpenAIServer(responder=toy.http_responder, faults=stop_in_the_second_step) as server:
        cfg = toy_config(work, model=http_roles(server.url))
        first = cli("train", str(cfg), "--out", "run", "-v", *sets,
                    "--set", f"model.target.extra_headers.X-Api-Key={LITERAL}", cwd=work, env=env)
        assert first.returncode == 1, first.stderr
        assert "HTTP Request: POST" in first.stderr  # -v: each request's URL is logged
        assert leaks({"literal": LITERAL, **ENV}, [], [first.stdout, first.stderr]) == []
        assert "epoch 1 step 2" in first.stderr and "bad request *** " in first.stderr
        resumed = cli("train", str(cfg), "--out", "run", *sets,
                      "--set", f"model.target.extra_headers.X-Api-Key={ROTATED}", cwd=work,
                      env=env)
        assert resumed.returncode == 0, resumed.stderr
        headers, url = list(server.headers), server.url
    assert any(h.get("x-api-key") == ROTATED for h in headers)
    assert any(h.get("x-proxy-token") == f"Bearer {TOKEN}" for h in headers)
    assert any(h.get("authorization") == f"Bearer {KEY}" for h in headers)
    run = work / "run"
    events = [e["event"] for e in RunDir(run).events()]
    assert "resume" in events and "config_changed" not in events
    shown = (run / "config.yaml").read_text()
    assert f"sig=${{{SIG_ENV}}}" in shown and f"Bearer ${{{TOKEN_ENV}}}" in shown
    assert "X-Api-Key: '***'" in shown
    assert json.loads((run / "run.json").read_text())["fingerprint"] == json.loads(
        (run / "checkpoint.json").read_text())["fingerprint"]
    assert written_out(tmp_path / "wandb") and (tmp_path / "mlruns").is_dir()
    secrets = {"literal": LITERAL, "rotated": ROTATED, **ENV,
               "url": f"{url}?sig={SIG}"}
    assert leaks(secrets, [work, tmp_path / "wandb", tmp_path / "mlruns"],
                 [first.stdout, first.stderr, resumed.stdout, resumed.stderr]) == []
