"""Baselines for local-DP range queries (docs/ALGORITHMS.md §8): HIO and Uni.

* HIO (Wang et al., SIGMOD 2019, as described in the AHEAD paper): a complete tree with fan-out
  ``b`` per dimension over the (padded) domain; the users are split at random into one group per
  level below the root, and each group reports the node of its level that holds their value
  through OUE with the whole ε (the same oracle everywhere). A range is answered by summing the
  raw estimates of the fewest covering nodes. Guarantee: **ε-local DP, each user's value, one
  report per user.** (HIO's optional consistency step is not applied here.)
* Uni: the uniform guess (volume of the range / volume of the domain); uses no data at all.

Floating point (Mironov 2012): safe — HIO's only noise is OUE's randomised-response bits
(:mod:`dphhh.privacy.offline.ldp`), its printed estimates are post-processing of them, and Uni uses no
data.

Both return objects with the same ``answer`` interface as :class:`dphhh.privacy.offline.ahead.RangeEstimator`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dphhh.privacy.offline.ahead import LDP_MODEL, RangeEstimator, _cells, _check_values, _pad_exponent, _random_groups
from dphhh.privacy.offline.ldp import Sampling, estimate_frequencies
from dphhh.privacy.params import check_int, check_positive
from dphhh.privacy.randomness import RandomSource, as_source
from dphhh.sketches.errors import UsageError

__all__ = ["HioParams", "hio", "UniformEstimator", "uniform_guess"]

RngLike = RandomSource | np.random.Generator | int | None


@dataclass(frozen=True)
class HioParams:
    """HIO parameters: ``epsilon`` (per user), ``branching`` per dimension ``b``, ``sampling``
    (``per_user`` client perturbation, or ``aggregate`` exactly equivalent simulated counts)."""

    epsilon: float
    branching: int = 4
    sampling: Sampling = "per_user"

    def __post_init__(self) -> None:
        owner = "HioParams"
        object.__setattr__(self, "epsilon", check_positive(owner, "epsilon", self.epsilon))
        check_int(owner, "branching", self.branching, 2)
        if self.sampling not in ("per_user", "aggregate"):
            raise UsageError(f"{owner}: sampling must be per_user or aggregate, got {self.sampling!r}")


def hio(values: np.ndarray, domain_sizes: Sequence[int], params: HioParams, rng: RngLike = None) -> RangeEstimator:
    """HIO on ``m``-dimensional data (``values`` shape ``(N, m)`` or ``(N,)``); ε-LDP per user."""
    if not isinstance(params, HioParams):
        raise TypeError("HIO: params must be a HioParams")
    sizes = [int(d) for d in domain_sizes]
    b = params.branching
    height = _pad_exponent("HIO", sizes, b)
    vals = _check_values("HIO", values, sizes)
    dims = len(sizes)
    if vals.shape[0] < height:
        raise UsageError(f"HIO: at least {height} users are needed (one per group)")
    source = as_source(rng)
    groups = _random_groups(vals.shape[0], height, source)
    levels = [np.ones((1,) * dims)]
    users = []
    for level in range(1, height + 1):
        cells = _cells(vals[groups[level - 1]], b, height, level)
        size = (b**level) ** dims
        est, n = estimate_frequencies(
            np.bincount(cells, minlength=size), cells, size, params.epsilon, "oue", source, params.sampling
        )
        levels.append(est.reshape((b**level,) * dims))
        users.append(int(n))
    summary = {"levels": height, "fanout": b**dims, "users_per_level": users, "padded_side": b**height}
    return RangeEstimator("HIO", asdict(params), sizes, b, levels, summary)


class UniformEstimator:
    """Uni: answers every range with its share of the domain's volume (no data used)."""

    def __init__(self, domain_sizes: Sequence[int]) -> None:
        self.domain_sizes = tuple(int(d) for d in domain_sizes)
        self.dims = len(self.domain_sizes)

    def answer(self, *ranges: Any) -> float:
        """Volume of the range(s) divided by the volume of the domain."""
        if self.dims == 1 and len(ranges) == 2 and not isinstance(ranges[0], (tuple, list)):
            ranges = (tuple(ranges),)
        if len(ranges) != self.dims:
            raise UsageError(f"Uni: expected {self.dims} range(s), got {len(ranges)}")
        share = 1.0
        for (lo, hi), d in zip(ranges, self.domain_sizes):
            if not (0 <= int(lo) <= int(hi) < d):
                raise UsageError(f"Uni: range [{lo}, {hi}] must satisfy 0 <= lo <= hi < {d}")
            share *= (int(hi) - int(lo) + 1) / d
        return share

    def frequencies(self) -> np.ndarray:
        """The uniform distribution over the domain."""
        return np.full(self.domain_sizes, 1.0 / float(np.prod(self.domain_sizes)))

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable description (no privacy cost: the data is not used)."""
        return {
            "algorithm": "Uni",
            "domain_sizes": list(self.domain_sizes),
            "guarantee": {"epsilon": 0.0, "model": LDP_MODEL + " (no report is used)"},
        }


def uniform_guess(domain_sizes: Sequence[int]) -> UniformEstimator:
    """The Uni baseline for ``domain_sizes``."""
    return UniformEstimator(domain_sizes)
