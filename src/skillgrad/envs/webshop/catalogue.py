"""The shop's catalogue and its goals, read from WebShop's published data files (the data set
of the ``webshop`` environment).

Three files, in the layout WebShop's own loader reads (each ``.json``, or ``.json.gz``):

* **products** (``items_shuffle.json``, ``items_shuffle_1000.json``): a list of scraped
  products with ``asin``, ``name``, ``full_description``, ``small_description`` (the bullet
  points: a list or one string), ``pricing`` (``"$12.99"``, or a range ``"$10.99 - $15.99"``;
  none means $100.0), ``customization_options`` (option kind -> list of ``{"value": ...}``, or
  null), ``category``, ``query`` and ``product_category`` (a path ``a › b › c``). Records with
  the asin ``nan``, an asin longer than 10 characters or a repeated asin are skipped, as
  WebShop skips them. An optional ``reviews`` list (``title``, ``score``, ``body``) is read
  too: WebShop keeps reviews in a file it does not load, so its review pages are empty.
* **attributes** (``items_ins_v2.json``): asin -> ``{"attributes": [...]}``, the product
  attributes the reward checks (a product without an entry has none).
* **human instructions** (``items_human_ins.json``): asin -> a list of
  ``{"instruction", "instruction_attributes", "instruction_options"}``.

Goals are made the way WebShop makes its human goals: one per instruction with at least one
attribute, in product order; the budget is drawn from the ten-dollar steps just above the
product's price (two of the next four, the higher one kept; none above $980) and appended as
", and price lower than 40.00 dollars"; then the goals are shuffled with WebShop's seed 233, so
the first 500 are WebShop's test goals. Where WebShop draws a price range's price and the
budgets from an unseeded generator, skillgrad seeds each draw with the asin / goal id, so a
catalogue always yields the same goals.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from skillgrad.envs.data import read_data_bytes
from skillgrad.errors import DataError

PRICE_STEPS: tuple[float, ...] = tuple(10.0 * i for i in range(1, 100))
NO_BUDGET = 1_000_000.0
SHUFFLE_SEED = 233  # WebShop shuffles its goals with this seed before taking the test goals
_NOT_PRICE = re.compile(r"[^\d.]")


@dataclass(frozen=True)
class Review:
    title: str
    score: int
    body: str


@dataclass(frozen=True)
class Product:
    """One product as the shop shows it. ``price`` is what buying it costs: the single price,
    or for a range a price drawn once from it (seeded by the asin)."""

    asin: str
    title: str
    description: str
    bullets: tuple[str, ...]
    pricing: tuple[float, ...]
    price: float
    options: tuple[tuple[str, tuple[str, ...]], ...]
    attributes: tuple[str, ...]
    category: str
    query: str
    product_category: str
    reviews: tuple[Review, ...] = ()

    @property
    def price_tag(self) -> str:
        """The price as WebShop prints it: ``$12.99`` or ``$10.99 to $15.99``."""
        if len(self.pricing) == 1:
            return f"${self.pricing[0]}"
        return f"${self.pricing[0]} to ${self.pricing[1]}"

    @property
    def rating(self) -> str:
        if not self.reviews:
            return "N.A."
        return f"{sum(r.score for r in self.reviews) / len(self.reviews):.1f}"

    def search_text(self) -> str:
        """What the search engine indexes: title, description, first bullet point and the
        options, lowercased (WebShop's index documents)."""
        options = ", and ".join(f"{kind}: {', '.join(values)}" for kind, values in self.options)
        first = self.bullets[0] if self.bullets else ""
        return " ".join((self.title, self.description, first, options)).lower()


@dataclass(frozen=True)
class Goal:
    """What to buy: the instruction and what the reward checks. ``name``, ``query`` and
    ``product_category`` are those of the product the instruction was written for."""

    id: str
    asin: str
    instruction: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]
    price_upper: float
    query: str
    name: str
    product_category: str
    category: str

    def reference(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_reference(cls, data: Mapping[str, Any]) -> Goal:
        fields = dict(data)
        fields["attributes"] = tuple(fields["attributes"])
        fields["options"] = tuple(fields["options"])
        return cls(**fields)


@dataclass(frozen=True)
class Catalogue:
    """The products (in file order) and the goals (in WebShop's shuffled order)."""

    products: tuple[Product, ...]
    goals: tuple[Goal, ...]
    _by_asin: dict[str, Product] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_asin", {p.asin.lower(): p for p in self.products})

    def product(self, asin: str) -> Product | None:
        return self._by_asin.get(asin.lower())


# ----------------------------------------------------------------------------- reading


def read_json(path: Path) -> Any:
    """A JSON (or gzip-compressed JSON) file; every problem is one DataError naming it."""
    raw = read_data_bytes(path, "a JSON file")
    if path.suffix.lower() == ".gz":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            raise DataError(f"{path}: not a readable gzip file") from None
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not valid UTF-8 (bad byte at offset {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: "
                        f"{exc.msg}") from None


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
             int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _strings(value: Any, where: str, key: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(f"{where}: {key!r} must be a list of strings, got {_kind(value)}")
    return tuple(value)


def parse_attributes(data: Any, path: Path) -> dict[str, tuple[str, ...]]:
    """The attributes file: asin -> the product's attributes."""
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected an object of asin -> attributes, got {_kind(data)}")
    out: dict[str, tuple[str, ...]] = {}
    for asin, entry in data.items():
        if not isinstance(entry, dict):
            raise DataError(f"{path}: asin {asin}: expected an object, got {_kind(entry)}")
        if "attributes" in entry:
            out[asin] = _strings(entry["attributes"], f"{path}: asin {asin}", "attributes")
    return out


@dataclass(frozen=True)
class Instruction:
    text: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]


def parse_instructions(data: Any, path: Path) -> dict[str, list[Instruction]]:
    """The human instructions file: asin -> its instructions. ``instruction_options`` is a
    list of option values (an object's values are taken in order)."""
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected an object of asin -> instructions, got "
                        f"{_kind(data)}")
    out: dict[str, list[Instruction]] = {}
    for asin, entries in data.items():
        if not isinstance(entries, list):
            raise DataError(f"{path}: asin {asin}: expected a list of instructions, got "
                            f"{_kind(entries)}")
        out[asin] = []
        for n, entry in enumerate(entries, 1):
            where = f"{path}: asin {asin}, instruction {n}"
            if not isinstance(entry, dict) or not isinstance(entry.get("instruction"), str):
                raise DataError(f"{where}: expected an object with an 'instruction' string")
            options = entry.get("instruction_options", [])
            if isinstance(options, dict):
                options = list(options.values())
            out[asin].append(Instruction(
                entry["instruction"],
                _strings(entry.get("instruction_attributes", []), where,
                         "instruction_attributes"),
                _strings(options, where, "instruction_options")))
    return out


def parse_products(data: Any, path: Path, attributes: Mapping[str, tuple[str, ...]],
                   limit: int | None = None) -> list[Product]:
    """The products file (its first ``limit`` records when given, as WebShop's
    ``num_products``)."""
    if not isinstance(data, list):
        raise DataError(f"{path}: expected a list of products, got {_kind(data)}")
    seen: set[str] = set()
    products: list[Product] = []
    for n, record in enumerate(data[:limit] if limit else data, 1):
        where = f"{path}: product {n}"
        if not isinstance(record, dict):
            raise DataError(f"{where}: expected an object, got {_kind(record)}")
        asin = record.get("asin")
        if not isinstance(asin, str) or not asin:
            raise DataError(f"{where}: missing or empty 'asin'")
        if asin == "nan" or len(asin) > 10 or asin in seen:
            continue
        seen.add(asin)
        products.append(_product(record, f"{where} (asin {asin})", attributes.get(asin, ())))
    if not products:
        raise DataError(f"{path}: no products")
    return products


def _text(record: Mapping[str, Any], key: str, where: str, required: bool = True) -> str:
    value = record.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise DataError(f"{where}: {key!r} must be a string, got {_kind(value)}")
    return value


def _product(record: Mapping[str, Any], where: str, attributes: tuple[str, ...]) -> Product:
    bullets = record.get("small_description")
    if bullets is None or isinstance(bullets, str):
        bullets = [bullets or ""]
    asin = record["asin"]
    pricing = _pricing(record.get("pricing"), where)
    price = pricing[0] if len(pricing) == 1 else random.Random(f"price|{asin}").uniform(
        *pricing)
    return Product(
        asin=asin, title=_text(record, "name", where),
        description=_text(record, "full_description", where, required=False),
        bullets=_strings(bullets, where, "small_description"), pricing=pricing, price=price,
        options=_options(record.get("customization_options"), where), attributes=attributes,
        category=_text(record, "category", where),
        query=_text(record, "query", where).lower().strip(),
        product_category=_text(record, "product_category", where),
        reviews=_reviews(record.get("reviews"), where))


def _pricing(value: Any, where: str) -> tuple[float, ...]:
    if not value:
        return (100.0,)
    if not isinstance(value, str):
        raise DataError(f"{where}: 'pricing' must be a string such as \"$12.99\", got "
                        f"{_kind(value)}")
    try:
        prices = [float(Decimal(_NOT_PRICE.sub("", part))) for part in value.split("$")[1:]]
    except InvalidOperation:
        prices = []
    if not prices:
        raise DataError(f"{where}: unreadable 'pricing' {value!r}; expected \"$12.99\" or "
                        "\"$10.99 - $15.99\"")
    return tuple(prices[:2])


def _options(value: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    if not value:
        return ()
    if not isinstance(value, dict):
        raise DataError(f"{where}: 'customization_options' must be an object, got "
                        f"{_kind(value)}")
    options: list[tuple[str, tuple[str, ...]]] = []
    for kind, contents in value.items():
        if contents is None:
            continue
        if not isinstance(contents, list) or not all(
                isinstance(c, dict) and isinstance(c.get("value"), str) for c in contents):
            raise DataError(f"{where}: customization option {kind!r} must be a list of "
                            "objects with a 'value' string")
        options.append((kind.lower(), tuple(c["value"].strip().replace("/", " | ").lower()
                                            for c in contents)))
    return tuple(options)


def _reviews(value: Any, where: str) -> tuple[Review, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
            isinstance(r, dict) and isinstance(r.get("score"), int) for r in value):
        raise DataError(f"{where}: 'reviews' must be a list of objects with a 'score' number")
    return tuple(Review(str(r.get("title", "")), r["score"], str(r.get("body", "")))
                 for r in value)


# ----------------------------------------------------------------------------- goals


def budget(price: float, rng: random.Random) -> float:
    """WebShop's budget for a product of ``price``: the higher of two of the next four
    ten-dollar steps above it, or no budget when fewer than two steps remain."""
    steps = [p for p in PRICE_STEPS if p > price][:4]
    return max(rng.sample(steps, 2)) if len(steps) >= 2 else NO_BUDGET


def make_goals(products: Sequence[Product],
               instructions: Mapping[str, Sequence[Instruction]]) -> list[Goal]:
    """One goal per instruction that names an attribute, shuffled in WebShop's order."""
    goals: list[Goal] = []
    for product in products:
        for n, instruction in enumerate(instructions.get(product.asin, ())):
            if not instruction.attributes:
                continue  # WebShop skips these too
            goal_id = f"{product.asin}-{n}"
            upper = budget(product.price, random.Random(f"budget|{goal_id}"))
            text = instruction.text.strip(".")
            if upper != NO_BUDGET:
                text += f", and price lower than {upper:.2f} dollars"
            goals.append(Goal(goal_id, product.asin, text, instruction.attributes,
                              instruction.options, upper, product.query, product.title,
                              product.product_category, product.category))
    random.Random(SHUFFLE_SEED).shuffle(goals)
    return goals


def load_catalogue(products_file: Path, attributes_file: Path, instructions_file: Path,
                   num_products: int | None = None) -> Catalogue:
    """Products and goals from the three files."""
    attributes = parse_attributes(read_json(attributes_file), attributes_file)
    products = parse_products(read_json(products_file), products_file, attributes,
                              num_products)
    instructions = parse_instructions(read_json(instructions_file), instructions_file)
    goals = make_goals(products, instructions)
    if not goals:
        raise DataError(f"{instructions_file}: no goals: none of its instructions with "
                        f"attributes is for one of the {len(products)} products of "
                        f"{products_file}")
    return Catalogue(tuple(products), tuple(goals))
