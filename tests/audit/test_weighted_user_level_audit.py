"""Privacy audit of user level with weighted records (docs/ALGORITHMS.md §0, §2 "Weighted elements", §10).

Flow records at user level per source host (``privacy.unit_key = "source-ipv4"``, ``unit_cap = m``,
weighted by bytes with ``input.weight_cap = W``): the cap keeps each unit's first m *records*, each
record's weight is clipped to W, so one unit adds at most m·W unit elements, and the mechanism runs
at the group calibration over m·W (:meth:`privacy.unit.PrivacyUnit.event_budget`).

Neighbours differ in all records of one unit u, on the user-level audit's streams
(:mod:`tests.audit.test_user_level_audit`: base records of many units, some above the cap; stream A
adds ``M = 8m`` records of u, interleaved at fixed positions, whose addresses share
``10.20.0.0/16``). Here every base record weighs 1 and each of u's records 5·W bytes (clipped to W),
and u's /16 sits just below the release threshold T*. Mechanism under audit, as the stream job runs
it: ``UnitCap(m)`` in arrival order → :func:`~sketches.misra_gries.clip_weights` at W →
:class:`~sketches.level_sketches.LevelSketches` with weights → the window release (the same
vectorised core and statistics as the user-level audit, 10^6 draws per side, Clopper–Pearson at
α = 1e-3 per bound). The correct calibration measures ε_lb ≈ 0.3 against ε = 1, so a false alarm
needs both a 1e-3 bound failure and a threefold overshoot: negligible (measured 0.34). Broken
variants, each flagged:

(a) the calibration over m only (the weights forgotten): u moves its prefix by m·W at a
    calibration for m — measured ε_lb ≈ 1.62;
(b) the calibration over m·W but u's weights not clipped: u moves its prefix by 5·m·W — measured
    ε_lb ≈ 2.00.
"""

from __future__ import annotations

import numpy as np
import pytest

from privacy.params import PrivacyBudget
from privacy.unit import PrivacyUnit
from privacy.unit_cap import UnitCap, unit_keys_of
from sketches.hierarchy import parse_hierarchy
from sketches.level_sketches import LevelSketches
from sketches.misra_gries import clip_weights

from .test_user_level_audit import (
    CAP,
    COUNTERS,
    DELTA,
    EPSILON,
    HIERARCHY,
    _focus_counts,
    _params,
    _scales,
    _streams,
    audit_sketch_pair,
)

pytestmark = pytest.mark.audit

W = 4  # the public weight cap: one unit is at most m·W = 32 unit elements
RECORD_BYTES = 5 * W  # each of u's records, before clipping
UNIT = PrivacyUnit("user", "source address", CAP, weight_cap=W, weight="bytes")


def _weighted_sketches(values: np.ndarray, units: np.ndarray, clip: bool = True, batch: int = 500) -> LevelSketches:
    """The job's path: UnitCap(m) on records, then weights clipped at W, then the weighted sketches."""
    victim = unit_keys_of(["victim"])[0]
    weights = np.where(units == victim, RECORD_BYTES, 1).astype(np.int64)
    sketches = LevelSketches(parse_hierarchy(HIERARCHY), COUNTERS)
    capper = UnitCap(CAP)
    for start in range(0, values.size, batch):
        v, u, w = values[start : start + batch], units[start : start + batch], weights[start : start + batch]
        keep = capper.keep(u)
        sketches.update(v[keep], clip_weights(w[keep], W) if clip else w[keep])
    return sketches


def _audit(budget: PrivacyBudget, seed: int, clip: bool = True):
    """Both sides through the job's path, u's prefix just below T*, then the release audited."""
    params = _params(budget)
    h = parse_hierarchy(HIERARCHY).h
    scales, _ = _scales(params, h)
    shift = CAP * (W if clip else RECORD_BYTES)  # what u adds to its prefix's counters
    target = scales.integer_threshold - shift // 2  # side B's count of u's /16
    (va, ua), (vb, ub) = _streams(target - CAP)  # the over-cap base unit keeps m records of weight 1
    sk_a, sk_b = _weighted_sketches(va, ua, clip), _weighted_sketches(vb, ub, clip)
    counts_a, counts_b = _focus_counts(sk_a), _focus_counts(sk_b)
    # the audit sits where intended: u moves its prefix by exactly `shift` at every level
    assert counts_b[-1] == target and [a - b for a, b in zip(counts_a, counts_b)] == [shift] * h
    assert [sorted(s.counters()) for _, s in sk_a.items()] == [sorted(s.counters()) for _, s in sk_b.items()]
    return audit_sketch_pair(sk_a, sk_b, params, scales.integer_threshold - 1, seed)


def test_the_group_size_is_m_times_w() -> None:
    """The calibration the stream job uses for flow records at user level weighted by bytes."""
    assert UNIT.group_size == CAP * W
    event = UNIT.event_budget(PrivacyBudget(EPSILON, DELTA))
    assert event.epsilon == pytest.approx(EPSILON / (CAP * W))


def test_weighted_user_level_release_passes_audit() -> None:
    """Cap m on records + weights clipped at W + calibration over m·W: no loss above ε for removing
    one unit's M > m records of weight > W. α = 1e-3 per bound; measured ε_lb ≈ 0.34."""
    result = _audit(UNIT.event_budget(PrivacyBudget(EPSILON, DELTA)), seed=404)
    print(f"user-level weighted, correct: eps_lb={result.epsilon_lb:.3f} ({result.statistic}: {result.event})")
    assert result.epsilon_lb <= EPSILON, result


def test_audit_flags_the_calibration_that_forgets_the_weights() -> None:
    """Calibrating over m only (as for unweighted records) while each kept record weighs up to W is
    detected: u costs up to W·ε = 4ε; measured ε_lb ≈ 1.62 (α = 1e-3 per bound, fixed seed)."""
    unweighted = PrivacyUnit("user", "source address", CAP)
    result = _audit(unweighted.event_budget(PrivacyBudget(EPSILON, DELTA)), seed=505)
    print(f"user-level weighted, calibrated over m only: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result


def test_audit_flags_weights_that_are_not_clipped() -> None:
    """Calibrating over m·W but letting u's records keep their 5·W bytes is detected: u costs up to
    5ε; measured ε_lb ≈ 2.00 (α = 1e-3 per bound, fixed seed)."""
    result = _audit(UNIT.event_budget(PrivacyBudget(EPSILON, DELTA)), seed=606, clip=False)
    print(f"user-level weighted, weights not clipped: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result
