"""Secrets kept out of everything skillgrad writes or says.

A credential can sit in a config far from a key named like one: the password of a URL
(``http://user:PASSWORD@host/v1``), a query parameter (``?sig=...``), a custom header
(``Ocp-Apim-Subscription-Key``), a field of an extra request body. Every copy of a config
written to disk and every message that quotes a URL or a server's reply goes through this
module, so one set of rules decides what is masked:

* a header's value is kept only when its name is known to be harmless (an allow-list: a header
  nobody here has heard of may well be a key);
* any other value, and a URL's query parameter, is masked when its name reads like a
  credential (``key``, ``token``, ``secret``, ``password``, ``sig``, ``code``, ...);
* a URL's user and password are always masked;
* a value written as ``${VAR}`` (or ``Bearer ${VAR}``) names an environment variable and holds
  no secret: it is kept as written, and :func:`expand_references` reads the variable when the
  value is used.

Masking is deterministic and idempotent, so two redacted copies of one config compare equal
(resuming a run compares them, and the config's fingerprint is a hash of its redacted copy).
A known secret is scrubbed from text as written and in base64 (an HTTP Basic header that a
server echoes), wherever it sits in the encoded text.

A credential may not be written out in a URL at all (:func:`url_credential`): a config that
does so is refused in one line that names the key and says which environment variable to use.
"""

from __future__ import annotations

import base64
import functools
import logging
import os
import re
import threading
from collections.abc import Iterable
from itertools import pairwise
from typing import Any
from urllib.parse import unquote

__all__ = [
    "HARMLESS_HEADERS",
    "REDACTED",
    "RedactingFilter",
    "credentials_in_text",
    "expand_references",
    "is_secret_name",
    "masked_values",
    "no_url_credential",
    "redact",
    "redact_at",
    "redact_query",
    "redact_text",
    "redact_url",
    "url_credential",
    "url_secrets",
]

REDACTED = "***"

HARMLESS_HEADERS = frozenset({
    "accept", "accept-charset", "accept-encoding", "accept-language", "cache-control",
    "connection", "content-encoding", "content-language", "content-type", "pragma",
    "user-agent",
})
# Whole words of a name that mark its value as a credential (``max_tokens`` is not one).
SECRET_WORDS = frozenset({
    "apikey", "auth", "authorization", "bearer", "code", "cookie", "credential",
    "credentials", "jwt", "pass", "passwd", "password", "pwd", "sas", "secret", "session",
    "sig", "signature", "token",
})
# "key" alone is a credential (``?key=``), and so is a key of one of these kinds; a
# ``sort_key`` or a ``removed_key`` is not.
KEY_KINDS = frozenset({
    "access", "account", "api", "app", "auth", "client", "encryption", "license", "master",
    "private", "secret", "shared", "signing", "storage", "subscription",
})
# Endings of run-together names: accesstoken, clientsecret, subscriptionkey.
SECRET_ENDINGS = ("credential", "credentials", "passwd", "password", "secret", "signature",
                  "token", *(f"{kind}key" for kind in sorted(KEY_KINDS)))
# Shorter values are not searched for in free text: they would match ordinary words; nor
# shorter runs of a secret's base64.
MIN_SCRUBBED = 4
MIN_ENCODED = 8

_WORDS = re.compile(r"[a-z0-9]+")
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# A value that only names its secret: references, after at most an authentication scheme
# (a scheme, not any word: a word written there could be a secret).
_REFERENCES = re.compile(r"(?:(?i:basic|bearer|digest|token|apikey|api-key|key) +)?"
                         r"(?:\$\{[A-Za-z_][A-Za-z0-9_]*\})+")
_URLSAFE = str.maketrans("+/", "-_")
_FLAG = re.compile(r"(-{1,2}[A-Za-z][\w-]*)(=.*)?", re.DOTALL)
# A URL inside text: trailing punctuation belongs to the sentence, not to the URL.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,:;)\]]")


def is_secret_name(name: str) -> bool:
    """Whether a key, query parameter or flag called ``name`` holds a credential."""
    words = _WORDS.findall(name.lower())
    if words == ["key"] or any(a in KEY_KINDS and b == "key" for a, b in pairwise(words)):
        return True
    return any(w in SECRET_WORDS or w.endswith(SECRET_ENDINGS) for w in words)


def _names_headers(name: str) -> bool:
    return any(w in ("header", "headers") for w in _WORDS.findall(name.lower()))


# ----------------------------------------------------------------------------- URLs


