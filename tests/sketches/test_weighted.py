"""Weighted records in the Misra-Gries sketch (docs/ALGORITHMS.md §2 "Weighted elements", tracker issue 12).

A record (x, v) with integer weight v >= 1 (already clipped to the public cap W) is defined as
**v unit inserts of x in a row**. Every test here checks the implementation against that
definition: the weighted kernel must leave exactly the state (slot keys, counters, total,
decrement-all steps, serialised bytes) of the expanded unit stream, in each of its two regimes
(passes over the counters, and offset + heap), which ``SCAN_RATE`` selects.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dphhh.sketches.misra_gries as mg
from dphhh.sketches.hierarchy import IPv4Hierarchy, PathHierarchy
from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.misra_gries import MisraGries, clip_weights

# ---------------------------------------------------------------------------------------------
# References
# ---------------------------------------------------------------------------------------------


def reference_units(kappa: int, records) -> tuple[list[int], list[int], int, int]:
    """Spec Algorithm 2, literally, one unit at a time: each record (x, v) is v unit inserts of x.

    Returns (slot keys, counters, decrement-all steps, total). Ties: smallest key (dummies first).
    """
    keys, counts, decrements, total = [-1 - i for i in range(kappa)], [0] * kappa, 0, 0
    for x, v in records:
        for _ in range(v):
            total += 1
            if x in keys:  # step 1
                counts[keys.index(x)] += 1
            elif min(counts) >= 1:  # step 2: decrement all, x dropped
                counts, decrements = [c - 1 for c in counts], decrements + 1
            else:  # step 3: the smallest key among the smallest counters
                slot = min(range(kappa), key=lambda i: (counts[i], keys[i]))
                keys[slot], counts[slot] = x, 1
    return keys, counts, decrements, total


def reference_rule(kappa: int, records) -> tuple[list[int], list[int], int, int]:
    """The spec's O(1) weighted rule, literally: C[x] += v for a key; else with m = min counter,
    t = min(v, m) steps at once, and if v > m, x replaces the smallest-key zero slot with v − m."""
    keys, counts, decrements, total = [-1 - i for i in range(kappa)], [0] * kappa, 0, 0
    for x, v in records:
        total += v
        if x in keys:
            counts[keys.index(x)] += v
            continue
        m = min(counts)
        t = min(v, m)
        counts, decrements = [c - t for c in counts], decrements + t
        if v > m:
            slot = min(range(kappa), key=lambda i: (counts[i], keys[i]))
            keys[slot], counts[slot] = x, v - m
    return keys, counts, decrements, total


def _state(sketch: MisraGries) -> tuple[list[int], list[int], int, int]:
    keys, counts = sketch.state()
    return keys.tolist(), counts.tolist(), sketch.decrements, sketch.total


REGIMES = {"default": mg.SCAN_RATE, "heap": 0, "passes": 10**12, "mixed": 2}


@pytest.fixture(params=sorted(REGIMES))
def regime(request, monkeypatch):
    """Run the test in each regime of the weighted kernel (the state must not depend on it)."""
    monkeypatch.setattr(mg, "SCAN_RATE", REGIMES[request.param])
    return request.param


def _weighted(kappa: int, records, cuts=()) -> MisraGries:
    """Sketch of ``records`` through weighted updates, split into calls at ``cuts``."""
    keys = np.array([x for x, _ in records], dtype=np.int64)
    weights = np.array([v for _, v in records], dtype=np.int64)
    sketch = MisraGries(kappa)
    bounds = [0, *sorted(cuts), len(records)]
    for lo, hi in zip(bounds, bounds[1:]):
        sketch.update(keys[lo:hi], weights[lo:hi])
    return sketch


def _expanded(kappa: int, records) -> MisraGries:
    """Sketch of ``records`` expanded into literal unit inserts through the existing unit path."""
    sketch = MisraGries(kappa)
    sketch.update(np.array([x for x, v in records for _ in range(v)], dtype=np.int64))
    return sketch


def _assert_same_as_units(kappa: int, records, cuts=()) -> MisraGries:
    weighted = _weighted(kappa, records, cuts)
    unit = _expanded(kappa, records)
    expected = reference_units(kappa, records)
    context = (kappa, records, cuts)
    assert _state(weighted) == _state(unit) == expected, context
    assert reference_rule(kappa, records) == expected, context  # the spec's rule is the definition
    assert weighted.to_bytes() == unit.to_bytes(), context
    assert weighted == unit
    return weighted


def _random_records(rng: np.random.Generator, n: int, domain: int, max_weight: int) -> list[tuple[int, int]]:
    keys = rng.integers(0, domain, n).tolist()
    weights = rng.integers(1, max_weight + 1, n).tolist()
    return list(zip(keys, weights))


# ---------------------------------------------------------------------------------------------
# Weighted update == v unit inserts in a row, exactly
# ---------------------------------------------------------------------------------------------


def test_hand_traced_cases_v_equal_to_m_and_several_zero_slots(regime):
    """κ=3 hand traces: v = m drops x and leaves zeros; v > m with two zero slots takes the smaller key."""
    base = [(5, 2), (6, 2), (7, 3)]  # slots (by dummy order -3, -2, -1): 5, 6, 7 with 2, 2, 3
    # v == m == 2: two decrement-all steps, 5 and 6 reach 0, x = 9 is NOT inserted.
    sketch = _assert_same_as_units(3, base + [(9, 2)])
    assert sketch.counters() == {5: 0, 6: 0, 7: 1} and sketch.decrements == 2 and sketch.total == 9
    # v > m == 2 with two zero slots (5 and 6): 1 takes the slot of 5 (smaller key), C = 4 − 2.
    sketch = _assert_same_as_units(3, base + [(1, 4)])
    assert sketch.counters() == {1: 2, 6: 0, 7: 1} and sketch.decrements == 2
    # After v == m the next record (weight 1) takes the smallest-key zero slot without decrementing.
    sketch = _assert_same_as_units(3, base + [(9, 2), (10, 1), (11, 5)])
    assert sketch.counters() == {10: 1, 11: 5, 7: 1} and sketch.decrements == 2
    # v < m: counters drop by v, nobody reaches zero, x is not inserted.
    sketch = _assert_same_as_units(3, base + [(9, 1)])
    assert sketch.counters() == {5: 1, 6: 1, 7: 2} and sketch.decrements == 1


def test_dummy_slots_are_taken_smallest_dummy_first_with_the_full_weight(regime):
    """While dummies remain, a new key takes the smallest dummy (−κ first) with C[x] = v."""
    sketch = _assert_same_as_units(4, [(8, 7), (3, 1), (8, 2)])
    keys, counts, _, _ = _state(sketch)
    assert keys == [-1, -2, 3, 8] and counts == [0, 0, 1, 9]


def test_random_small_kappa_heavy_churn_many_cases(regime):
    """3000 seeded cases: κ 1..5, weights 1..50, tiny domains (ties), split into up to 5 calls."""
    rng = np.random.default_rng(20260112)
    for _ in range(3000):
        kappa = int(rng.integers(1, 6))
        domain = int(rng.integers(1, 4 * kappa + 4))
        n = int(rng.integers(0, 40))
        max_weight = int(rng.choice([1, 2, 3, 5, 10, 50]))
        records = _random_records(rng, n, domain, max_weight)
        cuts = rng.integers(0, n + 1, int(rng.integers(0, 5))).tolist()
        _assert_same_as_units(kappa, records, cuts)


_record = st.tuples(st.integers(0, 11), st.integers(1, 50))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kappa=st.integers(1, 5),
    records=st.lists(_record, max_size=30),
    cuts=st.lists(st.integers(0, 30), max_size=4),
    rate=st.sampled_from(sorted(REGIMES.values())),
)
def test_property_weighted_equals_unit_expansion(kappa, records, cuts, rate):
    """Hypothesis: any records, κ, call splits and kernel regime give the unit expansion's state."""
    old = mg.SCAN_RATE
    mg.SCAN_RATE = rate
    try:
        _assert_same_as_units(kappa, records, [c for c in cuts if c <= len(records)])
    finally:
        mg.SCAN_RATE = old


