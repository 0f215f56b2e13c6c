"""The stream job's operators: thin PyFlink adapters around plain, unit-tested logic.

What they send each other is in :mod:`dphhh.stream.wire`; their logic is unit-tested in process by
``tests/harness.py`` (fake runtime context, keyed state, timers).

* :class:`DecodeOperator` (``decode``): message bytes → per-(level, partition) key batches tagged
  with their window (:func:`dphhh.stream.decode_batch.decode_batch`: the public schedule's per-element
  acceptance); clock records skipped; bad and rejected records to the dead-letter side output
  (reason + original bytes).
* :class:`CapOperator` (``cap``, keyed by unit shard; user-level privacy only): keeps at most
  ``privacy.unit_cap`` elements (records) per privacy unit and window (arrival order), drops the
  excess, and forwards the kept values — with their weights, clipped by ``decode``, for weighted
  records — to the sketch partitions.
* :class:`SketchOperator` (``sketch``, keyed by key partition): the h level sketches of that
  partition, per window, in keyed MapState (one keyed record per message and partition carries
  every level's keys); at the window's scheduled release time it runs
  :func:`dphhh.privacy.window.release_sketch` for each level and emits the **noisy** releases only.
* :class:`ReleaseOperator` (``release``, one key): publishes every window of the public schedule
  once, at its scheduled time, through :class:`~dphhh.stream.assembler.WindowAssembler` (durable ledger
  first, then the JSON-lines file, then the Kafka sink), whether or not any element arrived.

Each operator has a stable id (its Flink ``uid``, its state names' prefix and its metric group).
Raw counts and addresses never reach a log line, a metric or an exception message; the only
counters are the public schedule's (windows released, republished, refused) and the dead letters
of records that are not elements (docs/ALGORITHMS.md §0.1 f).
"""

from __future__ import annotations

import logging
import os
import pickle
import secrets
from pathlib import Path
from typing import Any

import numpy as np

from dphhh.connectors.decode import REASONS, MessageDecoder
from dphhh.connectors.report_sink import JsonLinesReportFile, ReportSinkError, ReportsTopic
from dphhh.connectors.skips import is_unparsable
from dphhh.privacy.unit_cap import UnitCap, unit_keys_of
from dphhh.privacy.window import release_sketch
from dphhh.sketches.errors import OperationalError, UsageError
from dphhh.sketches.keyed import KeySecret
from dphhh.sketches.misra_gries import clip_weights

from .assembler import WindowAssembler, noise_source_factory, sketch_id
from .clock import shared_ticker, stop_shared_ticker
from .config import JobConfig
from .decode_batch import decode_batch
from .epochs import AddressBatch, Batch, CapWindow, SketchWindow, merge_labels
from .ledger import LedgerError, ReleaseLedger, job_key_secret, private_dir
from .message_batch import BatchFormatError
from .publisher import ReportPublisher
from .schedule import LIVE, REPLAY
from .wire import (
    dead_letter_record,
    pack_sketches,
    prefix_masks,
    sketch_payloads,
    stamp,
    unit_payloads,
    unpack_sketch_batch,
    unpack_sketches,
    unpack_unit_payload,
)

MAX_WATERMARK = 2**63 - 1
_LOG = logging.getLogger(__name__)

try:  # PyFlink is needed to run the job, not to import the plain logic above
    from pyflink.common import Types
    from pyflink.datastream import KeyedProcessFunction, OutputTag, ProcessFunction, RuntimeContext
    from pyflink.datastream.state import MapStateDescriptor, ValueStateDescriptor
except ImportError:  # pragma: no cover - exercised only without apache-flink installed
    KeyedProcessFunction = ProcessFunction = object
    Types = OutputTag = RuntimeContext = MapStateDescriptor = ValueStateDescriptor = None

__all__ = [
    "DecodeOperator",
    "CapOperator",
    "SketchOperator",
    "ReleaseOperator",
    "STEP_IDS",
    "START",
    "TICK_WINDOW",
    "COUNTED_REASONS",
]

STEP_IDS = {
    "source": "kafka-source",
    "batch": "batch",
    "decode": "decode",
    "cap": "cap",
    "sketch": "sketch",
    "release": "release",
    "reports": "reports-sink",
    "dead_letter": "dead-letter-sink",
}
METRIC_GROUP = "dphhh"


def _bytes_type():
    return Types.PRIMITIVE_ARRAY(Types.BYTE())


def dead_letter_tag():
    """The side output of bad records (JSON bytes: reason and base64 of the record)."""
    return OutputTag(STEP_IDS["dead_letter"], _bytes_type())


TICK_WINDOW = -1  # the window field of a tick record (decode -> cap -> sketch -> release)


def _open_common(op, runtime_context, step: str) -> None:
    """What every operator sets up in ``open``: its configuration, the public schedule (its origin
    resolved at submission, :func:`dphhh.stream.ledger.job_schedule`) and metric counters."""
    from .config import load_config_values

    op.cfg = load_config_values(op.cfg_values)
    op.schedule = op.cfg.schedule(op.origin_ms)
    op.metrics = _Counters(runtime_context.get_metrics_group().add_group(METRIC_GROUP).add_group(STEP_IDS[step]))


class _Counters:
    """Counters of one metric group, created on first use with a label per name."""

    def __init__(self, group) -> None:
        self.group = group
        self.counters: dict[str, Any] = {}

    def inc(self, name: str, n: int = 1) -> None:
        counter = self.counters.get(name)
        if counter is None:
            counter = self.counters[name] = self.group.counter(name)
        counter.inc(n)


