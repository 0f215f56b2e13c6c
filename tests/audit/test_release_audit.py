"""Privacy audits of ``release_level`` (spec §3) and the private sub-stream sizes (spec §5).

Neighbouring sketch states follow the cases of Lemma 4.1.1 / the proof of Theorem 4.1.2:
* ``one_differs``: one counter differs by one, all else equal (keys near and above T*);
* ``all_shift``: every counter shifts by one (8 keys at 200 vs 201, the spec's example);
* ``enters``: a count-1 key is present in one sketch only (its probability of passing is below δ,
  which 10^6 samples cannot see; δ is checked analytically in ``test_enter_probability_below_delta``).

Each audit draws 10^6 noisy releases per side from the real vectorised core
(:func:`privacy.release.release_arrays`) with a seeded generator and fails if the Clopper–Pearson
ε lower bound exceeds the claimed ε (α = 1e-3 per bound; see ``audit_tools``). Every audit is
shown to be able to fail on broken variants: noise divided by 8, and the paper's literal release
without the fresh shared term γ'.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privacy.randomness import SeededRandomSource
from privacy.release import ReleaseScales, release_arrays, release_level
from privacy.stream_size import size_scale
from privacy.noise import discrete_laplace

from .audit_tools import audit_statistics

pytestmark = pytest.mark.audit

EPSILON, DELTA, H = 1.0, 1e-6, 1
TRIALS = 1_000_000


def _statistics(passed: np.ndarray, values: np.ndarray, focus: int, floor: int) -> dict[str, np.ndarray]:
    """Candidate scalar statistics of a (trials, k) release: sum, min, max, the focus key, pass count."""
    shown = np.where(passed, values, floor - 1)
    return {
        "sum_released": shown.sum(axis=1),
        "min_released": shown.min(axis=1),
        "max_released": shown.max(axis=1),
        "focus_value": shown[:, focus],
        "released_count": passed.sum(axis=1),
    }


def _audit(scales: ReleaseScales, counts_a: list[int], counts_b: list[int], focus: int, seed: int):
    floor = scales.integer_threshold
    out = []
    for counts, offset in ((counts_a, 0), (counts_b, 1)):
        source = SeededRandomSource(np.random.default_rng(seed + offset))
        passed, values = release_arrays(np.array(counts), scales, source, trials=TRIALS)
        out.append(_statistics(passed, values, focus, floor))
    return audit_statistics(out[0], out[1], delta=DELTA)


def _patterns(scales: ReleaseScales) -> dict[str, tuple[list[int], list[int], int]]:
    t = scales.integer_threshold
    near = [t - 3, t, t + 2, t + 10, 200, 150]
    return {
        "one_differs": (near, near[:1] + [near[1] + 1] + near[2:], 1),
        "all_shift": ([200] * 8, [201] * 8, 0),
        "all_shift_near_threshold": ([t] * 8, [t + 1] * 8, 0),
        "enters": ([200, 150, 1], [200, 150, 0], 2),
    }


def _fresh() -> ReleaseScales:
    return ReleaseScales.for_budget(epsilon=EPSILON, delta=DELTA, h=H, variant="fresh")


def _reuse() -> ReleaseScales:
    return ReleaseScales.for_budget(epsilon=EPSILON, delta=DELTA, h=H, variant="reuse")


def _divided(scales: ReleaseScales, by: float) -> ReleaseScales:
    return ReleaseScales(
        scales.threshold,
        scales.gamma / by,
        scales.w / by,
        None if scales.gamma_release is None else scales.gamma_release / by,
        None if scales.w_release is None else scales.w_release / by,
    )


@pytest.mark.parametrize("variant", ["fresh", "reuse"])
@pytest.mark.parametrize("pattern", ["one_differs", "all_shift", "all_shift_near_threshold", "enters"])
def test_release_level_passes_audit(variant: str, pattern: str) -> None:
    """The release of one sketch shows no privacy loss above the claimed ε on any neighbour pattern."""
    scales = _fresh() if variant == "fresh" else _reuse()
    counts_a, counts_b, focus = _patterns(scales)[pattern]
    result = _audit(scales, counts_a, counts_b, focus, seed=hash((variant, pattern)) % 10_000)
    assert result.epsilon_lb <= EPSILON, result


@pytest.mark.parametrize("variant", ["fresh", "reuse"])
def test_audit_flags_noise_divided_by_8(variant: str) -> None:
    """Dividing every noise scale by 8 is detected as a privacy violation."""
    scales = _divided(_fresh() if variant == "fresh" else _reuse(), 8)
    counts_a, counts_b, focus = _patterns(scales)["one_differs"]
    result = _audit(scales, counts_a, counts_b, focus, seed=11)
    assert result.epsilon_lb > EPSILON, result


def test_audit_flags_paper_literal_release_without_fresh_gamma() -> None:
    """The paper's literal release (fresh per-key noise only, no γ') leaks more than ε on a uniform shift."""
    fresh = _fresh()
    literal = ReleaseScales(fresh.threshold, fresh.gamma, fresh.w, 0.0, fresh.w_release)
    counts_a, counts_b, focus = _patterns(literal)["all_shift"]
    result = _audit(literal, counts_a, counts_b, focus, seed=21)
    assert result.epsilon_lb > EPSILON, result


def test_enter_probability_below_delta() -> None:
    """A count-1 key passes the threshold with probability below δ/(3h) per side (δ checked analytically)."""
    for scales in (_fresh(), _reuse()):
        # P(1 + γ + w >= T_int) <= P(γ >= a) + P(w >= T_int - 1 - a) for any split a; the spec's
        # split gives each tail exp(-t/b) with the proof's constants.
        t = scales.integer_threshold - 1
        a = scales.gamma / (scales.gamma + scales.w) * t
        tail = math.exp(-a / scales.gamma) + math.exp(-(t - a) / scales.w)
        assert tail <= DELTA / (3 * H) * 2, (scales, tail)


def test_release_level_uses_the_audited_core() -> None:
    """``release_level`` draws the same output as the audited vectorised core for the same seed."""
    counts = {5: 300, 9: 0, 12: 150}
    scales = _fresh()
    got = release_level(counts, epsilon=EPSILON, delta=DELTA, h=H, rng=np.random.default_rng(3))
    passed, values = release_arrays(np.array([300, 0, 150]), scales, SeededRandomSource(np.random.default_rng(3)))
    expected = {k: int(v) for k, p, v in zip([5, 9, 12], passed.tolist(), values.tolist()) if p}
    assert got == expected


def _size_audit(scale: float, seed: int):
    out = []
    for n, offset in ((1000, 0), (1001, 1)):
        rng = np.random.default_rng(seed + offset)
        out.append({"size": n + discrete_laplace(scale, TRIALS, rng=rng)})
    return audit_statistics(out[0], out[1], delta=0.0)


def test_stream_size_release_passes_audit() -> None:
    """A sub-stream size released at budget ε with h = 1 shows no loss above ε."""
    result = _size_audit(size_scale(epsilon=EPSILON, h=1), seed=31)
    assert result.epsilon_lb <= EPSILON, result


def test_audit_flags_stream_size_with_noise_divided_by_8() -> None:
    """The size audit detects noise divided by 8."""
    result = _size_audit(size_scale(epsilon=EPSILON, h=1) / 8, seed=41)
    assert result.epsilon_lb > EPSILON, result


def test_audit_reports_its_bounds(capsys: pytest.CaptureFixture[str]) -> None:
    """The audit's ε lower bounds for the correct and the literal release are printed for the record."""
    fresh = _fresh()
    literal = ReleaseScales(fresh.threshold, fresh.gamma, fresh.w, 0.0, fresh.w_release)
    counts_a, counts_b, focus = _patterns(fresh)["all_shift"]
    good = _audit(fresh, counts_a, counts_b, focus, seed=51)
    bad = _audit(literal, counts_a, counts_b, focus, seed=51)
    print(f"all_shift: fresh eps_lb={good.epsilon_lb:.3f}, literal eps_lb={bad.epsilon_lb:.3f}")
    assert good.epsilon_lb < bad.epsilon_lb
