"""Tests of the Misra-Gries sketch (docs/ALGORITHMS.md §2, Algorithm 2 — Lebeda–Tětek variant)."""

from __future__ import annotations

import struct
import zlib
from collections import Counter

import numpy as np
import pytest

from dphhh.sketches.misra_gries import MAX_KAPPA, MisraGries, SketchFormatError

# ---------------------------------------------------------------------------------------------
# Literal reference of Algorithm 2 (docs/ALGORITHMS.md §2), unit weights, ties broken by the smallest key.
# ---------------------------------------------------------------------------------------------


def reference_mg(kappa: int, stream) -> tuple[list[int], list[int], int]:
    """Insert ``stream`` one element at a time; return (slot keys, counters, decrement-all steps)."""
    keys = [-1 - i for i in range(kappa)]  # κ distinct dummies that no real key (>= 0) equals
    counts = [0] * kappa
    decrements = 0
    for x in stream:
        if x in keys:  # step 1: x is a key
            counts[keys.index(x)] += 1
        elif min(counts) >= 1:  # step 2: every counter >= 1: decrement all, x is dropped
            counts = [c - 1 for c in counts]
            decrements += 1
        else:  # step 3: among the slots with the smallest counter, the one holding the smallest key
            slot = min(range(kappa), key=lambda i: (counts[i], keys[i]))
            keys[slot], counts[slot] = x, 1
    return keys, counts, decrements


def slot_order_mg(kappa: int, stream) -> tuple[list[int], list[int]]:
    """Algorithm 2 with ties broken by the lowest slot index (the rule the sketch must NOT use)."""
    keys = [-1 - i for i in range(kappa)]
    counts = [0] * kappa
    for x in stream:
        if x in keys:
            counts[keys.index(x)] += 1
        elif min(counts) >= 1:
            counts = [c - 1 for c in counts]
        else:
            slot = counts.index(min(counts))
            keys[slot], counts[slot] = x, 1
    return keys, counts


def _state(sketch: MisraGries) -> tuple[list[int], list[int]]:
    keys, counts = sketch.state()
    return keys.tolist(), counts.tolist()


def _random_stream(rng: np.random.Generator, n: int, domain: int, kind: str) -> np.ndarray:
    if kind == "uniform":
        return rng.integers(0, domain, n, dtype=np.int64)
    # Zipf-like: heavy keys plus a tail, folded into the domain, then mapped to scattered ids.
    raw = (rng.zipf(1.3, n) - 1) % domain
    ids = rng.permutation(domain).astype(np.int64) * 7919 + 3
    return ids[raw]


def _split_update(sketch: MisraGries, stream: np.ndarray, cuts) -> None:
    bounds = [0, *sorted(cuts), len(stream)]
    for lo, hi in zip(bounds, bounds[1:]):
        sketch.update(stream[lo:hi])


# ---------------------------------------------------------------------------------------------
# Batch update == reference, exactly
# ---------------------------------------------------------------------------------------------


def test_reference_itself_matches_hand_trace():
    """The reference reproduces a hand-traced κ=2 run including a decrement-all and a refill."""
    keys, counts, decrements = reference_mg(2, [5, 5, 7, 9, 9, 3])
    # dummies: slot0 = -1, slot1 = -2 (smallest key first): 5 -> slot1; 5 -> 2; 7 -> slot0;
    # 9 -> decrement (7:0, 5:1); 9 -> slot0 (7 evicted); 3 -> decrement.
    assert (keys, counts, decrements) == ([9, 5], [0, 0], 2)


def test_batch_update_equals_reference_on_random_streams_and_splits():
    """For random κ, streams and split points, chunked updates leave exactly the reference state."""
    rng = np.random.default_rng(20240601)
    for trial in range(1000):
        kappa = int(rng.integers(1, 9))
        domain = int(rng.integers(1, 3 * kappa + 4))
        n = int(rng.integers(0, 300))
        stream = _random_stream(rng, n, domain, "uniform" if trial % 2 else "zipf")
        cuts = rng.integers(0, n + 1, int(rng.integers(0, 6))).tolist()
        sketch = MisraGries(kappa)
        _split_update(sketch, stream, cuts)
        keys, counts, decrements = reference_mg(kappa, stream.tolist())
        assert _state(sketch) == (keys, counts), (kappa, stream.tolist(), cuts)
        assert sketch.decrements == decrements
        assert sketch.total == n