#: Dead-letter reasons that may be counted in the job's metrics: unparsable records (operational; the
#: same classification as the batch commands', :data:`dphhh.connectors.skips.UNPARSABLE`) — and of those only
#: the ones that hold no element (:meth:`dphhh.connectors.decode.MessageDecoder.holds_element`): a valid
#: address beside a bad time, a missing unit, bad counters or an oversized message is dead-lettered
#: but not counted. Valid records of another kind (``wrong_family``, a path of another depth), elements
#: the schedule rejects (:data:`dphhh.stream.schedule.ELEMENT_REASONS`), records without a timestamp and bad
#: batches are dead-lettered but never counted (docs/ALGORITHMS.md §0.1 f).
COUNTED_REASONS = frozenset(r for r in REASONS if is_unparsable(r))


class DecodeOperator(ProcessFunction):
    """Decode a batch of messages (from the Java ``MessageBatcher``), skip clock records, dead-letter
    bad and rejected ones, expand the rest per level and partition, tagged with their window and
    arrival epoch (stateless)."""

    def __init__(self, cfg_values: dict, origin_ms: int) -> None:
        self.cfg_values = cfg_values
        self.origin_ms = origin_ms  # the schedule's public origin (resolved at submission)

    def open(self, runtime_context: RuntimeContext) -> None:
        _open_common(self, runtime_context, "decode")
        # the deployment's key: hashed sketch keys, and JSON unit keys (keyed, docs/calibration.md §8.1)
        self.secret = job_key_secret(self.cfg) if self.cfg.uses_key_secret else None
        self.decoder = message_decoder_of(self.cfg, self.secret)
        self.tag = dead_letter_tag()
        self.ticked: int | None = None  # the next operators are ticked once after open and at each new clock window
        self.user_level = self.cfg.unit.kind == "user"
        self.pairs = self.cfg.hierarchy.kind == "pair"  # docs/ALGORITHMS.md §11
        self.shards = self.cfg.flink.parallelism
        # the keys of the next operator: the sketch partitions, or (user level) the cap shards, which
        # pass the ticks on to the sketch partitions
        self.tick_keys = range(self.shards if self.user_level else self.cfg.params.partitions)
        self.slow_s = max(0, self.cfg.testing.slow_decode_ms) / 1000
        self.slow = self.slow_s > 0 and runtime_context.get_index_of_this_subtask() == 1
        self.bad_batch_logged = False
        self.warm = WarmUp(warm_key_kernels if self.cfg.hierarchy.hashed_keys else lambda: None)

    def process_element(self, value: bytes, ctx: ProcessFunction.Context):
        self.warm.ready()
        watermark = ctx.timer_service().current_watermark()  # the broker's clock (live), or none (replay)
        mark = self.schedule.start_of(watermark) if watermark > -MAX_WATERMARK else -1
        if self.ticked is None or mark > self.ticked:
            # A tick (carrying the window the clock is in) makes every sketch operator register the
            # release timers of that window and the next — so that every sketch releases every
            # window, empty or not — and re-register those of its open windows (after a restore,
            # timers registered just before the checkpoint may be missing from it); the release
            # operator registers its next window's.
            self.ticked = mark
            for key in self.tick_keys:
                yield key, TICK_WINDOW, mark, b"", b""
        if self.slow:  # test hook (testing.slow_decode_ms): subtask 1 lags behind
            import time

            time.sleep(self.slow_s)
        try:
            outcome = decode_batch(value, self.decoder, self.schedule)
        except BatchFormatError:  # jar and worker disagree: keep the bytes, never crash the job
            if not self.bad_batch_logged:  # once: whether it happens depends on the jar, not the data
                self.bad_batch_logged = True
                _LOG.error("dphhh decode: a batch record this worker cannot read (jar and worker disagree)")
            yield self.tag, stamp(dead_letter_record("bad_batch", value, None), None)
            return
        for reason, message, timestamp, counted in outcome.dead:
            if counted:  # unparsable and holding no element (docs/ALGORITHMS.md §0.1 f)
                self.metrics.inc(f"dead_letters_{reason}")
            own = timestamp if timestamp is not None and timestamp >= 0 else None
            yield self.tag, stamp(dead_letter_record(reason, message, timestamp), own)
        for start, epoch, values, units, weights in outcome.windows:
            if self.pairs:  # (first, second): the decoder's first addresses travel as its "units",
                assert units is not None  # which stay the unit keys at user level (the source host)
                values = (units.astype(np.uint32), values)
            if weights is not None:  # weighted records: clipped to the public cap W here, once
                weights = clip_weights(weights, self.cfg.unit.weight_cap, "decode")
            if self.user_level:  # the cap operator counts records and passes their clipped weights on
                assert units is not None  # user level: the decoder reads every record's unit key
                for shard, payload in unit_payloads(values, units, self.shards, weights):
                    yield shard, start, epoch, payload, b""
                continue
            hierarchy = window_hierarchy(self.cfg, self.secret, start)
            for p, payload, labels in sketch_payloads(values, self.cfg, weights, hierarchy):
                yield p, start, epoch, payload, labels


