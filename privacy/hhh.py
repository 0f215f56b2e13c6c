"""HHH extraction from released values (spec §4: Algorithm 4, conservative residuals).

Pure post-processing of the noisy values released per (level, partition) sketch, so the result
has the releases' privacy guarantee. Inputs: the released ``{key: noisy value}`` of every sketch,
the root estimate ñ, the bound α2 and, per sketch, α1 = α2 + n̂/(κ+1) with n̂ its private
sub-stream size upper bound.

Bottom-up (ℓ = h … 1, then the root), for each released key e:

* ``conservative`` (default): select e iff ``C̃[e] + α1 > τ − α1``; report ``f̃(e) = C̃[e]`` and
  subtract ``C̃[e] − α2`` from every ancestor released at its level (and from the root). With
  probability 1 − β no unselected prefix has residual above τ − α1 (coverage; paper Theorem
  4.1.5) and every released noisy count is within α1 of the prefix's true count. The
  residual-adjusted f̃ is *not* within α1 of the true residual in general: each selected
  descendant whose value is below α2 *adds* α2 − C̃ to its ancestors (the subtraction is
  conservative), so f̃ over-estimates the residual by up to α2 per selected descendant. Reports
  therefore carry both f̃ (``estimate``) and the released count with its α1 interval.
* ``point``: select iff ``C̃[e] >= τ`` and subtract ``C̃[e]``: higher precision, no coverage
  guarantee.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from sketches.hierarchy import Hierarchy

from .params import MODES

__all__ = ["SketchRelease", "HHHItem", "extract_hhh"]


@dataclass(frozen=True)
class SketchRelease:
    """What one (level, partition) sketch publishes: noisy values and its noisy size only."""

    level: int
    partition: int
    values: Mapping[int, int]
    n_noisy: int
    n_upper: int
    #: prefix labels of the released keys, for hierarchies whose keys are hashes (paths)
    labels: Mapping[int, str] | None = None


@dataclass(frozen=True)
class HHHItem:
    """One private hierarchical heavy hitter.

    * ``estimate``: Algorithm 4's residual-adjusted value f̃(e) (conservative mode: an upper-side
      estimate of the residual count, since each selected descendant removes only C̃ − α2);
    * ``count``: the released noisy count C̃ of the prefix before any subtraction; with
      probability 1 − β it is within ``alpha1`` of the prefix's true (unconditional) count, and
      ``[count − α1, count + α1]`` is the reported interval.
    """

    level: int
    key: int
    prefix: str
    estimate: float
    count: float
    alpha1: float

    def as_dict(self) -> dict:
        return {
            "prefix": self.prefix,
            "level": self.level,
            "estimate": round(self.estimate, 1),
            "count": round(self.count, 1),
            "lower": round(self.count - self.alpha1, 1),
            "upper": round(self.count + self.alpha1, 1),
        }


def extract_hhh(
    releases: Iterable[SketchRelease],
    hierarchy: Hierarchy,
    *,
    tau: float,
    alpha2: float,
    counters: int,
    root_value: float,
    mode: str = "conservative",
) -> list[HHHItem]:
    """Algorithm 4 over the released values; items bottom-up (deepest level first), root last."""
    if mode not in MODES:
        raise ValueError(f"extract_hhh: mode must be one of {', '.join(MODES)}, got {mode!r}")
    h = hierarchy.h
    released: dict[int, dict[int, float]] = {level: {} for level in range(0, h + 1)}
    residual: dict[int, dict[int, float]] = {level: {} for level in range(0, h + 1)}
    alpha1: dict[int, dict[int, float]] = {level: {} for level in range(0, h + 1)}
    worst_alpha1 = alpha2
    for rel in releases:
        if not (1 <= rel.level <= h):
            raise ValueError(f"extract_hhh: release level must be in 1..{h}, got {rel.level}")
        a1 = alpha2 + rel.n_upper / (counters + 1)
        worst_alpha1 = max(worst_alpha1, a1)
        for key, value in rel.values.items():
            released[rel.level][key] = residual[rel.level][key] = float(value)
            alpha1[rel.level][key] = a1
    released[0][0] = residual[0][0] = float(root_value)
    alpha1[0][0] = worst_alpha1

    selected: list[HHHItem] = []
    for level in range(h, -1, -1):
        for key in sorted(residual[level]):
            value = residual[level][key]
            a1 = alpha1[level][key]
            if mode == "conservative":
                chosen, removed = value + a1 > tau - a1, value - alpha2
            else:
                chosen, removed = value >= tau, value
            if not chosen:
                continue
            selected.append(HHHItem(level, key, hierarchy.label(key, level), value, released[level][key], a1))
            if level == 0:
                continue
            for up in range(level - 1, 0, -1):
                ancestor = hierarchy.ancestor(key, level, up)
                if ancestor in residual[up]:
                    residual[up][ancestor] -= removed
            residual[0][0] -= removed
    return selected
