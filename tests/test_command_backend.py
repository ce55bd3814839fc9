"""The ``command`` backend: an agent CLI as the target, played here by small Python scripts."""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import toy_config

from skillgrad import registry
from skillgrad.config import load_config
from skillgrad.errors import ConfigError, FatalModelError, TransientModelError
from skillgrad.models.base import ChatModel
from skillgrad.models.command import CommandBackend, CommandModel, CommandOptions
from skillgrad.models.messages import ChatRequest, Message, Usage

SKILL = "# Skill\n\nAlways answer in French.\n"
NASTY = "$(touch pwned) ; rm -rf / && echo \"hi\" | cat > x; `id` 'q' {task} {workspace} * ?"

# The stand-in agent: reads the skill file (front matter + body) and the task, and reports both.
AGENT = """
import json, os, sys
skill_path, task = sys.argv[2], (sys.argv[3] if len(sys.argv) > 3 else None)
if task is None:
    task = sys.stdin.buffer.read().decode("utf-8")
text = open(skill_path, encoding="utf-8").read()
_, front, body = text.split("---\\n", 2)
if sys.argv[1] == "raw":
    open(os.environ["CWD_FILE"], "w").write(os.getcwd())
    sys.stdout.write(task)
else:
    print(json.dumps({"front": front, "body": body, "task": task, "cwd": os.getcwd()}))
"""


def agent(folder: Path, source: str, name: str = "agent.py") -> str:
    path = folder / name
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return str(path)


def make(folder: Path, argv: list[str], **options: Any) -> CommandModel:
    return CommandBackend.create(CommandOptions(argv=argv, **options), folder)


def ask(task: str, skill: str = SKILL) -> ChatRequest:
    return ChatRequest(messages=(Message(role="system", content=skill),
                                 Message(role="user", content=task)))


def report(model: CommandModel, task: str, skill: str = SKILL) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(model.complete(ask(task, skill)).text)
    return result


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie counts as dead: the container's init may never reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.fixture
def script(tmp_path: Path) -> str:
    return agent(tmp_path, AGENT)


# ----------------------------------------------------------------------------- skill and task


def test_skill_file_with_front_matter_and_task_arrive(tmp_path: Path, script: str) -> None:
    model = make(tmp_path, [sys.executable, script, "report", "SKILL.md"],
                 skill_name="fr: answers", skill_description="Say it 'in' French: #1")
    assert isinstance(model, ChatModel)
    got = report(model, "What is 2+2?")
    assert yaml.safe_load(got["front"]) == {"name": "fr: answers",
                                            "description": "Say it 'in' French: #1"}
    assert got["body"] == "\n" + SKILL
    assert got["task"] == "What is 2+2?"
    assert not Path(got["cwd"]).exists()  # the workspace is removed afterwards


