"""The shop itself: a deterministic text web store in the manner of WebShop's text mode (the
simulator behind the ``webshop`` loss).

Pages and buttons are WebShop's:

* **search**: the instruction and a search box; the only action is ``search[query]``.
* **results**: ``Back to Search``, ``< Prev`` (after page 1), ``Next >``, and ten products per
  page, each clickable by its asin; a search keeps the best 50 products (BM25 over each
  product's title, description, first bullet point and options, with ``rank-bm25``).
* **item**: ``Back to Search``, ``< Prev`` (to the results), the option values (clicking one
  selects it for its option kind), ``Description``, ``Features``, ``Reviews`` and
  ``Buy Now``.
* **description / features / reviews**: ``Back to Search`` and ``< Prev`` (to the item).
* **done**: after ``Buy Now``; the episode is over.

Actions are ``search[...]`` (only on the search page) and ``click[...]`` (only on a button the
current page shows; case does not matter). Anything else leaves the page as it is and answers
with an observation that says what was wrong. One difference from WebShop, on purpose:
``Next >`` is shown only when there is a next page (WebShop always shows it, and past the
last result it shows an empty page).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from skillgrad.envs.search import BM25Index
from skillgrad.envs.webshop.catalogue import Catalogue, Goal, Product
from skillgrad.words import STOP_WORDS

Page = Literal["search", "results", "item", "description", "features", "reviews", "done"]
SEARCH_RETURN = 50
PER_PAGE = 10
BACK, PREV, NEXT, BUY = "Back to Search", "< Prev", "Next >", "Buy Now"
SUB_PAGES: dict[str, Page] = {"description": "description", "features": "features",
                              "reviews": "reviews"}
_ACTION = re.compile(r"^\s*([A-Za-z_]+)\s*\[(.*)\]\s*$", re.DOTALL)
_WORD = re.compile(r"[a-z0-9]+")
# The shared stop words less "was" and "were", plus the words of how a shopper's instruction
# begins ("i need ...", "im looking for ...").
_SHOPPER_WORDS = frozenset({"im", "need", "want"})
_STOP = (STOP_WORDS - {"was", "were"}) | _SHOPPER_WORDS


def search_tokens(text: str) -> list[str]:
    """Lowercased words without the commonest function words; a plural ``s`` is dropped so
    that "oils" finds "oil"."""
    words = []
    for word in _WORD.findall(text.lower()):
        if word in _STOP:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
        words.append(word)
    return words


class SearchIndex:
    """BM25 over the products' search texts (:class:`~skillgrad.envs.search.BM25Index`).
    Read-only once built, so rollouts in several threads can share one."""

    def __init__(self, products: Sequence[Product]) -> None:
        self.products = list(products)
        self._bm25 = BM25Index(
            (search_tokens(p.search_text()) for p in self.products),
            missing='env webshop needs rank-bm25: pip install "skillgrad[webshop]"')

    def search(self, query: str, k: int = SEARCH_RETURN) -> list[Product]:
        return [self.products[i] for i in self._bm25.top(search_tokens(query), k)]


def parse_action(text: str) -> tuple[str, str] | None:
    """``name[argument]`` -> (lowercased name, argument), or None when it is not that form."""
    match = _ACTION.match(text)
    return (match.group(1).lower(), match.group(2).strip()) if match else None


@dataclass(frozen=True)
class Purchase:
    product: Product
    options: dict[str, str]


@dataclass(frozen=True)
class Outcome:
    """What one action did: the observation, whether the action was valid, and the purchase
    when it ended the episode."""

    observation: str
    valid: bool
    purchase: Purchase | None = None


@dataclass
class Shop:
    """One shopping session for one instruction. Not thread-safe; make one per rollout."""

    catalogue: Catalogue
    index: SearchIndex
    instruction: str
    page: Page = "search"
    query: str = ""
    results: list[Product] = field(default_factory=list)
    page_number: int = 1
    item: Product | None = None
    options: dict[str, str] = field(default_factory=dict)
    clicked: str = ""  # the option value just clicked, which the item page acknowledges
    searches: list[str] = field(default_factory=list)  # every query, in order
    opened: list[str] = field(default_factory=list)  # the asin of every item opened
    paged: int = 0  # presses of Next > and < Prev on a results page

    # ------------------------------------------------------------------ actions

    def step(self, action: str) -> Outcome:
        """Play one action (``search[...]`` or ``click[...]``)."""
        if self.page == "done":
            return Outcome("The purchase is done; the episode is over.", False)
        parsed = parse_action(action)
        if parsed is None:
            return self._invalid(f"{action.strip()!r} is not an action; write search[query] "
                                 "or click[button]")
        name, argument = parsed
        if name == "search":
            if self.page != "search":
                return self._invalid(f"search is only possible on the search page; "
                                     f"click[{BACK}] first")
            if not argument:
                return self._invalid("the search query is empty")
            return self._search(argument)
        if name == "click":
            return self._click(argument)
        return self._invalid(f"unknown action {name!r}; the actions are search[query] and "
                             "click[button]")

    def buttons(self) -> list[str]:
        """The buttons of the current page, as shown."""
        if self.page == "results":
            more = self.page_number * PER_PAGE < len(self.results)
            return ([BACK] + [PREV] * (self.page_number > 1) + [NEXT] * more
                    + [p.asin for p in self._page_items()])
        if self.page == "item":
            assert self.item is not None
            values = [v for _, values in self.item.options for v in values]
            return [BACK, PREV, *values, "Description", "Features", "Reviews", BUY]
        if self.page in SUB_PAGES.values():
            return [BACK, PREV]
        return []

    def _search(self, query: str) -> Outcome:
        self.query, self.results = query, self.index.search(query)
        self.searches.append(query)
        self.page, self.page_number, self.item, self.options = "results", 1, None, {}
        return Outcome(self.observation(), True)

    def _click(self, argument: str) -> Outcome:
        wanted = argument.strip().lower()
        shown = {b.lower(): b for b in reversed(self.buttons())}
        if wanted not in shown:
            if self.page == "search":
                return self._invalid("there is nothing to click on the search page; write "
                                     "search[query]")
            return self._invalid(f"there is no button {argument!r} on this page")
        button = shown[wanted]
        self.clicked = ""
        if button == BACK:
            self.page, self.query, self.results, self.item = "search", "", [], None
        elif button == NEXT:
            self.page_number += 1
            self.paged += 1
        elif button == PREV:
            self.paged += self.page == "results"
            self._back()
        elif self.page == "results":
            self.item, self.page = self.catalogue.product(button), "item"
            self.opened.append(button)
        elif button == BUY:
            assert self.item is not None
            self.page = "done"
            purchase = Purchase(self.item, dict(self.options))
            return Outcome(self.observation(), True, purchase)
        elif button.lower() in SUB_PAGES:
            self.page = SUB_PAGES[button.lower()]
        else:
            self._choose(button)
        return Outcome(self.observation(), True)

    def _back(self) -> None:
        if self.page == "results":
            self.page_number -= 1
        elif self.page == "item":  # back to the results page the item was opened from
            self.page, self.item, self.options = "results", None, {}
        else:
            self.page = "item"

    def _choose(self, value: str) -> None:
        assert self.item is not None
        kinds = [kind for kind, values in self.item.options if value in values]
        # A value offered by two option kinds selects the first one not chosen yet.
        kind = next((k for k in kinds if k not in self.options), kinds[0])
        self.options[kind] = value
        self.clicked = value

    def _invalid(self, problem: str) -> Outcome:
        if self.page == "search":
            available = "The only action here is search[your query]."
        else:
            available = "Buttons on this page: " + " ".join(f"[{b}]" for b in self.buttons())
        return Outcome(f"Invalid action: {problem}.\n{available}", False)

    # ------------------------------------------------------------------ pages

    def _page_items(self) -> list[Product]:
        start = (self.page_number - 1) * PER_PAGE
        return self.results[start:start + PER_PAGE]

    def observation(self) -> str:
        """The current page as text; buttons are shown in square brackets."""
        if self.page == "search":
            return f"WebShop\nInstruction:\n{self.instruction}\n[Search]"
        if self.page == "results":
            return self._results_page()
        if self.page == "done":
            return self._done_page()
        item = self.item
        assert item is not None
        head = f"[{BACK}]\n[{PREV}]"
        if self.page == "description":
            return f"{head}\n{item.description or '(no description)'}"
        if self.page == "features":
            return head + "\n" + ("\n".join(f"- {b}" for b in item.bullets if b)
                                  or "(no features)")
        if self.page == "reviews":
            lines = [f'"{r.title}" ({r.score}/5) {r.body}'.strip() for r in item.reviews]
            return head + "\n" + ("\n".join(lines) or "(no reviews)")
        return self._item_page(item)

    def _results_page(self) -> str:
        lines = [f"[{BACK}]", f"Page {self.page_number} (Total results: {len(self.results)})"]
        controls = [f"[{b}]" for b in (PREV, NEXT) if b in self.buttons()]
        if controls:
            lines.append(" ".join(controls))
        lines += [f"[{p.asin}] {p.title} | {p.price_tag}" for p in self._page_items()]
        return "\n".join(lines)

    def _item_page(self, item: Product) -> str:
        lines = [f"You have clicked {self.clicked}."] if self.clicked else []
        lines += [f"[{BACK}]", f"[{PREV}]"]
        for kind, values in item.options:
            chosen = self.options.get(kind)
            lines.append(f"{kind}: " + " ".join(f"[{v}]" for v in values)
                         + (f" (selected: {chosen})" if chosen else ""))
        lines += [item.title, f"Price: {item.price_tag}", f"Rating: {item.rating}",
                  f"[Description] [Features] [Reviews] [{BUY}]"]
        return "\n".join(lines)

    def _done_page(self) -> str:
        assert self.item is not None
        chosen = ", ".join(f"{k}: {v}" for k, v in self.options.items()) or "no options"
        return (f"Thank you for shopping with us! You bought {self.item.asin} "
                f"({self.item.title}) for {self.item.price_tag} with {chosen}.")


def walkthrough(catalogue: Catalogue, index: SearchIndex, goal: Goal,
                query: str | None = None) -> list[str] | None:
    """The actions that buy the goal's own product with the goal's options: search (the
    instruction, or ``query``), page forward to it, open it, click each goal option the
    product offers, buy. None when the search does not find it."""
    found = index.search(query or goal.instruction)
    rank = next((i for i, p in enumerate(found) if p.asin == goal.asin), None)
    product = catalogue.product(goal.asin)
    if rank is None or product is None:
        return None
    offered = {v for _, values in product.options for v in values}
    actions = [f"search[{query or goal.instruction}]"]
    actions += [f"click[{NEXT}]"] * (rank // PER_PAGE)
    actions.append(f"click[{product.asin}]")
    actions += [f"click[{option}]" for option in goal.options if option in offered]
    actions.append(f"click[{BUY}]")
    return actions
