"""SkillOpt's flat ``model:`` section, into skillgrad's two role sections.

SkillOpt 0.2.0 names one backend per role (``optimizer_backend``, ``target_backend``; the
legacy ``backend`` only fills an empty one) and reads each backend's settings from a per-role
key, then the shared key, then the per-role environment variables, then the shared ones, then
its defaults (``skillopt/model/azure_openai.py``, ``qwen_backend.py``, ``minimax_backend.py``,
``scripts/train.py``). The same order is followed here, and the result is an
``openai_compatible`` role:

* ``openai_chat``: Azure OpenAI deployments (auth ``azure_cli``, the default, ``api_key`` or
  ``managed_identity``) or, with auth ``openai_compatible``, any OpenAI-compatible server at
  the endpoint; no temperature is sent and the limit goes as ``max_completion_tokens``, as
  SkillOpt does; ``reasoning_effort`` is sent;
* ``qwen_chat``: an OpenAI-compatible server (vLLM) at ``qwen_chat_base_url``;
* ``minimax_chat`` (target): MiniMax's OpenAI-compatible API.

An API key is read only from the environment variable SkillOpt reads for it: a key written in
the file is refused, never copied. SkillOpt's CLI harnesses (``claude_chat``, ``codex_exec``,
``claude_code_exec``) are not reproduced; the ``command`` backend runs such CLIs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from skillgrad.errors import ConfigError
from skillgrad.skillopt.notes import CompatNote

if TYPE_CHECKING:
    from skillgrad.skillopt.work import Work

ROLES = ("optimizer", "target")
_AZURE = ("endpoint", "api_version", "api_key", "auth_mode", "ad_scope",
          "managed_identity_client_id")
_QWEN = ("base_url", "api_key", "temperature", "timeout_seconds", "max_tokens",
         "enable_thinking")
_MINIMAX = ("base_url", "api_key", "model", "temperature", "max_tokens", "enable_thinking")
_CODEX = ("path", "sandbox", "profile", "full_auto", "reasoning_effort", "use_sdk",
          "network_access", "web_search", "approval_policy")
_CLAUDE_CODE = ("path", "profile", "use_sdk", "effort", "max_thinking_tokens")

# Every key of SkillOpt 0.2.0's model section -> the backend that reads it ("" = every one).
KEYS: dict[str, str] = {
    "backend": "", "optimizer": "", "target": "", "optimizer_backend": "",
    "target_backend": "", "reasoning_effort": "openai_chat",
    "rewrite_reasoning_effort": "openai_chat", "rewrite_max_completion_tokens": "",
    "codex_trace_to_optimizer": "codex_exec",
    **{f"codex_exec_{k}": "codex_exec" for k in _CODEX},
    **{f"claude_code_exec_{k}": "claude_code_exec" for k in _CLAUDE_CODE},
    **{f"{scope}azure_openai_{k}": "openai_chat" for scope in ("", "optimizer_", "target_")
       for k in _AZURE},
    **{f"azure_{k}": "openai_chat" for k in ("endpoint", "api_version", "api_key")},
    **{f"{scope}qwen_chat_{k}": "qwen_chat" for scope in ("", "optimizer_", "target_")
       for k in _QWEN},
    **{f"minimax_{k}": "minimax_chat" for k in _MINIMAX},
}
# In SkillOpt's default.yaml, dropped by its own loader (not in its key map).
DROPPED = frozenset(f"{role}_minimax_{k}" for role in ROLES for k in ("base_url", "api_key"))

ALLOWED = {"optimizer": ("openai_chat", "claude_chat", "qwen_chat", "minimax_chat"),
           "target": ("openai_chat", "claude_chat", "qwen_chat", "minimax_chat", "codex_exec",
                      "claude_code_exec")}
_ALIASES = {"azure": "azure_openai", "azure-openai": "azure_openai", "openai": "codex",
            "claude": "claude_chat", "anthropic": "claude_chat", "qwen": "qwen_chat",
            "minimax": "minimax_chat"}
# What an empty role backend becomes, from the legacy model.backend (optimizer, target).
_FROM_SHARED = {"claude_chat": ("claude_chat", "claude_chat"),
                "codex": ("openai_chat", "codex_exec"), "codex_exec": ("openai_chat", "codex_exec"),
                "claude_code_exec": ("openai_chat", "claude_code_exec"),
                "qwen_chat": ("openai_chat", "qwen_chat")}
# Model names SkillOpt swaps for a backend's own default.
_SENTINELS = ("gpt-5.4", "gpt-5.5")
_DEFAULT_MODEL = {"qwen_chat": "Qwen/Qwen3.5-4B", "minimax_chat": "MiniMax-M2.7"}
# Models SkillOpt sends to OpenAI's Responses API (name or name-<suffix>).
_RESPONSES = ("gpt-5.3-codex", "gpt-5.1-codex", "gpt-5.2-codex", "gpt-5-codex", "codex-mini",
              "gpt-5.4-pro")
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_AUTH = {"openai_compatible": "compat", "compat": "compat", "openai": "compat",
         "api_key": "api_key", "key": "api_key", "managed_identity": "managed_identity",
         "aad": "managed_identity", "azure_ad": "managed_identity", "azure_cli": "azure_cli"}
_HARNESS = {"claude_chat": "the Claude CLI (claude -p)", "codex_exec": "the Codex CLI harness",
            "claude_code_exec": "the Claude Code harness"}


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
    nested = [k for k in keys if not is_skillopt_key(k, work.src)]
    if nested:
        raise work.refuse(nested[0], "a skillgrad role section next to SkillOpt's flat model "
                          "keys; write the model section one way")
    chosen = {role: _backend(work, role) for role in ROLES}
    read: set[str] = {"model.backend", "model.optimizer", "model.target",
                      "model.optimizer_backend", "model.target_backend"}
    for role in ROLES:
        read |= _Role(work, role, chosen[role]).write()
    _rewrite(work, chosen["optimizer"], read)
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
            work.note(key, "inert", "read, but another key decides here (a per-role key, or "
                      "the role backends over model.backend)")
        work.src.pop(key, None)


def _backend(work: Work, role: str) -> str:
    key = f"model.{role}_backend"
    value = str(work.peek(key) or "").strip().lower()
    if not value:
        shared = str(work.peek("model.backend") or "").strip().lower()
        shared = _ALIASES.get(shared, shared)
        value = _FROM_SHARED.get(shared, ("openai_chat", "openai_chat"))[ROLES.index(role)]
        key = "model.backend"
    value = _ALIASES.get(value, value)
    if value not in ALLOWED[role]:
        raise work.refuse(key, f"{value!r} is not a {role} backend of SkillOpt 0.2.0 "
                          f"(allowed: {', '.join(ALLOWED[role])})")
    if value in _HARNESS:
        raise work.refuse(key, f"{value!r} runs {_HARNESS[value]}, which skillgrad does not "
                          f"reproduce; give model.{role} as a skillgrad section instead "
                          "(backend: command runs such a CLI, see docs/models.md)")
    if role == "optimizer" and value == "minimax_chat":
        raise work.refuse(key, "SkillOpt 0.2.0 accepts minimax_chat for the optimizer but "
                          "sends its calls to Azure OpenAI; say which you mean: openai_chat, "
                          "or a skillgrad model.optimizer section for MiniMax")
    return value


class _Role:
    """One role's settings, looked up in SkillOpt's order."""

    def __init__(self, work: Work, role: str, backend: str) -> None:
        self.work, self.role, self.backend = work, role, backend
        self.prefix = f"model.{role}."
        self.read: set[str] = set()

    # ---------------------------------------------------------------- lookup

    def config(self, *names: str) -> tuple[Any, str] | None:
        """The first non-empty value among config keys ``model.<name>``."""
        found = None
        for name in names:
            key = f"model.{name}"
            if self.work.has(key):
                self.read.add(key)
                value = self.work.peek(key)
                if found is None and value not in ("", None):
                    found = (value, key)
        return found

    def present(self, *names: str) -> tuple[Any, str] | None:
        """The value of the first config key ``model.<name>`` that is given at all."""
        for name in names:
            key = f"model.{name}"
            if self.work.has(key):
                self.read.add(key)
                return self.work.peek(key), key
        return None

    def environ(self, *names: str) -> tuple[str, str] | None:
        for name in names:
            value = self.work.environ.get(name, "")
            if value.strip():
                return value.strip(), f"${name}"
        return None

    def setting(self, names: tuple[str, ...], env: tuple[str, ...], default: Any) -> tuple[Any, str]:
        return (self.config(*names) or self.environ(*env)
                or (default, "SkillOpt's default"))

    def assign(self, key: str, found: tuple[Any, str]) -> None:
        value, source = found
        if source.startswith("model."):
            self.work.out[self.prefix + key] = value
            self.work.origins[self.prefix + key] = self.work.at(source) + f" (as SkillOpt's {source})"
            self.work.where[self.prefix + key] = self.work.origins[self.prefix + key]
        else:
            self.work.derive(self.prefix + key, value, source)

    def no_key_in_file(self, *names: str) -> None:
        found = self.config(*names)
        if found is not None:
            raise self.work.refuse(found[1], "skillgrad reads API keys only from environment "
                                   "variables and never writes them out: export it and set "
                                   "this key to \"\"")

    # ---------------------------------------------------------------- roles

    def write(self) -> set[str]:
        self.assign("backend", ("openai_compatible", f"model.{self.role}_backend"))
        model = self._model()
        getattr(self, f"_{self.backend}")(model)
        self.work.notes.append(CompatNote(
            f"model.{self.role}_backend", self.work.at(f"model.{self.role}_backend"), "mapped",
            f"SkillOpt's {self.backend}, model {model}", f"model.{self.role}: openai_compatible"))
        return self.read

    def _model(self) -> str:
        key = f"model.{self.role}"
        self.read.add(key)
        name = str(self.work.peek(key) or "")
        default = _DEFAULT_MODEL.get(self.backend)
        if self.backend == "minimax_chat":
            chosen = self.config("minimax_model")
            if chosen is not None:
                self.assign("model", (str(chosen[0]), chosen[1]))
                return str(chosen[0])
        if default and (not name or name in _SENTINELS):
            self.assign("model", (default, f"SkillOpt's default model of {self.backend}"))
            return default
        if not name:
            raise self.work.refuse(key, f"the {self.role} model is not named")
        self.assign("model", (name, key))
        return name

    def _openai_chat(self, model: str) -> None:
        r, up = self.role, self.role.upper()

        def azure(item: str, default: Any = None, legacy: bool = False) -> tuple[Any, str]:
            names = (f"{r}_azure_openai_{item}", f"azure_openai_{item}",
                     *((f"azure_{item}",) if legacy else ()))
            env = (f"{up}_AZURE_OPENAI_{item.upper()}", f"AZURE_OPENAI_{up}_{item.upper()}",
                   f"AZURE_OPENAI_{item.upper()}")
            return self.setting(names, env, default)

        if any(model == m or model.startswith(m + "-") for m in _RESPONSES):
            raise self.work.refuse(f"model.{r}", f"{model!r} is served through OpenAI's "
                                   "Responses API, which skillgrad does not speak")
        self.no_key_in_file(f"{r}_azure_openai_api_key", "azure_openai_api_key", "azure_api_key")
        endpoint = azure("endpoint", legacy=True)
        if endpoint[0] is None:
            raise self.work.refuse(
                f"model.{r}_azure_openai_endpoint",
                f"no endpoint for the {r}: set it (or model.azure_openai_endpoint), or export "
                f"{up}_AZURE_OPENAI_ENDPOINT or AZURE_OPENAI_ENDPOINT")
        mode_value, mode_source = azure("auth_mode", "azure_cli")
        mode = _AUTH.get(str(mode_value).strip().lower())
        if mode is None:
            where = mode_source if mode_source.startswith("$") else self.work.at(mode_source)
            raise ConfigError(f"{where}: Azure OpenAI auth mode {mode_value!r} (allowed: "
                              f"{', '.join(_AUTH)})")
        key_env = self.environ(f"{up}_AZURE_OPENAI_API_KEY", f"AZURE_OPENAI_{up}_API_KEY",
                               "AZURE_OPENAI_API_KEY")
        key_name = key_env[1][1:] if key_env else "AZURE_OPENAI_API_KEY"
        if mode == "compat":
            self.assign("base_url", endpoint)
            if key_env:
                self.assign("api_key_env", (key_name, key_env[1]))
        else:
            self.assign("azure_endpoint", endpoint)
            self.assign("azure_api_version", azure("api_version", "2024-12-01-preview", legacy=True))
            self.assign("azure_login", (mode, mode_source))
            if mode == "api_key":
                self.assign("api_key_env", (key_name, key_env[1] if key_env else
                                         "SkillOpt's shared key variable"))
            else:
                self.assign("azure_ad_scope",
                         azure("ad_scope", "https://cognitiveservices.azure.com/.default"))
            client = azure("managed_identity_client_id")
            if mode == "managed_identity" and client[0] is not None:
                self.assign("azure_managed_identity_client_id", client)
        self.assign("send_temperature", (False, "SkillOpt's openai_chat sends none"))
        self.assign("max_tokens_field", ("max_completion_tokens", "SkillOpt's openai_chat"))
        effort = self.config("reasoning_effort")
        if effort is not None:
            value = str(effort[0]).strip().lower()
            if value not in _EFFORTS:
                raise self.work.refuse(effort[1], f"{value!r} is not a reasoning effort the "
                                       f"OpenAI API takes (allowed: {', '.join(_EFFORTS)})")
            self.assign("reasoning_effort", (value, effort[1]))

    def _qwen_chat(self, model: str) -> None:
        r, up = self.role, self.role.upper()

        def qwen(item: str, default: Any) -> tuple[Any, str]:
            return self.setting((f"{r}_qwen_chat_{item}", f"qwen_chat_{item}"),
                                (f"{up}_QWEN_CHAT_{item.upper()}", f"QWEN_CHAT_{item.upper()}"),
                                default)

        self.no_key_in_file(f"{r}_qwen_chat_api_key", "qwen_chat_api_key")
        self.assign("base_url", qwen("base_url", "http://localhost:8000/v1"))
        key_env = self.environ(f"{up}_QWEN_CHAT_API_KEY", "QWEN_CHAT_API_KEY")
        if key_env:
            self.assign("api_key_env", (key_env[1][1:], key_env[1]))
        # A temperature key that is present but empty omits the temperature, as in SkillOpt.
        temperature = self.present(f"{r}_qwen_chat_temperature", "qwen_chat_temperature")
        self._sampling(temperature or qwen("temperature", 0.7), qwen("max_tokens", 8000))
        self.assign("timeout", self._number(qwen("timeout_seconds", 300), float))
        thinking = qwen("enable_thinking", False)
        if _truthy(thinking[0]):
            self.assign("extra_body", ({"chat_template_kwargs": {"enable_thinking": True}},
                                    thinking[1]))

    def _minimax_chat(self, model: str) -> None:
        def minimax(item: str, default: Any) -> tuple[Any, str]:
            # SkillOpt passes a present config value through, empty or not.
            key = f"model.minimax_{item}"
            if self.work.has(key):
                self.read.add(key)
                return self.work.peek(key), key
            return self.environ(f"MINIMAX_{item.upper()}") or (default, "SkillOpt's default")

        self.no_key_in_file("minimax_api_key")
        url = self.config("minimax_base_url") or self.environ("MINIMAX_BASE_URL") or (
            "https://api.minimax.io/v1", "SkillOpt's default")
        self.assign("base_url", url)
        if self.environ("MINIMAX_API_KEY"):
            self.assign("api_key_env", ("MINIMAX_API_KEY", "$MINIMAX_API_KEY"))
        self._sampling(minimax("temperature", 0.7), minimax("max_tokens", 8000))
        timeout = self.environ("MINIMAX_TIMEOUT_SECONDS") or (300, "SkillOpt's default")
        self.assign("timeout", self._number(timeout, float))
        thinking = minimax("enable_thinking", False)
        self.assign("extra_body", ({"chat_template_kwargs": {"enable_thinking":
                                                          _truthy(thinking[0])}}, thinking[1]))

    def _sampling(self, temperature: tuple[Any, str], cap: tuple[Any, str]) -> None:
        if temperature[0] in ("", None):
            self.assign("send_temperature", (False, temperature[1]))
        else:
            self.assign("temperature", self._number(temperature, float))
        self.assign("max_tokens_cap", self._number(cap, int))

    def _number(self, found: tuple[Any, str], kind: type) -> tuple[Any, str]:
        value, source = found
        try:
            return kind(value), source
        except (TypeError, ValueError):
            where = source if source.startswith("$") else self.work.at(source)
            raise ConfigError(f"{where}: {source}: expected a number (got {value!r})") from None


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


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
