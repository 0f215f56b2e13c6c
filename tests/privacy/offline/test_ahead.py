"""Tests for AHEAD (privacy.offline.ahead) and the HIO / Uni baselines (range_baselines).

Randomised tests use seeded generators, so they are deterministic; tolerances are set at ≥ 5
standard deviations of the quantity checked, so a random seed would fail them with negligible
probability.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest

from dphhh.privacy.offline.ahead import (
    AheadParams,
    ahead_1d,
    ahead_2d,
    ahead_lle,
    max_entropy_atoms,
    norm_sub,
    weighted_average,
)
from dphhh.privacy.offline.ldp import grr_variance, oue_variance
from dphhh.privacy.offline.range_baselines import HioParams, hio, uniform_guess

HUGE = 60.0  # e^60 ≈ 1e26: GRR keeps every value (keep probability rounds to 1)


# ------------------------------------------------------------------------------------------
# Post-processing pieces
# ------------------------------------------------------------------------------------------


def test_norm_sub_worked_example() -> None:
    """Norm-Sub zeroes negatives and removes the excess evenly: [0.5, −0.2, 0.9] → [0.3, 0, 0.7]."""
    assert norm_sub(np.array([0.5, -0.2, 0.9])) == pytest.approx([0.3, 0.0, 0.7], abs=1e-12)


def test_norm_sub_properties_on_random_vectors() -> None:
    """Norm-Sub outputs are non-negative, sum to 1, and keep a valid distribution unchanged."""
    rng = np.random.default_rng(1)
    for _ in range(200):
        x = rng.normal(0.05, 0.2, size=rng.integers(2, 40))
        out = norm_sub(x)
        assert np.all(out >= 0) and out.sum() == pytest.approx(1.0, abs=1e-12)
    dist = rng.dirichlet(np.ones(7))
    assert norm_sub(dist) == pytest.approx(dist, abs=1e-12)
    assert norm_sub(np.array([-1.0, -2.0])) == pytest.approx([0.5, 0.5])


def test_weighted_average_is_inverse_variance_optimal() -> None:
    """The combination equals (V_c f + V_n S)/(V_n + V_c), has variance V_n V_c/(V_n + V_c), and
    its empirical variance over simulated estimates matches that value (within 3%)."""
    value, var = weighted_average(np.array([0.3]), 2.0, np.array([0.5]), np.array([6.0]))
    assert value[0] == pytest.approx((6.0 * 0.3 + 2.0 * 0.5) / 8.0)
    assert var[0] == pytest.approx(1.5)
    rng = np.random.default_rng(2)
    own = 1.0 + rng.normal(0, math.sqrt(2.0), 400_000)
    kids = 1.0 + rng.normal(0, math.sqrt(6.0), 400_000)
    combined, _ = weighted_average(own, 2.0, kids, np.full(own.size, 6.0))
    assert combined.var() == pytest.approx(1.5, rel=0.03)  # sd of the estimate ≈ 0.2%
    same, _ = weighted_average(np.array([0.4]), 1.0, np.array([0.4]), np.array([3.0]))
    assert same[0] == pytest.approx(0.4)


# ------------------------------------------------------------------------------------------
# Range answering by the fewest covering nodes
# ------------------------------------------------------------------------------------------


def _min_dyadic_cover(lo: int, hi: int, size: int) -> int:
    """Brute force: fewest aligned dyadic intervals partitioning [lo, hi] (dynamic programming)."""
    best = {hi + 1: 0}
    for x in range(hi, lo - 1, -1):
        options = []
        length = 1
        while length <= size:
            if x % length == 0 and x + length - 1 <= hi:
                options.append(1 + best[x + length])
            length *= 2
        best[x] = min(options)
    return best[lo]


def _skewed_values(n: int, size: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(np.round(rng.normal(size / 3, size / 8, n)), 0, size - 1).astype(np.int64)


def test_range_answer_uses_fewest_covering_nodes_1d() -> None:
    """For every range of a 16-value domain, the covering has the brute-force minimum number of
    dyadic nodes, partitions the range, and the answer is the sum of those nodes' values."""
    est = ahead_1d(_skewed_values(5000, 16, 3), 16, AheadParams(1.0), rng=4)
    for lo in range(16):
        for hi in range(lo, 16):
            nodes = est.covering(lo, hi)
            assert len(nodes) == _min_dyadic_cover(lo, hi, 16)
            cells = []
            for level, (i,) in nodes:
                width = 16 >> level
                cells.extend(range(i * width, (i + 1) * width))
            assert sorted(cells) == list(range(lo, hi + 1))
            total = sum(est.node_value(level, idx) for level, idx in nodes)
            assert est.answer(lo, hi) == pytest.approx(total, abs=1e-12)


