"""SkillOpt's flat ``model:`` section, into skillgrad's two role sections.

SkillOpt 0.2.0 (its current main) names one backend per role (``optimizer_backend``,
``target_backend``); the legacy ``model.backend`` fills a role left empty, and for the
backends that run a whole loop (``claude_chat``, ``codex``/``codex_exec``, ``copilot_chat``,
``openai_compatible``) or a target harness also one left at the default ``openai_chat``
(``scripts/train.py``, ``skillopt/engine/trainer.py``). It reads each backend's settings from a
per-role key, then the shared key, then the per-role environment variables, then the shared
ones, then its defaults; the same order is followed here (:class:`.role.Role`). The chat APIs
(``openai_chat``, ``qwen_chat``, ``minimax_chat``, ``openai_compatible``) become an
``openai_compatible`` role (:mod:`.chats`); the agent CLIs (``codex_exec``,
``claude_code_exec``, ``claude_chat``, ``copilot_chat``, ``copilot_exec``) an ``agent`` role run
offline against a local model the user names, and ``cursor_exec`` a ``command`` role
(:mod:`.agents`). An API key is read only from the environment variable SkillOpt reads for it:
a key written in the file is refused, never copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from skillgrad.skillopt import agents, chats
from skillgrad.skillopt.notes import CompatNote
from skillgrad.skillopt.role import ROLES, Role

if TYPE_CHECKING:
    from skillgrad.skillopt.work import Work

_AZURE = ("endpoint", "api_version", "api_key", "auth_mode", "ad_scope",
          "managed_identity_client_id")
_QWEN = ("base_url", "api_key", "temperature", "timeout_seconds", "max_tokens",
         "enable_thinking", "thinking_mode")
_MINIMAX = ("region", "base_url", "api_key", "model", "temperature", "max_tokens",
            "enable_thinking")
_CODEX = ("path", "sandbox", "profile", "full_auto", "reasoning_effort", "use_sdk",
          "network_access", "web_search", "approval_policy")
_CLAUDE_CODE = ("path", "profile", "use_sdk", "effort", "max_thinking_tokens")
# SkillOpt's own spellings of two Codex keys (skillopt/config.py), read after the canonical one.
_CODEX_ALIASES = {"codex_path": "path", "codex_cli_bin": "path", "codex_bin": "path",
                  "sandbox": "sandbox", "codex_sandbox": "sandbox"}
_COPILOT = "copilot_chat/copilot_exec"  # copilot_exec_path and _home serve both

# Every key of SkillOpt 0.2.0's model section (as of its current main, commit bdfdc30: the
# agent-CLI keys, the Qwen thinking modes, the MiniMax region) -> the backend that reads it
# ("" = every one). SkillOpt's openai_compatible backend has no keys: environment variables.
KEYS: dict[str, str] = {
    "backend": "", "optimizer": "", "target": "", "optimizer_backend": "",
    "target_backend": "", "reasoning_effort": "openai_chat",
    "rewrite_reasoning_effort": "openai_chat", "rewrite_max_completion_tokens": "",
    "codex_trace_to_optimizer": "codex_exec",
    **{f"codex_exec_{k}": "codex_exec" for k in _CODEX},
    **{alias: "codex_exec" for alias in _CODEX_ALIASES},
    **{f"claude_code_exec_{k}": "claude_code_exec" for k in _CLAUDE_CODE},
    "cursor_exec_path": "cursor_exec", "cursor_exec_sandbox": "cursor_exec",
    "copilot_exec_path": _COPILOT, "copilot_exec_home": _COPILOT,
    "copilot_exec_allow_all_tools": "copilot_exec",
    **{f"copilot_chat_{k}": "copilot_chat" for k in ("optimizer_model", "target_model",
                                                     "timeout")},
    **{f"{scope}azure_openai_{k}": "openai_chat" for scope in ("", "optimizer_", "target_")
       for k in _AZURE},
    **{f"azure_{k}": "openai_chat" for k in ("endpoint", "api_version", "api_key")},
    **{f"{scope}qwen_chat_{k}": "qwen_chat" for scope in ("", "optimizer_", "target_")
       for k in _QWEN},
    **{f"minimax_{k}": "minimax_chat" for k in _MINIMAX},
}
# In SkillOpt's default.yaml, dropped by its own loader (not in its key map).
DROPPED = frozenset(f"{role}_minimax_{k}" for role in ROLES for k in ("base_url", "api_key"))

_CHATS = ("openai_chat", "claude_chat", "qwen_chat", "minimax_chat", "openai_compatible",
          "copilot_chat")
ALLOWED = {"optimizer": (*_CHATS, "codex_exec"),
           "target": (*_CHATS, "codex_exec", "claude_code_exec", "cursor_exec", "copilot_exec")}
_ALIASES = {"azure": "azure_openai", "azure-openai": "azure_openai", "openai": "codex",
            "claude": "claude_chat", "anthropic": "claude_chat", "qwen": "qwen_chat",
            "minimax": "minimax_chat", "cursor": "cursor_exec", "cursor_agent": "cursor_exec",
            "copilot": "copilot_chat", "copilot_cli": "copilot_chat",
            "github_copilot": "copilot_chat", "openai_compatible_chat": "openai_compatible",
            "openai-compatible": "openai_compatible", "compat": "openai_compatible"}
# What model.backend makes of the roles (optimizer, target), and whether it also replaces an
# optimizer left at openai_chat (a target left at openai_chat is replaced by every one).
_FROM_SHARED: dict[str, tuple[str, str, bool]] = {
    "claude_chat": ("claude_chat", "claude_chat", True),
    "codex": ("codex_exec", "codex_exec", True),
    "codex_exec": ("codex_exec", "codex_exec", True),
    "copilot_chat": ("copilot_chat", "copilot_chat", True),
    "openai_compatible": ("openai_compatible", "openai_compatible", True),
    **{name: ("openai_chat", name, False) for name in (
        "claude_code_exec", "cursor_exec", "copilot_exec", "qwen_chat", "minimax_chat")},
}


def is_skillopt_key(key: str, flat: Mapping[str, Any]) -> bool:
    """A ``model.*`` key in SkillOpt's flat form (``model.target`` given as a name, or any
    key but skillgrad's two role sections)."""
    parts = key.split(".")
    if parts[1] in ROLES:  # model.target: gpt-5.5 is SkillOpt's; a section (even {}) ours
        return len(parts) == 2 and not isinstance(flat.get(key), dict)
    return True  # model.backend, model.azure_openai_endpoint, ...


