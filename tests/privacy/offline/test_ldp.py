"""Tests for the local-DP frequency oracles (privacy.offline.ldp) and the binomial sampler.

Statistical tests use fixed seeds (deterministic); ALPHA = 1e-6 is the probability that a correct
implementation would fail a goodness-of-fit test had the seed been random, so flakiness is
negligible. Every goodness-of-fit test is paired with a power check that a wrong parameter
(ε × 1.1, p × 1.1, ...) is rejected at the same ALPHA.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dphhh.privacy.noise import binomial
from dphhh.privacy.offline import ldp

ALPHA = 1e-6


def _chi2_pvalue(observed: np.ndarray, expected_prob: np.ndarray) -> float:
    """χ² goodness-of-fit p-value, merging cells with expected count < 10 into one."""
    n = observed.sum()
    expected = expected_prob * n
    small = expected < 10
    obs = np.append(observed[~small], observed[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    keep = exp > 0
    return float(stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue)


def _two_sample_pvalue(x: np.ndarray, y: np.ndarray) -> float:
    """χ² homogeneity p-value of two integer samples, merging values seen < 10 times."""
    values, counts = np.unique(np.concatenate([x, y]), return_counts=True)
    common = values[counts >= 20]
    rows = []
    for sample in (x, y):
        row = [np.sum(sample == v) for v in common]
        row.append(np.sum(~np.isin(sample, common)))
        rows.append(row)
    table = np.array(rows)
    table = table[:, table.sum(axis=0) > 0]
    return float(stats.chi2_contingency(table).pvalue)


# ------------------------------------------------------------------------------------------
# Binomial primitive (privacy.noise.binomial)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n,p", [(40, 0.3), (20_000, 0.27), (500, 0.995)])
def test_binomial_matches_pmf(n: int, p: float) -> None:
    """binomial(n, p) passes a χ² goodness-of-fit test against the exact binomial pmf."""
    draws = binomial(np.full(200_000, n), p, np.random.default_rng(11))
    k = np.arange(n + 1)
    observed = np.bincount(draws, minlength=n + 1)
    assert _chi2_pvalue(observed, stats.binom.pmf(k, n, p)) > ALPHA


def test_binomial_power_wrong_p_rejected() -> None:
    """The same χ² test rejects binomial samples drawn with p × 1.1."""
    n, p = 2000, 0.27
    draws = binomial(np.full(200_000, n), p * 1.1, np.random.default_rng(12))
    observed = np.bincount(draws, minlength=n + 1)
    assert _chi2_pvalue(observed, stats.binom.pmf(np.arange(n + 1), n, p)) < ALPHA


def test_binomial_edge_cases() -> None:
    """Zero trials give 0, p = 0 gives 0, p = 1 gives n, and invalid arguments are refused."""
    out = binomial(np.array([0, 7, 7, 5]), np.array([0.5, 0.0, 1.0, 0.5]), np.random.default_rng(1))
    assert out[:3].tolist() == [0, 0, 7] and 0 <= out[3] <= 5
    with pytest.raises(ValueError, match="binomial: p"):
        binomial(3, 1.5, 1)
    with pytest.raises(ValueError, match="binomial: trials"):
        binomial(-1, 0.5, 1)


# ------------------------------------------------------------------------------------------
# Per-user output distributions
# ------------------------------------------------------------------------------------------


def _grr_probs(eps: float, d: int, v: int) -> np.ndarray:
    p, q = math.exp(eps) / (math.exp(eps) + d - 1), 1 / (math.exp(eps) + d - 1)
    probs = np.full(d, q)
    probs[v] = p
    return probs


def test_grr_report_distribution() -> None:
    """GRR reports of one value follow (p at v, q elsewhere) with p = e^ε/(e^ε+d−1)."""
    reports = ldp.perturb_grr_batch(np.full(200_000, 1), 5, 1.0, np.random.default_rng(21))
    observed = np.bincount(reports, minlength=5)
    assert _chi2_pvalue(observed, _grr_probs(1.0, 5, 1)) > ALPHA


def test_grr_report_distribution_power() -> None:
    """The GRR χ² test rejects reports produced with ε × 1.1."""
    reports = ldp.perturb_grr_batch(np.full(200_000, 1), 5, 1.1, np.random.default_rng(22))
    assert _chi2_pvalue(np.bincount(reports, minlength=5), _grr_probs(1.0, 5, 1)) < ALPHA


def _oue_pattern_probs(eps: float, d: int, v: int) -> np.ndarray:
    q = 1 / (math.exp(eps) + 1)
    probs = np.ones(2**d)
    for pattern in range(2**d):
        for j in range(d):
            bit = (pattern >> j) & 1
            pj = 0.5 if j == v else q
            probs[pattern] *= pj if bit else 1 - pj
    return probs


def _oue_patterns(reports: np.ndarray) -> np.ndarray:
    weights = 1 << np.arange(reports.shape[1])
    return np.bincount(reports.astype(np.int64) @ weights, minlength=2 ** reports.shape[1])


def test_oue_report_distribution() -> None:
    """OUE reports (all 2^d bit patterns) match independent bits: 1/2 at v, 1/(e^ε+1) elsewhere."""
    reports = ldp.perturb_oue_batch(np.full(200_000, 0), 3, 1.0, np.random.default_rng(31))
    assert _chi2_pvalue(_oue_patterns(reports), _oue_pattern_probs(1.0, 3, 0)) > ALPHA


def test_oue_report_distribution_power() -> None:
    """The OUE χ² test rejects reports produced with ε × 1.1."""
    reports = ldp.perturb_oue_batch(np.full(200_000, 0), 3, 1.1, np.random.default_rng(32))
    assert _chi2_pvalue(_oue_patterns(reports), _oue_pattern_probs(1.0, 3, 0)) < ALPHA


def test_single_user_reports_have_the_right_form() -> None:
    """perturb_oue returns one bit vector of length d and perturb_grr one value in [0, d)."""
    bits = ldp.perturb_oue(2, 6, 1.0, np.random.default_rng(3))
    assert bits.shape == (6,) and set(np.unique(bits)) <= {0, 1}
    report = ldp.perturb_grr(2, 6, 1.0, np.random.default_rng(3))
    assert isinstance(report, int) and 0 <= report < 6


# ------------------------------------------------------------------------------------------
# Unbiasedness and variance of the estimates
# ------------------------------------------------------------------------------------------

REPS = 400
USERS = 2000


def _estimates(oracle: str, eps: float, values: np.ndarray, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(REPS):
        if oracle == "oue":
            out.append(ldp.aggregate_oue(ldp.perturb_oue_batch(values, d, eps, rng), eps))
        else:
            out.append(ldp.aggregate_grr(ldp.perturb_grr_batch(values, d, eps, rng), d, eps))
    return np.array(out)


@pytest.mark.parametrize("oracle", ["oue", "grr"])
def test_estimates_unbiased_and_variance_formula(oracle: str) -> None:
    """Across repetitions the mean estimate is within 5.3 standard errors of the truth and the
    empirical variance lies in the χ²(REPS−1) 1e-6 band around the per-cell formula."""
    d, eps = 6, 1.0
    freq = np.array([0.4, 0.25, 0.2, 0.1, 0.05, 0.0])
    values = np.repeat(np.arange(d), (freq * USERS).astype(int))
    est = _estimates(oracle, eps, values, d, seed=41 if oracle == "oue" else 42)
    var = ldp.oue_variance(eps, USERS, freq) if oracle == "oue" else ldp.grr_variance(eps, USERS, d, freq)
    z = 5.3  # two-sided normal tail 1.2e-7 per cell
    assert np.all(np.abs(est.mean(axis=0) - freq) <= z * np.sqrt(var / REPS))
    lo = stats.chi2.ppf(ALPHA, REPS - 1) / (REPS - 1)
    hi = stats.chi2.ppf(1 - ALPHA, REPS - 1) / (REPS - 1)
    ratio = est.var(axis=0, ddof=1) / var
    assert np.all((lo <= ratio) & (ratio <= hi))
    # Power: the variance formula at a wrong ε (× 1.5) falls outside the band for every cell.
    wrong = ldp.oue_variance(1.5 * eps, USERS, freq) if oracle == "oue" else ldp.grr_variance(1.5 * eps, USERS, d, freq)
    wrong_ratio = est.var(axis=0, ddof=1) / wrong
    assert np.all((wrong_ratio < lo) | (wrong_ratio > hi))


def test_variance_formulas_at_zero_frequency_match_the_paper() -> None:
    """At f = 0 the variances are 4e^ε/(n(e^ε−1)²) (OUE) and (d−2+e^ε)/(n(e^ε−1)²) (GRR)."""
    e = math.exp(0.7)
    assert ldp.oue_variance(0.7, 1000) == pytest.approx(4 * e / (1000 * (e - 1) ** 2), rel=1e-12)
    assert ldp.grr_variance(0.7, 1000, 9) == pytest.approx((9 - 2 + e) / (1000 * (e - 1) ** 2), rel=1e-12)


def test_prefer_grr_rule() -> None:
    """GRR is preferred exactly when d − 2 < 3e^ε."""
    assert ldp.prefer_grr(10, 1.0) and not ldp.prefer_grr(11, 1.0)


# ------------------------------------------------------------------------------------------
# Simulated aggregate sampling matches per-user perturbation
# ------------------------------------------------------------------------------------------

SIM_REPS = 4000


def _per_user_counts(oracle: str, hist: np.ndarray, eps: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = np.repeat(np.arange(hist.size), hist)
    out = []
    for _ in range(SIM_REPS):
        if oracle == "oue":
            out.append(ldp.oue_support_counts(values, hist.size, eps, rng))
        else:
            out.append(np.bincount(ldp.perturb_grr_batch(values, hist.size, eps, rng), minlength=hist.size))
    return np.array(out)


def _simulated_counts(oracle: str, hist: np.ndarray, eps: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    sim = ldp.simulate_oue_support if oracle == "oue" else ldp.simulate_grr_counts
    return np.array([sim(hist, eps, rng) for _ in range(SIM_REPS)])


@pytest.mark.parametrize("oracle", ["oue", "grr"])
def test_simulated_aggregate_matches_per_user(oracle: str) -> None:
    """Each cell's count (and the cell-0 minus cell-1 difference) from simulated aggregate
    sampling has the same distribution as from per-user perturbation (χ² homogeneity at 1e-6);
    a simulation at ε × 1.5 is rejected (power)."""
    hist = np.array([12, 5, 0, 3])
    eps = 1.0
    a = _per_user_counts(oracle, hist, eps, seed=51)
    b = _simulated_counts(oracle, hist, eps, seed=52)
    bad = _simulated_counts(oracle, hist, 1.5 * eps, seed=53)
    for j in range(hist.size):
        assert _two_sample_pvalue(a[:, j], b[:, j]) > ALPHA
    assert _two_sample_pvalue(a[:, 0] - a[:, 1], b[:, 0] - b[:, 1]) > ALPHA
    assert min(_two_sample_pvalue(a[:, j], bad[:, j]) for j in range(hist.size)) < ALPHA


def test_estimate_frequencies_both_modes_agree_on_expectation() -> None:
    """estimate_frequencies in per_user and aggregate modes both return n and estimates near the
    truth (within 6 standard deviations) for a large group."""
    values = np.repeat(np.arange(4), [5000, 3000, 2000, 0])
    hist = np.bincount(values, minlength=4)
    for sampling in ("per_user", "aggregate"):
        for oracle in ("oue", "grr"):
            est, n = ldp.estimate_frequencies(hist, values, 4, 1.0, oracle, np.random.default_rng(7), sampling)
            var = ldp.oue_variance(1.0, n, hist / n) if oracle == "oue" else ldp.grr_variance(1.0, n, 4, hist / n)
            assert n == 10_000
            assert np.all(np.abs(est - hist / n) <= 6 * np.sqrt(var))


def test_validation_messages_are_prefixed() -> None:
    """Invalid arguments raise ValueError prefixed by the oracle's name."""
    with pytest.raises(ValueError, match="^OUE: epsilon"):
        ldp.perturb_oue(0, 4, -1.0)
    with pytest.raises(ValueError, match="^GRR: values"):
        ldp.perturb_grr(4, 4, 1.0)
    with pytest.raises(ValueError, match="^GRR: domain_size"):
        ldp.perturb_grr(0, 1, 1.0)
    with pytest.raises(ValueError, match="^FrequencyOracle: oracle"):
        ldp.estimate_frequencies(None, np.array([0]), 2, 1.0, "rappor")
