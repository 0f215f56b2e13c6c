"""Per-window contribution cap for user-level privacy (docs/ALGORITHMS.md §0).

:class:`UnitCap` keeps, in the order it is given them, the first ``m`` elements of every privacy
unit within one window and drops the rest (counted in :attr:`UnitCap.dropped`). Whether an element
is kept depends only on its own unit's earlier elements, so adding or removing all elements of one
unit changes at most ``m`` kept elements and leaves every other unit's kept elements exactly as they
were: the sketches then see neighbouring inputs at distance <= m, which group privacy covers
(:class:`~privacy.unit.PrivacyUnit`). The stream job gives it each epoch's elements in canonical
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
over that draw (:mod:`sketches._mg_kernel`, "Index", for the bound and its residual).

Units are ``uint64`` keys; :func:`unit_keys_of` maps arbitrary unit values (JSON field values,
strings, integers, bytes) to keys with a fixed, public hash.

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

from sketches._mg_kernel import njit, table_hash_key
from sketches.errors import InputError, UsageError
from sketches.framing import CRC, seal, unseal

from .params import check_int

__all__ = ["UnitCap", "UnitCapFormatError", "unit_keys_of"]

_MAGIC = b"DPUC"
_VERSION = 1
_HEADER = struct.Struct("<4sHHQQQ")  # magic, version, flags, cap, distinct units, dropped

_HASH_PERSON = b"dphhh.unit/v1"  # blake2b personalisation: a fixed, public domain separator


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
def _home(unit, hkey, shift):
    """Home slot of ``unit`` (uint64) under the table's secret hash key ``hkey`` (odd multipliers
    a, b, c from :func:`sketches._mg_kernel.table_hash_key`): two multiply-xorshift rounds, then
    multiply-shift — the hash of the Misra-Gries index (:func:`sketches._mg_kernel.home_of`, which
    gives the bound and the reasons). Written out here, not imported into these kernels: numba's
    kernel cache is keyed by the text of the kernel's own file, so a kernel built on another file's
    function would keep a stale copy of it when only that file changes."""
    y = unit * hkey[0]
    y ^= y >> np.uint64(32)
    y *= hkey[1]
    y ^= y >> np.uint64(32)
    return np.int64((y * hkey[2]) >> shift)


@njit(cache=True, inline="always")
def _probe(unit, tunits, used, hkey, shift):
    """The slot holding ``unit``, or the empty slot where it would go (linear probing from its
    :func:`_home`)."""
    m = tunits.shape[0] - 1
    j = _home(unit, hkey, shift)
    while used[j] and tunits[j] != unit:
        j = (j + 1) & m
    return j


@njit(cache=True)
def _probe_lengths(tunits, used, hkey):
    """(total, longest) number of slots a lookup of each held unit visits (1: its home slot)."""
    m = tunits.shape[0] - 1
    shift = _shift_of(tunits.shape[0])
    total = 0
    longest = 0
    for j in range(m + 1):
        if used[j]:
            probes = ((j - _home(tunits[j], hkey, shift)) & m) + 1
            total += probes
            longest = max(longest, probes)
    return total, longest


@njit(cache=True)
def _keep(units, cap, tunits, tkept, used, meta, mask, hkey):
    """Per element in order: keep iff its unit has kept fewer than ``cap``; ``meta[0]`` = units held."""
    shift = _shift_of(tunits.shape[0])
    for i in range(units.shape[0]):
        j = _probe(units[i], tunits, used, hkey, shift)
        if not used[j]:
            used[j] = True
            tunits[j] = units[i]
            tkept[j] = 0
            meta[0] += 1
        if tkept[j] < cap:
            tkept[j] += 1
            mask[i] = True


@njit(cache=True)
def _get(units, tunits, tkept, used, out, hkey):
    shift = _shift_of(tunits.shape[0])
    for i in range(units.shape[0]):
        j = _probe(units[i], tunits, used, hkey, shift)
        out[i] = tkept[j] if used[j] else 0


@njit(cache=True)
def _set(units, kept, tunits, tkept, used, meta, hkey):
    shift = _shift_of(tunits.shape[0])
    for i in range(units.shape[0]):
        j = _probe(units[i], tunits, used, hkey, shift)
        if not used[j]:
            used[j] = True
            tunits[j] = units[i]
            meta[0] += 1
        tkept[j] = kept[i]


class UnitCap:
    """Keep at most ``cap`` elements per privacy unit in one window, in the order given.

    State: unit → kept count (``1..cap``) in a compiled hash table, O(distinct units) memory;
    :meth:`keep` is one O(n) pass (expected, over the table's secret hash key) and gives exactly
    the mask of the per-element rule "keep iff fewer than ``cap`` elements of this unit were kept before".
    """

    __slots__ = ("cap", "_units", "_kept", "_used", "_meta", "_hkey", "_dropped")

    def __init__(self, cap: int) -> None:
        self.cap = check_int("UnitCap", "cap", cap, 1)
        self._alloc(16)
        self._dropped = 0

    def _alloc(self, size: int) -> None:
        # a fresh secret hash key with every table (docs/ALGORITHMS.md §0.1 h), never serialised
        self._hkey = table_hash_key()
        self._units = np.zeros(size, dtype=np.uint64)
        self._kept = np.zeros(size, dtype=np.int64)
        self._used = np.zeros(size, dtype=np.bool_)
        self._meta = np.zeros(1, dtype=np.int64)

    def _reserve(self, more: int) -> None:
        """Grow (doubling, rehashing) so that ``more`` new units keep the load at most 1/2."""
        need = 2 * (int(self._meta[0]) + more)
        size = self._units.shape[0]
        if need <= size:
            return
        while size < need:
            size *= 2
        units, kept = self._held()
        self._alloc(size)
        if units.size:
            _set(units, kept, self._units, self._kept, self._used, self._meta, self._hkey)

    def _held(self) -> tuple[np.ndarray, np.ndarray]:
        """(units ascending, their kept counts)."""
        units, kept = self._units[self._used], self._kept[self._used]
        order = np.argsort(units)
        return units[order], kept[order]

    # -- the cap -------------------------------------------------------------------------------
    def keep(self, units: np.ndarray | Iterable[int]) -> np.ndarray:
        """Boolean mask over ``units`` (unit keys of a batch, in order): ``True`` for the elements
        to keep. Updates the state (earlier batches count, as do earlier elements of this batch)."""
        arr = np.ascontiguousarray(_as_unit_array(units))
        mask = np.zeros(arr.shape[0], dtype=np.bool_)
        if arr.shape[0] == 0:
            return mask
        self._reserve(arr.shape[0])
        _keep(arr, self.cap, self._units, self._kept, self._used, self._meta, mask, self._hkey)
        self._dropped += int(arr.shape[0] - np.count_nonzero(mask))
        return mask

    def counts_of(self, units: np.ndarray | Iterable[int]) -> np.ndarray:
        """The kept count of each unit (0 for a unit never seen)."""
        arr = np.ascontiguousarray(_as_unit_array(units))
        out = np.zeros(arr.shape[0], dtype=np.int64)
        if arr.size:
            _get(arr, self._units, self._kept, self._used, out, self._hkey)
        return out

    def restore_counts(self, units: np.ndarray | Iterable[int], kept: np.ndarray | Iterable[int]) -> None:
        """Set the kept count of each unit (a checkpointed delta of :meth:`counts_of`; later wins)."""
        arr = np.ascontiguousarray(_as_unit_array(units))
        k = np.ascontiguousarray(np.asarray(list(kept) if not isinstance(kept, np.ndarray) else kept, dtype=np.int64))
        if k.shape != arr.shape or ((k < 1) | (k > self.cap)).any():
            raise UsageError("UnitCap.restore_counts: one count in 1..cap per unit")
        if arr.size:
            self._reserve(arr.shape[0])
            _set(arr, k, self._units, self._kept, self._used, self._meta, self._hkey)

    def _probe_lengths(self) -> tuple[int, int]:
        """(total, longest) number of table slots a lookup of each held unit visits (1: its home
        slot). For tests of the index (docs/ALGORITHMS.md §0.1 h); depends on the data, never exported."""
        total, longest = _probe_lengths(self._units, self._used, self._hkey)
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
            and np.array_equal(mine[0], theirs[0])
            and np.array_equal(mine[1], theirs[1])
        )

    def __repr__(self) -> str:
        return f"UnitCap(cap={self.cap}, distinct_units={self.distinct_units})"

    # -- serialisation -------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Versioned, checksummed serialisation (header, units ascending, kept counts, CRC-32)."""
        units, kept = self._held()
        fields = (self.cap, units.shape[0], self._dropped)
        body = units.astype("<u8").tobytes() + kept.astype("<i8").tobytes()
        return seal(_HEADER, _MAGIC, _VERSION, fields, body)

    @classmethod
    def from_bytes(cls, data: bytes) -> UnitCap:
        """Load :meth:`to_bytes` output; raises :class:`UnitCapFormatError` on any inconsistency."""
        where = "UnitCap"
        data = bytes(data)
        cap, count, dropped = unseal(data, _HEADER, _MAGIC, _VERSION, owner=where, error=UnitCapFormatError)
        if cap < 1 or cap >= 2**63:
            raise UnitCapFormatError(f"{where}: Possible corruption: cap={cap} out of range")
        expected = _HEADER.size + 16 * count + CRC.size
        if len(data) != expected:
            raise UnitCapFormatError(
                f"{where}: Possible corruption: {len(data)} bytes, expected {expected} for {count} units"
            )
        off = _HEADER.size
        units = np.frombuffer(data, dtype="<u8", count=count, offset=off).astype(np.uint64)
        kept = np.frombuffer(data, dtype="<i8", count=count, offset=off + 8 * count).astype(np.int64)
        if count > 1 and not (units[1:] > units[:-1]).all():
            raise UnitCapFormatError(f"{where}: Possible corruption: units not strictly increasing")
        if ((kept < 1) | (kept > cap)).any():
            raise UnitCapFormatError(f"{where}: Possible corruption: a kept count is outside 1..cap")
        if dropped >= 2**63:
            raise UnitCapFormatError(f"{where}: Possible corruption: dropped count out of range")
        state = cls(int(cap))
        state.restore_counts(units, kept)
        state._dropped = int(dropped)
        return state


def _as_unit_array(units: np.ndarray | Iterable[int]) -> np.ndarray:
    """``units`` as a 1-D ``uint64`` array; integer input only, no negative values."""
    arr = np.asarray(units if isinstance(units, np.ndarray) else list(units))
    if arr.ndim != 1:
        raise UsageError(f"UnitCap: units must be a 1-D array, got {arr.ndim} dimensions")
    if arr.size == 0:
        return np.zeros(0, dtype=np.uint64)
    if arr.dtype.kind not in "ui":
        raise TypeError(f"UnitCap: units must be integer keys (uint64), got dtype {arr.dtype}")
    if arr.dtype.kind == "i" and (arr < 0).any():
        raise UsageError("UnitCap: units must be non-negative keys")
    return arr.astype(np.uint64, copy=False)


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


def unit_keys_of(values: Iterable[str | int | bytes]) -> np.ndarray:
    """Map unit values to ``uint64`` unit keys with a fixed, public hash.

    Key = the first 8 bytes (little-endian) of ``blake2b(digest_size=8, person=b"dphhh.unit/v1")``
    of a type-tagged canonical encoding: ``str`` → ``b"s:"`` + UTF-8, ``int`` → ``b"i:"`` + decimal
    text, ``bytes`` → ``b"b:"`` + the bytes. The key depends on the value only (not on the window,
    the process or a secret), so the same unit gets the same key on every operator and after a
    restore. ``bool``, ``float``, ``None`` and other types raise ``TypeError``.

    Collisions: two different values with the same key are treated as **one** unit and share one
    cap of ``m`` elements, so a collision only ever keeps fewer elements, and the (ε, δ) guarantee
    holds exactly for the merged unit. For one of the two original values alone the distance is
    larger: removing it can let up to ``m`` elements of the other value in, i.e. up to ``2m``
    changed elements (about ``(2ε, (1+e^ε)·δ)``). With a 64-bit hash the chance that any two of N
    distinct units in a window collide is below ``N²/2^65`` (about 3·10⁻⁸ for a million units), and
    hitting a given unit's key on purpose needs a second preimage of a 64-bit hash.
    """
    out = [
        int.from_bytes(hashlib.blake2b(_canonical(v), digest_size=8, person=_HASH_PERSON).digest(), "little")
        for v in values
    ]
    return np.array(out, dtype=np.uint64)
