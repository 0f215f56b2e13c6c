"""The stream job's operators, unmodified, in process (tests/harness.py): no JVM, no broker, no job.

Decode → (cap →) sketch → release on small streams, with PyFlink's runtime faked around them:
every window of the public schedule gets exactly one report when the watermark passes its release
time (empty windows included), a heavy planted /24 is reported, the streamed reports equal an
offline computation with the same seeded noise, state is dropped at release, released windows take
no more elements, ticks re-arm timers a checkpoint lost, a unit contributes at most its cap, flow
weights are clipped at W, and a restored release operator republishes the ledger's bytes. Sketches
are compared with an oracle of the canonical order written out plainly (docs/ALGORITHMS.md §0
"Canonical order"): epoch by epoch, the epoch's unit elements sorted, inserted one by one.
What only a real job can show (JVM/Python serialisation, checkpoints, Kafka) is in tests/e2e.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import pickle
from operator import itemgetter
from pathlib import Path

import numpy as np
import pytest
from pyflink.common import Types
from pyflink.datastream import KeyedProcessFunction

from dphhh.connectors.skips import SkipCounter
from dphhh.privacy.unit_cap import unit_keys_of
from dphhh.privacy.window import release_sketch
from dphhh.sketches.misra_gries import MisraGries, clip_weights
from dphhh.stream.assembler import WindowAssembler, noise_source_factory
from dphhh.stream.batch import Weighting, read_all_records
from dphhh.stream.clock import TICK
from dphhh.stream.config import load_config
from dphhh.stream.ledger import ReleaseLedger, job_key_secret
from dphhh.stream.message_batch import pack_batch
from dphhh.stream.metrics_catalog import OPERATOR_COUNTERS
from dphhh.stream.operators import (
    MAX_WATERMARK,
    START,
    STEP_IDS,
    TICK_WINDOW,
    CapOperator,
    DecodeOperator,
    ReleaseOperator,
    SketchOperator,
)
from dphhh.stream.wire import sketch_payloads, unit_payloads, unpack_unit_payload, unstamp
from tests.harness import MIN_WATERMARK, Chain, KeyedHarness, ProcessHarness

W = 10_000  # window size (ms)
ORIGIN = 1_700_000_000_000  # the schedule's origin (a window boundary)
RAW = Types.PRIMITIVE_ARRAY(Types.BYTE())
TO_SKETCH = Types.TUPLE([Types.INT(), Types.LONG(), Types.LONG(), RAW, RAW])  # the job's declared types (stream.job)
RELEASES = Types.TUPLE([Types.LONG(), RAW])
DEAD = STEP_IDS["dead_letter"]
HEAVY_24 = 0x0A010200  # 10.1.2.0/24


@pytest.fixture(autouse=True)
def _no_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here runs without a JVM: starting PyFlink's gateway fails the test."""
    from pyflink import java_gateway

    def refuse(*args, **kwargs):
        raise AssertionError("an in-process operator test tried to start PyFlink's JVM gateway")

    monkeypatch.setattr(java_gateway, "_gateway", None)
    monkeypatch.setattr(java_gateway, "launch_gateway", refuse)


def _cfg(tmp_path: Path, *overrides: str, mode: str = "replay", windows: int = 3):
    return load_config(
        None,
        environ={},
        overrides=[
            f"window.mode={mode}",
            f"window.size_ms={W}",
            f"window.origin={ORIGIN}",
            f"window.until={ORIGIN + windows * W}",
            "privacy.epsilon=50",
            "privacy.tau=500",
            "privacy.seed=7",  # seeded: reproducible, NOT private
            f"output.ledger_dir={tmp_path / 'ledger'}",
            f"output.reports_file={tmp_path / 'reports.jsonl'}",
            f"testing.debug_sketch_dir={tmp_path / 'sketches'}",  # NON-PRIVATE dumps at release (seeded only)
            *overrides,
        ],
    )


def _canonical(groups, kappa: int) -> MisraGries:
    """The oracle of the canonical order: for each group (epoch) in the order given, its unit elements
    sorted and inserted one by one (a weighted key as that many unit inserts). ``groups``: key arrays,
    or (keys, weights) pairs."""
    mg = MisraGries(kappa)
    for group in groups:
        keys, weights = group if isinstance(group, tuple) else (group, None)
        units = np.asarray(keys, dtype=np.int64) if weights is None else np.repeat(keys, weights)
        mg.update(np.sort(units))
    return mg


def _dumped(tmp_path: Path) -> dict[tuple[int, int], MisraGries]:
    """(window, sketch id) → the sketch a release dumped (testing.debug_sketch_dir)."""
    out = {}
    for path in (tmp_path / "sketches").glob("window-*-sketch-*.bin"):
        window, sid = (int(x) for x in path.stem.removeprefix("window-").split("-sketch-"))
        out[(window, sid)] = MisraGries.from_bytes(path.read_bytes())
    return out


def _values(cfg) -> dict:
    return {s: dict(v) for s, v in cfg.values.items()}


def _decode(cfg) -> ProcessHarness:
    return ProcessHarness(DecodeOperator(_values(cfg), ORIGIN), output_type=TO_SKETCH)


def _cap(cfg, **kw) -> KeyedHarness:
    return KeyedHarness(
        CapOperator(_values(cfg), ORIGIN), itemgetter(0), key_type=Types.INT(), output_type=TO_SKETCH, **kw
    )


def _sketch(cfg, **kw) -> KeyedHarness:
    return KeyedHarness(
        SketchOperator(_values(cfg), ORIGIN), itemgetter(0), key_type=Types.INT(), output_type=RELEASES, **kw
    )


def _release(cfg, tmp_path: Path, **kw) -> KeyedHarness:
    return KeyedHarness(
        ReleaseOperator(_values(cfg), ORIGIN, str(tmp_path / "run"), None),
        lambda r: 0,
        key_type=Types.INT(),
        output_type=RAW,
        **kw,
    )


def _pipeline(cfg, tmp_path: Path) -> Chain:
    """The job's line (stream.job.build_pipeline), opened, with its one start record sent."""
    stages = [_decode(cfg), *([_cap(cfg)] if cfg.unit.kind == "user" else []), _sketch(cfg), _release(cfg, tmp_path)]
    chain = Chain(*stages).open()
    chain.send((START, b""), at=len(stages) - 1)
    return chain


def _reports(outputs: list[bytes]) -> list[tuple[int | None, dict]]:
    return [(ts, json.loads(report)) for ts, report in map(unstamp, outputs)]


def _packed(addrs: np.ndarray, per_message: int = 500) -> list[bytes]:
    be = np.asarray(addrs, dtype=np.uint32).astype(">u4")
    return [be[i : i + per_message].tobytes() for i in range(0, be.size, per_message)]


def _heavy_window(rng: np.random.Generator) -> np.ndarray:
    """3,000 elements spread over the 256 addresses of 10.1.2.0/24 (none heavy alone) and 2,000 others."""
    heavy = np.uint32(HEAVY_24) + rng.integers(0, 256, 3000).astype(np.uint32)
    others = rng.integers(0, 2**32, 2000, dtype=np.uint64).astype(np.uint32)
    return rng.permutation(np.concatenate([heavy, others])).astype(np.uint32)


def _heavy_paths(values: np.ndarray) -> list[bytes]:
    """One 3-level path per value: a few heavy paths among many distinct ones."""
    return [f"c{v % 3}/r{v % 5 if v % 4 else v % 997}/s{v % 7 if v % 3 else v}".encode() for v in values.tolist()]


def _assert_metrics_catalogued(*harnesses: ProcessHarness) -> None:
    """Every counter an operator created is in the exported catalogue (stream.metrics_catalog)."""
    for h in harnesses:
        for name in h.metrics():
            group, step, counter = name.split(".")
            assert group == "dphhh" and counter in OPERATOR_COUNTERS.get(step, ()), name


def _offline_report(cfg, tmp_path: Path, window: int, values: np.ndarray) -> bytes:
    """The window's report computed without the stream operators: one sketch per level over the
    window's values (one arrival epoch) in canonical order, every level released (empty ones too)
    with the same seeded noise, assembled by a new assembler."""
    hierarchy, params = cfg.hierarchy, cfg.params
    noise = noise_source_factory(cfg.seed)
    releases = []
    for level in range(1, hierarchy.h + 1):
        mg = _canonical([hierarchy.keys(values, level)], params.counters)
        releases.append(
            release_sketch(level, 0, mg.counters(), mg.total, params=params, h=hierarchy.h, rng=noise(window, level, 0))
        )
    asm = WindowAssembler(
        hierarchy,
        params,
        cfg.schedule(ORIGIN),
        ReleaseLedger(tmp_path / "offline"),
        seed=cfg.seed,
        unit=cfg.unit,
        budget=cfg.budget,
        guard=cfg.guard,
    )
    return asm.report(window, releases)[0]


