"""Per-window contribution cap for user-level privacy (docs/ALGORITHMS.md §0).

:class:`UnitCap` keeps, in the order it is given them, the first ``m`` elements of every privacy
unit within one window and drops the rest (counted in :attr:`UnitCap.dropped`). Whether an element
is kept depends only on its own unit's earlier elements, so adding or removing all elements of one
unit changes at most ``m`` kept elements and leaves every other unit's kept elements exactly as they
were: the sketches then see neighbouring inputs at distance <= m, which group privacy covers
(:class:`~dphhh.privacy.unit.PrivacyUnit`). The stream job gives it each epoch's elements in canonical
order (docs/ALGORITHMS.md §0 "Canonical order"), so which elements are kept is a function of the
input log and the public clock.

The state is a compiled open-addressing table unit → kept count: a batch of n elements costs O(n)
(expected), never O(distinct units), and only the units a batch touched change
(:meth:`UnitCap.counts_of` / :meth:`UnitCap.restore_counts`: the stream job checkpoints those
deltas, not the whole state). The table holds every unit of the window, and units are chosen by
whoever sends the data, so it places them by a multiply-shift hash under a **secret hash key** of
its own (docs/ALGORITHMS.md §0.1 h; :func:`_home`), drawn from the secure
source whenever the table is allocated or rebuilt, never serialised: with a public hash, units
crafted to share one home slot would make each insert walk one probe run of every unit so far
(quadratic in a window's units, a cost and a release time set by the data). The expected cost is
over that draw (:mod:`dphhh.sketches._mg_kernel`, "Index", for the bound and its residual).

**Unit keys** are 128-bit integers, given either as a ``uint64`` array (keys below 2**64: the exact
IPv4 source addresses of ``privacy.unit_key = "source-ipv4"``, high word 0) or as an array of
:data:`UNIT_KEY_DTYPE` (``hi``, ``lo`` words): what :func:`unit_keys_of` makes of arbitrary unit
values (JSON field values, strings, integers, bytes) with **keyed** BLAKE2b under the deployment's
secret, 128 bits wide, so that nobody without the secret can find a value that shares a victim's
key, and a chance collision with the victim's key is below 2⁻⁶⁵ per window
(docs/calibration.md §8.1, charged to δ: :func:`unit_collision_delta`).

The state (distinct units seen in the window and their kept counts) is **raw, non-private data**:
it never leaves the engine except as checkpointed operator state (:meth:`UnitCap.to_bytes`).
The dropped count is data too; it may only be exposed where the deployment treats it as such.
"""

from __future__ import annotations

import hashlib
import numbers
import struct
from collections.abc import Iterable

import numpy as np

from dphhh.sketches._mg_kernel import HASH_KEY_WORDS, njit, table_hash_key
from dphhh.sketches.errors import InputError, UsageError
from dphhh.sketches.framing import CRC, seal, unseal
from dphhh.sketches.keyed import KeySecret

from .params import check_int

__all__ = [
    "UNIT_KEY_BITS",
    "UNIT_KEY_DTYPE",
    "UnitCap",
    "UnitCapFormatError",
    "UnitKeyHasher",
    "unit_collision_delta",
    "unit_keys_of",
    "unit_key_array",
    "unit_sort_keys",
]

_MAGIC = b"DPUC"  # units below 2**64: 8 bytes each (the IPv4 units' format, unchanged)
_WIDE_MAGIC = b"DPUW"  # some unit of 2**64 or more: 16 bytes each (high words, then low words)
_VERSION = 1
_HEADER = struct.Struct("<4sHHQQQ")  # magic, version, flags, cap, distinct units, dropped

#: A 128-bit unit key: ``hi·2**64 + lo`` (numpy orders and compares such arrays by (hi, lo)).
UNIT_KEY_DTYPE = np.dtype([("hi", np.uint64), ("lo", np.uint64)])
#: Width of a hashed unit key (tests lower it to craft collisions; read when a key is made).
UNIT_KEY_BITS = 128
#: A window holds fewer than 2**MAX_UNITS_LOG2 distinct units (each is a table slot in memory).
MAX_UNITS_LOG2 = 63
_HASH_PERSON = b"dphhh.unit/v2"  # blake2b personalisation (v1: the unkeyed 64-bit keys)
#: The key of :func:`unit_keys_of` without a secret: fixed and public (tests and tools only).
_PUBLIC_SECRET = KeySecret(hashlib.blake2b(b"dphhh.unit.public-key", digest_size=32).digest())


