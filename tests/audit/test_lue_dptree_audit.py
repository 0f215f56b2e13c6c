"""Privacy audit of the LUE-DPTree release (spec §9, §10).

Neighbouring inputs follow the proof: adding one element with value v changes by 1 exactly the
counts of the nodes on the root-to-leaf path of leaf [v, v] (one node per level of that path), so
the cases are "the element is in the deepest leaf" (the longest path, 5 nodes) and "the element is
in a leaf on the shortest path" (3 nodes), on an irregular tree, with the optimal and the uniform
budgets. The node counts are deterministic: only the Laplace noise is drawn, vectorised, 400 000
releases per side from the real release code (:func:`noisy_node_values`) with seeded generators.

Statistics: the privacy-loss statistic Σ_path ε_x(|y_x − c_x| − |y_x − c_x − 1|) computed with the
claimed budgets, the ε-weighted sum of the path's noisy values, the leaf's noisy value, and the
BLUE estimate of the leaf (post-processing). Clopper–Pearson at α = 1e-3 per bound
(``audit_tools``); the audit fails if ε_lb > ε. The audit is shown to flag two broken variants:
noise scales divided by 8, and uniform budgets computed with the shortest path's length
(ε/3 per node, so the 5-node path spends 5ε/3).
"""

from __future__ import annotations

import numpy as np
import pytest

from privacy.offline.interval_tree import IntervalTree
from privacy.offline.lue_dptree import blue_estimates, noisy_node_values, optimal_budgets, path_sums, uniform_budgets

from .audit_tools import audit_statistics

pytestmark = pytest.mark.audit

EPSILON = 1.0
TRIALS = 400_000
# Longest path: [1,6] > [3,6] > [4,6] > [5,6] > [5,5]; shortest: [1,6] > [1,2] > [1,1].
TREE = IntervalTree.from_nested(
    (1, 6, [(1, 2, [(1, 1), (2, 2)]), (3, 6, [(3, 3), (4, 6, [(4, 4), (5, 6, [(5, 5), (6, 6)])])])])
)
BASE_COUNTS = np.array([7, 0, 3, 12, 5, 1])
CASES = {"deepest_leaf": 5, "shortest_path_leaf": 1}
SEEDS = {("optimal", "deepest_leaf"): 11, ("optimal", "shortest_path_leaf"): 13,
         ("uniform", "deepest_leaf"): 17, ("uniform", "shortest_path_leaf"): 19}


def _budgets(rule: str) -> np.ndarray:
    return optimal_budgets(TREE, EPSILON) if rule == "optimal" else uniform_budgets(TREE, EPSILON)


def _statistics(noisy: np.ndarray, counts: np.ndarray, claimed: np.ndarray, value: int) -> dict[str, np.ndarray]:
    leaf = int(TREE.leaf_index()[value - 1])
    path = TREE.path(leaf)
    y, c, e = noisy[path], counts[path][:, None], claimed[path][:, None]
    return {
        # rounded: its atoms at ±Σε must not split into float-rounding neighbours
        "privacy_loss": np.round((e * (np.abs(y - c) - np.abs(y - c - 1))).sum(axis=0), 9),
        "weighted_path_sum": (e * y).sum(axis=0),
        "leaf_value": noisy[leaf],
        "blue_leaf": blue_estimates(TREE, noisy, claimed)[leaf],
    }


def _audit(claimed: np.ndarray, used: np.ndarray, value: int, seed: int):
    """Audit the release that draws noise with budgets ``used`` (the claimed ones unless broken)."""
    counts_a = TREE.node_counts(BASE_COUNTS)
    added = BASE_COUNTS.copy()
    added[value - 1] += 1
    counts_b = TREE.node_counts(added)
    out = []
    for counts, offset in ((counts_a, 0), (counts_b, 1)):
        noisy = noisy_node_values(TREE, counts, used, np.random.default_rng(seed + offset), trials=TRIALS)
        out.append(_statistics(noisy, counts_a, claimed, value))
    return audit_statistics(out[0], out[1], delta=0.0)


def test_audit_tree_has_paths_of_different_lengths() -> None:
    """The audit tree's paths have 3 to 5 nodes, so uneven budgets matter."""
    lengths = {len(TREE.path(int(x))) for x in np.flatnonzero(TREE.is_leaf)}
    assert lengths == {3, 4, 5}


@pytest.mark.parametrize("rule", ["optimal", "uniform"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_lue_dptree_release_passes_audit(rule: str, case: str) -> None:
    """Adding one element shows no privacy loss above ε in the released node values."""
    budgets = _budgets(rule)
    result = _audit(budgets, budgets, CASES[case], seed=SEEDS[(rule, case)])
    assert result.epsilon_lb <= EPSILON, result


def test_audit_flags_noise_divided_by_8() -> None:
    """Laplace scales divided by 8 are detected."""
    budgets = _budgets("optimal")
    result = _audit(budgets, budgets * 8, CASES["deepest_leaf"], seed=101)
    assert result.epsilon_lb > EPSILON, result


def test_audit_flags_budgets_exceeding_epsilon_on_a_path() -> None:
    """Uniform budgets from the shortest path (ε/3 per node) spend 5ε/3 on the deepest path: flagged."""
    broken = np.full(TREE.size, EPSILON / 3)
    assert path_sums(TREE, broken).max() == pytest.approx(5 * EPSILON / 3)
    result = _audit(broken, broken, CASES["deepest_leaf"], seed=202)
    assert result.epsilon_lb > EPSILON, result


def test_audit_reports_its_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    """The ε lower bounds of the correct and the over-spending release are printed for the record."""
    good_budgets = _budgets("optimal")
    broken = np.full(TREE.size, EPSILON / 3)
    good = _audit(good_budgets, good_budgets, CASES["deepest_leaf"], seed=303)
    bad = _audit(broken, broken, CASES["deepest_leaf"], seed=303)
    print(f"deepest leaf: optimal eps_lb={good.epsilon_lb:.3f} ({good.statistic}), "
          f"over-spending eps_lb={bad.epsilon_lb:.3f} ({bad.statistic})")
    assert good.epsilon_lb < bad.epsilon_lb