def warm_key_kernels() -> None:
    """Load the compiled kernels of hashed keys (SipHash of 64/128-bit values, keyed BLAKE2b of
    paths and IPv6 prefixes over one and several blocks, the pair-node key table, its growth
    included) on throwaway values: the decode step of a hashed-key hierarchy
    needs them, and otherwise the first element of such a kind would pay their load
    (docs/ALGORITHMS.md §0.1 h)."""
    from dphhh.sketches._pair_table import KeyTable
    from dphhh.sketches.keyed import KeySecret, siphash_words

    words = np.arange(8, dtype=np.uint64)
    siphash_words((1, 2), words, words)
    KeySecret(bytes(32)).digests(1, [b"a", bytes(300)])
    table = KeyTable(4)
    keys = np.arange(40, dtype=np.int64)
    table.enter(keys, keys, keys)  # grows while it holds them
    table.lookup(keys[:4])


def window_hierarchy(cfg: JobConfig, secret: KeySecret | None, window: int):
    """The configured hierarchy keyed with ``window``'s hash key (hashed-key hierarchies: a fresh
    object, its label tables freed with it; exact-key hierarchies: the configured object)."""
    if not cfg.hierarchy.hashed_keys:
        return cfg.hierarchy
    return cfg.hierarchy.keyed(None if secret is None else secret.window(window))


def message_decoder_of(cfg: JobConfig, secret: KeySecret | None = None) -> MessageDecoder:
    """The decoder of the job's input messages (``input.*``, the hierarchy's depth, the privacy unit).

    ``secret``: the deployment's key (:func:`dphhh.stream.ledger.job_key_secret`), which JSON unit values
    are hashed under; the decode operator always passes it. Without it (``stream.job`` reads the
    flow parser's settings only) JSON unit keys would use the public fallback key of
    :func:`dphhh.privacy.unit_cap.unit_keys_of`."""
    i = cfg.input
    return MessageDecoder(
        i.format,
        max_message_bytes=i.max_message_bytes,
        json_field=i.json_field,
        json_time_field=i.json_time_field or None,
        unit_field=cfg.privacy.unit_field,
        path_depth=cfg.hierarchy.h,
        flow_schema=i.flow_schema,
        flow_key=i.flow_key,
        flow_weight=i.flow_weight,
        source_units=cfg.privacy.source_units,
        unit_secret=secret if cfg.privacy.unit_field is not None else None,
    )


def release_timer(schedule, window: int) -> int:
    """The event-time timer at which the operators release ``window``: its scheduled release time
    (live), or the end of input (replay). A replay's watermark may follow the broker's clock records
    of its input log (:func:`dphhh.stream.job.replay_clock`), which lets complete epochs be applied while
    the log is read; its windows are still released only at the end, all together: every element
    of the public range counts, whenever it was appended (docs/ALGORITHMS.md §0.1 d)."""
    return schedule.release_time(window) if schedule.mode == LIVE else MAX_WATERMARK


def _epoch_passed(schedule, epoch: int, ctx) -> bool:
    """Whether the watermark (the clock) has passed the end of arrival epoch ``epoch``: a batch of
    it arrives late (only a broker clock that stepped back appends one) — decided by the clock alone."""
    return epoch + schedule.epoch_ms <= ctx.timer_service().current_watermark()


def _released(schedule, window: int, ctx) -> bool:
    """Whether ``window`` has been released at the current watermark (live: a batch for it can then
    only come from a broker clock that went backwards; it is dropped, and nothing about it is exported)."""
    return release_timer(schedule, window) <= ctx.timer_service().current_watermark()


def _windows_to_arm(schedule, mark: int) -> list[int]:
    """The windows a tick with clock window ``mark`` (−1: no clock yet) makes every sketch arm: the
    current window and the next (live), or the first of the public range (replay: every window of
    a replay has the one end-of-input timer, :func:`release_timer`)."""
    if schedule.mode == REPLAY:
        return [schedule.origin_ms]
    if mark < 0:
        return []
    return [w for w in (mark, mark + schedule.size_ms) if schedule.in_schedule(w)]


class _Entries:
    """Per-key buffered entries in a MapState (id → bytes) and the next id in a ValueState: what a
    checkpoint must hold of a window between its batches' arrival and their application. A batch
    costs one ``put`` of its own bytes — never a rewrite of the window's state."""

    def __init__(self, runtime_context, name: str) -> None:
        self.map = runtime_context.get_map_state(MapStateDescriptor(f"{name}-entries", Types.LONG(), _bytes_type()))
        self.next = runtime_context.get_state(ValueStateDescriptor(f"{name}-next-entry", Types.LONG()))

    def add(self, data: bytes) -> int:
        seq = self.next.value() or 0
        self.next.update(seq + 1)
        self.map.put(seq, data)
        return seq

    def remove(self, seqs) -> None:
        for seq in seqs:
            self.map.remove(seq)

    def items(self):
        return sorted(self.map.items())


def _entry(kind: int, window: int, epoch: int, body: Any) -> bytes:
    return pickle.dumps((kind, window, epoch, body), protocol=5)


_PENDING, _LABELS, _COUNTS = 0, 1, 2


