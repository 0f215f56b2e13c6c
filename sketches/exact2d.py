"""The exact (non-private) two-dimensional HHH, overlap semantics (docs/ALGORITHMS.md §11).

For tests and evaluation only: these results are raw data and must never be published as if
private. This is the reference of Cormode, Korn, Muthukrishnan and Srivastava over a
:class:`~dphhh.sketches.pairs.PairHierarchy`: the lattice nodes (ℓ1, ℓ2) are processed by decreasing
ℓ1 + ℓ2 (nodes of equal sum are incomparable, so their order does not matter); the *residual* of
a pair p counts the elements under p that are under **no already selected strict descendant of
p**; p is an HHH when its residual is >= τ. The root (0, 0) comes last: its residual counts the
elements under no selected pair.

Overlap semantics: an element under a selected pair d is removed only from the residuals of the
pairs that generalise d. It still counts for a pair on another branch — e.g. an element under the
selected ``10.30.0.0/16 → 0.0.0.0/0`` still counts for ``0.0.0.0/0 → 100.64.0.0/16`` — so, unlike
the one-dimensional :func:`~dphhh.sketches.exact.exact_hhh`, there is no single "covered" mask. An
element x is excluded from the residual of its pair at node n exactly when some selected pair at a
node strictly finer than n (ℓ1′ >= ℓ1, ℓ2′ >= ℓ2, not n itself) contains x — x's pair at n then
generalises that selected pair. So each node with selections keeps one boolean mask (which
elements are under one of its selected pairs), and the residuals at n are a bincount over the
elements outside the masks of the nodes finer than n.

With ``weights`` (weighted records, docs/ALGORITHMS.md §2 "Weighted elements") every count is a
sum of weights, exactly as in :func:`~dphhh.sketches.exact.exact_hhh`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import UsageError
from .exact import _weights
from .pairs import PairHierarchy

__all__ = ["ExactPairHHH", "exact_hhh_2d"]


@dataclass(frozen=True)
class ExactPairHHH:
    """One exact two-dimensional HHH: level (the node's level index; root 0), lattice node
    (ℓ1, ℓ2), pair key (root: 0), label ``"a → b"``, residual, count."""

    level: int
    node: tuple[int, int]
    key: int
    prefix: str
    residual: int
    count: int


def _finer(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """True iff node ``a`` is strictly finer than node ``b`` (``b`` generalises ``a``, ``a != b``)."""
    return a != b and a[0] >= b[0] and a[1] >= b[1]


def exact_hhh_2d(hierarchy: PairHierarchy, values: Any, tau: float, weights: Any = None) -> list[ExactPairHHH]:
    """The exact two-dimensional HHH set at threshold ``tau`` > 0 (overlap semantics).

    ``values`` is ``(first_values, second_values)``. Items come finest node first (decreasing
    ℓ1 + ℓ2, then decreasing level index), the root last; with ``weights`` (one integer >= 0 per
    element) counts and residuals are sums of weights.
    """
    if not isinstance(hierarchy, PairHierarchy):
        raise UsageError(f"exact_hhh_2d: needs a PairHierarchy (e.g. 'ipv4:8,16 x ipv4:8,16'), got {hierarchy!r}")
    if not tau > 0:
        raise UsageError(f"exact_hhh_2d: tau must be > 0, got {tau!r}")
    w = _weights(hierarchy, values, weights)
    n = int(w.sum())
    # per node with at least one selected pair: which elements are under one of them
    under_selected: dict[tuple[int, int], np.ndarray] = {}
    result: list[ExactPairHHH] = []
    # levels are ordered by (ℓ1 + ℓ2, ℓ1): descending levels visit every finer node first
    for level in range(hierarchy.h, 0, -1):
        node = hierarchy.node(level)
        keys = hierarchy.keys(values, level)
        uniq, inverse = np.unique(keys, return_inverse=True)
        inverse = inverse.reshape(-1)
        counts = np.bincount(inverse, weights=w, minlength=uniq.size).astype(np.int64)
        excluded = np.zeros(w.size, dtype=bool)
        for other, mask in under_selected.items():
            if _finer(other, node):
                excluded |= mask
        kept = ~excluded
        residual = np.bincount(inverse[kept], weights=w[kept], minlength=uniq.size).astype(np.int64)
        chosen = np.flatnonzero(residual >= tau)
        for i in chosen.tolist():
            key = int(uniq[i])
            result.append(ExactPairHHH(level, node, key, hierarchy.label(key, level), int(residual[i]), int(counts[i])))
        if chosen.size:
            under_selected[node] = np.isin(inverse, chosen)
    covered = np.zeros(w.size, dtype=bool)
    for mask in under_selected.values():
        covered |= mask
    root_residual = int(w[~covered].sum())
    if n and root_residual >= tau:
        result.append(ExactPairHHH(0, (0, 0), 0, hierarchy.label(0, 0), root_residual, n))
    return result
