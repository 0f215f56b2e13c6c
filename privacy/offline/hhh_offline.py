"""Offline (snapshot) DP hierarchical heavy hitters: shared types (docs/ALGORITHMS.md §6).

A snapshot is a finite multiset of values (IPv4/IPv6 addresses, paths) over a
:class:`~dphhh.sketches.hierarchy.Hierarchy` with levels ``0 .. h``. Two snapshots are **neighbours**
if one has one extra element (add or remove one element, docs/ALGORITHMS.md §0).

Two mechanisms compute a private HHH set with noisy *conditioned* counts from the exact counts:

* :func:`~dphhh.privacy.offline.hhh_algorithm1.algorithm1_hhh` — Algorithm 1 of the DP-HHH paper,
  corrected (docs/ALGORITHMS.md §6); noise independent of h but with large constants and a threshold guard;
* :func:`~dphhh.privacy.offline.hhh_baseline.stability_histogram_hhh` — per-level stability
  histograms with discrete Laplace noise of scale ``h/ε``, HHH by post-processing;

and :func:`~dphhh.privacy.offline.hhh_planner.plan_offline_hhh` predicts both errors and picks one.
All three are re-exported by :mod:`dphhh.privacy.offline` (not here: they import this module).

The **root** (level 0) is never reported by these offline mechanisms: only levels ``h .. 1`` are
processed (the root's conditioned count is ``n`` minus the selected mass, and ``n`` itself would
need its own budget share). The exact reference :func:`exact_selection` omits it too.

This module holds what both mechanisms share: :class:`OfflineHHHParams`, the exact per-level
counts with parent links (:class:`HierarchyCounts`, computed once, vectorised), and the
result type :class:`OfflineHHHResult`. Exact counts are raw data: they never leave the mechanisms
and never appear in messages.

**Intervals and verdicts** (:func:`with_intervals`, post-processing of the released counts and
public scales). Each reported prefix p carries ``[lower, upper] = [count − B_p, count + B_p]``
clipped at 0, an interval of its exact *conditioned* count F(p) (its count less its maximal
reported descendants' counts), and the verdict ``heavy`` iff ``lower >= tau``, else ``possible``
(the vocabulary of ``dphhh hhh``). The count's error is a sum of ``m_p`` independent discrete
Laplace noises of the mechanism's scale b: ``m_p = 1`` for Algorithm 1 (its release noise
DLap(1/ξ)), ``m_p = 1 + k_p`` for the baseline (r̃(p) subtracts the k_p released counts of p's
maximal reported descendants). With K reported prefixes (a public number: the output's length),
``B_p`` is the smallest integer with ``P(|Σ_{i<m_p} Z_i| > B_p) <= β/K`` (:func:`dlap_sum_bound`:
the exact tail ``2r^(B+1)/(1 + r)``, r = e^(−1/b), for m = 1; a Chernoff bound with the discrete
Laplace's moment generating function for m >= 2), so by a union bound over the K reported counts
every interval holds at once with probability >= 1 − β. For Algorithm 1 the bound is exact:
the release noise is drawn independently of the selection. For the baseline, which selects on
the released value itself, a prefix whose count is near τ is reported more often when its noise
is positive, so for such a prefix the interval is conditioned on its selection and may cover
less often than stated; prefixes well above τ + B (those with the verdict ``heavy``) are selected
regardless of their noise and are not affected. Floating point: both mechanisms release integers (integer counts
plus discrete Laplace noise), so the printed counts of a result carry no floating-point side
channel (Mironov 2012; see each mechanism's docstring).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np

from dphhh.privacy.params import check_int, check_open_unit, check_positive
from dphhh.privacy.tails import dlap_tail, smallest_two_sided_bound
from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import Hierarchy

__all__ = [
    "OfflineHHHParams",
    "LevelCounts",
    "HierarchyCounts",
    "count_hierarchy",
    "OfflineHHHItem",
    "OfflineHHHResult",
    "exact_selection",
    "conditioned_counts",
    "dlap_sum_bound",
    "with_intervals",
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
            raise UsageError("count_hierarchy: weights must be non-negative integers, one per value")
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
    """One private HHH: its level, key, prefix label and noisy conditioned count, and (set by
    :func:`with_intervals`) the interval ``[lower, upper]`` of its exact conditioned count and its
    verdict (``heavy`` iff ``lower >= tau``)."""

    level: int
    key: int
    prefix: str
    count: float
    lower: float | None = None
    upper: float | None = None
    verdict: str = "possible"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"prefix": self.prefix, "level": self.level, "verdict": self.verdict}
        out["count"] = round(float(self.count), 1)
        if self.lower is not None and self.upper is not None:
            out["lower"] = round(float(self.lower), 1)
            out["upper"] = round(float(self.upper), 1)
        return out


def _log_dlap_mgf(lam: np.ndarray, scale: float) -> np.ndarray:
    """``ln E e^{λZ}`` for ``Z ~ DLap(scale)`` and ``0 <= λ < 1/scale``:
    ``2 ln(1 − r) − ln(1 − r e^λ) − ln(1 − r e^−λ)`` with r = e^(−1/scale), without cancellation."""
    a = 1.0 / scale
    return 2 * np.log(-np.expm1(-a)) - np.log(-np.expm1(lam - a)) - np.log(-np.expm1(-lam - a))


def dlap_sum_bound(scale: float, terms: int, beta: float) -> int:
    """The smallest integer ``B >= 0`` (up to the Chernoff bound's slack) with
    ``P(|Z_1 + … + Z_m| > B) <= β`` for ``m = terms`` independent ``Z_i ~ DLap(scale)``
    (``P(k) ∝ e^(−|k|/scale)``, :func:`dphhh.privacy.noise.discrete_laplace`).

    ``m = 1``: the exact tail ``P(|Z| > B) = 2·P(Z >= B + 1) = 2r^(B+1)/(1 + r)``
    (:func:`dphhh.privacy.tails.dlap_tail`, rounded up). ``m = 2``: the exact closed form of the sum's
    tail (:func:`dphhh.privacy.tails.smallest_two_sided_bound`). ``m >= 3``:
    ``P(|S| >= t) <= 2·M(λ)^m·e^(−λt)`` for every ``0 < λ < 1/scale`` with
    ``M(λ) = (1 − r)²/((1 − re^λ)(1 − re^(−λ)))``, the smallest ``t`` over a grid of λ (every λ
    gives a valid bound).
    """
    scale = check_positive("dlap_sum_bound", "scale", scale)
    check_int("dlap_sum_bound", "terms", terms, 1)
    beta = check_open_unit("dlap_sum_bound", "beta", beta)
    if terms == 1:
        r = math.exp(-1.0 / scale)
        b = max(0, math.ceil(math.log(beta * (1 + r) / 2) / math.log(r)) - 1) if r > 0 else 0
        while b > 0 and 2 * dlap_tail(b, scale) <= beta:  # the formula's rounding, downwards
            b -= 1
        while 2 * dlap_tail(b + 1, scale) > beta:  # and upwards
            b += 1
        return b
    if terms == 2:
        return smallest_two_sided_bound(scale, scale, beta)
    lam = np.linspace(1e-4, 1 - 1e-4, 2000) / scale
    t = (terms * _log_dlap_mgf(lam, scale) - math.log(beta / 2)) / lam
    return max(0, math.ceil(float(np.min(t)) * (1 + 1e-12)) - 1)


def with_intervals(
    items: Sequence[OfflineHHHItem], hierarchy: Hierarchy, *, scale: float, subtracted: bool, beta: float, tau: float
) -> tuple[OfflineHHHItem, ...]:
    """``items`` with ``lower``, ``upper`` and ``verdict`` set (see the module docstring).

    ``scale``: the discrete Laplace scale of each released count's noise; ``subtracted``: whether
    a reported count subtracts its maximal reported descendants' released counts (the baseline:
    then its noise is a sum of ``1 + k`` such noises). The union bound runs over the ``len(items)``
    reported counts at ``β/len(items)`` each. Post-processing of released values and public
    parameters only.
    """
    if not items:
        return tuple(items)
    beta = check_open_unit("with_intervals", "beta", beta)
    chosen = {(it.level, it.key) for it in items}
    below: dict[tuple[int, int], int] = {}
    if subtracted:
        for it in items:
            for up in range(it.level - 1, 0, -1):
                ancestor = (up, hierarchy.ancestor(it.key, it.level, up))
                if ancestor in chosen:
                    below[ancestor] = below.get(ancestor, 0) + 1
                    break
    share = beta / len(items)
    bounds: dict[int, int] = {}
    out = []
    for it in items:
        terms = 1 + below.get((it.level, it.key), 0)
        if terms not in bounds:
            bounds[terms] = dlap_sum_bound(scale, terms, share)
        b = bounds[terms]
        lower, upper = max(0.0, it.count - b), max(0.0, it.count + b)
        out.append(replace(it, lower=lower, upper=upper, verdict="heavy" if lower >= tau else "possible"))
    return tuple(out)


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
    #: how ``lower``/``upper``/``verdict`` of the items were derived (empty if they were not)
    intervals: Mapping[str, Any] = field(default_factory=dict)

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
            **({"intervals": dict(self.intervals)} if self.intervals else {}),
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
        raise UsageError(f"{owner}: the precomputed counts belong to a different hierarchy")
    return tree


def result_of(
    algorithm: str,
    params: OfflineHHHParams,
    tree: HierarchyCounts,
    outcome: Sequence[Any],
    guarantee_text: str,
    internal: Mapping[str, Any],
    source: Any,
    *,
    count_scale: float,
    subtracted: bool,
) -> OfflineHHHResult:
    """The :class:`OfflineHHHResult` of one run: the first trial of each level outcome
    (``level``, ``selected``, ``released`` attributes), reported bottom-up, with intervals and
    verdicts (:func:`with_intervals`: ``count_scale`` the release noise's scale, ``subtracted``
    whether counts subtract their reported descendants' released counts)."""
    selected = {o.level: o.selected for o in outcome}
    released = {o.level: o.released for o in outcome}
    items = with_intervals(
        items_from_masks(tree, selected, released),
        tree.hierarchy,
        scale=count_scale,
        subtracted=subtracted,
        beta=params.beta,
        tau=params.tau,
    )
    terms = "1 + k discrete Laplace noises" if subtracted else "one discrete Laplace noise"
    intervals = {
        "beta": params.beta,
        "noise_scale": float(count_scale),
        "text": (
            f"with probability >= 1 - beta (beta = {params.beta:g}, a union bound over the reported prefixes) "
            "each reported prefix's exact conditioned count (its count less its maximal reported "
            f"descendants') lies in [lower, upper] (clipped at 0); a count carries {terms} of scale "
            f"{count_scale:.4g}"
            + (" (k: its maximal reported descendants)" if subtracted else "")
            + ". verdict: heavy when lower >= tau, else possible"
            + (
                "; the baseline selects on the released value, so a prefix reported near tau may be "
                "covered less often (not one with verdict heavy)"
                if subtracted
                else ""
            )
        ),
    }
    return OfflineHHHResult(
        algorithm,
        params,
        tree.hierarchy.spec(),
        tree.h,
        items,
        guarantee_text,
        dict(internal),
        bool(getattr(source, "secure", False)),
        intervals,
    )
