"""Exact (non-private) counting and the exact hierarchical heavy hitters (Definition 2.3.5).

For tests and evaluation only: these results are raw data and must never be published as if
private. Bottom-up from level h to the root (level 0), a prefix is an HHH when its *residual*
count — the elements under it that are not under an already selected descendant — is >= τ.
With ``weights`` (weighted records, docs/ALGORITHMS.md §2 "Weighted elements") every count is a sum of weights: a record of weight v
counts as v elements, exactly as the sketches insert it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import UsageError
from .hierarchy import Hierarchy

__all__ = ["ExactHHH", "exact_counts", "exact_hhh"]


@dataclass(frozen=True)
class ExactHHH:
    """One exact hierarchical heavy hitter: level, sketch key (root: 0), label, residual, count."""

    level: int
    key: int
    prefix: str
    residual: int
    count: int


def _weights(hierarchy: Hierarchy, values: Any, weights: Any) -> np.ndarray:
    n = hierarchy.count(values)
    if weights is None:
        return np.ones(n, dtype=np.int64)
    w = np.asarray(weights, dtype=np.int64)
    if w.shape != (n,) or (w < 0).any():
        raise UsageError(f"exact: weights must be {n} integers >= 0 (one per value), got shape {w.shape}")
    return w


def exact_counts(hierarchy: Hierarchy, values: Any, level: int, weights: Any = None) -> dict[int, int]:
    """``{key: exact frequency}`` at ``level`` (1..h); with ``weights``, the sum of weights."""
    keys = hierarchy.keys(values, level)
    uniq, inverse = np.unique(keys, return_inverse=True)
    counts = np.bincount(inverse.reshape(-1), weights=_weights(hierarchy, values, weights), minlength=uniq.size)
    return dict(zip(uniq.tolist(), counts.astype(np.int64).tolist()))


def exact_hhh(hierarchy: Hierarchy, values: Any, tau: float, weights: Any = None) -> list[ExactHHH]:
    """The exact HHH set at threshold ``tau`` > 0, bottom-up (level h first), root last; with
    ``weights`` (one integer per value) counts and residuals are sums of weights."""
    if not tau > 0:
        raise UsageError(f"exact_hhh: tau must be > 0, got {tau!r}")
    w = _weights(hierarchy, values, weights)
    n = int(w.sum())
    covered = np.zeros(w.size, dtype=bool)
    result: list[ExactHHH] = []
    for level in range(hierarchy.h, 0, -1):
        keys = hierarchy.keys(values, level)
        uniq, inverse = np.unique(keys, return_inverse=True)
        inverse = inverse.reshape(-1)
        counts = np.bincount(inverse, weights=w, minlength=uniq.size).astype(np.int64)
        residual = np.bincount(inverse[~covered], weights=w[~covered], minlength=uniq.size).astype(np.int64)
        chosen = np.flatnonzero(residual >= tau)
        for i in chosen.tolist():
            key = int(uniq[i])
            result.append(ExactHHH(level, key, hierarchy.label(key, level), int(residual[i]), int(counts[i])))
        if chosen.size:
            covered |= np.isin(inverse, chosen)
    root_residual = int(w[~covered].sum())
    if n and root_residual >= tau:
        result.append(ExactHHH(0, 0, hierarchy.label(0, 0), root_residual, n))
    return result
