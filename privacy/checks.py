"""Warnings about parameters that are valid but weaken what a release means.

Invalid parameters (ε ≤ 0, δ ∉ (0, 1), κ < 1, h < 1, an unknown variant …) are refused where the
values are built (:class:`~dphhh.privacy.params.HHHParams`, :class:`~dphhh.privacy.release.ReleaseScales`,
the stream configuration). The two cases here are legal but deserve a warning at start:

* δ not far below 1/n: an (ε, δ)-DP mechanism may expose about δ·n elements in full, so δ must
  be much smaller than 1/n (here: δ·n ≤ 0.01) for the guarantee to mean anything;
* τ below the release threshold T*: a prefix is only released when its noisy count passes T*, so
  heavy hitters with counts between τ and about T* are systematically missed (and in
  ``conservative`` mode τ < 2·α1 voids the coverage guarantee, which each report states);
* ε above :data:`EPSILON_NEARLY_EXACT`: legal (the release stays well defined at any finite ε), but
  an output may then be e^ε times likelier with one element than without it, and the noise is
  so small that the counts are nearly exact.

The warnings use public parameters only (and an optional, public hint of the window size).
"""

from __future__ import annotations

from .calibration import WindowCalibration
from .params import HHHParams

__all__ = ["guarantee_warnings", "DELTA_TIMES_N_MAX", "DELTA_WITHOUT_HINT_MAX", "EPSILON_NEARLY_EXACT"]

#: δ·n above this is "not far below 1/n".
DELTA_TIMES_N_MAX = 0.01
#: Without a window-size hint, δ above this draws a warning (it is not far below 1/n for n ≥ 10^4).
DELTA_WITHOUT_HINT_MAX = 1e-6
#: ε above this draws a warning: the guarantee bounds almost nothing (e^10 ≈ 22,000) and the counts
#: are nearly exact.
EPSILON_NEARLY_EXACT = 10.0


def guarantee_warnings(params: HHHParams, *, h: int, expected_n: int | None = None) -> list[str]:
    """Human-readable warnings for ``params`` over ``h`` sketched levels (empty when all is well).

    ``expected_n`` is a public, configured estimate of the elements per window (never the data's
    own count); without it δ is compared with :data:`DELTA_WITHOUT_HINT_MAX`.
    """
    out: list[str] = []
    if params.epsilon > EPSILON_NEARLY_EXACT:
        out.append(
            f"epsilon={params.epsilon:g} is above {EPSILON_NEARLY_EXACT:g}: one element may make an output "
            f"e^{params.epsilon:g} times likelier, and the noise is so small that the counts are nearly exact; "
            f"the guarantee protects almost nothing (use epsilon <= {EPSILON_NEARLY_EXACT:g})"
        )
    if expected_n:
        if params.delta * expected_n > DELTA_TIMES_N_MAX:
            out.append(
                f"delta={params.delta:g} is not far below 1/n for windows of about {expected_n:,} elements "
                f"(delta*n = {params.delta * expected_n:.3g} > {DELTA_TIMES_N_MAX:g}): the (epsilon, delta) "
                f"guarantee allows about delta*n elements to be exposed; use delta <= {DELTA_TIMES_N_MAX / expected_n:.1e}"
            )
    elif params.delta > DELTA_WITHOUT_HINT_MAX:
        out.append(
            f"delta={params.delta:g} must be far below 1/n (n = elements per window); it is above "
            f"{DELTA_WITHOUT_HINT_MAX:g}, which is only safe for small windows (set the expected window size to check)"
        )
    threshold = WindowCalibration.of(params, h).threshold
    if params.tau < threshold:
        out.append(
            f"tau={params.tau:g} is below the release threshold T*={threshold:.1f} (epsilon={params.epsilon:g}, "
            f"h={h}): prefixes with counts between tau and about T* are never released, so such heavy hitters are "
            f"missed; raise tau or epsilon"
        )
    return out
