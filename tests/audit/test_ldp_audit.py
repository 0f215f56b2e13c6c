"""Privacy audits of the local-DP client perturbation (docs/ALGORITHMS.md §10; used by AHEAD and HIO, docs/ALGORITHMS.md §8).

Local DP protects each user's report: the neighbouring inputs are one user's value ``v`` versus
``v'``. Each audit draws 10^6 reports per side from the real vectorised client code
(:func:`perturb_oue_batch`, :func:`perturb_grr_batch`) with seeded generators, and fails if the
Clopper–Pearson ε lower bound (α = 1e-3 per bound, see ``audit_tools``) exceeds the claimed ε.
Candidate statistics: for OUE the bits at ``v`` and ``v'`` and their difference (the event
"bit v set and bit v' clear" has likelihood ratio exactly e^ε); for GRR the indicators
"report = v" and "report = v'" (ratio exactly e^ε). δ = 0 for both (pure ε-LDP), and the
probabilities of every output are bounded away from 0, so no δ term needs an analytic check.

Both randomisers are tight (the best event has ratio exactly e^ε), so a correct client's ε_lb is
just below ε (about 0.98 here); it exceeds ε only if a Clopper–Pearson bound fails, probability
at most 2·1e-3 for a random seed (the seeds are fixed, so the test is deterministic).

Each audit is shown to be able to fail: OUE with q computed from 4ε, and GRR with the binary
randomised-response keep probability e^ε/(e^ε + 1) on a domain of 8 values (true ε = ε + ln 7).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dphhh.privacy.offline import ldp
from dphhh.privacy.offline.ldp import _grr_reports, _oue_bits

from .audit_tools import audit_statistics

pytestmark = pytest.mark.audit

EPSILON = 1.0
TRIALS = 1_000_000
V, W = 1, 2


def _oue_stats(reports: np.ndarray) -> dict[str, np.ndarray]:
    bit_v = reports[:, V].astype(np.int64)
    bit_w = reports[:, W].astype(np.int64)
    return {"bit_v": bit_v, "bit_w": bit_w, "bit_v_minus_bit_w": bit_v - bit_w}


def _grr_stats(reports: np.ndarray) -> dict[str, np.ndarray]:
    return {"is_v": (reports == V).astype(np.int64), "is_w": (reports == W).astype(np.int64)}


def _oue_audit(q_epsilon: float, d: int = 4):
    """Audit OUE reports (p = 1/2, q = 1/(e^q_epsilon + 1)) of value V versus W."""
    q = 1.0 / (math.exp(q_epsilon) + 1.0)
    a = _oue_bits(np.full(TRIALS, V), d, 0.5, q, np.random.default_rng(101))
    b = _oue_bits(np.full(TRIALS, W), d, 0.5, q, np.random.default_rng(102))
    return audit_statistics(_oue_stats(a), _oue_stats(b), delta=0.0)


def test_oue_client_is_epsilon_ldp() -> None:
    """The OUE client perturbation (the real batch function) passes the audit at ε."""
    a = ldp.perturb_oue_batch(np.full(TRIALS, V), 4, EPSILON, np.random.default_rng(103))
    b = ldp.perturb_oue_batch(np.full(TRIALS, W), 4, EPSILON, np.random.default_rng(104))
    result = audit_statistics(_oue_stats(a), _oue_stats(b), delta=0.0)
    assert result.epsilon_lb <= EPSILON, result
    # The audit is tight: the best event gets close to ε (ratio e^ε exactly, minus CP slack).
    assert result.epsilon_lb > 0.9 * EPSILON, result


def test_oue_audit_flags_q_from_four_epsilon() -> None:
    """OUE with q computed from 4ε (a 4ε-LDP randomiser) is flagged."""
    result = _oue_audit(4 * EPSILON)
    assert result.epsilon_lb > EPSILON, result


def test_grr_client_is_epsilon_ldp() -> None:
    """The GRR client perturbation (the real batch function) passes the audit at ε (d = 8)."""
    a = ldp.perturb_grr_batch(np.full(TRIALS, V), 8, EPSILON, np.random.default_rng(105))
    b = ldp.perturb_grr_batch(np.full(TRIALS, W), 8, EPSILON, np.random.default_rng(106))
    result = audit_statistics(_grr_stats(a), _grr_stats(b), delta=0.0)
    assert result.epsilon_lb <= EPSILON, result
    assert result.epsilon_lb > 0.9 * EPSILON, result


def test_grr_audit_flags_binary_keep_probability() -> None:
    """GRR keeping the value with e^ε/(e^ε + 1) on 8 values (true ε = ε + ln 7) is flagged."""
    keep = math.exp(EPSILON) / (math.exp(EPSILON) + 1.0)
    a = _grr_reports(np.full(TRIALS, V), 8, keep, np.random.default_rng(107))
    b = _grr_reports(np.full(TRIALS, W), 8, keep, np.random.default_rng(108))
    result = audit_statistics(_grr_stats(a), _grr_stats(b), delta=0.0)
    assert result.epsilon_lb > EPSILON, result
