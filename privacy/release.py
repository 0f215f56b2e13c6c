"""Private release of one Misra-Gries sketch (docs/ALGORITHMS.md §3: Algorithm 3, corrected).

For a sketch with real keys T and counters C, released at window budget (ε, δ) over h sketched
levels, variant ``fresh`` (default):

* threshold ``T* = 1 + (6h/ε)·ln(3h/δ)``;
* ``γ ~ DLap(2h/ε)`` once per sketch, ``w_i ~ DLap(4h/ε)`` per key; key i passes iff
  ``C[i] + γ + w_i > T*``;
* a passing key is released as ``C[i] + γ' + w'_i`` with **fresh** ``γ' ~ DLap(2h/ε)`` shared by the
  sketch and fresh ``w'_i ~ DLap(4h/ε)``.

Variant ``reuse`` releases the tested value ``C[i] + γ + w_i`` itself with halved scales
(``γ ~ DLap(h/ε)``, ``w ~ DLap(2h/ε)``, ``T* = 1 + (3h/ε)·ln(3h/δ)``).

These are the ``paper`` calibration's scales. The ``tight`` calibration (the default,
docs/calibration.md §3) uses one scale for every noise term — ``b = 2h/ε`` (fresh) or ``h/ε``
(reuse) — because Lemma 4.1.1's two cases are exclusive: one moves only the per-key terms, the
other only the shared terms. Its threshold is the smallest integer ``T`` with
``2·e^(ε/h)·P(γ + w >= T) <= δ/h``, from the exact tail (:mod:`dphhh.privacy.tails`): keys present in
one neighbour's sketch only (at most two per side, each of count <= 1) pass with at most that
charge in every configuration Lemma 4.1.1 allows (docs/calibration.md §3.3, §3.3a).

Guarantee: for a neighbouring input sequence (one element added or removed) the two sketches
differ as Lemma 4.1.1 allows, and the release of one sketch is (ε/h, δ/h)-DP; the h levels
together are (ε, δ)-DP (basic composition). With key partitions, one element touches one
partition per level, so the same holds for the union of partition releases.

Noise is the discrete Laplace (two-sided geometric, ``P(k) ∝ exp(−|k|/b)``) and all comparisons are
in integers (``value > T*`` ⇔ ``value >= ⌊T*⌋ + 1``), immune to floating-point attacks.
Only the returned noisy values may leave the engine.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from dphhh.sketches.errors import UsageError

from .noise import discrete_laplace
from .params import CALIBRATIONS, DEFAULT_CALIBRATION, VARIANTS, check_int, check_open_unit, check_positive
from .randomness import RandomSource, as_source
from .tails import smallest_threshold, smallest_threshold_log

__all__ = ["ReleaseScales", "release_level", "release_arrays", "alpha2", "tight_threshold"]


def tight_threshold(*, epsilon_level: float, delta_level: float, b_gamma: float, b_w: float) -> int:
    """The ``tight`` calibration's threshold for one sketch charged ``(ε_ℓ, δ_ℓ)`` (docs/calibration.md §3.3).

    The smallest integer ``T >= 0`` with ``2·e^(ε_ℓ)·P(γ + w >= T) <= δ_ℓ``: a key of count
    <= 1 passes (``1 + γ + w > T``) with probability ``q <= P(γ + w >= T)``; at most two keys per
    side are in one neighbour's sketch only, and conditioning on the shared terms the proof charges
    every configuration at most ``e^(−ε_ℓ)·δ_ℓ`` at this T (docs/calibration.md §3.3a)."""
    if delta_level > 0 and b_gamma == b_w:
        log_limit = math.log(delta_level / 2) - epsilon_level
        if log_limit < _LOG_FLOAT_FLOOR:  # e^(ε_ℓ) beyond floats: the same search, in logs
            return smallest_threshold_log(float(b_gamma), log_limit)
    limit = delta_level / (2 * math.exp(epsilon_level))
    return smallest_threshold(float(b_gamma), float(b_w), limit)


#: Below this log-probability the tight threshold is searched in logs (:func:`smallest_threshold_log`):
#: ``e^(ε_ℓ)`` overflows a float from ε_ℓ ≈ 709, and a tail under e^-700 is near the smallest float.
_LOG_FLOAT_FLOOR = -700.0


@dataclass(frozen=True)
class ReleaseScales:
    """Noise scales and threshold of one sketch release.

    ``gamma``/``w`` are the thresholding noise scales; ``gamma_release``/``w_release`` the fresh
    release scales (``None`` when the tested value itself is released, variant ``reuse``).
    ``gamma_release = 0`` gives the paper's literal release without γ' (used only by audits, to
    show that it is *not* private).
    """

    threshold: float
    gamma: float
    w: float
    gamma_release: float | None
    w_release: float | None

    @classmethod
    def for_budget(
        cls, *, epsilon: float, delta: float, h: int, variant: str = "fresh", calibration: str = DEFAULT_CALIBRATION
    ) -> ReleaseScales:
        """The scales of ``calibration`` for window budget (ε, δ) over ``h`` sketched levels."""
        owner = "release_level"
        epsilon = check_positive(owner, "epsilon", epsilon)
        delta = check_open_unit(owner, "delta", delta)
        h = check_int(owner, "h", h, 1)
        if variant not in VARIANTS:
            raise UsageError(f"{owner}: variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        if calibration not in CALIBRATIONS:
            raise UsageError(f"{owner}: calibration must be one of {', '.join(CALIBRATIONS)}, got {calibration!r}")
        if calibration == "tight":
            b = (2 if variant == "fresh" else 1) * h / epsilon
            t = tight_threshold(epsilon_level=epsilon / h, delta_level=delta / h, b_gamma=b, b_w=b)
            return cls(float(t), b, b, b, b) if variant == "fresh" else cls(float(t), b, b, None, None)
        if variant == "fresh":
            b = 2 * h / epsilon
            return cls(1 + (6 * h / epsilon) * math.log(3 * h / delta), b, 2 * b, b, 2 * b)
        if variant == "reuse":
            b = h / epsilon
            return cls(1 + (3 * h / epsilon) * math.log(3 * h / delta), b, 2 * b, None, None)
        raise UsageError(f"{owner}: variant must be one of {', '.join(VARIANTS)}, got {variant!r}")

    @property
    def integer_threshold(self) -> int:
        """Smallest integer strictly above T*: an integer value passes iff it is >= this."""
        return math.floor(self.threshold) + 1

    @property
    def released_key_scale(self) -> float:
        """Scale of the per-key noise in a *released* value (4h/ε fresh, 2h/ε reuse)."""
        return self.w if self.w_release is None else self.w_release


def release_arrays(
    counts: np.ndarray, scales: ReleaseScales, source: RandomSource, trials: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised core of :func:`release_level` over ``counts`` (int64, one per key).

    Returns ``(passed, values)`` of shape ``(k,)`` — or ``(trials, k)`` with independent noise per
    trial, for audits. ``values`` is meaningful only where ``passed``.
    """
    counts = np.asarray(counts, dtype=np.int64)
    shape = counts.shape if trials is None else (int(trials),) + counts.shape
    gshape = () if trials is None else (int(trials), 1)
    gamma = discrete_laplace(scales.gamma, gshape or 1, rng=source).reshape(gshape)
    w = discrete_laplace(scales.w, shape, rng=source)
    tested = counts + gamma + w
    passed = tested >= scales.integer_threshold
    if scales.w_release is None:
        return passed, tested
    values = counts + discrete_laplace(scales.w_release, shape, rng=source)
    if scales.gamma_release:
        values = values + discrete_laplace(scales.gamma_release, gshape or 1, rng=source).reshape(gshape)
    return passed, values


