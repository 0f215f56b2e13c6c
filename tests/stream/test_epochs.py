"""IPv4 address batches in the sketch windows (stream/epochs.py, docs/ALGORITHMS.md §0 "Canonical order").

An IPv4 payload is buffered as its addresses (:class:`dphhh.stream.epochs.AddressBatch`) and an epoch is
sorted once for every level. The sketches must be byte-identical to the per-level path (each
level's keys computed by the hierarchy, sorted, runs as weighted updates), for every payload kind:
P = 1 or a level mask per address (P > 1), unweighted or weighted, one batch or several per epoch.
"""

from __future__ import annotations

import numpy as np
import pytest

from dphhh.sketches.canonical import apply_canonical
from dphhh.sketches.hierarchy import IPv4Hierarchy
from dphhh.sketches.misra_gries import MisraGries
from dphhh.stream import epochs
from dphhh.stream.epochs import AddressBatch, Batch, SketchWindow

HIERARCHY = IPv4Hierarchy((8, 16, 24, 32))
MASKS = tuple(HIERARCHY.mask(level) for level in range(1, HIERARCHY.h + 1))


def _batches(rng: np.random.Generator, masked: bool, weighted: bool) -> list[tuple[int, AddressBatch]]:
    """(epoch, batch) in arrival order: heavy-tailed addresses over 6 epochs, 1-4 batches each."""
    out = []
    seq = 0
    for epoch in range(6):
        for _ in range(int(rng.integers(1, 5))):
            n = int(rng.integers(0, 400))
            heavy = rng.integers(0, 40, size=n).astype(np.uint32) << np.uint32(20)  # few /8../16 prefixes
            addresses = (heavy | rng.integers(0, 1 << 12, size=n).astype(np.uint32)) ^ np.uint32(0x0A000000)
            bits = rng.integers(0, 16, size=n).astype(np.uint32) if masked else None
            weights = rng.integers(1, 9, size=n).astype(np.int64) if weighted else None
            out.append((epoch * 100, AddressBatch(seq, addresses, bits, weights)))
            seq += 1
    return out


def _as_keys(batch: AddressBatch) -> Batch:
    """The same batch as per-level keys, computed by the hierarchy (the generic path)."""
    keys, weights = [], None if batch.weights is None else []
    for level in range(1, HIERARCHY.h + 1):
        mine = slice(None) if batch.level_bits is None else (batch.level_bits >> (level - 1)) & 1 == 1
        keys.append(HIERARCHY.keys(batch.addresses[mine], level))
        if weights is not None:
            assert batch.weights is not None
            weights.append(batch.weights[mine])
    return Batch(batch.seq, keys, weights)


def _epoch_by_epoch(batches: list[tuple[int, AddressBatch]]) -> list[MisraGries]:
    """The reference: each epoch on its own, its keys of each level computed by the hierarchy and
    inserted by :func:`dphhh.sketches.canonical.apply_canonical`, epochs in increasing order."""
    sketches = [MisraGries(8) for _ in range(HIERARCHY.h)]
    for epoch in sorted({e for e, _ in batches}):
        mine = [_as_keys(b) for e, b in batches if e == epoch]
        for i, sketch in enumerate(sketches):
            weighted = any(b.weights is not None for b in mine)
            apply_canonical(sketch, [b.keys[i] for b in mine], [b.weights[i] for b in mine] if weighted else None)  # type: ignore[index]
    return sketches


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("few_epochs", [64, 1])
def test_address_batches_give_the_per_level_path_s_sketches(
    masked: bool, weighted: bool, few_epochs: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both ways the key batches' runs are sorted (each epoch on its own while they are few, one
    lexsort past ``_FEW_EPOCHS``) agree with the address path and with epoch-by-epoch updates."""
    monkeypatch.setattr(epochs, "_FEW_EPOCHS", few_epochs)
    for seed in range(6):
        rng = np.random.default_rng(seed)
        batches = _batches(rng, masked, weighted)
        fast = SketchWindow(HIERARCHY.h, 8, prefix_masks=MASKS)
        slow = SketchWindow(HIERARCHY.h, 8)
        for epoch, batch in batches:
            assert fast.add(epoch, batch) and slow.add(epoch, _as_keys(batch))
        # half the epochs applied early (as a watermark would), the rest at the release
        assert fast.apply([0, 100, 200]) == slow.apply([0, 100, 200])
        got, want = fast.final(), slow.final()
        assert [s.to_bytes() for s in got] == [s.to_bytes() for s in want]
        assert [s.to_bytes() for s in got] == [s.to_bytes() for s in _epoch_by_epoch(batches)]
        assert sum(s.total for s in got) > 0  # the runs reached the sketches
        assert any(s.decrements for s in got)  # 8 counters: the order mattered


def test_a_window_mixing_address_and_key_batches_uses_the_per_level_path() -> None:
    """A batch of keys in a window of address batches (the warm-up's) is applied alike."""
    rng = np.random.default_rng(7)
    batches = _batches(rng, True, True)
    mixed = SketchWindow(HIERARCHY.h, 8, prefix_masks=MASKS)
    slow = SketchWindow(HIERARCHY.h, 8)
    for i, (epoch, batch) in enumerate(batches):
        mixed.add(epoch, batch if i % 2 else _as_keys(batch))
        slow.add(epoch, _as_keys(batch))
    assert [s.to_bytes() for s in mixed.final()] == [s.to_bytes() for s in slow.final()]


def test_label_tables_stay_bounded_by_what_the_sketches_hold() -> None:
    """Labels of hashed keys (paths, pairs) are kept for the keys a sketch holds and those of batches
    not applied yet: a flood of distinct keys over a window keeps them below 2·κ·h plus one batch,
    and every key of the final sketches still has its label."""
    from dphhh.stream.epochs import merge_labels

    rng = np.random.default_rng(3)
    pruned, kept = SketchWindow(2, 4), SketchWindow(2, 4)
    for epoch in range(60):
        levels = [rng.integers(0, 10**9, 100).astype(np.int64) for _ in range(2)]
        levels[0][:30] = 7  # a heavy key the sketch keeps
        named = {lv: {int(k): f"prefix-{lv}-{k}" for k in keys} for lv, keys in enumerate(levels, start=1)}
        for sw in (pruned, kept):
            merge_labels(sw.labels, named)
            sw.add(epoch, Batch(epoch, [k.copy() for k in levels], None))
            sw.apply([epoch])
        if pruned.labels_to_prune():
            pruned.prune_labels()
        assert sum(map(len, pruned.labels.values())) <= 2 * 4 * 2 + 200
    assert sum(map(len, kept.labels.values())) > 10_000  # without pruning the table follows the window
    for level, sketch in enumerate(pruned.final(), start=1):
        assert sketch.to_bytes() == kept.final()[level - 1].to_bytes()
        for key in sketch.counters():
            assert pruned.labels[level][key] == kept.labels[level][key] == f"prefix-{level}-{key}"
    assert 7 in pruned.labels[1]
