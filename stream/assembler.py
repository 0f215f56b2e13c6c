"""Logic of the release operator: one window's sketch releases → one report, exactly once.

The operator (a thin Flink adapter in :mod:`dphhh.stream.job`) gathers the
:class:`~dphhh.privacy.hhh.SketchRelease` values of a window from every (level, partition) sketch
operator and, when the window's release time passes, calls :meth:`WindowAssembler.report`:

* if the durable ledger already holds the window's report (a replay after failure), those bytes
  are returned unchanged — the window is never recomputed with fresh noise;
* the report is **not** stored here: :class:`dphhh.stream.publisher.ReportPublisher` stores it in the
  ledger at its publication time, before any reader can see it;
* otherwise, if a budget guard is configured and refuses the window (its period's budget is
  spent — a decision that depends on the window's start only, never on data), a *refused*
  report without any data-derived value is stored and returned;
* otherwise sketches that saw no element in the window are released as empty (their noisy size
  is still drawn: an empty sub-stream is indistinguishable from a released one; in the job every
  sketch releases every window itself, so this fills in only windows a restart skipped), Algorithm
  4 runs over the hierarchy keyed with the window's hash key (:mod:`dphhh.sketches.keyed`) and the report
  is encoded canonically.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from dphhh.privacy.budget_guard import BudgetGuard
from dphhh.privacy.hhh import SketchRelease
from dphhh.privacy.params import HHHParams, PrivacyBudget
from dphhh.privacy.randomness import RandomSource, SecureRandomSource, SeededRandomSource
from dphhh.privacy.report import build_refused_report
from dphhh.privacy.unit import PrivacyUnit
from dphhh.privacy.window import assemble_report, release_sketch
from dphhh.sketches.hierarchy import Hierarchy
from dphhh.sketches.keyed import KeySecret

from .ledger import ReleaseLedger
from .schedule import ReleaseSchedule

__all__ = ["WindowAssembler", "encode_report", "noise_source_factory", "sketch_id", "sketch_of_id"]


def sketch_id(level: int, partition: int, partitions: int) -> int:
    """Dense id of the (level, partition) sketch, the key of the sketch operators."""
    return (level - 1) * partitions + partition


def sketch_of_id(sid: int, partitions: int) -> tuple[int, int]:
    """Inverse of :func:`sketch_id`."""
    return sid // partitions + 1, sid % partitions


def encode_report(report: dict[str, Any]) -> bytes:
    """Canonical JSON bytes of a report (sorted keys, compact): what the ledger stores."""
    return json.dumps(report, sort_keys=True, separators=(",", ":")).encode("utf-8")


def noise_source_factory(seed: int | None, attempt_salt: int = 0) -> Callable[[int, int, int], RandomSource]:
    """Noise source per (window, level, partition): secure, or seeded for tests (NOT private).

    ``attempt_salt`` (tests only, ``testing.noise_per_attempt``): a value drawn afresh by every
    attempt of an operator and mixed into the seed, so a seeded window released again after a
    restore draws other noise — as the secure source does — and a republished report that was
    recomputed instead of read back from the ledger shows as a different one."""
    if seed is None:
        secure = SecureRandomSource()
        return lambda window, level, partition: secure
    if attempt_salt:
        return lambda window, level, partition: SeededRandomSource(
            np.random.default_rng([seed, window & 0xFFFFFFFFFFFF, level, partition, attempt_salt])
        )
    return lambda window, level, partition: SeededRandomSource(
        np.random.default_rng([seed, window & 0xFFFFFFFFFFFF, level, partition])
    )


class WindowAssembler:
    """Turns one window's releases into its report bytes, through the ledger."""

    def __init__(
        self,
        hierarchy: Hierarchy,
        params: HHHParams,
        schedule: ReleaseSchedule,
        ledger: ReleaseLedger,
        *,
        seed: int | None = None,
        unit: PrivacyUnit | None = None,
        budget: PrivacyBudget | None = None,
        guard: BudgetGuard | None = None,
        secret: KeySecret | None = None,
        key_collision_delta: float = 0.0,
        attempt_salt: int = 0,
    ) -> None:
        """``unit``/``budget``: the privacy unit and its per-window budget (``params`` are then the
        unit's calibration); ``guard``: the budget guard (``None``: every window is released);
        ``secret``: the deployment's hash key (hashed-key hierarchies)."""
        self.secret = secret
        self.key_collision_delta = key_collision_delta
        self.unit = unit if unit is not None else PrivacyUnit()
        self.budget = budget if budget is not None else PrivacyBudget(params.epsilon, params.delta)
        self.guard = guard
        self.hierarchy = hierarchy
        self.params = params
        self.schedule = schedule
        self.ledger = ledger
        self.seed = seed
        self.noise_for = noise_source_factory(seed, attempt_salt)

    def report(self, window_start: int, releases: Iterable[SketchRelease]) -> tuple[bytes, bool]:
        """(report bytes, stored) for the window; ``stored`` is True when read from the ledger."""
        stored = self.ledger.get(window_start)
        if stored is not None:
            return stored, True
        spending = None
        if self.guard is not None:
            decision = self.guard.decide(window_start, self.schedule.size_ms, self.budget, self.schedule.origin_ms)
            spending = _spending(decision, self.guard)
            if not decision.allowed:
                return encode_report(self._refused(window_start, decision, spending)), False
        by_sketch = {(r.level, r.partition): r for r in releases}
        h, parts = self.hierarchy.h, self.params.partitions
        for level in range(1, h + 1):
            for p in range(parts):
                if (level, p) not in by_sketch:
                    by_sketch[(level, p)] = release_sketch(
                        level, p, {}, 0, params=self.params, h=h, rng=self.noise_for(window_start, level, p)
                    )
        hierarchy = self.hierarchy
        if hierarchy.hashed_keys:  # this window's keys: its own hash key, fresh label tables
            hierarchy = hierarchy.keyed(None if self.secret is None else self.secret.window(window_start))
        report = assemble_report(
            by_sketch.values(),
            hierarchy,
            self.params,
            window=self.schedule.describe(window_start),
            secure_randomness=self.seed is None,
            unit=self.unit,
            budget=self.budget,
            spending=spending,
            key_collision_delta=self.key_collision_delta,
        )
        return encode_report(report), False

    def _refused(self, window_start: int, decision, spending: dict[str, Any]) -> dict[str, Any]:
        statement = {
            "unit": self.unit.kind,
            "epsilon": 0.0,
            "delta": 0.0,
            "guarantee": "nothing released",
            "spending": spending,
        }
        return build_refused_report(
            params=self.params,
            hierarchy_spec=self.hierarchy.spec(),
            h=self.hierarchy.h,
            reason=decision.reason,
            statement=statement,
            window=self.schedule.describe(window_start),
        )


def _spending(decision, guard: BudgetGuard) -> dict[str, Any]:
    """The budget guard's account after a window (public: it depends on window starts only)."""

    def pair(b) -> dict[str, float]:
        eps, delta = (b.epsilon, b.delta) if hasattr(b, "epsilon") else b
        return {"epsilon": round(float(eps), 12), "delta": float(delta)}

    return {
        "period": decision.period,
        "budget_period": guard.period,
        "total": pair(guard.total),
        "spent": pair(decision.spent_after),
        "remaining": pair(decision.remaining),
        "allowed": decision.allowed,
    }
