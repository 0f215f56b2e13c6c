"""Compiled kernel of the Misra-Gries sketch (docs/ALGORITHMS.md §2, Algorithm 2): unit inserts (:func:`mg_update`)
and weighted records (:func:`mg_update_weighted`, each exactly v unit inserts in a row).

State (all numpy arrays, owned by :class:`sketches.misra_gries.MisraGries`):

* ``slot_keys[κ]`` (int64): the key in each slot; dummy keys are negative (``-1 - slot``) and can
  never equal a real key (real keys are >= 0).
* ``counts[κ]`` (int64): the counter of each slot.
* ``table[2·cap]`` (int64): open-addressing hash table (linear probing, backward-shift deletion)
  of (key, slot) pairs mapping a real key to its slot; key ``EMPTY`` marks an empty bucket.
  Dummies are not in the table.
* ``tpos[κ]`` (int64): the bucket of each slot's real key in ``table`` (kept up to date when
  backward shifting moves entries), so evicting a key needs no probe.
* ``zslots[κ]`` (int64) with ``meta[ZPTR]``/``meta[ZLEN]``: the slots whose counter was 0 at the
  last rebuild, **ordered by the key they hold** (dummies, being negative, first). Entries whose
  counter has since become positive are skipped lazily. Counters only decrease in the decrement-all step, which
  rebuilds the list, a slot leaves the zero set only by being hit or replaced, and a key leaves its
  slot only when it is replaced from the front of this list, so the first live entry is always
  *the zero-counter slot holding the smallest key* — the tie-break of Algorithm 2 step 3 (with
  unit weights the smallest counter is 0 whenever step 3 applies).

Why the smallest key and not the lowest slot: the choice must depend only on the sketch's
``{key: counter}`` content, not on where keys happen to sit. Slot order lets one extra element
shift later replacements into different slots, and a property test found neighbouring streams
(κ = 4) whose sketches then differ in three keys per side, breaking the "at most 2 keys per side in
one sketch only" part of Lemma 4.1.1 that the δ accounting of §3 relies on. With the smallest-key
rule the sketch is a function of its key→counter map, and the lemma has a written proof
(docs/calibration.md §1.1) checked exhaustively on small streams and by random property tests.

Amortised cost: a hit is O(1); a replacement is O(1) plus lazily skipped entries (each skipped at
most once per rebuild); a decrement-all costs O(κ) for the scan plus an in-place sort of the z
slots that reached zero, O(z log z); it happens at most n/κ times in a stream of n elements (each
one removes κ units of counter mass, and each element adds at most one), so over a stream the work
is O(n) for everything but the sorts, O(n log κ) in the worst case, without allocation.

Weighted records (:func:`mg_update_weighted`, each exactly v unit inserts in a row) never cost
O(v): a hit or a free zero slot is O(1) amortised as above; t decrement-all steps at once are one
O(κ) pass (at most one pass per step, so never more than the unit inserts would do) while passes
stay rare, and past a budget of passes the call switches to a global decrement offset and a
(counter, key) min-heap: O(log κ) per record, plus O(κ log κ) once per call. No exact implementation
can be O(1) amortised per record in the comparison model: κ fresh keys with distinct weights
a_1..a_κ < W, then κ fresh keys of weight W, make the replacements happen in increasing order of
the a_i (each key of weight W evicts the current smallest counter), so the final slot keys sort
the a_i: Ω(κ log κ) comparisons for 2κ records.
"""

from __future__ import annotations

import builtins
import os
import sys

import numpy as np

from ._cache_home import user_cache_home


def _make_print_findable() -> None:
    """Let numba import inside PyFlink's process-mode Python worker.

    That worker replaces ``builtins.print`` by a bound method defined in its own module, and
    numba's import registers ``print`` after checking that ``getattr(print.__module__, "print")``
    is that very object, which fails (AttributeError) for a bound method. Naming the current
    ``print`` in its module makes the check hold; elsewhere this does nothing."""
    current = builtins.print
    module = sys.modules.get(getattr(current, "__module__", None) or "builtins")
    name = getattr(current, "__name__", "print")
    if module is not None and getattr(module, name, None) is not current:
        setattr(module, name, current)


