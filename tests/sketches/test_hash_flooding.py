"""Hash flooding (docs/ALGORITHMS.md §0.1 h): the Misra-Gries key → slot index and the unit cap's
table place keys by a multiply-shift hash under a secret hash key of their own
(:func:`dphhh.sketches._mg_kernel.home_of`), so keys crafted against a public hash do not pile up in one
probe run. Probes are counted (``_probe_lengths``: buckets a lookup of each held key visits), never timed."""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest

import dphhh.sketches._mg_kernel as K
from dphhh.privacy.unit_cap import UnitCap
from dphhh.sketches.misra_gries import MisraGries, _table_size

#: The multiplier both tables hashed with before this fix: public (it is in the source).
PUBLIC = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1
KAPPA = 512  # the sketch holds every crafted key: 512 keys in 8192 buckets
UNITS = 2000  # the cap holds every unit of a window: 2000 units in 4096 slots


def _old_home(keys: list[int], size: int) -> list[int]:
    """The home bucket of each key under the old public index: low bits of a xorshift of key·PUBLIC."""
    out = []
    for k in keys:
        h = (k * PUBLIC) & M64
        h ^= h >> 29
        out.append(h & (size - 1))
    return out


def _crafted_for_the_old_hash(n: int, size: int) -> list[int]:
    """``n`` distinct keys < 2**63 that all had home bucket 0 in a table of ``size`` (a power of
    two) under the old public hash, by inverting it: h = j·size has low bits 0; undo the xorshift
    (x = h ^ h>>29 ^ h>>58) and the multiplication (PUBLIC is odd, so invertible mod 2**64)."""
    inverse = pow(PUBLIC, -1, 1 << 64)
    out: list[int] = []
    j = 1
    while len(out) < n:
        h = j * size
        x = h ^ (h >> 29) ^ (h >> 58)
        key = (x * inverse) & M64
        if key < 1 << 63:
            out.append(key)
        j += 1
    return out


def _crafted_for(a: int, b: int, c: int, n: int) -> list[int]:
    """``n`` distinct keys < 2**63 that :func:`dphhh.sketches._mg_kernel.home_of` under the hash key
    (a, b, c) sends to bucket 0 of every table of up to 2**64 / 4n buckets, by inverting it: the
    final products y·c are t < 4n; ``y ^= y >> 32`` is its own inverse; a, b, c are odd."""

    def unshift(y: int) -> int:
        return y ^ (y >> 32)

    ia, ib, ic = (pow(m, -1, 1 << 64) for m in (a, b, c))
    out = [(unshift((unshift((t * ic) & M64) * ib) & M64) * ia) & M64 for t in range(4 * n)]
    return [k for k in out if k < 1 << 63][:n]


def _sketch_with(keys: list[int]) -> MisraGries:
    sketch = MisraGries(KAPPA)
    sketch.update(np.array(keys, dtype=np.int64))
    assert len(sketch.counters()) == len(keys) and sketch.decrements == 0  # every key is held
    return sketch


def _cap_with(units: list[int]) -> UnitCap:
    cap = UnitCap(1)
    for start in range(0, len(units), 250):  # in batches: the table grows (and is rebuilt) on the way
        assert cap.keep(np.array(units[start : start + 250], dtype=np.uint64)).all()
    assert cap.distinct_units == len(units)
    return cap


def _seeded_randbits(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Make the tables' draws reproducible: the secure source replaced by a seeded generator (the
    code path of :func:`dphhh.sketches._mg_kernel.random_multiplier` is unchanged)."""
    rng = random.Random(seed)
    monkeypatch.setattr(K.secrets, "randbits", rng.getrandbits)


#: (fill, keys n, table size, bound on the longest probe under a random key). The bounds are loose:
#: over 200 random keys the longest probe was 5 (sketch, load 1/16) and 40 (cap, load ~1/2), the
#: total under 1.1n and 1.6n; flooded, they are n and n(n+1)/2.
TABLES: dict[str, tuple[Callable[[list[int]], MisraGries | UnitCap], int, int, int]] = {
    "misra-gries": (_sketch_with, KAPPA, _table_size(KAPPA), 16),
    "unit-cap": (_cap_with, UNITS, 4096, 100),
}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_keys_crafted_for_the_old_public_hash_share_one_bucket_but_spread_under_secret_multipliers(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys computed to share home bucket 0 under the old public hash: the old index would hold them
    in one probe run (the i-th insert visits i buckets: n(n+1)/2 probes in all, quadratic); each
    table now draws its own multiplier, and under every draw their runs stay short."""
    fill, n, size, bound = TABLES[table]
    crafted = _crafted_for_the_old_hash(n, size)
    assert len(set(crafted)) == n and set(_old_home(crafted, size)) == {0}  # one bucket: one run of n
    for seed in range(8):
        _seeded_randbits(monkeypatch, seed)
        total, longest = fill(crafted)._probe_lengths()
        assert longest <= bound and total <= 2 * n, (seed, total, longest)


