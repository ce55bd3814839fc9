"""The coding-agent CLIs skillgrad runs headless and offline, and how: the arguments of a
one-request run, the environment and config files that point each at a loopback endpoint
(``skillgrad serve``) with its updates and telemetry off, its shell tool, and where it writes
its session log (what :mod:`skillgrad.traces` reads).

Placeholders: ``{prompt}`` in the arguments is the request; ``{url}`` (the endpoint's base URL,
``http://127.0.0.1:PORT[/r/TAG]``) and ``{home}`` (the run's HOME) in the environment and the
files. Checked with Codex 0.169.1, Claude Code 2.1.197, OpenCode 1.18.33, Copilot CLI 1.0.102
and Gemini CLI 0.61.0 (``tests/test_serve_agents.py``). A CLI still tries to reach its vendor
now and then: run it in a network namespace of its own, loopback only (``unshare -rn``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The embedded model's window serving an agent: the CLI's first prompt (its instructions and
# tools, as measured by bench/agent_prompts.py with Qwen2.5's template), plus room for the
# skill, the request and the turns, in steps of 4,096 tokens, at most the model's trained
# window. Each context's KV cache costs about 28 KB a token (0.9 GB at 32,768).
TURN_ROOM = 16384
MODEL_WINDOW = 32768


@dataclass(frozen=True)
class AgentCLI:
    """One agent CLI: ``binary`` run with ``argv``; ``env`` and ``files`` (paths under HOME)
    point it at the endpoint; ``sessions``: globs under HOME of the files its sessions are kept
    in; ``shell_tool`` runs a command given as its ``shell_key`` argument (plus
    ``shell_extra``)."""

    binary: str
    argv: tuple[str, ...]
    sessions: tuple[str, ...]
    shell_tool: str
    agent: str = ""  # its name in skillgrad.agentskills.AGENTS (session adapters, memory files)
    skills: str = ""  # the folder under HOME it reads user skills from (<skills>/<name>/SKILL.md)
    memory: str = ""  # the user memory file under HOME it puts into every request
    shell_key: str = "command"
    shell_extra: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)
    first_prompt: int = 0  # tokens of its first request (Qwen2.5 template, tools included)

    @property
    def window(self) -> int:
        """The ``n_ctx`` an embedded model serving this CLI gets: room for its first prompt
        and the turns after it (:data:`TURN_ROOM`), at most :data:`MODEL_WINDOW`."""
        return min(MODEL_WINDOW, -(-(self.first_prompt + TURN_ROOM) // 4096) * 4096)

    @property
    def least_window(self) -> int:
        """The smallest ``n_ctx`` that holds its first prompt with a skill and a request."""
        return self.first_prompt + 2048

    def command(self, binary: str, prompt: str) -> list[str]:
        """The command line of one headless run of ``prompt``."""
        return [binary, *(a.replace("{prompt}", prompt) for a in self.argv)]

    def shell_call(self, command: str) -> dict[str, Any]:
        """A call of the CLI's shell tool running ``command``, as a model would make it."""
        return {"name": self.shell_tool,
                "arguments": {self.shell_key: command, **self.shell_extra}}

    def prepare(self, home: Path, url: str) -> dict[str, str]:
        """Write the CLI's config files under ``home`` for the endpoint ``url``; the
        environment variables to run it with (``HOME`` included)."""
        for relative, text in self.files.items():
            path = home / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.replace("{url}", url), encoding="utf-8")
        env = {k: v.replace("{url}", url).replace("{home}", str(home))
               for k, v in self.env.items()}
        return {"HOME": str(home), **env}

    def session_files(self, home: Path) -> list[Path]:
        """The session files a run under ``home`` left."""
        return [p for pattern in self.sessions for p in sorted(home.glob(pattern))
                if p.is_file()]


_OPENAI_COMPATIBLE = {  # OpenCode's provider of an OpenAI-compatible endpoint
    "npm": "@ai-sdk/openai-compatible", "name": "skillgrad",
    "options": {"baseURL": "{url}/v1", "apiKey": "dummy", "timeout": 3600000},
    "models": {"skillgrad": {"name": "skillgrad"}}}

