"""The optimizer's prompts serve every environment: none of them speaks one task family's
language. What an environment is about reaches the optimizer only through the trajectories."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "skillgrad"

# The words that name the objects of one task family (and the family's own names).
DOMAIN = {
    "reading comprehension": ["passage", "passages", "paragraph", "context", "squad",
                              "wikipedia", "article", "qa", "searchqa"],
    "math": ["boxed", "equation", "arithmetic", "integer", "theorem", "math", "champ", "gsm"],
    "multiple choice": ["choice", "choices", "letter", "option", "options", "mcq"],
    "document search": ["report", "reports", "company", "companies", "revenue", "officeqa"],
    "document images": ["image", "images", "page", "pages", "scan", "ocr", "docvqa"],
    "spreadsheets": ["workbook", "cell", "cells", "formula", "formulas", "sheet", "excel",
                     "column", "spreadsheet", "spreadsheetbench"],
    "household": ["fridge", "microwave", "receptacle", "countertop", "kitchen", "room",
                  "household", "alfworld"],
    "shopping": ["product", "products", "cart", "price", "webshop"],
}


def _texts() -> dict[str, str]:
    """Every prompt template, and the string constants the stages send the optimizer."""
    out = {f"prompts/{p.name}": p.read_text(encoding="utf-8")
           for p in sorted((PACKAGE / "prompts").glob("*.md"))}
    for path in sorted((PACKAGE / "stages").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        # Prose only: identifiers such as artifact names ("apply_report") are no prompt text.
        strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
                   and isinstance(n.value, str) and id(n) not in docs and " " in n.value]
        out[f"stages/{path.name}"] = "\n".join(strings)
    return out


@pytest.mark.parametrize("family", sorted(DOMAIN))
def test_no_optimizer_prompt_speaks_one_task_familys_language(family: str) -> None:
    found = []
    for name, text in _texts().items():
        words = set(re.findall(r"[a-z]+", text.lower()))
        found += [f"{name}: {w}" for w in DOMAIN[family] if w in words]
    assert found == []


def test_the_check_reads_the_templates() -> None:
    texts = _texts()
    assert "prompts/analyst_failure.md" in texts and "{{trajectories}}" in texts[
        "prompts/analyst_failure.md"]
