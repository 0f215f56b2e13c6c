"""Compiled kernel of the Misra-Gries sketch (docs/ALGORITHMS.md §2, Algorithm 2): unit inserts (:func:`mg_update`)
and weighted records (:func:`mg_update_weighted`, each exactly v unit inserts in a row).

State (all numpy arrays, owned by :class:`dphhh.sketches.misra_gries.MisraGries`):

* ``slot_keys[κ]`` (int64): the key in each slot; dummy keys are negative (``-1 - slot``) and can
  never equal a real key (real keys are >= 0).
* ``counts[κ]`` (int64): the counter of each slot.
* ``table[2·size]`` (int64): open-addressing hash table (linear probing, backward-shift deletion)
  of (key, slot) pairs mapping a real key to its slot; key ``EMPTY`` marks an empty bucket.
  Dummies are not in the table. ``size`` is a power of two; a key's home bucket is
  :func:`home_of`, a multiply-shift hash under the table's **secret hash key** ``hkey`` (three
  random odd uint64 multipliers, an argument of every kernel that reads the table; "Index" below).
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

Amortised cost: a hit is one lookup in the index, O(1) expected over the index's secret hash key
(see "Index" below: never O(κ), whatever keys are sent); a replacement is a lookup, an insert and
a backward-shift deletion, O(1) expected likewise, plus lazily skipped entries (each skipped at
most once per rebuild); a decrement-all costs O(κ) for the scan plus an in-place sort of the z
slots that reached zero, O(z log z); it happens at most n/κ times in a stream of n elements (each
one removes κ units of counter mass, and each element adds at most one), so over a stream the
expected work is O(n) for everything but the sorts, O(n log κ) in the worst case, without allocation.

Weighted records (:func:`mg_update_weighted`, each exactly v unit inserts in a row) never cost
O(v): a hit or a free zero slot is O(1) amortised as above; t decrement-all steps at once are one
O(κ) pass (at most one pass per step, so never more than the unit inserts would do) while passes
stay rare, and past a budget of passes the call switches to a global decrement offset and a
(counter, key) min-heap: O(log κ) per record, plus O(κ log κ) once per call. No exact implementation
can be O(1) amortised per record in the comparison model: κ fresh keys with distinct weights
a_1..a_κ < W, then κ fresh keys of weight W, make the replacements happen in increasing order of
the a_i (each key of weight W evicts the current smallest counter), so the final slot keys sort
the a_i: Ω(κ log κ) comparisons for 2κ records.

Index (docs/ALGORITHMS.md §0.1 h, "hash flooding"): keys are chosen by whoever sends the data, so
the key → slot table must not use a hash they can compute. With a public function, keys crafted to
share one home bucket form one probe run that every lookup, insert and backward shift walks: O(κ)
per element instead of O(1), a cost (and so a release time) set by the data. Each table therefore
has its own **secret hash key** ``hkey`` (:func:`table_hash_key`: three random odd 64-bit words
from the secure source), drawn when the table is allocated — a loaded sketch draws a fresh one and
rebuilds its index — and never stored or output. A key's home is :func:`home_of`: two secret
multiply-xorshift rounds (a bijection), then multiply-shift, whose home is the **top**
``log2(size)`` bits of the product (the low bits of a product depend only on the key's low bits).
Multiply-shift makes two distinct keys share a home with probability at most 2/size over the key
(Dietzfelbinger et al. 1997), so whatever keys are sent, a held key expects at most
2κ/size <= 1/8 others at its home (load <= 1/16); nobody who sends data knows the draw, so the
costs above are expected costs over it. The index is internal: slots, counters, the tie rule and
the serialised state never depend on it. Residual: this is universal hashing, not 5-independent,
so linear probing's expected cost is not proved O(1) for *every* key set (structured sets can cost
more than a constant under universal families: Pagh, Pagh, Ružić 2009; Pătraşcu, Thorup 2010 — the
reason for the two rounds before the multiply-shift, see :func:`home_of`); what a sender can aim
without the key is that, never the O(κ) per element of keys aimed at a known hash.

Its compiled kernels are cached by numba with their module's name, ``dphhh.sketches._mg_kernel`` since the
namespace change (this line also invalidates caches a checkout wrote under the old name).
"""

