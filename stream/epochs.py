"""What the sketch and cap operators hold per window: arrival epochs applied in canonical order (plain logic).

docs/ALGORITHMS.md §0 "Canonical order": the elements of a window reach its sketches grouped by
**arrival epoch** — the public interval of ``window.epoch_ms`` holding each record's arrival time
(the broker's log-append time in live mode, the record timestamp in a replay). An epoch is applied
once it is complete — every element that arrived in it has been read from every input partition,
which holds once the watermark (the broker's clock, read from the job's clock records) has passed
its end — and, at the window's release, every epoch still held. Epochs are applied in increasing
order; within one, a sketch takes its keys sorted, runs as weighted updates
(:mod:`dphhh.sketches.canonical`), and the unit cap takes each unit's elements sorted by (unit, value,
weight). The result is a function of the input log and the public clock only: a slow subtask,
another parallelism, other batch cuts or partition interleavings change nothing.

A batch for an epoch the clock has already passed can only come from a broker clock that stepped
back (a partition's append times going backwards): the operators apply it at once, on its own,
decided by the clock alone (docs/howto/troubleshoot.md "Known limits"). The operators apply complete epochs at their
event-time timers, never on another element's arrival.

* :class:`SketchWindow` — one (partition, window) of the sketch operator: h sketches, the epochs
  not applied yet, the labels of hashed keys (each key's smallest prefix seen in the window).
* :class:`CapWindow` — one (shard, window) of the cap operator: the unit cap and the epochs not
  applied yet.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dphhh.privacy.unit_cap import UnitCap, unit_sort_keys
from dphhh.sketches.hierarchy import dicts_agree
from dphhh.sketches.misra_gries import MisraGries

__all__ = ["SketchWindow", "CapWindow", "Batch", "AddressBatch", "value_codes", "merge_labels"]


@dataclass
class Batch:
    """One buffered batch: its state entry id (``seq``) and its content, the keys of each level
    (and, for weighted records, each level's weights aligned with them)."""

    seq: int
    keys: list[np.ndarray]
    weights: list[np.ndarray] | None

    def level_keys(self, masks: tuple[int, ...] | None) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        return self.keys, self.weights


@dataclass
class AddressBatch:
    """One buffered batch of IPv4 addresses (``uint32``): every level's key is the address under that
    level's prefix mask, so the batch is held as its addresses, not h key arrays. ``level_bits``
    (partitions > 1): bit l-1 set where the address's level-l key is in this partition (``None``:
    every level's); ``weights``: each address's record weight (int64, clipped), or ``None``."""

    seq: int
    addresses: np.ndarray
    level_bits: np.ndarray | None = None
    weights: np.ndarray | None = None

    def level_keys(self, masks: tuple[int, ...] | None) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
        """The h key arrays (int64) and per-level weights of this batch, as a :class:`Batch` holds them."""
        assert masks is not None, "AddressBatch: a window of IPv4 batches needs the prefix masks"
        keys: list[np.ndarray] = []
        weights: list[np.ndarray] | None = None if self.weights is None else []
        for i, mask in enumerate(masks):
            chosen = slice(None) if self.level_bits is None else (self.level_bits >> np.uint32(i)) & np.uint32(1) == 1
            keys.append((self.addresses[chosen] & np.uint32(mask)).astype(np.int64))
            if weights is not None:
                assert self.weights is not None
                weights.append(self.weights[chosen])
        return keys, weights


def _sorted_addresses(
    groups: list[list[AddressBatch]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The addresses of ``groups`` (epochs, in order) sorted by (epoch, address), with each one's
    epoch index, weight and level bits in the same order.

    IPv4 keys are masked addresses, so one sort orders every level's keys within each epoch: a
    level's runs of equal keys are then consecutive, and :func:`_level_runs` reads them in O(n)."""
    batches = [b for group in groups for b in group]
    addresses = np.concatenate([b.addresses for b in batches]).astype(np.uint64)
    sizes = [sum(b.addresses.size for b in group) for group in groups]
    index = np.repeat(np.arange(len(groups), dtype=np.uint64), sizes)
    combined = (index << np.uint64(32)) | addresses
    weighted = any(b.weights is not None for b in batches)
    masked = any(b.level_bits is not None for b in batches)
    if not weighted and not masked:
        combined.sort()
        return combined & np.uint64(0xFFFFFFFF), combined >> np.uint64(32), None, None
    order = np.argsort(combined)  # any order within a run of equal addresses: only its sum is kept
    weights = None
    if weighted:
        weights = np.concatenate(
            [np.ones(b.addresses.size, dtype=np.int64) if b.weights is None else b.weights for b in batches]
        )[order]
    bits = None
    if masked:
        every = np.uint32(0xFFFFFFFF)
        bits = np.concatenate(
            [
                np.full(b.addresses.size, every, dtype=np.uint32) if b.level_bits is None else b.level_bits
                for b in batches
            ]
        )[order]
    return addresses[order], index[order], weights, bits


def _runs(
    keys: np.ndarray, index: np.ndarray, weights: np.ndarray | None, changed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(key, total weight) of each run of ``keys`` (ordered by epoch, then key); ``changed[i]``:
    whether element i + 1 starts a new run (another key or another epoch)."""
    starts = np.concatenate((np.zeros(1, dtype=np.int64), np.flatnonzero(changed) + 1))
    if weights is None:
        totals = np.diff(np.append(starts, keys.size)).astype(np.int64)
    else:
        totals = np.add.reduceat(weights, starts).astype(np.int64)  # exact int64 sums
    return keys[starts].astype(np.int64), totals


def _level_runs(
    ordered: np.ndarray,
    index: np.ndarray,
    weights: np.ndarray | None,
    bits: np.ndarray | None,
    level: int,
    mask: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The canonical runs of level ``level + 1`` over the epochs :func:`_sorted_addresses` sorted:
    epoch by epoch, each epoch's distinct keys ascending with their total weight — exactly
    :func:`dphhh.sketches.canonical.canonical_runs` of each epoch's keys, one epoch after the other (a
    sketch updated with these runs in one call is the sketch updated epoch by epoch)."""
    if bits is not None:
        chosen = (bits >> np.uint32(level)) & np.uint32(1) == 1
        ordered, index = ordered[chosen], index[chosen]
        weights = None if weights is None else weights[chosen]
    if not ordered.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    keys = ordered & np.uint64(mask)
    return _runs(keys, index, weights, (keys[1:] != keys[:-1]) | (index[1:] != index[:-1]))


#: Up to this many epochs in one update, _key_runs sorts each epoch's keys on its own (a Python
#: step each); more (a replay of many small epochs) take one lexsort.
_FEW_EPOCHS = 64


def _key_runs(
    batches: list[tuple[int, np.ndarray, np.ndarray | None]],
) -> tuple[np.ndarray, np.ndarray]:
    """The canonical runs of one level over several epochs: ``batches`` are (epoch index, keys,
    weights or None) — the same runs as :func:`dphhh.sketches.canonical.canonical_runs` epoch by epoch."""
    keys = np.concatenate([np.asarray(k, dtype=np.int64) for _, k, _ in batches]) if batches else np.zeros(0)
    if not keys.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    epochs = np.array([i for i, _, _ in batches], dtype=np.int64)
    index = np.repeat(epochs, [len(k) for _, k, _ in batches])
    weights = None
    if any(w is not None for _, _, w in batches):
        order = np.lexsort((keys, index))
        keys, index = keys[order], index[order]
        weights = np.concatenate(
            [np.ones(len(k), dtype=np.int64) if w is None else np.asarray(w, dtype=np.int64) for _, k, w in batches]
        )[order]
    elif np.all(epochs[1:] >= epochs[:-1]) and len(bounds := np.flatnonzero(index[1:] != index[:-1])) < _FEW_EPOCHS:
        # epochs in order (as _apply gives them) and few: each one's keys sorted where they lie is
        # the order of the lexsort by (epoch, key), a plain sort each (of views), several times faster
        for part in np.split(keys, bounds + 1):
            part.sort()
    else:
        order = np.lexsort((keys, index))
        keys, index = keys[order], index[order]
    return _runs(keys, index, weights, (keys[1:] != keys[:-1]) | (index[1:] != index[:-1]))


_POOL: ThreadPoolExecutor | None = None


def _level_pool(levels: int) -> ThreadPoolExecutor | None:
    """The process's thread pool for per-level sketch work (None when one thread is all there is)."""
    global _POOL
    cores = os.cpu_count() or 1
    if min(levels, cores) < 2:
        return None
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=min(cores, 8), thread_name_prefix="dphhh-levels")
    return _POOL


def merge_labels(table: dict[int, dict[int, Any]], named: dict[int, dict[int, Any]]) -> None:
    """Fold ``{level: {key: label}}`` into ``table``, keeping each key's smallest label (a key two
    prefixes share by a chance collision is labelled the same whatever the order: docs/ALGORITHMS.md §1)."""
    for level, found in named.items():
        known = table.setdefault(int(level), {})
        if dicts_agree(known, found):  # no key labelled two ways: the same as the loop below
            known.update(found)
            continue
        for key, label in found.items():
            held = known.get(key)
            if held is None or label < held:
                known[key] = label


@dataclass
class SketchWindow:
    """The h sketches of one (partition, window) and the epochs not applied to them yet."""

    h: int
    counters: int
    prefix_masks: tuple[int, ...] | None = None  # IPv4: each level's network mask (address batches)
    sketches: list[MisraGries] | None = None
    pending: dict[int, list[Batch | AddressBatch]] = field(default_factory=dict)
    applied_through: int | None = None  # the newest epoch applied
    labels: dict[int, dict[int, Any]] = field(default_factory=dict)
    label_seqs: list[int] = field(default_factory=list)

    def _sketches(self) -> list[MisraGries]:
        if self.sketches is None:
            self.sketches = [MisraGries(self.counters) for _ in range(self.h)]
        return self.sketches

    def add(self, epoch: int, batch: Batch | AddressBatch) -> bool:
        """Buffer ``batch`` of ``epoch``; False (nothing buffered) if that epoch was applied already —
        the caller applies it at once with :meth:`apply_now`."""
        if self.applied_through is not None and epoch <= self.applied_through:
            return False
        self.pending.setdefault(epoch, []).append(batch)
        return True

    def apply_now(self, batch: Batch | AddressBatch) -> None:
        """Apply one late batch on its own (a broker clock that stepped back; see the module docstring)."""
        self._apply([[batch]])

    def _apply(self, groups: list[list[Batch | AddressBatch]]) -> None:
        """Apply ``groups`` (each an epoch's batches) in order, each in the canonical order.

        Each level's canonical runs over all the groups are computed at once (one sort: by epoch,
        then key) and given to its sketch in one update — the same sketch as one epoch after the
        other, since a sketch updated with runs A then B is the sketch updated with A followed by B;
        many small epochs (a replay reading a log much faster than it was written) then cost one
        call, not one each. IPv4 address batches are sorted once for every level
        (:func:`_sorted_addresses`). The h levels' sketches are independent, so each level runs on
        its own thread (numpy's sort and the Misra-Gries kernels release the GIL)."""
        sketches = self._sketches()
        pool = _level_pool(len(sketches))
        masks = self.prefix_masks
        addressed = [[b for b in batches if isinstance(b, AddressBatch)] for batches in groups]
        if masks is not None and all(len(a) == len(g) for a, g in zip(addressed, groups)):
            ordered, index, weights, bits = _sorted_addresses(addressed)

            def level(i: int) -> None:
                uniq, totals = _level_runs(ordered, index, weights, bits, i, masks[i])
                if uniq.size:
                    sketches[i].update(uniq, totals)

        else:
            unpacked = [(e, b.level_keys(masks)) for e, batches in enumerate(groups) for b in batches]

            def level(i: int) -> None:
                uniq, totals = _key_runs([(e, keys[i], None if w is None else w[i]) for e, (keys, w) in unpacked])
                if uniq.size:
                    sketches[i].update(uniq, totals)

        if pool is None:
            for i in range(len(sketches)):
                level(i)
        else:
            # deepest level first: it holds the most distinct keys, so the two costliest run side by side
            list(pool.map(level, range(len(sketches) - 1, -1, -1)))  # re-raises a level's error here

    def due(self, watermark: int, epoch_ms: int) -> list[int]:
        """The buffered epochs that are complete at ``watermark`` (their end at or before it), ascending."""
        return sorted(e for e in self.pending if e + epoch_ms <= watermark)

    def apply(self, epochs: list[int]) -> list[int]:
        """Apply ``epochs`` (ascending, buffered) in order; returns the state entry ids they held."""
        ordered = sorted(epochs)
        groups = [self.pending.pop(epoch) for epoch in ordered]
        if groups:
            self._apply(groups)
            newest = ordered[-1]
            self.applied_through = newest if self.applied_through is None else max(self.applied_through, newest)
        return [b.seq for batches in groups for b in batches]

    def apply_all(self) -> list[int]:
        """Apply every buffered epoch (the window's release); returns their state entry ids."""
        return self.apply(sorted(self.pending))

    def final(self) -> list[MisraGries]:
        """The window's sketches after every epoch (empty sketches for a window that saw nothing)."""
        self.apply_all()
        return self._sketches()

    def labels_to_prune(self) -> bool:
        """Whether the label table has grown past twice what the sketches can hold (2·κ·h): then
        :meth:`prune_labels` bounds it (a flood of distinct hashed keys must not grow a window's
        memory and checkpoints with the window: docs/ALGORITHMS.md §0.1 h)."""
        return sum(map(len, self.labels.values())) > 2 * self.counters * self.h

    def prune_labels(self) -> None:
        """Keep only the labels of keys a sketch holds or a buffered batch carries: a key evicted
        from its sketch comes back only with a later batch, which carries its label again. (Labels
        are each key's prefix; only a chance collision of the keyed hash could make two differ, an
        event charged to δ, docs/calibration.md §8.)"""
        sketches = self._sketches()
        for level, table in list(self.labels.items()):
            held = set(sketches[level - 1].counters())
            for batches in self.pending.values():
                for batch in batches:
                    keys, _ = batch.level_keys(self.prefix_masks)
                    held.update(keys[level - 1].tolist())
            self.labels[level] = {k: v for k, v in table.items() if k in held}

    def seqs(self) -> Iterator[int]:
        """Every state entry id this window holds (buffered batches and labels)."""
        for batches in self.pending.values():
            yield from (b.seq for b in batches)
        yield from self.label_seqs


def value_codes(values: Any) -> np.ndarray:
    """A uint64 code per value that orders values canonically: the address (IPv4), or
    ``first << 32 | second`` for a (first, second) pair of IPv4 addresses."""
    if isinstance(values, tuple):
        first, second = (np.asarray(v, dtype=np.uint64) for v in values)
        return (first << np.uint64(32)) | second
    return np.asarray(values, dtype=np.uint64)


def _unit_keys(units: Any) -> np.ndarray:
    """A batch's unit keys as an array: 128-bit keys (:data:`dphhh.privacy.unit_cap.UNIT_KEY_DTYPE`) as
    they are, addresses as uint64."""
    arr = np.asarray(units)
    return arr if arr.dtype.names else arr.astype(np.uint64, copy=False)


@dataclass
class CapWindow:
    """The unit cap of one (shard, window) and the epochs not applied to it yet.

    Each buffered entry is (seq, units, values, weights); :meth:`apply` returns, per applied epoch,
    the kept values (and weights) in canonical order, and the unit counts that changed."""

    cap: UnitCap
    pending: dict[int, list[tuple[int, np.ndarray, Any, np.ndarray | None]]] = field(default_factory=dict)
    applied_through: int | None = None

    def add(self, epoch: int, seq: int, units: np.ndarray, values: Any, weights: np.ndarray | None) -> bool:
        """Buffer one batch of ``epoch``; False if that epoch was applied already (apply at once)."""
        if self.applied_through is not None and epoch <= self.applied_through:
            return False
        self.pending.setdefault(epoch, []).append((seq, units, values, weights))
        return True

    def due(self, watermark: int, epoch_ms: int) -> list[int]:
        return sorted(e for e in self.pending if e + epoch_ms <= watermark)

    def apply_group(
        self, entries: list[tuple[int, np.ndarray, Any, np.ndarray | None]]
    ) -> tuple[Any, np.ndarray | None, np.ndarray, np.ndarray]:
        """Cap one group in canonical order: (kept values, their weights or None, touched units,
        their kept counts after the group)."""
        units = np.concatenate([_unit_keys(e[1]) for e in entries])
        pairs = isinstance(entries[0][2], tuple)
        if pairs:
            values: Any = tuple(np.concatenate([np.asarray(e[2][i]) for e in entries]) for i in range(2))
        else:
            values = np.concatenate([np.asarray(e[2]) for e in entries])
        weighted = entries[0][3] is not None
        weights = np.concatenate([np.asarray(e[3], dtype=np.int64) for e in entries]) if weighted else None
        codes = value_codes(values)
        by_unit = unit_sort_keys(units)  # (unit, value, weight): 128-bit units by (high, low) word
        order = np.lexsort((weights, codes, *by_unit) if weights is not None else (codes, *by_unit))
        units = units[order]
        values = tuple(v[order] for v in values) if pairs else values[order]
        weights = None if weights is None else weights[order]
        keep = self.cap.keep(units)
        touched = np.unique(units)
        kept_values = tuple(v[keep] for v in values) if pairs else values[keep]
        return kept_values, None if weights is None else weights[keep], touched, self.cap.counts_of(touched)

    def apply(
        self, epochs: list[int]
    ) -> Iterator[tuple[int, list[int], Any, np.ndarray | None, np.ndarray, np.ndarray]]:
        """Per epoch (ascending): (epoch, its state entry ids, kept values, weights, touched units, counts)."""
        for epoch in sorted(epochs):
            entries = self.pending.pop(epoch)
            kept, weights, touched, counts = self.apply_group(entries)
            self.applied_through = epoch if self.applied_through is None else max(self.applied_through, epoch)
            yield epoch, [e[0] for e in entries], kept, weights, touched, counts

    def seqs(self) -> Iterator[int]:
        for entries in self.pending.values():
            yield from (e[0] for e in entries)
