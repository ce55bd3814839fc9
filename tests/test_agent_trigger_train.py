"""An agent skill's description (its trigger) trains, with a real agent CLI: Claude Code lists
the skill by name and description and reads the body only when the description fits.

The served model is scripted: it loads the skill (Claude Code's ``Skill`` tool) only when the
listed description speaks of crate codes, and answers a question right only once the body's
rule is in its prompt. The initial description says nothing of the kind, so the agent never
loads the skill and every answer is wrong. The optimizer is skillgrad's scripted one behind a
loopback OpenAI-compatible server: its analyst proposes no edit, and its description is the
one the served model looks for. One step must rewrite the description, the gate must accept
the candidate (loaded, right) over the current skill (never loaded), and the test score must go
from 0 to 1, with the step record, the step line and the rollouts saying so.

Behind an explicit flag: ``SKILLGRAD_AGENT_CLIS`` names where the CLIs are (tests/agentcli.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import agentcli
import yaml

from skillgrad.models.agent_clis import AGENT_CLIS
from skillgrad.models.messages import ChatRequest
from skillgrad.testing import FakeOpenAIServer, http_responder, scripted_optimizer
from tests.e2e import cli

NAME = "crate-codes"
RULE = "Crate codes are the item number with the prefix CR- (rule SG-77)."
SKILL = (f"---\nname: {NAME}\ndescription: Notes kept for later.\n---\n\n"
         f"# Looking up crate codes\n\n- {RULE}\n")
NEW = "Looks up crate codes of stock items. Use for questions about crate codes."
ITEMS = {"K1": "CR-1", "K2": "CR-2", "K3": "CR-3", "K4": "CR-4", "K5": "CR-5", "K6": "CR-6"}


def _served() -> dict[str, Any]:
    load = {"tool_calls": [{"name": "Skill", "arguments": {"skill": NAME}}]}
    rules: list[dict[str, Any]] = [{"when": "title generator", "reply": "Codes"}]
    for item, code in ITEMS.items():
        question = f"item {item}?"
        rules += [{"when": [question, "rule SG-77"], "reply": code},
                  {"when": [question, "Use for questions about crate codes"], "reply": load},
                  {"when": question, "reply": "I do not know its crate code."}]
    return {"model": {"target": {"backend": "scripted", "rules": rules,
                                 "default": "UNMATCHED"}}}


def _analyst(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    if "## Requests for which" in prompt:  # the description, asked with the unloaded requests
        assert "item K" in tasks and "Notes kept for later." in prompt
        return {"description": NEW}
    return {"reasoning": "the agent never read the skill", "edits": []}


def _not_the_target(request: ChatRequest) -> str:
    raise AssertionError("the target's calls go to the agent CLI, not to the optimizer's server")


def test_the_description_trains_until_a_real_agent_loads_the_skill(tmp_path: Path) -> None:
    binary = agentcli.binary(AGENT_CLIS["claude"].binary)
    (tmp_path / "data.jsonl").write_text("".join(
        json.dumps({"id": item, "question": f"What is the crate code of item {item}?",
                    "answer": code}) + "\n" for item, code in ITEMS.items()))
    (tmp_path / "skill.md").write_text(SKILL)
    (tmp_path / "serve.yaml").write_text(yaml.safe_dump(_served()))
    with FakeOpenAIServer(responder=http_responder(
            _not_the_target, scripted_optimizer(_analyst))) as server:
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({
            "env": {"name": "qa", "data_path": "data.jsonl", "skill_init": "skill.md",
                    "split_ratio": [0.34, 0.33, 0.33]},
            "model": {"target": {"backend": "agent", "cli": "claude", "binary": binary,
                                 "serve": "serve.yaml", "placement": "skill", "timeout": 170},
                      "optimizer": {"backend": "openai_compatible", "base_url": server.url,
                                    "model": "scripted"}},
            "train": {"num_epochs": 1, "batch_size": 2, "steps_per_epoch": 1},
            "gradient": {"minibatch_size": 2},
            "evaluation": {"sel_env_num": 2, "test_env_num": 2, "gate_test": "strict"}}))
        run = tmp_path / "run"
        proc = cli("train", "config.yaml", "--out", str(run), cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = proc.stdout + proc.stderr
    assert "skill loaded 0/2" in said, said
    assert f"skill loaded 0/2; description rewritten: {NEW}" in said
    record = json.loads((run / "steps" / "e01-s001" / "record.json").read_text())
    assert record["skill_loads"] == [0, 2] and record["n_proposed"] == 0
    assert record["trigger"] == f"loaded 0/2; description rewritten: {NEW}"
    assert record["decision"].startswith("accept"), record
    assert record["changes"] == [f"description: {NEW}"]
    best = (run / "best_skill.md").read_text()
    assert best == SKILL.replace("Notes kept for later.", json.dumps(NEW))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["test"]["initial"]["hard"] == 0.0
    assert summary["test"]["best"]["hard"] == 1.0
    assert summary["test"]["initial"]["skill_loaded"] == [0, 2]
    assert summary["test"]["best"]["skill_loaded"] == [2, 2]
