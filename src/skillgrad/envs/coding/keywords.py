"""The nine ``add_keyword`` tasks of the ``coding`` set (:mod:`.instances` lists them all)."""

from __future__ import annotations

from skillgrad.envs.coding.templates import Spec, Target, add_keyword


def keyword_specs() -> list[Spec]:
    return [
        add_keyword(
            "ledger-keyword-format-cents-symbol", "ledger", "train",
            Target("ledger/money.py", "format_cents"), "symbol",
            "Add a keyword argument `symbol='$'` to `format_cents` in ledger/money.py: the "
            "currency sign written in place of the dollar sign.",
            'def format_cents(cents, symbol="$"):\n'
            '    """1234 -> \'$12.34\'; a negative amount gets a leading minus: -5 -> '
            "'-$0.05'; `symbol`\n    is written in place of the dollar sign.\"\"\"\n"
            '    sign = "-" if cents < 0 else ""\n'
            "    whole, part = divmod(abs(cents), 100)\n"
            '    return f"{sign}{symbol}{whole}.{part:02d}"\n',
            "class SymbolTests(unittest.TestCase):\n    def test_symbol(self):\n"
            "        self.assertEqual(format_cents(1234, symbol='EUR '), 'EUR 12.34')\n",
            ["from ledger.money import format_cents as f; "
             "assert f(1234, symbol='EUR ') == 'EUR 12.34' and f(-5, symbol='EUR ') == "
             "'-EUR 0.05' and f(1234) == '$12.34'"],
            ("tests", "changelog")),
        add_keyword(
            "ledger-keyword-ship-backorder", "ledger", "val",
            Target("ledger/stock.py", "ship"), "allow_backorder",
            "Add a keyword argument `allow_backorder=False` to `ship` in ledger/stock.py: when "
            "it is true, shipping more units than are on hand is allowed and the level goes "
            "below zero.",
            "def ship(levels, sku, quantity, allow_backorder=False):\n"
            '    """New levels with `quantity` units of `sku` taken out; shipping more units '
            "than are on\n    hand raises ValueError, unless `allow_backorder` is true (the "
            'level then goes\n    below zero)."""\n'
            "    if quantity <= 0:\n"
            '        raise ValueError("quantity must be positive")\n'
            "    on_hand = levels.get(sku, 0)\n"
            "    if quantity > on_hand and not allow_backorder:\n"
            '        raise ValueError(f"only {on_hand} of {sku} on hand")\n'
            "    updated = dict(levels)\n"
            "    updated[sku] = on_hand - quantity\n"
            "    return updated\n",
            "class BackorderTests(unittest.TestCase):\n    def test_allow_backorder(self):\n"
            "        self.assertEqual(ship({'A': 1}, 'A', 3, allow_backorder=True), {'A': -2})\n",
            ["import unittest; from ledger.stock import ship; "
             "assert ship({'A': 1}, 'A', 3, allow_backorder=True) == {'A': -2}; "
             "unittest.TestCase().assertRaises(ValueError, ship, {'A': 1}, 'A', 3)"],
            ("tests",)),
        add_keyword(
            "ledger-keyword-line-discount", "ledger", "train",
            Target("ledger/invoice.py", "line_total"), "discount_percent",
            "Add a keyword argument `discount_percent=0` to `line_total` in ledger/invoice.py: "
            "the line's price less that whole percent, the discount rounded to the nearest "
            "cent (halves round up).",
            "def line_total(unit_cents, quantity, discount_percent=0):\n"
            '    """The price of one line, less `discount_percent` per cent (the discount '
            'rounded to the\n    nearest cent, halves up)."""\n'
            "    total = unit_cents * quantity\n"
            "    return total - (total * discount_percent + 50) // 100\n",
            "class LineDiscountTests(unittest.TestCase):\n    def test_discount_percent(self):\n"
            "        self.assertEqual(line_total(999, 3, discount_percent=10), 2697)\n",
            ["from ledger.invoice import line_total as f; "
             "assert f(999, 3, discount_percent=10) == 2697 and f(999, 3) == 2997"],
            ("cents", "tests"), cents="line_total(999, 3, discount_percent=10)"),
        add_keyword(
            "ledger-keyword-due-date-weekends", "ledger", "test",
            Target("ledger/dates.py", "due_date"), "skip_weekends",
            "Add a keyword argument `skip_weekends=False` to `due_date` in ledger/dates.py: "
            "when it is true, a due date on a Saturday or Sunday moves to the Monday after.",
            "def due_date(issued, terms_days=30, skip_weekends=False):\n"
            '    """The day payment is due: `terms_days` days after `issued`; with '
            "`skip_weekends`, a\n    due date on a Saturday or Sunday moves to the Monday "
            'after."""\n'
            "    due = issued + timedelta(days=terms_days)\n"
            "    while skip_weekends and due.weekday() >= 5:\n"
            "        due += timedelta(days=1)\n"
            "    return due\n",
            "class SkipWeekendsTests(unittest.TestCase):\n    def test_skip_weekends(self):\n"
            "        self.assertEqual(due_date(date(2024, 3, 1), 15, skip_weekends=True),\n"
            "                         date(2024, 3, 18))\n",
            ["from datetime import date; from ledger.dates import due_date as d; "
             "assert d(date(2024, 3, 1), 15, skip_weekends=True) == date(2024, 3, 18) and "
             "d(date(2024, 3, 1), 15) == date(2024, 3, 16) and "
             "d(date(2024, 3, 1), 14, skip_weekends=True) == date(2024, 3, 15)"],
            ("changelog",)),
        add_keyword(
            "ledger-keyword-sku-digits", "ledger", "val",
            Target("ledger/items.py", "make_sku"), "digits",
            "Add a keyword argument `digits=4` to `make_sku` in ledger/items.py: how many "
            "digits the number is padded to.",
            "def make_sku(name, number, digits=4):\n"
            '    """A stock-keeping unit: the first three letters of the name in capitals, a '
            "dash and the\n    number padded to `digits` digits: make_sku('widget', 7) == "
            "'WID-0007'.\"\"\"\n"
            '    letters = "".join(c for c in name if c.isalpha())[:3].upper()\n'
            '    return f"{letters}-{number:0{digits}d}"\n',
            "class SkuDigitsTests(unittest.TestCase):\n    def test_digits(self):\n"
            "        self.assertEqual(make_sku('widget', 7, digits=6), 'WID-000007')\n",
            ["from ledger.items import make_sku as m; "
             "assert m('widget', 7, digits=6) == 'WID-000007' and m('widget', 7) == 'WID-0007'"],
            ("tests", "changelog")),
        add_keyword(
            "textkit-keyword-slug-max-length", "textkit", "train",
            Target("textkit/slug.py", "slugify"), "max_length",
            "Add a keyword argument `max_length=None` to `slugify` in textkit/slug.py: when "
            "given, the slug is cut to at most that many characters and never ends in the "
            "separator.",
            'def slugify(text, sep="-", max_length=None):\n'
            '    """The lower-case words of text joined by `sep`: \'Hello, World!\' -> '
            "'hello-world'; with\n    `max_length`, cut to at most that many characters, "
            'never ending in the separator."""\n'
            '    slug = sep.join(re.findall(r"[a-z0-9]+", text.lower()))\n'
            "    if max_length is not None:\n"
            "        slug = slug[:max_length].rstrip(sep)\n"
            "    return slug\n",
            "class MaxLengthTests(unittest.TestCase):\n    def test_max_length(self):\n"
            "        self.assertEqual(slugify('Hello big world', max_length=6), 'hello')\n",
            ["from textkit.slug import slugify as s; "
             "assert s('Hello big world', max_length=9) == 'hello-big' and "
             "s('Hello big world', max_length=6) == 'hello' and "
             "s('Hello big world') == 'hello-big-world'"],
            ("docstring",)),
        add_keyword(
            "textkit-keyword-word-count-unique", "textkit", "val",
            Target("textkit/counts.py", "word_count"), "unique",
            "Add a keyword argument `unique=False` to `word_count` in textkit/counts.py: when "
            "it is true, count the different words only, ignoring case.",
            "def word_count(text, unique=False):\n"
            '    """The number of words (separated by whitespace); with `unique`, the number '
            'of different\n    words, ignoring case."""\n'
            "    words = text.split()\n"
            "    return len({word.lower() for word in words}) if unique else len(words)\n",
            "class UniqueWordsTests(unittest.TestCase):\n    def test_unique(self):\n"
            "        self.assertEqual(word_count('a A b', unique=True), 2)\n",
            ["from textkit.counts import word_count as c; "
             "assert c('a A b', unique=True) == 2 and c('a A b') == 3"],
            ("docstring", "tests")),
        add_keyword(
            "textkit-keyword-indent-skip-blank", "textkit", "test",
            Target("textkit/lines.py", "indent_lines"), "skip_blank",
            "Add a keyword argument `skip_blank=False` to `indent_lines` in textkit/lines.py: "
            "when it is true, lines holding nothing but whitespace are left as they are.",
            'def indent_lines(text, prefix="    ", skip_blank=False):\n'
            '    """Every line of text with `prefix` in front; with `skip_blank`, lines '
            'holding nothing\n    but whitespace are left as they are."""\n'
            '    return "\\n".join(line if skip_blank and not line.strip() else prefix + line\n'
            "                     for line in text.splitlines())\n",
            "class SkipBlankTests(unittest.TestCase):\n    def test_skip_blank(self):\n"
            "        self.assertEqual(indent_lines('a\\n\\nb', '> ', skip_blank=True), "
            "'> a\\n\\n> b')\n",
            ["from textkit.lines import indent_lines as i; "
             "assert i('a\\n\\nb', '> ', skip_blank=True) == '> a\\n\\n> b' and "
             "i('a\\n\\nb', '> ') == '> a\\n> \\n> b'"],
            ("changelog", "docstring")),
        add_keyword(
            "textkit-keyword-camel-upper-first", "textkit", "train",
            Target("textkit/case.py", "camel_case"), "upper_first",
            "Add a keyword argument `upper_first=False` to `camel_case` in textkit/case.py: "
            "when it is true, the first word is capitalised too ('HelloWorld').",
            "def camel_case(text, upper_first=False):\n"
            "    \"\"\"'hello world' -> 'helloWorld'; with `upper_first`, 'HelloWorld'.\"\"\"\n"
            "    words = [word.lower() for word in _words(text)]\n"
            "    if not words:\n"
            '        return ""\n'
            "    first = words[0].capitalize() if upper_first else words[0]\n"
            '    return first + "".join(word.capitalize() for word in words[1:])\n',
            "class UpperFirstTests(unittest.TestCase):\n    def test_upper_first(self):\n"
            "        self.assertEqual(camel_case('hello world', upper_first=True), "
            "'HelloWorld')\n",
            ["from textkit.case import camel_case as c; "
             "assert c('hello big world', upper_first=True) == 'HelloBigWorld' and "
             "c('hello world') == 'helloWorld'"],
            ("tests",)),
    ]
