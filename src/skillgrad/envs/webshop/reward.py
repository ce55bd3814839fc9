"""WebShop's reward for a purchase (the loss function of the ``webshop`` environment).

The reward follows the WebShop paper (Yao et al. 2022, section 3.2) and the reward computation
of its published code:

    reward = r_type * (n_attributes + n_options + r_price) / (|attributes| + |options| + 1)

* ``n_attributes``: goal attributes the bought product has: one of its attributes matches by
  fuzzy token-set similarity above 85, or the attribute occurs in its title, features or
  description.
* ``n_options``: goal options matched (same similarity test) by an option the agent chose,
  after both are reduced to their first colour word.
* ``r_price``: 1 when the price is within the budget, else 0.
* ``r_type``: the product-type factor: 1 when the product matches the goal's search query, or
  shares at least two levels of its category path, or has a title overlap above 0.2; 0.5
  otherwise; then 0.1 when the title overlap is below 0.1 and 0 when it is nil.

One difference, on purpose: WebShop's title overlap counts the nouns that spaCy tags in both
product names; skillgrad counts their content words (alphabetic words that are not function
words), which needs no language model and is deterministic. The similarity is the token-set
ratio of ``thefuzz`` (lowercased, punctuation as spaces, rounded to an integer), written out
here so the reward needs no compiled dependency.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from skillgrad.envs.webshop.catalogue import Goal, Product

MATCH_ABOVE = 85  # a fuzzy match needs a similarity above this (of 100)
# The colour words of WebShop's option normaliser, which it checks in alphabetical order: an
# option is reduced to the first of them it contains ("heather grey" -> "grey").
COLORS: tuple[str, ...] = tuple(sorted(
    "alabaster apricot aqua ash asphalt azure banana beige black blue blush bordeaux bronze "
    "brown burgundy camel camo caramel champagne charcoal cheetah chestnut chocolate christmas "
    "coffee cognac copper coral cranberry cream crystal dark denim eggplant elephant espresso "
    "fuchsia gold granite grape graphite grass gray green grey heather indigo ivory ivy khaki "
    "lavender lemon leopard light lilac lime magenta maroon mauve merlot midnight mint mocha "
    "multicolor mushroom mustard natural navy nude olive orange peach pewter pink plum purple "
    "rainbow red rose royal rust sand sapphire seashell silver skull slate steel stone "
    "stonewash sunflower tan taupe teal tiger turquoise violet walnut wheat white wine "
    "yellow".split()))
_NOT_ALNUM = re.compile(r"[^0-9a-z]+")
_WORD = re.compile(r"[a-z]+")
_FUNCTION_WORDS = frozenset(
    "a an and are as at be but by for from in into is it its of on or per than that the "
    "their this these those to up use with without".split())


# ----------------------------------------------------------------------------- similarity


def _indel(a: str, b: str) -> int:
    """Insertions plus deletions that turn ``a`` into ``b``: len(a) + len(b) - 2 * LCS."""
    if not a or not b:
        return len(a) + len(b)
    previous = [0] * (len(b) + 1)
    for ca in a:
        current = [0]
        for j, cb in enumerate(b, 1):
            current.append(previous[j - 1] + 1 if ca == cb else max(previous[j], current[-1]))
        previous = current
    return len(a) + len(b) - 2 * previous[-1]


def _similarity(distance: int, total: int) -> float:
    return 100.0 - 100.0 * distance / total if total else 100.0


def token_set_ratio(first: str, second: str) -> int:
    """How alike two phrases are (0-100), ignoring word order and repeated words.

    Both are lowercased with punctuation turned into spaces; a phrase whose words all occur in
    the other scores 100; otherwise the best of comparing the shared words plus each side's
    own words, and the two sides' own words, by indel similarity.
    """
    words_a = set(_NOT_ALNUM.sub(" ", first.lower()).split())
    words_b = set(_NOT_ALNUM.sub(" ", second.lower()).split())
    if not words_a or not words_b:
        return 0
    shared = words_a & words_b
    only_a, only_b = words_a - words_b, words_b - words_a
    if shared and (not only_a or not only_b):
        return 100
    rest_a, rest_b = " ".join(sorted(only_a)), " ".join(sorted(only_b))
    common = len(" ".join(shared))
    gap = 1 if common else 0  # the space between the shared words and a side's own words
    with_a, with_b = common + gap + len(rest_a), common + gap + len(rest_b)
    best = _similarity(_indel(rest_a, rest_b), with_a + with_b)
    if common:
        best = max(best, _similarity(gap + len(rest_a), common + with_a),
                   _similarity(gap + len(rest_b), common + with_b))
    return int(round(best))


def normalize_color(option: str) -> str:
    """The first colour word ``option`` contains, or ``option`` itself."""
    return next((color for color in COLORS if color in option), option)


# ----------------------------------------------------------------------------- the parts


@dataclass(frozen=True)
class TypeMatch:
    """The product-type factor and what it was decided on."""

    r_type: float
    query_match: bool
    category_match: bool
    title_score: float


def content_words(name: str) -> set[str]:
    """The words of a product name that the title overlap counts."""
    return {w for w in _WORD.findall(name.lower()) if len(w) > 1 and w not in _FUNCTION_WORDS}


def type_match(product: Product, goal: Goal) -> TypeMatch:
    query_match = product.query == goal.query
    levels = {level.strip() for level in product.product_category.split("›")}
    wanted = {level.strip() for level in goal.product_category.split("›")}
    category_match = len(levels & wanted) >= 2
    desired = content_words(goal.name)
    title_score = (len(content_words(product.title) & desired) / len(desired)
                   if desired else 0.2)
    r_type = 1.0 if query_match or category_match or title_score > 0.2 else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return TypeMatch(r_type, query_match, category_match, title_score)


def attribute_matches(product: Product, attributes: Sequence[str]) -> list[bool]:
    """For each goal attribute, whether the product has it."""
    texts = [product.title.lower(), " ".join(product.bullets).lower(),
             product.description.lower()]
    return [any(token_set_ratio(have, want) > MATCH_ABOVE for have in product.attributes)
            or any(want in text for text in texts) for want in attributes]


def option_matches(chosen: Sequence[str], wanted: Sequence[str]) -> list[bool]:
    """For each goal option, whether one of the chosen option values matches it."""
    picked = [normalize_color(o) for o in chosen]
    return [any(token_set_ratio(p, normalize_color(w)) > MATCH_ABOVE for p in picked)
            for w in wanted]


# ----------------------------------------------------------------------------- the reward


@dataclass(frozen=True)
class Reward:
    """A purchase scored against its goal, with every part the reason names."""

    reward: float
    type: TypeMatch
    attributes: tuple[tuple[str, bool], ...]
    options: tuple[tuple[str, bool], ...]
    price: float
    price_upper: float

    @property
    def price_ok(self) -> bool:
        return self.price <= self.price_upper

    @property
    def missed_attributes(self) -> list[str]:
        return [a for a, ok in self.attributes if not ok]

    @property
    def missed_options(self) -> list[str]:
        return [o for o, ok in self.options if not ok]

    def parts(self) -> dict[str, float]:
        """The reward's parts, for a result's metadata."""
        out = {"r_type": self.type.r_type, "title_score": round(self.type.title_score, 4),
               "r_price": float(self.price_ok)}
        if self.attributes:
            out["r_att"] = sum(ok for _, ok in self.attributes) / len(self.attributes)
        if self.options:
            out["r_option"] = sum(ok for _, ok in self.options) / len(self.options)
        return out


def score_purchase(product: Product, goal: Goal, chosen: Mapping[str, str]) -> Reward:
    """WebShop's reward for buying ``product`` with the options ``chosen`` (kind -> value)."""
    kind = type_match(product, goal)
    attributes = attribute_matches(product, goal.attributes)
    options = option_matches(list(chosen.values()), goal.options)
    price_ok = product.price <= goal.price_upper
    total = ((sum(attributes) + sum(options) + price_ok)
             / (len(goal.attributes) + len(goal.options) + 1))
    return Reward(total * kind.r_type, kind, tuple(zip(goal.attributes, attributes, strict=True)),
                  tuple(zip(goal.options, options, strict=True)), product.price, goal.price_upper)


def explain(reward: Reward, product: Product, chosen: Mapping[str, str]) -> str:
    """What a purchase missed, in one line (empty when the reward is 1)."""
    if reward.reward >= 1.0:
        return ""
    parts = [f"bought {product.asin} ({product.title!r}) for ${product.price:.2f}; "
             f"reward {reward.reward:.3f}"]
    if reward.missed_attributes:
        parts.append("missed attributes: " + ", ".join(map(repr, reward.missed_attributes)))
    if reward.missed_options:
        picked = ", ".join(f"{k}: {v}" for k, v in chosen.items()) or "none chosen"
        parts.append("missed options: " + ", ".join(map(repr, reward.missed_options))
                     + f" (chosen: {picked})")
    if not reward.price_ok:
        parts.append(f"price ${reward.price:.2f} is above the budget of "
                     f"${reward.price_upper:.2f}")
    kind = reward.type
    if kind.r_type < 1.0:
        parts.append(f"wrong product type (type factor {kind.r_type:g}: query "
                     f"{'matches' if kind.query_match else 'differs'}, category "
                     f"{'matches' if kind.category_match else 'differs'}, title overlap "
                     f"{kind.title_score:.2f})")
    return "; ".join(parts)
