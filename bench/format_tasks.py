"""A question-answer set of a kind no bundled example holds, to check training on data of one's
own the way a new user would: dates, each to be written in the format its question names.

Half the questions restate a date in another format, half ask for the date some days after one;
the format asked for is one of ``YYYY-MM-DD``, ``DD/MM/YYYY`` and ``Month D, YYYY``, chosen per
question, so no one fixed format is right for every question. Generation is seeded, so the same
command writes the same file.

    python bench/date_tasks.py OUT_DIR [--n 120] [--seed 0]

OUT_DIR gets ``data.jsonl`` and a ``config.yaml``: the ``qa`` environment with its own initial
skill, and the quickstart's training settings (four steps of six questions, sized for 2 cores).
Nothing in it is tuned to dates. Then, for example:

    python bench/compare.py OUT_DIR/config.yaml --seeds 3 --methods initial,skillgrad
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
from pathlib import Path

FORMATS = {
    "YYYY-MM-DD": lambda d: d.strftime("%Y-%m-%d"),
    "DD/MM/YYYY": lambda d: d.strftime("%d/%m/%Y"),
    "Month D, YYYY": lambda d: f"{d.strftime('%B')} {d.day}, {d.year}",
}


CONFIG = """\
env:
  name: qa
  data_path: data.jsonl
  max_tokens: 48
train:
  num_epochs: 1
  batch_size: 6
  steps_per_epoch: 4
gradient:
  minibatch_size: 6
  failure_only: true
  analyst_workers: 1
  max_trajectory_chars: 800
  drop_riders: true
optimizer:
  learning_rate: 2
  min_learning_rate: 1
  max_tokens: 400
"""


def task(rng: random.Random, n: int) -> dict[str, str]:
    start = dt.date(2020, 1, 1) + dt.timedelta(days=rng.randrange(0, 7 * 365))
    shown_as, asked = rng.sample(sorted(FORMATS), 2)
    given = FORMATS[shown_as](start)
    if rng.random() < 0.5:
        question = f"Write the date {given} in the format {asked}."
        answer = FORMATS[asked](start)
    else:
        days = rng.randint(2, 20)
        question = f"What is the date {days} days after {given}? Give it in the format {asked}."
        answer = FORMATS[asked](start + dt.timedelta(days=days))
    return {"id": f"date-{n:03d}", "question": question, "answer": answer}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--n", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "data.jsonl").open("w") as f:
        for n in range(args.n):
            f.write(json.dumps(task(rng, n)) + "\n")
    (args.out / "config.yaml").write_text(CONFIG)
    print(f"{args.n} tasks in {args.out / 'data.jsonl'}; config: {args.out / 'config.yaml'}")


if __name__ == "__main__":
    main()
