"""The loss of the workbook environments: recalculate the agent's workbook and compare cells.

Target cells are read with openpyxl; a cell that holds a formula is recalculated with the
``formulas`` package (openpyxl does not keep computed values when it saves), so an agent may
write either values or formulas. Comparison is exact up to a stated tolerance:

* numbers: ``math.isclose`` with the tolerance as both relative and absolute bound (a numeric
  string counts as its number, as when it is typed into a spreadsheet);
* strings: equal after trimming surrounding whitespace;
* dates: compared as calendar dates (a serial number from date arithmetic counts as the date
  it stands for, Excel's 1900 system; an ISO ``YYYY-MM-DD`` string counts too);
* empty: ``None`` and a blank string are the same.

``hard`` is 1 when every target cell is right, ``soft`` the fraction of right cells; the
reason names wrong cells with expected and actual values.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import math
import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openpyxl

logger = logging.getLogger(__name__)

EXCEL_EPOCH = dt.date(1899, 12, 30)
_CELL = re.compile(r"^\$?([A-Za-z]{1,3})\$?(\d{1,7})$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class FormulaError:
    """A formula that did not produce a value (an Excel error or an unsupported formula)."""

    text: str

    def __str__(self) -> str:
        return self.text


class _Missing:
    def __repr__(self) -> str:
        return "<no such sheet>"


MISSING_SHEET = _Missing()


def split_ref(ref: str, default_sheet: str) -> tuple[str, str]:
    """``"'My Sheet'!b2"`` -> ``("My Sheet", "B2")``; a bare cell belongs to ``default_sheet``.

    Raises :class:`ValueError` for anything that is not one cell.
    """
    sheet, _, cell = ref.strip().rpartition("!")
    sheet = sheet.strip()
    if len(sheet) >= 2 and sheet[0] == sheet[-1] == "'":
        sheet = sheet[1:-1].replace("''", "'")
    match = _CELL.match(cell.strip())
    if match is None:
        raise ValueError(f"{ref!r} is not a cell reference like A1 or Sheet1!B2")
    return sheet or default_sheet, f"{match.group(1).upper()}{int(match.group(2))}"


def qualified(sheet: str, cell: str) -> str:
    """The reference shown to the agent and in reasons: ``Sheet!A1`` or ``'My Sheet'!A1``."""
    plain = re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", sheet) is not None
    return f"{sheet}!{cell}" if plain else f"'{sheet.replace(chr(39), chr(39) * 2)}'!{cell}"


def formula_text(value: Any) -> str | None:
    """The formula of a cell value as openpyxl reads it (plain or array formula), else None."""
    if isinstance(value, str) and value.startswith("=") and len(value) > 1:
        return value
    text = getattr(value, "text", None)  # openpyxl ArrayFormula
    return text if isinstance(text, str) and text.startswith("=") else None


def read_cells(path: Path, refs: Sequence[str]) -> dict[str, Any]:
    """The values of ``refs`` (qualified ``Sheet!A1``) in the workbook at ``path``, with every
    formula among them recalculated. A cell of a sheet that does not exist reads as
    :data:`MISSING_SHEET`."""
    wb = openpyxl.load_workbook(path)
    values: dict[str, Any] = {}
    pending: dict[str, tuple[str, str]] = {}
    for ref in refs:
        sheet, cell = split_ref(ref, wb.sheetnames[0])
        if sheet not in wb.sheetnames:
            values[ref] = MISSING_SHEET
            continue
        raw = wb[sheet][cell].value
        if formula_text(raw) is not None:
            pending[ref] = (sheet, cell)
        else:
            values[ref] = raw
    if pending:
        values.update(evaluate_formulas(path, pending))
    return values


def evaluate_formulas(path: Path, cells: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """Recalculate the workbook at ``path`` and return the values of ``cells`` (key ->
    ``(sheet, A1)``). A formula that cannot be computed gives a :class:`FormulaError`."""
    formulas = _formulas_engine()
    path = Path(path).resolve()
    names = {key: f"'[{path.name}]{sheet.upper()}'!{cell}" for key, (sheet, cell) in cells.items()}
    try:
        model = formulas.ExcelModel().loads(str(path)).finish()
        try:  # only what the targets depend on: real workbooks can be large
            solution = model.calculate(outputs=sorted(set(names.values())))
        except Exception as exc:  # noqa: BLE001 - an output name it does not know: compute all
            logger.debug("targeted recalculation of %s failed (%r); recalculating all", path, exc)
            solution = {}
        if not {n.upper() for n in names.values()} <= {str(k).upper() for k in solution}:
            solution = model.calculate()
    # A third-party engine fed agent-written formulas can fail in any way; the failure is
    # the agent's (a scored wrong cell), so every exception is caught here and reported.
    except Exception as exc:  # noqa: BLE001
        logger.debug("formula evaluation of %s failed: %r", path, exc)
        failure = FormulaError(f"#ENGINE! ({type(exc).__name__})")
        return {key: failure for key in cells}
    by_name = {str(k).upper(): v for k, v in solution.items()}
    out: dict[str, Any] = {}
    for key, name in names.items():
        found = by_name.get(name.upper())
        out[key] = FormulaError("#ENGINE! (not computed)") if found is None else _plain(found)
    return out


@functools.cache
def _formulas_engine() -> Any:
    """The ``formulas`` package, imported on first use (heavy), with its per-call progress bar
    switched off: it writes to stderr on every recalculation, which is the CLI's console."""
    import formulas
    import formulas.excel
    import tqdm

    quiet = types.SimpleNamespace(tqdm=functools.partial(tqdm.tqdm, disable=True))
    formulas.excel.tqdm = quiet  # type: ignore[attr-defined]
    return formulas