class CapOperator(KeyedProcessFunction):
    """Keyed by unit shard: at most ``privacy.unit_cap`` elements per unit and window go on to the
    sketches; the excess is dropped (and not counted anywhere: the number would track the data,
    docs/ALGORITHMS.md §0.1 f). Which ones: the first in canonical order — epoch by epoch (an epoch
    is capped when the watermark passes its end, at an event-time timer, so that its kept elements
    reach the sketches before that watermark does), within an epoch sorted by (unit, value, weight)
    (:class:`dphhh.stream.epochs.CapWindow`). A weighted record counts as one element here and reaches the
    sketches with its weight (already clipped to W by ``decode``): one unit is then at most m·W unit
    elements, the group size the mechanism is calibrated over. A batch costs O(its size): only the
    counts an epoch changed are checkpointed."""

    def __init__(self, cfg_values: dict, origin_ms: int) -> None:
        self.cfg_values = cfg_values
        self.origin_ms = origin_ms  # the schedule's public origin (resolved at submission)

    def open(self, runtime_context: RuntimeContext) -> None:
        _open_common(self, runtime_context, "cap")
        self.entries = _Entries(runtime_context, STEP_IDS["cap"])
        self.partitions = range(self.cfg.params.partitions)
        self.secret = job_key_secret(self.cfg) if self.cfg.hierarchy.hashed_keys else None
        self.json_units = self.cfg.privacy.unit_field is not None  # 128-bit keyed unit keys
        self.windows: dict[tuple[int, int], CapWindow] = {}  # (shard, window) → its cap and epochs
        self.count_seqs: dict[tuple[int, int], list[int]] = {}
        self.loaded: set[int] = set()
        self._warm_up()

    def _warm_up(self) -> None:
        """Run every kernel of the cap once on throwaway units (loaded or compiled now, at open):
        otherwise the first element of a worker's life, or the first batch that makes a window's
        unit table grow, would pay the compile — a CPU burst that one element triggers (docs/ALGORITHMS.md
        §0.1 h)."""
        cap = UnitCap(self.cfg.unit.cap)
        cap.keep(np.arange(4, dtype=np.uint64))
        cap.keep(np.arange(64, dtype=np.uint64))  # the table grows while it holds units
        other = UnitCap.from_bytes(cap.to_bytes())
        other.restore_counts(np.arange(2, dtype=np.uint64), other.counts_of(np.arange(2, dtype=np.uint64)))
        wide = unit_keys_of(range(4))  # 128-bit (JSON) unit keys: the same kernels, their own paths
        cap.keep(wide)
        UnitCap.from_bytes(cap.to_bytes()).counts_of(wide)

    def _window(self, shard: int, window: int) -> CapWindow:
        found = self.windows.get((shard, window))
        if found is None:
            found = self.windows[(shard, window)] = CapWindow(UnitCap(self.cfg.unit.cap))
        return found

    def _check_units(self, units: np.ndarray) -> np.ndarray:
        """``units``, if they are of the deployment's kind: JSON unit values as 128-bit keyed keys.
        A checkpoint of the previous version holds them as unkeyed 64-bit keys, which cannot be
        turned into the new ones: resuming from it would split a unit of the window in flight in
        two (up to 2m of its elements kept), so it is refused."""
        if self.json_units and not np.asarray(units).dtype.names:
            raise OperationalError(
                "CapOperator: the checkpoint holds JSON unit keys of the previous, unkeyed 64-bit format "
                "(docs/calibration.md §8.1); start this deployment without it (flink.resume = none)"
            )
        return units

    def _load(self, shard: int) -> None:
        """After a restore: rebuild this shard's windows from its checkpointed entries (once)."""
        if shard in self.loaded:
            return
        self.loaded.add(shard)
        for seq, data in self.entries.items():
            kind, window, epoch, body = pickle.loads(data)
            self._check_units(body[0])
            cw = self._window(shard, window)
            if kind == _COUNTS:
                units, kept, applied = body
                cw.cap.restore_counts(units, kept)
                cw.applied_through = applied if cw.applied_through is None else max(cw.applied_through, applied)
                self.count_seqs.setdefault((shard, window), []).append(seq)
            else:
                units, values, weights = body
                cw.pending.setdefault(epoch, []).append((seq, units, values, weights))

    def _emit(self, window: int, epoch: int, kept: Any, weights: np.ndarray | None):
        if not len(kept[0] if isinstance(kept, tuple) else kept):
            return
        hierarchy = window_hierarchy(self.cfg, self.secret, window)
        for p, out, labels in sketch_payloads(kept, self.cfg, weights, hierarchy):
            yield p, window, epoch, out, labels

    def _apply(self, shard: int, window: int, cw: CapWindow, epochs: list[int]):
        for epoch, seqs, kept, weights, touched, counts in cw.apply(epochs):
            self.count_seqs.setdefault((shard, window), []).append(
                self.entries.add(_entry(_COUNTS, window, epoch, (touched, counts, epoch)))
            )
            self.entries.remove(seqs)
            yield from self._emit(window, epoch, kept, weights)

    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        shard, window, mark, payload, _ = value
        if window == TICK_WINDOW:
            self._load(shard)
            for s, open_window in list(self.windows):
                if s == shard:
                    ctx.timer_service().register_event_time_timer(release_timer(self.schedule, open_window))
            for p in self.partitions:
                yield p, TICK_WINDOW, mark, b"", b""
            return
        if _released(self.schedule, window, ctx):
            return
        self._load(shard)
        epoch = mark
        if (shard, window) not in self.windows:
            ctx.timer_service().register_event_time_timer(release_timer(self.schedule, window))
        cw = self._window(shard, window)
        units, values, weights = unpack_unit_payload(payload)
        self._check_units(units)
        if _epoch_passed(self.schedule, epoch, ctx) or (cw.applied_through is not None and epoch <= cw.applied_through):
            # the clock has passed its epoch (a broker clock that stepped back): capped at once, on
            # its own — decided by the clock alone (applied_through only after a restore)
            kept, kept_weights, touched, counts = cw.apply_group([(-1, units, values, weights)])
            self.count_seqs.setdefault((shard, window), []).append(
                self.entries.add(_entry(_COUNTS, window, epoch, (touched, counts, cw.applied_through)))
            )
            yield from self._emit(window, epoch, kept, kept_weights)
            return
        seq = self.entries.add(_entry(_PENDING, window, epoch, (units, values, weights)))
        cw.add(epoch, seq, units, values, weights)
        ctx.timer_service().register_event_time_timer(epoch + self.schedule.epoch_ms)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext):
        shard = ctx.get_current_key()
        self._load(shard)
        watermark = ctx.timer_service().current_watermark()  # every epoch it has passed, at once
        for s, window in sorted(k for k in self.windows if k[0] == shard):
            cw = self.windows[(s, window)]
            releasing = release_timer(self.schedule, window) <= timestamp
            epochs = sorted(cw.pending) if releasing else cw.due(max(timestamp, watermark), self.schedule.epoch_ms)
            yield from self._apply(shard, window, cw, epochs)
            if releasing:  # the window is released downstream at this watermark: its cap is done
                self.entries.remove(self.count_seqs.pop((shard, window), []))
                del self.windows[(shard, window)]


