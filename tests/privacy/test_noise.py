"""Tests for the noise samplers in privacy.noise.

Statistical tests use fixed seeds, so they are deterministic; the significance level ALPHA is
chosen so that, had the seed been picked at random, a correct sampler would fail each
goodness-of-fit test with probability ALPHA (1e-6) only. Every goodness-of-fit, symmetry and
moment test is paired with a power check on samples drawn wrongly — a wrong parameter (scale x 1.1
or 1.3, sigma2 x 1.2 or 2), 5 % of the negative values flipped (the sign tests), a shrunk interval
(uniform01) — that must reject at ALPHA; at these sample sizes the power checks' p-values are far
below 1e-15 (measured 1e-18 to below 1e-300), so they are not fragile.
"""

from __future__ import annotations

import functools
import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dphhh.privacy import noise
from dphhh.privacy.noise import (
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_laplace,
    discrete_laplace_elementwise,
    discrete_laplace_pmf,
    discrete_laplace_variance,
    geometric_failures,
    laplace,
    uniform01,
)
from dphhh.privacy.randomness import SecureRandomSource, SeededRandomSource, as_source

# False-failure probability of each goodness-of-fit / symmetry test for a correct sampler.
ALPHA = 1e-6
N_VECTOR = 200_000  # samples for the vectorised samplers
N_GAUSS = 200_000  # samples for the exact discrete Gaussian (vectorised: ~0.1 s)
N_GAUSS_PYTHON = 30_000  # samples for its Python-integer path (~25 µs each)
MIN_EXPECTED = 10.0  # smallest expected count of any chi-square bin


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


def chisquare_pvalue(
    samples: np.ndarray, lo: int, pmf_values: np.ndarray, lower_tail: float, upper_tail: float
) -> float:
    """Chi-square p-value of integer samples against bins lo..lo+len-1 plus the two tail bins."""
    samples = np.asarray(samples).ravel()
    n = samples.size
    hi = lo + len(pmf_values) - 1
    inside = (samples >= lo) & (samples <= hi)
    observed = [np.count_nonzero(samples < lo)]
    observed += list(np.bincount(samples[inside] - lo, minlength=len(pmf_values)))
    observed.append(np.count_nonzero(samples > hi))
    expected = np.concatenate([[lower_tail], pmf_values, [upper_tail]]) * n
    observed = np.asarray(observed, dtype=np.float64)
    keep = expected > 0  # a tail bin with zero mass (e.g. below 0 for the geometric) is dropped
    assert observed[~keep].sum() == 0
    observed, expected = observed[keep], expected[keep]
    assert expected.min() >= MIN_EXPECTED - 1e-9
    expected *= observed.sum() / expected.sum()  # remove float rounding of the total
    return float(stats.chisquare(observed, expected).pvalue)


def symmetric_chisquare_pvalue(samples: np.ndarray, pmf) -> float:
    """Chi-square p-value of symmetric integer samples against ``pmf`` on a central range.

    The central range -m..m is the widest where every bin and each tail has expected count >=
    MIN_EXPECTED; the two tails each carry (1 - central mass) / 2.
    """
    n = np.asarray(samples).size
    m = 0
    while True:
        nxt = m + 1
        central = pmf(np.arange(-nxt, nxt + 1))
        tail = (1.0 - central.sum()) / 2.0
        if n * central[0] < MIN_EXPECTED or n * tail < MIN_EXPECTED:
            break
        m = nxt
    assert m >= 1
    central = pmf(np.arange(-m, m + 1))
    tail = (1.0 - central.sum()) / 2.0
    return chisquare_pvalue(samples, -m, central, tail, tail)


def geometric_pmf(k: np.ndarray, p: float) -> np.ndarray:
    return p * (1.0 - p) ** np.asarray(k, dtype=np.float64)


def geometric_chisquare_pvalue(samples: np.ndarray, p: float) -> float:
    """Chi-square p-value of geometric samples against P(k) = (1-p)^k p, bins 0..m plus a tail."""
    n = samples.size
    m = 0
    while n * geometric_pmf(m + 1, p) >= MIN_EXPECTED and n * (1.0 - p) ** (m + 2) >= MIN_EXPECTED:
        m += 1
    central = geometric_pmf(np.arange(m + 1), p)
    return chisquare_pvalue(samples, 0, central, 0.0, (1.0 - p) ** (m + 1))


def sign_balance_pvalue(samples: np.ndarray) -> float:
    """Two-sided binomial p-value that positive and negative samples are equally likely."""
    positive = int(np.count_nonzero(samples > 0))
    negative = int(np.count_nonzero(samples < 0))
    return float(stats.binomtest(positive, positive + negative, 0.5).pvalue)


class BitsOnlySource:
    """A RandomSource that fails if randbelow is used (the vectorised samplers use bits only)."""

    secure = False

    def __init__(self, seed: int) -> None:
        self.inner = SeededRandomSource(seed)
        self.words = 0  # words drawn through bits

    def bits(self, n: int) -> np.ndarray:
        self.words += n
        return self.inner.bits(n)

    def randbelow(self, m: int) -> int:
        raise AssertionError("randbelow must not be used by this sampler")


class RandbelowOnlySource:
    """A RandomSource that fails if bits is used (the exact sampler uses randbelow only)."""

    secure = False

    def __init__(self, seed: int) -> None:
        self.inner = SeededRandomSource(seed)

    def bits(self, n: int) -> np.ndarray:
        raise AssertionError("bits must not be used by the exact sampler")

    def randbelow(self, m: int) -> int:
        return self.inner.randbelow(m)


# ----------------------------------------------------------------------------------------------
# uniform01
# ----------------------------------------------------------------------------------------------


def test_uniform01_is_float64_on_the_53_bit_grid_in_unit_interval():
    """uniform01 returns float64 values in [0, 1) that are exact multiples of 2**-53."""
    u = uniform01(SeededRandomSource(1), 10_000)
    assert u.dtype == np.float64 and u.shape == (10_000,)
    assert u.min() >= 0.0 and u.max() < 1.0
    scaled = u * 2.0**53
    assert np.array_equal(scaled, np.floor(scaled))


def test_uniform01_uses_the_top_53_bits_of_the_words():
    """uniform01 maps each 64-bit word w to (w >> 11) * 2**-53."""
    words = SeededRandomSource(7).bits(1000)
    u = uniform01(SeededRandomSource(7), 1000)
    assert np.array_equal(u, (words >> np.uint64(11)).astype(np.float64) / 2.0**53)


def test_uniform01_passes_ks_test_against_uniform():
    """uniform01 samples pass a KS test against Uniform[0, 1) at ALPHA."""
    u = uniform01(np.random.default_rng(11), N_VECTOR)
    assert stats.kstest(u, "uniform").pvalue > ALPHA


def test_uniform01_ks_rejects_a_shrunk_interval():
    """The KS test rejects uniform01 samples squeezed onto [0, 0.99) at ALPHA (power check)."""
    u = uniform01(np.random.default_rng(11), N_VECTOR) * 0.99
    assert stats.kstest(u, "uniform").pvalue < ALPHA


def test_uniform01_rejects_negative_n():
    """uniform01 raises ValueError for a negative count."""
    with pytest.raises(ValueError, match="uniform01: n"):
        uniform01(SeededRandomSource(1), -1)


# ----------------------------------------------------------------------------------------------
# geometric_failures
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.9, 0.3, 0.01])
def test_geometric_failures_mean_matches(p):
    """The sample mean of geometric_failures is within a z-test at ALPHA of (1-p)/p."""
    x = geometric_failures(p, N_VECTOR, rng=np.random.default_rng(21))
    mean, var = (1 - p) / p, (1 - p) / p**2
    z = (x.mean() - mean) / math.sqrt(var / x.size)
    assert abs(z) < stats.norm.isf(ALPHA / 2)


@pytest.mark.parametrize("p", [0.9, 0.3, 0.01])
def test_geometric_failures_passes_chisquare(p):
    """geometric_failures passes a chi-square goodness-of-fit test against (1-p)^k p at ALPHA."""
    x = geometric_failures(p, N_VECTOR, rng=np.random.default_rng(22))
    assert x.dtype == np.int64 and x.min() >= 0
    assert geometric_chisquare_pvalue(x, p) > ALPHA


