"""Pair hierarchies (sketches/pairs.py, docs/ALGORITHMS.md §11): the lattice, collision-free keys,
and the prefix relations (generalises, ancestor, meet) against a brute-force definition."""

from __future__ import annotations

import ipaddress
import itertools

import numpy as np
import pytest

from dphhh.sketches.hierarchy import IPv4Hierarchy, PathHierarchy
from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.pairs import PairHierarchy
from dphhh.sketches.specs import parse_hierarchy

BYTES = "ipv4:8,16,24,32 x ipv4:8,16,24,32"


def _random_pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    pool_a = rng.integers(0, 2**32, 40, dtype=np.uint64).astype(np.uint32)
    pool_b = rng.integers(0, 2**32, 40, dtype=np.uint64).astype(np.uint32)
    # shared prefixes so that relations hold between distinct pairs
    pool_a[:20] = (pool_a[:20] & np.uint32(0x0000FFFF)) | np.uint32(0x0A140000)
    pool_b[:20] = (pool_b[:20] & np.uint32(0x000000FF)) | np.uint32(0xC6336400)
    return rng.choice(pool_a, n), rng.choice(pool_b, n)


def test_the_lattice_of_byte_levels_has_24_sketched_nodes_finest_last() -> None:
    h = parse_hierarchy(BYTES)
    assert isinstance(h, PairHierarchy) and h.h == 24
    assert h.node(0) == (0, 0) and h.nodes[-1] == (4, 4)
    sums = [a + b for a, b in h.nodes]
    assert sums == sorted(sums) and len(set(h.nodes)) == 24
    assert parse_hierarchy("ipv4:8,16 × ipv4:24").spec() == "ipv4:8,16 x ipv4:24"
    with pytest.raises(ValueError, match="hierarchy"):
        parse_hierarchy("ipv4:8 x ")


def test_keys_are_non_negative_exact_and_decode_to_their_prefixes() -> None:
    h = parse_hierarchy(BYTES)
    a, b = _random_pairs(3000, 1)
    for level in range(1, h.h + 1):
        la, lb = h.node(level)
        keys = h.keys((a, b), level)
        assert keys.dtype == np.int64 and (keys >= 0).all()
        for i in range(0, 3000, 211):
            want_a = int(a[i]) & h.first.mask(la)
            want_b = int(b[i]) & h.second.mask(lb)
            assert h.decode(int(keys[i]), level) == (want_a, want_b)
            assert h.label(int(keys[i]), level) == f"{h.first.label(want_a, la)} → {h.second.label(want_b, lb)}"
        # distinct pairs of prefixes get distinct keys, equal ones equal keys (collision-free)
        prefixes = {(int(x) & h.first.mask(la), int(y) & h.second.mask(lb)) for x, y in zip(a, b)}
        assert len(set(keys.tolist())) == len(prefixes)


def test_the_64_bit_node_merges_a_collision_under_the_smaller_pair(monkeypatch) -> None:
    """Two host pairs that share a key (crafted at a test width of 4 key bits) are one key labelled
    with the smaller pair: nothing raises (docs/ALGORITHMS.md §1 "Keys")."""
    import dphhh.sketches.keyed as keyed

    monkeypatch.setattr(keyed, "KEY_BITS", 4)
    h = parse_hierarchy(BYTES).keyed(keyed.KeySecret.from_seed(3))
    a = np.arange(1, 200, dtype=np.uint32)
    b = np.full(199, 7, dtype=np.uint32)
    keys = h.keys((a, b), 24)
    assert len(set(keys.tolist())) <= 16  # many pairs per key: collisions happened
    for key in set(keys.tolist()):
        smallest = int(a[keys == key].min())
        assert h.decode(key, 24) == (smallest, 7)


