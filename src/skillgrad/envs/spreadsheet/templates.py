"""Seeded task generators of the ``spreadsheet`` environment: its synthetic data set.

Each template builds, from a ``random.Random``, a small openpyxl workbook, a natural-language
instruction, the target cells with their expected values, and a reference solution (a function
that edits a loaded copy of the workbook the way a competent user would, with formulas where a
user would write them). Generation is deterministic in ``(template, seed)``. The reference
solution is the solvability check: tests run it through the real checker.
"""

from __future__ import annotations

import datetime as dt
import io
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, get_args

import openpyxl
from openpyxl.workbook.workbook import Workbook

TemplateName = Literal["derived_column", "conditional_sum", "lookup", "sort_rows",
                       "filter_rows", "date_arithmetic", "text_cleanup", "delete_rows"]
TEMPLATE_NAMES: tuple[TemplateName, ...] = get_args(TemplateName)

ITEMS = ("apple", "banana", "cherry", "grape", "kiwi", "lemon", "mango", "melon", "orange",
         "peach", "pear", "plum", "lime", "fig")
REGIONS = ("North", "South", "East", "West")
FIRST = ("anna", "ben", "carla", "dev", "emma", "farid", "grace", "hugo", "ines", "jon",
         "kemal", "lena", "marco", "nora", "omar", "pia")
LAST = ("lee", "smith", "garcia", "chen", "novak", "silva", "khan", "meyer", "rossi", "berg")


@dataclass(frozen=True)
class Generated:
    """One generated task: the input workbook (xlsx bytes), what to do, what must result."""

    template: TemplateName
    seed: int
    workbook: bytes
    instruction: str
    targets: dict[str, Any]
    solve: Callable[[Workbook], None]
    sheets: str  # "Orders (A1:C8), Products (A1:C6)", for the prompt


def generate(template: TemplateName, seed: int) -> Generated:
    """The task of ``template`` for ``seed`` (the same pair always gives the same task)."""
    rng = random.Random(f"{template}:{seed}")
    wb = openpyxl.Workbook()
    wb.remove(wb.worksheets[0])  # every sheet is the template's own
    instruction, targets, solve = _BUILDERS[template](rng, wb)
    sheets = ", ".join(f"{ws.title} ({ws.dimensions})" for ws in wb.worksheets)
    buffer = io.BytesIO()
    wb.save(buffer)
    return Generated(template, seed, buffer.getvalue(), instruction, targets, solve, sheets)


def apply_solution(task: Generated) -> bytes:
    """The input workbook with the reference solution applied, as xlsx bytes."""
    wb = openpyxl.load_workbook(io.BytesIO(task.workbook))
    task.solve(wb)
    buffer = io.BytesIO()
    wb.save(buffer)
    return buffer.getvalue()


Built = tuple[str, dict[str, Any], Callable[[Workbook], None]]


def _sheet(wb: Workbook, title: str, rows: list[list[Any]]) -> None:
    ws = wb.create_sheet(title)
    for row in rows:
        ws.append(row)


def _derived_column(rng: random.Random, wb: Workbook) -> Built:
    n = rng.randint(5, 8)
    margin = rng.random() < 0.5
    rows: list[list[Any]] = []
    for item in rng.sample(ITEMS, n):
        a = rng.randint(1, 20) if not margin else round(rng.uniform(5, 50), 2)
        b = round(rng.uniform(0.5, 20), 2) if not margin else round(a * rng.uniform(0.3, 0.9), 2)
        rows.append([item, a, b])
    head = ["Item", "Price", "Cost"] if margin else ["Item", "Qty", "Price"]
    _sheet(wb, "Orders", [head, *rows])
    last = n + 1
    title, formula = ("Total", "=B{r}*C{r}") if not margin else ("Margin", "=B{r}-C{r}")
    what = "Qty times Price" if not margin else "Price minus Cost"
    targets: dict[str, Any] = {"Orders!D1": title}
    for r, (_, a, b) in enumerate(rows, start=2):
        targets[f"Orders!D{r}"] = a * b if not margin else a - b

    def solve(w: Workbook) -> None:
        w["Orders"]["D1"] = title
        for r in range(2, last + 1):
            w["Orders"][f"D{r}"] = formula.format(r=r)

    return (f"In sheet Orders, write the header {title} in D1 and fill D2:D{last} with {what} "
            "of each row.", targets, solve)


