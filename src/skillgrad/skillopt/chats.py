"""SkillOpt's chat-API backends, as skillgrad's ``openai_compatible`` backend.

As SkillOpt's current main has them (commit bdfdc30: ``skillopt/model/azure_openai.py``,
``qwen_backend.py``, ``minimax_backend.py``, ``openai_compatible_backend.py``, ``common.py``,
``scripts/train.py``, ``skillopt/engine/trainer.py``):

* ``openai_chat``: Azure OpenAI deployments (auth ``azure_cli``, the default, ``api_key`` or
  ``managed_identity``) or, with auth ``openai_compatible``, any OpenAI-compatible server at
  the endpoint; no temperature is sent and the limit goes as ``max_completion_tokens``;
  ``reasoning_effort`` is sent;
* ``qwen_chat``: an OpenAI-compatible server (vLLM, SGLang) at ``qwen_chat_base_url``. Its
  thinking mode is three-state: ``server_default`` sends no ``chat_template_kwargs``,
  ``enabled`` and ``disabled`` send ``enable_thinking`` true or false
  (``extra_body.chat_template_kwargs`` here). The legacy ``enable_thinking`` means ``enabled``
  when true and ``server_default`` when false; given beside a mode it must agree with it;
* ``minimax_chat`` (either role): MiniMax's OpenAI-compatible API, one deployment for both
  roles (``minimax_model`` when MiniMax is the target, else the target's model), at the URL of
  ``minimax_region`` (``global_en``, ``cn_zh``) unless a base URL is given. Thinking is the
  top-level ``thinking: {type: adaptive | disabled}`` (``extra_body.thinking``), always
  ``adaptive`` for the MiniMax-M2 models;
* ``openai_compatible``: any OpenAI-compatible server, set by environment variables alone
  (``[ROLE_]OPENAI_COMPATIBLE_BASE_URL``, ``_API_KEY``, ``_TEMPERATURE``, ``_MAX_TOKENS``,
  ``_TIMEOUT_SECONDS``; OpenAI's API by default), the role's model sent as named.

An empty thinking mode (``""``, as SkillOpt's default.yaml writes all three) is unset here, as
SkillOpt's docs mean it: a per-role key falls back to the shared one, then to the legacy key,
then to the environment. SkillOpt's trainer passes an empty per-role key over the others; where
that sends something else, a note on the key says what.
"""

from __future__ import annotations

from typing import Any

from skillgrad.errors import ConfigError
from skillgrad.skillopt.role import Role, truthy

# Model names SkillOpt swaps for a backend's own default, and those defaults.
SENTINELS = ("gpt-5.4", "gpt-5.5")
_DEFAULT_MODEL = {"qwen_chat": "Qwen/Qwen3.5-4B", "minimax_chat": "MiniMax-M3",
                  "claude_chat": "claude-sonnet-4-6", "claude_code_exec": "claude-sonnet-4-6",
                  "cursor_exec": "composer-2.5", "copilot_exec": ""}
# What SkillOpt's openai_compatible backend asks for when the role's model is empty.
_EMPTY_MODEL = {"openai_compatible": "gpt-4o-mini"}
# Models SkillOpt sends to OpenAI's Responses API (name or name-<suffix>).
_RESPONSES = ("gpt-5.3-codex", "gpt-5.1-codex", "gpt-5.2-codex", "gpt-5-codex", "codex-mini",
              "gpt-5.4-pro")
_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")
_AUTH = {"openai_compatible": "compat", "compat": "compat", "openai": "compat",
         "api_key": "api_key", "key": "api_key", "managed_identity": "managed_identity",
         "aad": "managed_identity", "azure_ad": "managed_identity", "azure_cli": "azure_cli"}
# Qwen's thinking modes, as SkillOpt spells them (after lower-casing, "-" read as "_").
_THINKING = {**dict.fromkeys(("", "server_default", "unset", "auto", "none", "null"),
                             "server_default"),
             **dict.fromkeys(("1", "true", "yes", "on", "enabled", "enable"), "enabled"),
             **dict.fromkeys(("0", "false", "no", "off", "disabled", "disable"), "disabled")}
