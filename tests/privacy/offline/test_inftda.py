"""Tests of InfTDA (docs/ALGORITHMS.md §7): zCDP conversion, IntOPT, and the TopDown release."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest

from dphhh.privacy.offline.inftda import (
    InfTDAParams,
    PathDomain,
    inftda,
    inftda_from_counts,
    noisy_counts,
)
from dphhh.privacy.offline.intopt import int_opt
from dphhh.privacy.offline.zcdp import epsilon_from_rho, rho_from_epsilon_delta
from dphhh.privacy.randomness import SeededRandomSource
from dphhh.sketches.specs import parse_hierarchy

PARAMS = InfTDAParams(epsilon=1.0, delta=1e-6)


# --------------------------------------------------------------------------------------------
# zCDP conversion
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [0.01, 0.5, 1.0, 4.0, 20.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-6, 0.01])
def test_rho_epsilon_round_trip(epsilon: float, delta: float) -> None:
    """Converting (ε, δ) to ρ and back gives ε again, never more."""
    rho = rho_from_epsilon_delta(epsilon, delta)
    back = epsilon_from_rho(rho, delta)
    assert back <= epsilon
    assert back == pytest.approx(epsilon, rel=1e-12)
    assert rho_from_epsilon_delta(epsilon_from_rho(0.3, delta), delta) == pytest.approx(0.3, rel=1e-12)


def test_rho_matches_the_spec_formula() -> None:
    """ρ equals (√(ln(1/δ)+ε) − √(ln(1/δ)))² and ε(ρ, δ) = ρ + 2√(ρ ln(1/δ))."""
    log_term = math.log(1e6)
    expected = (math.sqrt(log_term + 1.0) - math.sqrt(log_term)) ** 2
    assert rho_from_epsilon_delta(1.0, 1e-6) == pytest.approx(expected, rel=1e-9)
    assert epsilon_from_rho(0.5, 1e-6) == pytest.approx(0.5 + 2 * math.sqrt(0.5 * log_term), rel=1e-12)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: rho_from_epsilon_delta(-1, 1e-6), "zCDP: epsilon must be a finite number > 0, got -1"),
        (lambda: rho_from_epsilon_delta(1, 0), "zCDP: delta must be a number with 0 < delta < 1, got 0"),
        (lambda: epsilon_from_rho(float("nan"), 1e-6), "zCDP: rho must be a finite number > 0"),
        (lambda: epsilon_from_rho(1, 1.5), "zCDP: delta must be a number with 0 < delta < 1"),
    ],
)
def test_zcdp_validation(call, message: str) -> None:
    """Invalid conversion arguments raise a ValueError naming the argument."""
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call()


# --------------------------------------------------------------------------------------------
# IntOPT
# --------------------------------------------------------------------------------------------


def _brute_force_optimum(x: np.ndarray, c: int) -> int:
    """min ‖y − x‖∞ over all compositions y of c into len(x) non-negative integer parts."""
    k = len(x)
    best = None
    for cuts in itertools.combinations(range(c + k - 1), k - 1):  # stars and bars
        bounds = (-1,) + cuts + (c + k - 1,)
        y = np.array([bounds[i + 1] - bounds[i] - 1 for i in range(k)])
        dist = int(np.abs(y - x).max())
        best = dist if best is None else min(best, dist)
    assert best is not None
    return best


def _feasibility_optimum(x: np.ndarray, c: int) -> int:
    """The optimum by the feasibility criterion: smallest t with ∃ y ∈ [max(0, x−t), x+t], Σy = c."""
    t = 0
    while True:
        if np.all(x + t >= 0) and np.maximum(x - t, 0).sum() <= c <= (x + t).sum():
            return t
        t += 1


def test_int_opt_matches_brute_force_on_all_small_inputs() -> None:
    """On every small input (k <= 4, c <= 6, random x̃ in [-4, 8]) IntOPT is feasible and optimal."""
    rng = np.random.default_rng(7)
    checked = 0
    for k in range(1, 5):
        for c in range(0, 7):
            for _ in range(25):
                x = rng.integers(-4, 9, size=k)
                y = int_opt(x, c)
                assert y.dtype == np.int64 and y.shape == (k,)
                assert int(y.sum()) == c and np.all(y >= 0), (x, c, y)
                assert int(np.abs(y - x).max()) == _brute_force_optimum(x, c), (x, c, y)
                checked += 1
    assert checked == 4 * 7 * 25


def test_int_opt_is_optimal_on_large_noisy_vectors() -> None:
    """For 256-cell noisy vectors and targets far from their sum, IntOPT reaches the optimum."""
    rng = np.random.default_rng(11)
    for _ in range(200):
        x = rng.integers(0, 40, size=256) * (rng.random(256) < 0.1) + rng.integers(-30, 31, size=256)
        c = int(rng.integers(0, 3000))
        y = int_opt(x, c)
        assert int(y.sum()) == c and np.all(y >= 0)
        assert int(np.abs(y - x).max()) == _feasibility_optimum(x, c)


def test_int_opt_worked_examples_follow_the_spec_walk() -> None:
    """Hand-traced examples of the spec's walk: the smallest cells are lowered (zeroed) first."""
    # x̃ = [0, 3, 10], c = 10: z = [0, -1, -1], t = 1, surplus 1; the walk at t = 1 cannot lower,
    # t -> 2 and the walk lowers the smaller cell (3) first: y = [0, 1, 9].
    assert int_opt(np.array([0, 3, 10]), 10).tolist() == [0, 1, 9]
    # x̃ = [-2, 1, 5, 6], c = 6: z = [2, -1, -1, -1], t = 2, surplus 3; walk lowers 5 and 6 to -2
    # (surplus 1), t -> 3, the walk lowers 5 again: y = [0, 0, 2, 4].
    assert int_opt(np.array([-2, 1, 5, 6]), 6).tolist() == [0, 0, 2, 4]
    assert int_opt(np.array([5, -3, 7]), 0).tolist() == [0, 0, 0]
    assert int_opt(np.array([-3, -3]), 4).tolist() == [2, 2]