@pytest.mark.parametrize("p", [0.3, 0.01])
def test_geometric_failures_chisquare_rejects_wrong_p(p):
    """The geometric chi-square test rejects samples drawn with p x 1.1 at ALPHA (power check)."""
    x = geometric_failures(p * 1.1, N_VECTOR, rng=np.random.default_rng(23))
    assert geometric_chisquare_pvalue(x, p) < ALPHA


def test_geometric_failures_p_one_gives_zeros():
    """geometric_failures with p = 1 returns only zeros, as int64."""
    x = geometric_failures(1.0, (4, 5), rng=1)
    assert x.dtype == np.int64 and x.shape == (4, 5) and not x.any()


@pytest.mark.parametrize("p", [0.0, -0.1, 1.5, float("nan"), float("inf"), True, "0.5", None])
def test_geometric_failures_rejects_bad_p(p):
    """geometric_failures raises ValueError naming p for p outside (0, 1]."""
    with pytest.raises(ValueError, match=r"^geometric_failures: p "):
        geometric_failures(p, 10, rng=1)


def test_geometric_failures_rejects_p_that_would_overflow_int64():
    """geometric_failures refuses a p so small that samples could overflow int64."""
    with pytest.raises(ValueError, match="overflow int64"):
        geometric_failures(1e-300, 10, rng=1)


# ----------------------------------------------------------------------------------------------
# discrete_laplace
# ----------------------------------------------------------------------------------------------

SCALES = [0.5, 3.0, 40.0]


@pytest.mark.parametrize("scale", SCALES)
def test_discrete_laplace_passes_chisquare(scale):
    """discrete_laplace passes a chi-square test against its exact pmf at ALPHA."""
    x = discrete_laplace(scale, N_VECTOR, rng=np.random.default_rng(31))
    assert symmetric_chisquare_pvalue(x, lambda k: discrete_laplace_pmf(k, scale)) > ALPHA


@pytest.mark.parametrize("scale", SCALES)
def test_discrete_laplace_chisquare_rejects_wrong_scale(scale):
    """The discrete Laplace chi-square test rejects samples drawn at scale x 1.1 (power check)."""
    x = discrete_laplace(scale * 1.1, N_VECTOR, rng=np.random.default_rng(32))
    assert symmetric_chisquare_pvalue(x, lambda k: discrete_laplace_pmf(k, scale)) < ALPHA


@pytest.mark.parametrize("scale", SCALES)
def test_discrete_laplace_is_symmetric(scale):
    """discrete_laplace gives positive and negative values equally often (binomial test)."""
    x = discrete_laplace(scale, N_VECTOR, rng=np.random.default_rng(33))
    assert sign_balance_pvalue(x) > ALPHA


def _flip_some_negatives(x: np.ndarray, share: float, seed: int) -> np.ndarray:
    """``x`` with a ``share`` of its negative values made positive: a sampler biased to one side."""
    flip = (x < 0) & (np.random.default_rng(seed).random(x.shape) < share)
    return np.where(flip, -x, x)


@pytest.mark.parametrize("scale", SCALES)
def test_discrete_laplace_sign_test_rejects_a_biased_sampler(scale):
    """The sign-balance test rejects discrete Laplace samples with 5 % of their negatives flipped
    at ALPHA (power check)."""
    x = discrete_laplace(scale, N_VECTOR, rng=np.random.default_rng(33))
    assert sign_balance_pvalue(_flip_some_negatives(x, 0.05, 34)) < ALPHA


def test_discrete_laplace_dtype_and_shapes():
    """discrete_laplace returns int64 arrays of the requested int or tuple shape."""
    assert discrete_laplace(2.0, 7, rng=1).shape == (7,)
    x = discrete_laplace(2.0, (3, 4), rng=1)
    assert x.dtype == np.int64 and x.shape == (3, 4)
    assert discrete_laplace(2.0, 0, rng=1).shape == (0,)
    assert discrete_laplace(2.0, (2, 0), rng=1).shape == (2, 0)


def test_discrete_laplace_tiny_scale_gives_zeros():
    """discrete_laplace with a vanishing scale returns zeros: P(K != 0) = 2r/(1 + r) with
    r = exp(-1000) at scale 1e-3 (exactly that, see test_tiny_scale_nonzero_atom_has_its_exact_probability)."""
    assert not discrete_laplace(1e-3, 1000, rng=1).any()
    assert not discrete_laplace(1e-320, 10, rng=1).any()


def test_discrete_laplace_large_scale_has_matching_variance():
    """discrete_laplace at scale 1e6 has variance 2q/(1-q)^2 within 1 percent."""
    scale = 1e6
    x = discrete_laplace(scale, N_VECTOR, rng=np.random.default_rng(34))
    q = math.exp(-1 / scale)
    assert x.var() == pytest.approx(2 * q / (1 - q) ** 2, rel=0.03)


@pytest.mark.parametrize("scale", [0, 0.0, -1.0, float("nan"), float("inf"), -float("inf"), True, "3", None])
def test_discrete_laplace_rejects_bad_scale(scale):
    """discrete_laplace raises a ValueError that names the scale parameter and its value."""
    message = r"^discrete_laplace: scale must be a finite number > 0, got "
    with pytest.raises(ValueError, match=message) as info:
        discrete_laplace(scale, 10, rng=1)
    assert repr(scale) in str(info.value)


@pytest.mark.parametrize("size", [-1, (2, -1), 2.5, "3", True, [2, 3]])
def test_discrete_laplace_rejects_bad_size(size):
    """discrete_laplace rejects a size that is not a non-negative int or tuple of ints."""
    with pytest.raises((ValueError, TypeError), match="^discrete_laplace: size"):
        discrete_laplace(1.0, size, rng=1)


def test_discrete_laplace_pmf_is_normalised():
    """discrete_laplace_pmf sums to 1 over the integers and is symmetric."""
    k = np.arange(-5000, 5001)
    for scale in SCALES:
        pmf = discrete_laplace_pmf(k, scale)
        assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.array_equal(pmf, pmf[::-1])


# ----------------------------------------------------------------------------------------------
# discrete_laplace_elementwise (one scale per element) and discrete_laplace_variance
# ----------------------------------------------------------------------------------------------


def test_discrete_laplace_elementwise_with_a_constant_scale_is_discrete_laplace():
    """With one scale everywhere the elementwise sampler returns exactly discrete_laplace's
    samples for the same seed (same arithmetic, same uniforms), in the shape of ``scales``."""
    for scale in SCALES:
        a = discrete_laplace(scale, (50, 7), rng=np.random.default_rng(35))
        b = discrete_laplace_elementwise(np.full((50, 7), scale), rng=np.random.default_rng(35))
        assert b.dtype == np.int64 and b.shape == (50, 7)
        assert np.array_equal(a, b)


def test_discrete_laplace_elementwise_passes_chisquare_per_column():
    """Columns with scales 0.5, 3 and 40 drawn in one call each pass a chi-square test against
    their own pmf at ALPHA (so the scales are applied element by element, not mixed up)."""
    scales = np.broadcast_to(np.array(SCALES), (N_VECTOR, len(SCALES)))
    x = discrete_laplace_elementwise(scales, rng=np.random.default_rng(36))
    for j, scale in enumerate(SCALES):
        assert symmetric_chisquare_pvalue(x[:, j], lambda k, scale=scale: discrete_laplace_pmf(k, scale)) > ALPHA


@pytest.mark.parametrize("factor", [1.1, 0.5])
def test_discrete_laplace_elementwise_chisquare_rejects_wrong_scales(factor):
    """Power check: columns drawn at scale x 1.1 (and at half the scale, the "scale halved" bug)
    are rejected at ALPHA against the pmf of the nominal scale."""
    scales = np.broadcast_to(np.array(SCALES) * factor, (N_VECTOR, len(SCALES)))
    x = discrete_laplace_elementwise(scales, rng=np.random.default_rng(37))
    for j, scale in enumerate(SCALES):
        assert symmetric_chisquare_pvalue(x[:, j], lambda k, scale=scale: discrete_laplace_pmf(k, scale)) < ALPHA


