"""LUE-DPTree (docs/ALGORITHMS.md §9): interval trees, coverage, budgets, release, BLUE and expected errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import norm

from dphhh.privacy.noise import discrete_laplace_pmf
from dphhh.privacy.offline.interval_tree import IntervalTree
from dphhh.privacy.offline.lue_dptree import (
    MECHANISM_NOISE,
    LueParams,
    Workload,
    blue_estimates,
    check_budgets,
    expected_query_error,
    lue_dptree,
    lue_dptree_counts,
    node_variances,
    noisy_node_values,
    optimal_budgets,
    path_sums,
    uniform_budgets,
    uniform_coverage,
    workload_coverage,
)

PAPER_TREE = (1, 3, [(1, 1), (2, 2), (3, 3)])


def random_tree(rng: np.random.Generator, n: int, max_fanout: int = 5) -> IntervalTree:
    """An irregular tree: every node splits at random cut points into 2..max_fanout parts."""

    def grow(lo: int, hi: int):
        if lo == hi:
            return (lo, hi)
        k = int(rng.integers(2, min(max_fanout, hi - lo + 1) + 1))
        cuts = np.sort(rng.choice(np.arange(lo + 1, hi + 1), size=k - 1, replace=False))
        bounds = [lo, *cuts.tolist(), hi + 1]
        return (lo, hi, [grow(a, b - 1) for a, b in zip(bounds, bounds[1:])])

    return IntervalTree.from_nested(grow(1, n))


def check_consistent(tree: IntervalTree, values: np.ndarray) -> None:
    for x in range(tree.size):
        kids = tree.children(x)
        if kids:
            assert values[x] == pytest.approx(values[list(kids)].sum(axis=0), abs=1e-8)


# ------------------------------------------------------------------------------ trees


def test_from_nested_paper_tree_structure() -> None:
    """The paper's tree has a root [1,3] and three unit leaves, in breadth-first order."""
    tree = IntervalTree.from_nested(PAPER_TREE)
    assert tree.n == 3 and tree.size == 4 and tree.height == 2
    assert tree.lo.tolist() == [1, 1, 2, 3] and tree.hi.tolist() == [3, 1, 2, 3]
    assert tree.parent.tolist() == [-1, 0, 0, 0]
    assert tree.to_nested() == PAPER_TREE


@pytest.mark.parametrize(
    "spec, message",
    [
        ((1, 4, [(1, 2, [(1, 1), (2, 2)]), (4, 4)]), "leave a gap"),
        ((1, 3, [(1, 2, [(1, 1), (2, 2)]), (2, 3, [(2, 2), (3, 3)])]), "overlap"),
        ((1, 3, [(2, 2), (3, 3)]), "must start at 1"),
        ((1, 3, [(1, 1), (2, 2)]), "must end at 3"),
        ((1, 3, [(1, 3, [(1, 1), (2, 2), (3, 3)])]), "one child"),
        ((1, 2), "single value"),
        ((2, 1), "empty"),
        ((2, 3, [(2, 2), (3, 3)]), "root must start at 1"),
        ((1, 2, [(1, 1), (2, 2.5)]), "integer"),
    ],
)
def test_from_nested_rejects_invalid_trees(spec, message: str) -> None:
    """Invalid nested specifications are rejected with a message naming the problem."""
    with pytest.raises(ValueError, match=f"IntervalTree: .*{message}"):
        IntervalTree.from_nested(spec)


def test_from_fanouts_uneven_split() -> None:
    """Fan-outs per level split 22 values into 8/7/7, then near-equal pairs, as documented."""
    tree = IntervalTree.from_fanouts(22, [3, 4, 2])
    root_kids = [(int(tree.lo[c]), int(tree.hi[c])) for c in tree.children(0)]
    assert root_kids == [(1, 8), (9, 15), (16, 22)]
    assert np.all(tree.lo[tree.is_leaf] == tree.hi[tree.is_leaf])
    assert sorted(tree.lo[tree.is_leaf].tolist()) == list(range(1, 23))
    with pytest.raises(ValueError, match="wider than one value"):
        IntervalTree.from_fanouts(22, [2, 2])
    with pytest.raises(ValueError, match="fanouts\\[1\\] must be an integer >= 2"):
        IntervalTree.from_fanouts(22, [3, 1])


