"""Privacy audit of weighted records (docs/ALGORITHMS.md §2 "Weighted elements", §10): weight cap + group calibration.

Neighbouring streams differ in **one record of weight W** (a flow record counted by packets):

* stream B: weighted records of several prefixes, weights 1..W (heavy-tailed), in a fixed order;
* stream A: B plus one record of weight W for an address of ``10.20.0.0/16``, at a fixed position;
  the /16's count in B sits just below the release threshold, so that record decides whether the
  prefix is released.

Mechanism under audit, as the job runs it: weights clipped to W (:func:`dphhh.sketches.misra_gries.clip_weights`)
→ :class:`~dphhh.sketches.level_sketches.LevelSketches` with weights (each record = W unit inserts in a
row) → the window release with :class:`~dphhh.privacy.params.HHHParams` at
``PrivacyUnit(weight_cap=W, weight="packets").event_budget((ε, δ))`` = (ε/W, δ/(W·e^ε)). The
sketches are deterministic; the noise is drawn 10^6 times per side through the audited core of
``release_window`` (``test_user_level_audit._draw``, checked there draw for draw against
``release_sketch``). Two cases, the group chain's two worst ones: ``one_key`` above, and
``shift`` — B's sketches are full (κ keys just above T*) and A's record is a new key, so its W unit
inserts decrement every counter W times. Statistic: the window's exact log-likelihood ratio
(``test_user_level_audit._window_llr``) with the /16's and /8's released values, their sum and
the noisy size; Clopper–Pearson at α = 1e-3 per bound, δ = the claimed δ.

Measured ε_lb against ε = 1 (one_key at 10^6 draws per side, shift at 2.5·10^5): the group
calibration 0.61 and 0.77 (asserted >= 0.45ε and 0.6ε); the group taken as W/2 (a 2× break) 1.34 and 1.68;
the unweighted calibration (the mechanism at (ε, δ) although one record is W = 8 unit elements:
worst-case loss 8ε) 5.4 — all flagged. δ: the group-privacy chain over W steps, each charged δ' by
the tight threshold (``test_calibration_accounting`` of the user-level audit checks the
threshold's charge).
"""

from __future__ import annotations

import numpy as np
import pytest

from dphhh.privacy.params import HHHParams, PrivacyBudget
from dphhh.privacy.unit import PrivacyUnit
from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.misra_gries import clip_weights
from dphhh.sketches.specs import parse_hierarchy

from .audit_tools import stable_seed
from .test_user_level_audit import (
    CASE_TRIALS,
    COUNTERS,
    FOCUS_PREFIX,
    HIERARCHY,
    LOWER_BOUND,
    NEW_OCTET,
    SHIFT_OCTETS,
    TAU,
    _focus_counts,
    _scales,
    audit_sketch_pair,
    check_shift,
)

pytestmark = pytest.mark.audit

EPSILON, DELTA = 1.0, 1e-6
W = 8
UNIT = PrivacyUnit(weight_cap=W, weight="packets")


