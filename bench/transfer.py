"""Transfer: a skill learned with one target model, used with another (train cheap, deploy
strong, and the other way round).

For every target model A of ``--models`` and every seed, a normal training run of CONFIG with
``model.target.model=A`` (the optimizer as the config has it). Then, for every model B of
``--models``, the test split is scored with target B twice: with the initial skill, and with
the skill the run on A learned (its best). The table gives, per pair A -> B, both test scores
and the paired bootstrap 95% interval of the gain (per test task, seeds pooled); the diagonal
(A -> A) is the ordinary training result. The lines each learned skill added are printed
below the table, to be read.

    python bench/transfer.py CONFIG --models qwen2.5-coder-0.5b qwen2.5-coder-1.5b
                             [--set key=value ...] [--seeds 1] [--out runs/transfer]

Every run and evaluation is journaled under OUT (training runs resume, evaluations replay
their answered calls): running the command again finishes what was stopped and costs nothing
for what was done. OUT/transfer.json holds the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.evaluate import evaluate_skill
from skillgrad.rundir import RunDir, WorkDir
from skillgrad.runview import load_state, paired_interval, per_task_results
from skillgrad.trainer import build_trainer

KEY = "model.target.model"  # the key that names the target model (--key)


def train(config: Path, overrides: Sequence[str], model: str, seed: int, folder: Path,
          key: str = KEY) -> str:
    """The best skill of a training run of ``config`` with target ``model``, run (or resumed,
    or read back when finished) in ``folder``."""
    run = RunDir(folder)
    if not (folder / "summary.json").exists():
        resolved = load_config(config, [*overrides, f"{key}={model}", f"train.seed={seed}"])
        build_trainer(resolved, folder).fit()
    return run.load_skill(load_state(run).best_hash)


def evaluate(config: Path, overrides: Sequence[str], model: str, skill: str,
             folder: Path, key: str = KEY) -> dict[str, tuple[float, float]]:
    """Per-task (hard, soft) of ``skill`` on the test split with target ``model``."""
    resolved = load_config(config, [*overrides, f"{key}={model}"])
    if not (folder / "eval_summary.json").exists():
        evaluate_skill(resolved, skill, "test", folder)
    found = per_task_results(WorkDir(folder))
    assert found is not None, folder
    return found


def transfer(config: Path, models: Sequence[str], overrides: Sequence[str], seeds: int,
             out: Path, key: str = KEY) -> dict[str, Any]:
    base = load_config(config, list(overrides))
    initial = build_environment(base).initial_skill()
    seed0 = base.config.train.seed
    learned = {(a, k): train(config, overrides, a, seed0 + k,
                             out / f"train-{_name(a)}" / f"seed{k}", key)
               for a in models for k in range(seeds)}
    rows = []
    for b in models:
        before = evaluate(config, overrides, b, initial, out / f"eval-{_name(b)}" / "initial",
                          key)
        for a in models:
            gains: list[float] = []
            after_hard: list[float] = []
            for k in range(seeds):
                after = evaluate(config, overrides, b, learned[a, k],
                                 out / f"eval-{_name(b)}" / f"from-{_name(a)}-seed{k}", key)
                shared = sorted(set(before) & set(after))
                gains += [after[t][0] - before[t][0] for t in shared]
                after_hard.append(sum(after[t][0] for t in shared) / len(shared))
            mean, low, high = paired_interval(gains)
            rows.append({"trained_on": a, "used_on": b, "tasks": len(before),
                         "initial": sum(h for h, _ in before.values()) / len(before),
                         "learned": sum(after_hard) / len(after_hard),
                         "gain": mean, "low": low, "high": high})
    added = {f"{a} seed{k}": [line for line in skill.splitlines()
                              if line.strip() and line not in initial.splitlines()]
             for (a, k), skill in learned.items()}
    return {"config": str(config), "overrides": list(overrides), "seeds": seeds,
            "rows": rows, "added_lines": added}


def _name(model: str) -> str:
    """A model's name as a folder name (a scripted ``module:function`` has a colon)."""
    return "".join(c if c.isalnum() or c in "-._" else "_" for c in model)


def table(result: dict[str, Any]) -> Table:
    out = Table(title=f"transfer on {result['config']}: test exact match (hard), "
                f"{result['seeds']} seed(s)")
    for col in ("trained on", "used on", "test tasks", "initial", "learned", "gain (95% interval)"):
        out.add_column(col, justify="left" if col in ("trained on", "used on") else "right")
    for r in result["rows"]:
        out.add_row(r["trained_on"], r["used_on"], str(r["tasks"]), f"{r['initial']:.3f}",
                    f"{r['learned']:.3f}",
                    f"{r['gain']:+.3f} ({r['low']:+.3f} to {r['high']:+.3f})")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("--models", nargs="+", required=True,
                        help="target models (the embedded catalogue's names), two or more")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/transfer"))
    parser.add_argument("--key", default=KEY,
                        help=f"the config key the models are given to (default: {KEY})")
    args = parser.parse_args(argv)
    if len(args.models) < 2:
        parser.error("--models: give two or more")
    result = transfer(args.config, args.models, args.set, args.seeds, args.out, args.key)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "transfer.json").write_text(json.dumps(result, indent=2) + "\n")
    console = Console(width=max(Console().width, 140))  # model names whole, one line a row
    console.print(table(result))
    for name, lines in result["added_lines"].items():
        console.print(f"learned on {name}: " + ("; ".join(lines) or "(no line added)"),
                      markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
