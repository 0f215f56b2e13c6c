"""Zero-concentrated differential privacy (zCDP) ↔ (ε, δ)-DP conversion (docs/ALGORITHMS.md §7).

A ρ-zCDP mechanism (Bun & Steinke 2016) is (ε, δ)-DP for every δ in (0, 1) with

    ε(ρ, δ) = ρ + 2·√(ρ·ln(1/δ)),

and the largest ρ whose guarantee implies a requested (ε, δ) is the inverse of that map,

    ρ(ε, δ) = (√(ln(1/δ) + ε) − √(ln(1/δ)))².

Floating point (Mironov 2012): not applicable — accounting on public parameters only, no data.

Both functions are monotone; :func:`rho_from_epsilon_delta` rounds ρ *down* (by at most a few
ulps) so that ``epsilon_from_rho(rho_from_epsilon_delta(ε, δ), δ) <= ε`` holds in floating point.
"""

from __future__ import annotations

import math

from dphhh.privacy.params import check_open_unit, check_positive
from dphhh.sketches.errors import UsageError

__all__ = ["rho_from_epsilon_delta", "epsilon_from_rho"]

_OWNER = "zCDP"


def epsilon_from_rho(rho: float, delta: float) -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP: ``ε = ρ + 2·√(ρ·ln(1/δ))``.

    Parameters: ``rho`` finite > 0; ``delta`` with 0 < δ < 1. Raises ``ValueError`` otherwise.
    """
    rho_f = check_positive(_OWNER, "rho", rho)
    delta_f = check_open_unit(_OWNER, "delta", delta)
    return rho_f + 2.0 * math.sqrt(rho_f * math.log(1.0 / delta_f))


def rho_from_epsilon_delta(epsilon: float, delta: float) -> float:
    """The largest ρ whose ρ-zCDP guarantee implies (ε, δ)-DP (inverse of :func:`epsilon_from_rho`).

    ``ρ = (√(ln(1/δ) + ε) − √(ln(1/δ)))²``, computed as ``(ε / (√(L + ε) + √L))²`` with
    ``L = ln(1/δ)`` (no cancellation for small ε), then lowered by ulps until the round trip does
    not exceed ε. Parameters: ``epsilon`` finite > 0; ``delta`` with 0 < δ < 1.
    """
    eps_f = check_positive(_OWNER, "epsilon", epsilon)
    delta_f = check_open_unit(_OWNER, "delta", delta)
    log_term = math.log(1.0 / delta_f)
    rho = (eps_f / (math.sqrt(log_term + eps_f) + math.sqrt(log_term))) ** 2
    while rho > 0.0 and epsilon_from_rho(rho, delta_f) > eps_f:
        rho = math.nextafter(rho, 0.0)
    if not rho > 0.0:  # pragma: no cover - only for ε so small that ρ underflows
        raise UsageError(f"{_OWNER}: epsilon={epsilon!r} is too small to convert to a positive rho")
    return rho