_WIRE = {"server_default": "no chat_template_kwargs", "enabled": "enable_thinking: true",
         "disabled": "enable_thinking: false"}
MINIMAX_URLS = {"global_en": "https://api.minimax.io/v1", "cn_zh": "https://api.minimaxi.com/v1"}
OPENAI_URL = "https://api.openai.com/v1"


def translate(r: Role) -> str:
    """Write role ``r`` (a SkillOpt chat backend) as an ``openai_compatible`` section; the
    model it asks for."""
    r.assign("backend", ("openai_compatible", r.key))
    model = _minimax_model(r) if r.backend == "minimax_chat" else _model(r)
    {"openai_chat": _openai_chat, "qwen_chat": _qwen_chat, "minimax_chat": _minimax_chat,
     "openai_compatible": _openai_compatible}[r.backend](r, model)
    return model


def skillopt_target_model(r: Role) -> tuple[str, str]:
    """The target's model name as SkillOpt's train.py leaves it (its OpenAI default swapped
    for the target backend's own), and where it came from."""
    name, key = r.model_name() if r.role == "target" else _named(r, "target")
    backend = r.backends["target"]
    if backend in _DEFAULT_MODEL and name in SENTINELS:
        return _DEFAULT_MODEL[backend], f"SkillOpt's default model of {backend}"
    return name, key


def _named(r: Role, role: str) -> tuple[str, str]:
    key = f"model.{role}"
    r.read.add(key)
    value = r.work.peek(key)
    return ("", "") if isinstance(value, dict) else (str(value or "").strip(), key)


def _model(r: Role) -> str:
    name, key = r.model_name()
    default = _DEFAULT_MODEL.get(r.backend)
    if default and (not name or name in SENTINELS):
        r.assign("model", (default, f"SkillOpt's default model of {r.backend}"))
        return default
    if not name and r.backend in _EMPTY_MODEL:
        name, key = _EMPTY_MODEL[r.backend], f"SkillOpt's default model of {r.backend}"
    if not name:
        raise r.work.refuse(f"model.{r.role}", f"the {r.role} model is not named")
    r.assign("model", (name, key))
    return name


# ----------------------------------------------------------------------------- openai_chat