def test_int_opt_preserves_the_order_of_noisy_counts() -> None:
    """A cell with a strictly smaller noisy count never gets a larger result (small cells go first)."""
    rng = np.random.default_rng(5)
    for _ in range(300):
        x = rng.integers(-10, 30, size=int(rng.integers(2, 40)))
        y = int_opt(x, int(rng.integers(0, 400)))
        order = np.argsort(x, kind="stable")
        xs, ys = x[order], y[order]
        strictly = xs[1:] > xs[:-1]
        assert np.all(ys[1:][strictly] >= ys[:-1][strictly]), (x, y)


@pytest.mark.parametrize(
    "x, c, message",
    [
        ([1, 2], -1, "IntOPT: c must be an integer >= 0, got -1"),
        ([1, 2], 2.5, "IntOPT: c must be an integer >= 0, got 2.5"),
        ([1.5, 2], 3, "IntOPT: x_tilde must contain integers"),
        ([], 3, "IntOPT: x_tilde must be a non-empty 1-D array"),
        ([[1, 2]], 3, "IntOPT: x_tilde must be a non-empty 1-D array"),
    ],
)
def test_int_opt_validation(x, c, message: str) -> None:
    """Invalid IntOPT inputs raise a ValueError prefixed by IntOPT."""
    with pytest.raises(ValueError, match=message):
        int_opt(np.array(x), c)