def test_v_exactly_m_and_v_above_m_with_many_ties_are_exercised(regime):
    """Constructed streams: every slot at the same counter, then records of weight m−1, m, m+1, 3m."""
    for kappa in (1, 2, 3, 5, 8):
        for m in (1, 2, 7):
            fill = [(100 + i, m) for i in range(kappa)]  # all κ counters equal m: a κ-way tie
            for v in (max(1, m - 1), m, m + 1, 3 * m):
                for extra in ([], [(7, 1)], [(200, 1), (100, 2), (201, 4)]):
                    _assert_same_as_units(kappa, fill + [(7, v)] + extra)
                    _assert_same_as_units(kappa, fill + [(7, v)] + extra, cuts=[kappa, kappa + 1])


def test_mixed_weighted_and_unit_calls_and_successive_updates(regime):
    """Alternating weighted and unit calls (and weight-1 records) keep the expanded state throughout."""
    rng = np.random.default_rng(9)
    for _ in range(300):
        kappa = int(rng.integers(1, 7))
        sketch, unit, history = MisraGries(kappa), MisraGries(kappa), []
        for call in range(int(rng.integers(1, 8))):
            records = _random_records(rng, int(rng.integers(0, 25)), 3 * kappa + 2, int(rng.choice([1, 4, 30])))
            keys = np.array([x for x, _ in records], dtype=np.int64)
            if call % 3 == 1:  # a plain unit call on the same keys
                sketch.update(keys)
                records = [(x, 1) for x, _ in records]
            elif call % 3 == 2 and records:  # one record at a time through insert()
                for x, v in records:
                    sketch.insert(x, v)
            else:
                sketch.update(keys, np.array([v for _, v in records], dtype=np.int64))
            history += records
            unit.update(np.array([x for x, v in records for _ in range(v)], dtype=np.int64))
            assert _state(sketch) == _state(unit) == reference_units(kappa, history)
            assert sketch.to_bytes() == unit.to_bytes()


