"""The Misra-Gries sketch of Algorithm 2 (Lebeda–Tětek variant), exactly (docs/ALGORITHMS.md §2).

Guarantee: after a stream of ``n`` unit-weight elements, every real key ``x`` has
``f(x) − n/(κ+1) <= C[x] <= f(x)`` (keys outside the sketch have ``C[x] = 0``); more tightly
``f(x) − d <= C[x]`` where ``d`` is the number of decrement-all steps taken, ``d <= n/(κ+1)``.
The state after :meth:`MisraGries.update` on an array equals the state after inserting its
elements one by one in array order, and depends only on the input sequence. When an element
replaces a key (Algorithm 2 step 3) it takes the zero-counter slot holding the **smallest key**
(dummies, negative, first): a fixed rule on the sketch's content that keeps Lemma 4.1.1's
"at most 2 keys per side in one sketch only" true (see :mod:`dphhh.sketches._mg_kernel`). Dummy keys
(negative) fill unused slots and are never output.

Weighted records (docs/ALGORITHMS.md §2 "Weighted elements"): ``update(keys, weights)`` inserts a record with
key x and integer weight v >= 1 **exactly as v unit inserts of x in a row** — the state (slots,
counters, ``total``, ``decrements``, serialised bytes) is the one those unit inserts leave — never
in O(v) time: O(1) per record plus one O(κ) pass per record that takes decrement-all steps (never
more passes than steps), and O(log κ) per record once such passes get frequent (see
:func:`dphhh.sketches._mg_kernel.mg_update_weighted`). The
guarantee above then holds with f(x) the sum of x's weights and n the sum of all weights.
Clipping to the public cap W (v <- min(v, W)) is the caller's job: :func:`clip_weights`.

The sketch state is **raw, non-private data**: only :func:`dphhh.privacy.release.release_level` may
turn it into something that leaves the engine.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

import numpy as np

from . import _mg_kernel as K
from .errors import InputError, UsageError
from .framing import CRC, seal, unseal

__all__ = ["MisraGries", "SketchFormatError", "clip_weights"]

_MAGIC = b"DPMG"
_VERSION = 1
_HEADER = struct.Struct("<4sHHIQQ")  # magic, version, flags, kappa, total, decrements
MAX_KAPPA = 1 << 26
MAX_WEIGHTED_TOTAL = 1 << 62  # a weighted update may not bring total (n) to this (offset headroom)
_INT64_MAX = (1 << 63) - 1
# Weighted updates take decrement-all steps by passes over the κ counters while those stay below
# κ + SCAN_RATE counter visits per record of the call, then switch to an offset + heap (O(log κ)
# per record): see :func:`dphhh.sketches._mg_kernel.mg_update_weighted`. Tests also set it to 0 (heap
# after each call's first pass) and to a huge value (passes only); the state is the same either way.
SCAN_RATE = 64


class SketchFormatError(InputError):
    """Raised when serialised sketch bytes are not a valid sketch."""


def _weight_array(weights: np.ndarray | Iterable[int], owner: str) -> np.ndarray:
    """``weights`` as a 1-D integer array (its own dtype), each >= 1; ValueError naming ``owner``."""
    if not isinstance(weights, np.ndarray):
        weights = list(weights)
        weights = np.asarray(weights) if weights else np.zeros(0, dtype=np.int64)
    if weights.dtype.kind not in "iu":
        raise UsageError(f"{owner}: weights must be integers, got dtype {weights.dtype}")
    if weights.ndim != 1:
        raise UsageError(f"{owner}: weights must be one-dimensional, got shape {weights.shape}")
    if weights.size and weights.min() < 1:
        raise UsageError(f"{owner}: every weight must be >= 1, got {int(weights.min())}")
    return weights


def _int64_weights(weights: np.ndarray | Iterable[int], owner: str) -> np.ndarray:
    """:func:`_weight_array` as contiguous int64 (unsigned weights of 2**63 or more are refused)."""
    arr = _weight_array(weights, owner)
    if arr.size and arr.dtype.kind == "u" and int(arr.max()) > _INT64_MAX:
        raise UsageError(f"{owner}: weights must be below 2**63, got {int(arr.max())}")
    return np.ascontiguousarray(arr, dtype=np.int64)


def clip_weights(weights: np.ndarray | Iterable[int], cap: int, owner: str = "clip_weights") -> np.ndarray:
    """``min(v, cap)`` for every weight v, as int64: the public weight cap W of docs/ALGORITHMS.md §2.

    Raises ValueError whose message starts with ``owner`` (name the caller, e.g. a connector)
    unless ``weights`` is a 1-D integer array (or sequence) whose every entry is >= 1 and ``cap``
    is an integer in 1..2**63 − 1. A clipped record of weight v is at most W unit elements, the
    bound the group-privacy calibration of docs/ALGORITHMS.md §2 "Weighted elements" relies on.
    """
    if not isinstance(cap, (int, np.integer)) or isinstance(cap, bool) or not (1 <= cap <= _INT64_MAX):
        raise UsageError(f"{owner}: the weight cap must be an integer in 1..2**63-1, got {cap!r}")
    arr = _weight_array(weights, owner)
    if arr.dtype == np.uint64:  # clip before converting, so that weights >= 2**63 clip too
        return np.minimum(arr, np.uint64(cap)).astype(np.int64)
    return np.minimum(arr.astype(np.int64), np.int64(cap))


def _table_size(kappa: int) -> int:
    """Buckets of the key → slot table: a power of two >= 16κ (load <= 1/16 keeps probe runs short:
    measured ~2x faster than load 1/2 on high-churn streams; state size is unaffected, only slots
    are serialised). Keys are placed by a multiply-shift hash under the table's secret hash key
    (:mod:`dphhh.sketches._mg_kernel`, "Index")."""
    size = 8
    while size < 16 * kappa:
        size <<= 1
    return size


class MisraGries:
    """Misra-Gries sketch with ``k`` slots (κ) over int keys >= 0: unit inserts or weighted records."""

    __slots__ = ("k", "_slot_keys", "_counts", "_table", "_hkey", "_zeros", "_tpos", "_meta")

    def __init__(self, k: int) -> None:
        if not isinstance(k, (int, np.integer)) or isinstance(k, bool) or not (1 <= k <= MAX_KAPPA):
            raise UsageError(f"MisraGries: k (counters) must be an integer in 1..{MAX_KAPPA}, got {k!r}")
        self.k = int(k)
        self._slot_keys = -1 - np.arange(self.k, dtype=np.int64)  # distinct dummies
        self._counts = np.zeros(self.k, dtype=np.int64)
        self._table = np.full(2 * _table_size(self.k), K.EMPTY, dtype=np.int64)
        # The index's secret hash key (docs/ALGORITHMS.md §0.1 h): drawn with the table, never serialised.
        self._hkey = K.table_hash_key()
        self._zeros = np.arange(self.k - 1, -1, -1, dtype=np.int64)  # zero slots by key: dummy -κ first
        self._tpos = np.zeros(self.k, dtype=np.int64)
        self._meta = np.zeros(K.META_SIZE, dtype=np.int64)
        self._meta[K.ZLEN] = self.k

    # -- updates -------------------------------------------------------------------------------
    def update(self, keys: np.ndarray | Iterable[int], weights: np.ndarray | Iterable[int] | None = None) -> None:
        """Insert every key of ``keys`` in order; keys must be integers >= 0.

        Without ``weights`` each key is one unit element. With ``weights`` (integers >= 1, one per
        key, already clipped to the public cap by the caller: :func:`clip_weights`) record i is
        inserted exactly as ``weights[i]`` unit inserts of ``keys[i]`` in a row: the resulting
        state, ``total`` and ``decrements`` equal those of that expanded unit stream, in O(1)
        amortised per record while decrement-all steps are rare and O(log κ) per record
        (plus O(κ log κ) per call) at worst, never O(v).

        Integer keys up to 2**63 − 1; unsigned arrays above that range are refused. A weighted
        update may not bring ``total`` to 2**62 (ValueError, the sketch unchanged).
        """
        if not isinstance(keys, np.ndarray):
            keys = np.fromiter(keys, dtype=np.int64) if not isinstance(keys, (list, tuple)) else np.asarray(keys)
        if keys.size and keys.dtype.kind not in "iub":
            raise UsageError(f"MisraGries.update: keys must be integers, got dtype {keys.dtype}")
        arr = np.ascontiguousarray(keys, dtype=np.int64)
        if arr.ndim != 1:
            raise UsageError(f"MisraGries.update: keys must be one-dimensional, got shape {arr.shape}")
        w = None if weights is None else self._checked_weights(weights, arr.shape[0])
        if arr.size == 0:
            return
        if int(arr.min()) < 0:
            raise UsageError("MisraGries.update: keys must be >= 0 (negative keys are reserved for dummies)")
        if w is None:
            K.mg_update(
                arr, self._slot_keys, self._counts, self._table, self._hkey, self._zeros, self._tpos, self._meta
            )
        else:
            K.mg_update_weighted(
                arr,
                w,
                self._slot_keys,
                self._counts,
                self._table,
                self._hkey,
                self._zeros,
                self._tpos,
                self._meta,
                SCAN_RATE,
            )

    def _checked_weights(self, weights: np.ndarray | Iterable[int], length: int) -> np.ndarray:
        """``weights`` as int64 after the checks of :meth:`update` (ValueError "MisraGries.update: …")."""
        w = _int64_weights(weights, "MisraGries.update")
        if w.shape[0] != length:
            raise UsageError(f"MisraGries.update: {w.shape[0]} weights for {length} keys (one weight per key)")
        room = MAX_WEIGHTED_TOTAL - 1 - self.total
        if length and (int(w.max()) > room // length and sum(w.tolist()) > room):
            raise UsageError("MisraGries.update: the weights would bring the total to 2**62 or more")
        return w

    def insert(self, key: int, weight: int | None = None) -> None:
        """Insert one key (weight 1), or one record of ``weight`` unit inserts of it in a row."""
        self.update(np.array([key], dtype=np.int64), None if weight is None else np.array([weight]))

    # -- queries -------------------------------------------------------------------------------
    @property
    def total(self) -> int:
        """Number of unit elements inserted (n; a weighted record counts its weight)."""
        return int(self._meta[K.TOTAL])

    @property
    def decrements(self) -> int:
        """Number of decrement-all steps taken so far (<= n/(κ+1))."""
        return int(self._meta[K.DECREMENTS])

    def counters(self) -> dict[int, int]:
        """``{real key: counter}`` for every real key in a slot, zero counters included."""
        real = self._slot_keys >= 0
        return dict(zip(self._slot_keys[real].tolist(), self._counts[real].tolist()))

    def estimate(self, key: int) -> int:
        """The counter of ``key`` (0 if absent) — equal to :meth:`get_lower_bound`."""
        return int(
            K.mg_lookup(np.array([key], dtype=np.int64), self._slot_keys, self._counts, self._table, self._hkey)[0]
        )

    def estimates(self, keys: np.ndarray) -> np.ndarray:
        """Vectorised :meth:`estimate`."""
        arr = np.ascontiguousarray(keys, dtype=np.int64)
        return K.mg_lookup(arr, self._slot_keys, self._counts, self._table, self._hkey)

    def get_lower_bound(self, key: int) -> int:
        """A value never above the true frequency of ``key``."""
        return self.estimate(key)

    def get_upper_bound(self, key: int) -> int:
        """A value never below the true frequency of ``key`` (counter + decrement-all steps)."""
        return self.estimate(key) + self.decrements

    @property
    def maximum_error(self) -> int:
        """Upper bound minus lower bound for any key."""
        return self.decrements

    def _probe_lengths(self) -> tuple[int, int]:
        """(total, longest) number of index buckets a lookup of each held key visits (1: its home
        bucket). For tests of the index (docs/ALGORITHMS.md §0.1 h); depends on the data, never exported."""
        total, longest = K.mg_probe_lengths(self._table, self._hkey)
        return int(total), int(longest)

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        """Copies of (slot keys, counters), dummies included, in slot order (for tests)."""
        return self._slot_keys.copy(), self._counts.copy()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MisraGries):
            return NotImplemented
        return (
            self.k == other.k
            and self.total == other.total
            and self.decrements == other.decrements
            and np.array_equal(self._slot_keys, other._slot_keys)
            and np.array_equal(self._counts, other._counts)
        )

    def __repr__(self) -> str:
        return f"MisraGries(k={self.k}, total={self.total})"

    # -- serialisation -------------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        """Versioned, checksummed serialisation (header, slot keys, counters, CRC-32)."""
        fields = (self.k, self.total, self.decrements)
        body = self._slot_keys.astype("<i8").tobytes() + self._counts.astype("<i8").tobytes()
        return seal(_HEADER, _MAGIC, _VERSION, fields, body)

    @classmethod
    def from_bytes(cls, data: bytes) -> MisraGries:
        """Load :meth:`to_bytes` output; raises :class:`SketchFormatError` on any inconsistency."""
        where = "MisraGries.from_bytes"
        data = bytes(data)
        kappa, total, decrements = unseal(data, _HEADER, _MAGIC, _VERSION, owner=where, error=SketchFormatError)
        if not (1 <= kappa <= MAX_KAPPA):
            raise SketchFormatError(f"{where}: Possible corruption: κ={kappa} out of range")
        expected = _HEADER.size + 16 * kappa + CRC.size
        if len(data) != expected:
            raise SketchFormatError(
                f"{where}: Possible corruption: {len(data)} bytes, expected {expected} for κ={kappa}"
            )
        off = _HEADER.size
        keys = np.frombuffer(data, dtype="<i8", count=kappa, offset=off).astype(np.int64)
        counts = np.frombuffer(data, dtype="<i8", count=kappa, offset=off + 8 * kappa).astype(np.int64)
        real = keys >= 0
        if (counts < 0).any():
            raise SketchFormatError(f"{where}: Possible corruption: negative counter")
        if (counts[~real] != 0).any():
            raise SketchFormatError(f"{where}: Possible corruption: a dummy slot has a non-zero counter")
        if np.unique(keys).size != kappa:
            raise SketchFormatError(f"{where}: Possible corruption: duplicate keys")
        # Every element adds 1 to one counter or removes 1 from all κ (and is itself dropped).
        if int(counts.sum()) != total - decrements * (kappa + 1):
            raise SketchFormatError(f"{where}: Possible corruption: counters do not add up to the stream length")
        sketch = cls(kappa)
        sketch._slot_keys[:] = keys
        sketch._counts[:] = counts
        sketch._meta[K.TOTAL] = total
        sketch._meta[K.DECREMENTS] = decrements
        # a fresh hash key (drawn by cls(kappa)): the index is rebuilt, never loaded
        K.mg_rebuild_index(
            sketch._slot_keys,
            sketch._counts,
            sketch._table,
            sketch._hkey,
            sketch._zeros,
            sketch._tpos,
            sketch._meta,
        )
        return sketch
