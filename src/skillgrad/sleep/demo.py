"""A demo project for trying ``skillgrad sleep`` without sessions of one's own.

``skillgrad sleep demo DIR`` writes ``DIR/shop`` (a small project with a Claude Code skill,
``.claude/skills/shop-dev/SKILL.md``, and a sleep config that reads Claude Code only) and
``DIR/claude/projects/...`` (point ``CLAUDE_CONFIG_DIR`` there): Claude Code sessions in Claude
Code's own format, in which the user asked for the same kinds of fixes
twice each, the agent loaded the skill, edited the module's file and ran its tests. The
sessions are invented; one also holds a fake API key, to show that it never leaves them.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

MODULES = ("billing", "invoices", "tax", "orders", "refunds", "shipping", "coupons", "search",
           "reports", "accounts", "carts", "prices", "stock", "users", "emails", "payments")
SKILL = """---
name: shop-dev
description: Use when changing the shop's Python code, its tests or its data files.
---

# Shop development

Work in small steps and run the tests.
"""
FAKE_KEY = "sk-ant-demo-0000000000000000000000"


def claude_session(folder: Path, sid: str, cwd: Path, when: datetime, module: str,
                   wording: int, extra: str = "", check: str = "pytest -q tests/test_{}.py"
                   ) -> Path:
    """One Claude Code session file: a request, the skill loaded, an edit, the agent's word."""
    asks = (f"fix the failing test in the {module} module of the shop",
            f"the {module} module of the shop has a failing test again, please fix it")
    ts = [(when + timedelta(seconds=s)).isoformat().replace("+00:00", "Z") for s in range(8)]
    common = {"sessionId": sid, "cwd": str(cwd), "gitBranch": "main", "version": "2.1.40",
              "isSidechain": False}

    def line(kind: str, n: int, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
        return {"type": kind, "uuid": f"{sid}-{n}", "parentUuid": parent, "timestamp": ts[n],
                "message": message, **common}

    def tool_use(n: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return line("assistant", n, f"{sid}-{n - 1}", {
            "id": f"{sid}-m{n}", "model": "claude-sonnet-4-5", "role": "assistant",
            "content": [{"type": "tool_use", "id": f"{sid}-t{n}", "name": name,
                         "input": arguments}]})

    def result(n: int, text: str) -> dict[str, Any]:
        return line("user", n, f"{sid}-{n - 1}", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"{sid}-t{n - 1}", "content": text}]})

    lines = [
        line("user", 0, None, {"role": "user", "content": asks[wording] + extra}),
        tool_use(1, "Skill", {"skill": "shop-dev"}), result(2, "loaded"),
        tool_use(3, "Edit", {"file_path": f"{cwd}/shop/{module}.py", "old_string": "round(",
                             "new_string": "round_half_up("}),
        result(4, "ok"),
        tool_use(5, "Bash", {"command": check.format(module)}),
        result(6, "1 passed"),
        line("assistant", 7, f"{sid}-6", {
            "id": f"{sid}-m7", "model": "claude-sonnet-4-5", "role": "assistant",
            "content": [{"type": "text", "text": f"Fixed shop/{module}.py; the tests pass."}]}),
    ]
    path = folder / f"{sid}.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in lines), encoding="utf-8")
    stamp = (when + timedelta(minutes=10)).timestamp()
    os.utime(path, (stamp, stamp))
    return path


CONFIG = """# skillgrad sleep's settings for this project (see skillgrad's docs/sleep.md).
sleep:
  agents: [claude_code]   # the demo's sessions are Claude Code's
  miner: heuristic        # tasks from the sessions' own outcomes (llm: the optimizer writes them)
"""
# --scripted: stand-in models, so that a night takes a second: the target names the file it
# changes only when its skill says so; the optimizer proposes a harmful rule, a line copied
# from a task and a helpful rule (the screen and the gate pick); the judge wants a file name.
SCRIPTED = CONFIG + """  val_percent: 50
model:
  target: {backend: scripted, function: "skillgrad.sleep.demo:scripted_target"}
  optimizer: {backend: scripted, function: "skillgrad.sleep.demo:scripted_optimizer"}
gradient: {proposals: 3}
evaluation: {gate_test: sign}
"""
HELPFUL = "- Name the file you change."
HARMFUL = "- Never name files; describe changes in general terms."


def scripted_target(request: Any) -> str:
    skill, prompt = request.messages[0].text(), request.messages[1].text()
    module = next((m for m in MODULES if m in prompt), "the")
    if "Never name files" in skill:
        return "Changed the module."
    return f"Fixed shop/{module}.py." if HELPFUL in skill else "Fixed the test."


def scripted_optimizer(request: Any) -> Any:
    prompt = request.messages[-1].text()
    if request.kind == "sleep_judge":
        answer = prompt.rsplit("## Answer", 1)[1]
        return {"score": 1.0 if ".py" in answer else 0.2, "reason": "names the file or not"}
    t = request.temperature or 0.0
    if request.kind == "analyst_success" or t < 0.5:
        content = HARMFUL
    elif t < 0.8:
        content = "- fix the failing test in the billing module of the shop"
    else:
        content = HELPFUL
    return {"reasoning": "the answers do not say which file was changed",
            "edits": [{"op": "append", "content": content}]}


def write_demo(folder: Path, now: datetime | None = None,
               modules: tuple[str, ...] = MODULES, scripted: bool = False) -> tuple[Path, Path]:
    """The demo project and the Claude Code folder its sessions are in (for
    ``CLAUDE_CONFIG_DIR``), both absolute: the sessions record the project's absolute path
    as their working directory, as Claude Code does, whatever ``folder`` was given as."""
    now = now or datetime.now(timezone.utc)
    folder = Path(os.path.abspath(folder.expanduser()))
    project, claude = folder / "shop", folder / "claude"
    skill = project / ".claude" / "skills" / "shop-dev" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text(SKILL, encoding="utf-8")
    config = project / ".skillgrad" / "sleep" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(SCRIPTED if scripted else CONFIG, encoding="utf-8")
    logs = claude / "projects" / "-shop"
    logs.mkdir(parents=True)
    for n, module in enumerate(modules):
        for wording in (0, 1):
            extra = f" (my key is {FAKE_KEY})" if n == 0 and wording == 0 else ""
            claude_session(logs, f"s{n}-{wording}", project,
                           now - timedelta(hours=2 * len(modules) - 2 * n - wording), module,
                           wording, extra)
    return project, claude