def unit_collision_delta(bits: int | None = None) -> float:
    """The δ a window's hashed unit keys cost (docs/calibration.md §8.1): the probability, over the
    deployment's secret, that any of the window's other units (fewer than 2**63) shares the victim's
    ``bits``-bit key (default :data:`UNIT_KEY_BITS`): 2**(63 − bits), 2⁻⁶⁵ at 128 bits."""
    return 2.0 ** (MAX_UNITS_LOG2 - (UNIT_KEY_BITS if bits is None else int(bits)))


class UnitCapFormatError(InputError):
    """Raised when serialised :class:`UnitCap` bytes are not a valid state."""


@njit(cache=True, inline="always")
def _shift_of(size):
    """``64 − log2(size)`` (uint64) for a power-of-two table ``size``: :func:`_home` keeps the top bits."""
    bits = 0
    while (np.int64(1) << bits) < size:
        bits += 1
    return np.uint64(64 - bits)


@njit(cache=True, inline="always")
def _home(hi, lo, hkey, shift):
    """Home slot of the unit ``hi·2**64 + lo`` under the table's secret hash key ``hkey`` (odd
    multipliers a, b, c, d from :func:`dphhh.sketches._mg_kernel.table_hash_key`): ``x = lo + hi·d``, then
    the hash of the Misra-Gries index (:func:`dphhh.sketches._mg_kernel.home_of`, which gives the bound
    and the reasons) — two multiply-xorshift rounds, then multiply-shift. A unit below 2**64 (an
    address) is hashed exactly as the index hashes a key; the high word of a hashed unit key is a
    keyed hash nobody who sends data can aim. Written out here, not imported into these kernels:
    numba's kernel cache is keyed by the text of the kernel's own file, so a kernel built on another
    file's function would keep a stale copy of it when only that file changes."""
    y = (lo + hi * hkey[3]) * hkey[0]
    y ^= y >> np.uint64(32)
    y *= hkey[1]
    y ^= y >> np.uint64(32)
    return np.int64((y * hkey[2]) >> shift)


@njit(cache=True, inline="always")
def _probe(hi, lo, thi, tlo, used, hkey, shift):
    """The slot holding unit (hi, lo), or the empty slot where it would go (linear probing from its
    :func:`_home`)."""
    m = tlo.shape[0] - 1
    j = _home(hi, lo, hkey, shift)
    while used[j] and (tlo[j] != lo or thi[j] != hi):
        j = (j + 1) & m
    return j


@njit(cache=True)
def _probe_lengths(thi, tlo, used, hkey):
    """(total, longest) number of slots a lookup of each held unit visits (1: its home slot)."""
    m = tlo.shape[0] - 1
    shift = _shift_of(tlo.shape[0])
    total = 0
    longest = 0
    for j in range(m + 1):
        if used[j]:
            probes = ((j - _home(thi[j], tlo[j], hkey, shift)) & m) + 1
            total += probes
            longest = max(longest, probes)
    return total, longest


@njit(cache=True)
def _keep(his, los, cap, thi, tlo, tkept, used, meta, mask, hkey):
    """Per element in order: keep iff its unit has kept fewer than ``cap``; ``meta[0]`` = units held."""
    shift = _shift_of(tlo.shape[0])
    for i in range(los.shape[0]):
        j = _probe(his[i], los[i], thi, tlo, used, hkey, shift)
        if not used[j]:
            used[j] = True
            thi[j] = his[i]
            tlo[j] = los[i]
            tkept[j] = 0
            meta[0] += 1
        if tkept[j] < cap:
            tkept[j] += 1
            mask[i] = True


@njit(cache=True)
def _get(his, los, thi, tlo, tkept, used, out, hkey):
    shift = _shift_of(tlo.shape[0])
    for i in range(los.shape[0]):
        j = _probe(his[i], los[i], thi, tlo, used, hkey, shift)
        out[i] = tkept[j] if used[j] else 0


@njit(cache=True)
def _set(his, los, kept, thi, tlo, tkept, used, meta, hkey):
    shift = _shift_of(tlo.shape[0])
    for i in range(los.shape[0]):
        j = _probe(his[i], los[i], thi, tlo, used, hkey, shift)
        if not used[j]:
            used[j] = True
            thi[j] = his[i]
            tlo[j] = los[i]
            meta[0] += 1
        tkept[j] = kept[i]