@pytest.mark.parametrize(
    ("kappa", "domain", "max_weight", "seed"), [(16, 40, 50, 1), (64, 400, 64, 2), (64, 80, 1000, 3), (256, 5000, 8, 4)]
)
def test_long_streams_equal_unit_expansion(regime, kappa, domain, max_weight, seed):
    """20 000 Zipf-ish records in uneven calls: exactly the expanded unit stream's state and bytes."""
    rng = np.random.default_rng(seed)
    keys = ((rng.zipf(1.3, 20_000) - 1) % domain) * 7919 + 3
    weights = np.minimum(rng.zipf(1.4, 20_000), max_weight)
    sketch, unit = MisraGries(kappa), MisraGries(kappa)
    for chunk in np.array_split(np.arange(20_000), 7):
        sketch.update(keys[chunk], weights[chunk])
    unit.update(np.repeat(keys, weights))
    assert sketch.to_bytes() == unit.to_bytes()
    assert sketch.decrements > 0 and sketch.total == int(weights.sum())


def test_adversarial_stream_that_makes_the_kernel_switch_to_the_heap():
    """Round-robin heavy hits plus fresh weight-1 keys (a decrement pass per two records) at the
    default rate: past κ/(2·SCAN_RATE) the call switches to offset + heap and still equals the
    unit expansion (the weight cap exceeds κ, so the round-robin hits keep every counter >= 1)."""
    kappa, cap = 512, 1024
    keys = [*range(kappa)]
    weights = [cap] * kappa
    for j in range(3000):
        keys += [j % kappa, 10**6 + j]
        weights += [cap, 1]
    keys_arr, weights_arr = np.array(keys, dtype=np.int64), np.array(weights, dtype=np.int64)
    sketch, unit = MisraGries(kappa), MisraGries(kappa)
    sketch.update(keys_arr, weights_arr)
    unit.update(np.repeat(keys_arr, weights_arr))
    assert sketch.to_bytes() == unit.to_bytes()
    assert sketch.decrements >= 2900 and mg.SCAN_RATE * 2 < kappa


