"""The webshop environment: WebShop's reward on hand-computed cases, the shop's pages, buttons,
pagination and invalid actions, scripted agents that buy the right item (hard 1) or a wrong
one (its partial reward and what it missed), both tool protocols, the loader on small files in
WebShop's published layout and its one-line errors, the bundled catalogue (every goal
reachable by search and solvable, regenerated exactly), and one epoch of training."""

from __future__ import annotations

import gzip
import importlib.util
import json
import random
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

if importlib.util.find_spec("rank_bm25") is None:
    pytest.skip("webshop needs rank-bm25", allow_module_level=True)

from e2e import one_epoch, rule_optimizer, train_end_to_end  # noqa: E402

from skillgrad.build import build_environment  # noqa: E402
from skillgrad.config import load_config  # noqa: E402
from skillgrad.envs.base import EnvCommon, Split  # noqa: E402
from skillgrad.envs.webshop import WebShopEnvironment, WebShopOptions  # noqa: E402
from skillgrad.envs.webshop.agent import parse_reply  # noqa: E402
from skillgrad.envs.webshop.catalogue import NO_BUDGET, Goal, Product  # noqa: E402
from skillgrad.envs.webshop.engine import Shop, walkthrough  # noqa: E402
from skillgrad.envs.webshop.generate import (  # noqa: E402
    FILES,
    REACHABLE_PAGES,
    check_templates,
    write_catalogue,
)
from skillgrad.envs.webshop.reward import (  # noqa: E402
    explain,
    normalize_color,
    option_matches,
    score_purchase,
    token_set_ratio,
    type_match,
)
from skillgrad.envs.webshop.templates import TYPES  # noqa: E402
from skillgrad.errors import ConfigError, DataError  # noqa: E402
from skillgrad.models.messages import ChatRequest, Completion  # noqa: E402
from skillgrad.models.scripted import ScriptedModel  # noqa: E402
from skillgrad.records import Task  # noqa: E402
from skillgrad.registry import environment_class, environment_names  # noqa: E402

SPLITS: tuple[Split, ...] = ("train", "val", "test")
FIXTURES = Path(__file__).parent / "fixtures" / "webshop"
BUNDLED = Path(__file__).resolve().parents[1] / "src" / "skillgrad" / "envs" / "webshop" / "data"


@pytest.fixture(scope="module")
def small() -> WebShopEnvironment:
    """The fixture files (WebShop's layout): 5 products, 5 goals, 2 of them test."""
    return WebShopEnvironment.create(EnvCommon(name="webshop"),
                                     WebShopOptions(data_dir=FIXTURES, test_goals=2), Path("."))


@pytest.fixture(scope="module")
def bundled() -> WebShopEnvironment:
    return WebShopEnvironment.create(EnvCommon(name="webshop"), WebShopOptions(), Path("."))


def _task(env: WebShopEnvironment, goal_id: str) -> Task:
    return next(t for s in SPLITS for t in env.tasks(s) if t.id == goal_id)


def _with(env: WebShopEnvironment, **options: Any) -> WebShopEnvironment:
    """The same catalogue and tasks under other play options (no reloading)."""
    return WebShopEnvironment({s: env.tasks(s) for s in SPLITS}, env.catalogue,
                              WebShopOptions(**options), index=env.index)


# ----------------------------------------------------------------------------- the reward


def test_the_fuzzy_match_is_thefuzz_token_set_ratio() -> None:
    assert token_set_ratio("essential oil", "essential oils") == 96
    assert token_set_ratio("fuzzy was a bear", "fuzzy fuzzy was a bear") == 100
    assert token_set_ratio("fuzzy was a bear but not a dog", "fuzzy was a bear but not a cat") == 92
    assert token_set_ratio("cool powder snow", "Powder-Snow") == 100  # one holds the other
    assert token_set_ratio("pack of 12", "pack of 24") == 90
    assert token_set_ratio("xl", "l") == 67 and token_set_ratio("grey", "XL") == 0
    assert token_set_ratio("", "grey") == 0
    assert normalize_color("heather grey") == "grey" and normalize_color("rose gold") == "gold"
    assert normalize_color("16 fl oz") == "16 fl oz"
    # Options are compared by their first colour word, on both sides: "blackberry" is black.
    assert option_matches(["blackberry", "xl"], ["black", "charcoal grey", "xl"]) == [
        True, False, True]
    assert option_matches(["black"], ["jet blackberry"]) == [True]


