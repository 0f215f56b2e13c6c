"""One window's private release, split the way the stream job splits it.

* :func:`release_sketch` runs where a sketch lives (one per (level, partition)): it turns the raw
  counters and sub-stream size into a :class:`~privacy.hhh.SketchRelease` holding noisy values only.
* :func:`assemble_report` runs where the releases of one window meet: Algorithm 4 and the report.
* :func:`release_window` does both for :class:`~sketches.level_sketches.LevelSketches` (batch use).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from sketches.hierarchy import Hierarchy
from sketches.level_sketches import LevelSketches

from .budget import window_ledger
from .hhh import SketchRelease, extract_hhh
from .params import HHHParams
from .randomness import RandomSource, as_source
from .release import ReleaseScales, alpha2, release_level
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

    ``labels`` (hashed-key hierarchies) are attached for the released keys only.
    """
    if not (isinstance(h, int) and h >= 1 and isinstance(level, int) and 1 <= level <= h):
        raise ValueError(f"release_sketch: level must be in 1..h and h >= 1 (the hierarchy's levels), got level={level!r}, h={h!r}")
    if not (isinstance(partition, int) and 0 <= partition < params.partitions):
        raise ValueError(f"release_sketch: partition must be in 0..{params.partitions - 1}, got {partition!r}")
    source = as_source(rng)
    rel = params.release_budget
    values = release_level(counters, epsilon=rel.epsilon, delta=rel.delta, h=h, variant=params.variant, rng=source)
    size_eps = params.size_budget.epsilon
    n_noisy = noisy_size(substream_size, epsilon=size_eps, h=h, source=source)
    n_upper = size_upper_bound(n_noisy, epsilon=size_eps, h=h, partitions=params.partitions, beta=params.size_beta)
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
) -> dict[str, Any]:
    """Algorithm 4 over one window's releases and the ``dphhh.report/1`` report.

    ``unit``/``budget``/``spending``: see :func:`privacy.budget.window_ledger` (user-level privacy
    and the budget guard's account)."""
    releases = list(releases)
    h = hierarchy.h
    expected = {(level, p) for level in range(1, h + 1) for p in range(params.partitions)}
    got = [(r.level, r.partition) for r in releases]
    if sorted(got) != sorted(expected):
        raise ValueError(
            f"assemble_report: expected one release per (level, partition) for h={h}, P={params.partitions}, "
            f"got {len(got)} releases"
        )
    remember = getattr(hierarchy, "remember", None)
    for r in releases:
        if r.labels and remember is not None:
            remember(r.level, dict(r.labels))
    rel = params.release_budget
    scales = ReleaseScales.for_budget(epsilon=rel.epsilon, delta=rel.delta, h=h, variant=params.variant)
    a2 = alpha2(scales, counters=params.counters, h=h, partitions=params.partitions, beta=params.key_beta)
    by_level: dict[int, list[int]] = {}
    for r in releases:
        by_level.setdefault(r.level, []).append(r.n_noisy)
    n_root = root_estimate(by_level[level] for level in sorted(by_level))
    items = extract_hhh(
        releases, hierarchy, tau=params.tau, alpha2=a2, counters=params.counters, root_value=n_root, mode=params.mode
    )
    a1 = max(a2 + r.n_upper / (params.counters + 1) for r in releases)
    return build_report(
        params=params,
        hierarchy_spec=hierarchy.spec(),
        h=h,
        items=items,
        n_noisy=n_root,
        alpha1=a1,
        alpha2=a2,
        ledger=window_ledger(params, h=h, unit=unit, budget=budget, spending=spending),
        window=window,
        diagnostics=diagnostics,
        secure_randomness=secure_randomness,
    )


def release_window(
    sketches: LevelSketches,
    params: HHHParams,
    *,
    window: Mapping[str, Any] | None = None,
    diagnostics: Mapping[str, Any] | None = None,
    rng: RandomSource | np.random.Generator | int | None = None,
) -> dict[str, Any]:
    """Release every sketch of ``sketches`` and assemble the window's report."""
    if sketches.counters != params.counters or sketches.partitions != params.partitions:
        raise ValueError(
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
        releases, sketches.hierarchy, params, window=window, diagnostics=diagnostics, secure_randomness=source.secure
    )