class UnitCap:
    """Keep at most ``cap`` elements per privacy unit in one window, in the order given.

    State: unit → kept count (``1..cap``) in a compiled hash table, O(distinct units) memory;
    :meth:`keep` is one O(n) pass (expected, over the table's secret hash key) and gives exactly
    the mask of the per-element rule "keep iff fewer than ``cap`` elements of this unit were kept before".
    Units are 128-bit keys: a ``uint64`` array (high word 0) or an array of :data:`UNIT_KEY_DTYPE`.
    """

    __slots__ = ("cap", "_hi", "_lo", "_kept", "_used", "_meta", "_hkey", "_dropped")

    def __init__(self, cap: int) -> None:
        self.cap = check_int("UnitCap", "cap", cap, 1)
        self._alloc(16)
        self._dropped = 0

    def _alloc(self, size: int) -> None:
        # a fresh secret hash key with every table (docs/ALGORITHMS.md §0.1 h), never serialised;
        # one more multiplier than the sketch index's, for the high word
        self._hkey = table_hash_key(HASH_KEY_WORDS + 1)
        self._hi = np.zeros(size, dtype=np.uint64)
        self._lo = np.zeros(size, dtype=np.uint64)
        self._kept = np.zeros(size, dtype=np.int64)
        self._used = np.zeros(size, dtype=np.bool_)
        self._meta = np.zeros(1, dtype=np.int64)

    def _reserve(self, more: int) -> None:
        """Grow (doubling, rehashing) so that ``more`` new units keep the load at most 1/2."""
        need = 2 * (int(self._meta[0]) + more)
        size = self._lo.shape[0]
        if need <= size:
            return
        while size < need:
            size *= 2
        hi, lo, kept = self._held()
        self._alloc(size)
        if lo.size:
            _set(hi, lo, kept, self._hi, self._lo, self._kept, self._used, self._meta, self._hkey)

    def _held(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(high words, low words, kept counts) of the units held, in increasing order of unit."""
        hi, lo, kept = self._hi[self._used], self._lo[self._used], self._kept[self._used]
        order = np.lexsort((lo, hi))
        return hi[order], lo[order], kept[order]

    # -- the cap -------------------------------------------------------------------------------
    def keep(self, units: np.ndarray | Iterable[int]) -> np.ndarray:
        """Boolean mask over ``units`` (unit keys of a batch, in order): ``True`` for the elements
        to keep. Updates the state (earlier batches count, as do earlier elements of this batch)."""
        hi, lo = _as_unit_words(units)
        mask = np.zeros(lo.shape[0], dtype=np.bool_)
        if lo.shape[0] == 0:
            return mask
        self._reserve(lo.shape[0])
        _keep(hi, lo, self.cap, self._hi, self._lo, self._kept, self._used, self._meta, mask, self._hkey)
        self._dropped += int(lo.shape[0] - np.count_nonzero(mask))
        return mask

    def counts_of(self, units: np.ndarray | Iterable[int]) -> np.ndarray:
        """The kept count of each unit (0 for a unit never seen)."""
        hi, lo = _as_unit_words(units)
        out = np.zeros(lo.shape[0], dtype=np.int64)
        if lo.size:
            _get(hi, lo, self._hi, self._lo, self._kept, self._used, out, self._hkey)
        return out

    def restore_counts(self, units: np.ndarray | Iterable[int], kept: np.ndarray | Iterable[int]) -> None:
        """Set the kept count of each unit (a checkpointed delta of :meth:`counts_of`; later wins)."""
        hi, lo = _as_unit_words(units)
        k = np.ascontiguousarray(np.asarray(list(kept) if not isinstance(kept, np.ndarray) else kept, dtype=np.int64))
        if k.shape != lo.shape or ((k < 1) | (k > self.cap)).any():
            raise UsageError("UnitCap.restore_counts: one count in 1..cap per unit")
        if lo.size:
            self._reserve(lo.shape[0])
            _set(hi, lo, k, self._hi, self._lo, self._kept, self._used, self._meta, self._hkey)

    def _probe_lengths(self) -> tuple[int, int]:
        """(total, longest) number of table slots a lookup of each held unit visits (1: its home
        slot). For tests of the index (docs/ALGORITHMS.md §0.1 h); depends on the data, never exported."""
        total, longest = _probe_lengths(self._hi, self._lo, self._used, self._hkey)
        return int(total), int(longest)

    @property
    def dropped(self) -> int:
        """Elements dropped so far because their unit had reached the cap."""
        return self._dropped

    @property
    def kept(self) -> int:
        """Elements kept so far."""
        return int(self._kept[self._used].sum())

    @property
    def distinct_units(self) -> int:
        """Distinct units seen so far (the state's size)."""
        return int(self._meta[0])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, UnitCap):
            return NotImplemented
        mine, theirs = self._held(), other._held()
        return (
            self.cap == other.cap
            and self._dropped == other._dropped
            and all(np.array_equal(a, b) for a, b in zip(mine, theirs))
        )

    def __repr__(self) -> str:
        return f"UnitCap(cap={self.cap}, distinct_units={self.distinct_units})"

    # -- serialisation -------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Versioned, checksummed serialisation (header, units ascending, kept counts, CRC-32).

        Units below 2**64 (the high word 0: addresses) take 8 bytes each (magic ``DPUC``); if any
        unit is wider (hashed unit keys), every unit takes 16: the high words, then the low words
        (magic ``DPUW``). Never the table's hash key."""
        hi, lo, kept = self._held()
        fields = (self.cap, lo.shape[0], self._dropped)
        if not hi.any():
            return seal(_HEADER, _MAGIC, _VERSION, fields, lo.astype("<u8").tobytes() + kept.astype("<i8").tobytes())
        body = hi.astype("<u8").tobytes() + lo.astype("<u8").tobytes() + kept.astype("<i8").tobytes()
        return seal(_HEADER, _WIDE_MAGIC, _VERSION, fields, body)

    @classmethod
    def from_bytes(cls, data: bytes) -> UnitCap:
        """Load :meth:`to_bytes` output; raises :class:`UnitCapFormatError` on any inconsistency."""
        where = "UnitCap"
        data = bytes(data)
        wide = data[:4] == _WIDE_MAGIC
        magic = _WIDE_MAGIC if wide else _MAGIC
        cap, count, dropped = unseal(data, _HEADER, magic, _VERSION, owner=where, error=UnitCapFormatError)
        if cap < 1 or cap >= 2**63:
            raise UnitCapFormatError(f"{where}: Possible corruption: cap={cap} out of range")
        words = 2 if wide else 1
        expected = _HEADER.size + 8 * (words + 1) * count + CRC.size
        if len(data) != expected:
            raise UnitCapFormatError(
                f"{where}: Possible corruption: {len(data)} bytes, expected {expected} for {count} units"
            )
        off = _HEADER.size
        columns = [np.frombuffer(data, dtype="<u8", count=count, offset=off + 8 * i * count) for i in range(words)]
        hi, lo = (columns[0], columns[1]) if wide else (np.zeros(count, dtype=np.uint64), columns[0])
        hi, lo = hi.astype(np.uint64), lo.astype(np.uint64)
        kept = np.frombuffer(data, dtype="<i8", count=count, offset=off + 8 * words * count).astype(np.int64)
        increasing = (hi[1:] > hi[:-1]) | ((hi[1:] == hi[:-1]) & (lo[1:] > lo[:-1]))
        if count > 1 and not increasing.all():
            raise UnitCapFormatError(f"{where}: Possible corruption: units not strictly increasing")
        if ((kept < 1) | (kept > cap)).any():
            raise UnitCapFormatError(f"{where}: Possible corruption: a kept count is outside 1..cap")
        if dropped >= 2**63:
            raise UnitCapFormatError(f"{where}: Possible corruption: dropped count out of range")
        state = cls(int(cap))
        state.restore_counts(unit_key_array(hi, lo) if wide else lo, kept)
        state._dropped = int(dropped)
        return state


def unit_key_array(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """The 128-bit unit keys ``hi·2**64 + lo`` (:data:`UNIT_KEY_DTYPE`) of two aligned word arrays."""
    out = np.empty(np.shape(lo)[0], dtype=UNIT_KEY_DTYPE)
    out["hi"], out["lo"] = hi, lo
    return out


def unit_sort_keys(units: np.ndarray) -> tuple[np.ndarray, ...]:
    """The keys that order ``units`` for :func:`numpy.lexsort` (last = primary): ``(lo, hi)`` for
    128-bit keys, ``(units,)`` for ``uint64`` ones; append them after the secondary keys."""
    return (units["lo"], units["hi"]) if units.dtype.names else (units,)


def _as_unit_words(units: np.ndarray | Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
    """(high words, low words), contiguous ``uint64``, of 128-bit unit keys (:data:`UNIT_KEY_DTYPE`)
    or of a 1-D non-negative integer array or sequence (high words 0)."""
    if isinstance(units, np.ndarray) and units.dtype == UNIT_KEY_DTYPE:
        if units.ndim != 1:
            raise UsageError(f"UnitCap: units must be a 1-D array, got {units.ndim} dimensions")
        return np.ascontiguousarray(units["hi"]), np.ascontiguousarray(units["lo"])
    arr = np.asarray(units if isinstance(units, np.ndarray) else list(units))
    if arr.ndim != 1:
        raise UsageError(f"UnitCap: units must be a 1-D array, got {arr.ndim} dimensions")
    if arr.size == 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint64)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"UnitCap: units must be integer keys (uint64), got dtype {arr.dtype}")
    if arr.dtype.kind == "i" and (arr < 0).any():
        raise UsageError("UnitCap: units must be non-negative keys")
    lo = np.ascontiguousarray(arr, dtype=np.uint64)
    return np.zeros(lo.shape[0], dtype=np.uint64), lo


def _canonical(value: object) -> bytes:
    """Type-tagged canonical bytes of one unit value (so ``"1"``, ``1`` and ``b"1"`` differ)."""
    if isinstance(value, str):
        return b"s:" + value.encode("utf-8", "surrogatepass")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"b:" + bytes(value)
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_)):
        return b"i:" + str(int(value)).encode("ascii")
    # the type name only: a unit value is raw data and never goes into a message
    raise TypeError(f"unit_keys_of: a unit value must be str, int or bytes, got {type(value).__name__}")