AGENT_CLIS: dict[str, AgentCLI] = {
    "codex": AgentCLI(
        "codex", ("exec", "--skip-git-repo-check", "--json", "{prompt}"),
        sessions=("codex/sessions/*/*/*/rollout-*.jsonl",),
        shell_tool="exec_command", shell_key="cmd",
        agent="codex", skills="codex/skills", memory="codex/AGENTS.md",
        env={"CODEX_HOME": "{home}/codex", "SKILLGRAD_KEY": "dummy"},
        files={"codex/config.toml": (
            'model = "skillgrad"\nmodel_provider = "skillgrad"\n'
            "check_for_update_on_startup = false\n[model_providers.skillgrad]\n"
            'name = "skillgrad"\nbase_url = "{url}/v1"\nenv_key = "SKILLGRAD_KEY"\n'
            'wire_api = "responses"\nstream_idle_timeout_ms = 3600000\n'
            "request_max_retries = 0\nstream_max_retries = 0\n[analytics]\nenabled = false\n"
            "[feedback]\nenabled = false\n")},
        first_prompt=8_370),
    "claude": AgentCLI(
        "claude", ("-p", "{prompt}", "--output-format", "json", "--allowedTools", "Bash"),
        sessions=("claude/projects/*/*.jsonl",),
        shell_tool="Bash", shell_extra={"description": "List files"},
        agent="claude_code", skills="claude/skills", memory="claude/CLAUDE.md",
        env={"ANTHROPIC_BASE_URL": "{url}", "ANTHROPIC_API_KEY": "dummy",
             "CLAUDE_CONFIG_DIR": "{home}/claude", "DISABLE_AUTOUPDATER": "1",
             "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
             "DISABLE_ERROR_REPORTING": "1", "API_TIMEOUT_MS": "3600000"},
        first_prompt=18_884),
    "gemini": AgentCLI(
        "gemini", ("-p", "{prompt}", "-m", "skillgrad", "--approval-mode", "yolo",
                   "--output-format", "json"),
        sessions=(".gemini/tmp/*/chats/session-*.jsonl", ".gemini/tmp/*/.project_root",
                  ".gemini/projects.json"),
        shell_tool="run_shell_command",
        agent="gemini", skills=".gemini/skills", memory=".gemini/GEMINI.md",
        env={"GOOGLE_GEMINI_BASE_URL": "{url}", "GEMINI_API_KEY": "dummy",
             "GEMINI_CLI_TRUST_WORKSPACE": "true"},
        files={".gemini/settings.json": json.dumps({
            "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "security": {"auth": {"selectedType": "gemini-api-key"}}})},
        first_prompt=11_124),
    "opencode": AgentCLI(
        "opencode", ("run", "{prompt}", "-m", "skillgrad/skillgrad"),
        sessions=(".local/share/opencode/opencode.db", ".local/share/opencode/storage/**/*"),
        shell_tool="bash", shell_extra={"description": "List files"},
        agent="opencode", skills=".config/opencode/skills", memory=".config/opencode/AGENTS.md",
        env={"XDG_CONFIG_HOME": "{home}/.config", "XDG_DATA_HOME": "{home}/.local/share",
             "XDG_CACHE_HOME": "{home}/.cache", "XDG_STATE_HOME": "{home}/.local/state",
             "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1"},
        files={".config/opencode/opencode.json": json.dumps({
            "provider": {"skillgrad": _OPENAI_COMPATIBLE},
            "model": "skillgrad/skillgrad", "autoupdate": False, "share": "disabled"})},
        first_prompt=7_216),
    "copilot": AgentCLI(
        "copilot", ("-p", "{prompt}", "--allow-all-tools"),
        sessions=(".copilot/session-state/*/events.jsonl",),
        shell_tool="bash", shell_extra={"description": "List files"},
        agent="copilot", skills=".copilot/skills", memory=".copilot/copilot-instructions.md",
        env={"COPILOT_HOME": "{home}/.copilot", "COPILOT_OFFLINE": "true",
             "COPILOT_PROVIDER_BASE_URL": "{url}/v1", "COPILOT_PROVIDER_API_KEY": "dummy",
             "COPILOT_MODEL": "skillgrad"},
        first_prompt=11_060),
}
