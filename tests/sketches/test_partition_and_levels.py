"""Tests of key-space partitioning and per-(level, partition) sketches (docs/ALGORITHMS.md §2)."""

from __future__ import annotations

import ipaddress

import numpy as np
import pytest

from dphhh.sketches.hierarchy import IPv4Hierarchy, IPv6Hierarchy, PathHierarchy
from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.misra_gries import MisraGries
from dphhh.sketches.partition import check_partitions, partition_of


def _clustered_ipv4(rng: np.random.Generator, n: int) -> np.ndarray:
    """Addresses with heavy /8, /16, /24 and /32 prefixes plus a uniform tail."""
    heavy = np.array(
        [int(ipaddress.IPv4Address(a)) for a in ("10.1.1.1", "10.1.1.2", "10.1.2.3", "10.9.0.1", "172.16.5.5")],
        dtype=np.uint64,
    )
    pick = rng.integers(0, heavy.size, n)
    noise = rng.integers(0, 256, n, dtype=np.uint64)
    mixed = np.where(rng.random(n) < 0.5, heavy[pick], heavy[pick] ^ noise)
    tail = rng.integers(0, 2**32, n, dtype=np.uint64)
    return np.where(rng.random(n) < 0.8, mixed, tail).astype(np.uint32)


# ---------------------------------------------------------------------------------------------
# partition_of
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("partitions", [1, 2, 3, 7, 64])
def test_partition_of_in_range_and_int64(partitions):
    """Partitions are int64 values in 0..P-1, one per key."""
    rng = np.random.default_rng(partitions)
    h = IPv4Hierarchy()
    keys = h.keys(rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32), 2)
    parts = partition_of(h, keys, 2, partitions)
    assert parts.dtype == np.int64 and parts.shape == keys.shape
    assert parts.min() >= 0 and parts.max() < partitions
    if partitions == 1:
        assert not parts.any()


def test_partition_of_is_stable_and_order_independent():
    """A key's partition is the same across calls, permutations, single-key calls and objects."""
    rng = np.random.default_rng(7)
    keys = IPv4Hierarchy().keys(_clustered_ipv4(rng, 2000), 3)
    parts = partition_of(IPv4Hierarchy(), keys, 3, 5)
    perm = rng.permutation(keys.size)
    assert np.array_equal(partition_of(IPv4Hierarchy(), keys[perm], 3, 5), parts[perm])
    singles = [int(partition_of(IPv4Hierarchy(), keys[i : i + 1], 3, 5)[0]) for i in range(0, keys.size, 37)]
    assert singles == parts[::37].tolist()
    assert np.array_equal(partition_of(IPv4Hierarchy(), keys, 3, 5), parts)


def test_partition_of_spreads_distinct_keys_evenly():
    """20 000 distinct /32 keys spread over 4 partitions within ±10 % of an even share."""
    keys = np.arange(20_000, dtype=np.int64) * 4099 + 12345  # distinct, structured addresses
    parts = partition_of(IPv4Hierarchy(), keys, 4, 4)
    share = np.bincount(parts, minlength=4) / keys.size
    assert np.all(np.abs(share - 0.25) < 0.025)


def test_path_partition_independent_of_interning_order():
    """The partition of a path prefix does not depend on which prefixes were interned first."""
    batch = [f"c{i % 5}/r{i % 7}/t{i}" for i in range(60)]
    h1, h2 = PathHierarchy(3), PathHierarchy(3)
    h2.keys(batch[::-1], 2)  # intern in the opposite order first
    p1 = partition_of(h1, h1.keys(batch, 2), 2, 4)
    p2 = partition_of(h2, h2.keys(batch, 2), 2, 4)
    assert np.array_equal(p1, p2)
    assert len(set(p1.tolist())) > 1


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "2", None])
def test_check_partitions_rejects_bad_values(bad):
    """P must be an integer >= 1 (bool, float, str rejected) and the message names partitions."""
    with pytest.raises(ValueError, match="partitions"):
        check_partitions(bad)


def test_check_partitions_accepts_numpy_integers():
    """A numpy integer P is accepted and returned as a Python int."""
    got = check_partitions(np.int32(3))
    assert got == 3 and isinstance(got, int)


