"""Hierarchies and Misra-Gries sketches: the raw, non-private state of dphhh (docs/ALGORITHMS.md §1–§2).

Nothing in this package is private: sketches and exact counts leave only through
:mod:`dphhh.privacy` releases.

Modules:

* :mod:`dphhh.sketches.hierarchy` — the hierarchies over which heavy hitters are sought
  (:class:`IPv4Hierarchy`, :class:`IPv6Hierarchy`, :class:`PathHierarchy`, the :class:`Hierarchy`
  base, :func:`parse_hierarchy` for ``ipv4:8,16,24,32``-style specs);
* :mod:`dphhh.sketches.misra_gries` — the Misra-Gries sketch of Algorithm 2 (:class:`MisraGries`),
  versioned and checksummed serialisation, :func:`clip_weights` for weighted records;
* :mod:`dphhh.sketches._mg_kernel` — the sketch's compiled (numba) kernel (internal);
* :mod:`dphhh.sketches.level_sketches` — one sketch per (level, partition) over a hierarchy
  (:class:`LevelSketches`);
* :mod:`dphhh.sketches.partition` — the public, data-independent key partitioning per level;
* :mod:`dphhh.sketches.exact` — exact counts and the exact HHH reference (tests and evaluation only:
  raw data, never to be published);
* :mod:`dphhh.sketches.pairs` — pair hierarchies for two-dimensional HHH (:class:`PairHierarchy`: the
  lattice of (source prefix, destination prefix) nodes, collision-free IPv4 × IPv4 keys);
* :mod:`dphhh.sketches.specs` — :func:`parse_hierarchy`, a spec of any kind (one-dimensional or a pair);
* :mod:`dphhh.sketches._pair_table` — the compiled key → pair table of a pair node whose keys cannot be
  decoded (the /32 × /32 node, hashed pairs), merging chance collisions under the smaller pair (internal);
* :mod:`dphhh.sketches.keyed` — secret, per-window keyed-hash keys for prefixes wider than 63 bits
  (:class:`KeySecret`, SipHash-2-4), and the δ their collisions cost (docs/ALGORITHMS.md §1 "Keys");
* :mod:`dphhh.sketches._blake2b_kernel` — compiled keyed BLAKE2b of many short messages, bit for bit
  ``hashlib``'s (:meth:`KeySecret.digests`: a batch's distinct paths and IPv6 prefixes; internal);
* :mod:`dphhh.sketches.canonical` — the canonical order in which a sketch takes a group of elements
  (sorted keys, runs as weighted updates; docs/ALGORITHMS.md §0 "Canonical order");
* :mod:`dphhh.sketches.exact2d` — the exact two-dimensional HHH reference over a pair hierarchy, overlap
  semantics (:func:`exact_hhh_2d`, docs/ALGORITHMS.md §11; tests and evaluation only: raw data);
* :mod:`dphhh.sketches.sizing` — memory and serialised size of a sketch from κ alone (``dphhh plan``);
* :mod:`dphhh.sketches.framing` — the versioned, checksummed binary frame of all serialised state;
* :mod:`dphhh.sketches._cache_home` — where downloaded and built artefacts go outside a checkout
  (``$DPHHH_HOME``, default ``~/.cache/dphhh``; internal, shared with :mod:`dphhh.stream.paths`);
* :mod:`dphhh.sketches.errors` — the error types every dphhh package raises for what a user can fix
  (:class:`DphhhError`, :class:`UsageError`, :class:`InputError`, :class:`OperationalError`).
"""

from .errors import DphhhError, InputError, OperationalError, UsageError
from .exact import ExactHHH, exact_counts, exact_hhh
from .exact2d import ExactPairHHH, exact_hhh_2d
from .framing import seal, unseal
from .hierarchy import (
    HIERARCHY_KINDS,
    Hierarchy,
    IPv4Hierarchy,
    IPv6Hierarchy,
    PathHierarchy,
    register_hierarchy_kind,
    splitmix64,
)
from .level_sketches import LevelSketches
from .misra_gries import MisraGries, SketchFormatError, clip_weights
from .pairs import PairHierarchy, parse_pair_hierarchy
from .partition import check_partitions, partition_of, route
from .sizing import sketch_memory_bytes, sketch_state_bytes
from .specs import parse_hierarchy

__all__ = [
    # errors
    "DphhhError",
    "UsageError",
    "InputError",
    "OperationalError",
    # hierarchies
    "HIERARCHY_KINDS",
    "Hierarchy",
    "register_hierarchy_kind",
    "IPv4Hierarchy",
    "IPv6Hierarchy",
    "PathHierarchy",
    "parse_hierarchy",
    "PairHierarchy",
    "parse_pair_hierarchy",
    "splitmix64",
    # sketches
    "MisraGries",
    "SketchFormatError",
    "clip_weights",
    "LevelSketches",
    "partition_of",
    "route",
    "check_partitions",
    # exact reference (raw data)
    "ExactHHH",
    "exact_counts",
    "exact_hhh",
    "ExactPairHHH",
    "exact_hhh_2d",
    # sizing and serialisation
    "sketch_memory_bytes",
    "sketch_state_bytes",
    "seal",
    "unseal",
]