def _openai_chat(r: Role, model: str) -> None:
    role, up = r.role, r.role.upper()

    def azure(item: str, default: Any = None, legacy: bool = False) -> tuple[Any, str]:
        names = (f"{role}_azure_openai_{item}", f"azure_openai_{item}",
                 *((f"azure_{item}",) if legacy else ()))
        env = (f"{up}_AZURE_OPENAI_{item.upper()}", f"AZURE_OPENAI_{up}_{item.upper()}",
               f"AZURE_OPENAI_{item.upper()}")
        return r.setting(names, env, default)

    if any(model == m or model.startswith(m + "-") for m in _RESPONSES):
        raise r.work.refuse(f"model.{role}", f"{model!r} is served through OpenAI's "
                            "Responses API, which skillgrad does not speak")
    r.no_key_in_file(f"{role}_azure_openai_api_key", "azure_openai_api_key", "azure_api_key")
    endpoint = azure("endpoint", legacy=True)
    if endpoint[0] is None:
        raise r.work.refuse(
            f"model.{role}_azure_openai_endpoint",
            f"no endpoint for the {role}: set it (or model.azure_openai_endpoint), or export "
            f"{up}_AZURE_OPENAI_ENDPOINT or AZURE_OPENAI_ENDPOINT")
    mode_value, mode_source = azure("auth_mode", "azure_cli")
    mode = _AUTH.get(str(mode_value).strip().lower())
    if mode is None:
        raise ConfigError(f"{r.where(mode_source)}: Azure OpenAI auth mode {mode_value!r} "
                          f"(allowed: {', '.join(_AUTH)})")
    key_env = r.environ(f"{up}_AZURE_OPENAI_API_KEY", f"AZURE_OPENAI_{up}_API_KEY",
                        "AZURE_OPENAI_API_KEY")
    key_name = key_env[1][1:] if key_env else "AZURE_OPENAI_API_KEY"
    if mode == "compat":
        r.assign("base_url", endpoint)
        if key_env:
            r.assign("api_key_env", (key_name, key_env[1]))
    else:
        r.assign("azure_endpoint", endpoint)
        r.assign("azure_api_version", azure("api_version", "2024-12-01-preview", legacy=True))
        r.assign("azure_login", (mode, mode_source))
        if mode == "api_key":
            r.assign("api_key_env", (key_name, key_env[1] if key_env else
                                     "SkillOpt's shared key variable"))
        else:
            r.assign("azure_ad_scope",
                     azure("ad_scope", "https://cognitiveservices.azure.com/.default"))
        client = azure("managed_identity_client_id")
        if mode == "managed_identity" and client[0] is not None:
            r.assign("azure_managed_identity_client_id", client)
    r.assign("send_temperature", (False, "SkillOpt's openai_chat sends none"))
    r.assign("max_tokens_field", ("max_completion_tokens", "SkillOpt's openai_chat"))
    effort = r.config("reasoning_effort")
    if effort is not None:
        value = str(effort[0]).strip().lower()
        if value not in _EFFORTS:
            raise r.work.refuse(effort[1], f"{value!r} is not a reasoning effort the "
                                f"OpenAI API takes (allowed: {', '.join(_EFFORTS)})")
        r.assign("reasoning_effort", (value, effort[1]))


# ----------------------------------------------------------------------------- qwen_chat


def _qwen_chat(r: Role, model: str) -> None:
    role, up = r.role, r.role.upper()

    def qwen(item: str, default: Any) -> tuple[Any, str]:
        return r.setting((f"{role}_qwen_chat_{item}", f"qwen_chat_{item}"),
                         (f"{up}_QWEN_CHAT_{item.upper()}", f"QWEN_CHAT_{item.upper()}"),
                         default)

    r.no_key_in_file(f"{role}_qwen_chat_api_key", "qwen_chat_api_key")
    r.assign("base_url", qwen("base_url", "http://localhost:8000/v1"))
    key_env = r.environ(f"{up}_QWEN_CHAT_API_KEY", "QWEN_CHAT_API_KEY")
    if key_env:
        r.assign("api_key_env", (key_env[1][1:], key_env[1]))
    # A temperature key that is present but empty omits the temperature, as in SkillOpt.
    temperature = r.present(f"{role}_qwen_chat_temperature", "qwen_chat_temperature")
    r.sampling(temperature or qwen("temperature", 0.7), qwen("max_tokens", 8000))
    r.assign("timeout", r.number(qwen("timeout_seconds", 300), float))
    wide = r.environ(f"{up}_QWEN_CHAT_USE_MAX_COMPLETION_TOKENS",
                     "QWEN_CHAT_USE_MAX_COMPLETION_TOKENS")
    if wide and truthy(wide[0]):
        r.assign("max_tokens_field", ("max_completion_tokens", wide[1]))
    _qwen_thinking(r)


