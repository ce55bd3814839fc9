"""skillgrad from Python, with scripted stand-in models: no model, key or network, about a
second.

    python examples/python_api.py [OUT]      # OUT: where the runs go (default runs/python-api)

1. ``optimize``: a skill trained on tasks held in a list and scored by a metric of one's own,
   whose feedback the optimizer reads.
2. ``Trainer.from_config``: the scripted quickstart trained epoch by epoch, its scores read
   between epochs, and the best skill exported as an Agent Skills folder.

To train for real, give ``optimize`` real models instead of the stand-ins: a role section as in
a config (``target={"backend": "openai_compatible", "base_url": ..., "model": ...}``) or any
object with ``complete(request)``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from skillgrad import ChatRequest, ScriptedModel, Trainer, optimize
from skillgrad.testing import scripted_optimizer

HERE = Path(__file__).resolve().parent
RULE = "Reply with the number alone: no words around it."
INITIAL_SKILL = "# Adding numbers\n\nAdd the two numbers of the question.\n"


def target_reply(request: ChatRequest) -> str:
    """Stands for the target: it adds correctly but answers in a sentence, until the skill
    says otherwise."""
    skill = request.messages[0].text()
    a, b = (int(n) for n in re.findall(r"\d+", request.messages[-1].text()))
    return str(a + b) if "number alone" in skill else f"The sum is {a + b}."


def failure_analyst(skill: str, failed: str, prompt: str) -> dict[str, Any]:
    """Stands for the optimizer's failure analyst: it reads the failed tasks, each with the
    metric's feedback, and proposes a rule for the pattern."""
    seen = failed.count("is not the bare number")
    if not seen or RULE in skill:
        return {"reasoning": "no pattern left", "edits": []}
    return {"reasoning": f"{seen} replies wrapped the number in a sentence",
            "edits": [{"op": "append", "anchor": "", "content": RULE, "support": seen,
                       "rationale": "the metric wants the number only"}]}


def metric(answer: str, task: dict[str, Any]) -> tuple[float, str]:
    """1 for the exact number; 0 and why otherwise (the optimizer reads the why)."""
    if answer == task["answer"]:
        return 1.0, ""
    return 0.0, f"the reply {answer!r} is not the bare number {task['answer']}"


def with_optimize(out: Path) -> None:
    tasks = [{"input": f"What is {a} + {b}?", "answer": str(a + b)}
             for a in range(2, 8) for b in range(3, 8)]
    result = optimize(
        tasks[:24], testset=tasks[24:],    # no valset: a quarter of the trainset gates
        metric=metric, initial_skill=INITIAL_SKILL,
        target=ScriptedModel(fn=target_reply),
        optimizer=ScriptedModel(fn=scripted_optimizer(failure_analyst)),
        out=out, train={"num_epochs": 1, "batch_size": 8})
    test = result.summary["test"]
    print(f"optimize: test {test['initial']['hard']:.2f} -> {test['best']['hard']:.2f}; "
          f"run in {result.run_dir}")
    print("best skill:\n" + result.best_skill)


def with_trainer(out: Path) -> None:
    trainer = Trainer.from_config(HERE / "quickstart" / "scripted.yaml", out=out)
    while records := trainer.run_epoch():     # [] once the run is done
        selection = trainer.metrics["selection"]
        print(f"epoch {records[0].epoch}: {[r.decision for r in records]}; selection "
              f"{selection['initial']:.2f} -> best {selection['best']:.2f}")
    test = trainer.metrics["test"]
    print(f"from_config: test {test['initial']['hard']:.2f} -> {test['best']['hard']:.2f}")
    path = trainer.export(out=out.parent / "skills", name="concise-reader")
    print(f"exported {path}")


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("runs/python-api")
    with_optimize(root / "optimize")
    with_trainer(root / "quickstart")
