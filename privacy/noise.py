"""Noise samplers for the privacy mechanisms.

Every sampler takes its randomness from a :class:`~privacy.randomness.RandomSource` (the ``rng``
argument is normalised by :func:`~privacy.randomness.as_source`: ``None`` means the operating
system's secure generator, a numpy ``Generator`` or an ``int`` seed a reproducible, **non-private**
source for tests). Nothing here calls numpy's distribution methods or the :mod:`random` module: the
only primitives used are ``source.bits(n)`` (uniform 64-bit words) and ``source.randbelow(m)``.

Two families of samplers:

* **Vectorised, floating point** (:func:`uniform01`, :func:`geometric_failures`,
  :func:`discrete_laplace`, :func:`discrete_laplace_elementwise`, :func:`laplace`):
  inverse-transform sampling from 53-bit uniforms.
  Their distributions are exact up to the 2**-53 resolution of the uniforms (so the tails are
  truncated where the survival function drops below about 2**-53). :func:`discrete_laplace`
  returns integers, which removes the low-order-bit side channel of floating-point Laplace noise
  (Mironov 2012); :func:`discrete_laplace_elementwise` is the same sampler with one scale per
  output element (heteroscedastic noise, e.g. one budget per tree node, docs/ALGORITHMS.md §9);
  :func:`laplace` itself is *not* hardened against that attack.
* **Exact** (:func:`discrete_gaussian`): the rational-arithmetic rejection sampler of Canonne,
  Kamath and Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020), using only
  ``source.randbelow`` and integer arithmetic, so its output distribution is exactly the discrete
  Gaussian.

The helpers :func:`discrete_laplace_pmf` and :func:`discrete_gaussian_pmf` give the normalised
probability mass functions (numpy, floating point) for tests and accounting, and
:func:`discrete_laplace_variance` the exact variance of the discrete Laplace.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from privacy.randomness import RandomSource, as_source
from sketches.errors import UsageError

__all__ = [
    "uniform01",
    "geometric_failures",
    "discrete_laplace",
    "discrete_laplace_elementwise",
    "discrete_laplace_variance",
    "laplace",
    "discrete_gaussian",
    "discrete_laplace_pmf",
    "discrete_gaussian_pmf",
    "binomial",
]

RngLike = RandomSource | np.random.Generator | int | None
SizeLike = int | tuple[int, ...]
ArrayLike = float | Sequence[float] | np.ndarray

_TWO_POW_MINUS_53 = 2.0**-53
# Largest value of -log1p(-u) for u = 1 - 2**-53, the largest output of uniform01.
_MAX_EXPONENTIAL = -math.log1p(-(1.0 - _TWO_POW_MINUS_53))
_INT64_SAFE = float(2**62)


# --------------------------------------------------------------------------------------------
# Argument handling
# --------------------------------------------------------------------------------------------


def _shape(size: SizeLike, where: str) -> tuple[tuple[int, ...], int]:
    """Normalise ``size`` (an ``int`` or a tuple of ``int``) to ``(shape, number of elements)``."""
    if isinstance(size, (bool, np.bool_)):
        raise TypeError(f"{where}: size must be an int or a tuple of ints, got {size!r}")
    if isinstance(size, numbers.Integral):
        shape: tuple[int, ...] = (int(size),)
    elif isinstance(size, tuple):

        def is_int(s: object) -> bool:
            return isinstance(s, numbers.Integral) and not isinstance(s, (bool, np.bool_))

        if not all(is_int(s) for s in size):
            raise TypeError(f"{where}: size must be an int or a tuple of ints, got {size!r}")
        shape = tuple(int(s) for s in size)
    else:
        raise TypeError(f"{where}: size must be an int or a tuple of ints, got {size!r}")
    if any(s < 0 for s in shape):
        raise UsageError(f"{where}: size must be non-negative, got {size!r}")
    return shape, math.prod(shape)


def _positive_finite_array(values: object, name: str, where: str) -> np.ndarray:
    """Return ``values`` as a float64 array, raising ``ValueError`` unless all are finite reals > 0."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "iuf":  # rejects bool, complex, object and string arrays
        raise UsageError(f"{where}: {name} must be finite numbers > 0, got an array of dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if arr.size and not (np.all(np.isfinite(arr)) and np.all(arr > 0.0)):
        raise UsageError(f"{where}: {name} must be finite numbers > 0 (some are not)")
    return arr


def _positive_finite(value: object, name: str, where: str) -> float:
    """Return ``value`` as a float, raising ``ValueError`` unless it is a finite real > 0."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise UsageError(f"{where}: {name} must be a finite number > 0, got {value!r}")
    as_float = float(value)
    if not math.isfinite(as_float) or not as_float > 0.0:
        raise UsageError(f"{where}: {name} must be a finite number > 0, got {value!r}")
    return as_float


# --------------------------------------------------------------------------------------------
# Vectorised floating-point samplers
# --------------------------------------------------------------------------------------------


def uniform01(source: RngLike, n: int) -> np.ndarray:
    """Return ``n`` iid Uniform[0, 1) ``float64`` values.

    Each value is ``w >> 11`` scaled by ``2**-53`` for a word ``w`` of ``source.bits(n)``, i.e. it
    is uniform on the grid ``{0, 2**-53, ..., 1 - 2**-53}`` (the top 53 bits of each word).
    ``source`` is a :class:`RandomSource` (anything :func:`as_source` accepts also works).
    """
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
        raise UsageError(f"uniform01: n must be an int >= 0, got {n!r}")
    words = as_source(source).bits(int(n))
    return (words >> np.uint64(11)).astype(np.float64) * _TWO_POW_MINUS_53


def _geometric_from_uniforms(u: np.ndarray, log1m_p: float | np.ndarray) -> np.ndarray:
    """Inverse transform ``floor(log1p(-u) / log1p(-p))`` given ``log1m_p = log1p(-p) < 0``."""
    return np.floor(np.log1p(-u) / log1m_p).astype(np.int64)


def _check_geometric_range(log1m_p: float, where: str, detail: str) -> None:
    # The largest possible output is _MAX_EXPONENTIAL / -log1p(-p); keep it far inside int64.
    if _MAX_EXPONENTIAL / -log1m_p >= _INT64_SAFE:
        raise UsageError(f"{where}: {detail} is too extreme, samples would overflow int64")


def geometric_failures(p: float, size: SizeLike, rng: RngLike = None) -> np.ndarray:
    """Sample the number of failures before the first success of Bernoulli(``p``) trials.

    Distribution: ``P(K = k) = (1 - p)**k * p`` for ``k = 0, 1, 2, ...`` (mean ``(1 - p) / p``).

    Parameters:
        p: success probability, ``0 < p <= 1`` (``p = 1`` gives all zeros).
        size: number of samples (``int``) or output shape (tuple of ``int``).
        rng: ``None`` (secure source), a numpy ``Generator`` / ``int`` seed (tests only) or a
            :class:`RandomSource`.

    Returns an ``np.int64`` array of shape ``size``, computed by inverse transform
    ``floor(log1p(-u) / log1p(-p))`` from 53-bit uniforms ``u`` (exact up to that resolution).
    """
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, numbers.Real):
        raise UsageError(f"geometric_failures: p must be a number with 0 < p <= 1, got {p!r}")
    p_f = float(p)
    if not (0.0 < p_f <= 1.0):  # also rejects NaN
        raise UsageError(f"geometric_failures: p must satisfy 0 < p <= 1, got {p!r}")
    shape, n = _shape(size, "geometric_failures")
    source = as_source(rng)
    if p_f == 1.0:
        return np.zeros(shape, dtype=np.int64)
    log1m_p = math.log1p(-p_f)
    _check_geometric_range(log1m_p, "geometric_failures", f"p={p!r}")
    return _geometric_from_uniforms(uniform01(source, n), log1m_p).reshape(shape)


def discrete_laplace(scale: float, size: SizeLike, rng: RngLike = None) -> np.ndarray:
    """Sample the discrete Laplace (two-sided geometric) distribution.

    Distribution: ``P(K = k) = tanh(1 / (2 * scale)) * exp(-|k| / scale)`` for every integer ``k``,
    i.e. ``P(k)`` proportional to ``exp(-|k| / scale)``; symmetric, variance
    ``2 q / (1 - q)**2`` with ``q = exp(-1 / scale)``.

    Parameters:
        scale: finite ``scale > 0`` (for ``epsilon``-DP of an integer query with sensitivity
            ``Delta`` use ``scale = Delta / epsilon``).
        size: number of samples (``int``) or output shape (tuple of ``int``).
        rng: ``None`` (secure source), a numpy ``Generator`` / ``int`` seed (tests only) or a
            :class:`RandomSource`.

    Returns an ``np.int64`` array: the difference of two iid :func:`geometric_failures` samples
    with ``p = 1 - exp(-1 / scale)`` (computed as ``-expm1(-1 / scale)``).
    """
    scale_f = _positive_finite(scale, "scale", "discrete_laplace")
    shape, n = _shape(size, "discrete_laplace")
    source = as_source(rng)
    inv = 1.0 / scale_f
    # log1p(-p) with p = 1 - exp(-1/scale) is exactly -1/scale: no cancellation at large scales.
    if math.isinf(inv) or -math.expm1(-inv) == 1.0:
        # P(K != 0) = 2 exp(-1/scale) / (1 + exp(-1/scale)) underflows double precision.
        return np.zeros(shape, dtype=np.int64)
    log1m_p = -inv
    _check_geometric_range(log1m_p, "discrete_laplace", f"scale={scale!r}")
    g = _geometric_from_uniforms(uniform01(source, 2 * n), log1m_p)
    return (g[:n] - g[n:]).reshape(shape)


def discrete_laplace_elementwise(scales: ArrayLike, rng: RngLike = None) -> np.ndarray:
    """Sample the discrete Laplace distribution with one scale per output element.

    ``out[i]`` has ``P(K = k) = tanh(1 / (2 * scales[i])) * exp(-|k| / scales[i])`` (the
    distribution of :func:`discrete_laplace` at ``scales[i]``), independently for every element.
    For ``epsilon_i``-DP of an integer query with sensitivity 1 in element ``i``, pass
    ``scales[i] = 1 / epsilon_i``.

    Parameters:
        scales: array-like of finite ``scale > 0`` (any shape; use ``np.broadcast_to`` for a
            batch of independent draws sharing one scale vector).
        rng: ``None`` (secure source), a numpy ``Generator`` / ``int`` seed (tests only) or a
            :class:`RandomSource`.

    Returns an ``np.int64`` array of the shape of ``scales``. Same arithmetic and same use of the
    uniforms as :func:`discrete_laplace` (``2 * size`` 53-bit uniforms, the first half for the
    positive geometric, the second for the negative one), so with a constant scale it returns
    exactly what :func:`discrete_laplace` returns for the same seed. Elements whose non-zero mass
    underflows double precision are 0 (their uniforms are still drawn).
    """
    where = "discrete_laplace_elementwise"
    scale_arr = _positive_finite_array(scales, "scales", where)
    shape, n = scale_arr.shape, scale_arr.size
    source = as_source(rng)
    with np.errstate(over="ignore", divide="ignore"):
        inv = 1.0 / scale_arr.ravel()
    zero = np.isinf(inv) | (-np.expm1(-inv) == 1.0)
    log1m_p = np.where(zero, -1.0, -inv)  # -1.0 is a placeholder for the zeroed elements
    if n and not zero.all():
        _check_geometric_range(float(log1m_p[~zero].max()), where, f"scale={float(scale_arr.max())!r}")
    u = uniform01(source, 2 * n)
    g_pos = _geometric_from_uniforms(u[:n], log1m_p)
    g_neg = _geometric_from_uniforms(u[n:], log1m_p)
    return np.where(zero, 0, g_pos - g_neg).astype(np.int64).reshape(shape)


def discrete_laplace_variance(scale: float | np.ndarray) -> float | np.ndarray:
    """Exact variance of the discrete Laplace with ``scale`` (see :func:`discrete_laplace`).

    ``Var = 2 q / (1 - q)**2`` with ``q = exp(-1 / scale)``, computed as the equal and
    cancellation-free ``1 / (2 * sinh(1 / (2 * scale))**2)``. It is below the continuous Laplace's
    ``2 * scale**2``: ``2 * scale**2 - 1/6 + O(scale**-2)``. A float for a scalar ``scale``, else
    an array of its shape; every scale must be finite and > 0.
    """
    scale_arr = _positive_finite_array(scale, "scale", "discrete_laplace_variance")
    with np.errstate(over="ignore"):
        var = 1.0 / (2.0 * np.sinh(0.5 / scale_arr) ** 2)
    return float(var) if var.ndim == 0 else var


def laplace(scale: float, size: SizeLike, rng: RngLike = None) -> np.ndarray:
    """Sample the continuous Laplace distribution with mean 0.

    Density: ``f(x) = exp(-|x| / scale) / (2 * scale)``; variance ``2 * scale**2``.

    Parameters:
        scale: finite ``scale > 0``.
        size: number of samples (``int``) or output shape (tuple of ``int``).
        rng: ``None`` (secure source), a numpy ``Generator`` / ``int`` seed (tests only) or a
            :class:`RandomSource`.

    Returns a ``float64`` array ``scale * (E1 - E2)`` with ``E = -log1p(-u)`` standard
    exponentials from 53-bit uniforms. Floating-point Laplace noise leaks through its low-order
    bits (Mironov 2012); prefer :func:`discrete_laplace` for released integer statistics.
    """
    scale_f = _positive_finite(scale, "scale", "laplace")
    shape, n = _shape(size, "laplace")
    source = as_source(rng)
    e = -np.log1p(-uniform01(source, 2 * n))
    return (scale_f * (e[:n] - e[n:])).reshape(shape)


# --------------------------------------------------------------------------------------------
# Exact discrete Gaussian (Canonne, Kamath, Steinke 2020)
# --------------------------------------------------------------------------------------------


def _exact_sigma2(sigma2: object) -> Fraction:
    """Convert ``sigma2`` to a positive :class:`Fraction` (see :func:`discrete_gaussian`)."""
    where = "discrete_gaussian"
    if isinstance(sigma2, (bool, np.bool_)):
        raise UsageError(f"{where}: sigma2 must be a finite number > 0, got {sigma2!r}")
    if isinstance(sigma2, numbers.Integral):
        value = Fraction(int(sigma2))
    elif isinstance(sigma2, Fraction):
        value = sigma2
    elif isinstance(sigma2, numbers.Rational):
        value = Fraction(int(sigma2.numerator), int(sigma2.denominator))
    elif isinstance(sigma2, numbers.Real):
        as_float = float(sigma2)
        if not math.isfinite(as_float):
            raise UsageError(f"{where}: sigma2 must be a finite number > 0, got {sigma2!r}")
        exact = Fraction(as_float)
        value = exact.limit_denominator(10**6)
        # Keep the short fraction only if it is within 2**-40 relative of the float (so 0.1 means
        # 1/10, 2.5 means 5/2); otherwise (e.g. very small sigma2) use the float's exact value.
        if value <= 0 or abs(value - exact) > exact * Fraction(1, 2**40):
            value = exact
    else:
        raise UsageError(f"{where}: sigma2 must be a finite number > 0, got {sigma2!r}")
    if value <= 0:
        raise UsageError(f"{where}: sigma2 must be a finite number > 0, got {sigma2!r}")
    return value


def _make_bernoulli_exp(randbelow: Callable[[int], int]) -> Callable[[int, int], bool]:
    """Return ``bern_exp(num, den)``: a Bernoulli(exp(-num/den)) sample, ``num >= 0``, ``den >= 1``.

    CKS Algorithm 1: for ``gamma = num/den <= 1`` draw ``A_k ~ Bernoulli(gamma / k)`` for
    ``k = 1, 2, ...`` until the first ``A_k = 0`` and return whether that ``k`` is odd; for
    ``gamma > 1`` require ``floor(gamma)`` successes of Bernoulli(exp(-1)) and one of
    Bernoulli(exp(-(gamma - floor(gamma)))). Each Bernoulli(a/b) is ``randbelow(b) < a``.
    """

    def bern_exp_le1(num: int, den: int) -> bool:
        # gamma = num/den in [0, 1].
        k = 1
        while True:
            limit = den * k
            # A_k = 1 with probability num / (den * k); certain if num >= den * k (gamma = k = 1).
            if num < limit and randbelow(limit) >= num:
                return (k & 1) == 1
            k += 1

    def bern_exp(num: int, den: int) -> bool:
        if num <= den:
            return bern_exp_le1(num, den)
        whole, rest = divmod(num, den)
        for _ in range(whole):
            if not bern_exp_le1(1, 1):
                return False
        return bern_exp_le1(rest, den)

    return bern_exp


def _make_discrete_laplace_int(
    randbelow: Callable[[int], int], bern_exp: Callable[[int, int], bool]
) -> Callable[[int], int]:
    """Return ``dlap(t)``: a discrete Laplace sample with integer scale ``t >= 1`` (CKS Alg. 2).

    ``P(Z = z)`` proportional to ``exp(-|z| / t)``. Loop: ``U ~ Uniform{0..t-1}``, accept with
    probability ``exp(-U/t)``; ``V`` = number of Bernoulli(exp(-1)) successes before a failure;
    ``X = U + t V``; ``B ~ Bernoulli(1/2)``; reject ``B = 1, X = 0``; return ``(1 - 2B) X``.
    """

    def dlap(t: int) -> int:
        while True:
            u = randbelow(t) if t > 1 else 0
            if u and not bern_exp(u, t):
                continue
            v = 0
            while bern_exp(1, 1):
                v += 1
            x = u + t * v
            negative = randbelow(2) == 1
            if negative:
                if x == 0:
                    continue
                return -x
            return x

    return dlap


def _discrete_gaussian_python(sigma2: Fraction, count: int, source: RandomSource) -> list[int]:
    """``count`` exact discrete Gaussian samples as Python ints (CKS Algorithm 3).

    With ``sigma2 = n/d`` and ``t = floor(sqrt(sigma2)) + 1``: draw ``Y`` discrete Laplace with
    scale ``t`` and accept with probability ``exp(-(|Y| - sigma2/t)**2 / (2 sigma2))``; the
    exponent equals ``(|Y| d t - n)**2 / (2 n d t**2)``, kept in integers.
    """
    randbelow = source.randbelow
    bern_exp = _make_bernoulli_exp(randbelow)
    dlap = _make_discrete_laplace_int(randbelow, bern_exp)
    n, d = sigma2.numerator, sigma2.denominator
    t = math.isqrt(n * d) // d + 1  # floor(sqrt(n/d)) + 1, exactly
    dt = d * t
    den = 2 * n * d * t * t
    out: list[int] = []
    append = out.append
    while len(out) < count:
        y = dlap(t)
        diff = abs(y) * dt - n
        if bern_exp(diff * diff, den):
            append(y)
    return out


def discrete_gaussian(sigma2: int | float | Fraction, size: SizeLike, rng: RngLike = None) -> np.ndarray:
    """Sample the discrete Gaussian distribution exactly (Canonne, Kamath, Steinke 2020).

    Distribution: ``P(K = k) = exp(-k**2 / (2 * sigma2)) / Z`` for every integer ``k``, with
    ``Z = sum_j exp(-j**2 / (2 * sigma2))``; the variance is at most ``sigma2``.

    Parameters:
        sigma2: the scale parameter ``sigma**2 > 0`` (for ``rho``-zCDP of a query with
            sensitivity ``Delta`` use ``sigma2 = Delta**2 / (2 * rho)``). An ``int`` or
            :class:`fractions.Fraction` is used exactly. A ``float`` is converted with
            ``Fraction(sigma2).limit_denominator(10**6)`` when that is within ``2**-40`` relative
            of the float (so ``2.5 -> 5/2``, ``0.1 -> 1/10``), and otherwise with its exact binary
            value ``Fraction(sigma2)``.
        size: number of samples (``int``) or output shape (tuple of ``int``).
        rng: ``None`` (secure source), a numpy ``Generator`` / ``int`` seed (tests only) or a
            :class:`RandomSource`.

    Returns an ``np.int64`` array. The sampler is the rejection sampler of CKS Algorithms 1-3
    (Bernoulli(exp(-gamma)) for rational ``gamma``, discrete Laplace with integer scale
    ``floor(sigma) + 1``, then rejection) using only integer arithmetic and
    ``source.randbelow``, so the output distribution is exact (no floating point). It is a
    Python loop: use it for moderate sizes.
    """
    value = _exact_sigma2(sigma2)
    shape, count = _shape(size, "discrete_gaussian")
    source = as_source(rng)
    samples = _discrete_gaussian_python(value, count, source)
    return np.array(samples, dtype=np.int64).reshape(shape)


# --------------------------------------------------------------------------------------------
# Probability mass functions (floating point; for tests and accounting)
# --------------------------------------------------------------------------------------------


def discrete_laplace_pmf(k: int | np.ndarray, scale: float) -> np.ndarray:
    """Return ``P(K = k)`` for the discrete Laplace with ``scale`` (see :func:`discrete_laplace`).

    ``P(k) = tanh(1 / (2 * scale)) * exp(-|k| / scale)``, normalised over all integers.
    """
    scale_f = _positive_finite(scale, "scale", "discrete_laplace_pmf")
    k_arr = np.abs(np.asarray(k, dtype=np.float64))
    return math.tanh(0.5 / scale_f) * np.exp(-k_arr / scale_f)


def discrete_gaussian_pmf(k: int | np.ndarray, sigma2: int | float | Fraction) -> np.ndarray:
    """Return ``P(K = k)`` for the discrete Gaussian with ``sigma2`` (as :func:`discrete_gaussian`).

    ``P(k) = exp(-k**2 / (2 * sigma2)) / Z``; ``Z`` is summed numerically over
    ``|j| <= 40 * sigma + 40`` (the omitted tail is below ``1e-300``).
    """
    s2 = float(_exact_sigma2(sigma2))
    sigma = math.sqrt(s2)
    half = int(math.ceil(40.0 * sigma)) + 40
    j = np.arange(half, 0, -1, dtype=np.float64)  # smallest terms first for an accurate sum
    z = 1.0 + 2.0 * float(np.sum(np.exp(-(j * j) / (2.0 * s2))))
    k_arr = np.asarray(k, dtype=np.float64)
    return np.exp(-(k_arr * k_arr) / (2.0 * s2)) / z


# --------------------------------------------------------------------------------------------
# Binomial (vectorised, for simulated aggregate sampling of local-DP frequency oracles)
# --------------------------------------------------------------------------------------------


def binomial(trials: int | np.ndarray, p: float | np.ndarray, rng: RngLike = None) -> np.ndarray:
    """Sample ``Binomial(trials_i, p_i)`` element-wise (``trials`` and ``p`` broadcast together).

    Distribution: ``P(K = k) = C(n, k) p**k (1 - p)**(n - k)`` for ``k = 0..n``.

    Parameters:
        trials: non-negative integer(s) ``n``.
        p: success probabilities with ``0 <= p <= 1``.
        rng: ``None`` (secure source), a numpy ``Generator`` / ``int`` seed (tests only) or a
            :class:`RandomSource`.

    Returns an ``np.int64`` array of the broadcast shape, by inverse transform of one 53-bit
    uniform per sample (:func:`uniform01`) over the window ``mean ± (12 sd + 40)`` clipped to
    ``[0, n]`` (one window CDF per distinct ``(n, p)`` pair): the pmf on the window is built by the
    exact ratio recurrence
    ``P(k+1)/P(k) = (n - k) p / ((k + 1)(1 - p))`` and normalised over the window. The mass
    outside the window is below ``1e-25`` (Bernstein's inequality), far under the ``2**-53``
    resolution of the uniforms, so the distribution is exact up to that resolution.
    """
    n_arr = np.asarray(trials)
    p_arr = np.asarray(p, dtype=np.float64)
    if n_arr.dtype.kind not in "iu" or (n_arr.size and int(n_arr.min()) < 0):
        raise UsageError("binomial: trials must be non-negative integers")
    if p_arr.size and (not np.all(np.isfinite(p_arr)) or p_arr.min() < 0.0 or p_arr.max() > 1.0):
        raise UsageError("binomial: p must satisfy 0 <= p <= 1")
    n_b, p_b = np.broadcast_arrays(n_arr.astype(np.int64), p_arr)
    shape = n_b.shape
    n_f, p_f = n_b.ravel(), p_b.ravel()
    u = uniform01(as_source(rng), n_f.size)
    out = np.where(p_f >= 1.0, n_f, 0).astype(np.int64)
    todo = np.flatnonzero((n_f > 0) & (p_f > 0.0) & (p_f < 1.0))
    if todo.size == 0:
        return out.reshape(shape)
    # Samples sharing (n, p) share one window CDF: build it once per distinct pair.
    pairs, inverse = np.unique(np.column_stack([n_f[todo].astype(np.float64), p_f[todo]]), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    n_t, p_t = pairs[:, 0], pairs[:, 1]
    sd = np.sqrt(n_t * p_t * (1.0 - p_t))
    lo = np.maximum(0.0, np.floor(n_t * p_t - 12.0 * sd - 40.0))
    hi = np.minimum(n_t, np.ceil(n_t * p_t + 12.0 * sd + 40.0))
    width = (hi - lo + 1).astype(np.int64)
    cdfs: list[np.ndarray] = [np.empty(0)] * pairs.shape[0]
    # Build the CDFs in chunks of similar width to bound memory (about 4e6 cells per chunk).
    order = np.argsort(width, kind="stable")
    start = 0
    while start < order.size:
        guess = max(1, 4_000_000 // int(width[order[start]]))
        w_max = int(width[order[min(order.size, start + guess) - 1]])
        sel = order[start : start + max(1, 4_000_000 // w_max)]
        w = int(width[sel].max())
        k = lo[sel, None] + np.arange(w - 1, dtype=np.float64)[None, :]
        log_ratio = (
            np.log(np.maximum(n_t[sel, None] - k, 1.0))
            - np.log(k + 1.0)
            + (np.log(p_t[sel]) - np.log1p(-p_t[sel]))[:, None]
        )
        log_ratio = np.where(k < hi[sel, None], log_ratio, -np.inf)
        log_pmf = np.concatenate([np.zeros((sel.size, 1)), np.cumsum(log_ratio, axis=1)], axis=1)
        log_pmf -= log_pmf.max(axis=1, keepdims=True)
        cdf = np.cumsum(np.exp(log_pmf), axis=1)
        cdf /= cdf[:, -1:]
        for row, r in enumerate(sel):
            cdfs[r] = cdf[row, : width[r]]
        start += sel.size
    by_pair = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[by_pair], np.arange(pairs.shape[0] + 1))
    u_todo = u[todo]
    for r in range(pairs.shape[0]):
        members = by_pair[bounds[r] : bounds[r + 1]]
        index = np.searchsorted(cdfs[r], u_todo[members], side="right")  # #{k : F(k) <= u}
        out[todo[members]] = (lo[r] + np.minimum(index, width[r] - 1)).astype(np.int64)
    return out.reshape(shape)
