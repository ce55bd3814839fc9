"""The 36 ``coding`` tasks: nine of each template (:mod:`.templates`), five on ``ledger`` and
four on ``textkit``, each with its split.

Every template is in every split (train 4, val 3 or 2, test 2 or 3 of its nine), and so are
both repositories, so what a skill learns on the training tasks is tested on other requests
of the same kinds.
"""

from __future__ import annotations

from skillgrad.envs.coding.fixes import fix_specs
from skillgrad.envs.coding.keywords import keyword_specs
from skillgrad.envs.coding.templates import Spec, Target, add_function, rename


def _renames() -> list[Spec]:
    return [
        rename("ledger-rename-parse-amount", "ledger", "train",
               Target("ledger/money.py", "parse_amount"), "parse_cents",
               "from ledger.money import parse_cents; assert parse_cents('12.34') == 1234",
               ("all", "changelog")),
        rename("ledger-rename-make-sku", "ledger", "val",
               Target("ledger/items.py", "make_sku"), "new_sku",
               "from ledger.items import new_sku; assert new_sku('widget', 7) == 'WID-0007'",
               ("all",)),
        rename("ledger-rename-total-units", "ledger", "train",
               Target("ledger/stock.py", "total_units"), "units_on_hand",
               "from ledger.stock import units_on_hand; "
               "assert units_on_hand({'A': 2, 'B': 3}) == 5",
               ("changelog",)),
        rename("ledger-rename-invoice-total", "ledger", "test",
               Target("ledger/invoice.py", "invoice_total"), "total_due",
               "from ledger.invoice import total_due; assert total_due([(250, 2), (100, 1)]) "
               "== 600",
               ("all", "changelog")),
        rename("ledger-rename-is-weekend", "ledger", "val",
               Target("ledger/dates.py", "is_weekend"), "falls_on_weekend",
               "from datetime import date; from ledger.dates import falls_on_weekend; "
               "assert falls_on_weekend(date(2024, 3, 16))",
               ("all",)),
        rename("textkit-rename-snake-case", "textkit", "train",
               Target("textkit/case.py", "snake_case"), "to_snake_case",
               "from textkit.case import to_snake_case; "
               "assert to_snake_case('Hello World') == 'hello_world'",
               ("all",)),
        rename("textkit-rename-char-frequency", "textkit", "val",
               Target("textkit/counts.py", "char_frequency"), "char_counts",
               "from textkit.counts import char_counts; "
               "assert char_counts('a b a') == {'a': 2, 'b': 1}",
               ("changelog", "all")),
        rename("textkit-rename-nonblank-lines", "textkit", "test",
               Target("textkit/lines.py", "nonblank_lines"), "non_empty_lines",
               "from textkit.lines import non_empty_lines; "
               "assert non_empty_lines('a\\n\\nb') == ['a', 'b']",
               ("all",)),
        rename("textkit-rename-wrap-words", "textkit", "train",
               Target("textkit/wrap.py", "wrap_words"), "wrap_text",
               "from textkit.wrap import wrap_text; "
               "assert wrap_text('one two three', 7) == ['one two', 'three']",
               ("changelog",)),
    ]


