"""UnitCap keeps the first m elements of each unit per window, exactly as the per-element rule."""

from __future__ import annotations

import hashlib
import itertools
import struct
import zlib
from typing import TypeVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dphhh.privacy.unit_cap as unit_cap
from dphhh.privacy.unit_cap import (
    UNIT_KEY_DTYPE,
    UnitCap,
    UnitCapFormatError,
    UnitKeyHasher,
    unit_collision_delta,
    unit_keys_of,
)
from dphhh.sketches.keyed import KeySecret

T = TypeVar("T")


def _reference(units: list[int], cap: int) -> list[bool]:
    """Literal per-element rule: keep iff fewer than cap elements of this unit were kept before."""
    kept: dict[int, int] = {}
    out = []
    for u in units:
        ok = kept.get(u, 0) < cap
        if ok:
            kept[u] = kept.get(u, 0) + 1
        out.append(ok)
    return out


def _split(units: list[T], cuts: list[int]) -> list[list[T]]:
    bounds = sorted({0, len(units), *[c % (len(units) + 1) for c in cuts]})
    return [units[a:b] for a, b in zip(bounds, bounds[1:])] + [[]]


# Units drawn from a small pool (many repeats, so caps bite) that includes the uint64 extremes.
_unit = st.one_of(st.integers(0, 12), st.sampled_from([2**63 - 1, 2**63, 2**64 - 1]))


@settings(max_examples=400, deadline=None)
@given(
    units=st.lists(_unit, max_size=120),
    cap=st.integers(1, 6),
    cuts=st.lists(st.integers(0, 200), max_size=8),
)
def test_keep_matches_the_per_element_reference_over_any_batch_split(
    units: list[int], cap: int, cuts: list[int]
) -> None:
    """Over any split into batches, the concatenated masks equal the per-element reference and dropped counts the rest."""
    capper = UnitCap(cap)
    masks = [capper.keep(np.array(batch, dtype=np.uint64)) for batch in _split(units, cuts)]
    got = np.concatenate(masks).tolist() if masks else []
    assert got == _reference(units, cap)
    assert capper.dropped == got.count(False)
    assert capper.kept == got.count(True)
    assert capper.distinct_units == len(set(units))


@settings(max_examples=100, deadline=None)
@given(units=st.lists(_unit, max_size=80), cap=st.integers(1, 4), cut=st.integers(0, 80))
def test_state_round_trips_through_bytes_mid_window(units: list[int], cap: int, cut: int) -> None:
    """Serialising and loading the state between two batches changes nothing about the result."""
    cut = min(cut, len(units))
    a, b = UnitCap(cap), UnitCap(cap)
    first = a.keep(np.array(units[:cut], dtype=np.uint64))
    b.keep(np.array(units[:cut], dtype=np.uint64))
    restored = UnitCap.from_bytes(b.to_bytes())
    assert restored == a
    assert np.array_equal(
        restored.keep(np.array(units[cut:], dtype=np.uint64)), a.keep(np.array(units[cut:], dtype=np.uint64))
    )
    assert restored == a and first.shape == (cut,)


def test_large_random_stream_matches_reference() -> None:
    """A 200k-element stream over 5k units in uneven batches matches the reference (vectorised path at scale)."""
    rng = np.random.default_rng(7)
    units = rng.zipf(1.3, 200_000).astype(np.uint64) % np.uint64(5000)
    capper = UnitCap(5)
    bounds = np.unique(np.concatenate([[0, units.size], rng.integers(0, units.size, 40)]))
    got = np.concatenate([capper.keep(units[a:b]) for a, b in zip(bounds[:-1], bounds[1:])])
    assert got.tolist() == _reference(units.tolist(), 5)
    assert capper.dropped == int((~got).sum()) > 0


