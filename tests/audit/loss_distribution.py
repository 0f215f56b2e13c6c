"""A privacy-loss-distribution audit for releases made of many independent, identical parts (docs/ALGORITHMS.md §10).

Why: a window of the 2-D release is H = 24 sketch releases with independent noise. Its privacy loss
is a sum of 24 small terms, so the sampled audit (:mod:`.audit_tools`) never sees its tail: at the
default ε = 1 even a 6× calibration error measures only ε_lb ≈ 1.0–1.3. Sampling cannot reach a 2×
break there; this computes it instead.

Method. On neighbours where every part's state differs in the same way (the ``uniform_shift`` and
``one_counter`` pair neighbours: the same counters at every node), the parts' losses
``L_1 … L_H`` under A are i.i.d., and the window's loss is ``L = Σ L_i + L_size``.

1. Draw n outputs of *one* part from A and compute each one's exact loss ``ln P_A(o)/P_B(o)``
   (:mod:`.release_likelihood`).
2. One-sided DKW: with probability >= 1 − α, the true CDF satisfies ``F(x) <= F_n(x) + e`` for
   every x, ``e = sqrt(ln(1/α) / (2n))``. The distribution with CDF ``min(1, F_n + e)`` — the top
   e of the empirical mass moved to ``floor``, a value at or below the part's smallest possible
   loss — is then stochastically smaller than the true one. Each sample is also rounded *down*
   to a grid of step ``step``, which keeps it smaller.
3. Convolve that lowered distribution H times (FFT) and with the size term's exact two-point law.
   A sum of independent stochastically smaller terms is stochastically smaller, and the
   hockey-stick divergence ``δ(ε') = E_A[(1 − e^{ε' − L})_+]`` is increasing in L, so the value
   computed is a lower bound of the mechanism's true ``δ(ε')`` with probability >= 1 − α.

A mechanism is (ε, δ)-DP only if ``δ(ε) <= δ``: a lower bound above δ proves a violation (at
confidence 1 − α). The audit's ε lower bound is ``ε_lb = max{ε' : δ_lb(ε') > δ}``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.signal import fftconvolve

__all__ = ["LossAudit", "audit_identical_parts", "size_term"]

ALPHA = 1e-3  # the DKW band's failure probability


@dataclass(frozen=True)
class LossAudit:
    """The lowered loss distribution of the whole release on a grid, and what follows from it."""

    grid: np.ndarray  # loss values (ascending)
    mass: np.ndarray  # their probabilities under A (a lower bound in the stochastic order)
    delta: float  # the claim's δ

    def delta_at(self, epsilon: float) -> float:
        """A lower bound (probability >= 1 − α) of the hockey-stick divergence ``δ(ε)``."""
        gain = -np.expm1(np.minimum(epsilon - self.grid, 0.0))  # (1 − e^{ε − L})_+
        return float(np.sum(self.mass * gain))

    def epsilon_lb(self) -> float:
        """``max{ε' >= 0 : δ_lb(ε') > δ}`` by bisection (0 if even ε' = 0 is within δ)."""
        if self.delta_at(0.0) <= self.delta:
            return 0.0
        lo, hi = 0.0, float(self.grid[-1])
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.delta_at(mid) > self.delta else (lo, mid)
        return lo


def size_term(scale: float) -> tuple[np.ndarray, np.ndarray]:
    """The exact law under A of a noisy size's loss when A's size is B's plus one: ``ñ = n_A + Z``,
    ``Z ~ DLap(scale)``, loss ``(|Z + 1| − |Z|)/scale``: ``+1/scale`` when Z >= 0 (probability
    ``1/(1+q)``, ``q = e^{−1/scale}``), else ``−1/scale``."""
    q = math.exp(-1.0 / scale)
    return np.array([-1.0 / scale, 1.0 / scale]), np.array([q / (1 + q), 1 / (1 + q)])


def _lowered(samples: np.ndarray, floor: float, step: float, alpha: float) -> tuple[int, np.ndarray]:
    """The DKW-lowered, rounded-down empirical law of ``samples`` on the grid ``step·(i0 + j)``:
    (i0, masses)."""
    n = samples.size
    band = math.sqrt(math.log(1 / alpha) / (2 * n))
    assert floor <= samples.min(), (floor, float(samples.min()))
    cells = np.floor(np.concatenate([[floor], samples]) / step).astype(np.int64)
    weights = np.full(n + 1, 1.0 / n)
    # move the top `band` of the empirical mass to the floor
    order = np.argsort(cells[1:], kind="stable")[::-1] + 1
    moved = 0.0
    for i in order:
        take = min(weights[i], band - moved)
        if take <= 0:
            break
        weights[i] -= take
        moved += take
    weights[0] = moved
    i0 = int(cells.min())
    mass = np.bincount(cells - i0, weights=weights)
    return i0, mass


def _power(i0: int, mass: np.ndarray, times: int) -> tuple[int, np.ndarray]:
    """The law of the sum of ``times`` independent copies (repeated squaring, FFT convolutions)."""
    out_i0, out = 0, np.array([1.0])
    base_i0, base = i0, mass
    while times:
        if times & 1:
            out_i0, out = out_i0 + base_i0, np.clip(fftconvolve(out, base), 0.0, None)
        times >>= 1
        if times:
            base_i0, base = 2 * base_i0, np.clip(fftconvolve(base, base), 0.0, None)
    return out_i0, out


def audit_identical_parts(
    part_losses: np.ndarray,
    parts: int,
    *,
    floor: float,
    delta: float,
    exact_terms: Sequence[tuple[np.ndarray, np.ndarray]] = (),
    step: float = 1e-4,
    alpha: float = ALPHA,
) -> LossAudit:
    """The lowered law of ``Σ_{i<parts} L_i + Σ exact terms`` (see the module docstring).

    ``part_losses``: exact losses of independent draws of one part from A; ``floor``: at or below
    the part's smallest possible loss; ``exact_terms``: independent terms with known laws
    (values, probabilities), rounded down onto the grid."""
    i0, mass = _lowered(np.asarray(part_losses, dtype=np.float64), floor, step, alpha)
    i0, mass = _power(i0, mass, parts)
    for values, probs in exact_terms:
        cells = np.floor(np.asarray(values) / step).astype(np.int64)
        t0 = int(cells.min())
        law = np.bincount(cells - t0, weights=np.asarray(probs, dtype=np.float64))
        i0, mass = i0 + t0, np.clip(fftconvolve(mass, law), 0.0, None)
    grid = (i0 + np.arange(mass.size)) * step
    return LossAudit(grid, mass, delta)