def test_discrete_laplace_elementwise_is_symmetric_and_matches_variance():
    """Mixed scales in one call: every column is sign-balanced and its sample variance is within a
    z-test at ALPHA of discrete_laplace_variance (fourth moment from the pmf)."""
    scales = np.broadcast_to(np.array([0.7, 2.0, 9.0]), (N_VECTOR, 3))
    x = discrete_laplace_elementwise(scales, rng=np.random.default_rng(38))
    k = np.arange(-4000, 4001).astype(np.float64)
    for j, scale in enumerate([0.7, 2.0, 9.0]):
        assert sign_balance_pvalue(x[:, j]) > ALPHA
        var = discrete_laplace_variance(scale)
        m4 = float((k**4 * discrete_laplace_pmf(k, scale)).sum())
        z = (np.mean(x[:, j].astype(np.float64) ** 2) - var) / math.sqrt((m4 - var**2) / N_VECTOR)
        assert abs(z) < stats.norm.isf(ALPHA / 2)


def test_discrete_laplace_elementwise_variance_test_rejects_wrong_scales():
    """The variance z-test rejects every column drawn at its scale x 1.1, and the sign test every
    column with 5 % of its negatives flipped, at ALPHA (power checks)."""
    scales = np.broadcast_to(np.array([0.7, 2.0, 9.0]), (N_VECTOR, 3))
    x = discrete_laplace_elementwise(scales * 1.1, rng=np.random.default_rng(38))
    k = np.arange(-4000, 4001).astype(np.float64)
    for j, scale in enumerate([0.7, 2.0, 9.0]):
        assert sign_balance_pvalue(_flip_some_negatives(x[:, j], 0.05, 39 + j)) < ALPHA
        var = discrete_laplace_variance(scale)
        m4 = float((k**4 * discrete_laplace_pmf(k, scale)).sum())
        z = (np.mean(x[:, j].astype(np.float64) ** 2) - var) / math.sqrt((m4 - var**2) / N_VECTOR)
        assert abs(z) > stats.norm.isf(ALPHA / 2)


def test_discrete_laplace_elementwise_tiny_scales_give_zeros_and_validation():
    """Elements with a vanishing scale are 0 (P(K != 0) ~ 2 exp(-1000)) next to noisy ones; bad
    scales raise ValueError."""
    x = discrete_laplace_elementwise(np.broadcast_to([1e-3, 50.0, 1e-320], (200, 3)), rng=1)
    assert not x[:, 0].any() and not x[:, 2].any() and x[:, 1].any()
    assert discrete_laplace_elementwise(np.ones((0, 4)), rng=1).shape == (0, 4)
    assert discrete_laplace_elementwise(2.0, rng=1).shape == ()
    for bad in ([1.0, 0.0], [1.0, -2.0], [float("nan")], [float("inf")], [True, False], ["3"]):
        with pytest.raises(ValueError, match=r"^discrete_laplace_elementwise: scales must be finite numbers > 0"):
            discrete_laplace_elementwise(bad, rng=1)
    with pytest.raises(ValueError, match="overflow int64"):
        discrete_laplace_elementwise([1.0, 1e300], rng=1)


def test_discrete_laplace_elementwise_uses_only_bits_and_is_reproducible():
    """The elementwise sampler draws through bits only and the same seed reproduces it."""
    discrete_laplace_elementwise([1.0, 2.0], rng=BitsOnlySource(3))
    a = discrete_laplace_elementwise(np.linspace(0.5, 5, 40), rng=123)
    assert np.array_equal(a, discrete_laplace_elementwise(np.linspace(0.5, 5, 40), rng=np.random.default_rng(123)))
    assert not np.array_equal(a, discrete_laplace_elementwise(np.linspace(0.5, 5, 40), rng=124))


def test_discrete_laplace_variance_formula():
    """discrete_laplace_variance equals Σ k² pmf(k) and 2q/(1−q)², is below 2·scale², and is
    2·scale² − 1/6 to within 1e-6 relative at large scales; arrays keep their shape."""
    k = np.arange(-6000, 6001).astype(np.float64)
    for scale in SCALES:
        q = math.exp(-1 / scale)
        var = discrete_laplace_variance(scale)
        assert isinstance(var, float)
        assert var == pytest.approx(float((k**2 * discrete_laplace_pmf(k, scale)).sum()), rel=1e-10)
        assert var == pytest.approx(2 * q / (1 - q) ** 2, rel=1e-12)
        assert var < 2 * scale**2
    assert discrete_laplace_variance(1e4) == pytest.approx(2e8 - 1 / 6, rel=1e-15)
    assert discrete_laplace_variance(np.array([[1.0, 2.0]])).shape == (1, 2)
    assert discrete_laplace_variance(1e-3) == 0.0  # 2 exp(-1000) underflows double precision
    with pytest.raises(ValueError, match="discrete_laplace_variance: scale must be finite numbers > 0"):
        discrete_laplace_variance(-1.0)


# ----------------------------------------------------------------------------------------------
# The inverse transform's resolution: the exact pmf of the replaced inversion sampler (still
# noise._discrete_laplace_inversion, and the arithmetic of geometric_failures) versus the ideal one
# ----------------------------------------------------------------------------------------------

GRID = 2**53  # uniform01 takes the values m * 2**-53, m = 0 .. 2**53 - 1, each with probability 2**-53


def _geometric_of_grid(m: np.ndarray, scale: float) -> np.ndarray:
    """The geometric that the inversion sampler computes from the uniform m * 2**-53."""
    return noise._geometric_from_uniforms(m.astype(np.float64) * 2.0**-53, -(1.0 / scale))


