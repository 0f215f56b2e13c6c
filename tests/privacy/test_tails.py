"""The exact tails behind the tight calibration (privacy/tails.py, docs/calibration.md §2)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dphhh.privacy.noise import discrete_laplace
from dphhh.privacy.tails import SAFETY, dlap_sum_tail, dlap_tail, smallest_threshold, smallest_two_sided_bound


def _rational_sum_tail(s: int, r1: Fraction, r2: Fraction, span: int) -> tuple[Fraction, Fraction]:
    """(lower, upper) bounds on P(X1 + X2 >= s) in exact rational arithmetic: the sum over
    |g| <= span of P(X1 = g)·P(X2 >= s − g), and that plus the mass P(|X1| > span) left out."""
    c1, c2 = (1 - r1) / (1 + r1), (1 - r2) / (1 + r2)

    def tail2(k: int) -> Fraction:  # P(X2 >= k)
        return r2**k / (1 + r2) if k >= 1 else 1 - r2 ** (1 - k) / (1 + r2)

    total = sum((c1 * r1 ** abs(g) * tail2(s - g) for g in range(-span, span + 1)), Fraction(0))
    left_out = 2 * r1 ** (span + 1) / (1 + r1)
    assert c2 > 0
    return total, total + left_out


@pytest.mark.parametrize(
    "r1, r2",
    [
        (Fraction(1, 2), Fraction(1, 2)),
        (Fraction(3, 4), Fraction(3, 4)),
        (Fraction(2, 3), Fraction(5, 6)),
        (Fraction(9, 10), Fraction(1, 3)),
    ],
)
@pytest.mark.parametrize("s", [-7, -1, 0, 1, 2, 5, 20, 60])
def test_sum_tail_matches_exact_rational_arithmetic(r1: Fraction, r2: Fraction, s: int) -> None:
    """The closed form is an upper bound on the exact tail and exceeds it by at most 2·SAFETY (relative)."""
    b1, b2 = -1 / math.log(r1), -1 / math.log(r2)
    low, high = _rational_sum_tail(s, r1, r2, span=400)
    got = dlap_sum_tail(s, b1, b2)
    assert got >= float(high) * (1 - 1e-12)  # an upper bound (up to the float rounding of r itself)
    assert got <= float(low) * (1 + 2 * SAFETY) + 1e-300


@pytest.mark.parametrize("b", [0.7, 3.0, 11.0])
def test_single_tail_matches_its_definition(b: float) -> None:
    """P(X >= k) from the pmf summed exactly (float) over a wide range."""
    r = math.exp(-1 / b)
    ks = np.arange(-2000, 2001)
    pmf = (1 - r) / (1 + r) * r ** np.abs(ks)
    for k in (-5, 0, 1, 4, 30):
        assert math.isclose(dlap_tail(k, b), float(pmf[ks >= k].sum()), rel_tol=1e-8)


def test_sum_tail_matches_the_sampler() -> None:
    """Noise distribution: γ + w drawn by the project's sampler has the computed tail.

    2·10^6 draws at b = 8 (the tight fresh scale at ε/h = 0.25); each checked probability p is
    within 6 binomial standard deviations (two-sided, α ≈ 2e-9 per check, 6 checks)."""
    rng = np.random.default_rng(20261201)
    n, b = 2_000_000, 8.0
    total = discrete_laplace(b, n, rng=rng) + discrete_laplace(b, n, rng=rng)
    for s in (0, 1, 10, 30, 60, 90):
        p = dlap_sum_tail(s, b, b)
        observed = float((total >= s).mean())
        assert abs(observed - p) <= 6 * math.sqrt(p * (1 - p) / n) + 1 / n, (s, observed, p)


def test_symmetry_and_monotonicity() -> None:
    """P(S >= s) + P(S >= 1 − s) = 1 (S is symmetric), and the tail decreases in s."""
    for b1, b2 in ((2.0, 2.0), (5.0, 10.0)):
        for s in range(-20, 21):
            assert math.isclose(dlap_sum_tail(s, b1, b2) + dlap_sum_tail(1 - s, b1, b2), 1.0, rel_tol=1e-8)
            assert dlap_sum_tail(s, b1, b2) >= dlap_sum_tail(s + 1, b1, b2)


@pytest.mark.parametrize("b, limit", [(8.0, 1e-7), (2.5, 1e-3), (40.0, 1e-12)])
def test_smallest_threshold_and_bound_are_smallest(b: float, limit: float) -> None:
    """The searches return the smallest integer meeting the limit."""
    t = smallest_threshold(b, b, limit)
    assert dlap_sum_tail(t, b, b) <= limit < dlap_sum_tail(t - 1, b, b)
    B = smallest_two_sided_bound(b, b, limit)
    assert 2 * dlap_sum_tail(B + 1, b, b) <= limit < 2 * dlap_sum_tail(B, b, b)


def test_bad_scales_are_refused() -> None:
    """Non-positive scales and near-equal distinct scales (where the closed form cancels) are refused."""
    with pytest.raises(ValueError, match="tails: b1"):
        dlap_sum_tail(3, 0.0, 1.0)
    with pytest.raises(ValueError, match="too close"):
        dlap_sum_tail(3, 1.0, 1.0 + 1e-9)


@pytest.mark.parametrize("r", [Fraction(1, 2), Fraction(1, 1000), Fraction(1, 10**60)])
@pytest.mark.parametrize("s", [1, 2, 7, 60])
def test_log_tail_at_equal_scales_matches_exact_rational_arithmetic(r: Fraction, s: int) -> None:
    """The log form is the log of an upper bound on the exact tail, within 2·SAFETY; the case r =
    10^-60 at s = 60 is a probability of 10^-3600, far below the smallest float."""
    from dphhh.privacy.tails import log_dlap_sum_tail_equal

    b = -1 / math.log(r)
    low, high = _rational_sum_tail(s, r, r, span=200)
    got = log_dlap_sum_tail_equal(s, b)

    def log_of(x: Fraction) -> float:  # ln of a positive rational, beyond float range
        return math.log(x.numerator) - math.log(x.denominator)

    assert got >= log_of(high) - 1e-9  # an upper bound (up to the rounding of b itself)
    assert got <= log_of(low) + 2 * SAFETY + 1e-9


@pytest.mark.parametrize("b", [0.05, 0.7, 3.0, 40.0])
@pytest.mark.parametrize("limit", [1e-3, 1e-12, 1e-80, 1e-250])
def test_the_log_search_finds_the_float_search_threshold(b: float, limit: float) -> None:
    """Where floats still hold the limit, the search in logs gives the same threshold."""
    from dphhh.privacy.tails import smallest_threshold_log

    assert smallest_threshold_log(b, math.log(limit)) == smallest_threshold(b, b, limit)


@pytest.mark.parametrize("epsilon", [2_840.0, 5_000.0, 1e6, 1e300])
def test_a_huge_epsilon_gets_the_smallest_threshold_its_limit_allows(epsilon: float) -> None:
    """Issue 27 item 6: ε = 5000 over h = 4 levels made e^(ε_ℓ) overflow (OverflowError, exit 70).
    The threshold is now the smallest T with ln P(γ + w >= T) <= ln(δ_ℓ/2) − ε_ℓ, checked on both
    sides of T."""
    from dphhh.privacy.release import ReleaseScales
    from dphhh.privacy.tails import log_dlap_sum_tail_equal

    h, delta = 4, 1e-6
    scales = ReleaseScales.for_budget(epsilon=epsilon, delta=delta, h=h)
    t = int(scales.threshold)
    log_limit = math.log(delta / h / 2) - epsilon / h
    assert log_dlap_sum_tail_equal(t, scales.gamma) <= log_limit
    assert t == 1 or log_dlap_sum_tail_equal(t - 1, scales.gamma) > log_limit