def _additions() -> list[Spec]:
    return [
        add_function(
            "ledger-add-percent-of", "ledger", "train", Target("ledger/money.py", "percent_of"),
            "Add a function `percent_of(cents, percent)` to ledger/money.py: the given whole "
            "percent of an amount, rounded to the nearest cent (halves round up).",
            'def percent_of(cents, percent):\n    """`percent` per cent of cents, rounded to '
            'the nearest cent (halves up)."""\n    return (cents * percent + 50) // 100\n',
            "class PercentOfTests(unittest.TestCase):\n    def test_percent_of(self):\n"
            "        from ledger.money import percent_of\n\n"
            "        self.assertEqual(percent_of(1999, 15), 300)\n",
            ["from ledger.money import percent_of; "
             "assert percent_of(1999, 15) == 300 and percent_of(50, 1) == 1"],
            ("cents", "all"), cents="percent_of(1999, 15)"),
        add_function(
            "ledger-add-out-of-stock", "ledger", "test", Target("ledger/stock.py", "out_of_stock"),
            "Add a function `out_of_stock(levels)` to ledger/stock.py that returns the SKUs "
            "with no units on hand, sorted.",
            'def out_of_stock(levels):\n    """The SKUs with no units on hand, sorted."""\n'
            "    return sorted(sku for sku, units in levels.items() if units == 0)\n",
            "class OutOfStockTests(unittest.TestCase):\n    def test_out_of_stock(self):\n"
            "        from ledger.stock import out_of_stock\n\n"
            "        self.assertEqual(out_of_stock({'B': 0, 'A': 0, 'C': 4}), ['A', 'B'])\n",
            ["from ledger.stock import out_of_stock; "
             "assert out_of_stock({'B': 0, 'A': 0, 'C': 4}) == ['A', 'B']"],
            ("tests", "all")),
        add_function(
            "ledger-add-average-unit-price", "ledger", "val",
            Target("ledger/invoice.py", "average_unit_price"),
            "Add a function `average_unit_price(lines)` to ledger/invoice.py: the invoice "
            "total divided by the number of units on it, rounded to the nearest cent (halves "
            "round up); 0 for an invoice without units.",
            'def average_unit_price(lines):\n    """The invoice total divided by its units, '
            'rounded to the nearest cent (halves up); 0 without units."""\n'
            "    units = sum(quantity for _, quantity in lines)\n"
            "    if units == 0:\n        return 0\n"
            "    return (2 * invoice_total(lines) + units) // (2 * units)\n",
            "class AverageUnitPriceTests(unittest.TestCase):\n"
            "    def test_average_unit_price(self):\n"
            "        from ledger.invoice import average_unit_price\n\n"
            "        self.assertEqual(average_unit_price([(100, 1), (250, 3)]), 213)\n"
            "        self.assertEqual(average_unit_price([]), 0)\n",
            ["from ledger.invoice import average_unit_price as f; "
             "assert f([(100, 1), (250, 3)]) == 213 and f([(100, 2)]) == 100 and f([]) == 0"],
            ("cents", "changelog"), cents="average_unit_price([(100, 1), (250, 3)])"),
        add_function(
            "ledger-add-quarter-of", "ledger", "train", Target("ledger/dates.py", "quarter_of"),
            "Add a function `quarter_of(day)` to ledger/dates.py that returns the quarter of "
            "the year (1 to 4) a date falls in.",
            'def quarter_of(day):\n    """The quarter of the year (1 to 4) day falls in."""\n'
            "    return (day.month - 1) // 3 + 1\n",
            "class QuarterOfTests(unittest.TestCase):\n    def test_quarter_of(self):\n"
            "        from ledger.dates import quarter_of\n\n"
            "        self.assertEqual(quarter_of(date(2024, 4, 1)), 2)\n",
            ["from datetime import date; from ledger.dates import quarter_of as q; "
             "assert (q(date(2024, 3, 31)), q(date(2024, 4, 1)), q(date(2024, 12, 5))) "
             "== (1, 2, 4)"],
            ("tests",)),
        add_function(
            "ledger-add-sku-number", "ledger", "test", Target("ledger/items.py", "sku_number"),
            "Add a function `sku_number(sku)` to ledger/items.py that returns the number part "
            "of a SKU as an int, e.g. 7 for 'WID-0007'.",
            'def sku_number(sku):\n    """The number part of a SKU: sku_number(\'WID-0007\') '
            '== 7."""\n    return int(sku.partition("-")[2])\n',
            "class SkuNumberTests(unittest.TestCase):\n    def test_sku_number(self):\n"
            "        from ledger.items import sku_number\n\n"
            "        self.assertEqual(sku_number('WID-0007'), 7)\n",
            ["from ledger.items import sku_number; "
             "assert sku_number('WID-0007') == 7 and sku_number('CAB-1200') == 1200"],
            ("all", "changelog")),
        add_function(
            "textkit-add-kebab-case", "textkit", "train", Target("textkit/case.py", "kebab_case"),
            "Add a function `kebab_case(text)` to textkit/case.py: 'Hello World' and "
            "'helloWorld' both become 'hello-world'.",
            'def kebab_case(text):\n    """\'Hello World\' or \'helloWorld\' -> '
            '\'hello-world\'."""\n    return "-".join(word.lower() for word in _words(text))\n',
            "class KebabCaseTests(unittest.TestCase):\n    def test_kebab_case(self):\n"
            "        from textkit.case import kebab_case\n\n"
            "        self.assertEqual(kebab_case('helloWorld'), 'hello-world')\n",
            ["from textkit.case import kebab_case as k; "
             "assert k('Hello World') == 'hello-world' and k('helloWorld') == 'hello-world'"],
            ("docstring", "all")),
        add_function(
            "textkit-add-is-slug", "textkit", "val", Target("textkit/slug.py", "is_slug"),
            "Add a function `is_slug(text)` to textkit/slug.py: True when text is lower-case "
            "letters and digits in words joined by single dashes, like 'hello-world-2'.",
            'def is_slug(text):\n    """True for lower-case letters and digits in words '
            'joined by single dashes."""\n'
            '    return re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", text) is not None\n',
            "class IsSlugTests(unittest.TestCase):\n    def test_is_slug(self):\n"
            "        from textkit.slug import is_slug\n\n"
            "        self.assertTrue(is_slug('hello-world-2'))\n"
            "        self.assertFalse(is_slug('a--b'))\n",
            ["from textkit.slug import is_slug as s; assert s('hello-world-2') and s('a') and "
             "not s('Hello') and not s('a--b') and not s('-a') and not s('a-')"],
            ("tests", "docstring")),
        add_function(
            "textkit-add-sentence-count", "textkit", "test",
            Target("textkit/counts.py", "sentence_count"),
            "Add a function `sentence_count(text)` to textkit/counts.py that counts the "
            "sentences of a text: runs of words ending in '.', '!' or '?'.",
            'def sentence_count(text):\n    """The number of sentences: runs of words ending '
            'in ., ! or ?."""\n    count, in_sentence = 0, False\n    for char in text:\n'
            "        if char.isalnum():\n            in_sentence = True\n"
            '        elif char in ".!?" and in_sentence:\n'
            "            count, in_sentence = count + 1, False\n    return count\n",
            "class SentenceCountTests(unittest.TestCase):\n    def test_sentence_count(self):\n"
            "        from textkit.counts import sentence_count\n\n"
            "        self.assertEqual(sentence_count('Hi. How are you? Fine!'), 3)\n",
            ["from textkit.counts import sentence_count as c; "
             "assert c('Hi. How are you? Fine!') == 3 and c('') == 0 and c('Wait...') == 1"],
            ("all", "changelog")),
        add_function(
            "textkit-add-count-blank-lines", "textkit", "train",
            Target("textkit/lines.py", "count_blank_lines"),
            "Add a function `count_blank_lines(text)` to textkit/lines.py that counts the lines "
            "holding nothing but whitespace.",
            'def count_blank_lines(text):\n    """The number of lines holding nothing but '
            'whitespace."""\n    return sum(1 for line in text.splitlines() if not '
            "line.strip())\n",
            "class CountBlankLinesTests(unittest.TestCase):\n"
            "    def test_count_blank_lines(self):\n"
            "        from textkit.lines import count_blank_lines\n\n"
            "        self.assertEqual(count_blank_lines('a\\n\\n  \\nb'), 2)\n",
            ["from textkit.lines import count_blank_lines as c; "
             "assert c('a\\n\\n  \\nb') == 2 and c('a') == 0"],
            ("docstring", "tests")),
    ]


def specs() -> list[Spec]:
    """Every task, in a stable order: by template, then as listed."""
    return [*_renames(), *_additions(), *keyword_specs(), *fix_specs()]
