"""Unit tests of ``release_level`` and its scales (docs/ALGORITHMS.md §3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dphhh.privacy.randomness import SeededRandomSource
from dphhh.privacy.release import ReleaseScales, alpha2, release_arrays, release_level, tight_threshold
from dphhh.privacy.tails import dlap_sum_tail


def test_paper_fresh_scales_follow_the_spec() -> None:
    """Paper, fresh: T* = 1 + (6h/ε)ln(3h/δ), γ ~ 2h/ε, w ~ 4h/ε, release with the same scales."""
    s = ReleaseScales.for_budget(epsilon=0.5, delta=1e-5, h=4, calibration="paper")
    assert math.isclose(s.threshold, 1 + (24 / 0.5) * math.log(12 / 1e-5))
    assert (s.gamma, s.w, s.gamma_release, s.w_release) == (16.0, 32.0, 16.0, 32.0)
    assert s.integer_threshold == math.floor(s.threshold) + 1


def test_paper_reuse_scales_are_halved() -> None:
    """Paper, reuse: T* = 1 + (3h/ε)ln(3h/δ), γ ~ h/ε, w ~ 2h/ε, and no separate release noise."""
    s = ReleaseScales.for_budget(epsilon=1.0, delta=1e-6, h=2, variant="reuse", calibration="paper")
    assert math.isclose(s.threshold, 1 + 6 * math.log(6e6))
    assert (s.gamma, s.w, s.gamma_release, s.w_release) == (2.0, 4.0, None, None)
    assert s.released_key_scale == 4.0


@pytest.mark.parametrize("variant, b", [("fresh", 16.0), ("reuse", 8.0)])
def test_tight_scales_are_one_scale_per_variant(variant: str, b: float) -> None:
    """Tight (the default): every noise term at 2h/ε (fresh) or h/ε (reuse)."""
    s = ReleaseScales.for_budget(epsilon=0.5, delta=1e-5, h=4, variant=variant)
    release = (b, b) if variant == "fresh" else (None, None)
    assert (s.gamma, s.w, (s.gamma_release, s.w_release)) == (b, b, release)


@pytest.mark.parametrize("epsilon, delta, h", [(0.9, 1e-6, 4), (0.5, 1e-5, 4), (2.0, 1e-9, 32), (1.0, 1e-6, 1)])
@pytest.mark.parametrize("variant", ["fresh", "reuse"])
def test_tight_threshold_is_the_smallest_that_meets_delta(epsilon: float, delta: float, h: int, variant: str) -> None:
    """T is the smallest integer with 2·e^(ε/h)·P(γ + w >= T) <= δ/h, and below the paper's T*
    and below the closed-form bound T <= 2b·ln(4·e^(ε/h)·h/δ) (P(γ + w >= t) <= 2·P(γ >= t/2))."""
    s = ReleaseScales.for_budget(epsilon=epsilon, delta=delta, h=h, variant=variant)
    t, b, e0 = int(s.threshold), s.gamma, epsilon / h
    assert s.threshold == t and s.integer_threshold == t + 1
    charge = lambda t: 2 * math.exp(e0) * dlap_sum_tail(t, b, b)  # noqa: E731
    assert charge(t) <= delta / h < charge(t - 1)
    closed = 2 * b * math.log(4 * math.exp(e0) * h / delta)
    assert t <= closed
    paper = ReleaseScales.for_budget(epsilon=epsilon, delta=delta, h=h, variant=variant, calibration="paper")
    assert t < paper.threshold


def test_tight_threshold_validates_through_the_tail() -> None:
    """An impossible δ limit is refused, naming the tails module."""
    with pytest.raises(ValueError, match="tails: limit"):
        tight_threshold(epsilon_level=1.0, delta_level=0.0, b_gamma=1.0, b_w=1.0)


@pytest.mark.parametrize(
    "kw, word",
    [
        ({"epsilon": 0}, "epsilon"),
        ({"delta": 1.0}, "delta"),
        ({"h": 0}, "h"),
        ({"variant": "paper"}, "variant"),
        ({"calibration": "loose"}, "calibration"),
    ],
)
def test_release_level_validates(kw: dict, word: str) -> None:
    """Bad ε, δ, h or variant is refused by release_level, naming the parameter."""
    args = dict(epsilon=1.0, delta=1e-6, h=1, variant="fresh") | kw
    with pytest.raises(ValueError, match=f"release_level: {word}"):
        release_level({1: 5}, rng=0, **args)


def test_negative_counter_is_refused() -> None:
    """A negative counter cannot come from a sketch and is refused."""
    with pytest.raises(ValueError, match="counters must be >= 0"):
        release_level({1: -1}, epsilon=1, delta=1e-6, h=1, rng=0)


def test_large_counts_pass_and_small_ones_do_not() -> None:
    """Keys far above T* are released close to their count; count-0 keys are never released."""
    counts = {7: 5000, 8: 0, 9: 3000}
    out = release_level(counts, epsilon=1.0, delta=1e-6, h=1, rng=np.random.default_rng(1))
    assert set(out) == {7, 9}
    assert all(isinstance(v, int) for v in out.values())
    assert abs(out[7] - 5000) < 200 and abs(out[9] - 3000) < 200


def test_release_is_reproducible_with_a_seed_and_fresh_otherwise() -> None:
    """The same seed gives the same release; the secure source gives varying output."""
    counts = {k: 1000 + k for k in range(20)}
    a = release_level(counts, epsilon=1, delta=1e-6, h=1, rng=np.random.default_rng(5))
    b = release_level(counts, epsilon=1, delta=1e-6, h=1, rng=np.random.default_rng(5))
    c = release_level(counts, epsilon=1, delta=1e-6, h=1)
    d = release_level(counts, epsilon=1, delta=1e-6, h=1)
    assert a == b and c != d


def test_empty_sketch_releases_nothing() -> None:
    """An empty counter map releases an empty map."""
    assert release_level({}, epsilon=1, delta=1e-6, h=3, rng=0) == {}


def test_fresh_release_noise_has_the_stated_variance() -> None:
    """Fresh released values have variance 2b_γ² + 2b_w²-ish (γ' shared, w' per key) around the count."""
    s = ReleaseScales.for_budget(epsilon=1.0, delta=1e-6, h=1)
    passed, values = release_arrays(np.array([10_000, 10_000]), s, SeededRandomSource(3), trials=200_000)
    assert passed.all()
    noise = values - 10_000

    # Discrete Laplace variance: 2e^{-1/b}/(1-e^{-1/b})^2 ~ 2b^2 - 1/6; sample var within 2 %.
    def var(b: float) -> float:
        q = math.exp(-1 / b)
        return 2 * q / (1 - q) ** 2

    expected = var(s.gamma_release) + var(s.w_release)
    assert abs(noise[:, 0].var() / expected - 1) < 0.02
    # the shared γ' makes the two keys' noise positively correlated: cov = var(γ')
    cov = np.cov(noise[:, 0], noise[:, 1])[0, 1]
    assert abs(cov / var(s.gamma_release) - 1) < 0.05


def test_reuse_releases_the_tested_value() -> None:
    """Reuse releases exactly the value compared against the threshold (all released values > T*)."""
    s = ReleaseScales.for_budget(epsilon=1.0, delta=1e-6, h=1, variant="reuse")
    t = s.integer_threshold
    passed, values = release_arrays(np.array([t, t, t]), s, SeededRandomSource(4), trials=50_000)
    assert (values[passed] >= t).all() and (values[~passed] < t).all()


def test_paper_alpha2_formula() -> None:
    """Paper: α2 = T* + 2·b_w·ln(2κhP/β) with the released per-key scale of the variant."""
    for variant, bw in (("fresh", 16.0), ("reuse", 8.0)):
        s = ReleaseScales.for_budget(epsilon=1.0, delta=1e-6, h=4, variant=variant, calibration="paper")
        got = alpha2(s, counters=100, h=4, partitions=2, beta=0.05)
        assert math.isclose(got, s.threshold + 2 * bw * math.log(2 * 100 * 4 * 2 / 0.05))


def test_a_sketch_release_draws_the_same_noise_whatever_the_sketch_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The work of releasing one sketch must not depend on how many keys it holds (docs/ALGORITHMS.md
    §0.1 h: an empty and a full sketch must cost alike): every release draws the noise of κ keys in
    one call — the slots the sketch does not fill as zero counters, their outcome discarded — and
    the released values are the real keys' own (a padded release of the same seeded source equals
    the release of the same counters padded by hand)."""
    import dphhh.privacy.release as release_module
    from dphhh.privacy.params import HHHParams
    from dphhh.privacy.window import release_sketch

    drawn: list[tuple[int, ...]] = []
    real = release_module.discrete_laplace

    def counting(scale, shape, rng=None):
        drawn.append(tuple(np.atleast_1d(shape)))
        return real(scale, shape, rng=rng)

    monkeypatch.setattr(release_module, "discrete_laplace", counting)
    params = HHHParams(epsilon=1.0, delta=1e-6, tau=50, counters=16)
    calls = {}
    for held in (0, 1, 9, 16):
        drawn.clear()
        counters = {1000 + k: 40 + 7 * k for k in range(held)}
        got = release_sketch(1, 0, counters, 500, params=params, h=4, rng=SeededRandomSource(3))
        calls[held] = list(drawn)
        scales = ReleaseScales.for_budget(
            epsilon=params.release_budget.epsilon, delta=params.release_budget.delta, h=4, variant=params.variant
        )
        by_hand = np.array([counters[k] for k in sorted(counters)] + [0] * (16 - held), dtype=np.int64)
        passed, values = release_arrays(by_hand, scales, SeededRandomSource(3))
        assert got.values == {k: int(values[i]) for i, k in enumerate(sorted(counters)) if passed[i]}
    assert all(c == calls[16] for c in calls.values()), calls  # the same draws, of κ values each
    assert any(16 in shape for shape in calls[0])
