"""The release's good event holds with probability >= 1 − β, tested at β on worst-case counters
(docs/calibration.md §4, §5).

Every claim a report makes with probability >= 1 − β — each published interval holds its prefix's
true count, every count is within α1 of the truth, a never-released prefix has true count <= α1,
coverage where the report claims it — follows deterministically (the proofs of docs/calibration.md
§4) from one **good event** E over a window's noise:

* every key whose counter exceeds α2 passes the noisy threshold (is released);
* every released value is within the noise bound B of its counter;
* every released sub-stream size ñ has ñ + S >= n (S the size slack).

``tests/privacy/test_guarantees.py`` checks the claims on realistic traffic, where they are loose
(a report lists ~50 prefixes, the bound is a union over 2κhP noise terms). Here E itself is checked
where it is tight: every counter of every sketch sits just above α2, so all κ·h·P keys are at the
boundary of the first rule and every one of them is released and bounded — every noise term of the
union counts. A correct calibration fails a run with probability <= β.

Sample size (fixed α, negligible flakiness): ``RUNS`` = 1330 independent seeded runs per setting and
the test passes with at most ``ALLOWED`` = 107 failed runs. For a correct mechanism (failure rate
<= β = 0.05) more failures happen with probability < 1e-6 (the false-alarm rate); a mechanism that
fails 2β = 10 % of the time is caught with probability >= 0.99 (both computed below with scipy's
binomial law and asserted in ``test_the_sample_size_has_power_at_two_beta``). The broken variants —
B halved, α2 halved, the noise scale doubled (ε halved behind the calibration's back) — are caught:
each fails more than ``ALLOWED`` runs (the runs stop once the verdict is decided); so does a bound
only 20 % narrower, which shows how close to the tail the calibration sits. The sub-stream
size's share is one noise term, so halving S moves its failure rate only from β_size to about
√β_size: that break is checked exactly on the tail instead
(``test_the_size_slack_is_the_exact_tail_quantile``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from dphhh.privacy.calibration import WindowCalibration
from dphhh.privacy.noise import discrete_laplace_pmf
from dphhh.privacy.params import HHHParams
from dphhh.privacy.randomness import as_source
from dphhh.privacy.window import release_sketch

BETA = 0.05
FALSE_ALARM = 1e-6
RUNS = 1330
ALLOWED = int(binom.isf(FALSE_ALARM, RUNS, BETA))  # P(Binomial(RUNS, β) > ALLOWED) < FALSE_ALARM
H = 4
KAPPA = 1024

SETTINGS = [
    ("tight", "fresh", 1),
    ("tight", "reuse", 1),
    ("tight", "fresh", 2),
    ("paper", "fresh", 1),
]


def _params(calibration: str, variant: str, partitions: int, epsilon: float = 1.0) -> HHHParams:
    return HHHParams(
        epsilon=epsilon,
        delta=1e-6,
        tau=1000,
        beta=BETA,
        counters=KAPPA,
        partitions=partitions,
        variant=variant,
        calibration=calibration,
    )


def _run_fails(
    seed: int,
    params: HHHParams,
    *,
    counter: int,
    bound: float,
    released_above: float,
    slack: float,
    noise_params: HHHParams | None = None,
) -> bool:
    """One window's releases (every sketch's κ counters at ``counter``): does the good event fail?"""
    source = as_source(seed)
    n = KAPPA * counter  # each sketch's sub-stream: its counters' sum (Misra-Gries never overcounts)
    counters = dict.fromkeys(range(KAPPA), counter)
    for level in range(1, H + 1):
        for partition in range(params.partitions):
            release = release_sketch(level, partition, counters, n, params=noise_params or params, h=H, rng=source)
            if counter > released_above and len(release.values) < KAPPA:
                return True
            values = np.fromiter(release.values.values(), dtype=np.float64, count=len(release.values))
            if values.size and np.abs(values - counter).max() > bound:
                return True
            if release.n_noisy is not None and release.n_noisy + slack < n:
                return True
    return False


def _failures(stop_above: int | None = None, **kw) -> int:
    """Failed runs of ``RUNS`` (stopping early once more than ``stop_above`` failed: the verdict is set)."""
    failed = 0
    for seed in range(RUNS):
        failed += _run_fails(seed, **kw)
        if stop_above is not None and failed > stop_above:
            break
    return failed


def _correct(params: HHHParams) -> dict:
    cal = WindowCalibration.of(params, H)
    return dict(
        params=params,
        counter=math.floor(cal.alpha2) + 1,
        bound=cal.noise_bound,
        released_above=cal.alpha2,
        slack=cal.size_slack,
    )


def test_the_sample_size_has_power_at_two_beta() -> None:
    """At β the test passes but with probability < 1e-6 of a false alarm; at 2β it fails with
    probability >= 0.99 (the figures the module docstring states)."""
    assert binom.sf(ALLOWED, RUNS, BETA) < FALSE_ALARM
    assert binom.sf(ALLOWED, RUNS, 2 * BETA) >= 0.99


@pytest.mark.parametrize("calibration, variant, partitions", SETTINGS)
def test_the_good_event_fails_at_most_beta_of_runs(calibration: str, variant: str, partitions: int) -> None:
    """E fails in at most ALLOWED of RUNS runs at the worst-case counters — and in at least one: the
    runs reach the tail the bound is about (measured 16 to 34 failed runs of 1330, a rate of
    1.2-2.6 % against β = 5 %; P(0 failures) at a 1.2 % rate is about e^-16)."""
    failures = _failures(**_correct(_params(calibration, variant, partitions)))
    assert 1 <= failures <= ALLOWED, (failures, ALLOWED)


@pytest.mark.parametrize("factor", [0.5, 0.8])
@pytest.mark.parametrize("calibration, variant, partitions", SETTINGS)
def test_a_narrowed_noise_bound_is_caught(calibration: str, variant: str, partitions: int, factor: float) -> None:
    """Claiming every released value within B/2 — or even 0.8·B — fails more than ALLOWED runs
    (measured: 1315-1330 of 1330 at B/2, 203-315 at 0.8·B)."""
    kw = _correct(_params(calibration, variant, partitions))
    kw["bound"] = kw["bound"] * factor
    assert _failures(stop_above=ALLOWED, **kw) > ALLOWED


@pytest.mark.parametrize("calibration, variant, partitions", SETTINGS)
def test_a_halved_alpha2_is_caught(calibration: str, variant: str, partitions: int) -> None:
    """Claiming every key above α2/2 released (counters just above α2/2) fails more than ALLOWED runs."""
    kw = _correct(_params(calibration, variant, partitions))
    kw["released_above"] = kw["released_above"] / 2
    kw["counter"] = math.floor(kw["released_above"]) + 1
    assert _failures(stop_above=ALLOWED, **kw) > ALLOWED


@pytest.mark.parametrize("calibration, variant, partitions", SETTINGS)
def test_doubled_noise_is_caught(calibration: str, variant: str, partitions: int) -> None:
    """The noise drawn at twice its scale (ε/2), judged by the ε calibration, fails more than ALLOWED runs."""
    kw = _correct(_params(calibration, variant, partitions))
    kw["noise_params"] = _params(calibration, variant, partitions, epsilon=0.5)
    assert _failures(stop_above=ALLOWED, **kw) > ALLOWED


@pytest.mark.parametrize("partitions", [1, 2])
def test_the_size_slack_is_the_exact_tail_quantile(partitions: int) -> None:
    """Each released size is within S of the truth but with probability <= β_size / (number of
    sizes): checked on the exact two-sided tail (a literal sum of the discrete Laplace pmf), and
    S/2 breaks it — a 2x error in the size slack is caught by exact computation, where sampling
    one noise term per window could not."""
    params = _params("tight", "fresh", partitions)
    cal = WindowCalibration.of(params, H)
    limit = params.size_beta / cal.size_releases
    b = cal.size_scale
    far = int(60 * b) + 100  # the pmf beyond is below 1e-26 of the tail: negligible

    def outside(s: int) -> float:  # P(|X| > s), X ~ DLap(b): 2 · sum of the pmf over s+1 .. far
        return 2.0 * float(discrete_laplace_pmf(np.arange(s + 1, far), b).sum())

    assert outside(cal.size_slack) <= limit
    assert outside(cal.size_slack // 2) > limit
