"""Privacy audit of user level with weighted records (docs/ALGORITHMS.md §0, §2 "Weighted elements", §10).

Flow records at user level per source host (``privacy.unit_key = "source-ipv4"``, ``unit_cap = m``,
weighted by bytes with ``input.weight_cap = W``): the cap keeps each unit's first m *records*, each
record's weight is clipped to W, so one unit adds at most m·W unit elements, and the mechanism runs
at the group calibration over m·W (:meth:`dphhh.privacy.unit.PrivacyUnit.event_budget`).

Neighbours differ in all records of one unit u, on the user-level audit's streams
(:mod:`tests.audit.test_user_level_audit`: base records of many units, some above the cap; stream A
adds ``M = 8m`` records of u, interleaved at fixed positions, whose addresses share
``10.20.0.0/16``). Here every base record weighs 1 and each of u's records 5·W bytes (clipped to W),
and (case ``one_key``) u's /16 sits just below the release threshold T*; in case ``shift`` the
sketches are full (``shift_streams``: κ keys just above T*) and each of u's kept records is a new
key, so its W unit inserts decrement every counter W times. Mechanism under audit, as the stream
job runs it: ``UnitCap(m)`` in arrival order → :func:`~dphhh.sketches.misra_gries.clip_weights` at W →
:class:`~dphhh.sketches.level_sketches.LevelSketches` with weights → the window release (the same
vectorised core and statistics as the user-level audit, the window's exact log-likelihood ratio
among them; 10^6 draws per side for one_key, 2.5·10^5 for shift; Clopper–Pearson at α = 1e-3 per
bound). Measured ε_lb against ε = 1: the correct calibration 0.54 (one_key) and 0.77 (shift),
asserted >= 0.45ε and 0.6ε; broken variants, each flagged:

(a) the calibration over m·W/2 (a 2× break): 1.17 (one_key), 1.64 (shift);
(b) the calibration over m only (the weights forgotten): u moves its prefix by m·W at a
    calibration for m — 2.67;
(c) the calibration over m·W but u's weights not clipped: u moves its prefix by 5·m·W — 3.14.
"""

from __future__ import annotations

import numpy as np
import pytest

from dphhh.privacy.params import PrivacyBudget
from dphhh.privacy.unit import PrivacyUnit
from dphhh.privacy.unit_cap import UnitCap, unit_keys_of
from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.misra_gries import clip_weights
from dphhh.sketches.specs import parse_hierarchy

from .audit_tools import stable_seed
from .test_user_level_audit import (
    CAP,
    CASE_TRIALS,
    COUNTERS,
    DELTA,
    EPSILON,
    HIERARCHY,
    LOWER_BOUND,
    _focus_counts,
    _params,
    _scales,
    _streams,
    audit_sketch_pair,
    check_shift,
    shift_streams,
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


def _audit(budget: PrivacyBudget, seed: int, clip: bool = True, case: str = "one_key"):
    """Both sides through the job's path, then the release audited. ``one_key``: u's prefix (just
    below T*) rises by m·W at every level; ``shift``: u's records are new keys in full sketches
    (:func:`~tests.audit.test_user_level_audit.shift_streams`) and lower every counter by m·W."""
    params = _params(budget)
    h = parse_hierarchy(HIERARCHY).h
    scales, _ = _scales(params, h)
    shift = CAP * (W if clip else RECORD_BYTES)  # what u adds to its prefix's counters
    if case == "shift":
        (va, ua), (vb, ub) = shift_streams(scales.integer_threshold + shift // 2)
        sk_a, sk_b = _weighted_sketches(va, ua, clip), _weighted_sketches(vb, ub, clip)
        check_shift(sk_a, sk_b, shift)
        return audit_sketch_pair(sk_a, sk_b, params, scales.integer_threshold - 1, seed, trials=CASE_TRIALS[case])
    target = scales.integer_threshold - shift // 2  # side B's count of u's /16
    (va, ua), (vb, ub) = _streams(target - CAP)  # the over-cap base unit keeps m records of weight 1
    sk_a, sk_b = _weighted_sketches(va, ua, clip), _weighted_sketches(vb, ub, clip)
    counts_a, counts_b = _focus_counts(sk_a), _focus_counts(sk_b)
    # the audit sits where intended: u moves its prefix by exactly `shift` at every level
    assert counts_b[-1] == target and [a - b for a, b in zip(counts_a, counts_b)] == [shift] * h
    assert [sorted(s.counters()) for _, s in sk_a.items()] == [sorted(s.counters()) for _, s in sk_b.items()]
    return audit_sketch_pair(sk_a, sk_b, params, scales.integer_threshold - 1, seed, trials=CASE_TRIALS[case])


def test_the_group_size_is_m_times_w() -> None:
    """The calibration the stream job uses for flow records at user level weighted by bytes."""
    assert UNIT.group_size == CAP * W
    event = UNIT.event_budget(PrivacyBudget(EPSILON, DELTA))
    assert event.epsilon == pytest.approx(EPSILON / (CAP * W))


@pytest.mark.parametrize("case", ["one_key", "shift"])
def test_weighted_user_level_release_passes_audit(case: str) -> None:
    """Cap m on records + weights clipped at W + calibration over m·W: no loss above ε for removing
    one unit's M > m records of weight > W, in both cases. α = 1e-3 per bound, fixed seeds; the bound
    must also reach ``LOWER_BOUND`` (the audit is not vacuous); measured ε_lb in the module docstring."""
    result = _audit(UNIT.event_budget(PrivacyBudget(EPSILON, DELTA)), stable_seed("wuser", case), case=case)
    print(f"user-level weighted {case}, correct: eps_lb={result.epsilon_lb:.3f} ({result.statistic}: {result.event})")
    assert LOWER_BOUND[case] * EPSILON <= result.epsilon_lb <= EPSILON, result


@pytest.mark.parametrize("case", ["one_key", "shift"])
def test_audit_flags_the_calibration_over_half_the_group(case: str) -> None:
    """Calibrating over m·W/2 (the weight cap taken as W/2) while u keeps m records of weight W —
    worst-case loss 2ε — is detected in both cases (α = 1e-3 per bound, fixed seeds)."""
    half = PrivacyUnit("user", "source address", CAP, weight_cap=W // 2, weight="bytes")
    result = _audit(half.event_budget(PrivacyBudget(EPSILON, DELTA)), stable_seed("wuser-half", case), case=case)
    print(f"user-level weighted {case}, group of m·W/2: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result


def test_audit_flags_the_calibration_that_forgets_the_weights() -> None:
    """Calibrating over m only (as for unweighted records) while each kept record weighs up to W is
    detected: u costs up to W·ε = 4ε (α = 1e-3 per bound, fixed seed)."""
    unweighted = PrivacyUnit("user", "source address", CAP)
    result = _audit(unweighted.event_budget(PrivacyBudget(EPSILON, DELTA)), seed=505)
    print(f"user-level weighted, calibrated over m only: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result


def test_audit_flags_weights_that_are_not_clipped() -> None:
    """Calibrating over m·W but letting u's records keep their 5·W bytes is detected: u costs up to
    5ε (α = 1e-3 per bound, fixed seed)."""
    result = _audit(UNIT.event_budget(PrivacyBudget(EPSILON, DELTA)), seed=606, clip=False)
    print(f"user-level weighted, weights not clipped: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result