# ---------------------------------------------------------------------------------------------
# LevelSketches
# ---------------------------------------------------------------------------------------------


def _batches(values, sizes):
    out, start = [], 0
    for size in sizes:
        out.append(values[start : start + size])
        start += size
    out.append(values[start:])
    return out


@pytest.mark.parametrize("partitions", [1, 2, 5])
def test_every_element_lands_in_one_partition_per_level(partitions):
    """Per level, the sub-stream lengths (sketch totals) over all partitions add up to n."""
    rng = np.random.default_rng(10 + partitions)
    values = _clustered_ipv4(rng, 7000)
    ls = LevelSketches(IPv4Hierarchy(), counters=16, partitions=partitions)
    for batch in _batches(values, [1000, 1, 2500, 0]):
        ls.update(batch)
    for level in range(1, 5):
        totals = [ls.sketch(level, p).total for p in range(partitions)]
        assert sum(totals) == values.size
        if partitions > 1:
            assert sum(1 for t in totals if t > 0) >= 2  # really spread, not all in one


@pytest.mark.parametrize("partitions", [2, 3, 8])
def test_partition_sketch_equals_sketch_of_its_substream(partitions):
    """Each (level, partition) sketch equals a MisraGries fed exactly that partition's keys in order."""
    rng = np.random.default_rng(100 + partitions)
    values = _clustered_ipv4(rng, 6000)
    h = IPv4Hierarchy()
    ls = LevelSketches(h, counters=8, partitions=partitions)
    for batch in _batches(values, [123, 2000, 7, 1500]):
        ls.update(batch)
    reference_hierarchy = IPv4Hierarchy()  # a separate object: the hash is public and fixed
    for level, length in enumerate(h.prefix_lengths, start=1):
        mask = ((1 << length) - 1) << (32 - length)
        keys = [v & mask for v in values.tolist()]
        parts = [int(partition_of(reference_hierarchy, np.array([k]), level, partitions)[0]) for k in keys]
        for p in range(partitions):
            reference = MisraGries(8)
            reference.update([k for k, q in zip(keys, parts) if q == p])
            assert ls.sketch(level, p) == reference, (level, p)


def test_single_partition_equals_direct_per_level_sketches():
    """With P = 1 the level sketches equal one MisraGries per level fed the generalised stream."""
    rng = np.random.default_rng(12)
    values = _clustered_ipv4(rng, 5000)
    h = IPv4Hierarchy((8, 20, 32))
    ls = LevelSketches(h, counters=10)
    for batch in _batches(values, [10, 3000]):
        ls.update(batch)
    for level in range(1, h.h + 1):
        direct = MisraGries(10)
        direct.update(h.keys(values, level))
        assert ls.sketch(level, 0) == direct


def test_items_lists_every_level_partition_pair_in_order():
    """items() yields h·P sketches ordered by level then partition, each of κ counters."""
    ls = LevelSketches(IPv4Hierarchy((8, 16)), counters=3, partitions=3)
    items = list(ls.items())
    assert [key for key, _ in items] == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    assert all(isinstance(s, MisraGries) and s.k == 3 for _, s in items)
    assert len({id(s) for _, s in items}) == 6  # distinct sketch objects, never shared


def test_empty_batch_changes_nothing():
    """Updating with an empty batch leaves every sketch empty."""
    ls = LevelSketches(IPv4Hierarchy(), counters=4, partitions=2)
    ls.update(np.array([], dtype=np.uint32))
    assert all(s.total == 0 for _, s in ls.items())


def test_invalid_level_sketch_parameters_rejected():
    """Bad partition counts and κ are rejected at construction."""
    with pytest.raises(ValueError, match="partitions"):
        LevelSketches(IPv4Hierarchy(), counters=4, partitions=0)
    with pytest.raises(ValueError, match=r"\bk\b"):
        LevelSketches(IPv4Hierarchy(), counters=0)


def _labelled(sketch: MisraGries, hierarchy, level: int) -> dict[str, int]:
    return {hierarchy.label(k, level): c for k, c in sketch.counters().items()}


