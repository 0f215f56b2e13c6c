"""Neighbouring windows at h = 4, P = 2 for the window-release audit (docs/ALGORITHMS.md §2, §3, §5, §10).

Each case of the proof of the per-level release (Lemma 4.1.1, docs/ALGORITHMS.md §2 and §3) is built through the
job's own sketching code (:class:`~dphhh.sketches.level_sketches.LevelSketches`, ``ipv4:8,16,24,32``, P = 2
key partitions): stream B, and stream A = B plus one element x at a fixed position. x's prefix at
level ℓ goes to the partition ``hash(prefix_ℓ(x)) mod P`` (docs/ALGORITHMS.md §2), so A and B differ in exactly
one (level, partition) sketch per level — its counters as the case says, and its sub-stream size by
one — and every other sketch is identical (:func:`check_neighbours` asserts all of it).

* ``one_differs``: x's prefix is a key of its sketch at every level and gains one count (no
  decrement-all happens anywhere);
* ``all_shift``: x is new and lands, at every level, in a full sketch (κ keys, all >= 1): the
  decrement-all moves every counter of that sketch by one;
* ``enters``: x is new and finds a free slot at every level: a count-1 key is present in A only.

Heavy keys are /32 addresses with their own /8 (their count is the same at every level), chosen so
that they share x's partition at every level; other traffic fills the other partition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.partition import partition_of
from dphhh.sketches.specs import parse_hierarchy

__all__ = ["HIERARCHY", "PARTITIONS", "CASES", "Neighbours", "build", "check_neighbours", "partitions_of"]

HIERARCHY = parse_hierarchy("ipv4:8,16,24,32")
PARTITIONS = 2
CASES = ("one_differs", "all_shift", "enters")
_LOW = (7 << 16) | (7 << 8)  # bits 8..23 of every candidate address


@dataclass(frozen=True)
class Neighbours:
    """Windows A (with x) and B (without x) and where x goes at each level."""

    case: str
    a: LevelSketches
    b: LevelSketches
    x_partitions: tuple[int, ...]

    def changed(self) -> list[tuple[int, int]]:
        """The (level, partition) sketches x touches: one per level."""
        return [(level, p) for level, p in enumerate(self.x_partitions, start=1)]


def partitions_of(address: int) -> tuple[int, ...]:
    """The partition of ``address``'s prefix at each level 1..h (docs/ALGORITHMS.md §2)."""
    return tuple(int(p) for p in _partition_rows(np.array([address], dtype=np.uint32))[0])


def _partition_rows(values: np.ndarray) -> np.ndarray:
    """Each address's partition at each level 1..h: shape (len(values), h)."""
    return np.stack(
        [
            partition_of(HIERARCHY, HIERARCHY.keys(values, level), level, PARTITIONS)
            for level in range(1, HIERARCHY.h + 1)
        ],
        axis=1,
    )


def _addresses(pattern: tuple[int, ...], count: int, skip: set[int]) -> list[int]:
    """``count`` addresses with this partition pattern, one per /8 (first octets 2, 3, … not in
    ``skip``): in each /8 the first o.7.7.j (j = 7, 8, …) whose prefixes hash as required."""
    found = []
    low = np.arange(7, 256, dtype=np.uint32) | np.uint32(_LOW)
    for octet in range(2, 224):
        if octet in skip:
            continue
        candidates = low | np.uint32(octet << 24)
        hits = np.flatnonzero((_partition_rows(candidates) == np.array(pattern)).all(axis=1))
        if hits.size:
            found.append(int(candidates[hits[0]]))
            if len(found) == count:
                return found
    raise AssertionError(f"not enough addresses with partition pattern {pattern}")


def _stream(heavy: list[int], counts: list[int], others: list[int], seed: int) -> np.ndarray:
    """Heavy addresses ``counts`` times each and each other address 40 + 90·i times, shuffled."""
    parts = [np.full(c, a, dtype=np.uint32) for a, c in zip(heavy, counts)]
    parts += [np.full(40 + 90 * i, a, dtype=np.uint32) for i, a in enumerate(others)]
    values = np.concatenate(parts)
    return values[np.random.default_rng(seed).permutation(values.size)]


def _sketches(values: np.ndarray, counters: int, batch: int = 997) -> LevelSketches:
    """The job's path: LevelSketches fed batch by batch in arrival order."""
    sketches = LevelSketches(HIERARCHY, counters, PARTITIONS)
    for start in range(0, values.size, batch):
        sketches.update(values[start : start + batch])
    return sketches


def build(case: str, counts: list[int], *, others: int = 2, spare: int = 4, seed: int = 7) -> Neighbours:
    """Neighbouring windows for ``case`` with heavy keys at ``counts`` in x's sketches.

    ``one_differs``: x is the first heavy key (count ``counts[0]`` in B). ``all_shift``: κ = the
    number of heavy keys (full sketches). ``enters``: κ = heavy keys + ``spare`` (free slots).
    x is inserted at 90 % of stream B.
    """
    if case not in CASES:
        raise ValueError(f"unknown case {case!r}")
    x_new = (1 << 24) | _LOW | 7  # 1.7.7.7: its own /8, used by no other address
    pattern = partitions_of(x_new)
    heavy = _addresses(pattern, len(counts), skip={1})  # x's partition at every level
    x = heavy[0] if case == "one_differs" else x_new
    rest = _addresses(tuple(1 - p for p in pattern), others, skip={1} | {a >> 24 for a in heavy})
    values_b = _stream(heavy, counts, rest, seed)
    values_a = np.insert(values_b, int(0.9 * values_b.size), np.uint32(x))
    kappa = len(counts) if case == "all_shift" else len(counts) + spare
    return Neighbours(case, _sketches(values_a, kappa), _sketches(values_b, kappa), pattern)


def check_neighbours(nb: Neighbours) -> None:
    """Assert that A and B differ exactly as the case says, in x's sketch of each level only."""
    changed = set(nb.changed())
    for ((level, p), sk_a), (_, sk_b) in zip(nb.a.items(), nb.b.items()):
        ca, cb = sk_a.counters(), sk_b.counters()
        if (level, p) not in changed:
            assert ca == cb and sk_a.total == sk_b.total, (level, p)
            continue
        assert sk_a.total == sk_b.total + 1, (level, p)
        if nb.case == "one_differs":
            diff = {k: ca[k] - cb[k] for k in ca}
            assert set(ca) == set(cb) and sorted(diff.values()) == [0] * (len(ca) - 1) + [1], (level, p)
        elif nb.case == "all_shift":
            assert set(ca) == set(cb) and all(ca[k] == cb[k] - 1 for k in cb), (level, p)
            assert min(cb.values()) >= 1 and len(cb) == nb.b.counters, (level, p)
        else:
            extra = set(ca) - set(cb)
            assert len(extra) == 1 and ca[extra.pop()] == 1 and set(cb) <= set(ca), (level, p)
            assert all(ca[k] == cb[k] for k in cb), (level, p)
