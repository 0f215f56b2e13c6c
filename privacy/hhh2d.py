"""Two-dimensional HHH extraction from released values (docs/ALGORITHMS.md §11).

Post-processing of the noisy values released per (node, partition) sketch of a
:class:`~dphhh.sketches.pairs.PairHierarchy` (each element touches H sketches, so the release is
calibrated with h := H by the caller's :class:`~dphhh.privacy.calibration.WindowCalibration`): no
privacy cost.

**Point mode by inclusion–exclusion.** Nodes are visited by decreasing ℓ1 + ℓ2 (nodes of equal sum
are incomparable). For a released pair e with noisy count C̃(e) ≥ τ, let D be its *maximal selected
descendants* (selected pairs that e generalises, strictly, with no other such pair between). Under
overlap semantics e's residual counts the elements under e and under no pair of D:

    residual(e) = C̃(e) − Σ_{∅ ≠ T ⊆ D} (−1)^{|T|+1} C̃(glb(T)),

where glb(T) is the pair whose elements are exactly those under every pair of T
(:meth:`~dphhh.sketches.pairs.PairHierarchy.meet`), and a glb that was not released (or is empty) counts
0. With more than :data:`FULL_INCLUSION_EXCLUSION` descendants the sum stops after the pairwise
terms. The residual is clamped to ``[0, C̃(e)]``; e is selected iff it is ≥ τ. The root is last,
with ñ as its count.

**No coverage claim in 2-D.** Both ``mode`` values run this point-mode rule; a report with a pair
hierarchy says coverage is not claimed (no conservative 2-D rule with a derived coverage statement
exists yet).

**Intervals and verdicts** are as in 1-D: ``[max(0, C̃ − B), C̃ + B + n̂/(κ+1)]`` per reported pair,
``residual_lower = max(0, lower(e) − Σ_{d ∈ D} upper(d))`` (a lower bound on the true residual:
the union of D's elements is at most the sum of their counts), ``heavy`` iff it is ≥ τ.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from itertools import combinations

from dphhh.sketches.errors import UsageError
from dphhh.sketches.pairs import PairHierarchy

from .calibration import WindowCalibration
from .hhh import HHHItem, SketchRelease

__all__ = ["extract_hhh_2d", "FULL_INCLUSION_EXCLUSION", "COVERAGE_2D"]

#: Up to this many maximal selected descendants, inclusion–exclusion runs over every subset.
FULL_INCLUSION_EXCLUSION = 8
#: What a two-dimensional report says about coverage.
COVERAGE_2D = (
    "not claimed in 2-D: pairs are selected in point mode (residual by inclusion-exclusion >= tau), "
    "so a pair that is not listed may still be heavy"
)


def _covered_mass(
    hierarchy: PairHierarchy, below: list[tuple[int, int]], released: dict[int, dict[int, float]]
) -> float:
    """Inclusion–exclusion estimate of the number of elements under at least one pair of ``below``."""

    def value(key: int, level: int) -> float:
        return released.get(level, {}).get(key, 0.0)

    depth = len(below) if len(below) <= FULL_INCLUSION_EXCLUSION else 2
    total = 0.0
    for size in range(1, depth + 1):
        sign = 1.0 if size % 2 else -1.0
        for group in combinations(below, size):
            key, level = group[0]
            meet: tuple[int, int] | None = (key, level)
            for other_key, other_level in group[1:]:
                assert meet is not None
                meet = hierarchy.meet(meet[0], meet[1], other_key, other_level)
                if meet is None:
                    break
            if meet is not None:
                total += sign * value(*meet)
    return total


def _maximal(hierarchy: PairHierarchy, key: int, level: int, selected: list[HHHItem]) -> list[HHHItem]:
    """The selected pairs strictly below (key, level) with no selected pair between."""
    below = [
        s for s in selected if (s.level, s.key) != (level, key) and hierarchy.generalises(key, level, s.key, s.level)
    ]
    return [
        d for d in below if not any(o is not d and hierarchy.generalises(o.key, o.level, d.key, d.level) for o in below)
    ]


def extract_hhh_2d(
    releases: Iterable[SketchRelease],
    hierarchy: PairHierarchy,
    *,
    tau: float,
    calibration: WindowCalibration,
    root_value: float,
) -> list[HHHItem]:
    """Point-mode 2-D HHH over the released values; items finest nodes first, root last."""
    if not isinstance(hierarchy, PairHierarchy):
        raise UsageError(f"extract_hhh_2d: needs a pair hierarchy, got {hierarchy!r}")
    released: dict[int, dict[int, float]] = {0: {0: float(root_value)}}
    bounds: dict[tuple[int, int], tuple[float, float]] = {(0, 0): calibration.root_interval(float(root_value))}
    alpha1: dict[int, float] = {}
    worst = calibration.alpha2
    for rel in releases:
        if not (1 <= rel.level <= hierarchy.h) or rel.n_upper is None:
            raise UsageError(f"extract_hhh_2d: release of level {rel.level} is out of range or has no size bound")
        a1 = calibration.alpha1(rel.n_upper)
        worst = max(worst, a1)
        alpha1[rel.level] = max(alpha1.get(rel.level, 0.0), a1)
        for key, noisy in rel.values.items():
            released.setdefault(rel.level, {})[int(key)] = float(noisy)
            bounds[(rel.level, int(key))] = calibration.interval(float(noisy), rel.n_upper)
    alpha1[0] = worst

    order = sorted(range(1, hierarchy.h + 1), key=lambda lv: -sum(hierarchy.node(lv))) + [0]
    selected: list[HHHItem] = []
    below_of: dict[tuple[int, int], list[HHHItem]] = {}
    for level in order:
        for key in sorted(released.get(level, {})):
            count = released[level][key]
            if count < tau:  # the residual is at most the count: it cannot reach tau
                continue
            below = _maximal(hierarchy, key, level, selected)
            covered = _covered_mass(hierarchy, [(d.key, d.level) for d in below], released)
            residual = min(max(count - covered, 0.0), count)
            if residual < tau:
                continue
            lower, upper = bounds[(level, key)]
            item = HHHItem(level, key, hierarchy.label(key, level), residual, count, alpha1[level], lower, upper)
            selected.append(item)
            below_of[(level, key)] = below
    out = []
    for it in selected:
        bound = max(0.0, it.lower - sum(d.upper for d in below_of[(it.level, it.key)]))
        out.append(replace(it, residual_lower=bound, verdict="heavy" if bound >= tau else "possible"))
    return out