_make_print_findable()


def _cache_outside_an_install() -> None:
    """Keep numba's compiled-kernel cache out of site-packages.

    ``cache=True`` writes beside the module (``__pycache__``). In a checkout that is fine; in an
    installed package it would write into site-packages, so the cache goes to
    ``$DPHHH_HOME/numba`` (default ``~/.cache/dphhh/numba``) unless ``NUMBA_CACHE_DIR`` is set."""
    here = os.path.dirname(os.path.abspath(__file__))
    if os.environ.get("NUMBA_CACHE_DIR") or os.path.isfile(os.path.join(here, "..", "pyproject.toml")):
        return
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(user_cache_home(), "numba")
    if "numba.core.config" in sys.modules:  # numba imported before us: let it read the variable again
        sys.modules["numba.core.config"].reload_config()


_cache_outside_an_install()

from numba import njit  # noqa: E402  (after the fixes above)

ZPTR, ZLEN, DECREMENTS, TOTAL = 0, 1, 2, 3
META_SIZE = 4

_MULT = np.uint64(0x9E3779B97F4A7C15)


EMPTY = np.int64(-(2**63))  # an empty bucket's key (dummies are never in the table)


@njit(cache=True, inline="always")
def _bucket(key, mask):
    h = np.uint64(key) * _MULT
    h ^= h >> np.uint64(29)
    return np.int64(h & np.uint64(mask))


@njit(cache=True, inline="always")
def _position(table, mask, key):
    """Bucket holding ``key``; if absent, ``-1 - e`` with ``e`` the empty bucket where it would go.

    ``table[2b]`` is a key, ``table[2b+1]`` its slot.
    """
    i = _bucket(key, mask)
    while True:
        k = table[2 * i]
        if k == key:
            return i
        if k == EMPTY:
            return -1 - i
        i = (i + 1) & mask


@njit(cache=True, inline="always")
def _insert(table, mask, key, slot, tpos):
    i = _bucket(key, mask)
    while table[2 * i] != EMPTY:
        i = (i + 1) & mask
    table[2 * i] = key
    table[2 * i + 1] = slot
    tpos[slot] = i


@njit(cache=True, inline="always")
def _delete_at(table, mask, i, tpos):
    """Empty bucket ``i``; backward shifting keeps every probe sequence unbroken (no tombstones)."""
    j = i
    while True:
        j = (j + 1) & mask
        k = table[2 * j]
        if k == EMPTY:
            break
        home = _bucket(k, mask)
        if i <= j:
            stays = i < home <= j
        else:
            stays = home > i or home <= j
        if not stays:
            moved = table[2 * j + 1]
            table[2 * i] = k
            table[2 * i + 1] = moved
            tpos[moved] = i
            i = j
    table[2 * i] = EMPTY


@njit(cache=True)
def _sort_slots_by_key(zslots, n, slot_keys):
    """Sort ``zslots[:n]`` (slot indices) by the keys they hold, in place (quicksort + insertion)."""
    stack = np.empty(128, dtype=np.int64)
    top = 0
    stack[0], stack[1] = 0, n - 1
    top = 2
    while top > 0:
        top -= 2
        lo, hi = stack[top], stack[top + 1]
        while hi - lo > 16:
            mid = (lo + hi) >> 1
            # median of three as pivot
            a, b, c = slot_keys[zslots[lo]], slot_keys[zslots[mid]], slot_keys[zslots[hi]]
            pivot = max(min(a, b), min(max(a, b), c))
            i, j = lo, hi
            while i <= j:
                while slot_keys[zslots[i]] < pivot:
                    i += 1
                while slot_keys[zslots[j]] > pivot:
                    j -= 1
                if i <= j:
                    zslots[i], zslots[j] = zslots[j], zslots[i]
                    i += 1
                    j -= 1
            if j - lo < hi - i:  # recurse into the smaller part first (bounded stack)
                if i < hi:
                    stack[top], stack[top + 1] = i, hi
                    top += 2
                hi = j
            else:
                if lo < j:
                    stack[top], stack[top + 1] = lo, j
                    top += 2
                lo = i
        for i in range(lo + 1, hi + 1):  # insertion sort of the short run
            v = zslots[i]
            kv = slot_keys[v]
            j = i - 1
            while j >= lo and slot_keys[zslots[j]] > kv:
                zslots[j + 1] = zslots[j]
                j -= 1
            zslots[j + 1] = v