def _conditional_sum(rng: random.Random, wb: Workbook) -> Built:
    n = rng.randint(8, 10)
    rows: list[list[Any]] = [[rng.choice(REGIONS), rng.choice(FIRST).title(), rng.randint(10, 500)]
            for _ in range(n)]
    region = rng.choice(sorted({r[0] for r in rows}))
    _sheet(wb, "Sales", [["Region", "Rep", "Amount"], *rows])
    last = n + 1
    total = sum(r[2] for r in rows if r[0] == region)
    count = sum(1 for r in rows if r[0] == region)
    targets: dict[str, Any] = {"Sales!F1": total, "Sales!F2": count}

    def solve(w: Workbook) -> None:
        w["Sales"]["F1"] = f'=SUMIF(A2:A{last},"{region}",C2:C{last})'
        w["Sales"]["F2"] = f'=COUNTIF(A2:A{last},"{region}")'

    return (f"In sheet Sales, put in F1 the total Amount of region {region}, and in F2 the "
            f"number of sales rows of region {region}.", targets, solve)


def _lookup(rng: random.Random, wb: Workbook) -> Built:
    k = rng.randint(4, 6)
    products = [[f"P{code}", item, round(rng.uniform(1, 30), 2)]
                for code, item in zip(rng.sample(range(100, 1000), k), rng.sample(ITEMS, k), strict=True)]
    codes = [p[0] for p in products]
    price = {p[0]: p[2] for p in products}
    n = rng.randint(5, 7)
    orders = [[1000 + i, rng.choice(codes), rng.randint(1, 9)] for i in range(n)]
    _sheet(wb, "Orders", [["Order", "Code", "Qty"], *orders])
    _sheet(wb, "Products", [["Code", "Name", "Price"], *products])
    last, plast = n + 1, len(products) + 1
    targets: dict[str, Any] = {"Orders!D1": "Price"}
    targets.update({f"Orders!D{r}": price[o[1]] for r, o in enumerate(orders, start=2)})

    def solve(w: Workbook) -> None:
        w["Orders"]["D1"] = "Price"
        for r in range(2, last + 1):
            w["Orders"][f"D{r}"] = f"=VLOOKUP(B{r},Products!A2:C{plast},3,FALSE)"

    return (f"In sheet Orders, write the header Price in D1 and fill D2:D{last} with the Price "
            "of each order's product, looked up by Code in sheet Products.", targets, solve)


def _sort_rows(rng: random.Random, wb: Workbook) -> Built:
    n = rng.randint(6, 8)
    names = [f"{f.title()}" for f in rng.sample(FIRST, n)]
    scores = rng.sample(range(40, 100), n)
    rows: list[list[Any]] = [[a, b] for a, b in zip(names, scores, strict=True)]
    by_score = rng.random() < 0.6
    descending = rng.random() < 0.5 if by_score else False
    ordered = sorted(rows, key=lambda r: r[1] if by_score else r[0], reverse=descending)
    if ordered == rows:  # an untouched sheet must not already be right
        rows = rows[1:] + rows[:1]
    _sheet(wb, "Scores", [["Name", "Score"], *rows])
    last = n + 1
    targets = {f"Scores!{c}{r}": row[i] for r, row in enumerate(ordered, start=2)
               for i, c in enumerate("AB")}
    how = ("by Score from highest to lowest" if descending else "by Score from lowest to "
           "highest") if by_score else "by Name from A to Z"

    def solve(w: Workbook) -> None:
        for r, row in enumerate(ordered, start=2):
            w["Scores"][f"A{r}"], w["Scores"][f"B{r}"] = row

    return (f"In sheet Scores, sort the rows 2 to {last} {how}. Keep the header in row 1.",
            targets, solve)


def _filter_rows(rng: random.Random, wb: Workbook) -> Built:
    n = rng.randint(7, 9)
    status = rng.choice(["Open", "Done"])
    rows: list[list[Any]] = [[f"T{10 + i}", rng.choice(FIRST).title(), rng.choice(["Open", "Done", "Blocked"])]
            for i in range(n)]
    for i in rng.sample(range(n), 2):  # at least two rows to copy
        rows[i][2] = status
    kept = [r for r in rows if r[2] == status]
    _sheet(wb, "Tasks", [["ID", "Owner", "Status"], *rows])
    wb.create_sheet("Report")
    table: list[list[Any]] = [["ID", "Owner", "Status"], *kept, [None, None, None]]
    targets = {f"Report!{c}{r}": row[i] for r, row in enumerate(table, start=1)
               for i, c in enumerate("ABC")}

    def solve(w: Workbook) -> None:
        for r, row in enumerate(table[:-1], start=1):
            for i, c in enumerate("ABC"):
                w["Report"][f"{c}{r}"] = row[i]

    return (f"Copy the header row of sheet Tasks to row 1 of sheet Report, then below it every "
            f"row of Tasks whose Status is {status}, in their original order.", targets, solve)


