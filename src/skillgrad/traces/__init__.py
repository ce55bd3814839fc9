"""Agent session logs read into typed sessions: one adapter per agent CLI (Claude Code, Codex,
Copilot, OpenCode, Gemini CLI), named in :mod:`.registry` and imported only when asked for.

One reader for two purposes: Sleep harvests the user's own sessions with it, and an agent
target (:mod:`skillgrad.models.agent`) reads back the session of each rollout, so that the
trajectory reflection sees is the one the agent really had.
"""
