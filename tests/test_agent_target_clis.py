"""The ``agent`` target with the real CLIs, offline: each runs in a network namespace of its
own whose only way out is a relay to the served model's private socket.

The served model is scripted. Placed as an agent skill, the skill reaches the model only as
its name and description; the model then loads it with the CLI's own skill tool (Codex: by
reading its SKILL.md with the shell), sees the body in the tool's result, and answers. The
trace the backend reads back from the CLI's own session log must hold the load, the tool call
and its output; placed in the memory file, the body must be in the very first request.

Behind an explicit flag: ``SKILLGRAD_AGENT_CLIS`` names where the CLIs are (tests/agentcli.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import agentcli
import pytest

from skillgrad.models.agent import AgentBackend, AgentOptions
from skillgrad.models.agent_clis import AGENT_CLIS
from skillgrad.models.messages import ChatRequest, Message

NAME = "count-files"
DESCRIPTION = "Use this skill whenever you are asked how many files a folder holds."
BODY = "- Count the files with `ls -1 | wc -l` (rule 7731).\n"
ANSWER = "The folder holds 2 files."
SKILL = f"---\nname: {NAME}\ndescription: {DESCRIPTION}\n---\n\n{BODY}"
QUESTION = "How many files are in this folder?"


def _load_call(cli: str) -> dict[str, Any]:
    """How a model loads the skill in each CLI: its skill tool, or (Codex) a shell read."""
    return {"claude": {"name": "Skill", "arguments": {"skill": NAME}},
            "gemini": {"name": "activate_skill", "arguments": {"name": NAME}},
            "opencode": {"name": "skill", "arguments": {"name": NAME}},
            "copilot": {"name": "skill", "arguments": {"skill": NAME}},
            }.get(cli) or AGENT_CLIS[cli].shell_call(f'cat "$CODEX_HOME/skills/{NAME}/SKILL.md"')


def _backend(tmp_path: Path, cli: str, placement: str, load: bool) -> Any:
    listed = {"tool_calls": [_load_call(cli)]} if load else "I answer without the skill."
    serve = tmp_path / f"serve-{placement}.yaml"
    serve.write_text(json.dumps({"model": {"target": {
        "backend": "scripted",
        "rules": [{"when": "title generator", "reply": "Files"},
                  {"when": "rule 7731", "reply": ANSWER},
                  {"when": DESCRIPTION, "reply": listed}],
        "default": "The skill was not listed."}}}))
    binary = agentcli.binary(AGENT_CLIS[cli].binary)
    options = AgentOptions(cli=cli, binary=binary, serve=serve, placement=placement,
                           timeout=170)  # type: ignore[arg-type]
    return AgentBackend.create(options, tmp_path)


def _ask(model: Any, work: Path) -> Any:
    work.mkdir(exist_ok=True)
    for file in ("a.txt", "b.txt"):
        (work / file).write_text("x")
    return model.complete(ChatRequest(messages=(Message(role="system", content=SKILL),
                                                Message(role="user", content=QUESTION)),
                                      workspace=str(work)))


@pytest.mark.parametrize("cli", sorted(AGENT_CLIS))
def test_a_real_agent_loads_its_skill_and_the_trace_says_so(cli: str, tmp_path: Path) -> None:
    model = _backend(tmp_path, cli, "skill", load=True)
    try:
        done = _ask(model, tmp_path / "work")
    finally:
        model.close()
    assert done.text == ANSWER, done  # answered only once the body was in its prompt
    trace = done.trace
    assert trace is not None and trace.skill_loaded is True
    calls = [c for m in trace.messages for c in m.tool_calls or ()]
    assert [c["function"]["name"] for c in calls] == [_load_call(cli)["name"]]
    assert [m.role for m in trace.messages] == ["assistant", "tool", "assistant"]
    assert trace.calls >= 2 and done.usage.prompt_tokens > 0
    assert not (tmp_path / "work" / ".agents").exists()  # placed under its HOME, not the work


@pytest.mark.parametrize("cli", sorted(AGENT_CLIS))
def test_in_the_memory_file_the_body_reaches_the_first_request(cli: str, tmp_path: Path) -> None:
    model = _backend(tmp_path, cli, "instructions", load=False)
    try:
        done = _ask(model, tmp_path / "work")
    finally:
        model.close()
    assert done.text == ANSWER, done
    assert done.trace is not None and done.trace.skill_loaded is None


def test_a_skill_the_agent_does_not_load_is_reported_unloaded(tmp_path: Path) -> None:
    model = _backend(tmp_path, "claude", "skill", load=False)
    try:
        done = _ask(model, tmp_path / "work")
    finally:
        model.close()
    assert done.text == "I answer without the skill."
    assert done.trace is not None and done.trace.skill_loaded is False


def test_an_agent_cli_as_the_optimizer_answers_in_json_without_tools(tmp_path: Path) -> None:
    serve = tmp_path / "serve.yaml"
    serve.write_text(json.dumps({"model": {"target": {
        "backend": "scripted",
        "rules": [{"when": ["Reply with one JSON object only", "\"edits\""],
                   "reply": {"edits": [{"op": "append", "content": "- Count with ls."}]}}],
        "default": "no schema seen"}}}))
    options = AgentOptions(cli="claude", binary=agentcli.binary("claude"), serve=serve,
                           role="optimizer", tools=False, timeout=170)
    model = AgentBackend.create(options, tmp_path)
    schema = {"type": "object", "properties": {"edits": {"type": "array"}},
              "required": ["edits"]}
    try:
        done = model.complete(ChatRequest(messages=(
            Message(role="system", content="You improve skills."),
            Message(role="user", content="Propose one edit.")), json_schema=schema))
        served = [c for tag in model.served.tags() for c in model.served.journal(tag)]
    finally:
        model.close()
    assert json.loads(done.text) == {"edits": [{"op": "append", "content": "- Count with ls."}]}
    assert served and all(not c["request"].get("tools") for c in served)
    assert done.trace is not None and done.trace.skill_loaded is None


def test_a_real_agent_reads_a_reference_file_of_its_skill_package(tmp_path: Path) -> None:
    """A skill package, exported as an Agent Skills folder and read back, is placed as that
    folder: the agent loads SKILL.md, which sends it to references/count.md, and reads that
    file where the CLI keeps the skill."""
    from skillgrad.export import write_export
    from skillgrad.package import join_package, read_folder

    body = "- Count the files as references/count.md says (rule 7731).\n"
    trained = join_package(body, {"references/count.md": "Count with `ls -1 | wc -l` (rule "
                                                         "9913).\n"})
    write_export(trained, "skill-folder", tmp_path / "exported", name=NAME,
                 description=DESCRIPTION)
    skill = read_folder(tmp_path / "exported" / NAME)  # the folder an agent would be given
    assert (tmp_path / "exported" / NAME / "references" / "count.md").is_file()
    codex = AGENT_CLIS["codex"]
    serve = tmp_path / "serve.yaml"
    serve.write_text(json.dumps({"model": {"target": {
        "backend": "scripted",
        "rules": [{"when": "rule 9913", "reply": ANSWER},
                  {"when": "rule 7731", "reply": {"tool_calls": [codex.shell_call(
                      f'cat "$CODEX_HOME/skills/{NAME}/references/count.md"')]}},
                  {"when": DESCRIPTION, "reply": {"tool_calls": [_load_call("codex")]}}],
        "default": "The skill was not listed."}}}))
    options = AgentOptions(cli="codex", binary=agentcli.binary(codex.binary), serve=serve,
                           placement="skill", timeout=170)  # type: ignore[arg-type]
    model = AgentBackend.create(options, tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    try:
        done = model.complete(ChatRequest(messages=(Message(role="system", content=skill),
                                                    Message(role="user", content=QUESTION)),
                                          workspace=str(work)))
    finally:
        model.close()
    assert done.text == ANSWER, done  # only the reference file holds rule 9913
    assert done.trace is not None and done.trace.skill_loaded is True
    outputs = [m.text() for m in done.trace.messages if m.role == "tool"]
    assert any("rule 9913" in o for o in outputs), outputs
