"""Workbook editing with tools (the SpreadsheetBench family): ``spreadsheet`` (generated tasks,
:mod:`.env`; see ``DATA_CARD.md``) and ``spreadsheetbench`` (SpreadsheetBench in its published
layout, :mod:`.spreadsheetbench`), which share the workbook tools, the checker and the shipped
``skill.md``."""

from skillgrad.envs.spreadsheet.env import (
    SpreadsheetEnvironment,
    SpreadsheetOptions,
    build_tasks,
    task_prompt,
)
from skillgrad.envs.spreadsheet.spreadsheetbench import (
    SpreadsheetBenchEnvironment,
    SpreadsheetBenchOptions,
)

__all__ = ["SpreadsheetBenchEnvironment", "SpreadsheetBenchOptions", "SpreadsheetEnvironment",
           "SpreadsheetOptions", "build_tasks", "task_prompt"]
