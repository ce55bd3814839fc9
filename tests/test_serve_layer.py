"""skillgrad serve and the client layer: a rollout's tag reaches the meter and the journal, a
spent budget stops the agent with an error it does not retry, a recording answers in place of
the model, a restarted server answers from its journal; the key and Host checks; and the
command line."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from e2e import cli, one_line_error

from skillgrad.models.accounting import Budget
from skillgrad.models.base import ChatModel
from skillgrad.models.client import ModelClient
from skillgrad.models.scripted import ScriptedModel
from skillgrad.models.store import Recording, ReplayModel
from skillgrad.serve.app import create_app, running
from skillgrad.serve.scopes import ClientScopes

CHAT = {"model": "m", "messages": [{"role": "user", "content": "List the files."}]}
ANTHROPIC = {"model": "m", "max_tokens": 100, **{"messages": CHAT["messages"]}}
GEMINI = {"contents": [{"role": "user", "parts": [{"text": "List the files."}]}]}


@contextmanager
def serving(model: ChatModel, *, record: Path | None = None, **client_options: Any,
            ) -> Iterator[tuple[str, ModelClient]]:
    client = ModelClient(model, "target", **client_options)
    with running(create_app(ClientScopes(client, record))) as url:
        yield url, client


def test_the_tag_names_the_stage_and_the_journal(tmp_path: Path) -> None:
    model = ScriptedModel(default="ok")
    with serving(model, record=tmp_path / "calls") as (url, client):
        assert httpx.post(f"{url}/r/rollout-7/v1/chat/completions", json=CHAT).status_code == 200
        assert httpx.post(f"{url}/v1/messages", json=ANTHROPIC,
                          headers={"X-Skillgrad-Rollout": "rollout-8"}).status_code == 200
        assert httpx.post(f"{url}/v1beta/models/g:generateContent", json=GEMINI).status_code == 200
        bad = httpx.post(f"{url}/r/..%2Fescape/v1/chat/completions", json=CHAT)
    stages = client.meter.stages["target"]
    assert {s: m.calls for s, m in stages.items()} == {"rollout-7": 1, "rollout-8": 1, "serve": 1}
    for tag in ("rollout-7", "rollout-8", "serve"):
        (entry,) = [json.loads(line) for line in
                    (tmp_path / "calls" / tag / "calls.jsonl").read_text().splitlines()]
        assert entry["stage"] == tag and entry["completion"]["text"] == "ok"
    assert bad.status_code in (400, 404) and not (tmp_path / "escape").exists()


def test_a_spent_budget_stops_every_format_without_calling_the_model() -> None:
    model = ScriptedModel(default="ok")
    with serving(model, budget=Budget(calls=1)) as (url, _):
        assert httpx.post(f"{url}/v1/chat/completions", json=CHAT).status_code == 200
        chat = httpx.post(f"{url}/v1/chat/completions", json=CHAT)
        responses = httpx.post(f"{url}/v1/responses", json={"model": "m", "input": "hi"})
        messages = httpx.post(f"{url}/v1/messages", json=ANTHROPIC)
        gemini = httpx.post(f"{url}/v1beta/models/g:generateContent", json=GEMINI)
    assert model.n_calls == 1
    for refused in (chat, responses):
        assert refused.status_code == 429 and refused.headers["x-should-retry"] == "false"
        assert refused.json()["error"]["code"] == "insufficient_quota"  # Codex: final
        assert "budget ran out" in refused.json()["error"]["message"]
    assert messages.status_code == 402
    assert messages.json() == {"type": "error", "error": {
        "type": "billing_error", "message": messages.json()["error"]["message"]}}
    assert gemini.status_code == 400
    assert gemini.json()["error"]["status"] == "FAILED_PRECONDITION"


def test_a_recording_answers_in_place_of_the_model(tmp_path: Path) -> None:
    first = ScriptedModel(default={"tool_calls": [{"name": "shell",
                                                   "arguments": {"command": "ls"}}]})
    body = {**CHAT, "tools": [{"type": "function", "function": {"name": "shell"}}]}
    with serving(first, record=tmp_path / "rec") as (url, _):
        recorded = httpx.post(f"{url}/r/t1/v1/chat/completions", json=body).json()
    replay = ReplayModel(Recording(tmp_path / "rec"), "target")
    with serving(replay) as (url, client):
        again = httpx.post(f"{url}/r/t1/v1/chat/completions", json=body).json()
        unknown = httpx.post(f"{url}/r/t1/v1/chat/completions",
                             json={**body, "messages": [{"role": "user", "content": "other"}]})
    assert again["choices"][0]["message"] == recorded["choices"][0]["message"]
    assert unknown.status_code == 500 and unknown.headers["x-should-retry"] == "false"
    assert "never asked" in unknown.json()["error"]["message"]


def test_a_restarted_server_answers_repeated_requests_from_its_journal(tmp_path: Path) -> None:
    with serving(ScriptedModel(default="first answer"), record=tmp_path) as (url, _):
        httpx.post(f"{url}/r/t1/v1/chat/completions", json=CHAT)
    model = ScriptedModel(default="second answer")
    with serving(model, record=tmp_path) as (url, client):
        out = httpx.post(f"{url}/r/t1/v1/chat/completions", json=CHAT).json()
    assert out["choices"][0]["message"]["content"] == "first answer" and model.n_calls == 0
    assert client.meter.stages["target"]["t1"].replayed == 1


def test_model_failures_are_refusals_in_the_format() -> None:
    class Small(ScriptedModel):
        context_tokens = 50

    with serving(Small(default="ok")) as (url, _):
        long = {**CHAT, "messages": [{"role": "user", "content": "word " * 400}]}
        too_large = httpx.post(f"{url}/v1/chat/completions", json=long)
    assert too_large.status_code == 400
    assert too_large.json()["error"]["code"] == "context_length_exceeded"
    with serving(ScriptedModel()) as (url, _):  # a script with no answer
        exhausted = httpx.post(f"{url}/v1/messages", json=ANTHROPIC)
        malformed = httpx.post(f"{url}/v1/messages", content=b"{not json")
        no_messages = httpx.post(f"{url}/v1/responses", json={"model": "m"})
        odd = httpx.post(f"{url}/v1/messages", json={**ANTHROPIC, "system": 7,
                                                     "messages": [{"role": "user",
                                                                   "content": 7}]})
    assert exhausted.status_code == 500
    assert exhausted.json()["error"]["type"] == "api_error"
    assert "no reply" in exhausted.json()["error"]["message"]
    assert malformed.status_code == 400 and malformed.json()["error"]["type"] == (
        "invalid_request_error")
    assert no_messages.status_code == 400 and "input" in no_messages.json()["error"]["message"]
    assert odd.status_code == 400 and odd.json()["error"]["type"] == "invalid_request_error"


def test_the_key_and_the_host_are_checked() -> None:
    client = ModelClient(ScriptedModel(default="ok"), "target")
    with running(create_app(ClientScopes(client), key="s3cret")) as url:
        def status(headers: dict[str, str], path: str = "/v1/chat/completions") -> int:
            return httpx.post(url + path, json=CHAT, headers=headers).status_code

        assert status({}) == 401 and status({"Authorization": "Bearer dummy"}) == 401
        assert status({"Authorization": "Bearer s3cret"}) == 200
        assert status({"x-api-key": "s3cret"}) == 200
        assert status({"x-goog-api-key": "s3cret"}) == 200
        assert status({}, "/v1/chat/completions?key=s3cret") == 200
        assert status({"Authorization": "Bearer s3cret", "Host": "evil.example:80"}) == 401
    with running(create_app(ClientScopes(client))) as url:  # no key: any key, or none
        assert httpx.post(f"{url}/v1/chat/completions", json=CHAT,
                          headers={"Authorization": "Bearer anything"}).status_code == 200


def test_what_agents_probe_at_start() -> None:
    with serving(ScriptedModel(default="ok")) as (url, _):
        assert httpx.head(f"{url}/r/tag1").status_code == 200  # Claude Code's first request
        assert httpx.head(f"{url}/").status_code == 200
        models = httpx.get(f"{url}/r/tag1/v1/models").json()
        assert models["object"] == "list" and models["data"][0]["id"] == "skillgrad"
        assert models["data"][0]["type"] == "model"  # read as Anthropic's list too
        assert httpx.get(f"{url}/v1/models/x").json()["id"] == "x"
        gemini = httpx.get(f"{url}/v1beta/models").json()
        assert gemini["models"][0]["name"] == "models/skillgrad"


# ----------------------------------------------------------------------------- command line


def test_serve_refuses_a_public_address_without_the_flag() -> None:
    line = one_line_error(cli("serve", "--host", "0.0.0.0"))
    assert "--allow-remote" in line
    assert "--role" in one_line_error(cli("serve", "--role", "judge"))


def test_the_embedded_window_is_sized_by_the_agent_it_serves(tmp_path: Path) -> None:
    """An agent's first prompt is 7-19k tokens, over the embedded default of 8,192: an
    unsized window gets the agent's preset, a set one too small for it is refused."""
    from skillgrad.cli.serve import AGENT_WINDOW, _window
    from skillgrad.config import load_config
    from skillgrad.errors import ConfigError
    from skillgrad.models.agent_clis import AGENT_CLIS, MODEL_WINDOW

    config = tmp_path / "serve.yaml"
    config.write_text("model:\n  target:\n    backend: embedded\n")
    for name, agent in AGENT_CLIS.items():
        assert agent.first_prompt + 16384 <= agent.window or agent.window == MODEL_WINDOW
        assert _window(load_config(config), "target", name) == agent.window
    assert _window(load_config(config), "target", None) == AGENT_WINDOW == MODEL_WINDOW
    assert _window(load_config(None), "target", "opencode") == 24576
    sized = load_config(config, ["model.target.n_ctx=20000"])
    assert _window(sized, "target", "opencode") is None  # set, and large enough: kept
    with pytest.raises(ConfigError, match=r"model.target.n_ctx = 20000 \(--set\): claude's "
                       r"first prompt alone is about 18,884 tokens; set at least 20,932"):
        _window(sized, "target", "claude")
    config.write_text("model:\n  target:\n    backend: scripted\n    default: hi\n")
    assert _window(load_config(config), "target", "claude") is None  # no window to size
    small = tmp_path / "small.yaml"
    small.write_text("model:\n  target:\n    backend: embedded\n    n_ctx: 8192\n")
    line = one_line_error(cli("serve", str(small), "--agent", "codex"))
    assert f"n_ctx = 8192 ({small}:4)" in line and "codex" in line
    assert "--agent" in one_line_error(cli("serve", str(small), "--agent", "cursor"))


def test_serve_command_serves_a_config_role_and_reports_its_calls(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("model:\n  optimizer:\n    backend: scripted\n    rules:\n"
                      "      - when: '[tool]'\n        reply: done\n"
                      "    default:\n      tool_calls:\n        - name: shell\n"
                      "          arguments: {command: ls}\n")
    env = {**os.environ, "COLUMNS": "200", "SKILLGRAD_SERVE_KEY": ""}
    proc = subprocess.Popen(
        [sys.executable, "-m", "skillgrad.cli", "serve", str(config), "--role", "optimizer",
         "--port", "0", "--record", str(tmp_path / "rec")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        # Ctrl-C's default, also when the suite runs with SIGINT ignored (in the background)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        match = re.search(r"at (http://127\.0\.0\.1:\d+) ", first)
        assert match, first + proc.stderr.read() if proc.poll() is not None else first
        url = match.group(1)
        out = httpx.post(f"{url}/r/night-1/v1/chat/completions", json=CHAT, timeout=10).json()
        assert out["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "shell"
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert "night-1" in err and "calls served" in err
    assert (tmp_path / "rec" / "night-1" / "calls.jsonl").is_file()
