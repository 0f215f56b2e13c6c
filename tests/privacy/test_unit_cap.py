"""UnitCap keeps the first m elements of each unit per window, exactly as the per-element rule."""

from __future__ import annotations

import hashlib
import struct
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privacy.unit_cap import UnitCap, UnitCapFormatError, unit_keys_of


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


def _split(units: list[int], cuts: list[int]) -> list[list[int]]:
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


def test_unit_keys_are_fixed_typed_and_distinct() -> None:
    """Keys are deterministic uint64, distinguish "1" from 1 from b"1", and known values map to fixed keys."""
    keys = unit_keys_of(["1", 1, b"1", "alice", "alice", 2**70, np.int64(1)])
    assert keys.dtype == np.uint64 and keys.shape == (7,)
    assert len({int(k) for k in keys[:3]}) == 3
    assert keys[3] == keys[4] and keys[1] == keys[6]
    assert np.array_equal(unit_keys_of(["alice"]), unit_keys_of(["alice"]))
    # a fixed public function: the key of "alice" is blake2b-64 of the tagged encoding
    expected = int.from_bytes(hashlib.blake2b(b"s:alice", digest_size=8, person=b"dphhh.unit/v1").digest(), "little")
    assert int(keys[3]) == expected
    assert unit_keys_of([]).shape == (0,) and unit_keys_of([]).dtype == np.uint64


@pytest.mark.parametrize("value", [True, 1.5, None, ["a"], {"u": 1}])
def test_unit_keys_refuse_other_types_without_showing_the_value(value: object) -> None:
    """bool, float, None and containers are refused by type name; the value itself is not in the message."""
    with pytest.raises(TypeError) as info:
        unit_keys_of(["ok", value])  # type: ignore[list-item]
    assert str(info.value) == f"unit_keys_of: a unit value must be str, int or bytes, got {type(value).__name__}"
