"""Validated, immutable parameter values for the private HHH release.

Every value checks itself at construction and names the field and the bad value in its error,
prefixed by the owning type (``HHHParams: epsilon must be > 0 ...``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from dphhh.sketches.errors import UsageError

__all__ = [
    "PrivacyBudget",
    "HHHParams",
    "VARIANTS",
    "MODES",
    "CALIBRATIONS",
    "DEFAULT_CALIBRATION",
    "check_positive",
    "check_open_unit",
]

VARIANTS = ("fresh", "reuse")
MODES = ("conservative", "point")
#: ``tight``: one scale per variant and an exact-tail threshold (docs/calibration.md §3); ``paper``:
#: the DP-HHH paper's scales and closed-form threshold (docs/ALGORITHMS.md §3).
CALIBRATIONS = ("tight", "paper")
DEFAULT_CALIBRATION = "tight"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_positive(owner: str, name: str, value: Any) -> float:
    """``value`` as a float if it is a finite number > 0, else ``ValueError`` naming it."""
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        raise UsageError.of_parameter(owner, name, f"must be a finite number > 0, got {value!r}")
    return float(value)


def check_open_unit(owner: str, name: str, value: Any) -> float:
    """``value`` as a float if ``0 < value < 1``, else ``ValueError`` naming it."""
    if not _is_number(value) or not (0 < value < 1):
        raise UsageError.of_parameter(owner, name, f"must be a number with 0 < {name} < 1, got {value!r}")
    return float(value)


def check_int(owner: str, name: str, value: Any, minimum: int) -> int:
    """``value`` if it is an integer >= ``minimum``, else ``ValueError`` naming it."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise UsageError.of_parameter(owner, name, f"must be an integer >= {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class PrivacyBudget:
    """An (ε, δ) differential-privacy budget: ε > 0 finite, 0 <= δ < 1."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("PrivacyBudget", "epsilon", self.epsilon))
        if not _is_number(self.delta) or not (0 <= self.delta < 1):
            raise UsageError.of_parameter(
                "PrivacyBudget", "delta", f"must be a number with 0 <= delta < 1, got {self.delta!r}"
            )
        object.__setattr__(self, "delta", float(self.delta))

    def __add__(self, other: PrivacyBudget) -> PrivacyBudget:
        """Basic sequential composition."""
        return PrivacyBudget(self.epsilon + other.epsilon, self.delta + other.delta)


@dataclass(frozen=True)
class HHHParams:
    """Parameters of one window's private HHH release (docs/ALGORITHMS.md §3–§5).

    * ``epsilon``, ``delta``: the window's total budget; the report is (ε, δ)-DP (event level).
    * ``beta``: failure probability of the accuracy and coverage guarantees.
    * ``tau``: the HHH threshold (absolute count).
    * ``counters``: κ, slots per Misra-Gries sketch.
    * ``partitions``: P, key partitions per level (docs/ALGORITHMS.md §2).
    * ``variant``: ``fresh`` (default; fresh shared γ' in the release) or ``reuse``.
    * ``mode``: ``conservative`` (default; coverage guarantee) or ``point``.
    * ``calibration``: ``tight`` (default; docs/calibration.md §3) or ``paper`` (docs/ALGORITHMS.md §3's scales).
    * ``size_share``: share of ε spent on the private sub-stream sizes (docs/ALGORITHMS.md §5); the rest goes
      to the per-level releases.
    * ``size_beta_share``: share of β given to the stream-size upper bounds; the rest covers the
      per-key noise.
    """

    epsilon: float
    delta: float
    tau: float
    beta: float = 0.05
    counters: int = 1024
    partitions: int = 1
    variant: str = "fresh"
    mode: str = "conservative"
    calibration: str = DEFAULT_CALIBRATION
    size_share: float = 0.1
    size_beta_share: float = 0.1

    def __post_init__(self) -> None:
        owner = "HHHParams"
        object.__setattr__(self, "epsilon", check_positive(owner, "epsilon", self.epsilon))
        object.__setattr__(self, "delta", check_open_unit(owner, "delta", self.delta))
        object.__setattr__(self, "beta", check_open_unit(owner, "beta", self.beta))
        object.__setattr__(self, "tau", check_positive(owner, "tau", self.tau))
        check_int(owner, "counters", self.counters, 1)
        check_int(owner, "partitions", self.partitions, 1)
        if self.variant not in VARIANTS:
            raise UsageError.of_parameter(
                owner, "variant", f"must be one of {', '.join(VARIANTS)}, got {self.variant!r}"
            )
        if self.mode not in MODES:
            raise UsageError.of_parameter(owner, "mode", f"must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.calibration not in CALIBRATIONS:
            raise UsageError.of_parameter(
                owner, "calibration", f"must be one of {', '.join(CALIBRATIONS)}, got {self.calibration!r}"
            )
        object.__setattr__(self, "size_share", check_open_unit(owner, "size_share", self.size_share))
        object.__setattr__(self, "size_beta_share", check_open_unit(owner, "size_beta_share", self.size_beta_share))

    @property
    def release_budget(self) -> PrivacyBudget:
        """The budget of the per-level releases (Algorithm 3): ((1 − size_share)·ε, δ)."""
        return PrivacyBudget(self.epsilon * (1 - self.size_share), self.delta)

    @property
    def size_budget(self) -> PrivacyBudget:
        """The budget of the private sub-stream sizes: (size_share·ε, 0)."""
        return PrivacyBudget(self.epsilon * self.size_share, 0.0)

    @property
    def key_beta(self) -> float:
        """β available to the per-key noise bounds (α2)."""
        return self.beta * (1 - self.size_beta_share)

    @property
    def size_beta(self) -> float:
        """β available to the stream-size upper bounds."""
        return self.beta * self.size_beta_share

    def as_dict(self) -> dict[str, Any]:
        """Plain dict of every field (for reports)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}
