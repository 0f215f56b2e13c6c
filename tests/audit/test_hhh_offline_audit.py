"""Privacy audits of the offline DP-HHH mechanisms (docs/ALGORITHMS.md §6, §10).

Algorithm 1 (corrected) is audited against the user's **final** (ε, δ) = (1, 1e-6) at h = 4 and a τ
just above its guard, on neighbouring snapshots X and X' = X + one element, following the cases of
the proof of Theorem 3.6.1:

* ``selected_leaf``: the added element lands on a leaf far above τ (always selected): only its
  released conditioned count moves (the release part of the budget);
* ``near_threshold_leaf``: the leaf is right at τ, so the element moves its selection probability
  and, through it, the conditioned counts F_{X,S} of all its ancestors;
* ``conference_pattern``: the pattern that broke the conference version — many near-threshold
  nodes on other paths (siblings and cousins of the element's leaf, at several levels), so that
  which nodes get selected below changes the conditioned counts of the ancestors, with the
  element's own leaf near threshold too;
* ``isolated``: the element is alone on its path (its prefixes have count 0 in X); it can only be
  seen if 1 + w + v >= τ, whose probability is checked analytically against δ
  (``test_isolated_element_passes_with_probability_below_delta``).

The baseline (per-level stability histograms) is run through its production core
(:func:`baseline_levels`) at a real τ, and audited on the per-level histograms that core releases
(``LevelOutcome.histogram``, the mechanism its proof covers) together with what its HHH output
publishes (post-processing): a path of released nodes shifted by one, and a leaf at the release
threshold.

Each audit runs the real vectorised cores (:func:`algorithm1_levels`, :func:`baseline_levels`) for
``TRIALS`` independent runs per side with seeded generators; scalar statistics of the output (the
released count of a node or ``floor`` when it is not reported, sums along the element's path, the
total released mass, the number of reported nodes, the selection pattern along the path) are
searched for a likelihood-ratio event on half the samples, then Clopper–Pearson bounds at
α = 1e-3 on the other half give ε_lb; the audit fails if ε_lb > ε (probability <= 2e-3 per audit
for a correct mechanism, and the generators are seeded, so a run is reproducible).

Measured ε_lb against ε = 1 (fixed seeds):

* Algorithm 1, correct: 0.48 (selected_leaf), 0.48 (near_threshold_leaf), 0.47
  (conference_pattern); asserted >= 0.4ε. Its visible loss is the release term ξ = ε/2 (the
  proof's selection budget is conservative: no neighbour found shows it). Broken: the release at
  2ε (release scale ÷ 4: the guarantee broken by 2×) 1.99; unconditioned (selection and release on
  unconditional counts, so one element moves every ancestor's release) 1.92, 1.92, 1.83 — flagged
  on every pattern, the conference pattern included; noise ÷ 8 flagged. Every scale halved
  measures 0.99 — twice the correct bound, at the claim but not above it (asserted as the
  audit's response, not as a violation).
* Baseline: tight — the event "every path node released above its count in X" has likelihood
  ratio exactly e^ε: 0.93 (path_shift), 0.92 (leaf_at_threshold), asserted >= 0.8ε; noise halved
  1.92 and ÷ 8 7.35, flagged.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from dphhh.privacy.offline.hhh_algorithm1 import Algorithm1Scales, LevelOutcome, algorithm1_levels
from dphhh.privacy.offline.hhh_baseline import BaselineScales, baseline_levels
from dphhh.privacy.offline.hhh_offline import HierarchyCounts, count_hierarchy
from dphhh.privacy.randomness import SeededRandomSource
from dphhh.sketches.specs import parse_hierarchy

from .audit_tools import audit_statistics

pytestmark = pytest.mark.audit

EPSILON, DELTA, BETA = 1.0, 1e-6, 0.05
H4 = parse_hierarchy("ipv4:8,16,24,32")
TRIALS = 300_000
X_LEAF = 0x0A000001  # 10.0.0.1, where the neighbouring element is added
FLOOR = -1.0

SCALES = Algorithm1Scales.for_budget(EPSILON, DELTA)
TAU = float(math.ceil(SCALES.min_tau(H4.h, BETA)))


def _ip(text: str) -> int:
    a, b, c, d = (int(x) for x in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def _tree(leaves: dict[str, int]) -> HierarchyCounts:
    values = np.array([_ip(k) for k in leaves], dtype=np.uint32)
    return count_hierarchy(values, H4, weights=np.array(list(leaves.values()), dtype=np.int64))


def _neighbours(leaves: dict[str, int], added: str = "10.0.0.1") -> tuple[HierarchyCounts, HierarchyCounts]:
    bigger = dict(leaves)
    bigger[added] = bigger.get(added, 0) + 1
    return _tree(leaves), _tree(bigger)


def _alg1_patterns() -> dict[str, dict[str, int]]:
    t = int(TAU)
    spread = int(SCALES.w_scale)  # nodes within about one noise scale of τ are "near threshold"
    return {
        "selected_leaf": {"10.0.0.1": 3 * t, "10.0.0.2": t // 3, "11.0.0.1": 2 * t},
        "near_threshold_leaf": {"10.0.0.1": t, "10.0.0.2": t // 2, "10.0.1.1": t // 3, "11.0.0.1": 2 * t},
        "conference_pattern": {
            "10.0.0.1": t - spread // 4,
            "10.0.0.2": t - spread // 2,
            "10.0.0.3": t + spread // 3,
            "10.0.0.4": t // 5,
            "10.0.1.1": t - spread,
            "10.0.1.2": t // 4,
            "10.0.2.1": t + spread // 2,
            "10.1.0.1": t - spread // 3,
            "10.1.0.2": t // 2,
            "10.1.1.1": t + spread,
            "11.0.0.1": t - spread // 5,
        },
    }


def _path_index(tree: HierarchyCounts, leaf: int) -> dict[int, int]:
    """Index of the added element's node at each level (the node must exist in ``tree``)."""
    out = {}
    for level in range(1, H4.h + 1):
        key = int(H4.keys(np.array([leaf], dtype=np.uint32), level)[0])
        out[level] = int(np.searchsorted(tree.levels[level].keys, key))
        assert tree.levels[level].keys[out[level]] == key
    return out