def translate(work: Work) -> None:
    keys = work.keys_under("model.")
    if not any(is_skillopt_key(k, work.src) for k in keys):
        return
    chosen = {role: _backend(work, role) for role in ROLES}
    own: dict[str, list[str]] = {role: [] for role in ROLES}
    for key in (k for k in keys if not is_skillopt_key(k, work.src)):
        parts = key.split(".", 2)
        role, leaf = parts[1], parts[2] if len(parts) == 3 else ""
        if chosen[role][0] in agents.SECTION and leaf.split(".")[0] not in ("", "backend",
                                                                            "cli"):
            own[role].append(key)  # the user's own settings of a translated agent role
            continue
        raise work.refuse(key, "a skillgrad role section next to SkillOpt's flat model "
                          "keys; write the model section one way (only a role SkillOpt runs "
                          "as an agent CLI takes keys beside them: serve, endpoint, ...)")
    read: set[str] = {"model.backend", "model.optimizer", "model.target",
                      "model.optimizer_backend", "model.target_backend"}
    work.backends = {role: chosen[role][0] for role in ROLES}
    for role in ROLES:
        backend, key = chosen[role]
        read |= _write(Role(work, role, backend, key, own[role], work.backends))
    _rewrite(work, chosen["optimizer"][0], read)
    for key in keys:
        name = key.split(".", 1)[1]
        if key in read or name not in KEYS and name not in DROPPED:
            continue  # consumed; or unknown, left for the validator to name
        if work.peek(key) == "" or work.peek(key) is None:
            work.note(key, "inert", "empty: unset")
        elif name in DROPPED:
            work.note(key, "inert", "SkillOpt 0.2.0's loader drops it")
        else:
            work.note(key, "inert", f"a setting of SkillOpt's {KEYS[name]} backend that this "
                      "config does not read")
    decided = " ".join(work.origins.values())
    noted = {n.key for n in work.notes}
    for key in sorted(read):
        if work.has(key) and key not in noted and f"SkillOpt's {key}" not in decided:
            empty = work.peek(key) in ("", None)
            work.note(key, "inert", "empty: unset" if empty else "read, but another key "
                      "decides here (a per-role key, or model.backend and the role backends)")
        work.src.pop(key, None)


