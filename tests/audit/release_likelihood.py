"""Exact log-likelihoods of a sketch release's noisy output, for the privacy audits (docs/ALGORITHMS.md §10).

The audits of the stream release (docs/ALGORITHMS.md §3, §5) threshold the exact log-likelihood ratio (LLR)
of the observed output under two neighbouring inputs. The sketch states are deterministic and
known, and all noise is discrete Laplace with known scales (``P(k) = c·q^|k|``, ``q = e^{-1/b}``,
``c = tanh(1/(2b))``, :func:`dphhh.privacy.noise.discrete_laplace_pmf`), so the likelihood of an
output can be computed exactly. For one sketch with counters ``C`` (variant ``fresh``) the output
is the set S of keys that passed and their released values ``v_S``; the thresholding noise
``(γ, w)`` and the release noise ``(γ', w')`` are independent, so

* ``P(S) = Σ_γ P(γ) Π_{i∈S} P(w ≥ T − C_i − γ) Π_{i∉S} P(w < T − C_i − γ)``, a function of the
  pattern S only (:func:`log_pattern_probability`, summed on a γ grid whose neglected tail is
  below e^-80);
* ``P(v_S | S) = Σ_γ' P(γ') Π_{i∈S} P(w' = v_i − C_i − γ')``: the exponent is piecewise linear
  in γ' with breakpoints 0 and the residuals ``v_i − C_i``, so the sum is a finite sum of
  geometric series, computed in closed form (:func:`log_shared_release`) — no truncation.

A key a side does not hold (it entered the sketch on the other side) never passes there. A
sub-stream size ``ñ = n + DLap(b)`` has log-likelihood ``log c − |ñ − n|/b``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit
from scipy.special import logsumexp

from dphhh.privacy.release import ReleaseScales

__all__ = [
    "SketchSide",
    "log_dlap",
    "log_tail_at_least",
    "log_shared_release",
    "log_pattern_probability",
    "sketch_log_likelihood",
    "sketch_pair_llr",
    "size_log_likelihood",
]

_TAIL = 80.0  # the γ grid covers |γ| <= 80·b beyond the counters' range: neglected mass < e^-80


@dataclass(frozen=True)
class SketchSide:
    """One side's state of one sketch over a common key order: ``present[i]`` False for a key
    this side does not hold (its count is then ignored)."""

    counts: np.ndarray
    present: np.ndarray

    @classmethod
    def of(cls, counters: dict[int, int], keys: list[int]) -> SketchSide:
        """The side holding ``counters`` ({key: counter}) over the common order ``keys``."""
        return cls(
            np.array([counters.get(k, 0) for k in keys], dtype=np.int64),
            np.array([k in counters for k in keys], dtype=bool),
        )


def _log_c(scale: float) -> float:
    return math.log(math.tanh(0.5 / scale))


def log_dlap(x: np.ndarray, scale: float) -> np.ndarray:
    """``log P(K = x)`` for K ~ DLap(scale), exactly (the log of ``discrete_laplace_pmf``)."""
    return _log_c(scale) - np.abs(np.asarray(x, dtype=np.float64)) / scale


def log_tail_at_least(t: np.ndarray, scale: float) -> np.ndarray:
    """``log P(K >= t)`` for K ~ DLap(scale) and integer t: ``q^t/(1+q)`` for t >= 1, else
    ``1 − q^{1−t}/(1+q)`` (so ``log P(K < t) = log_tail_at_least(1 − t)`` by symmetry)."""
    t = np.asarray(t, dtype=np.float64)
    log_q = -1.0 / scale
    log_1pq = math.log1p(math.exp(log_q))
    upper = t * log_q - log_1pq
    lower = np.log1p(-np.exp(np.maximum(1.0 - t, 1.0) * log_q - log_1pq))  # used where t <= 0
    return np.where(t >= 1, upper, lower)


@njit(cache=True)
def _geometric_sum(slope: float, length: float) -> float:
    """``Σ_{t=0}^{length−1} e^{−|slope|·t}`` for ``length >= 1``."""
    s = abs(slope)
    if s < 1e-12:
        return length
    return math.expm1(-s * length) / math.expm1(-s)


@njit(cache=True)
def _shared_row(points: np.ndarray, weights: np.ndarray, exponents: np.ndarray, m: int) -> float:
    """The closed-form sum for one row: ``points[:m]`` sorted ascending with their weights.

    The exponent ``E(g) = −Σ_j w_j |g − p_j|`` is concave and piecewise linear, so its maximum
    over the integers is at a breakpoint; every term is summed relative to that maximum."""
    total = 0.0
    right_wp = 0.0
    for j in range(m):
        total += weights[j]
        right_wp += weights[j] * points[j]
    left_w = 0.0
    left_wp = 0.0
    top = -np.inf
    for i in range(m):  # E at each breakpoint, from the sums of weights left and right of it
        p = points[i]
        right_w = total - left_w - weights[i]
        exponents[i] = -(p * left_w - left_wp + (right_wp - left_wp - weights[i] * p) - p * right_w)
        top = max(top, exponents[i])
        left_w += weights[i]
        left_wp += weights[i] * p
    tail = math.exp(-total) / -math.expm1(-total)  # Σ_{t>=1} e^{−W t}: beyond either end
    acc = (math.exp(exponents[0] - top) + math.exp(exponents[m - 1] - top)) * tail
    left_w = 0.0
    for i in range(m):
        if i == 0 or points[i] != points[i - 1]:  # each distinct breakpoint once
            acc += math.exp(exponents[i] - top)
        if i > 0:
            gap = points[i] - points[i - 1] - 1.0
            if gap >= 1.0:
                slope = total - 2.0 * left_w  # between breakpoints i−1 and i
                peak = max(exponents[i - 1] + slope, exponents[i] - slope)
                acc += math.exp(peak - top) * _geometric_sum(slope, gap)
        left_w += weights[i]
    return top + math.log(acc)


@njit(cache=True)
def _shared_rows(residuals: np.ndarray, mask: np.ndarray, shared: float, key: float) -> np.ndarray:
    n, k = residuals.shape
    out = np.empty(n)
    points = np.empty(k + 1)
    weights = np.empty(k + 1)
    exponents = np.empty(k + 1)
    for row in range(n):
        m = 1
        points[0] = 0.0
        weights[0] = 1.0 / shared
        for j in range(k):
            if mask[row, j]:
                # insertion sort as we go
                x = float(residuals[row, j])
                i = m
                while i > 0 and points[i - 1] > x:
                    points[i] = points[i - 1]
                    weights[i] = weights[i - 1]
                    i -= 1
                points[i] = x
                weights[i] = 1.0 / key
                m += 1
        out[row] = _shared_row(points, weights, exponents, m)
    return out


def log_shared_release(residuals: np.ndarray, mask: np.ndarray, shared: float, key: float) -> np.ndarray:
    """``log Σ_{g∈Z} P(γ' = g) Π_{i: mask_i} P(w'_i = r_i − g)`` per row, up to the constant
    ``log c_γ' + |S|·log c_w'`` (added by the caller), exactly.

    ``residuals`` (int, shape (N, k)) are ``v_i − C_i``; ``mask`` marks the released keys; ``γ' ~
    DLap(shared)``, ``w' ~ DLap(key)``. The exponent ``−|g|/shared − Σ|r_i − g|/key`` is linear
    between consecutive breakpoints (0 and the masked ``r_i``), so each stretch between them sums
    as a geometric series and each tail as an infinite one.
    """
    residuals = np.ascontiguousarray(residuals, dtype=np.int64)
    mask = np.ascontiguousarray(mask, dtype=np.bool_)
    return _shared_rows(residuals, mask, float(shared), float(key))


def _groups(side: SketchSide) -> tuple[np.ndarray, np.ndarray]:
    """Keys with the same (counter, present) are exchangeable: their group index and the groups'
    representative key."""
    signature = side.counts * 2 + side.present
    _, first, index = np.unique(signature, return_index=True, return_inverse=True)
    return index.ravel(), first


def log_pattern_probability(passes: np.ndarray, side: SketchSide, scales: ReleaseScales) -> np.ndarray:
    """``log P(S)`` on ``side`` of pass patterns given by ``passes`` (shape (M, g)): the number of
    passing keys in each of the side's exchangeable groups (:func:`_groups`).

    ``P(S) = Σ_γ P(γ) Π_groups P(pass | γ)^passes · P(fail | γ)^(size − passes)``, summed on
    a γ grid that reaches ``80·b_γ`` beyond every key's threshold gap.
    """
    index, first = _groups(side)
    sizes = np.bincount(index, minlength=first.size)
    gap = scales.integer_threshold - side.counts[first]  # a key passes iff γ + w >= gap
    present = side.present[first]
    reach = int(np.abs(gap).max()) if gap.size else 0
    half = int(math.ceil(_TAIL * scales.gamma)) + reach
    g = np.arange(-half, half + 1)
    shifted = gap[:, None] - g[None, :]
    log_pass = np.where(present[:, None], log_tail_at_least(shifted, scales.w), -np.inf)  # (groups, G)
    log_fail = np.where(present[:, None], log_tail_at_least(1 - shifted, scales.w), 0.0)
    fails = sizes[None, :] - passes
    with np.errstate(invalid="ignore"):  # 0 · (−inf) is 0: no key of an absent group passes
        terms = np.where(passes[:, :, None] > 0, passes[:, :, None] * log_pass[None], 0.0)
    terms = (terms + fails[:, :, None] * log_fail[None]).sum(axis=1)  # (M, G)
    return logsumexp(terms + log_dlap(g, scales.gamma)[None, :], axis=1)


def _pass_counts(passed: np.ndarray, side: SketchSide) -> tuple[np.ndarray, np.ndarray]:
    """Distinct per-group pass counts on ``side`` (rows) and each sample's index into them."""
    index, first = _groups(side)
    sizes = np.bincount(index, minlength=first.size)
    counts = np.stack([passed[:, index == group].sum(axis=1) for group in range(first.size)], axis=1)
    radix = np.cumprod(np.concatenate([[1], sizes[:-1] + 1]))  # mixed radix: one code per row
    distinct, inverse = np.unique(counts @ radix, return_inverse=True)
    table = np.zeros((distinct.size, first.size), dtype=np.int64)
    table[inverse.ravel()] = counts
    return table, inverse.ravel()


