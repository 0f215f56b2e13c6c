"""Everything a window's release is calibrated with, from public parameters only (docs/calibration.md).

:class:`WindowCalibration` is the one place that turns :class:`~dphhh.privacy.params.HHHParams` and the
number of sketched levels ``h`` into the numbers the release uses and the report states: the
noise scales and threshold of every sketch release (:class:`~dphhh.privacy.release.ReleaseScales`), the
noise bound ``B``, α2, the sub-stream size release (its scale, how many sizes are released and
the slack of the upper bounds), and, given a size bound, α1 and a released prefix's interval.
The stream job, the batch command, the report builder and ``dphhh plan`` all use it, so the plan
prints exactly the numbers a report made with the same parameters carries.

Guarantees (each with probability over the noise, all at once with probability >= 1 − β):

* ``noise_bound`` B: every one of the κ·h·P keys' test noise ``γ + w_i`` and (variant ``fresh``)
  release noise ``γ' + w'_i`` lies in ``[−B, B]`` — with probability >= 1 − β_key (union bound
  over ``2κhP`` events for fresh, ``κhP`` for reuse, each from the exact tail of the sum);
* ``alpha2`` = ``T* + B``: every key that was *not* released has a counter <= α2, and every
  released value is within B <= α2 of its counter (the ``paper`` calibration keeps the paper's
  larger closed form ``T* + 2·b_w·ln(2κhP/β_key)``);
* ``size_slack`` S: every released sub-stream size is within S of the true size — with probability
  >= 1 − β_size — so ``n̂ = ñ + S`` is an upper bound for each;
* a released prefix's true count lies in ``[C̃ − B, C̃ + B + n̂/(κ+1)]``
  (:meth:`interval`: the release noise, plus the sketch's undercount of at most n/(κ+1), docs/ALGORITHMS.md §2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from dphhh.sketches.errors import UsageError

from .params import HHHParams
from .release import ReleaseScales
from .release import alpha2 as paper_alpha2
from .tails import smallest_two_sided_bound

__all__ = ["WindowCalibration", "size_release_count", "size_release_scale"]


def size_release_count(h: int, partitions: int) -> int:
    """How many sub-stream sizes a window releases: one when P = 1 (every level's sub-stream is the
    whole window), else one per (level, partition) sketch (docs/calibration.md §5)."""
    return 1 if partitions == 1 else h * partitions


def size_release_scale(*, epsilon: float, h: int, partitions: int) -> float:
    """Discrete Laplace scale of each released size for size budget ε: ``1/ε`` when P = 1 (one
    release, sensitivity 1), else ``h/ε`` (one element changes one size per level: L1 sensitivity h)."""
    return (1 if partitions == 1 else h) / epsilon


@dataclass(frozen=True)
class WindowCalibration:
    """The calibration of one window's release (see the module docstring for the guarantees)."""

    name: str
    variant: str
    h: int
    counters: int
    partitions: int
    scales: ReleaseScales
    noise_bound: int
    alpha2: float
    size_scale: float
    size_releases: int
    size_slack: int

    @classmethod
    def of(cls, params: HHHParams, h: int) -> WindowCalibration:
        """The calibration ``params`` give over ``h`` sketched levels."""
        return _calibrate(
            params.calibration,
            params.variant,
            params.release_budget.epsilon,
            params.release_budget.delta,
            params.size_budget.epsilon,
            int(h),
            params.counters,
            params.partitions,
            params.key_beta,
            params.size_beta,
        )

    @property
    def threshold(self) -> float:
        """T*: a key passes iff its noisy counter exceeds it."""
        return self.scales.threshold

    def sketch_error(self, n_upper: float) -> float:
        """The sketch's worst undercount n̂/(κ+1) for a sub-stream of at most ``n_upper`` elements."""
        return max(0.0, float(n_upper)) / (self.counters + 1)

    def alpha1(self, n_upper: float) -> float:
        """α1 = α2 + n̂/(κ+1) for a sketch whose sub-stream has at most ``n_upper`` elements."""
        return self.alpha2 + self.sketch_error(n_upper)

    @property
    def subtraction_slack(self) -> float:
        """What Algorithm 4 keeps of a selected prefix's value when it subtracts it from its ancestors
        (it subtracts ``C̃ − slack``, a lower bound on the prefix's true count): B for ``tight``
        (the released value is within B of the counter, which never overcounts), α2 for ``paper``."""
        return float(self.noise_bound) if self.name == "tight" else self.alpha2

    def selection_margin(self, n_upper: float) -> float:
        """Conservative mode selects a released prefix iff ``f̃ + margin > τ − α1``: the margin bounds
        how far the true residual can exceed f̃ — ``B + n̂/(κ+1)`` for ``tight`` (docs/calibration.md
        §4), the paper's α1 for ``paper``."""
        return self.noise_bound + self.sketch_error(n_upper) if self.name == "tight" else self.alpha1(n_upper)

    def interval(self, value: float, n_upper: float) -> tuple[float, float]:
        """``[max(0, C̃ − B), C̃ + B + n̂/(κ+1)]``: where a released prefix's true count lies."""
        return max(0.0, value - self.noise_bound), value + self.noise_bound + self.sketch_error(n_upper)

    def root_interval(self, n_root: float) -> tuple[float, float]:
        """Interval of the window size around the root estimate: every level's sum of P noisy sizes
        is within P·S of n, and the root estimate is their mean."""
        spread = self.size_slack * (1 if self.partitions == 1 else self.partitions)
        return max(0.0, n_root - spread), n_root + spread

    def as_dict(self) -> dict[str, object]:
        """The public numbers of the calibration, for reports and ``dphhh plan``."""
        return {
            "calibration": self.name,
            "threshold": round(self.threshold, 3),
            "noise_bound": self.noise_bound,
            "alpha2": round(self.alpha2, 3),
            "scales": {
                "gamma": self.scales.gamma,
                "w": self.scales.w,
                **(
                    {}
                    if self.scales.w_release is None
                    else {"gamma_release": self.scales.gamma_release, "w_release": self.scales.w_release}
                ),
            },
            "size_scale": self.size_scale,
            "size_releases": self.size_releases,
            "size_slack": self.size_slack,
        }


