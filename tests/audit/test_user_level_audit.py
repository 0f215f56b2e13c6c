"""Privacy audit of user-level privacy (docs/ALGORITHMS.md §0 and §10): unit cap + group calibration.

Neighbouring streams differ in **all elements of one privacy unit** u:

* stream B: base elements of many units (most within the cap m, some above it, so the cap drops
  some of their elements), in a fixed shuffled order;
* stream A: B plus ``M = 8m`` elements of u, interleaved at fixed, evenly spaced positions. In the
  ``one_key`` case below u's values are distinct addresses that share the prefix ``10.20.0.0/16`` (and ``10.0.0.0/8``), whose
  count is placed just below the release threshold T* so that u's elements decide whether the
  prefix is released.

Mechanism under audit, exactly as the stream job runs it: ``UnitCap(m)`` over the stream in
arrival order → :class:`~dphhh.sketches.level_sketches.LevelSketches` (``ipv4:8,16``, h = 2) →
:func:`dphhh.privacy.window.release_window` with :class:`~dphhh.privacy.params.HHHParams` at
``PrivacyUnit("user", …, m).event_budget((ε, δ))``. The sketches are deterministic, so they are
built once per side; the noise of every sketch release and every private sub-stream size is then
drawn 10^6 times per side, vectorised, through the same core ``release_window`` runs
(:func:`dphhh.privacy.release.release_arrays` and :func:`dphhh.privacy.noise.discrete_laplace` at the
calibration's size scale; with one partition the window size is released once, by level 1); ``test_audited_core_is_what_release_window_draws``
checks that identity draw for draw.

Two neighbour cases, the two worst cases of the group-privacy chain (each of u's m kept elements is
one event-level step, docs/ALGORITHMS.md §0):

* ``one_key`` (:func:`_streams`): u's elements raise one key, its prefix, by m at every level;
* ``shift`` (:func:`shift_streams`): the sketches are full (κ keys at T* + m/2) and every element u
  keeps is a new key, so each decrements all κ counters: A's counters are B's minus m, everywhere.

Statistic: the exact log-likelihood ratio of the whole window's output (every sketch's pass
pattern and values and the noisy size, :mod:`.release_likelihood`), searched into the tails,
together with u's prefix released value per level, their sum and the size. Clopper–Pearson at
α = 1e-3 per bound (``audit_tools``), δ = the user-level δ. The correct (default, tight)
calibration measures ε_lb 0.61 (one_key, 10^6 draws per side) and 0.76 (shift, 2.5·10^5) against
ε = 1 — asserted >= 0.45ε and 0.6ε (``LOWER_BOUND``): the audit is not vacuous — and the broken
variants:

(a) the group calibrated for m/2 while the cap is m (a 2× break): 1.34 (one_key), 1.77 (shift);
(b) the cap is applied but the mechanism runs at the event-level budget (no group calibration): 4.8;
(c) the calibration for m is used but no cap (u contributes all M = 8m elements): 5.3, 5.8.

δ is checked analytically (10^6 samples cannot see 1e-6): ``test_calibration_accounting``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dphhh.privacy.calibration import WindowCalibration
from dphhh.privacy.noise import discrete_laplace
from dphhh.privacy.params import HHHParams, PrivacyBudget
from dphhh.privacy.randomness import SeededRandomSource
from dphhh.privacy.release import ReleaseScales, release_arrays
from dphhh.privacy.unit import PrivacyUnit
from dphhh.privacy.unit_cap import UnitCap, unit_keys_of
from dphhh.privacy.window import release_sketch, release_window
from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.specs import parse_hierarchy

from .audit_tools import audit_statistics, stable_seed
from .release_likelihood import size_log_likelihood, sketch_pair_llr

pytestmark = pytest.mark.audit

EPSILON, DELTA = 1.0, 1e-6  # the claimed user-level guarantee
CAP = 8  # m
EXTRA = 8 * CAP  # M: u's elements in stream A
TRIALS = 1_000_000  # noise draws per side
SHIFT_TRIALS = 250_000  # the shift case's LLR has fat tails: this many draws per side suffice
TAIL_GRID = 200  # log-spaced tail thresholds per tail, for the likelihood-ratio statistic
HIERARCHY = "ipv4:8,16"
COUNTERS = 16
TAU = 100.0
FOCUS_PREFIX = (10 << 24) | (20 << 16)  # 10.20.0.0/16, u's prefix
UNIT = PrivacyUnit("user", "source address", CAP)


def _ip(a: int, b: int, rng: np.random.Generator, n: int) -> np.ndarray:
    """n addresses a.b.x.y with random low 16 bits."""
    return ((a << 24) | (b << 16) | rng.integers(0, 1 << 16, n)).astype(np.uint32)


def _streams(focus_within: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """(values, unit keys) of streams A (with u) and B (without u).

    Base: ``focus_within`` elements of 10.20/16 from units of at most m elements each, one unit
    with 2m elements of 10.20/16 (half of them above the cap), a few 10.99/16 elements, a heavy
    45.1/16 prefix from units of 3m elements each (above the cap), and lighter 198.51/16 and
    203.0/16 traffic. u: EXTRA distinct addresses of 10.20/16.
    """
    rng = np.random.default_rng(2026)
    parts: list[tuple[np.ndarray, list[str]]] = []
    parts.append((_ip(10, 20, rng, focus_within), [f"light-{i // CAP}" for i in range(focus_within)]))
    parts.append((_ip(10, 20, rng, 2 * CAP), ["over-focus"] * (2 * CAP)))
    parts.append((_ip(10, 99, rng, 3), ["stray-0", "stray-1", "stray-2"]))
    parts.append((_ip(45, 1, rng, 3000), [f"heavy-{i % 100}" for i in range(3000)]))
    parts.append((_ip(198, 51, rng, 900), [f"mid-{i % 200}" for i in range(900)]))
    parts.append((_ip(203, 0, rng, 60), [f"small-{i}" for i in range(60)]))
    values = np.concatenate([p[0] for p in parts])
    units = unit_keys_of([u for p in parts for u in p[1]])
    order = rng.permutation(values.size)
    values_b, units_b = values[order], units[order]

    u_values = (FOCUS_PREFIX | rng.choice(1 << 16, EXTRA, replace=False)).astype(np.uint32)
    u_units = unit_keys_of(["victim"] * EXTRA)
    positions = np.linspace(0, values_b.size, EXTRA).astype(np.int64)  # fixed, evenly spaced
    values_a = np.insert(values_b, positions, u_values)
    units_a = np.insert(units_b, positions, u_units)
    return (values_a, units_a), (values_b, units_b)


SHIFT_OCTETS = range(11, 11 + COUNTERS)  # the κ base keys of the shift case: o.1.0.0/16, one per /8
NEW_OCTET = 100  # u's elements in the shift case: first octets NEW_OCTET, NEW_OCTET + 1, … (unused by the base)


def shift_streams(count: int) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """(values, unit keys) of streams A (with u) and B (without u) for the shift (decrement) case.

    B holds exactly κ keys at both levels — one /16 in its own /8 each (``SHIFT_OCTETS``) —
    ``count`` elements each after the cap: units of at most m elements, and for the first key one
    unit of 2m elements (half above the cap). A adds u's M = 8m elements, each in a /8 of its own
    that no base element uses, at evenly spaced positions in the second half of B: every element u
    keeps (its first m) finds a full sketch at both levels and decrements all κ counters, so A's
    sketches hold B's keys, each m lower (asserted by the callers)."""
    rng = np.random.default_rng(2027)
    values: list[np.ndarray] = []
    units: list[str] = []
    for j, octet in enumerate(SHIFT_OCTETS):
        light = count - (CAP if j == 0 else 0)
        values.append(_ip(octet, 1, rng, light))
        units += [f"shift-{octet}-{i // CAP}" for i in range(light)]
        if j == 0:
            values.append(_ip(octet, 1, rng, 2 * CAP))
            units += ["over-shift"] * (2 * CAP)
    all_values = np.concatenate(values)
    order = rng.permutation(all_values.size)
    values_b, units_b = all_values[order], unit_keys_of(units)[order]
    u_values = np.array([((NEW_OCTET + i) << 24) | (1 << 16) | 7 for i in range(EXTRA)], dtype=np.uint32)
    positions = np.linspace(values_b.size // 2, values_b.size, EXTRA).astype(np.int64)
    values_a = np.insert(values_b, positions, u_values)
    units_a = np.insert(units_b, positions, unit_keys_of(["victim"] * EXTRA))
    return (values_a, units_a), (values_b, units_b)


def check_shift(sk_a: LevelSketches, sk_b: LevelSketches, shift: int) -> None:
    """A's sketches hold exactly B's κ keys, every counter ``shift`` lower, at every level."""
    for (level, _p), a in sk_a.items():
        ca, cb = a.counters(), sk_b.sketch(level, 0).counters()
        assert len(cb) == COUNTERS and set(ca) == set(cb), level
        assert all(ca[k] == cb[k] - shift for k in cb), level


def _capped_sketches(
    values: np.ndarray, units: np.ndarray, cap: int | None, batch: int = 500
) -> tuple[LevelSketches, int]:
    """The job's path: UnitCap (unless ``cap`` is None) then LevelSketches, batch by batch in
    arrival order; returns the sketches and the number of dropped elements."""
    sketches = LevelSketches(parse_hierarchy(HIERARCHY), COUNTERS)
    capper = None if cap is None else UnitCap(cap)
    for start in range(0, values.size, batch):
        v, u = values[start : start + batch], units[start : start + batch]
        sketches.update(v if capper is None else v[capper.keep(u)])
    return sketches, 0 if capper is None else capper.dropped


def _params(budget: PrivacyBudget) -> HHHParams:
    return HHHParams(epsilon=budget.epsilon, delta=budget.delta, tau=TAU, counters=COUNTERS)


def _scales(params: HHHParams, h: int) -> tuple[ReleaseScales, float]:
    cal = WindowCalibration.of(params, h)
    return cal.scales, cal.size_scale


def _draw(sketches: LevelSketches, params: HHHParams, source: SeededRandomSource, trials: int):
    """Per sketch, in release_window's order: (sorted keys, passed, values, noisy size) for ``trials``
    draws; with one partition the window size is released once, by level 1 (``sizes`` is 0 elsewhere)."""
    h = sketches.hierarchy.h
    scales, s_scale = _scales(params, h)
    out = []
    for (level, _p), sk in sketches.items():
        counters = sk.counters()
        keys = sorted(counters)
        padded = [counters[k] for k in keys] + [0] * (params.counters - len(keys))  # κ slots, as release_sketch draws
        passed, values = release_arrays(np.array(padded, dtype=np.int64), scales, source, trials)
        passed, values = passed[..., : len(keys)], values[..., : len(keys)]
        sized = params.partitions > 1 or level == 1
        sizes = sk.total + discrete_laplace(s_scale, trials, rng=source) if sized else np.zeros(trials, np.int64)
        out.append((level, keys, passed, values, sizes))
    return out


def _statistics(draws, floor: int) -> dict[str, np.ndarray]:
    """u's prefix value per level (floor when not released), their sum, the size sum, and all together
    (the prefix statistics only where u's prefix is a key of the sketch: not in the shift case)."""
    stats: dict[str, np.ndarray] = {}
    focus_sum = sizes_sum = 0
    hierarchy = parse_hierarchy(HIERARCHY)
    for level, keys, passed, values, sizes in draws:
        focus = int(hierarchy.keys(np.array([FOCUS_PREFIX], dtype=np.uint32), level)[0])
        if focus in keys:
            i = keys.index(focus)
            shown = np.where(passed[:, i], values[:, i], floor)
            stats[f"u_prefix_level{level}"] = shown
            focus_sum = focus_sum + shown
        sizes_sum = sizes_sum + sizes
    if stats:
        stats["u_prefix_sum"] = focus_sum
    stats["sizes_sum"] = sizes_sum
    stats["all"] = focus_sum + sizes_sum
    return stats


def _window_llr(draws, sk_a: LevelSketches, sk_b: LevelSketches, params: HHHParams) -> np.ndarray:
    """The exact ``ln P_A(o)/P_B(o)`` of the whole window's output o (:mod:`.release_likelihood`):
    every sketch's pass pattern and values, and the noisy window size (released once, by level 1,
    with one partition). Each sketch's noise is independent of the others', so the LLR is the sum
    of the per-sketch terms."""
    scales, s_scale = _scales(params, sk_a.hierarchy.h)
    llr = np.zeros(draws[0][2].shape[0])
    for (level, keys, passed, values, sizes), ((lvl, _p), a), (_, b) in zip(draws, sk_a.items(), sk_b.items()):
        assert level == lvl
        llr += sketch_pair_llr(keys, passed, values, a.counters(), b.counters(), scales)
        if params.partitions > 1 or level == 1:
            llr += size_log_likelihood(sizes, a.total, s_scale) - size_log_likelihood(sizes, b.total, s_scale)
    return llr


def _focus_counts(sketches: LevelSketches) -> list[int]:
    hierarchy = sketches.hierarchy
    return [
        sk.counters()[int(hierarchy.keys(np.array([FOCUS_PREFIX], dtype=np.uint32), level)[0])]
        for (level, _p), sk in sketches.items()
    ]


def _audit(budget: PrivacyBudget, cap: int | None, seed: int, case: str = "one_key", trials: int = TRIALS):
    """Build both sides through the job's path, draw and audit. ``one_key``: u's elements raise
    its prefix, placed just below T*, by m at every level; ``shift``: u's elements are new keys
    in full sketches and lower every counter by m (:func:`shift_streams`), B's at T* + m/2."""
    params = _params(budget)
    h = parse_hierarchy(HIERARCHY).h
    scales, _ = _scales(params, h)
    shift = CAP if cap is not None else EXTRA  # what u adds to its prefix's counters
    if case == "shift":
        (va, ua), (vb, ub) = shift_streams(scales.integer_threshold + shift // 2)
        (sk_a, _), (sk_b, _) = _capped_sketches(va, ua, cap), _capped_sketches(vb, ub, cap)
        check_shift(sk_a, sk_b, shift)
        return audit_sketch_pair(sk_a, sk_b, params, scales.integer_threshold - 1, seed, trials=trials)
    target = scales.integer_threshold - shift // 2  # side B's count of u's /16
    # base /16 count = focus_within + (m kept of the over-cap unit's 2m, or all 2m without cap)
    focus_within = target - (CAP if cap is not None else 2 * CAP)
    (va, ua), (vb, ub) = _streams(focus_within)
    (sk_a, dropped_a), (sk_b, dropped_b) = _capped_sketches(va, ua, cap), _capped_sketches(vb, ub, cap)
    if cap is not None:  # base units above the cap lose elements on both sides; u loses M − m more
        assert dropped_b > 0 and dropped_a == dropped_b + EXTRA - CAP
    counts_a, counts_b = _focus_counts(sk_a), _focus_counts(sk_b)
    # the audit sits where intended: u moves its prefix by exactly `shift` at every level
    assert counts_b[-1] == target and [a - b for a, b in zip(counts_a, counts_b)] == [shift] * h
    assert [sorted(s.counters()) for _, s in sk_a.items()] == [sorted(s.counters()) for _, s in sk_b.items()]
    return audit_sketch_pair(sk_a, sk_b, params, scales.integer_threshold - 1, seed, trials=trials)


def audit_sketch_pair(
    sk_a: LevelSketches,
    sk_b: LevelSketches,
    params: HHHParams,
    floor: int,
    seed: int,
    delta: float = DELTA,
    trials: int = TRIALS,
):
    """Draw the window release of both sides' sketches ``trials`` times (seeds ``seed``, ``seed + 1``)
    and audit the statistics of :func:`_statistics` together with the window's exact log-likelihood
    ratio (:func:`_window_llr`), searched into the tails (``floor``: the value shown for an
    unreleased prefix)."""
    samples = []
    for sketches, offset in ((sk_a, 0), (sk_b, 1)):
        source = SeededRandomSource(np.random.default_rng(seed + offset))
        draws = _draw(sketches, params, source, trials)
        stats = _statistics(draws, floor)
        stats["llr"] = _window_llr(draws, sk_a, sk_b, params)
        samples.append(stats)
    return audit_statistics(samples[0], samples[1], delta=delta, tail_grid=TAIL_GRID)


CASE_TRIALS = {"one_key": TRIALS, "shift": SHIFT_TRIALS}
# What the correct calibration's ε_lb must reach: the audit is not vacuous. In ``shift`` the shared
# noise is learnt from κ keys and the bound comes near ε (measured 0.76–0.77 in the three group
# audits); in ``one_key`` one key's pass/fail carries the thresholding term, so the bound is looser
# (0.54–0.61). A 2× break is flagged in both (measured figures in each module's docstring).
LOWER_BOUND = {"one_key": 0.45, "shift": 0.6}
HALF_UNIT = PrivacyUnit("user", "source address", CAP // 2)  # a 2x break: the group taken as m/2


@pytest.mark.parametrize("case", ["one_key", "shift"])
def test_user_level_release_passes_audit(case: str) -> None:
    """UnitCap(m) + calibration at (ε/m, δ/(m·e^ε)) shows no loss above ε for removing one unit's
    M > m elements, on both worst cases of the group: u's m kept elements raise one key by m at
    every level (``one_key``), or each decrements every counter of full sketches (``shift``).

    α = 1e-3 per Clopper–Pearson bound (fails with probability <= 2e-3 for a random seed; the seed
    is fixed). Measured ε_lb (exact LLR) 0.62 (one_key, 10^6 draws per side) and 0.77 (shift,
    2.5·10^5): the bound must also reach ``LOWER_BOUND`` (0.45ε, 0.6ε), which shows the audit is
    not vacuous; the 2× break below exceeds ε in both cases."""
    result = _audit(
        UNIT.event_budget(PrivacyBudget(EPSILON, DELTA)), CAP, stable_seed("user", case), case, CASE_TRIALS[case]
    )
    print(f"user-level {case}, correct: eps_lb={result.epsilon_lb:.3f} ({result.statistic}: {result.event})")
    assert LOWER_BOUND[case] * EPSILON <= result.epsilon_lb <= EPSILON, result


@pytest.mark.parametrize("case", ["one_key", "shift"])
def test_audit_flags_group_calibration_for_half_the_cap(case: str) -> None:
    """Capping at m but calibrating the group for m/2 (worst-case loss 2ε) is detected on both cases.

    α = 1e-3 per bound, fixed seeds; measured ε_lb 1.30 (one_key) and 1.78 (shift) against ε = 1
    (the correct calibration: 0.62 and 0.77): a miss would need the bound to fall by 0.3 / 0.78."""
    result = _audit(
        HALF_UNIT.event_budget(PrivacyBudget(EPSILON, DELTA)),
        CAP,
        stable_seed("user-half", case),
        case,
        CASE_TRIALS[case],
    )
    print(f"user-level {case}, group of m/2: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result


def test_audit_flags_cap_without_group_calibration() -> None:
    """Capping at m but calibrating at the event-level ε (no division by m) is detected.

    The unit's m kept elements then cost up to m·ε; α = 1e-3 per bound, fixed seed, 2.5·10^5 draws
    per side; measured ε_lb in the module docstring (far above 1)."""
    result = _audit(PrivacyBudget(EPSILON, DELTA), CAP, seed=202, trials=SHIFT_TRIALS)
    print(f"user-level, no group calibration: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result


@pytest.mark.parametrize("case", ["one_key", "shift"])
def test_audit_flags_group_calibration_without_cap(case: str) -> None:
    """Calibrating for m but not capping (u contributes all M = 8m elements) is detected: u's
    prefix then moves by 8m instead of m (``one_key``), or every counter does (``shift``).
    α = 1e-3 per bound, fixed seeds, 2.5·10^5 draws per side; measured ε_lb in the module docstring."""
    result = _audit(
        UNIT.event_budget(PrivacyBudget(EPSILON, DELTA)), None, stable_seed("user-nocap", case), case, SHIFT_TRIALS
    )
    print(f"user-level {case}, no cap: eps_lb={result.epsilon_lb:.3f}")
    assert result.epsilon_lb > EPSILON, result


def test_calibration_accounting() -> None:
    """δ (and ε) analytically: the audited calibration costs <= (ε, δ) per unit; the uncalibrated one costs m·ε."""
    claimed = PrivacyBudget(EPSILON, DELTA)
    cost = UNIT.user_cost(UNIT.event_budget(claimed))
    assert cost.epsilon <= EPSILON and cost.delta <= DELTA
    broken = UNIT.user_cost(claimed)
    assert broken.epsilon == pytest.approx(CAP * EPSILON) and broken.delta > DELTA
    # the event-level mechanism's δ' covers each of the m one-element steps of the group-privacy chain
    # (the tight threshold's charge per level is checked in test_release_audit / test_window_audit)
    params = _params(UNIT.event_budget(claimed))
    rel = params.release_budget
    h = parse_hierarchy(HIERARCHY).h
    scales, _ = _scales(params, h)
    from dphhh.privacy.tails import dlap_sum_tail

    charged = 2 * math.exp(rel.epsilon / h) * dlap_sum_tail(scales.integer_threshold - 1, scales.gamma, scales.w)
    assert h * charged <= rel.delta


def test_audited_core_is_what_release_window_draws() -> None:
    """For the same seed, one draw of the audited core equals release_sketch's output sketch by sketch,
    and release_window runs on the capped sketches with the calibrated parameters."""
    params = _params(UNIT.event_budget(PrivacyBudget(EPSILON, DELTA)))
    (va, ua), _ = _streams(1500)
    sketches, _ = _capped_sketches(va, ua, CAP)
    h = sketches.hierarchy.h
    core = _draw(sketches, params, SeededRandomSource(np.random.default_rng(9)), 1)
    source = SeededRandomSource(np.random.default_rng(9))
    for (level, keys, passed, values, sizes), ((lvl, p), sk) in zip(core, sketches.items()):
        rel = release_sketch(lvl, p, sk.counters(), sk.total, params=params, h=h, rng=source)
        assert rel.level == level
        assert rel.values == {k: int(v) for k, ok, v in zip(keys, passed[0], values[0]) if ok}
        assert rel.n_noisy == (int(sizes[0]) if level == 1 else None)
    report = release_window(sketches, params, rng=np.random.default_rng(9))
    assert report["params"]["epsilon"] == pytest.approx(EPSILON / CAP)