def test_kappa_one_matches_reference():
    """With a single slot the sketch follows the reference exactly (hits, decrements, refills)."""
    rng = np.random.default_rng(11)
    for _ in range(50):
        stream = rng.integers(0, 3, int(rng.integers(1, 200)))
        sketch = MisraGries(1)
        _split_update(sketch, stream, rng.integers(0, stream.size, 3).tolist())
        keys, counts, decrements = reference_mg(1, stream.tolist())
        assert _state(sketch) == (keys, counts)
        assert sketch.decrements == decrements


def test_tiny_domain_single_key_never_decrements():
    """A stream of one repeated key only ever increments that key's counter."""
    sketch = MisraGries(3)
    sketch.update(np.full(1000, 42))
    assert _state(sketch) == ([-1, -2, 42], [0, 0, 1000])  # 42 takes the slot of the smallest dummy, -3
    assert sketch.decrements == 0


def test_domain_larger_by_one_than_kappa_decrements_on_every_cycle():
    """Cycling through κ+1 distinct keys triggers a decrement-all once per cycle, as the reference."""
    kappa = 4
    stream = np.tile(np.arange(kappa + 1), 50)
    sketch = MisraGries(kappa)
    sketch.update(stream)
    keys, counts, decrements = reference_mg(kappa, stream.tolist())
    assert _state(sketch) == (keys, counts)
    assert sketch.decrements == decrements == 50


def test_element_by_element_insert_equals_single_batch():
    """``insert`` one by one, one big ``update`` and list input all leave the same state."""
    rng = np.random.default_rng(5)
    stream = _random_stream(rng, 2000, 30, "zipf")
    one, batch, as_list = MisraGries(6), MisraGries(6), MisraGries(6)
    for x in stream.tolist():
        one.insert(x)
    batch.update(stream)
    as_list.update(stream.tolist())
    assert one == batch == as_list
    assert _state(one) == _state(batch)


@pytest.mark.parametrize(
    ("kappa", "domain", "kind", "seed"),
    [(16, 40, "uniform", 1), (16, 5000, "zipf", 2), (16, 17, "uniform", 3), (64, 300, "zipf", 4)],
)
def test_long_stream_matches_reference(kappa, domain, kind, seed):
    """A 20 000-element stream updated in uneven chunks ends in exactly the reference state."""
    rng = np.random.default_rng(seed)
    stream = _random_stream(rng, 20_000, domain, kind)
    sketch = MisraGries(kappa)
    _split_update(sketch, stream, rng.integers(0, stream.size, 9).tolist())
    keys, counts, decrements = reference_mg(kappa, stream.tolist())
    assert _state(sketch) == (keys, counts)
    assert sketch.decrements == decrements
    assert decrements > 0  # the stream exercised step 2


def test_large_keys_and_hash_collisions_match_reference():
    """Keys near 2**63 and keys that are multiples of a large power of two still behave exactly."""
    rng = np.random.default_rng(8)
    base = np.array([2**63 - 1, 2**62, 0, 1 << 40, 3 << 40, 5 << 40, 7 << 40, 2**32], dtype=np.int64)
    stream = base[rng.integers(0, base.size, 3000)]
    sketch = MisraGries(5)
    _split_update(sketch, stream, [100, 1000, 2500])
    keys, counts, _ = reference_mg(5, stream.tolist())
    assert _state(sketch) == (keys, counts)


# ---------------------------------------------------------------------------------------------
# Lemma 4.1.1 (Lebeda & Tětek Lemma 5) on neighbouring streams
# ---------------------------------------------------------------------------------------------


def _lemma_cases(a: dict[int, int], b: dict[int, int]) -> tuple[bool, bool]:
    """(case 1, case 2) of Lemma 4.1.1 with a = counters(X), b = counters(X'), X = X' + one element.

    Case 1: exactly one key i has a[i] = b[i] + 1, every other key is equal (missing = 0).
    Case 2: every key of X' is one *higher* in X' than in X (b[k] = a[k] + 1), and every key of X
    that X' lacks has counter 0 in X (the extra element caused one more decrement-all in X).
    """
    keys = set(a) | set(b)
    diff = [k for k in keys if a.get(k, 0) != b.get(k, 0)]
    case1 = len(diff) == 1 and a.get(diff[0], 0) == b.get(diff[0], 0) + 1
    case2 = all(b[k] == a.get(k, 0) + 1 for k in b) and all(a[k] == 0 for k in a if k not in b)
    return case1, case2