# --------------------------------------------------------------------------------------------
# InfTDA: parameters
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "InfTDA: give epsilon and delta, or rho"),
        ({"epsilon": 1.0}, "InfTDA: give epsilon and delta, or rho"),
        ({"epsilon": -1, "delta": 1e-6}, "InfTDA: epsilon must be a finite number > 0, got -1"),
        ({"epsilon": 1, "delta": 1.0}, "InfTDA: delta must be a number with 0 < delta < 1, got 1.0"),
        ({"rho": 0.1, "epsilon": 1.0}, "InfTDA: give either rho or epsilon"),
        ({"rho": 0}, "InfTDA: rho must be a finite number > 0, got 0"),
        ({"rho": 0.1, "neighbours": "bounded"}, "InfTDA: neighbours must be one of add_remove, substitution"),
        ({"rho": 0.1, "contribution": 0}, "InfTDA: contribution must be an integer >= 1, got 0"),
        ({"rho": 0.1, "root_share": 1.0}, "InfTDA: root_share must be a number with 0 < root_share < 1"),
        (
            {"rho": 0.1, "neighbours": "substitution", "root_share": 0.2},
            "InfTDA: root_share must be None under substitution",
        ),
    ],
)
def test_params_validation(kwargs: dict, message: str) -> None:
    """Invalid parameters are refused at construction with an InfTDA-prefixed message."""
    with pytest.raises(ValueError, match=message):
        InfTDAParams(**kwargs)


def test_calibration_add_remove_splits_rho_and_rounds_sigma_up() -> None:
    """Under add/remove the root and the levels share ρ exactly and σ² >= m²/(2ρ_part), within 1/1024."""
    params = InfTDAParams(rho=0.3, contribution=3, root_share=0.25)
    cal = params.calibration(4)
    assert cal.root_rho == pytest.approx(0.075) and cal.level_rho == pytest.approx(0.05625)
    assert cal.root_rho + 4 * cal.level_rho == pytest.approx(0.3, rel=1e-12)
    for sigma2, part in ((cal.root_sigma2, Fraction(0.3) / 4), (cal.level_sigma2, Fraction(0.3) * 3 / 16)):
        exact = Fraction(9) / (2 * part)
        assert isinstance(sigma2, Fraction) and exact <= sigma2 < exact + Fraction(1, 1024)
    default = InfTDAParams(rho=0.3).calibration(2)
    assert default.root_rho == pytest.approx(0.1) and default.level_rho == pytest.approx(0.1)


def test_calibration_substitution_keeps_root_exact_with_sqrt2_sensitivity() -> None:
    """Under substitution the root is not noised and each level uses Δ₂ = m·√2 with ρ/h."""
    cal = InfTDAParams(rho=0.2, neighbours="substitution", contribution=2).calibration(4)
    assert cal.root_sigma2 is None and cal.root_rho is None
    assert cal.delta2 == pytest.approx(2 * math.sqrt(2))
    exact = Fraction(8) / (2 * (Fraction(0.2) / 4))
    assert exact <= cal.level_sigma2 < exact + Fraction(1, 1024)


def test_epsilon_delta_params_use_the_converted_rho() -> None:
    """Params given as (ε, δ) carry ρ(ε, δ) and report the same ε back."""
    assert PARAMS.total_rho == rho_from_epsilon_delta(1.0, 1e-6)
    assert PARAMS.implied_epsilon == pytest.approx(1.0)
    assert InfTDAParams(rho=0.5).implied_epsilon is None


# --------------------------------------------------------------------------------------------
# InfTDA: the release
# --------------------------------------------------------------------------------------------


def _ipv4_values(rng: np.random.Generator, n: int) -> np.ndarray:
    """Addresses concentrated in a few /8s and /16s (skewed), as uint32."""
    first = rng.choice([10, 172, 192, 8], size=n, p=[0.5, 0.25, 0.2, 0.05]).astype(np.uint32)
    second = rng.choice([0, 1, 2, 168], size=n, p=[0.55, 0.25, 0.15, 0.05]).astype(np.uint32)
    return (first << 24) | (second << 16) | rng.integers(0, 4, size=n).astype(np.uint32) << 8


def _true_counts(values: np.ndarray, hierarchy, level: int) -> dict[int, int]:
    keys, counts = np.unique(hierarchy.keys(values, level), return_counts=True)
    return dict(zip(keys.tolist(), counts.tolist()))


