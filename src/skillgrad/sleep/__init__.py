"""Sleep: a coding agent's skills improve overnight from the user's own sessions.

Harvest reads the sessions local agents wrote (:mod:`skillgrad.sleep.harvest`), redacted
before anything is stored or sent (:mod:`skillgrad.sleep.scrub`); mining turns recurring,
checkable requests into tasks; the tasks are an environment, and consolidation is a
:class:`~skillgrad.trainer.Trainer` run behind the same gate; the result is staged for review
and adopted with a backup.
"""