def test_path_level_sketches_match_label_level_reference():
    """Path level sketches hold, per partition, the counters of their sub-stream by label."""
    rng = np.random.default_rng(13)
    values = [f"c{int(rng.integers(0, 3))}/r{int(rng.integers(0, 4))}/t{int(rng.zipf(1.5)) % 40}" for _ in range(3000)]
    h, P, kappa = PathHierarchy(3), 3, 6
    ls = LevelSketches(h, counters=kappa, partitions=P)
    for batch in (values[:700], values[700:701], values[701:]):
        ls.update(batch)
    other = PathHierarchy(3)  # an independent object for the reference partitioning
    for level in range(1, 4):
        prefixes = ["/".join(v.split("/")[:level]) for v in values]
        ids = {x: int(other.keys([x + "/z" * (3 - level)], level)[0]) for x in dict.fromkeys(prefixes)}
        part_of = {x: int(partition_of(other, other.keys([x + "/z" * (3 - level)], level), level, P)[0]) for x in ids}
        for p in range(P):
            chosen = [x for x in prefixes if part_of[x] == p]
            reference = MisraGries(kappa)
            reference.update([ids[x] for x in chosen])
            names = {i: x for x, i in ids.items()}
            expected = {names[k]: c for k, c in reference.counters().items()}
            got = ls.sketch(level, p)
            assert _labelled(got, h, level) == expected
            assert got.total == len(chosen) and got.decrements == reference.decrements


def test_ipv6_level_sketches_count_every_element_once_per_level():
    """With IPv6 values every level's partition totals add up to n and keys label back correctly."""
    rng = np.random.default_rng(14)
    base = int(ipaddress.IPv6Address("2001:db8::"))
    ints = [
        base + (int(rng.integers(0, 3)) << 96) + (int(rng.integers(0, 5)) << 64) + int(rng.integers(0, 4))
        for _ in range(2000)
    ]
    hi = np.array([v >> 64 for v in ints], dtype=np.uint64)
    lo = np.array([v & (2**64 - 1) for v in ints], dtype=np.uint64)
    h = IPv6Hierarchy((32, 64, 128))
    ls = LevelSketches(h, counters=64, partitions=2)
    ls.update((hi[:500], lo[:500]))
    ls.update((hi[500:], lo[500:]))
    for level, length in enumerate((32, 64, 128), start=1):
        assert sum(ls.sketch(level, p).total for p in range(2)) == len(ints)
        mask = ((1 << length) - 1) << (128 - length)
        exact: dict[str, int] = {}
        for v in ints:
            label = f"{ipaddress.IPv6Address(v & mask)}/{length}"
            exact[label] = exact.get(label, 0) + 1
        # κ = 64 exceeds the number of distinct prefixes (<= 60), so counters are exact.
        got: dict[str, int] = {}
        for p in range(2):
            got.update(_labelled(ls.sketch(level, p), h, level))
        assert got == exact


def test_the_one_router_is_what_level_sketches_and_the_stream_use() -> None:
    """sketches.partition.route gives every value's key at each level to one partition, in input
    order; LevelSketches.update and stream.wire.expand both go through it."""
    import inspect

    from dphhh.sketches import level_sketches
    from dphhh.sketches.hierarchy import IPv4Hierarchy
    from dphhh.sketches.partition import partition_of, route
    from dphhh.stream import wire

    hierarchy = IPv4Hierarchy([8, 16, 24])
    rng = np.random.default_rng(3)
    values = rng.integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    weights = rng.integers(1, 9, 5000).astype(np.int64)
    seen = {}
    for level, p, keys, w in route(hierarchy, values, 4, weights):
        all_keys = hierarchy.keys(values, level)
        mine = partition_of(hierarchy, all_keys, level, 4) == p
        assert np.array_equal(keys, all_keys[mine]) and np.array_equal(w, weights[mine])
        seen[(level, p)] = keys.size
    assert sum(seen.values()) == 3 * values.size
    assert "route(" in inspect.getsource(level_sketches.LevelSketches.update)
    assert "route(" in inspect.getsource(wire.expand)
