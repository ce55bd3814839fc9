"""Typed errors.

Two families matter to the training loop:

* :class:`SkillgradError` subclasses are *user-facing*: bad config, bad data, a run directory
  that belongs to another config. The CLI prints their message as one line and exits non-zero.
* :class:`ModelError` subclasses are *infrastructure* failures of a model call. They are never
  turned into a score: transient ones are retried by the model client, and whatever still
  fails stops the run (the checkpoint stays valid, so the run can be resumed).
"""

from __future__ import annotations

from typing import Any


class SkillgradError(Exception):
    """An error whose message is meant for the user as a single line."""


class ConfigError(SkillgradError):
    """A configuration file, key or value is invalid."""


class DataError(SkillgradError):
    """A data file, split or skill file is missing or malformed."""


class RunDirError(SkillgradError):
    """A run directory cannot be used (different config, corrupt checkpoint, in use by another
    process, not a folder this process can write)."""


class RunStopped(SkillgradError):
    """The run stopped cleanly before finishing (for example a budget ran out).

    The checkpoint is consistent; running the same command again resumes.
    """


class ExecutionError(SkillgradError):
    """Rollouts could not run where the config sends them (a Ray cluster that cannot be reached,
    a worker that died): an infrastructure failure, never a score. The checkpoint stays valid,
    so the run can be resumed."""


class ModelError(SkillgradError):
    """A model call failed for a reason that is not the model's answer."""


class TransientModelError(ModelError):
    """A failure worth retrying: rate limit, 5xx, timeout, dropped connection.

    ``kind`` names the failure for the attempt counts of the summary (``rate_limit``,
    ``server_error``, ``timeout``, ``connection``, ``bad_reply``, ``bogus_truncation``);
    a backend that does not say is counted under ``transient``."""

    def __init__(self, message: str, retry_after: float | None = None,
                 kind: str = "transient") -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.kind = kind

    def __reduce__(self) -> tuple[Any, ...]:  # pickled whole (it crosses to Ray workers)
        return (type(self), (str(self), self.retry_after, self.kind))


class FatalModelError(ModelError):
    """A failure that retrying will not fix: bad credentials, bad request, unknown model."""


class ScriptExhausted(FatalModelError):
    """A scripted model was asked something its script does not answer."""


class AnswersPending(RunStopped):
    """Model calls are waiting for answers that someone else writes (the handoff backend).

    ``waiting`` maps each handoff folder to the ids of the calls it waits for.
    """

    def __init__(self, waiting: dict[str, list[str]]) -> None:
        self.waiting = {folder: sorted(set(ids)) for folder, ids in waiting.items()}
        n = sum(len(ids) for ids in self.waiting.values())
        where = "; ".join(
            f"{folder}/prompts.md (list: {folder}/pending.json; answers go in "
            f"{folder}/answers/<id>.txt)" for folder in self.waiting
        )
        super().__init__(f"{n} model call{'s' if n != 1 else ''} waiting for answers: {where}")

    def __reduce__(self) -> tuple[Any, ...]:  # pickled whole (it crosses to Ray workers)
        return (type(self), (self.waiting,))

    @classmethod
    def combine(cls, errors: list[AnswersPending]) -> AnswersPending:
        waiting: dict[str, list[str]] = {}
        for err in errors:
            for folder, ids in err.waiting.items():
                waiting.setdefault(folder, []).extend(ids)
        return cls(waiting)
