"""The loss-distribution audit tool (:mod:`.loss_distribution`) against a case with a closed form.

H independent discrete Laplace releases of counts that differ by one (scale b): each part's loss
under A is +1/b with probability 1/(1+q) and −1/b otherwise (q = e^{−1/b}), so the number of +
terms is Binomial(H, 1/(1+q)) and the hockey-stick divergence δ(ε) has an exact finite sum. The
tool, fed sampled part losses, must give a lower bound of it (its DKW band fails with probability
<= 1e-3; the seed is fixed) that is also close (within a factor 2 where δ(ε) is not tiny) — a tool
that over-states δ would flag correct mechanisms, one far below it would miss breaks.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from dphhh.privacy.noise import discrete_laplace

from .loss_distribution import audit_identical_parts, size_term

pytestmark = pytest.mark.audit

PARTS, SCALE = 24, 12.0


def _exact_delta(epsilon: float, parts: int, scale: float) -> float:
    q = math.exp(-1 / scale)
    k = np.arange(parts + 1)
    loss = (2 * k - parts) / scale
    return float(np.sum(binom.pmf(k, parts, 1 / (1 + q)) * np.maximum(0.0, 1 - np.exp(epsilon - loss))))


def _part_losses(n: int, seed: int) -> np.ndarray:
    z = discrete_laplace(SCALE, n, rng=np.random.default_rng(seed))  # A's noise; B's count is one lower
    return (np.abs(z + 1) - np.abs(z)) / SCALE


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 1.5])
def test_lower_bound_is_below_the_exact_delta_and_close(epsilon: float) -> None:
    audit = audit_identical_parts(_part_losses(1_000_000, 3), PARTS, floor=-1 / SCALE, delta=1e-6)
    exact = _exact_delta(epsilon, PARTS, SCALE)
    got = audit.delta_at(epsilon)
    assert got <= exact
    assert got >= 0.5 * exact, (got, exact)


def test_exact_terms_add_like_parts() -> None:
    """A part given as an exact term instead of as samples changes δ(ε) only within the band."""
    sampled = audit_identical_parts(_part_losses(1_000_000, 4), PARTS, floor=-1 / SCALE, delta=1e-6)
    mixed = audit_identical_parts(
        _part_losses(1_000_000, 4), PARTS - 1, floor=-1 / SCALE, delta=1e-6, exact_terms=[size_term(SCALE)]
    )
    exact = _exact_delta(1.0, PARTS, SCALE)
    assert sampled.delta_at(1.0) <= exact and mixed.delta_at(1.0) <= exact
    assert mixed.delta_at(1.0) >= 0.5 * exact


def test_epsilon_lb_of_a_halved_scale_exceeds_the_correct_one() -> None:
    """Halving the scale is seen: ε_lb grows, and the δ at which it is read matters as it should."""
    good = audit_identical_parts(_part_losses(1_000_000, 5), PARTS, floor=-1 / SCALE, delta=1e-6)
    z = discrete_laplace(SCALE / 2, 1_000_000, rng=np.random.default_rng(6))
    bad = audit_identical_parts((np.abs(z + 1) - np.abs(z)) / (SCALE / 2), PARTS, floor=-2 / SCALE, delta=1e-6)
    assert good.epsilon_lb() < bad.epsilon_lb() <= PARTS * 2 / SCALE
    assert good.epsilon_lb() <= PARTS / SCALE


def test_floor_above_a_sample_is_refused() -> None:
    with pytest.raises(AssertionError):
        audit_identical_parts(_part_losses(1000, 7), PARTS, floor=0.0, delta=1e-6)
