"""The per-window budget statement of one report (its ``budget`` field).

It says what one window's report cost and which guarantee it carries: the per-level releases
(Algorithm 3) at ((1 − s)·ε, δ) and the private sub-stream sizes at (s·ε, 0), composed
sequentially into the window's (ε, δ); disjoint tumbling windows compose in parallel (docs/ALGORITHMS.md §0),
provided every window is reported once, on schedule, and never re-released with fresh noise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dphhh.sketches.errors import UsageError

from .calibration import WindowCalibration
from .params import HHHParams, PrivacyBudget

__all__ = ["budget_statement"]


def budget_statement(
    params: HHHParams,
    *,
    h: int,
    unit: Any = None,
    budget: PrivacyBudget | None = None,
    spending: Mapping[str, Any] | None = None,
    key_collision_delta: float = 0.0,
) -> dict[str, Any]:
    """The budget statement of one window released with ``params`` over ``h`` sketched levels.

    With a user-level ``unit`` (:class:`~dphhh.privacy.unit.PrivacyUnit`), ``params`` are its group-privacy
    calibration of ``budget``: the entry states ``budget`` at the unit's level and keeps the
    event-level (ε', δ') beside it. ``spending`` is the budget guard's account after this window.
    """
    rel = params.release_budget
    size = params.size_budget
    cal = WindowCalibration.of(params, h)
    scales = cal.scales
    total = rel + size
    total = PrivacyBudget(total.epsilon, total.delta + key_collision_delta)
    release_entry: dict[str, Any] = {
        "mechanism": f"misra_gries_release/{params.variant}",
        "calibration": params.calibration,
        "epsilon": rel.epsilon,
        "delta": rel.delta,
        "per_level": {"epsilon": rel.epsilon / h, "delta": rel.delta / h},
        "sketches": h * params.partitions,
        "noise": "discrete_laplace",
        "threshold": scales.threshold,
        "scales": {"gamma": scales.gamma, "w": scales.w},
    }
    if scales.w_release is not None:
        release_entry["scales"].update({"gamma_release": scales.gamma_release, "w_release": scales.w_release})
    event_text = (
        f"({total.epsilon:g}, {total.delta:g})-DP with respect to adding or removing one element of this window"
    )
    out: dict[str, Any] = {
        "unit": "event",
        "guarantee": event_text,
        "epsilon": total.epsilon,
        "delta": total.delta,
        "composition": "sequential within the window; parallel across disjoint windows",
    }
    if unit is not None and (unit.kind == "user" or unit.weight_cap > 1):
        if budget is None:
            raise UsageError("budget_statement: a user-level or weighted unit needs the budget it is stated at")
        calibrated = unit.event_budget(PrivacyBudget(budget.epsilon, budget.delta - key_collision_delta))
        mechanism = rel + size
        if not (
            math.isclose(calibrated.epsilon, mechanism.epsilon, rel_tol=1e-9)
            and math.isclose(calibrated.delta, mechanism.delta, rel_tol=1e-9)
        ):
            raise UsageError(  # never claim a unit-level guarantee the mechanism's calibration does not give
                f"budget_statement: the mechanism runs at ({mechanism.epsilon:g}, {mechanism.delta:g}), not at the group-privacy "
                f"calibration ({calibrated.epsilon:g}, {calibrated.delta:g}) of the stated budget"
            )
        out.update(
            {
                "unit": unit.kind,
                "guarantee": unit.guarantee(budget),
                "epsilon": budget.epsilon,
                "delta": budget.delta,
                "event_level": {
                    "epsilon": mechanism.epsilon,
                    "delta": mechanism.delta,
                    "guarantee": event_text,
                    "calibration": unit.calibration_text(),
                },
            }
        )
        if unit.kind == "user":
            out.update(
                {
                    "unit_key": unit.key,
                    "unit_cap": unit.cap,
                    "composition": "sequential within the window; across windows sequential for one unit "
                    "(a unit's elements span windows), parallel for one element",
                }
            )
        if unit.weight_cap > 1:
            out.update({"weight": unit.weight, "weight_cap": unit.weight_cap})
        event_text_unit = "one unit element (one unit of a record's weight)"
        out["event_level"]["guarantee"] = event_text.replace("one element", event_text_unit)
    if spending is not None:
        out["spending"] = dict(spending)
    out["entries"] = [
        release_entry,
        {
            "mechanism": "substream_sizes" if cal.size_releases > 1 else "window_size",
            "epsilon": size.epsilon,
            "delta": 0.0,
            "releases": cal.size_releases,
            "noise": "discrete_laplace",
            "scale": cal.size_scale,
        },
    ]
    if key_collision_delta:
        out["entries"].append(
            {
                "mechanism": "hashed_keys",
                "epsilon": 0.0,
                "delta": key_collision_delta,
                "what": "chance collisions of keyed-hash keys (docs/calibration.md §8)",
            }
        )
    return out
