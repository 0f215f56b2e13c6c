"""The per-window budget statement (the privacy ledger entry of one report).

It says what one window's report cost and which guarantee it carries: the per-level releases
(Algorithm 3) at ((1 − s)·ε, δ) and the private sub-stream sizes at (s·ε, 0), composed
sequentially into the window's (ε, δ); disjoint tumbling windows compose in parallel (spec §0),
provided every window is reported once, on schedule, and never re-released with fresh noise.
"""

from __future__ import annotations

from typing import Any

from .params import HHHParams
from .release import ReleaseScales
from .stream_size import size_scale

__all__ = ["window_ledger"]


def window_ledger(params: HHHParams, *, h: int) -> dict[str, Any]:
    """The ledger entry of one window released with ``params`` over ``h`` sketched levels."""
    rel = params.release_budget
    size = params.size_budget
    scales = ReleaseScales.for_budget(epsilon=rel.epsilon, delta=rel.delta, h=h, variant=params.variant)
    total = rel + size
    release_entry: dict[str, Any] = {
        "mechanism": f"misra_gries_release/{params.variant}",
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
    return {
        "unit": "event",
        "guarantee": f"({total.epsilon:g}, {total.delta:g})-DP with respect to adding or removing one element of this window",
        "epsilon": total.epsilon,
        "delta": total.delta,
        "composition": "sequential within the window; parallel across disjoint windows",
        "entries": [
            release_entry,
            {
                "mechanism": "substream_sizes",
                "epsilon": size.epsilon,
                "delta": 0.0,
                "sketches": h * params.partitions,
                "noise": "discrete_laplace",
                "scale": size_scale(epsilon=size.epsilon, h=h),
            },
        ],
    }
