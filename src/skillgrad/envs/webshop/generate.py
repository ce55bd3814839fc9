"""Generating the bundled catalogue from templates (the data-set builder of ``webshop``).

Everything is a pure function of the seed: for each of the 30 product types of
:mod:`.templates`, ``per_type`` products (a made-up brand, 3-5 attributes of the type, a
subset of each option kind's values, a price in the type's range, a description, bullet
points and a few reviews), then ``goals_per_type`` instructions, each written for one
product from 1-3 of its attributes and one value of 1-2 of its option kinds. The files are
written in WebShop's published layout, so the environment reads them with the same loader as
WebShop's own data. A goal is kept only if searching its instruction finds its product within
the first ``REACHABLE_PAGES`` result pages.
"""

from __future__ import annotations

import gzip
import itertools
import json
import random
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from skillgrad.envs.webshop.catalogue import Instruction, make_goals, parse_products
from skillgrad.envs.webshop.engine import PER_PAGE, SearchIndex
from skillgrad.envs.webshop.reward import MATCH_ABOVE, normalize_color, token_set_ratio
from skillgrad.envs.webshop.templates import (
    BRAND_ENDINGS,
    BRAND_SYLLABLES,
    FILLERS,
    OPENERS,
    OPTION_PHRASES,
    REVIEW_BODIES,
    REVIEW_TITLES,
    TYPES,
    ProductType,
)

REACHABLE_PAGES = 2
FILES = ("items_shuffle.json.gz", "items_ins_v2.json.gz", "items_human_ins.json.gz")


def check_templates(types: Sequence[ProductType] = TYPES) -> None:
    """Raise ValueError when two attributes of a type, or two values of one option kind,
    match each other under the reward's fuzzy test."""
    for kind in types:
        groups = [("attribute", list(kind.attributes))] + [
            (f"{name} value", [normalize_color(v) for v in values])
            for name, values in kind.options]
        for label, values in groups:
            for a, b in itertools.combinations(values, 2):
                if token_set_ratio(a, b) > MATCH_ABOVE:
                    raise ValueError(f"{kind.query}: {label}s {a!r} and {b!r} match")


def brands(rng: random.Random, n: int) -> list[str]:
    names: set[str] = set()
    while len(names) < n:
        parts = rng.sample(BRAND_SYLLABLES, rng.choice((2, 3)))
        names.add(("".join(parts) + rng.choice(BRAND_ENDINGS)).capitalize())
    return sorted(names)


def _asin(rng: random.Random, taken: set[str]) -> str:
    while True:
        asin = "B0" + "".join(rng.choices(string.ascii_uppercase + string.digits, k=8))
        if asin not in taken:
            taken.add(asin)
            return asin


