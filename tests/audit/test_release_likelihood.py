"""The exact likelihoods the audits threshold (docs/ALGORITHMS.md §3, §10) agree with brute force and the sampler.

An audit built on a wrong likelihood would still be valid (any statistic gives a valid bound) but
could lose its power silently, so the closed forms of :mod:`.release_likelihood` are checked here
against direct summation, normalisation, and the frequencies of the real sampler.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from dphhh.privacy.noise import discrete_laplace_pmf
from dphhh.privacy.randomness import SeededRandomSource
from dphhh.privacy.release import ReleaseScales, release_arrays

from .release_likelihood import (
    SketchSide,
    _pass_counts,
    log_pattern_probability,
    log_shared_release,
    log_tail_at_least,
    size_log_likelihood,
    sketch_log_likelihood,
)

SCALES = ReleaseScales.for_budget(epsilon=0.9, delta=1e-6, h=4)
T = SCALES.integer_threshold


@pytest.mark.parametrize("scale", [0.7, 3.0, 17.8])
def test_tail_matches_pmf_sums(scale: float) -> None:
    """log P(K >= t) equals the log of the pmf summed over k >= t."""
    k = np.arange(-4000, 4001)
    pmf = discrete_laplace_pmf(k, scale)
    for t in (-7, -1, 0, 1, 2, 9):
        assert np.exp(log_tail_at_least(np.array(t), scale)) == pytest.approx(pmf[k >= t].sum(), rel=1e-12)


@pytest.mark.parametrize("shared,key", [(3.3, 7.1), (8.9, 17.8), (2.0, 2.0), (0.6, 5.0)])
def test_shared_release_sum_matches_brute_force(shared: float, key: float) -> None:
    """The closed-form sum over γ' equals direct summation on a wide grid (ties and empty rows included)."""
    rng = np.random.default_rng(17)
    residuals = rng.integers(-25, 25, (60, 5))
    residuals[0] = 3  # all tied
    mask = rng.random((60, 5)) < 0.6
    mask[1] = False  # nothing released
    got = log_shared_release(residuals, mask, shared, key)
    g = np.arange(-3000, 3001)
    for row in range(60):
        exponent = -np.abs(g) / shared - (np.abs(residuals[row][mask[row]][:, None] - g[None, :]) / key).sum(axis=0)
        assert got[row] == pytest.approx(np.log(np.exp(exponent).sum()), abs=1e-12)


def _brute_pattern_probability(pattern: tuple[bool, ...], side: SketchSide) -> float:
    g = np.arange(-2000, 2001)
    total = discrete_laplace_pmf(g, SCALES.gamma)
    k = np.arange(-4000, 4001)
    pmf_w = discrete_laplace_pmf(k, SCALES.w)
    for passes, count, present in zip(pattern, side.counts, side.present):
        if not present:
            total = total * (0.0 if passes else 1.0)
            continue
        need = T - count - g  # w >= need
        tail = np.array([pmf_w[k >= n].sum() for n in need])
        total = total * (tail if passes else 1 - tail)
    return float(total.sum())


@pytest.mark.parametrize("counts,present", [([T - 3, T, T, T + 5], [1, 1, 1, 1]), ([T, T, 1, T + 2], [1, 1, 0, 1])])
def test_pattern_probabilities_match_brute_force(counts: list[int], present: list[int]) -> None:
    """P(S) from exchangeable groups equals the per-key product summed over γ, for every pattern."""
    side = SketchSide(np.array(counts, dtype=np.int64), np.array(present, dtype=bool))
    patterns = np.array(list(itertools.product([False, True], repeat=len(counts))))
    table, where = _pass_counts(patterns, side)
    got = np.exp(log_pattern_probability(table, side, SCALES)[where])
    assert got.sum() == pytest.approx(1.0, abs=1e-12)
    for row in (0, 5, 9, 15):
        assert got[row] == pytest.approx(_brute_pattern_probability(tuple(patterns[row]), side), rel=1e-9, abs=1e-300)


def test_pattern_probabilities_match_the_sampler() -> None:
    """Pattern frequencies of 2·10^5 draws of the real core are within 5 standard errors of P(S)."""
    side = SketchSide(np.array([T - 9, T, T + 4], dtype=np.int64), np.ones(3, dtype=bool))
    passed, _ = release_arrays(side.counts, SCALES, SeededRandomSource(np.random.default_rng(3)), 200_000)
    table, where = _pass_counts(passed, side)
    expected = np.exp(log_pattern_probability(table, side, SCALES))
    observed = np.bincount(where, minlength=len(expected)) / passed.shape[0]
    assert np.all(np.abs(observed - expected) <= 5 * np.sqrt(expected * (1 - expected) / passed.shape[0]) + 1e-12)


def test_sketch_likelihood_normalises() -> None:
    """Summed over every pass pattern and a wide grid of released values, P(output) is 1 (two keys)."""
    side = SketchSide(np.array([T - 2, T + 3], dtype=np.int64), np.ones(2, dtype=bool))
    grid = np.arange(-300, 301)
    total = 0.0
    for pattern in itertools.product([False, True], repeat=2):
        shown = [grid if p else np.array([0]) for p in pattern]
        values = np.array(list(itertools.product(*shown))) + side.counts[None, :]
        passed = np.broadcast_to(np.array(pattern), values.shape).copy()
        total += float(np.exp(sketch_log_likelihood(passed, values, side, SCALES)).sum())
    assert total == pytest.approx(1.0, abs=1e-6)  # the value grid leaves out a tail below 1e-6


def test_a_key_the_side_lacks_cannot_be_released() -> None:
    """An output that releases a key one side does not hold has likelihood 0 on that side."""
    side = SketchSide(np.array([T, 0], dtype=np.int64), np.array([True, False]))
    passed = np.array([[True, True], [True, False]])
    values = np.array([[T, T], [T, 0]])
    ll = sketch_log_likelihood(passed, values, side, SCALES)
    assert ll[0] == -np.inf and np.isfinite(ll[1])


def test_size_likelihood_is_the_pmf() -> None:
    """The size log-likelihood is the log of the discrete Laplace pmf at ñ − n."""
    noisy = np.array([990, 1000, 1013])
    assert np.allclose(np.exp(size_log_likelihood(noisy, 1000, 4.0)), discrete_laplace_pmf(noisy - 1000, 4.0))
