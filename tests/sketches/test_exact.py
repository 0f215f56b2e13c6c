"""Tests of exact counting and the exact hierarchical heavy hitters (Definition 2.3.5, docs/ALGORITHMS.md §4)."""

from __future__ import annotations

import ipaddress
from collections import Counter

import numpy as np
import pytest

from dphhh.sketches.exact import ExactHHH, exact_counts, exact_hhh
from dphhh.sketches.hierarchy import IPv4Hierarchy, PathHierarchy


def _ips(spec: dict[str, int]) -> np.ndarray:
    """Expand {address: copies} into a uint32 array (copies interleaved, order irrelevant)."""
    out = []
    for address, copies in spec.items():
        out += [int(ipaddress.IPv4Address(address))] * copies
    return np.array(out, dtype=np.uint32)


def _summary(result: list[ExactHHH]) -> list[tuple[int, str, int, int]]:
    return [(r.level, r.prefix, r.residual, r.count) for r in result]


# Hand-made example, n = 15:
#   10.1.1.1 ×5, 10.1.1.2 ×3, 10.1.2.3 ×2, 10.2.0.1 ×1, 20.0.0.1 ×4
# Exact counts: /24: 10.1.1.0 = 8, 10.1.2.0 = 2, 20.0.0.0 = 4; /16: 10.1.0.0 = 10, 10.2.0.0 = 1,
# 20.0.0.0 = 4; /8: 10.0.0.0 = 11, 20.0.0.0 = 4.
EXAMPLE = _ips({"10.1.1.1": 5, "10.1.1.2": 3, "10.1.2.3": 2, "10.2.0.1": 1, "20.0.0.1": 4})


def test_exact_hhh_residual_hides_parent_after_selected_child():
    """τ=5: 10.1.1.1/32 is selected, so 10.1.1.0/24 (count 8, residual 3) is not; 10.1.0.0/16 and root are."""
    # /32: 10.1.1.1 has 5 >= 5 -> selected (equality counts).
    # /24: 10.1.1.0 count 8 but residual 8 - 5 = 3 < 5 -> NOT selected.
    # /16: 10.1.0.0 residual 10 - 5 = 5 -> selected.  /8: 10.0.0.0 residual 11 - 10 = 1.
    # root: 15 - 5 - 5 = 5 -> selected.
    assert _summary(exact_hhh(IPv4Hierarchy(), EXAMPLE, 5)) == [
        (4, "10.1.1.1/32", 5, 5),
        (2, "10.1.0.0/16", 5, 10),
        (0, "0.0.0.0/0", 5, 15),
    ]


def test_exact_hhh_selected_24_hides_its_16():
    """τ=6: 10.1.1.0/24 (8) is selected; 10.1.0.0/16 has count 10 ≥ τ but residual 2, so it is not."""
    # /32: nothing reaches 6. /24: 10.1.1.0 residual 8 -> selected. /16: 10.1.0.0 residual 2.
    # /8: 10.0.0.0 residual 11 - 8 = 3; 20.0.0.0 = 4. root: 15 - 8 = 7 -> selected.
    assert _summary(exact_hhh(IPv4Hierarchy(), EXAMPLE, 6)) == [
        (3, "10.1.1.0/24", 8, 8),
        (0, "0.0.0.0/0", 7, 15),
    ]


def test_exact_hhh_several_leaves_and_root_below_threshold():
    """τ=4: both heavy /32s and 10.1.0.0/16 are selected; the root's residual 1 is below τ."""
    # /32: 10.1.1.1 (5), 20.0.0.1 (4). /24: 10.1.1.0 residual 3, 20.0.0.0 residual 0.
    # /16: 10.1.0.0 residual 3 + 2 = 5 -> selected. /8: 10.0.0.0 residual 1. root: 15 - 14 = 1.
    assert _summary(exact_hhh(IPv4Hierarchy(), EXAMPLE, 4)) == [
        (4, "10.1.1.1/32", 5, 5),
        (4, "20.0.0.1/32", 4, 4),
        (2, "10.1.0.0/16", 5, 10),
    ]


def test_exact_hhh_root_only_and_nothing():
    """τ=n selects only the root with residual n; τ=n+1 selects nothing; τ=2.5 acts like 3."""
    n = EXAMPLE.size
    assert _summary(exact_hhh(IPv4Hierarchy(), EXAMPLE, n)) == [(0, "0.0.0.0/0", n, n)]
    assert exact_hhh(IPv4Hierarchy(), EXAMPLE, n + 1) == []
    assert exact_hhh(IPv4Hierarchy(), EXAMPLE, 2.5) == exact_hhh(IPv4Hierarchy(), EXAMPLE, 3)


def test_exact_hhh_root_key_and_empty_stream():
    """The root is reported as level 0, key 0; an empty stream has no HHH at any τ >= 1."""
    root = exact_hhh(IPv4Hierarchy(), EXAMPLE, EXAMPLE.size)[0]
    assert (root.level, root.key) == (0, 0)
    assert exact_hhh(IPv4Hierarchy(), np.array([], dtype=np.uint32), 1) == []


