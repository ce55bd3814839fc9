"""The agent's hands on a workbook: the tools of a spreadsheet rollout (the forward pass's ops).

One :class:`WorkbookSession` per rollout holds an openpyxl workbook loaded from a file in that
rollout's own temporary directory (rollouts run concurrently in threads; nothing is shared).
Its tools list the sheets, read a range as a small grid with coordinates (capped), write
values or formulas to several cells at once, insert or delete rows, and, when enabled, run
Python on a copy of the workbook in :mod:`skillgrad.sandbox`. :func:`run_workbook_episode`
plays one episode and scores the saved workbook with :mod:`.checker`.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import openpyxl
from openpyxl.utils import get_column_letter, range_boundaries
from pydantic import Field

from skillgrad.envs.base import EnvOptions
from skillgrad.envs.spreadsheet.checker import (
    CheckResult,
    check_workbook,
    evaluate_formulas,
    formula_text,
    qualified,
    show,
    split_ref,
)
from skillgrad.envs.tools import Episode, Tool, ToolError, run_episode
from skillgrad.models.base import ChatModel
from skillgrad.sandbox import (
    SandboxLimits,
    UnsafeFile,
    read_handed_back,
    require_confinement,
    run_python,
)

_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
WORKBOOK_NAME = "workbook.xlsx"


class WorkbookOptions(EnvOptions):
    """The ``env:`` keys shared by the workbook environments."""

    tool_mode: Literal["text", "native"] = Field(
        "text", description="text: ACTION/ANSWER lines; native: the endpoint's tool calling")
    max_turns: int = Field(8, ge=1, description="model replies per task")
    skill_files: Literal["tool", "inline"] = Field(
        "tool", description="a skill package's other files: tool, listed and read with the "
        "read_skill_file tool; inline, all in the system message")
    max_tokens: int = Field(256, ge=1, description="token limit of each reply")
    temperature: float = Field(0.0, ge=0.0)
    tolerance: float = Field(1e-6, ge=0.0, description="relative and absolute tolerance of "
                             "number comparison")
    read_max_cells: int = Field(60, ge=1, le=2000, description="cells shown per read_range")
    python_tool: bool = Field(False, description="offer a python tool (sandboxed subprocess)")
    allow_unconfined_python: bool = Field(
        False, description="run the python tool even where the kernel cannot confine its file "
        "access (no Landlock); its code can then read and write every file this user can")
    python_timeout_s: float = Field(10.0, gt=0, le=300)
    python_memory_mb: int = Field(1024, ge=128)


def check_python_tool(options: WorkbookOptions) -> None:
    """Refuse a python tool whose code the kernel cannot confine here, unless
    ``allow_unconfined_python``: when the environment is built, not at the tool's first call."""
    if options.python_tool:
        require_confinement(options.allow_unconfined_python, "env.python_tool: model-written code",
                            "env.allow_unconfined_python: true")


@dataclass(frozen=True)
class WorkbookOutcome:
    """An episode on a workbook and the check of the workbook it left behind."""

    episode: Episode
    check: CheckResult
    cells_written: int


