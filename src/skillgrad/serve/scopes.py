"""Which rollout a served call belongs to: its tag, and the stage and journal the tag names.

An agent's base URL carries the tag (``http://127.0.0.1:PORT/r/<tag>/v1``), or a request
carries it in the ``X-Skillgrad-Rollout`` header. The client layer meters each call under
the tag as its stage and, when the server records, journals it in ``<record>/<tag>/calls.jsonl``
(a folder ``--replay`` reads like a run directory). A trainer that runs agents through the
server passes its own :class:`Scopes` to map a tag to the stage and journal of its open step.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Protocol

from skillgrad.models.base import ChatModel
from skillgrad.models.client import CallJournal, ModelClient
from skillgrad.rundir import CALLS
from skillgrad.serve.wire import WireError

HEADER = "X-Skillgrad-Rollout"
UNTAGGED = "serve"  # the stage of calls that carry no tag
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_tag(tag: str) -> str:
    """``tag`` if it is a valid rollout tag (it names a stage and a folder), else a
    :class:`WireError` saying what a tag may hold."""
    if not _TAG.fullmatch(tag) or ".." in tag:
        raise WireError(f"rollout tag {tag[:40]!r}: use 1-128 letters, digits, '.', '_' or '-', "
                        "starting with a letter or digit")
    return tag


class Scopes(Protocol):
    """Where a served call is metered and journaled.

    Contract: ``model_for(tag)`` returns the model that answers a call tagged ``tag``
    (``None``: untagged), normally a client bound to the tag's stage and journal
    (:meth:`ModelClient.for_stage`), so the call is metered, budgeted, cached and journaled as
    the tag's. It is called once per request, from many threads at once, only with a tag
    :func:`check_tag` accepted, and must not call the model itself."""

    def model_for(self, tag: str | None) -> ChatModel: ...


class ClientScopes:
    """Each tag is a stage of one client; with ``record``, each has its own journal there."""

    def __init__(self, client: ModelClient, record: Path | None = None) -> None:
        self.client = client
        self.record = record
        self._journals: dict[str, CallJournal] = {}
        self._lock = threading.Lock()

    def model_for(self, tag: str | None) -> ChatModel:
        stage = tag or UNTAGGED
        return self.client.for_stage(stage, self._journal(stage))

    def _journal(self, stage: str) -> CallJournal | None:
        if self.record is None:
            return None
        with self._lock:  # one journal object per tag: it counts what it has replayed
            if stage not in self._journals:
                self._journals[stage] = CallJournal(self.record / stage / CALLS)
            return self._journals[stage]
