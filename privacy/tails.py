"""Exact tails of discrete Laplace noise and of the sum of two (docs/calibration.md §2).

``DLap(b)`` is the two-sided geometric distribution ``P(X = k) = (1 − r)/(1 + r) · r^|k|`` with
``r = e^(−1/b)``. The release of a sketch adds a shared term γ and a per-key term w, so its
threshold and its error bounds depend on the tail of ``γ + w``; this module computes that tail in
closed form (a sum of geometric series, no truncation) instead of bounding it by the tails of γ and
w separately, which is what lets the ``tight`` calibration put its threshold where the δ budget
actually allows (:func:`smallest_threshold`) and its error bound where β allows
(:func:`smallest_two_sided_bound`).

Every function returns an *upper* bound on the probability it names: the closed form's
floating-point value times ``1 + SAFETY`` (its relative rounding error is below 1e-13 for the
scales used here; ``tests/privacy/test_tails.py`` checks it against exact rational arithmetic), so
a threshold or bound found with it is never below what the exact tail requires.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

from dphhh.sketches.errors import UsageError

__all__ = [
    "SAFETY",
    "dlap_tail",
    "dlap_sum_tail",
    "smallest_threshold",
    "smallest_threshold_log",
    "log_dlap_sum_tail_equal",
    "smallest_two_sided_bound",
]

#: Relative margin added to every computed probability (an upper bound on its rounding error).
SAFETY = 1e-9


def _check_scale(name: str, b: float) -> float:
    if not isinstance(b, (int, float)) or isinstance(b, bool) or not math.isfinite(b) or b <= 0:
        raise UsageError(f"tails: {name} must be a finite number > 0, got {b!r}")
    return float(b)


def _exact_dlap_tail(k: int, b: float) -> float:
    r = math.exp(-1.0 / b)
    if k >= 1:
        return math.exp(-k / b) / (1.0 + r)
    return 1.0 - math.exp(-(1 - k) / b) / (1.0 + r)


def dlap_tail(k: int, b: float) -> float:
    """Upper bound on ``P(X >= k)`` for ``X ~ DLap(b)`` and an integer ``k``.

    ``P(X >= k) = r^k/(1 + r)`` for ``k >= 1`` and ``1 − r^(1−k)/(1 + r)`` for ``k <= 0``.
    """
    b = _check_scale("b", b)
    return min(1.0, _exact_dlap_tail(int(k), b) * (1 + SAFETY))


def _sum_tail_positive(s: int, b1: float, b2: float) -> float:
    """``P(X1 + X2 >= s)`` for ``s >= 1``, ``X1 ~ DLap(b1)``, ``X2 ~ DLap(b2)`` independent.

    Condition on ``X1 = g``: ``Σ_g P(X1 = g)·P(X2 >= s − g)``, split at ``g < 0``, ``0 <= g < s``
    and ``g >= s``; each part is a geometric series (docs/calibration.md §2)."""
    r1, r2 = math.exp(-1.0 / b1), math.exp(-1.0 / b2)
    c1 = -math.expm1(-1.0 / b1) / (1.0 + r1)  # (1 − r1)/(1 + r1)
    r1s, r2s = math.exp(-s / b1), math.exp(-s / b2)
    one_minus_r1r2 = -math.expm1(-1.0 / b1 - 1.0 / b2)
    below_zero = c1 * r2s / (1.0 + r2) * (r1 * r2) / one_minus_r1r2
    if b1 == b2:
        middle = c1 * r2s / (1.0 + r2) * s
    else:  # Σ_{g=0}^{s−1} r1^g r2^(s−g) = r2·(r1^s − r2^s)/(r1 − r2); b1, b2 differ by a factor here
        middle = c1 / (1.0 + r2) * r2 * (r1s - r2s) / (r1 - r2)
    at_least_s = r1s / (1.0 + r1) - c1 * r1s * r2 / ((1.0 + r2) * one_minus_r1r2)
    return below_zero + middle + at_least_s


def dlap_sum_tail(s: int, b1: float, b2: float) -> float:
    """Upper bound on ``P(X1 + X2 >= s)`` for independent ``X1 ~ DLap(b1)``, ``X2 ~ DLap(b2)``.

    Exact closed form (times ``1 + SAFETY``); for ``s <= 0`` by symmetry
    ``P(X1 + X2 >= s) = 1 − P(X1 + X2 >= 1 − s)``. ``b1`` and ``b2`` must be equal or differ by
    more than 1e-6 relatively (the closed form divides by ``r1 − r2``).
    """
    b1, b2 = _check_scale("b1", b1), _check_scale("b2", b2)
    if b1 != b2 and abs(b1 - b2) <= 1e-6 * max(b1, b2):
        raise UsageError(f"tails: scales {b1!r} and {b2!r} are too close for the closed form; make them equal")
    s = int(s)
    if s >= 1:
        p = _sum_tail_positive(s, b1, b2)
        return min(1.0, p * (1 + SAFETY))
    # the lower tail is P(X1 + X2 <= s − 1) = P(X1 + X2 >= 1 − s); round it *down* for an upper bound here
    return min(1.0, 1.0 - _sum_tail_positive(1 - s, b1, b2) * (1 - SAFETY))


@lru_cache(maxsize=256)
def smallest_threshold(b_gamma: float, b_w: float, limit: float) -> int:
    """Smallest integer ``T >= 0`` with ``P(γ + w >= T) <= limit`` (γ ~ DLap(b_gamma), w ~ DLap(b_w)).

    Found by exponential then binary search over the exact, monotone tail."""
    if not (0 < limit < 1):
        raise UsageError(f"tails: limit must be in (0, 1), got {limit!r}")
    return _smallest_meeting(lambda t: dlap_sum_tail(t, b_gamma, b_w) <= limit, 0)


def _smallest_meeting(meets: Callable[[int], bool], low: int) -> int:
    """Smallest integer ``T >= low`` with ``meets(T)``, for a ``meets`` that is false and then true (a
    monotone tail against a limit): exponential, then binary search."""
    lo, hi = low, max(low, 1)
    while not meets(hi):
        lo, hi = hi, hi * 2
        if hi > 1 << 62:
            raise UsageError("tails: no threshold below 2^62 meets the limit")
    while lo < hi:  # invariant: meets(hi); no T < lo meets it (or lo = low)
        mid = (lo + hi) // 2
        if meets(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def log_dlap_sum_tail_equal(s: int, b: float) -> float:
    """Upper bound on ``ln P(X1 + X2 >= s)`` for ``s >= 1`` and independent ``X1, X2 ~ DLap(b)``,
    computed in logs so that it holds where the probability is below the smallest float.

    With ``r = e^(−1/b)`` and ``c = (1 − r)/(1 + r)``, the closed form of :func:`dlap_sum_tail` at
    equal scales is ``r^s/(1 + r) · (1 + c·s − c·r/(1 + r))`` (its three geometric parts summed:
    the ``g < 0`` part's ``r²/(1 − r²)`` and the ``g >= s`` part's ``−r/(1 − r²)`` give ``−r/(1 + r)``);
    its logarithm is ``−s/b − ln(1 + r) + ln(1 + c·s − c·r/(1 + r))``, plus ``ln(1 + SAFETY)``."""
    b = _check_scale("b", b)
    s = int(s)
    if s < 1:
        raise UsageError(f"tails: s must be >= 1 here, got {s}")
    r = math.exp(-1.0 / b)
    c = -math.expm1(-1.0 / b) / (1.0 + r)
    return -s / b - math.log1p(r) + math.log(1.0 + c * s - c * r / (1.0 + r)) + math.log1p(SAFETY)


def smallest_threshold_log(b: float, log_limit: float) -> int:
    """Smallest integer ``T >= 1`` with ``ln P(γ + w >= T) <= log_limit`` (γ, w ~ DLap(b)), for a
    ``log_limit`` too small for :func:`smallest_threshold`'s floats (a huge ε); found as it finds
    its threshold, over :func:`log_dlap_sum_tail_equal`."""
    if not log_limit < 0:
        raise UsageError(f"tails: log_limit must be < 0, got {log_limit!r}")
    return _smallest_meeting(lambda t: log_dlap_sum_tail_equal(t, b) <= log_limit, 1)


@lru_cache(maxsize=256)
def smallest_two_sided_bound(b_gamma: float, b_w: float, limit: float) -> int:
    """Smallest integer ``B >= 0`` with ``P(|γ + w| > B) <= limit``.

    ``P(|γ + w| > B) = 2·P(γ + w >= B + 1)`` by symmetry."""
    return max(0, smallest_threshold(b_gamma, b_w, limit / 2) - 1)