GOAL = Goal(id="g", asin="B0GOAL0001", instruction="i need a tea tree shampoo",
            attributes=("tea tree", "essential oils", "natural ingredients"),
            options=("grey", "xl"), price_upper=40.0, query="shampoo",
            name="Herbal Glow Tea Tree Shampoo", product_category="a › b › c", category="beauty")
PRODUCT = Product(asin="B0GOAL0001", title="Herbal Glow Tea Tree Shampoo",
                  description="Made with natural ingredients.", bullets=("Gentle",),
                  pricing=(35.0,), price=35.0,
                  options=(("color", ("heather grey", "black")), ("size", ("l", "xl"))),
                  attributes=("tea tree", "essential oil"), category="beauty", query="shampoo",
                  product_category="a › b › c")


@pytest.mark.parametrize(("product", "chosen", "expected"), [
    # 3/3 attributes (one exact, one fuzzy, one in the description), 2/2 options, price: 6/6.
    ({}, {"color": "heather grey", "size": "xl"}, 1.0),
    ({}, {"color": "heather grey", "size": "l"}, 5 / 6),  # "l" is not "xl"
    ({}, {"color": "heather grey"}, 5 / 6),  # an option not chosen is missed
    ({"price": 45.0, "pricing": (45.0,)}, {"color": "black", "size": "xl"}, 4 / 6),
    # Another type: query and category differ, title overlap 1/5 = 0.2 is not above 0.2 -> x0.5.
    ({"query": "conditioner", "product_category": "a › x", "title": "Herbal Rinse Bar"},
     {"color": "heather grey", "size": "xl"}, 0.5),
    # A shared category path (two levels) keeps the type, but a title with no common word is 0.
    ({"query": "mug", "title": "Ceramic Mug"}, {"color": "heather grey", "size": "xl"}, 0.0),
])
def test_the_reward_on_hand_computed_cases(product: dict[str, Any], chosen: dict[str, str],
                                           expected: float) -> None:
    scored = score_purchase(replace(PRODUCT, **product), GOAL, chosen)
    assert scored.reward == pytest.approx(expected)


def test_the_type_factor_and_the_reason() -> None:
    long_name = replace(GOAL, name="Herbal Glow Tea Tree Shampoo Bottle Pump Salon Size Daily Wash")
    kind = type_match(PRODUCT, long_name)  # 5 of 11 words in common; same query
    assert (kind.r_type, round(kind.title_score, 3)) == (1.0, 0.455)
    few = replace(PRODUCT, title="Herbal Soap")  # 1 of 11 words: below 0.1 -> 0.1, query or not
    assert type_match(few, long_name).r_type == 0.1
    assert type_match(few, GOAL).r_type == 1.0  # 1 of 5 = 0.2, but the query matches
    # No attribute, no option; the price is the only part met; the category matches.
    other = replace(PRODUCT, attributes=(), description="", price=45.0, query="soap",
                    title="Herbal Soap")
    chosen = {"color": "black"}
    scored = score_purchase(other, GOAL, chosen)
    assert scored.reward == pytest.approx(0.0) and scored.parts()["r_type"] == 1.0
    reason = explain(scored, other, chosen)
    assert reason.startswith("bought B0GOAL0001 ('Herbal Soap') for $45.00; reward 0.000")
    assert ("missed attributes: 'tea tree', 'essential oils', 'natural ingredients'" in reason
            and "missed options: 'grey', 'xl' (chosen: color: black)" in reason
            and "price $45.00 is above the budget of $40.00" in reason)
    wrong = score_purchase(replace(PRODUCT, query="x", product_category="q", title="Herbal Rinse"),
                           GOAL, {"color": "grey", "size": "xl"})
    assert "wrong product type (type factor 0.5: query differs, category differs, title " \
           "overlap 0.20)" in explain(wrong, PRODUCT, {})
    assert explain(score_purchase(PRODUCT, GOAL, {"color": "grey", "size": "xl"}), PRODUCT,
                   {}) == ""


# ----------------------------------------------------------------------------- the loader


