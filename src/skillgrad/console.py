"""The consoles of the command line and its one-line failure. The library logs; only the
command-line modules (:mod:`skillgrad.cli`) print, through these."""

from __future__ import annotations

import sys
from typing import NoReturn

from rich.console import Console

console = Console(stderr=True, soft_wrap=True)  # progress, banners, logs
out_console = Console(soft_wrap=True)  # what a command answers


def say(line: str) -> None:
    """Print ``line`` as it is: no markup, no highlighting."""
    out_console.print(line, markup=False, highlight=False)


def fail(message: str, code: int, hint: str = "") -> NoReturn:
    """End the command with ``error: message`` (and ``hint``) on stderr and exit ``code``."""
    # Plain writes: a one-line error must never be wrapped or read as markup.
    sys.stderr.write(f"error: {message}\n" + (f"{hint}\n" if hint else ""))
    sys.exit(code)
