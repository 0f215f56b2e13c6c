"""Local-DP frequency oracles: OUE and GRR (Wang et al., USENIX Security 2017), docs/ALGORITHMS.md §8.

Guarantee: every client function (:func:`perturb_oue`, :func:`perturb_grr` and their batch
forms, which apply the same per-user randomiser independently to each user) is ε-local-DP: for
any two values ``v, v'`` of one user and any report ``r``,
``P(r | v) <= e^ε · P(r | v')``. The neighbouring relation is "the one user's value changes";
the report is the only thing that leaves the client (it can be sent as is, e.g. over Kafka).

* OUE: the value ``v`` in ``[0, d)`` is one-hot encoded; bit ``v`` is kept as 1 with
  probability ``p = 1/2`` and every other bit is set to 1 with probability
  ``q = 1/(e^ε + 1)``. Worst-case ratio ``p(1 − q)/(q(1 − p)) = e^ε``.
* GRR: report ``v`` with probability ``p = e^ε/(e^ε + d − 1)``, otherwise a uniformly random
  other value (each with ``q = 1/(e^ε + d − 1)``). Ratio ``p/q = e^ε``.

Server side: :func:`aggregate_oue` / :func:`aggregate_grr` turn reports into unbiased frequency
estimates ``f̂_j = (C_j/n − q)/(p − q)``; :func:`oue_variance` / :func:`grr_variance` give the
per-cell variance ``(f p(1−p) + (1−f) q(1−q)) / (n (p−q)^2)`` (at ``f = 0`` these are the
paper's ``4e^ε/(n(e^ε−1)^2)`` and ``(d−2+e^ε)/(n(e^ε−1)^2)``).

Simulated aggregate sampling (:func:`simulate_oue_support`, :func:`simulate_grr_counts`) draws
the server-side counts directly from the true per-cell counts. It is *exactly* the distribution
of the aggregated per-user reports (OUE: the bits are independent across users and cells, so
cell ``j`` counts ``Bin(c_j, p) + Bin(n − c_j, q)``; GRR: each true value's users split
multinomially), which ``tests/privacy/offline/test_ldp.py`` checks against per-user
perturbation. It exists for large benchmarks only; the real deployment path is per user.

All randomness comes from :mod:`dphhh.privacy.noise` (``uniform01``, ``binomial``) through
:func:`dphhh.privacy.randomness.as_source` (``rng=None``: the secure OS source).

Floating point (Mironov 2012): safe — no continuous noise is added anywhere; a report is bits
(OUE) or an integer (GRR), each decided by a comparison ``u < p`` of a 53-bit uniform, so the
realised probabilities are p and q rounded up to multiples of 2^-53 (a relative change below
2^-53/q in the ratio p/q, and below (d − 1)·2^-53 in GRR's choice among the other values); the
server's float estimates are post-processing of the integer reports.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from dphhh.privacy.noise import binomial, uniform01
from dphhh.privacy.params import check_int, check_positive
from dphhh.privacy.randomness import RandomSource, as_source
from dphhh.sketches.errors import UsageError

__all__ = [
    "ORACLES",
    "oue_probabilities",
    "grr_probabilities",
    "perturb_oue",
    "perturb_oue_batch",
    "perturb_grr",
    "perturb_grr_batch",
    "oue_support_counts",
    "aggregate_oue",
    "aggregate_grr",
    "estimate_from_counts",
    "oue_variance",
    "grr_variance",
    "prefer_grr",
    "simulate_oue_support",
    "simulate_grr_counts",
    "estimate_frequencies",
]

RngLike = RandomSource | np.random.Generator | int | None
Oracle = Literal["oue", "grr"]
Sampling = Literal["per_user", "aggregate"]
ORACLES = ("oue", "grr")
_CHUNK_CELLS = 1 << 22  # bits perturbed per chunk in the batch OUE paths


def oue_probabilities(epsilon: float) -> tuple[float, float]:
    """OUE's ``(p, q) = (1/2, 1/(e^ε + 1))``."""
    eps = check_positive("OUE", "epsilon", epsilon)
    return 0.5, 1.0 / (math.exp(eps) + 1.0)


def grr_probabilities(epsilon: float, domain_size: int) -> tuple[float, float]:
    """GRR's ``(p, q) = (e^ε, 1)/(e^ε + d − 1)``."""
    eps = check_positive("GRR", "epsilon", epsilon)
    d = check_int("GRR", "domain_size", domain_size, 2)
    e = math.exp(eps)
    return e / (e + d - 1), 1.0 / (e + d - 1)


def _check_values(owner: str, values: np.ndarray | None, domain_size: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise UsageError(f"{owner}: values must be a 1-D array of integers")
    if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= domain_size):
        raise UsageError(f"{owner}: values must lie in [0, {domain_size})")
    return arr.astype(np.int64)