def _neighbours(rng: np.random.Generator, kappa: int, domain: int, n: int, fresh: bool):
    x_prime = rng.integers(0, domain, n)
    pos = int(rng.integers(0, n + 1))
    extra = domain + 17 if fresh else int(rng.integers(0, domain))
    return np.insert(x_prime, pos, extra), x_prime


def _neighbour_sketches(rng: np.random.Generator, kappa: int, domain: int, n: int, fresh: bool):
    """(sketch of X, sketch of X', X, X') for a random neighbouring pair (X has one extra element)."""
    x, x_prime = _neighbours(rng, kappa, domain, n, fresh)
    big, small = MisraGries(kappa), MisraGries(kappa)
    big.update(x)
    small.update(x_prime)
    return big, small, x, x_prime


def test_lemma_4_1_1_exactly_one_case_holds_and_both_occur():
    """On random neighbouring streams exactly one case of Lemma 4.1.1 holds, and both cases occur."""
    rng = np.random.default_rng(4242)
    seen = Counter()
    for trial in range(5000):
        kappa = int(rng.integers(1, 9))
        domain = int(rng.integers(1, 3 * kappa + 3))
        n = int(rng.integers(0, 15 * kappa + 10))
        big, small, x, x_prime = _neighbour_sketches(rng, kappa, domain, n, fresh=trial % 3 == 0)
        case1, case2 = _lemma_cases(big.counters(), small.counters())
        assert case1 != case2, (kappa, x_prime.tolist(), x.tolist(), big.counters(), small.counters())
        seen["case1" if case1 else "case2"] += 1
        if case2 and len(small.counters()) >= 2:
            seen["case2_many_shifted"] += 1
    assert seen["case1"] >= 300
    assert seen["case2"] >= 300
    assert seen["case2_many_shifted"] >= 100  # not only the degenerate one-key shift


def test_lemma_4_1_1_isolated_keys_have_counter_at_most_one():
    """A key held by only one of two neighbouring sketches always has counter 0 or 1 there."""
    rng = np.random.default_rng(77)
    isolated_seen = 0
    for trial in range(5000):
        kappa = int(rng.integers(1, 12))
        domain = int(rng.integers(kappa, 2 * kappa + 4))
        n = int(rng.integers(0, 10 * kappa + 10))
        big, small, _, _ = _neighbour_sketches(rng, kappa, domain, n, fresh=trial % 2 == 0)
        a, b = big.counters(), small.counters()
        for k in set(a) - set(b):
            assert a[k] <= 1, (k, a, b)
            isolated_seen += 1
        for k in set(b) - set(a):
            assert b[k] <= 1, (k, a, b)
            isolated_seen += 1
    assert isolated_seen > 500


_SLOT_ORDER_COUNTEREXAMPLE = [0, 1, 1, 2, 4, 3, 4, 0, 2, 5, 6]  # X'; X adds 3 at position 4 (κ = 4)


def _isolated(a: list[int], b: list[int]) -> tuple[set[int], set[int]]:
    ta, tb = {k for k in a if k >= 0}, {k for k in b if k >= 0}
    return ta - tb, tb - ta


def test_slot_order_tie_break_breaks_the_lemma():
    """Ties broken by slot order leave three keys per side on this κ = 4 pair: why the sketch uses the smallest key."""
    x_prime = _SLOT_ORDER_COUNTEREXAMPLE
    x = x_prime[:4] + [3] + x_prime[4:]
    only_x, only_x_prime = _isolated(slot_order_mg(4, x)[0], slot_order_mg(4, x_prime)[0])
    assert len(only_x) == 3 and len(only_x_prime) == 3


