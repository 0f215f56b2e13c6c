"""Tests for the noise samplers in privacy.noise.

Statistical tests use fixed seeds, so they are deterministic; the significance level ALPHA is
chosen so that, had the seed been picked at random, a correct sampler would fail each
goodness-of-fit test with probability ALPHA (1e-6) only. Every goodness-of-fit test is paired
with a power check: the same test applied to samples drawn with a wrong parameter (scale x 1.1,
sigma2 x 1.2, p x 1.1) must reject at ALPHA, and at these sample sizes it does so with p-values
that are astronomically small (far below 1e-20), so the checks are not fragile.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from privacy import noise
from privacy.noise import (
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
from privacy.randomness import SecureRandomSource, SeededRandomSource, as_source

# False-failure probability of each goodness-of-fit / symmetry test for a correct sampler.
ALPHA = 1e-6
N_VECTOR = 200_000  # samples for the vectorised samplers
N_GAUSS = 30_000  # samples for the (Python-loop) exact discrete Gaussian sampler
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

    def bits(self, n: int) -> np.ndarray:
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


def test_discrete_laplace_dtype_and_shapes():
    """discrete_laplace returns int64 arrays of the requested int or tuple shape."""
    assert discrete_laplace(2.0, 7, rng=1).shape == (7,)
    x = discrete_laplace(2.0, (3, 4), rng=1)
    assert x.dtype == np.int64 and x.shape == (3, 4)
    assert discrete_laplace(2.0, 0, rng=1).shape == (0,)
    assert discrete_laplace(2.0, (2, 0), rng=1).shape == (2, 0)


def test_discrete_laplace_tiny_scale_gives_zeros():
    """discrete_laplace with a vanishing scale returns zeros (the nonzero mass underflows)."""
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


def test_discrete_laplace_elementwise_tiny_scales_give_zeros_and_validation():
    """Elements with a vanishing scale are 0 next to noisy ones; bad scales raise ValueError."""
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
    assert discrete_laplace_variance(1e-3) == 0.0  # the nonzero mass underflows (as the sampler)
    with pytest.raises(ValueError, match="discrete_laplace_variance: scale must be finite numbers > 0"):
        discrete_laplace_variance(-1.0)


# ----------------------------------------------------------------------------------------------
# The inverse transform's resolution: the sampler's exact pmf versus the ideal one
# ----------------------------------------------------------------------------------------------

GRID = 2**53  # uniform01 takes the values m * 2**-53, m = 0 .. 2**53 - 1, each with probability 2**-53


def _geometric_of_grid(m: np.ndarray, scale: float) -> np.ndarray:
    """The geometric that discrete_laplace computes from the uniform m * 2**-53 (its arithmetic)."""
    return noise._geometric_from_uniforms(m.astype(np.float64) * 2.0**-53, -(1.0 / scale))


def sampler_geometric_tail_counts(scale: float) -> tuple[int, np.ndarray]:
    """Exact output law of one geometric of discrete_laplace(scale): the largest value K it can
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
def test_discrete_laplace_sampler_is_the_ideal_law_up_to_the_uniform_grid(scale):
    """The exact law of the inverse transform (enumerated over all 2**53 uniforms by binary
    search) has every tail probability within 2 * 2**-53 of q^k, reaches K = floor(scale * 53 ln 2)
    (about 36.7 * scale), and its total-variation distance to the ideal geometric is at most
    (K + 1) * 2**-52; the discrete Laplace (two independent geometrics) is then within twice that.
    This is the resolution caveat stated in privacy/offline/lue_dptree.py (measured: about
    0.2 * K * 2**-53)."""
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


def test_discrete_gaussian_dtype_and_shapes():
    """discrete_gaussian returns int64 arrays of the requested int or tuple shape."""
    x = discrete_gaussian(4, (3, 5), rng=1)
    assert x.dtype == np.int64 and x.shape == (3, 5)
    assert discrete_gaussian(4, 0, rng=1).shape == (0,)
    assert discrete_gaussian(4, 6, rng=1).shape == (6,)


def test_discrete_gaussian_uses_only_randbelow():
    """discrete_gaussian draws all its randomness through randbelow, never bits."""
    x = discrete_gaussian(10, 200, rng=RandbelowOnlySource(5))
    assert x.shape == (200,)


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
    """The vectorised samplers draw all their randomness through bits, never randbelow."""
    src = BitsOnlySource(3)
    uniform01(src, 5)
    geometric_failures(0.5, 5, rng=src)
    discrete_laplace(2.0, 5, rng=src)
    laplace(2.0, 5, rng=src)


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
    assert discrete_gaussian(9, 10).shape == (10,)
    assert calls["randbelow"] > 0


def test_secure_source_default_samples_look_right():
    """Secure (unseeded) discrete Laplace and discrete Gaussian samples pass a chi-square test."""
    x = discrete_laplace(3.0, 50_000)
    assert symmetric_chisquare_pvalue(x, lambda k: discrete_laplace_pmf(k, 3.0)) > ALPHA
    y = discrete_gaussian(4, 5_000)
    assert symmetric_chisquare_pvalue(y, lambda k: discrete_gaussian_pmf(k, 4)) > ALPHA


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