_SLOT_BITS = 26  # κ <= 2**26 (MAX_KAPPA)
_PACK_LIMIT = (1 << (63 - _SLOT_BITS)) - (1 << _SLOT_BITS)  # keys below this pack with their slot


@njit(cache=True)
def _collect_zero_slots(counts, zslots, slot_keys, decrement):
    """Write the zero-counter slots to ``zslots``, ordered by the keys they hold; return how many.

    Every counter is first lowered by ``decrement`` (>= 0), in the same pass: 1 for a unit
    decrement-all (Algorithm 2 step 2), t for t of them at once, 0 for a rebuild.

    Fast path: when every such key is below ``_PACK_LIMIT`` (IPv4 keys always are), each
    (key, slot) pair is packed into one int64 that sorts like the key and the native sort is used;
    otherwise an indirect quicksort on the slots.
    """
    z = 0
    packable = True
    for i in range(counts.shape[0]):
        counts[i] -= decrement
        if counts[i] == 0:
            zslots[z] = i
            z += 1
            if slot_keys[i] >= _PACK_LIMIT:
                packable = False
    if z < 2:
        return z
    if not packable:
        _sort_slots_by_key(zslots, z, slot_keys)
        return z
    offset = np.int64(1 << _SLOT_BITS)
    for j in range(z):
        slot = zslots[j]
        zslots[j] = ((slot_keys[slot] + offset) << _SLOT_BITS) | slot
    zslots[:z].sort()
    low = np.int64((1 << _SLOT_BITS) - 1)
    for j in range(z):
        zslots[j] &= low
    return z


@njit(cache=True, inline="always")
def _enter_key(table, b, x, y, slot_keys, tpos):
    """Put key ``x`` (absent: its lookup ended on bucket code ``b``) into slot ``y`` and into the
    empty bucket that lookup ended on; return the bucket of y's old key (-1 for a dummy, which is
    not in the table), for the caller to delete with :func:`_delete_at` (backward shifting may
    move x's entry; tpos follows every move). The caller sets ``counts[y]``.

    (The deletion stays in the caller: a numba-inlined helper that itself inlines
    :func:`_delete_at` made the unit kernel ~1.5x slower.)"""
    old_bucket = tpos[y] if slot_keys[y] >= 0 else -1
    e = -1 - b
    table[2 * e] = x
    table[2 * e + 1] = y
    tpos[y] = e
    slot_keys[y] = x
    return old_bucket