def _statistics(
    tree: HierarchyCounts, outcome: list[LevelOutcome], leaf: int, reference: dict[int, int]
) -> dict[str, np.ndarray]:
    """Scalar statistics of (trials) outputs: the reported counts on the element's path, sums, sizes.

    ``path_above_reference`` counts the path nodes reported above their count in X (``reference``):
    the likelihood-ratio statistic for Laplace releases that all shift by one.
    """
    path = _path_index(tree, leaf)
    by_level = {o.level: o for o in outcome}
    shown = {lvl: np.where(o.selected, o.released, FLOOR) for lvl, o in by_level.items()}
    stats: dict[str, np.ndarray] = {}
    path_sum = 0
    pattern = 0
    above = 0
    for level in range(1, H4.h + 1):
        i = path[level]
        stats[f"path_level_{level}"] = shown[level][:, i]
        above = above + (shown[level][:, i] >= reference[level] + 1).astype(np.int64)
        path_sum = path_sum + np.where(by_level[level].selected[:, i], by_level[level].released[:, i], 0)
        pattern = pattern * 2 + by_level[level].selected[:, i].astype(np.int64)
    stats["path_sum"] = path_sum
    stats["path_pattern"] = pattern
    stats["path_above_reference"] = above
    stats["total_reported"] = sum(np.where(o.selected, o.released, 0).sum(axis=1) for o in outcome)
    stats["reported_nodes"] = sum(o.selected.sum(axis=1) for o in outcome)
    return stats


def _audit_alg1(
    a: HierarchyCounts, b: HierarchyCounts, scales: Algorithm1Scales, seed: int, *, conditioned: bool = True
):
    path_a = _path_index(a, X_LEAF)
    reference = {level: int(a.levels[level].counts[i]) for level, i in path_a.items()}
    sides = []
    for tree, offset in ((a, 0), (b, 1)):
        out = algorithm1_levels(tree, TAU, scales, SeededRandomSource(seed + offset), TRIALS, conditioned=conditioned)
        sides.append(_statistics(tree, out, X_LEAF, reference))
    return audit_statistics(sides[0], sides[1], delta=DELTA)


