"""Scale of the training loop: memory over a long run, and the cost of a step against the size
of the data set. Scripted models (``skillgrad.testing``'s reader, and an optimizer that
proposes a new rule at every step, so that every step evaluates a candidate on the selection
split), so the numbers are the loop's own: loading, batching, rollout bookkeeping, the gate,
the checkpoint and the run directory's writes.

    python bench/scale.py                                  # both sections
    python bench/scale.py --section memory --steps 200     # RSS at step 20 and at the last
    python bench/scale.py --section data --sizes 1000 10000 100000 --selection 5000

memory: one run of ``--steps`` steps (two epochs) with a small batch; RSS (resident memory) at
step 20 and at the last step, the growth between them, the size of the checkpoint and the run
directory, and how many requests the scripted models hold (``ScriptedModel.calls`` keeps the
latest 100). data: data sets of 1k, 10k and 100k training tasks and 5,000 selection tasks,
written as a ``split_dir`` of JSONL files the way a user keeps them, trained with the same
batch size and selection cap; load time (config to trainer), the mean time of a step (the
first excluded: it also evaluates the initial skill), RSS after loading and at the end, and
the checkpoint's size. Each measurement runs in a fresh Python process, so its RSS is that
run's alone; the data sets are generated into a temporary folder (``--keep`` keeps it).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from skillgrad.callbacks import TrainerCallback
from skillgrad.records import StepRecord
from skillgrad.testing import CONCISE_RULE, YEAR_RULE, scripted_optimizer

SKILL = "# Company facts\n\nAnswer the question about the company from its description.\n"
FOUNDERS = ("Ilse Fenthorpe", "Marek Odell", "Ruth Calloway", "Tomas Brink", "Ada Quill")
TOWNS = ("Falwell", "Selby", "Orrin", "Maddox", "Kestrel Bay")


# ----------------------------------------------------------------------------- data


def record(prefix: str, i: int) -> dict[str, Any]:
    """One QA record about a made-up company (about 450 characters of context)."""
    name = f"{prefix.capitalize()} Works {i}"
    year, staff = 1850 + i % 170, 10 + (i * 37) % 9000
    founder, town = FOUNDERS[i % len(FOUNDERS)], TOWNS[(i // 5) % len(TOWNS)]
    context = (f"{name} is a maker of kitchen ceramics founded in {year} by {founder} in the "
               f"town of {town}. It moved its headquarters twice and still runs {i % 9 + 1} "
               f"workshops, where it employs {staff} people. Its catalogue lists plates, "
               f"bowls and jugs in {3 + i % 12} glazes; its logo shows a teal lynx on a grey "
               f"field, and its records are kept in the town archive of {town}.")
    kind, question, answer = (
        ("year", f"In what year was {name} founded?", str(year)),
        ("name", f"Who founded {name}?", founder),
        ("count", f"How many people does {name} employ?", str(staff)),
    )[i % 3]
    return {"id": f"{prefix}-{i:06d}", "question": question, "answer": [answer],
            "context": context, "kind": kind}


def write_jsonl(path: Path, rows: Any) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")


def write_dataset(folder: Path, n_train: int, n_val: int, n_test: int) -> None:
    """``folder/data/{train,val,test}.jsonl``; ``gold.jsonl`` is what the scripted reader
    knows: the selection and test tasks, not the training tasks (so every training batch has
    failures to reflect on, and the reader's memory does not grow with the training set)."""
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    write_jsonl(data / "train.jsonl", (record("train", i) for i in range(n_train)))
    write_jsonl(data / "val.jsonl", (record("val", i) for i in range(n_val)))
    write_jsonl(data / "test.jsonl", (record("test", i) for i in range(n_test)))
    write_jsonl(folder / "gold.jsonl", [*(record("val", i) for i in range(n_val)),
                                        *(record("test", i) for i in range(n_test))])
    (folder / "skill.md").write_text(SKILL, encoding="utf-8")


def write_config(folder: Path, *, batch: int, selection: int, epochs: int,
                 steps_per_epoch: int) -> Path:
    cfg = {
        "model": {
            "target": {"backend": "scripted", "function": "skillgrad.testing:make_reader",
                       "function_args": {"data": "gold.jsonl"}},
            "optimizer": {"backend": "scripted", "function": "scale:optimizer"},
        },
        "env": {"name": "qa", "split_mode": "split_dir", "split_dir": "data",
                "skill_init": "skill.md"},
        "train": {"num_epochs": epochs, "batch_size": batch, "steps_per_epoch": steps_per_epoch,
                  "seed": 3},
        "gradient": {"minibatch_size": batch, "analyst_workers": 1},
        "optimizer": {"learning_rate": 1, "min_learning_rate": 1, "lr_scheduler": "constant"},
        "evaluation": {"sel_env_num": selection, "gate_test": "strict", "eval_test": False},
    }
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- models


def _failures(skill: str, tasks: str, prompt: str) -> dict[str, Any]:
    """The reader's two format rules while they are missing; then a new, harmless rule named
    after the failed tasks shown, so that every step has a fresh candidate for the gate."""
    edits = []
    if "The answer to the question" in tasks and CONCISE_RULE not in skill:
        edits.append({"op": "append", "content": CONCISE_RULE, "support": 3})
    if re.search(r"\bin \d{4}\b", tasks) and YEAR_RULE not in skill:
        edits.append({"op": "append", "content": YEAR_RULE, "support": 2})
    if not edits:
        tag = hashlib.sha1(tasks.encode()).hexdigest()[:8]
        edits.append({"op": "append", "content": f"Check the answer once more (note {tag}).",
                      "support": 1})
    return {"reasoning": "the failures shown", "edits": edits}


optimizer = scripted_optimizer(_failures)
"""The benchmark's optimizer (``function: scale:optimizer``; ``bench/`` is on the path of a
script run from it)."""


# ----------------------------------------------------------------------------- measuring


def rss_mb() -> float:
    """Resident memory of this process now, in MiB (Linux ``/proc``)."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Sampler(TrainerCallback):
    """RSS, step time and the checkpoint's size after every step (it is written by then)."""

    def __init__(self, checkpoint: Path) -> None:
        self.checkpoint = checkpoint
        self.rss: dict[int, float] = {}
        self.seconds: dict[int, float] = {}
        self.checkpoint_kb: dict[int, float] = {}

    def on_step_end(self, record: StepRecord) -> None:
        self.rss[record.global_step] = rss_mb()
        self.seconds[record.global_step] = record.seconds
        self.checkpoint_kb[record.global_step] = self.checkpoint.stat().st_size / 1024


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def train(folder: Path, config: Path) -> dict[str, Any]:
    """Build and train one run in ``folder/run``; what the sections report."""
    from skillgrad.config import load_config
    from skillgrad.trainer import build_trainer

    run = folder / "run"
    sampler = Sampler(run / "checkpoint.json")
    before = rss_mb()
    started = time.perf_counter()
    trainer = build_trainer(load_config(config, []), run, callbacks=[sampler])
    load = time.perf_counter() - started
    loaded = rss_mb()
    trainer.fit()
    # The scripted models keep their latest requests (ScriptedModel.calls).
    held = sum(len(getattr(c.model, "calls", ())) for c in (trainer.target, trainer.optimizer))
    return {"load_s": load, "rss_start": before, "rss_loaded": loaded, "rss": sampler.rss,
            "seconds": sampler.seconds, "checkpoints": sampler.checkpoint_kb, "peak": peak_mb(),
            "checkpoint_kb": (run / "checkpoint.json").stat().st_size / 1024,
            "run_mb": folder_mb(run), "decisions": _decisions(run), "calls_held": held}


def _decisions(run: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path in sorted((run / "steps").glob("*/record.json")):
        decision = json.loads(path.read_text(encoding="utf-8"))["decision"]
        counts[decision] = counts.get(decision, 0) + 1
    return counts


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    folder = Path(spec["folder"])
    shutil.rmtree(folder / "run", ignore_errors=True)  # a kept folder is trained afresh
    write_dataset(folder, spec["train"], spec["val"], spec["test"])
    config = write_config(folder, batch=spec["batch"], selection=spec["selection"],
                          epochs=spec["epochs"], steps_per_epoch=spec["steps_per_epoch"])
    return train(folder, config)


def in_fresh_process(spec: dict[str, Any]) -> dict[str, Any]:
    """``worker(spec)`` in a new interpreter, so that its RSS is this run's alone."""
    done = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the measurement {spec} failed:\n{done.stderr[-4000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    for key in ("rss", "seconds", "checkpoints"):  # JSON made the step numbers strings
        out[key] = {int(k): v for k, v in out[key].items()}
    return out


# ----------------------------------------------------------------------------- sections


def memory(console: Console, root: Path, steps: int, batch: int, selection: int) -> None:
    epochs = 2
    spec = {"folder": str(root / "memory"), "train": 2000, "val": 500, "test": 50,
            "batch": batch, "selection": selection, "epochs": epochs,
            "steps_per_epoch": steps // epochs}
    started = time.perf_counter()
    out = in_fresh_process(spec)
    wall = time.perf_counter() - started
    rss = out["rss"]
    last = max(rss)
    marks = sorted({1, 20, *range(50, last, 50), last} & set(rss))
    table = Table(title=f"memory: {last} steps, batch {batch}, selection cap {selection}, "
                        f"{epochs} epochs ({wall:.0f} s)")
    for col in ("step", "RSS MiB", "vs step 20", "step s", "checkpoint KiB"):
        table.add_column(col, justify="right")
    for s in marks:
        table.add_row(str(s), f"{rss[s]:.1f}", f"{100 * (rss[s] / rss[20] - 1):+.1f} %"
                      if 20 in rss else "-", f"{out['seconds'][s]:.3f}",
                      f"{out['checkpoints'][s]:.0f}")
    console.print(table)
    growth = 100 * (rss[last] / rss[20] - 1) if 20 in rss else float("nan")
    console.print(f"RSS step 20 -> step {last}: {rss.get(20, float('nan')):.1f} -> "
                  f"{rss[last]:.1f} MiB ({growth:+.1f} %); peak {out['peak']:.1f} MiB; run "
                  f"directory {out['run_mb']:.1f} MiB; decisions {out['decisions']}; requests "
                  f"held by the scripted models at the end: {out['calls_held']:,}")


def data_size(console: Console, root: Path, sizes: list[int], selection_tasks: int,
              batch: int, selection: int, steps: int) -> None:
    table = Table(title=f"data size: {selection_tasks:,} selection tasks, batch {batch}, "
                        f"selection cap {selection}, {steps} steps")
    for col in ("train tasks", "data MiB", "load s", "step 1 s", "step s mean",
                "step s median", "RSS loaded MiB", "RSS end MiB", "peak MiB",
                "checkpoint KiB"):
        table.add_column(col, justify="right")
    for n in sizes:
        folder = root / f"data-{n}"
        spec = {"folder": str(folder), "train": n, "val": selection_tasks, "test": 50,
                "batch": batch, "selection": selection, "epochs": 1, "steps_per_epoch": steps}
        out = in_fresh_process(spec)
        times = [v for _, v in sorted(out["seconds"].items())]
        later = times[1:] or times  # the first also evaluates the initial skill
        table.add_row(f"{n:,}", f"{folder_mb(folder / 'data'):.1f}", f"{out['load_s']:.2f}",
                      f"{times[0]:.3f}", f"{statistics.mean(later):.3f}",
                      f"{statistics.median(later):.3f}", f"{out['rss_loaded']:.1f}",
                      f"{out['rss'][max(out['rss'])]:.1f}", f"{out['peak']:.1f}",
                      f"{out['checkpoint_kb']:.0f}")
    console.print(table)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--section", choices=("memory", "data", "all"), default="all")
    ap.add_argument("--steps", type=int, default=200, help="steps of the memory run")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--selection-cap", type=int, default=50, help="evaluation.sel_env_num")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--selection", type=int, default=5000, help="selection tasks generated")
    ap.add_argument("--data-steps", type=int, default=20, help="steps per data-size run")
    ap.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return
    console = Console(width=max(Console().width, 130))
    with tempfile.TemporaryDirectory(prefix="skillgrad-scale-") as tmp:
        root = args.keep or Path(tmp)
        if args.section in ("memory", "all"):
            memory(console, root, args.steps, args.batch, args.selection_cap)
        if args.section in ("data", "all"):
            data_size(console, root, args.sizes, args.selection, args.batch,
                      args.selection_cap, args.data_steps)


if __name__ == "__main__":
    main()
