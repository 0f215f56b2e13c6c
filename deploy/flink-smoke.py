#!/usr/bin/env python3
"""PyFlink smoke test of dphhh's streaming stack: Kafka -> PyFlink (keyed, event time) -> Kafka.

Runs one bounded job in an embedded MiniCluster (the apache-flink wheel carries Flink itself; no
Flink installation or cluster) and checks the pieces the real dphhh job is built from:

* KafkaSource reading raw bytes (ByteArraySchema), bounded at the offsets that are latest when the
  job starts, with event time = the Kafka record timestamp (a WatermarkStrategy *without* a
  timestamp assigner keeps the timestamp the source attached);
* a Python KeyedProcessFunction with keyed state holding bytes (pickled numpy arrays), event-time
  timers closing tumbling windows, and metrics (counters, a meter, a gauge) made in open();
* KafkaSink with DeliveryGuarantee.EXACTLY_ONCE (Kafka transactions committed by checkpoints);
* Flink's Prometheus reporter serving the Python metrics on http://127.0.0.1:9249/metrics;
* the job ends by itself when the bounded source ends: the final watermark (Long.MAX_VALUE) fires
  every pending timer, and the final checkpoint commits the last Kafka transaction.

Usage (Kafka from deploy/kafka-start.sh; jars from deploy/fetch-jars.sh):

    python deploy/flink-smoke.py                          # 100,000 records of 1 address
    python deploy/flink-smoke.py --records 5000 --addrs-per-record 1000

It needs apache-flink 2.2.x, kafka-python >= 2.2.21 and numpy in the running interpreter, and
Java 17. It makes two topics named dphhh-smoke-{in,out}-RUNID and deletes them at the end
(--keep-topics keeps them); run files go to var/flink-smoke/RUNID/. Exit status 0 when every check
passed, 1 otherwise, 130 after Ctrl-C (the job is cancelled first).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pickle
import re
import sys
import threading
import time
import urllib.request
import uuid

try:
    import numpy as np
    from kafka import KafkaConsumer, KafkaProducer  # kafka-python: test data and output check
    from kafka.admin import KafkaAdminClient, NewTopic
    from pyflink.common import (ByteArraySchema, Configuration, Duration, Time, Types,
                                WatermarkStrategy)
    from pyflink.datastream import (KeyedProcessFunction, RuntimeContext,
                                    StreamExecutionEnvironment)
    from pyflink.datastream.connectors.base import DeliveryGuarantee
    from pyflink.datastream.connectors.kafka import (KafkaOffsetsInitializer,
                                                     KafkaRecordSerializationSchema, KafkaSink,
                                                     KafkaSource)
    from pyflink.datastream.state import MapStateDescriptor, StateTtlConfig, ValueStateDescriptor
except ImportError as exc:
    sys.exit(f"flink-smoke: {exc}: run it with a Python that has apache-flink==2.2.1, "
             "kafka-python and numpy installed")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLINK_JARS = os.path.join(ROOT, "deploy", "jars", "flink")
RUN_DIR = os.path.join(ROOT, "var", "flink-smoke")
PROM_PORTS = range(9249, 9261)
METRIC_GROUP = "dphhh"  # Python metrics appear as flink_taskmanager_job_task_operator_dphhh_*


# --------------------------------------------------------------------------------------------
# The job: everything from here to build_job() is what the real dphhh job is built from.
# --------------------------------------------------------------------------------------------
BYTES = Types.PRIMITIVE_ARRAY(Types.BYTE())  # Python bytes <-> Java byte[]; no pickling


class WindowedPrefixCount(KeyedProcessFunction):
    """Per key: counts of the /8 prefixes of the addresses in each tumbling event-time window.

    State (keyed): MapState window_end -> pickled np.int64[256] of the open windows (several can
    be open at once under out-of-orderness), and a ValueState with the pickled lifetime totals.
    An event-time timer at window_end emits the window's summary (JSON bytes) and clears it.
    """

    def __init__(self, window_ms: int, stats_dir: str):
        self.window_ms = window_ms
        self.stats_dir = stats_dir

    def open(self, runtime_context: RuntimeContext):
        self.windows = runtime_context.get_map_state(
            MapStateDescriptor("windows", Types.LONG(), BYTES))
        totals = ValueStateDescriptor("totals", BYTES)
        # TTL (processing time only in Flink) drops keys that stopped receiving data; the windows
        # need none: their timers clear them.
        totals.enable_time_to_live(
            StateTtlConfig.new_builder(Time.days(1))
            .set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)
            .set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
            .build())
        self.totals = runtime_context.get_state(totals)
        group = runtime_context.get_metrics_group().add_group(METRIC_GROUP)
        self.records_in = group.counter("records_in")
        self.addresses_in = group.counter("addresses_in")
        self.late_records = group.counter("late_records")
        self.windows_out = group.counter("windows_out")
        self.records_rate = group.meter("records_in_rate", time_span_in_seconds=10)
        # (group.distribution() exists too, but the Prometheus reporter exports it as a constant 0)
        self.open_windows = 0
        group.gauge("open_windows", lambda: self.open_windows)  # must return an int
        self.subtask = runtime_context.get_index_of_this_subtask()
        self.first_wall = None
        self.last_wall = None
        self.n_records = 0

    def process_element(self, value: bytes, ctx: KeyedProcessFunction.Context):
        now = time.time()
        if self.first_wall is None:
            self.first_wall = now
            self._write_stats("first", {"first_record_wall": now})
        self.last_wall = now
        self.n_records += 1
        addrs = np.frombuffer(value, dtype=">u4")  # packed IPv4, network byte order
        self.records_in.inc()
        self.records_rate.mark_event()
        self.addresses_in.inc(len(addrs))

        ts = ctx.timestamp()  # the Kafka record timestamp (ms), attached by KafkaSource
        window_end = ts - ts % self.window_ms + self.window_ms - 1
        if window_end <= ctx.timer_service().current_watermark():
            self.late_records.inc()  # its window was already emitted
            return
        packed = self.windows.get(window_end)
        if packed is None:
            counts = np.zeros(256, dtype=np.int64)
            # Register once per (key, window): every registration is a message to the JVM.
            ctx.timer_service().register_event_time_timer(window_end)
            self.open_windows += 1
        else:
            counts = pickle.loads(packed)
        counts += np.bincount(addrs >> 24, minlength=256)
        self.windows.put(window_end, pickle.dumps(counts, protocol=5))

    def on_timer(self, timestamp: int, ctx: KeyedProcessFunction.OnTimerContext):
        counts = pickle.loads(self.windows.get(timestamp))
        self.windows.remove(timestamp)
        self.open_windows -= 1
        packed_totals = self.totals.value()
        totals = pickle.loads(packed_totals) if packed_totals is not None else np.zeros_like(counts)
        self.totals.update(pickle.dumps(totals + counts, protocol=5))
        top = np.argsort(counts)[::-1][:3]
        self.windows_out.inc()
        yield json.dumps({
            "key": ctx.get_current_key(),
            "window_start": timestamp + 1 - self.window_ms,
            "window_end": timestamp + 1,
            "addresses": int(counts.sum()),
            "top8": [[f"{p}.0.0.0/8", int(counts[p])] for p in top if counts[p] > 0],
        }).encode()

    def close(self):
        self._write_stats("close", {"first_record_wall": self.first_wall,
                                    "last_record_wall": self.last_wall,
                                    "records": self.n_records})

    def _write_stats(self, tag: str, stats: dict):
        path = os.path.join(self.stats_dir, f"{tag}-{self.subtask}.json")
        with open(path, "w") as f:
            json.dump(stats, f)


def prepare_gateway(run_dir: str) -> None:
    """Environment for the JVM ("gateway") that pyflink starts on first use; call it before any
    pyflink object is made (even Configuration() starts the JVM).

    * FLINK_LIB_DIR: the gateway's classpath is every jar in this folder (plus flink-python).
      The MiniCluster loads metric reporters from that classpath only -- it ignores the plugins
      folder, and pipeline.jars / env.add_jars() reach only the job's class loader -- so the
      folder is a copy of pyflink/lib (symlinks) plus the Prometheus reporter jar, which the
      apache-flink wheel ships in pyflink/plugins/metrics-prometheus/ (not in pyflink/opt/).
    * FLINK_HOME: must be set too, or pyflink resets FLINK_LIB_DIR to pyflink/lib.
    * FLINK_LOG_DIR: Flink's log file (otherwise inside site-packages/pyflink/log/).
    """
    import pyflink
    home = os.path.dirname(os.path.abspath(pyflink.__file__))
    reporter = (glob.glob(os.path.join(home, "plugins", "metrics-prometheus", "*.jar"))
                or glob.glob(os.path.join(FLINK_JARS, "flink-metrics-prometheus-*.jar")))
    if not reporter:
        sys.exit("flink-smoke: flink-metrics-prometheus jar not found in pyflink/plugins or "
                 f"{FLINK_JARS}; run deploy/fetch-jars.sh")
    lib = os.path.join(run_dir, "flink-lib")
    os.makedirs(lib)
    for jar in glob.glob(os.path.join(home, "lib", "*.jar")) + reporter[:1]:
        os.symlink(jar, os.path.join(lib, os.path.basename(jar)))
    os.environ["FLINK_HOME"] = home
    os.environ["FLINK_LIB_DIR"] = lib
    os.environ["FLINK_LOG_DIR"] = os.path.join(run_dir, "log")


def flink_config(args, run_dir: str) -> Configuration:
    """The Flink configuration of the embedded MiniCluster (all keys are Flink 2.2 names)."""
    jars = sorted(glob.glob(os.path.join(FLINK_JARS, "flink-sql-connector-kafka-*.jar")))
    if not jars:
        sys.exit(f"flink-smoke: no Kafka connector jar in {FLINK_JARS}; run deploy/fetch-jars.sh")
    conf = Configuration()
    # The Python workers (separate processes, "process" mode) run this very interpreter.
    conf.set_string("python.executable", sys.executable)
    # "process" (default): Python runs in worker processes fed over gRPC (Beam). "thread" mode
    # (pemja, CPython inside the JVM) crashed the JVM (SIGSEGV in take_gil) with 2.2.1: avoid.
    conf.set_string("python.execution-mode", "process")
    # Jars for the job's class loader (the Kafka connector). Same as env.add_jars("file://...").
    conf.set_string("pipeline.jars", ";".join("file://" + j for j in jars))
    conf.set_string("parallelism.default", str(args.parallelism))
    conf.set_string("execution.runtime-mode", "STREAMING")
    conf.set_string("execution.checkpointing.interval", f"{args.checkpoint_ms} ms")
    conf.set_string("execution.checkpointing.mode", "EXACTLY_ONCE")
    conf.set_string("execution.checkpointing.dir", "file://" + os.path.join(run_dir, "checkpoints"))
    # With checkpointing on, Flink's default is to restart a failing job forever (exponential
    # delay): a smoke test must fail instead. The real job wants a bounded strategy too.
    conf.set_string("restart-strategy.type", "fixed-delay")
    conf.set_string("restart-strategy.fixed-delay.attempts", "1")
    conf.set_string("restart-strategy.fixed-delay.delay", "1 s")
    # Prometheus reporter: its jar must be on the gateway JVM's classpath (prepare_gateway()).
    conf.set_string("metrics.reporter.prom.factory.class",
                    "org.apache.flink.metrics.prometheus.PrometheusReporterFactory")
    conf.set_string("metrics.reporter.prom.port", f"{PROM_PORTS.start}-{PROM_PORTS.stop - 1}")
    # Python bundles: the JVM sends records to Python in bundles; results (and metric updates)
    # come back when a bundle ends. Smaller bundles = lower latency, more overhead.
    conf.set_string("python.fn-execution.bundle.size", str(args.bundle_size))
    conf.set_string("python.fn-execution.bundle.time", "1000")
    return conf


def build_job(env: StreamExecutionEnvironment, args, run_id: str, in_topic: str, out_topic: str,
              stats_dir: str) -> None:
    source = (KafkaSource.builder()
              .set_bootstrap_servers(args.bootstrap)
              .set_topics(in_topic)
              .set_group_id("dphhh-smoke")
              .set_starting_offsets(KafkaOffsetsInitializer.earliest())
              # Bounded: stop at the offsets that are latest when the job starts.
              .set_bounded(KafkaOffsetsInitializer.latest())
              .set_value_only_deserializer(ByteArraySchema())
              .build())
    # No timestamp assigner: the event time is the Kafka record timestamp set by the source.
    watermarks = (WatermarkStrategy
                  .for_bounded_out_of_orderness(Duration.of_millis(args.out_of_orderness_ms))
                  .with_idleness(Duration.of_seconds(30)))
    records = env.from_source(source, watermarks, "kafka-in")

    keys = args.keys
    counted = (records
               .key_by(lambda value: int.from_bytes(value[:4], "big") % keys, key_type=Types.INT())
               .process(WindowedPrefixCount(args.window_ms, stats_dir), output_type=BYTES)
               .name("windowed-prefix-count"))

    sink = (KafkaSink.builder()
            .set_bootstrap_servers(args.bootstrap)
            .set_record_serializer(KafkaRecordSerializationSchema.builder()
                                   .set_topic(out_topic)
                                   .set_value_serialization_schema(ByteArraySchema())
                                   .build())
            .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
            # Unique per job (and stable across its restarts): ids of one prefix are fenced.
            .set_transactional_id_prefix(f"dphhh-smoke-{run_id}")
            # Must not exceed the broker's transaction.max.timeout.ms (1 h in deploy/kafka).
            .set_property("transaction.timeout.ms", str(15 * 60 * 1000))
            .build())
    counted.sink_to(sink).name("kafka-out")


# --------------------------------------------------------------------------------------------
# The harness: topics, test data, a Prometheus scraper, the run and the checks.
# --------------------------------------------------------------------------------------------

def produce_input(args, topic: str) -> tuple[int, dict]:
    """Writes the test records; returns the number of addresses and the expected window count."""
    rng = np.random.default_rng(1)
    producer = KafkaProducer(bootstrap_servers=args.bootstrap, acks="all", linger_ms=20,
                             batch_size=1 << 20, max_request_size=8 << 20)
    span = args.windows * args.window_ms
    base = (int(time.time() * 1000) // args.window_ms - args.windows - 1) * args.window_ms
    expected_windows = set()
    total = 0
    t0 = time.time()
    for i in range(args.records):
        # A few heavy /8s among uniform noise, as in a reflection attack.
        addrs = np.where(rng.random(args.addrs_per_record) < 0.5,
                         rng.choice(np.array([0x68000000, 0x6B000000, 0xAC000000], dtype=np.uint32),
                                    args.addrs_per_record),
                         rng.integers(0, 2**32, args.addrs_per_record, dtype=np.uint32))
        addrs = addrs.astype(">u4")
        ts = base + (i * span) // args.records
        producer.send(topic, value=addrs.tobytes(), timestamp_ms=ts)
        expected_windows.add((int(addrs[0]) % args.keys, ts - ts % args.window_ms))
        total += len(addrs)
    producer.flush()
    producer.close()
    print(f"flink-smoke: produced {args.records} records x {args.addrs_per_record} addresses "
          f"in {time.time() - t0:.1f} s")
    return total, {"windows": len(expected_windows)}


def read_output(args, topic: str) -> list[dict]:
    consumer = KafkaConsumer(topic, bootstrap_servers=args.bootstrap, auto_offset_reset="earliest",
                             isolation_level="read_committed", enable_auto_commit=False,
                             group_id=None, consumer_timeout_ms=3000)
    out = [json.loads(m.value) for m in consumer]
    consumer.close()
    return out


class PrometheusScraper(threading.Thread):
    """Polls the reporter while the job runs; keeps the last dphhh and checkpoint samples."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop_event = threading.Event()
        self.url = None
        self.dphhh = {}
        self.checkpoints = {}
        self.scrapes = 0

    def run(self):
        while not self.stop_event.wait(0.5):
            for port in ([self.url] if self.url else PROM_PORTS):
                url = port if isinstance(port, str) else f"http://127.0.0.1:{port}/metrics"
                try:
                    text = urllib.request.urlopen(url, timeout=1).read().decode()
                except OSError:
                    continue
                self.url = url
                self.scrapes += 1
                for line in text.splitlines():
                    if line.startswith("#"):
                        continue
                    name = line.split("{", 1)[0].split(" ", 1)[0]
                    if f"_{METRIC_GROUP}_" in name:
                        self.dphhh[name.split(f"_{METRIC_GROUP}_", 1)[1]] = line.rsplit(" ", 1)[-1]
                    elif re.search(r"_job_(numberOf\w*Checkpoints|lastCheckpointDuration)$", name):
                        self.checkpoints[name.rsplit("_", 1)[-1]] = line.rsplit(" ", 1)[-1]
                break


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap", default=f"127.0.0.1:{os.environ.get('DPHHH_KAFKA_PORT', '9092')}")
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--addrs-per-record", type=int, default=1)
    p.add_argument("--windows", type=int, default=10, help="event-time windows the data spans")
    p.add_argument("--window-ms", type=int, default=10_000)
    p.add_argument("--out-of-orderness-ms", type=int, default=1_000)
    p.add_argument("--keys", type=int, default=4, help="distinct keys (sketch partitions)")
    p.add_argument("--parallelism", type=int, default=1)
    p.add_argument("--checkpoint-ms", type=int, default=3_000)
    p.add_argument("--bundle-size", type=int, default=1_000)
    p.add_argument("--keep-topics", action="store_true")
    args = p.parse_args()
    for name in ("records", "addrs_per_record", "windows", "window_ms", "keys", "parallelism",
                 "checkpoint_ms", "bundle_size"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.out_of_orderness_ms < 0:
        p.error("--out-of-orderness-ms must not be negative")

    try:
        admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, request_timeout_ms=5000)
    except Exception as exc:  # kafka.errors.NoBrokersAvailable and friends
        print(f"flink-smoke: no Kafka broker at {args.bootstrap} ({exc}); "
              "start one with deploy/kafka-start.sh", file=sys.stderr)
        return 1
    run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    run_dir = os.path.join(RUN_DIR, run_id)
    stats_dir = os.path.join(run_dir, "stats")
    os.makedirs(stats_dir)
    in_topic, out_topic = f"dphhh-smoke-in-{run_id}", f"dphhh-smoke-out-{run_id}"
    admin.create_topics([NewTopic(in_topic, args.parallelism, 1), NewTopic(out_topic, 1, 1)])

    scraper = PrometheusScraper()
    client = None
    try:
        n_addresses, expected = produce_input(args, in_topic)

        t0 = time.time()
        prepare_gateway(run_dir)
        env = StreamExecutionEnvironment.get_execution_environment(flink_config(args, run_dir))
        build_job(env, args, run_id, in_topic, out_topic, stats_dir)
        t_built = time.time()
        scraper.start()
        # execute_async + polling (rather than execute()) keeps Ctrl-C working: see below.
        client = env.execute_async("dphhh-flink-smoke")
        print(f"flink-smoke: job {client.get_job_id()} submitted (gateway start + job graph "
              f"{t_built - t0:.1f} s, MiniCluster start + submission {time.time() - t_built:.1f} s)")
        # Poll the result future: the per-job MiniCluster shuts down as soon as the job ends,
        # after which client.get_job_status() raises IllegalStateException.
        result = client.get_job_execution_result()
        while not result.done():
            time.sleep(0.2)
        t_done = time.time()
        try:
            result.result()  # raises with the job's failure cause if it failed
        except Exception as exc:
            # The root cause is usually a Python traceback inside the Java exception text.
            lines = str(exc).splitlines()
            causes = ([ln for ln in lines if re.match(r"\w+(Error|Exception): ", ln)]
                      or [ln for ln in lines if ln.startswith("Caused by:")] or [str(exc)])
            print(f"flink-smoke: the job failed: {causes[-1]} "
                  f"(Flink log: {os.path.join(run_dir, 'log')})", file=sys.stderr)
            return 1
        out = read_output(args, out_topic)
    except KeyboardInterrupt:
        # The gateway JVM ignores SIGINT; only this process sees Ctrl-C, so cancel explicitly.
        if client is not None:
            print("\nflink-smoke: Ctrl-C: cancelling the job ...", file=sys.stderr)
            try:
                client.cancel().result()
            except Exception:
                pass  # it had already ended
        return 130
    finally:
        scraper.stop_event.set()
        if not args.keep_topics:
            try:
                admin.delete_topics([in_topic, out_topic])
            except Exception:
                pass

    return report(args, run_dir, stats_dir, out, n_addresses, expected, scraper, t_built, t_done)


