"""HHH extraction from released values (docs/ALGORITHMS.md §4: Algorithm 4, conservative residuals).

Pure post-processing of the noisy values released per (level, partition) sketch, so the result
has the releases' privacy guarantee. Inputs: the released ``{key: noisy value}`` of every sketch,
the root estimate ñ, and the window's :class:`~dphhh.privacy.calibration.WindowCalibration` (α2, the
noise bound B and, per sketch, α1 = α2 + n̂/(κ+1) with n̂ its private sub-stream size upper bound).

Each reported prefix carries the interval ``[max(0, C̃ − B), C̃ + B + n̂/(κ+1)]`` of its true
count (docs/calibration.md §4): the release added noise within ±B, and the sketch undercounts by
at most n/(κ+1) but never overcounts. The root's interval is the window size's.

Bottom-up (ℓ = h … 1, then the root), for each released key e:

* ``conservative`` (default): select e iff ``f̃(e) + margin > τ − α1`` (α1 the window's largest,
  the one the report's coverage statement names); report ``f̃(e)`` and
  subtract ``f̃(e) − slack`` from every ancestor released at its level (and from the root).
  ``paper`` calibration: margin = α1, slack = α2 (the paper's Algorithm 4). ``tight``: margin =
  ``B + n̂/(κ+1)`` and slack = B (docs/calibration.md §4: a released value is within B of its
  counter and the counter never overcounts, so ``C̃ − B`` is a lower bound on a selected prefix's
  true count and ``f̃ + B + n̂/(κ+1)`` an upper bound on an unselected one's true residual). With
  probability 1 − β no unselected prefix has residual above τ − α1 (coverage; paper Theorem
  4.1.5, when τ >= 2·α1) and every released noisy count is within α1 of the prefix's true count.
  The residual-adjusted f̃ is *not* within α1 of the true residual in general: each selected
  descendant whose value is below its slack *adds* to its ancestors (the subtraction is
  conservative), so f̃ over-estimates the residual. Reports therefore carry both f̃ (``residual``)
  and the released count with its interval.
* ``point``: select iff ``C̃[e] >= τ`` and subtract ``C̃[e]``: higher precision, no coverage
  guarantee.

Every selected prefix then gets a verdict (:func:`with_verdicts`): ``heavy`` when its interval's
lower end, less the upper ends of its maximal reported descendants, is still at least τ; else
``possible``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import Hierarchy

from .calibration import WindowCalibration
from .params import MODES

__all__ = ["SketchRelease", "HHHItem", "VERDICTS", "extract_hhh", "with_verdicts"]


@dataclass(frozen=True)
class SketchRelease:
    """What one (level, partition) sketch publishes: noisy values and its noisy size only."""

    level: int
    partition: int
    values: Mapping[int, int]
    #: the noisy sub-stream size and its upper bound; ``None`` on levels > 1 when P = 1 (one size
    #: release per window, carried by level 1: :func:`dphhh.privacy.window.release_sketch`)
    n_noisy: int | None
    n_upper: int | None
    #: prefix labels of the released keys, for hierarchies whose keys are hashes (paths)
    labels: Mapping[int, str] | None = None


#: The two verdicts a reported prefix can carry (docs/ALGORITHMS.md §4 "Verdicts").
VERDICTS = ("heavy", "possible")


@dataclass(frozen=True)
class HHHItem:
    """One private hierarchical heavy hitter.

    * ``residual``: Algorithm 4's residual-adjusted value f̃(e) (conservative mode: an upper-side
      estimate of the residual count, since each selected descendant removes only C̃ − slack);
    * ``count``: the released noisy count C̃ of the prefix before any subtraction; with
      probability 1 − β (for all reported prefixes at once) the prefix's true count lies in
      ``[lower, upper]``, and it is within ``alpha1`` of ``count``;
    * ``residual_lower``: a lower bound, holding with the same probability, on the prefix's true
      count less the true counts of its maximal reported descendants: ``lower`` less their
      ``upper`` (clipped at 0);
    * ``verdict``: ``heavy`` when ``residual_lower >= tau`` (the prefix is heavy with probability
      >= 1 − β even after removing every reported descendant), else ``possible`` (reported because
      its residual may reach τ; the intervals do not prove it).

    :meth:`as_dict` (the report's item) shows the residual clipped to ``[0, count]``: a residual
    cannot exceed the count it is taken from, and both are noisy values of the same release.
    """

    level: int
    key: int
    prefix: str
    residual: float
    count: float
    alpha1: float
    lower: float
    upper: float
    residual_lower: float = 0.0
    verdict: str = "possible"

    def as_dict(self) -> dict:
        return {
            "prefix": self.prefix,
            "level": self.level,
            "verdict": self.verdict,
            "count": whole(self.count),
            "residual": whole(min(max(self.residual, 0.0), max(self.count, 0.0))),
            "lower": round(self.lower, 1),
            "upper": round(self.upper, 1),
            "residual_lower": round(self.residual_lower, 1),
        }


def whole(value: float) -> int | float:
    """A released value as the mechanism made it: an integer where it is one (the release adds
    integer noise to integer counts: ``633``, not ``633.0``), else rounded to one decimal."""
    rounded = round(float(value), 1)
    return int(rounded) if rounded.is_integer() else rounded


def with_verdicts(items: list[HHHItem], hierarchy: Hierarchy, tau: float) -> list[HHHItem]:
    """``items`` with ``residual_lower`` and ``verdict`` set (post-processing of released values).

    A reported prefix's maximal reported descendants are the reported prefixes below it with no
    reported prefix in between; since every interval holds at once with probability >= 1 − β,
    ``lower(e) − Σ upper(d)`` over them bounds from below the true count of ``e`` outside them."""
    chosen = {(it.level, it.key) for it in items}
    below: dict[tuple[int, int], float] = {}
    for it in items:
        if it.level == 0:
            continue
        nearest = (0, 0)
        for up in range(it.level - 1, 0, -1):
            ancestor = (up, hierarchy.ancestor(it.key, it.level, up))
            if ancestor in chosen:
                nearest = ancestor
                break
        below[nearest] = below.get(nearest, 0.0) + it.upper
    out = []
    for it in items:
        bound = max(0.0, it.lower - below.get((it.level, it.key), 0.0))
        out.append(replace(it, residual_lower=bound, verdict="heavy" if bound >= tau else "possible"))
    return out


def extract_hhh(
    releases: Iterable[SketchRelease],
    hierarchy: Hierarchy,
    *,
    tau: float,
    calibration: WindowCalibration,
    root_value: float,
    mode: str = "conservative",
) -> list[HHHItem]:
    """Algorithm 4 over the released values; items bottom-up (deepest level first), root last.

    Every release must carry its size bound ``n_upper`` (see :func:`dphhh.privacy.window.assemble_report`)."""
    if mode not in MODES:
        raise UsageError(f"extract_hhh: mode must be one of {', '.join(MODES)}, got {mode!r}")
    h = hierarchy.h
    alpha2 = calibration.alpha2
    slack = calibration.subtraction_slack
    released: dict[int, dict[int, float]] = {level: {} for level in range(0, h + 1)}
    residual: dict[int, dict[int, float]] = {level: {} for level in range(0, h + 1)}
    alpha1: dict[int, dict[int, float]] = {level: {} for level in range(0, h + 1)}
    margin: dict[int, dict[int, float]] = {level: {} for level in range(0, h + 1)}
    bounds: dict[int, dict[int, tuple[float, float]]] = {level: {} for level in range(0, h + 1)}
    worst_alpha1 = alpha2
    for rel in releases:
        if not (1 <= rel.level <= h):
            raise UsageError(f"extract_hhh: release level must be in 1..{h}, got {rel.level}")
        if rel.n_upper is None:
            raise UsageError(
                f"extract_hhh: the release of level {rel.level}, partition {rel.partition} has no size bound"
            )
        a1 = calibration.alpha1(rel.n_upper)
        m = calibration.selection_margin(rel.n_upper)
        worst_alpha1 = max(worst_alpha1, a1)
        for key, noisy in rel.values.items():
            released[rel.level][key] = residual[rel.level][key] = float(noisy)
            alpha1[rel.level][key] = a1
            margin[rel.level][key] = m
            bounds[rel.level][key] = calibration.interval(float(noisy), rel.n_upper)
    released[0][0] = residual[0][0] = float(root_value)
    alpha1[0][0] = worst_alpha1
    margin[0][0] = (
        worst_alpha1
        if calibration.name != "tight"
        else calibration.root_interval(float(root_value))[1] - float(root_value)
    )
    bounds[0][0] = calibration.root_interval(float(root_value))

    selected: list[HHHItem] = []
    for level in range(h, -1, -1):
        for key in sorted(residual[level]):
            value = residual[level][key]
            a1 = alpha1[level][key]
            if mode == "conservative":
                chosen, removed = value + margin[level][key] > tau - worst_alpha1, value - slack
            else:
                chosen, removed = value >= tau, value
            if not chosen:
                continue
            lower, upper = bounds[level][key]
            selected.append(
                HHHItem(level, key, hierarchy.label(key, level), value, released[level][key], a1, lower, upper)
            )
            if level == 0:
                continue
            for up in range(level - 1, 0, -1):
                ancestor = hierarchy.ancestor(key, level, up)
                if ancestor in residual[up]:
                    residual[up][ancestor] -= removed
            residual[0][0] -= removed
    return with_verdicts(selected, hierarchy, tau)
