"""Baseline offline DP-HHH: per-level stability histograms, HHH by post-processing (docs/ALGORITHMS.md §6).

Mechanism, for final (ε, δ) and h levels: at every level ℓ = 1 … h, every node p with exact count
f(p) > 0 gets C̃(p) = f(p) + DLap(h/ε) (discrete Laplace, P(k) ∝ exp(−ε|k|/h)) and is released iff
C̃(p) >= 1 + (h/ε)·ln(h/δ) (compared in integers: C̃ >= ⌈T⌉).

Guarantee: (ε, δ)-DP for neighbouring snapshots (one element added or removed). One element changes
one count by one per level; a count that exists on one side only is 1 and passes with probability
P(DLap(h/ε) >= (h/ε)·ln(h/δ)) <= δ/h, so each level is an (ε/h, δ/h)-DP stability histogram and the
h levels compose to (ε, δ). The root is not released or reported.

Floating point (Mironov 2012; docs/ALGORITHMS.md §3 "Integer counts"): every noisy count is an integer plus integer
discrete Laplace noise compared with ⌈T⌉ in integers, and the reported r̃(p) are integer
differences of them, so printed values carry no low-order-bit side channel.

HHH by post-processing (no further privacy cost), like the stream's ``point`` mode: bottom-up,
for each node the noisy conditioned count is r̃(p) = C̃(p) − Σ C̃(q) over the maximal selected
strict descendants q of p (selected descendants not under another selected descendant of p);
p is selected iff it was released and r̃(p) >= τ, and is reported with count r̃(p). The error of
r̃(p) is the sum of 1 + k Laplace noises for k subtracted descendants, so it grows with the number
of HHH below p — this is where Algorithm 1, whose per-node noise does not depend on h or k, can
win. Unreleased (suppressed) nodes still pass their descendants' subtraction up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dphhh.privacy.noise import discrete_laplace
from dphhh.privacy.params import check_int, check_open_unit, check_positive
from dphhh.privacy.randomness import RandomSource, as_source
from dphhh.sketches.hierarchy import Hierarchy

from .hhh_algorithm1 import LevelOutcome
from .hhh_offline import (
    NEIGHBOURS,
    HierarchyCounts,
    OfflineHHHParams,
    OfflineHHHResult,
    counts_of,
    result_of,
    sum_to_parents,
)

__all__ = ["BaselineScales", "baseline_levels", "stability_histogram_hhh"]


@dataclass(frozen=True)
class BaselineScales:
    """Per-level noise scale h/ε and release threshold 1 + (h/ε)·ln(h/δ) (public)."""

    scale: float
    threshold: float

    @classmethod
    def for_budget(cls, epsilon: float, delta: float, h: int) -> BaselineScales:
        owner = "StabilityHistogramHHH"
        epsilon = check_positive(owner, "epsilon", epsilon)
        delta = check_open_unit(owner, "delta", delta)
        check_int(owner, "h", h, 1)
        scale = h / epsilon
        return cls(scale, 1 + scale * math.log(h / delta))

    @property
    def integer_threshold(self) -> int:
        """⌈T⌉: an integer C̃ passes iff C̃ >= ⌈T⌉ ⇔ C̃ >= T."""
        return math.ceil(self.threshold)

    def as_dict(self) -> dict[str, float]:
        return {"scale": self.scale, "threshold": self.threshold}


def baseline_levels(
    tree: HierarchyCounts, tau: float, scales: BaselineScales, source: RandomSource, trials: int = 1
) -> list[LevelOutcome]:
    """The vectorised baseline: ``trials`` independent runs (one DLap array per level, level h first).

    ``statistic`` and ``released`` are both the residual ``r̃ − Σ r̃`` of the maximal selected
    descendants (the value tested against τ is the value published); ``histogram`` is r̃ itself,
    the level's stability histogram, released where ``r̃ >= ⌈T⌉`` — the mechanism the privacy
    proof covers (docs/ALGORITHMS.md §6; what the audit reads); ``conditioned`` is the exact
    F_{X,S} w.r.t. the run's own selection (for evaluation only).
    """
    out: list[LevelOutcome] = []
    m_h = tree.levels[tree.h].size
    removed = np.zeros((trials, m_h))  # Σ C̃ of maximal selected descendants
    covered = np.zeros((trials, m_h))  # exact mass under selected descendants (evaluation)
    t_int = scales.integer_threshold
    for level in range(tree.h, 0, -1):
        lc = tree.levels[level]
        shape = (trials, lc.size)
        counts = lc.counts[None, :].astype(np.float64)
        noisy = counts + discrete_laplace(scales.scale, shape, source)
        passed = noisy >= t_int
        residual = noisy - removed
        selected = passed & (residual >= tau)
        out.append(LevelOutcome(level, counts - covered, residual, selected, residual, histogram=noisy))
        parent, p_size = lc.parent, tree.parent_size(level)
        removed = sum_to_parents(np.where(selected, noisy, removed), parent, p_size)
        covered = sum_to_parents(np.where(selected, counts, covered), parent, p_size)
    return out


def _guarantee_text(p: OfflineHHHParams) -> str:
    return (
        f"({p.epsilon:g}, {p.delta:g})-differentially private for neighbouring snapshots ({NEIGHBOURS}): "
        f"one (epsilon/h, delta/h) stability histogram per level, basic composition over h levels; "
        f"the HHH set and its counts are post-processing of the released per-level counts"
    )


def stability_histogram_hhh(
    values: object,
    hierarchy: Hierarchy,
    params: OfflineHHHParams,
    rng: RandomSource | np.random.Generator | int | None = None,
) -> OfflineHHHResult:
    """Private HHH of a snapshot by per-level stability histograms; (ε, δ)-DP (add/remove one).

    Parameters as for :func:`~dphhh.privacy.offline.hhh_algorithm1.algorithm1_hhh` (``values`` may be a
    precomputed :class:`HierarchyCounts`); β is not used by the mechanism. Reported counts are the
    noisy conditioned counts r̃(p) described in the module docstring.
    """
    if not isinstance(params, OfflineHHHParams):
        raise TypeError(f"StabilityHistogramHHH: params must be OfflineHHHParams, got {type(params).__name__}")
    scales = BaselineScales.for_budget(params.epsilon, params.delta, hierarchy.h)
    tree = counts_of(values, hierarchy, "StabilityHistogramHHH")
    source = as_source(rng)
    outcome = baseline_levels(tree, params.tau, scales, source)
    return result_of(
        "stability_histogram",
        params,
        tree,
        outcome,
        _guarantee_text(params),
        scales.as_dict(),
        source,
        count_scale=scales.scale,
        subtracted=True,
    )
