"""Statistical privacy audit (spec §10): a lower bound on ε from samples on neighbouring inputs.

Unit tests cannot show privacy; an audit can show its absence. Given samples of a scalar
statistic of the mechanism's output on neighbouring inputs A and B:

1. split each sample in halves; on the *selection* half, search events ``{s >= t}`` and
   ``{s <= t}`` (thresholds on a quantile grid) in both directions (A over B, B over A) for the one
   with the largest conservative privacy-loss estimate;
2. on the fresh *estimation* half, compute Clopper–Pearson bounds at level ``alpha`` for that one
   event: ``p_num_low`` (numerator side) and ``p_den_high`` (denominator side), and
   ``ε_lb = ln((p_num_low − δ) / p_den_high)``.

If the mechanism is (ε, δ)-DP, then for every event ``P_A(E) <= e^ε P_B(E) + δ``, so
``ε_lb > ε`` happens with probability at most 2·alpha (one bound fails). With ``alpha = 1e-3``
per bound a correct mechanism's audit fails with probability <= 2e-3 per audit; the statistics and
sample sizes below are chosen so that ε_lb of a correct mechanism stays well below ε, which makes
flakiness negligible in practice (the bound is conservative). Each audit is also run on a
deliberately broken variant that it must flag.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta as beta_dist

ALPHA = 1e-3


def clopper_pearson(successes: int, trials: int, alpha: float = ALPHA) -> tuple[float, float]:
    """One-sided Clopper–Pearson (lower, upper) bounds, each holding with probability 1 − alpha."""
    lower = 0.0 if successes == 0 else float(beta_dist.ppf(alpha, successes, trials - successes + 1))
    upper = 1.0 if successes == trials else float(beta_dist.ppf(1 - alpha, successes + 1, trials - successes))
    return lower, upper


@dataclass(frozen=True)
class AuditResult:
    """The audit's ε lower bound and the event that produced it."""

    epsilon_lb: float
    statistic: str
    event: str
    p_numerator: float
    p_denominator: float


def _loss(num: int, den: int, n: int, delta: float, alpha: float) -> float:
    low, _ = clopper_pearson(num, n, alpha)
    _, high = clopper_pearson(den, n, alpha)
    if low - delta <= 0:
        return -math.inf
    return math.log((low - delta) / high)


def _events(stat: np.ndarray, grid: int) -> np.ndarray:
    values = np.unique(stat)
    if values.size > grid:
        values = np.unique(np.quantile(stat, np.linspace(0, 1, grid), method="nearest"))
    return values


def audit_statistics(
    samples_a: dict[str, np.ndarray],
    samples_b: dict[str, np.ndarray],
    *,
    delta: float,
    alpha: float = ALPHA,
    grid: int = 400,
) -> AuditResult:
    """ε lower bound over candidate statistics (same names in both dicts, equal sample sizes)."""
    best: tuple[float, str, str, np.ndarray, np.ndarray] | None = None
    for name in samples_a:
        a, b = np.asarray(samples_a[name]), np.asarray(samples_b[name])
        half_a, half_b = a.shape[0] // 2, b.shape[0] // 2
        sel_a, sel_b = np.sort(a[:half_a]), np.sort(b[:half_b])
        thresholds = _events(np.concatenate([sel_a, sel_b]), grid)
        # counts of {s >= t} and {s <= t} on the selection halves, vectorised
        ge_a = half_a - np.searchsorted(sel_a, thresholds, side="left")
        ge_b = half_b - np.searchsorted(sel_b, thresholds, side="left")
        le_a = np.searchsorted(sel_a, thresholds, side="right")
        le_b = np.searchsorted(sel_b, thresholds, side="right")
        for kind, ca, cb in (("ge", ge_a, ge_b), ("le", le_a, le_b)):
            for direction, num, den in (("A/B", ca, cb), ("B/A", cb, ca)):
                # rank candidates by a conservative estimate on the selection half
                scores = [_loss(int(x), int(y), half_a, delta, alpha) for x, y in zip(num, den)]
                i = int(np.argmax(scores))
                if best is None or scores[i] > best[0]:
                    best = (scores[i], name, f"{direction} s {'>=' if kind == 'ge' else '<='} {thresholds[i]}",
                            a[half_a:], b[half_b:])
    assert best is not None, "audit_statistics: no statistic given"
    _, name, event, est_a, est_b = best
    direction, _, cmp_text = event.partition(" s ")
    op, _, t_text = cmp_text.partition(" ")
    t = float(t_text)
    in_a = (est_a >= t) if op == ">=" else (est_a <= t)
    in_b = (est_b >= t) if op == ">=" else (est_b <= t)
    num, den = (in_a, in_b) if direction == "A/B" else (in_b, in_a)
    n = min(num.shape[0], den.shape[0])
    eps = _loss(int(num[:n].sum()), int(den[:n].sum()), n, delta, alpha)
    return AuditResult(eps, name, event, float(num.mean()), float(den.mean()))