def _backend(work: Work, role: str) -> tuple[str, str]:
    """The role's backend and the key that decided it."""
    key = f"model.{role}_backend"
    value = str(work.peek(key) or "").strip().lower()
    value = _ALIASES.get(value, value)
    shared = str(work.peek("model.backend") or "").strip().lower()
    fill = _FROM_SHARED.get(_ALIASES.get(shared, shared))
    if not value or (value == "openai_chat" and fill is not None
                     and (role == "target" or fill[2])):
        value = "openai_chat" if fill is None else fill[0] if role == "optimizer" else fill[1]
        key = "model.backend"
    if value not in ALLOWED[role]:
        raise work.refuse(key, f"{value!r} is not a {role} backend of SkillOpt 0.2.0 "
                          f"(allowed: {', '.join(ALLOWED[role])})")
    return value, key


def _write(r: Role) -> set[str]:
    """Write role ``r``; the SkillOpt keys it read."""
    if r.backend not in agents.SECTION:
        model = chats.translate(r)
        r.work.notes.append(CompatNote(
            r.key, r.work.at(r.key), "mapped", f"SkillOpt's {r.backend}, model {model}",
            f"model.{r.role}: openai_compatible"))
        return r.read
    agents.translate(r)
    for key in r.own:  # the user's settings of the role win over the translation
        value = r.work.peek(key)
        leaf = key[len(r.prefix):]
        if isinstance(value, str) and (leaf == "serve" or leaf == "binary" and "/" in value):
            value = r.work.path(value)  # SkillOpt's convention: from the current dir
        r.work.keep(key, value)
    agents.require_brain(r)
    name, _ = r.model_name()
    kind = r.work.out[r.prefix + "backend"]
    what = f"{kind} ({agents.AGENT_CLI[r.backend]})" if kind == "agent" else kind
    r.work.notes.append(CompatNote(
        r.key, r.work.at(r.key), "mapped",
        f"SkillOpt's {r.backend}" + (f", model {name}" if name else ""),
        f"model.{r.role}: {what}"))
    return r.read


def _rewrite(work: Work, optimizer_backend: str, read: set[str]) -> None:
    tokens = "model.rewrite_max_completion_tokens"
    if work.has(tokens):
        read.add(tokens)
        work.keep(tokens, target="optimizer.rewrite_max_tokens")
    effort = "model.rewrite_reasoning_effort"
    if work.peek(effort) not in ("", None):
        read.add(effort)
        rewrites = work.peek("optimizer.skill_update_mode") in (
            "rewrite_from_suggestions", "rewrite", "suggestions", "rewrite_suggestions")
        if rewrites and optimizer_backend == "openai_chat":
            work.note(effort, "ignored", "skillgrad sends model.reasoning_effort with every "
                      "optimizer call, rewrites included")
        else:
            work.note(effort, "inert", "used only by openai_chat rewrites from suggestions")

