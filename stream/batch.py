"""The batch job: one window = the whole input file (``dphhh hhh`` and ``dphhh exact``).

Reads a file (text, pcap, pcapng), turns its records into values of the chosen hierarchy,
sketches them (:class:`~sketches.level_sketches.LevelSketches`) and releases one private report
(:func:`~privacy.window.release_window`). Skipped records are counted by reason; their content is
never kept.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np

from connectors.files import open_input
from connectors.skips import SkipCounter
from connectors.text import parse_ipv6, parse_paths
from privacy.params import HHHParams
from privacy.randomness import as_source
from privacy.window import release_window
from sketches.exact import exact_hhh
from sketches.hierarchy import Hierarchy, PathHierarchy
from sketches.level_sketches import LevelSketches

__all__ = ["NoReadableInput", "iter_values", "read_all_values", "batch_report", "exact_report"]


class NoReadableInput(ValueError):
    """The input held no readable record."""


def iter_values(path: str | Path, input_format: str, hierarchy: Hierarchy, skips: SkipCounter) -> Iterator[Any]:
    """Batches of hierarchy values read from ``path``; bad records are counted into ``skips``."""
    source = open_input(path, input_format)
    if hierarchy.kind == "ipv4":
        yield from source.iter_ipv4(skips)
        return
    for lines in source.iter_lines(skips):
        if hierarchy.kind == "ipv6":
            hi, lo = parse_ipv6(lines, skips)
            if hi.size:
                yield hi, lo
        else:
            assert isinstance(hierarchy, PathHierarchy)
            paths = parse_paths(lines, skips)
            good = [p for p in paths if p.count("/") + 1 == hierarchy.depth]
            skips.add("bad_path_depth", len(paths) - len(good))
            if good:
                yield good


def _concat(hierarchy: Hierarchy, batches: list[Any]) -> Any:
    if hierarchy.kind == "ipv4":
        return np.concatenate(batches) if batches else np.empty(0, dtype=np.uint32)
    if hierarchy.kind == "ipv6":
        if not batches:
            return np.empty(0, np.uint64), np.empty(0, np.uint64)
        return np.concatenate([b[0] for b in batches]), np.concatenate([b[1] for b in batches])
    return [p for b in batches for p in b]


def read_all_values(path: str | Path, input_format: str, hierarchy: Hierarchy, skips: SkipCounter) -> Any:
    """All values of the file at once (for the exact reference)."""
    return _concat(hierarchy, list(iter_values(path, input_format, hierarchy, skips)))


def batch_report(
    path: str | Path,
    *,
    input_format: str,
    hierarchy: Hierarchy,
    params: HHHParams,
    seed: int | None = None,
) -> dict[str, Any]:
    """Sketch the whole file and release one private report (``dphhh.report/1``)."""
    skips = SkipCounter()
    sketches = LevelSketches(hierarchy, params.counters, params.partitions)
    readable = False
    for values in iter_values(path, input_format, hierarchy, skips):
        readable = True
        sketches.update(values)
    if not readable:
        raise NoReadableInput(f"input: no readable record in {path} ({skips.total} skipped)")
    return release_window(
        sketches,
        params,
        window={"kind": "batch", "start": None, "end": None},
        diagnostics={"skipped": skips.as_dict()},
        rng=as_source(seed),
    )


def exact_report(path: str | Path, *, input_format: str, hierarchy: Hierarchy, tau: float) -> dict[str, Any]:
    """The exact, NON-PRIVATE hierarchical heavy hitters of the file (for evaluation)."""
    skips = SkipCounter()
    values = read_all_values(path, input_format, hierarchy, skips)
    n = hierarchy.count(values)
    if n == 0:
        raise NoReadableInput(f"input: no readable record in {path} ({skips.total} skipped)")
    return {
        "schema": "dphhh.exact/1",
        "private": False,
        "warning": "NON-PRIVATE: exact counts of the input, for evaluation on your own data only; do not publish",
        "params": {"tau": tau, "hierarchy": hierarchy.spec(), "h": hierarchy.h},
        "n": n,
        "hhh": [
            {"prefix": x.prefix, "level": x.level, "residual": x.residual, "count": x.count}
            for x in exact_hhh(hierarchy, values, tau)
        ],
        "diagnostics": {"skipped": skips.as_dict()},
    }