@lru_cache(maxsize=512)
def _calibrate(
    name: str,
    variant: str,
    epsilon: float,
    delta: float,
    size_epsilon: float,
    h: int,
    counters: int,
    partitions: int,
    key_beta: float,
    size_beta: float,
) -> WindowCalibration:
    scales = ReleaseScales.for_budget(epsilon=epsilon, delta=delta, h=h, variant=variant, calibration=name)
    keys = counters * h * partitions
    noisy_vectors = keys * (2 if scales.w_release is not None else 1)  # fresh: test and release noise per key
    if scales.w_release is not None and (scales.gamma_release, scales.w_release) != (scales.gamma, scales.w):
        raise UsageError("WindowCalibration: release and test noise must have the same scales")
    bound = smallest_two_sided_bound(scales.gamma, scales.w, key_beta / noisy_vectors)
    if name == "tight":
        a2 = scales.threshold + bound
    else:
        a2 = paper_alpha2(scales, counters=counters, h=h, partitions=partitions, beta=key_beta)
        a2 = max(a2, scales.threshold + bound)  # the paper's closed form; never below what the proof needs
    size_scale = size_release_scale(epsilon=size_epsilon, h=h, partitions=partitions)
    count = size_release_count(h, partitions)
    # P(|DLap(b)| > S) = 2·r^(S+1)/(1+r) <= 2·e^(−(S+1)/b): S = ⌈b·ln(2·count/β_size)⌉ − 1 suffices
    slack = max(0, math.ceil(size_scale * math.log(2 * count / size_beta)) - 1)
    return WindowCalibration(name, variant, h, counters, partitions, scales, bound, float(a2), size_scale, count, slack)
