"""Private sub-stream sizes (docs/ALGORITHMS.md §5, docs/calibration.md §5).

The window size n appears in α1 (``n/(κ+1)``) and is data, so it is released privately.

* One key partition (P = 1): every level's sub-stream is the whole window, so n is released
  **once**, ``ñ = n + DLap(1/ε_n)`` (sensitivity 1), and serves every level and the root.
* P > 1: every (level, partition) sketch releases its own sub-stream size
  ``ñ_{ℓ,p} = n_{ℓ,p} + DLap(h/ε_n)``: one added element changes one sub-stream per level, so the
  vector of all h·P sizes has L1 sensitivity h and the release is (ε_n, 0)-DP.

Upper confidence bound: ``n̂ = ñ + S`` with the slack S of
:class:`~dphhh.privacy.calibration.WindowCalibration` (every released size within S of its true value
with probability >= 1 − β_n: two-sided discrete Laplace tail and a union bound over the releases).
The root (level 0) estimate is post-processing: ñ (P = 1), or the mean over levels of ``Σ_p ñ_{ℓ,p}``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from dphhh.sketches.errors import UsageError

from .noise import discrete_laplace
from .params import check_int, check_positive
from .randomness import RandomSource

__all__ = ["size_scale", "noisy_size", "size_upper_bound", "root_estimate"]


def size_scale(*, epsilon: float, h: int) -> float:
    """Discrete Laplace scale h/ε of each of h·P sub-stream sizes for a size budget ε (P > 1)."""
    return check_int("stream_size", "h", h, 1) / check_positive("stream_size", "epsilon", epsilon)


def noisy_size(n: int, *, scale: float, source: RandomSource) -> int:
    """``n + DLap(scale)``: one released sub-stream size (the scale from the window's calibration)."""
    check_int("stream_size", "n", n, 0)
    return int(n + int(discrete_laplace(check_positive("stream_size", "scale", scale), 1, rng=source)[0]))


def size_upper_bound(n_noisy: int, *, slack: int) -> int:
    """Upper confidence bound ``n̂ = max(0, ñ + slack)``."""
    return max(0, int(n_noisy) + check_int("stream_size", "slack", slack, 0))


def root_estimate(noisy_sizes_by_level: Iterable[Iterable[int]]) -> int:
    """Root count estimate: mean over levels of the sum of that level's noisy partition sizes."""
    totals = [sum(int(x) for x in level) for level in noisy_sizes_by_level]
    if not totals:
        raise UsageError("stream_size: no levels given")
    return max(0, int(round(float(np.mean(totals)))))