def _split_url(url: str) -> tuple[str, str, str, str]:
    """(``scheme://``, userinfo, host and path, query and fragment), never raising."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    else:
        scheme += sep
    at = _userinfo_end(rest)
    userinfo, after = (rest[:at], rest[at + 1 :]) if at >= 0 else ("", rest)
    cut = min((i for i in (after.find("?"), after.find("#")) if i >= 0), default=len(after))
    return scheme, userinfo, after[:cut], after[cut:]


def _userinfo_end(rest: str) -> int:
    """Where the ``@`` that ends a URL's userinfo is (-1: none). Normally the last ``@``
    before the first ``/``, ``?`` or ``#``; a password with an unencoded ``/`` or ``#`` moves
    it to the last ``@`` outside the query (at worst a path with an ``@`` is masked too)."""
    end = min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))
    at = rest.rfind("@", 0, end)
    if at >= 0 or "@" not in rest:
        return at
    query, hash_ = rest.find("?"), rest.find("#")
    start = query if query >= 0 and (hash_ < 0 or query < hash_) else len(rest)
    stop = hash_ if hash_ > start else len(rest)
    return max((i for i, ch in enumerate(rest) if ch == "@" and not start <= i < stop),
               default=-1)


def redact_query(query: str) -> str:
    """A URL's query string (without ``?``) with the values of credential parameters masked."""
    params = []
    for param in query.split("&"):
        name, eq, value = param.partition("=")
        secret = eq and is_secret_name(unquote(name)) and not _only_references(unquote(value))
        params.append(f"{name}={REDACTED}" if secret else param)
    return "&".join(params)


def redact_url(url: str) -> str:
    """``url`` with its user:password and the values of credential query parameters masked."""
    scheme, userinfo, place, tail = _split_url(url)
    who = f"{REDACTED}@" if userinfo else ""
    if tail.startswith("?"):
        query, hash_, fragment = tail[1:].partition("#")
        tail = f"?{redact_query(query)}{hash_}{fragment}"
    return f"{scheme}{who}{place}{tail}"


def url_secrets(url: str) -> list[str]:
    """The secret parts of ``url`` (user, password, credential query values), as written and
    decoded: what a server that echoes its request could repeat."""
    _, userinfo, _, tail = _split_url(url)
    found = [userinfo, *userinfo.split(":", 1)] if userinfo else []
    found += [value for _, value in _query_secrets(tail)]
    return sorted({v for part in found for v in (part, unquote(part)) if v})


def _query_secrets(tail: str) -> list[tuple[str, str]]:
    """(name, value) of the credential parameters of a URL's query (``tail``: from ``?``);
    a value that only names environment variables (``${VAR}``) is none."""
    query = tail[1:].partition("#")[0] if tail.startswith("?") else ""
    found = []
    for param in query.split("&") if query else ():
        name, eq, value = param.partition("=")
        if eq and is_secret_name(unquote(name)) and not _only_references(unquote(value)):
            found.append((unquote(name), value))
    return found


def url_credential(url: str, *, query: bool = True) -> str | None:
    """The credential written out in ``url``, in words (``a user:password@``, ``a credential
    in the query (sig=)``), or ``None``; never the credential itself. ``query=False``: only a
    user:password@ counts (a URL read from the environment may carry a query token)."""
    _, userinfo, _, tail = _split_url(url)
    if userinfo:
        return "a user:password@"
    names = [name for name, _ in _query_secrets(tail)] if query else []
    return f"a credential in the query ({names[0]}=)" if names else None


def no_url_credential(value: str | None, instead: str) -> str | None:
    """``value``, a URL, unless it writes out a credential (:func:`url_credential`): then a
    ValueError saying which, and ``instead`` (the environment variable to use). The one check
    of the keys that hold a URL, and of every URL in a config (:func:`credentials_in_text`);
    the message never quotes the URL."""
    found = None if value is None else url_credential(value)
    if found is not None:
        raise ValueError(f"holds a credential ({found}); {instead}")
    return value


def credentials_in_text(text: str) -> str | None:
    """What :func:`url_credential` finds in the first URL of ``text`` that writes out a
    credential, or ``None``."""
    for match in _URL_IN_TEXT.finditer(text):
        found = url_credential(match.group(0))
        if found is not None:
            return found
    return None