class WarmUp:
    """A data-free warm-up (compiled kernels loaded, code paths run once) on a thread of its own,
    started at an operator's open: it overlaps the first input instead of delaying it, and
    :meth:`ready` — called before the first work that needs it — waits for it and re-raises its
    error. Its cost is the same in every run whatever the data (docs/ALGORITHMS.md §0.1 h)."""

    def __init__(self, work) -> None:
        import threading

        self._error: BaseException | None = None
        self._done = False

        def run() -> None:
            try:
                work()
            except BaseException as exc:  # re-raised by ready()
                self._error = exc

        self._thread = threading.Thread(target=run, name="dphhh-warm-up", daemon=True)
        self._thread.start()

    def ready(self) -> None:
        if not self._done:
            self._thread.join()
            self._done = True
        if self._error is not None:
            raise self._error


class SketchOperator(KeyedProcessFunction):
    """Keyed by partition: the h level sketches per window, fed epoch by epoch in canonical order
    (:class:`dphhh.stream.epochs.SketchWindow`); at every window's scheduled release time — empty or not,
    the same work — it runs :func:`dphhh.privacy.window.release_sketch` for each level and emits the
    **noisy** releases only."""

    def __init__(self, cfg_values: dict, origin_ms: int) -> None:
        self.cfg_values = cfg_values
        self.origin_ms = origin_ms  # the schedule's public origin (resolved at submission)

    def open(self, runtime_context: RuntimeContext) -> None:
        _open_common(self, runtime_context, "sketch")
        self.state = runtime_context.get_map_state(
            MapStateDescriptor(f"{STEP_IDS['sketch']}-windows", Types.LONG(), _bytes_type())
        )
        self.entries = _Entries(runtime_context, STEP_IDS["sketch"])
        # the newest window this key released: PyFlink registers timers asynchronously, so a timer
        # (re-)registered for a time the watermark has passed may fire again — a window is released once
        self.released = runtime_context.get_state(
            ValueStateDescriptor(f"{STEP_IDS['sketch']}-released-through", Types.LONG())
        )
        self.windows: dict[tuple[int, int], SketchWindow] = {}  # (partition, window) → its sketches, epochs, labels
        # payloads of packed values (wire._VALUES) are keyed here, by the window's keyed hierarchy,
        # whose label tables then name their keys (one per open window, freed at its release)
        self.secret = job_key_secret(self.cfg) if self.cfg.hierarchy.hashed_keys else None
        self.keyed: dict[int, Any] = {}
        self.loaded: set[int] = set()
        self.noise_for = noise_source_factory(self.cfg.seed, attempt_salt(self.cfg))
        dump = self.cfg.testing.debug_sketch_dir
        self.dump_dir = Path(dump) if dump else None
        self.warm = WarmUp(self._warm_up)

    def _warm_up(self) -> None:
        """Run the release path once on a throwaway sketch (compiled kernels loaded, code paths
        warm), so that a window's release costs the same from the first window on — a first release
        slower by a worker's start-up would make the first report late (docs/ALGORITHMS.md §0.1 g)."""
        from dphhh.privacy.randomness import SeededRandomSource

        if self.cfg.hierarchy.hashed_keys:  # packed values are keyed here
            warm_key_kernels()
        sw = self._new_window()
        sw.add(0, Batch(-1, [np.arange(8, dtype=np.int64)] * self.cfg.hierarchy.h, None))
        if sw.prefix_masks is not None:  # and the address batches' path (IPv4)
            sw.add(1, AddressBatch(-1, np.arange(8, dtype=np.uint32)))
            sw.add(
                2,
                AddressBatch(
                    -1, np.arange(8, dtype=np.uint32), np.ones(8, dtype=np.uint32), np.ones(8, dtype=np.int64)
                ),
            )
        for level, sketch in enumerate(sw.final(), start=1):
            unpack_sketches(pack_sketches([sketch]))
            release_sketch(
                level,
                0,
                sketch.counters(),
                sketch.total,
                params=self.cfg.params,
                h=self.cfg.hierarchy.h,
                rng=SeededRandomSource(np.random.default_rng(0)),
            )

    def _hierarchy(self, window: int):
        """``window``'s keyed hierarchy (the decode step's :func:`window_hierarchy`: the same keys)."""
        found = self.keyed.get(window)
        if found is None:
            found = self.keyed[window] = window_hierarchy(self.cfg, self.secret, window)
        return found

    def _labels_held(self, window: int, sw: SketchWindow) -> dict[int, dict[int, Any]]:
        """The labels of the hashed keys ``sw``'s sketches hold that its label table lacks: keys of
        packed values, named by the window's keyed hierarchy (``{}`` for every other hierarchy)."""
        hierarchy = self.keyed.get(window)
        if hierarchy is None or not hierarchy.hashed_keys or sw.sketches is None:
            return {}
        named = {}
        for level, sketch in enumerate(sw.sketches, start=1):
            known = sw.labels.get(level, {})
            missing = [k for k in sketch.counters() if k not in known]
            found = hierarchy.labels_of(np.array(missing, dtype=np.int64), level) if missing else {}
            if found:  # (exact pair nodes name themselves)
                named[level] = found
        return named

    def _keep_labels(self, window: int, sw: SketchWindow) -> None:
        """After an update: the labels of keys the sketches now hold, learnt from packed values, go
        into the window's label table and state (a restored worker's keyed hierarchy has not seen
        the values applied before the checkpoint), bounded as the decoded labels are."""
        named = self._labels_held(window, sw)
        if named:
            merge_labels(sw.labels, named)
            sw.label_seqs.append(self.entries.add(_entry(_LABELS, window, -1, pickle.dumps(named, protocol=5))))
        if sw.labels_to_prune():  # labels bounded by what the sketches hold, not by the window
            sw.prune_labels()
            self.entries.remove(sw.label_seqs)
            sw.label_seqs = [self.entries.add(_entry(_LABELS, window, -1, pickle.dumps(sw.labels, protocol=5)))]

    def _new_window(self) -> SketchWindow:
        return SketchWindow(self.cfg.hierarchy.h, self.cfg.params.counters, prefix_masks(self.cfg.hierarchy))

    def _window(self, partition: int, window: int) -> SketchWindow:
        found = self.windows.get((partition, window))
        if found is None:
            found = self.windows[(partition, window)] = self._new_window()
        return found

    def _load(self, partition: int) -> None:
        """After a restore: rebuild this partition's windows from its checkpointed state (once)."""
        if partition in self.loaded:
            return
        self.loaded.add(partition)
        for window, data in self.state.items():
            applied, packed = pickle.loads(data)
            sw = self._window(partition, window)
            sw.sketches, sw.applied_through = unpack_sketches(packed), applied
        for seq, data in self.entries.items():
            kind, window, epoch, body = pickle.loads(data)
            sw = self._window(partition, window)
            if kind == _LABELS:
                merge_labels(sw.labels, pickle.loads(body))
                sw.label_seqs.append(seq)
            else:
                if not sw.add(
                    epoch, unpack_sketch_batch(seq, body, self._hierarchy(window))
                ):  # applied entries leave with their epoch
                    raise UsageError(f"SketchOperator: Possible corruption: entry {seq} of an applied epoch {epoch}")

    def _save(self, window: int, sw: SketchWindow) -> None:
        assert sw.sketches is not None
        self.state.put(window, pickle.dumps((sw.applied_through, pack_sketches(sw.sketches)), protocol=5))

    def _arm(self, ctx, window: int) -> None:
        """Register ``window``'s release timer unless the watermark has passed its time already."""
        if (
            self.schedule.in_schedule(window)
            and release_timer(self.schedule, window) > ctx.timer_service().current_watermark()
        ):
            ctx.timer_service().register_event_time_timer(release_timer(self.schedule, window))

    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        partition, window, mark, payload, labels = value
        self._load(partition)
        if window == TICK_WINDOW:  # arm this window and the next (replay: the range), and every open one
            for w in {*_windows_to_arm(self.schedule, mark), *(w for p, w in self.windows if p == partition)}:
                self._arm(ctx, w)  # (a lagging subtask's tick may name a window released already)
            for (p, _), sw in self.windows.items():  # and the timers of their buffered epochs
                if p == partition:
                    for epoch in sw.pending:
                        ctx.timer_service().register_event_time_timer(epoch + self.schedule.epoch_ms)
            yield TICK_WINDOW, b""  # and let the release operator register its next window's
            return
        if _released(self.schedule, window, ctx):
            return
        epoch = mark
        if (partition, window) not in self.windows:
            self._arm(ctx, window)
        sw = self._window(partition, window)
        if labels:
            sw.label_seqs.append(self.entries.add(_entry(_LABELS, window, epoch, labels)))
            merge_labels(sw.labels, pickle.loads(labels))
        if _epoch_passed(self.schedule, epoch, ctx) or (sw.applied_through is not None and epoch <= sw.applied_through):
            # the clock has passed its epoch (a broker clock that stepped back): applied at once, on
            # its own — decided by the clock alone (applied_through only after a restore, before the
            # clock is read again)
            self.warm.ready()
            sw.apply_now(unpack_sketch_batch(-1, payload, self._hierarchy(window)))
            self._save(window, sw)
            self._keep_labels(window, sw)
        else:
            seq = self.entries.add(_entry(_PENDING, window, epoch, payload))
            sw.add(epoch, unpack_sketch_batch(seq, payload, self._hierarchy(window)))
            ctx.timer_service().register_event_time_timer(epoch + self.schedule.epoch_ms)

    def _apply_due(self, partition: int, watermark: int) -> None:
        """Apply every buffered epoch of ``partition`` the watermark has passed (complete: bounded
        memory, the same result), all of them in one update per level; called by the epochs' timers,
        so when an epoch is applied follows the clock only, never an element's arrival."""
        for (p, w), sw in list(self.windows.items()):
            if p == partition and (due := sw.due(watermark, self.schedule.epoch_ms)):
                self.warm.ready()
                self.entries.remove(sw.apply(due))
                self._save(w, sw)
                self._keep_labels(w, sw)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext):
        """An epoch's timer (its end) or a window's release timer (the same time may be both)."""
        partition = ctx.get_current_key()
        self._load(partition)
        # every epoch the clock has passed, at once (the timers of a jump of the watermark fire one
        # after the other: the first applies them all)
        self._apply_due(partition, ctx.timer_service().current_watermark())
        if self.schedule.mode == REPLAY:  # the end of input: every window of the range, in order
            if timestamp < MAX_WATERMARK:
                return  # an epoch's timer during a replay that follows a clock
            assert self.schedule.until_ms is not None  # a replay has an end
            windows = range(self.schedule.origin_ms, self.schedule.until_ms, self.schedule.size_ms)
        else:
            window = self.schedule.start_of_release_time(timestamp)
            if window % self.schedule.size_ms or not self.schedule.in_schedule(window):
                return  # an epoch's timer only
            windows = range(window, window + 1)
        for window in windows:
            yield from self._release(partition, window, ctx)

    def _release(self, partition: int, window: int, ctx):
        """Release ``window``'s sketches of ``partition`` (once: a timer may fire again, see open)."""
        done_through = self.released.value()
        if done_through is not None and window <= done_through:
            return  # released already
        self.warm.ready()
        self.released.update(window)
        sw = self.windows.pop((partition, window), None) or self._new_window()
        done = sw.apply_all()  # every epoch still held, in order
        sketches = sw.final()  # (empty sketches for an empty window)
        merge_labels(sw.labels, self._labels_held(window, sw))
        if not any(w == window for _, w in self.windows):
            self.keyed.pop(window, None)
        self.entries.remove(done + sw.label_seqs)
        self.state.remove(window)
        self._arm(ctx, window + self.schedule.size_ms)  # the next window is released even if it stays empty
        parts, h = self.cfg.params.partitions, self.cfg.hierarchy.h
        for level, sketch in enumerate(sketches, start=1):
            if self.dump_dir is not None:  # NON-PRIVATE test hook (testing.debug_sketch_dir, seeded runs only)
                write_attempt(
                    self.dump_dir, f"window-{window}-sketch-{sketch_id(level, partition, parts)}", sketch.to_bytes()
                )
            release = release_sketch(
                level,
                partition,
                sketch.counters(),
                sketch.total,
                params=self.cfg.params,
                h=h,
                rng=self.noise_for(window, level, partition),
                labels=sw.labels.get(level) if sw.labels else None,
            )
            yield window, pickle.dumps(release, protocol=5)


