"""The stream job's operators: thin PyFlink adapters around plain, unit-tested logic.

What they send each other is in :mod:`stream.wire`; their logic is unit-tested in process by
``tests/harness.py`` (fake runtime context, keyed state, timers).

* :class:`DecodeOperator` (``decode``): message bytes → per-(level, partition) key batches tagged
  with their window (:func:`stream.decode_batch.decode_batch`: the public schedule's per-element
  acceptance); clock records skipped; bad and rejected records to the dead-letter side output
  (reason + original bytes).
* :class:`CapOperator` (``cap``, keyed by unit shard; user-level privacy only): keeps at most
  ``privacy.unit_cap`` elements (records) per privacy unit and window (arrival order), drops the
  excess, and forwards the kept values — with their weights, clipped by ``decode``, for weighted
  records — to the sketch partitions.
* :class:`SketchOperator` (``sketch``, keyed by key partition): the h level sketches of that
  partition, per window, in keyed MapState (one keyed record per message and partition carries
  every level's keys); at the window's scheduled release time it runs
  :func:`privacy.window.release_sketch` for each level and emits the **noisy** releases only.
* :class:`ReleaseOperator` (``release``, one key): publishes every window of the public schedule
  once, at its scheduled time, through :class:`~stream.assembler.WindowAssembler` (durable ledger
  first, then the JSON-lines file, then the Kafka sink), whether or not any element arrived.

Each operator has a stable id (its Flink ``uid``, its state names' prefix and its metric group).
Raw counts and addresses never reach a log line, a metric or an exception message; the only
counters are the public schedule's (windows released, republished, refused) and the dead letters
of records that are not elements (docs/ALGORITHMS.md §0.1 f).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from connectors.decode import REASONS, MessageDecoder
from connectors.report_sink import JsonLinesReportFile, ReportSinkError
from connectors.skips import is_unparsable
from privacy.unit_cap import UnitCap
from privacy.window import release_sketch
from sketches.misra_gries import MisraGries, clip_weights

from .assembler import WindowAssembler, noise_source_factory, sketch_id
from .clock import shared_ticker, stop_shared_ticker
from .config import JobConfig
from .decode_batch import decode_batch
from .ledger import LedgerError, ReleaseLedger
from .message_batch import BatchFormatError
from .schedule import LIVE, REPLAY
from .wire import (
    dead_letter_record,
    pack_sketches,
    select,
    sketch_payloads,
    stamp,
    unit_payloads,
    unpack_sketches,
    unpack_unit_payload,
    unpack_weighted_levels,
)

MAX_WATERMARK = 2**63 - 1

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
    resolved at submission, :func:`stream.ledger.job_schedule`) and metric counters."""
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


#: Dead-letter reasons counted in the job's metrics: records that hold no element (unparsable,
#: operational; the same classification as the batch commands', :data:`connectors.skips.UNPARSABLE`).
#: Valid records of another kind (``wrong_family``, a path of another depth) and elements the schedule
#: rejects (:data:`stream.schedule.ELEMENT_REASONS`) are dead-lettered but never counted (docs/ALGORITHMS.md §0.1 f).
COUNTED_REASONS = frozenset(r for r in REASONS if is_unparsable(r)) | {"no_timestamp", "bad_batch"}


