"""The canonical order, in process (docs/ALGORITHMS.md §0 "Canonical order"; stream/epochs.py).

The same input log — two input partitions, timestamped messages — goes through two decode subtasks
(the real ``DecodeOperator``, subtask 0 and 1) into the sketch operator (and, at user level, the cap
operator) with different batch cuts, different interleavings of the two subtasks' outputs at the
next operator, and — live — the watermark reaching the sketches at different moments (always after
everything that arrived before it, as Flink's channels guarantee). Every run must dump
byte-identical sketches, equal to the plain oracle: per window, epoch by epoch, the epoch's unit
elements sorted and inserted one at a time. Before this order the sketches followed the
interleaving: the run comparison fails for the old arrival-order rule (``test_the_old_rule_…``).
"""

from __future__ import annotations

from operator import itemgetter
from pathlib import Path

import numpy as np
import pytest
from pyflink.common import Types

from dphhh.sketches.misra_gries import MisraGries
from dphhh.stream.clock import TICK
from dphhh.stream.config import load_config
from dphhh.stream.message_batch import pack_batch
from dphhh.stream.operators import CapOperator, DecodeOperator, SketchOperator
from tests.harness import KeyedHarness, ProcessHarness

W = 1000  # window (ms)
ORIGIN = 1_700_000_000_000
RAW = Types.PRIMITIVE_ARRAY(Types.BYTE())
TO_SKETCH = Types.TUPLE([Types.INT(), Types.LONG(), Types.LONG(), RAW, RAW])
RELEASES = Types.TUPLE([Types.LONG(), RAW])


def _cfg(tmp: Path, *more: str, mode: str = "replay"):
    return load_config(
        None,
        environ={},
        overrides=[
            f"window.mode={mode}",
            f"window.size_ms={W}",
            f"window.origin={ORIGIN}",
            f"window.until={ORIGIN + 3 * W}",
            "window.epoch_ms=100",
            "privacy.epsilon=10",
            "privacy.counters=16",  # far fewer counters than keys: the sketch depends on its order
            "privacy.partitions=2",
            "privacy.seed=3",
            "flink.parallelism=2",
            f"output.ledger_dir={tmp / 'ledger'}",
            "output.reports_file=",
            f"testing.debug_sketch_dir={tmp / 'sketches'}",
            *more,
        ],
    )


def _log(rng: np.random.Generator, pairs: bool) -> list[list[tuple[int, bytes]]]:
    """Per input partition, (arrival ms, message) in log order: heavy-tailed addresses over 3 windows."""
    parts: list[list[tuple[int, bytes]]] = [[], []]
    pool = rng.integers(0, 2**32, 300, dtype=np.uint64).astype(np.uint32)
    for p in (0, 1):
        t = ORIGIN
        for _ in range(60):
            t += int(rng.integers(0, 50))
            n = int(rng.integers(1, 40))
            addrs = pool[np.minimum(rng.zipf(1.3, n), 300) - 1]
            if pairs:
                units = rng.integers(0, 20, n).astype(np.uint32)
                words = np.stack([units, addrs], axis=1).astype(">u4").tobytes()
            else:
                words = addrs.astype(">u4").tobytes()
            parts[p].append((t, words))
    return parts


def _run(tmp: Path, cfg, parts, *, batch: int, seed: int, slow: int | None = None) -> dict[str, bytes]:
    """One run: partition p's messages decoded by subtask p in batches of ``batch`` messages; the
    subtasks' outputs reach the next operator interleaved at random (FIFO per subtask; ``slow``: that
    subtask's output held back as long as possible); live, the watermark advanced at random moments
    to a time every record before which has been delivered. Returns the dumped sketches' bytes."""
    rng = np.random.default_rng(seed)
    values = {s: dict(v) for s, v in cfg.values.items()}
    decoders = [
        ProcessHarness(DecodeOperator(values, ORIGIN), output_type=TO_SKETCH, subtask=i, parallelism=2).open()
        for i in (0, 1)
    ]
    user = cfg.unit.kind == "user"
    cap = (
        KeyedHarness(CapOperator(values, ORIGIN), itemgetter(0), key_type=Types.INT(), output_type=TO_SKETCH).open()
        if user
        else None
    )
    sketch = KeyedHarness(
        SketchOperator(values, ORIGIN), itemgetter(0), key_type=Types.INT(), output_type=RELEASES
    ).open()
    queues: list[list[tuple[int, tuple]]] = [[], []]  # (arrival of the batch's first message, record)
    for p in (0, 1):
        msgs = parts[p]
        for i in range(0, len(msgs), batch):
            chunk = msgs[i : i + batch]
            out = decoders[p].process(pack_batch([t for t, _ in chunk], [m for _, m in chunk]))
            queues[p] += [(chunk[0][0], r) for r in out]
    live = cfg.mode == "live"
    next_op = cap if user else sketch

    def deliver(record) -> None:
        outs = next_op.process(record)
        if user:
            for r in outs:
                sketch.process(r)

    def advance(wm: int) -> None:
        if live and wm < 2**63 - 1:  # the clock records the subtasks read: ticks arm every window
            for d in decoders:
                d.advance_watermark(wm)
                for r in d.process(pack_batch([wm], [TICK])):
                    deliver(r)
        if user:
            for r in cap.advance_watermark(wm):
                sketch.process(r)
        sketch.advance_watermark(wm)

    while queues[0] or queues[1]:
        ready = [p for p in (0, 1) if queues[p]]
        if slow is not None and len(ready) == 2:
            ready = [1 - slow]
        p = ready[int(rng.integers(0, len(ready)))]
        deliver(queues[p].pop(0)[1])
        if live and rng.random() < 0.3:
            # every record with an arrival before wm has been delivered (the channels' FIFO order)
            pending = [q[0][0] for q in queues if q] or [ORIGIN + 3 * W + 500]
            wm = min(min(pending) - 1, ORIGIN + 3 * W - 1)
            if wm > ORIGIN:
                advance(wm)
    if live:
        advance(ORIGIN + 2 * W + 500)  # the clock in the last window: its tick arms it
    advance(2**63 - 1 if not live else ORIGIN + 4 * W)
    files = sorted((tmp / "sketches").glob("*.bin"))
    return {f.name: f.read_bytes() for f in files}