def test_replay_releases_every_window_once_at_end_of_input_as_the_offline_path_would(tmp_path: Path) -> None:
    """A 3-window replay with data in windows 0 and 2: nothing is released before end of input; then
    every window gets one report (the empty one too), stamped with its release time, in order; the
    planted /24 is reported and no single address is; each report is byte for byte the offline
    computation; the sketches' state is gone; bad and out-of-range records are dead-lettered, only
    the unparsable one counted."""
    cfg = _cfg(tmp_path)
    rng = np.random.default_rng(1)
    w0, w2 = _heavy_window(rng), _heavy_window(rng)
    bad, outside = b"\x01\x02\x03", b"\x0a\x00\x00\x01"
    chain = _pipeline(cfg, tmp_path)
    decode, sketch, release = chain.stages
    m0, m2 = _packed(w0), _packed(w2)
    chain.send(pack_batch([ORIGIN + 5] * len(m0), m0))
    chain.send(pack_batch([ORIGIN + 2 * W + 7] * len(m2) + [ORIGIN + 9, ORIGIN + 3 * W], [*m2, bad, outside]))

    assert chain.outputs == []  # a replay's watermark stays at Long.MIN_VALUE until the input ends
    # nothing applied yet (no epoch is complete before the end): one buffered entry per batch and window
    assert (
        sketch.state_keys("sketch-windows") == [] and len(sketch.map_state("sketch-entries", 0, Types.LONG(), RAW)) == 2
    )
    # epochs' timers (their ends) and one end-of-input timer that releases every window of the range
    assert sketch.pending_timers() == [ORIGIN + 100, ORIGIN + 2 * W + 100, MAX_WATERMARK]
    assert release.pending_timers() == [MAX_WATERMARK]

    chain.end_of_input()
    reports = _reports(chain.outputs)
    assert [(ts, r["window"]["start_ms"]) for ts, r in reports] == [
        (ORIGIN + (i + 1) * W, ORIGIN + i * W) for i in range(3)
    ]
    prefixes = [{x["prefix"] for x in r["hhh"]} for _, r in reports]
    for found in (prefixes[0], prefixes[2]):
        assert "10.1.2.0/24" in found and found <= {"10.1.2.0/24", "10.1.0.0/16", "10.0.0.0/8", "0.0.0.0/0"}
    assert not prefixes[1] - {"0.0.0.0/0"}
    assert abs(reports[0][1]["window"]["n_noisy"] - w0.size) <= 0.01 * w0.size
    for (_, r), values in zip(reports, (w0, np.empty(0, np.uint32), w2)):
        start = r["window"]["start_ms"]
        assert unstamp(chain.outputs[(start - ORIGIN) // W])[1] == _offline_report(cfg, tmp_path, start, values)

    assert sketch.state_keys("sketch-windows") == [] and sketch.state_keys("sketch-entries") == []
    assert sketch.pending_timers() == [] and release.pending_timers() == []
    assert sorted(_dumped(tmp_path)) == [(ORIGIN + i * W, level) for i in range(3) for level in range(4)]
    assert ReleaseLedger(tmp_path / "ledger").windows() == [ORIGIN, ORIGIN + W, ORIGIN + 2 * W]
    assert (tmp_path / "reports.jsonl").read_bytes().splitlines() == [unstamp(o)[1] for o in chain.outputs]
    dead = [json.loads(unstamp(d)[1]) for d in decode.side_outputs[DEAD]]
    assert [(d["reason"], base64.b64decode(d["value_b64"])) for d in dead] == [
        ("bad_length", bad),
        ("after_until", outside),
    ]
    assert decode.metrics() == {"dphhh.decode.dead_letters_bad_length": 1}
    assert release.metrics() == {"dphhh.release.windows_released": 3}
    _assert_metrics_catalogued(*chain.stages)
    for stage, step in ((sketch, "sketch"), (release, "release")):
        assert stage.state_names() and all(n.startswith(STEP_IDS[step] + "-") for n in stage.state_names())
    chain.close()


@pytest.mark.parametrize("kind", ["ipv4", "user", "path"])
def test_a_replay_with_a_clock_applies_complete_epochs_while_reading_and_releases_at_the_end(
    tmp_path: Path, kind: str
) -> None:
    """A replay of a log with the broker's clock records (stream.job.replay_clock): its watermark
    follows the clock during the input. Complete epochs are applied as it passes (their buffered
    entries leave the state, the applied sketches are saved), nothing is released before the end of
    input — not even a window whose release time the clock has passed — and the reports and
    sketches are byte for byte those of the same log replayed without a clock (epochs applied at the
    end), at event level, behind the unit cap, and for paths (hashed keys, shipped as packed paths
    and keyed by the sketch step, whose label table in state holds what the sketches hold as epochs
    are applied: the reports' labels are the same)."""
    user_level = kind == "user"
    more = {
        "ipv4": [],
        "user": ["input.format=packed-ipv4-pairs", "privacy.unit_key=source-ipv4", "privacy.unit_cap=3"],
        "path": ["input.format=path", "hierarchy.spec=path:3"],
    }[kind]
    rng = np.random.default_rng(5)
    log = []  # (record timestamp, message): 3 windows of 4 epochs with data, in time order
    for window in range(3):
        for epoch in (0, 1, 3, 7):
            values = _heavy_window(rng)[:600]
            t = ORIGIN + window * W + epoch * 100 + int(rng.integers(0, 100))
            if user_level:
                units = rng.integers(1, 40, values.size).astype(np.uint32)
                messages = _pairs(units, values)
            elif kind == "path":  # a few heavy paths among many distinct ones
                messages = _heavy_paths(values[:150])
            else:
                messages = _packed(values, per_message=200)
            log += [(t, m) for m in messages]
    runs, labels = {}, {}
    for clock in (False, True):
        cfg = _cfg(tmp_path / str(clock), *more, "privacy.counters=16")
        chain = _pipeline(cfg, tmp_path / str(clock))
        sketch = chain.stages[-2]
        applied_early = False
        for i in range(0, len(log), 5):
            part = log[i : i + 5]
            chain.send(pack_batch([t for t, _ in part], [m for _, m in part]))
            if clock:  # the clock record after these messages: the broker's time of the last of them
                chain.advance_watermark(part[-1][0])
                assert chain.outputs == []  # never a release before the end of input
                applied_early |= bool(sketch.state_keys("sketch-windows"))
        assert applied_early == clock  # with a clock, complete epochs were applied while reading
        # the open windows' labels (paths): pruned to what the sketches hold as epochs are applied
        labels[clock] = max((sum(map(len, sw.labels.values())) for sw in sketch.operator.windows.values()), default=0)
        if clock:  # only the epochs the clock has not passed are still buffered (at user level, by the cap)
            holder = (chain.stages[1] if user_level else sketch).operator
            held = sum(len(w.pending) for w in holder.windows.values())
            assert 0 < held < 3 * 4, held  # of the 3 windows' 4 epochs with data
        chain.end_of_input()
        runs[clock] = ([unstamp(o) for o in chain.outputs], _dumped(tmp_path / str(clock)))
        assert len(runs[clock][0]) == 3
        assert sketch.state_keys("sketch-windows") == [] and sketch.state_keys("sketch-entries") == []
        chain.close()
    if kind == "path":  # the labels in state: those of the keys the applied sketches hold (learnt
        # from the window's keyed hierarchy as epochs are applied), bounded by 2·κ·h and one epoch's
        # (150 paths), not by the window's; unapplied (no clock) none yet: the payloads name none
        assert 0 < labels[True] <= 2 * 16 * 3 + 150 * 3 and labels[False] == 0, labels
    (reports, dumps), (clock_reports, clock_dumps) = runs[False], runs[True]
    assert clock_reports == reports
    assert {k: v.to_bytes() for k, v in clock_dumps.items()} == {k: v.to_bytes() for k, v in dumps.items()}
    assert any(mg.decrements for mg in dumps.values())  # 16 counters: the order decided the sketches


def test_live_windows_are_released_when_the_watermark_passes_their_release_time(tmp_path: Path) -> None:
    """Live: no report before a window's release time; exactly that window's report at it; after a
    jump over two release times both windows (the first empty) in order; an element arriving for a
    released window (a broker clock that went backwards) changes nothing."""
    cfg = _cfg(tmp_path, mode="live", windows=4)
    rng = np.random.default_rng(2)
    chain = _pipeline(cfg, tmp_path)
    _, sketch, release = chain.stages
    m0 = _packed(_heavy_window(rng))
    chain.send(pack_batch([ORIGIN + 100] * len(m0), m0))
    chain.advance_watermark(ORIGIN + W - 1)
    assert chain.outputs == []
    chain.advance_watermark(ORIGIN + W)
    ((ts, first),) = _reports(chain.take())
    assert (ts, first["window"]["start_ms"]) == (ORIGIN + W, ORIGIN) and "10.1.2.0/24" in {
        x["prefix"] for x in first["hhh"]
    }
    assert sketch.state_keys("sketch-windows") == [] and release.pending_timers() == [ORIGIN + 2 * W]

    chain.send(pack_batch([ORIGIN + 200] * len(m0), m0))  # for window 0, already released
    # nothing kept for it; the tick of the clock's new window armed that window and the next, empty or not
    assert sketch.state_keys("sketch-windows") == [] and sketch.state_keys("sketch-entries") == []
    assert sketch.pending_timers() == [ORIGIN + 2 * W, ORIGIN + 3 * W]
    m2 = _packed(_heavy_window(rng))
    chain.send(pack_batch([ORIGIN + 2 * W + 1] * len(m2), m2))
    chain.advance_watermark(ORIGIN + 3 * W + 5)  # a downtime: two release times passed at once
    reports = _reports(chain.take())
    assert [(ts, r["window"]["start_ms"]) for ts, r in reports] == [
        (ORIGIN + 2 * W, ORIGIN + W),
        (ORIGIN + 3 * W, ORIGIN + 2 * W),
    ]
    assert not {x["prefix"] for x in reports[0][1]["hhh"]} - {"0.0.0.0/0"}
    assert "10.1.2.0/24" in {x["prefix"] for x in reports[1][1]["hhh"]}
    assert release.pending_timers() == [ORIGIN + 4 * W]  # the last window is armed, empty or not
    chain.advance_watermark(ORIGIN + 4 * W)
    assert [r["window"]["start_ms"] for _, r in _reports(chain.take())] == [ORIGIN + 3 * W]
    assert release.pending_timers() == []  # the schedule (window.until) has ended
    # (this schedule lies in 2023: every publication time passed before the worker published anything
    # — a start's backlog, published at once and not counted overdue; tests/stream/test_publisher.py
    # shows reports waiting for their time and overdue ones counted)
    assert release.metrics() == {"dphhh.release.windows_released": 4}
    chain.close()


def _sketch_records(cfg, window: int, values: np.ndarray, epoch: int | None = None) -> list[tuple]:
    at = window if epoch is None else epoch
    return [(p, window, at, payload, labels) for p, payload, labels in sketch_payloads(values, cfg)]


def _released_totals(out) -> list[tuple[int, int, int | None]]:
    return [(w, r.level, r.n_noisy) for w, r in ((w, pickle.loads(p)) for w, p in out)]


def test_a_batch_of_a_passed_epoch_is_applied_on_its_own_whatever_else_arrived(tmp_path: Path) -> None:
    """A batch whose arrival epoch the clock has already passed (a broker clock that stepped back) is
    applied at once, on its own, decided by the clock alone. Before, epochs were applied when the
    next batch arrived, so the same late batch was merged into its epoch — or applied on its own if
    some other element had arrived in between: one element changed how another counted (an
    independent review's finding). Here: epoch 100 holds X; the clock passes 350; Z (epoch 100)
    arrives late, after Y (epoch 300) or without it."""
    cfg = _cfg(tmp_path, "privacy.counters=2", mode="live", windows=2)
    x = np.array([HEAVY_24 + 9, HEAVY_24 + 9, HEAVY_24 + 8], dtype=np.uint32)
    z = np.array([HEAVY_24 + 1, HEAVY_24 + 2, HEAVY_24 + 3], dtype=np.uint32)
    y = np.array([HEAVY_24 + 5], dtype=np.uint32)
    key = lambda v: cfg.hierarchy.keys(v, 4)  # noqa: E731
    assert _canonical([key(x), key(z)], 2).to_bytes() != _canonical([np.concatenate([key(x), key(z)])], 2).to_bytes()
    for with_y in (False, True):
        dumps = tmp_path / ("y" if with_y else "no-y")
        run = _cfg(dumps, "privacy.counters=2", mode="live", windows=2)
        with _sketch(run) as sk:
            for r in _sketch_records(run, ORIGIN, x, ORIGIN + 100):
                sk.process(r)
            sk.advance_watermark(ORIGIN + 350)
            if with_y:
                for r in _sketch_records(run, ORIGIN, y, ORIGIN + 300):
                    sk.process(r)
            for r in _sketch_records(run, ORIGIN, z, ORIGIN + 100):  # late: its epoch has passed
                sk.process(r)
            sk.advance_watermark(ORIGIN + W)
        groups = [key(x), key(z)] + ([key(y)] if with_y else [])
        assert _dumped(dumps)[(ORIGIN, 3)].to_bytes() == _canonical(groups, 2).to_bytes(), with_y


def test_sketch_operator_drops_released_windows_and_ticks_rearm_timers_a_restore_lost(tmp_path: Path) -> None:
    """After a window's release its state is gone and later elements for it leave no state, timer or
    output; a restore without the window's timer (and with empty caches) keeps its buffered epochs
    and applied sketches, a tick re-registers the timer, and the window is released with every
    element of both runs, in canonical order."""
    cfg = _cfg(tmp_path, mode="live", windows=6)
    values = np.uint32(HEAVY_24) + np.arange(300, dtype=np.uint32) % 7
    with _sketch(cfg) as sk:
        for r in _sketch_records(cfg, ORIGIN, values):
            assert sk.process(r) == []
        assert sk.pending_timers(0) == [ORIGIN + 100, ORIGIN + W]  # its epoch's end, the window's release
        released = [(w, pickle.loads(p)) for w, p in sk.advance_watermark(ORIGIN + W)]
        assert [(w, r.level) for w, r in released] == [(ORIGIN, level) for level in (1, 2, 3, 4)]
        assert abs(released[0][1].n_noisy - 300) <= 5  # level 1 carries the size (P = 1)
        assert sk.state_keys("sketch-windows") == [] and sk.state_keys("sketch-entries") == []
        assert sk.pending_timers() == [ORIGIN + 2 * W]  # the next window, armed at the release

        for r in _sketch_records(cfg, ORIGIN, values):  # window 0 again, after its release
            assert sk.process(r) == []
        assert sk.state_keys("sketch-windows") == [] and sk.state_keys("sketch-entries") == []

        for r in _sketch_records(cfg, ORIGIN + W, values[:100], ORIGIN + W):  # epoch W
            sk.process(r)
        sk.advance_watermark(ORIGIN + W + 150)  # epoch W complete: applied at its timer (the clock)
        assert sk.map_state("sketch-entries", 0, Types.LONG(), RAW) == {}
        for r in _sketch_records(cfg, ORIGIN + W, values[100:200], ORIGIN + W + 200):
            sk.process(r)
        assert len(sk.map_state("sketch-entries", 0, Types.LONG(), RAW)) == 1  # epoch W+200 is still buffered
        snapshot = sk.snapshot(timers=False)  # a checkpoint that missed the timers registered

    with _sketch(cfg, restore=snapshot) as again:
        assert again.pending_timers() == []
        for r in _sketch_records(cfg, ORIGIN + W, values[200:], ORIGIN + W + 200):
            again.process(r)  # the restored state, not a cache, is what grows
        # the window's state existed: no release timer by itself (its epoch's end: this batch's own)
        assert again.pending_timers() == [ORIGIN + W + 300]
        assert again.process((0, TICK_WINDOW, ORIGIN + W, b"", b"")) == [(TICK_WINDOW, b"")]
        assert again.pending_timers(0) == [ORIGIN + W + 300, ORIGIN + 2 * W, ORIGIN + 3 * W]
        out = again.advance_watermark(ORIGIN + 2 * W)
        assert [w for w, _ in out] == [ORIGIN + W] * 4 and abs(pickle.loads(out[0][1]).n_noisy - 300) <= 5
        assert again.state_keys("sketch-windows") == [] and again.state_keys("sketch-entries") == []
    keys = [cfg.hierarchy.keys(v, 4) for v in (values[:100], values[100:])]
    assert _dumped(tmp_path)[(ORIGIN + W, 3)] == _canonical(keys, cfg.params.counters)


def _pairs(units: np.ndarray, dsts: np.ndarray) -> list[bytes]:
    pairs = np.stack([units, dsts], axis=1).astype(">u4")
    return [pairs[i : i + 400].tobytes() for i in range(0, len(pairs), 400)]


def test_cap_operator_keeps_at_most_the_cap_of_each_unit_per_window(tmp_path: Path) -> None:
    """User level (privacy.unit_key = source-ipv4, unit_cap = 3, two cap shards): a source sending
    1,000 elements contributes 3 per window; the sketches equal an offline capped replay; the cap's
    state of a window is gone after its release."""
    cap = 3
    cfg = _cfg(
        tmp_path,
        "input.format=packed-ipv4-pairs",
        "privacy.unit_key=source-ipv4",
        f"privacy.unit_cap={cap}",
        "flink.parallelism=2",
        windows=2,
    )
    rng = np.random.default_rng(3)
    heavy_unit, heavy_dst = 0xC0A80001, 0x0A090909
    chain = _pipeline(cfg, tmp_path)
    _, capper, sketch, _ = chain.stages
    offline: dict[int, list[MisraGries]] = {}
    for window in (ORIGIN, ORIGIN + W):
        units = np.concatenate([np.full(1000, heavy_unit), rng.integers(1, 2**31, 200)]).astype(np.uint32)
        dsts = np.concatenate([np.full(1000, heavy_dst), 0x0A010000 + rng.integers(0, 600, 200)]).astype(np.uint32)
        order = rng.permutation(units.size)
        units, dsts = units[order], dsts[order]
        messages = _pairs(units, dsts)
        chain.send(pack_batch([window + 1] * len(messages), messages))
        oracle = _oracle(cfg, [(units.astype(np.uint64), dsts, None)], cap)
        offline[window] = [oracle[(level, 0)] for level in range(1, 5)]

    assert sorted(capper.state_keys("cap-entries")) == [0, 1]  # both shards hold units
    chain.end_of_input()
    dumps = _dumped(tmp_path)
    for window, expected in offline.items():
        got = [dumps[(window, level)] for level in range(4)]
        assert [s.total for s in got] == [200 + cap] * 4
        assert got[3].counters()[heavy_dst] == cap
        assert got == expected
    assert len(chain.outputs) == 2 and capper.state_keys("cap-entries") == [] and capper.pending_timers() == []
    _assert_metrics_catalogued(*chain.stages)
    chain.close()


def _json_users(users: list[str], addrs: np.ndarray) -> list[bytes]:
    """JSON messages, one per element: the address and its privacy unit (field ``user``)."""
    dotted = [".".join(str((int(a) >> s) & 255) for s in (24, 16, 8, 0)) for a in addrs]
    return [json.dumps({"ip": ip, "user": u}).encode() for ip, u in zip(dotted, users)]


def _as_ints(units: np.ndarray) -> list[int]:
    """Unit keys as Python integers, whatever their representation (uint64, or high and low words)."""
    if units.dtype.names:
        return [(int(k["hi"]) << 64) | int(k["lo"]) for k in units]
    return [int(k) for k in units]


def test_json_unit_values_become_128_bit_keys_under_the_deployments_secret(tmp_path: Path) -> None:
    """privacy.unit_key = json:user: the decode operator hashes each unit value under the
    deployment's secret (a seeded run's is derived from its seed) to a 128-bit key — never the old
    unkeyed 64-bit BLAKE2b key, which anyone could compute and aim a crafted value at; the same
    value gets the same key, and another deployment's secret gives every value another key
    (docs/calibration.md §8.1)."""
    users = ["alice", "bob", "carol", "alice"]
    public = {
        int.from_bytes(hashlib.blake2b(b"s:" + u.encode(), digest_size=8, person=b"dphhh.unit/v1").digest(), "little")
        for u in users
    }
    keys = {}
    for seed in (7, 8):
        cfg = _cfg(
            tmp_path / str(seed), "input.format=json", "privacy.unit_key=json:user", f"privacy.seed={seed}", windows=1
        )
        with _decode(cfg) as decode:
            out = decode.process(pack_batch([ORIGIN + 1] * 4, _json_users(users, np.full(4, HEAVY_24))))
        (payload,) = [r[3] for r in out if r[1] != TICK_WINDOW]  # one cap shard (parallelism 1)
        got = _as_ints(unpack_unit_payload(payload)[0])
        assert not public & set(got)  # not the public key (nor computable without the secret)
        assert got[0] == got[3] and len(set(got)) == 3 and max(got) >= 2**64
        assert got == _as_ints(unit_keys_of(users, job_key_secret(cfg)))
        keys[seed] = got
    assert not set(keys[7]) & set(keys[8])


def test_json_units_are_capped_per_unit_value_through_the_job(tmp_path: Path) -> None:
    """User level per JSON field (unit_cap = 2, two cap shards): the 128-bit unit keys travel
    decode → cap (sorted by unit, value) → sketches; a user sending 60 elements contributes 2, and
    the released sketches equal the capped oracle written over the unit values themselves."""
    cap = 2
    cfg = _cfg(
        tmp_path,
        "input.format=json",
        "privacy.unit_key=json:user",
        f"privacy.unit_cap={cap}",
        "flink.parallelism=2",
        windows=1,
    )
    rng = np.random.default_rng(5)
    users = ["heavy"] * 60 + [f"user-{int(i)}" for i in rng.integers(0, 80, 240)]
    addrs = np.concatenate([np.full(60, HEAVY_24 + 7), 0x0A010000 + rng.integers(0, 500, 240)]).astype(np.uint32)
    order = rng.permutation(len(users))
    users, addrs = [users[i] for i in order], addrs[order]
    chain = _pipeline(cfg, tmp_path)
    _, capper, _, _ = chain.stages
    chain.send(pack_batch([ORIGIN + 1] * len(users), _json_users(users, addrs)))
    assert sorted(capper.state_keys("cap-entries")) == [0, 1]  # both shards hold units
    chain.end_of_input()
    expected = _oracle(cfg, [(np.array(users), addrs, None)], cap)
    dumps = _dumped(tmp_path)
    got = {(level, 0): dumps[(ORIGIN, level - 1)] for level in range(1, 5)}
    assert got == expected and got[(4, 0)].counters()[HEAVY_24 + 7] == cap
    assert len(chain.outputs) == 1 and capper.state_keys("cap-entries") == []
    chain.close()


def test_a_json_unit_cap_refuses_unit_keys_of_the_previous_format(tmp_path: Path) -> None:
    """Unit keys of the old format (unkeyed 64-bit) cannot become the new keyed ones: a JSON-unit cap
    restored from a checkpoint that holds them (or sent them) stops with the way out, instead of
    capping one unit of the window in flight under two keys (up to 2m of its elements)."""
    from dphhh.sketches.errors import OperationalError

    old_cfg = _cfg(tmp_path / "old", "input.format=packed-ipv4-pairs", "privacy.unit_key=source-ipv4", windows=1)
    json_cfg = _cfg(tmp_path / "new", "input.format=json", "privacy.unit_key=json:user", windows=1)
    old_units = np.array([2**63 + 5, 7], dtype=np.uint64)  # what the old decoder made of two values
    ((shard, payload),) = unit_payloads(np.array([HEAVY_24, HEAVY_24], dtype=np.uint32), old_units, 1)
    record = (shard, ORIGIN, ORIGIN, payload, b"")
    with _cap(old_cfg) as first:
        first.process(record)
        snapshot = first.snapshot()
    with _cap(json_cfg, restore=snapshot) as restored:
        with pytest.raises(OperationalError, match="previous, unkeyed 64-bit format.*flink.resume = none"):
            restored.process((shard, TICK_WINDOW, -1, b"", b""))
    with _cap(json_cfg) as fresh:
        with pytest.raises(OperationalError, match="previous, unkeyed 64-bit format"):
            fresh.process(record)


def _oracle(cfg, epochs, cap: int | None = None, window: int = ORIGIN) -> dict[tuple[int, int], MisraGries]:
    """(level, partition) → the sketch of one window in canonical order, written out plainly: per
    epoch (in the order given), with a unit cap the elements sorted by (unit, value[, weight]) and a
    unit's kept while fewer than ``cap`` of its elements were kept in the window; then each (level,
    partition)'s keys of the kept elements, sorted, inserted one unit at a time. ``epochs``:
    (units or None, values, weights or None) per epoch; pair values are (first, second) arrays."""
    from dphhh.sketches.partition import route

    hierarchy = cfg.hierarchy.keyed(job_key_secret(cfg).window(window))  # hashed keys: the window's key
    kept_count: dict[int, int] = {}
    groups: dict[tuple[int, int], list] = {}
    for units, values, w in epochs:
        pairs = isinstance(values, tuple)
        n = len(values[0]) if pairs else len(values)
        sel = np.arange(n)
        if cap is not None:
            codes = [(int(a) << 32) | int(b) for a, b in zip(*values)] if pairs else [int(v) for v in values]
            weights = w.tolist() if w is not None else [0] * n
            chosen = []
            for unit, _, _, i in sorted(zip(units.tolist(), codes, weights, range(n))):
                if kept_count.get(unit, 0) < cap:
                    kept_count[unit] = kept_count.get(unit, 0) + 1
                    chosen.append(i)
            sel = np.array(chosen, dtype=np.int64)
        kept = tuple(v[sel] for v in values) if pairs else values[sel]
        kept_w = None if w is None else np.asarray(w)[sel]
        for level, p, keys, part_w in route(hierarchy, kept, cfg.params.partitions, kept_w):
            groups.setdefault((level, p), []).append(keys if part_w is None else (keys, part_w))
    return {key: _canonical(g, cfg.params.counters) for key, g in groups.items()}


def _released_sketches(tmp_path: Path, cfg, window: int) -> dict[tuple[int, int], MisraGries]:
    """(level, partition) → the window's sketches as released (dumped), non-empty ones."""
    parts = cfg.params.partitions
    return {
        ((sid // parts) + 1, sid % parts): mg for (w, sid), mg in _dumped(tmp_path).items() if w == window and mg.total
    }


def test_flow_weights_are_clipped_at_the_public_cap_in_the_sketches(tmp_path: Path) -> None:
    """flow-json weighted by bytes with input.weight_cap = 1000: a 5,000-byte record counts 1,000,
    smaller ones their bytes, in the window of their own time; dead letters keep their reasons; a
    record of 0 bytes is dead-lettered zero_weight (and, a valid record, not counted in a metric)
    instead of failing the operator."""
    cfg = load_config(
        None,
        environ={},
        overrides=[
            "input.format=flow-json",
            "input.flow_weight=bytes",
            "input.weight_cap=1000",
            "window.mode=replay",
            "window.size_ms=1000",
            "window.origin=0",
            "window.until=3000",
            "privacy.seed=3",
            f"output.ledger_dir={tmp_path / 'ledger'}",
            f"output.reports_file={tmp_path / 'reports.jsonl'}",
            f"testing.debug_sketch_dir={tmp_path / 'sketches'}",
        ],
    )

    def rec(ip: str, nbytes: int, t: str) -> bytes:
        return json.dumps(
            {
                "ip_src": ip,
                "ip_dst": "10.0.0.1",
                "packets": 1,
                "bytes": nbytes,
                "timestamp_start": f"1970-01-01 00:00:0{t}",
            }
        ).encode()

    messages = [
        rec("10.1.1.1", 5000, "1.100"),
        rec("10.1.1.2", 500, "1.200"),
        rec("10.2.2.2", 999, "1.900"),
        rec("10.1.1.1", 70, "2.500"),
        b"{bad",
        rec("2001:db8::1", 80, "1.100"),
        json.dumps({"ip_src": "10.1.1.3", "packets": 0, "bytes": 0, "timestamp_start": "1970-01-01 00:00:01"}).encode(),
    ]
    decode = _decode(cfg).open()
    sketch = _sketch(cfg).open()
    chain = Chain(decode, sketch)
    chain.send(pack_batch([5] * len(messages), messages))
    dead = [json.loads(unstamp(d)[1])["reason"] for d in decode.side_outputs[DEAD]]
    assert dead == ["bad_json", "wrong_family", "zero_weight"]
    assert decode.metrics() == {"dphhh.decode.dead_letters_bad_json": 1}  # valid records are never counted
    chain.end_of_input()
    assert sketch.state_keys("sketch-windows") == [] and sketch.state_keys("sketch-entries") == []
    # every window of the range released, level by level, the one without a record too
    assert [w for w, _ in chain.outputs if w != TICK_WINDOW] == [0] * 4 + [1000] * 4 + [2000] * 4
    dumps = _dumped(tmp_path)
    first = [dumps[(1000, level)] for level in range(4)]
    assert [s.total for s in first] == [2499] * 4
    ip = cfg.hierarchy.keys(np.array([0x0A010101, 0x0A010102, 0x0A020202], dtype=np.uint32), 4).tolist()
    assert first[3].counters() == dict(zip(ip, [1000, 500, 999]))
    assert first[2].counters()[int(cfg.hierarchy.keys(np.array([0x0A010101], np.uint32), 3)[0])] == 1500
    assert [dumps[(2000, level)].total for level in range(4)] == [70] * 4
    assert [dumps[(0, level)].total for level in range(4)] == [0] * 4
    chain.close()


def test_a_restored_release_operator_republishes_the_ledger_bytes(tmp_path: Path) -> None:
    """Releases every window with no element at all (only the start record); restored from a
    checkpoint taken before those releases, it publishes the same bytes again from the ledger,
    counts them as republished, and the reports file keeps one line per window."""
    cfg = _cfg(tmp_path)
    with _release(cfg, tmp_path) as first:
        first.process((START, b""))
        snapshot = first.snapshot()
        first.end_of_input()
        published = first.outputs
    assert [r["window"]["start_ms"] for _, r in _reports(published)] == [ORIGIN, ORIGIN + W, ORIGIN + 2 * W]
    assert all(not {x["prefix"] for x in r["hhh"]} - {"0.0.0.0/0"} for _, r in _reports(published))
    with _release(cfg, tmp_path, restore=snapshot) as again:
        again.end_of_input()
        assert again.outputs == published
        assert again.metrics() == {"dphhh.release.windows_republished": 3}
    assert len((tmp_path / "reports.jsonl").read_bytes().splitlines()) == 3


def test_the_budget_guard_refuses_windows_on_schedule(tmp_path: Path) -> None:
    """A deployment budget of two windows' epsilon: the third window's report is a refusal, still
    published at its release time, counted as refused."""
    cfg = _cfg(tmp_path, "privacy.budget_epsilon=100", "privacy.budget_period=deployment")
    chain = _pipeline(cfg, tmp_path)
    rng = np.random.default_rng(4)
    for i in range(3):
        messages = _packed(_heavy_window(rng))
        chain.send(pack_batch([ORIGIN + i * W + 1] * len(messages), messages))
    chain.end_of_input()
    reports = _reports(chain.outputs)
    assert [ts for ts, _ in reports] == [ORIGIN + W, ORIGIN + 2 * W, ORIGIN + 3 * W]
    assert ["refused" in r for _, r in reports] == [False, False, True]
    assert reports[2][1]["hhh"] == [] and "n_noisy" not in reports[2][1]["window"]
    release = chain.stages[-1]
    assert release.metrics() == {"dphhh.release.windows_released": 3, "dphhh.release.windows_refused": 1}
    chain.close()


def test_decode_ticks_once_per_clock_window_skips_clock_records_and_dead_letters_bad_batches(tmp_path: Path) -> None:
    """Decode emits one tick per sketch partition after open and at each new clock window (never per
    batch), carrying the clock's window; skips clock records; and dead-letters a batch that is not a
    DPB1 record (not counted: it holds elements, and whether it happens follows the jar)."""
    cfg = _cfg(tmp_path, "privacy.partitions=3", mode="live")
    with _decode(cfg) as decode:

        def ticks(mark: int) -> list[tuple]:
            return [(p, TICK_WINDOW, mark, b"", b"") for p in range(3)]

        assert decode.process(pack_batch([ORIGIN + 1], [TICK])) == ticks(-1)  # after open
        assert decode.process(pack_batch([ORIGIN + 2], [TICK])) == []
        decode.advance_watermark(ORIGIN + 10)  # the broker's clock enters window 0
        assert decode.process(pack_batch([ORIGIN + 3], [TICK])) == ticks(ORIGIN)
        decode.advance_watermark(ORIGIN + 20)  # the same clock window: no tick
        assert decode.process(pack_batch([ORIGIN + 4], [TICK])) == []
        decode.advance_watermark(ORIGIN + W)
        out = decode.process(pack_batch([ORIGIN + W + 1, ORIGIN + W + 2], [TICK, b"\x0a\x01\x02\x03"]))
        assert out[:3] == ticks(ORIGIN + W) and out[3:]  # the element: one record per partition its keys fall in
        assert all(r[1] == ORIGIN + W and r[2] == ORIGIN + W and r[3] for r in out[3:])  # window, epoch
        assert len({r[0] for r in out[3:]}) == len(out[3:])
        assert decode.process(b"not a batch") == [] and decode.side_outputs[DEAD]
        (dead,) = [json.loads(unstamp(d)[1]) for d in decode.take_side(DEAD)]
        assert (dead["reason"], base64.b64decode(dead["value_b64"])) == ("bad_batch", b"not a batch")
        assert decode.metrics() == {}
        _assert_metrics_catalogued(decode)


class _Probe(KeyedProcessFunction):
    """A minimal keyed operator to check the harness itself: counts per key, a timer per element."""

    def open(self, runtime_context) -> None:
        from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor

        self.count = runtime_context.get_state(ValueStateDescriptor("probe-count", Types.LONG()))
        self.raw = runtime_context.get_map_state(MapStateDescriptor("probe-raw", Types.LONG(), RAW))

    def process_element(self, value, ctx):
        key, at, raw = value
        self.count.update((self.count.value() or 0) + 1)
        self.raw.put(at, raw)
        ctx.timer_service().register_event_time_timer(at)
        yield key, ctx.timer_service().current_watermark()

    def on_timer(self, timestamp, ctx):
        yield ctx.get_current_key(), timestamp, self.count.value(), ctx.timer_service().current_watermark()


def test_the_harness_keeps_flinks_rules() -> None:
    """Timers are per key and time (deduplicated), fire in time order at the new watermark with their
    own key current; a lower watermark is ignored; state is per key and typed like PyFlink's coders."""
    with KeyedHarness(_Probe(), itemgetter(0), key_type=Types.STRING()) as h:
        assert h.process(("a", 30, b"x")) == [("a", MIN_WATERMARK)]
        h.process(("b", 10, b"y"))
        h.process(("a", 30, b"z"))  # the same timer again: one firing
        assert h.pending_timers() == [10, 30] and h.pending_timers("a") == [30]
        assert h.advance_watermark(40) == [("b", 10, 1, 40), ("a", 30, 2, 40)]
        assert h.advance_watermark(20) == [] and h.timers.current_watermark() == 40
        assert h.map_state("probe-raw", "a", Types.LONG(), RAW) == {30: b"z"}
        with pytest.raises(TypeError, match="does not encode"):
            h.process(("a", 50, "text, not bytes"))
        with pytest.raises(TypeError, match="does not encode"):
            h.process(("a", 2**63, b""))


def test_a_pair_hierarchy_streams_source_destination_pairs_to_2d_reports(tmp_path: Path) -> None:
    """input.format packed-ipv4-pairs with hierarchy ipv4:8,16,24,32 x ipv4:8,16,24,32
    (docs/ALGORITHMS.md §11): every element reaches the 24 node sketches, the 64-bit (/32, /32)
    node's keys travel with their labels, and the window's report lists the planted pair as
    'source prefix → destination prefix' with its node, states no 2-D coverage, and is byte for
    byte what one offline LevelSketches release with the same seeded noise gives."""
    cfg = _cfg(
        tmp_path, "input.format=packed-ipv4-pairs", "hierarchy.spec=ipv4:8,16,24,32 x ipv4:8,16,24,32", windows=1
    )
    assert cfg.hierarchy.h == 24
    rng = np.random.default_rng(5)
    src = rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32)
    dst = rng.integers(0, 2**32, 4000, dtype=np.uint64).astype(np.uint32)
    src[:2500] = np.uint32(0xC0000201)  # 192.0.2.1 → 203.0.113.5, one host pair: the /32 × /32 node
    dst[:2500] = np.uint32(0xCB007105)
    order = rng.permutation(4000)
    src, dst = src[order], dst[order]
    words = np.stack([src, dst], axis=1).astype(">u4").reshape(-1)
    messages = [words[i : i + 400].tobytes() for i in range(0, words.size, 400)]
    chain = _pipeline(cfg, tmp_path)
    chain.send(pack_batch([ORIGIN + 5] * len(messages), messages))
    chain.end_of_input()
    ((ts, report),) = _reports(chain.outputs)
    assert report["params"]["h"] == 24 and report["guarantees"]["coverage_holds"] is False
    assert report["budget"]["entries"][-1]["mechanism"] == "hashed_keys"  # its δ stated
    found = {x["prefix"]: x for x in report["hhh"]}
    assert "192.0.2.1/32 → 203.0.113.5/32" in found and found["192.0.2.1/32 → 203.0.113.5/32"]["node"] == [4, 4]
    # the offline release: the same sketches (the one router), the same seeded noise per (window, node)
    # (the window's hash key: the /32 × /32 node's keys are keyed hashes, docs/ALGORITHMS.md §1 "Keys")
    secret = job_key_secret(cfg)
    hierarchy, params = cfg.hierarchy.keyed(secret.window(ORIGIN)), cfg.params
    noise = noise_source_factory(cfg.seed)
    releases = []
    for level in range(1, hierarchy.h + 1):
        keys = hierarchy.keys((src, dst), level)
        mg = _canonical([keys], params.counters)
        labels = hierarchy.labels_of(keys, level) or None
        releases.append(
            release_sketch(
                level,
                0,
                mg.counters(),
                mg.total,
                params=params,
                h=hierarchy.h,
                rng=noise(ORIGIN, level, 0),
                labels=labels,
            )
        )
    asm = WindowAssembler(
        cfg.hierarchy,
        params,
        cfg.schedule(ORIGIN),
        ReleaseLedger(tmp_path / "offline"),
        seed=cfg.seed,
        secret=secret,
        key_collision_delta=cfg.key_delta,
    )
    assert cfg.key_delta == cfg.params.counters * 2.0**-63  # one hashed node (/32 × /32), event level
    assert unstamp(chain.outputs[0])[1] == asm.report(ORIGIN, releases)[0]
    chain.close()


def test_a_pair_hierarchy_at_user_level_caps_each_source_host(tmp_path: Path) -> None:
    """privacy.unit_key = source-ipv4 with a pair hierarchy: the source address is both the pair's
    first side and the privacy unit; the cap operator keeps at most the cap of each source per
    window, so one source sending 3,000 elements to one destination adds only CAP to every node."""
    cap = 2
    cfg = _cfg(
        tmp_path,
        "input.format=packed-ipv4-pairs",
        "hierarchy.spec=ipv4:8,16 x ipv4:8,16",
        "privacy.unit_key=source-ipv4",
        f"privacy.unit_cap={cap}",
        "privacy.budget_epsilon=1000",
        "privacy.budget_delta=0.5",
        windows=1,
    )
    rng = np.random.default_rng(8)
    many = rng.integers(1, 2**31, 1000, dtype=np.uint64).astype(np.uint32)
    src = np.concatenate([np.repeat(many, 3), np.full(3000, 0xC0000201, np.uint32)])
    dst = np.concatenate(
        [rng.integers(0, 2**32, 3000, dtype=np.uint64).astype(np.uint32), np.full(3000, 0xCB007105, np.uint32)]
    )
    words = np.stack([src, dst], axis=1).astype(">u4").reshape(-1)
    messages = [words[i : i + 600].tobytes() for i in range(0, words.size, 600)]
    chain = Chain(_decode(cfg), _cap(cfg), _sketch(cfg), _release(cfg, tmp_path)).open()
    chain.send((START, b""), at=3)
    chain.send(pack_batch([ORIGIN + 5] * len(messages), messages))
    chain.end_of_input()
    ((_, report),) = _reports(chain.outputs)
    assert report["budget"]["unit"] == "user" and report["params"]["h"] == 8
    # the heavy host pair kept only `cap` elements: far below tau, never reported
    assert not any(x["prefix"].startswith("192.0.2.") for x in report["hhh"])
    assert abs(report["window"]["n_noisy"] - (1000 * cap + cap)) < 200
    chain.close()


def _flow_record(src: int, dst: int, nbytes: int, t_ms: int) -> bytes:
    """A pmacct flow record from ``src`` to ``dst`` (host-order IPv4) of ``nbytes`` at ``t_ms``."""
    from datetime import UTC, datetime
    from ipaddress import IPv4Address

    when = datetime.fromtimestamp(t_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return json.dumps(
        {
            "ip_src": str(IPv4Address(int(src))),
            "ip_dst": str(IPv4Address(int(dst))),
            "packets": 1,
            "bytes": int(nbytes),
            "timestamp_start": when,
        }
    ).encode()


def _flow_traffic(rng: np.random.Generator, n: int, heavy_src: int, heavy: int) -> tuple[np.ndarray, ...]:
    """``n`` flow records (sources, destinations, bytes, offsets in ms) in arrival order: ``heavy``
    of them from ``heavy_src`` (byte counts up to 5x the cap used below), the rest from 60 hosts."""
    src = np.concatenate([np.full(heavy, heavy_src), 0x0A000000 + rng.integers(0, 60, n - heavy) * 257])
    dst = 0xCB000000 + rng.integers(0, 40, n) * 65_537
    nbytes = rng.integers(40, 5000, n)
    order = rng.permutation(n)
    return (
        src[order].astype(np.uint32),
        dst[order].astype(np.uint32),
        nbytes[order].astype(np.int64),
        np.sort(rng.integers(0, W, n)),
    )


def test_flow_records_at_user_level_keep_each_source_hosts_first_records_with_their_clipped_bytes(
    tmp_path: Path,
) -> None:
    """flow-json over destinations at user level per source host (privacy.unit_key = source-ipv4,
    unit_cap = 3), weighted by bytes clipped at W = 1000, two cap shards, two key partitions: a
    source sending 400 records contributes its first 3 (arrival order, across batches), every source
    at most 3, each with its clipped bytes; the sketches equal an offline LevelSketches over the kept
    records; records without an IPv4 source are dead-lettered; the report states the guarantee per
    source host over m·W."""
    cap, weight_cap = 3, 1000
    cfg = _cfg(
        tmp_path,
        "input.format=flow-json",
        "input.flow_key=dst",
        "input.flow_weight=bytes",
        f"input.weight_cap={weight_cap}",
        "privacy.unit_key=source-ipv4",
        f"privacy.unit_cap={cap}",
        "privacy.partitions=2",
        "flink.parallelism=2",
        windows=1,
    )
    assert cfg.unit.group_size == cap * weight_cap
    rng = np.random.default_rng(11)
    heavy_src = 0xC0A80001
    src, dst, nbytes, offsets = _flow_traffic(rng, 2000, heavy_src, 400)
    messages = [_flow_record(s, d, b, ORIGIN + t) for s, d, b, t in zip(src, dst, nbytes, offsets)]
    bad = [
        json.dumps({"ip_dst": "203.0.113.5", "packets": 1, "bytes": 40}).encode(),  # no source
        json.dumps({"ip_src": "2001:db8::1", "ip_dst": "203.0.113.5", "packets": 1, "bytes": 40}).encode(),
    ]
    chain = _pipeline(cfg, tmp_path)
    decode, capper, sketch, _ = chain.stages
    half = len(messages) // 2  # two batches: the cap's state carries over
    chain.send(pack_batch([ORIGIN + 1] * half, messages[:half]))
    chain.send(pack_batch([ORIGIN + 2] * (len(messages) - half + 2), messages[half:] + bad))

    dead = [json.loads(unstamp(d)[1])["reason"] for d in decode.side_outputs[DEAD]]
    assert dead == ["missing_field", "wrong_family"]
    assert sorted(capper.state_keys("cap-entries")) == [0, 1]
    chain.end_of_input()

    # both batches arrived in one epoch: the cap takes each source's records sorted by (destination,
    # clipped bytes) — canonical, not arrival, order — and keeps the first 3
    clipped = clip_weights(nbytes, weight_cap)
    oracle = _oracle(cfg, [(src.astype(np.uint64), dst, clipped)], cap)
    released = _released_sketches(tmp_path, cfg, ORIGIN)
    assert released == oracle and len({p for _, p in released}) == 2
    heavy = np.flatnonzero(src == heavy_src)  # 400 records; 3 kept: those with the smallest (dst, bytes)
    kept = sorted(zip(dst[heavy].tolist(), clipped[heavy].tolist()))[:cap]
    leaf = {int(k): c for (lv, _), mg in oracle.items() if lv == 4 for k, c in mg.counters().items()}
    assert sum(w for _, w in kept) <= sum(leaf.get(d, 0) for d, _ in kept)
    assert clipped.max() == weight_cap and clipped.min() < weight_cap  # some records are clipped
    ((_, report),) = _reports(chain.outputs)
    assert report["budget"]["unit"] == "user" and report["budget"]["weight_cap"] == weight_cap
    assert report["budget"]["guarantee"].endswith(
        "all records of one privacy unit (source address), each unit capped at 3 records per window, "
        "each record weighted by bytes clipped at 1000"
    )
    assert math.isclose(report["budget"]["event_level"]["epsilon"], 50 / (cap * weight_cap), rel_tol=1e-6)
    assert capper.state_keys("cap-entries") == [] and sketch.state_keys("sketch-windows") == []
    _assert_metrics_catalogued(*chain.stages)
    chain.close()


def test_weighted_flow_pairs_at_event_level_sketch_as_the_batch_command_does(tmp_path: Path) -> None:
    """flow-json with a pair hierarchy weighted by bytes clipped at W = 1000 (event level, three key
    partitions): the sketch operator's sketches of the window equal the batch command's sketching of
    the same records (stream.batch.read_all_records → LevelSketches with the clipped weights)."""
    weight_cap = 1000
    cfg = _cfg(
        tmp_path,
        "input.format=flow-json",
        "input.flow_weight=bytes",
        f"input.weight_cap={weight_cap}",
        "hierarchy.spec=ipv4:8,16,24,32 x ipv4:8,16,24,32",
        "privacy.partitions=3",
        "privacy.counters=64",  # fewer counters than keys: the sketches depend on the records' order
        windows=1,
    )
    assert cfg.values["input"]["flow_key"] == "pair" and cfg.unit.group_size == weight_cap
    rng = np.random.default_rng(12)
    src, dst, nbytes, offsets = _flow_traffic(rng, 1500, 0xC0000201, 300)
    messages = [_flow_record(s, d, b, ORIGIN + t) for s, d, b, t in zip(src, dst, nbytes, offsets)]
    messages.append(json.dumps({"ip_src": "192.0.2.9", "ip_dst": "2001:db8::1", "packets": 1, "bytes": 9}).encode())
    chain = _pipeline(cfg, tmp_path)
    decode, sketch, _ = chain.stages
    chain.send(pack_batch([ORIGIN + 1] * len(messages), messages))

    path = tmp_path / "flows.jsonl"
    path.write_bytes(b"\n".join(messages) + b"\n")
    skips = SkipCounter()
    pairs, weights = read_all_records(
        path, "flow-json", cfg.hierarchy, skips, Weighting(weight="bytes", cap=weight_cap)
    )
    assert skips.as_dict() == {"wrong_family": 1} and weights is not None and weights.max() == weight_cap
    assert pairs[0].tolist() == src.tolist() and weights.tolist() == np.minimum(nbytes, weight_cap).tolist()
    assert [json.loads(unstamp(d)[1])["reason"] for d in decode.side_outputs[DEAD]] == ["wrong_family"]
    chain.end_of_input()
    released = _released_sketches(tmp_path, cfg, ORIGIN)
    # one arrival epoch: the batch command's records in canonical order (docs/ALGORITHMS.md §0)
    oracle = _oracle(cfg, [(None, pairs, weights)])
    assert set(released) == set(oracle) and {level for level, _ in released} == set(range(1, cfg.hierarchy.h + 1))
    assert max(len(mg.counters()) for mg in oracle.values()) == cfg.params.counters  # the fine nodes overflow κ
    assert released == oracle
    ((_, report),) = _reports(chain.outputs)
    assert report["params"]["h"] == 24 and report["budget"]["weight_cap"] == weight_cap
    assert sketch.state_keys("sketch-windows") == []
    chain.close()


def test_weighted_flow_pairs_at_user_level_cap_each_source_host_with_its_clipped_weights(tmp_path: Path) -> None:
    """A pair hierarchy over flow records weighted by bytes at user level per source host (cap 2,
    W = 1000, two cap shards, three key partitions): the cap operator keeps each source's first two
    records and passes their clipped weights on; the sketches equal an offline LevelSketches over the
    kept pairs and weights; the report states the guarantee over m·W."""
    cap, weight_cap = 2, 1000
    cfg = _cfg(
        tmp_path,
        "input.format=flow-json",
        "input.flow_weight=bytes",
        f"input.weight_cap={weight_cap}",
        "hierarchy.spec=ipv4:8,16 x ipv4:8,16",
        "privacy.unit_key=source-ipv4",
        f"privacy.unit_cap={cap}",
        "privacy.partitions=3",
        "flink.parallelism=2",
        windows=1,
    )
    rng = np.random.default_rng(13)
    heavy_src = 0xC0000201
    src, dst, nbytes, offsets = _flow_traffic(rng, 1200, heavy_src, 500)
    messages = [_flow_record(s, d, b, ORIGIN + t) for s, d, b, t in zip(src, dst, nbytes, offsets)]
    chain = _pipeline(cfg, tmp_path)
    _, capper, sketch, _ = chain.stages
    chain.send(pack_batch([ORIGIN + 1] * len(messages), messages))

    chain.end_of_input()
    clipped = clip_weights(nbytes, weight_cap)
    oracle = _oracle(cfg, [(src.astype(np.uint64), (src, dst), clipped)], cap)
    released = _released_sketches(tmp_path, cfg, ORIGIN)
    assert released == oracle and len({p for _, p in released}) == 3
    kept_total = sum(mg.total for (lv, _), mg in oracle.items() if lv == 1)
    for level in range(1, cfg.hierarchy.h + 1):  # every node sees the kept records' clipped bytes only
        assert sum(mg.total for (lv, _), mg in released.items() if lv == level) == kept_total
    assert kept_total <= cap * weight_cap * len(np.unique(src)) and kept_total < int(nbytes.sum()) // 10
    ((_, report),) = _reports(chain.outputs)
    assert report["budget"]["unit"] == "user" and report["budget"]["unit_cap"] == cap
    assert "each record weighted by bytes clipped at 1000" in report["budget"]["guarantee"]
    assert capper.state_keys("cap-entries") == [] and capper.pending_timers() == []
    chain.close()


def test_the_cap_operator_forwards_the_weights_of_the_records_it_keeps(tmp_path: Path) -> None:
    """A unit payload with weights: the cap operator's sketch payloads carry the kept records'
    weights (not the dropped ones'), as sketch_payloads of the kept values and weights would."""
    cfg = _cfg(
        tmp_path,
        "input.format=flow-json",
        "input.flow_weight=packets",
        "input.weight_cap=50",
        "privacy.unit_key=source-ipv4",
        "privacy.unit_cap=1",
        windows=1,
    )
    units = np.array([7, 7, 8, 7, 8, 9], dtype=np.uint64)
    values = np.array([1, 2, 3, 4, 5, 6], dtype=np.uint32) << np.uint32(8)
    weights = np.array([10, 20, 30, 40, 50, 5], dtype=np.int64)
    ((shard, payload),) = list(unit_payloads(values, units, 1, weights))
    with _cap(cfg) as capper:
        assert capper.process((shard, ORIGIN, ORIGIN, payload, b"")) == []  # buffered until its epoch ends
        out = capper.advance_watermark(ORIGIN + 100)
    # per unit, its first record in canonical order (by value): 7 → 1<<8, 8 → 3<<8, 9 → 6<<8
    keep = np.array([True, False, True, False, False, True])
    expected = [(p, ORIGIN, ORIGIN, b, lab) for p, b, lab in sketch_payloads(values[keep], cfg, weights[keep])]
    assert out == expected
    assert out != [(p, ORIGIN, ORIGIN, b, lab) for p, b, lab in sketch_payloads(values[keep], cfg, None)]


@pytest.mark.parametrize("kind", ["path", "pair"])
def test_packed_values_keyed_by_the_sketch_step_survive_a_restore_with_their_labels(tmp_path: Path, kind: str) -> None:
    """Paths and IPv4 pairs travel to the sketch step as packed values (no keys, no labels: the
    decode step ships a few bytes an element), and the sketch step keys them with the window's key.
    A sketch operator restored mid-window — a fresh operator whose keyed hierarchies have seen none
    of the values applied before the checkpoint — releases byte for byte what the uninterrupted one
    does, labels included: the labels of the keys the applied sketches hold were kept in state."""
    more = {
        "path": ["input.format=path", "hierarchy.spec=path:3"],
        "pair": ["input.format=packed-ipv4-pairs", "hierarchy.spec=ipv4:16,32 x ipv4:16,32"],
    }[kind]
    rng = np.random.default_rng(9)
    log = []  # (record timestamp, message): 2 windows of 4 epochs with data, in time order
    for window in range(2):
        for epoch in (0, 1, 3, 7):
            values = _heavy_window(rng)[:300]
            t = ORIGIN + window * W + epoch * 100 + int(rng.integers(0, 100))
            if kind == "path":
                messages = _heavy_paths(values)
            else:
                sources = np.where(np.arange(values.size) % 2 == 0, np.uint32(HEAVY_24 + 1), values[::-1])
                values = np.where(np.arange(values.size) % 2 == 0, np.uint32(HEAVY_24 + 2), values)  # a heavy host pair
                pairs = np.stack([sources, values], axis=1).astype(">u4")
                messages = [pairs[i : i + 10].tobytes() for i in range(0, len(pairs), 10)]
            if window == 0 and epoch == 0:  # heavy in window 0, never seen after the checkpoint:
                messages += [b"z/z/z" if kind == "path" else _pairs(np.array([7]), np.array([9]))[0]] * 600
            log += [(t, m) for m in messages]  # its label can only come from the state
    # a checkpoint inside window 0, at its epoch 3: epochs 0 and 1 were applied, epoch 3 is buffered
    cut = next(i for i, (t, _) in enumerate(log) if t >= ORIGIN + 300) // 5 * 5 + 5

    def run(restore: bool, folder: Path) -> list[bytes]:
        cfg = _cfg(folder, *more, "privacy.counters=16", windows=2)
        chain = Chain(_decode(cfg), _sketch(cfg)).open()
        shipped = [r for r in sketch_payloads_of(cfg, log[:5]) if len(r[3]) >= 16]  # (not the ticks)
        assert {int(np.frombuffer(r[3], np.int64, 1)[0]) for r in shipped} == {6}  # packed values (wire._VALUES)
        assert not any(r[4] for r in shipped)  # and no labels
        for i in range(0, len(log), 5):
            if restore and i == cut:
                sketch = chain.stages[1]
                assert sketch.state_keys("sketch-windows"), "no epoch was applied before the checkpoint"
                snapshot = sketch.snapshot()
                chain.close()
                chain = Chain(_decode(cfg), _sketch(cfg, restore=snapshot)).open()
            part = log[i : i + 5]
            chain.send(pack_batch([t for t, _ in part], [m for _, m in part]))
            chain.advance_watermark(part[-1][0])  # the broker's clock after these messages
        chain.end_of_input()
        out = [o for o in chain.outputs if o[0] >= 0]  # the releases (not the ticks)
        chain.close()
        return out

    whole, restored = run(False, tmp_path / "whole"), run(True, tmp_path / "restored")
    assert len(whole) == 2 * (3 if kind == "path" else 8), len(whole)  # every level of both windows
    assert restored == whole
    named = [pickle.loads(r).labels or {} for _, r in whole]
    shown = {label for labels in named for label in labels.values()}
    assert ("z/z/z" if kind == "path" else (7, 9)) in shown, shown  # (pairs: the /32 x /32 node's)


def sketch_payloads_of(cfg, log: list[tuple[int, bytes]]) -> list[tuple]:
    """The decode step's records of ``log`` (one batch)."""
    decode = _decode(cfg).open()
    out = decode.process(pack_batch([t for t, _ in log], [m for _, m in log]))
    decode.close()
    return out