from __future__ import annotations

import builtins
import os
import secrets
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

EMPTY = np.int64(-(2**63))  # an empty bucket's key (dummies are never in the table)


HASH_KEY_WORDS = 3  # a table's secret hash key: three odd multipliers (home_of)


def random_multiplier() -> np.uint64:
    """A random odd 64-bit word from the secure source: one of a table's secret multipliers
    (docs/ALGORITHMS.md §0.1 h). Tests replace it (a module attribute, looked up at each draw) to
    inject known multipliers."""
    return np.uint64(secrets.randbits(64) | 1)


def table_hash_key(words: int = HASH_KEY_WORDS) -> np.ndarray:
    """A fresh secret hash key for one table: ``words`` random odd multipliers (uint64; the unit
    cap's table takes one more, for the high word of 128-bit units), drawn when the table is
    allocated or rebuilt, never stored or output; see :func:`home_of`."""
    return np.array([random_multiplier() for _ in range(words)], dtype=np.uint64)


@njit(cache=True, inline="always")
def _shift_of(size):
    """``64 − log2(size)`` (uint64) for a power-of-two table ``size`` >= 2: :func:`home_of` keeps
    the top ``log2(size)`` bits."""
    bits = 0
    while (np.int64(1) << bits) < size:
        bits += 1
    return np.uint64(64 - bits)


@njit(cache=True, inline="always")
def home_of(key, hkey, shift):
    """Home bucket of ``key`` (uint64) in a table with secret hash key ``hkey`` (odd multipliers
    a, b, c; :func:`table_hash_key`): ``y = key·a``, ``y ^= y >> 32``, ``y *= b``, ``y ^= y >> 32``,
    then multiply-shift — the top bits of ``y·c`` (all mod 2**64; ``shift`` from :func:`_shift_of`).

    ``key → y`` is a bijection for any a, b, so two distinct keys share a home with probability at
    most 2/size over c alone (multiply-shift, Dietzfelbinger et al. 1997), whatever the keys. The
    two secret multiply-xorshift rounds before it break up arithmetic structure among the keys
    (consecutive addresses, prefixes that are multiples of 2**k): multiply-shift alone maps an
    arithmetic progression to a Weyl sequence, and about one multiplier in a hundred gives such a
    set runs of over 32 keys, a few in a thousand runs of hundreds (measured on 3000 consecutive
    units in 8192 slots: runs up to 1150; with the two rounds, up to 36, as for random keys;
    ``tests/sketches/test_hash_flooding.py``)."""
    y = key * hkey[0]
    y ^= y >> np.uint64(32)
    y *= hkey[1]
    y ^= y >> np.uint64(32)
    return np.int64((y * hkey[2]) >> shift)


@njit(cache=True, inline="always")
def _bucket(key, hkey, shift):
    return home_of(np.uint64(key), hkey, shift)


@njit(cache=True, inline="always")
def _position(table, mask, key, hkey, shift):
    """Bucket holding ``key``; if absent, ``-1 - e`` with ``e`` the empty bucket where it would go.

    ``table[2b]`` is a key, ``table[2b+1]`` its slot.
    """
    i = _bucket(key, hkey, shift)
    while True:
        k = table[2 * i]
        if k == key:
            return i
        if k == EMPTY:
            return -1 - i
        i = (i + 1) & mask


@njit(cache=True, inline="always")
def _insert(table, mask, key, slot, tpos, hkey, shift):
    i = _bucket(key, hkey, shift)
    while table[2 * i] != EMPTY:
        i = (i + 1) & mask
    table[2 * i] = key
    table[2 * i + 1] = slot
    tpos[slot] = i


