"""IntOPT: integer Chebyshev projection onto non-negative vectors with a given sum (docs/ALGORITHMS.md §7).

Given integer noisy counts ``x̃`` (length k) and a target total ``c >= 0``, IntOPT returns integers
``y >= 0`` with ``Σy = c`` minimising ``‖y − x̃‖∞``, choosing among the optima the one that lowers
(and so zeroes) the *smallest* noisy cells first (Boninsegna & Silvestri). It is post-processing:
it never looks at exact data. Floating point (Mironov 2012): safe — integers in, integers out,
integer arithmetic only.

Algorithm (docs/ALGORITHMS.md §7, with ``z = y − x̃``):

1. if ``c = 0`` return zeros;
2. ``z_j = max(⌈(c − Σx̃)/k⌉, −x̃_j)`` and ``t = max_j |z_j|`` (a lower bound on the optimum);
   then ``Σz >= c − Σx̃`` and the *surplus* ``s = Σz − (c − Σx̃) >= 0`` must be removed;
3. walk the indices in ascending order of ``x̃`` (ties by index), only those with
   ``z_j > −x̃_j``, lowering each ``z_j`` by the remaining surplus but not below
   ``max(−x̃_j, −t)``;
4. if surplus is left, raise ``t`` by ``max(1, ⌈s/|I|⌉)`` (``I`` = indices still above
   ``−x̃_j``) and walk again; return ``x̃ + z``.

Optimality: after a walk at level ``t`` every index of ``I`` sits at ``−t``, so lowering the
surplus ``s`` needs ``t`` to grow by at least ``⌈s/|I|⌉``; the raise never overshoots, and the
initial ``t`` is below the optimum (``t* >= ⌈|c − Σx̃|/k⌉`` and ``t* >= −min x̃``). Each
unfinished walk removes at least one index from ``I``, so there are at most ``k`` walks; each walk
is vectorised (a cumulative sum in walk order), O(k log k) per walk.
"""

from __future__ import annotations

import numbers

import numpy as np

from dphhh.sketches.errors import UsageError

__all__ = ["int_opt"]

_OWNER = "IntOPT"


def _as_integer_vector(x_tilde: object) -> np.ndarray:
    arr = np.asarray(x_tilde)
    if arr.ndim != 1 or arr.size == 0:
        raise UsageError(f"{_OWNER}: x_tilde must be a non-empty 1-D array, got shape {arr.shape}")
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        return arr.astype(np.int64)
    raise UsageError(f"{_OWNER}: x_tilde must contain integers (e.g. discrete Gaussian noisy counts)")


def int_opt(x_tilde: np.ndarray, c: int) -> np.ndarray:
    """Integers ``y >= 0`` with ``Σy = c`` minimising ``‖y − x̃‖∞``, zeroing small cells first.

    Parameters:
        x_tilde: 1-D array of integers (noisy counts; may be negative).
        c: the target total, an integer >= 0 (the parent's released count).

    Returns an ``np.int64`` array of the same length. Raises ``ValueError`` on invalid input.
    """
    if isinstance(c, (bool, np.bool_)) or not isinstance(c, numbers.Integral) or c < 0:
        raise UsageError(f"{_OWNER}: c must be an integer >= 0, got {c!r}")
    x = _as_integer_vector(x_tilde)
    c = int(c)
    k = x.shape[0]
    if c == 0:
        return np.zeros(k, dtype=np.int64)
    need = c - int(x.sum())  # Σz must equal this
    # ⌈need / k⌉ with integer arithmetic (Python floor division rounds toward −∞).
    start = -((-need) // k)
    floor_z = -x  # z_j >= −x̃_j  <=>  y_j >= 0
    z = np.maximum(start, floor_z)
    t = int(np.abs(z).max())
    surplus = int(z.sum()) - need
    order = np.argsort(x, kind="stable")  # ascending x̃, ties by index
    while surplus > 0:
        zo = z[order]
        lower = np.maximum(floor_z[order], -t)
        capacity = np.maximum(zo - lower, 0)
        before = np.cumsum(capacity) - capacity  # surplus already removed before each index
        take = np.clip(surplus - before, 0, capacity)
        z[order] = zo - take
        surplus -= int(take.sum())
        if surplus > 0:
            movable = int(np.count_nonzero(z > floor_z))
            t += max(1, -((-surplus) // movable))
    return x + z