def _records(focus_units: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """(values, weights) of A (with the extra record) and B; B's 10.20/16 holds ``focus_units``."""
    rng = np.random.default_rng(12)

    def block(a: int, b: int, total: int) -> tuple[np.ndarray, np.ndarray]:
        weights = []
        while sum(weights) < total:
            weights.append(min(int(rng.zipf(1.8)), W, total - sum(weights)))
        v = ((a << 24) | (b << 16) | rng.integers(0, 1 << 16, len(weights))).astype(np.uint32)
        return v, np.array(weights, dtype=np.int64)

    parts = [block(10, 20, focus_units), block(45, 1, 3000), block(198, 51, 900), block(203, 0, 60)]
    values = np.concatenate([p[0] for p in parts])
    weights = np.concatenate([p[1] for p in parts])
    order = rng.permutation(values.size)
    vb, wb = values[order], weights[order]
    at = vb.size // 2  # a fixed position
    va = np.insert(vb, at, np.uint32(FOCUS_PREFIX | 0x1234))
    wa = np.insert(wb, at, W)
    return (va, wa), (vb, wb)


def _shift_records(count: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """(values, weights) of A and B for the shift case: B holds exactly κ keys at both levels (one
    /16 in its own /8 each, records of weights 1..W summing to ``count`` per key); A adds one record
    of weight W for a new /8 in the second half of B, which — W unit inserts into full sketches —
    decrements every counter W times at both levels."""
    rng = np.random.default_rng(13)
    values, weights = [], []
    for octet in SHIFT_OCTETS:
        ws: list[int] = []
        while sum(ws) < count:
            ws.append(min(int(rng.zipf(1.8)), W, count - sum(ws)))
        values.append(np.full(len(ws), (octet << 24) | (1 << 16) | 5, dtype=np.uint32))
        weights.append(np.array(ws, dtype=np.int64))
    v, w = np.concatenate(values), np.concatenate(weights)
    order = rng.permutation(v.size)
    vb, wb = v[order], w[order]
    at = 3 * vb.size // 4
    return (np.insert(vb, at, np.uint32((NEW_OCTET << 24) | 7)), np.insert(wb, at, W)), (vb, wb)


def _sketches(values: np.ndarray, weights: np.ndarray) -> LevelSketches:
    sketches = LevelSketches(parse_hierarchy(HIERARCHY), COUNTERS)
    for start in range(0, values.size, 500):  # batch by batch in arrival order, as the job does
        sketches.update(values[start : start + 500], clip_weights(weights[start : start + 500], W))
    return sketches


def _audit(event_budget: PrivacyBudget, seed: int, case: str = "one_key"):
    """``one_key``: the record raises the /16 (B's count just below T) by W at every level;
    ``shift``: it is a new key in full sketches and lowers every counter by W."""
    params = HHHParams(epsilon=event_budget.epsilon, delta=event_budget.delta, tau=TAU, counters=COUNTERS)
    h = parse_hierarchy(HIERARCHY).h
    scales, _ = _scales(params, h)
    if case == "shift":
        (va, wa), (vb, wb) = _shift_records(scales.integer_threshold + W // 2)
        sk_a, sk_b = _sketches(va, wa), _sketches(vb, wb)
        check_shift(sk_a, sk_b, W)
        return audit_sketch_pair(sk_a, sk_b, params, scales.integer_threshold - 1, seed, DELTA, CASE_TRIALS[case])
    target = scales.integer_threshold - W // 2  # B's count of the /16: W moves it across T
    (va, wa), (vb, wb) = _records(target)
    sk_a, sk_b = _sketches(va, wa), _sketches(vb, wb)
    counts_a, counts_b = _focus_counts(sk_a), _focus_counts(sk_b)
    assert counts_b[-1] == target and [a - b for a, b in zip(counts_a, counts_b)] == [W] * h
    return audit_sketch_pair(sk_a, sk_b, params, scales.integer_threshold - 1, seed, DELTA, CASE_TRIALS[case])


@pytest.mark.parametrize("case", ["one_key", "shift"])
def test_weighted_release_passes_audit(case: str) -> None:
    """Clipping at W and calibrating at (ε/W, δ/(W·e^ε)) shows no loss above ε for one record of
    weight W, in both cases (α = 1e-3 per bound; fixed seeds). The bound must also reach
    ``LOWER_BOUND`` (the audit is not vacuous); measured ε_lb in the module docstring."""
    result = _audit(UNIT.event_budget(PrivacyBudget(EPSILON, DELTA)), stable_seed("weighted", case), case)
    print(f"weighted {case}, group calibration: eps_lb={result.epsilon_lb:.3f} ({result.statistic})")
    assert LOWER_BOUND[case] * EPSILON <= result.epsilon_lb <= EPSILON, result


@pytest.mark.parametrize("case", ["one_key", "shift"])
def test_audit_flags_the_calibration_for_half_the_weight_cap(case: str) -> None:
    """Clipping at W but calibrating the group for W/2 (worst-case loss 2ε) is detected in both
    cases (α = 1e-3 per bound, fixed seeds; measured ε_lb in the module docstring)."""
    half = PrivacyUnit(weight_cap=W // 2, weight="packets")
    result = _audit(half.event_budget(PrivacyBudget(EPSILON, DELTA)), stable_seed("weighted-half", case), case)
    print(f"weighted {case}, group of W/2: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result


def test_audit_flags_the_unweighted_calibration() -> None:
    """Running the mechanism at (ε, δ) although a record is W unit elements is detected."""
    result = _audit(PrivacyBudget(EPSILON, DELTA), seed=505)
    print(f"weighted, unweighted calibration: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result
