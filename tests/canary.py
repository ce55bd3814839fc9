"""The redaction canary of the session fixtures, and where in a session it sits."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skillgrad.traces.sessions import Session

CANARY = "sk-ant-canary-0123456789abcdef"


def strings(value: Any) -> Iterator[str]:
    """Every string a session record holds, dict keys and paths included."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from strings(getattr(value, f.name))
    elif isinstance(value, (str, Path)):
        yield str(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(k)
            yield from strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from strings(v)


def planted(session: Session) -> set[str]:
    """Which kinds of field of a session hold the canary."""
    found = {"meta"} if any(CANARY in s for s in strings(session.meta)) else set()
    for turn in session.turns:
        if CANARY in turn.text:
            found.add(turn.role)
        for call in turn.tool_calls:
            found |= {"arguments"} if any(CANARY in s for s in strings(call.arguments)) else set()
            found |= {"output"} if call.output and CANARY in call.output else set()
    return found
