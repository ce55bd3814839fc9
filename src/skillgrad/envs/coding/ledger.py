"""The source of ``ledger``, one of the two repositories the ``coding`` tasks work in: a tiny
inventory ledger (items, stock levels, invoices, reports, dates) with stdlib ``unittest``
tests.

Its conventions, which the tasks check and the repository does not spell out: money is an
``int`` number of cents, never a float; every public function is listed in its module's
``__all__``; new behaviour gets a test in ``tests/test_<module>.py``; a bug fix gets its test
in ``tests/test_regressions.py`` and leaves the existing test files as they are; every change
gets a line under ``## Unreleased`` in ``CHANGELOG.md``. It holds five small bugs on purpose
(the ``fix`` tasks): ``split_evenly``, ``low_stock``, ``page``, ``top_items`` and
``days_in_range``.
"""

from __future__ import annotations

FILES: dict[str, str] = {}

FILES[".gitignore"] = """__pycache__/
*.pyc
"""

FILES["README.md"] = """# ledger

Items, stock levels, invoices and reports for a small shop.

Run the tests with `python3 -m unittest`.
"""

FILES["VERSION"] = "0.4.0\n"

FILES["CHANGELOG.md"] = """# Changelog

## Unreleased

## 0.4.0 (2024-03-18)

- Added `report.summary_line`.
- `money.parse_amount` reads an amount with one decimal.

## 0.3.0 (2024-01-09)

- Added `dates.due_date` and `dates.is_weekend`.
"""

FILES["ledger/__init__.py"] = '''"""ledger: items, stock levels, invoices and reports for a small shop."""
'''

FILES["ledger/money.py"] = r'''"""Amounts of money."""

__all__ = ["apply_discount", "format_cents", "parse_amount", "split_evenly"]


def format_cents(cents):
    """1234 -> '$12.34'; a negative amount gets a leading minus: -5 -> '-$0.05'."""
    sign = "-" if cents < 0 else ""
    whole, part = divmod(abs(cents), 100)
    return f"{sign}${whole}.{part:02d}"


def parse_amount(text):
    """'12.34', '$12.34', '12.5' or '12' -> the amount in cents."""
    text = text.strip().lstrip("$")
    whole, _, part = text.partition(".")
    part = (part + "00")[:2]
    return int(whole or "0") * 100 + int(part)


def split_evenly(total_cents, parts):
    """total_cents divided into `parts` amounts that add up to the total; when it does not
    divide evenly, the first amounts get one cent more."""
    if parts < 1:
        raise ValueError("parts must be at least 1")
    share, remainder = divmod(total_cents, parts)
    return [share + 1 if i < remainder - 1 else share for i in range(parts)]


def apply_discount(cents, percent):
    """cents less `percent` per cent, the discount rounded to the nearest cent (halves up)."""
    return cents - (cents * percent + 50) // 100
'''

FILES["ledger/items.py"] = r'''"""Items the shop stocks."""

from dataclasses import dataclass

__all__ = ["Item", "is_valid_sku", "make_sku"]


@dataclass(frozen=True)
class Item:
    sku: str
    name: str
    price_cents: int


def make_sku(name, number):
    """A stock-keeping unit: the first three letters of the name in capitals, a dash and the
    number in four digits: make_sku('widget', 7) == 'WID-0007'."""
    letters = "".join(c for c in name if c.isalpha())[:3].upper()
    return f"{letters}-{number:04d}"


def is_valid_sku(sku):
    """Three capital letters, a dash and four digits."""
    head, dash, tail = sku.partition("-")
    return (dash == "-" and len(head) == 3 and head.isalpha() and head.isupper()
            and len(tail) == 4 and tail.isdigit())
'''

FILES["ledger/stock.py"] = r'''"""Stock levels: a dict from SKU to the number of units on hand."""

__all__ = ["low_stock", "receive", "ship", "total_units"]


def receive(levels, sku, quantity):
    """New levels with `quantity` units of `sku` added."""
    if quantity <= 0:
        raise ValueError("quantity must be positive")
    updated = dict(levels)
    updated[sku] = updated.get(sku, 0) + quantity
    return updated


def ship(levels, sku, quantity):
    """New levels with `quantity` units of `sku` taken out; shipping more units than are on
    hand raises ValueError."""
    if quantity <= 0:
        raise ValueError("quantity must be positive")
    on_hand = levels.get(sku, 0)
    if quantity > on_hand:
        raise ValueError(f"only {on_hand} of {sku} on hand")
    updated = dict(levels)
    updated[sku] = on_hand - quantity
    return updated


def low_stock(levels, threshold):
    """The SKUs with fewer than `threshold` units on hand, sorted."""
    return sorted(sku for sku, units in levels.items() if units <= threshold)


def total_units(levels):
    """All units on hand."""
    return sum(levels.values())
'''

FILES["ledger/invoice.py"] = r'''"""Invoices: lines of (unit price in cents, quantity)."""

__all__ = ["add_tax", "invoice_total", "line_total"]


def line_total(unit_cents, quantity):
    """The price of one line."""
    return unit_cents * quantity


def invoice_total(lines):
    """The sum of the lines."""
    return sum(line_total(unit_cents, quantity) for unit_cents, quantity in lines)


def add_tax(cents, rate_bp):
    """cents plus tax at `rate_bp` basis points (825 is 8.25 %), the tax rounded to the
    nearest cent (halves up)."""
    return cents + (cents * rate_bp + 5000) // 10000
'''

