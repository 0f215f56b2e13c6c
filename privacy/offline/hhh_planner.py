"""Choose between Algorithm 1 and the stability-histogram baseline for an offline HHH (docs/ALGORITHMS.md §6).

The planner predicts, from public quantities only — h, τ, the final (ε, δ), β and a stream size n —
two error bounds for each mechanism, each meant to hold with probability about 1 − β:

* ``selection_margin``: the largest deviation of the noisy statistic a node is selected on from
  its exact conditioned count F_{X,S}(p), over the nodes whose decision is at stake. Every selected
  node then has F >= τ − margin and every unselected node F < τ + margin (the band in which
  selection errors can happen).
* ``count_error``: the largest deviation of a reported count from the node's exact conditioned count.

and compares their **worst error** max(selection_margin, count_error) — the single α with which
the output can be relied on (as in the paper's Theorem 3.6.2). Algorithm 1 is chosen iff its guard
accepts τ and its worst error is strictly smaller.

Prediction model (union bounds; Laplace tails e^{−t/b}):

* nodes at stake: per level the conditioned counts sum to at most n, so at most N = ⌈2hn/τ⌉ nodes
  have F >= τ/2; a node with F < τ/2 would need noise above τ/2, which the guard (Algorithm 1) or
  the τ range makes negligible. With L = ln(2N/β):
* Algorithm 1: margin = L·(6Δ + 1/η) (w ~ Lap(6Δ); v ~ Lap(1/η), clipped above at Δ);
  count error = L/ξ.
* Baseline: a node's noisy conditioned count carries 1 + k noises DLap(h/ε), k the number of
  maximal selected descendants subtracted; their subtrees are disjoint and each holds about τ/2 or
  more, so k <= K = ⌊2n/τ⌋. For a sum of m = K + 1 Laplace(b) variables,
  P(|S| > t) <= 2·e^{−L'} at t = b·√(8mL') if L' <= m/2, else t = 4bL' (Chernoff with
  E e^{λX} <= e^{2b²λ²} for |λ| <= 1/(2b)); margin = count error = t with L' = L, and the margin is
  at least T − τ + (h/ε)·L (T the suppression threshold) when τ is close to T.

Floating point (Mironov 2012): not applicable — the planner adds no noise and prints only
predictions computed from public parameters.

``n`` must be public or privately estimated (e.g. a noisy count): the choice is a function of it,
and an exact n would make the choice depend on the data.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from dphhh.privacy.params import check_int, check_open_unit, check_positive

from .hhh_algorithm1 import Algorithm1Scales
from .hhh_baseline import BaselineScales

__all__ = ["PredictedErrors", "OfflinePlan", "plan_offline_hhh", "sum_of_laplace_bound"]

ALGORITHM1 = "algorithm1"
BASELINE = "stability_histogram"


@dataclass(frozen=True)
class PredictedErrors:
    """Predicted (≈ 1 − β) error bounds of one mechanism; ``None`` when it refuses to run."""

    refused: bool
    selection_margin: float | None
    count_error: float | None

    @property
    def worst(self) -> float:
        """max(selection_margin, count_error); +inf when refused."""
        if self.refused or self.selection_margin is None or self.count_error is None:
            return math.inf
        return max(self.selection_margin, self.count_error)


@dataclass(frozen=True)
class OfflinePlan:
    """The planner's prediction for both mechanisms, its ``choice`` and a one-sentence ``reason``."""

    choice: str
    reason: str
    algorithm1: PredictedErrors
    baseline: PredictedErrors
    algorithm1_min_tau: float
    h: int
    tau: float
    epsilon: float
    delta: float
    n: int
    beta: float

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict."""
        out = asdict(self)
        out["algorithm1"]["worst"] = self.algorithm1.worst if not self.algorithm1.refused else None
        out["baseline"]["worst"] = self.baseline.worst
        return out


def sum_of_laplace_bound(scale: float, m: int, log_term: float) -> float:
    """t with P(|Σ_{i<m} X_i| > t) <= 2·e^{−log_term} for iid Laplace(``scale``) X_i (Chernoff)."""
    if log_term <= m / 2:
        return scale * math.sqrt(8 * m * log_term)
    return 4 * scale * log_term


def plan_offline_hhh(h: int, tau: float, epsilon: float, delta: float, n: int, beta: float = 0.05) -> OfflinePlan:
    """Predict both mechanisms' errors for (h, τ, final ε, δ, n, β) and choose the better one.

    See the module docstring for the model. ``n`` must be public or a private estimate.
    """
    owner = "OfflineHHHPlanner"
    check_int(owner, "h", h, 1)
    tau = check_positive(owner, "tau", tau)
    epsilon = check_positive(owner, "epsilon", epsilon)
    delta = check_open_unit(owner, "delta", delta)
    check_int(owner, "n", n, 0)
    beta = check_open_unit(owner, "beta", beta)

    at_stake = max(1, math.ceil(2 * h * n / tau))
    log_term = math.log(2 * at_stake / beta)

    scales = Algorithm1Scales.for_budget(epsilon, delta)
    min_tau = scales.min_tau(h, beta)
    if tau < min_tau:
        alg1 = PredictedErrors(True, None, None)
    else:
        alg1 = PredictedErrors(False, log_term * (scales.w_scale + scales.v_scale), log_term * scales.release_scale)

    base = BaselineScales.for_budget(epsilon, delta, h)
    descendants = math.floor(2 * n / tau)
    noise = sum_of_laplace_bound(base.scale, descendants + 1, log_term)
    suppression = base.threshold - tau + base.scale * log_term
    baseline = PredictedErrors(False, max(noise, suppression), noise)

    if alg1.refused:
        choice = BASELINE
        reason = (
            f"Algorithm 1 refuses tau={tau:g}: its guard needs tau >= {min_tau:.4g} for h={h}, "
            f"epsilon={epsilon:g}, delta={delta:g}, beta={beta:g}, so the stability-histogram baseline is used."
        )
    elif alg1.worst < baseline.worst:
        choice = ALGORITHM1
        reason = (
            f"Algorithm 1's predicted worst error {alg1.worst:.4g} is below the baseline's "
            f"{baseline.worst:.4g}, whose h/epsilon = {base.scale:g} noise adds up over as many as "
            f"{descendants} subtracted heavy descendants, so Algorithm 1 is used."
        )
    else:
        choice = BASELINE
        reason = (
            f"The baseline's predicted worst error {baseline.worst:.4g} is below Algorithm 1's "
            f"{alg1.worst:.4g}, which its selection noise Lap(6*Delta) = Lap({scales.w_scale:.4g}) dominates, "
            f"so the stability-histogram baseline is used."
        )
    return OfflinePlan(choice, reason, alg1, baseline, min_tau, h, tau, epsilon, delta, n, beta)