def sketch_log_likelihood(
    passed: np.ndarray, values: np.ndarray, side: SketchSide, scales: ReleaseScales
) -> np.ndarray:
    """Exact ``log P(output)`` per sample (rows of ``passed``/``values``) for a ``fresh``-variant
    release of the sketch ``side`` (``gamma_release = 0`` is the paper's literal release)."""
    if scales.w_release is None:
        raise NotImplementedError("exact likelihood is implemented for the fresh variant")
    table, where = _pass_counts(passed, side)
    log_s = log_pattern_probability(table, side, scales)[where]
    impossible = (passed & ~side.present[None, :]).any(axis=1)
    residuals = np.where(passed, values - side.counts[None, :], 0)
    released = passed.sum(axis=1)
    if scales.gamma_release:
        log_v = log_shared_release(residuals, passed, scales.gamma_release, scales.w_release)
        log_v = log_v + _log_c(scales.gamma_release) + released * _log_c(scales.w_release)
    else:
        log_v = np.where(passed, log_dlap(residuals, scales.w_release), 0.0).sum(axis=1)
    return np.where(impossible, -np.inf, log_s + log_v)


def size_log_likelihood(noisy: np.ndarray, n: int, scale: float) -> np.ndarray:
    """Exact ``log P(ñ)`` of noisy sub-stream sizes ``ñ = n + DLap(scale)`` (docs/ALGORITHMS.md §5)."""
    return log_dlap(np.asarray(noisy) - n, scale)


def sketch_pair_llr(
    keys: list[int],
    passed: np.ndarray,
    values: np.ndarray,
    counters_a: dict[int, int],
    counters_b: dict[int, int],
    scales: ReleaseScales,
) -> np.ndarray:
    """``ln P_A(o) − ln P_B(o)`` of one sketch's release outputs o (pass pattern and values).

    ``keys`` (sorted) are the keys of the side the outputs were drawn from, ``passed``/``values``
    its (trials, len(keys)) output; ``counters_a``/``counters_b`` are the two neighbours' states of
    this sketch. A key only one side holds never passes on the other (its likelihood there is 0)."""
    union = sorted(set(counters_a) | set(counters_b))
    where = [union.index(k) for k in keys]
    trials = passed.shape[0]
    full_passed = np.zeros((trials, len(union)), dtype=bool)
    full_values = np.zeros((trials, len(union)), dtype=np.int64)
    full_passed[:, where], full_values[:, where] = passed, values
    llr = sketch_log_likelihood(full_passed, full_values, SketchSide.of(counters_a, union), scales)
    return llr - sketch_log_likelihood(full_passed, full_values, SketchSide.of(counters_b, union), scales)