def _qwen_thinking(r: Role) -> None:
    modes = (f"{r.role}_qwen_chat_thinking_mode", "qwen_chat_thinking_mode")
    legacies = (f"{r.role}_qwen_chat_enable_thinking", "qwen_chat_enable_thinking")
    mode, source = _thinking(r, r.config(*modes), r.config(*legacies), strict=True)
    theirs, culprit = _thinking(r, r.given(*modes), r.given(*legacies), strict=False)
    if mode != "server_default":
        r.assign("extra_body", ({"chat_template_kwargs": {"enable_thinking":
                                                          mode == "enabled"}}, source))
    elif source.startswith("model."):
        r.note(source, "mapped", "server_default: the server's chat template decides",
               f"model.{r.role}.extra_body without chat_template_kwargs")
    if theirs == mode:
        return
    ours = f"skillgrad reads \"\" as unset, as SkillOpt's docs mean it, and sends {_WIRE[mode]}"
    if theirs == "stop":
        r.note(culprit, "differs", "SkillOpt stops on this empty thinking mode: it reads it "
               f"as server_default, which the legacy enable_thinking contradicts; {ours}")
    else:
        r.note(culprit, "differs", "SkillOpt's trainer passes this empty key over "
               f"{source.removeprefix('model.')} and sends {_WIRE[theirs]}; {ours}")


def _thinking(r: Role, mode: tuple[Any, str] | None, legacy: tuple[Any, str] | None, *,
              strict: bool) -> tuple[str, str]:
    """The role's thinking mode from the keys given, then the environment, and its source;
    ``stop`` where SkillOpt would refuse two keys that disagree (``strict``: an error)."""
    implied = None if legacy is None else "enabled" if truthy(legacy[0]) else "server_default"
    if mode is not None:
        parsed = _parse_mode(r, mode)
        if implied is not None and implied != parsed:
            if not strict:
                return "stop", mode[1]
            assert legacy is not None
            raise ConfigError(f"{r.where(mode[1])}: {mode[1]}: {parsed} disagrees with "
                              f"{legacy[1]}: {legacy[0]!r} (that is {implied}), as SkillOpt "
                              "refuses too; set only the thinking mode")
        return parsed, mode[1]
    if legacy is not None:
        return str(implied), legacy[1]
    up = r.role.upper()
    for name in (f"{up}_QWEN_CHAT_THINKING_MODE", "QWEN_CHAT_THINKING_MODE"):
        found = r.environ(name)
        if found is not None:
            return _parse_mode(r, found), found[1]
    old = r.environ(f"{up}_QWEN_CHAT_ENABLE_THINKING", "QWEN_CHAT_ENABLE_THINKING")
    if old is not None:
        return ("enabled" if truthy(old[0]) else "server_default"), old[1]
    return "server_default", "SkillOpt's default"


def _parse_mode(r: Role, found: tuple[Any, str]) -> str:
    value, source = found
    if isinstance(value, bool):
        return "enabled" if value else "disabled"
    text = str(value if value is not None else "").strip().lower().replace("-", "_")
    if text not in _THINKING:
        raise ConfigError(f"{r.where(source)}: {source}: Qwen thinking mode {value!r} "
                          "(allowed: server_default, enabled, disabled)")
    return _THINKING[text]


# ----------------------------------------------------------------------------- minimax_chat


def _minimax_model(r: Role) -> str:
    """SkillOpt's one MiniMax deployment: ``minimax_model`` when MiniMax is the target, else
    the target's model (an empty one: MiniMax-M3)."""
    chosen = r.config("minimax_model")
    if r.backends["target"] == "minimax_chat":
        found = (str(chosen[0]), chosen[1]) if chosen else skillopt_target_model(r)
        if r.role == "optimizer":
            _optimizer_name_unread(r)
    else:  # the optimizer, beside another target
        if chosen:
            r.note(chosen[1], "inert", "SkillOpt applies it only when MiniMax is the target")
        found = skillopt_target_model(r)
        if found[0] and (found[0] in SENTINELS or found[1].startswith("SkillOpt's")):
            raise r.work.refuse(r.key, "SkillOpt's minimax_chat optimizer asks MiniMax for "
                                "its one MiniMax deployment, here the target's model "
                                f"({found[0]!r}), which MiniMax does not serve; make the "
                                "target minimax_chat too (both then use minimax_model)")
        _optimizer_name_unread(r)
    if not found[0]:
        found = (_DEFAULT_MODEL["minimax_chat"], "SkillOpt's default model of minimax_chat")
    r.assign("model", found)
    return found[0]


