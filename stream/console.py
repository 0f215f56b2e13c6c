"""Status lines for the person running ``dphhh``: progress and outcomes on standard error, flushed at
once (results go to standard output or files). A line states public facts only — settings, the
schedule, names of topics and files, never a count from the data (docs/ALGORITHMS.md §0.1 f)."""

from __future__ import annotations

import sys

__all__ = ["say"]


def say(line: str) -> None:
    """Print ``line`` to standard error now."""
    print(line, file=sys.stderr, flush=True)
