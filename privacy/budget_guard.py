"""A total privacy budget per period for user-level privacy (docs/ALGORITHMS.md §0).

Event level: tumbling windows are disjoint, so one element is in one window and the window reports
compose in **parallel** (each report's (ε, δ) is the whole stream's). User level: one unit's
elements span many windows, so with respect to a unit the reports compose **sequentially**: k
windows at (ε, δ) each cost (k·ε, k·δ) (basic composition). :class:`BudgetGuard` bounds that sum
by a total per period:

* ``period = "day"``: per UTC calendar day; a window belongs to the day its **start** falls in
  (a window straddling midnight counts for the earlier day). The guarantee is then
  (total.ε, total.δ)-DP with respect to all elements of one unit within one UTC day.
* ``period = "deployment"``: over the whole deployment, from its first scheduled window.

The decision is deterministic and data-independent: it depends only on the schedule (window
start, window length, the deployment's first window start) and the budgets, never on the data,
so refusing a window leaks nothing. The i-th window of its period (i = 0, 1, …, counted in steps
of the window length from the later of the period start and the schedule start) is allowed iff
``(i+1)·ε <= total.ε`` and ``(i+1)·δ <= total.δ`` (relative tolerance 1e-9 for float sums). It
assumes every window of a period is released with the same ``per_window`` budget; a refused window
spends nothing and every later window of the period is refused too. The job must still publish a
report for a refused window (saying so), on schedule, so that the schedule stays data-independent.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import dataclass
from typing import Any

from dphhh.sketches.errors import UsageError

from .params import PrivacyBudget

__all__ = ["BudgetGuard", "GuardDecision", "PERIODS", "DAY_MS"]

PERIODS = ("day", "deployment")
DAY_MS = 86_400_000
_TOLERANCE = 1e-9


@dataclass(frozen=True)
class GuardDecision:
    """Whether one window may be released, and the period's accounting around it.

    * ``allowed``: release the window (``True``) or publish a refusal instead.
    * ``period``: ``"YYYY-MM-DD"`` (UTC day of the window start) or ``"deployment"``.
    * ``spent_before`` / ``spent_after``: (ε, δ) spent in the period before / after this window
      (equal when refused); ``remaining``: (ε, δ) left after this window (never negative).
    * ``reason``: ``""`` when allowed, otherwise why not.
    * ``window_index``: i, the window's position in its period; ``windows_allowed``: how many
      windows of the period the total budget allows.
    """

    allowed: bool
    period: str
    spent_before: tuple[float, float]
    spent_after: tuple[float, float]
    remaining: tuple[float, float]
    reason: str
    window_index: int = 0
    windows_allowed: int = 0

    def as_dict(self) -> dict[str, Any]:
        """Plain dict for reports."""
        pair = lambda p: {"epsilon": p[0], "delta": p[1]}  # noqa: E731
        return {
            "allowed": self.allowed,
            "period": self.period,
            "window_index": self.window_index,
            "windows_allowed": self.windows_allowed,
            "spent_before": pair(self.spent_before),
            "spent_after": pair(self.spent_after),
            "remaining": pair(self.remaining),
            "reason": self.reason,
        }


def _check_ms(name: str, value: Any, minimum: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise UsageError(f"BudgetGuard: {name} must be an integer (milliseconds), got {value!r}")
    if minimum is not None and value < minimum:
        raise UsageError(f"BudgetGuard: {name} must be >= {minimum}, got {value!r}")
    return value


def _max_windows(total: float, per_window: float) -> float:
    """Largest k with ``k·per_window <= total·(1 + 1e-9)`` (``inf`` when per_window is 0)."""
    if per_window == 0.0:
        return math.inf
    limit = total * (1 + _TOLERANCE)
    k = max(0, math.floor(limit / per_window))
    while k > 0 and k * per_window > limit:
        k -= 1
    while (k + 1) * per_window <= limit:
        k += 1
    return k


@dataclass(frozen=True)
class BudgetGuard:
    """Total user-level budget ``total`` per ``period`` (``"day"`` or ``"deployment"``)."""

    total: PrivacyBudget
    period: str = "day"

    def __post_init__(self) -> None:
        if not isinstance(self.total, PrivacyBudget):
            raise UsageError(f"BudgetGuard: total must be a PrivacyBudget, got {type(self.total).__name__}")
        if self.period not in PERIODS:
            raise UsageError(f"BudgetGuard: period must be one of {', '.join(PERIODS)}, got {self.period!r}")

    def decide(
        self, window_start_ms: int, window_ms: int, per_window: PrivacyBudget, schedule_start_ms: int
    ) -> GuardDecision:
        """Decide whether the window starting at ``window_start_ms`` (epoch ms, UTC) may be released
        at ``per_window``; ``schedule_start_ms`` is the start of the deployment's first window."""
        start = _check_ms("window_start_ms", window_start_ms)
        length = _check_ms("window_ms", window_ms, 1)
        first = _check_ms("schedule_start_ms", schedule_start_ms)
        if not isinstance(per_window, PrivacyBudget):
            raise UsageError(f"BudgetGuard: per_window must be a PrivacyBudget, got {type(per_window).__name__}")
        if start < first:
            raise UsageError(f"BudgetGuard: window_start_ms {start} is before the schedule start {first}")
        if self.period == "day":
            day_start = (start // DAY_MS) * DAY_MS
            origin = max(day_start, first)
            label = _dt.datetime.fromtimestamp(day_start / 1000, tz=_dt.UTC).strftime("%Y-%m-%d")
            name = f"day {label} (UTC)"
        else:
            origin = first
            label = name = "deployment"
        index = (start - origin) // length
        by_eps = _max_windows(self.total.epsilon, per_window.epsilon)
        by_delta = _max_windows(self.total.delta, per_window.delta)
        limit = min(by_eps, by_delta)
        allowed = index < limit
        spent_n = min(index, limit)
        before = (spent_n * per_window.epsilon, spent_n * per_window.delta)
        after = before if not allowed else ((spent_n + 1) * per_window.epsilon, (spent_n + 1) * per_window.delta)
        remaining = (max(0.0, self.total.epsilon - after[0]), max(0.0, self.total.delta - after[1]))
        reason = "" if allowed else self._reason(name, int(limit), per_window, binding_eps=by_eps <= by_delta)
        return GuardDecision(
            allowed=allowed,
            period=label,
            spent_before=before,
            spent_after=after,
            remaining=remaining,
            reason=reason,
            window_index=int(index),
            windows_allowed=int(limit),
        )

    def _reason(self, name: str, limit: int, per_window: PrivacyBudget, *, binding_eps: bool) -> str:
        if binding_eps:
            what, one, total = "ε", per_window.epsilon, self.total.epsilon
        else:
            what, one, total = "δ", per_window.delta, self.total.delta
        if limit == 0:
            return (
                f"privacy budget of {name} too small: one window costs {what}={one:g}, "
                f"more than the {what}={total:g} total"
            )
        windows = "window" if limit == 1 else "windows"
        return f"privacy budget of {name} exhausted: {limit} {windows} of {what}={one:g} spent of {total:g} total"
