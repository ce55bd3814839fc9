"""An agent target's trajectory, read back from the session log the CLI itself wrote, with
the same adapters Sleep harvests with (:mod:`skillgrad.traces`): its turns, each tool call
with its output and exit code, the files it changed, and whether it loaded the skill.

A skill counts as loaded when the session records the agent's skill tool naming it (Claude
Code's ``Skill``, Gemini's ``activate_skill``, OpenCode's ``skill``, Copilot's skill event,
Codex's ``$name``), or when one of its tool calls opens the placed ``SKILL.md`` (an agent may
read it with a file or shell tool: Codex does).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillgrad.errors import TransientModelError
from skillgrad.models.agent_clis import AgentCLI
from skillgrad.models.messages import AgentTrace, Message, Usage
from skillgrad.traces.base import SessionFormatError
from skillgrad.traces.registry import adapters
from skillgrad.traces.sessions import Session, ToolCall

_OUTPUT_LIMIT = 4000  # characters of one tool output kept in the trajectory


def read_trace(preset: AgentCLI, home: Path, env: Mapping[str, str], skill: str,
               loadable: bool) -> AgentTrace:
    """The trace of the one request a CLI ran under ``home``. ``loadable``: the skill was
    placed as an agent skill, so whether it was loaded is the agent's choice and is read."""
    sessions = _sessions(preset, home, env)
    if not sessions:
        raise TransientModelError(f"{preset.binary}: wrote no session log under its HOME, so "
                                  "its trajectory cannot be read")
    messages: list[Message] = []
    for session in sessions:
        messages += _messages(session)
    loaded = None
    if loadable:
        loaded = any(_named(s, skill) for s in sessions) or any(
            _opens(call, skill) for s in sessions for call in s.tool_calls)
    changed = tuple(dict.fromkeys(f for s in sessions for f in s.files_changed))
    return AgentTrace(agent=preset.agent, messages=tuple(messages), skill_loaded=loaded,
                      files_changed=changed)


def _sessions(preset: AgentCLI, home: Path, env: Mapping[str, str]) -> list[Session]:
    adapter = adapters([preset.agent])[0]
    found: list[Session] = []
    for store in adapter.stores(env, home):
        if not store.exists():
            continue
        for source in adapter.sources(store):
            try:
                found += [s for s in adapter.read(source) if not s.sidechain]
            except SessionFormatError as exc:
                raise TransientModelError(f"{preset.binary}: its session log {source.name} "
                                          f"could not be read: {exc}") from None
    unique = {s.id: s for s in found}
    return sorted(unique.values(), key=lambda s: (s.started is None, s.started or 0, s.id))


def _messages(session: Session) -> list[Message]:
    """The session after its first request, as chat messages: the agent's turns with their
    tool calls, each call's result as a ``tool`` message, later user turns as they were."""
    out: list[Message] = []
    first = True
    for turn in session.turns:
        if turn.role == "user":
            if not first:
                out.append(Message(role="user", content=turn.text))
            first = False
            continue
        calls = [{"id": c.id, "type": "function", "function": {
            "name": c.name, "arguments": c.arguments if isinstance(c.arguments, str)
            else json.dumps(c.arguments, ensure_ascii=False)}} for c in turn.tool_calls]
        out.append(Message(role="assistant", content=turn.text, tool_calls=calls or None))
        out += [Message(role="tool", tool_call_id=c.id, name=c.name, content=_result(c))
                for c in turn.tool_calls]
    return out


def _result(call: ToolCall) -> str:
    if call.output is None:
        return "(no result was recorded)"
    text = call.output if len(call.output) <= _OUTPUT_LIMIT else (
        call.output[:_OUTPUT_LIMIT] + f"\n... ({len(call.output) - _OUTPUT_LIMIT} more "
        "characters)")
    head = f"[exit code {call.exit_code}]\n" if call.exit_code is not None else (
        "[error]\n" if call.is_error else "")
    return head + text


def _named(session: Session, skill: str) -> bool:
    return any(s.rpartition(":")[2] == skill for s in session.skills)


def _opens(call: ToolCall, skill: str) -> bool:
    args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
    return f"{skill}/SKILL.md" in args


def trace_reply(trace: AgentTrace) -> str | None:
    """The agent's last words in its trace, if it said any."""
    for message in reversed(trace.messages):
        if message.role == "assistant" and message.text().strip():
            return str(message.text()).strip()
    return None


def reply_from_stdout(cli: str, stdout: str) -> str:
    """The final answer as the CLI printed it (where its session log has no last words)."""
    events = [_json(line) for line in stdout.splitlines()]
    events = [e for e in events if isinstance(e, dict)]
    if cli == "codex":
        texts = [e["item"].get("text", "") for e in events if e.get("type") == "item.completed"
                 and isinstance(e.get("item"), dict) and e["item"].get("type") == "agent_message"]
        return texts[-1].strip() if texts else ""
    whole = _json(stdout)
    if isinstance(whole, dict):
        for key in ("result", "response"):  # claude -p --output-format json; gemini's json
            if isinstance(whole.get(key), str):
                return str(whole[key]).strip()
    return stdout.strip()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def served_usage(calls: list[dict[str, Any]]) -> tuple[int, Usage | None]:
    """(model calls, tokens) of one request's served calls, from the served model's journal;
    no calls: (0, None)."""
    if not calls:
        return 0, None
    total = Usage()
    for call in calls:
        usage = (call.get("completion") or {}).get("usage") or {}
        total = total + Usage(prompt_tokens=int(usage.get("prompt_tokens", 0)),
                              completion_tokens=int(usage.get("completion_tokens", 0)))
    return len(calls), total