def test_complete_tree_shape() -> None:
    """A complete 4-ary tree over 64 values has 1+4+16+64 nodes and height 4."""
    tree = IntervalTree.complete(64, 4)
    assert tree.size == 85 and tree.height == 4
    assert set(tree.n_children.tolist()) == {0, 4}
    with pytest.raises(ValueError, match="fanout must be an integer >= 2"):
        IntervalTree.complete(64, 1)


def test_decompose_is_canonical_on_random_trees() -> None:
    """The decomposition partitions the query, uses nodes inside it whose parents are not, and
    matches the brute-force canonical set."""
    rng = np.random.default_rng(5)
    for _ in range(5):
        tree = random_tree(rng, 40)
        for _ in range(50):
            lo = int(rng.integers(1, 41))
            hi = int(rng.integers(lo, 41))
            got = tree.decompose(lo, hi)
            inside = (lo <= tree.lo) & (tree.hi <= hi)
            par = np.maximum(tree.parent, 0)
            parent_inside = (tree.parent >= 0) & (lo <= tree.lo[par]) & (tree.hi[par] <= hi)
            assert sorted(got) == np.flatnonzero(inside & ~parent_inside).tolist()
            covered = np.concatenate([np.arange(tree.lo[x], tree.hi[x] + 1) for x in got])
            assert sorted(covered.tolist()) == list(range(lo, hi + 1))


# ------------------------------------------------------------------------------ coverage


def test_uniform_coverage_paper_example() -> None:
    """The paper's tree has P = (1/6, 2/6, 3/6, 2/6)."""
    tree = IntervalTree.from_nested(PAPER_TREE)
    assert uniform_coverage(tree) == pytest.approx([1 / 6, 2 / 6, 3 / 6, 2 / 6], abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_workload_coverage_of_all_ranges_equals_uniform_formula(seed: int) -> None:
    """Coverage from the list of all ranges with equal weights equals the closed-form uniform P."""
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, 30)
    all_ranges = [(a, b, 1.0) for a in range(1, 31) for b in range(a, 31)]
    assert workload_coverage(tree, all_ranges) == pytest.approx(uniform_coverage(tree), abs=1e-12)


def test_workload_validation_messages() -> None:
    """Bad query workloads are rejected with the owner's prefix."""
    tree = IntervalTree.complete(8, 2)
    with pytest.raises(ValueError, match="must satisfy 1 <= lo <= hi <= n = 8"):
        Workload.from_ranges(tree, [(3, 9, 1.0)])
    with pytest.raises(ValueError, match="LUE-DPTree: queries\\[0\\] weight"):
        Workload.from_ranges(tree, [(1, 2, -1.0)])
    with pytest.raises(ValueError, match="must not all be 0"):
        Workload.from_ranges(tree, [(1, 2, 0.0)])


# ------------------------------------------------------------------------------ budgets and errors


def test_paper_example_expected_errors() -> None:
    """The published figures, in the spec's analytic model σ² = 2/ε² (noise="laplace"):
    10.667 / 8.250 without BLUE, 6.667 / 5.357 with BLUE."""
    tree = IntervalTree.from_nested(PAPER_TREE)
    half = np.full(4, 0.5)
    skewed = np.array([1 / 3, 2 / 3, 2 / 3, 2 / 3])
    assert uniform_budgets(tree, 1.0) == pytest.approx(half)
    assert expected_query_error(tree, half, blue=False, noise="laplace") == pytest.approx(10.667, abs=1e-3)
    assert expected_query_error(tree, skewed, blue=False, noise="laplace") == pytest.approx(8.250, abs=1e-3)
    assert expected_query_error(tree, half, blue=True, noise="laplace") == pytest.approx(6.667, abs=1e-3)
    assert expected_query_error(tree, skewed, blue=True, noise="laplace") == pytest.approx(5.357, abs=1e-3)