@pytest.mark.parametrize("table", sorted(TABLES))
def test_keys_aimed_at_a_known_multiplier_flood_only_a_table_that_hashes_with_it(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whoever knows a table's hash key can aim keys at one bucket: with the old public multiplier
    forced in as every word of the key, keys computed for it form one probe run of all n keys
    (n(n+1)/2 probes). The tables' own draws — from the secure source, here seeded — spread the
    very same keys."""
    fill, n, _, bound = TABLES[table]
    aimed = _crafted_for(PUBLIC, PUBLIC, PUBLIC, n)
    monkeypatch.setattr(K, "random_multiplier", lambda: np.uint64(PUBLIC))
    assert fill(aimed)._probe_lengths() == (n * (n + 1) // 2, n)
    monkeypatch.undo()
    for seed in range(8):
        _seeded_randbits(monkeypatch, 100 + seed)
        total, longest = fill(aimed)._probe_lengths()
        assert longest <= bound and total <= 2 * n, (seed, total, longest)


def _words(hkey: np.ndarray) -> list[bytes]:
    return [int(w).to_bytes(8, "little") for w in hkey]


def test_every_table_draws_a_hash_key_of_its_own_never_serialised(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each sketch and each cap table draws its own key of odd multipliers; loading draws a fresh
    one and rebuilds the index; the serialised state holds none of it, and every result is the same
    whatever the draw."""
    _seeded_randbits(monkeypatch, 7)
    keys = np.random.default_rng(3).integers(0, 1 << 40, 3000)
    a, b = MisraGries(64), MisraGries(64)
    assert not np.array_equal(a._hkey, b._hkey) and all(int(w) % 2 == 1 for w in [*a._hkey, *b._hkey])
    a.update(keys)
    b.update(keys[:1000])
    b.update(keys[1000:], np.ones(2000, dtype=np.int64))  # the weighted kernel too
    assert a.to_bytes() == b.to_bytes() and a.estimates(keys).tolist() == b.estimates(keys).tolist()
    loaded = MisraGries.from_bytes(a.to_bytes())
    assert not np.array_equal(loaded._hkey, a._hkey) and loaded.to_bytes() == a.to_bytes()
    assert loaded.estimates(keys).tolist() == a.estimates(keys).tolist()
    data = a.to_bytes()
    assert not any(w in data for s in (a, b, loaded) for w in _words(s._hkey))

    cap = UnitCap(2)
    first = cap._hkey
    cap.keep(np.arange(100, dtype=np.uint64))  # 16 slots grow to 256: a new table, a new key
    assert not np.array_equal(cap._hkey, first)
    again = UnitCap.from_bytes(cap.to_bytes())
    assert not np.array_equal(again._hkey, cap._hkey) and again == cap and again.to_bytes() == cap.to_bytes()
    assert not any(w in cap.to_bytes() for w in _words(cap._hkey))


@pytest.mark.parametrize("step", [1, 256, 1 << 32])
def test_arithmetic_progressions_of_units_spread_under_every_draw(step: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Consecutive units (addresses), /24 prefixes (multiples of 256) and keys that differ in their
    high word only: multiply-shift alone turns such a progression into a Weyl sequence, and for a
    few multipliers in a thousand it piles 3000 units into runs of hundreds (measured up to 1150 in
    8192 slots). The two secret rounds before it (``home_of``) keep every one of 400 draws short."""
    _seeded_randbits(monkeypatch, 11)
    units = np.arange(3000, dtype=np.uint64) * np.uint64(step)
    worst = 0
    for _ in range(400):
        cap = UnitCap(1)
        cap.keep(units)
        worst = max(worst, cap._probe_lengths()[1])
    assert worst <= 64