class DecodeOperator(ProcessFunction):
    """Decode a batch of messages (from the Java ``MessageBatcher``), skip clock records, dead-letter
    bad and rejected ones, expand the rest per level and partition (stateless)."""

    def __init__(self, cfg_values: dict, origin_ms: int) -> None:
        self.cfg_values = cfg_values
        self.origin_ms = origin_ms  # the schedule's public origin (resolved at submission)

    def open(self, runtime_context: RuntimeContext) -> None:
        _open_common(self, runtime_context, "decode")
        self.decoder = message_decoder_of(self.cfg)
        self.tag = dead_letter_tag()
        self.ticked: int | None = None  # the next operators are ticked once after open and at each new clock window
        self.user_level = self.cfg.unit.kind == "user"
        self.pairs = self.cfg.hierarchy.kind == "pair"  # docs/ALGORITHMS.md §11
        self.shards = self.cfg.values["flink"]["parallelism"]
        # the keys of the next operator: the sketch partitions, or (user level) the cap shards, which
        # pass the ticks on to the sketch partitions
        self.tick_keys = range(self.shards if self.user_level else self.cfg.params.partitions)
        self.slow_s = max(0, self.cfg.values["output"]["test_slow_decode_ms"]) / 1000
        self.slow = self.slow_s > 0 and runtime_context.get_index_of_this_subtask() == 1

    def process_element(self, value: bytes, ctx: ProcessFunction.Context):
        watermark = ctx.timer_service().current_watermark()  # the broker's clock (live), or none (replay)
        mark = self.schedule.start_of(watermark) if watermark > -MAX_WATERMARK else -1
        if self.ticked is None or mark > self.ticked:
            # A tick makes every sketch operator re-register the timers of its open windows (after a
            # restore, timers registered just before the checkpoint may be missing from it) and
            # the release operator its next window's.
            self.ticked = mark
            for key in self.tick_keys:
                yield key, TICK_WINDOW, b"", b""
        if self.slow:  # test hook (output.test_slow_decode_ms): subtask 1 lags behind
            import time

            time.sleep(self.slow_s)
        try:
            outcome = decode_batch(value, self.decoder, self.schedule)
        except BatchFormatError:  # jar and worker disagree: keep the bytes, never crash the job
            self.metrics.inc("dead_letters_bad_batch")
            yield self.tag, stamp(dead_letter_record("bad_batch", value, None), None)
            return
        for reason, message, timestamp in outcome.dead:
            if reason in COUNTED_REASONS:
                self.metrics.inc(f"dead_letters_{reason}")
            own = timestamp if timestamp is not None and timestamp >= 0 else None
            yield self.tag, stamp(dead_letter_record(reason, message, timestamp), own)
        for start, values, units, weights in outcome.windows:
            if self.pairs:  # (first, second): the decoder's first addresses travel as its "units",
                assert units is not None  # which stay the unit keys at user level (the source host)
                values = (units.astype(np.uint32), values)
            if weights is not None:  # weighted records: clipped to the public cap W here, once
                weights = clip_weights(weights, self.cfg.unit.weight_cap, "decode")
            if self.user_level:  # the cap operator counts records and passes their clipped weights on
                assert units is not None  # user level: the decoder reads every record's unit key
                for shard, payload in unit_payloads(values, units, self.shards, weights):
                    yield shard, start, payload, b""
                continue
            for p, payload, labels in sketch_payloads(values, self.cfg, weights):
                yield p, start, payload, labels


def message_decoder_of(cfg: JobConfig) -> MessageDecoder:
    """The decoder of the job's input messages (``input.*``, the hierarchy's depth, the privacy unit)."""
    i = cfg.values["input"]
    return MessageDecoder(
        i["format"],
        max_message_bytes=i["max_message_bytes"],
        json_field=i["json_field"],
        json_time_field=i["json_time_field"] or None,
        unit_field=unit_field_of(cfg),
        path_depth=cfg.hierarchy.h,
        flow_schema=i["flow_schema"],
        flow_key=i["flow_key"],
        flow_weight=i["flow_weight"],
        source_units=source_units_of(cfg),
    )


def unit_field_of(cfg: JobConfig) -> str | None:
    """The JSON field holding the privacy unit (``privacy.unit_key = "json:FIELD"``), else ``None``."""
    key = cfg.values["privacy"]["unit_key"].strip()
    return key[5:].strip() if key.startswith("json:") else None


def source_units_of(cfg: JobConfig) -> bool:
    """Whether the privacy unit is each record's source host (``privacy.unit_key = "source-ipv4"``)."""
    return cfg.values["privacy"]["unit_key"].strip() == "source-ipv4"


