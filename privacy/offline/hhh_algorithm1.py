"""Non-streaming DP-HHH: Algorithm 1 of Biswas et al., corrected (docs/ALGORITHMS.md §6).

Guarantee: for neighbouring snapshots (one element added or removed), :func:`algorithm1_hhh` is
(ε, δ)-DP for the user's **final** (ε, δ) of :class:`OfflineHHHParams`. Theorem 3.6.1 shows that
Algorithm 1 run at internal (ε_i, δ_i) is (2ξ, 2δ_i)-DP with ξ = 2ε_i/ln(5/4); we therefore run
it at ε_i = ε·ln(5/4)/4 and δ_i = δ/2.

Internal constants (from ε_i, δ_i): c0 = ln(1/δ_i)/ln(5/4); η = ε_i/ln(1/δ_i);
Δ = (1/η)·ln(1/η) (must be >= 1); ξ = 2ηc0.

Bottom-up over levels h … 1 (the root is not reported), for every node p with exact conditioned
count F_{X,S}(p) > 0 (elements under p that are not under an already selected descendant):
w_p ~ Lap(6Δ), v_p ~ Lap(1/η) clipped to min(v_p, Δ); p is selected iff F + w_p + v_p >= τ, and a
selected p is released as F + DLap(1/ξ). The release uses the discrete Laplace distribution of
:mod:`dphhh.privacy.noise` (P(k) ∝ exp(−ξ|k|)), which is ξ-DP for a sensitivity-1 integer query exactly as
Lap(1/ξ) is, and gives integer output without the floating-point low-bit leak of continuous noise.

Floating point (Mironov 2012; docs/ALGORITHMS.md §3 "Integer counts"): the only printed numbers are the released
counts F + DLap(1/ξ), integers (F is an integer count, the noise an integer), so their low-order
bits carry nothing. The selection noise w_p, v_p stays continuous :func:`dphhh.privacy.noise.laplace`
in doubles, but it is never printed: only the bit "F + w_p + v_p >= τ" leaves (through the
selected set and the conditioned counts of ancestors). Rounding in that sum moves the effective
threshold by a few ulps of |F| + |w_p| + |v_p|, and the 53-bit uniforms of the continuous
Laplace move its CDF by about 2^-53 (the released counts' discrete Laplace is exact); each selection probability changes by about (density of w_p, <= 1/(12Δ)) × that
width + 2^-52 — some 3e-14 at ε = 1, δ = 1e-6, h = 4 and τ at the guard — an additive term far
inside the proof's δ, and not a side channel in any printed value.

Guard: the proof needs τ >= 24Δ·ln(2h/(δ_i·β)); below it :func:`algorithm1_hhh` refuses with a
``ValueError`` naming the smallest allowed τ (:func:`algorithm1_min_tau`).

Vectorised per level: noise is drawn as one array per level — first w for every node of the level,
then v, then the release noise — for every node with a non-zero count; nodes whose conditioned count
is 0 ignore their draws (the same distribution as not drawing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dphhh.privacy.noise import discrete_laplace, laplace
from dphhh.privacy.params import check_int, check_open_unit, check_positive
from dphhh.privacy.randomness import RandomSource, as_source
from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import Hierarchy

from .hhh_offline import (
    NEIGHBOURS,
    HierarchyCounts,
    OfflineHHHParams,
    OfflineHHHResult,
    counts_of,
    result_of,
    sum_to_parents,
)

__all__ = ["Algorithm1Scales", "LevelOutcome", "algorithm1_levels", "algorithm1_hhh", "algorithm1_min_tau"]

_LN_5_4 = math.log(5 / 4)


@dataclass(frozen=True)
class Algorithm1Scales:
    """Internal parameters of Algorithm 1 for a final (ε, δ) (data-independent, public).

    ``w_scale`` = 6Δ, ``v_scale`` = 1/η, ``v_clip`` = Δ, ``release_scale`` = 1/ξ.
    """

    epsilon_internal: float
    delta_internal: float
    eta: float
    big_delta: float
    xi: float
    w_scale: float
    v_scale: float
    v_clip: float
    release_scale: float

    @classmethod
    def for_budget(cls, epsilon: float, delta: float) -> Algorithm1Scales:
        """Scales for the final (ε, δ); ``ValueError`` if ε is so large that Δ < 1."""
        owner = "Algorithm1"
        epsilon = check_positive(owner, "epsilon", epsilon)
        delta = check_open_unit(owner, "delta", delta)
        eps_i = epsilon * _LN_5_4 / 4
        delta_i = delta / 2
        log_inv_delta = math.log(1 / delta_i)
        c0 = log_inv_delta / _LN_5_4
        eta = eps_i / log_inv_delta
        big_delta = (1 / eta) * math.log(1 / eta)
        if big_delta < 1:
            raise UsageError(
                f"{owner}: epsilon={epsilon:g} is too large for delta={delta:g}: the internal "
                f"Delta = (1/eta)*ln(1/eta) = {big_delta:.3g} must be >= 1 (Theorem 3.6.1); lower epsilon"
            )
        xi = 2 * eta * c0
        return cls(eps_i, delta_i, eta, big_delta, xi, 6 * big_delta, 1 / eta, big_delta, 1 / xi)

    def min_tau(self, h: int, beta: float) -> float:
        """The guard: the smallest τ the proof allows, 24Δ·ln(2h/(δ_i·β))."""
        return 24 * self.big_delta * math.log(2 * h / (self.delta_internal * beta))

    @property
    def final_epsilon(self) -> float:
        """2ξ (Theorem 3.6.1)."""
        return 2 * self.xi

    @property
    def final_delta(self) -> float:
        """2δ_i (Theorem 3.6.1)."""
        return 2 * self.delta_internal

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


def algorithm1_min_tau(h: int, epsilon: float, delta: float, beta: float = 0.05) -> float:
    """The smallest threshold τ Algorithm 1 accepts for ``h`` levels and final (ε, δ), β."""
    check_int("Algorithm1", "h", h, 1)
    beta = check_open_unit("Algorithm1", "beta", beta)
    return Algorithm1Scales.for_budget(epsilon, delta).min_tau(h, beta)


@dataclass(frozen=True)
class LevelOutcome:
    """One level of a run, arrays of shape (trials × nodes) — internal, raw data inside.

    ``conditioned``: exact F_{X,S}(p) w.r.t. the run's own selection; ``statistic``: the noisy
    value compared with τ; ``selected``; ``released``: the noisy count (meaningful where selected);
    ``histogram``: for mechanisms that release a per-level noisy histogram first (the baseline),
    that histogram, else None.
    """

    level: int
    conditioned: np.ndarray
    statistic: np.ndarray
    selected: np.ndarray
    released: np.ndarray
    histogram: np.ndarray | None = None


def algorithm1_levels(
    tree: HierarchyCounts,
    tau: float,
    scales: Algorithm1Scales,
    source: RandomSource,
    trials: int = 1,
    *,
    conditioned: bool = True,
) -> list[LevelOutcome]:
    """The vectorised core of Algorithm 1: ``trials`` independent runs on the same snapshot.

    ``conditioned=False`` is a deliberately **broken** variant for the privacy audit (selection and
    release on the unconditional counts f(p), so one element moves every ancestor's release); it
    is never used by :func:`algorithm1_hhh`.
    """
    out: list[LevelOutcome] = []
    covered = np.zeros((trials, tree.levels[tree.h].size))
    for level in range(tree.h, 0, -1):
        lc = tree.levels[level]
        shape = (trials, lc.size)
        counts = lc.counts[None, :].astype(np.float64)
        f = counts - covered if conditioned else np.broadcast_to(counts, shape)
        w = laplace(scales.w_scale, shape, source) if lc.size else np.zeros(shape)
        v = np.minimum(laplace(scales.v_scale, shape, source), scales.v_clip) if lc.size else np.zeros(shape)
        noise = discrete_laplace(scales.release_scale, shape, source) if lc.size else np.zeros(shape, np.int64)
        statistic = f + w + v
        selected = (f > 0) & (statistic >= tau)
        released = f + noise
        out.append(LevelOutcome(level, f, statistic, selected, released))
        moved = np.where(selected, counts, covered)
        covered = sum_to_parents(moved, lc.parent, tree.parent_size(level))
    return out


def _guarantee_text(p: OfflineHHHParams) -> str:
    return (
        f"({p.epsilon:g}, {p.delta:g})-differentially private for neighbouring snapshots ({NEIGHBOURS}): "
        f"Algorithm 1 (corrected) at internal epsilon = epsilon*ln(5/4)/4 and delta/2, which "
        f"Theorem 3.6.1 shows is (2*xi, 2*delta_internal)-DP; counts are noisy conditioned counts"
    )


def algorithm1_hhh(
    values: object,
    hierarchy: Hierarchy,
    params: OfflineHHHParams,
    rng: RandomSource | np.random.Generator | int | None = None,
) -> OfflineHHHResult:
    """Private HHH of a snapshot by Algorithm 1 (corrected); (ε, δ)-DP for add/remove-one neighbours.

    Parameters:
        values: the snapshot (an array accepted by ``hierarchy.keys``), or a precomputed
            :class:`HierarchyCounts` of it (from :func:`count_hierarchy`).
        hierarchy: the hierarchy (levels 1..h are processed; the root is not reported).
        params: final (ε, δ), τ and β.
        rng: ``None`` = the secure source (production); a seed/Generator only for tests.

    Raises ``ValueError`` when τ is below the guard 24Δ·ln(2h/(δ_i·β)) (the message names the
    smallest allowed τ) or when ε is so large that Δ < 1.
    """
    if not isinstance(params, OfflineHHHParams):
        raise TypeError(f"Algorithm1: params must be OfflineHHHParams, got {type(params).__name__}")
    scales = Algorithm1Scales.for_budget(params.epsilon, params.delta)
    min_tau = scales.min_tau(hierarchy.h, params.beta)
    if params.tau < min_tau:
        raise UsageError(
            f"Algorithm1: tau={params.tau:g} is below the guard for h={hierarchy.h}, "
            f"epsilon={params.epsilon:g}, delta={params.delta:g}, beta={params.beta:g}: the smallest "
            f"allowed tau is {min_tau:.6g} (24*Delta*ln(2h/(delta_internal*beta)), Delta={scales.big_delta:.6g}); "
            f"raise tau or use stability_histogram_hhh"
        )
    tree = counts_of(values, hierarchy, "Algorithm1")
    source = as_source(rng)
    outcome = algorithm1_levels(tree, params.tau, scales, source)
    internal = scales.as_dict() | {"min_tau": min_tau}
    return result_of(
        "algorithm1",
        params,
        tree,
        outcome,
        _guarantee_text(params),
        internal,
        source,
        count_scale=scales.release_scale,
        subtracted=False,
    )
