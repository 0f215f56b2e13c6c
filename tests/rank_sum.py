"""The exact two-sample rank-sum (Wilcoxon–Mann–Whitney) test, for tests that compare two samples of
measurements (for instance the publication-time test's delays) at a fixed α.

Under the null hypothesis the pooled values are exchangeable, so every way of choosing which ``len(a)``
of them form the first sample is equally likely. The statistic is the first sample's sum of
mid-ranks; its null distribution is counted exactly over all those choices (ties included: the
mid-ranks, doubled, are integers), by dynamic programming over the pooled values — no normal
approximation, so a p-value as small as ``1 / C(n, len(a))`` is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb

import numpy as np

__all__ = ["rank_sum_p_value", "hodges_lehmann_shift"]


def _doubled_mid_ranks(values: np.ndarray) -> np.ndarray:
    """Twice the mid-rank of each value (1-based ranks; tied values share the mean of their ranks)."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values), dtype=np.int64)
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[order[j + 1]] == values[order[i]]:
            j += 1
        ranks[order[i : j + 1]] = (i + 1) + (j + 1)  # twice the mean of ranks i+1 .. j+1
        i = j + 1
    return ranks


def rank_sum_p_value(a: Sequence[float], b: Sequence[float]) -> float:
    """Exact two-sided p-value of the rank-sum test of "``a`` and ``b`` come from one distribution":
    the probability, over the equally likely splits of the pooled values, of a rank sum of the first
    sample at least as far from its mean as the observed one."""
    pooled = np.asarray([*a, *b], dtype=float)
    m, n = len(a), len(pooled)
    if m == 0 or m == n:
        raise ValueError("rank_sum_p_value: both samples need at least one value")
    scores = _doubled_mid_ranks(pooled)
    observed = int(scores[:m].sum())
    top = int(scores.sum())
    # counts[k][s]: the number of k-subsets of the scores seen so far with sum s (Python ints: exact)
    counts = [[0] * (top + 1) for _ in range(m + 1)]
    counts[0][0] = 1
    for score in scores.tolist():
        for k in range(min(m, n) - 1, -1, -1):
            row, up = counts[k], counts[k + 1]
            for s in range(top - score, -1, -1):
                if row[s]:
                    up[s + score] += row[s]
    dist = counts[m]
    assert sum(dist) == comb(n, m)
    # compare 2·|s − mean| in integers: mean = m·top/n, so n·|s − mean| = |n·s − m·top|
    far = abs(n * observed - m * top)
    extreme = sum(c for s, c in enumerate(dist) if c and abs(n * s - m * top) >= far)
    return extreme / comb(n, m)


def hodges_lehmann_shift(a: Sequence[float], b: Sequence[float]) -> float:
    """The Hodges–Lehmann estimate of how much ``a`` lies above ``b``: the median of all differences
    ``x − y`` (x in a, y in b); robust to a few outliers, unlike a difference of means."""
    return float(np.median(np.subtract.outer(np.asarray(a, float), np.asarray(b, float))))