def test_paper_example_errors_of_the_discrete_mechanism() -> None:
    """With the noise the mechanism adds (discrete Laplace, the default) the no-BLUE error is
    Σ P_x·2q/(1−q)² with q = e^{−ε_x} (10.447 for ε/2 per node, below the analytic 10.667), and
    BLUE with these variances is again below the canonical decomposition."""
    tree = IntervalTree.from_nested(PAPER_TREE)
    half = np.full(4, 0.5)
    q = np.exp(-0.5)
    discrete = float(uniform_coverage(tree).sum()) * 2 * q / (1 - q) ** 2
    assert MECHANISM_NOISE == "discrete_laplace"
    assert expected_query_error(tree, half, blue=False) == pytest.approx(discrete, rel=1e-12)
    assert expected_query_error(tree, half, blue=False) == pytest.approx(10.447, abs=1e-3)
    assert expected_query_error(tree, half, blue=True) < expected_query_error(tree, half, blue=False)
    assert expected_query_error(tree, half, blue=True) < expected_query_error(tree, half, blue=True, noise="laplace")


def test_node_variances_are_the_exact_discrete_laplace_variances() -> None:
    """node_variances gives Σ k²·pmf(k) of the discrete Laplace at scale 1/ε_x (summed over a
    range holding all but < 1e-30 of the mass), and 2/ε_x² for the analytic model."""
    eps = np.array([0.1, 0.5, 1.0, 3.0])
    k = np.arange(-2000, 2001)
    summed = [float((k.astype(float) ** 2 * discrete_laplace_pmf(k, 1 / e)).sum()) for e in eps]
    assert node_variances(eps) == pytest.approx(summed, rel=1e-10)
    assert node_variances(eps, "laplace") == pytest.approx(2 / eps**2, rel=1e-15)
    assert np.all(node_variances(eps) < 2 / eps**2)
    with pytest.raises(ValueError, match="LUE-DPTree: noise must be one of discrete_laplace, laplace"):
        node_variances(eps, "gaussian")
    with pytest.raises(ValueError, match="LUE-DPTree: budgets must be finite numbers > 0"):
        node_variances(np.array([1.0, 0.0]))


def test_huge_budgets_give_finite_blue_weights() -> None:
    """At ε_x >= 40 the sampler adds no noise and the exact variance underflows beyond ≈ 710; the
    floored variance keeps BLUE finite and it returns the (noise-free) counts."""
    tree = IntervalTree.complete(4, 2)
    eps = np.full(tree.size, 1000.0)
    assert np.all(node_variances(eps) > 0)
    counts = tree.node_counts(np.array([5, 0, 2, 9]))
    noisy = noisy_node_values(tree, counts, eps, 1)
    assert np.array_equal(noisy, counts)
    assert blue_estimates(tree, noisy, eps) == pytest.approx(counts, rel=1e-12)


def test_paper_example_optimal_budgets_from_the_formula() -> None:
    """The §9 formula gives root (1/3)^(1/3)/((1/3)^(1/3)+(7/3)^(1/3)) ≈ 0.343, not exactly 1/3.

    K_leaves = 2·(2/6 + 3/6 + 2/6) = 7/3 and (2P_root)^(1/3) = (1/3)^(1/3), so the root's share is
    1/(1 + 7^(1/3)) = 0.3433; the paper's (1/3, 2/3) is this rounded. The optimum's error
    K_root/ε² = ((1/3)^(1/3) + (7/3)^(1/3))³ ≈ 8.239 is just below the paper's 8.250."""
    tree = IntervalTree.from_nested(PAPER_TREE)
    eps = optimal_budgets(tree, 1.0)
    root = 1 / (1 + 7 ** (1 / 3))
    assert eps == pytest.approx([root, 1 - root, 1 - root, 1 - root], abs=1e-12)
    assert eps[0] == pytest.approx(1 / 3, abs=0.011)
    err = expected_query_error(tree, eps, blue=False, noise="laplace")
    assert err == pytest.approx(((1 / 3) ** (1 / 3) + (7 / 3) ** (1 / 3)) ** 3, rel=1e-12)
    assert err < expected_query_error(tree, np.array([1 / 3, 2 / 3, 2 / 3, 2 / 3]), blue=False, noise="laplace")