# ----------------------------------------------------------------------------- text


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` (an error message, a server's reply, a log line) with every known secret value
    (``secrets``, and each value this process read through a ``${VAR}``) replaced, as written
    and in base64, and every URL in it redacted."""
    with _READ_LOCK:
        known = (*secrets, *_READ)
    forms = {f for s in known if len(s) >= MIN_SCRUBBED for f in _scrubbed_forms(s)}
    for form in sorted(forms, key=len, reverse=True):
        text = text.replace(form, REDACTED)
    return _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)


@functools.lru_cache(maxsize=256)
def _scrubbed_forms(secret: str) -> tuple[str, ...]:
    """``secret`` and the runs of base64 (standard and URL-safe) that encode it wherever it
    sits in an encoded text: an HTTP Basic header encodes ``user:password``, so the password
    starts at any of the three offsets of a base64 group. Each run holds only the characters
    made from the secret's bits alone."""
    raw = secret.encode()
    forms = {secret}
    for skip in range(3):
        encoded = base64.b64encode(bytes(skip) + raw).decode()
        core = encoded[-(-8 * skip // 6): 8 * (skip + len(raw)) // 6]
        if len(core) >= MIN_ENCODED:
            forms |= {core, core.translate(_URLSAFE)}
    return tuple(forms)


# ----------------------------------------------------------------------------- ${VAR}


# The values read through ${VAR} (a whole URL aside): secrets, scrubbed from any text.
_READ: set[str] = set()
_READ_LOCK = threading.Lock()


def expand_references(text: str) -> str:
    """``text`` with every ``${VAR}`` replaced by that environment variable's value (its
    surrounding white space dropped). Each value but a whole URL is remembered as a secret:
    :func:`redact_text` scrubs it from every text from then on.

    Raises:
        ValueError: a variable is unset or empty; the message names it, never a value.
    """

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        found = os.environ.get(name)
        if found is None:
            raise ValueError(f"${{{name}}} is not set in the environment")
        if not found.strip():
            raise ValueError(f"${{{name}}} is empty in the environment")
        if "://" not in found:
            with _READ_LOCK:
                _READ.add(found.strip())
        return found.strip()

    return _REFERENCE.sub(value, text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts every record's message (URLs with credentials, known
    secret values). Put it on a handler, so that third-party loggers (``httpx`` logs each
    request's full URL) are covered too."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = tuple(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact_text(message, self.secrets)
        if clean != message:
            record.msg, record.args = clean, None
        return True


# ----------------------------------------------------------------------------- config trees


def redact(data: Any, name: str = "") -> Any:
    """A copy of ``data`` (a config tree, or the value of a key called ``name``) with every
    credential masked: values under secret names, headers not known to be harmless, URLs'
    passwords and credential query parameters, secret flags of an ``argv``."""
    if name.lower().endswith("_env"):  # names an environment variable, holds no secret
        return data
    if is_secret_name(name) and not _only_references(data):
        return REDACTED
    if isinstance(data, dict):
        if _names_headers(name):
            return {k: _header_value(str(k), v) for k, v in data.items()}
        return {k: redact(v, str(k)) for k, v in data.items()}
    if isinstance(data, list):
        items = [redact(v, name) for v in data]
        return _redact_flags(items) if name == "argv" else items
    if isinstance(data, str):
        return redact_text(data)
    return data


def redact_at(path: Iterable[str], value: Any) -> Any:
    """``value`` redacted as it would be at the dotted ``path`` of a config tree (to show the
    value of a key in an error message)."""
    *parents, leaf = [str(p) for p in path] or [""]
    if parents and _names_headers(parents[-1]):
        return _header_value(leaf, value)
    if any(is_secret_name(p) for p in parents if not p.lower().endswith("_env")):
        return REDACTED
    return redact(value, leaf)


def masked_values(data: Any, name: str = "") -> list[str]:
    """The values in ``data`` that :func:`redact` masks, as text: what an error message that
    might quote them is scrubbed of."""
    return _masked(data, redact(data, name))


def _masked(original: Any, redacted: Any) -> list[str]:
    if isinstance(original, dict) and isinstance(redacted, dict):
        return [s for k, v in original.items() for s in _masked(v, redacted.get(k))]
    if isinstance(original, list) and isinstance(redacted, list):
        return [s for a, b in zip(original, redacted, strict=True) for s in _masked(a, b)]
    return [] if original == redacted else _leaves(original)


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _leaves(v)]
    if isinstance(value, list):
        return [s for v in value for s in _leaves(v)]
    return [str(value)]


def _header_value(name: str, value: Any) -> Any:
    return value if name.lower() in HARMLESS_HEADERS or _only_references(value) else REDACTED


def _only_references(value: Any) -> bool:
    """A value made only of ``${VAR}`` references (after at most a scheme: ``Bearer ${VAR}``)
    names variables and holds no secret."""
    return isinstance(value, str) and _REFERENCES.fullmatch(value) is not None


def _redact_flags(argv: list[Any]) -> list[Any]:
    """``--api-key VALUE`` and ``--token=VALUE`` with the value masked."""
    out = list(argv)
    for i, arg in enumerate(argv):
        match = _FLAG.fullmatch(arg) if isinstance(arg, str) else None
        if match is None or not is_secret_name(match.group(1)):
            continue
        if match.group(2) is not None:
            out[i] = f"{match.group(1)}={REDACTED}"
        elif i + 1 < len(argv):
            out[i + 1] = REDACTED
    return out