class _Recent(dict):
    """The decoded state values of the most recently used (key, window) pairs (their state holds
    every one): a replay keeps every window of its range open until the end, and the decoded form is
    ~20x the serialised one, so only ``limit`` stay decoded — a few windows of every key a subtask
    may hold (a cyclic access pattern over more keys than that would miss every time)."""

    LIMIT = 8

    def __init__(self, limit: int = LIMIT) -> None:
        super().__init__()
        self.limit = max(limit, self.LIMIT)

    def get(self, key, default=None):
        value = super().pop(key, None)
        if value is None:
            return default
        self[key] = value  # most recent last
        return value

    def __setitem__(self, key, value) -> None:
        super().pop(key, None)
        super().__setitem__(key, value)
        while len(self) > self.limit:
            del self[next(iter(self))]


def _released(schedule, window: int, ctx) -> bool:
    """Whether ``window``'s release time has passed (a batch for it can then only come from a broker
    clock that went backwards; it is dropped, and nothing about it is exported)."""
    return schedule.release_time(window) <= ctx.timer_service().current_watermark()


class CapOperator(KeyedProcessFunction):
    """Keyed by unit shard: at most ``privacy.unit_cap`` elements per unit and window go on to the
    sketches (the first ones in arrival order); the excess is dropped (and not counted anywhere:
    the number would track the data, docs/ALGORITHMS.md §0.1 f). A weighted record counts as one
    element here and reaches the sketches with its weight (already clipped to W by ``decode``):
    one unit is then at most m·W unit elements, the group size the mechanism is calibrated over."""

    def __init__(self, cfg_values: dict, origin_ms: int) -> None:
        self.cfg_values = cfg_values
        self.origin_ms = origin_ms  # the schedule's public origin (resolved at submission)

    def open(self, runtime_context: RuntimeContext) -> None:
        _open_common(self, runtime_context, "cap")
        self.state = runtime_context.get_map_state(
            MapStateDescriptor(f"{STEP_IDS['cap']}-units", Types.LONG(), _bytes_type())
        )
        self.partitions = range(self.cfg.params.partitions)
        # (shard, window) → the state's current value; a few open windows of every shard
        self.cache: dict[tuple[int, int], UnitCap] = _Recent(4 * self.cfg.values["flink"]["parallelism"])

    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        _, window, payload, _ = value
        if window == TICK_WINDOW:
            for open_window in list(self.state.keys()):
                ctx.timer_service().register_event_time_timer(self.schedule.release_time(open_window))
            for p in self.partitions:
                yield p, TICK_WINDOW, b"", b""
            return
        if _released(self.schedule, window, ctx):
            return
        where = (ctx.get_current_key(), window)
        cap = self.cache.get(where)
        if cap is None:
            data = self.state.get(window)
            if data is None:
                cap = UnitCap(self.cfg.unit.cap)
                ctx.timer_service().register_event_time_timer(self.schedule.release_time(window))
            else:
                cap = UnitCap.from_bytes(data)
            self.cache[where] = cap
        units, values, weights = unpack_unit_payload(payload)
        keep = cap.keep(units)
        self.state.put(window, cap.to_bytes())
        if int(keep.sum()):
            kept_weights = None if weights is None else weights[keep]
            for p, out, labels in sketch_payloads(select(values, keep), self.cfg, kept_weights):
                yield p, window, out, labels

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext):
        window = self.schedule.start_of_release_time(timestamp)
        self.cache.pop((ctx.get_current_key(), window), None)
        self.state.remove(window)
        yield from ()  # PyFlink iterates what on_timer returns