def test_release_is_integer_non_negative_and_consistent() -> None:
    """Every released count is a positive int and each kept parent equals the sum of its kept children."""
    hierarchy = parse_hierarchy("ipv4:8,16,24")
    values = _ipv4_values(np.random.default_rng(1), 3000)
    for seed in range(5):
        result = inftda(values, hierarchy, PARAMS, rng=seed)
        assert isinstance(result.root, int) and result.root >= 0
        parents = {0: result.root}
        for level in range(1, hierarchy.h + 1):
            counts = result.levels[level - 1]
            assert all(isinstance(c, int) and c > 0 for c in counts.values())
            sums: dict[int, int] = {}
            for key, c in counts.items():
                parent = 0 if level == 1 else hierarchy.ancestor(key, level, level - 1)
                assert parent in parents, "a kept child has a parent that was not kept"
                sums[parent] = sums.get(parent, 0) + c
            assert sums == {p: c for p, c in parents.items() if c > 0}
            parents = counts


def test_max_error_over_100_runs_is_within_the_derived_bound() -> None:
    """Over 100 seeded runs no prefix's error exceeds error_bound(β) at β = 1e-6, and the bound is informative."""
    # Flakiness: each run exceeds its bound with probability <= β = 1e-6 (union bound, loose by the
    # factor 2 and the union over all noised cells), so 100 runs fail together with probability
    # <= 1e-4; a failure means the bound or the implementation is wrong.
    hierarchy = parse_hierarchy("ipv4:4,8,12")
    rng = np.random.default_rng(2)
    first = rng.choice([10, 11, 172, 192], size=4000, p=[0.4, 0.3, 0.2, 0.1]).astype(np.uint32)
    values = (first << 24) | (rng.integers(0, 3, size=4000).astype(np.uint32) << 20)
    truth = [{0: values.size}] + [_true_counts(values, hierarchy, level) for level in (1, 2, 3)]
    worst = [0, 0, 0, 0]
    for seed in range(100):
        result = inftda(values, hierarchy, PARAMS, rng=seed)
        bound = result.error_bound(1e-6)
        released = [{0: result.root}] + list(result.levels)
        for level in range(4):
            keys = set(truth[level]) | set(released[level])
            err = max(abs(released[level].get(k, 0) - truth[level].get(k, 0)) for k in keys)
            assert err <= bound[level], (seed, level, err, bound)
            worst[level] = max(worst[level], err)
    print(f"bound at beta=1e-6: {bound}, worst error over 100 runs: {worst}")
    assert bound[0] < bound[1] < bound[2] < bound[3] < max(truth[3].values())  # non-vacuous
    assert min(worst) > 0  # the noise is really there at every level


def test_error_bound_follows_the_derivation() -> None:
    """E_0 = B_0 and E_ℓ = E_{ℓ−1} + 2 B_ℓ with B = ⌊σ √(2 ln(2 N L / β))⌋ from the recorded draws."""
    hierarchy = parse_hierarchy("ipv4:8,16")
    result = inftda(_ipv4_values(np.random.default_rng(3), 500), hierarchy, PARAMS, rng=4)
    cal = result.calibration
    sigma = math.sqrt(float(cal.level_sigma2))
    assert result.noised[0] == 1 and result.noised[1] == 256
    assert result.noised[2] == 256 * len(result.levels[0])
    b = [math.floor(sigma * math.sqrt(2 * math.log(2 * n * 3 / 0.01))) for n in result.noised]
    assert result.error_bound(0.01) == (b[0], b[0] + 2 * b[1], b[0] + 2 * b[1] + 2 * b[2])
    with pytest.raises(ValueError, match="InfTDA: beta must be a number with 0 < beta < 1"):
        result.error_bound(0)


