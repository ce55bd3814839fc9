"""SkillOpt's agent-CLI backends (``codex_exec``, ``claude_code_exec``, ``claude_chat``,
``copilot_chat``, ``copilot_exec``, ``cursor_exec``) read as skillgrad's ``agent`` backend
presets (``command`` for Cursor): each translates to the right section, which the backend's
own options model accepts; the role's local model is the user's to name, and without it the
config is a one-line error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from skillgrad.config import ResolvedConfig, load_config
from skillgrad.errors import ConfigError
from skillgrad.models.command import CommandOptions
from tests.e2e import cli, one_line_error
from tests.skillopt_checkout import SKILLOPT

AGENTS = SKILLOPT / "configs" / "agent_backends.yaml"
ENV = "env: {name: searchqa, split_mode: split_dir, split_dir: x}\n"
# SkillOpt's environment variables for its CLIs, unset so that its defaults apply.
CLI_VARS = ("CODEX_EXEC_PATH", "CODEX_CLI_BIN", "CODEX_PATH", "CODEX_EXEC_SANDBOX",
            "CODEX_SANDBOX_MODE", "CODEX_SANDBOX", "CODEX_EXEC_APPROVAL_POLICY",
            "CODEX_EXEC_REASONING_EFFORT", "CODEX_EXEC_NETWORK_ACCESS", "CODEX_EXEC_WEB_SEARCH",
            "CLAUDE_CLI_BIN", "CURSOR_EXEC_PATH", "CURSOR_EXEC_SANDBOX", "COPILOT_EXEC_PATH",
            "COPILOT_CHAT_TIMEOUT")


@pytest.fixture(autouse=True)
def skillopt_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CLI_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://example-resource.openai.azure.com")


def _load(tmp_path: Path, text: str, *overrides: str) -> ResolvedConfig:
    config = tmp_path / "so.yaml"
    config.write_text(f"_base_: {AGENTS}\n{text}{ENV}")
    return load_config(config, list(overrides))


def _role(resolved: ResolvedConfig, role: str) -> dict[str, Any]:
    section: dict[str, Any] = resolved.raw["model"][role]
    return section


def _agent(resolved: ResolvedConfig, role: str) -> Any:
    """The role's options as the agent backend validated them."""
    from skillgrad.models.agent import AgentOptions

    options = resolved.role_options[role]
    assert isinstance(options, AgentOptions), type(options)
    return options


def _notes(resolved: ResolvedConfig) -> dict[str, str]:
    """Each noted key: what its notes say (``KIND: LINE``, one per note)."""
    said: dict[str, str] = {}
    for n in resolved.notes:
        said[n.key] = " | ".join(filter(None, [said.get(n.key), f"{n.kind}: {n.line()}"]))
    return said


SERVE = "model.target={serve: served.yaml}"
SERVE_BOTH = (SERVE, "model.optimizer={serve: served.yaml}")


# ----------------------------------------------------------------------------- each backend