def test_range_answer_covering_2d_is_a_maximal_partition() -> None:
    """In 2-D every rectangle of an 8×8 domain is covered by disjoint quadtree nodes whose union
    is the rectangle and none of whose parents lies inside it (hence the fewest nodes)."""
    rng = np.random.default_rng(5)
    values = rng.integers(0, 8, size=(4000, 2))
    est = ahead_2d(values, (8, 8), AheadParams(1.0), rng=6)
    for (a, b), (c, d) in itertools.product(itertools.combinations_with_replacement(range(8), 2), repeat=2):
        nodes = est.covering((a, b), (c, d))
        cells = []
        for level, (i, j) in nodes:
            w = 8 >> level
            cells.extend((x, y) for x in range(i * w, (i + 1) * w) for y in range(j * w, (j + 1) * w))
            if level > 0:
                pw = 2 * w
                pi, pj = i // 2, j // 2
                assert not (a <= pi * pw and (pi + 1) * pw - 1 <= b and c <= pj * pw and (pj + 1) * pw - 1 <= d)
        assert sorted(cells) == [(x, y) for x in range(a, b + 1) for y in range(c, d + 1)]
        total = sum(est.node_value(level, idx) for level, idx in nodes)
        assert est.answer((a, b), (c, d)) == pytest.approx(total, abs=1e-12)


# ------------------------------------------------------------------------------------------
# AHEAD behaviour
# ------------------------------------------------------------------------------------------


def test_ahead_exact_when_noise_is_negligible() -> None:
    """With ε = 60 (GRR keeps every value) and all users on one value, every range answer and
    the frequencies are exact, and only the path to that value is split."""
    est = ahead_1d(np.full(3000, 11), 16, AheadParams(HUGE), rng=7)
    for lo in range(16):
        for hi in range(lo, 16):
            assert est.answer(lo, hi) == pytest.approx(1.0 if lo <= 11 <= hi else 0.0, abs=1e-12)
    assert est.frequencies() == pytest.approx(np.eye(16)[11], abs=1e-12)
    assert [layer["new_nodes"] for layer in est.summary["layers"]] == [2, 2, 2, 2]


def test_ahead_close_to_truth_with_negligible_noise_many_users() -> None:
    """With ε = 60 the only error is the sampling of users into groups: every range of a
    skewed 64-value distribution is within 0.02 (> 5 sampling standard deviations) of the truth."""
    values = _skewed_values(120_000, 64, 8)  # 20 000 users per group: sampling sd <= 0.0036
    true = np.bincount(values, minlength=64) / values.size
    est = ahead_1d(values, 64, AheadParams(HUGE), rng=9)
    errors = [abs(est.answer(lo, hi) - true[lo : hi + 1].sum()) for lo in range(0, 64, 3) for hi in range(lo, 64, 5)]
    assert max(errors) < 0.02


def test_threshold_and_oracle_choice_follow_the_spec() -> None:
    """Each layer uses GRR iff |E_i| − 2 < 3e^ε, and θ = √((B+1)·Var) with that oracle's variance
    for the layer's group size; forcing OUE gives θ = √(3 · 4e^ε/(n(e^ε−1)²))."""
    values = _skewed_values(20_000, 64, 10)
    est = ahead_1d(values, 64, AheadParams(1.0), rng=11)
    for layer in est.summary["layers"]:
        nodes, n = layer["nodes"], layer["users"]
        grr = nodes - 2 < 3 * math.e
        assert layer["oracle"] == ("grr" if grr else "oue")
        var = grr_variance(1.0, n, nodes) if grr else oue_variance(1.0, n)
        assert layer["theta"] == pytest.approx(math.sqrt(3 * var))
    forced = ahead_1d(values, 64, AheadParams(1.0, oracle="oue"), rng=11)
    for layer in forced.summary["layers"]:
        e = math.e
        assert layer["theta"] == pytest.approx(math.sqrt(3 * 4 * e / (layer["users"] * (e - 1) ** 2)))


def test_nodes_below_threshold_are_never_split() -> None:
    """A node is split only when its layer estimate exceeds θ: with all mass in [0, 3] of 64
    values and ε = 60, only the four nodes on the path to that block split at each layer."""
    values = np.repeat(np.arange(4), 2000)
    est = ahead_1d(values, 64, AheadParams(HUGE), rng=12)
    # Layer sizes: root splits (2), then one node per level splits until the block [0,3]
    # (level 4), after which its descendants with mass keep splitting.
    new = [layer["new_nodes"] for layer in est.summary["layers"]]
    assert new == [2, 2, 2, 2, 2, 4]
    assert est.answer(0, 3) == pytest.approx(1.0) and est.answer(4, 63) == pytest.approx(0.0, abs=1e-12)