def test_release_replays_from_the_audited_noise_core() -> None:
    """InfTDA's output equals noisy_counts + IntOPT applied by hand in the documented draw order."""
    hierarchy = parse_hierarchy("ipv4:8")
    values = _ipv4_values(np.random.default_rng(5), 800)
    result = inftda(values, hierarchy, PARAMS, rng=np.random.default_rng(6))
    cal = PARAMS.calibration(1)
    source = SeededRandomSource(np.random.default_rng(6))
    root = max(0, int(noisy_counts(np.array([values.size]), cal.root_sigma2, source)[0]))
    exact = np.zeros(256, dtype=np.int64)
    for key, c in _true_counts(values, hierarchy, 1).items():
        exact[key >> 24] = c
    y = int_opt(noisy_counts(exact, cal.level_sigma2, source), root)
    assert result.root == root
    assert result.levels[0] == {i << 24: int(v) for i, v in enumerate(y) if v > 0}


def test_substitution_releases_the_exact_total() -> None:
    """Under substitution neighbours the root is the exact n and the levels still sum to it."""
    values = _ipv4_values(np.random.default_rng(7), 1234)
    params = InfTDAParams(epsilon=1.0, delta=1e-6, neighbours="substitution")
    result = inftda(values, "ipv4:8,16", params, rng=8)
    assert result.root == 1234 and result.noised[0] == 0
    assert sum(result.levels[0].values()) == 1234 and sum(result.levels[1].values()) == 1234
    assert result.error_bound(0.1)[0] == 0


def test_from_counts_matches_values_for_keys_and_labels() -> None:
    """Per-level count dicts (keyed by keys or by labels) give the same release as the values."""
    hierarchy = parse_hierarchy("ipv4:8,16")
    values = _ipv4_values(np.random.default_rng(9), 900)
    by_key = [_true_counts(values, hierarchy, level) for level in (1, 2)]
    by_label = [{hierarchy.label(k, level): c for k, c in d.items()} for level, d in zip((1, 2), by_key)]
    expected = inftda(values, hierarchy, PARAMS, rng=10).to_dict()
    assert inftda_from_counts(by_key, hierarchy, PARAMS, rng=10).to_dict() == expected
    assert inftda_from_counts(by_label, "ipv4:8,16", PARAMS, rng=10).to_dict() == expected


def test_from_counts_validation_does_not_reveal_counts() -> None:
    """Inconsistent or malformed count dicts are refused, and the message carries no count."""
    with pytest.raises(ValueError, match="InfTDA: every level's counts must have the same total") as info:
        inftda_from_counts([{"10.0.0.0/8": 4321}, {"10.1.0.0/16": 4320}], "ipv4:8,16", PARAMS, rng=1)
    assert "4321" not in str(info.value) and "4320" not in str(info.value)
    with pytest.raises(ValueError, match="InfTDA: counts must be integers >= 0"):
        inftda_from_counts([{"10.0.0.0/8": -1}], "ipv4:8", PARAMS, rng=1)
    with pytest.raises(ValueError, match=r"InfTDA: '10.0.0.0/16' is not a /8 prefix"):
        inftda_from_counts([{"10.0.0.0/16": 3}], "ipv4:8", PARAMS, rng=1)
    with pytest.raises(ValueError, match="InfTDA: key 5 is not a masked /8 address"):
        inftda_from_counts([{5: 3}], "ipv4:8", PARAMS, rng=1)
    with pytest.raises(ValueError, match=r"InfTDA: level_counts must have one mapping per level \(h=2\), got 1"):
        inftda_from_counts([{}], "ipv4:8,16", PARAMS, rng=1)


