"""The exact rank-sum test of tests/rank_sum.py against brute-force enumeration of every split."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from tests.rank_sum import hodges_lehmann_shift, rank_sum_p_value


def _brute_force_p(a: list[float], b: list[float]) -> float:
    """Every split of the pooled values into |a| and |b|, with mid-ranks computed the slow way."""
    pooled = [*a, *b]
    rank = {v: np.mean([i + 1 for i, w in enumerate(sorted(pooled)) if w == v]) for v in pooled}
    scores = [rank[v] for v in pooled]
    mean = len(a) * sum(scores) / len(pooled)
    observed = abs(sum(scores[: len(a)]) - mean)
    splits = list(combinations(range(len(pooled)), len(a)))
    hits = sum(abs(sum(scores[i] for i in split) - mean) >= observed - 1e-9 for split in splits)
    return hits / len(splits)


@pytest.mark.parametrize("seed", range(6))
def test_p_value_equals_brute_force_enumeration_with_and_without_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    # seeds 0–2: continuous values (no ties); 3–5: values from {0, 1, 2} (many ties)
    draw = (lambda k: rng.normal(size=k).tolist()) if seed < 3 else (lambda k: rng.integers(0, 3, k).tolist())
    a, b = draw(m), draw(n)
    assert rank_sum_p_value(a, b) == pytest.approx(_brute_force_p(a, b), abs=1e-12)


def test_complete_separation_gives_the_smallest_p_value() -> None:
    # 12 values all above 12 others: only this split and its mirror are as extreme
    a, b = list(range(100, 112)), list(range(12))
    assert rank_sum_p_value(a, b) == pytest.approx(2 / 2_704_156)
    assert rank_sum_p_value(b, a) == pytest.approx(2 / 2_704_156)


def test_identical_samples_give_p_one() -> None:
    assert rank_sum_p_value([5, 5, 5], [5, 5, 5, 5]) == 1.0
    assert rank_sum_p_value([1, 4, 5, 8], [2, 3, 6, 7]) == 1.0  # rank sums 18 and 18: no difference


def test_hodges_lehmann_shift_is_the_median_pairwise_difference() -> None:
    assert hodges_lehmann_shift([10, 11, 12], [0, 1, 2]) == 10.0
    assert hodges_lehmann_shift([10, 11, 1000], [0, 1, 2]) == 10.0  # an outlier does not move it