def test_round_trip_after_weighted_updates():
    """A weighted sketch serialises, loads (its counters add up as for the unit stream) and goes on identically."""
    rng = np.random.default_rng(12)
    records = _random_records(rng, 500, 20, 40)
    sketch = _weighted(6, records)
    loaded = MisraGries.from_bytes(sketch.to_bytes())
    assert loaded == sketch
    more = _random_records(rng, 300, 25, 40)
    for s in (sketch, loaded):
        s.update(np.array([x for x, _ in more]), np.array([v for _, v in more]))
    assert loaded.to_bytes() == sketch.to_bytes() == _expanded(6, records + more).to_bytes()


# ---------------------------------------------------------------------------------------------
# Neighbouring streams: one extra record of weight v <= W
# ---------------------------------------------------------------------------------------------


def _shift_check(a: dict[int, int], b: dict[int, int], s: int, v: int) -> int:
    """Assert (ii)–(iii) of the weighted neighbour lemma; return Σ_k (a(k) − max(b(k) − s, 0))."""
    gap = 0
    for k in set(a) | set(b):
        floor = max(b.get(k, 0) - s, 0)
        assert a.get(k, 0) >= floor, (k, a, b, s)
        gap += a.get(k, 0) - floor
    assert gap <= v - s, (a, b, s, v)
    return gap