def test_codex_exec_target_is_the_codex_preset(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    resolved = _load(tmp_path, "model:\n  target_backend: codex_exec\n"
                     "  codex_exec_reasoning_effort: high\n", SERVE)
    assert _role(resolved, "target") == {
        "backend": "agent", "cli": "codex", "placement": "instructions",
        "skill_name": "skillopt-target", "trace": True, "timeout": 120,
        "extra_args": ["--sandbox", "workspace-write", "-c", 'model_reasoning_effort="high"'],
        "serve": str(tmp_path / "served.yaml")}  # read from the current directory
    options = _agent(resolved, "target")
    assert options.cli == "codex" and options.tools and options.isolate
    assert resolved.raw["model"]["optimizer"]["backend"] == "openai_compatible"
    notes = _notes(resolved)
    assert notes["model.target_backend"].startswith("mapped: ") and \
        "-> model.target: agent (codex)" in notes["model.target_backend"]
    assert notes["model.codex_exec_reasoning_effort"].startswith("mapped")
    assert "model.target" not in notes  # SkillOpt's model name gave way to the section
    assert notes["model.codex_exec_use_sdk"].startswith("differs")  # null: auto, the SDK first
    assert notes["model.codex_exec_profile"].startswith("inert")  # empty
    assert resolved.origin("model.target.extra_args").startswith("SkillOpt's ")
    assert resolved.origin("model.target.trace").endswith(
        "(as SkillOpt's model.codex_trace_to_optimizer)")
    assert resolved.origin("model.target.serve") == "--set"


def test_codex_keys_and_their_environment_variables(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_EXEC_SANDBOX", "read-only")
    monkeypatch.setenv("CODEX_CLI_BIN", "/opt/codex/bin/codex")
    resolved = _load(tmp_path, """
model:
  target_backend: codex_exec
  codex_exec_approval_policy: on-request
  codex_exec_profile: review
  codex_exec_network_access: true
  codex_exec_web_search: "false"
  codex_trace_to_optimizer: false
""", SERVE)
    target = _role(resolved, "target")
    assert target["binary"] == "/opt/codex/bin/codex"
    assert resolved.origin("model.target.binary") == "$CODEX_CLI_BIN"
    assert target["extra_args"] == ["--sandbox", "read-only", "-c",
                                    'approval_policy="on-request"']
    assert target["trace"] is False
    warned = {n.key for n in resolved.notes if n.kind == "ignored"}
    assert warned == {"model.codex_exec_profile", "model.codex_exec_network_access"}
    # SkillOpt's own spellings of the path and the sandbox (skillopt/config.py) are read too.
    flat = _load(tmp_path, "model:\n  target_backend: codex_exec\n  codex_path: bin/codex\n"
                 "  sandbox: danger-full-access\n", SERVE)
    assert _role(flat, "target")["binary"] == str(Path.cwd() / "bin/codex")
    assert _role(flat, "target")["extra_args"][:2] == ["--sandbox", "danger-full-access"]


def test_codex_for_both_roles_from_model_backend(tmp_path: Path) -> None:
    # model.backend: codex replaces the roles left at openai_chat, as SkillOpt's trainer does.
    resolved = _load(tmp_path, "model:\n  backend: codex\n", *SERVE_BOTH)
    optimizer, target = _role(resolved, "optimizer"), _role(resolved, "target")
    assert optimizer["backend"] == target["backend"] == "agent"
    assert optimizer["tools"] is False and "tools" not in target
    assert optimizer["extra_args"] == ["-c", 'model_reasoning_effort="medium"']  # the shared
    assert "skill_name" not in optimizer and "trace" not in optimizer
    assert _agent(resolved, "optimizer").tools is False
    assert "differs: " in _notes(resolved)["model.backend"]  # no tools here


def test_claude_code_exec_target(tmp_path: Path) -> None:
    resolved = _load(tmp_path, "model:\n  target_backend: claude_code_exec\n"
                     "  claude_code_exec_effort: xhigh\n", SERVE)
    target = _role(resolved, "target")
    assert (target["cli"], target["binary"], target["trace"]) == ("claude", "claude", False)
    assert target["extra_args"] == ["--effort", "max", "--max-thinking-tokens", "16384"]
    assert _agent(resolved, "target").extra_args == target["extra_args"]
    notes = _notes(resolved)
    assert notes["model.claude_code_exec_use_sdk"].startswith("differs")
    assert "no trace of claude_code_exec" in resolved.origin("model.target.trace")


@pytest.mark.parametrize("backend", ["claude", "claude_chat"])
def test_claude_chat_is_the_claude_preset_without_tools(backend: str, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAUDE_CLI_BIN", "claude-2")
    resolved = _load(tmp_path, f"model:\n  backend: {backend}\n", *SERVE_BOTH)
    for role, timeout in (("optimizer", 300.0), ("target", 120)):  # env.exec_timeout
        section = _role(resolved, role)
        assert (section["cli"], section["tools"], section["timeout"]) == ("claude", False, timeout)
        assert section["extra_args"] == ["--effort", "medium"]  # model.reasoning_effort
        assert section["binary"] == "claude-2"
        assert _agent(resolved, role).placement == "instructions"


def test_copilot_chat_and_copilot_exec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COPILOT_EXEC_PATH", "copilot-cli")
    chat = _load(tmp_path, "model:\n  backend: copilot\n  copilot_chat_timeout: 90\n"
                 "  copilot_chat_target_model: gpt-5-mini\n", *SERVE_BOTH)
    for role in ("optimizer", "target"):
        section = _role(chat, role)
        assert (section["cli"], section["tools"], section["binary"]) == (
            "copilot", False, "copilot-cli")
        _agent(chat, role)
    assert _role(chat, "optimizer")["timeout"] == 90.0
    assert _role(chat, "target")["timeout"] == 120  # env.exec_timeout: the call's limit
    assert _notes(chat)["model.copilot_chat_target_model"].startswith("differs")
    agent = _load(tmp_path, "model:\n  target_backend: copilot_exec\n"
                  "  copilot_exec_home: /tmp/copilot-home\n", SERVE)
    target = _role(agent, "target")
    assert (target["cli"], target["trace"]) == ("copilot", False) and "tools" not in target
    notes = _notes(agent)
    assert notes["model.copilot_exec_allow_all_tools"].startswith("differs")
    assert notes["model.copilot_exec_home"].startswith("differs")
    _agent(agent, "target")


def test_cursor_exec_is_the_command_backend_running_cursor_agent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As SkillOpt's CLI reference shows it: model.target_backend=cursor_exec,
    # model.target=composer-2.5; no local model to name (Cursor has no endpoint setting).
    resolved = _load(tmp_path, "model:\n  target_backend: cursor_exec\n  target: composer-2.5\n"
                     "  cursor_exec_sandbox: disabled\n")
    target = _role(resolved, "target")
    assert target["argv"] == ["cursor-agent", "-p", "--output-format", "stream-json", "--trust",
                              "--workspace", "{workspace}", "--sandbox", "disabled", "--mode",
                              "ask", "--model", "composer-2.5"]
    assert (target["backend"], target["input"], target["output"], target["text_field"]) == (
        "command", "stdin", "jsonl", "result")
    assert target["skill_file"] == ".agents/skills/skillopt-target/SKILL.md"
    assert isinstance(resolved.role_options["target"], CommandOptions)
    said = _notes(resolved)["model.target_backend"]
    assert "-> model.target: command" in said and "differs: " in said
    assert "Cursor's hosted models" in said
    default = _load(tmp_path, "model:\n  target_backend: cursor\n")  # gpt-5.5: Cursor's default
    assert _role(default, "target")["argv"][-1] == "composer-2.5"


def test_model_backend_fills_the_roles_as_skillopts_trainer_does(tmp_path: Path) -> None:
    # A target harness replaces a target left at openai_chat and keeps the optimizer there.
    harness = _load(tmp_path, "model:\n  backend: claude_code_exec\n", SERVE)
    assert _role(harness, "optimizer")["backend"] == "openai_compatible"
    assert _role(harness, "target")["cli"] == "claude"
    assert harness.origin("model.target.cli").endswith("(as SkillOpt's model.backend)")
    # A role set to anything but the default keeps its own backend.
    kept = _load(tmp_path, "model:\n  backend: codex\n  target_backend: qwen_chat\n",
                 "model.optimizer={serve: s.yaml}")
    assert _role(kept, "optimizer")["cli"] == "codex"
    assert _role(kept, "target")["backend"] == "openai_compatible"


def test_a_legacy_flat_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "flat.yaml"
    config.write_text("env: searchqa\nsplit_mode: split_dir\nsplit_dir: x\n"
                      "optimizer_model: gpt-5.5\ntarget_model: gpt-5.5\n"
                      "target_backend: codex_exec\ncodex_bin: /opt/codex\n")
    resolved = load_config(config, [SERVE])  # the section replaces target_model
    target = _role(resolved, "target")
    assert (target["binary"], target["serve"]) == ("/opt/codex", str(tmp_path / "served.yaml"))
    assert resolved.origin("model.target.serve") == "--set"
    assert resolved.origin("model.target.binary").startswith(f"{config}:7 (as SkillOpt's flat")


# ----------------------------------------------------------------------------- the user's model


def test_the_local_model_is_given_as_the_roles_section(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    config = tmp_path / "sub" / "so.yaml"
    config.write_text(f"_base_: {AGENTS}\nmodel:\n  target_backend: codex_exec\n  target:\n"
                      "    endpoint: unix:/run/skillgrad.sock\n    timeout: 900\n"
                      "    placement: skill\n" + ENV)
    resolved = load_config(config)
    target = _role(resolved, "target")
    assert (target["endpoint"], target["timeout"], target["placement"]) == (
        "unix:/run/skillgrad.sock", 900, "skill")  # the user's keys win
    assert resolved.origin("model.target.endpoint").startswith(f"{config}:")
    assert _agent(resolved, "target").endpoint == "unix:/run/skillgrad.sock"


@pytest.mark.parametrize(("text", "overrides", "match"), [
    ("model:\n  target_backend: codex_exec\n", (),
     r"so.yaml:\d+: model.target_backend: SkillOpt's codex_exec runs codex against its "
     r"vendor's hosted models.*--set 'model.target=\{serve: FILE\}'"),
    ("model:\n  backend: copilot\n", (SERVE,),
     r"model.backend: SkillOpt's copilot_chat.*\{serve: FILE\}.* without tools needs serve"),
    ("model:\n  target_backend: codex_exec\n  codex_exec_sandbox: full\n", (SERVE,),
     r"model.codex_exec_sandbox: Codex sandbox 'full'"),
    ("model:\n  target_backend: cursor_exec\n  cursor_exec_sandbox: sometimes\n", (),
     r"Cursor sandbox 'sometimes'"),
    ("model:\n  target_backend: codex_exec\n  codex_exec_web_search: maybe\n", (SERVE,),
     r"codex_exec_web_search: expected true or false"),
    ("model:\n  backend: copilot\n  copilot_chat_timeout: -5\n", SERVE_BOTH,
     r"copilot_chat_timeout: expected a whole number of seconds"),
    ("model:\n  optimizer_backend: claude_code_exec\n", (),
     r"'claude_code_exec' is not a optimizer backend of SkillOpt"),
    ("model:\n  target_backend: openai_compatible\n", (),  # no server named: OpenAI's, no key
     r"model.target_backend: SkillOpt's openai_compatible sends the target's calls to "
     r"https://api.openai.com/v1 unless TARGET_OPENAI_COMPATIBLE_BASE_URL"),
    ("", (SERVE,), r"model.target.serve: a skillgrad role section next to SkillOpt's"),
    ("model:\n  target_backend: codex_exec\n", ("model.target={serve: s.yaml, cli: claude}",),
     r"model.target.cli: a skillgrad role section"),
    ("model:\n  target_backend: codex_exec\n  codex_exec_sandbx: read-only\n", (SERVE,),
     r"unknown key 'model.codex_exec_sandbx'"),
    ("model:\n  target_backend: codex_exec\n", ("model.target={serve: s.yaml, serv: t}",),
     r"unknown key .model.target.serv."),
    ("model:\n  target_backend: codex_exec\n",
     ("model.target={serve: s.yaml, endpoint: 'unix:/s'}",), r"exactly one of serve"),
])
def test_what_cannot_be_honoured_is_one_line_naming_the_key(
        text: str, overrides: tuple[str, ...], match: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=match) as caught:
        _load(tmp_path, text, *overrides)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("text", "overrides"), [
    ("model: {target_backend: codex_exec}\n", (SERVE,)),
    ("model: {target_backend: claude_code_exec}\n", (SERVE,)),
    ("model: {optimizer_backend: codex_exec}\n", ("model.optimizer={serve: s.yaml}",)),
    ("model: {backend: claude}\n", SERVE_BOTH),
])
def test_the_former_refusals_are_gone(text: str, overrides: tuple[str, ...],
                                      tmp_path: Path) -> None:
    resolved = _load(tmp_path, text, *overrides)  # formerly: "runs the Codex CLI harness", ...
    assert "agent" in {_role(resolved, r)["backend"] for r in ("optimizer", "target")}


# ----------------------------------------------------------------------------- every key


def test_every_agent_key_of_skillopts_model_section_is_mapped_or_named(tmp_path: Path) -> None:
    written = {f"model.{k}" for k in yaml.safe_load(AGENTS.read_text())["model"]}
    for backends in ("codex_exec", "claude_code_exec", "copilot_exec", "cursor_exec"):
        extra = () if backends == "cursor_exec" else (SERVE,)
        resolved = _load(tmp_path, f"model:\n  target_backend: {backends}\n", *extra)
        noted = {n.key for n in resolved.notes}
        used = " ".join(resolved.origins.values())
        assert [k for k in written if k not in noted and f"SkillOpt's {k}" not in used] == []


def test_config_check_and_migrate_on_the_command_line(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "so.yaml"
    config.write_text(f"_base_: {AGENTS}\nmodel:\n  target_backend: codex_exec\n{ENV}")
    error = one_line_error(cli("config", "check", str(config), cwd=tmp_path), 2)
    assert "--set 'model.target={serve: FILE}'" in error
    out = tmp_path / "migrated.yaml"
    proc = cli("config", "migrate", str(config), "--out", str(out), "--set",
               "model.target={serve: served.yaml}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    migrated = yaml.safe_load(out.read_text())["model"]["target"]
    assert migrated["backend"] == "agent" and migrated["serve"] == str(tmp_path / "served.yaml")
    assert load_config(out).fingerprint() == load_config(
        config, ["model.target={serve: served.yaml}"]).fingerprint()