class UnitKeyHasher:
    """:func:`unit_keys_of` under one secret, keyed once (the decoder hashes one value per message)."""

    __slots__ = ("_base",)

    def __init__(self, secret: KeySecret | None = None) -> None:
        key = (_PUBLIC_SECRET if secret is None else secret).purpose(b"unit")
        self._base = key.keyed_blake2b(digest_size=16, person=_HASH_PERSON)

    def keys(self, values: Iterable[str | int | bytes]) -> np.ndarray:
        """The 128-bit keys (:data:`UNIT_KEY_DTYPE`) of ``values``; see :func:`unit_keys_of`."""
        width = (1 << UNIT_KEY_BITS) - 1
        out = []
        for v in values:
            h = self._base.copy()
            h.update(_canonical(v))
            key = int.from_bytes(h.digest(), "little") & width
            out.append((key >> 64, key & 0xFFFF_FFFF_FFFF_FFFF))
        return np.array(out, dtype=UNIT_KEY_DTYPE)


def unit_keys_of(values: Iterable[str | int | bytes], secret: KeySecret | None = None) -> np.ndarray:
    """Map unit values to 128-bit unit keys (:data:`UNIT_KEY_DTYPE`) with **keyed** BLAKE2b.

    Key = the 16-byte (little-endian) ``blake2b(key=K, digest_size=16, person=b"dphhh.unit/v2")`` of
    a type-tagged canonical encoding — ``str`` → ``b"s:"`` + UTF-8, ``int`` → ``b"i:"`` + decimal
    text, ``bytes`` → ``b"b:"`` + the bytes — where ``K = secret.purpose(b"unit")`` is derived from
    the deployment's secret (:class:`~dphhh.sketches.keyed.KeySecret`; the stream job's is
    :func:`dphhh.stream.ledger.job_key_secret`, derived from the seed in a seeded test run). The key
    depends on the value and the secret only (not on the window or the process), so the same unit
    gets the same key on every operator and after a restore. ``bool``, ``float``, ``None`` and
    other types raise ``TypeError``.

    Collisions: two values with one key are **one** unit and share one cap of ``m`` elements; for
    one of them alone the distance is then up to ``2m`` (about 2ε). Without the secret nobody can
    compute a key, let alone aim a value at a victim's; by chance, with keys of 128 bits, any of a
    window's fewer than 2**63 other units shares the victim's key with probability below 2⁻⁶⁵ —
    charged to δ (:func:`unit_collision_delta`, docs/calibration.md §8.1).

    ``secret=None`` (tests, tools that publish nothing) uses a fixed **public** key: the keys are
    as wide, so hitting a given value's key still takes a 128-bit second preimage, but anyone can
    compute them. The stream job never does this: its decoder gets the deployment's secret.
    """
    return UnitKeyHasher(secret).keys(values)
