"""The privacy unit: what one report protects (docs/ALGORITHMS.md §0).

* ``event`` (default): two input streams are neighbours if one has one extra element. A window's
  report released at (ε, δ) is (ε, δ)-DP with respect to adding or removing one element of the
  window.
* ``user``: a *privacy-unit key* (for example the source address when the hierarchy is over
  destination addresses, or a JSON field) groups elements into units. Each unit is capped at ``m``
  elements per window (:class:`~dphhh.privacy.unit_cap.UnitCap`; the excess is dropped and counted), so
  adding or removing *all* elements of one unit changes at most ``m`` elements of what the sketches
  see. The event-level mechanism is calibrated at ``ε' = ε/m``, ``δ' = δ/(m·e^ε)``
  (:meth:`PrivacyUnit.event_budget`) and group privacy turns that into (ε, δ)-DP with respect to one
  unit (:meth:`PrivacyUnit.cost`).

A :class:`PrivacyUnit` is immutable and validated at construction; its errors are prefixed
``PrivacyUnit:``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dphhh.sketches.errors import UsageError

from .params import PrivacyBudget, check_int

__all__ = ["PrivacyUnit", "UNIT_KINDS", "MAX_WEIGHT_CAP"]

UNIT_KINDS = ("event", "user")

#: The largest weight cap W: a sketch's total must stay below 2**62 (its kernel's headroom,
#: :data:`dphhh.sketches.misra_gries.MAX_WEIGHTED_TOTAL`), and at W <= 2**20 that needs at least 2**42
#: (4.4·10^12) records in one window and partition — beyond what one worker reads in a window, so
#: no input can make the sketch refuse an update (docs/ALGORITHMS.md §0.1 h). A larger W would
#: also drown every count in noise (the scale grows with m·W).
MAX_WEIGHT_CAP = 1 << 20


@dataclass(frozen=True)
class PrivacyUnit:
    """The privacy unit of a deployment.

    * ``kind``: ``"event"`` (one element) or ``"user"`` (all elements of one unit).
    * ``key``: what identifies a unit, for reports, e.g. ``"source address"`` or
      ``"json field 'user'"``; required (non-empty) for ``user``.
    * ``cap``: ``m``, the most elements one unit contributes per window; an integer >= 1 for
      ``user`` and exactly 1 for ``event``.
    * ``weight_cap``: ``W``, for weighted records (flow records counted by packets or bytes, spec
      §2 "Weighted elements"): each record's weight is clipped to W and the sketch inserts it as
      that many unit elements, so one record is at most W unit elements and one user unit at most
      m·W. 1 (default) for unweighted elements.
    * ``weight``: what a record's weight counts (``"packets"``, ``"bytes"``), required when
      ``weight_cap`` > 1; for reports.

    The group-privacy calibration runs over :attr:`group_size` = m·W unit elements.
    """

    kind: str = "event"
    key: str = ""
    cap: int = 1
    weight_cap: int = 1
    weight: str = ""

    def __post_init__(self) -> None:
        owner = "PrivacyUnit"
        if self.kind not in UNIT_KINDS:
            raise UsageError(f"{owner}: kind must be one of {', '.join(UNIT_KINDS)}, got {self.kind!r}")
        if not isinstance(self.key, str):
            raise UsageError(f"{owner}: key must be a string, got {type(self.key).__name__}")
        check_int(owner, "cap", self.cap, 1)
        if self.kind == "event" and self.cap != 1:
            raise UsageError(f"{owner}: cap must be 1 for the event-level unit, got {self.cap!r}")
        if self.kind == "user" and not self.key.strip():
            raise UsageError(f"{owner}: key must name what identifies a unit (e.g. 'source address'), got {self.key!r}")
        check_int(owner, "weight_cap", self.weight_cap, 1)
        if self.weight_cap > MAX_WEIGHT_CAP:
            raise UsageError(
                f"{owner}: weight_cap must be at most 2**20 = {MAX_WEIGHT_CAP:,} (a window's total weight must "
                f"stay far below 2**62; counts at such a W would be noise), got {self.weight_cap!r}"
            )
        if not isinstance(self.weight, str):
            raise UsageError(f"{owner}: weight must be a string, got {type(self.weight).__name__}")
        if self.weight_cap > 1 and not self.weight.strip():
            raise UsageError(
                f"{owner}: weight must say what a record's weight counts (e.g. 'packets') when "
                f"weight_cap > 1, got {self.weight!r}"
            )

    @property
    def group_size(self) -> int:
        """Unit elements one privacy unit can contribute per window: m·W (1 for plain events)."""
        return self.cap * self.weight_cap

    # -- calibration ---------------------------------------------------------------------------
    def event_budget(self, budget: PrivacyBudget) -> PrivacyBudget:
        """The event-level budget (ε', δ') at which to run the per-element mechanism.

        ``event``: ``budget`` unchanged. ``user`` with cap m: ``ε' = ε/m``, ``δ' = δ/(m·e^ε)``.
        With a weight cap W, m is replaced by the group size m·W (one record = at most W unit
        elements).

        Derivation (group privacy): if a mechanism is (ε', δ')-DP for inputs that differ in one
        element, then for inputs that differ in k elements it is
        ``(k·ε', k·e^{(k−1)ε'}·δ')``-DP (chain the k one-element steps; the i-th step's δ' is
        multiplied by ``e^{(i−1)ε'} <= e^{(k−1)ε'}``). Capping makes one unit at most ``k = m``
        elements of a window, and with ``ε' = ε/m``, ``δ' = δ/(m·e^ε)`` this is
        ``(ε, e^{(m−1)ε/m}·δ/e^ε) = (ε, e^{−ε/m}·δ)``, which is ``<= (ε, δ)``.
        ``ε'`` is rounded down if needed so that ``m·ε' <= ε`` holds in floating point too.
        """
        if not isinstance(budget, PrivacyBudget):
            raise TypeError(f"PrivacyUnit: budget must be a PrivacyBudget, got {type(budget).__name__}")
        m = self.group_size
        if self.kind == "event" and m == 1:
            return budget
        eps = budget.epsilon / m
        while eps * m > budget.epsilon:
            eps = math.nextafter(eps, 0.0)
        # δ·e^{−ε}/m rather than δ/(m·e^ε): no overflow for large ε.
        delta = budget.delta * math.exp(-budget.epsilon) / m
        if budget.delta > 0 and delta == 0.0:
            raise UsageError(
                f"PrivacyUnit: the group-privacy delta/(m*e^epsilon) underflows to 0 at epsilon = "
                f"{budget.epsilon:g} over m = {m} elements: use a smaller epsilon"
            )
        return PrivacyBudget(eps, delta)

    def cost(self, event_budget: PrivacyBudget, distance: int) -> PrivacyBudget:
        """Privacy cost of the mechanism calibrated at ``event_budget`` = (ε', δ') for inputs that
        differ in ``distance`` **elements** (OpenDP-style privacy map).

        Group privacy: ``(d·ε', d·e^{(d−1)ε'}·δ')`` for ``d = distance >= 1``. Raises
        ``ValueError`` if the δ part reaches 1 (no guarantee at that distance).
        """
        if not isinstance(event_budget, PrivacyBudget):
            raise TypeError(f"PrivacyUnit: event_budget must be a PrivacyBudget, got {type(event_budget).__name__}")
        d = check_int("PrivacyUnit", "distance", distance, 1)
        eps = d * event_budget.epsilon
        if event_budget.delta == 0.0:
            return PrivacyBudget(eps, 0.0)
        exponent = (d - 1) * event_budget.epsilon
        log_delta = math.log(d) + exponent + math.log(event_budget.delta)
        if log_delta >= 0.0:
            raise UsageError(f"PrivacyUnit: no (ε, δ) guarantee at distance {d}: the group-privacy δ reaches 1")
        if exponent > 700.0:  # e^exponent would overflow; log_delta < 0 keeps the result finite
            return PrivacyBudget(eps, math.exp(log_delta))
        return PrivacyBudget(eps, d * math.exp(exponent) * event_budget.delta)

    def user_cost(self, event_budget: PrivacyBudget) -> PrivacyBudget:
        """Cost with respect to one whole unit: :meth:`cost` at distance m·W (its unit elements)."""
        return self.cost(event_budget, self.group_size)

    # -- statements ----------------------------------------------------------------------------
    def guarantee(self, budget: PrivacyBudget) -> str:
        """One sentence stating the guarantee of a window report released at ``budget`` (ε, δ)."""
        if not isinstance(budget, PrivacyBudget):
            raise TypeError(f"PrivacyUnit: budget must be a PrivacyBudget, got {type(budget).__name__}")
        head = f"({budget.epsilon:g}, {budget.delta:g})-DP with respect to adding or removing"
        weighted = self.weight_cap > 1
        thing = "record" if weighted else "element"
        weights = f", each record weighted by {self.weight} clipped at {self.weight_cap}" if weighted else ""
        if self.kind == "event":
            return f"{head} one {thing} of this window{weights}"
        plural = thing if self.cap == 1 else thing + "s"
        return (
            f"{head} all {thing}s of one privacy unit ({self.key}), "
            f"each unit capped at {self.cap} {plural} per window{weights}"
        )

    def calibration_text(self) -> str:
        """How the event-level mechanism is calibrated for this unit (for the budget statement)."""
        parts = []
        if self.kind == "user":
            parts.append(f"{self.cap} {'records' if self.weight_cap > 1 else 'elements'} per unit")
        if self.weight_cap > 1:
            parts.append(f"weight <= {self.weight_cap} {self.weight} per record")
        return f"group privacy over {self.group_size} unit elements ({', '.join(parts)})"

    def as_dict(self) -> dict[str, Any]:
        """``{"unit": kind, "key": key, "cap": m}`` (plus the weight cap and weight when weighted)."""
        out: dict[str, Any] = {"unit": self.kind, "key": self.key, "cap": self.cap}
        if self.weight_cap > 1:
            out.update({"weight_cap": self.weight_cap, "weight": self.weight})
        return out