def test_weighted_neighbour_lemma(regime):
    """X = X' plus one record (x, v), v <= W, at a random position. With a = counters(X),
    b = counters(X') (absent keys count 0), T, T' their key sets and s = d(X) − d(X'):

    (i)   0 <= s <= v, and Σa − Σb = v − (κ+1)·s;
    (ii)  a(k) >= max(b(k) − s, 0) for every key k;
    (iii) Σ_k [a(k) − max(b(k) − s, 0)] <= v − s   (so ||a − max(b − s, 0)||_1 <= v − s);
    (iv)  |T \\ T'| <= 2v and |T' \\ T| <= 2v; a key of T \\ T' has a(k) <= v − s, a key of
          T' \\ T has b(k) <= s.

    Proof. By definition the record is v unit inserts of x in a row, so sketch(X) is the sketch of
    the unit stream Y_v, where Y_j is X' (expanded) with j copies of x at the record's position;
    Y_j is Y_{j−1} plus one element, so the unit Lemma 4.1.1 applies to each pair. Write c_j for
    the counters of Y_j. Case 1 of the Lemma: c_j = c_{j−1} + e_i for one key i. Case 2: every key
    of Y_{j−1}'s sketch is one lower in c_j (so it was >= 1) and Y_j's other keys are 0, i.e.
    c_j = D(c_{j−1}) with D(c) = max(c − 1, 0) on every key. The counters always add up to
    n − (κ+1)·d (each unit adds 1 or removes κ and itself), so a case-1 step keeps d and a case-2
    step, whose mass change −|T_{j−1}| >= −κ must equal 1 − (κ+1)·Δd, has Δd = 1: s is the number
    of case-2 steps, which gives (i). Compare c_j with g_j, the same steps with the increments
    left out (g_0 = b, so g_v = D^s(b) = max(b − s, 0)): an increment raises c_j alone by 1 on one
    key; D is monotone and 1-Lipschitz on each key. By induction c_j >= g_j everywhere and
    ||c_j − g_j||_1 <= (number of increments so far); at j = v that is (ii) and (iii), with v − s
    increments. Each unit step adds and removes at most 2 keys (Lemma 4.1.1), so over v steps at
    most 2v per side; a key of T \\ T' has b(k) = 0, so by (iii) a(k) <= v − s, and a key of
    T' \\ T has a(k) = 0 >= b(k) − s by (ii). ∎

    The test also checks the proof's premise step by step (each Y_j, Y_{j−1} pair is in exactly
    one case of the unit Lemma) and that the bounds are reached (s = 0, s = v, 0 < s < v, and
    equality in (iii) all occur).
    """
    rng = np.random.default_rng(4121)
    seen = Counter()
    for trial in range(2500):
        kappa = int(rng.integers(1, 7))
        domain = int(rng.integers(1, 3 * kappa + 3))
        cap = int(rng.choice([1, 2, 5, 12]))
        n = int(rng.integers(0, 8 * kappa + 6))
        x_prime = _random_records(rng, n, domain, cap)
        v = int(rng.integers(1, cap + 1))
        x = int(rng.integers(0, domain)) if trial % 3 else domain + 5  # a present key or a fresh one
        pos = int(rng.integers(0, n + 1))
        big, small = _weighted(kappa, x_prime[:pos] + [(x, v)] + x_prime[pos:]), _weighted(kappa, x_prime)
        a, b = big.counters(), small.counters()
        s = big.decrements - small.decrements
        assert 0 <= s <= v
        assert sum(a.values()) - sum(b.values()) == v - (kappa + 1) * s
        gap = _shift_check(a, b, s, v)
        only_x, only_x_prime = set(a) - set(b), set(b) - set(a)
        assert len(only_x) <= 2 * v and len(only_x_prime) <= 2 * v
        assert all(a[k] <= v - s for k in only_x) and all(b[k] <= s for k in only_x_prime)
        seen["s=0" if s == 0 else "s=v" if s == v else "0<s<v"] += 1
        seen["tight"] += gap == v - s
        if trial % 10 == 0:  # the premise: each unit step of the chain is in exactly one Lemma case
            prev = small
            for j in range(1, v + 1):
                cur = _weighted(kappa, x_prime[:pos] + [(x, j)] + x_prime[pos:])
                ca, cb = cur.counters(), prev.counters()
                diff = [k for k in set(ca) | set(cb) if ca.get(k, 0) != cb.get(k, 0)]
                case1 = len(diff) == 1 and ca.get(diff[0], 0) == cb.get(diff[0], 0) + 1
                case2 = all(cb[k] == ca.get(k, 0) + 1 for k in cb) and all(ca[k] == 0 for k in ca if k not in cb)
                assert case1 != case2 and cur.decrements - prev.decrements == int(case2)
                prev = cur
    assert seen["s=0"] >= 200 and seen["s=v"] >= 200 and seen["0<s<v"] >= 50
    assert seen["tight"] >= 500


def test_one_record_of_weight_two_can_change_three_keys_per_side():
    """The unit Lemma's "at most 2 keys per side" does not carry over to records: one record of
    weight 2 (two unit neighbours in a row) leaves these κ = 3 sketches with no key in common, so
    any direct privacy analysis of a record must use (iv) above, not the unit bound."""
    x_prime = [(6, 2), (2, 2), (1, 2), (4, 1), (5, 1)]
    x = x_prime[:1] + [(8, 2)] + x_prime[1:]
    big, small = _assert_same_as_units(3, x), _assert_same_as_units(3, x_prime)
    assert big.counters() == {4: 1, 8: 0, 5: 1} and small.counters() == {1: 0, 2: 0, 6: 0}
    s = big.decrements - small.decrements
    assert s == 0 and _shift_check(big.counters(), small.counters(), s, 2) == 2  # (iii) with equality


# ---------------------------------------------------------------------------------------------
# Error guarantee with weighted frequencies
# ---------------------------------------------------------------------------------------------