@pytest.mark.parametrize("seed", [10, 11, 12, 13])
def test_optimal_budgets_paths_sum_to_epsilon_and_beat_alternatives(seed: int) -> None:
    """Optimal budgets sum to ε on every path and have lower error (no BLUE, in the spec's model
    σ² = 2/ε² they minimise) than uniform budgets and than 200 random feasible allocations."""
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, 50)
    eps = 0.7
    opt = optimal_budgets(tree, eps)
    assert path_sums(tree, opt) == pytest.approx(np.full(tree.n, eps), rel=1e-12)
    best = expected_query_error(tree, opt, blue=False, noise="laplace")
    assert best < expected_query_error(tree, uniform_budgets(tree, eps), blue=False, noise="laplace")
    for _ in range(200):
        share = rng.uniform(0.05, 0.95, tree.size)
        alloc = np.empty(tree.size)
        remaining = np.empty(tree.size)
        remaining[0] = eps
        for s in tree.depth_slices():
            if s.start > 0:
                remaining[s] = remaining[tree.parent[s]] - alloc[tree.parent[s]]
            alloc[s] = np.where(tree.is_leaf[s], remaining[s], remaining[s] * share[s])
        assert best <= expected_query_error(tree, alloc, blue=False, noise="laplace") + 1e-12


def test_optimal_budgets_follow_a_supplied_workload() -> None:
    """With a workload of unit queries only, every leaf gets a larger share than under the
    uniform-query budgets, and the workload's error is lower."""
    tree = IntervalTree.complete(16, 2)
    points = [(v, v, 1.0) for v in range(1, 17)]
    p = 0.99 * workload_coverage(tree, points) + 0.01 * uniform_coverage(tree)
    eps = optimal_budgets(tree, 1.0, p)
    uniform_opt = optimal_budgets(tree, 1.0)
    assert np.all(eps[tree.is_leaf] > uniform_opt[tree.is_leaf])
    assert expected_query_error(tree, eps, blue=False, queries=points, noise="laplace") < expected_query_error(
        tree, uniform_opt, blue=False, queries=points, noise="laplace"
    )


@pytest.mark.parametrize("seed", [20, 21, 22])
def test_blue_error_for_all_ranges_workload_equals_uniform_formula(seed: int) -> None:
    """The exact BLUE error under 'all ranges, equal weight' equals the uniform-query closed form."""
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, 25)
    eps = optimal_budgets(tree, 1.0)
    all_ranges = [(a, b, 1.0) for a in range(1, 26) for b in range(a, 26)]
    got = expected_query_error(tree, eps, blue=True, queries=all_ranges)
    assert got == pytest.approx(expected_query_error(tree, eps, blue=True), rel=1e-10)
    assert expected_query_error(tree, eps, blue=True) < expected_query_error(tree, eps, blue=False)


# ------------------------------------------------------------------------------ BLUE


def _inverse_sd(eps: np.ndarray, noise: str) -> np.ndarray:
    """1/σ_x, written out independently of the module: ε/√2 (Laplace) or (1 − q)/√(2q)."""
    if noise == "laplace":
        return eps / np.sqrt(2)
    q = np.exp(-eps)
    return (1 - q) / np.sqrt(2 * q)


@pytest.mark.parametrize("noise", ["discrete_laplace", "laplace"])
@pytest.mark.parametrize("seed", [30, 31, 32, 33, 34])
def test_blue_equals_weighted_least_squares(seed: int, noise: str) -> None:
    """BLUE's two passes equal direct weighted least squares (numpy lstsq) on random trees, with
    the weights of either noise model; the default is the mechanism's (discrete) one."""
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, int(rng.integers(5, 40)))
    eps = optimal_budgets(tree, 1.0) if seed % 2 else rng.uniform(0.1, 2.0, tree.size)
    y = rng.normal(0, 10, tree.size)
    a = tree.incidence()
    sqrt_w = _inverse_sd(eps, noise)
    leaves, *_ = np.linalg.lstsq(a * sqrt_w[:, None], y * sqrt_w, rcond=None)
    assert blue_estimates(tree, y, eps, noise=noise) == pytest.approx(a @ leaves, abs=1e-8)
    if noise == MECHANISM_NOISE:
        assert blue_estimates(tree, y, eps) == pytest.approx(a @ leaves, abs=1e-8)