class WorkbookSession:
    """The tools over one workbook file; :meth:`save` writes the current state back."""

    def __init__(self, path: Path, options: WorkbookOptions) -> None:
        self.path = Path(path)
        self.options = options
        self.wb = openpyxl.load_workbook(self.path)
        self.cells_written = 0

    def tools(self) -> list[Tool]:
        tools = [
            Tool("read_range", "Show cells of a range as a grid, e.g. Sheet1!A1:D10.",
                 {"type": "object", "properties": {"range": {"type": "string"}},
                  "required": ["range"]}, lambda **a: self.read_range(a["range"])),
            Tool("write_cells", "Write values or formulas (text starting with =) to cells, "
                 'e.g. {"cells": {"D2": "=B2*C2", "Sheet1!E1": 5}}. Dates as YYYY-MM-DD.',
                 {"type": "object", "properties": {"cells": {"type": "object"}},
                  "required": ["cells"]}, self.write_cells),
            Tool("list_sheets", "List the sheets and their used ranges.",
                 {"type": "object", "properties": {}}, self.list_sheets),
            Tool("delete_rows", "Delete count rows starting at row; rows below move up.",
                 {"type": "object", "properties": {"sheet": {"type": "string"},
                                                   "row": {"type": "integer"},
                                                   "count": {"type": "integer"}},
                  "required": ["sheet", "row"]}, self.delete_rows),
            Tool("insert_rows", "Insert count empty rows before row; rows below move down.",
                 {"type": "object", "properties": {"sheet": {"type": "string"},
                                                   "row": {"type": "integer"},
                                                   "count": {"type": "integer"}},
                  "required": ["sheet", "row"]}, self.insert_rows),
        ]
        if self.options.python_tool:
            tools.append(Tool(
                "python", f"Run Python 3 code; the workbook is the file {WORKBOOK_NAME} in the "
                "current folder (openpyxl is installed); save it to keep changes.",
                {"type": "object", "properties": {"code": {"type": "string"}},
                 "required": ["code"]}, self.python))
        return tools

    # ------------------------------------------------------------------------- tools

    def list_sheets(self) -> str:
        return "\n".join(f"{ws.title}: {ws.dimensions}" for ws in self.wb.worksheets)

    def read_range(self, ref: Any) -> str:
        sheet, box = self._range(str(ref))
        ws = self.wb[sheet]
        min_col, min_row, max_col, max_row = box
        width = max_col - min_col + 1
        rows_fit = max(1, self.options.read_max_cells // width)
        last_row = min(max_row, min_row + rows_fit - 1)
        last_col = min(max_col, min_col + self.options.read_max_cells - 1)
        header = ["", *(get_column_letter(c) for c in range(min_col, last_col + 1))]
        lines = [" | ".join(header)]
        for r in range(min_row, last_row + 1):
            cells = [_render(ws.cell(row=r, column=c).value) for c in range(min_col, last_col + 1)]
            lines.append(" | ".join([str(r), *cells]))
        shown = f"{get_column_letter(min_col)}{min_row}:{get_column_letter(last_col)}{last_row}"
        title = f"{qualified(sheet, shown)}"
        if (last_row, last_col) != (max_row, max_col):
            title += (f" (first {self.options.read_max_cells} cells of the range; read the "
                      "rest with another call)")
        return "\n".join([title, *lines])

    def write_cells(self, cells: Any) -> str:
        if isinstance(cells, list):  # [["A1", 5], ...] is a common variant
            try:
                cells = {str(k): v for k, v in cells}
            except (TypeError, ValueError):
                cells = None
        if not isinstance(cells, Mapping) or not cells:
            raise ToolError('cells must be an object like {"A1": 5, "B1": "=A1*2"}')
        placed: dict[str, tuple[str, str]] = {}
        for ref, value in cells.items():
            sheet, cell = self._cell(str(ref))
            self.wb[sheet][cell] = _typed(value)
            placed[qualified(sheet, cell)] = (sheet, cell)
        self.cells_written += len(placed)
        return f"wrote {len(placed)} cells: " + self._values_of(placed)

    def delete_rows(self, sheet: Any, row: Any, count: Any = 1) -> str:
        ws, row, count = self._rows(sheet, row, count)
        ws.delete_rows(row, count)
        self.cells_written += count
        return f"deleted {count} row(s) of {ws.title} starting at row {row}; now {ws.dimensions}"

    def insert_rows(self, sheet: Any, row: Any, count: Any = 1) -> str:
        ws, row, count = self._rows(sheet, row, count)
        ws.insert_rows(row, count)
        self.cells_written += count
        return f"inserted {count} row(s) into {ws.title} before row {row}; now {ws.dimensions}"

    def python(self, code: Any) -> str:
        self.save()
        original = self.path.read_bytes()
        with tempfile.TemporaryDirectory(prefix="skillgrad-py-") as work:
            (Path(work) / WORKBOOK_NAME).write_bytes(original)
            o = self.options
            result = run_python(str(code), Path(work), SandboxLimits(
                timeout_s=o.python_timeout_s, cpu_s=max(1, int(o.python_timeout_s)),
                memory_mb=o.python_memory_mb, max_output_chars=1500),
                allow_unconfined=o.allow_unconfined_python)
            try:  # never through a link the code made to a file outside its folder
                saved = read_handed_back(Path(work), WORKBOOK_NAME)
            except UnsafeFile as exc:
                raise ToolError(f"{result.summary()}\n{exc}; changes discarded") from None
        note = ""
        if saved is not None and saved != original:
            try:
                self.wb = openpyxl.load_workbook(io.BytesIO(saved))
            except Exception as exc:  # noqa: BLE001 - any unreadable file is the agent's doing
                raise ToolError(f"{result.summary()}\nthe saved {WORKBOOK_NAME} cannot be "
                                f"opened ({type(exc).__name__}); changes discarded") from None
            self.cells_written += 1
            note = f"\n({WORKBOOK_NAME} changed; reloaded)"
        return result.summary() + note

    def save(self) -> Path:
        self.wb.save(self.path)
        return self.path

    # ------------------------------------------------------------------------- helpers

    def _values_of(self, placed: dict[str, tuple[str, str]], limit: int = 8) -> str:
        """What was written, with formulas shown computed so the agent sees its errors."""
        formulas = {k: v for k, v in placed.items()
                    if formula_text(self.wb[v[0]][v[1]].value) is not None}
        computed = evaluate_formulas(self.save(), dict(list(formulas.items())[:limit])) \
            if formulas else {}
        parts = []
        for key, (sheet, cell) in list(placed.items())[:limit]:
            raw = self.wb[sheet][cell].value
            parts.append(f"{key}={show(computed[key])} ({raw})" if key in computed
                         else f"{key}={show(raw)}")
        more = f", ... {len(placed) - limit} more" if len(placed) > limit else ""
        return ", ".join(parts) + more

    def _sheet(self, name: str) -> str:
        if name in self.wb.sheetnames:
            return name
        folded = {s.lower(): s for s in self.wb.sheetnames}
        if name.strip().lower() in folded:
            return folded[name.strip().lower()]
        raise ToolError(f"no sheet {name!r}; sheets: {', '.join(self.wb.sheetnames)}")

    def _cell(self, ref: str) -> tuple[str, str]:
        try:
            sheet, cell = split_ref(ref, self.wb.sheetnames[0])
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        return self._sheet(sheet), cell

    def _range(self, ref: str) -> tuple[str, tuple[int, int, int, int]]:
        sheet, _, box = ref.strip().rpartition("!")
        sheet = sheet.strip().strip("'") or self.wb.sheetnames[0]
        sheet = self._sheet(sheet)
        try:
            min_col, min_row, max_col, max_row = range_boundaries(box.strip().upper())
        except (ValueError, TypeError):
            raise ToolError(f"{ref!r} is not a range like Sheet1!A1:D10") from None
        ws = self.wb[sheet]
        # Whole columns or rows (A:C, 2:5) stop at the used area.
        return sheet, (min_col or 1, min_row or 1, max_col or ws.max_column,
                       max_row or ws.max_row)

    def _rows(self, sheet: Any, row: Any, count: Any) -> tuple[Any, int, int]:
        ws = self.wb[self._sheet(str(sheet))]
        try:
            row, count = int(row), int(count)
        except (TypeError, ValueError):
            raise ToolError("row and count must be integers") from None
        if row < 1 or not 1 <= count <= 1000:
            raise ToolError("row must be >= 1 and count between 1 and 1000")
        return ws, row, count


def _typed(value: Any) -> Any:
    """A JSON value as a spreadsheet would store it when typed: numbers and ISO dates in text
    become numbers and dates; null clears the cell."""
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER.match(text):
            return float(text) if "." in text else int(text)
        if _ISO_DATE.match(text):
            try:
                return dt.datetime.fromisoformat(text)
            except ValueError:
                return value
        return value
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return str(value)


def _render(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dt.datetime) and value.time() == dt.time(0):
        return value.date().isoformat()
    if isinstance(value, float):
        return f"{value:.10g}"
    text = str(getattr(value, "text", value))
    return text if len(text) <= 24 else text[:21] + "..."


def run_workbook_episode(model: ChatModel, skill: str, task_prompt: str, workbook: bytes,
                         targets: Mapping[str, Any], options: WorkbookOptions) -> WorkbookOutcome:
    """Play one episode on a private copy of ``workbook`` and check the result."""
    with tempfile.TemporaryDirectory(prefix="skillgrad-wb-") as tmp:
        path = Path(tmp) / WORKBOOK_NAME
        path.write_bytes(workbook)
        session = WorkbookSession(path, options)
        episode = run_episode(model, skill, task_prompt, session.tools(), mode=options.tool_mode,
                              max_turns=options.max_turns, max_tokens=options.max_tokens,
                              temperature=options.temperature,
                              skill_files=options.skill_files)
        check = check_workbook(session.save(), targets, options.tolerance)
    return WorkbookOutcome(episode, check, session.cells_written)


def workbook_reason(outcome: WorkbookOutcome) -> str:
    """Why a workbook task failed, for the optimizer: wrong cells, and how the agent acted."""
    if outcome.check.hard >= 1.0:
        return ""
    episode = outcome.episode
    notes = []
    if outcome.cells_written == 0:
        notes.append("the agent changed no cell")
    failed = [a for a in episode.actions if not a.ok]
    if failed:
        notes.append(f"{len(failed)} tool call(s) failed, first: {failed[0].observation[:120]}")
    if episode.answer is None:
        notes.append(episode.problems[0] if episode.problems else "it never said it was done")
    return outcome.check.reason() + ("; " + "; ".join(notes) if notes else "")


def sheet_summary(workbook: openpyxl.Workbook) -> str:
    """``Orders (A1:C8), Products (A1:C6)``: the sheets named in a task prompt."""
    return ", ".join(f"{ws.title} ({ws.dimensions})" for ws in workbook.worksheets)
