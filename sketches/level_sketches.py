"""One Misra-Gries sketch per (level, partition) over a hierarchy (spec §2).

:class:`LevelSketches` expands each batch of values to every sketched level, routes each key to
its partition (:func:`~sketches.partition.partition_of`) and inserts it, in input order, into that
partition's sketch. It also counts each sub-stream's length ``n_{ℓ,p}``. All of this is raw,
non-private state: it leaves only through :mod:`privacy` releases.
"""

from __future__ import annotations

from typing import Any, Iterator


from .hierarchy import Hierarchy
from .misra_gries import MisraGries
from .partition import check_partitions, partition_of

__all__ = ["LevelSketches"]


class LevelSketches:
    """Sketches for levels 1..h, P key partitions each, κ counters per sketch."""

    def __init__(self, hierarchy: Hierarchy, counters: int, partitions: int = 1) -> None:
        self.hierarchy = hierarchy
        self.partitions = check_partitions(partitions)
        self.counters = int(counters)
        self._sketches = {
            (level, p): MisraGries(counters)
            for level in range(1, hierarchy.h + 1)
            for p in range(self.partitions)
        }

    def update(self, values: Any) -> None:
        """Insert a batch of values (format depends on the hierarchy) at every level."""
        if self.hierarchy.count(values) == 0:
            return
        for level in range(1, self.hierarchy.h + 1):
            keys = self.hierarchy.keys(values, level)
            if self.partitions == 1:
                self._sketches[(level, 0)].update(keys)
                continue
            parts = partition_of(self.hierarchy, keys, level, self.partitions)
            for p in range(self.partitions):
                chosen = keys[parts == p]
                if chosen.size:
                    self._sketches[(level, p)].update(chosen)

    def sketch(self, level: int, partition: int = 0) -> MisraGries:
        """The sketch of one (level, partition)."""
        return self._sketches[(level, partition)]

    def items(self) -> Iterator[tuple[tuple[int, int], MisraGries]]:
        """((level, partition), sketch) pairs, by level then partition."""
        return iter(sorted(self._sketches.items()))
