"""Offline (snapshot) DP hierarchical heavy hitters: shared types (docs/ALGORITHMS.md §6).

A snapshot is a finite multiset of values (IPv4/IPv6 addresses, paths) over a
:class:`~sketches.hierarchy.Hierarchy` with levels ``0 .. h``. Two snapshots are **neighbours**
if one has one extra element (add or remove one element, docs/ALGORITHMS.md §0).

Two mechanisms compute a private HHH set with noisy *conditioned* counts from the exact counts:

* :func:`~privacy.offline.hhh_algorithm1.algorithm1_hhh` — Algorithm 1 of the DP-HHH paper,
  corrected (docs/ALGORITHMS.md §6); noise independent of h but with large constants and a threshold guard;
* :func:`~privacy.offline.hhh_baseline.stability_histogram_hhh` — per-level stability
  histograms with discrete Laplace noise of scale ``h/ε``, HHH by post-processing;

and :func:`~privacy.offline.hhh_planner.plan_offline_hhh` predicts both errors and picks one.
All three are re-exported here.

The **root** (level 0) is never reported by these offline mechanisms: only levels ``h .. 1`` are
processed (the root's conditioned count is ``n`` minus the selected mass, and ``n`` itself would
need its own budget share). The exact reference :func:`exact_selection` omits it too.

This module holds what both mechanisms share: :class:`OfflineHHHParams`, the exact per-level
counts with parent links (:class:`HierarchyCounts`, computed once, vectorised), and the
result type :class:`OfflineHHHResult`. Exact counts are raw data: they never leave the mechanisms
and never appear in messages. Floating point: both mechanisms release integers (integer counts
plus discrete Laplace noise), so the printed counts of a result carry no floating-point side
channel (Mironov 2012; see each mechanism's docstring).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from privacy.params import check_open_unit, check_positive
from sketches.hierarchy import Hierarchy

if TYPE_CHECKING:  # the lazy re-exports below (__getattr__), visible to type checkers and linters
    from .hhh_algorithm1 import Algorithm1Scales, algorithm1_hhh, algorithm1_min_tau
    from .hhh_baseline import BaselineScales, stability_histogram_hhh
    from .hhh_planner import OfflinePlan, PredictedErrors, plan_offline_hhh

__all__ = [
    "OfflineHHHParams",
    "LevelCounts",
    "HierarchyCounts",
    "count_hierarchy",
    "OfflineHHHItem",
    "OfflineHHHResult",
    "exact_selection",
    "conditioned_counts",
    # re-exported below
    "Algorithm1Scales",
    "algorithm1_hhh",
    "algorithm1_min_tau",
    "BaselineScales",
    "stability_histogram_hhh",
    "OfflinePlan",
    "PredictedErrors",
    "plan_offline_hhh",
]

NEIGHBOURS = "add or remove one element"


@dataclass(frozen=True)
class OfflineHHHParams:
    """Parameters of one offline HHH release.

    * ``epsilon``, ``delta``: the **final** (ε, δ) of the whole release, ε > 0, 0 < δ < 1; the
      result is (ε, δ)-DP for neighbouring snapshots (add or remove one element).
    * ``tau``: the HHH threshold on conditioned counts (absolute number of elements), > 0.
    * ``beta``: failure probability of the accuracy statements (Algorithm 1's guard, the
      planner's predicted bounds), 0 < β < 1.
    """

    epsilon: float
    delta: float
    tau: float
    beta: float = 0.05

    def __post_init__(self) -> None:
        owner = "OfflineHHHParams"
        object.__setattr__(self, "epsilon", check_positive(owner, "epsilon", self.epsilon))
        object.__setattr__(self, "delta", check_open_unit(owner, "delta", self.delta))
        object.__setattr__(self, "tau", check_positive(owner, "tau", self.tau))
        object.__setattr__(self, "beta", check_open_unit(owner, "beta", self.beta))

    def as_dict(self) -> dict[str, float]:
        """Plain dict of every field."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, eq=False)
class LevelCounts:
    """Exact counts of one level: sorted unique ``keys``, their ``counts`` (int64, all > 0) and
    ``parent``, the index of each node's parent in the level above (all zeros at level 1, whose
    parent is the root)."""

    level: int
    keys: np.ndarray
    counts: np.ndarray
    parent: np.ndarray

    @property
    def size(self) -> int:
        return int(self.keys.shape[0])


@dataclass(frozen=True, eq=False)
class HierarchyCounts:
    """Exact counts of every level ``1 .. h`` of a snapshot, with parent links (raw data)."""

    hierarchy: Hierarchy
    n: int
    levels: Mapping[int, LevelCounts] = field(repr=False)

    @property
    def h(self) -> int:
        return self.hierarchy.h

    def parent_size(self, level: int) -> int:
        """Number of nodes at ``level − 1`` (1 for the root)."""
        return 1 if level == 1 else self.levels[level - 1].size


def _take(values: Any, index: np.ndarray) -> Any:
    """The elements of ``values`` at ``index`` (IPv6 values are ``(hi, lo)`` tuples of arrays)."""
    if isinstance(values, tuple):
        return tuple(np.asarray(v)[index] for v in values)
    return np.asarray(values)[index]


def count_hierarchy(values: Any, hierarchy: Hierarchy, weights: np.ndarray | None = None) -> HierarchyCounts:
    """Exact counts of ``values`` at every level of ``hierarchy``, vectorised.

    Only the leaf level looks at all ``n`` values (``hierarchy.keys`` + ``np.unique``); each upper
    level is computed from one representative value per node of the level below. ``weights``
    (optional, non-negative integers, one per value) counts a value several times (tests and
    audits build large snapshots this way); nodes of total weight 0 are dropped.
    """
    if not isinstance(hierarchy, Hierarchy):
        raise TypeError(f"count_hierarchy: hierarchy must be a Hierarchy, got {type(hierarchy).__name__}")
    h = hierarchy.h
    size = hierarchy.count(values)
    if weights is None:
        w = np.ones(size, dtype=np.int64)
    else:
        w = np.asarray(weights)
        if w.shape != (size,) or not np.issubdtype(w.dtype, np.integer) or (w < 0).any():
            raise ValueError("count_hierarchy: weights must be non-negative integers, one per value")
        w = w.astype(np.int64)
    levels: dict[int, LevelCounts] = {}
    if size == 0:
        empty = np.zeros(0, dtype=np.int64)
        for level in range(1, h + 1):
            levels[level] = LevelCounts(level, empty, empty, empty)
        return HierarchyCounts(hierarchy, 0, levels)
    keys = hierarchy.keys(values, h)
    uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    counts = np.bincount(inverse.reshape(-1), weights=w, minlength=uniq.size).astype(np.int64)
    keep = counts > 0
    uniq, first, counts = uniq[keep], first[keep], counts[keep]
    reps = _take(values, first)
    pending = (uniq, counts)
    for level in range(h, 0, -1):
        keys_here, counts_here = pending
        if level == 1:
            parent = np.zeros(keys_here.size, dtype=np.int64)
        else:
            up = hierarchy.keys(reps, level - 1)
            up_uniq, up_first, up_inv = np.unique(up, return_index=True, return_inverse=True)
            parent = up_inv.reshape(-1).astype(np.int64)
            up_counts = np.bincount(parent, weights=counts_here, minlength=up_uniq.size).astype(np.int64)
            reps = _take(reps, up_first)
            pending = (up_uniq, up_counts)
        levels[level] = LevelCounts(level, keys_here.astype(np.int64), counts_here, parent)
    return HierarchyCounts(hierarchy, int(w.sum()), levels)


def sum_to_parents(values: np.ndarray, parent: np.ndarray, parent_size: int) -> np.ndarray:
    """Row-wise sums of ``values`` (trials × m) into ``parent_size`` parent slots (trials × p)."""
    trials, m = values.shape
    if m == 0:
        return np.zeros((trials, parent_size), dtype=np.float64)
    index = parent[None, :] + (np.arange(trials, dtype=np.int64) * parent_size)[:, None]
    out = np.bincount(index.ravel(), weights=values.ravel(), minlength=trials * parent_size)
    return out.reshape(trials, parent_size)


def conditioned_counts(tree: HierarchyCounts, selected: Mapping[int, np.ndarray]) -> dict[int, np.ndarray]:
    """Exact conditioned counts ``F_{X,S}(p)`` of every node, for selection masks ``selected``
    (level → bool array (trials × m)): elements under p not under a selected strict descendant."""
    out: dict[int, np.ndarray] = {}
    trials = next(iter(selected.values())).shape[0] if selected else 1
    covered = np.zeros((trials, tree.levels[tree.h].size))
    for level in range(tree.h, 0, -1):
        lc = tree.levels[level]
        out[level] = lc.counts[None, :] - covered
        mask = selected.get(level, np.zeros((trials, lc.size), dtype=bool))
        moved = np.where(mask, lc.counts[None, :].astype(np.float64), covered)
        covered = sum_to_parents(moved, lc.parent, tree.parent_size(level))
    return out


def exact_selection(tree: HierarchyCounts, tau: float) -> dict[int, np.ndarray]:
    """The exact HHH (Definition 2.3.5, root omitted): level → bool mask over the level's nodes,
    selecting bottom-up every node whose conditioned count is >= ``tau``."""
    selected: dict[int, np.ndarray] = {}
    covered = np.zeros((1, tree.levels[tree.h].size))
    for level in range(tree.h, 0, -1):
        lc = tree.levels[level]
        residual = lc.counts[None, :] - covered
        mask = residual >= tau
        selected[level] = mask
        moved = np.where(mask, lc.counts[None, :].astype(np.float64), covered)
        covered = sum_to_parents(moved, lc.parent, tree.parent_size(level))
    return selected


@dataclass(frozen=True)
class OfflineHHHItem:
    """One private HHH: its level, key, prefix label and noisy conditioned count."""

    level: int
    key: int
    prefix: str
    count: float

    def as_dict(self) -> dict[str, Any]:
        return {"level": self.level, "prefix": self.prefix, "count": round(float(self.count), 1)}


@dataclass(frozen=True)
class OfflineHHHResult:
    """The output of an offline HHH mechanism: every field is public or noisy.

    ``items`` are bottom-up (deepest level first), by key within a level. ``internal`` holds the
    data-independent internal parameters (noise scales, thresholds) for the record.
    """

    algorithm: str
    params: OfflineHHHParams
    hierarchy: str
    h: int
    items: tuple[OfflineHHHItem, ...]
    guarantee_text: str
    internal: Mapping[str, float]
    secure_randomness: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (plain floats, ints, strings and lists only)."""
        return {
            "algorithm": self.algorithm,
            "hierarchy": self.hierarchy,
            "h": self.h,
            "params": self.params.as_dict(),
            "internal": {k: float(v) for k, v in self.internal.items()},
            "guarantee": {
                "epsilon": self.params.epsilon,
                "delta": self.params.delta,
                "neighbours": NEIGHBOURS,
                "text": self.guarantee_text,
            },
            "root_reported": False,
            "secure_randomness": self.secure_randomness,
            "hhh": [item.as_dict() for item in self.items],
        }


def items_from_masks(
    tree: HierarchyCounts, selected: Mapping[int, np.ndarray], released: Mapping[int, np.ndarray]
) -> tuple[OfflineHHHItem, ...]:
    """Items for the first trial of ``selected``/``released`` (level → (trials × m)), bottom-up."""
    items: list[OfflineHHHItem] = []
    hierarchy = tree.hierarchy
    for level in range(tree.h, 0, -1):
        lc = tree.levels[level]
        for i in np.flatnonzero(selected[level][0]).tolist():
            key = int(lc.keys[i])
            items.append(OfflineHHHItem(level, key, hierarchy.label(key, level), float(released[level][0, i])))
    return tuple(items)


def counts_of(values: Any, hierarchy: Hierarchy, owner: str) -> HierarchyCounts:
    """``values`` counted over ``hierarchy`` (or checked, when already a :class:`HierarchyCounts`)."""
    tree = values if isinstance(values, HierarchyCounts) else count_hierarchy(values, hierarchy)
    if tree.hierarchy != hierarchy:
        raise ValueError(f"{owner}: the precomputed counts belong to a different hierarchy")
    return tree


def result_of(
    algorithm: str,
    params: OfflineHHHParams,
    tree: HierarchyCounts,
    outcome: Sequence[Any],
    guarantee_text: str,
    internal: Mapping[str, Any],
    source: Any,
) -> OfflineHHHResult:
    """The :class:`OfflineHHHResult` of one run: the first trial of each level outcome
    (``level``, ``selected``, ``released`` attributes), reported bottom-up."""
    selected = {o.level: o.selected for o in outcome}
    released = {o.level: o.released for o in outcome}
    return OfflineHHHResult(
        algorithm,
        params,
        tree.hierarchy.spec(),
        tree.h,
        items_from_masks(tree, selected, released),
        guarantee_text,
        dict(internal),
        bool(getattr(source, "secure", False)),
    )


# Re-exports of the mechanisms and the planner, resolved lazily (PEP 562) because those modules
# import the shared types above.
_REEXPORTS = {
    "Algorithm1Scales": "hhh_algorithm1",
    "algorithm1_hhh": "hhh_algorithm1",
    "algorithm1_min_tau": "hhh_algorithm1",
    "BaselineScales": "hhh_baseline",
    "stability_histogram_hhh": "hhh_baseline",
    "OfflinePlan": "hhh_planner",
    "PredictedErrors": "hhh_planner",
    "plan_offline_hhh": "hhh_planner",
}


def __getattr__(name: str) -> Any:
    if name in _REEXPORTS:
        import importlib

        return getattr(importlib.import_module(f"{__package__}.{_REEXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
