"""One Misra-Gries sketch per (level, partition) over a hierarchy (docs/ALGORITHMS.md §2).

:class:`LevelSketches` expands each batch of values to every sketched level, routes each key to
its partition (:func:`~dphhh.sketches.partition.partition_of`) and inserts it, in input order, into that
partition's sketch. It also counts each sub-stream's length ``n_{ℓ,p}``. All of this is raw,
non-private state: it leaves only through :mod:`dphhh.privacy` releases.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .errors import UsageError
from .hierarchy import Hierarchy
from .misra_gries import MisraGries, _int64_weights
from .partition import check_partitions, route

__all__ = ["LevelSketches"]


class LevelSketches:
    """Sketches for levels 1..h, P key partitions each, κ counters per sketch."""

    def __init__(self, hierarchy: Hierarchy, counters: int, partitions: int = 1) -> None:
        self.hierarchy = hierarchy
        self.partitions = check_partitions(partitions)
        self.counters = int(counters)
        self._sketches = {
            (level, p): MisraGries(counters) for level in range(1, hierarchy.h + 1) for p in range(self.partitions)
        }

    def update(self, values: Any, weights: np.ndarray | Iterable[int] | None = None) -> None:
        """Insert a batch of values (format depends on the hierarchy) at every level.

        With ``weights`` (integers >= 1, one per value, already clipped to the public cap:
        :func:`~dphhh.sketches.misra_gries.clip_weights`) value i is a record of ``weights[i]`` unit
        elements: at each level its key goes, with its weight, to the one partition its key maps
        to, and each sketch receives its records in input order, so every sketch ends exactly as
        if each value had been repeated ``weights[i]`` times in a row (each sketch's ``total``,
        ``n_{ℓ,p}``, counts weight units).
        """
        count = self.hierarchy.count(values)
        if weights is not None:
            weights = _int64_weights(weights, "LevelSketches.update")
            if weights.shape[0] != count:
                raise UsageError(
                    f"LevelSketches.update: {weights.shape[0]} weights for {count} values (one weight per value)"
                )
        if count == 0:
            return
        for level, p, keys, part_weights in route(self.hierarchy, values, self.partitions, weights):
            self._sketches[(level, p)].update(keys, part_weights)

    def sketch(self, level: int, partition: int = 0) -> MisraGries:
        """The sketch of one (level, partition)."""
        return self._sketches[(level, partition)]

    def items(self) -> Iterator[tuple[tuple[int, int], MisraGries]]:
        """((level, partition), sketch) pairs, by level then partition."""
        return iter(sorted(self._sketches.items()))
