"""Generate the webshop environment's bundled catalogue from its templates.

    python tools/make_webshop_catalogue.py --seed 0 --per-type 100 --goals-per-type 34

writes ``items_shuffle.json.gz`` (products), ``items_ins_v2.json.gz`` (attributes) and
``items_human_ins.json.gz`` (instructions) in WebShop's published layout into
``src/skillgrad/envs/webshop/data/``. The output is a pure function of the arguments: running it
again rewrites the same bytes (the JSON inside is the same on any machine; the gzip bytes
can differ with the zlib build). ``--check`` compares the JSON with a fresh generation
instead of writing, and exits 1 on a difference. Needs rank-bm25 (the generator searches
for every goal to keep only reachable ones).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import logging
import sys
import tempfile
from pathlib import Path

from skillgrad.envs.webshop.generate import FILES, write_catalogue

OUT = Path(__file__).resolve().parents[1] / "src/skillgrad/envs/webshop/data"
log = logging.getLogger("make_webshop_catalogue")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--per-type", type=int, default=100, help="products per product type")
    parser.add_argument("--goals-per-type", type=int, default=34,
                        help="instructions per product type")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true",
                        help="compare with the files in --out instead of writing them")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not args.check:
        for path in write_catalogue(args.out, args.seed, args.per_type, args.goals_per_type):
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            log.info("wrote %s (%d bytes, sha256 %s)", path, path.stat().st_size, digest)
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        made = write_catalogue(Path(scratch), args.seed, args.per_type, args.goals_per_type)
        differ = [name for name, path in zip(FILES, made, strict=True)
                  if not (args.out / name).is_file()
                  or gzip.decompress((args.out / name).read_bytes())
                  != gzip.decompress(path.read_bytes())]
    for name in differ:
        log.error("%s differs from a fresh generation", args.out / name)
    if not differ:
        log.info("the files in %s are what the generator makes", args.out)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