def test_ahead_beats_hio_and_uni_on_skewed_data() -> None:
    """On skewed 1-D data (N = 50 000, |D| = 64, ε = 1) AHEAD's MSE over 200 random ranges is
    below HIO's and Uni's (averaged over 3 runs)."""
    values = _skewed_values(50_000, 64, 13)
    true = np.bincount(values, minlength=64) / values.size
    qrng = np.random.default_rng(14)
    queries = [tuple(sorted(qrng.integers(0, 64, 2))) for _ in range(200)]

    def mse(est) -> float:
        return float(np.mean([(est.answer(a, b) - true[a : b + 1].sum()) ** 2 for a, b in queries]))

    ahead = np.mean([mse(ahead_1d(values, 64, AheadParams(1.0), rng=s)) for s in range(3)])
    hio_mse = np.mean([mse(hio(values, [64], HioParams(1.0), rng=s)) for s in range(3)])
    assert ahead < hio_mse
    assert ahead < mse(uniform_guess([64]))


def test_ahead_2d_shapes_padding_and_exactness() -> None:
    """2-D AHEAD pads a 12×16 domain to 16×16, returns 12×16 frequencies, and with ε = 60 and
    all users on one point answers every tested rectangle exactly."""
    values = np.tile([5, 9], (2000, 1))
    est = ahead_2d(values, (12, 16), AheadParams(HUGE), rng=15)
    freq = est.frequencies()
    assert freq.shape == (12, 16)
    assert freq[5, 9] == pytest.approx(1.0) and freq.sum() == pytest.approx(1.0)
    assert est.answer((0, 11), (0, 15)) == pytest.approx(1.0)
    assert est.answer((5, 5), (0, 8)) == pytest.approx(0.0, abs=1e-12)
    assert est.answer((4, 6), (9, 12)) == pytest.approx(1.0)
    assert est.summary["fanout"] == 4 and est.summary["padded_side"] == 16


def test_ahead_2d_noisy_full_domain_and_accuracy() -> None:
    """Noisy 2-D AHEAD (ε = 1) answers the full domain with ≈1 and beats Uni on random rectangles."""
    rng = np.random.default_rng(16)
    values = np.clip(np.round(rng.laplace(16, 3, size=(40_000, 2))), 0, 31).astype(np.int64)
    hist = np.zeros((32, 32))
    np.add.at(hist, (values[:, 0], values[:, 1]), 1)
    hist /= values.shape[0]
    est = ahead_2d(values, (32, 32), AheadParams(1.0), rng=17)
    assert est.answer((0, 31), (0, 31)) == pytest.approx(1.0, abs=0.05)
    uni = uniform_guess((32, 32))
    qs = [(tuple(sorted(rng.integers(0, 32, 2))), tuple(sorted(rng.integers(0, 32, 2)))) for _ in range(100)]

    def err(e) -> float:
        return float(np.mean([(e.answer(a, b) - hist[a[0] : a[1] + 1, b[0] : b[1] + 1].sum()) ** 2 for a, b in qs]))

    assert err(est) < err(uni)


def test_max_entropy_matches_pairwise_tables_and_is_product_for_independence() -> None:
    """IPF reproduces the given pairwise 2×2 tables; for independent attributes it returns the
    product distribution."""
    marg = [0.3, 0.6, 0.5]
    tables = {}
    for a, c in itertools.combinations(range(3), 2):
        pa = np.array([1 - marg[a], marg[a]])
        pc = np.array([1 - marg[c], marg[c]])
        tables[(a, c)] = np.outer(pa, pc)
    atoms = max_entropy_atoms(3, tables)
    assert atoms[1, 1, 1] == pytest.approx(0.3 * 0.6 * 0.5, abs=1e-9)
    dependent = {
        (0, 1): np.array([[0.5, 0.0], [0.0, 0.5]]),
        (0, 2): np.array([[0.25, 0.25], [0.25, 0.25]]),
        (1, 2): np.array([[0.25, 0.25], [0.25, 0.25]]),
    }
    atoms = max_entropy_atoms(3, dependent)
    for (a, c), table in dependent.items():
        other = tuple(k for k in range(3) if k not in (a, c))
        assert atoms.sum(axis=other) == pytest.approx(table, abs=1e-9)


