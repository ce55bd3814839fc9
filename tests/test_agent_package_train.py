"""A skill package trains with a real agent CLI as the target: Codex gets the folder where it
keeps skills, loads SKILL.md, which sends it to references/codes.md, and reads that file.

The served model is scripted: it loads the skill when the listed description fits, reads the
reference once the body is in its prompt, and answers a question right only once the
reference holds the rule. The initial reference holds no rule, so every answer is wrong. The
optimizer is skillgrad's scripted one behind a loopback OpenAI-compatible server: its analyst
inserts the rule under the reference's own heading, which no other file has. One step must
change the reference alone, the gate accept it, the test score go from 0 to 1, the step record
count the reads of the reference, and the exported folder hold the trained reference.

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
from skillgrad.package import read_folder, split_package
from skillgrad.testing import FakeOpenAIServer, http_responder, scripted_optimizer
from tests.e2e import cli

NAME = "crate-codes"
DESCRIPTION = "Looks up crate codes of stock items. Use for questions about crate codes."
BODY = "# Crate codes\n\n- Read references/codes.md before you answer (rule SG-88).\n"
CODES = "# Codes\n\nThe list of codes follows.\n"
RULE = "- Crate codes are the item number with the prefix CR- (rule SG-77)."
ITEMS = {"K1": "CR-1", "K2": "CR-2", "K3": "CR-3", "K4": "CR-4", "K5": "CR-5", "K6": "CR-6"}


def _served() -> dict[str, Any]:
    codex = AGENT_CLIS["codex"]
    load = {"tool_calls": [codex.shell_call(f'cat "$CODEX_HOME/skills/{NAME}/SKILL.md"')]}
    read = {"tool_calls": [codex.shell_call(
        f'cat "$CODEX_HOME/skills/{NAME}/references/codes.md"')]}
    rules: list[dict[str, Any]] = []
    for item, code in ITEMS.items():
        question = f"item {item}?"
        rules += [{"when": [question, "rule SG-77"], "reply": code},
                  {"when": [question, "The list of codes follows."],
                   "reply": "I do not know its crate code."},
                  {"when": [question, "rule SG-88"], "reply": read},
                  {"when": [question, DESCRIPTION], "reply": load},
                  {"when": question, "reply": "The skill was not listed."}]
    return {"model": {"target": {"backend": "scripted", "rules": rules,
                                 "default": "UNMATCHED"}}}


def _analyst(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    assert "<!-- skillgrad:file references/codes.md -->" in skill  # it sees the package
    return {"reasoning": "the reference lists no rule for the codes",
            "edits": [{"op": "insert_after", "anchor": "# Codes", "content": RULE,
                       "support": 2}]}


def _not_the_target(request: ChatRequest) -> str:
    raise AssertionError("the target's calls go to the agent CLI, not to the optimizer's server")


def test_a_package_trains_with_a_real_agent_that_reads_its_reference(tmp_path: Path) -> None:
    binary = agentcli.binary(AGENT_CLIS["codex"].binary)
    (tmp_path / "data.jsonl").write_text("".join(
        json.dumps({"id": item, "question": f"What is the crate code of item {item}?",
                    "answer": code}) + "\n" for item, code in ITEMS.items()))
    folder = tmp_path / NAME
    (folder / "references").mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {NAME}\ndescription: {DESCRIPTION}\n---\n\n"
                                     f"{BODY}")
    (folder / "references" / "codes.md").write_text(CODES)
    (tmp_path / "serve.yaml").write_text(yaml.safe_dump(_served()))
    with FakeOpenAIServer(responder=http_responder(
            _not_the_target, scripted_optimizer(_analyst))) as server:
        (tmp_path / "config.yaml").write_text(yaml.safe_dump({
            "env": {"name": "qa", "data_path": "data.jsonl", "skill_init": NAME,
                    "split_ratio": [0.34, 0.33, 0.33]},
            "model": {"target": {"backend": "agent", "cli": "codex", "binary": binary,
                                 "serve": "serve.yaml", "placement": "skill", "timeout": 170},
                      "optimizer": {"backend": "openai_compatible", "base_url": server.url,
                                    "model": "scripted"}},
            "train": {"num_epochs": 1, "batch_size": 2, "steps_per_epoch": 1},
            "gradient": {"minibatch_size": 2},
            "evaluation": {"sel_env_num": 2, "test_env_num": 2, "gate_test": "strict"}}))
        run = tmp_path / "run"
        proc = cli("train", "config.yaml", "--out", str(run), cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((run / "steps" / "e01-s001" / "record.json").read_text())
    assert record["decision"].startswith("accept"), record
    assert record["references_read"] == {"rollouts": 2, "references/codes.md": 2}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["test"]["initial"]["hard"] == 0.0
    assert summary["test"]["best"]["hard"] == 1.0
    best = split_package((run / "best_skill.md").read_text())
    assert best.files["references/codes.md"] == CODES.replace("# Codes\n", f"# Codes\n{RULE}\n")
    assert best.main == (folder / "SKILL.md").read_text()  # the body was not the edit's
    shown = cli("show", str(run), cwd=tmp_path)
    assert "files of the skill the agent read: references/codes.md 2 of 2" in " ".join(
        shown.stdout.split()), shown.stdout

    out = tmp_path / "exported"
    done = cli("export", str(run), "--format", "skill-folder", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    exported = split_package(read_folder(out / NAME))
    assert exported.files == best.files and "rule SG-88" in exported.main
    assert (folder / "references" / "codes.md").read_text() == CODES  # never changed in place
