"""Memory of the embedded model: what the weights cost and what each context adds.

A context (``prefix_slots`` per role) is one llama.cpp context holding one skill's prompt in
its KV cache. The quickstart builds three: two for the target (the current skill and a
candidate, each paying its prefix once) and one for the optimizer. This script makes them one
at a time, as a run does, each with a first call under its own system message, and after each
prints the process's memory three ways (from ``/proc/self/status`` and
``/proc/self/smaps_rollup``):

* RSS: resident pages as the kernel counts them per mapping. Every context maps the weights
  file again, so RSS counts the same shared file pages once per context.
* PSS: each page divided by the number of mappings that share it: the memory really used.
* anonymous: the process's own memory (KV caches, compute buffers, Python); no file pages.

    python bench/embedded_memory.py [--model qwen2.5-coder-1.5b] [--n-ctx 8192] [--contexts 3]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from skillgrad.models.embedded import EmbeddedBackend, EmbeddedOptions
from skillgrad.models.messages import ChatRequest, Message

MiB = 1024


def memory() -> dict[str, int]:
    """VmRSS, VmHWM (peak RSS), Pss and Anonymous of this process, in KiB."""
    out: dict[str, int] = {}
    for name in ("/proc/self/status", "/proc/self/smaps_rollup"):
        for line in Path(name).read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM", "Pss", "Anonymous") and rest.strip().endswith("kB"):
                out[key] = int(rest.split()[0])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--n-ctx", type=int, default=8192)
    parser.add_argument("--contexts", type=int, default=3)
    args = parser.parse_args()
    console = Console()
    table = Table(title=f"embedded {args.model}, n_ctx {args.n_ctx}: memory as contexts are "
                  "made (MiB)")
    for col in ("after", "contexts", "RSS", "peak RSS", "PSS", "anonymous", "s"):
        table.add_column(col, justify="right")
    before = memory()
    table.add_row("start (Python, skillgrad)", "0", *_cells(before), "")
    options = EmbeddedOptions(model=args.model, n_ctx=args.n_ctx, prefix_slots=args.contexts,
                              max_tokens=8)
    started = time.perf_counter()
    model = EmbeddedBackend.create(options, Path.cwd())
    table.add_row("loading the weights (one context)", str(model.contexts), *_cells(memory()),
                  f"{time.perf_counter() - started:.1f}")
    for n in range(args.contexts):
        request = ChatRequest(messages=(
            Message(role="system", content=f"Skill version {n}: answer with the exact span."),
            Message(role="user", content="What is 2 + 2? Reply with the number.")),
            max_tokens=8, temperature=0.0)
        started = time.perf_counter()
        model.complete(request)
        table.add_row(f"a call with system message {n + 1}", str(model.contexts),
                      *_cells(memory()), f"{time.perf_counter() - started:.1f}")
    console.print(table)
    size = Path(model.path).stat().st_size // (MiB * MiB)
    console.print(f"weights file: {size} MiB ({model.path.name}), memory-mapped and shared by "
                  "the contexts")


def _cells(m: dict[str, int]) -> list[str]:
    return [f"{m[k] / MiB:,.0f}" for k in ("VmRSS", "VmHWM", "Pss", "Anonymous")]


if __name__ == "__main__":
    main()
