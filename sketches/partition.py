"""Key-space partitioning per level (docs/ALGORITHMS.md §2: parallelism without merging).

Element ``x`` goes, at level ℓ, to partition ``hash(prefix_ℓ(x)) mod P`` where ``hash`` is the
hierarchy's fixed public :meth:`~sketches.hierarchy.Hierarchy.key_hash`. One element touches
exactly one partition per level, so releasing every (level, partition) sketch on its own costs
what one sketch per level costs. Sketches are never merged.
"""

from __future__ import annotations

import numpy as np

from .hierarchy import Hierarchy

__all__ = ["partition_of", "check_partitions"]


def check_partitions(partitions: int) -> int:
    """Validate a partition count P >= 1 and return it as an int."""
    if not isinstance(partitions, (int, np.integer)) or isinstance(partitions, bool) or partitions < 1:
        raise ValueError(f"partitions: must be an integer >= 1, got {partitions!r}")
    return int(partitions)


def partition_of(hierarchy: Hierarchy, keys: np.ndarray, level: int, partitions: int) -> np.ndarray:
    """The partition (0..P-1, int64) of each sketch key at ``level``; data-independent."""
    partitions = check_partitions(partitions)
    keys = np.asarray(keys, dtype=np.int64)
    if partitions == 1:
        return np.zeros(keys.shape[0], dtype=np.int64)
    return (hierarchy.key_hash(keys, level) % np.uint64(partitions)).astype(np.int64)