def test_the_published_layout_loads(small: WebShopEnvironment) -> None:
    products = {p.asin: p for p in small.catalogue.products}
    # The repeated asin, "nan" and the 13-character asin are skipped, as WebShop skips them.
    assert list(products) == ["B00SHAMP01", "B00SHAMP02", "B00LAMP001", "B00PIANO01",
                              "B00SOCKS01"]
    shampoo = products["B00SHAMP01"]
    assert shampoo.options == (("size", ("8 fl oz | pack of 1", "16 fl oz")),
                               ("scent", ("lavender", "mint")))
    assert (shampoo.query, shampoo.attributes, shampoo.price_tag) == (
        "shampoo", ("tea tree", "for dry hair"), "$24.99")
    ranged = products["B00SHAMP02"]
    assert ranged.price_tag == "$10.99 to $15.99" and 10.99 <= ranged.price <= 15.99
    assert ranged.bullets == ("Adds body and bounce",) and ranged.options == ()
    assert (products["B00LAMP001"].price, products["B00LAMP001"].price_tag) == (100.0, "$100.0")
    assert products["B00PIANO01"].attributes == ()
    # One goal per instruction with attributes, in product order, then WebShop's shuffle.
    ids = ["B00SHAMP01-0", "B00LAMP001-0", "B00PIANO01-0", "B00SOCKS01-0", "B00SOCKS01-1"]
    random.Random(233).shuffle(ids)
    goals = {g.id: g for g in small.catalogue.goals}
    assert list(goals) == ids
    assert [t.id for t in small.tasks("test")] == ids[:2]
    assert sorted(t.id for s in ("train", "val") for t in small.tasks(s)) == sorted(ids[2:])
    # Budgets: two of the next four ten-dollar steps, the higher kept; none above $980.
    shampoo_goal = goals["B00SHAMP01-0"]
    assert shampoo_goal.price_upper in (40.0, 50.0, 60.0)
    assert shampoo_goal.instruction == ("i need a tea tree shampoo for dry hair in lavender "
                                        "scent, 16 fl oz, and price lower than "
                                        f"{shampoo_goal.price_upper:.2f} dollars")
    piano = goals["B00PIANO01-0"]
    assert (piano.price_upper, piano.instruction, piano.options) == (
        NO_BUDGET, "i want a grand piano with a black finish", ("black",))
    task = _task(small, "B00SHAMP01-0")
    assert task.prompt == shampoo_goal.instruction and task.group == "B00SHAMP01"
    assert Goal.from_reference(json.loads(json.dumps(task.reference))) == shampoo_goal


def _folder(tmp_path: Path, **files: Any) -> Path:
    """A data folder: the fixture files, with some replaced (a name -> JSON data, raw text
    when a string, or None to leave the file out)."""
    folder = tmp_path / "data"
    folder.mkdir()
    for source in FIXTURES.iterdir():
        shutil.copy(source, folder / source.name)
    for name, content in files.items():
        path = folder / f"{name}.json"
        if content is None:
            path.unlink()
        else:
            path.write_text(content if isinstance(content, str) else json.dumps(content))
    return folder


def _products(change: dict[str, Any]) -> list[dict[str, Any]]:
    records = json.loads((FIXTURES / "items_shuffle_1000.json").read_text())
    return [{**records[0], **change}, *records[1:]]


@pytest.mark.parametrize(("files", "problem"), [
    ({"items_human_ins": None}, r"data: no items_human_ins\*.json file \(set "
     r"env.instructions_file to name it\)"),
    ({"items_shuffle": []}, r"data: several items_shuffle\*.json files \(items_shuffle.json, "
     r"items_shuffle_1000.json\); set env.products_file"),
    ({"items_shuffle_1000": "[{"}, r"items_shuffle_1000.json: invalid JSON at line 1, column 3"),
    ({"items_shuffle_1000": {"asin": "x"}}, "items_shuffle_1000.json: expected a list of "
     "products, got an object"),
    ({"items_shuffle_1000": _products({"name": None})}, r"items_shuffle_1000.json: product 1 "
     r"\(asin B00SHAMP01\): 'name' must be a string, got null"),
    ({"items_shuffle_1000": _products({"pricing": "$abc"})}, r"product 1 \(asin B00SHAMP01\): "
     r"unreadable 'pricing' '\$abc'"),
    ({"items_shuffle_1000": _products({"customization_options": {"Size": ["big"]}})},
     "customization option 'Size' must be a list of objects with a 'value' string"),
    ({"items_ins_v2_1000": {"B00SHAMP01": {"attributes": "tea tree"}}},
     "items_ins_v2_1000.json: asin B00SHAMP01: 'attributes' must be a list of strings"),
    ({"items_human_ins": {"B00SHAMP01": [{"text": "no instruction key"}]}},
     r"items_human_ins.json: asin B00SHAMP01, instruction 1: expected an object with an "
     r"'instruction' string"),
    ({"items_human_ins": {"B00SOCKS01": []}}, "items_human_ins.json: no goals: none of its "
     "instructions with attributes is for one of the 5 products"),
])
def test_bad_data_files_are_one_line_errors(tmp_path: Path, files: dict[str, Any],
                                            problem: str) -> None:
    folder = _folder(tmp_path, **files)
    with pytest.raises(DataError, match=problem) as raised:
        WebShopEnvironment.create(EnvCommon(name="webshop"), WebShopOptions(data_dir=folder),
                                  tmp_path)
    assert "\n" not in str(raised.value)


