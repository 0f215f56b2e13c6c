"""Compiled kernel of the Misra-Gries sketch (spec §2, Algorithm 2), unit weights.

State (all numpy arrays, owned by :class:`sketches.misra_gries.MisraGries`):

* ``slot_keys[κ]`` (int64): the key in each slot; dummy keys are negative (``-1 - slot``) and can
  never equal a real key (real keys are >= 0).
* ``counts[κ]`` (int64): the counter of each slot.
* ``table[cap]`` (int64): open-addressing hash table (linear probing, backward-shift deletion)
  mapping a real key to its slot; ``-1`` marks an empty bucket. Dummies are not in the table.
* ``zeros[κ]`` (int64) and ``meta[ZPTR]``/``meta[ZLEN]``: the slots whose counter was 0 at the
  last rebuild, **ordered by key** (dummies, being negative, come first); entries whose counter has
  since become positive are skipped lazily. Counters only decrease in the decrement-all step, which
  rebuilds the list, and a slot leaves the zero set only by being hit or replaced, so the first
  live entry is always *the zero-counter slot holding the smallest key* — the tie-break of
  Algorithm 2 step 3 (with unit weights the smallest counter is 0 whenever step 3 applies).

Why the smallest key and not the lowest slot: the choice must depend only on the sketch's
``{key: counter}`` content, not on where keys happen to sit. Slot order lets one extra element
shift later replacements into different slots, and a property test found neighbouring streams
(κ = 4) whose sketches then differ in three keys per side, breaking the "at most 2 keys in one
sketch and not the other" part of Lemma 4.1.1 that the δ accounting of §3 relies on. With the
smallest-key rule the sketch is a function of its key→counter map and the bound held in an
exhaustive search at κ = 4 and in the random property tests.

Amortised cost: a hit is O(1); a replacement is O(1) plus lazily skipped list entries (each entry
is skipped at most once per rebuild); a decrement-all costs O(κ) plus sorting the z slots that
reach zero (O(z log z)); it happens at most n/κ times in a stream of n elements (each one removes
κ units of counter mass, and each element adds at most one), and a slot reaches zero only after
being incremented, so the total is O(n log κ) in the worst case and O(n) typically.
"""

from __future__ import annotations

import numpy as np
from numba import njit

ZPTR, ZLEN, DECREMENTS, TOTAL = 0, 1, 2, 3
META_SIZE = 4

_MULT = np.uint64(0x9E3779B97F4A7C15)


@njit(cache=True, inline="always")
def _bucket(key, mask):
    h = np.uint64(key) * _MULT
    h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(mask))


@njit(cache=True)
def _find(table, mask, slot_keys, key):
    i = _bucket(key, mask)
    while True:
        s = table[i]
        if s < 0:
            return -1
        if slot_keys[s] == key:
            return s
        i = (i + 1) & mask


@njit(cache=True)
def _insert(table, mask, key, slot):
    i = _bucket(key, mask)
    while table[i] >= 0:
        i = (i + 1) & mask
    table[i] = slot


@njit(cache=True)
def _delete(table, mask, slot_keys, key):
    i = _bucket(key, mask)
    while True:
        s = table[i]
        if s < 0:
            return  # not present (cannot happen for a real key in a slot)
        if slot_keys[s] == key:
            break
        i = (i + 1) & mask
    # Backward-shift deletion keeps every probe sequence unbroken without tombstones.
    j = i
    while True:
        j = (j + 1) & mask
        s = table[j]
        if s < 0:
            break
        home = _bucket(slot_keys[s], mask)
        if i <= j:
            stays = i < home <= j
        else:
            stays = home > i or home <= j
        if not stays:
            table[i] = s
            i = j
    table[i] = -1


@njit(cache=True)
def _sort_by_key(zeros, zlen, slot_keys):
    """Order ``zeros[:zlen]`` (slot indices) by the keys they hold, ascending."""
    if zlen > 1:
        order = np.argsort(slot_keys[zeros[:zlen]])
        zeros[:zlen] = zeros[:zlen][order]


@njit(cache=True)
def mg_update(stream, slot_keys, counts, table, zeros, meta):
    """Insert every element of ``stream`` (int64, all >= 0) in array order, weight 1 each."""
    mask = table.shape[0] - 1
    kappa = slot_keys.shape[0]
    zptr = meta[ZPTR]
    zlen = meta[ZLEN]
    decrements = meta[DECREMENTS]
    for idx in range(stream.shape[0]):
        x = stream[idx]
        s = _find(table, mask, slot_keys, x)
        if s >= 0:  # step 1: x is a key
            counts[s] += 1
            continue
        while zptr < zlen and counts[zeros[zptr]] != 0:
            zptr += 1
        if zptr == zlen:  # step 2: every counter >= 1: decrement all, x is not inserted
            zlen = 0
            for i in range(kappa):
                counts[i] -= 1
                if counts[i] == 0:
                    zeros[zlen] = i
                    zlen += 1
            _sort_by_key(zeros, zlen, slot_keys)
            zptr = 0
            decrements += 1
            continue
        y = zeros[zptr]  # step 3: replace the zero-counter slot holding the smallest key
        zptr += 1
        old = slot_keys[y]
        if old >= 0:
            _delete(table, mask, slot_keys, old)
        slot_keys[y] = x
        counts[y] = 1
        _insert(table, mask, x, y)
    meta[ZPTR] = zptr
    meta[ZLEN] = zlen
    meta[DECREMENTS] = decrements
    meta[TOTAL] += stream.shape[0]


@njit(cache=True)
def mg_rebuild_index(slot_keys, counts, table, zeros, meta):
    """Rebuild the hash table and the zero list from ``slot_keys``/``counts`` (after a load)."""
    mask = table.shape[0] - 1
    table[:] = -1
    zlen = 0
    for i in range(slot_keys.shape[0]):
        if slot_keys[i] >= 0:
            _insert(table, mask, slot_keys[i], i)
        if counts[i] == 0:
            zeros[zlen] = i
            zlen += 1
    _sort_by_key(zeros, zlen, slot_keys)
    meta[ZPTR] = 0
    meta[ZLEN] = zlen


@njit(cache=True)
def mg_lookup(keys, slot_keys, counts, table):
    """Counter of each key (0 when the key holds no slot)."""
    mask = table.shape[0] - 1
    out = np.zeros(keys.shape[0], dtype=np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        if k >= 0:
            s = _find(table, mask, slot_keys, k)
            if s >= 0:
                out[i] = counts[s]
    return out
