"""The batch job: one window = the whole input file (``dphhh hhh`` and ``dphhh exact``).

Reads a file (text, pcap, pcapng), turns its records into values of the chosen hierarchy,
sketches them (:class:`~sketches.level_sketches.LevelSketches`) and releases one private report
(:func:`~privacy.window.release_window`).

Skipped records are counted by reason into a :class:`~connectors.skips.SkipCounter` (never their
content) and classified as in :mod:`connectors.skips`:

* *unparsable* records (``bad_ipv4``, ``invalid_utf8``, ``truncated`` packets, ...) hold no
  element; the caller may print their count on stderr as an operational line;
* *excluded* records are valid records of another kind — an IPv6 address or packet in an IPv4
  run (``wrong_family``, ``not_ipv4``), a dotted quad in an IPv6 run (``wrong_family``), a path of
  another depth (``bad_path_depth``, ``bad_path_too_deep``) — and their count is never shown.

The private report carries no count of records at all (spec §0.1 f): its ``diagnostics`` is
empty. An input without a single element raises :class:`NoReadableInput`, whose message names
no count.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np

from connectors.files import open_input
from connectors.skips import NoReadableInput, SkipCounter, no_readable_message
from connectors.snapshot import parse_ipv4_records, parse_ipv6_records
from connectors.text import parse_paths
from privacy.params import HHHParams
from privacy.randomness import as_source
from privacy.window import release_window
from sketches.exact import exact_hhh
from sketches.hierarchy import Hierarchy, PathHierarchy
from sketches.level_sketches import LevelSketches

__all__ = ["NoReadableInput", "iter_values", "read_all_values", "batch_report", "exact_report", "no_readable_hint"]


def no_readable_hint(hierarchy: Hierarchy) -> str:
    """A static (data-independent) hint for an input without a readable record of ``hierarchy``."""
    if hierarchy.kind == "ipv4":
        return ("--hierarchy ipv4 reads dotted quads and IPv4 packets: for IPv6 addresses use "
                "--hierarchy ipv6:LENGTHS, for paths --hierarchy path:DEPTH")
    if hierarchy.kind == "ipv6":
        return ("--hierarchy ipv6 reads IPv6 addresses from a text file: for dotted quads or captures use "
                "--hierarchy ipv4:LENGTHS")
    return (f"--hierarchy {hierarchy.spec()} reads paths of exactly {hierarchy.h} components "
            "(a/b/...): check DEPTH")


def iter_values(path: str | Path, input_format: str, hierarchy: Hierarchy, skips: SkipCounter) -> Iterator[Any]:
    """Batches of hierarchy values read from ``path``; skipped records are counted into ``skips``."""
    source = open_input(path, input_format)
    if hierarchy.kind == "ipv4" and source.is_capture:
        yield from source.iter_ipv4(skips)
        return
    for lines in source.iter_lines(skips):
        if hierarchy.kind == "ipv4":
            values = parse_ipv4_records(lines, skips)
            if values.size:
                yield values
        elif hierarchy.kind == "ipv6":
            hi, lo = parse_ipv6_records(lines, skips)
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
    skips: SkipCounter | None = None,
) -> dict[str, Any]:
    """Sketch the whole file and release one private report (``dphhh.report/1``).

    Skipped records are counted into ``skips`` when given (so that the caller can print the
    operational line of unparsable records); the report itself holds no count of records.
    Raises :class:`NoReadableInput` when the file holds no element of ``hierarchy``.
    """
    skips = SkipCounter() if skips is None else skips
    sketches = LevelSketches(hierarchy, params.counters, params.partitions)
    readable = False
    for values in iter_values(path, input_format, hierarchy, skips):
        readable = True
        sketches.update(values)
    if not readable:
        raise NoReadableInput(no_readable_message(path, skips, no_readable_hint(hierarchy)))
    return release_window(
        sketches,
        params,
        window={"kind": "batch", "start": None, "end": None},
        rng=as_source(seed),
    )


def exact_report(path: str | Path, *, input_format: str, hierarchy: Hierarchy, tau: float,
                 skips: SkipCounter | None = None) -> dict[str, Any]:
    """The exact, NON-PRIVATE hierarchical heavy hitters of the file (for evaluation).

    This output is exact by design (``n`` and every count are the input's own); it is labelled
    NON-PRIVATE and carries every skip count, excluded reasons included, under
    ``diagnostics.skipped``. Raises :class:`NoReadableInput` when the file holds no element.
    """
    skips = SkipCounter() if skips is None else skips
    values = read_all_values(path, input_format, hierarchy, skips)
    n = hierarchy.count(values)
    if n == 0:
        raise NoReadableInput(no_readable_message(path, skips, no_readable_hint(hierarchy)))
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