def test_exact_hhh_keys_are_sketch_keys_and_levels_non_increasing():
    """Reported keys are the hierarchy's sketch keys at their level; results run bottom-up."""
    h = IPv4Hierarchy()
    result = exact_hhh(h, EXAMPLE, 4)
    for item in result:
        if item.level:
            assert item.key in set(h.keys(EXAMPLE, item.level).tolist())
            assert item.prefix == h.label(item.key, item.level)
    levels = [r.level for r in result]
    assert levels == sorted(levels, reverse=True)


def test_exact_hhh_on_paths():
    """Path example: a selected street hides its city; the region collects the rest (τ=3)."""
    values = ["de/bavaria/munich/a"] * 3 + ["de/bavaria/munich/b"] + ["de/bavaria/nuremberg/c"] * 2 + ["fr/idf/paris/d"]
    # level 4: munich/a (3). level 3: munich residual 1, nuremberg 2, paris 1.
    # level 2: de/bavaria residual 1 + 2 = 3 -> selected. level 1: de 0, fr 1. root 7 - 6 = 1.
    assert _summary(exact_hhh(PathHierarchy(4), values, 3)) == [
        (4, "de/bavaria/munich/a", 3, 3),
        (2, "de/bavaria", 3, 6),
    ]


def test_exact_counts_match_counter():
    """exact_counts equals a Counter of the generalised keys at every level."""
    h = IPv4Hierarchy()
    for level, length in enumerate(h.prefix_lengths, start=1):
        mask = ((1 << length) - 1) << (32 - length)
        assert exact_counts(h, EXAMPLE, level) == Counter(v & mask for v in EXAMPLE.tolist())


# ---------------------------------------------------------------------------------------------
# Brute-force cross-check against the definition
# ---------------------------------------------------------------------------------------------


def brute_force_hhh(values: list[int], lengths: tuple[int, ...], tau: float) -> list[tuple[int, int, int, int]]:
    """Definition 2.3.5 directly: bottom-up, residual = elements under p not under a selected descendant."""
    selected: list[tuple[int, int, int]] = []  # (level, prefix value, prefix length)
    out = []

    def under(v: int, prefix: int, length: int) -> bool:
        return length == 0 or (v >> (32 - length)) == (prefix >> (32 - length))

    for level in range(len(lengths), -1, -1):
        length = lengths[level - 1] if level else 0
        candidates = sorted({v & ((((1 << length) - 1) << (32 - length)) if length else 0) for v in values})
        if level == 0 and not values:
            candidates = []
        chosen_here = []
        for p in candidates:
            members = [v for v in values if under(v, p, length)]
            residual = sum(1 for v in members if not any(under(v, q, ql) for (_, q, ql) in selected))
            if residual >= tau:
                chosen_here.append((level, p, length))
                out.append((level, p, residual, len(members)))
        selected += chosen_here  # descendants only: same-level prefixes are disjoint anyway
    return out


@pytest.mark.parametrize("lengths", [(8, 16, 24, 32), (4, 12, 30), (2, 3, 32)])
def test_exact_hhh_matches_brute_force_on_random_inputs(lengths):
    """On random small clustered inputs and thresholds, exact_hhh equals a direct evaluation of the definition."""
    rng = np.random.default_rng(sum(lengths))
    h = IPv4Hierarchy(lengths)
    seeds = [int(ipaddress.IPv4Address(a)) for a in ("10.1.1.1", "10.1.2.9", "10.7.0.0", "200.1.1.1")]
    nonempty_results = 0
    for _ in range(60):
        n = int(rng.integers(0, 80))
        base = np.array(seeds, dtype=np.uint64)[rng.integers(0, 4, n)]
        flips = rng.integers(0, 2, n, dtype=np.uint64) << rng.integers(0, 32, n, dtype=np.uint64)
        values = (base ^ flips).astype(np.uint32)
        tau = float(rng.choice([1, 2, 3, 5, 8, 13, 2.5, n + 1 if n else 1]))
        got = [(r.level, r.key, r.residual, r.count) for r in exact_hhh(h, values, tau)]
        want = brute_force_hhh(values.tolist(), lengths, tau)
        assert got == want, (values.tolist(), tau)
        nonempty_results += bool(got)
        # Residuals of the result partition the selected mass: never more than n in total.
        assert sum(r[2] for r in got) <= n
    assert nonempty_results >= 30


def test_weighted_exact_hhh_equals_the_expanded_stream() -> None:
    """A record of weight v counts as v elements: weighted exact HHH == exact HHH of np.repeat."""
    import numpy as np

    from dphhh.sketches.exact import exact_counts, exact_hhh
    from dphhh.sketches.hierarchy import IPv4Hierarchy

    h = IPv4Hierarchy([8, 16, 24, 32])
    rng = np.random.default_rng(5)
    values = ((10 << 24) + rng.integers(0, 1 << 12, 3000) * 97).astype(np.uint32)
    weights = np.minimum(rng.zipf(1.5, values.size), 500).astype(np.int64)
    expanded = np.repeat(values, weights)
    for tau in (200.0, 1000.0, 5000.0):
        assert exact_hhh(h, values, tau, weights) == exact_hhh(h, expanded, tau)
    assert exact_counts(h, values, 2, weights) == exact_counts(h, expanded, 2)
