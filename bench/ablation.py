"""Ablation of the training mechanisms: the full system next to runs with one mechanism off
(no edit budget, no rejected-edit buffer, no slow update and meta skill). Prints test-split
scores and optimizer tokens per variant.

    python bench/ablation.py                                 # examples/ablation, embedded model
    python bench/ablation.py CONFIG --out runs/ablation --set train.num_epochs=3
    python bench/ablation.py --only full,no_edit_budget

Each variant trains into OUT/<variant>; running again resumes unfinished variants and reads
finished ones back. The config's own settings are the full system.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from skillgrad.config import load_config
from skillgrad.trainer import build_trainer

VARIANTS: dict[str, list[str]] = {
    "full": [],
    "no_edit_budget": ["optimizer.lr_control_mode=none"],
    "no_rejected_buffer": ["optimizer.use_rejected_buffer=false"],
    "no_slow_update_meta": ["optimizer.use_slow_update=false", "optimizer.use_meta_skill=false"],
}


def run_variant(config: Path, overrides: list[str], out: Path) -> tuple[dict[str, Any], float]:
    summary_path = out / "summary.json"
    if summary_path.exists():
        return json.loads(summary_path.read_text(encoding="utf-8")), 0.0
    started = time.perf_counter()
    summary = build_trainer(load_config(config, overrides), out).fit()
    return summary, time.perf_counter() - started


def row(name: str, summary: dict[str, Any], seconds: float) -> tuple[str, ...]:
    test = summary["test"]
    opt = summary["models"].get("optimizer", {})
    decisions: dict[str, int] = {}
    for counts in summary["decisions_per_epoch"].values():
        for k, v in counts.items():
            decisions[k] = decisions.get(k, 0) + v
    for u in summary.get("epoch_updates", []):
        if u["slow_update"]:
            decisions["slow " + u["slow_update"]["decision"]] = decisions.get(
                "slow " + u["slow_update"]["decision"], 0) + 1
    accepted = sum(v for k, v in decisions.items() if "accept" in k)
    return (
        name,
        f"{test['initial']['hard']:.3f}",
        f"{test['best']['hard']:.3f}",
        f"{test['final']['hard']:.3f}",
        f"{test['best']['soft']:.3f}",
        f"{accepted}/{sum(decisions.values())}",
        str(opt.get("calls", 0)),
        str(opt.get("prompt_tokens", 0) + opt.get("completion_tokens", 0)),
        f"{seconds:.0f}" if seconds else "(done before)",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", type=Path,
                        default=Path(__file__).parent.parent / "examples/ablation/config.yaml")
    parser.add_argument("--out", type=Path, default=Path("runs/ablation"))
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE for every variant")
    parser.add_argument("--only", default="", help="comma-separated variants to run")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant {unknown[0]!r} (allowed: {', '.join(VARIANTS)})")
    columns = ("variant", "test initial", "test best", "test final", "best soft",
               "accepted / decisions", "optimizer calls", "optimizer tokens", "seconds")
    table = Table(title=f"ablation: {args.config}")
    for col in columns:
        table.add_column(col, justify="right")
    print("  ".join(columns), flush=True)
    for name in names:
        summary, seconds = run_variant(args.config, [*args.set, *VARIANTS[name]], args.out / name)
        cells = row(name, summary, seconds)
        print("  ".join(cells), flush=True)  # each row as soon as its run is done
        table.add_row(*cells)
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
