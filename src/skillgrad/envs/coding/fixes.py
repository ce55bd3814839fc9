"""The nine ``fix_bug`` tasks of the ``coding`` set (:mod:`.instances` lists them all): each
fixes one of the bugs the repositories hold on purpose."""

from __future__ import annotations

from skillgrad.envs.coding.templates import Spec, Target, fix_bug


def _regression(name: str, call: str, expected: str) -> str:
    """A regression test of ``name``: ``call`` (in the test's own import) equals ``expected``."""
    module = {"low_stock": "ledger.stock", "page": "ledger.report", "split_evenly":
              "ledger.money", "days_in_range": "ledger.dates", "top_items": "ledger.report",
              "unique_slug": "textkit.slug", "truncate": "textkit.wrap", "line_at":
              "textkit.lines", "title_case": "textkit.case"}[name]
    title = "".join(part.capitalize() for part in name.split("_"))
    imports = f"        from {module} import {name}\n"
    if "date(" in call:
        imports = "        from datetime import date\n\n" + imports
    return (f"class {title}RegressionTests(unittest.TestCase):\n"
            f"    def test_{name}(self):\n{imports}\n"
            f"        self.assertEqual({call}, {expected})\n")


def fix_specs() -> list[Spec]:
    return [
        fix_bug("ledger-fix-low-stock", "ledger", "train", Target("ledger/stock.py", "low_stock"),
                "`low_stock` in ledger/stock.py also reports SKUs whose quantity equals the "
                "threshold; it should report only those below it. Fix it.",
                "if units <= threshold)", "if units < threshold)",
                _regression("low_stock", "low_stock({'A': 5, 'B': 4}, 5)", "['B']"),
                ["from ledger.stock import low_stock; "
                 "assert low_stock({'A': 5, 'B': 4, 'C': 9}, 5) == ['B']"],
                ("regression",)),
        fix_bug("ledger-fix-page", "ledger", "test", Target("ledger/report.py", "page"),
                "`page(rows, 1)` in ledger/report.py returns the second page of rows, but "
                "pages count from 1: page 1 must be the first `size` rows. Fix it.",
                "    start = number * size\n", "    start = (number - 1) * size\n",
                _regression("page", "page(list(range(15)), 1)", "list(range(10))"),
                ["from ledger.report import page; rows = list(range(25)); "
                 "assert page(rows, 1) == rows[:10] and page(rows, 3) == [20, 21, 22, 23, 24]"],
                ("regression", "changelog")),
        fix_bug("ledger-fix-split-evenly", "ledger", "val",
                Target("ledger/money.py", "split_evenly"),
                "`split_evenly(1000, 3)` in ledger/money.py returns amounts that add up to 999 "
                "cents. Fix it so that the amounts always add up to the total.",
                "if i < remainder - 1 else", "if i < remainder else",
                _regression("split_evenly", "split_evenly(1000, 3)", "[334, 333, 333]"),
                ["from ledger.money import split_evenly as s; "
                 "assert s(1000, 3) == [334, 333, 333] and s(101, 4) == [26, 25, 25, 25] and "
                 "s(5, 3) == [2, 2, 1]"],
                ("changelog",)),
        fix_bug("ledger-fix-days-in-range", "ledger", "train",
                Target("ledger/dates.py", "days_in_range"),
                "`days_in_range(date(2024, 1, 1), date(2024, 1, 31))` in ledger/dates.py "
                "returns 30, but both ends are included, so it must be 31. Fix it.",
                "    return (end - start).days\n", "    return (end - start).days + 1\n",
                _regression("days_in_range", "days_in_range(date(2024, 1, 1), date(2024, 1, 31))",
                            "31"),
                ["from datetime import date; from ledger.dates import days_in_range as d; "
                 "assert d(date(2024, 1, 1), date(2024, 1, 31)) == 31 and "
                 "d(date(2024, 1, 1), date(2024, 1, 1)) == 1"],
                ("regression",)),
        fix_bug("ledger-fix-top-items", "ledger", "test", Target("ledger/report.py", "top_items"),
                "`top_items(totals, 3)` in ledger/report.py returns only two SKUs. Fix it so "
                "that it returns n of them.",
                "ranked[:n - 1]", "ranked[:n]",
                _regression("top_items", "top_items({'A': 5, 'B': 9, 'C': 7}, 2)", "['B', 'C']"),
                ["from ledger.report import top_items as t; "
                 "assert t({'A': 5, 'B': 9, 'C': 7}, 2) == ['B', 'C'] and "
                 "t({'A': 5}, 1) == ['A']"],
                ("regression", "changelog")),
        fix_bug("textkit-fix-unique-slug", "textkit", "train",
                Target("textkit/slug.py", "unique_slug"),
                "`unique_slug('post', {'post'})` in textkit/slug.py returns 'post-1', but the "
                "first number added must be 2 ('post-2'). Fix it.",
                "    number = 1\n", "    number = 2\n",
                _regression("unique_slug", "unique_slug('post', {'post'})", "'post-2'"),
                ["from textkit.slug import unique_slug as u; "
                 "assert u('post', {'post'}) == 'post-2' and "
                 "u('post', {'post', 'post-2'}) == 'post-3' and u('post', set()) == 'post'"],
                ("regression",)),
        fix_bug("textkit-fix-truncate", "textkit", "val", Target("textkit/wrap.py", "truncate"),
                "`truncate('abcdefghij', 8)` in textkit/wrap.py returns 11 characters, but the "
                "result, ellipsis included, must be at most `width` long. Fix it.",
                "    return text[:width] + ellipsis\n",
                "    return text[:max(width - len(ellipsis), 0)] + ellipsis\n",
                _regression("truncate", "truncate('abcdefghij', 8)", "'abcde...'"),
                ["from textkit.wrap import truncate as t; "
                 "assert t('abcdefghij', 8) == 'abcde...' and t('abc', 8) == 'abc' and "
                 "len(t('x' * 50, 20)) == 20"],
                ("changelog", "regression")),
        fix_bug("textkit-fix-line-at", "textkit", "test", Target("textkit/lines.py", "line_at"),
                "`line_at(text, 1)` in textkit/lines.py returns the second line, but lines "
                "count from 1. Fix it.",
                "    return text.splitlines()[number]\n",
                "    return text.splitlines()[number - 1]\n",
                _regression("line_at", "line_at('one\\ntwo', 1)", "'one'"),
                ["from textkit.lines import line_at as l; "
                 "assert l('one\\ntwo\\nthree', 1) == 'one' and l('one\\ntwo\\nthree', 3) == "
                 "'three'"],
                ("regression",)),
        fix_bug("textkit-fix-title-case", "textkit", "train",
                Target("textkit/case.py", "title_case"),
                "`title_case('the lord of the rings')` in textkit/case.py returns "
                "'the Lord of the Rings', but a small word that comes first must be "
                "capitalised too. Fix it.",
                "    return \" \".join(word.lower() if word.lower() in SMALL_WORDS else "
                "word.capitalize()\n                    for word in words)\n",
                "    return \" \".join(word.lower() if i > 0 and word.lower() in SMALL_WORDS\n"
                "                    else word.capitalize() for i, word in enumerate(words))\n",
                _regression("title_case", "title_case('the lord of the rings')",
                            "'The Lord of the Rings'"),
                ["from textkit.case import title_case; "
                 "assert title_case('the lord of the rings') == 'The Lord of the Rings'"],
                ("changelog",)),
    ]