def test_file_keys_gzip_and_config_problems(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    for name in ("items_shuffle_1000", "items_human_ins"):  # .json.gz reads the same
        path = folder / f"{name}.json"
        path.with_suffix(".json.gz").write_bytes(gzip.compress(path.read_bytes()))
        path.unlink()
    options = WebShopOptions(products_file=Path("data/items_shuffle_1000.json.gz"),
                             attributes_file=Path("data/items_ins_v2_1000.json"),
                             instructions_file=Path("data/items_human_ins.json.gz"), test_goals=2)
    env = WebShopEnvironment.create(EnvCommon(name="webshop"), options, tmp_path)
    assert len(env.catalogue.products) == 5 and len(env.tasks("test")) == 2
    with pytest.raises(ConfigError, match="env.attributes_file is required when env.data_dir is "
                       "not set"):
        WebShopEnvironment.create(EnvCommon(name="webshop"), WebShopOptions(
            products_file=Path("data/items_shuffle_1000.json.gz")), tmp_path)
    (folder / "items_human_ins.json.gz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match="items_human_ins.json.gz: not a readable gzip file"):
        WebShopEnvironment.create(EnvCommon(name="webshop"), WebShopOptions(data_dir=folder),
                                  tmp_path)
    with pytest.raises(DataError, match="nowhere: WebShop data folder not found"):
        WebShopEnvironment.create(EnvCommon(name="webshop"),
                                  WebShopOptions(data_dir=Path("nowhere")), tmp_path)
    with pytest.raises(DataError, match=r"items_human_ins.json: split 'train' is empty \(5 goals; "
                       r"env.test_goals 5, train/val ratio 0.6/0.2; lower env.test_goals"):
        WebShopEnvironment.create(EnvCommon(name="webshop"),
                                  WebShopOptions(data_dir=FIXTURES, test_goals=5), tmp_path)
    with pytest.raises(ConfigError, match="split_mode 'split_dir' is not supported"):
        WebShopEnvironment.create(EnvCommon(name="webshop", split_mode="split_dir",
                                            split_dir=Path(".")), WebShopOptions(), tmp_path)


# ----------------------------------------------------------------------------- the shop


def test_invalid_actions_say_what_was_wrong_and_change_nothing(
    small: WebShopEnvironment,
) -> None:
    shop = Shop(small.catalogue, small.index, "buy a shampoo")
    assert shop.observation() == "WebShop\nInstruction:\nbuy a shampoo\n[Search]"
    bad = shop.step("click[Buy Now]")
    assert not bad.valid and bad.observation == (
        "Invalid action: there is nothing to click on the search page; write search[query].\n"
        "The only action here is search[your query].")
    assert not shop.step("search[]").valid and shop.page == "search"
    assert shop.step("search[tea tree shampoo]").valid and shop.page == "results"
    results = shop.observation()
    assert "search is only possible on the search page; click[Back to Search] first" in \
        shop.step("search[lamp]").observation
    missing = shop.step("click[B00LAMP001]")
    assert not missing.valid and "there is no button 'B00LAMP001' on this page" in \
        missing.observation and "[B00SHAMP02]" in missing.observation
    assert "'buy it' is not an action" in shop.step("buy it").observation
    assert "unknown action 'purchase'" in shop.step("purchase[B00SHAMP01]").observation
    assert shop.observation() == results and shop.page == "results"
    shop.step("click[B00SHAMP01]")
    shop.step("click[Buy Now]")
    assert not shop.step("click[Back to Search]").valid and shop.page == "done"


def test_the_pages_of_a_purchase(small: WebShopEnvironment) -> None:
    shop = Shop(small.catalogue, small.index, "buy a shampoo")
    assert shop.step("search[tea tree shampoo]").observation.splitlines() == [
        "[Back to Search]", "Page 1 (Total results: 2)",
        "[B00SHAMP01] Herbal Glow Tea Tree Shampoo for Dry Hair | $24.99",
        "[B00SHAMP02] Ocean Breeze Volumizing Shampoo | $10.99 to $15.99"]
    item = shop.step("click[b00shamp01]").observation  # case does not matter
    assert shop.page == "item" and item.splitlines() == [
        "[Back to Search]", "[< Prev]", "size: [8 fl oz | pack of 1] [16 fl oz]",
        "scent: [lavender] [mint]", "Herbal Glow Tea Tree Shampoo for Dry Hair",
        "Price: $24.99", "Rating: N.A.", "[Description] [Features] [Reviews] [Buy Now]"]
    chosen = shop.step("click[Lavender]").observation
    assert chosen.startswith("You have clicked lavender.\n")
    assert "scent: [lavender] [mint] (selected: lavender)" in chosen
    shop.step("click[16 fl oz]")
    assert shop.step("click[Description]").observation == (
        "[Back to Search]\n[< Prev]\nA gentle shampoo with natural ingredients.")
    assert shop.buttons() == ["Back to Search", "< Prev"]
    assert "(selected: 16 fl oz)" in shop.step("click[< Prev]").observation  # back to the item
    assert shop.step("click[Features]").observation.endswith(
        "- Sulfate free formula\n- Made with essential oils")
    shop.step("click[< prev]")
    assert shop.step("click[Reviews]").observation.endswith("(no reviews)")
    shop.step("click[< Prev]")
    assert shop.step("click[< Prev]").observation.startswith("[Back to Search]\nPage 1")
    assert shop.options == {} and shop.page == "results"  # the results page clears options
    shop.step("click[B00SHAMP01]")
    shop.step("click[mint]")
    shop.step("click[8 fl oz | pack of 1]")
    bought = shop.step("click[Buy Now]")
    assert bought.purchase is not None and bought.purchase.product.asin == "B00SHAMP01"
    assert bought.purchase.options == {"scent": "mint", "size": "8 fl oz | pack of 1"}
    assert bought.observation.startswith("Thank you for shopping with us! You bought B00SHAMP01")
    assert shop.searches == ["tea tree shampoo"] and shop.opened == ["B00SHAMP01"] * 2
    shop = Shop(small.catalogue, small.index, "x")
    shop.step("search[shampoo]")
    shop.step("click[B00SHAMP02]")
    assert shop.step("click[Back to Search]").observation.startswith("WebShop\nInstruction:")


def test_pagination_ten_per_page(bundled: WebShopEnvironment) -> None:
    shop = Shop(bundled.catalogue, bundled.index, "x")
    first = shop.step("search[shampoo]").observation.splitlines()
    assert first[:3] == ["[Back to Search]", "Page 1 (Total results: 50)", "[Next >]"]
    seen: list[str] = []
    for page in range(1, 6):
        lines = shop.observation().splitlines()
        assert lines[1] == f"Page {page} (Total results: 50)"
        controls = {1: "[Next >]", 5: "[< Prev]"}.get(page, "[< Prev] [Next >]")
        items = [line.split("]")[0][1:] for line in lines[3:]]
        assert lines[2] == controls and len(items) == 10 and not set(items) & set(seen)
        seen += items
        if page < 5:
            assert shop.step("click[Next >]").valid
    assert "there is no button 'Next >'" in shop.step("click[Next >]").observation
    shop.step("click[< Prev]")
    assert shop.page_number == 4 and shop.observation().splitlines()[3].startswith(
        f"[{seen[30]}]")
    assert shop.paged == 5  # four pages on, one back; the invalid press is not counted


def test_the_account_shows_paging_and_the_slips_as_written(bundled: WebShopEnvironment) -> None:
    """An agent that copies the first button of the results page ("[Next >]") and then presses
    it pages to and fro: the account says so, and shows the slip as the agent wrote it."""
    task = bundled.tasks("val")[0]
    result = _with(bundled, max_turns=5).rollout(task, "", ScriptedModel(
        ["search[shampoo]", "[Next >]", "click[Next >]", "click[< Prev]",
         "I would open the first one and then pick a size and buy it right away, I think"]))
    assert "never opened an item: it turned the results pages 2 times (Next > / < Prev) and " \
           "never clicked an item's product id" in result.reason
    assert ("2 of 5 actions were invalid (e.g. '[Next >]', 'I would open the first one and "
            "then pick a size and buy i...')") in result.reason
    opened = _with(bundled, max_turns=3).rollout(task, "", ScriptedModel(
        ["search[shampoo]", "click[Next >]", f"click[{bundled.index.search('shampoo')[10].asin}]"]))
    assert "opened 1 items" in opened.reason and "turned" not in opened.reason


# ----------------------------------------------------------------------------- scripted agents

RIGHT = ["Action: search[tea tree shampoo for dry hair]", "click[B00SHAMP01]",
         "`click[Lavender]`", "think[the instruction also wants 16 fl oz]",
         "I pick the size: click[16 fl oz]", "click[Buy Now]"]


def test_a_scripted_agent_that_buys_the_right_item_scores_one(small: WebShopEnvironment) -> None:
    task = _task(small, "B00SHAMP01-0")
    model = ScriptedModel(RIGHT)
    result = small.rollout(task, small.initial_skill(), model)
    assert (result.hard, result.soft, result.reason, result.turns) == (1.0, 1.0, "", 6)
    assert result.metadata["bought"] == "B00SHAMP01" and result.metadata["invalid"] == 0
    assert result.metadata["options"] == {"scent": "lavender", "size": "16 fl oz"}
    system = model.calls[0].messages[0].text()
    assert system.startswith(small.initial_skill().strip()) and "## How to shop" in system
    assert model.calls[0].tools is None
    assert model.calls[0].messages[1].text().startswith(f"WebShop\nInstruction:\n{task.prompt}")
    assert [m.text() for m in result.messages if m.role == "user"][4] == "OK."  # the think turn
    assert len(result.messages) == 2 + 2 * 6


def test_a_wrong_item_scores_its_partial_reward_and_names_what_was_missed(
    small: WebShopEnvironment,
) -> None:
    task = _task(small, "B00SHAMP01-0")
    other = small.rollout(task, "", ScriptedModel(["search[shampoo]", "click[B00SHAMP02]",
                                                   "click[Buy Now]"]))
    # No attribute, no option; the price is within the budget; same query: (0+0+1)/(2+2+1).
    assert (other.hard, other.soft) == (0.0, pytest.approx(0.2))
    assert "bought B00SHAMP02 ('Ocean Breeze Volumizing Shampoo')" in other.reason
    assert "missed attributes: 'tea tree', 'for dry hair'" in other.reason
    assert "missed options: 'lavender', '16 fl oz' (chosen: none chosen)" in other.reason
    assert "price" not in other.reason.split("reward")[1] and "type" not in other.reason
    options = small.rollout(task, "", ScriptedModel([
        "search[shampoo]", "click[B00SHAMP01]", "click[mint]", "click[8 fl oz | pack of 1]",
        "click[Buy Now]"]))
    assert options.soft == pytest.approx(0.6) and "missed attributes" not in options.reason
    assert ("missed options: 'lavender', '16 fl oz' (chosen: scent: mint, size: 8 fl oz | "
            "pack of 1)") in options.reason
    # A lamp for "soft socks": over the budget, and another type altogether (type factor 0).
    socks = small.rollout(_task(small, "B00SOCKS01-1"), "", ScriptedModel([
        "search[floor lamp]", "click[B00LAMP001]", "click[Buy Now]"]))
    assert socks.soft == 0.0 and "missed attributes: 'soft'" in socks.reason
    assert "price $100.00 is above the budget of $30.00" in socks.reason
    assert "wrong product type (type factor 0: query differs, category differs" in socks.reason


def test_no_purchase_scores_zero_and_says_why(small: WebShopEnvironment) -> None:
    idle = _with(small, max_turns=3)
    result = idle.rollout(_task(small, "B00SHAMP01-0"), "", ScriptedModel(default="let me see"))
    assert (result.hard, result.soft, result.turns) == (0.0, 0.0, 3)
    assert result.reason == ("no purchase within 3 turns (Buy Now was never clicked); never "
                             "searched; never opened an item; 3 of 3 actions were invalid (e.g. "
                             "'let me see')")
    assert result.messages[-1].text().startswith("Invalid action: no action found")
    # The text of a button of the page alone, bare or in brackets, is told how to press it;
    # one not on the page is just not an action.
    bare = _with(small, max_turns=4).rollout(_task(small, "B00SHAMP01-0"), "", ScriptedModel(
        ["search[shampoo]", "[Back to Search]", "b00shamp02", "[Buy Now]"]))
    assert bare.messages[5].text() == ("Invalid action: Back to Search alone is not an "
                                       "action; to press that button, reply click[Back to "
                                       "Search].")
    assert bare.messages[7].text() == ("Invalid action: B00SHAMP02 alone is not an action; "
                                       "to press that button, reply click[B00SHAMP02].")
    assert bare.messages[-1].text().startswith("Invalid action: no action found")
    browsed = idle.rollout(_task(small, "B00SHAMP01-0"), "", ScriptedModel(
        ["search[shampoo]", "click[B00SHAMP02]", "click[Back to Search]"]))
    assert "searched 1 times (first: 'shampoo'); opened 1 items" in browsed.reason


def test_the_text_protocol_is_tolerant() -> None:
    assert parse_reply("Action: search[red lipstick]\nbecause") == "search[red lipstick]"
    assert parse_reply("> click[< Prev]") == "click[< Prev]"
    assert parse_reply("**Action:** Click[Next >]") == "click[Next >]"
    assert parse_reply('"click[Buy Now]"') == "click[Buy Now]"
    assert parse_reply("I will now click[B00SHAMP01] to open it.") == "click[B00SHAMP01]"
    assert parse_reply("Think[compare prices]") == "think[compare prices]"
    assert parse_reply("search[red lipstick] then click[B00X]") == "search[red lipstick]"
    assert parse_reply("buy the first one") == "" and parse_reply("") == ""


def _call(n: int, name: str, **arguments: str) -> dict[str, Any]:
    return {"id": f"c{n}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}


def test_the_native_tool_protocol(small: WebShopEnvironment) -> None:
    native = _with(small, tool_mode="native")
    calls = [[_call(0, "search", query="tea tree shampoo")],
             [_call(1, "click", button="B00SHAMP01"), _call(2, "click", button="Buy Now")],
             [{"id": "c3", "type": "function", "function": {"name": "buy", "arguments": "{}"}}],
             [{"id": "c4", "type": "function", "function": {"name": "click",
                                                            "arguments": "{oops"}}],
             [_call(5, "click", button="lavender")], [_call(6, "click", button="16 fl oz")],
             [_call(7, "click", button="Buy Now")]]
    model = ScriptedModel([Completion(text="", tool_calls=c) for c in calls])
    result = native.rollout(_task(small, "B00SHAMP01-0"), native.initial_skill(), model)
    assert (result.hard, result.turns, result.metadata["invalid"]) == (1.0, 7, 2)
    assert [t["function"]["name"] for t in model.calls[0].tools or []] == ["search", "click"]
    assert "call the search tool" in model.calls[0].messages[0].text()
    roles = [m.role for m in result.messages[2:7]]
    assert roles == ["assistant", "tool", "assistant", "tool", "tool"]
    assert result.messages[6].text() == "ignored: one action per turn"  # one action per turn
    tool_texts = [m.text() for m in result.messages if m.role == "tool"]
    assert "there is no tool 'buy'" in tool_texts[3]
    assert "the arguments are not valid JSON" in tool_texts[4]
    # A reply without a tool call is read as text.
    texted = native.rollout(_task(small, "B00SHAMP01-0"), "", ScriptedModel(RIGHT))
    assert texted.hard == 1.0


def test_the_history_window_keeps_the_prefix(small: WebShopEnvironment) -> None:
    short = _with(small, max_turns=9, history_turns=4)
    model = ScriptedModel(["search[shampoo]"] + ["think[hmm]"] * 8)
    result = short.rollout(_task(small, "B00SHAMP01-0"), "skill", model)
    assert max(len(c.messages) for c in model.calls) <= 2 + 4 * 2
    assert len(result.messages) == 2 + 2 * 9 and result.metadata["trimmed_turns"] > 0
    assert "earlier turns are not shown" in model.calls[-1].messages[1].text()
    assert all(c.messages[0].text().startswith("skill") for c in model.calls)


# ----------------------------------------------------------------------------- the bundled data


def test_the_bundled_catalogue_and_its_splits(bundled: WebShopEnvironment) -> None:
    assert len(bundled.catalogue.products) == 3000 and len(bundled.catalogue.goals) == 1020
    assert {s: len(bundled.tasks(s)) for s in SPLITS} == {"train": 390, "val": 130,
                                                          "test": 500}
    groups = {s: {t.group for t in bundled.tasks(s)} for s in SPLITS}
    assert not groups["train"] & groups["val"]
    ids = [t.id for s in SPLITS for t in bundled.tasks(s)]
    assert len(ids) == len(set(ids)) == 1020
    assert re.fullmatch(r"[a-z' ]+ .+, and price lower than \d+\.00 dollars",
                        bundled.tasks("test")[0].prompt)
    assert sum(os_size.stat().st_size for os_size in BUNDLED.glob("*.gz")) < 2_000_000


def test_every_bundled_goal_is_reachable_and_solvable(bundled: WebShopEnvironment) -> None:
    pages = []
    for task in (t for s in SPLITS for t in bundled.tasks(s)):
        goal = Goal.from_reference(task.reference)
        found = [p.asin for p in bundled.index.search(goal.instruction)]
        assert goal.asin in found[:REACHABLE_PAGES * 10], goal.id
        pages.append(found.index(goal.asin) // 10 + 1)
        actions = walkthrough(bundled.catalogue, bundled.index, goal)
        assert actions is not None
        result = bundled.rollout(task, "", ScriptedModel(actions))
        assert (result.hard, result.reason) == (1.0, ""), goal.id
    assert set(pages) == {1, 2}  # some need the second page


def test_the_generator_remakes_the_bundled_files(tmp_path: Path) -> None:
    made = write_catalogue(tmp_path)
    assert [p.name for p in made] == list(FILES)
    for path in made:  # the JSON inside, byte for byte (gzip bytes depend on the zlib build)
        assert gzip.decompress(path.read_bytes()) == gzip.decompress(
            (BUNDLED / path.name).read_bytes()), path.name
    clash = replace(TYPES[0], options=(("volume", ("8 fl oz", "33.8 fl oz")),))
    with pytest.raises(ValueError, match="shampoo: volume values '8 fl oz' and '33.8 fl oz' "
                       "match"):
        check_templates([clash])
    check_templates()


# ----------------------------------------------------------------------------- config, training

NAME = "skillgrad.envs.webshop:WebShopEnvironment"


def test_the_example_config_loads(tmp_path: Path) -> None:
    assert environment_class(NAME) is WebShopEnvironment
    example = Path(__file__).resolve().parents[1] / "examples" / "webshop" / "config.yaml"
    config = yaml.safe_load(example.read_text())
    config["env"]["name"] = NAME
    config["model"] = {"target": {"backend": "scripted", "default": "x"},
                       "optimizer": {"backend": "scripted", "default": "x"}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    env = build_environment(load_config(tmp_path / "config.yaml"))
    assert isinstance(env, WebShopEnvironment) and env.options.max_turns < 15


@pytest.mark.skipif("webshop" not in environment_names(),
                    reason="the installed metadata predates the entry point (pip install -e .)")
def test_the_name_webshop_is_registered() -> None:
    assert environment_class("webshop") is WebShopEnvironment


# Something the shipped skill does not say in its own words (its four steps said again are left
# out as the skill again).
ROUTE_RULE = ("Take the route the instruction gives, in order: its words as the query, the "
              "product it describes, every option it asks for, Buy Now.")
ROUTES: dict[str, list[str]] = {}


def webshop_target(request: ChatRequest) -> str:
    """Looks around ('think') unless the skill says how to proceed; then plays the route."""
    if ROUTE_RULE not in request.messages[0].text():
        return "think[what a nice shop]"
    instruction = request.messages[1].text().splitlines()[2]
    done = sum(m.role == "assistant" for m in request.messages)
    route = ROUTES[instruction]
    return route[done] if done < len(route) else "think[done]"


webshop_optimizer = rule_optimizer(ROUTE_RULE, support=1, cue="no purchase within")


def test_one_epoch_of_training_learns_to_buy(tmp_path: Path, bundled: WebShopEnvironment) -> None:
    for task in (t for s in SPLITS for t in bundled.tasks(s)):
        goal = Goal.from_reference(task.reference)
        ROUTES[goal.instruction] = walkthrough(bundled.catalogue, bundled.index, goal) or []
    config = one_epoch({"name": NAME, "max_turns": 8}, 1, steps_per_epoch=1, eval_tasks=1)
    train_end_to_end(tmp_path, config, target="test_webshop:webshop_target",
                     optimizer="test_webshop:webshop_optimizer", rule=ROUTE_RULE)