def test_blue_is_consistent_and_batched() -> None:
    """BLUE output satisfies parent = sum of children, and a batch equals column-by-column runs."""
    rng = np.random.default_rng(40)
    tree = random_tree(rng, 30)
    eps = optimal_budgets(tree, 1.0)
    y = rng.normal(0, 5, (tree.size, 3))
    batch = blue_estimates(tree, y, eps)
    check_consistent(tree, batch)
    for j in range(3):
        assert batch[:, j] == pytest.approx(blue_estimates(tree, y[:, j], eps), abs=1e-10)


# ------------------------------------------------------------------------------ release


def test_release_answers_and_report() -> None:
    """A release answers ranges by canonical decomposition of consistent estimates, reports a
    JSON-serialisable ε-DP guarantee, and keeps no raw counts."""
    tree = IntervalTree.from_fanouts(22, [3, 4, 2])
    values = np.random.default_rng(1).integers(1, 23, 500)
    result = lue_dptree(values, tree, LueParams(1.0), rng=7)
    check_consistent(tree, result.estimates)
    leaves = result.estimates[tree.leaf_index()]
    for lo, hi in [(1, 22), (3, 17), (5, 5), (9, 15)]:
        assert result.answer(lo, hi) == pytest.approx(leaves[lo - 1 : hi].sum(), abs=1e-8)
    report = json.loads(json.dumps(result.to_dict()))
    assert report["algorithm"] == "LUE-DPTree"
    assert report["guarantee"]["epsilon"] == 1.0 and report["guarantee"]["delta"] == 0.0
    assert report["guarantee"]["neighbours"] == "add or remove one element"
    assert report["guarantee"]["private"] is False  # seeded
    assert "discrete Laplace" in report["guarantee"]["text"] and "Mironov" in report["guarantee"]["text"]
    assert report["noise"]["distribution"] == "discrete_laplace"
    assert result.noisy.dtype == np.int64
    assert report["budgets"]["max_path_sum"] == pytest.approx(1.0)
    assert len(report["nodes"]) == tree.size
    assert report["expected_squared_error"]["value"] == pytest.approx(
        expected_query_error(tree, result.budgets, blue=True)
    )
    assert report["expected_squared_error"]["kind"] == "exact"
    assert not hasattr(result, "counts")


def test_release_without_blue_uses_raw_noisy_nodes_and_same_seed_same_output() -> None:
    """With blue=False answers use the raw noisy nodes; the same seed reproduces the release."""
    tree = IntervalTree.complete(16, 4)
    counts = np.arange(16)
    a = lue_dptree_counts(counts, tree, LueParams(0.5, budgets="uniform", blue=False), rng=3)
    b = lue_dptree_counts(counts, tree, LueParams(0.5, budgets="uniform", blue=False), rng=3)
    assert np.array_equal(a.noisy, b.noisy)
    assert np.array_equal(a.estimates, a.noisy)
    assert a.noisy.dtype == np.int64  # the raw release is integers (no floating-point side channel)
    assert a.budgets == pytest.approx(np.full(tree.size, 0.5 / 3))
    assert a.answer(1, 16) == a.noisy[0]
    assert a.answer(1, 8) == pytest.approx(a.noisy[1] + a.noisy[2])


def test_input_validation() -> None:
    """Parameters and inputs are validated with owner-prefixed messages that show no raw data."""
    tree = IntervalTree.complete(8, 2)
    with pytest.raises(ValueError, match="LueParams: epsilon must be a finite number > 0, got -1"):
        LueParams(-1)
    with pytest.raises(ValueError, match="LueParams: budgets must be one of optimal, uniform"):
        LueParams(1.0, budgets="equal")
    with pytest.raises(
        ValueError, match="LUE-DPTree: values must be integers in \\[1, n = 8\\]; some are outside"
    ) as info:
        lue_dptree(np.array([1, 2, 12345]), tree, LueParams(1.0), rng=0)
    assert "12345" not in str(info.value)
    with pytest.raises(ValueError, match="LUE-DPTree: counts must be 8 non-negative integers"):
        lue_dptree_counts(np.array([1, -1, 0, 0, 0, 0, 0, 0]), tree, LueParams(1.0), rng=0)
    with pytest.raises(ValueError, match="LUE-DPTree: budgets along some root-to-leaf path sum to more than epsilon"):
        check_budgets(tree, np.full(tree.size, 0.5), epsilon=1.0)
    with pytest.raises(ValueError, match="LUE-DPTree: budgets must be 15 finite numbers > 0"):
        check_budgets(tree, np.zeros(tree.size))