def _oue_bits(values: np.ndarray, domain_size: int, p: float, q: float, rng: RngLike) -> np.ndarray:
    """Per-user OUE reports for ``values`` with explicit ``(p, q)`` (``uint8``, shape (n, d))."""
    source = as_source(rng)
    n = values.size
    u = uniform01(source, n * domain_size).reshape(n, domain_size)
    threshold = np.full((n, domain_size), q)
    threshold[np.arange(n), values] = p
    return (u < threshold).astype(np.uint8)


def perturb_oue(value: int, domain_size: int, epsilon: float, rng: RngLike = None) -> np.ndarray:
    """One user's OUE report: a ``uint8`` bit vector of length ``domain_size`` (ε-LDP)."""
    d = check_int("OUE", "domain_size", domain_size, 1)
    p, q = oue_probabilities(epsilon)
    v = _check_values("OUE", np.array([value]), d)
    return _oue_bits(v, d, p, q, rng)[0]


def perturb_oue_batch(values: np.ndarray, domain_size: int, epsilon: float, rng: RngLike = None) -> np.ndarray:
    """OUE reports of many users at once (each row is one user's ε-LDP report)."""
    d = check_int("OUE", "domain_size", domain_size, 1)
    p, q = oue_probabilities(epsilon)
    return _oue_bits(_check_values("OUE", values, d), d, p, q, rng)