def test_lemma_4_1_1_at_most_two_isolated_keys_per_side():
    """Neighbouring sketches share all but at most 2 keys per side (|T ∩ T'| >= κ − 2, docs/ALGORITHMS.md §2)."""
    x_prime = _SLOT_ORDER_COUNTEREXAMPLE
    x = x_prime[:4] + [3] + x_prime[4:]
    big, small = MisraGries(4), MisraGries(4)
    big.update(x)
    small.update(x_prime)
    only_x, only_x_prime = _isolated(_state(big)[0], _state(small)[0])
    assert len(only_x) <= 2 and len(only_x_prime) <= 2
    rng = np.random.default_rng(2024)
    worst = 0
    for trial in range(6000):
        kappa = int(rng.integers(2, 9))
        domain = int(rng.integers(kappa, 3 * kappa + 3))
        n = int(rng.integers(0, 12 * kappa + 10))
        a, b, xx, xp = _neighbour_sketches(rng, kappa, domain, n, fresh=trial % 3 == 0)
        one, two = _isolated(_state(a)[0], _state(b)[0])
        worst = max(worst, len(one), len(two))
        assert len(one) <= 2 and len(two) <= 2, (kappa, xp.tolist(), xx.tolist())
    assert worst == 2  # the bound is reached, so the check is not vacuous


# ---------------------------------------------------------------------------------------------
# Error bounds
# ---------------------------------------------------------------------------------------------


def test_estimates_within_misra_gries_error_bounds():
    """Every estimate lies in [f − n/(κ+1), f]; lower <= f <= upper; decrements <= n/(κ+1)."""
    rng = np.random.default_rng(99)
    zero_real_counters_seen = 0
    for trial in range(120):
        kappa = int(rng.integers(1, 40))
        domain = int(rng.integers(1, 400))
        n = int(rng.integers(0, 5000))
        stream = _random_stream(rng, n, domain, "zipf" if trial % 2 else "uniform")
        sketch = MisraGries(kappa)
        _split_update(sketch, stream, rng.integers(0, n + 1, 3).tolist())
        freq = Counter(stream.tolist())
        probe = sorted(set(freq) | {10**12, 10**12 + 1})  # include keys never seen
        est = sketch.estimates(np.array(probe, dtype=np.int64)).tolist()
        d = sketch.decrements
        assert d * (kappa + 1) <= n
        assert sketch.maximum_error == d
        for key, e in zip(probe, est):
            f = freq.get(key, 0)
            assert f - n / (kappa + 1) <= e <= f
            assert f - d <= e
            assert e == sketch.estimate(key)
            assert sketch.get_lower_bound(key) <= f <= sketch.get_upper_bound(key)
        counters = sketch.counters()
        keys, counts = _state(sketch)
        assert all(k >= 0 for k in counters)
        assert counters == {k: c for k, c in zip(keys, counts) if k >= 0}
        zero_real_counters_seen += sum(1 for c in counters.values() if c == 0)
        assert all(counters[k] == sketch.estimate(k) for k in counters)
    assert zero_real_counters_seen > 0  # zero counters of real keys were present and reported


def test_counters_exclude_dummies_and_keep_zero_counters():
    """Dummy slots never appear in ``counters``; real keys decremented to 0 stay with counter 0."""
    sketch = MisraGries(3)
    assert sketch.counters() == {}
    sketch.update([4, 4, 8])
    assert sketch.counters() == {4: 2, 8: 1}
    sketch.update([9, 10])  # 9 fills the last slot; 10 forces a decrement-all
    assert sketch.counters() == {4: 1, 8: 0, 9: 0}
    assert sketch.estimate(10) == 0 and sketch.decrements == 1
    assert sketch.estimate(-1) == 0  # the dummy key of slot 0 is not a key


# ---------------------------------------------------------------------------------------------
# Serialisation
# ---------------------------------------------------------------------------------------------

_HEADER_SIZE = struct.calcsize("<4sHHIQQ")  # magic, version, flags, kappa, total, decrements
_VERSION_BYTES = range(4, 6)


def _populated(kappa: int = 5, seed: int = 3, n: int = 400) -> MisraGries:
    rng = np.random.default_rng(seed)
    sketch = MisraGries(kappa)
    sketch.update(_random_stream(rng, n, 3 * kappa, "zipf"))
    return sketch


