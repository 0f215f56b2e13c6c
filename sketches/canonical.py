"""The canonical order in which a sketch takes a group of elements (docs/ALGORITHMS.md §0 "Canonical order").

Within one group (an *epoch* of the stream job: the elements that arrived in one public interval of
the broker's clock, gathered from every input partition), a sketch takes its keys **sorted by key,
each run of equal keys as one weighted update of their total weight**. A weighted update of weight
v is defined as v unit inserts in a row (docs/ALGORITHMS.md §2 "Weighted elements"), so the group's
unit sequence is its keys in ascending order — a function of the group's multiset alone: one more
element is one more unit inserted into that sequence, which is the neighbour relation Lemma 4.1.1
is about, and no arrival order, batch cut or partition interleaving can change the result. Heavy
keys cost one update per group.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .misra_gries import MisraGries

__all__ = ["canonical_runs", "apply_canonical"]


def canonical_runs(
    keys: Sequence[np.ndarray] | np.ndarray, weights: Sequence[np.ndarray | None] | np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(distinct keys ascending, total weight of each) of one group: ``keys`` one int64 array or a
    sequence of them (the group's batches), ``weights`` aligned with them (``None``: weight 1)."""
    if isinstance(keys, np.ndarray):
        parts = [keys]
        wparts = [weights] if weights is None or isinstance(weights, np.ndarray) else list(weights)
    else:
        parts = list(keys)
        wparts = [None] * len(parts) if weights is None else list(weights)
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    flat = np.concatenate([np.asarray(k, dtype=np.int64) for k in parts])
    if not flat.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if all(w is None for w in wparts):
        uniq, counts = np.unique(flat, return_counts=True)
        return uniq, counts.astype(np.int64)
    w = np.concatenate(
        [
            np.ones(len(k), dtype=np.int64) if wi is None else np.asarray(wi, dtype=np.int64)
            for k, wi in zip(parts, wparts)
        ]
    )
    order = np.argsort(flat)  # any order within a run: only its sum is kept
    ordered = flat[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    return ordered[starts], np.add.reduceat(w[order], starts).astype(np.int64)  # exact int64 sums


def apply_canonical(
    sketch: MisraGries,
    keys: Sequence[np.ndarray] | np.ndarray,
    weights: Sequence[np.ndarray | None] | np.ndarray | None = None,
) -> None:
    """Insert one group into ``sketch`` in the canonical order (see the module docstring)."""
    uniq, totals = canonical_runs(keys, weights)
    if uniq.size:
        sketch.update(uniq, totals)
