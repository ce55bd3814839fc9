"""Rollout latency of the embedded model with and without reuse of the skill prefix.

The quickstart's tasks run back to back with one skill, as the trainer runs them. "reuse" is
the normal case: llama.cpp keeps the KV cache of the previous prompt, so only the task part of
each prompt is evaluated. "no reuse" clears the KV cache before every task, so the whole
prompt (skill + task) is evaluated each time. The tokens llama.cpp actually evaluated are read
from its cache, so the bound is exact about what reuse saved. Both are set next to the compute bound measured
in the same run:

    bound = evaluated prompt tokens / prompt tok/s + answer tokens / generated tok/s

with prompt and generation speed calibrated on this machine first.

    python bench/embedded_prefix.py [--tasks 8] [--skill FILE] [--model qwen2.5-coder-1.5b]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from skillgrad.build import build_environment
from skillgrad.config import load_config
from skillgrad.models.embedded import EmbeddedBackend, EmbeddedModel, EmbeddedOptions
from skillgrad.models.messages import ChatRequest, Message

ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = ROOT / "examples" / "quickstart" / "config.yaml"


def calibrate(model: EmbeddedModel) -> tuple[float, float]:
    """Prompt and generation speed (tokens/s) of this model on this machine."""
    filler = " ".join(f"word{i}" for i in range(300))
    request = ChatRequest(messages=(Message(role="user", content=f"Repeat: {filler}"),),
                          max_tokens=1, temperature=0.0)
    model.reset()
    started = time.perf_counter()
    out = model.complete(request)
    prompt_rate = out.usage.prompt_tokens / (time.perf_counter() - started)
    # Same prompt again: its prefix is cached, so the time is (almost) all generation.
    long = request.model_copy(update={"max_tokens": 64})
    started = time.perf_counter()
    out = model.complete(long)
    gen_rate = out.usage.completion_tokens / (time.perf_counter() - started)
    return prompt_rate, gen_rate


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--skill", type=Path, default=None, help="default: the quickstart's")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--order", choices=("split", "mixed"), default="split",
                        help="split: the split's order (questions on one passage in a row); "
                        "mixed: consecutive tasks share only the skill")
    args = parser.parse_args()

    resolved = load_config(QUICKSTART)
    env = build_environment(resolved)
    tasks = env.tasks("val")[: args.tasks]
    skill = args.skill.read_text(encoding="utf-8") if args.skill else env.initial_skill()
    model = EmbeddedBackend.create(EmbeddedOptions(model=args.model), ROOT)
    prompt_rate, gen_rate = calibrate(model)
    skill_tokens = model.count_tokens(skill)
    tasks = tasks if args.order == "split" else sorted(tasks, key=lambda t: t.id[::-1])

    table = Table(title=f"{args.model}: {len(tasks)} quickstart rollouts, skill of "
                  f"{skill_tokens} tokens; calibrated {prompt_rate:.1f} prompt tok/s, "
                  f"{gen_rate:.1f} generated tok/s")
    for col in ("mode", "prompt tokens", "evaluated", "answer tokens", "mean s / task",
                "bound s / task", "latency / bound"):
        table.add_column(col, justify="right")
    for mode in ("reuse", "no reuse"):
        env.rollout(tasks[-1], skill, model)  # warm: the skill prefix is in the cache
        rows = []
        for task in tasks:
            if mode == "no reuse":
                model.reset()
            cached = model.cached_tokens()
            started = time.perf_counter()
            result = env.rollout(task, skill, model)
            seconds = time.perf_counter() - started
            prompt = model.cached_tokens()[: result.usage.prompt_tokens]
            # What llama.cpp had to evaluate: the prompt after its common prefix with the
            # previous one (at least one token is always evaluated).
            evaluated = max(1, len(prompt) - common_prefix(cached, prompt))
            answer = result.usage.completion_tokens
            rows.append((len(prompt), evaluated, answer, seconds,
                         evaluated / prompt_rate + answer / gen_rate))
        mean = [statistics.mean(col) for col in zip(*rows, strict=True)]
        table.add_row(mode, f"{mean[0]:.0f}", f"{mean[1]:.0f}", f"{mean[2]:.1f}",
                      f"{mean[3]:.2f}", f"{mean[4]:.2f}", f"{mean[3] / mean[4]:.2f}")
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