class SketchOperator(KeyedProcessFunction):
    """Keyed by partition: the h level sketches per window; releases noisy values at the window's
    scheduled release time."""

    def __init__(self, cfg_values: dict, origin_ms: int) -> None:
        self.cfg_values = cfg_values
        self.origin_ms = origin_ms  # the schedule's public origin (resolved at submission)

    def open(self, runtime_context: RuntimeContext) -> None:
        _open_common(self, runtime_context, "sketch")
        self.state = runtime_context.get_map_state(
            MapStateDescriptor(f"{STEP_IDS['sketch']}-windows", Types.LONG(), _bytes_type())
        )
        self.label_state = runtime_context.get_map_state(
            MapStateDescriptor(f"{STEP_IDS['sketch']}-labels", Types.LONG(), Types.PICKLED_BYTE_ARRAY())
        )
        self.cache: dict[tuple[int, int], list[MisraGries]] = _Recent(4 * self.cfg.params.partitions)
        self.noise_for = noise_source_factory(self.cfg.seed)
        dump = self.cfg.values["output"]["debug_sketch_dir"]
        self.dump_dir = Path(dump) if dump else None

    def _sketches(self, partition: int, window: int) -> list[MisraGries] | None:
        sketches = self.cache.get((partition, window))
        if sketches is None:
            data = self.state.get(window)
            if data is not None:
                sketches = self.cache[(partition, window)] = unpack_sketches(data)
        return sketches

    def _merge_labels(self, window: int, sketches: list[MisraGries], new: bytes) -> None:
        """Keep the labels of keys that hold a slot (hashed-key hierarchies only)."""
        labels = self.label_state.get(window) or {}
        for level, found in pickle.loads(new).items():
            known = labels.setdefault(level, {})
            known.update(found)
            if len(known) > 4 * self.cfg.params.counters:  # forget keys evicted from the sketch
                held = sketches[level - 1].counters()
                labels[level] = {k: v for k, v in known.items() if k in held}
        self.label_state.put(window, labels)

    def process_element(self, value, ctx: KeyedProcessFunction.Context):
        partition, window, payload, labels = value
        if window == TICK_WINDOW:  # re-register the timers of every open window (see DecodeOperator)
            for open_window in list(self.state.keys()):
                ctx.timer_service().register_event_time_timer(self.schedule.release_time(open_window))
            yield TICK_WINDOW, b""  # and let the release operator register its next window's
            return
        if _released(self.schedule, window, ctx):
            return
        sketches = self._sketches(partition, window)
        if sketches is None:
            sketches = [MisraGries(self.cfg.params.counters) for _ in range(self.cfg.hierarchy.h)]
            self.cache[(partition, window)] = sketches
            ctx.timer_service().register_event_time_timer(self.schedule.release_time(window))
        keys_by_level, weights_by_level = unpack_weighted_levels(payload, self.cfg.hierarchy)
        for i, (sketch, keys) in enumerate(zip(sketches, keys_by_level)):
            sketch.update(keys, None if weights_by_level is None else weights_by_level[i])
        self.state.put(window, pack_sketches(sketches))
        if labels:
            self._merge_labels(window, sketches, labels)

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext):
        partition = ctx.get_current_key()
        window = self.schedule.start_of_release_time(timestamp)
        sketches = self._sketches(partition, window)
        self.cache.pop((partition, window), None)
        self.state.remove(window)
        labels = self.label_state.get(window) or {}
        self.label_state.remove(window)
        if sketches is None:
            return
        parts, h = self.cfg.params.partitions, self.cfg.hierarchy.h
        for level, sketch in enumerate(sketches, start=1):
            if self.dump_dir is not None and sketch.total:  # NON-PRIVATE test hook (output.debug_sketch_dir)
                self.dump_dir.mkdir(parents=True, exist_ok=True)
                sid = sketch_id(level, partition, parts)
                (self.dump_dir / f"window-{window}-sketch-{sid}.bin").write_bytes(sketch.to_bytes())
            release = release_sketch(
                level,
                partition,
                sketch.counters(),
                sketch.total,
                params=self.cfg.params,
                h=h,
                rng=self.noise_for(window, level, partition),
                labels=labels.get(level) if labels else None,
            )
            yield window, pickle.dumps(release, protocol=5)


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
    """Raised once by the fault-injection hook (output.fail_after_window), for tests."""


START = -2  # the window field of the job's one start record (see stream.job: the release operator's first timer)