@njit(cache=True, nogil=True)
def mg_update(stream, slot_keys, counts, table, zslots, tpos, meta):
    """Insert every element of ``stream`` (int64, all >= 0) in array order, weight 1 each."""
    mask = table.shape[0] // 2 - 1
    zptr = meta[ZPTR]
    zlen = meta[ZLEN]
    decrements = meta[DECREMENTS]
    for idx in range(stream.shape[0]):
        x = stream[idx]
        b = _position(table, mask, x)
        if b >= 0:  # step 1: x is a key
            counts[table[2 * b + 1]] += 1
            continue
        y = -1
        while zptr < zlen:  # the smallest key still at zero (skip slots hit since the rebuild)
            slot = zslots[zptr]
            zptr += 1
            if counts[slot] == 0:
                y = slot
                break
        if y < 0:  # step 2: every counter >= 1: decrement all, x is not inserted
            zlen = _collect_zero_slots(counts, zslots, slot_keys, 1)
            zptr = 0
            decrements += 1
            continue
        # step 3: y is the zero-counter slot holding the smallest key: replace it.
        old_bucket = _enter_key(table, b, x, y, slot_keys, tpos)
        if old_bucket >= 0:
            _delete_at(table, mask, old_bucket, tpos)
        counts[y] = 1
    meta[ZPTR] = zptr
    meta[ZLEN] = zlen
    meta[DECREMENTS] = decrements
    meta[TOTAL] += stream.shape[0]


@njit(cache=True)
def mg_rebuild_index(slot_keys, counts, table, zslots, tpos, meta):
    """Rebuild the hash table and the zero list from ``slot_keys``/``counts`` (after a load)."""
    mask = table.shape[0] // 2 - 1
    table[:] = EMPTY
    for i in range(slot_keys.shape[0]):
        if slot_keys[i] >= 0:
            _insert(table, mask, slot_keys[i], i, tpos)
    meta[ZLEN] = _collect_zero_slots(counts, zslots, slot_keys, 0)
    meta[ZPTR] = 0


