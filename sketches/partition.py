"""Key-space partitioning per level (docs/ALGORITHMS.md §2: parallelism without merging).

Element ``x`` goes, at level ℓ, to partition ``hash(prefix_ℓ(x)) mod P`` where ``hash`` is the
hierarchy's fixed public :meth:`~dphhh.sketches.hierarchy.Hierarchy.key_hash`. One element touches
exactly one partition per level, so releasing every (level, partition) sketch on its own costs
what one sketch per level costs. Sketches are never merged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .errors import UsageError
from .hierarchy import Hierarchy

__all__ = ["partition_of", "check_partitions", "route"]


def check_partitions(partitions: int) -> int:
    """Validate a partition count P >= 1 and return it as an int."""
    if not isinstance(partitions, (int, np.integer)) or isinstance(partitions, bool) or partitions < 1:
        raise UsageError(f"partitions: must be an integer >= 1, got {partitions!r}")
    return int(partitions)


def partition_of(hierarchy: Hierarchy, keys: np.ndarray, level: int, partitions: int) -> np.ndarray:
    """The partition (0..P-1, int64) of each sketch key at ``level``; data-independent."""
    partitions = check_partitions(partitions)
    keys = np.asarray(keys, dtype=np.int64)
    if partitions == 1:
        return np.zeros(keys.shape[0], dtype=np.int64)
    return (hierarchy.key_hash(keys, level) % np.uint64(partitions)).astype(np.int64)


def route(
    hierarchy: Hierarchy, values: Any, partitions: int, weights: np.ndarray | None = None
) -> Iterator[tuple[int, int, np.ndarray, np.ndarray | None]]:
    """``(level, partition, keys, weights)`` for every (level, partition) sketch a batch of
    ``values`` touches: each value's key at each level 1..h goes to the one partition
    :func:`partition_of` gives it, input order kept (``weights``, one per value, follow their
    values; ``None`` stays ``None``). The one router of the project: the batch sketches
    (:meth:`~dphhh.sketches.level_sketches.LevelSketches.update`) and the stream job's decode step
    (``stream.wire.expand``) both use it, so a batch and a stream put every key in the same sketch.
    With P = 1 every level yields its one partition, even for an empty batch."""
    partitions = check_partitions(partitions)
    for level, keys in enumerate(hierarchy.level_keys(values), start=1):
        if partitions == 1:
            yield level, 0, keys, weights
            continue
        owner = partition_of(hierarchy, keys, level, partitions)
        for p in range(partitions):
            mine = owner == p
            chosen = keys[mine]
            if chosen.size:
                yield level, p, chosen, None if weights is None else weights[mine]