def _recrc(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


def test_round_trip_equals_and_continues_identically():
    """A loaded sketch equals the original and stays equal after the same further stream."""
    rng = np.random.default_rng(21)
    for kappa in (1, 2, 7, 33):
        original = _populated(kappa, seed=kappa)
        data = original.to_bytes()
        loaded = MisraGries.from_bytes(data)
        assert loaded == original
        assert loaded.to_bytes() == data
        more = _random_stream(rng, 3000, 4 * kappa, "uniform")
        original.update(more)
        loaded.update(more)
        assert loaded == original
        assert _state(loaded) == _state(original)


def test_round_trip_of_empty_sketch_and_bytes_like_inputs():
    """An empty sketch round-trips, and bytearray/memoryview inputs load like bytes."""
    empty = MisraGries(4)
    assert MisraGries.from_bytes(empty.to_bytes()) == empty
    full = _populated()
    data = full.to_bytes()
    assert MisraGries.from_bytes(bytearray(data)) == full
    assert MisraGries.from_bytes(memoryview(data)) == full


def test_rebuilt_index_after_load_gives_identical_future_behaviour():
    """After a load the rebuilt index finds loaded keys, reuses zero slots by slot order, decrements."""
    kappa = 6
    original = MisraGries(kappa)
    # Leave real keys with zero and with positive counters after a decrement-all.
    original.update([1, 1, 1, 2, 3, 4, 5, 6, 7, 2, 8])
    assert 0 in original.counters().values()
    loaded = MisraGries.from_bytes(original.to_bytes())
    rng = np.random.default_rng(31)
    tail = np.concatenate([[3, 9, 10, 11, 1, 1], rng.integers(0, 15, 5000)])
    for chunk in np.array_split(tail, 7):
        original.update(chunk)
        loaded.update(chunk)
        assert _state(loaded) == _state(original)
        assert loaded.decrements == original.decrements
    prefix = [1, 1, 1, 2, 3, 4, 5, 6, 7, 2, 8]
    assert _state(loaded) == tuple(reference_mg(kappa, prefix + tail.tolist())[:2])


def test_every_single_byte_flip_outside_version_is_reported_as_corruption():
    """Flipping any byte (other than the version field) raises SketchFormatError 'Possible corruption'."""
    data = _populated(kappa=5).to_bytes()
    assert len(data) == _HEADER_SIZE + 16 * 5 + 4
    for pos in range(len(data)):
        if pos in _VERSION_BYTES:
            continue
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[pos] ^= mask
            with pytest.raises(SketchFormatError, match="Possible corruption"):
                MisraGries.from_bytes(bytes(bad))


def test_byte_flip_in_version_field_is_reported_as_corruption():
    """A flipped version byte (CRC no longer matching) is reported as 'Possible corruption', not
    misdiagnosed as an unsupported version: from_bytes checks the checksum before the version."""
    data = _populated(kappa=5).to_bytes()
    for pos in _VERSION_BYTES:
        bad = bytearray(data)
        bad[pos] ^= 0xFF
        with pytest.raises(SketchFormatError, match="Possible corruption"):
            MisraGries.from_bytes(bytes(bad))


def test_truncated_and_extended_data_rejected():
    """Truncated data (any length) and trailing extra bytes raise 'Possible corruption'."""
    data = _populated(kappa=4).to_bytes()
    for cut in (0, 1, 4, _HEADER_SIZE, _HEADER_SIZE + 4, len(data) - 4, len(data) - 1):
        with pytest.raises(SketchFormatError, match="Possible corruption"):
            MisraGries.from_bytes(data[:cut])
    for extra in (b"\x00", b"\x00" * 16, data):
        with pytest.raises(SketchFormatError, match="Possible corruption"):
            MisraGries.from_bytes(data + extra)


def test_wrong_magic_rejected():
    """Data with a different magic (e.g. another format) raises 'Possible corruption'."""
    data = _populated().to_bytes()
    with pytest.raises(SketchFormatError, match="Possible corruption"):
        MisraGries.from_bytes(_recrc(b"XXXX" + data[4:-4]))


def test_version_mismatch_message_mentions_version():
    """A well-formed blob with another version number is rejected with a message naming the version."""
    data = bytearray(_populated().to_bytes()[:-4])
    data[4:6] = struct.pack("<H", 2)
    with pytest.raises(SketchFormatError, match=r"version 2"):
        MisraGries.from_bytes(_recrc(bytes(data)))


def _patched(sketch: MisraGries, keys=None, counts=None, total=None, decrements=None) -> bytes:
    k, c = sketch.state()
    keys = k if keys is None else np.asarray(keys, dtype=np.int64)
    counts = c if counts is None else np.asarray(counts, dtype=np.int64)
    header = struct.pack(
        "<4sHHIQQ",
        b"DPMG",
        1,
        0,
        sketch.k,
        sketch.total if total is None else total,
        sketch.decrements if decrements is None else decrements,
    )
    return _recrc(header + keys.astype("<i8").tobytes() + counts.astype("<i8").tobytes())


def test_checksum_valid_but_inconsistent_state_rejected():
    """Blobs with a valid CRC but an impossible state (bad totals, duplicates, negatives) are rejected."""
    sketch = MisraGries(3)
    sketch.update([1, 1, 2])  # keys [1, 2, -3], counts [2, 1, 0]
    assert MisraGries.from_bytes(_patched(sketch)) == sketch  # the patcher itself is faithful
    bad_blobs = [
        _patched(sketch, total=4),  # counters do not add up
        _patched(sketch, decrements=1),
        _patched(sketch, keys=[1, 1, -3], counts=[2, 1, 0]),  # duplicate real key
        _patched(sketch, keys=[1, 2, -3], counts=[4, -1, 0]),  # negative counter, same sum
        _patched(sketch, keys=[1, -2, -3], counts=[2, 0, 1]),  # dummy with non-zero counter
    ]
    for blob in bad_blobs:
        with pytest.raises(SketchFormatError, match="Possible corruption"):
            MisraGries.from_bytes(blob)


def test_sketch_format_error_is_a_value_error():
    """SketchFormatError subclasses ValueError so generic handlers catch it."""
    assert issubclass(SketchFormatError, ValueError)


# ---------------------------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------------------------


def test_negative_keys_rejected_without_changing_state():
    """A batch containing a negative key is rejected as a whole and leaves the sketch untouched."""
    sketch = MisraGries(3)
    sketch.update([1, 2])
    before = (_state(sketch), sketch.total)
    for bad in ([-1], [3, 4, -5], np.array([7, -2], dtype=np.int64)):
        with pytest.raises(ValueError, match=">= 0"):
            sketch.update(bad)
    with pytest.raises(ValueError, match=">= 0"):
        sketch.insert(-1)
    assert (_state(sketch), sketch.total) == before


def test_two_dimensional_input_rejected():
    """A 2-D array of keys is rejected with a message naming the dimensionality."""
    sketch = MisraGries(3)
    with pytest.raises(ValueError, match="one-dimensional"):
        sketch.update(np.ones((2, 3), dtype=np.int64))
    assert sketch.total == 0


def test_empty_update_is_a_no_op():
    """Updating with an empty array changes nothing."""
    sketch = _populated()
    before = sketch.to_bytes()
    sketch.update(np.array([], dtype=np.int64))
    sketch.update([])
    assert sketch.to_bytes() == before


@pytest.mark.parametrize("bad_k", [0, -1, True, False, 1.0, 2.5, "4", None, MAX_KAPPA + 1])
def test_invalid_kappa_rejected_with_message_naming_k(bad_k):
    """κ must be an int in 1..MAX_KAPPA (not bool, float or str); the error names k."""
    with pytest.raises(ValueError, match=r"\bk\b"):
        MisraGries(bad_k)


def test_numpy_integer_kappa_accepted():
    """A numpy integer κ is accepted and stored as a Python int."""
    sketch = MisraGries(np.int64(7))
    assert sketch.k == 7 and isinstance(sketch.k, int)


# ---------------------------------------------------------------------------------------------
# Scale (O(1) amortised: not timed, only exercised)
# ---------------------------------------------------------------------------------------------


def test_million_element_update_with_large_kappa_completes_correctly():
    """A 10^6-element zipf stream with κ=4096 completes and keeps the MG guarantees."""
    rng = np.random.default_rng(2024)
    n, kappa = 1_000_000, 4096
    stream = (rng.zipf(1.1, n) % 1_000_003).astype(np.int64)
    sketch = MisraGries(kappa)
    sketch.update(stream)
    assert sketch.total == n
    assert sketch.decrements * (kappa + 1) <= n
    uniq, freq = np.unique(stream, return_counts=True)
    top = np.argsort(freq)[-50:]
    est = sketch.estimates(uniq[top])
    assert np.all(est <= freq[top])
    assert np.all(est >= freq[top] - sketch.decrements)
    assert len(sketch.counters()) == kappa