@njit(cache=True, inline="always")
def _delete_at(table, mask, i, tpos, hkey, shift):
    """Empty bucket ``i``; backward shifting keeps every probe sequence unbroken (no tombstones).
    An entry moves back into the hole unless its home (the same :func:`_bucket` as every lookup)
    lies cyclically in ``(i, j]``."""
    j = i
    while True:
        j = (j + 1) & mask
        k = table[2 * j]
        if k == EMPTY:
            break
        home = _bucket(k, hkey, shift)
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
def mg_update(stream, slot_keys, counts, table, hkey, zslots, tpos, meta):
    """Insert every element of ``stream`` (int64, all >= 0) in array order, weight 1 each
    (``hkey``: the table's secret hash key, :func:`table_hash_key`)."""
    mask = table.shape[0] // 2 - 1
    shift = _shift_of(table.shape[0] // 2)
    zptr = meta[ZPTR]
    zlen = meta[ZLEN]
    decrements = meta[DECREMENTS]
    for idx in range(stream.shape[0]):
        x = stream[idx]
        b = _position(table, mask, x, hkey, shift)
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
            _delete_at(table, mask, old_bucket, tpos, hkey, shift)
        counts[y] = 1
    meta[ZPTR] = zptr
    meta[ZLEN] = zlen
    meta[DECREMENTS] = decrements
    meta[TOTAL] += stream.shape[0]


@njit(cache=True)
def mg_rebuild_index(slot_keys, counts, table, hkey, zslots, tpos, meta):
    """Rebuild the hash table (under hash key ``hkey``) and the zero list from
    ``slot_keys``/``counts`` (after a load)."""
    mask = table.shape[0] // 2 - 1
    shift = _shift_of(table.shape[0] // 2)
    table[:] = EMPTY
    for i in range(slot_keys.shape[0]):
        if slot_keys[i] >= 0:
            _insert(table, mask, slot_keys[i], i, tpos, hkey, shift)
    meta[ZLEN] = _collect_zero_slots(counts, zslots, slot_keys, 0)
    meta[ZPTR] = 0


@njit(cache=True)
def mg_lookup(keys, slot_keys, counts, table, hkey):
    """Counter of each key (0 when the key holds no slot)."""
    mask = table.shape[0] // 2 - 1
    shift = _shift_of(table.shape[0] // 2)
    out = np.zeros(keys.shape[0], dtype=np.int64)
    for i in range(keys.shape[0]):
        k = keys[i]
        if k >= 0:
            b = _position(table, mask, k, hkey, shift)
            if b >= 0:
                out[i] = counts[table[2 * b + 1]]  # (a miss returns a negative bucket code)
    return out


@njit(cache=True)
def mg_probe_lengths(table, hkey):
    """(total, longest) number of buckets a lookup of each held key visits under hash key ``hkey``
    (1 for a key in its home bucket). A diagnostic for tests of the index (docs/ALGORITHMS.md §0.1 h);
    it depends on the data and is never exported."""
    mask = table.shape[0] // 2 - 1
    shift = _shift_of(table.shape[0] // 2)
    total = 0
    longest = 0
    for i in range(mask + 1):
        k = table[2 * i]
        if k != EMPTY:
            probes = ((i - _bucket(k, hkey, shift)) & mask) + 1
            total += probes
            longest = max(longest, probes)
    return total, longest


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
def mg_update_weighted(stream, weights, slot_keys, counts, table, hkey, zslots, tpos, meta, scan_rate):
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
    decrement-all steps stay rarer than one per κ/scan_rate records (index lookups: expected O(1)
    over the table's secret hash key ``hkey``, see the module's "Index").
    """
    mask = table.shape[0] // 2 - 1
    shift = _shift_of(table.shape[0] // 2)
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
        b = _position(table, mask, x, hkey, shift)
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
            _delete_at(table, mask, old_bucket, tpos, hkey, shift)
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