def test_estimates_within_error_bounds_with_weighted_frequencies(regime):
    """f(x) − n/(κ+1) <= C[x] <= f(x) with f the sum of x's (clipped) weights and n = Σ weights."""
    rng = np.random.default_rng(31)
    for trial in range(150):
        kappa = int(rng.integers(1, 30))
        domain = int(rng.integers(1, 300))
        n = int(rng.integers(0, 2000))
        keys = (rng.zipf(1.3, n) - 1) % domain if trial % 2 else rng.integers(0, domain, n)
        weights = clip_weights(rng.zipf(1.5, n), int(rng.choice([1, 8, 100])))
        sketch = MisraGries(kappa)
        for chunk in np.array_split(np.arange(n), 3):
            sketch.update(keys[chunk], weights[chunk])
        freq = Counter()
        for k, w in zip(keys.tolist(), weights.tolist()):
            freq[k] += w
        total = int(weights.sum())
        assert sketch.total == total and sketch.decrements * (kappa + 1) <= total
        probe = sorted(set(freq) | {10**12})
        for key, e in zip(probe, sketch.estimates(np.array(probe, dtype=np.int64)).tolist()):
            f = freq.get(key, 0)
            assert f - total / (kappa + 1) <= e <= f
            assert f - sketch.decrements <= e
            assert sketch.get_lower_bound(key) <= f <= sketch.get_upper_bound(key)


# ---------------------------------------------------------------------------------------------
# Input validation and clip_weights
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        (np.array([1, 2], dtype=np.int64), "2 weights for 3 keys"),
        (np.array([1, 0, 2], dtype=np.int64), "every weight must be >= 1"),
        (np.array([1, -4, 2], dtype=np.int64), "every weight must be >= 1"),
        (np.array([1.0, 2.0, 3.0]), "weights must be integers"),
        (np.array([True, True, True]), "weights must be integers"),
        (np.array([[1, 1, 1]]), "one-dimensional"),
        (np.array([1, 2**63, 1], dtype=np.uint64), "below 2\\*\\*63"),
        ([1, 2.5, 1], "weights must be integers"),
    ],
)
def test_update_rejects_bad_weights_and_leaves_the_sketch_unchanged(weights, message):
    """Bad weights raise ValueError "MisraGries.update: …" before anything is inserted."""
    sketch = MisraGries(3)
    sketch.update([1, 2, 2], [1, 1, 4])
    before = sketch.to_bytes()
    with pytest.raises(ValueError, match="^MisraGries.update: .*" + message):
        sketch.update(np.array([5, 6, 7]), weights)
    assert sketch.to_bytes() == before


def test_update_rejects_a_total_that_would_overflow():
    """Weights that would bring n to 2**62 are refused (the offset needs the headroom)."""
    sketch = MisraGries(2)
    sketch.update([1], [2**61])
    with pytest.raises(ValueError, match="MisraGries.update: the weights would bring the total"):
        sketch.update([1, 2], [2**60, 2**60])
    assert sketch.total == 2**61
    sketch.update([1, 2], [2**59, 2**59])
    assert sketch.total == 2**61 + 2**60


def test_weights_accept_lists_unsigned_and_empty_inputs():
    """Lists, tuples, unsigned and small integer dtypes work; empty keys with empty weights do nothing."""
    a, b, c = MisraGries(3), MisraGries(3), MisraGries(3)
    a.update([4, 5, 4], [3, 1, 2])
    b.update(np.array([4, 5, 4], dtype=np.uint32), np.array([3, 1, 2], dtype=np.uint8))
    c.update((4, 5, 4), (3, 1, 2))
    c.update([], [])
    c.update(np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    assert a.to_bytes() == b.to_bytes() == c.to_bytes()
    assert a.counters() == {4: 5, 5: 1} and a.total == 6
    with pytest.raises(ValueError, match="MisraGries.update: 1 weights for 0 keys"):
        c.update([], [1])


def test_unit_weights_equal_the_unit_path():
    """All weights 1 give exactly the unweighted update."""
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 50, 5000)
    a, b = MisraGries(8), MisraGries(8)
    a.update(keys, np.ones(keys.size, dtype=np.int64))
    b.update(keys)
    assert a.to_bytes() == b.to_bytes()


