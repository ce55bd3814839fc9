"""Harvest throughput and memory on a large Claude Code store.

Writes N synthetic Claude Code sessions (about 100 KB of JSONL each, shaped like real ones:
typed prompts, assistant responses spread over several lines, tool calls and results with their
``toolUseResult`` copies, a secret now and then for the scrubber) into a temporary
``CLAUDE_CONFIG_DIR``, then harvests the first 100 and all N, each in a fresh process, through
:meth:`Harvester.iter_sessions` with the real scrubber. Peak RSS (``resource.getrusage``) is
the process's high-water mark: flat memory means it does not grow with the number of sessions.

    python bench/sleep_harvest.py [--sessions 1000] [--kb 100]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from skillgrad.sleep.harvest.harvester import Harvester
from skillgrad.sleep.scrub import Scrubber
from skillgrad.traces.claude_code import ClaudeCodeAdapter

PROJECT = "/home/bench/shop"
WORDS = ("tax rate cart order refund invoice total rounding decimal test fixture module "
         "function import return value error assert expected actual line file path branch "
         "commit review patch update config cache request response timeout retry").split()


def prose(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def session_lines(index: int, target_bytes: int) -> list[str]:
    """One session's JSONL lines, about ``target_bytes`` in all."""
    rng = random.Random(index)
    sid = f"{index:08d}-0000-4000-8000-{index:012d}"
    env = {"isSidechain": False, "userType": "external", "entrypoint": "cli", "cwd": PROJECT,
           "sessionId": sid, "version": "2.1.40", "gitBranch": "main"}
    lines: list[str] = []
    size = 0
    parent: str | None = None
    clock = 1_772_000_000 + index * 3600

    def emit(record: dict[str, object]) -> None:
        nonlocal size, parent, clock
        clock += 2
        record.update(env, uuid=f"{sid}-{len(lines)}", parentUuid=parent,
                      timestamp=time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(clock)))
        parent = str(record["uuid"])
        text = json.dumps(record, separators=(",", ":"))
        lines.append(text)
        size += len(text) + 1

    turn = 0
    while size < target_bytes:
        turn += 1
        prompt = prose(rng, 30)
        if turn % 7 == 0:
            prompt += f" my key is sk-ant-bench-{rng.getrandbits(64):016x}abcdef"
        emit({"type": "user", "message": {"role": "user", "content": prompt}})
        for step in range(3):
            mid = f"msg_{index}_{turn}_{step}"
            emit({"type": "assistant", "message": {
                "id": mid, "model": "claude-sonnet-4-5", "role": "assistant",
                "content": [{"type": "text", "text": prose(rng, 40)}]}})
            tool_id = f"toolu_{index}_{turn}_{step}"
            tool = rng.choice(["Bash", "Edit", "Read"])
            tool_input = ({"command": f"pytest -q tests/test_{rng.choice(WORDS)}.py"}
                          if tool == "Bash" else {"file_path": f"{PROJECT}/src/"
                                                  f"{rng.choice(WORDS)}.py",
                                                  "old_string": prose(rng, 8),
                                                  "new_string": prose(rng, 8)})
            emit({"type": "assistant", "message": {
                "id": mid, "model": "claude-sonnet-4-5", "role": "assistant",
                "content": [{"type": "tool_use", "id": tool_id, "name": tool,
                             "input": tool_input}]}})
            output = prose(rng, 200)
            emit({"type": "user", "message": {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": output}]},
                "toolUseResult": {"stdout": output, "stderr": "", "interrupted": False}})
    return lines


def generate(store: Path, sessions: int, kb: int) -> float:
    """Write the sessions; their total size in MB."""
    total = 0
    folder = store / "projects" / "-home-bench-shop"
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(sessions):
        text = "\n".join(session_lines(index, kb * 1000)) + "\n"
        (folder / f"{index:08d}-0000-4000-8000-{index:012d}.jsonl").write_text(text)
        total += len(text)
    return total / 1e6


def child(store: Path, limit: int, state: Path) -> None:
    """Harvest the first ``limit`` sessions of the store; print one JSON line of results."""
    folder = store / "projects" / "-home-bench-shop"
    view = Path(tempfile.mkdtemp(prefix="harvest-view-"))
    (view / "projects" / "-home-bench-shop").mkdir(parents=True)
    files = sorted(folder.glob("*.jsonl"))[:limit]
    for path in files:  # a store holding the first ``limit`` sessions only
        (view / "projects" / "-home-bench-shop" / path.name).symlink_to(path)
    megabytes = sum(p.stat().st_size for p in files) / 1e6
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    harvester = Harvester(PROJECT, [ClaudeCodeAdapter()], state_dir=state, scrubber=Scrubber(),
                          environ={"CLAUDE_CONFIG_DIR": str(view)}, home=view, settle_seconds=0)
    started = time.perf_counter()
    sessions = turns = 0
    for session in harvester.iter_sessions():
        sessions += 1
        turns += len(session.turns)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    print(json.dumps({"sessions": sessions, "turns": turns, "mb": megabytes,
                      "seconds": seconds, "rss_before_mb": before * scale / 2**20,
                      "peak_rss_mb": peak * scale / 2**20}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--kb", type=int, default=100, help="size of one session file")
    parser.add_argument("--child", nargs=3, metavar=("STORE", "LIMIT", "STATE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), int(args.child[1]), Path(args.child[2]))
        return
    console = Console()
    with tempfile.TemporaryDirectory(prefix="sleep-harvest-bench-") as tmp:
        store = Path(tmp) / "claude"
        started = time.perf_counter()
        megabytes = generate(store, args.sessions, args.kb)
        console.print(f"wrote {args.sessions} sessions, {megabytes:.1f} MB, in "
                      f"{time.perf_counter() - started:.1f} s")
        table = Table(title="skillgrad sleep: harvest of Claude Code sessions")
        for column in ("sessions", "MB", "turns", "seconds", "MB/s", "RSS before harvest",
                       "peak RSS"):
            table.add_column(column, justify="right")
        for limit in sorted({min(100, args.sessions), args.sessions}):
            out = subprocess.run([sys.executable, __file__, "--child", str(store), str(limit),
                                  str(Path(tmp) / f"state-{limit}")],
                                 check=True, capture_output=True, text=True).stdout
            row = json.loads(out.strip().splitlines()[-1])
            table.add_row(str(row["sessions"]), f"{row['mb']:.1f}", str(row["turns"]),
                          f"{row['seconds']:.2f}", f"{row['mb'] / row['seconds']:.1f}",
                          f"{row['rss_before_mb']:.0f} MB", f"{row['peak_rss_mb']:.0f} MB")
        console.print(table)


if __name__ == "__main__":
    main()