def _measured_mse(epsilon: float, blue: bool, trials: int = 20_000) -> tuple[float, float, IntervalTree, np.ndarray]:
    """Mean (over ``trials`` vectorised releases) of the per-release mean squared error over all
    ranges of a fixed random 12-value tree, its standard error, the tree and the budgets."""
    rng = np.random.default_rng(50)
    tree = random_tree(rng, 12)
    eps = optimal_budgets(tree, epsilon)
    counts = rng.integers(0, 50, tree.n)
    noisy = noisy_node_values(tree, tree.node_counts(counts), eps, np.random.default_rng(51), trials=trials)
    est = blue_estimates(tree, noisy, eps) if blue else noisy
    errors = []
    for a in range(1, tree.n + 1):
        for b in range(a, tree.n + 1):
            errors.append(est[tree.decompose(a, b)].sum(axis=0) - counts[a - 1 : b].sum())
    per_release = np.mean(np.square(errors), axis=0)
    return float(per_release.mean()), float(per_release.std(ddof=1) / np.sqrt(trials)), tree, eps


# |z| bound of a two-sided z-test at α = 1e-6 (a correct formula fails with probability 1e-6).
Z_CRIT = float(norm.ppf(1 - 1e-6 / 2))


@pytest.mark.parametrize("blue", [False, True])
def test_measured_mse_matches_expected_error(blue: bool) -> None:
    """The mean squared error of released answers over all ranges matches expected_query_error.

    20 000 independent releases (vectorised); the per-release mean squared error has a finite
    variance, so a z-test at α = 1e-6 (|z| <= 4.9) makes a false failure negligible. The test also
    checks power: the other formula (BLUE vs no BLUE) is rejected.
    """
    mean, se, tree, eps = _measured_mse(1.0, blue)
    expected = expected_query_error(tree, eps, blue=blue)
    other = expected_query_error(tree, eps, blue=not blue)
    assert abs(mean - expected) <= Z_CRIT * se, (mean, expected, se)
    assert abs(mean - other) > Z_CRIT * se, (mean, other, se)


@pytest.mark.parametrize("blue", [False, True])
def test_measured_mse_is_the_discrete_noise_error_not_the_continuous_one(blue: bool) -> None:
    """At ε = 3 (per-node ε_x around 1, where 2q/(1−q)² is well below 2/ε_x²) the measured error
    matches the discrete-Laplace prediction (the default) and the continuous-Laplace formula
    (noise="laplace") is rejected, by the same z-test at α = 1e-6 (measured |z| about 27)."""
    mean, se, tree, eps = _measured_mse(3.0, blue)
    discrete = expected_query_error(tree, eps, blue=blue)
    continuous = expected_query_error(tree, eps, blue=blue, noise="laplace")
    assert abs(mean - discrete) <= Z_CRIT * se, (mean, discrete, se)
    assert abs(mean - continuous) > Z_CRIT * se, (mean, continuous, se)


def test_noisy_node_values_are_integers_and_counts_must_be_integers() -> None:
    """The release adds integer noise to integer counts: int64 output (one or a batch of
    releases), float counts accepted only with integer values, and no count in the message."""
    tree = IntervalTree.complete(8, 2)
    eps = optimal_budgets(tree, 1.0)
    counts = tree.node_counts(np.arange(8))
    one = noisy_node_values(tree, counts, eps, 1)
    batch = noisy_node_values(tree, counts, eps, 1, trials=5)
    assert one.dtype == np.int64 and one.shape == (tree.size,)
    assert batch.dtype == np.int64 and batch.shape == (tree.size, 5)
    assert np.array_equal(noisy_node_values(tree, counts.astype(float), eps, 1), one)
    assert np.any(one != counts)  # all 15 noises 0 has probability below 1e-3 at these budgets
    with pytest.raises(ValueError, match="LUE-DPTree: node counts must be integers") as info:
        noisy_node_values(tree, counts + 0.25, eps, 1)
    assert "0.25" not in str(info.value)
    with pytest.raises(ValueError, match="LUE-DPTree: node counts must be 15 integers"):
        noisy_node_values(tree, counts[:-1], eps, 1)


