"""The scripted model (the library's fake LLM) and its config backend."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml

from skillgrad.errors import ConfigError, ScriptExhausted
from skillgrad.models.base import ChatModel
from skillgrad.models.messages import ChatRequest, Completion, Message
from skillgrad.models.scripted import (
    Rule,
    ScriptedBackend,
    ScriptedModel,
    ScriptedOptions,
    prompt_text,
    read_script,
)


def ask(model: ScriptedModel, text: str, system: str | None = None) -> str:
    messages = [Message(role="user", content=text)]
    if system is not None:
        messages.insert(0, Message(role="system", content=system))
    return model.complete(ChatRequest(messages=tuple(messages))).text


def test_is_a_chat_model() -> None:
    assert isinstance(ScriptedModel(), ChatModel)


def test_replies_in_order_then_exhausted() -> None:
    model = ScriptedModel(["first", {"a": 1}, ["x"]])
    assert ask(model, "q1") == "first"
    assert json.loads(ask(model, "q2")) == {"a": 1}
    assert json.loads(ask(model, "q3")) == ["x"]
    with pytest.raises(ScriptExhausted):
        ask(model, "q4")


def test_replies_list_is_copied() -> None:
    replies = ["a", "b"]
    model = ScriptedModel(replies)
    ask(model, "q")
    assert replies == ["a", "b"]


def test_rules_first_match_wins_with_when_and_unless() -> None:
    model = ScriptedModel(
        rules=[
            {"when": ["capital", "France"], "unless": "skip", "reply": "Paris"},
            {"when": "capital", "reply": "some capital"},
            Rule(when=(), reply="anything"),
        ]
    )
    assert ask(model, "What is the capital of France?") == "Paris"
    assert ask(model, "capital of France, skip") == "some capital"  # unless blocks rule 1
    assert ask(model, "capital of Peru") == "some capital"  # every `when` must occur
    assert ask(model, "hello") == "anything"


def test_rules_match_all_messages_including_system() -> None:
    model = ScriptedModel(rules=[{"when": "SKILL-RULE", "reply": "yes"}], default="no")
    assert ask(model, "q", system="the SKILL-RULE applies") == "yes"
    assert ask(model, "q", system="nothing") == "no"


def test_rules_come_before_replies_and_replies_before_default() -> None:
    model = ScriptedModel(["listed"], rules=[{"when": "special", "reply": "ruled"}], default="dflt")
    assert ask(model, "special") == "ruled"
    assert ask(model, "plain") == "listed"
    assert ask(model, "plain") == "dflt"
    assert ask(model, "plain") == "dflt"


def test_fn_first_and_none_falls_through() -> None:
    def fn(request: ChatRequest) -> str | None:
        text = prompt_text(request)
        return "from fn" if "fn" in text else None

    model = ScriptedModel(rules=[{"when": "q", "reply": "rule"}], fn=fn, default="d")
    assert ask(model, "q fn") == "from fn"
    assert ask(model, "q") == "rule"


def test_completion_replies_pass_through() -> None:
    cut = Completion(text="partial", finish_reason="length")
    model = ScriptedModel([cut])
    assert model.complete(ChatRequest(messages=(Message(role="user", content="q"),))) is cut


def test_completion_has_usage_estimate_and_stop() -> None:
    model = ScriptedModel(default="x" * 40)
    completion = model.complete(ChatRequest(messages=(Message(role="user", content="q" * 100),)))
    assert completion.finish_reason == "stop"
    assert completion.usage.completion_tokens == 10
    assert completion.usage.prompt_tokens > 0


def test_exhausted_shows_the_prompt_and_call_number() -> None:
    model = ScriptedModel(["one"])
    ask(model, "first")
    with pytest.raises(ScriptExhausted) as info:
        ask(model, "Which river flows through Vienna?")
    message = str(info.value)
    assert "call #2" in message
    assert "Which river flows through Vienna?" in message


def test_exhausted_says_in_one_line_how_the_prompt_begins_and_logs_it_whole(
        caplog: pytest.LogCaptureFixture) -> None:
    prompt = "HEAD\nof it " + "x" * 5000 + "TAIL"
    with caplog.at_level("INFO"), pytest.raises(ScriptExhausted) as info:
        ask(ScriptedModel(), prompt)
    message = str(info.value)
    assert "\n" not in message and "HEAD of it xxx" in message and len(message) < 250
    assert prompt in caplog.text


def test_calls_are_recorded() -> None:
    model = ScriptedModel(default="ok")
    ask(model, "a")
    ask(model, "b", system="s")
    assert [c.messages[-1].text() for c in model.calls] == ["a", "b"]
    assert model.calls[1].messages[0].role == "system"


def test_rule_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError):
        Rule.model_validate({"when": "x", "reply": "y", "whenever": "z"})


# ----------------------------------------------------------------------------- script files


def test_read_script_from_yaml(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({
        "rules": [{"when": "rank", "reply": {"order": [1]}}],
        "replies": ["r1"],
        "default": "d",
    }))
    script = read_script(path)
    assert script.rules == [Rule(when=("rank",), reply={"order": [1]})]
    assert script.replies == ["r1"]
    assert script.default == "d"


def test_read_script_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        read_script(tmp_path / "absent.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules: [\n")
    with pytest.raises(ConfigError, match="bad.yaml"):
        read_script(bad)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("answers: [a]\n")
    with pytest.raises(ConfigError, match="invalid script"):
        read_script(unknown)


def test_backend_reads_script_relative_to_base_dir(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "s.yaml").write_text(yaml.safe_dump({
        "rules": [{"when": "file", "reply": "file rule"}],
        "replies": ["file reply"],
        "default": "file default",
    }))
    options = ScriptedOptions(script=Path("scripts/s.yaml"),
                              rules=[Rule(when=("file",), reply="inline rule")],
                              replies=["inline reply"])
    model = ScriptedBackend.create(options, tmp_path)
    assert ask(model, "file") == "inline rule"  # inline rules come first
    assert ask(model, "x") == "inline reply"
    assert ask(model, "x") == "file reply"
    assert ask(model, "x") == "file default"


def test_backend_inline_default_wins(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("default: from file\n")
    model = ScriptedBackend.create(ScriptedOptions(script=Path("s.yaml"), default="inline"),
                                   tmp_path)
    assert ask(model, "x") == "inline"


def test_backend_missing_script_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        ScriptedBackend.create(ScriptedOptions(script=Path("nope.yaml")), tmp_path)


@pytest.fixture
def fake_module(monkeypatch: pytest.MonkeyPatch) -> str:
    name = "skillgrad_test_scripted_fns"
    module = types.ModuleType(name)

    def echo(request: ChatRequest) -> str:
        return "echo: " + request.messages[-1].text()

    def make(prefix: str, base_dir: Path) -> Any:
        def reply(request: ChatRequest) -> str:
            return f"{prefix} {base_dir.name} {request.messages[-1].text()}"
        return reply

    module.echo = echo  # type: ignore[attr-defined]
    module.make = make  # type: ignore[attr-defined]
    module.constant = 3  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, name, module)
    return name


def test_backend_function(tmp_path: Path, fake_module: str) -> None:
    model = ScriptedBackend.create(ScriptedOptions(function=f"{fake_module}:echo"), tmp_path)
    assert ask(model, "hi") == "echo: hi"


def test_backend_function_factory_gets_args_and_base_dir(tmp_path: Path, fake_module: str) -> None:
    options = ScriptedOptions(function=f"{fake_module}:make", function_args={"prefix": ">"})
    model = ScriptedBackend.create(options, tmp_path)
    assert ask(model, "hi") == f"> {tmp_path.name} hi"


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("no_colon", "expected 'module:callable'"),
        (":attr", "expected 'module:callable'"),
        ("skillgrad_no_such_module_xyz:f", "cannot import"),
        ("{mod}:missing", "cannot import"),
        ("{mod}:constant", "not callable"),
    ],
)
def test_backend_bad_function_spec(tmp_path: Path, fake_module: str, spec: str, match: str) -> None:
    options = ScriptedOptions(function=spec.format(mod=fake_module))
    with pytest.raises(ConfigError, match=match):
        ScriptedBackend.create(options, tmp_path)


def test_options_reject_unknown_keys() -> None:
    with pytest.raises(ValueError):
        ScriptedOptions.model_validate({"scripts": "x"})


def test_function_args_without_function_is_an_error() -> None:
    import pytest
    from pydantic import ValidationError

    from skillgrad.models.scripted import ScriptedOptions

    with pytest.raises(ValidationError, match="function_args"):
        ScriptedOptions(function_args={"a": 1})
