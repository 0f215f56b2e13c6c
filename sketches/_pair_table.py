"""Compiled key → pair table of a :class:`~dphhh.sketches.pairs.PairHierarchy` node whose keys cannot be
decoded (the IPv4 /32 × /32 node's 63-bit mixes, hashed pairs of other hierarchies).

:class:`KeyTable` maps each key it has seen to the two side keys it was computed from; when two
pairs share a key (a chance collision of the keyed hash), the smaller pair is kept as the key's
label — a merge, never an error (docs/ALGORITHMS.md §1 "Keys"). It is an
open-addressing hash table (linear probing, no deletions, load at most 1/2) in three numpy arrays,
entered and read by compiled loops, so a batch of n keys costs O(n) with no Python loop, no sort
and no per-key object (24 bytes per slot against a few hundred for a ``dict`` of tuples).

Its compiled kernels are cached by numba with their module's name, ``dphhh.sketches._pair_table`` since the
namespace change (this line also invalidates caches a checkout wrote under the old name).
"""

from __future__ import annotations

import numpy as np

# numba as the Misra-Gries kernel imports it: after its import guard and kernel cache folder
from ._mg_kernel import njit

__all__ = ["KeyTable"]

EMPTY = np.int64(-1)  # an empty slot's key (keys are >= 0)
_MULT = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, inline="always")
def _slot(key, mask):
    h = np.uint64(key) * _MULT
    h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(mask))


@njit(cache=True)
def _enter(keys, first, second, tkeys, tfirst, tsecond, meta):
    """Enter (keys[i], first[i], second[i]) in order; ``meta[0]`` counts the keys held. A key held
    with another pair keeps the smaller of the two pairs (first key, then second). Returns the
    number of such merges."""
    mask = tkeys.shape[0] - 1
    merged = 0
    for i in range(keys.shape[0]):
        key = keys[i]
        j = _slot(key, mask)
        while True:
            held = tkeys[j]
            if held == key:
                if tfirst[j] != first[i] or tsecond[j] != second[i]:
                    merged += 1
                    if first[i] < tfirst[j] or (first[i] == tfirst[j] and second[i] < tsecond[j]):
                        tfirst[j] = first[i]
                        tsecond[j] = second[i]
                break
            if held == EMPTY:
                tkeys[j] = key
                tfirst[j] = first[i]
                tsecond[j] = second[i]
                meta[0] += 1
                break
            j = (j + 1) & mask
    return merged


@njit(cache=True)
def _lookup(keys, tkeys, tfirst, tsecond, found, first, second):
    mask = tkeys.shape[0] - 1
    for i in range(keys.shape[0]):
        key = keys[i]
        j = _slot(key, mask)
        while True:
            held = tkeys[j]
            if held == key:
                found[i] = True
                first[i] = tfirst[j]
                second[i] = tsecond[j]
                break
            if held == EMPTY:
                break
            j = (j + 1) & mask


class KeyTable:
    """key → (first key, second key) for int64 keys >= 0; a key shared by two pairs keeps the smaller."""

    __slots__ = ("_keys", "_first", "_second", "_meta")

    def __init__(self, capacity: int = 1024) -> None:
        self._alloc(max(16, 1 << (max(1, int(capacity)) - 1).bit_length()))
        self._meta = np.zeros(1, dtype=np.int64)

    def _alloc(self, size: int) -> None:
        self._keys = np.full(size, EMPTY, dtype=np.int64)
        self._first = np.zeros(size, dtype=np.int64)
        self._second = np.zeros(size, dtype=np.int64)

    def __len__(self) -> int:
        return int(self._meta[0])

    def _reserve(self, more: int) -> None:
        """Grow (doubling, rehashing) so that ``more`` new keys keep the load at most 1/2."""
        need = 2 * (len(self) + more)
        if need <= self._keys.shape[0]:
            return
        size = self._keys.shape[0]
        while size < need:
            size *= 2
        held = self._keys != EMPTY
        keys, first, second = self._keys[held], self._first[held], self._second[held]
        self._alloc(size)
        self._meta[0] = 0
        _enter(keys, first, second, self._keys, self._first, self._second, self._meta)

    def enter(self, keys: np.ndarray, first: np.ndarray, second: np.ndarray) -> int:
        """Learn each key's pair (int64 arrays of one length); returns how many keys were already
        held for another pair (merged: the smaller pair is kept)."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        first = np.ascontiguousarray(first, dtype=np.int64)
        second = np.ascontiguousarray(second, dtype=np.int64)
        if not keys.size:
            return 0
        self._reserve(keys.shape[0])
        return int(_enter(keys, first, second, self._keys, self._first, self._second, self._meta))

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(held, first keys, second keys) of int64 ``keys`` (0 where not held)."""
        keys = np.ascontiguousarray(keys, dtype=np.int64)
        found = np.zeros(keys.shape[0], dtype=np.bool_)
        first = np.zeros(keys.shape[0], dtype=np.int64)
        second = np.zeros(keys.shape[0], dtype=np.int64)
        _lookup(keys, self._keys, self._first, self._second, found, first, second)
        return found, first, second
