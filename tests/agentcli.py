"""Where the tests find the real agent CLIs: ``SKILLGRAD_AGENT_CLIS`` lists folders
(``:``-separated) holding the ``codex``, ``claude``, ``gemini``, ``opencode`` and ``copilot``
executables (``npm install --prefix DIR @openai/codex`` puts one in ``DIR/node_modules/.bin``).
A CLI not found there is skipped, or fails where ``SKILLGRAD_REQUIRE_AGENT_CLIS=1`` (.ci/run)
says the CLIs must run."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

FOLDERS = os.environ.get("SKILLGRAD_AGENT_CLIS", "")


def binary(name: str) -> str:
    """The CLI's executable, or a skip (a failure where the CLIs are required)."""
    required = os.environ.get("SKILLGRAD_REQUIRE_AGENT_CLIS") == "1"
    missing = pytest.fail if required else pytest.skip
    if not FOLDERS:
        missing("SKILLGRAD_AGENT_CLIS is not set (real agent CLIs run only when asked)")
    found = shutil.which(name, path=FOLDERS)
    if found is None:
        missing(f"{name} is not in SKILLGRAD_AGENT_CLIS")
    if subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0:
        missing("unshare -rn is not allowed here")
    assert found is not None
    return found