def _oracle(cfg, parts, name: str) -> MisraGries:
    """The dumped sketch ``name`` (window-W-sketch-S.bin) by the canonical order written out plainly."""
    window, sid = (int(x) for x in name.removesuffix(".bin").removeprefix("window-").split("-sketch-"))
    level, part = sid // cfg.params.partitions + 1, sid % cfg.params.partitions
    from dphhh.sketches.partition import partition_of

    by_epoch: dict[int, list[int]] = {}
    for p in (0, 1):
        for t, words in parts[p]:
            if t - t % W != window:
                continue
            addrs = np.frombuffer(words, dtype=">u4").astype(np.uint32)
            keys = cfg.hierarchy.keys(addrs, level)
            mine = partition_of(cfg.hierarchy, keys, level, cfg.params.partitions) == part
            by_epoch.setdefault(t - t % 100, []).extend(keys[mine].tolist())
    mg = MisraGries(cfg.params.counters)
    for epoch in sorted(by_epoch):
        mg.update(np.sort(np.array(by_epoch[epoch], dtype=np.int64)))
    return mg


@pytest.mark.parametrize("mode", ["replay", "live"])
def test_the_same_log_gives_byte_identical_sketches_whatever_the_timing(tmp_path: Path, mode: str) -> None:
    parts = _log(np.random.default_rng(1), pairs=False)
    runs = []
    for i, (batch, seed, slow) in enumerate([(1, 1, None), (7, 2, None), (64, 3, 1), (3, 4, 0)]):
        tmp = tmp_path / f"run{i}"
        cfg = _cfg(tmp, mode=mode)
        runs.append(_run(tmp, cfg, parts, batch=batch, seed=seed, slow=slow))
    assert len(runs[0]) == 3 * 4 * 2  # every (window, level, partition) released, and dumped
    assert all(r == runs[0] for r in runs[1:])
    cfg = _cfg(tmp_path / "run0", mode=mode)
    for name, data in runs[0].items():
        assert MisraGries.from_bytes(data) == _oracle(cfg, parts, name), name
    assert max(len(MisraGries.from_bytes(d).counters()) for d in runs[0].values()) == 16  # κ full: order matters


def test_the_cap_keeps_the_same_elements_whatever_the_timing(tmp_path: Path) -> None:
    """User level (unit = the first address of each pair, cap 2): the same sketches in every run."""
    parts = _log(np.random.default_rng(2), pairs=True)
    runs = []
    for i, (batch, seed, slow) in enumerate([(1, 5, None), (16, 6, 0), (5, 7, 1)]):
        tmp = tmp_path / f"run{i}"
        cfg = _cfg(
            tmp,
            "input.format=packed-ipv4-pairs",
            "privacy.unit_key=source-ipv4",
            "privacy.unit_cap=2",
            "privacy.epsilon=200",
            mode="live",
        )
        runs.append(_run(tmp, cfg, parts, batch=batch, seed=seed, slow=slow))
    assert len(runs[0]) == 24 and all(r == runs[0] for r in runs[1:])
    totals = [MisraGries.from_bytes(d).total for n, d in runs[0].items() if n.endswith(("-0.bin", "-1.bin"))]
    assert 0 < sum(totals) <= 20 * 2 * 3  # at most 2 per unit (20 units) per window


def test_the_old_rule_arrival_order_is_not_canonical() -> None:
    """The control: sketching each window's keys in delivery order (the old rule) gives different
    sketches for two interleavings of the same log — what the canonical order removes."""
    parts = _log(np.random.default_rng(1), pairs=False)
    cfg = load_config(None, environ={}, overrides=["privacy.counters=16"])
    rng = np.random.default_rng(0)
    orders = []
    for _ in range(2):
        merged, queues = [], [list(parts[0]), list(parts[1])]
        while queues[0] or queues[1]:
            ready = [p for p in (0, 1) if queues[p]]
            merged.append(queues[ready[int(rng.integers(0, len(ready)))]].pop(0))
        mg = MisraGries(16)
        for t, words in merged:
            if t - t % W == ORIGIN:
                mg.update(cfg.hierarchy.keys(np.frombuffer(words, dtype=">u4").astype(np.uint32), 4))
        orders.append(mg)
    assert orders[0] != orders[1]
