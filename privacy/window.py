"""One window's private release, split the way the stream job splits it.

* :func:`release_sketch` runs where a sketch lives (one per (level, partition)): it turns the raw
  counters and sub-stream size into a :class:`~dphhh.privacy.hhh.SketchRelease` holding noisy values only.
* :func:`assemble_report` runs where the releases of one window meet: Algorithm 4 and the report.
* :func:`release_window` does both for :class:`~dphhh.sketches.level_sketches.LevelSketches` (batch use).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import Hierarchy
from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.pairs import PairHierarchy

from .budget import budget_statement
from .calibration import WindowCalibration
from .hhh import SketchRelease, extract_hhh
from .hhh2d import COVERAGE_2D, extract_hhh_2d
from .params import HHHParams
from .randomness import RandomSource, as_source
from .release import release_level
from .report import build_report
from .stream_size import noisy_size, root_estimate, size_upper_bound

__all__ = ["release_sketch", "assemble_report", "release_window"]


def release_sketch(
    level: int,
    partition: int,
    counters: Mapping[int, int],
    substream_size: int,
    *,
    params: HHHParams,
    h: int,
    rng: RandomSource | np.random.Generator | int | None = None,
    labels: Mapping[int, str] | None = None,
) -> SketchRelease:
    """Release one sketch: ``release_level`` on its counters and its private sub-stream size.

    With one key partition (P = 1) every level's sub-stream is the whole window, so its size is
    released once, by the level-1 sketch, at the whole size budget (docs/calibration.md §5); the
    other levels' releases then carry no size (``n_noisy = None``) and :func:`assemble_report`
    gives them level 1's. ``labels`` (hashed-key hierarchies) are attached for the released keys only.
    """
    if not (isinstance(h, int) and h >= 1 and isinstance(level, int) and 1 <= level <= h):
        raise UsageError(
            f"release_sketch: level must be in 1..h and h >= 1 (the hierarchy's levels), got level={level!r}, h={h!r}"
        )
    if not (isinstance(partition, int) and 0 <= partition < params.partitions):
        raise UsageError(f"release_sketch: partition must be in 0..{params.partitions - 1}, got {partition!r}")
    source = as_source(rng)
    rel = params.release_budget
    cal = WindowCalibration.of(params, h)
    values = release_level(
        counters,
        epsilon=rel.epsilon,
        delta=rel.delta,
        h=h,
        variant=params.variant,
        calibration=params.calibration,
        rng=source,
        slots=params.counters,
    )
    n_noisy = n_upper = None
    if cal.size_releases > 1 or level == 1:
        n_noisy = noisy_size(substream_size, scale=cal.size_scale, source=source)
        n_upper = size_upper_bound(n_noisy, slack=cal.size_slack)
    shown = None if labels is None else {k: labels[k] for k in values if k in labels}
    return SketchRelease(level, partition, values, n_noisy, n_upper, shown)


def assemble_report(
    releases: Iterable[SketchRelease],
    hierarchy: Hierarchy,
    params: HHHParams,
    *,
    window: Mapping[str, Any] | None = None,
    diagnostics: Mapping[str, Any] | None = None,
    secure_randomness: bool = True,
    unit: Any = None,
    budget: Any = None,
    spending: Mapping[str, Any] | None = None,
    tau_share: float | None = None,
    key_collision_delta: float = 0.0,
) -> dict[str, Any]:
    """Algorithm 4 over one window's releases and the ``dphhh.report/2`` report.

    ``unit``/``budget``/``spending``: see :func:`dphhh.privacy.budget.budget_statement` (user-level privacy
    and the budget guard's account). ``tau_share`` (0 < φ < 1): the threshold is φ times the
    window's *noisy* size ñ (``params.tau`` is then ignored) — post-processing of the released
    size, so it costs no budget (docs/ALGORITHMS.md §4 "Threshold as a share").
    ``key_collision_delta``: the δ charged for hashed keys (docs/calibration.md §8), stated."""
    releases = list(releases)
    h = hierarchy.h
    expected = {(level, p) for level in range(1, h + 1) for p in range(params.partitions)}
    got = [(r.level, r.partition) for r in releases]
    if sorted(got) != sorted(expected):
        raise UsageError(
            f"assemble_report: expected one release per (level, partition) for h={h}, P={params.partitions}, "
            f"got {len(got)} releases"
        )
    remember = getattr(hierarchy, "remember", None)
    for r in releases:
        if r.labels and remember is not None:
            remember(r.level, dict(r.labels))
    cal = WindowCalibration.of(params, h)
    releases = _with_sizes(releases, cal)
    by_level: dict[int, list[int]] = {}
    n_uppers: list[int] = []
    for r in releases:
        assert r.n_noisy is not None and r.n_upper is not None  # _with_sizes gave every release its size
        by_level.setdefault(r.level, []).append(int(r.n_noisy))
        n_uppers.append(r.n_upper)
    n_root = root_estimate(by_level[level] for level in sorted(by_level))  # P = 1: level 1's one size
    if tau_share is not None:
        if not (isinstance(tau_share, (int, float)) and 0 < tau_share < 1):
            raise UsageError(f"assemble_report: tau_share must be a fraction 0 < tau_share < 1, got {tau_share!r}")
        params = replace(params, tau=tau_share * max(float(n_root), 1.0))
    two_d = isinstance(hierarchy, PairHierarchy)
    if isinstance(hierarchy, PairHierarchy):  # docs/ALGORITHMS.md §11: point mode by inclusion-exclusion
        items = extract_hhh_2d(releases, hierarchy, tau=params.tau, calibration=cal, root_value=n_root)
    else:
        items = extract_hhh(releases, hierarchy, tau=params.tau, calibration=cal, root_value=n_root, mode=params.mode)
    a1 = max(cal.alpha1(n) for n in n_uppers)
    report = build_report(
        params=params,
        hierarchy_spec=hierarchy.spec(),
        h=h,
        items=items,
        n_noisy=n_root,
        alpha1=a1,
        calibration=cal,
        statement=budget_statement(
            params, h=h, unit=unit, budget=budget, spending=spending, key_collision_delta=key_collision_delta
        ),
        window=window,
        diagnostics=diagnostics,
        secure_randomness=secure_randomness,
        tau_share=tau_share,
        coverage=(False, COVERAGE_2D) if two_d else None,
    )
    if two_d:  # each pair's lattice node (ℓ1, ℓ2) beside its level index
        assert isinstance(hierarchy, PairHierarchy)
        for item in report["hhh"]:
            item["node"] = list(hierarchy.node(int(item["level"])))
    return report


def _with_sizes(releases: list[SketchRelease], cal: WindowCalibration) -> list[SketchRelease]:
    """The releases with every sketch's size: with one size release (P = 1), level 1's for all."""
    if cal.size_releases > 1:
        missing = [(r.level, r.partition) for r in releases if r.n_noisy is None or r.n_upper is None]
        if missing:
            raise UsageError(f"assemble_report: releases without a size for P = {cal.partitions}: {missing[:3]}")
        return releases
    sized = [r for r in releases if r.n_noisy is not None]
    if len(sized) != 1 or sized[0].level != 1 or sized[0].n_upper is None:
        raise UsageError(
            "assemble_report: with one partition exactly the level-1 release carries the window size, "
            f"got sizes at levels {[r.level for r in sized]}"
        )
    shared = sized[0]
    return [replace(r, n_noisy=shared.n_noisy, n_upper=shared.n_upper) for r in releases]


def release_window(
    sketches: LevelSketches,
    params: HHHParams,
    *,
    window: Mapping[str, Any] | None = None,
    diagnostics: Mapping[str, Any] | None = None,
    rng: RandomSource | np.random.Generator | int | None = None,
    unit: Any = None,
    budget: Any = None,
    tau_share: float | None = None,
) -> dict[str, Any]:
    """Release every sketch of ``sketches`` and assemble the window's report.

    ``unit``/``budget``: a user-level or weighted :class:`~dphhh.privacy.unit.PrivacyUnit` and the budget
    its guarantee is stated at (``params`` are then its group-privacy calibration of ``budget``)."""
    if sketches.counters != params.counters or sketches.partitions != params.partitions:
        raise UsageError(
            "release_window: sketches were built with counters/partitions "
            f"{sketches.counters}/{sketches.partitions}, params say {params.counters}/{params.partitions}"
        )
    source = as_source(rng)
    h = sketches.hierarchy.h
    releases = [
        release_sketch(level, p, sk.counters(), sk.total, params=params, h=h, rng=source)
        for (level, p), sk in sketches.items()
    ]
    return assemble_report(
        releases,
        sketches.hierarchy,
        params,
        window=window,
        diagnostics=diagnostics,
        secure_randomness=source.secure,
        unit=unit,
        budget=budget,
        tau_share=tau_share,
    )