def write_private(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` (0600, in a 0700 folder): raw state is as private as raw input."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def attempt_salt(cfg: JobConfig) -> int:
    """A fresh nonzero salt for this operator attempt's seeded noise when the test hook
    ``testing.noise_per_attempt`` is on, else 0 (see :func:`dphhh.stream.assembler.noise_source_factory`)."""
    return secrets.randbits(62) | 1 if cfg.testing.noise_per_attempt else 0


def write_attempt(folder: Path, stem: str, data: bytes) -> Path:
    """Write ``data`` to the first free name of ``stem`` in ``folder`` — ``stem.bin``, then
    ``stem.attempt-1.bin``, … (0600, in a 0700 folder; never overwritten): every release attempt of a
    window keeps its own dump, so a test can check the state of the attempt whose report the ledger
    holds, not only the newest."""
    private_dir(folder)
    attempt = 0
    while True:
        path = folder / (f"{stem}.bin" if attempt == 0 else f"{stem}.attempt-{attempt}.bin")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            attempt += 1
            continue
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return path


FATAL_FILE = "fatal.txt"


def write_fatal(run_dir: str, message: str) -> None:
    """Leave ``message`` (paths and OS errors only, never data) for ``dphhh run``, which then stops
    the job instead of letting the restart strategy retry a failure that needs an operator."""
    try:
        path = Path(run_dir)
        path.mkdir(parents=True, exist_ok=True)
        (path / FATAL_FILE).write_text(message + "\n")
    except OSError:
        pass  # the same disk may be full: the restart strategy's limit still ends the job


class InjectedFailure(RuntimeError):
    """Raised once by the fault-injection hook (testing.fail_after_window), for tests."""


START = -2  # the window field of the job's one start record (see stream.job: the release operator's first timer)


class ReleaseOperator(KeyedProcessFunction):
    """One key: publishes every window of the public schedule exactly once, at its public time.

    Its timers follow the schedule, not the data: the first is registered for the schedule's first
    window when the job's start record (or a tick) arrives, and each release registers the next
    window's. A window is computed when the watermark — the broker's clock in live mode, end of
    input in a replay — passes its scheduled release time, from the releases every one of its
    sketches sent (the assembler fills in only windows a restart skipped), and then published by
    :class:`dphhh.stream.publisher.ReportPublisher` at the window's **publication time** (release time +
    ``window.publish_delay_ms``) on every surface — ledger, reports file, reports topic — so when a
    report appears says nothing about what its window held (docs/ALGORITHMS.md §0.1 g). A report
    not ready in time is published at once and counted (``reports_overdue``). In live mode this
    operator also runs the job's clock (:class:`dphhh.stream.clock.ClockTicker`)."""

    def __init__(self, cfg_values: dict, origin_ms: int, run_dir: str, kafka_options: dict | None = None) -> None:
        self.cfg_values = cfg_values
        self.origin_ms = origin_ms  # the schedule's public origin (resolved at submission)
        self.run_dir = run_dir
        self.kafka_options = kafka_options  # resolved at submission: workers do not see env: secrets

    def open(self, runtime_context: RuntimeContext) -> None:
        _open_common(self, runtime_context, "release")
        out = self.cfg.output
        ledger = ReleaseLedger(out.ledger_dir)
        ledger.claim(self.cfg.deployment_fingerprint())
        self.assembler = WindowAssembler(
            self.cfg.hierarchy,
            self.cfg.params,
            self.schedule,
            ledger,
            seed=self.cfg.seed,
            attempt_salt=attempt_salt(self.cfg),
            unit=self.cfg.unit,
            budget=self.cfg.budget,
            guard=self.cfg.guard,
            secret=job_key_secret(self.cfg) if self.cfg.hierarchy.hashed_keys else None,
            key_collision_delta=self.cfg.key_delta,
        )
        report_file = JsonLinesReportFile(out.reports_file) if out.reports_file else None
        topic = None
        if self.kafka_options is not None:
            topic = ReportsTopic(self.kafka_options, self.cfg.kafka.reports_topic, f"{self.cfg.kafka.group_id}-reports")
        if topic is not None:
            topic.connect()  # the producer's start-up is not the first report's (docs/ALGORITHMS.md §0.1 g)
        self.publisher = ReportPublisher(self.schedule, ledger, report_file, topic)
        self.pending = runtime_context.get_map_state(
            MapStateDescriptor(f"{STEP_IDS['release']}-pending", Types.LONG(), Types.PICKLED_BYTE_ARRAY())
        )
        self.next_window = runtime_context.get_state(
            ValueStateDescriptor(f"{STEP_IDS['release']}-next-window", Types.LONG())
        )
        # warm-up (see SketchOperator._warm_up): the first window's report costs what later ones do;
        # nothing is stored (the assembler stores nothing) and the result is discarded
        self.assembler.report(self.schedule.origin_ms, [])
        self.fail_after = self.cfg.testing.fail_after_window
        self.released_here = 0
        self.ticker = None
        if self.schedule.mode == LIVE and self.kafka_options is not None:
            run_dir = self.run_dir
            self.ticker = shared_ticker(
                self.kafka_options,
                self.cfg.kafka.input_topic,
                self.cfg.window.clock_tick_ms,
                on_fatal=lambda message: write_fatal(run_dir, message),
            )

    def close(self) -> None:
        if self.ticker is not None:
            assert self.kafka_options is not None  # the ticker is only started with them (open)
            stop_shared_ticker(self.kafka_options, self.cfg.kafka.input_topic)
            self.ticker = None
        publisher = getattr(self, "publisher", None)
        if publisher is not None:
            publisher.close()

    def _next(self) -> int:
        """The first window not yet published (the schedule's origin before the first release)."""
        nxt = self.next_window.value()
        return self.schedule.origin_ms if nxt is None else nxt

    def _arm(self, ctx, window: int) -> None:
        """Register the timer of ``window``'s scheduled release, if the schedule has that window."""
        if self.schedule.in_schedule(window) and ctx.timer_service().current_watermark() < MAX_WATERMARK:
            ctx.timer_service().register_event_time_timer(release_timer(self.schedule, window))

    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        window, payload = value
        nxt = self._next()
        self._arm(ctx, nxt)
        if window in (START, TICK_WINDOW) or window < nxt:  # window < nxt: from a broker clock that went backwards
            return
        gathered = self.pending.get(window) or []
        gathered.append(payload)
        self.pending.put(window, gathered)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext):
        watermark = ctx.timer_service().current_watermark()
        if watermark >= MAX_WATERMARK:
            # end of input: a replay's whole range is due; a live job (no end) only what the timer says
            due = self.schedule.last_window if self.schedule.mode == REPLAY else self.schedule.due_through(timestamp)
        else:
            # every window whose scheduled release the timer or the watermark has passed (after a
            # downtime, many): their sketches' releases have all arrived, since those fire at the same watermark
            due = self.schedule.due_through(max(timestamp, watermark))
        window = self._next()
        while window <= due and self.schedule.in_schedule(window):
            releases = [pickle.loads(p) for p in (self.pending.get(window) or [])]
            try:
                report, stored = self.assembler.report(window, releases)
                published = self.publisher.publish(window, report, stored)
            except (LedgerError, ReportSinkError) as exc:  # disk full, unwritable: stop, do not retry
                write_fatal(self.run_dir, str(exc))
                raise
            self.pending.remove(window)
            self.metrics.inc("windows_republished" if stored else "windows_released")
            if published.late:  # an incident: the deployment's publication delay is too short
                self.metrics.inc("reports_overdue")
            if not stored and b'"refused":' in published.report:
                self.metrics.inc("windows_refused")
            yield stamp(published.report, self.schedule.release_time(window))
            self._maybe_fail()
            window += self.schedule.size_ms
            self.next_window.update(window)
        self._arm(ctx, window)  # the next window is released on time even if it stays empty

    def _maybe_fail(self) -> None:
        self.released_here += 1
        if self.fail_after < 0 or self.released_here != self.fail_after:
            return
        marker = Path(self.run_dir) / "injected-failure.done"
        if marker.exists():
            return
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("1")
        raise InjectedFailure("injected failure after a release (testing.fail_after_window), for tests")
