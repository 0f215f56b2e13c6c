"""Exact (non-private) counting and the exact hierarchical heavy hitters (Definition 2.3.5).

For tests and evaluation only: these results are raw data and must never be published as if
private. Bottom-up from level h to the root (level 0), a prefix is an HHH when its *residual*
count — the elements under it that are not under an already selected descendant — is >= τ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

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


def exact_counts(hierarchy: Hierarchy, values: Any, level: int) -> dict[int, int]:
    """``{key: exact frequency}`` at ``level`` (1..h)."""
    keys = hierarchy.keys(values, level)
    uniq, counts = np.unique(keys, return_counts=True)
    return dict(zip(uniq.tolist(), counts.tolist()))


def exact_hhh(hierarchy: Hierarchy, values: Any, tau: float) -> list[ExactHHH]:
    """The exact HHH set at threshold ``tau`` > 0, bottom-up (level h first), root last."""
    if not tau > 0:
        raise ValueError(f"exact_hhh: tau must be > 0, got {tau!r}")
    n = hierarchy.count(values)
    covered = np.zeros(n, dtype=bool)
    result: list[ExactHHH] = []
    for level in range(hierarchy.h, 0, -1):
        keys = hierarchy.keys(values, level)
        uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        residual = np.bincount(inverse[~covered], minlength=uniq.size)
        chosen = np.flatnonzero(residual >= tau)
        for i in chosen.tolist():
            key = int(uniq[i])
            result.append(ExactHHH(level, key, hierarchy.label(key, level), int(residual[i]), int(counts[i])))
        if chosen.size:
            covered |= np.isin(inverse, chosen)
    root_residual = int((~covered).sum())
    if n and root_residual >= tau:
        result.append(ExactHHH(0, 0, hierarchy.label(0, 0), root_residual, n))
    return result
