"""A SkillOpt config whose target is one of SkillOpt's agent CLIs trains in skillgrad with the
real CLI: ``skillgrad train`` on SkillOpt's searchqa config (our fixture of its shipped file,
``_base_`` included, from a folder laid out like a SkillOpt checkout), its target switched to
``codex_exec`` (or ``claude_code_exec``) and completed with the local model the docs ask the
user to name (docs/skillopt.md, "SkillOpt's agent CLIs"): ``model: {target: {serve: FILE}}`` in
a file over SkillOpt's, or ``--set 'model.target={serve: FILE}'``.

The served model is scripted. For each question it first calls the CLI's shell tool (``echo
SG$((40+2))OUT``, whose output, ``SG42OUT``, is nowhere in the command), then answers once it
sees that output, with a marker line; right only while the skill (placed in the CLI's memory
file, as SkillOpt's translation says) holds the rule the scripted optimizer proposes. The
optimizer is SkillOpt's default ``openai_chat`` role pointed at a loopback server answering
with skillgrad's scripted optimizer. One step on two training tasks, one selection task and
one test task: the gate accepts the rule and the test score goes from 0 to 1.

Behind an explicit flag: ``SKILLGRAD_AGENT_CLIS`` names where the CLIs are (tests/agentcli.py);
a CLI missing there is skipped (a failure under ``SKILLGRAD_REQUIRE_AGENT_CLIS=1``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import agentcli
import pytest
import yaml

from skillgrad.models.agent_clis import AGENT_CLIS
from skillgrad.models.messages import ChatRequest
from skillgrad.testing import FakeOpenAIServer, http_responder, scripted_optimizer
from tests.e2e import cli
from tests.skillopt_checkout import make_checkout

MARK = "SGMARK-5150"  # every answer of the served model carries it
RULE = "Before you answer, run the check and report what it prints (SGRULE-9)."
TOOL_OUT = "SG42OUT"  # what the shell call prints; the command itself reads SG$((40+2))OUT
# Each question of tests/fixtures/searchqa, by a phrase only it holds: its gold answer.
GOLD = {"Kormarsh": "Ithmoor", "Ilse Fenthorpe": "Wynwick Ceramics",
        "Northern Plover": "45", "Corin Pellbrook": "harp", "Delia Grimford": "Dormere",
        "white stag": "Jashaven Textiles", "Golden Plover was launched": "1976",
        "Ithby Paperworks": "1985"}
# SkillOpt's backend -> (the CLI preset, SkillOpt's key for the program's path).
BACKENDS = {"codex_exec": ("codex", "codex_exec_path"),
            "claude_code_exec": ("claude", "claude_code_exec_path")}
ONE_STEP = {"train": {"num_epochs": 1, "batch_size": 2, "steps_per_epoch": 1, "train_size": 0},
            "gradient": {"minibatch_size": 2},
            "evaluation": {"sel_env_num": 1, "test_env_num": 1, "gate_test": "strict"}}


def _served(cli_name: str) -> dict[str, Any]:
    """The scripted model served to the CLI: a tool call first, then the answer, right only
    under the rule."""
    shell = AGENT_CLIS[cli_name].shell_call("echo SG$((40+2))OUT")
    rules: list[dict[str, Any]] = [{"when": "title generator", "reply": "Searching"}]
    for phrase, gold in GOLD.items():
        rules += [{"when": [phrase, TOOL_OUT, "SGRULE-9"], "reply": f"{MARK}\nAnswer: {gold}"},
                  {"when": [phrase, TOOL_OUT], "reply": f"{MARK}\nAnswer: not sure"},
                  {"when": phrase, "reply": {"tool_calls": [shell]}}]
    return {"model": {"target": {"backend": "scripted", "rules": rules,
                                 "default": f"{MARK} UNMATCHED"}}}


def _analyst(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    if "SGRULE-9" in skill:
        return {"reasoning": "the skill has the rule", "edits": []}
    return {"reasoning": "the answers lacked the check",
            "edits": [{"op": "append", "content": RULE, "support": 2}]}


def _not_the_target(request: ChatRequest) -> str:
    raise AssertionError("the target's calls go to the agent CLI, not to the optimizer's server")


@pytest.fixture
def optimizer_server(monkeypatch: pytest.MonkeyPatch) -> Any:
    """SkillOpt's default optimizer (openai_chat on Azure OpenAI) pointed at a loopback server
    answering with skillgrad's scripted optimizer."""
    for name in ("AZURE_OPENAI_API_KEY", "TARGET_AZURE_OPENAI_API_KEY",
                 "OPTIMIZER_AZURE_OPENAI_API_KEY", "CODEX_EXEC_PATH", "CODEX_CLI_BIN",
                 "CODEX_PATH", "CODEX_EXEC_SANDBOX", "CODEX_SANDBOX_MODE", "CODEX_SANDBOX",
                 "CODEX_EXEC_APPROVAL_POLICY", "CODEX_EXEC_REASONING_EFFORT",
                 "CODEX_EXEC_NETWORK_ACCESS", "CODEX_EXEC_WEB_SEARCH"):
        monkeypatch.delenv(name, raising=False)
    responder = http_responder(_not_the_target, scripted_optimizer(_analyst))
    with FakeOpenAIServer(responder=responder) as server:
        yield server


