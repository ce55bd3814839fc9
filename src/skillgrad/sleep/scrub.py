"""Secrets out of session text before anything is stored or sent to a model.

Every string a harvested session holds goes through :meth:`Scrubber.text`: API keys of the
common providers, bearer and basic credentials, JWTs, PEM private keys, ``Authorization``
headers, assignments and JSON pairs whose key names a credential, and URLs with a password or
a secret query parameter. Users add their own patterns (``sleep.redact_patterns``)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from skillgrad.errors import ConfigError
from skillgrad.redact import REDACTED, is_secret_name, redact_text

# Provider keys and tokens, by their published prefixes.
PATTERNS: tuple[str, ...] = (
    r"sk-ant-[A-Za-z0-9_\-]{10,}",  # Anthropic
    r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}",  # OpenAI
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key ids
    r"gh[pousr]_[A-Za-z0-9]{30,}", r"github_pat_[A-Za-z0-9_]{40,}",  # GitHub
    r"glpat-[A-Za-z0-9_\-]{20,}",  # GitLab
    r"xox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack
    r"AIza[0-9A-Za-z_\-]{35}",  # Google
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"sk_(?:live|test)_[A-Za-z0-9]{16,}", r"rk_(?:live|test)_[A-Za-z0-9]{16,}",  # Stripe
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWTs
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
)
_HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization|x-api-key|api-key|cookie)(\s*[:=]\s*)"
                     r"(\"?)([^\"\n\r]+)")
_BEARER = re.compile(r"(?i)\b(bearer|basic|token)\s+([A-Za-z0-9._~+/=\-]{12,})")
# name = value, name: value, "name": "value", --name value, export NAME=value
# A name and its value joined by ":" or "=" (NAME=value, "name": "value"), or by a space after
# a flag (--token x): in prose a space joins ordinary words ("the code passes"). Whether the
# name holds a credential is is_secret_name's call (cached: a log repeats its names).
_ASSIGN = re.compile(r"(?P<name>[\"']?\b[A-Za-z_][A-Za-z0-9_.\-]*[\"']?)(?P<sep>\s*[:=]\s*)"
                     r"(?P<quote>[\"']?)(?P<value>[^\s\"',;}]{4,})")
_FLAG_VALUE = re.compile(r"(?P<name>(?<![\w-])--?[A-Za-z][A-Za-z0-9_\-]*)(?P<sep>\s+)"
                         r"(?P<quote>[\"']?)(?P<value>[^\s\"',;}\-][^\s\"',;}]{3,})")
_secret_name = lru_cache(maxsize=4096)(is_secret_name)


class Scrubber:
    """Redacts secrets from text; ``extra``: the user's own regular expressions."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        compiled = []
        for pattern in [*PATTERNS, *extra]:
            try:
                compiled.append(re.compile(pattern))
            except re.error as exc:
                raise ConfigError(f"sleep.redact_patterns: {pattern!r} is not a regular "
                                  f"expression ({exc})") from None
        self._patterns = compiled

    def text(self, text: str) -> str:
        if not text:
            return text
        for pattern in self._patterns:
            text = pattern.sub(REDACTED, text)
        text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3)}{REDACTED}", text)
        text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
        text = _ASSIGN.sub(_assignment, text)
        text = _FLAG_VALUE.sub(_assignment, text)
        return redact_text(text)  # URLs with passwords or secret query parameters

    def value(self, value: Any, name: str = "") -> Any:
        """Any JSON-like value: strings scrubbed, and whatever sits under a credential-named
        key masked whole."""
        if name and is_secret_name(name) and value not in (None, "", [], {}):
            return REDACTED
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.value(v, str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(v) for v in value)
        return value

    def record(self, record: Any) -> Any:
        """A session record (a dataclass of :mod:`skillgrad.traces.sessions`), every field
        scrubbed, nested records included."""
        if hasattr(record, "__dataclass_fields__"):
            changes = {}
            for f in fields(record):
                current = getattr(record, f.name)
                scrubbed = self.record(current)
                if scrubbed is not current:
                    changes[f.name] = scrubbed
            return replace(record, **changes) if changes else record
        if isinstance(record, tuple):
            return tuple(self.record(r) for r in record)
        if isinstance(record, Path):
            scrubbed = self.text(str(record))
            return record if scrubbed == str(record) else Path(scrubbed)
        if isinstance(record, (str, dict, list)):
            return self.value(record)
        return record


def _assignment(match: re.Match[str]) -> str:
    name = match.group("name").strip("\"'").lstrip("-")
    if not _secret_name(name) or match.group("value") == REDACTED:
        return match.group(0)
    return (f"{match.group('name')}{match.group('sep')}{match.group('quote')}"
            f"{REDACTED}")
