"""Regression test for the floating-point attack on Laplace noise (Mironov 2012; docs/ALGORITHMS.md §3 "Integer
counts", §9) as it applied to LUE-DPTree before its noise became integer.

The old release computed, per node, ``count + laplace(1.0) / ε_x`` in doubles. Exact rounding
arithmetic then makes the *set* of printable results depend on the count, whatever the noise:

Lemma. Let c >= 1 be an integer, z any double and y = fl(c + z) (round to nearest). If |y| < 1/2,
then y = c + z exactly and y is an integer multiple of g(c) = 2^(e−52), where 2^e <= c − 1/2 < 2^(e+1).
Proof: rounding is monotone and ±1/2 are doubles, so |y| < 1/2 forces |c + z| <= 1/2, hence
z <= 1/2 − c and |z| >= c − 1/2 >= 2^e. Every double of magnitude >= 2^e is a multiple of 2^(e−52),
and so is the integer c (e >= −1). So c + z is a multiple k·2^(e−52) with |k| <= 2^(51−e) <= 2^52,
which is a double: no rounding happens. ∎ For c = 0 the output is z itself (0 + z = z exactly).

So g(1) = 2^-53 and g(2) = 2^-52: a printed output y with |y| < 1/2 that is not a multiple of
2^-53 can come from a count of 0 but never from 1, and one that is an odd multiple of 2^-53 from a
count of 1 but never from 2. The tests measure how often one draw of the old release lands on such
a value (each such draw identifies the input with certainty: an infinite privacy loss), and show
that the discrete-Laplace release is immune: its outputs are integers, and its set of possible
outputs for counts x and x + 1 is the same except for the two extreme integers x − K and
x + 1 + K (K the sampler's largest geometric value), whose probability is computed exactly from the
sampler's own arithmetic.

Sample sizes and seeds are fixed; the thresholds are far below the expected fractions (printed
for the record), and the impossibility side of each claim is the lemma, not a statistic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import beta as beta_dist

from dphhh.privacy.noise import laplace
from dphhh.privacy.offline.interval_tree import IntervalTree
from dphhh.privacy.offline.lue_dptree import noisy_node_values, optimal_budgets
from tests.privacy.test_noise import GRID, sampler_geometric_tail_counts

# Root [1, 2] with leaves [1, 1] and [2, 2]; an element with value 1 moves the root and leaf [1, 1].
TREE = IntervalTree.complete(2, 2)
BUDGETS = optimal_budgets(TREE, 1.0)
LEAF = 1  # node [1, 1], budget about 0.5575 (scale about 1.79)
TRIALS = 200_000
ALPHA = 1e-3  # one-sided Clopper–Pearson level of the lower bounds below


def clopper_pearson_lower(successes: int, trials: int) -> float:
    """One-sided Clopper–Pearson lower bound at level ALPHA on a binomial proportion."""
    return 0.0 if successes == 0 else float(beta_dist.ppf(ALPHA, successes, trials - successes + 1))


def old_noisy_node_values(node_counts: np.ndarray, budgets: np.ndarray, seed: int) -> np.ndarray:
    """The release as the previous version computed it: continuous Laplace in doubles,
    ``counts[:, None] + (laplace(1.0, (trials, size)) / ε).T`` (nodes on axis 0)."""
    counts = np.asarray(node_counts, dtype=float)
    noise = laplace(1.0, (TRIALS, TREE.size), np.random.default_rng(seed)) / budgets
    return counts[:, None] + noise.T


def multiple_of(y: np.ndarray, grid: float) -> np.ndarray:
    """Whether each double y is an integer multiple of ``grid`` (a power of two: y / grid is exact)."""
    scaled = y / grid
    return scaled == np.floor(scaled)


def leaf_outputs(leaf_count: int, seed: int, *, old: bool) -> np.ndarray:
    """``TRIALS`` released values of leaf [1, 1] when value 1 occurs ``leaf_count`` times."""
    counts = TREE.node_counts(np.array([leaf_count, 0]))
    noisy = (
        old_noisy_node_values(counts, BUDGETS, seed)
        if old
        else noisy_node_values(TREE, counts, BUDGETS, np.random.default_rng(seed), trials=TRIALS)
    )
    return noisy[LEAF]


def impossible_at_1(y: np.ndarray) -> np.ndarray:
    """Outputs that the lemma rules out for a count of 1: |y| < 1/2 and not a multiple of 2^-53."""
    return (np.abs(y) < 0.5) & ~multiple_of(y, 2.0**-53)


def impossible_at_2(y: np.ndarray) -> np.ndarray:
    """Outputs that the lemma rules out for a count of 2: |y| < 1/2 and not a multiple of 2^-52."""
    return (np.abs(y) < 0.5) & ~multiple_of(y, 2.0**-52)


@pytest.mark.parametrize(
    "count, seeds, impossible_above, lower_bound",
    [
        (0, (1, 2), impossible_at_1, 0.1),  # about 17% of count-0 outputs: not multiples of 2^-53
        (1, (3, 4), impossible_at_2, 0.02),  # about 4.6% of count-1 outputs: odd multiples of 2^-53
    ],
)
def test_old_float_release_prints_values_that_identify_the_count(count, seeds, impossible_above, lower_bound) -> None:
    """Old release, counts c vs c + 1 (c = 0, 1): a share of single outputs at c are doubles that no
    output at c + 1 can equal (lemma), so one printed value reveals the input. Checked: the
    Clopper–Pearson lower bound (α = 1e-3) of that share exceeds ``lower_bound``, and none of the
    outputs at c + 1 falls in the set (the lemma, seen on samples)."""
    at_c = leaf_outputs(count, seed=seeds[0], old=True)
    at_next = leaf_outputs(count + 1, seed=seeds[1], old=True)
    hits = int(impossible_above(at_c).sum())
    low = clopper_pearson_lower(hits, TRIALS)
    print(
        f"old sampler, count {count} vs {count + 1}: {hits / TRIALS:.4f} of count-{count} outputs impossible at "
        f"count {count + 1} (CP lower {low:.4f}); count-{count + 1} outputs in that set: "
        f"{int(impossible_above(at_next).sum())}"
    )
    assert low > lower_bound
    assert not impossible_above(at_next).any()


def test_discrete_release_has_no_float_signature() -> None:
    """New release: every output is an integer (int64), so the distinguishers above find nothing
    on either side, and the values drawn at each count all lie in the support at the other count
    ([1 − K, 1 + K] and [−K, K]; an output outside has probability < 2^-53 per draw)."""
    at_0 = leaf_outputs(0, seed=1, old=False)
    at_1 = leaf_outputs(1, seed=2, old=False)
    assert at_0.dtype == np.int64 and at_1.dtype == np.int64
    for y in (at_0.astype(np.float64), at_1.astype(np.float64)):
        assert not impossible_at_1(y).any() and not impossible_at_2(y).any()
    k_max, _ = sampler_geometric_tail_counts(1.0 / BUDGETS[LEAF])
    assert at_0.min() >= 1 - k_max and at_0.max() <= 1 + k_max
    assert at_1.min() >= -k_max and at_1.max() <= k_max


def test_discrete_release_supports_of_neighbours_differ_only_at_two_extreme_integers() -> None:
    """Exactly, from the sampler's arithmetic: one geometric takes every value 0..K (K = 65 at the
    leaf's scale), so the noise takes every integer in [−K, K] and the outputs for counts x and
    x + 1 range over [x − K, x + K] and [x + 1 − K, x + 1 + K]. The only output possible for x
    and not for x + 1 is x − K, with probability P(G = 0)·P(G = K) < 2^-53 (and symmetrically);
    a bound far below any δ, unlike the old release's about 17%."""
    scale = 1.0 / BUDGETS[LEAF]
    k_max, counts = sampler_geometric_tail_counts(scale)
    assert k_max == math.floor(-math.log1p(-(1.0 - 2.0**-53)) * scale) == 65
    assert counts[0] < GRID and np.all(np.diff(counts) < 0) and counts[-1] >= 1  # every value reached
    p_zero = (GRID - int(counts[0])) / GRID
    p_top = int(counts[-1]) / GRID
    p_only_at_x = p_zero * p_top
    print(
        f"discrete sampler at scale {scale:.4f}: K = {k_max}, P(output only possible at x) = "
        f"{p_only_at_x:.3e} = {p_only_at_x * 2**53:.3f} * 2^-53"
    )
    assert p_only_at_x < 2.0**-53
