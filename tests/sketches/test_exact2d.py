"""Tests of the exact two-dimensional HHH, overlap semantics (docs/ALGORITHMS.md §11)."""

from __future__ import annotations

import ipaddress
import random

import numpy as np
import pytest

from dphhh.sketches.errors import UsageError
from dphhh.sketches.exact import exact_hhh
from dphhh.sketches.exact2d import ExactPairHHH, exact_hhh_2d
from dphhh.sketches.hierarchy import IPv4Hierarchy
from dphhh.sketches.pairs import PairHierarchy
from dphhh.sketches.specs import parse_hierarchy


def _ip(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def _mask(address: int, length: int) -> int:
    return address & ((0xFFFFFFFF << (32 - length)) & 0xFFFFFFFF)


def _summary(hierarchy: PairHierarchy, result: list[ExactPairHHH]) -> set[tuple[int, int, int, int]]:
    for item in result:
        assert item.node == hierarchy.node(item.level)
    return {(r.level, r.key, r.residual, r.count) for r in result}


# ---------------------------------------------------------------------- brute force from the definition


def _brute_force(
    hierarchy: PairHierarchy, src: list[int], dst: list[int], tau: float, weights: list[int], rng: random.Random
) -> set[tuple[int, int, int, int]]:
    """The definition, element by element in pure Python, with nodes of equal ℓ1 + ℓ2 in random order.

    A pair is (ℓ1, ℓ2, a, b) with a, b the masked addresses; p generalises d iff p's node is
    componentwise <= d's and d's prefixes masked to p's lengths are p's.
    """
    lengths1 = [0, *hierarchy.first.prefix_lengths]
    lengths2 = [0, *hierarchy.second.prefix_lengths]

    def pair_of(i: int, node: tuple[int, int]) -> tuple[int, int, int, int]:
        return (*node, _mask(src[i], lengths1[node[0]]), _mask(dst[i], lengths2[node[1]]))

    def generalises(p: tuple[int, int, int, int], d: tuple[int, int, int, int]) -> bool:
        return (
            p[0] <= d[0]
            and p[1] <= d[1]
            and _mask(d[2], lengths1[p[0]]) == p[2]
            and _mask(d[3], lengths2[p[1]]) == p[3]
        )

    nodes = [(a, b) for a in range(len(lengths1)) for b in range(len(lengths2))]
    rng.shuffle(nodes)
    nodes.sort(key=lambda node: -(node[0] + node[1]))  # stable: equal sums stay shuffled
    selected: list[tuple[int, int, int, int]] = []
    found: set[tuple[int, int, int, int, int]] = set()
    elements = range(len(src))
    for node in nodes:
        heavy = []
        for p in sorted({pair_of(i, node) for i in elements}):
            under = [i for i in elements if pair_of(i, node) == p]
            below = [d for d in selected if d != p and generalises(p, d)]
            residual = sum(weights[i] for i in under if not any(pair_of(i, d[:2]) == d for d in below))
            if residual >= tau:
                heavy.append(p)
                found.add((hierarchy.level_of(node), p[2], p[3], residual, sum(weights[i] for i in under)))
        selected += heavy  # pairs of one node never generalise one another
    out = set()
    for level, a, b, residual, count in found:
        key = 0 if level == 0 else int(hierarchy.encode(np.array([a]), np.array([b]), level)[0])
        out.add((level, key, residual, count))
    return out


# small pools sharing prefixes, so that heavy pairs exist at every node
_FIRST_POOL = [_ip(f"10.{b}.{c}.{d}") for b in (1, 2) for c in (0, 7) for d in (1, 9)] + [_ip("192.0.2.1")]
_SECOND_POOL = [_ip(f"198.51.{c}.{d}") for c in (100, 101) for d in (5, 6)] + [_ip("203.0.113.5"), _ip("8.8.8.8")]
_SPECS = ("ipv4:8,16 x ipv4:8,16", "ipv4:8 x ipv4:8,16", "ipv4:16,24 x ipv4:24,32", "ipv4:8,32 x ipv4:32")


@pytest.mark.parametrize("spec", _SPECS)
def test_exact_hhh_2d_matches_the_brute_force_definition(spec: str) -> None:
    """60 seeded random cases per hierarchy (240 in all), half of them weighted: identical sets of
    (level, key, residual, count); the brute force also shuffles nodes of equal ℓ1 + ℓ2."""
    hierarchy = parse_hierarchy(spec)
    assert isinstance(hierarchy, PairHierarchy)
    for seed in range(60):
        rng = random.Random(f"{spec}/{seed}")
        n = rng.randint(1, 40)
        first_pool = rng.sample(_FIRST_POOL, rng.randint(1, len(_FIRST_POOL)))
        second_pool = rng.sample(_SECOND_POOL, rng.randint(1, len(_SECOND_POOL)))
        src = [rng.choice(first_pool) for _ in range(n)]
        dst = [rng.choice(second_pool) for _ in range(n)]
        weighted = seed % 2 == 1
        weights = [rng.randint(1, 5) for _ in range(n)] if weighted else [1] * n
        tau = rng.choice([1, 2, 3, 0.5 + rng.randint(1, max(1, sum(weights) // 2)), rng.randint(1, sum(weights))])
        values = (np.array(src, dtype=np.uint32), np.array(dst, dtype=np.uint32))
        got = exact_hhh_2d(hierarchy, values, tau, weights=np.array(weights) if weighted else None)
        expected = _brute_force(hierarchy, src, dst, tau, weights, rng)
        assert _summary(hierarchy, got) == expected, (spec, seed, tau)


# ---------------------------------------------------------------------- planted pairs at 10^5 elements


def _random_ips(rng: np.random.Generator, n: int, avoid_first_octets: tuple[int, ...]) -> np.ndarray:
    out = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32)
    bad = np.isin(out >> np.uint32(24), np.array(avoid_first_octets, dtype=np.uint32))
    while bad.any():
        out[bad] = rng.integers(0, 2**32, int(bad.sum()), dtype=np.uint64).astype(np.uint32)
        bad = np.isin(out >> np.uint32(24), np.array(avoid_first_octets, dtype=np.uint32))
    return out


def _in_prefix(rng: np.random.Generator, network: str, n: int) -> np.ndarray:
    net = ipaddress.IPv4Network(network)
    low = rng.integers(0, net.num_addresses, n, dtype=np.uint64).astype(np.uint32)
    return np.uint32(int(net.network_address)) | low


def _naive_global_mask(hierarchy: PairHierarchy, values, tau: float) -> set[str]:
    """The wrong 2-D generalisation of the 1-D algorithm: one global "covered" mask."""
    covered = np.zeros(hierarchy.count(values), dtype=bool)
    found = set()
    for level in range(hierarchy.h, 0, -1):
        uniq, inverse = np.unique(hierarchy.keys(values, level), return_inverse=True)
        residual = np.bincount(inverse[~covered], minlength=uniq.size)
        chosen = np.flatnonzero(residual >= tau)
        found |= {hierarchy.label(int(uniq[i]), level) for i in chosen}
        covered |= np.isin(inverse, chosen)
    return found


def test_exact_hhh_2d_planted_pairs_at_1e5_with_overlap() -> None:
    """10^5 elements over ipv4:8,16,24,32 × ipv4:8,16,24,32 (24 nodes), τ = 5000. Planted:

    * 20000 × 10.20.0.0/16 → 198.51.100.0/24 (random hosts inside both): node (2, 3);
    * 10000 × 192.0.2.1/32 → 203.0.113.5/32: node (4, 4) (a 64-bit, mixed key);
    * 8000 × 172.16.5.0/24 → anywhere: node (3, 0);
    * overlap: 6000 × 10.30.0.0/16 → anywhere, 3000 × 10.30.0.0/16 → 100.64.0.0/16 and 3000 ×
      anywhere → 100.64.0.0/16. ``10.30.0.0/16 → 0.0.0.0/0`` is an HHH (9000, node (2, 0)) and so is
      ``0.0.0.0/0 → 100.64.0.0/16`` (6000, node (0, 2)): the 3000 elements under both still count
      for the second because the first is not its descendant (a global covered mask would drop it);
    * 50000 background elements, uniform outside the planted first octets: only the root (50000).
    """
    rng = np.random.default_rng(20240611)
    hierarchy = parse_hierarchy("ipv4:8,16,24,32 x ipv4:8,16,24,32")
    assert hierarchy.h == 24
    avoid_src, avoid_dst = (10, 172, 192), (100,)
    parts = [
        (_in_prefix(rng, "10.20.0.0/16", 20000), _in_prefix(rng, "198.51.100.0/24", 20000)),
        (np.full(10000, _ip("192.0.2.1"), np.uint32), np.full(10000, _ip("203.0.113.5"), np.uint32)),
        (_in_prefix(rng, "172.16.5.0/24", 8000), _random_ips(rng, 8000, avoid_dst)),
        (_in_prefix(rng, "10.30.0.0/16", 6000), _random_ips(rng, 6000, avoid_dst)),
        (_in_prefix(rng, "10.30.0.0/16", 3000), _in_prefix(rng, "100.64.0.0/16", 3000)),
        (_random_ips(rng, 3000, avoid_src), _in_prefix(rng, "100.64.0.0/16", 3000)),
        (_random_ips(rng, 50000, avoid_src), _random_ips(rng, 50000, avoid_dst)),
    ]
    order = rng.permutation(10**5)
    values = (np.concatenate([p[0] for p in parts])[order], np.concatenate([p[1] for p in parts])[order])
    assert values[0].size == 10**5

    result = exact_hhh_2d(hierarchy, values, 5000)
    assert [(r.node, r.prefix, r.residual, r.count) for r in result] == [
        ((4, 4), "192.0.2.1/32 → 203.0.113.5/32", 10000, 10000),
        ((2, 3), "10.20.0.0/16 → 198.51.100.0/24", 20000, 20000),
        ((3, 0), "172.16.5.0/24 → 0.0.0.0/0", 8000, 8000),
        ((2, 0), "10.30.0.0/16 → 0.0.0.0/0", 9000, 9000),
        ((0, 2), "0.0.0.0/0 → 100.64.0.0/16", 6000, 6000),
        ((0, 0), "0.0.0.0/0 → 0.0.0.0/0", 50000, 10**5),
    ]
    for item in result:
        assert item.level == hierarchy.level_of(item.node)
        assert hierarchy.label(item.key, item.level) == item.prefix
    # the naive single mask processes (2, 0) before (0, 2) and wrongly removes the 3000 shared elements
    naive = _naive_global_mask(hierarchy, values, 5000)
    assert "10.30.0.0/16 → 0.0.0.0/0" in naive
    assert "0.0.0.0/0 → 100.64.0.0/16" not in naive


def test_exact_hhh_2d_overlap_semantics_small() -> None:
    """ipv4:8 × ipv4:8, τ = 5: 10→20 ×3, 10→30 ×3, 40→20 ×3. No (1, 1) pair is heavy; 10/8 → * (6)
    and * → 20/8 (6) both are, although the three 10→20 elements are under both; root residual 0."""
    hierarchy = parse_hierarchy("ipv4:8 x ipv4:8")
    src = np.array([_ip("10.0.0.1")] * 6 + [_ip("40.0.0.1")] * 3, dtype=np.uint32)
    dst = np.array([_ip("20.0.0.1")] * 3 + [_ip("30.0.0.1")] * 3 + [_ip("20.0.0.1")] * 3, dtype=np.uint32)
    result = exact_hhh_2d(hierarchy, (src, dst), 5)
    assert [(r.node, r.prefix, r.residual, r.count) for r in result] == [
        ((1, 0), "10.0.0.0/8 → 0.0.0.0/0", 6, 6),
        ((0, 1), "0.0.0.0/0 → 20.0.0.0/8", 6, 6),
    ]
    assert _naive_global_mask(hierarchy, (src, dst), 5) == {"10.0.0.0/8 → 0.0.0.0/0"}
    # weighted: the same with every element counted twice at τ = 10
    weighted = exact_hhh_2d(hierarchy, (src, dst), 10, weights=np.full(9, 2))
    assert [(r.prefix, r.residual, r.count) for r in weighted] == [
        ("10.0.0.0/8 → 0.0.0.0/0", 12, 12),
        ("0.0.0.0/0 → 20.0.0.0/8", 12, 12),
    ]


def test_exact_hhh_2d_selected_descendant_hides_ancestors_only() -> None:
    """ipv4:8,16 × ipv4:8, τ = 4: 10.1/16 → 20/8 ×4 is selected at (2, 1); its ancestors 10/8 → 20/8,
    10.1/16 → *, 10/8 → *, * → 20/8 lose those 4 elements; the root keeps the other 3 (< τ)."""
    hierarchy = parse_hierarchy("ipv4:8,16 x ipv4:8")
    src = np.array([_ip("10.1.0.1")] * 4 + [_ip("10.2.0.1")] * 2 + [_ip("50.0.0.1")], dtype=np.uint32)
    dst = np.array([_ip("20.0.0.1")] * 4 + [_ip("20.0.0.2")] * 2 + [_ip("20.9.9.9")], dtype=np.uint32)
    result = exact_hhh_2d(hierarchy, (src, dst), 4)
    assert [(r.node, r.prefix, r.residual, r.count) for r in result] == [
        ((2, 1), "10.1.0.0/16 → 20.0.0.0/8", 4, 4),
    ]
    # τ = 3: * → 20/8 has residual 7 − 4 = 3 and is selected; the root then has residual 0
    result = exact_hhh_2d(hierarchy, (src, dst), 3)
    assert [(r.node, r.prefix, r.residual, r.count) for r in result] == [
        ((2, 1), "10.1.0.0/16 → 20.0.0.0/8", 4, 4),
        ((0, 1), "0.0.0.0/0 → 20.0.0.0/8", 3, 7),
    ]


# ---------------------------------------------------------------------- agreement with the 1-D reference


@pytest.mark.parametrize("constant_side", ["second", "first"])
def test_exact_hhh_2d_with_a_constant_side_is_the_1d_hhh(constant_side: str) -> None:
    """With every element's second value the same, pair (a at ℓ1, b at ℓ2) holds exactly the elements
    of a at ℓ1 whatever ℓ2, so the finest such node (ℓ1, h2) absorbs them: the 2-D HHH are the 1-D
    HHH of the first side at nodes (ℓ1, h2) — the 1-D root at (0, h2) — with the same residuals and
    counts, and nothing else (the 2-D root then has residual 0 or < τ). Symmetrically for the first."""
    one_d = IPv4Hierarchy((8, 16, 24))
    other = IPv4Hierarchy((8, 32))
    hierarchy = PairHierarchy(one_d, other) if constant_side == "second" else PairHierarchy(other, one_d)
    rng = np.random.default_rng(7)
    pool = np.array([_ip(f"10.{b}.{c}.1") for b in (1, 2) for c in (3, 4)] + [_ip("30.0.0.1")], np.uint32)
    for trial in range(20):
        varying = pool[rng.integers(0, pool.size, 200)]
        constant = np.full(200, _ip("203.0.113.5"), np.uint32)
        weights = rng.integers(1, 4, 200) if trial % 2 else None
        tau = int(rng.integers(5, 120))
        expected = [(r.level, r.key, r.residual, r.count) for r in exact_hhh(one_d, varying, tau, weights=weights)]
        if constant_side == "second":
            got = exact_hhh_2d(hierarchy, (varying, constant), tau, weights=weights)
            mapped = [(r.node[0], hierarchy.decode(r.key, r.level)[0], r.residual, r.count) for r in got]
            assert all(r.node[1] == hierarchy.second.h for r in got)
        else:
            got = exact_hhh_2d(hierarchy, (constant, varying), tau, weights=weights)
            mapped = [(r.node[1], hierarchy.decode(r.key, r.level)[1], r.residual, r.count) for r in got]
            assert all(r.node[0] == hierarchy.first.h for r in got)
        assert sorted(mapped) == sorted(expected), (constant_side, trial, tau)


# ---------------------------------------------------------------------- edges and errors


def test_exact_hhh_2d_edges_and_errors() -> None:
    """Empty input gives nothing; τ <= 0, a 1-D hierarchy and bad weights are usage errors."""
    hierarchy = parse_hierarchy("ipv4:8,16 x ipv4:8,16")
    empty = (np.array([], np.uint32), np.array([], np.uint32))
    assert exact_hhh_2d(hierarchy, empty, 1) == []
    values = (np.array([_ip("10.0.0.1")] * 3, np.uint32), np.array([_ip("20.0.0.1")] * 3, np.uint32))
    finest = hierarchy.level_of((2, 2))
    assert [(r.level, r.residual, r.count) for r in exact_hhh_2d(hierarchy, values, 3)] == [(finest, 3, 3)]
    with pytest.raises(UsageError, match="tau"):
        exact_hhh_2d(hierarchy, values, 0)
    with pytest.raises(UsageError, match="PairHierarchy"):
        exact_hhh_2d(IPv4Hierarchy(), values[0], 1)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="weights"):
        exact_hhh_2d(hierarchy, values, 1, weights=[1, 2])
    with pytest.raises(UsageError, match="weights"):
        exact_hhh_2d(hierarchy, values, 1, weights=[1, -1, 2])
    with pytest.raises(UsageError):
        exact_hhh_2d(hierarchy, (values[0], values[1][:2]), 1)  # sides of different lengths