def _join(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def product_record(kind: ProductType, rng: random.Random, brand: str,
                   asin: str) -> tuple[dict[str, Any], list[str]]:
    """One product in WebShop's products layout, and its attributes."""
    attributes = rng.sample(kind.attributes, rng.randint(3, min(5, len(kind.attributes))))
    shown = attributes[: rng.randint(1, 2)]
    fillers = rng.sample(FILLERS[kind.category], 4)
    low, high = kind.price
    price = rng.randint(low, high) + 0.99
    pricing = f"${price:.2f}"
    if rng.random() < 0.1:  # some products are sold at a range of prices, as in WebShop
        pricing += f" - ${price + rng.randint(2, 12):.2f}"
    options = {}
    for name, values in kind.options:
        chosen = set(rng.sample(values, rng.randint(2, len(values))))
        options[name] = [{"value": v, "image": None} for v in values if v in chosen]
    reviews = [{"title": rng.choice(REVIEW_TITLES), "score": rng.choice((2, 3, 4, 4, 5, 5)),
                "body": rng.choice(REVIEW_BODIES)} for _ in range(rng.choice((0, 1, 2, 3)))]
    record = {
        "asin": asin,
        "name": f"{brand} {' '.join(a.title() for a in shown)} {kind.title}",
        "full_description": f"{brand} {kind.title.lower()}: {fillers[0]}. "
                            f"{fillers[1].capitalize()}. Key features: {_join(attributes)}.",
        "small_description": [f"{a.upper()} - {fillers[2 + n % 2]}"
                              for n, a in enumerate(attributes)] + [fillers[3].capitalize()],
        "pricing": pricing, "customization_options": options, "category": kind.category,
        "query": kind.query, "product_category": kind.path, "reviews": reviews,
    }
    _check_text(kind, record, attributes)
    return record, attributes


def _check_text(kind: ProductType, record: dict[str, Any], attributes: list[str]) -> None:
    """No attribute the product lacks may appear in its text: the reward would credit it."""
    texts = [record["name"].lower(), record["full_description"].lower(),
             " ".join(record["small_description"]).lower()]
    for other in set(kind.attributes) - set(attributes):
        if any(other in text for text in texts):
            raise ValueError(f"{record['asin']} ({kind.query}): its text mentions "
                             f"{other!r}, which it lacks")


def instruction_record(kind: ProductType, product: dict[str, Any], attributes: list[str],
                       rng: random.Random) -> dict[str, Any]:
    """An instruction for ``product`` in WebShop's human-instructions layout."""
    wanted = rng.sample(attributes, rng.choice((1, 2, 2, 3)))
    kinds = list(product["customization_options"].items())
    picked = kinds[:1] + [k for k in kinds[1:] if rng.random() < 0.6]
    options = [(name, rng.choice(values)["value"]) for name, values in picked]
    article = "" if kind.plural else ("an " if kind.query[0] in "aeio" else "a ")
    verb = "are" if kind.plural else "is"
    first = next((a for a in wanted if not a.startswith("for ")), None)
    if first is not None and rng.random() < 0.5:
        rest = [a for a in wanted if a != first]
        body = f"{article}{first} {kind.query}" + (f" that {verb} {_join(rest)}" if rest else "")
    else:
        body = f"{article}{kind.query} that {verb} {_join(wanted)}"
    asks = [rng.choice(OPTION_PHRASES[name]).format(value) for name, value in options]
    text = f"{rng.choice(OPENERS)} {body}" + (f", {' and '.join(asks)}" if asks else "")
    return {"instruction": text, "instruction_attributes": wanted,
            "instruction_options": [value for _, value in options]}


def generate(seed: int = 0, per_type: int = 100, goals_per_type: int = 34
             ) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The three files' contents: products, attributes, human instructions."""
    check_templates()
    rng = random.Random(f"{seed}|brands")
    names = brands(rng, 60)
    taken: set[str] = set()
    records: list[dict[str, Any]] = []
    attributes: dict[str, list[str]] = {}
    for kind in TYPES:
        for n in range(per_type):
            made = random.Random(f"{seed}|{kind.query}|{n}")
            record, attrs = product_record(kind, made, made.choice(names), _asin(made, taken))
            records.append(record)
            attributes[record["asin"]] = attrs
    random.Random(f"{seed}|order").shuffle(records)  # WebShop's file is shuffled too
    instructions = _instructions(seed, records, attributes, goals_per_type)
    return records, {a: {"attributes": v} for a, v in attributes.items()}, instructions


def _instructions(seed: int, records: list[dict[str, Any]], attributes: dict[str, list[str]],
                  goals_per_type: int) -> dict[str, Any]:
    """Goals for ``goals_per_type`` products of each type whose instruction search finds
    them within :data:`REACHABLE_PAGES` pages."""
    products = parse_products(records, Path("generated"),
                              {a: tuple(v) for a, v in attributes.items()})
    index = SearchIndex(products)
    by_asin = {p.asin: p for p in products}
    raw = {r["asin"]: r for r in records}
    out: dict[str, Any] = {}
    for kind in TYPES:
        candidates = sorted(r["asin"] for r in records if r["query"] == kind.query)
        random.Random(f"{seed}|goals|{kind.query}").shuffle(candidates)
        kept = 0
        for asin in candidates:
            entry = instruction_record(kind, raw[asin], attributes[asin],
                                       random.Random(f"{seed}|goal|{asin}"))
            goal = make_goals([by_asin[asin]], {asin: [Instruction(
                entry["instruction"], tuple(entry["instruction_attributes"]),
                tuple(entry["instruction_options"]))]})[0]
            found = [p.asin for p in index.search(goal.instruction,
                                                  REACHABLE_PAGES * PER_PAGE)]
            if asin in found:
                out[asin] = [entry]
                kept += 1
                if kept == goals_per_type:
                    break
        if kept < goals_per_type:
            raise ValueError(f"{kind.query}: only {kept} of {goals_per_type} goals are "
                             f"reachable (seed {seed})")
    return out


def encode(data: Any) -> bytes:
    """A file's bytes: compact JSON, gzip-compressed with no timestamp (reproducible)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def write_catalogue(folder: Path, seed: int = 0, per_type: int = 100,
                    goals_per_type: int = 34) -> list[Path]:
    """Generate and write the three files into ``folder``; returns their paths."""
    contents = generate(seed, per_type, goals_per_type)
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / name for name in FILES]
    for path, data in zip(paths, contents, strict=True):
        path.write_bytes(encode(data))
    return paths