@njit(cache=True)
def mg_lookup(keys, slot_keys, counts, table):
    """Counter of each key (0 when the key holds no slot)."""
    mask = table.shape[0] // 2 - 1
    out = np.zeros(keys.shape[0], dtype=np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        if k >= 0:
            b = _position(table, mask, k)
            if b >= 0:
                out[i] = counts[table[2 * b + 1]]  # (a miss returns a negative bucket code)
    return out


# ---------------------------------------------------------------------------------------------
# Weighted records (docs/ALGORITHMS.md §2 "Weighted elements"): a record (x, v) is v unit inserts of x in a row.
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _sift_down(heap, hpos, counts, slot_keys, i):
    """Restore the min-heap of slots below position ``i`` after the slot there moved later in the
    order (counter, key); keys are distinct, so the order is total and the top is unique."""
    n = heap.shape[0]
    slot = heap[i]
    c, k = counts[slot], slot_keys[slot]
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        cc = counts[heap[child]]
        right = child + 1
        if right < n:
            rc = counts[heap[right]]
            if rc < cc or (rc == cc and slot_keys[heap[right]] < slot_keys[heap[child]]):
                child, cc = right, rc
        if cc > c or (cc == c and slot_keys[heap[child]] > k):
            break
        heap[i] = heap[child]
        hpos[heap[i]] = i
        i = child
    heap[i] = slot
    hpos[slot] = i


@njit(cache=True, nogil=True)
def mg_update_weighted(stream, weights, slot_keys, counts, table, zslots, tpos, meta, scan_rate):
    """Insert record ``(stream[i], weights[i])`` for every i in array order, each **exactly** as
    ``weights[i]`` unit inserts of ``stream[i]`` in a row (keys >= 0, weights >= 1, checked by the
    caller, as is that the total stays below 2**62).

    Per record, with m the smallest counter: a key gets ``C[x] += v``; otherwise ``t = min(v, m)``
    decrement-all steps are taken at once and, if ``v > m``, x replaces the zero-counter slot
    holding the smallest key with ``C[x] = v − m`` — what the v unit inserts do: the first m of
    them each decrement all (x is dropped while every counter is >= 1), the next one replaces the
    smallest-key zero slot (there is one: the slots whose counter was m), the rest hit x.

    Two regimes in one call; neither ever loops v times.

    * **Scan** (from the start): a free zero slot is found through the unit path's zero list,
      O(1) amortised as in :func:`mg_update`; a record that needs decrement-all steps takes all t
      of them in one pass over the κ counters (and rebuilds the zero list when counters reach
      zero), like one unit decrement-all. There are at most as many such passes as decrement-all
      steps, so this is never more work than the v unit inserts, and O(1) amortised per record
      when steps are rare (each removes κ units of counter mass).
    * **Heap** (for the rest of the call, once passes would exceed ``κ + scan_rate`` counter
      visits per record of the call so far): a **global decrement offset** D (``counts`` then
      hold C + D, so t steps cost O(1)) and a binary min-heap of the slots ordered by
      (counter, key), whose top is the slot with the smallest counter and among those the
      smallest key — the tie rule of step 3 (dummies first). A hit or a replacement only moves a
      slot later in that order: one sift-down, O(log κ). At the end D is subtracted from every
      counter and the zero list rebuilt, O(κ log κ) once.

    So a call costs O(records · log κ + κ log κ) in the worst case and O(records) amortised while
    decrement-all steps stay rarer than one per κ/scan_rate records.
    """
    mask = table.shape[0] // 2 - 1
    kappa = counts.shape[0]
    zptr = meta[ZPTR]
    zlen = meta[ZLEN]
    steps = 0  # decrement-all steps taken by this call
    units = 0  # unit elements inserted by this call (sum of the weights)
    passes = 0  # counter passes of the scan regime
    offset = 0  # D, in the heap regime: C[slot] = counts[slot] - offset
    heap = np.empty(0, dtype=np.int64)
    hpos = np.empty(0, dtype=np.int64)
    heap_on = False
    for idx in range(stream.shape[0]):
        x = stream[idx]
        v = weights[idx]
        units += v
        b = _position(table, mask, x)
        if b >= 0:  # x is a key: its v units are v hits
            slot = table[2 * b + 1]
            counts[slot] += v
            if heap_on:
                _sift_down(heap, hpos, counts, slot_keys, hpos[slot])
            continue
        m = 0  # the smallest counter, once known to be positive
        y = -1
        if not heap_on:
            while zptr < zlen:
                slot = zslots[zptr]
                zptr += 1
                if counts[slot] == 0:
                    y = slot
                    break
            if y < 0 and (passes + 1) * kappa <= kappa + scan_rate * idx:  # every counter >= 1:
                passes += 1  # t = min(v, m) steps in one pass
                m = counts.min()
                t = min(v, m)
                steps += t
                zptr = 0
                if t == m:  # counters reach zero: lower them and list the zero slots in one pass
                    zlen = _collect_zero_slots(counts, zslots, slot_keys, t)
                else:
                    zlen = 0
                    for i in range(kappa):
                        counts[i] -= t
                if v <= m:  # x is not inserted
                    continue
                y, zptr = zslots[0], 1  # the smallest key at zero (the list is fresh)
            elif y < 0:  # passes too frequent: offset + heap for the rest of the call
                heap = np.arange(kappa).astype(np.int64)
                hpos = heap.copy()
                for i in range(kappa // 2 - 1, -1, -1):
                    _sift_down(heap, hpos, counts, slot_keys, i)
                heap_on = True
        if heap_on:
            y = heap[0]
            m = counts[y] - offset
            t = min(v, m)
            offset += t
            steps += t
            if v <= m:  # x is not inserted
                continue
        # The (m+1)-th unit takes y, the zero slot holding the smallest key; the rest hit x.
        old_bucket = _enter_key(table, b, x, y, slot_keys, tpos)
        if old_bucket >= 0:
            _delete_at(table, mask, old_bucket, tpos)
        counts[y] = offset + (v - m)
        if heap_on:
            _sift_down(heap, hpos, counts, slot_keys, 0)
    if heap_on:
        zlen = _collect_zero_slots(counts, zslots, slot_keys, offset)
        zptr = 0
    meta[ZPTR] = zptr
    meta[ZLEN] = zlen
    meta[DECREMENTS] += steps
    meta[TOTAL] += units