def _date_arithmetic(rng: random.Random, wb: Workbook) -> Built:
    n = rng.randint(5, 7)
    due = rng.random() < 0.5
    start = dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 300))
    dates = [start + dt.timedelta(days=rng.randint(0, 60)) for _ in range(n)]
    if due:
        other: list[Any] = [rng.choice([14, 30, 45, 60]) for _ in range(n)]
        head, title = ["Invoice", "Date", "Terms"], "Due"
        expected: list[Any] = [d + dt.timedelta(days=t) for d, t in zip(dates, other, strict=True)]
        formula, what = "=B{r}+C{r}", "the due date: Date plus Terms days"
    else:
        ends = [d + dt.timedelta(days=rng.randint(1, 90)) for d in dates]
        other, head, title = ends, ["Job", "Start", "End"], "Days"
        expected = [(e - d).days for d, e in zip(dates, ends, strict=True)]
        formula, what = "=C{r}-B{r}", "the number of days from Start to End"
    rows = [[f"{head[0][0]}{100 + i}", dt.datetime.combine(d, dt.time()),
             dt.datetime.combine(o, dt.time()) if isinstance(o, dt.date) else o]
            for i, (d, o) in enumerate(zip(dates, other, strict=True))]
    _sheet(wb, "Dates", [head, *rows])
    last = n + 1
    targets: dict[str, Any] = {"Dates!D1": title}
    targets.update({f"Dates!D{r}": v for r, v in enumerate(expected, start=2)})

    def solve(w: Workbook) -> None:
        w["Dates"]["D1"] = title
        for r in range(2, last + 1):
            w["Dates"][f"D{r}"] = formula.format(r=r)
            if due:
                w["Dates"][f"D{r}"].number_format = "yyyy-mm-dd"

    return (f"In sheet Dates, write the header {title} in D1 and fill D2:D{last} with {what}.",
            targets, solve)


def _text_cleanup(rng: random.Random, wb: Workbook) -> Built:
    n = rng.randint(5, 7)
    email = rng.random() < 0.5
    people = [(rng.choice(FIRST), rng.choice(LAST)) for _ in range(n)]

    def messy(text: str) -> str:
        text = "".join(ch.upper() if rng.random() < 0.35 else ch for ch in text)
        return " " * rng.randint(0, 3) + text + " " * rng.randint(1, 3)

    if email:
        clean = [f"{f}.{last}@example.com" for f, last in people]
        title, formula, what = "Email", "=LOWER(TRIM(A{r}))", "in lower case"
    else:
        clean = [f"{f.title()} {last.title()}" for f, last in people]
        title, formula, what = "Name", "=PROPER(TRIM(A{r}))", "with each word capitalised"
    raw = [messy(c.lower()) for c in clean]
    _sheet(wb, "Contacts", [["Raw"], *[[r] for r in raw]])
    last_row = n + 1
    targets: dict[str, Any] = {"Contacts!B1": title}
    targets.update({f"Contacts!B{r}": c for r, c in enumerate(clean, start=2)})

    def solve(w: Workbook) -> None:
        w["Contacts"]["B1"] = title
        for r in range(2, last_row + 1):
            w["Contacts"][f"B{r}"] = formula.format(r=r)

    return (f"In sheet Contacts, write the header {title} in B1 and fill B2:B{last_row} with the "
            f"text of column A without leading or trailing spaces, {what}.", targets, solve)


def _delete_rows(rng: random.Random, wb: Workbook) -> Built:
    n = rng.randint(7, 9)
    rows = [[item, rng.randint(1, 40)] for item in rng.sample(ITEMS, n)]
    for i in rng.sample(range(n), rng.randint(2, 3)):
        rows[i][1] = 0
    kept = [r for r in rows if r[1] != 0]
    _sheet(wb, "Stock", [["Item", "Qty"], *rows])
    padded = kept + [[None, None]] * (n - len(kept))
    targets = {f"Stock!{c}{r}": row[i] for r, row in enumerate(padded, start=2)
               for i, c in enumerate("AB")}
    zero_rows = [r for r, row in enumerate(rows, start=2) if row[1] == 0]

    def solve(w: Workbook) -> None:
        for r in reversed(zero_rows):
            w["Stock"].delete_rows(r)

    return ("In sheet Stock, delete every row whose Qty is 0, so the remaining rows move up "
            "with no empty rows between them.", targets, solve)


_BUILDERS: dict[str, Callable[[random.Random, Workbook], Built]] = {
    "derived_column": _derived_column, "conditional_sum": _conditional_sum, "lookup": _lookup,
    "sort_rows": _sort_rows, "filter_rows": _filter_rows, "date_arithmetic": _date_arithmetic,
    "text_cleanup": _text_cleanup, "delete_rows": _delete_rows,
}
assert set(_BUILDERS) == set(TEMPLATE_NAMES)
