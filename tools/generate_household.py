"""Generate the household environment's games from the room layouts shipped with ``alfworld``
(0.4.2, MIT) and solve each with the engine's planner.

    pip install alfworld==0.4.2
    python tools/generate_household.py --seed 0 --per-type 10

writes ``src/skillgrad/envs/household/data/games.jsonl`` (one game per line: id, room,
task_type, params, goal, seed, walkthrough, pddl_problem). The output is a pure function of
the seed, the per-type count and the installed alfworld version. A game the planner cannot solve
stops the run with an error naming the seed.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections import Counter
from pathlib import Path

from skillgrad.envs.household.generate import TASK_TYPES, generate_games

OUT = Path(__file__).resolve().parents[1] / "src/skillgrad/envs/household/data/games.jsonl"
log = logging.getLogger("generate_household")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-type", type=int, default=10, help="games per task type")
    parser.add_argument("--max-receptacles", type=int, default=12)
    parser.add_argument("--task-types", nargs="*", default=list(TASK_TYPES))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    games = generate_games(args.seed, args.per_type, args.task_types, args.max_receptacles)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as f:
        for game in games:
            f.write(json.dumps(game, sort_keys=True) + "\n")
    counts = Counter(g["task_type"] for g in games)
    log.info("wrote %d games in %d rooms to %s: %s", len(games), len({g["room"] for g in games}),
             args.out, dict(counts))


if __name__ == "__main__":
    main()