def test_release_noise_is_the_discrete_laplace_with_the_node_budgets() -> None:
    """Per node, the noise of 40 000 releases passes a chi-square test at α = 1e-6 against the
    discrete Laplace pmf at scale 1/ε_x of that node, and (power) fails it against the pmf at
    scale 1/(2ε_x) — the "scale halved" mistake."""
    from tests.privacy.test_noise import symmetric_chisquare_pvalue

    tree = IntervalTree.complete(4, 2)
    eps = np.array([0.2, 0.3, 0.5, 0.5, 0.7, 0.8, 0.8])  # all different scales in one draw
    assert eps.shape == (tree.size,)
    counts = tree.node_counts(np.array([3, 0, 9, 1]))
    noise = noisy_node_values(tree, counts, eps, np.random.default_rng(70), trials=40_000) - counts[:, None]
    for x in range(tree.size):
        assert symmetric_chisquare_pvalue(noise[x], lambda k, x=x: discrete_laplace_pmf(k, 1 / eps[x])) > 1e-6
        assert symmetric_chisquare_pvalue(noise[x], lambda k, x=x: discrete_laplace_pmf(k, 0.5 / eps[x])) < 1e-6


@pytest.mark.parametrize("seed", [60, 61, 62])
def test_blue_error_never_exceeds_canonical_error_per_query(seed: int) -> None:
    """BLUE's variance is at most the canonical decomposition's for every single range (so the
    no-BLUE error is a valid upper bound for large domains)."""
    rng = np.random.default_rng(seed)
    tree = random_tree(rng, 20)
    eps = rng.uniform(0.1, 1.0, tree.size)
    for a in range(1, 21):
        for b in range(a, 21):
            q = [(a, b, 1.0)]
            assert expected_query_error(tree, eps, blue=True, queries=q) <= expected_query_error(
                tree, eps, blue=False, queries=q
            ) * (1 + 1e-9)


def test_large_domain_reports_error_bound() -> None:
    """Above the exact-BLUE size limit the release reports the no-BLUE error, marked as a bound."""
    from dphhh.privacy.offline.lue_dptree import EXACT_BLUE_ERROR_MAX_N

    tree = IntervalTree.complete(EXACT_BLUE_ERROR_MAX_N + 1, 16)
    result = lue_dptree_counts(np.zeros(tree.n, dtype=np.int64), tree, LueParams(1.0), rng=0)
    assert not result.expected_error_exact
    assert result.expected_error == pytest.approx(expected_query_error(tree, result.budgets, blue=False))
    assert result.to_dict()["expected_squared_error"]["kind"].startswith("upper bound")
    with pytest.raises(ValueError, match="needs an n x n covariance"):
        expected_query_error(tree, result.budgets, blue=True)


# ---------------------------------------------------------------------------------- memory estimate


@pytest.mark.parametrize("n, fanouts", [(1, 2), (2, 2), (1000, 16), (4097, 16), (12345, 7), (100, [3, 5, 7])])
def test_node_count_matches_the_built_tree(n: int, fanouts) -> None:
    """node_count predicts the size of the tree without building it."""
    from dphhh.privacy.offline.interval_tree import node_count

    tree = IntervalTree.complete(n, fanouts) if isinstance(fanouts, int) else IntervalTree.from_fanouts(n, fanouts)
    assert node_count(n, fanouts) == tree.size


@pytest.mark.parametrize("n, fanout, blue", [(1000, 16, True), (20_000, 4, False), (65_536, 16, True)])
def test_memory_estimate_is_within_a_factor_two_of_the_measured_peak(n: int, fanout: int, blue: bool) -> None:
    """lue_memory_bytes (public parameters only) is within a factor 2 of the peak allocation that
    tracemalloc measures while building the tree and releasing it (incl. BLUE's n x n matrices)."""
    import tracemalloc

    from dphhh.privacy.offline.lue_dptree import lue_memory_bytes

    values = np.random.default_rng(0).integers(1, n + 1, 2000)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        tree = IntervalTree.complete(n, fanout)
        lue_dptree(values, tree, LueParams(epsilon=1.0, blue=blue), rng=1).to_dict()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    estimate = lue_memory_bytes(n, fanout, blue=blue)
    assert peak / 2 <= estimate <= 2 * peak, (estimate, peak)