def sampler_geometric_tail_counts(scale: float) -> tuple[int, np.ndarray]:
    """Exact output law of one geometric of the inversion sampler: the largest value K it can
    return and, for k = 1..K, the number of grid points m with output >= k (so P(G >= k) is that
    count times 2**-53). The output is non-decreasing in m, so each count is a binary search."""
    k_max = int(_geometric_of_grid(np.array([GRID - 1]), scale)[0])
    k = np.arange(1, k_max + 1)
    lo, hi = np.zeros(k.size, np.int64), np.full(k.size, GRID - 1, np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        reached = _geometric_of_grid(mid, scale) >= k
        hi, lo = np.where(reached, mid, hi), np.where(reached, lo, mid + 1)
    return k_max, GRID - lo


def sampler_geometric_total_variation(scale: float) -> tuple[int, float, float]:
    """(K, total-variation distance, largest |P_sampler(G >= k) − e^{−k/scale}|) between the
    sampler's geometric and the ideal P(G = k) = (1 − q) q^k, in 50-digit decimal arithmetic."""
    k_max, counts = sampler_geometric_tail_counts(scale)
    with localcontext() as ctx:
        ctx.prec = 50
        b = Decimal(scale)
        ge = [Decimal(1)] + [Decimal(int(c)) / GRID for c in counts] + [Decimal(0)]
        ideal = [(-Decimal(k) / b).exp() for k in range(k_max + 2)]
        tv = sum(abs((ge[k] - ge[k + 1]) - (ideal[k] - ideal[k + 1])) for k in range(k_max + 1))
        tv += ideal[k_max + 1]  # ideal mass above the sampler's largest value
        worst = max(abs(ge[k] - ideal[k]) for k in range(k_max + 1))
        return k_max, float(tv / 2), float(worst)


@pytest.mark.parametrize("scale", [0.5, 1.0, 10 / 3, 5.0, 40.0])
def test_inversion_sampler_is_the_ideal_law_only_up_to_the_uniform_grid(scale):
    """The exact law of the replaced inverse transform (enumerated over all 2**53 uniforms by
    binary search) has every tail probability within 2 * 2**-53 of q^k, reaches only
    K = floor(scale * 53 ln 2) (about 36.7 * scale), and its total-variation distance to the ideal
    geometric is at most (K + 1) * 2**-52 but not 0 (measured: about 0.2 * K * 2**-53): the defect
    that made discrete_laplace switch to the exact sampler (test_sampler_tail_law_is_exact)."""
    k_max, tv, worst = sampler_geometric_total_variation(scale)
    assert k_max == math.floor(-math.log1p(-(1.0 - 2.0**-53)) * scale)
    assert worst <= 2 * 2.0**-53
    assert tv <= (k_max + 1) * 2.0**-52
    assert tv > 0  # the law is not exactly the ideal one: the bound is needed


# ----------------------------------------------------------------------------------------------
# laplace
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", SCALES)
def test_laplace_passes_ks_test(scale):
    """laplace passes a KS test against the Laplace(0, scale) distribution at ALPHA."""
    x = laplace(scale, N_VECTOR, rng=np.random.default_rng(41))
    assert x.dtype == np.float64
    assert stats.kstest(x, "laplace", args=(0.0, scale)).pvalue > ALPHA


@pytest.mark.parametrize("scale", SCALES)
def test_laplace_ks_rejects_wrong_scale(scale):
    """The Laplace KS test rejects samples drawn at scale x 1.1 at ALPHA (power check)."""
    x = laplace(scale * 1.1, N_VECTOR, rng=np.random.default_rng(42))
    assert stats.kstest(x, "laplace", args=(0.0, scale)).pvalue < ALPHA


def test_laplace_shape_and_validation():
    """laplace honours tuple shapes and rejects a non-positive scale with a named error."""
    assert laplace(1.0, (2, 3), rng=1).shape == (2, 3)
    with pytest.raises(ValueError, match=r"^laplace: scale must be a finite number > 0, got -2.0"):
        laplace(-2.0, 3, rng=1)


# ----------------------------------------------------------------------------------------------
# discrete_gaussian
# ----------------------------------------------------------------------------------------------

SIGMA2S = [Fraction(1, 2), 2, 25]


@pytest.mark.parametrize("sigma2", SIGMA2S)
def test_discrete_gaussian_passes_chisquare(sigma2):
    """discrete_gaussian passes a chi-square test against the exact discrete Gaussian pmf."""
    x = discrete_gaussian(sigma2, N_GAUSS, rng=np.random.default_rng(51))
    assert symmetric_chisquare_pvalue(x, lambda k: discrete_gaussian_pmf(k, sigma2)) > ALPHA


@pytest.mark.parametrize("sigma2", [2, 25])
def test_discrete_gaussian_chisquare_rejects_wrong_sigma2(sigma2):
    """The discrete Gaussian chi-square test rejects samples drawn at sigma2 x 1.2 (power check)."""
    x = discrete_gaussian(Fraction(sigma2) * Fraction(6, 5), N_GAUSS, rng=np.random.default_rng(52))
    assert symmetric_chisquare_pvalue(x, lambda k: discrete_gaussian_pmf(k, sigma2)) < ALPHA


def test_discrete_gaussian_is_symmetric():
    """discrete_gaussian gives positive and negative values equally often (binomial test)."""
    x = discrete_gaussian(25, N_GAUSS, rng=np.random.default_rng(53))
    assert sign_balance_pvalue(x) > ALPHA


def test_discrete_gaussian_sign_test_rejects_a_biased_sampler():
    """The sign-balance test rejects discrete Gaussian samples with 5 % of their negatives flipped
    at ALPHA (power check)."""
    x = discrete_gaussian(25, N_GAUSS, rng=np.random.default_rng(53))
    assert sign_balance_pvalue(_flip_some_negatives(x, 0.05, 54)) < ALPHA


def test_discrete_gaussian_dtype_and_shapes():
    """discrete_gaussian returns int64 arrays of the requested int or tuple shape."""
    x = discrete_gaussian(4, (3, 5), rng=1)
    assert x.dtype == np.int64 and x.shape == (3, 5)
    assert discrete_gaussian(4, 0, rng=1).shape == (0,)
    assert discrete_gaussian(4, 6, rng=1).shape == (6,)


def test_discrete_gaussian_draws_words_when_its_exponents_fit_int64():
    """With 2 n d t**2 < 2**62 (sigma2 = n/d) the sampler runs on 64-bit words only."""
    source = BitsOnlySource(5)
    x = discrete_gaussian(10, 200, rng=source)
    assert x.shape == (200,) and source.words > 0


# sigma2 = 25 + 2**-70: its exact fraction needs 2 n d t**2 >= 2**62, so the Python sampler draws it
WIDE_SIGMA2 = Fraction(25) + Fraction(1, 2**70)
# sigma2 = (2**29 + 1) / 2**25 (about 16): d t = 5 * 2**25, so a candidate with |y| > 16 has an
# exponent numerator (|y| d t - n)**2 beyond int64 and is decided in Python integers (~6 % of them)
TALL_SIGMA2 = Fraction(2**29 + 1, 2**25)


def test_discrete_gaussian_falls_back_to_python_integers_for_a_wide_fraction():
    """A sigma2 whose exponents leave int64 is drawn by the Python sampler (randbelow only)."""
    x = discrete_gaussian(WIDE_SIGMA2, 200, rng=RandbelowOnlySource(5))
    assert x.shape == (200,)


def test_discrete_gaussian_python_path_passes_chisquare():
    """The Python-integer sampler (a wide sigma2) passes the chi-square test against the pmf."""
    x = discrete_gaussian(WIDE_SIGMA2, N_GAUSS_PYTHON, rng=np.random.default_rng(56))
    assert symmetric_chisquare_pvalue(x, lambda k: discrete_gaussian_pmf(k, WIDE_SIGMA2)) > ALPHA


class _CountingSource:
    """A seeded source that counts its randbelow calls."""

    secure = False

    def __init__(self, seed: int) -> None:
        self.inner = SeededRandomSource(seed)
        self.randbelow_calls = 0

    def bits(self, n: int) -> np.ndarray:
        return self.inner.bits(n)

    def randbelow(self, m: int) -> int:
        self.randbelow_calls += 1
        return self.inner.randbelow(m)


def test_discrete_gaussian_with_candidates_beyond_int64_passes_chisquare():
    """Candidates whose acceptance exponent leaves int64 are decided exactly in Python integers:
    the path is taken (randbelow is called) and the samples pass the chi-square test; with those
    candidates always accepted (a broken variant) the same test rejects."""
    source = _CountingSource(57)
    x = discrete_gaussian(TALL_SIGMA2, N_GAUSS, rng=source)
    assert source.randbelow_calls > 1000
    assert symmetric_chisquare_pvalue(x, lambda k: discrete_gaussian_pmf(k, TALL_SIGMA2)) > ALPHA
    broken = noise._make_bernoulli_exp
    try:
        noise._make_bernoulli_exp = lambda randbelow: lambda num, den: True
        y = discrete_gaussian(TALL_SIGMA2, N_GAUSS, rng=np.random.default_rng(57))
    finally:
        noise._make_bernoulli_exp = broken
    assert symmetric_chisquare_pvalue(y, lambda k: discrete_gaussian_pmf(k, TALL_SIGMA2)) < ALPHA


@pytest.mark.parametrize("a, b", [(0, 7), (3, 7), (7, 7), (5, 2), (23, 10), (40, 9), (2, 1)])
def test_bernoulli_exp_ratio_has_the_exact_rate(a, b):
    """_bernoulli_exp_ratio's success rate is exp(-a/b) (two-sided binomial test at ALPHA), for
    exponents below, at and above 1; the rate without the floor(a/b) factors exp(-1) is rejected
    wherever a >= b (power check)."""
    n = N_VECTOR
    hits = int(noise._bernoulli_exp_ratio(np.full(n, a, dtype=np.int64), b, SeededRandomSource(58 + a)).sum())
    assert stats.binomtest(hits, n, math.exp(-a / b)).pvalue > ALPHA
    if a >= b:
        assert stats.binomtest(hits, n, math.exp(-(a % b) / b)).pvalue < ALPHA


def test_discrete_gaussian_float_and_fraction_sigma2_agree():
    """A float sigma2 is converted to the short fraction it denotes (2.5 -> 5/2, 0.1 -> 1/10)."""
    pairs = [(2.5, Fraction(5, 2)), (0.1, Fraction(1, 10)), (25.0, 25), (1 / 3, Fraction(1, 3))]
    for as_float, as_fraction in pairs:
        a = discrete_gaussian(as_float, 500, rng=np.random.default_rng(54))
        b = discrete_gaussian(as_fraction, 500, rng=np.random.default_rng(54))
        assert np.array_equal(a, b)


def test_discrete_gaussian_tiny_and_large_sigma2():
    """discrete_gaussian handles a tiny float sigma2 (all zeros) and a large one (var ~ sigma2)."""
    assert not discrete_gaussian(1e-9, 20, rng=1).any()
    x = discrete_gaussian(10**8, 4000, rng=np.random.default_rng(55))
    assert x.var() == pytest.approx(1e8, rel=0.1)


@pytest.mark.parametrize("sigma2", [0, -1, 0.0, Fraction(-1, 2), float("nan"), float("inf"), True, "2", None])
def test_discrete_gaussian_rejects_bad_sigma2(sigma2):
    """discrete_gaussian raises a ValueError that names sigma2 and its value."""
    message = r"^discrete_gaussian: sigma2 must be a finite number > 0, got "
    with pytest.raises(ValueError, match=message) as info:
        discrete_gaussian(sigma2, 10, rng=1)
    assert repr(sigma2) in str(info.value)


def test_discrete_gaussian_pmf_is_normalised():
    """discrete_gaussian_pmf sums to 1 over the integers and is symmetric."""
    k = np.arange(-2000, 2001)
    for sigma2 in SIGMA2S:
        pmf = discrete_gaussian_pmf(k, sigma2)
        assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.array_equal(pmf, pmf[::-1])


# ----------------------------------------------------------------------------------------------
# Randomness sources
# ----------------------------------------------------------------------------------------------


def test_vectorised_samplers_use_only_bits():
    """The vectorised samplers draw all their randomness through bits, never randbelow (which
    raises here): each draws words, and its samples equal those of the same seed's full source."""
    for draw in (
        lambda rng: uniform01(rng, 5),
        lambda rng: geometric_failures(0.5, 5, rng=rng),
        lambda rng: discrete_laplace(2.0, 5, rng=rng),
        lambda rng: laplace(2.0, 5, rng=rng),
    ):
        src = BitsOnlySource(3)
        got = draw(src)
        assert src.words > 0
        assert np.asarray(got).shape == (5,)
        assert np.array_equal(got, draw(SeededRandomSource(3)))


def test_secure_source_bits_shape_and_dtype():
    """SecureRandomSource.bits returns n uint64 words (and an empty array for n = 0)."""
    src = SecureRandomSource()
    assert src.secure is True
    words = src.bits(16)
    assert words.dtype == np.uint64 and words.shape == (16,)
    assert src.bits(0).shape == (0,)
    # 16 all-zero words would happen with probability 2**-1024.
    assert words.any()


def test_secure_source_randbelow_range():
    """SecureRandomSource.randbelow stays in [0, m), covers a small range and handles m = 2**200."""
    src = SecureRandomSource()
    assert src.randbelow(1) == 0
    draws = {src.randbelow(7) for _ in range(1000)}
    assert draws == set(range(7))  # misses a value with probability < 7 * (6/7)**1000
    huge = [src.randbelow(2**200) for _ in range(64)]
    assert all(0 <= v < 2**200 for v in huge)
    assert max(v.bit_length() for v in huge) > 64  # fails with probability 2**-(136 * 64)


def test_secure_source_is_used_when_rng_is_none(monkeypatch):
    """With rng=None every sampler draws from the SecureRandomSource."""
    assert isinstance(as_source(None), SecureRandomSource)
    calls = {"bits": 0, "randbelow": 0}
    original_bits, original_randbelow = SecureRandomSource.bits, SecureRandomSource.randbelow

    def counting_bits(self, n):
        calls["bits"] += 1
        return original_bits(self, n)

    def counting_randbelow(self, m):
        calls["randbelow"] += 1
        return original_randbelow(self, m)

    monkeypatch.setattr(SecureRandomSource, "bits", counting_bits)
    monkeypatch.setattr(SecureRandomSource, "randbelow", counting_randbelow)
    for sampler in (discrete_laplace, laplace):
        before = calls["bits"]
        assert sampler(3.0, 10).shape == (10,)
        assert calls["bits"] > before
    assert geometric_failures(0.5, 10).shape == (10,)
    before = calls["bits"]
    assert discrete_gaussian(9, 10).shape == (10,)
    assert calls["bits"] > before
    assert discrete_gaussian(WIDE_SIGMA2, 10).shape == (10,)  # the Python-integer path
    assert calls["randbelow"] > 0


def test_secure_source_default_samples_look_right():
    """Secure (unseeded) discrete Laplace and discrete Gaussian samples pass a chi-square test."""
    x = discrete_laplace(3.0, 50_000)
    assert symmetric_chisquare_pvalue(x, lambda k: discrete_laplace_pmf(k, 3.0)) > ALPHA
    y = discrete_gaussian(4, 5_000)
    assert symmetric_chisquare_pvalue(y, lambda k: discrete_gaussian_pmf(k, 4)) > ALPHA


def test_secure_source_check_rejects_wrong_parameters():
    """The same chi-square tests on secure (unseeded) samples drawn at scale x 1.3 and sigma2 x 2
    reject at ALPHA (power check). Unseeded, so the margin is wide: the p-values underflow to 0
    (below 1e-300) in every trial run while writing this, so a p-value above ALPHA would need the
    statistic to be off by dozens of standard deviations."""
    x = discrete_laplace(3.0 * 1.3, 50_000)
    assert symmetric_chisquare_pvalue(x, lambda k: discrete_laplace_pmf(k, 3.0)) < ALPHA
    y = discrete_gaussian(8, 5_000)
    assert symmetric_chisquare_pvalue(y, lambda k: discrete_gaussian_pmf(k, 4)) < ALPHA


def test_seeded_source_is_reproducible():
    """The same seed (int or Generator) reproduces each sampler's output; another seed does not."""
    for sample in (
        lambda rng: uniform01(as_source(rng), 50),
        lambda rng: geometric_failures(0.2, 50, rng=rng),
        lambda rng: discrete_laplace(5.0, 50, rng=rng),
        lambda rng: laplace(5.0, 50, rng=rng),
        lambda rng: discrete_gaussian(Fraction(7, 3), 50, rng=rng),
    ):
        a = sample(123)
        b = sample(np.random.default_rng(123))
        c = sample(SeededRandomSource(123))
        assert np.array_equal(a, b) and np.array_equal(a, c)
        assert not np.array_equal(a, sample(124))


def test_seeded_source_randbelow_huge_m():
    """SeededRandomSource.randbelow handles m = 2**200 reproducibly and in range."""
    a = [SeededRandomSource(9).randbelow(2**200) for _ in range(3)]
    src = SeededRandomSource(9)
    b = [src.randbelow(2**200) for _ in range(20)]
    assert a[0] == b[0]
    assert all(0 <= v < 2**200 for v in b)
    assert max(v.bit_length() for v in b) > 64


def test_as_source_rejects_unknown_rng():
    """The samplers reject an rng that is not None, a Generator, an int seed or a RandomSource."""
    with pytest.raises(TypeError, match="rng"):
        discrete_laplace(1.0, 3, rng="seed")
    assert noise.as_source is as_source


# ----------------------------------------------------------------------------------------------
# The exact discrete Laplace sampler: its law is exactly DLap(b), b = Fraction(scale)
# ----------------------------------------------------------------------------------------------
#
# discrete_laplace returns G1 - G2 for two independent geometrics, each G = Q * 2**m + sum_i
# D_i * 2**s_i assembled from parts (noise._plan(scale).parts) that are each inverted from one
# uniform u = 0.w1 w2 ... of 64-bit words: part >= v iff u < F(v) = P(part >= v). The tests
# below check, independently of the module's integer arithmetic (Python's decimal module, whose
# exp is correctly rounded, at 100 digits): every threshold floor(2**64 F(v)); through the public
# function, driven word by word by a scripted source, that P(part >= v) matches F(v) to 128 bits
# (first word and tie-breaking second word) and that P(G >= k) matches exp(-k/b) to 2**-120 even
# far in the tail, where the old inversion sampler gives probability 0; and that the words which
# tie a threshold (and the deep tail after u < 2**-64) are resolved by the exact binary expansion.

MAX_WORD = 2**64 - 1
EXACT_SCALES = [10.0, 1e4, 1e6]


class ScriptedSource:
    """A RandomSource returning the scripted 64-bit words, then ``fill`` forever (no randomness)."""

    secure = False

    def __init__(self, words, fill: int = MAX_WORD) -> None:
        self.words, self.fill, self.used = list(words), fill, 0

    def bits(self, n: int) -> np.ndarray:
        out = [self.words.pop(0) if self.words else self.fill for _ in range(n)]
        self.used += n
        return np.array(out, dtype=np.uint64)

    def randbelow(self, m: int) -> int:
        raise AssertionError("randbelow must not be used by this sampler")


def _dec_exp_neg(num: int, den: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 100
        return (-(Decimal(num) / Decimal(den))).exp()


def reference_tail(part, v: int) -> Decimal:
    """F(v) = P(part >= v) of a noise._Inversion, in 100-digit decimal arithmetic."""
    if part.size is None:
        return _dec_exp_neg(v * part.num, part.den)
    with localcontext() as ctx:
        ctx.prec = 100
        e, a = _dec_exp_neg(v * part.num, part.den), _dec_exp_neg(part.size * part.num, part.den)
        return (e - a) / (1 - a)


def dec_floor_scaled(value: Decimal, bits: int) -> int:
    """floor(2**bits * value), asserting that 100 digits decide it."""
    with localcontext() as ctx:
        ctx.prec = 100
        scaled = value * (Decimal(2) ** bits)
        floor = int(scaled.to_integral_value(rounding="ROUND_FLOOR"))
        assert Decimal(1) / 10**40 < scaled - floor < 1 - Decimal(1) / 10**40
        return floor


def dlap_tail_reference(scale: float, k: int) -> Fraction:
    """exp(-k / Fraction(scale)) = P(G >= k) of the ideal geometric, as a 100-digit Fraction."""
    b = Fraction(scale)
    return Fraction(_dec_exp_neg(k * b.denominator, b.numerator))


def test_exp_neg_bounds_bracket_the_exponential():
    """noise._exp_neg_bounds(num, den, prec) brackets 2**prec * exp(-num/den) within 3 units
    (checked in 100-digit decimal arithmetic), including huge and tiny exponents."""
    rng = np.random.default_rng(71)
    cases = [(1, 1), (0, 5), (1, 10**9), (10**9, 1), (7, 3), (2**80 + 1, 2**79), (3, 2**60), (1000, 1)]
    cases += [(int(a), int(b)) for a, b in rng.integers(1, 10**6, size=(40, 2))]
    for num, den in cases:
        for prec in (64, 128, 200):
            lo, hi = noise._exp_neg_bounds(num, den, prec)
            with localcontext() as ctx:
                ctx.prec = 100
                value = _dec_exp_neg(num, den) * Decimal(2) ** prec
            assert lo <= value <= hi, (num, den, prec)
            if value >= 1:
                assert hi - lo <= 3, (num, den, prec)


@pytest.mark.parametrize("scale", EXACT_SCALES + [0.5, 1e9])
def test_sampler_thresholds_are_the_exact_floors(scale):
    """Every threshold of every part equals floor(2**64 F(v)) (decimal reference), the parts are
    the digit split of the geometric at b = Fraction(scale), and no threshold is 2**64 - 1 (the
    neutral word of the probes below)."""
    plan = noise._plan(scale)
    b = Fraction(scale)
    (q, m), *chunks = plan.parts
    assert (q.num, q.den, q.size) == (b.denominator << m, b.numerator, None)
    assert sum(2 ** int(np.log2(c.size)) for c, _ in chunks) == sum(c.size for c, _ in chunks)
    assert [s for _, s in chunks] == sorted(s for _, s in chunks)
    assert sum(int(np.log2(c.size)) for c, _ in chunks) == m  # the chunks cover bits 0 .. m - 1
    for part, shift in plan.parts:
        if part.size is not None:
            assert (part.num, part.den) == (b.denominator << shift, b.numerator)
        thresholds = [int(t) for t in part.asc[::-1]]  # T_1, T_2, ...
        assert thresholds == [dec_floor_scaled(reference_tail(part, v), 64) for v in range(1, len(thresholds) + 1)]
        assert MAX_WORD not in thresholds
        if part.size is None:  # the table stops exactly where F(v) drops below 2**-64
            assert (
                reference_tail(part, len(thresholds) + 1) < Decimal(2) ** -64 <= reference_tail(part, len(thresholds))
            )
        else:
            assert len(thresholds) == part.size - 1


def _probe_part(scale: float, row: int, words: list[int], fill: int = MAX_WORD) -> int:
    """The value of part ``row`` of G1 when its first word and the words that refine it are
    ``words`` (then ``fill``), every other part and G2 getting the neutral word 2**64 - 1 (value 0)."""
    plan = noise._plan(scale)
    script = [MAX_WORD] * (2 * len(plan.parts))
    script[2 * row] = words[0]  # bits(2 n parts) is reshaped to (parts, 2 n): row r = [G1, G2]
    out = int(discrete_laplace(scale, 1, rng=ScriptedSource(script + list(words[1:]), fill=fill))[0])
    shift = plan.parts[row][1]
    assert out >= 0 and out % (1 << shift) == 0
    return out >> shift


def _smallest_word_below(predicate_false) -> int:
    """Smallest w in [0, 2**64] with predicate_false(w) (monotone; w = 2**64 counts as true)."""
    lo, hi = 0, 2**64
    while lo < hi:
        mid = (lo + hi) // 2
        if predicate_false(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


@functools.cache
def exact_part_tail(scale: float, row: int, v: int) -> tuple[int, int | None]:
    """The sampler's own P(part >= v), read off the public function word by word: ``(N1, N2)``
    with N1 = #{first words giving part >= v} and, at the first word N1 (a tie), N2 = #{second
    words giving part >= v}; so P(part >= v) lies in [N1 + N2 / 2**64, N1 + (N2 + 1) / 2**64] / 2**64
    (N2 None: the word N1 is no tie and P(part >= v) = N1 / 2**64 exactly)."""
    n1 = _smallest_word_below(lambda w: w == 2**64 or _probe_part(scale, row, [w]) < v)
    # Is n1 a tie? (u just above n1 / 2**64; after a zero word, u just above 2**-128.)
    if n1 == 2**64 or _probe_part(scale, row, [n1] if n1 else [0, 1], fill=0) < v:
        return n1, None
    n2 = _smallest_word_below(lambda w: w == 2**64 or _probe_part(scale, row, [n1, w]) < v)
    return n1, n2


def _part_tail_interval(scale: float, row: int, v: int) -> tuple[Fraction, Fraction]:
    part = noise._plan(scale).parts[row][0]
    if v <= 0:
        return Fraction(1), Fraction(1)
    if part.size is not None and v >= part.size:
        return Fraction(0), Fraction(0)
    n1, n2 = exact_part_tail(scale, row, v)
    if n2 is None:
        return Fraction(n1, 2**64), Fraction(n1, 2**64)
    return Fraction(n1 * 2**64 + n2, 2**128), Fraction(n1 * 2**64 + n2 + 1, 2**128)


def _mix(p_ge: tuple[Fraction, Fraction], p_gt: tuple[Fraction, Fraction], rest: tuple[Fraction, Fraction]):
    """Bounds on P(X > x) + P(X = x) * R = R * P(X >= x) + (1 - R) * P(X > x) over the corners."""
    corners = [r * a + (1 - r) * c for a in p_ge for c in p_gt for r in rest]
    return min(corners), max(corners)


def exact_sampler_tail(scale: float, k: int) -> tuple[Fraction, Fraction]:
    """Bounds (2**-127 apart) on the exact P(G >= k) of the new sampler's geometric, composed
    from its parts' exact laws: G >= k iff Q > q or (Q = q and the digits D_i, read from the top,
    are >= those of k mod 2**m) -- the parts are independent (separate words)."""
    parts = noise._plan(scale).parts
    m = parts[0][1]
    rest = (Fraction(1), Fraction(1))  # P(no digits >= 0)
    for row in range(1, len(parts)):  # lowest chunk first, so each step adds a higher digit
        part, shift = parts[row]
        digit = (k >> shift) % part.size
        rest = _mix(_part_tail_interval(scale, row, digit), _part_tail_interval(scale, row, digit + 1), rest)
    q = k >> m
    return _mix(_part_tail_interval(scale, 0, q), _part_tail_interval(scale, 0, q + 1), rest)


def old_sampler_tail(scale: float, k: int) -> tuple[Fraction, Fraction]:
    """The exact P(G >= k) of the replaced inversion sampler's geometric: #{words w giving
    G >= k} / 2**64 (its G is non-decreasing in w; the word 0 gives the other geometric 0)."""

    def geometric(w: int) -> int:
        return int(noise._discrete_laplace_inversion(scale, 1, ScriptedSource([w, 0]))[0])

    first = _smallest_word_below(lambda w: w == 2**64 or geometric(w) >= k)
    p = Fraction(2**64 - first, 2**64)
    return p, p


TAIL_LAWS = {"exact": exact_sampler_tail, "old_inversion": old_sampler_tail}


def _tail_points(scale: float) -> list[int]:
    """1, 2, about b, 10 b, 40 b and 50 b (plus 77 so the lower digits are not all zero); the
    last two lie beyond the old sampler's largest value (about 36.7 b)."""
    return [1, 2, int(scale) + 77, int(10 * scale) + 77, int(40 * scale) + 77, int(50 * scale) + 77]


@pytest.mark.parametrize("scale", EXACT_SCALES)
@pytest.mark.parametrize(
    "sampler",
    [
        "exact",
        pytest.param(
            "old_inversion",
            marks=pytest.mark.xfail(
                strict=True, raises=AssertionError, reason="negative control: the old inversion sampler is not exact"
            ),
        ),
    ],
)
def test_sampler_tail_law_is_exact(sampler, scale):
    """The sampler's exact P(G >= k), computed from its own decisions (every word value counted
    by binary search through the public function), contains exp(-k/b) in an interval of width
    <= 2**-120, from k = 1 to k = 50 b (P ~ 2e-22). The same test run on the old inversion
    sampler fails (strict xfail): its tail probabilities are multiples of 2**-64 off by up to
    ~1e-16 and exactly 0 beyond ~36.7 b."""
    for k in _tail_points(scale):
        lo, hi = TAIL_LAWS[sampler](scale, k)
        ref = dlap_tail_reference(scale, k)
        slack = ref / 10**90  # the reference's own rounding
        assert lo - slack <= ref <= hi + slack, (k, float(lo), float(ref))
        assert hi - lo <= Fraction(1, 2**120), k


def test_old_inversion_gives_no_mass_to_the_far_tail():
    """Negative control, explicitly: at b = 1e6 the old sampler never returns G >= 40 b (its
    largest value is about 36.7 b), where the exact law has mass exp(-40) ~ 4e-18 (and the
    total variation of a draw is ~5e-16 * b > 1e-10); the new sampler gives that mass."""
    scale, k = 1e6, 40_000_000
    assert old_sampler_tail(scale, k) == (0, 0)
    lo, hi = exact_sampler_tail(scale, k)
    assert lo <= dlap_tail_reference(scale, k) <= hi and lo > Fraction(4, 10**18)


def test_tied_words_follow_the_binary_expansion_to_the_third_word():
    """A first word equal to T_v and a second word equal to the next 64 bits of F(v) still tie:
    the third word decides, as the 192-bit expansion of F(v) says (b = 10, v = 3)."""
    scale, v = 10.0, 3
    part = noise._plan(scale).parts[0][0]
    digits = dec_floor_scaled(reference_tail(part, v), 192)
    w1, w2, w3 = digits >> 128, (digits >> 64) % 2**64, digits % 2**64
    assert _probe_part(scale, 0, [w1, w2, w3 - 1]) >= v  # u < F(v)
    assert _probe_part(scale, 0, [w1, w2, w3 + 1]) < v  # u > F(v)
    assert _probe_part(scale, 0, [w1, w2 - 1]) >= v and _probe_part(scale, 0, [w1, w2 + 1]) < v


def test_deep_tail_after_a_zero_word_is_exact():
    """A first word 0 (u < 2**-64: G beyond the table) is refined: with u in [w2, w2 + 1) * 2**-128
    the geometric is max{g : u < exp(-g/b)} = ceil(-b ln u) - 1, at b = 10 and 1e6."""
    for scale in (10.0, 1e6):
        for w2 in (1, 12345, 2**63, MAX_WORD):
            got = int(
                discrete_laplace(
                    scale, 1, rng=ScriptedSource([0] + [MAX_WORD] * (2 * len(noise._plan(scale).parts) - 1) + [w2])
                )[0]
            )
            with localcontext() as ctx:
                ctx.prec = 60
                lo = -Decimal(scale) * ((Decimal(w2 + 1) / Decimal(2) ** 128).ln())  # u at the top
                hi = -Decimal(scale) * ((Decimal(w2) / Decimal(2) ** 128).ln())
            q_shift = noise._plan(scale).parts[0][1]
            assert got % (1 << q_shift) == 0  # only the geometric part Q was moved
            # G >= g iff g < -b ln u: the value lies between the ranks of the two ends of u's interval.
            assert math.ceil(lo) - 1 - (1 << q_shift) <= got <= math.ceil(hi) - 1


def test_tiny_scale_nonzero_atom_has_its_exact_probability():
    """At b = 1e-3, P(G1 >= 1) = exp(-1000) ~ 2**-1442.7: the sampler returns 1 exactly when
    u < exp(-1000), u being the 23 words after a zero first word (scripted just below and just
    above the 23-word expansion of exp(-1000))."""
    scale = 1e-3
    b = Fraction(scale)
    with localcontext() as ctx:
        ctx.prec = 600
        digits = int(
            ((-(Decimal(b.denominator) / Decimal(b.numerator))).exp() * Decimal(2) ** (64 * 24)).to_integral_value(
                "ROUND_FLOOR"
            )
        )
    words = [(digits >> (64 * (23 - i))) % 2**64 for i in range(24)]  # u's first 24 words at exp(-1000)
    assert words[:22] == [0] * 22 and words[22] and 0 < words[23] < MAX_WORD
    below = words[1:-1] + [words[-1] - 1]
    assert int(discrete_laplace(scale, 1, rng=ScriptedSource([0, MAX_WORD] + below, fill=0))[0]) == 1
    above = words[1:-1] + [words[-1] + 1]
    assert int(discrete_laplace(scale, 1, rng=ScriptedSource([0, MAX_WORD] + above, fill=MAX_WORD))[0]) == 0
    # and the plain draw is 0 without any tie (the probability of a tie is 2**-64 per geometric)
    assert not discrete_laplace(scale, 10_000, rng=np.random.default_rng(72)).any()


def test_sample_outside_int64_raises_instead_of_wrapping():
    """At b = 1.2e17 a geometric from u ~ 2**-128 is about 88.7 b > 2**63: OverflowError, not a
    wrapped value; the limit for the scale is unchanged (ValueError 'overflow int64' above ~1.25e17)."""
    scale = 1.2e17
    parts = len(noise._plan(scale).parts)
    with pytest.raises(OverflowError, match="outside the int64 range"):
        discrete_laplace(scale, 1, rng=ScriptedSource([0] + [MAX_WORD] * (2 * parts - 1) + [1]))
    assert discrete_laplace(1.25e17, 3, rng=1).shape == (3,)
    with pytest.raises(ValueError, match="overflow int64"):
        discrete_laplace(1.3e17, 3, rng=1)


# Per-element path of discrete_laplace_elementwise (vectorised Canonne-Kamath-Steinke Algorithm 2).


def test_uniform_below_and_bernoulli_inverse_are_exact_maps_of_words():
    """_uniform_below(n) is the top bitlen(n - 1) bits of a word, redrawn while >= n (so each
    value has exactly 2**(64 - bitlen) words); _bernoulli_inverse(k) is t < floor(2**62 / k) for
    the top 62 bits t, redrawn at t >= k floor(2**62 / k)."""
    limits = np.array([5], dtype=np.int64)
    shifts = np.array([61], dtype=np.uint64)
    src = ScriptedSource([7 << 61, 5 << 61, (4 << 61) + 12345])  # 7, 5 rejected, then 4
    assert noise._uniform_below(limits, shifts, src).tolist() == [4] and src.used == 3
    q = 2**62 // 3
    src = ScriptedSource([(3 * q) << 2, ((q - 1) << 2) | 3, q << 2])
    assert noise._bernoulli_inverse(3, 1, src).tolist() == [True] and src.used == 2
    assert noise._bernoulli_inverse(3, 1, ScriptedSource([q << 2])).tolist() == [False]


def test_cks_bernoulli_exp_law_by_exhaustive_enumeration(monkeypatch):
    """_bernoulli_exp_fraction(u, n) returns True with probability exactly exp(-u/n): its code is
    run on every outcome path of its primitives (uniforms on [0, n) grouped by the only thing it
    uses, x < u, and Bernoulli(1/k)), each path weighted by its exact rational probability; the
    paths deeper than 80 steps carry < 1e-30 of mass, and exp(-u/n) lies within that of the sum."""

    class Truncated(Exception):
        pass

    for n in (1, 2, 3, 7, 10):
        for u in range(n):
            true_mass, explored = Fraction(0), Fraction(0)
            stack: list[list[int]] = [[]]
            while stack:
                prefix = stack.pop()
                choices: list[tuple[int, list[Fraction]]] = []

                def choose(weights, choices=choices, prefix=prefix):
                    i = len(choices)
                    if i >= 80:
                        raise Truncated
                    pick = prefix[i] if i < len(prefix) else 0
                    choices.append((pick, weights))
                    return pick

                def fake_uniform(limits, shifts, source, u=u, n=n, choose=choose):
                    lt = Fraction(u, n)
                    pick = choose([lt, 1 - lt])  # 0: some x < u, 1: some x >= u
                    return np.array([0 if pick == 0 else u], dtype=np.int64)

                def fake_inverse(k, count, source, choose=choose):
                    return np.array([choose([Fraction(1, k), 1 - Fraction(1, k)]) == 0])

                monkeypatch.setattr(noise, "_uniform_below", fake_uniform)
                monkeypatch.setattr(noise, "_bernoulli_inverse", fake_inverse)
                try:
                    result: bool | None = bool(
                        noise._bernoulli_exp_fraction(
                            np.array([u]), np.array([n]), np.array([0], dtype=np.uint64), None
                        )[0]
                    )
                except Truncated:
                    result = None  # too deep: its mass stays unexplored
                for i in range(len(prefix), len(choices)):  # siblings of the new choices
                    for alt in range(1, len(choices[i][1])):
                        if choices[i][1][alt]:
                            stack.append([c for c, _ in choices[:i]] + [alt])
                if result is not None:
                    weight = math.prod((w[c] for c, w in choices), start=Fraction(1))
                    explored += weight
                    true_mass += weight if result else 0
            monkeypatch.undo()
            missing = 1 - explored
            assert missing < Fraction(1, 10**30)
            ref = Fraction(_dec_exp_neg(u, n))
            assert true_mass - Fraction(1, 10**90) <= ref <= true_mass + missing + Fraction(1, 10**90), (u, n)


def test_cks_geometric_handles_values_beyond_int64_arithmetic():
    """When n V would overflow int64 (here V = 88 from a zero word and u ~ 2**-128, n ~ 2**56),
    the geometric is computed in Python integers: G = floor((U + n V) / 2**j)."""
    n = 2**56 + 1
    g, fixes = noise._geometric_cks(np.array([n]), np.array([0]), ScriptedSource([0, 0, 0, 1]))
    assert int(g[0]) + fixes.get(0, 0) == 88 * n
    g, fixes = noise._geometric_cks(np.array([n]), np.array([3]), ScriptedSource([0, 0, 0, 1]))
    assert int(g[0]) + fixes.get(0, 0) == (88 * n) >> 3


# Distribution tests at the three scales: chi-square over ~100 equal-probability bins of the exact
# CDF (P(K > k) = r**(k + 1) / (1 + r) for k >= 0, symmetric), fixed seeds, ALPHA = 1e-6 (the
# false-failure probability had the seed been random); the power checks (scale b/2 and 2b) reject
# with p-values far below 1e-100 at these sizes.

N_EXACT = 200_000
EQUAL_BINS = 100


def dlap_cdf(k: np.ndarray, scale: float) -> np.ndarray:
    """P(K <= k) for DLap(scale) (float; enough for binning)."""
    k = np.asarray(k, dtype=np.float64)
    r = math.exp(-1.0 / scale)
    lower = np.exp(np.minimum(k, 0) / scale) / (1 + r)  # r**(-k) / (1 + r), k < 0
    upper = 1 - np.exp(-(np.maximum(k, 0) + 1) / scale) / (1 + r)
    return np.where(k < 0, lower, upper)


def equal_bin_edges(scale: float) -> np.ndarray:
    """Upper bin edges k (bins (previous edge, k], plus the two open ends) of about equal
    probability under DLap(scale): the smallest k with CDF(k) >= j / EQUAL_BINS, by a vectorised
    binary search, then merging any bin below a fifth of the nominal probability into the next."""
    targets = np.linspace(0, 1, EQUAL_BINS + 1)[1:-1]
    lo = np.full(targets.size, -math.ceil(60 * scale) - 10.0)  # CDF(lo) < target <= CDF(hi)
    hi = -lo
    while np.any(hi - lo > 1):
        mid = np.floor((lo + hi) / 2)
        reached = dlap_cdf(mid, scale) >= targets
        hi, lo = np.where(reached, mid, hi), np.where(reached, lo, mid)
    edges: list[float] = []
    previous = 0.0
    for k in np.unique(hi):
        cdf = float(dlap_cdf(k, scale))
        if cdf - previous >= 0.2 / EQUAL_BINS and 1 - cdf >= 0.2 / EQUAL_BINS:
            edges.append(float(k))
            previous = cdf
    return np.array(edges)


def equal_bin_chisquare_pvalue(samples: np.ndarray, scale: float) -> float:
    """Chi-square p-value of integer samples against DLap(scale) on the bins of equal_bin_edges."""
    edges = equal_bin_edges(scale)
    expected = np.diff(np.concatenate([[0.0], dlap_cdf(edges, scale), [1.0]])) * samples.size
    observed = np.bincount(np.searchsorted(edges, samples, side="left"), minlength=edges.size + 1)
    assert edges.size >= 5 and expected.min() >= MIN_EXPECTED
    expected *= observed.sum() / expected.sum()
    return float(stats.chisquare(observed, expected).pvalue)


@pytest.mark.parametrize("scale", EXACT_SCALES)
def test_discrete_laplace_passes_equal_bin_chisquare(scale):
    """discrete_laplace at b = 10, 1e4, 1e6 passes the equal-bin chi-square test at ALPHA."""
    x = discrete_laplace(scale, N_EXACT, rng=np.random.default_rng(73))
    assert equal_bin_chisquare_pvalue(x, scale) > ALPHA


@pytest.mark.parametrize("scale", EXACT_SCALES)
@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_discrete_laplace_equal_bin_chisquare_rejects_wrong_scale(scale, factor):
    """Power check: samples at b/2 or 2b are rejected at ALPHA against DLap(b)."""
    x = discrete_laplace(scale * factor, N_EXACT, rng=np.random.default_rng(74))
    assert equal_bin_chisquare_pvalue(x, scale) < ALPHA


@pytest.mark.parametrize("scale", EXACT_SCALES + [0.7])
def test_per_element_path_passes_equal_bin_chisquare(scale):
    """The per-element (CKS) path of discrete_laplace_elementwise passes the same test at ALPHA."""
    x = noise._sample_cks(np.full(N_EXACT, scale), as_source(np.random.default_rng(75)), "test")
    assert equal_bin_chisquare_pvalue(x, scale) > ALPHA


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_per_element_path_rejects_wrong_scale(factor):
    """Power check for the per-element path (b = 1e4 drawn at b/2 or 2b)."""
    x = noise._sample_cks(np.full(N_EXACT, 1e4 * factor), as_source(np.random.default_rng(76)), "test")
    assert equal_bin_chisquare_pvalue(x, 1e4) < ALPHA


def test_elementwise_mixes_tabled_and_per_element_scales():
    """Scales shared by >= 4096 elements (table path) next to 300 distinct ones (per-element path):
    each tabled column passes the equal-bin test and the distinct ones have the right spread."""
    n = 50_000
    distinct = np.linspace(5.0, 6.0, 300)
    scales = np.concatenate([np.full(n, 10.0), np.full(n, 1e4), distinct])
    x = discrete_laplace_elementwise(scales, rng=np.random.default_rng(77))
    assert equal_bin_chisquare_pvalue(x[:n], 10.0) > ALPHA
    assert equal_bin_chisquare_pvalue(x[n : 2 * n], 1e4) > ALPHA
    z = np.sum(x[2 * n :].astype(float) ** 2 / discrete_laplace_variance(distinct))
    # sum of K^2 / Var(K) over 300 draws: mean 300, sd about sqrt(300 * 5); a 6-sd check
    assert abs(z - 300) < 6 * math.sqrt(300 * 5)
