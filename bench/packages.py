"""Package training against single-file training: the same skill, trained as an Agent Skills
folder (SKILL.md and its reference files, each editable on its own) and as one document that
holds the same words, with the same config, target and optimizer.

    python bench/packages.py CONFIG PACKAGE_FOLDER [--set key=value ...] [--seeds 1]
                             [--out runs/packages]

Arms, each scored on the config's test split (the paired bootstrap 95% interval of each gain
is per test task, seeds pooled):

  initial   the package as it is (env.skill_init = PACKAGE_FOLDER)
  package   a training run from the folder (train.seed = the config's seed + k)
  single    a training run from one file: SKILL.md, then each other file under a heading of
            its path (the words the target sees inlined, as one document)

The table gives each arm's test score, its gain over the initial package, the target calls
its training used, and package against single. Below it: the files each package run changed,
and how often each file beside SKILL.md was read (where the target could open them: an
environment with tools, or an agent target; elsewhere every file is inlined and nothing is
counted).

Every run and evaluation is journaled under OUT: running the command again finishes what was
stopped and costs nothing for what was done. OUT/packages.json holds the result.
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

from skillgrad.config import load_config
from skillgrad.evaluate import evaluate_skill
from skillgrad.package import read_folder, split_package
from skillgrad.rundir import RunDir, WorkDir, read_jsonl
from skillgrad.runview import load_state, paired_interval, per_task_results
from skillgrad.trainer import build_trainer


def single_file(package_text: str) -> str:
    """The package as one document: SKILL.md, then each other file under a heading of its
    path (the same words, one file)."""
    package = split_package(package_text)
    parts = [package.main.rstrip("\n")]
    for path, text in package.files.items():
        parts += ["", f"## {path}", "", text.strip("\n")]
    return "\n".join(parts) + "\n"


def train(config: Path, overrides: Sequence[str], skill_init: Path, seed: int,
          folder: Path) -> tuple[str, int, RunDir]:
    """(best skill, target calls used, run) of a training run from ``skill_init``, run (or
    resumed, or read back when finished) in ``folder``."""
    run = RunDir(folder)
    if not (folder / "summary.json").exists():
        resolved = load_config(config, [*overrides, f"env.skill_init={skill_init}",
                                        f"train.seed={seed}"])
        build_trainer(resolved, folder).fit()
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    return run.load_skill(load_state(run).best_hash), summary["models"]["target"]["calls"], run


def evaluate(config: Path, overrides: Sequence[str], skill: str,
             folder: Path) -> dict[str, tuple[float, float]]:
    """Per-task (hard, soft) of ``skill`` on the test split."""
    if not (folder / "eval_summary.json").exists():
        evaluate_skill(load_config(config, list(overrides)), skill, "test", folder)
    found = per_task_results(WorkDir(folder))
    assert found is not None, folder
    return found


def reads(folders: Sequence[Path]) -> dict[str, int] | None:
    """Over the rollouts under ``folders`` that could open the package's files: how many
    (``rollouts``) and how many opened each (None: none could)."""
    counts: dict[str, int] = {}
    for folder in folders:
        for path in sorted(folder.rglob("rollouts.jsonl")):
            for row in read_jsonl(path):
                opened = (row.get("metadata") or {}).get("references_read")
                if not isinstance(opened, dict):
                    continue
                counts["rollouts"] = counts.get("rollouts", 0) + 1
                for name, done in opened.items():
                    counts[name] = counts.get(name, 0) + bool(done)
    return counts or None


def _gain(after: dict[str, tuple[float, float]],
          before: dict[str, tuple[float, float]]) -> list[float]:
    return [after[t][0] - before[t][0] for t in sorted(set(after) & set(before))]


def _mean(scores: dict[str, tuple[float, float]]) -> float:
    return sum(h for h, _ in scores.values()) / len(scores) if scores else 0.0


def compare_packages(config: Path, package: Path, overrides: Sequence[str], seeds: int,
                     out: Path) -> dict[str, Any]:
    package = package.resolve()
    text = read_folder(package)
    if not split_package(text).files:
        raise SystemExit(f"{package}: holds SKILL.md alone; a package to compare has other "
                         "files beside it")
    out.mkdir(parents=True, exist_ok=True)
    flat = out / "single-file-initial.md"
    flat.write_text(single_file(text), encoding="utf-8")
    seed0 = load_config(config, list(overrides)).config.train.seed
    initial = evaluate(config, overrides, text, out / "eval" / "initial")
    arms: dict[str, list[dict[str, Any]]] = {"package": [], "single": []}
    for k in range(seeds):
        for arm, start in (("package", package), ("single", flat)):
            best, calls, run = train(config, overrides, start, seed0 + k,
                                     out / f"train-{arm}" / f"seed{k}")
            scores = evaluate(config, overrides, best, out / "eval" / f"{arm}-seed{k}")
            arms[arm].append({"seed": k, "skill": best, "target_calls": calls,
                              "test": scores, "run": run.root})
    rows = [{"arm": "initial", "test": _mean(initial), "gain": None, "calls": None}]
    for arm, done in arms.items():
        gains = [g for r in done for g in _gain(r["test"], initial)]
        mean, low, high = paired_interval(gains)
        rows.append({"arm": arm, "test": sum(_mean(r["test"]) for r in done) / len(done),
                     "gain": mean, "low": low, "high": high,
                     "calls": [r["target_calls"] for r in done]})
    versus = [g for p, s in zip(arms["package"], arms["single"], strict=True)
              for g in _gain(p["test"], s["test"])]
    mean, low, high = paired_interval(versus)
    changed = {}
    for r in arms["package"]:
        before, after = split_package(text), split_package(r["skill"])
        changed[f"seed{r['seed']}"] = [
            path for path in dict.fromkeys([*before.paths, *after.paths])
            if before.file(path) != after.file(path)]
    return {
        "config": str(config), "package": str(package), "overrides": list(overrides),
        "seeds": seeds, "test_tasks": len(initial), "rows": rows,
        "package_vs_single": {"gain": mean, "low": low, "high": high},
        "files_changed": changed,
        "reads": {"package training": reads([r["run"] / "steps" for r in arms["package"]]),
                  "package test": reads([out / "eval" / f"package-seed{r['seed']}"
                                         for r in arms["package"]]),
                  "initial test": reads([out / "eval" / "initial"])},
        "skills": {f"{arm} seed{r['seed']}": r["skill"] for arm, done in arms.items()
                   for r in done},
    }


def table(result: dict[str, Any]) -> Table:
    out = Table(title=f"packages on {result['config']}: test exact match (hard), "
                f"{result['test_tasks']} test tasks, {result['seeds']} seed(s)")
    for col in ("arm", "test", "gain over initial (95% interval)", "target calls"):
        out.add_column(col, justify="left" if col == "arm" else "right")
    for r in result["rows"]:
        gain = "-" if r["gain"] is None else \
            f"{r['gain']:+.3f} ({r['low']:+.3f} to {r['high']:+.3f})"
        calls = "-" if r["calls"] is None else ", ".join(str(c) for c in r["calls"])
        out.add_row(r["arm"], f"{r['test']:.3f}", gain, calls)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", type=Path)
    parser.add_argument("package", type=Path, help="a skill folder: SKILL.md and other files")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/packages"))
    args = parser.parse_args(argv)
    result = compare_packages(args.config, args.package, args.set, args.seeds, args.out)
    (args.out / "packages.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    console = Console(width=max(Console().width, 140))
    console.print(table(result))
    v = result["package_vs_single"]
    console.print(f"package - single: {v['gain']:+.3f} ({v['low']:+.3f} to {v['high']:+.3f})",
                  markup=False)
    for seed, paths in result["files_changed"].items():
        console.print(f"package {seed} changed: {', '.join(paths) or 'nothing'}", markup=False)
    for scope, counts in result["reads"].items():
        if counts is None:
            console.print(f"{scope}: no rollout could open the files (they were inlined)",
                          markup=False)
            continue
        total = counts.pop("rollouts")
        console.print(f"{scope}: of {total} rollouts, " + ", ".join(
            f"{path} read in {n}" for path, n in counts.items()), markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
