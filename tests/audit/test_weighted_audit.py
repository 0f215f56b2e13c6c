"""Privacy audit of weighted records (docs/ALGORITHMS.md §2 "Weighted elements", §10): weight cap + group calibration.

Neighbouring streams differ in **one record of weight W** (a flow record counted by packets):

* stream B: weighted records of several prefixes, weights 1..W (heavy-tailed), in a fixed order;
* stream A: B plus one record of weight W for an address of ``10.20.0.0/16``, at a fixed position;
  the /16's count in B sits just below the release threshold, so that record decides whether the
  prefix is released.

Mechanism under audit, as the job runs it: weights clipped to W (:func:`sketches.misra_gries.clip_weights`)
→ :class:`~sketches.level_sketches.LevelSketches` with weights (each record = W unit inserts in a
row) → the window release with :class:`~privacy.params.HHHParams` at
``PrivacyUnit(weight_cap=W, weight="packets").event_budget((ε, δ))`` = (ε/W, δ/(W·e^ε)). The
sketches are deterministic; the noise is drawn 10^6 times per side through the audited core of
``release_window`` (``test_user_level_audit._draw``, checked there draw for draw against
``release_sketch``). Statistics: the /16's and /8's released values, their sum, the noisy window
size and all together; Clopper–Pearson at α = 1e-3 per bound, δ = the claimed δ.

Measured at 10^6 samples per side: the group calibration ε_lb ≈ 0.36 against ε = 1; the unweighted
calibration (the mechanism at (ε, δ) although one record is W = 8 unit elements: worst-case loss
8ε) ≈ 3.5, flagged. δ: the group-privacy chain over W steps, each charged δ' by the tight
threshold (``test_calibration_accounting`` of the user-level audit checks the threshold's charge).
"""

from __future__ import annotations

import numpy as np
import pytest

from privacy.params import HHHParams, PrivacyBudget
from privacy.unit import PrivacyUnit
from sketches.hierarchy import parse_hierarchy
from sketches.level_sketches import LevelSketches
from sketches.misra_gries import clip_weights

from .test_user_level_audit import COUNTERS, FOCUS_PREFIX, HIERARCHY, TAU, _focus_counts, _scales, audit_sketch_pair

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


def _sketches(values: np.ndarray, weights: np.ndarray) -> LevelSketches:
    sketches = LevelSketches(parse_hierarchy(HIERARCHY), COUNTERS)
    for start in range(0, values.size, 500):  # batch by batch in arrival order, as the job does
        sketches.update(values[start : start + 500], clip_weights(weights[start : start + 500], W))
    return sketches


def _audit(event_budget: PrivacyBudget, seed: int):
    params = HHHParams(epsilon=event_budget.epsilon, delta=event_budget.delta, tau=TAU, counters=COUNTERS)
    h = parse_hierarchy(HIERARCHY).h
    scales, _ = _scales(params, h)
    target = scales.integer_threshold - W // 2  # B's count of the /16: W moves it across T
    (va, wa), (vb, wb) = _records(target)
    sk_a, sk_b = _sketches(va, wa), _sketches(vb, wb)
    counts_a, counts_b = _focus_counts(sk_a), _focus_counts(sk_b)
    assert counts_b[-1] == target and [a - b for a, b in zip(counts_a, counts_b)] == [W] * h
    return audit_sketch_pair(sk_a, sk_b, params, scales.integer_threshold - 1, seed, DELTA)


def test_weighted_release_passes_audit() -> None:
    """Clipping at W and calibrating at (ε/W, δ/(W·e^ε)) shows no loss above ε for one record of
    weight W (α = 1e-3 per bound; fixed seed; measured ε_lb in the module docstring)."""
    result = _audit(UNIT.event_budget(PrivacyBudget(EPSILON, DELTA)), seed=404)
    print(f"weighted, group calibration: eps_lb={result.epsilon_lb:.3f} ({result.statistic})")
    assert result.epsilon_lb <= EPSILON, result


def test_audit_flags_the_unweighted_calibration() -> None:
    """Running the mechanism at (ε, δ) although a record is W unit elements is detected."""
    result = _audit(PrivacyBudget(EPSILON, DELTA), seed=505)
    print(f"weighted, unweighted calibration: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result