def report(args, run_dir, stats_dir, out, n_addresses, expected, scraper, t_execute,
           t_done) -> int:
    closes = [json.load(open(f)) for f in glob.glob(os.path.join(stats_dir, "close-*.json"))]
    firsts = [json.load(open(f)) for f in glob.glob(os.path.join(stats_dir, "first-*.json"))]
    if not firsts or not closes:
        print("flink-smoke: FAILED: the Python function saw no record", file=sys.stderr)
        return 1
    first = min(s["first_record_wall"] for s in firsts)
    last = max(s["last_record_wall"] for s in closes if s["last_record_wall"])
    processed = sum(s["records"] for s in closes)
    print(f"flink-smoke: execute -> first record in Python: {first - t_execute:.1f} s; "
          f"first -> last record: {last - first:.2f} s "
          f"({processed / max(last - first, 1e-9):,.0f} records/s, "
          f"{processed * args.addrs_per_record / max(last - first, 1e-9):,.0f} addresses/s); "
          f"last record -> job FINISHED: {t_done - last:.1f} s")
    print(f"flink-smoke: prometheus {scraper.url} ({scraper.scrapes} scrapes); last values of "
          f"flink_taskmanager_job_task_operator_{METRIC_GROUP}_*: {scraper.dphhh or 'NONE'}")
    print(f"flink-smoke: checkpoints: {scraper.checkpoints or 'none seen'}")
    got = sum(w["addresses"] for w in out)
    print(f"flink-smoke: output (read_committed): {len(out)} windows "
          f"(expected {expected['windows']}), {got} addresses (expected {n_addresses})")
    ok = (processed == args.records and bool(scraper.dphhh)
          and got == n_addresses and len(out) == expected["windows"])
    print("flink-smoke: " + ("OK" if ok else "FAILED") + f" (run files: {run_dir})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