def test_the_64_bit_node_remembers_every_pair_of_its_window_across_batches() -> None:
    """The /32 × /32 table of one keyed object (one window) outlives its batches (it grows past its
    first size); another object under the same key rebuilds it from shipped labels, and one under
    another window's key gives other keys."""
    from dphhh.sketches.keyed import KeySecret

    secret = KeySecret.from_seed(9).window(0)
    h = parse_hierarchy(BYTES).keyed(secret)
    rng = np.random.default_rng(4)
    batches = [
        (
            rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32),
            rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32),
        )
        for _ in range(4)
    ]
    keys = [h.keys(batch, 24) for batch in batches]
    for (a, b), k in zip(batches, keys):
        for i in (0, 1234, 2999):
            assert h.decode(int(k[i]), 24) == (int(a[i]), int(b[i]))
    labels = h.labels_of(np.concatenate(keys), 24)
    assert len(labels) == len({(int(x), int(y)) for a, b in batches for x, y in zip(a, b)})
    other = parse_hierarchy(BYTES).keyed(secret)
    other.remember(24, labels)
    assert other.labels_of(keys[2], 24) == h.labels_of(keys[2], 24)
    with pytest.raises(ValueError, match="unknown key"):
        parse_hierarchy(BYTES).keyed(secret).decode(int(keys[0][0]), 24)
    elsewhere = parse_hierarchy(BYTES).keyed(KeySecret.from_seed(9).window(10_000)).keys(batches[0], 24)
    assert not set(elsewhere.tolist()) & set(keys[0].tolist())


def test_generalises_ancestor_and_meet_match_the_prefix_definition() -> None:
    h = PairHierarchy(IPv4Hierarchy([8, 16]), IPv4Hierarchy([8, 16]))
    a, b = _random_pairs(60, 2)
    pairs = []
    for level in range(1, h.h + 1):
        for k in set(h.keys((a, b), level).tolist()):
            pairs.append((k, level))

    def net(key: int, level: int) -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]:
        x, y = h.side_labels(key, level)
        return ipaddress.IPv4Network(x), ipaddress.IPv4Network(y)

    for (k1, l1), (k2, l2) in itertools.product(pairs[:80], pairs[:80]):
        n1, n2 = net(k1, l1), net(k2, l2)
        want = n2[0].subnet_of(n1[0]) and n2[1].subnet_of(n1[1])
        assert h.generalises(k1, l1, k2, l2) == want
        if want and l1 != 0:
            assert h.ancestor(k2, l2, l1) == k1
        meet = h.meet(k1, l1, k2, l2)
        overlap = n1[0].overlaps(n2[0]) and n1[1].overlaps(n2[1])
        assert (meet is not None) == overlap
        if meet is not None:
            m = net(*meet) if meet[1] else (ipaddress.IPv4Network("0.0.0.0/0"),) * 2
            assert m[0] == min(n1[0], n2[0], key=lambda x: -x.prefixlen) and m[1] == min(
                n1[1], n2[1], key=lambda x: -x.prefixlen
            )


def test_level_sketches_hold_each_node_exactly_when_kappa_is_large() -> None:
    h = parse_hierarchy("ipv4:8,16 x ipv4:8")
    a, b = _random_pairs(2000, 3)
    sketches = LevelSketches(h, 4096, 1)
    sketches.update((a, b))
    for level in range(1, h.h + 1):
        keys, counts = np.unique(h.keys((a, b), level), return_counts=True)
        got = sketches.sketch(level).counters()
        assert got == dict(zip(keys.tolist(), counts.tolist()))


def test_other_sides_use_hashed_keys_with_labels() -> None:
    h = PairHierarchy(PathHierarchy(2), IPv4Hierarchy([8]))
    paths = ["de/berlin", "de/bonn", "fr/paris"] * 3
    dst = np.array([0x0A000001] * 9, dtype=np.uint32)
    level = h.level_of((2, 1))
    keys = h.keys((paths, dst), level)
    assert (keys >= 0).all() and len(set(keys.tolist())) == 3
    assert h.label(int(keys[0]), level) == "de/berlin → 10.0.0.0/8"
    other = PairHierarchy(PathHierarchy(2), IPv4Hierarchy([8]))
    other.first.keys(paths, 2)  # the path side learns its own labels
    other.remember(level, h.labels_of(keys, level))
    assert other.label(int(keys[2]), level) == "fr/paris → 10.0.0.0/8"
