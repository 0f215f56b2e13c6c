"""Statistical privacy audit (docs/ALGORITHMS.md §10): a lower bound on ε from samples on neighbouring inputs.

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

The most powerful statistic is the exact log-likelihood ratio of the output
(:func:`audit_likelihood_ratio`; the likelihoods of the stream release are in
``release_likelihood``). Its largest losses sit in the far tails, so it is searched with
log-spaced tail thresholds (``tail_grid``), ranked on the selection half at the stricter level
``SELECT_ALPHA_TAILS`` so that a fluke count in a rare tail event is not chosen. Seeds come from
:func:`stable_seed`: the same in every process, unlike ``hash()`` of strings.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

import numpy as np
from scipy.stats import beta as beta_dist

ALPHA = 1e-3
_MIN_TAIL_COUNT = 20  # the rarest tail event tried holds about this many selection samples
SELECT_ALPHA_TAILS = 1e-6  # level at which the selection half ranks events when tails are searched


def stable_seed(*parts: object) -> int:
    """A seed derived from ``parts`` that is the same in every process (CRC-32 of their text).

    Python salts ``hash()`` of strings per process, so ``hash(name)`` seeds make audits
    irreproducible; this does not."""
    return zlib.crc32("/".join(str(p) for p in parts).encode()) % 1_000_003


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


def _loss_array(num: np.ndarray, den: np.ndarray, n: int, delta: float, alpha: float) -> np.ndarray:
    """:func:`_loss` for arrays of event counts (the same Clopper–Pearson bounds, vectorised)."""
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = np.where(num > 0, beta_dist.ppf(alpha, np.maximum(num, 1), n - num + 1), 0.0)
        high = np.where(den < n, beta_dist.ppf(1 - alpha, den + 1, np.maximum(n - den, 1)), 1.0)
        out = np.log((low - delta) / high)
    return np.where(low - delta > 0, out, -np.inf)


def _events(stat: np.ndarray, grid: int, tail_grid: int = 0) -> np.ndarray:
    """Candidate thresholds: every value, or ``grid`` evenly spaced quantiles plus ``tail_grid``
    quantiles per tail, log-spaced in tail probability from ``_MIN_TAIL_COUNT/n`` to 1/2 (the
    events of a likelihood-ratio statistic that carry the largest loss live in its far tails)."""
    values = np.unique(stat)
    if values.size > grid:
        probs = np.linspace(0, 1, grid)
        if tail_grid:
            tails = np.geomspace(min(0.5, _MIN_TAIL_COUNT / stat.size), 0.5, tail_grid)
            probs = np.concatenate([probs, tails, 1 - tails])
        values = np.unique(np.quantile(stat, probs, method="nearest"))
    return values


def audit_statistics(
    samples_a: dict[str, np.ndarray],
    samples_b: dict[str, np.ndarray],
    *,
    delta: float,
    alpha: float = ALPHA,
    grid: int = 400,
    tail_grid: int = 0,
) -> AuditResult:
    """ε lower bound over candidate statistics (same names in both dicts, equal sample sizes).

    ``tail_grid`` adds that many log-spaced tail thresholds per tail (see :func:`_events`); the
    selection half then ranks events at the stricter level ``SELECT_ALPHA_TAILS``, which keeps it
    from picking a rare tail event whose selection count is a fluke (any selection rule is valid:
    only the estimation half enters the bound)."""
    select_alpha = min(alpha, SELECT_ALPHA_TAILS) if tail_grid else alpha
    best: tuple[float, str, str, np.ndarray, np.ndarray] | None = None
    for name in samples_a:
        a, b = np.asarray(samples_a[name]), np.asarray(samples_b[name])
        half_a, half_b = a.shape[0] // 2, b.shape[0] // 2
        sel_a, sel_b = np.sort(a[:half_a]), np.sort(b[:half_b])
        thresholds = _events(np.concatenate([sel_a, sel_b]), grid, tail_grid)
        # counts of {s >= t} and {s <= t} on the selection halves, vectorised
        ge_a = half_a - np.searchsorted(sel_a, thresholds, side="left")
        ge_b = half_b - np.searchsorted(sel_b, thresholds, side="left")
        le_a = np.searchsorted(sel_a, thresholds, side="right")
        le_b = np.searchsorted(sel_b, thresholds, side="right")
        for kind, ca, cb in (("ge", ge_a, ge_b), ("le", le_a, le_b)):
            for direction, num, den in (("A/B", ca, cb), ("B/A", cb, ca)):
                # rank candidates by a conservative estimate on the selection half
                scores = _loss_array(num, den, half_a, delta, select_alpha)
                i = int(np.argmax(scores))
                if best is None or scores[i] > best[0]:
                    best = (
                        scores[i],
                        name,
                        f"{direction} s {'>=' if kind == 'ge' else '<='} {thresholds[i]}",
                        a[half_a:],
                        b[half_b:],
                    )
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


def audit_likelihood_ratio(
    llr_a: np.ndarray, llr_b: np.ndarray, *, delta: float, alpha: float = ALPHA, tail_grid: int = 200
) -> AuditResult:
    """ε lower bound from the log-likelihood ratio ``ln P_A(o)/P_B(o)`` of each sampled output o
    (``llr_a`` on samples drawn from A, ``llr_b`` from B).

    By the Neyman–Pearson lemma the events ``{LLR >= t}`` (A over B) and ``{LLR <= t}`` (B over A)
    are the most powerful ones, so thresholding the exact LLR gives the tightest bound this
    split-sample procedure can give; the thresholds reach far into the tails.
    """
    return audit_statistics({"llr": llr_a}, {"llr": llr_b}, delta=delta, alpha=alpha, tail_grid=tail_grid)