def test_keep_accepts_signed_and_list_input_and_refuses_bad_input() -> None:
    """Non-negative integer arrays and lists work; negative, float and 2-D input is refused by name."""
    capper = UnitCap(1)
    assert capper.keep([3, 3, 4]).tolist() == [True, False, True]
    assert capper.keep(np.array([4, 5], dtype=np.int64)).tolist() == [False, True]
    assert capper.keep([]).tolist() == []
    with pytest.raises(ValueError, match="UnitCap: units must be non-negative"):
        capper.keep(np.array([-1]))
    with pytest.raises(TypeError, match="UnitCap: units must be integer"):
        capper.keep(np.array([1.5]))
    with pytest.raises(ValueError, match="UnitCap: units must be a 1-D"):
        capper.keep(np.zeros((2, 2), dtype=np.uint64))


@pytest.mark.parametrize("cap", [0, -1, 2.0, True, None])
def test_invalid_cap_is_refused(cap: object) -> None:
    """The cap must be an integer >= 1."""
    with pytest.raises(ValueError, match="UnitCap: cap"):
        UnitCap(cap)  # type: ignore[arg-type]


def test_state_size_is_the_number_of_distinct_units() -> None:
    """The serialised state grows with distinct units, not with elements."""
    a, b = UnitCap(3), UnitCap(3)
    a.keep(np.arange(100, dtype=np.uint64))
    b.keep(np.repeat(np.arange(100, dtype=np.uint64), 50))
    assert len(a.to_bytes()) == len(b.to_bytes())
    assert b.dropped == 100 * 47


def _state() -> bytes:
    capper = UnitCap(2)
    capper.keep(np.array([5, 1, 5, 5, 9], dtype=np.uint64))
    return capper.to_bytes()


def _resign(body: bytes) -> bytes:
    return body + struct.pack("<I", zlib.crc32(body))


def test_from_bytes_round_trip_keeps_every_field() -> None:
    """Loading the bytes gives an equal state with the same cap and dropped count."""
    loaded = UnitCap.from_bytes(_state())
    assert (loaded.cap, loaded.dropped, loaded.distinct_units, loaded.kept) == (2, 1, 3, 4)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d[:10], "shorter than a header"),
        (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "checksum mismatch"),
        (lambda d: _resign(b"XXXX" + d[4:-4]), "bad magic"),
        (lambda d: _resign(d[:-4] + b"\0" * 8), "bytes, expected"),
        (lambda d: _resign(d[:8] + struct.pack("<Q", 0) + d[16:-4]), "cap=0 out of range"),
        (lambda d: _resign(d[:6] + struct.pack("<H", 1) + d[8:-4]), "unknown flags"),
        # kept count of the first unit set to 3 > cap 2
        (lambda d: _resign(d[: 32 + 24] + struct.pack("<q", 3) + d[32 + 32 : -4]), "outside 1..cap"),
        # first two units swapped: no longer strictly increasing
        (lambda d: _resign(d[:32] + d[40:48] + d[32:40] + d[48:-4]), "not strictly increasing"),
    ],
)
def test_from_bytes_detects_corruption(mutate, message: str) -> None:
    """Every inconsistency raises UnitCapFormatError 'UnitCap: Possible corruption: ...'."""
    with pytest.raises(UnitCapFormatError) as info:
        UnitCap.from_bytes(mutate(_state()))
    assert str(info.value).startswith("UnitCap: Possible corruption: ") and message in str(info.value)


def test_from_bytes_refuses_another_version() -> None:
    """A state written by another serialisation version is refused, naming the version."""
    data = _state()
    with pytest.raises(UnitCapFormatError, match="UnitCap: unsupported serialisation version 2"):
        UnitCap.from_bytes(_resign(data[:4] + struct.pack("<H", 2) + data[6:-4]))


SECRETS = [KeySecret.from_seed(1), KeySecret.from_seed(2)]


def _old_public_key(text: str) -> int:
    """A string unit's key before keyed unit keys: unkeyed 64-bit BLAKE2b, a public function."""
    return int.from_bytes(
        hashlib.blake2b(b"s:" + text.encode(), digest_size=8, person=b"dphhh.unit/v1").digest(), "little"
    )