def test_lle_3d_answers_and_shape() -> None:
    """3-D LLE builds 3 pair trees on disjoint user groups (sizes sum to N) and, with ε = 60 on
    independent attributes, answers 3-D boxes within 0.02 of the truth."""
    rng = np.random.default_rng(18)
    values = rng.integers(0, 16, size=(240_000, 3))  # 20 000 users per layer group: sd <= 0.0036
    est = ahead_lle(values, (16, 16, 16), AheadParams(HUGE), rng=19)
    assert sorted(est.trees) == [(0, 1), (0, 2), (1, 2)]
    assert sum(est.users.values()) == 240_000
    for box in [((0, 7), (4, 11), (2, 15)), ((3, 3), (0, 15), (0, 9)), ((0, 15), (0, 15), (0, 15))]:
        inside = np.all([(values[:, k] >= lo) & (values[:, k] <= hi) for k, (lo, hi) in enumerate(box)], axis=0)
        assert est.answer(*box) == pytest.approx(inside.mean(), abs=0.02)
    json.dumps(est.to_dict())


def test_to_dict_is_json_and_states_the_guarantee() -> None:
    """to_dict is JSON-serialisable and names the algorithm, ε and the local-DP model."""
    est = ahead_1d(_skewed_values(2000, 16, 20), 16, AheadParams(0.5), rng=21)
    d = json.loads(json.dumps(est.to_dict()))
    assert d["algorithm"] == "AHEAD-1D"
    assert d["guarantee"] == {"epsilon": 0.5, "model": "local DP, each user's value, one report per user"}
    assert len(d["summary"]["layers"]) == 4
    h = json.loads(json.dumps(hio(_skewed_values(2000, 16, 20), [16], HioParams(0.5), rng=1).to_dict()))
    assert h["algorithm"] == "HIO" and h["guarantee"]["epsilon"] == 0.5


def test_hio_and_uni_interfaces() -> None:
    """HIO answers the full range with 1 (root) and Uni answers with the range's volume share."""
    values = _skewed_values(3000, 64, 22)
    h = hio(values, [64], HioParams(1.0, sampling="aggregate"), rng=23)
    assert h.answer(0, 63) == pytest.approx(1.0)
    assert len(h.levels) == 4  # 64 = 4^3: root + 3 levels
    u = uniform_guess([64, 32])
    assert u.answer((0, 15), (0, 7)) == pytest.approx(0.25 * 0.25)


def test_validation_messages_are_prefixed() -> None:
    """Bad parameters and queries raise ValueError prefixed with the owning object."""
    with pytest.raises(ValueError, match="^AheadParams: epsilon"):
        AheadParams(-1.0)
    with pytest.raises(ValueError, match="^AheadParams: oracle"):
        AheadParams(1.0, oracle="rappor")
    with pytest.raises(ValueError, match="^HioParams: branching"):
        HioParams(1.0, branching=1)
    with pytest.raises(ValueError, match="^AHEAD-1D: values"):
        ahead_1d(np.array([0, 16]), 16, AheadParams(1.0))
    est = ahead_1d(np.arange(16), 16, AheadParams(1.0), rng=1)
    with pytest.raises(ValueError, match="^AHEAD-1D: range"):
        est.answer(5, 3)


# ------------------------------------------------------------------------------------------
# memory estimate (the CLI's guard, stream/cli/memory.py)
# ------------------------------------------------------------------------------------------


def _traced_peak(run) -> int:
    import tracemalloc

    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        run()
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize(
    "sizes, branching",
    [([1 << 16], 2), ([3**10], 3), ([512, 512], 2), ([1024, 1000], 2), ([256, 256], 4), ([128, 128, 128], 2)],
)
def test_memory_estimate_is_within_a_factor_two_of_the_measured_peak(sizes: list[int], branching: int) -> None:
    """ahead_memory_bytes (public parameters only) is within a factor 2 of the peak numpy allocation
    that tracemalloc measures, on domains where the grids dominate (few records, all in one cell)."""
    from dphhh.privacy.offline.ahead import ahead_memory_bytes, ahead_nd

    values = np.zeros((2000, len(sizes)), dtype=np.int64)
    values = values[:, 0] if len(sizes) == 1 else values
    fn = ahead_lle if len(sizes) > 2 else ahead_nd
    peak = _traced_peak(lambda: fn(values, sizes, AheadParams(1.0, branching=branching), rng=1))
    estimate = ahead_memory_bytes(sizes, branching)
    assert peak / 2 <= estimate <= 2 * peak, (estimate, peak)


def test_memory_estimate_of_the_issue_case_is_hundreds_of_gib() -> None:
    """Two 16-bit-ish columns are both padded to 65536: the dense grid alone is 8 * 2^32 bytes."""
    from dphhh.privacy.offline.ahead import ahead_memory_bytes

    assert ahead_memory_bytes([65536, 1501], 2) > 8 * 2**32
    assert ahead_memory_bytes([65536, 1501], 2) == ahead_memory_bytes([65536, 65536], 2)
    assert ahead_memory_bytes([64], 2) < 1 << 20
