"""Noise samplers for the privacy mechanisms.

Every sampler takes its randomness from a :class:`~dphhh.privacy.randomness.RandomSource` (the ``rng``
argument is normalised by :func:`~dphhh.privacy.randomness.as_source`: ``None`` means the operating
system's secure generator, a numpy ``Generator`` or an ``int`` seed a reproducible, **non-private**
source for tests). Nothing here calls numpy's distribution methods or the :mod:`random` module: the
only primitives used are ``source.bits(n)`` (uniform 64-bit words) and ``source.randbelow(m)``.

Two families of samplers:

* **Vectorised, floating point** (:func:`uniform01`, :func:`geometric_failures`, :func:`laplace`):
  inverse-transform sampling from 53-bit uniforms. Their distributions are exact up to the 2**-53
  resolution of the uniforms (so the tails are truncated where the survival function drops below
  about 2**-53). :func:`laplace` is *not* hardened against the low-order-bit attack on
  floating-point Laplace noise (Mironov 2012).
* **Exact** (:func:`discrete_laplace`, :func:`discrete_laplace_elementwise`,
  :func:`discrete_gaussian`): integer arithmetic only, so the output law is exactly the stated
  one at every parameter (docs/ALGORITHMS.md §3 "Integer counts"). The discrete Laplace with
  scale ``b = Fraction(scale)`` is the difference of two geometrics, each inverted from uniform
  64-bit words (``source.bits``) against exact integer thresholds ``floor(2**64 P(G >= g))``
  computed once per scale (``_Plan``, cached); a word that ties a threshold is refined by further
  words until decided, so no tail is cut off and no float decides an output (see the comment
  above ``_LN2_UP``). Integer outputs remove the low-order-bit side channel of floating-point
  noise; :func:`discrete_laplace_elementwise` takes one scale per element (heteroscedastic noise,
  e.g. one budget per tree node, docs/ALGORITHMS.md §9) and samples rarely shared scales with a
  vectorised form of the exact discrete Laplace sampler of Canonne, Kamath and Steinke, "The
  Discrete Gaussian for Differential Privacy" (NeurIPS 2020, Algorithm 2). :func:`discrete_gaussian`
  is their rejection sampler (Algorithms 1-3), using only ``source.randbelow``.

The replaced floating-point discrete Laplace (inversion from 53-bit uniforms, within about
``5e-16 * scale`` total variation per draw, nothing above ``36.7 * scale``) is kept as
``_discrete_laplace_inversion`` for the benchmark (benchmarks/noise_sampler.py) and the tests only.

The helpers :func:`discrete_laplace_pmf` and :func:`discrete_gaussian_pmf` give the normalised
probability mass functions (numpy, floating point) for tests and accounting, and
:func:`discrete_laplace_variance` the exact variance of the discrete Laplace.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from dphhh.privacy.randomness import RandomSource, as_source
from dphhh.sketches.errors import UsageError

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
    """Sample the discrete Laplace (two-sided geometric) distribution exactly.

    Distribution: ``P(K = k) = (1 - r) / (1 + r) * r**|k|`` for every integer ``k``, with
    ``r = exp(-1 / b)`` and ``b = Fraction(scale)`` the exact rational value of the float ``scale``
    (equivalently ``tanh(1 / (2 b)) * exp(-|k| / b)``); symmetric, variance ``2 r / (1 - r)**2``.

    Parameters:
        scale: finite ``scale > 0`` (for ``epsilon``-DP of an integer query with sensitivity
            ``Delta`` use ``scale = Delta / epsilon``), at most about ``1.25e17`` (above that
            samples could overflow int64: ``ValueError``).
        size: number of samples (``int``) or output shape (tuple of ``int``).
        rng: ``None`` (secure source), a numpy ``Generator`` / ``int`` seed (tests only) or a
            :class:`RandomSource`.

    Returns an ``np.int64`` array whose law is *exactly* DLap(``b``) at every scale (no float
    rounding, no truncated tail; docs/ALGORITHMS.md §3 "Integer counts"): the difference of two
    independent geometrics, each inverted from uniform 64-bit words (``source.bits`` only)
    against exact integer thresholds ``floor(2**64 * P(G >= g))`` computed once per scale in
    integer arithmetic, with the rare words that tie a threshold (probability about ``2**-52``
    per draw) refined by further words until the comparison is decided. About two words per
    sample for ``scale`` up to about 92, a few more above. A sample outside int64 raises
    ``OverflowError`` instead of being returned; its probability is below ``1e-30`` per draw
    even at the largest accepted scale (``exp(-2**63 / b)``).
    """
    scale_f = _positive_finite(scale, "scale", "discrete_laplace")
    shape, n = _shape(size, "discrete_laplace")
    source = as_source(rng)
    _check_geometric_range(-1.0 / scale_f, "discrete_laplace", f"scale={scale!r}")
    if n == 0:
        return np.zeros(shape, dtype=np.int64)
    return _sample_plan(_plan(scale_f), n, source, "discrete_laplace").reshape(shape)


def discrete_laplace_elementwise(scales: ArrayLike, rng: RngLike = None) -> np.ndarray:
    """Sample the discrete Laplace distribution exactly with one scale per output element.

    ``out[i]`` has exactly the law of :func:`discrete_laplace` at ``scales[i]``
    (``P(K = k) = (1 - r) / (1 + r) * r**|k|``, ``r = exp(-1 / Fraction(scales[i]))``),
    independently for every element. For ``epsilon_i``-DP of an integer query with sensitivity 1
    in element ``i``, pass ``scales[i] = 1 / epsilon_i``.

    Parameters:
        scales: array-like of finite ``scale > 0`` (any shape; use ``np.broadcast_to`` for a
            batch of independent draws sharing one scale vector), each at most about ``1.25e17``.
        rng: ``None`` (secure source), a numpy ``Generator`` / ``int`` seed (tests only) or a
            :class:`RandomSource`.

    Returns an ``np.int64`` array of the shape of ``scales``, exact as stated in
    docs/ALGORITHMS.md §3 "Integer counts". A scale shared by at least 4096 elements (or by all
    of them) is sampled as :func:`discrete_laplace` does (so with a constant scale the output
    equals :func:`discrete_laplace`'s for the same seed); the other elements by a vectorised form of
    Canonne, Kamath and Steinke's exact discrete Laplace sampler (NeurIPS 2020, Algorithm 2) with
    each element's own rational scale, which needs no per-scale table. Both use integer
    arithmetic on ``source.bits`` words only. ``OverflowError`` as in :func:`discrete_laplace`.
    """
    where = "discrete_laplace_elementwise"
    original = np.asarray(scales)
    scale_arr = _positive_finite_array(original, "scales", where)
    shape, n = scale_arr.shape, scale_arr.size
    source = as_source(rng)
    if n == 0:
        return np.zeros(shape, dtype=np.int64)
    flat = scale_arr.ravel()
    top = float(flat.max())
    _check_geometric_range(-1.0 / top, where, f"scale={top!r}")
    if np.all(flat == flat[0]):
        return _sample_plan(_plan(float(flat[0])), n, source, where).reshape(shape)
    # Distinct scales, found on the non-broadcast part of the input (stride-0 axes repeat it).
    core_index = tuple(
        slice(0, 1) if stride == 0 and extent > 1 else slice(None)
        for stride, extent in zip(original.strides, original.shape)
    )
    core = scale_arr[core_index]
    distinct, inverse = np.unique(core, return_inverse=True)
    inverse = np.broadcast_to(inverse.reshape(core.shape), shape).ravel()
    counts = np.bincount(inverse, minlength=distinct.size)
    out = np.empty(n, dtype=np.int64)
    tabled = np.flatnonzero(counts >= _GROUP_MIN)
    if tabled.size > 16:
        order = np.argsort(inverse, kind="stable")
        ends = np.cumsum(counts)
        members = [order[ends[j] - counts[j] : ends[j]] for j in tabled]
    else:
        members = [np.flatnonzero(inverse == j) for j in tabled]
    for j, idx in zip(tabled, members):
        out[idx] = _sample_plan(_plan(float(distinct[j])), idx.size, source, where)
    rest = np.flatnonzero(counts[inverse] < _GROUP_MIN)
    if rest.size:
        out[rest] = _sample_cks(flat[rest], source, where)
    return out.reshape(shape)


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
# Exact discrete Laplace (docs/ALGORITHMS.md §3 "Integer counts")
# --------------------------------------------------------------------------------------------
#
# Notation: b = Fraction(scale) = n/d exactly, x = 1/b = d/n, rho = exp(-x). DLap(b) is G1 - G2 for
# two independent geometrics with P(G >= g) = rho**g (difference of iid geometrics: P(G1 - G2 = k)
# = sum_j (1 - rho)**2 rho**(2j + |k|) = (1 - rho)/(1 + rho) rho**|k|). A geometric is sampled as
#
#     G = Q * 2**m + sum_i D_i * 2**s_i,
#
# the base-2**m digit split of a geometric (its digits are independent: P(G = g) = (1 - rho) rho**g
# factorises over them): Q ~ Geometric(P(Q >= q) = exp(-q 2**m x)) and each D_i is a geometric
# truncated to {0 .. 2**c_i - 1} with ratio exp(-2**s_i x) (m = 0, no D_i, for b up to about 92).
# Every part is inverted from one uniform u = 0.w1 w2 w3 ... (64-bit words): part = #{v >= 1 :
# u < F(v)} with F(v) = P(part >= v), decided by the first word against the exact integer table
# T_v = floor(2**64 F(v)) (w1 < T_v means u < F(v), w1 > T_v means u > F(v)). Only if w1 equals
# some T_v (probability about 2**-64 times the number of distinct T_v) is u refined with more
# words and compared with F(v) computed to matching precision: every F(v) is irrational
# (exp(-y) is transcendental for rational y != 0), so this ends with probability 1 and the part
# has exactly P(part >= v) = F(v). The tables are computed once per scale with integer interval
# arithmetic (_exp_neg_bounds), so no floating-point value decides any output.

_LN2_UP = Fraction(6932, 10000)  # > ln 2
_LUT_BITS = 16  # the first-level lookup is indexed by the top 16 bits of a word
_Q_TABLE_MAX = 4096  # at most this many thresholds for the geometric part Q (m = 0 up to b ~ 92)
_CHUNK_BITS_MAX = 10  # a truncated part has at most 2**10 values
_BLOCK = 1 << 17  # outputs per vectorised block (bounds the temporary arrays)
_GROUP_MIN = 4096  # discrete_laplace_elementwise: a scale shared by this many elements gets a table
_INT64_MAX = (1 << 63) - 1


def _exp_series_bounds(num: int, den: int, work: int) -> tuple[int, int]:
    """``(lo, hi)`` with ``lo <= 2**work * exp(num/den) <= hi`` for ``0 <= num/den <= 1``.

    Terms ``t_k = floor(t_(k-1) * num / (den * k))`` undershoot the true terms by at most ``k``
    each; the sum stops at the first zero term ``t_K`` (true term ``<= K``, true tail ``<= 2K``).
    """
    term = 1 << work
    total = 0
    k = 0
    while term:
        total += term
        k += 1
        term = term * num // (den * k)
    return total, total + k * k + 2 * k


def _exp_neg_bounds(num: int, den: int, prec: int) -> tuple[int, int]:
    """``(lo, hi)`` with ``lo <= 2**prec * exp(-num/den) <= hi`` (integers, ``num >= 0``,
    ``den >= 1``); ``hi - lo <= 3`` unless the value is below ``2**-prec`` (then ``(0, 1)``)."""
    one = 1 << prec
    if num == 0:
        return one, one
    if num * 10 > den * 7 * (prec + 2):  # num/den > 0.7 (prec + 2) > (prec + 2) ln 2
        return 0, 1
    whole, rest = divmod(num, den)
    work = prec + 64 + 2 * whole.bit_length()
    f_lo, f_hi = _exp_series_bounds(rest, den, work)  # exp(rest/den)
    if whole:
        e_lo, e_hi = _exp_series_bounds(1, 1, work)  # e
        p_lo, p_hi = 1 << work, 1 << work  # e**whole by square and multiply, rounded outwards
        bit = 1 << (whole.bit_length() - 1)
        while bit:
            p_lo, p_hi = (p_lo * p_lo) >> work, -((-p_hi * p_hi) >> work)
            if whole & bit:
                p_lo, p_hi = (p_lo * e_lo) >> work, -((-p_hi * e_hi) >> work)
            bit >>= 1
        f_lo, f_hi = (f_lo * p_lo) >> work, -((-f_hi * p_hi) >> work)
    scaled = 1 << (prec + work)
    return scaled // f_hi, -(-scaled // f_lo)


class _LazyUniform:
    """A uniform ``u`` in [0, 1) known to lie in ``[a, a + 1) / 2**k``; more words refine it."""

    def __init__(self, first_word: int, source: RandomSource) -> None:
        self.a, self.k, self.source = first_word, 64, source

    def refine(self) -> None:
        self.a = (self.a << 64) | int(self.source.bits(1)[0])
        self.k += 64

    def less_than(self, bounds: Callable[[int], tuple[int, int]]) -> bool:
        """Whether ``u < F`` for an irrational ``F`` given by ``bounds(prec) = (lo, hi)``,
        ``lo <= 2**prec F <= hi``; draws words until the comparison is decided."""
        while True:
            lo, hi = bounds(self.k + 16)
            if (self.a + 1) << 16 <= lo:
                return True
            if self.a << 16 >= hi:
                return False
            self.refine()


class _Inversion:
    """Exact inversion of one part of a geometric (see the comment above) from 64-bit words.

    The part takes values ``0, 1, ...`` with ``F(v) = P(part >= v) = exp(-v num/den)``
    (``size`` None) or values ``0 .. size - 1`` with ``F(v) = (exp(-v y) - exp(-size y)) /
    (1 - exp(-size y))``, ``y = num/den`` (a geometric truncated to ``size`` values).
    ``asc`` holds ``T_v = floor(2**64 F(v))`` in ascending order (``v`` from high to low; for the
    untruncated part only the ``T_v >= 1``, all further ``T_v`` are 0); ``lut[h]`` is the value
    for any word whose top 16 bits are ``h`` when no ``T_v`` has those top bits, else -1.
    """

    def __init__(self, num: int, den: int, size: int | None) -> None:
        self.num, self.den, self.size = num, den, size
        self.amp = 0  # extra bits that the normalisation 1 / (1 - exp(-size y)) costs
        if size is not None:
            a_hi = _exp_neg_bounds(size * num, den, 128)[1]
            self.amp = 130 - ((1 << 128) - a_hi).bit_length()
        self.asc = np.array(self._thresholds()[::-1], dtype=np.uint64)
        buckets = (self.asc >> np.uint64(64 - _LUT_BITS)).astype(np.intp)
        inside = np.bincount(buckets, minlength=1 << _LUT_BITS)
        lut = self.asc.size - np.cumsum(inside)  # thresholds in higher buckets = #{T_v > w}
        lut[inside > 0] = -1
        if size is None:
            lut[0] = -1  # w = 0 ties with the zero thresholds of the infinite tail
        self.lut = lut.astype(np.int16)

    def bounds(self, v: int, prec: int) -> tuple[int, int]:
        """``(lo, hi)`` with ``lo <= 2**prec F(v) <= hi``."""
        if self.size is None:
            return _exp_neg_bounds(v * self.num, self.den, prec)
        p = prec + self.amp + 4
        e_lo, e_hi = _exp_neg_bounds(v * self.num, self.den, p)
        a_lo, a_hi = _exp_neg_bounds(self.size * self.num, self.den, p)
        one = 1 << p
        return (max(e_lo - a_hi, 0) << prec) // (one - a_lo), -(-((e_hi - a_lo) << prec) // (one - a_hi))

    def _floor64(self, v: int) -> int:
        """``floor(2**64 F(v))`` exactly, with as much precision as it takes."""
        prec = 192
        while True:
            lo, hi = self.bounds(v, prec)
            if lo >> (prec - 64) == hi >> (prec - 64):
                return lo >> (prec - 64)
            prec *= 2

    def _thresholds(self) -> list[int]:
        """``[T_1, T_2, ...]`` by interval powers of ``exp(-y)`` at 128 + amp bits (each entry
        whose floor the interval does not settle is computed directly by ``_floor64``)."""
        p = 128 + self.amp
        r_lo, r_hi = _exp_neg_bounds(self.num, self.den, p)
        one, shift = 1 << p, p - 64
        if self.size is not None:
            a_lo, a_hi = _exp_neg_bounds(self.size * self.num, self.den, p)
            d_lo, d_hi = one - a_hi, one - a_lo
        out: list[int] = []
        p_lo = p_hi = one
        v = 0
        while True:
            v += 1
            if self.size is not None and v >= self.size:
                return out
            p_lo, p_hi = (p_lo * r_lo) >> p, -((-p_hi * r_hi) >> p)
            if self.size is None:
                if p_hi < 1 << shift:  # F(v) < 2**-64: T_v = 0 from here on
                    return out
                t_lo, t_hi = p_lo >> shift, p_hi >> shift
            else:
                t_lo, t_hi = (max(p_lo - a_hi, 0) << 64) // d_hi, ((p_hi - a_lo) << 64) // d_lo
            t = t_lo if t_lo == t_hi else self._floor64(v)
            if t == 0 and self.size is None:
                return out
            out.append(t)

    def lookup(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Values for ``words`` (int16) and the indices of the words that tie a threshold."""
        values = self.lut.take((words >> np.uint64(64 - _LUT_BITS)).astype(np.intp))
        slow = np.flatnonzero(values < 0)
        if not slow.size:
            return values, slow
        ws = words[slow]
        if self.asc.size:
            idx = np.searchsorted(self.asc, ws, side="right")  # #{T_v <= w}
            values[slow] = self.asc.size - idx
            tie = (idx > 0) & (self.asc[idx - 1] == ws)
        else:
            values[slow] = 0
            tie = np.zeros(ws.size, dtype=bool)
        if self.size is None:
            tie |= ws == 0
        return values, slow[tie]

    def resolve(self, word: int, source: RandomSource) -> int:
        """The exact value for a first word that ties a threshold: binary search for the largest
        ``v`` with ``u < F(v)``, refining ``u`` with further words as the comparisons need."""
        key = np.uint64(word)
        n_le = int(np.searchsorted(self.asc, key, side="right"))
        n_lt = int(np.searchsorted(self.asc, key, side="left"))
        lo = self.asc.size - n_le  # u < F(v) for every v <= lo (T_v > w)
        u = _LazyUniform(word, source)
        if self.size is None and word == 0:
            while u.a == 0:
                u.refine()
            # u >= 2**-(k - bitlen(a) + 1) >= exp(-v y) once v y >= (k - bitlen(a) + 1) ln 2.
            bound = (u.k - u.a.bit_length() + 1) * _LN2_UP * self.den / self.num
            hi = math.ceil(bound)
        else:
            hi = lo + (n_le - n_lt) + 1  # u > F(v) for v >= hi (T_v < w, or F(size) = 0)
        assert hi > lo
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if u.less_than(functools.partial(self.bounds, mid)):
                lo = mid
            else:
                hi = mid
        return lo


class _Plan:
    """How one scale's geometric is assembled: ``parts[0]`` is Q (shift m), the rest the D_i."""

    def __init__(self, scale: float) -> None:
        exact = Fraction(scale)
        n, d = exact.numerator, exact.denominator
        m = 0  # smallest m with Q's table (about 44.36 b / 2**m entries) within _Q_TABLE_MAX
        while (_Q_TABLE_MAX * 10000 * d) << m < 443700 * n:
            m += 1
        parts = [(_Inversion(d << m, n, None), m)]
        chunks = -(-m // _CHUNK_BITS_MAX)
        shift = 0
        for i in range(chunks):
            bits = (m - shift) // (chunks - i)
            parts.append((_Inversion(d << shift, n, 1 << bits), shift))
            shift += bits
        self.parts = tuple(parts)
        # Largest value of the vectorised path: far inside int64 for every accepted scale.
        self.max_fast = ((parts[0][0].asc.size + 1) << m) - 1
        assert self.max_fast <= _INT64_MAX


@functools.lru_cache(maxsize=128)
def _plan(scale: float) -> _Plan:
    return _Plan(scale)


@functools.lru_cache(maxsize=1)
def _unit_geometric() -> _Inversion:
    """The geometric with ``P(V >= v) = exp(-v)`` (the CKS sampler's V)."""
    return _Inversion(1, 1, None)


def _resolve_ties(
    part: _Inversion, words: np.ndarray, ties: np.ndarray, values: np.ndarray, source: RandomSource
) -> dict[int, int]:
    """Exact values (Python ints) of the tied words ``words[ties]`` (``values`` holds placeholders)."""
    return {int(i): part.resolve(int(words[i]), source) - int(values[i]) for i in ties}


def _finish(out: np.ndarray, g: np.ndarray, fixes: dict[int, int], where: str) -> None:
    """Apply exact corrections ``fixes`` (index into ``g`` = [G1, G2] -> amount to add) to the
    differences ``out = G1 - G2``, in Python integers, refusing results outside int64."""
    n = out.size
    for j in {i % n for i in fixes}:
        value = int(g[j]) + fixes.get(j, 0) - int(g[j + n]) - fixes.get(j + n, 0)
        if not -_INT64_MAX <= value <= _INT64_MAX:
            raise OverflowError(
                f"{where}: a sample fell outside the int64 range (probability below 1e-30 per draw "
                "at the largest accepted scale); nothing is returned rather than a wrong value"
            )
        out[j] = value


def _sample_plan(plan: _Plan, count: int, source: RandomSource, where: str) -> np.ndarray:
    """``count`` exact DLap samples (int64) at the plan's scale."""
    out = np.empty(count, dtype=np.int64)
    parts = plan.parts
    for start in range(0, count, _BLOCK):
        n = min(_BLOCK, count - start)
        words = source.bits(2 * n * len(parts)).reshape(len(parts), 2 * n)
        fixes: dict[int, int] = {}
        g: np.ndarray | None = None
        for row, (part, shift) in enumerate(parts):
            values, ties = part.lookup(words[row])
            for i, delta in _resolve_ties(part, words[row], ties, values, source).items():
                fixes[i] = fixes.get(i, 0) + (delta << shift)
            if len(parts) == 1:
                g = values  # int16 (m = 0, values <= _Q_TABLE_MAX)
            else:
                term = values.astype(np.int64) << np.int64(shift)
                g = term if g is None else g + term
        assert g is not None
        block = out[start : start + n]
        np.subtract(g[:n], g[n:], out=block, casting="unsafe")
        if fixes:
            _finish(block, g, fixes, where)
    return out


def _uniform_below(limits: np.ndarray, shifts: np.ndarray, source: RandomSource) -> np.ndarray:
    """Exact uniform integers in ``[0, limits[i])`` (int64), ``shifts[i] = 64 - bitlen(limits[i] - 1)``:
    the top bits of a word, redrawn while they reach the limit (probability < 1/2 each time)."""
    out = np.empty(limits.size, dtype=np.int64)
    todo = np.arange(limits.size)
    while todo.size:
        x = (source.bits(todo.size) >> shifts[todo]).astype(np.int64)
        ok = x < limits[todo]
        out[todo[ok]] = x[ok]
        todo = todo[~ok]
    return out


def _bernoulli_inverse(k: int, count: int, source: RandomSource) -> np.ndarray:
    """``count`` exact Bernoulli(1/k) samples: ``t < floor(2**62 / k)`` for ``t`` uniform on
    ``[0, k floor(2**62 / k))`` (62-bit words, redrawn when above that range)."""
    q = (1 << 62) // k
    out = np.empty(count, dtype=bool)
    todo = np.arange(count)
    while todo.size:
        t = source.bits(todo.size) >> np.uint64(2)
        ok = t < np.uint64(q * k)
        out[todo[ok]] = t[ok] < np.uint64(q)
        todo = todo[~ok]
    return out


def _bernoulli_exp_fraction(u: np.ndarray, limits: np.ndarray, shifts: np.ndarray, source: RandomSource) -> np.ndarray:
    """Exact Bernoulli(exp(-u/limit)) for ``0 <= u < limit`` elementwise (CKS Algorithm 1, the
    ``gamma <= 1`` case): ``A_k = Bernoulli(1/k) and Bernoulli(u/limit)`` (= Bernoulli(gamma/k))
    for ``k = 1, 2, ...`` until the first ``A_k = 0``; the result is whether that ``k`` is odd."""
    out = np.empty(u.size, dtype=bool)
    active = np.arange(u.size)
    k = 1
    while active.size:
        a = _uniform_below(limits[active], shifts[active], source) < u[active]
        if k > 1:
            a &= _bernoulli_inverse(k, active.size, source)
        out[active[~a]] = (k & 1) == 1
        active = active[a]
        k += 1
    return out


def _geometric_cks(nums: np.ndarray, exps: np.ndarray, source: RandomSource) -> tuple[np.ndarray, dict[int, int]]:
    """Geometrics with ``P(G >= g) = exp(-g 2**exps[i] / nums[i])`` (CKS Algorithm 2's ``X``,
    floor-divided): ``X = U + n V`` with ``U`` uniform on ``[0, n)`` accepted with probability
    ``exp(-U/n)`` and ``V`` the exact unit geometric (``P(V >= v) = exp(-v)``), so ``P(X = x)`` is
    proportional to ``exp(-x/n)``; then ``G = floor(X / 2**exps)``. Returns int64 values and
    exact Python-int corrections for the (astronomically rare) elements outside int64 arithmetic."""
    size = nums.size
    shifts = (64 - np.bitwise_count(_smear(nums - 1))).astype(np.uint64)
    u = np.empty(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        cand = _uniform_below(nums[todo], shifts[todo], source)
        ok = _bernoulli_exp_fraction(cand, nums[todo], shifts[todo], source)
        u[todo[ok]] = cand[ok]
        todo = todo[~ok]
    unit = _unit_geometric()
    words = source.bits(size)
    v, ties = unit.lookup(words)
    v = v.astype(np.int64)
    exact_v = {int(i): unit.resolve(int(words[i]), source) for i in ties}
    safe = v < (np.int64(1 << 62) // nums)  # n V < 2**62, U < n < 2**57: X < 2**63
    x = u + nums * np.where(safe, v, 0)
    g = np.where(exps >= 63, 0, x >> np.minimum(exps, 62))
    fixes: dict[int, int] = {}
    for i in set(np.flatnonzero(~safe).tolist()) | set(exact_v):
        vi = exact_v.get(i, int(v[i]))
        fixes[i] = ((int(u[i]) + int(nums[i]) * vi) >> int(exps[i])) - int(g[i])
    return g, fixes


def _smear(x: np.ndarray) -> np.ndarray:
    """Set every bit below the highest set bit (so popcount gives the bit length), int64 >= 0."""
    x = x.copy()
    for s in (1, 2, 4, 8, 16, 32):
        x |= x >> np.int64(s)
    return x


def _sample_cks(scales: np.ndarray, source: RandomSource, where: str) -> np.ndarray:
    """Exact DLap samples with one scale per element (float64 array, flattened): each scale is
    ``n / 2**j`` exactly (``frexp``), and ``G1 - G2`` of two ``_geometric_cks`` draws."""
    mant, expo = np.frexp(scales)
    nums = np.ldexp(mant, 53).astype(np.int64)  # exact: a 53-bit integer in [2**52, 2**53)
    exps = 53 - expo.astype(np.int64)
    up = np.maximum(-exps, 0)  # scales >= 2**53: fold the power of two into the numerator
    nums, exps = nums << up, exps + up
    both_n, both_e = np.concatenate([nums, nums]), np.concatenate([exps, exps])
    g, fixes = _geometric_cks(both_n, both_e, source)
    out = g[: scales.size] - g[scales.size :]
    if fixes:
        _finish(out, g, fixes, where)
    return out


# The inversion sampler this module used before the exact one (kept as a reference for the
# benchmark benchmarks/noise_sampler.py and the tests): floor(log1p(-u) / log1p(-p)) from 53-bit
# uniforms. Its law is within about 5e-16 * scale total variation of DLap(scale) and it gives
# probability 0 to |k| above about 36.7 * scale; not used by any mechanism.
def _discrete_laplace_inversion(scale: float, size: SizeLike, rng: RngLike = None) -> np.ndarray:
    scale_f = _positive_finite(scale, "scale", "discrete_laplace")
    shape, n = _shape(size, "discrete_laplace")
    source = as_source(rng)
    inv = 1.0 / scale_f
    if math.isinf(inv) or -math.expm1(-inv) == 1.0:
        return np.zeros(shape, dtype=np.int64)
    log1m_p = -inv
    _check_geometric_range(log1m_p, "discrete_laplace", f"scale={scale!r}")
    g = _geometric_from_uniforms(uniform01(source, 2 * n), log1m_p)
    return (g[:n] - g[n:]).reshape(shape)


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


# int64 arithmetic bound of the vectorised sampler: its acceptance exponents are a/b with
# b = 2 n d t**2 < 2**62 and a = (|y| d t - n)**2 with |y| d t - n < 2**31 (else Python integers)
_DG_WORD_LIMIT = 1 << 62
_DG_DIFF_LIMIT = 1 << 31
# samples per round of the vectorised sampler: its working arrays (~270 bytes per sample) stay
# below ~9 MB whatever the count (what privacy.offline.inftda's memory estimate assumes)
DG_ROUND = 1 << 15


def _bernoulli_exp_ratio(a: np.ndarray, b: int, source: RandomSource) -> np.ndarray:
    """Exact Bernoulli(exp(-a[i] / b)) elementwise, int64 ``a >= 0``, ``1 <= b < 2**62``: the
    product of Bernoulli(exp(-(a mod b) / b)) (CKS Algorithm 1, :func:`_bernoulli_exp_fraction`)
    and ``floor(a / b)`` Bernoulli(exp(-1)), each the product of two Bernoulli(exp(-1/2)) — the
    ``gamma > 1`` case of the same algorithm, with every comparison exact in integers."""
    whole, rest = np.divmod(a, np.int64(b))
    if b == 1:  # exp(-0) for the remainder (and no zero-bit shift below)
        accept = np.ones(a.size, dtype=bool)
    else:
        shift = np.uint64(64 - (b - 1).bit_length())
        accept = _bernoulli_exp_fraction(rest, np.full(a.size, b, dtype=np.int64), np.full(a.size, shift), source)
    out = np.zeros(a.size, dtype=bool)
    alive = np.flatnonzero(accept)
    j = 0
    while alive.size:
        done = whole[alive] <= j  # every one of its floor(a/b) factors exp(-1) succeeded
        out[alive[done]] = True
        alive = alive[~done]
        if alive.size:
            one, two = np.ones(alive.size, dtype=np.int64), np.full(alive.size, 2, dtype=np.int64)
            half = np.full(alive.size, np.uint64(63))  # 64 - bit length of (2 - 1)
            ok = _bernoulli_exp_fraction(one, two, half, source) & _bernoulli_exp_fraction(one, two, half, source)
            alive = alive[ok]
        j += 1
    return out


def _discrete_gaussian_words(sigma2: Fraction, count: int, source: RandomSource) -> np.ndarray | None:
    """CKS Algorithm 3 in arrays (same law as :func:`_discrete_gaussian_python`): candidates ``Y``
    from the exact :func:`discrete_laplace` at the integer scale ``t = floor(sqrt(sigma2)) + 1``,
    each accepted with probability ``exp(-(|Y| d t - n)**2 / (2 n d t**2))``
    (:func:`_bernoulli_exp_ratio`; a candidate whose exponent leaves int64 is decided in Python
    integers); the first ``count`` accepted, in draw order — i.i.d. draws of the law, since each
    candidate is accepted independently. ``None`` when ``2 n d t**2 >= 2**62`` (the Python
    sampler then draws everything)."""
    n, d = sigma2.numerator, sigma2.denominator
    t = math.isqrt(n * d) // d + 1
    dt = d * t
    den = 2 * n * d * t * t
    if den >= _DG_WORD_LIMIT:
        return None
    y_max = (_DG_DIFF_LIMIT - 1 + n) // dt  # |y| <= y_max: -n <= |y| d t - n < 2**31 (and n < 2**31)
    bern_exp = _make_bernoulli_exp(source.randbelow)
    out = np.empty(count, dtype=np.int64)
    filled = 0
    while filled < count:
        need = min(count - filled, DG_ROUND)
        y = discrete_laplace(float(t), 2 * need + 16, source)  # candidates for ~all needed; else a further round
        size = np.abs(y)
        small = size <= y_max
        accept = np.empty(y.size, dtype=bool)
        diff = size[small] * np.int64(dt) - np.int64(n)
        accept[small] = _bernoulli_exp_ratio(diff * diff, den, source)
        for i in np.flatnonzero(~small).tolist():
            big = int(size[i]) * dt - n
            accept[i] = bern_exp(big * big, den)
        kept = y[accept][:need]
        out[filled : filled + kept.size] = kept
        filled += kept.size
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
    ``floor(sigma) + 1``, then rejection) using only integer arithmetic, so the output
    distribution is exact (no floating point). When ``sigma2 = n/d`` keeps its exponents in
    int64 (``2 n d t**2 < 2**62``, e.g. every ``sigma2`` of InfTDA's calibration) it runs on
    arrays and 64-bit words (:func:`_discrete_gaussian_words`, ~1 µs per sample); otherwise a
    Python loop on ``source.randbelow`` draws it (:func:`_discrete_gaussian_python`).
    """
    value = _exact_sigma2(sigma2)
    shape, count = _shape(size, "discrete_gaussian")
    source = as_source(rng)
    if count == 0:
        return np.zeros(shape, dtype=np.int64)
    words = _discrete_gaussian_words(value, count, source)
    if words is not None:
        return words.reshape(shape)
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
