"""Test-split scores of a built-in environment on the embedded model: with no skill (an empty
system message, plus the tool protocol where the environment has tools) and with the
environment's shipped initial skill.

    python bench/env_scores.py open_qa [--limit N] [--model qwen2.5-coder-1.5b]
    python bench/env_scores.py math --limit 8 --set env.dataset=gsm_symbolic
    python bench/env_scores.py math --skill shipped --dump results.jsonl   # one pass, kept

``--dump`` writes one JSON line per task (skill, task, hard, soft, reason, answer, tokens) for
reading the failures afterwards.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.models.embedded import EmbeddedBackend, EmbeddedOptions
from skillgrad.stages.rollout import rollout, score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env")
    parser.add_argument("--limit", type=int, default=None, help="first N test tasks only")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--set", action="append", default=[], help="env.KEY=VALUE override")
    parser.add_argument("--skill", choices=("both", "none", "shipped"), default="both")
    parser.add_argument("--dump", type=Path, default=None, help="per-task results as JSON lines")
    args = parser.parse_args()
    resolved = load_config(None, [f"env.name={args.env}", *args.set])
    env = build_environment(resolved)
    sizes = {s: len(env.tasks(s)) for s in ("train", "val", "test")}  # type: ignore[arg-type]
    tasks = env.tasks("test")[: args.limit]  # type: ignore[arg-type]
    model = EmbeddedBackend.create(EmbeddedOptions(model=args.model), Path("."))
    table = Table(title=f"{args.env}: train/val/test = {sizes['train']}/{sizes['val']}/"
                  f"{sizes['test']}; {args.model} on {len(tasks)} test tasks")
    for col in ("skill", "hard (EM)", "soft (F1)", "mean turns", "seconds"):
        table.add_column(col, justify="right")
    passes = [("none", ""), ("shipped initial", env.initial_skill())]
    if args.skill != "both":
        passes = [p for p in passes if p[0].startswith(args.skill)]
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    for label, skill in passes:
        started = time.perf_counter()
        results = rollout(env, tasks, skill, model)
        if dump is not None:
            for r in results:
                dump.write(json.dumps({
                    "skill": label, "task": r.task_id, "hard": r.hard, "soft": r.soft,
                    "reason": r.reason, "answer": r.answer,
                    "completion_tokens": r.usage.completion_tokens}) + "\n")
        s = score(results, "test", label)
        turns = sum(r.turns for r in results) / len(results)
        row = (label, f"{s.hard:.3f}", f"{s.soft:.3f}", f"{turns:.2f}",
               f"{time.perf_counter() - started:.0f}")
        print("  ".join(row), flush=True)  # a long run shows each row as soon as it is done
        table.add_row(*row)
    if dump is not None:
        dump.close()
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