def _plain(found: Any) -> Any:
    value = getattr(found, "value", found)
    while hasattr(value, "__len__") and not isinstance(value, str) and len(value) > 0:
        value = value[0]  # a one-cell range is a 1x1 array
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()  # numpy scalar
    name = type(value).__name__
    if name == "XlError":
        return FormulaError(str(value))
    if value is None or name in ("EmptyValue", "_EmptyValue") or str(value) == "empty":
        return None
    return value


# ----------------------------------------------------------------------------- comparing


def same_value(expected: Any, got: Any, tolerance: float) -> bool:
    """Whether ``got`` counts as ``expected`` (see the module docstring)."""
    if isinstance(got, (FormulaError, _Missing)):
        return False
    if _blank(expected) or _blank(got):
        return _blank(expected) and _blank(got)
    if isinstance(expected, (dt.date, dt.datetime)):
        return _as_date(got) == _as_date(expected)
    if isinstance(expected, bool) or isinstance(got, bool):
        return expected is got or (isinstance(got, str) and got.strip().upper() == str(
            expected).upper())
    if isinstance(expected, (int, float)):
        number = _as_number(got)
        return number is not None and math.isclose(number, float(expected), rel_tol=tolerance,
                                                    abs_tol=tolerance)
    if isinstance(expected, dt.time):
        return got == expected
    return isinstance(got, str) and got.strip() == str(expected).strip()


def _blank(value: Any) -> bool:
    return value is None or (isinstance(value, str) and not value.strip())


def _as_number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip().replace(",", ""))
        except ValueError:
            return None
    return None


def _as_date(value: Any) -> dt.date | None:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 3e6:
        return EXCEL_EPOCH + dt.timedelta(days=int(math.floor(value)))
    if isinstance(value, str) and _ISO_DATE.match(value.strip()):
        try:
            return dt.date.fromisoformat(value.strip())
        except ValueError:
            return None
    return None


def show(value: Any) -> str:
    """A short rendering of a cell value for reasons and observations."""
    if value is None:
        return "empty"
    if isinstance(value, dt.datetime) and value.time() == dt.time(0):
        return value.date().isoformat()
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, float):
        return f"{value:.10g}"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    return str(value)


@dataclass(frozen=True)
class Mismatch:
    cell: str
    expected: Any
    got: Any


@dataclass(frozen=True)
class CheckResult:
    """The score of one workbook against its target cells."""

    total: int
    wrong: tuple[Mismatch, ...]
    tolerance: float

    @property
    def hard(self) -> float:
        return 1.0 if self.total and not self.wrong else 0.0

    @property
    def soft(self) -> float:
        return (self.total - len(self.wrong)) / self.total if self.total else 0.0

    def reason(self, limit: int = 6) -> str:
        """Which cells are wrong, expected vs got, at most ``limit`` of them; '' when right."""
        if not self.wrong:
            return ""
        shown = "; ".join(f"{m.cell} expected {show(m.expected)}, got {show(m.got)}"
                          for m in self.wrong[:limit])
        more = f"; and {len(self.wrong) - limit} more" if len(self.wrong) > limit else ""
        return (f"{len(self.wrong)} of {self.total} target cells wrong (numbers within "
                f"{self.tolerance:g}, text trimmed, dates as dates): {shown}{more}")


def check_workbook(path: Path, targets: Mapping[str, Any], tolerance: float) -> CheckResult:
    """Compare the workbook at ``path`` with ``targets`` (qualified cell -> expected value)."""
    got = read_cells(path, list(targets))
    wrong = tuple(Mismatch(ref, expected, got[ref]) for ref, expected in targets.items()
                  if not same_value(expected, got[ref], tolerance))
    return CheckResult(len(targets), wrong, tolerance)