def release_level(
    counts: Mapping[int, int],
    *,
    epsilon: float,
    delta: float,
    h: int,
    variant: str = "fresh",
    calibration: str = DEFAULT_CALIBRATION,
    rng: RandomSource | np.random.Generator | int | None = None,
    slots: int = 0,
) -> dict[int, int]:
    """Release one sketch's counters privately (docs/ALGORITHMS.md §3); returns ``{key: noisy value}``.

    ``counts`` is the sketch's ``{real key: counter}`` (zero counters included); ``epsilon`` and
    ``delta`` are the budget of all ``h`` sketched levels together (this sketch is charged
    ``(ε/h, δ/h)``). Only keys that pass the noisy threshold appear in the result. ``rng`` is
    ``None`` for the secure source (production) or a seeded generator (tests).

    ``slots`` (the sketch's κ): the noise of that many keys is drawn whatever the sketch holds — the
    slots it does not fill as zero counters, whose outcome is discarded — so that an empty, a
    sparse and a full sketch cost the same (docs/ALGORITHMS.md §0.1 h).
    """
    scales = ReleaseScales.for_budget(epsilon=epsilon, delta=delta, h=h, variant=variant, calibration=calibration)
    source = as_source(rng)
    keys = sorted(counts)
    values_in = np.fromiter((counts[k] for k in keys), dtype=np.int64, count=len(keys))
    if (values_in < 0).any():
        raise UsageError("release_level: counters must be >= 0")
    padded = np.concatenate([values_in, np.zeros(max(0, int(slots) - len(keys)), dtype=np.int64)])
    if not padded.size:
        return {}
    passed, values = release_arrays(padded, scales, source)
    released = values.tolist()
    return {keys[i]: released[i] for i in np.flatnonzero(passed[: len(keys)]).tolist()}


def alpha2(scales: ReleaseScales, *, counters: int, h: int, partitions: int, beta: float) -> float:
    """The ``paper`` calibration's α2 = T* + 2·b_w·ln(2κhP/β) of Algorithm 4 (docs/ALGORITHMS.md §4).

    (The ``tight`` calibration's α2 is ``T* + B`` with B from the exact tail:
    :class:`dphhh.privacy.calibration.WindowCalibration`.)

    ``b_w`` is the per-key scale of a released value. With probability >= 1 − β every one of the
    κ·h·P released values is within α2 − T* of its counter, and every key that was not released
    has a counter below α2.
    """
    return scales.threshold + 2 * scales.released_key_scale * math.log(2 * counters * h * partitions / beta)