def _ints(keys: np.ndarray) -> list[int]:
    return [(int(k["hi"]) << 64) | int(k["lo"]) for k in keys]


def test_unit_keys_are_typed_distinct_and_128_bits_wide() -> None:
    """Keys are 128-bit (UNIT_KEY_DTYPE), distinguish "1" from 1 from b"1", give one value one key
    (1 and np.int64(1) alike), and are keyed BLAKE2b-128 of the tagged encoding under the secret's
    ``unit`` purpose key."""
    secret = SECRETS[0]
    keys = unit_keys_of(["1", 1, b"1", "alice", "alice", 2**70, np.int64(1)], secret)  # type: ignore[list-item]
    assert keys.dtype == UNIT_KEY_DTYPE and keys.shape == (7,)
    assert len(set(_ints(keys[:3]))) == 3
    assert keys[3] == keys[4] and keys[1] == keys[6]
    assert any(int(k["hi"]) for k in keys)  # wider than 64 bits
    h = secret.purpose(b"unit").keyed_blake2b(digest_size=16, person=b"dphhh.unit/v2")
    h.update(b"s:alice")
    assert _ints(keys[3:4]) == [int.from_bytes(h.digest(), "little")]
    assert unit_keys_of([], secret).shape == (0,) and unit_keys_of([], secret).dtype == UNIT_KEY_DTYPE
    assert unit_collision_delta() == 2.0**-65


def test_unit_keys_are_stable_for_one_secret_and_differ_between_secrets() -> None:
    """One secret gives one value the same key every time (another hasher, another call); two
    secrets give every value other keys; none is the public fallback's or the old public key."""
    names = [f"user-{i}" for i in range(200)]
    values: list[str | int | bytes] = [*names, 7, b"raw"]
    first = _ints(unit_keys_of(values, SECRETS[0]))
    assert _ints(unit_keys_of(values, SECRETS[0])) == first == _ints(UnitKeyHasher(SECRETS[0]).keys(values))
    assert _ints(unit_keys_of(values, KeySecret.from_seed(1))) == first  # the secret, not the object
    second = _ints(unit_keys_of(values, SECRETS[1]))
    public = _ints(unit_keys_of(values))
    assert all(a != b for a, b in zip(first, second)) and not set(first) & set(public)
    old = {_old_public_key(v) for v in names}
    assert not old & set(first) and not old & {k & (2**64 - 1) for k in first}