class ReleaseOperator(KeyedProcessFunction):
    """One key: publishes every window of the public schedule exactly once, at its scheduled time.

    Its timers follow the schedule, not the data: the first is registered for the schedule's first
    window when the job's start record (or a tick) arrives, and each release registers the next
    window's. A window is released when the watermark — the broker's clock in live mode, end of
    input in a replay — passes its scheduled time, with whatever releases its sketches sent (the
    assembler fills in the rest as empty), so every window gets one report whether or not any
    element arrived; the report's Kafka timestamp is its scheduled time. In live mode this
    operator also runs the job's clock (:class:`stream.clock.ClockTicker`)."""

    def __init__(self, cfg_values: dict, origin_ms: int, run_dir: str, kafka_options: dict | None = None) -> None:
        self.cfg_values = cfg_values
        self.origin_ms = origin_ms  # the schedule's public origin (resolved at submission)
        self.run_dir = run_dir
        self.kafka_options = kafka_options  # resolved at submission: workers do not see env: secrets

    def open(self, runtime_context: RuntimeContext) -> None:
        _open_common(self, runtime_context, "release")
        out = self.cfg.values["output"]
        ledger = ReleaseLedger(out["ledger_dir"])
        ledger.claim(self.cfg.deployment_fingerprint())
        self.assembler = WindowAssembler(
            self.cfg.hierarchy,
            self.cfg.params,
            self.schedule,
            ledger,
            seed=self.cfg.seed,
            unit=self.cfg.unit,
            budget=self.cfg.budget,
            guard=self.cfg.guard,
        )
        self.report_file = JsonLinesReportFile(out["reports_file"]) if out["reports_file"] else None
        self.pending = runtime_context.get_map_state(
            MapStateDescriptor(f"{STEP_IDS['release']}-pending", Types.LONG(), Types.PICKLED_BYTE_ARRAY())
        )
        self.next_window = runtime_context.get_state(
            ValueStateDescriptor(f"{STEP_IDS['release']}-next-window", Types.LONG())
        )
        self.fail_after = out["fail_after_window"]
        self.released_here = 0
        self.ticker = None
        if self.schedule.mode == LIVE and self.kafka_options is not None:
            run_dir = self.run_dir
            self.ticker = shared_ticker(
                self.kafka_options,
                self.cfg["kafka.input_topic"],
                self.cfg["window.clock_tick_ms"],
                on_fatal=lambda message: write_fatal(run_dir, message),
            )

    def close(self) -> None:
        if self.ticker is not None:
            assert self.kafka_options is not None  # the ticker is only started with them (open)
            stop_shared_ticker(self.kafka_options, self.cfg["kafka.input_topic"])
            self.ticker = None

    def _next(self) -> int:
        """The first window not yet published (the schedule's origin before the first release)."""
        nxt = self.next_window.value()
        return self.schedule.origin_ms if nxt is None else nxt

    def _arm(self, ctx, window: int) -> None:
        """Register the timer of ``window``'s scheduled release, if the schedule has that window."""
        if self.schedule.in_schedule(window) and ctx.timer_service().current_watermark() < MAX_WATERMARK:
            ctx.timer_service().register_event_time_timer(self.schedule.release_time(window))

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
            due = (
                self.schedule.last_window
                if self.schedule.mode == REPLAY
                else self.schedule.start_of_release_time(timestamp)
            )
        else:
            # every window whose scheduled release the watermark has passed (after a downtime, many):
            # their sketches' releases have all arrived, since those fire at the same watermark
            due = max(
                self.schedule.start_of_release_time(timestamp),
                self.schedule.start_of(watermark - self.schedule.grace_ms) - self.schedule.size_ms,
            )
        window = self._next()
        while window <= due and self.schedule.in_schedule(window):
            releases = [pickle.loads(p) for p in (self.pending.get(window) or [])]
            try:
                report, replayed = self.assembler.report(window, releases)
                if self.report_file is not None:
                    self.report_file.write(report)
            except (LedgerError, ReportSinkError) as exc:  # disk full, unwritable: stop, do not retry
                write_fatal(self.run_dir, str(exc))
                raise
            self.pending.remove(window)
            self.metrics.inc("windows_republished" if replayed else "windows_released")
            if not replayed and b'"refused":' in report:
                self.metrics.inc("windows_refused")
            yield stamp(report, self.schedule.release_time(window))
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
        raise InjectedFailure("injected failure after a release (output.fail_after_window), for tests")