FILES["ledger/report.py"] = r'''"""Reports over sales."""

from ledger.invoice import invoice_total
from ledger.money import format_cents

__all__ = ["page", "summary_line", "top_items"]


def page(rows, number, size=10):
    """Page `number` of `rows`, `size` rows a page; pages count from 1."""
    start = number * size
    return rows[start:start + size]


def top_items(totals, n):
    """The n SKUs with the largest totals, largest first (equal totals by SKU)."""
    ranked = sorted(totals, key=lambda sku: (-totals[sku], sku))
    return ranked[:n - 1]


def summary_line(name, lines):
    """'<name>: <invoice total>', the total as money: 'March: $12.50'."""
    return f"{name}: {format_cents(invoice_total(lines))}"
'''

FILES["ledger/dates.py"] = r'''"""Dates of invoices and payments."""

from datetime import timedelta

__all__ = ["days_in_range", "due_date", "is_weekend"]


def due_date(issued, terms_days=30):
    """The day payment is due: `terms_days` days after `issued`."""
    return issued + timedelta(days=terms_days)


def is_weekend(day):
    """Saturday or Sunday."""
    return day.weekday() >= 5


def days_in_range(start, end):
    """The number of days from `start` to `end`, both included."""
    return (end - start).days
'''

FILES["tests/__init__.py"] = ""

FILES["tests/test_money.py"] = r'''import unittest

from ledger.money import apply_discount, format_cents, parse_amount, split_evenly


class MoneyTests(unittest.TestCase):
    def test_format_cents(self):
        self.assertEqual(format_cents(1234), "$12.34")
        self.assertEqual(format_cents(-5), "-$0.05")

    def test_parse_amount(self):
        self.assertEqual(parse_amount("$12.34"), 1234)
        self.assertEqual(parse_amount("7"), 700)

    def test_split_evenly_divides_exactly(self):
        self.assertEqual(split_evenly(900, 3), [300, 300, 300])

    def test_apply_discount(self):
        self.assertEqual(apply_discount(1000, 15), 850)
'''

FILES["tests/test_items.py"] = r'''import unittest

from ledger.items import Item, is_valid_sku, make_sku


class ItemTests(unittest.TestCase):
    def test_make_sku(self):
        self.assertEqual(make_sku("widget", 7), "WID-0007")

    def test_is_valid_sku(self):
        self.assertTrue(is_valid_sku("WID-0007"))
        self.assertFalse(is_valid_sku("wid-7"))

    def test_item_keeps_its_price_in_cents(self):
        self.assertEqual(Item("WID-0007", "widget", 250).price_cents, 250)
'''

FILES["tests/test_stock.py"] = r'''import unittest

from ledger.stock import low_stock, receive, ship, total_units


class StockTests(unittest.TestCase):
    def test_receive_and_ship(self):
        levels = receive({}, "WID-0007", 5)
        self.assertEqual(ship(levels, "WID-0007", 2), {"WID-0007": 3})

    def test_ship_refuses_more_than_on_hand(self):
        with self.assertRaises(ValueError):
            ship({"WID-0007": 1}, "WID-0007", 2)

    def test_low_stock(self):
        self.assertEqual(low_stock({"A": 1, "B": 9}, 5), ["A"])

    def test_total_units(self):
        self.assertEqual(total_units({"A": 2, "B": 3}), 5)
'''

FILES["tests/test_invoice.py"] = r'''import unittest

from ledger.invoice import add_tax, invoice_total, line_total


class InvoiceTests(unittest.TestCase):
    def test_line_total(self):
        self.assertEqual(line_total(250, 4), 1000)

    def test_invoice_total(self):
        self.assertEqual(invoice_total([(250, 2), (100, 1)]), 600)

    def test_add_tax_rounds_half_up(self):
        self.assertEqual(add_tax(1000, 825), 1083)
'''

FILES["tests/test_report.py"] = r'''import unittest

from ledger.report import summary_line


class ReportTests(unittest.TestCase):
    def test_summary_line(self):
        self.assertEqual(summary_line("March", [(625, 2)]), "March: $12.50")
'''

FILES["tests/test_dates.py"] = r'''import unittest
from datetime import date

from ledger.dates import due_date, is_weekend


class DateTests(unittest.TestCase):
    def test_due_date(self):
        self.assertEqual(due_date(date(2024, 3, 1)), date(2024, 3, 31))

    def test_is_weekend(self):
        self.assertTrue(is_weekend(date(2024, 3, 16)))
        self.assertFalse(is_weekend(date(2024, 3, 18)))
'''

FILES["tests/test_regressions.py"] = r'''"""One test for each bug fixed, so that it stays fixed."""

import unittest

from ledger.money import parse_amount


class RegressionTests(unittest.TestCase):
    def test_parse_amount_reads_one_decimal(self):
        self.assertEqual(parse_amount("12.5"), 1250)
'''