def oue_support_counts(values: np.ndarray, domain_size: int, epsilon: float, rng: RngLike = None) -> np.ndarray:
    """Per-user OUE perturbation of ``values`` in chunks, summed per cell (the server's input).

    Equivalent to ``perturb_oue_batch(values, ...).sum(axis=0)`` without holding every report.
    """
    d = check_int("OUE", "domain_size", domain_size, 1)
    p, q = oue_probabilities(epsilon)
    vals = _check_values("OUE", values, d)
    source = as_source(rng)
    rows = max(1, _CHUNK_CELLS // d)
    total = np.zeros(d, dtype=np.int64)
    for start in range(0, vals.size, rows):
        total += _oue_bits(vals[start : start + rows], d, p, q, source).sum(axis=0, dtype=np.int64)
    return total


def _grr_reports(values: np.ndarray, domain_size: int, p: float, rng: RngLike) -> np.ndarray:
    """GRR reports with keep probability ``p`` (others uniform over the ``d − 1`` other values)."""
    source = as_source(rng)
    n = values.size
    keep = uniform01(source, n) < p
    # Uniform over the d - 1 other values: k in [0, d-2], shifted past v (53-bit resolution).
    k = np.minimum(np.floor(uniform01(source, n) * (domain_size - 1)).astype(np.int64), domain_size - 2)
    other = k + (k >= values)
    return np.where(keep, values, other)


def perturb_grr(value: int, domain_size: int, epsilon: float, rng: RngLike = None) -> int:
    """One user's GRR report: an integer in ``[0, domain_size)`` (ε-LDP)."""
    p, _ = grr_probabilities(epsilon, domain_size)
    v = _check_values("GRR", np.array([value]), domain_size)
    return int(_grr_reports(v, domain_size, p, rng)[0])


def perturb_grr_batch(values: np.ndarray, domain_size: int, epsilon: float, rng: RngLike = None) -> np.ndarray:
    """GRR reports of many users at once (each entry is one user's ε-LDP report)."""
    p, _ = grr_probabilities(epsilon, domain_size)
    return _grr_reports(_check_values("GRR", values, domain_size), domain_size, p, rng)


def estimate_from_counts(counts: np.ndarray, n: int, p: float, q: float) -> np.ndarray:
    """Unbiased frequencies ``(C_j/n − q)/(p − q)`` from per-cell support counts of ``n`` reports."""
    c = np.asarray(counts, dtype=np.float64)
    if n <= 0:
        return np.zeros_like(c)
    return (c / n - q) / (p - q)


def aggregate_oue(reports: np.ndarray, epsilon: float) -> np.ndarray:
    """Server side of OUE: unbiased frequency estimates from an (n, d) array of reports."""
    r = np.asarray(reports)
    if r.ndim != 2:
        raise UsageError("OUE: reports must be a 2-D array (one row per user)")
    p, q = oue_probabilities(epsilon)
    return estimate_from_counts(r.sum(axis=0, dtype=np.int64), r.shape[0], p, q)


def aggregate_grr(reports: np.ndarray, domain_size: int, epsilon: float) -> np.ndarray:
    """Server side of GRR: unbiased frequency estimates from a 1-D array of reported values."""
    p, q = grr_probabilities(epsilon, domain_size)
    r = _check_values("GRR", reports, domain_size)
    return estimate_from_counts(np.bincount(r, minlength=domain_size), r.size, p, q)


def _variance(p: float, q: float, n: int, frequency: float | np.ndarray) -> float | np.ndarray:
    f = np.asarray(frequency, dtype=np.float64)
    var = (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (n * (p - q) ** 2)
    return float(var) if var.ndim == 0 else var


def oue_variance(epsilon: float, n: int, frequency: float | np.ndarray = 0.0) -> float | np.ndarray:
    """Variance of one OUE frequency estimate from ``n`` reports (``4e^ε/(n(e^ε−1)^2)`` at f = 0)."""
    p, q = oue_probabilities(epsilon)
    return _variance(p, q, check_int("OUE", "n", n, 1), frequency)


def grr_variance(epsilon: float, n: int, domain_size: int, frequency: float | np.ndarray = 0.0) -> float | np.ndarray:
    """Variance of one GRR frequency estimate (``(d−2+e^ε)/(n(e^ε−1)^2)`` at f = 0)."""
    p, q = grr_probabilities(epsilon, domain_size)
    return _variance(p, q, check_int("GRR", "n", n, 1), frequency)


def prefer_grr(domain_size: int, epsilon: float) -> bool:
    """The paper's rule: GRR has the smaller variance iff ``d − 2 < 3e^ε``."""
    return domain_size - 2 < 3.0 * math.exp(epsilon)


def simulate_oue_support(true_counts: np.ndarray, epsilon: float, rng: RngLike = None) -> np.ndarray:
    """Per-cell OUE support counts drawn directly: ``Bin(c_j, p) + Bin(n − c_j, q)``.

    Exactly the distribution of ``oue_support_counts`` on data with histogram ``true_counts``.
    """
    c = np.asarray(true_counts, dtype=np.int64)
    p, q = oue_probabilities(epsilon)
    source = as_source(rng)
    n = int(c.sum())
    return binomial(c, p, source) + binomial(n - c, q, source)


def simulate_grr_counts(true_counts: np.ndarray, epsilon: float, rng: RngLike = None) -> np.ndarray:
    """Per-cell GRR report counts drawn directly from the histogram ``true_counts``.

    Users with value ``v`` keep it with ``Bin(c_v, p)``; the rest are spread multinomially and
    uniformly over the other ``d − 1`` values (sequential conditional binomials), exactly the
    distribution of ``bincount(perturb_grr_batch(...))``.
    """
    c = np.asarray(true_counts, dtype=np.int64)
    d = c.size
    p, _ = grr_probabilities(epsilon, d)
    source = as_source(rng)
    kept = binomial(c, p, source)
    remaining = c - kept  # per source value v, users to spread over the other d - 1 cells
    out = kept.copy()
    values = np.arange(d)
    # Targets for source v: the other values in increasing order; step t handles the t-th one.
    for t in range(d - 1):
        target = np.where(t < values, t, t + 1)
        cells_left = d - 1 - t
        x = binomial(remaining, 1.0 / cells_left, source) if cells_left > 1 else remaining.copy()
        remaining = remaining - x
        np.add.at(out, target, x)
    return out


def estimate_frequencies(
    true_counts: np.ndarray | None,
    values: np.ndarray | None,
    domain_size: int,
    epsilon: float,
    oracle: Oracle,
    rng: RngLike = None,
    sampling: Sampling = "per_user",
) -> tuple[np.ndarray, int]:
    """Run one frequency oracle over a group of users; return ``(estimates, n)``.

    ``sampling="per_user"`` perturbs every value in ``values`` with the client code and
    aggregates the reports; ``"aggregate"`` draws the server counts from ``true_counts`` (the
    group's histogram) with the exactly equivalent simulated sampling.
    """
    if oracle not in ORACLES:
        raise UsageError(f"FrequencyOracle: oracle must be one of {', '.join(ORACLES)}, got {oracle!r}")
    if sampling == "per_user":
        vals = _check_values("FrequencyOracle", values, domain_size)
        n = vals.size
        if oracle == "oue":
            p, q = oue_probabilities(epsilon)
            counts = oue_support_counts(vals, domain_size, epsilon, rng)
        else:
            p, q = grr_probabilities(epsilon, domain_size)
            counts = np.bincount(perturb_grr_batch(vals, domain_size, epsilon, rng), minlength=domain_size)
    elif sampling == "aggregate":
        hist = np.asarray(true_counts, dtype=np.int64)
        n = int(hist.sum())
        if oracle == "oue":
            p, q = oue_probabilities(epsilon)
            counts = simulate_oue_support(hist, epsilon, rng)
        else:
            p, q = grr_probabilities(epsilon, domain_size)
            counts = simulate_grr_counts(hist, epsilon, rng)
    else:
        raise UsageError(f"FrequencyOracle: sampling must be per_user or aggregate, got {sampling!r}")
    return estimate_from_counts(counts, n, p, q), n
