"""Hierarchies and Misra-Gries sketches: the raw, non-private state of dphhh (docs/ALGORITHMS.md §1–§2).

Nothing in this package is private: sketches and exact counts leave only through
:mod:`privacy` releases.

Modules:

* :mod:`sketches.hierarchy` — the hierarchies over which heavy hitters are sought
  (:class:`IPv4Hierarchy`, :class:`IPv6Hierarchy`, :class:`PathHierarchy`, the :class:`Hierarchy`
  base, :func:`parse_hierarchy` for ``ipv4:8,16,24,32``-style specs);
* :mod:`sketches.misra_gries` — the Misra-Gries sketch of Algorithm 2 (:class:`MisraGries`),
  versioned and checksummed serialisation, :func:`clip_weights` for weighted records;
* :mod:`sketches._mg_kernel` — the sketch's compiled (numba) kernel (internal);
* :mod:`sketches.level_sketches` — one sketch per (level, partition) over a hierarchy
  (:class:`LevelSketches`);
* :mod:`sketches.partition` — the public, data-independent key partitioning per level;
* :mod:`sketches.exact` — exact counts and the exact HHH reference (tests and evaluation only:
  raw data, never to be published);
* :mod:`sketches.sizing` — memory and serialised size of a sketch from κ alone (``dphhh plan``);
* :mod:`sketches.framing` — the versioned, checksummed binary frame of all serialised state.
"""

from .exact import ExactHHH, exact_counts, exact_hhh
from .framing import seal, unseal
from .hierarchy import Hierarchy, IPv4Hierarchy, IPv6Hierarchy, PathHierarchy, parse_hierarchy, splitmix64
from .level_sketches import LevelSketches
from .misra_gries import MisraGries, SketchFormatError, clip_weights
from .partition import check_partitions, partition_of
from .sizing import sketch_memory_bytes, sketch_state_bytes

__all__ = [
    # hierarchies
    "Hierarchy",
    "IPv4Hierarchy",
    "IPv6Hierarchy",
    "PathHierarchy",
    "parse_hierarchy",
    "splitmix64",
    # sketches
    "MisraGries",
    "SketchFormatError",
    "clip_weights",
    "LevelSketches",
    "partition_of",
    "check_partitions",
    # exact reference (raw data)
    "ExactHHH",
    "exact_counts",
    "exact_hhh",
    # sizing and serialisation
    "sketch_memory_bytes",
    "sketch_state_bytes",
    "seal",
    "unseal",
]
