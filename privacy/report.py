"""The one builder of the ``dphhh.report/2`` schema (batch command, stream and snapshots).

``diagnostics`` is the report's place for public, non-numeric notes about how it was made. It
never carries a count of records — skipped, out of domain, late, users (docs/ALGORITHMS.md §0.1 f): such a
count is an exact statistic of the private input. :func:`build_report` therefore refuses any
number in it (and the old ``skipped`` key); counts of unparsable records are operational and go
to stderr, never into a report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from dphhh.sketches.errors import UsageError

from .calibration import WindowCalibration
from .hhh import HHHItem
from .params import HHHParams

__all__ = ["SCHEMA", "VERDICT_TEXT", "build_report", "build_refused_report", "public_diagnostics", "ranked"]

#: Version 2 (this one): items carry ``residual`` (was ``estimate``), ``verdict`` and
#: ``residual_lower``; ``guarantees.verdicts`` explains the verdicts.
SCHEMA = "dphhh.report/2"


def ranked(items: Iterable[Mapping[str, Any]]) -> list[Any]:
    """HHH rows as a top-N list, the one order of every HHH output (reports, ``exact``, the text, JSON
    and CSV of both): the largest residual first, then the largest count, the coarser level, the
    prefix. A function of the released (or, for ``exact``, the exact) values only: post-processing."""
    return sorted(
        items, key=lambda x: (-float(x.get("residual") or 0), -float(x.get("count") or 0), x["level"], str(x["prefix"]))
    )


def public_diagnostics(diagnostics: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``diagnostics`` after checking that it holds no count of records.

    Strings, booleans, ``None`` and lists / mappings of them are allowed; a number anywhere, or a
    ``skipped`` key, raises ``ValueError("build_report: diagnostics ...")``.
    """

    def check(value: Any, where: str) -> Any:
        if value is None or isinstance(value, (str, bool)):
            return value
        if isinstance(value, Mapping):
            out = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise UsageError(f"build_report: diagnostics keys must be strings, got {key!r} at {where}")
                if key == "skipped":
                    raise UsageError(
                        f"build_report: diagnostics must not carry skip counts ({where}.skipped): "
                        "counts of records are not published (docs/ALGORITHMS.md §0.1 f)"
                    )
                out[key] = check(item, f"{where}.{key}")
            return out
        if isinstance(value, (list, tuple)):
            return [check(item, f"{where}[{i}]") for i, item in enumerate(value)]
        raise UsageError(
            f"build_report: diagnostics must hold no numbers (a count of records is not "
            f"published, docs/ALGORITHMS.md §0.1 f): {where} has type {type(value).__name__}"
        )

    return check(dict(diagnostics or {}), "diagnostics")


def _coverage_text(p: HHHParams, alpha1: float) -> str:
    if p.mode != "conservative":
        return "none (point mode)"
    if p.tau >= 2 * alpha1:
        return "with probability >= 1 - beta no unreported prefix has residual count above tau - alpha1"
    # A prefix that never passed the release threshold can have a true count up to alpha1 (its
    # counter is below alpha2 and the sketch undercounts by at most n/(kappa+1)); Theorem 4.1.5's
    # argument covers released prefixes only, so coverage needs alpha1 <= tau - alpha1.
    return "void for this window: tau < 2*alpha1, so an unreleased prefix may have residual up to alpha1 > tau - alpha1"


def _params(p: HHHParams, hierarchy_spec: str, h: int, tau_share: float | None = None) -> dict[str, Any]:
    """A report's ``params`` (released and refused reports alike)."""
    return {
        "epsilon": p.epsilon,
        "delta": p.delta,
        "beta": p.beta,
        "tau": p.tau,
        "counters": p.counters,
        "hierarchy": hierarchy_spec,
        "h": h,
        "variant": p.variant,
        "mode": p.mode,
        "partitions": p.partitions,
        "calibration": p.calibration,
        **({} if tau_share is None else {"tau_share": tau_share}),
    }


#: What the two verdicts of a reported prefix mean (privacy.hhh.with_verdicts).
VERDICT_TEXT = {
    "heavy": "with probability >= 1 - beta its true count, less the true counts of its reported "
    "descendants, is at least tau (residual_lower >= tau)",
    "possible": "reported because its residual may reach tau; the intervals do not prove it",
}


def build_report(
    *,
    params: HHHParams,
    hierarchy_spec: str,
    h: int,
    items: Iterable[HHHItem],
    n_noisy: int,
    alpha1: float,
    calibration: WindowCalibration,
    statement: Mapping[str, Any],
    window: Mapping[str, Any] | None = None,
    diagnostics: Mapping[str, Any] | None = None,
    secure_randomness: bool = True,
    tau_share: float | None = None,
    coverage: tuple[bool, str] | None = None,
) -> dict[str, Any]:
    """Assemble a report. Every value in it is noisy or public (parameters, guarantees); the
    ``diagnostics`` are checked by :func:`public_diagnostics` (no count of records). ``coverage``:
    ``(holds, text)`` overriding the 1-D coverage statement (two-dimensional reports)."""
    p = params
    notes = public_diagnostics(diagnostics)
    cal = calibration
    return {
        "schema": SCHEMA,
        "window": {**(window or {}), "n_noisy": int(n_noisy)},
        "params": _params(p, hierarchy_spec, h, tau_share),
        "guarantees": {
            "alpha1": round(alpha1, 3),
            "alpha2": round(cal.alpha2, 3),
            "threshold": round(cal.threshold, 3),
            "noise_bound": cal.noise_bound,
            "beta": p.beta,
            "accuracy": (
                "with probability >= 1 - beta every reported prefix's true count lies in [lower, upper] "
                "= [count - noise_bound, count + noise_bound + n_upper/(counters+1)] (release noise, then the "
                "sketch's undercount), clipped at 0, and within alpha1 of count; residual is the count after "
                "removing the reported descendants (capped at count)"
                + (" (conservative: may exceed the true residual)" if p.mode == "conservative" else "")
            ),
            "coverage_holds": coverage[0] if coverage else p.mode == "conservative" and p.tau >= 2 * alpha1,
            "coverage": coverage[1] if coverage else _coverage_text(p, alpha1),
            "verdicts": VERDICT_TEXT,
            "privacy": statement["guarantee"]
            if secure_randomness
            else ("none: seeded noise (NOT private); with secure noise: " + statement["guarantee"]),
            "randomness": "secure" if secure_randomness else "seeded: NOT private, for experiments only",
        },
        "budget": dict(statement),
        "hhh": ranked(item.as_dict() for item in items),
        "diagnostics": notes,
    }


def build_refused_report(
    *,
    params: HHHParams,
    hierarchy_spec: str,
    h: int,
    reason: str,
    statement: Mapping[str, Any],
    window: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report of a window whose release the budget guard refused.

    It keeps the fixed schedule (one report per window) and carries nothing computed from the
    window's data: no noisy size, no prefix, zero budget spent; ``refused`` says why."""
    p = params
    return {
        "schema": SCHEMA,
        "window": dict(window or {}),
        "refused": reason,
        "params": _params(p, hierarchy_spec, h),
        "guarantees": {"privacy": "nothing released: " + reason},
        "budget": dict(statement),
        "hhh": [],
        "diagnostics": {},
    }
