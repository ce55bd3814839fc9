"""Rollout latency of the embedded model with and without reuse of the skill prefix.

Three tables, on the quickstart's tasks:

1. One skill, tasks back to back, as the trainer runs them. "reuse" is the normal case:
   llama.cpp keeps the KV cache of the previous prompt, so only the task part of each prompt
   is evaluated. "no reuse" clears the KV cache before every task, so the whole prompt (skill +
   task) is evaluated each time. Both are set next to the compute bound measured in the same run:

       bound = evaluated prompt tokens / prompt tok/s + answer tokens / generated tok/s

   with prompt and generation speed calibrated on this machine first.
2. Skill versions in turn, as a training step evaluates them (the current skill, a candidate,
   the current skill again, the candidate again): with ``prefix_slots`` 2 (the default) each
   version keeps its own context and pays its prefix once; with 1 every change of version
   pays it again.
3. Both roles on the embedded model, as a training run builds them: target rollouts, an
   optimizer call, target rollouts again. The target's cached prefix survives the optimizer's
   call (each role has its own instance).

The tokens llama.cpp actually evaluated are read from its cache, so the counts are exact about
what reuse saved. Use ``--skill bench/skills/skill_1500_tokens.md`` for a skill of ~1,500 tokens.

    python bench/embedded_prefix.py [--tasks 8] [--skill FILE] [--model qwen2.5-coder-1.5b]
                                    [--tables 1 2 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from skillgrad.build import build_environment
from skillgrad.clients import build_clients
from skillgrad.config import load_config
from skillgrad.models.embedded import EmbeddedBackend, EmbeddedModel, EmbeddedOptions
from skillgrad.models.messages import ChatRequest, Message
from skillgrad.records import Task

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"


def calibrate(model: EmbeddedModel) -> tuple[float, float]:
    """Prompt and generation speed (tokens/s) of this model on this machine."""
    return model.measure_speed()


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def evaluated_tokens(model: EmbeddedModel, env: Any, task: Task, skill: str) -> tuple[int, int, int, float]:
    """(prompt tokens, tokens llama.cpp evaluated, answer tokens, seconds) of one rollout."""
    before = model.cached_tokens(key=skill)  # the context that will serve this skill, if any
    started = time.perf_counter()
    result = env.rollout(task, skill, model)
    seconds = time.perf_counter() - started
    prompt = model.cached_tokens()[: result.usage.prompt_tokens]
    # What llama.cpp had to evaluate: the prompt after its common prefix with what the context
    # held before (at least one token is always evaluated).
    evaluated = max(1, len(prompt) - common_prefix(before, prompt))
    return len(prompt), evaluated, result.usage.completion_tokens, seconds


def reuse_table(model: EmbeddedModel, env: Any, tasks: list[Task], skill: str,
                rates: tuple[float, float], title: str) -> Table:
    prompt_rate, gen_rate = rates
    table = Table(title=title)
    for col in ("mode", "prompt tokens", "evaluated", "answer tokens", "mean s / task",
                "bound s / task", "latency / bound"):
        table.add_column(col, justify="right")
    for mode in ("reuse", "no reuse"):
        env.rollout(tasks[-1], skill, model)  # warm: the skill prefix is in the cache
        rows = []
        for task in tasks:
            if mode == "no reuse":
                model.reset()
            prompt, evaluated, answer, seconds = evaluated_tokens(model, env, task, skill)
            rows.append((prompt, evaluated, answer, seconds,
                         evaluated / prompt_rate + answer / gen_rate))
        mean = [statistics.mean(col) for col in zip(*rows, strict=True)]
        table.add_row(mode, f"{mean[0]:.0f}", f"{mean[1]:.0f}", f"{mean[2]:.1f}",
                      f"{mean[3]:.2f}", f"{mean[4]:.2f}", f"{mean[3] / mean[4]:.2f}")
    return table


def versions_table(path: Path, model_name: str, env: Any, tasks: list[Task], skill: str,
                   skill_tokens: int) -> Table:
    """The current skill and a candidate (the skill with one more line) evaluated in turn."""
    candidate = skill.rstrip("\n") + "\n- Answer with the shortest span that is complete.\n"
    order = [("current", skill), ("candidate", candidate)] * 2
    table = Table(title=f"skill versions in turn ({len(tasks)} tasks each: current, candidate, "
                  f"current, candidate); skill of {skill_tokens} tokens")
    for col in ("prefix_slots", "prompt tokens evaluated", "prefixes paid", "wall s",
                "contexts"):
        table.add_column(col, justify="right")
    for slots in (2, 1):
        model = EmbeddedBackend.create(EmbeddedOptions(model=model_name, prefix_slots=slots),
                                       path)
        evaluated_total, paid, started = 0, 0, time.perf_counter()
        for _, version in order:
            for task in tasks:
                _, evaluated, _, _ = evaluated_tokens(model, env, task, version)
                evaluated_total += evaluated
                paid += evaluated >= skill_tokens
        table.add_row(str(slots), str(evaluated_total), f"{paid} of {len(order)} rounds",
                      f"{time.perf_counter() - started:.1f}", str(model.contexts))
        del model
    return table


def roles_table(env: Any, tasks: list[Task], skill: str, skill_tokens: int) -> Table:
    """Both roles embedded, built as a training run builds them (one client per role)."""
    clients = build_clients(load_config(QUICKSTART))
    target = clients["target"].model
    optimizer = clients["optimizer"].for_stage("reflect")
    assert isinstance(target, EmbeddedModel)
    table = Table(title=f"both roles on the embedded model; skill of {skill_tokens} tokens")
    for col in ("phase", "prompt tokens", "evaluated", "s"):
        table.add_column(col, justify="right")
    for phase in ("target, first task", "target, after it", "optimizer call",
                  "target, after the optimizer call"):
        if phase == "optimizer call":
            request = ChatRequest(messages=(
                Message(role="system", content="You improve instructions for an assistant."),
                Message(role="user", content="The assistant answered with whole sentences where "
                        "a short phrase was expected. Write one rule, in one line.")),
                max_tokens=24, temperature=0.0)
            started = time.perf_counter()
            out = optimizer.complete(request)
            table.add_row(phase, str(out.usage.prompt_tokens), "(its own instance)",
                          f"{time.perf_counter() - started:.1f}")
            continue
        task = {"target, first task": tasks[0], "target, after it": tasks[1]}.get(phase, tasks[2])
        prompt, evaluated, _, seconds = evaluated_tokens(target, env, task, skill)
        table.add_row(phase, str(prompt), str(evaluated), f"{seconds:.1f}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--skill", type=Path, default=None, help="default: the quickstart's")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--order", choices=("split", "mixed"), default="split",
                        help="split: the split's order (questions on one passage in a row); "
                        "mixed: consecutive tasks share only the skill")
    parser.add_argument("--tables", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    if args.tasks < 3:
        parser.error("--tasks: at least 3")

    resolved = load_config(QUICKSTART)
    env = build_environment(resolved)
    tasks = env.tasks("val")[: args.tasks]
    skill = args.skill.read_text(encoding="utf-8") if args.skill else env.initial_skill()
    tasks = tasks if args.order == "split" else sorted(tasks, key=lambda t: t.id[::-1])
    console = Console(width=120)
    model = EmbeddedBackend.create(EmbeddedOptions(model=args.model), ROOT)
    skill_tokens = model.count_tokens(skill)
    if 1 in args.tables:
        rates = calibrate(model)
        console.print(reuse_table(
            model, env, tasks, skill, rates,
            f"{args.model}: {len(tasks)} quickstart rollouts, skill of {skill_tokens} tokens; "
            f"calibrated {rates[0]:.1f} prompt tok/s, {rates[1]:.1f} generated tok/s"))
    del model
    if 2 in args.tables:
        console.print(versions_table(ROOT, args.model, env, tasks, skill, skill_tokens))
    if 3 in args.tables:
        console.print(roles_table(env, tasks, skill, skill_tokens))


if __name__ == "__main__":
    main()
