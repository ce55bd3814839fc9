"""Export the spreadsheet environment's generated tasks in SpreadsheetBench's layout.

The ``spreadsheet`` environment generates its workbooks at start-up from (template, seed), so
nothing is committed; this script writes them out for inspection or for use with the
``spreadsheetbench`` environment (``env.data_path: OUT``)::

    python tools/make_spreadsheet_tasks.py OUT [--count 60] [--seed 0]

It writes ``OUT/dataset.json`` and ``OUT/spreadsheet/<id>/1_<id>_input.xlsx`` (the generated
workbook) and ``1_<id>_answer.xlsx`` (the input with every target cell set to its expected
value), with ``answer_position`` listing the target cells.
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import openpyxl

from skillgrad.envs.spreadsheet import SpreadsheetOptions, build_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    tasks, generated = build_tasks(SpreadsheetOptions(count=args.count, seed=args.seed))
    dataset = []
    for task in tasks:
        g = generated[task.id]
        folder = args.out / "spreadsheet" / task.id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"1_{task.id}_input.xlsx").write_bytes(g.workbook)
        answer = openpyxl.load_workbook(io.BytesIO(g.workbook))
        for ref, value in g.targets.items():
            sheet, cell = ref.rsplit("!", 1)
            answer[sheet.strip("'")][cell] = value
        answer.save(folder / f"1_{task.id}_answer.xlsx")
        dataset.append({"id": task.id, "instruction": g.instruction,
                        "spreadsheet_path": f"spreadsheet/{task.id}",
                        "instruction_type": "Cell-Level Manipulation",
                        "answer_position": ",".join(g.targets),
                        "template": g.template, "seed": g.seed})
    (args.out / "dataset.json").write_text(json.dumps(dataset, indent=1), encoding="utf-8")
    print(f"wrote {len(dataset)} tasks to {args.out}")


if __name__ == "__main__":
    main()