def test_wide_ipv4_steps_and_other_hierarchies_are_refused() -> None:
    """Child domains wider than max_children, IPv6, and a domain on IPv4 are refused clearly."""
    with pytest.raises(ValueError, match=r"2\*\*24 children per prefix, more than max_children=65536"):
        inftda(np.array([1], dtype=np.uint32), "ipv4:8,32", PARAMS, rng=1)
    with pytest.raises(ValueError, match="more than max_children=255"):
        inftda(np.array([1], dtype=np.uint32), "ipv4:8", PARAMS, rng=1, max_children=255)
    with pytest.raises(ValueError, match="InfTDA: IPv6 hierarchies are not supported"):
        inftda((np.array([1], np.uint64), np.array([1], np.uint64)), "ipv6:16,32", PARAMS, rng=1)
    domain = PathDomain.from_components([["a"]])
    with pytest.raises(ValueError, match="InfTDA: domain is only used with path hierarchies"):
        inftda(np.array([1], dtype=np.uint32), "ipv4:8", PARAMS, domain=domain, rng=1)


def test_path_hierarchy_requires_a_public_domain() -> None:
    """A path hierarchy without a public domain, or with values outside it, is refused."""
    values = ["de/by", "de/be", "fr/idf"]
    with pytest.raises(ValueError, match="InfTDA: path hierarchies need a public child domain"):
        inftda(values, "path:2", PARAMS, rng=1)
    domain = PathDomain.from_paths(["de/by", "de/be", "fr/idf", "fr/ara"])
    with pytest.raises(ValueError, match="InfTDA: some values are not in the public domain"):
        inftda(values + ["it/laz"], "path:2", PARAMS, domain=domain, rng=1)
    with pytest.raises(ValueError, match="InfTDA: the domain has depth 2 but the hierarchy has 3 levels"):
        inftda(values, "path:3", PARAMS, domain=domain, rng=1)


@pytest.mark.parametrize(
    "domain",
    [
        PathDomain.from_paths(["de/by", "de/be", "de/hh", "fr/idf", "fr/ara", "it/laz"]),
        PathDomain.from_components([["de", "fr", "it"], ["by", "be", "hh", "idf", "ara", "laz"]]),
    ],
)
def test_path_release_stays_in_the_domain_and_is_consistent(domain: PathDomain) -> None:
    """Path releases use only domain prefixes, with consistent counts, and count() finds them."""
    values = ["de/by"] * 400 + ["de/be"] * 150 + ["fr/idf"] * 300
    result = inftda(values, "path:2", PARAMS, domain=domain, rng=3)
    level1, level2 = result.level_counts(1), result.level_counts(2)
    assert set(level1) <= {"de", "fr", "it"}
    assert all(domain.contains(label) for label in level2)
    assert sum(level1.values()) == result.root
    for parent, total in level1.items():
        assert sum(c for label, c in level2.items() if label.startswith(parent + "/")) == total
    assert result.count("de/by") == level2.get("de/by", 0) > 0
    assert result.count("*") == result.root


def test_to_dict_is_json_and_states_the_guarantee() -> None:
    """The report is JSON-serialisable, lists every level, and states ρ, (ε, δ) and seeded use."""
    result = inftda(_ipv4_values(np.random.default_rng(11), 600), "ipv4:8,16", PARAMS, rng=12)
    report = json.loads(json.dumps(result.to_dict()))
    assert report["algorithm"] == "InfTDA" and report["hierarchy"] == "ipv4:8,16"
    guarantee = report["guarantee"]
    assert guarantee["rho"] == pytest.approx(rho_from_epsilon_delta(1.0, 1e-6))
    assert guarantee["epsilon"] == pytest.approx(1.0) and guarantee["delta"] == 1e-6
    assert guarantee["neighbours"] == "add_remove" and "NOT PRIVATE" in guarantee["text"]
    assert [lvl["level"] for lvl in report["levels"]] == [0, 1, 2]
    assert report["levels"][0]["counts"] == [{"prefix": "0.0.0.0/0", "count": result.root}]
    level1 = {d["prefix"]: d["count"] for d in report["levels"][1]["counts"]}
    assert level1 == result.level_counts(1) and sum(level1.values()) == result.root