@pytest.mark.parametrize("mode", ["stdin", "argv"])
def test_shell_metacharacters_are_plain_text(
    tmp_path: Path, script: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = Path.cwd()
    monkeypatch.chdir(tmp_path)
    argv = [sys.executable, script, "raw", "SKILL.md"] + (["{task}"] if mode == "argv" else [])
    where = tmp_path / "cwd.txt"
    model = make(tmp_path, argv, input=mode, keep_workspaces=True, env={"CWD_FILE": str(where)})
    assert model.complete(ask(NASTY)).text == NASTY
    workspace = Path(where.read_text(encoding="utf-8"))
    try:
        assert sorted(p.name for p in workspace.iterdir()) == ["SKILL.md"]
        for folder in (tmp_path, home):
            assert not (folder / "pwned").exists() and not (folder / "x").exists()
        assert not list(tmp_path.rglob("pwned"))
    finally:
        shutil.rmtree(workspace)


def test_argv_mode_substitutes_every_placeholder_once(tmp_path: Path, script: str) -> None:
    model = make(tmp_path, [sys.executable, script, "report", "{skill_file}", "[{task}]"],
                 input="argv")
    got = report(model, "brace {workspace} and {task} stay")
    assert got["task"] == "[brace {workspace} and {task} stay]"
    assert yaml.safe_load(got["front"])["name"] == "skillgrad-skill"


def test_task_file_and_workspace_placeholders(tmp_path: Path) -> None:
    script = agent(tmp_path, """
        import os, sys
        task_file, workspace = sys.argv[1], sys.argv[2]
        assert os.path.samefile(workspace, os.getcwd())
        assert sys.stdin.read() == ""  # input: argv gives an empty stdin
        print(open(task_file, encoding="utf-8").read())
    """)
    model = make(tmp_path, [sys.executable, script, "{task_file}", "{workspace}"], input="argv")
    assert model.complete(ask("from a file: {task}")).text == "from a file: {task}"


def test_several_messages_are_headed_by_role(tmp_path: Path, script: str) -> None:
    model = make(tmp_path, [sys.executable, script, "report", "SKILL.md"])
    request = ChatRequest(messages=(
        Message(role="system", content="one"), Message(role="system", content="two"),
        Message(role="user", content="hi"), Message(role="assistant", content="yo"),
        Message(role="user", content="again")))
    got = json.loads(model.complete(request).text)
    assert got["task"] == "[user]\nhi\n\n[assistant]\nyo\n\n[user]\nagain"
    assert got["body"] == "\none\n\ntwo\n"


def test_nested_skill_file_and_copied_files(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "table.csv").write_text("a,b\n", encoding="utf-8")
    script = agent(tmp_path, """
        import sys
        skill = open(".claude/skills/skillgrad/SKILL.md", encoding="utf-8").read()
        print(skill.splitlines()[1], open("inputs/t.csv").read().strip(), sys.argv[1])
    """)
    model = make(tmp_path, [sys.executable, script, "{skill_file}"],
                 skill_file=".claude/skills/skillgrad/SKILL.md",
                 files={"inputs/t.csv": "data/table.csv"})
    text = model.complete(ask("t")).text
    assert text.startswith("name: skillgrad-skill a,b ")
    assert text.endswith("/.claude/skills/skillgrad/SKILL.md")


def test_kept_workspaces_stay(tmp_path: Path, script: str) -> None:
    model = make(tmp_path, [sys.executable, script, "report", "SKILL.md"], keep_workspaces=True)
    workspace = Path(report(model, "t")["cwd"])
    try:
        assert (workspace / "SKILL.md").read_text(encoding="utf-8").startswith("---\nname:")
    finally:
        shutil.rmtree(workspace)


def test_env_is_added_and_expanded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKILLGRAD_TEST_HOME", "/somewhere")
    script = agent(tmp_path, "import os; print(os.environ['A'], os.environ['SKILLGRAD_TEST_HOME'])")
    model = make(tmp_path, [sys.executable, script], env={"A": "${SKILLGRAD_TEST_HOME}/x"})
    assert model.complete(ask("t")).text == "/somewhere/x /somewhere"
    with pytest.raises(ConfigError, match="SKILLGRAD_TEST_UNSET"):
        make(tmp_path, [sys.executable, script], env={"A": "${SKILLGRAD_TEST_UNSET}"})


# ----------------------------------------------------------------------------- output and usage


def test_json_output_with_usage(tmp_path: Path) -> None:
    script = agent(tmp_path, """
        import json
        print(json.dumps({"type": "result", "result": " Bonjour ", "usage": {
            "input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 3}}))
    """)
    completion = make(tmp_path, [sys.executable, script], output="json").complete(ask("t"))
    assert completion.text == "Bonjour"
    assert completion.usage == Usage(prompt_tokens=15, completion_tokens=3)
    assert completion.finish_reason == "stop"


def test_jsonl_output_takes_last_text_and_sums_usage(tmp_path: Path) -> None:
    script = agent(tmp_path, """
        import json
        events = [
            {"type": "thread.started"},
            {"item": {"type": "reasoning", "text": "thinking"}},
            {"usage": {"prompt_tokens": 7, "completion_tokens": 2}},
            {"item": {"type": "agent_message", "text": "final answer"}},
            {"usage": {"input_tokens": 3, "output_tokens": 4}},
        ]
        print("warning: not an event")
        print("\\n".join(json.dumps(e) for e in events))
    """)
    model = make(tmp_path, [sys.executable, script], output="jsonl", text_field="item.text")
    completion = model.complete(ask("t"))
    assert completion.text == "final answer"
    assert completion.usage == Usage(prompt_tokens=10, completion_tokens=6)


def test_missing_usage_is_estimated(tmp_path: Path) -> None:
    script = agent(tmp_path, "print('x' * 40)")
    completion = make(tmp_path, [sys.executable, script]).complete(ask("t" * 20, skill="s" * 80))
    assert completion.usage == Usage(prompt_tokens=25, completion_tokens=10)


@pytest.mark.parametrize("output,printed", [("json", "Traceback: oops"),
                                            ("json", "[1, 2]"),
                                            ("jsonl", '{"other": 1}')])
def test_unusable_structured_output_is_fatal(tmp_path: Path, output: str, printed: str) -> None:
    script = agent(tmp_path, f"print({printed!r})")
    with pytest.raises(FatalModelError, match="agent.py|python"):
        make(tmp_path, [sys.executable, script], output=output).complete(ask("t"))


# ----------------------------------------------------------------------------- failures


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = agent(tmp_path, f"""
        import os, subprocess, time
        helper = subprocess.Popen(["sleep", "30"])
        with open({str(pids)!r}, "w") as f:
            f.write(f"{{os.getpid()}} {{helper.pid}}")
        time.sleep(30)
    """)
    model = make(tmp_path, [sys.executable, script], timeout=0.5)
    start = time.monotonic()
    with pytest.raises(TransientModelError, match="timed out after 0.5 s"):
        model.complete(ask("t"))
    assert time.monotonic() - start < 3
    child, helper = (int(p) for p in pids.read_text().split())
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # killed and reaped
    deadline = time.monotonic() + 2
    while alive(helper) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(helper)


def test_nonzero_exit_is_fatal_with_stderr_tail(tmp_path: Path) -> None:
    script = agent(tmp_path, """
        import sys
        sys.stderr.write("noise " * 200 + "API key invalid")
        sys.exit(3)
    """)
    with pytest.raises(FatalModelError) as info:
        make(tmp_path, [sys.executable, script]).complete(ask("t"))
    message = str(info.value)
    assert "exited with code 3" in message and message.endswith("API key invalid")
    assert len(message) < 400


def test_transient_exit_codes_are_retryable(tmp_path: Path) -> None:
    script = agent(tmp_path, "import sys; sys.stderr.write('rate limited'); sys.exit(75)")
    model = make(tmp_path, [sys.executable, script], transient_exit_codes=[75])
    with pytest.raises(TransientModelError, match="code 75: rate limited"):
        model.complete(ask("t"))


def test_missing_program(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="argv\\[0\\]: program 'no-such-agent-cli' not found"):
        make(tmp_path, ["no-such-agent-cli", "exec"])
    with pytest.raises(ConfigError, match="not found on PATH"):
        make(tmp_path, ["./bin/agent"])  # relative to the config folder


def test_identity_and_endpoint(tmp_path: Path, script: str) -> None:
    argv = [sys.executable, script, "report", "SKILL.md"]
    one, two = make(tmp_path, argv), make(tmp_path, argv, timeout=5)
    assert one.identity == two.identity and one.identity.startswith("command|")
    assert make(tmp_path, argv, output="json").identity != one.identity
    assert one.endpoint == f"command:{sys.executable}"


# ----------------------------------------------------------------------------- config


@pytest.fixture
def command_registered(tmp_path_factory: pytest.TempPathFactory,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Register the backend the way a plugin would, if the editable install predates it."""
    if "command" in registry.backend_names():
        return
    site = tmp_path_factory.mktemp("plugin")
    info = site / "skillgrad_command_test-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: skillgrad-command-test\n"
                                   "Version: 0\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[skillgrad.backends]\ncommand = skillgrad.models.command:CommandBackend\n",
        encoding="utf-8")
    monkeypatch.syspath_prepend(str(site))


@pytest.mark.usefixtures("command_registered")
def test_config_selects_and_validates_the_backend(toy_dir: Path) -> None:
    argv = [sys.executable, "-c", "print('x')"]
    path = toy_config(toy_dir, model={"target": {"backend": "command", "argv": argv,
                                                 "output": "json", "concurrency": 2}})
    resolved = load_config(path)
    options = resolved.role_options["target"]
    assert isinstance(options, CommandOptions) and options.output == "json"
    assert isinstance(CommandBackend.create(options, resolved.base_dir), CommandModel)

    path = toy_config(toy_dir, model={"target": {"backend": "command", "argv": argv,
                                                 "argz": ["x"]}})
    with pytest.raises(ConfigError, match="unknown key 'model.target.argz'.*argv"):
        load_config(path)

    path = toy_config(toy_dir, model={"target": {"backend": "command", "argv": argv,
                                                 "input": "argv"}})
    with pytest.raises(ConfigError, match="model.target.*no argv element contains \\{task\\}"):
        load_config(path)


@pytest.mark.parametrize("options,message", [
    ({"argv": []}, "at least 1 item"),
    ({"argv": ["x"], "timeout": 0}, "greater than 0"),
    ({"argv": ["x"], "skill_file": "../SKILL.md"}, "relative path inside the workspace"),
    ({"argv": ["x"], "files": {"/etc/x": "a"}}, "relative path inside the workspace"),
])
def test_option_errors(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CommandOptions.model_validate(options)


def test_the_program_s_pwd_is_its_workspace(tmp_path: Path) -> None:
    """OpenCode takes its folder from $PWD: an inherited one would send it to the caller's
    checkout instead of the task's working copy."""
    work = tmp_path / "work"
    work.mkdir()
    model = make(tmp_path, [sys.executable, "-c", "import os; print(os.environ['PWD'])"])
    request = ask("where?").model_copy(update={"workspace": str(work)})
    assert model.complete(request).text == str(work)