def _divided(scales: Algorithm1Scales, by: float) -> Algorithm1Scales:
    return dataclasses.replace(
        scales,
        w_scale=scales.w_scale / by,
        v_scale=scales.v_scale / by,
        v_clip=scales.v_clip / by,
        release_scale=scales.release_scale / by,
    )


ALG1_PATTERNS = ["selected_leaf", "near_threshold_leaf", "conference_pattern"]


@pytest.mark.parametrize("pattern", ALG1_PATTERNS)
def test_algorithm1_passes_audit_at_the_final_epsilon(pattern: str) -> None:
    """Algorithm 1 at the final (ε, δ) shows no privacy loss above ε on any neighbour pattern, and
    the audit is not vacuous: it sees at least 0.4ε (measured 0.48, 0.49, 0.48 — the release term
    ξ = ε/2 it can see; α = 1e-3 per bound, fixed seeds)."""
    a, b = _neighbours(_alg1_patterns()[pattern])
    result = _audit_alg1(a, b, SCALES, seed=sum(map(ord, pattern)))
    print(f"algorithm 1 {pattern}: eps_lb={result.epsilon_lb:.3f} ({result.statistic})")
    assert 0.4 * EPSILON <= result.epsilon_lb <= EPSILON, result


def test_audit_flags_algorithm1_with_noise_divided_by_8() -> None:
    """Dividing every Algorithm 1 noise scale by 8 is detected as a privacy violation."""
    a, b = _neighbours(_alg1_patterns()["selected_leaf"])
    result = _audit_alg1(a, b, _divided(SCALES, 8), seed=5)
    assert result.epsilon_lb > EPSILON, result


