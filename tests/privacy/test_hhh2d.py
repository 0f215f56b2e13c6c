"""Two-dimensional extraction (privacy/hhh2d.py, docs/ALGORITHMS.md §11): inclusion–exclusion over
maximal selected descendants, clamping, verdicts, and the report's 2-D statements."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dphhh.privacy.calibration import WindowCalibration
from dphhh.privacy.hhh import SketchRelease
from dphhh.privacy.hhh2d import COVERAGE_2D, extract_hhh_2d
from dphhh.privacy.params import HHHParams
from dphhh.privacy.window import release_window
from dphhh.sketches.hierarchy import IPv4Hierarchy
from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.pairs import PairHierarchy
from dphhh.sketches.specs import parse_hierarchy

H = PairHierarchy(IPv4Hierarchy([8]), IPv4Hierarchy([8]))  # nodes (0,1), (1,0), (1,1)


def _ip(text: str) -> int:
    a, b, c, d = (int(x) for x in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def _key(a: str, b: str, node: tuple[int, int]) -> int:
    level = H.level_of(node)
    return int(H.keys((np.array([_ip(a)], np.uint32), np.array([_ip(b)], np.uint32)), level)[0])


def _cal() -> WindowCalibration:
    real = WindowCalibration.of(HHHParams(epsilon=1, delta=1e-6, tau=1, counters=64), H.h)
    return replace(real, alpha2=5.0, noise_bound=2, size_slack=1)


def _releases(values: dict[tuple[int, int], dict[int, int]]) -> list[SketchRelease]:
    return [SketchRelease(H.level_of(node), 0, values.get(node, {}), 0, 10) for node in H.nodes]


def test_inclusion_exclusion_adds_back_the_meet_of_two_selected_descendants() -> None:
    """10/8 → 20/8 at node (1,1) lies under both 10/8 → * (node (1,0)) and * → 20/8 (node (0,1)).
    Each of those loses the 300 of its one selected descendant; the root's residual removes the
    union of the two, so their meet (10/8 → 20/8, released) is added back once."""
    k_1020 = _key("10.0.0.0", "20.0.0.0", (1, 1))
    k_10 = _key("10.0.0.0", "0.0.0.0", (1, 0))
    k_20 = _key("0.0.0.0", "20.0.0.0", (0, 1))
    releases = _releases(
        {
            (1, 1): {k_1020: 300},
            (1, 0): {k_10: 800},  # 10/8 → *: 300 of them go to 20/8
            (0, 1): {k_20: 700},  # * → 20/8: the same 300 come from 10/8
        }
    )
    items = {it.prefix: it for it in extract_hhh_2d(releases, H, tau=250, calibration=_cal(), root_value=2000)}
    assert items["10.0.0.0/8 → 20.0.0.0/8"].residual == 300
    # 10/8 → * and * → 20/8 each lose the 300 of their one selected descendant
    assert items["10.0.0.0/8 → 0.0.0.0/0"].residual == 500
    assert items["0.0.0.0/0 → 20.0.0.0/8"].residual == 400
    # root: 2000 − |10/8→* ∪ *→20/8| = 2000 − (800 + 700 − 300): the meet 10/8→20/8 is added back
    assert items["0.0.0.0/0 → 0.0.0.0/0"].residual == 2000 - (800 + 700 - 300)


def test_a_meet_that_was_never_released_counts_zero_and_residuals_are_clamped() -> None:
    k_10 = _key("10.0.0.0", "0.0.0.0", (1, 0))
    k_20 = _key("0.0.0.0", "20.0.0.0", (0, 1))
    releases = _releases({(1, 0): {k_10: 900}, (0, 1): {k_20: 900}})
    items = {it.prefix: it for it in extract_hhh_2d(releases, H, tau=100, calibration=_cal(), root_value=1500)}
    assert items["10.0.0.0/8 → 0.0.0.0/0"].residual == 900
    assert "0.0.0.0/0 → 0.0.0.0/0" not in items  # 1500 − (900 + 900 − 0) < 0 → clamped to 0 < τ
    for it in items.values():
        assert 0 <= it.residual <= it.count


def test_point_selection_needs_the_residual_to_reach_tau() -> None:
    k_1020 = _key("10.0.0.0", "20.0.0.0", (1, 1))
    k_10 = _key("10.0.0.0", "0.0.0.0", (1, 0))
    releases = _releases({(1, 1): {k_1020: 500}, (1, 0): {k_10: 650}})
    items = {it.prefix for it in extract_hhh_2d(releases, H, tau=200, calibration=_cal(), root_value=700)}
    assert "10.0.0.0/8 → 20.0.0.0/8" in items
    assert "10.0.0.0/8 → 0.0.0.0/0" not in items  # 650 − 500 = 150 < 200


def test_verdicts_subtract_the_upper_ends_of_maximal_descendants() -> None:
    k_1020 = _key("10.0.0.0", "20.0.0.0", (1, 1))
    k_10 = _key("10.0.0.0", "0.0.0.0", (1, 0))
    releases = _releases({(1, 1): {k_1020: 300}, (1, 0): {k_10: 2000}})
    cal = _cal()
    items = {it.prefix: it for it in extract_hhh_2d(releases, H, tau=250, calibration=cal, root_value=2500)}
    top = items["10.0.0.0/8 → 0.0.0.0/0"]
    below = items["10.0.0.0/8 → 20.0.0.0/8"]
    assert top.residual_lower == pytest.approx(max(0.0, top.lower - below.upper))
    assert top.verdict == ("heavy" if top.residual_lower >= 250 else "possible")


def test_a_released_report_over_pairs_states_h_equals_H_and_no_coverage() -> None:
    """release_window on a pair hierarchy: the budget covers H sketches, each item has its node,
    and coverage is not claimed; the planted pair is found at a generous ε."""
    h = parse_hierarchy("ipv4:8,16 x ipv4:8,16")
    rng = np.random.default_rng(4)
    n = 20_000
    a = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    b = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    planted = rng.random(n) < 0.3
    a[planted] = np.uint32(_ip("10.20.0.0")) | rng.integers(0, 1 << 16, planted.sum()).astype(np.uint32)
    b[planted] = np.uint32(_ip("198.51.0.0")) | rng.integers(0, 1 << 16, planted.sum()).astype(np.uint32)
    sketches = LevelSketches(h, 256, 1)
    sketches.update((a, b))
    report = release_window(sketches, HHHParams(epsilon=8, delta=1e-6, tau=0.1 * n, counters=256), rng=9)
    assert report["params"]["h"] == h.h == 8
    assert report["budget"]["entries"][0]["sketches"] == 8
    assert report["guarantees"]["coverage_holds"] is False and report["guarantees"]["coverage"] == COVERAGE_2D
    prefixes = {it["prefix"]: it for it in report["hhh"]}
    assert "10.20.0.0/16 → 198.51.0.0/16" in prefixes
    assert prefixes["10.20.0.0/16 → 198.51.0.0/16"]["node"] == [2, 2]
