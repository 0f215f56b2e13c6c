"""Private sub-stream sizes (spec §5).

The window size n appears in α1 (``n/(κ+1)``) and is data, so it is released privately. With key
partitioning every (level, partition) sketch releases its own sub-stream size
``ñ_{ℓ,p} = n_{ℓ,p} + DLap(h/ε_n)``: one added element changes one sub-stream per level, so the
vector of all h·P sizes has L1 sensitivity h and the release is (ε_n, 0)-DP.

Upper confidence bound: ``n̂_{ℓ,p} = ñ_{ℓ,p} + ⌈(h/ε_n)·ln(hP/β_n)⌉`` is >= n_{ℓ,p} for every
sketch simultaneously with probability >= 1 − β_n (one-sided discrete Laplace tail
``P(X >= t) <= exp(−t/b)`` and a union bound over h·P sketches).
The root (level 0) estimate is post-processing: the mean over levels of ``Σ_p ñ_{ℓ,p}``.
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from .noise import discrete_laplace
from .params import check_int, check_open_unit, check_positive
from .randomness import RandomSource

__all__ = ["size_scale", "noisy_size", "size_upper_bound", "root_estimate"]


def size_scale(*, epsilon: float, h: int) -> float:
    """Discrete Laplace scale h/ε of each sub-stream size for a size budget ε."""
    return check_int("stream_size", "h", h, 1) / check_positive("stream_size", "epsilon", epsilon)


def noisy_size(n: int, *, epsilon: float, h: int, source: RandomSource) -> int:
    """``n + DLap(h/ε)``: one sub-stream size released with size budget ε (charged once per level)."""
    check_int("stream_size", "n", n, 0)
    return int(n + int(discrete_laplace(size_scale(epsilon=epsilon, h=h), 1, rng=source)[0]))


def size_upper_bound(n_noisy: int, *, epsilon: float, h: int, partitions: int, beta: float) -> int:
    """Upper confidence bound n̂ >= n for all h·P sketches at once with probability 1 − β."""
    beta = check_open_unit("stream_size", "beta", beta)
    slack = math.ceil(size_scale(epsilon=epsilon, h=h) * math.log(h * partitions / beta))
    return max(0, int(n_noisy) + slack)


def root_estimate(noisy_sizes_by_level: Iterable[Iterable[int]]) -> int:
    """Root count estimate: mean over levels of the sum of that level's noisy partition sizes."""
    totals = [sum(int(x) for x in level) for level in noisy_sizes_by_level]
    if not totals:
        raise ValueError("stream_size: no levels given")
    return max(0, int(round(float(np.mean(totals)))))