def test_a_value_crafted_to_collide_with_a_victim_under_the_old_public_hash_gets_its_own_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The old unit key was a public function, so whoever can enumerate unit values could search for
    one whose key is a victim's (2^64/T hashes at 64 bits; here on the low 16 bits, so that the
    search is quick), and the cap then merged the two: the victim lost elements to it, and removing
    the victim changed up to 2m kept elements. The same search against the public fallback key works
    too (it is public); against keys under the deployment's secret the crafted value — even with
    the keys cut to the same 16 bits — has a key of its own, and keeps its own cap."""
    victim = "victim@example.org"
    old = _old_public_key(victim) & 0xFFFF
    crafted = next(v for v in (f"attacker-{i}" for i in itertools.count()) if _old_public_key(v) & 0xFFFF == old)
    monkeypatch.setattr(unit_cap, "UNIT_KEY_BITS", 16)
    public_keys = UnitKeyHasher()  # the fallback key: public
    fallback = _ints(public_keys.keys([victim]))[0]
    aimed = next(v for v in (f"attacker-{i}" for i in itertools.count()) if _ints(public_keys.keys([v]))[0] == fallback)
    for secret in SECRETS:
        for value in (crafted, aimed):
            keys = unit_keys_of([victim] * 3 + [value] * 3, secret)
            assert len(set(_ints(keys))) == 2
            assert UnitCap(3).keep(keys).all()  # each keeps its own m = 3
    public = unit_keys_of([victim] * 3 + [aimed] * 3)
    assert len(set(_ints(public))) == 1 and UnitCap(3).keep(public).tolist() == [True] * 3 + [False] * 3


# 128-bit units from a small pool of words (many repeats; units that differ in one word only).
_wide = st.tuples(st.sampled_from([0, 1, 2**63, 2**64 - 1]), st.sampled_from([0, 5, 2**64 - 1]))


@settings(max_examples=200, deadline=None)
@given(units=st.lists(_wide, max_size=100), cap=st.integers(1, 4), cuts=st.lists(st.integers(0, 120), max_size=6))
def test_128_bit_units_match_the_per_element_reference_and_round_trip(
    units: list[tuple[int, int]], cap: int, cuts: list[int]
) -> None:
    """Units given as (high, low) words: over any split into batches the masks equal the reference,
    and the state survives its bytes (the wide format whenever a high word is not 0)."""
    capper = UnitCap(cap)
    masks = []
    for i, batch in enumerate(_split(units, cuts)):
        if i == 1:
            capper = UnitCap.from_bytes(capper.to_bytes())
        masks.append(capper.keep(np.array(batch, dtype=UNIT_KEY_DTYPE)))
    got = np.concatenate(masks).tolist()
    assert got == _reference([(hi << 64) | lo for hi, lo in units], cap)
    assert capper.distinct_units == len(set(units)) and capper.dropped == got.count(False)
    restored = UnitCap.from_bytes(capper.to_bytes())
    assert restored == capper
    keys = np.array(units, dtype=UNIT_KEY_DTYPE)
    assert restored.counts_of(keys).tolist() == capper.counts_of(keys).tolist()
    assert capper.to_bytes()[:4] == (b"DPUW" if any(hi for hi, _ in units) else b"DPUC")


def test_a_unit_below_2_64_is_one_unit_in_either_form_and_keeps_the_64_bit_format() -> None:
    """uint64 x and the 128-bit (0, x) are one unit; a state of such units is serialised exactly as
    one of uint64 units (8 bytes per unit)."""
    a, b = UnitCap(2), UnitCap(2)
    a.keep(np.array([5, 9, 5, 5], dtype=np.uint64))
    b.keep(np.array([(0, 5), (0, 9)], dtype=UNIT_KEY_DTYPE))
    b.keep(np.array([5, 5], dtype=np.uint64))
    assert a == b and a.to_bytes() == b.to_bytes() and b.dropped == 1


def _wide_state() -> bytes:
    capper = UnitCap(2)
    capper.keep(np.array([(1, 5), (0, 1), (1, 5), (1, 5), (2, 0)], dtype=UNIT_KEY_DTYPE))
    return capper.to_bytes()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: _resign(d[:-4] + b"\0" * 8), "bytes, expected"),
        # first two high words swapped: (1, ·) before (0, ·)
        (lambda d: _resign(d[:32] + d[40:48] + d[32:40] + d[48:-4]), "not strictly increasing"),
        # kept count of the first unit set to 3 > cap 2 (after 3 high and 3 low words)
        (lambda d: _resign(d[: 32 + 48] + struct.pack("<q", 3) + d[32 + 56 : -4]), "outside 1..cap"),
    ],
)
def test_wide_state_bytes_detect_corruption(mutate, message: str) -> None:
    """The 128-bit format is checked as the 64-bit one is."""
    assert UnitCap.from_bytes(_wide_state()).distinct_units == 3
    with pytest.raises(UnitCapFormatError) as info:
        UnitCap.from_bytes(mutate(_wide_state()))
    assert str(info.value).startswith("UnitCap: Possible corruption: ") and message in str(info.value)


@pytest.mark.parametrize("value", [True, 1.5, None, ["a"], {"u": 1}])
def test_unit_keys_refuse_other_types_without_showing_the_value(value: object) -> None:
    """bool, float, None and containers are refused by type name; the value itself is not in the message."""
    with pytest.raises(TypeError) as info:
        unit_keys_of(["ok", value])  # type: ignore[list-item]
    assert str(info.value) == f"unit_keys_of: a unit value must be str, int or bytes, got {type(value).__name__}"