def _optimizer_name_unread(r: Role) -> None:
    name, key = r.model_name()
    if name:
        r.note(key, "inert", "SkillOpt's minimax_chat optimizer asks for the one MiniMax "
               "deployment (the target's), not this")


def _minimax_chat(r: Role, model: str) -> None:
    def minimax(item: str, default: Any) -> tuple[Any, str]:
        # SkillOpt passes a config value that is not null through, empty or not.
        return (r.given(f"minimax_{item}") or r.environ(f"MINIMAX_{item.upper()}")
                or (default, "SkillOpt's default"))

    r.no_key_in_file("minimax_api_key")
    region = r.config("minimax_region") or r.environ("MINIMAX_REGION")
    name = "global_en"
    if region is not None:
        name = str(region[0]).strip().lower().replace("-", "_")
        if name not in MINIMAX_URLS:
            raise ConfigError(f"{r.where(region[1])}: {region[1]}: MiniMax region "
                              f"{region[0]!r} (allowed: {', '.join(MINIMAX_URLS)})")
    url = r.config("minimax_base_url") or r.environ("MINIMAX_BASE_URL")
    if url is not None:
        r.assign("base_url", url)
        if region is not None and region[1].startswith("model."):
            r.note(region[1], "inert", f"{url[1].removeprefix('model.')} names the URL")
    else:
        r.assign("base_url", (MINIMAX_URLS[name], region[1] if region else
                              "SkillOpt's default region global_en"))
    if r.environ("MINIMAX_API_KEY"):
        r.assign("api_key_env", ("MINIMAX_API_KEY", "$MINIMAX_API_KEY"))
    r.sampling(minimax("temperature", 0.7), minimax("max_tokens", 8000))
    timeout = r.environ("MINIMAX_TIMEOUT_SECONDS") or (300, "SkillOpt's default")
    r.assign("timeout", r.number(timeout, float))
    thinking = minimax("enable_thinking", False)
    if model.startswith("MiniMax-M2"):  # these think whatever is asked
        r.assign("extra_body", ({"thinking": {"type": "adaptive"}},
                                "SkillOpt's minimax_chat: the MiniMax-M2 models always think"))
        if thinking[1].startswith("model.") and not truthy(thinking[0]):
            r.note(thinking[1], "inert", f"{model} always thinks: SkillOpt sends adaptive")
    else:
        kind = "adaptive" if truthy(thinking[0]) else "disabled"
        r.assign("extra_body", ({"thinking": {"type": kind}}, thinking[1]))


# ----------------------------------------------------------------------------- openai_compatible


def _openai_compatible(r: Role, model: str) -> None:
    up = r.role.upper()

    def env(item: str) -> tuple[str, str] | None:
        return r.environ(f"{up}_OPENAI_COMPATIBLE_{item}", f"OPENAI_COMPATIBLE_{item}")

    url, key = env("BASE_URL"), env("API_KEY")
    if url is None and key is None:
        raise r.work.refuse(
            r.key, f"SkillOpt's openai_compatible sends the {r.role}'s calls to {OPENAI_URL} "
            f"unless {up}_OPENAI_COMPATIBLE_BASE_URL or OPENAI_COMPATIBLE_BASE_URL names a "
            "server, and OpenAI wants a key: export your server's URL (a local one needs no "
            f"key), or {up}_OPENAI_COMPATIBLE_API_KEY or OPENAI_COMPATIBLE_API_KEY")
    r.assign("base_url", url or (OPENAI_URL, "SkillOpt's default"))
    if key is not None:
        r.assign("api_key_env", (key[1][1:], key[1]))
    r.sampling(env("TEMPERATURE") or ("", "SkillOpt's openai_compatible: none unless "
                                          "OPENAI_COMPATIBLE_TEMPERATURE is set"),
               env("MAX_TOKENS") or (8000, "SkillOpt's default"))
    r.assign("timeout", r.number(env("TIMEOUT_SECONDS") or (300, "SkillOpt's default"), float))