def test_count_lookup_and_unknown_prefixes() -> None:
    """count() returns released counts, 0 for valid prefixes not kept, and refuses non-prefixes."""
    result = inftda(_ipv4_values(np.random.default_rng(13), 700), "ipv4:8,16", PARAMS, rng=14)
    label, value = next(iter(result.level_counts(1).items()))
    assert result.count(label) == value
    kept = set(result.level_counts(2))
    missing = next(f"99.{i}.0.0/16" for i in range(256) if f"99.{i}.0.0/16" not in kept)
    assert result.count(missing) == 0
    for bad in ("10.0.0.0/12", "not-an-ip", "10.0.0.1/8"):
        with pytest.raises(ValueError, match="is not a prefix label of the hierarchy ipv4:8,16"):
            result.count(bad)


def test_secure_source_by_default() -> None:
    """Without rng the release uses the secure source and says nothing about seeding."""
    result = inftda(np.array([167772161] * 50, dtype=np.uint32), "ipv4:8", PARAMS)
    assert result.seeded is False and "NOT PRIVATE" not in result.guarantee()["text"]


# --------------------------------------------------------------------------------------------
# Memory per level, and the progress hook that may refuse a level
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("second", [16, 20, 24])
def test_level_memory_estimate_is_within_a_factor_two_of_the_measured_peak(second: int) -> None:
    """inftda_level_memory_bytes(draws, widest) of the largest level is within a factor 2 of the
    release's peak allocation (tracemalloc) when that level dominates: below one round of the
    sampler (/16: ~2·10³ draws), a few rounds (/20: ~4·10⁴) and many (/24: ~2·10⁵)."""
    import tracemalloc

    from dphhh.privacy.offline.inftda import inftda_level_memory_bytes

    rng = np.random.default_rng(0)
    values = (rng.integers(0, 3, 3000).astype(np.uint32) << 24) | rng.integers(0, 1 << 24, 3000).astype(np.uint32)
    hierarchy = parse_hierarchy(f"ipv4:8,{second}")
    inftda(values, hierarchy, PARAMS, rng=1)  # the sampler's per-scale tables, built once per process
    draws: list[int] = []
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        # /8 then the second level: the kept /8s x their public children dominate
        inftda(values, hierarchy, PARAMS, rng=1, progress=lambda lv, h, d: draws.append(d))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    widest = 2 ** (second - 8)
    estimate = inftda_level_memory_bytes(draws[-1], widest)
    assert draws[0] == 256 and draws[1] % widest == 0 and draws[1] >= 3 * widest
    assert peak / 2 <= estimate <= 2 * peak, (estimate, peak)


def test_progress_is_called_before_a_level_is_allocated_and_may_stop_the_release() -> None:
    """The hook gets each level's public number of draws (kept parents × their child domains) before
    the level is noised; an exception raised there stops the release."""
    hierarchy = parse_hierarchy("ipv4:8,16")
    values = _ipv4_values(np.random.default_rng(3), 500)
    seen: list[tuple[int, int]] = []

    def stop_at_two(level: int, h: int, draws: int) -> None:
        seen.append((level, draws))
        if level == 2:
            raise RuntimeError("refused")

    with pytest.raises(RuntimeError, match="refused"):
        inftda(values, hierarchy, PARAMS, rng=4, progress=stop_at_two)
    full = inftda(values, hierarchy, PARAMS, rng=4)
    assert seen == [(1, 256), (2, full.noised[2])]


def test_to_dict_with_beta_carries_each_levels_error_bound() -> None:
    """to_dict(beta) puts error_bound(beta)[l] on level l and says what it means; without beta nothing."""
    result = inftda(_ipv4_values(np.random.default_rng(3), 500), parse_hierarchy("ipv4:8,16"), PARAMS, rng=4)
    report = json.loads(json.dumps(result.to_dict(beta=0.05)))
    assert [lv["error_bound"] for lv in report["levels"]] == list(result.error_bound(0.05))
    assert report["error_bounds"]["beta"] == 0.05 and "1 - beta" in report["error_bounds"]["text"]
    assert "error_bounds" not in result.to_dict() and "error_bound" not in result.to_dict()["levels"][0]