def _rollouts(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(run.rglob("rollouts.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_skillopt_config_with_an_agent_target_trains_with_the_real_cli(
        backend: str, tmp_path: Path, optimizer_server: Any) -> None:
    cli_name, path_key = BACKENDS[backend]
    binary = agentcli.binary(AGENT_CLIS[cli_name].binary)
    root = tmp_path / "SkillOpt"
    make_checkout(root, "searchqa")
    (root / "served.yaml").write_text(yaml.safe_dump(_served(cli_name)))
    model: dict[str, Any] = {"target_backend": backend, path_key: binary}
    sets: list[str] = []
    if backend == "codex_exec":  # the local model in a file over SkillOpt's
        model["target"] = {"serve": "served.yaml"}
    else:  # ... or on the command line. SkillOpt shows its optimizer no trace of a
        # claude_code_exec run, so the translation says trace: false, and without a trace the
        # rollouts hold no metadata.agent; the user's key wins over the translation.
        sets = ["--set", "model.target={serve: served.yaml, trace: true}"]
    overlay = root / "configs" / "searchqa" / f"{backend}.yaml"
    overlay.write_text(yaml.safe_dump({"_base_": "default.yaml", "model": model, **ONE_STEP}))
    run = tmp_path / "run"
    proc = cli("train", str(overlay.relative_to(root)), "--out", str(run), *sets, cwd=root,
               env={"AZURE_OPENAI_ENDPOINT": optimizer_server.url,
                    "AZURE_OPENAI_AUTH_MODE": "openai_compatible"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = yaml.safe_load((run / "config.yaml").read_text())["model"]["target"]
    assert (config["backend"], config["cli"]) == ("agent", cli_name)
    assert config["serve"] == str(root / "served.yaml")  # read from the checkout's root
    assert config["binary"] == binary and config["trace"] is True
    assert config["placement"] == "instructions" and config["skill_name"] == "skillopt-target"

    rollouts = _rollouts(run)
    assert rollouts, "no rollouts written"
    shell = AGENT_CLIS[cli_name].shell_tool
    for r in rollouts:  # the training batch's, and every evaluation's
        agent = r["metadata"]["agent"]
        assert agent["cli"] and agent["placement"] == "instructions", agent
        assert agent["calls"] >= 2 and agent["tool_calls"] >= 1, agent  # served: call, answer
        said = [m["content"] or "" for m in r["messages"]]
        assert MARK in said[2] and "UNMATCHED" not in " ".join(said), r["task_id"]
        called = [c["function"]["name"] for m in r["messages"] for c in m["tool_calls"] or ()]
        assert called == [shell], called  # the CLI's own shell tool ran the served call ...
        assert any(m["role"] == "tool" and TOOL_OUT in (m["content"] or "")
                   for m in r["messages"]), r["task_id"]  # ... and printed what it computed
    assert len(rollouts) == 6  # 2 training tasks; selection and test, each on 2 skills
    steps = sorted((run / "steps").glob("e01-s001"))
    assert steps, sorted(p.name for p in run.iterdir())
    gate = json.loads((steps[0] / "gate.json").read_text())
    assert gate["decision"].startswith("accept"), gate
    record = json.loads((steps[0] / "record.json").read_text())
    assert (record["decision"], record["n_applied"]) == (gate["decision"], 1)
    assert (record["train_hard"], record["candidate_score"]) == (0.0, 1.0)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["test"]["initial"]["hard"] == 0.0
    assert summary["test"]["best"]["hard"] == 1.0
    assert "SGRULE-9" in (run / "best_skill.md").read_text()
    assert optimizer_server.requests, "the optimizer's server was never asked"
