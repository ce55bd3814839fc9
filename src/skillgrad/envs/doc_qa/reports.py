"""Seeded quarterly business reports with tables, and questions whose answers are computed
from them: the synthetic half of the doc_qa data set (exactly checkable numeric targets).

Each company gets two consecutive quarterly reports with four sections: a summary (chief
executive, head office, dividend), revenue by region per month (a markdown table, USD
thousands), departments (headcount, budget, spent) and an outlook (expected growth). Each
report carries four questions: two computed from a table (a region's quarter total, a
month-to-month percentage change, a department's unspent budget, the total headcount), one
look-up or arg-max over a table, and one fact from the prose. All questions name the company
and the quarter, so the right report can be found among look-alikes.

The output is a pure function of ``seed`` and ``companies`` (only :class:`random.Random` with
integer arguments, stable across Python versions), so it is generated at load time.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from skillgrad.envs.doc_qa.corpus import Document, Section

_NAMES = ("Halvorsen Calder Brightwater Dunmore Everly Fairhaven Glenrock Harrow Ironvale "
          "Juniper Kestrel Larchmont Merriweather Northgate Oakhurst Pemberton Quillon "
          "Redcliff Stonebridge Thornbury Underhill Valemont Westerly Yarrow").split()
_TRADES = ("Logistics Foods Textiles Robotics Pharma Energy Media Outfitters Instruments "
           "Shipping Analytics Ceramics").split()
_CITIES = ("Leeds Tampere Porto Aarhus Lyon Graz Bergen Ghent Utrecht Brno Malmo Cork Turin "
           "Bilbao Gdansk Basel").split()
_FIRST = "Maria Tomas Aiko Daniel Ingrid Kofi Lucia Rafael Sven Amara Jonas Priya".split()
_LAST = "Okafor Lindqvist Moreau Tanaka Novak Brennan Castillo Haddad Sorensen Adeyemi".split()
_REGIONS = "Northern Southern Eastern Western Central Coastal".split()
_DEPARTMENTS = "Engineering Sales Marketing Operations Finance Support Research Legal".split()
_MONTHS = ("January February March April May June July August September October November "
           "December").split()


def generate_reports(seed: int, companies: int) -> tuple[list[Document], list[dict[str, Any]]]:
    """``2 * companies`` report documents and their questions (records in the doc_qa question
    format: ``id``, ``question``, ``answers``, ``doc``, ``sections``, ``group``)."""
    rng = random.Random(seed)
    names = rng.sample([f"{n} {t}" for n in _NAMES for t in _TRADES], companies)
    documents: list[Document] = []
    questions: list[dict[str, Any]] = []
    for name in names:
        year, quarter = rng.randint(2018, 2024), rng.randint(1, 4)
        ceo = f"{rng.choice(_FIRST)} {rng.choice(_LAST)}"
        city = rng.choice(_CITIES)
        regions = rng.sample(_REGIONS, 4)
        departments = rng.sample(_DEPARTMENTS, 5)
        for n in range(2):
            q, y = (quarter + n - 1) % 4 + 1, year + (quarter + n - 1) // 4
            report = _Report(rng, name, ceo, city, regions, departments, y, q)
            documents.append(report.document())
            questions += report.questions(first=n == 0)
    return documents, questions


class _Report:
    def __init__(self, rng: random.Random, company: str, ceo: str, city: str,
                 regions: list[str], departments: list[str], year: int, quarter: int) -> None:
        self.rng, self.company, self.ceo, self.city = rng, company, ceo, city
        self.year, self.quarter = year, quarter
        self.months = _MONTHS[3 * (quarter - 1): 3 * quarter]
        self.slug = company.lower().replace(" ", "-")
        self.id = f"report-{self.slug}-{year}q{quarter}"
        self.period = f"Q{quarter} {year}"
        self.revenue = {r: [rng.randint(800, 9800) for _ in range(3)] for r in regions}
        self.staff = {}
        for d in departments:
            budget = rng.randint(300, 4000)
            self.staff[d] = (rng.randint(12, 240), budget, rng.randint(budget // 2, budget))
        self.dividend = rng.randint(5, 95) / 100
        self.growth = rng.randint(-40, 90) / 10

    def document(self) -> Document:
        rows = "\n".join(f"| {r} | " + " | ".join(f"{v:,}" for v in vals) + " |"
                         for r, vals in self.revenue.items())
        staff = "\n".join(f"| {d} | {h} | {b:,} | {s:,} |" for d, (h, b, s) in self.staff.items())
        summary = (f"{self.company} reports its results for {self.period}. The company is "
                   f"headquartered in {self.city}. Chief executive {self.ceo} said the quarter "
                   f"met the plan set by the board. The board approved a dividend of "
                   f"${self.dividend:.2f} per share for the quarter.")
        outlook = (f"For the next quarter, management expects revenue growth of "
                   f"{self.growth:.1f}% against {self.period}, driven by pricing and new "
                   "contracts. The outlook assumes stable input costs.")
        return Document(self.id, f"{self.company} — Quarterly Report, {self.period}", (
            Section("Summary", summary),
            Section("Revenue by region", "Monthly revenue by region, in USD thousands.\n\n"
                    f"| Region | {' | '.join(self.months)} |\n|---|---|---|---|\n{rows}"),
            Section("Departments", "Headcount at quarter end; budget and spending for the "
                    "quarter in USD thousands.\n\n| Department | Headcount | Budget | Spent |\n"
                    f"|---|---|---|---|\n{staff}"),
            Section("Outlook", outlook)), kind="quarterly business report")

    def questions(self, first: bool) -> list[dict[str, Any]]:
        computed: list[Callable[[], tuple[str, str, int]]] = [
            self._region_total, self._region_change, self._unspent, self._headcount_total]
        lookups = [self._region_month, self._top_region, self._top_department]
        facts = [self._dividend, self._growth] + ([self._ceo, self._city] if first else [])
        out: list[dict[str, Any]] = []
        seen: set[str] = set()
        # Two computed, one look-up, one fact; a kind whose question repeats one already
        # asked (a tie falls back to another kind) is skipped for the next of its pool.
        for pool, wanted in ((computed, 2), (lookups, 1), (facts, 1)):
            taken = 0
            for make in self.rng.sample(pool, len(pool)):
                if taken == wanted:
                    break
                question, answer, section = make()
                if question in seen:
                    continue
                seen.add(question)
                taken += 1
                out.append({"id": f"{self.id}-{len(out) + 1}", "question": question,
                            "answers": [answer], "doc": self.id, "sections": [section],
                            "group": self.slug})
        return out

    def _in(self) -> str:
        return f"In the {self.company} quarterly report for {self.period}"

    def _region_total(self) -> tuple[str, str, int]:
        region = self.rng.choice(list(self.revenue))
        return (f"{self._in()}, what was the total revenue of the {region} region over the "
                "quarter, in USD thousands?", f"{sum(self.revenue[region]):,}", 2)

    def _region_change(self) -> tuple[str, str, int]:
        region = self.rng.choice(list(self.revenue))
        first, last = self.revenue[region][0], self.revenue[region][2]
        change = (last - first) / first * 100
        return (f"{self._in()}, by what percentage did the {region} region's revenue change "
                f"from {self.months[0]} to {self.months[2]}? Round to one decimal place; a "
                "decline is negative.", f"{change:.1f}%", 2)

    def _unspent(self) -> tuple[str, str, int]:
        dept = self.rng.choice(list(self.staff))
        _, budget, spent = self.staff[dept]
        return (f"{self._in()}, how much of its budget did the {dept} department leave unspent, "
                "in USD thousands?", f"{budget - spent:,}", 3)

    def _headcount_total(self) -> tuple[str, str, int]:
        return (f"{self._in()}, what was the total headcount across all departments?",
                f"{sum(h for h, _, _ in self.staff.values()):,}", 3)

    def _region_month(self) -> tuple[str, str, int]:
        region = self.rng.choice(list(self.revenue))
        month = self.rng.randrange(3)
        return (f"{self._in()}, what was the {region} region's revenue in {self.months[month]}, "
                "in USD thousands?", f"{self.revenue[region][month]:,}", 2)

    def _top_region(self) -> tuple[str, str, int]:
        month = self.rng.randrange(3)
        ranked = sorted(self.revenue, key=lambda r: -self.revenue[r][month])
        if self.revenue[ranked[0]][month] == self.revenue[ranked[1]][month]:
            return self._region_month()  # a tie has no single answer
        return (f"{self._in()}, which region had the highest revenue in {self.months[month]}?",
                ranked[0], 2)

    def _top_department(self) -> tuple[str, str, int]:
        ranked = sorted(self.staff, key=lambda d: -self.staff[d][0])
        if self.staff[ranked[0]][0] == self.staff[ranked[1]][0]:
            return self._headcount_total()
        return (f"{self._in()}, which department had the highest headcount?", ranked[0], 3)

    def _dividend(self) -> tuple[str, str, int]:
        return (f"{self._in()}, what dividend per share did the board approve, in dollars?",
                f"${self.dividend:.2f}", 1)

    def _growth(self) -> tuple[str, str, int]:
        return (f"{self._in()}, what revenue growth does management expect for the next "
                "quarter, in percent?", f"{self.growth:.1f}%", 4)

    def _ceo(self) -> tuple[str, str, int]:
        return f"{self._in()}, who is the chief executive of {self.company}?", self.ceo, 1

    def _city(self) -> tuple[str, str, int]:
        return f"{self._in()}, in which city is {self.company} headquartered?", self.city, 1