def test_clip_weights_clips_and_validates_naming_the_owner():
    """clip_weights: min(v, W) as int64; non-integers, weights < 1 and bad caps raise naming the owner."""
    assert clip_weights(np.array([1, 5, 64, 65, 10**6]), 64).tolist() == [1, 5, 64, 64, 64]
    assert clip_weights([3, 1], 2).dtype == np.int64
    assert clip_weights(np.array([2**64 - 1, 1], dtype=np.uint64), 10).tolist() == [10, 1]
    assert clip_weights(np.array([100, 1], dtype=np.int8), 1000).tolist() == [100, 1]
    assert clip_weights([], 5).tolist() == []
    with pytest.raises(ValueError, match="^clip_weights: every weight must be >= 1, got 0"):
        clip_weights(np.array([3, 0]), 10)
    with pytest.raises(ValueError, match="^flows: every weight must be >= 1, got -2"):
        clip_weights([3, -2], 10, owner="flows")
    with pytest.raises(ValueError, match="^flows: weights must be integers"):
        clip_weights(np.array([1.5]), 10, owner="flows")
    for cap in (0, -1, 2.0, True, 2**63):
        with pytest.raises(ValueError, match="^clip_weights: the weight cap must be an integer"):
            clip_weights([1], cap)


# ---------------------------------------------------------------------------------------------
# LevelSketches: weights routed with their keys to every (level, partition)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("partitions", [1, 3])
def test_level_sketches_weighted_equals_repeated_values(regime, partitions):
    """Weighted values leave every (level, partition) sketch as the values repeated in a row do."""
    rng = np.random.default_rng(partitions)
    values = (rng.integers(0, 6, 3000).astype(np.uint32) << np.uint32(24)) | rng.integers(0, 40, 3000).astype(np.uint32)
    weights = clip_weights(rng.zipf(1.6, 3000), 20)
    hierarchy = IPv4Hierarchy()
    weighted, repeated = LevelSketches(hierarchy, 8, partitions), LevelSketches(hierarchy, 8, partitions)
    for chunk in np.array_split(np.arange(3000), 4):
        weighted.update(values[chunk], weights[chunk])
    repeated.update(np.repeat(values, weights))
    for (where, a), (_, b) in zip(weighted.items(), repeated.items()):
        assert a.to_bytes() == b.to_bytes(), where
    assert sum(s.total for (level, _), s in weighted.items() if level == 1) == int(weights.sum())


def test_level_sketches_weighted_paths_and_validation():
    """Path values take weights too; a length mismatch or a bad weight raises "LevelSketches.update: …"."""
    values = ["a/b/c/d", "a/b/x/y", "q/r/s/t", "a/b/c/d"]
    weights = [3, 1, 2, 5]
    weighted, repeated = LevelSketches(PathHierarchy(4), 2), LevelSketches(PathHierarchy(4), 2)
    weighted.update(values, weights)
    repeated.update([v for v, w in zip(values, weights) for _ in range(w)])
    for (where, a), (_, b) in zip(weighted.items(), repeated.items()):
        assert a.to_bytes() == b.to_bytes(), where
    with pytest.raises(ValueError, match="^LevelSketches.update: 3 weights for 4 values"):
        weighted.update(values, [1, 2, 3])
    with pytest.raises(ValueError, match="^LevelSketches.update: every weight must be >= 1"):
        weighted.update(values, [1, 0, 1, 1])
    with pytest.raises(ValueError, match="^LevelSketches.update: 1 weights for 0 values"):
        weighted.update([], [1])
    weighted.update([], [])  # nothing to insert