def test_audit_flags_algorithm1_whose_release_costs_twice_the_claim() -> None:
    """The release noise at 1/(4ξ) instead of 1/ξ — the release then costs 4ξ = 2ε, the guarantee
    broken by 2× — is flagged (α = 1e-3 per bound, fixed seed; measured in the module docstring)."""
    a, b = _neighbours(_alg1_patterns()["selected_leaf"])
    broken = dataclasses.replace(SCALES, release_scale=SCALES.release_scale / 4)
    result = _audit_alg1(a, b, broken, seed=13)
    print(f"algorithm 1, release at 2ε: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result


def test_audit_sees_every_algorithm1_scale_halved() -> None:
    """Every scale halved doubles what the audit sees (0.48 → 0.99 measured): the visible loss is
    the release term, ξ = ε/2 becomes ε. It is not above the claim — the proof's selection half of
    the budget is not visible on any neighbour found (docs/ALGORITHMS.md §6) — so this break is
    asserted as the audit's response (more than 1.6× the correct bound, on the same neighbours),
    not as a violation; the violation at 2ε is the test above."""
    a, b = _neighbours(_alg1_patterns()["selected_leaf"])
    good = _audit_alg1(a, b, SCALES, seed=17)
    halved = _audit_alg1(a, b, _divided(SCALES, 2), seed=19)
    print(f"algorithm 1 halved: eps_lb={halved.epsilon_lb:.3f} (correct {good.epsilon_lb:.3f})")
    assert halved.epsilon_lb > 1.6 * good.epsilon_lb, (good, halved)


@pytest.mark.parametrize("pattern", ALG1_PATTERNS)
def test_audit_flags_unconditioned_algorithm1(pattern: str) -> None:
    """Selecting and releasing unconditional counts (no conditioning) lets one element move every
    ancestor: flagged on every pattern, the conference pattern included (measured 1.95, 1.88, 1.84;
    α = 1e-3 per bound, fixed seeds)."""
    a, b = _neighbours(_alg1_patterns()[pattern])
    result = _audit_alg1(a, b, SCALES, seed=9 + len(pattern), conditioned=False)
    print(f"algorithm 1 unconditioned {pattern}: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result


def test_isolated_element_passes_with_probability_below_delta() -> None:
    """An element alone on its path is selected at some level with probability below δ/2 (δ checked analytically)."""
    # P(1 + w + v >= τ) <= P(w >= τ − 1 − Δ) = exp(−(τ − 1 − Δ)/(6Δ))/2 since v <= Δ; union over h levels.
    tail = 0.5 * math.exp(-(TAU - 1 - SCALES.v_clip) / SCALES.w_scale)
    assert H4.h * tail <= DELTA / 2


# --------------------------------------------------------------------------------------------
# Baseline: per-level stability histograms
# --------------------------------------------------------------------------------------------

BASE = BaselineScales.for_budget(EPSILON, DELTA, H4.h)
BASE_TAU = 250.0  # the user's τ: the path's leaf (300) is selected, as in a real run


def _histogram_statistics(
    tree: HierarchyCounts, outcome: list[LevelOutcome], t_int: int, reference: dict[int, int]
) -> dict[str, np.ndarray]:
    """The released per-level histograms on the element's path (noisy count, or t_int − 1 if
    suppressed), their sum, and the number of path nodes released above their count in X."""
    path = _path_index(tree, X_LEAF)
    stats = {}
    path_sum = 0
    above = 0
    for o in outcome:
        assert o.histogram is not None
        col = o.histogram[:, path[o.level]]
        shown = np.where(col >= t_int, col, t_int - 1)
        stats[f"level_{o.level}"] = shown
        path_sum = path_sum + shown
        above = above + (shown >= reference[o.level] + 1).astype(np.int64)
    stats["path_sum"] = path_sum
    stats["path_above_reference"] = above
    stats["released_on_path"] = sum((o.histogram[:, path[o.level]] >= t_int).astype(np.int64) for o in outcome)
    # and what the HHH output publishes (post-processing of the histograms)
    stats["hhh_path_pattern"] = sum(o.selected[:, path[o.level]].astype(np.int64) << (o.level - 1) for o in outcome)
    stats["hhh_path_sum"] = sum(
        np.where(o.selected[:, path[o.level]], o.released[:, path[o.level]], 0) for o in outcome
    )
    return stats


def _audit_baseline(leaves: dict[str, int], scales: BaselineScales, seed: int):
    a, b = _neighbours(leaves)
    reference = {level: int(a.levels[level].counts[i]) for level, i in _path_index(a, X_LEAF).items()}
    sides = []
    for tree, offset in ((a, 0), (b, 1)):
        out = baseline_levels(tree, BASE_TAU, scales, SeededRandomSource(seed + offset), TRIALS)
        sides.append(_histogram_statistics(tree, out, scales.integer_threshold, reference))
    return audit_statistics(sides[0], sides[1], delta=DELTA)


def _baseline_patterns(scales: BaselineScales) -> dict[str, dict[str, int]]:
    t = scales.integer_threshold
    return {
        "path_shift": {"10.0.0.1": 300, "10.0.0.2": 50, "11.0.0.1": 400},
        "leaf_at_threshold": {"10.0.0.1": t, "10.0.1.1": 200},
    }


@pytest.mark.parametrize("pattern", ["path_shift", "leaf_at_threshold"])
def test_baseline_histograms_pass_audit(pattern: str) -> None:
    """The baseline's released per-level histograms show no loss above the final ε, and the audit
    is tight, as the proof is (measured 0.93 and 0.92; asserted >= 0.8ε, so a 2× break exceeds ε)."""
    result = _audit_baseline(_baseline_patterns(BASE)[pattern], BASE, seed=sum(map(ord, pattern)) + 1)
    print(f"baseline {pattern}: eps_lb={result.epsilon_lb:.3f} ({result.statistic})")
    assert 0.8 * EPSILON <= result.epsilon_lb <= EPSILON, result


@pytest.mark.parametrize("by", [2, 8])
def test_audit_flags_baseline_with_noise_divided(by: int) -> None:
    """The baseline with its Laplace scale halved (a 2× break) or divided by 8 is flagged
    (α = 1e-3 per bound, fixed seeds; measured in the module docstring)."""
    broken = BaselineScales(BASE.scale / by, BASE.threshold)
    result = _audit_baseline(_baseline_patterns(broken)["path_shift"], broken, seed=77 + by)
    print(f"baseline noise / {by}: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result


def test_baseline_isolated_count_passes_with_probability_below_delta() -> None:
    """A count-1 node is released with probability below δ/h per level (discrete Laplace tail, analytic)."""
    q = math.exp(-1 / BASE.scale)
    k = BASE.integer_threshold - 1  # 1 + Z >= ⌈T⌉ ⇔ Z >= ⌈T⌉ − 1
    assert q**k / (1 + q) <= DELTA / H4.h
