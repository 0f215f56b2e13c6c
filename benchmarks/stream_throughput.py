"""End-to-end throughput and report latency of the stream job (Kafka in → PyFlink → reports out).

What it measures (one run, on this machine, against the local broker)
---------------------------------------------------------------------
Every job is the real one, started as the user starts it — ``dphhh run --config FILE --feed no``
in a subprocess (embedded MiniCluster, parallelism 1) — on topics with unique names, with its
ledger, report file, checkpoints and Flink run folder (logs) under one work folder. The throughput
jobs are replays (``window.mode = replay``) over the public range of their windows, every window
released at the end of the input. Their input log (``--replay-log``) is by default what a live
deployment's input topic holds — the broker's append times (LogAppendTime) and clock records a
ticker appends while the log is written (packed messages are written window by window on the wall
clock; flow records keep their own times in 2023) — so the replay applies complete epochs while it
reads; ``--replay-log explicit`` writes explicit record timestamps in the past (a fixed,
window-aligned time in 2023) and no clock records, and the replay applies every epoch at the end
of its input. The latency job is live: its windows are released by the broker's wall clock.

0. ``start-up``: a tiny replay (3 messages, one window). Its time from process start to its
   report being readable is the job's fixed cost (interpreter + JVM + MiniCluster + Python workers
   + the end-of-input checkpoint that commits the report). It is subtracted from the replays
   below ("adjusted" rows), and printed.
1. ``consume-only``: the ingest ceiling — a kafka-python ``KafkaConsumer`` (no group, from the
   earliest offset, client defaults) reads every message of the input topic to its end and
   touches each value (``len()``). Best of ``--consume-repeat`` passes. Messages/s, and
   addresses/s for packed messages.
2. ``e2e packed``: N addresses (default 10^7; ``--quick`` 2·10^5) of
   :func:`dphhh.connectors.synthetic.synthetic_addresses`, in packed messages of ``--batch`` addresses
   (default 1000; big-endian uint32, :func:`dphhh.connectors.kafka_io.pack_ipv4`), spread evenly over
   consecutive 10-s windows of about ``--window-addresses`` addresses each (default 10^6), all
   published before the job starts; the job replays them. Timed from the subprocess start; a reader
   thread (read_committed) notes when each window's report becomes readable in the reports topic.
   Rows: ``raw`` = N / (last report − process start); ``adjusted`` = N / (last report − process
   start − the start-up run's time to its report); ``tasks running`` = N / (last report − the time
   the Flink log shows the last task switching to RUNNING). Also printed: time to the first report,
   time to process exit. (The job exports no per-record counter to time the first record by: such
   counters count the stream exactly, docs/ALGORITHMS.md §0.1 f.)
2b. ``e2e user`` (``--only packed,user``): the packed scenario's addresses as (unit, address)
   pairs (``packed-ipv4-pairs``, 8 bytes per element) from ``--user-units`` Zipf-distributed unit
   addresses, with user-level privacy on (``privacy.unit_key = "source-ipv4"``, ``unit_cap =
   --user-cap``): the cost of the ``cap`` operator, compared with ``e2e packed`` in the same run.
2c. ``e2e flows`` (``--only packed,flows``): ``--flow-records`` flow records (default 3·10^6) as
   nfacctd's kafka plugin publishes them (one pmacct JSON object per message: ``ip_src``,
   ``ip_dst``, ports, ``packets``, heavy-tailed ``bytes``, ``timestamp_start``), the sources being
   the packed scenario's synthetic addresses; the job reads them with ``input.format =
   flow-json`` weighted by bytes (W = 1500). Next to it the consume-only loop and Kafka's own
   Java consumer (``kafka.tools.ConsumerPerformance`` from the shipped jars) on the same topic:
   the ingest ceilings. Target ≥ 200,000 flow records/s. The Java batcher reads the usual records
   into columns (``flink.batch_parse_flows``, the default); ``--only packed,flows,flows-python``
   adds the baseline of the same run: a second job on the same topic with every record decoded in
   Python (``flink.batch_parse_flows = false``), and its ratio to the first.
2d. ``--baseline DIR`` (another checkout, e.g. a worktree of the commit before a change): the
   packed and flows scenarios run a second job with that checkout's code on the same input topic,
   and the notes print this checkout's rate over the baseline's (tasks running → last report), the
   before/after of a change in one run (the baseline runs second: the input is in the page cache).
3. ``e2e 1/msg``: the same with one address per message (default 10^6 messages, ``--quick``
   2·10^4; packed 4-byte messages, or ``--single-format text`` for dotted quads) over
   ``--single-windows`` windows, next to the consume-only loop on that topic; the ratio column is
   the job's messages/s over the consume-only loop's messages/s.
4. ``latency``: a LIVE job (``flink.checkpoint_interval_ms`` = ``--latency-checkpoint-ms``, default
   1000). Once it has published its first (empty) reports, window W's ``--latency-addresses``
   addresses (default 10^6) are published at the start of W (they arrive in W by the broker's
   clock); the wall time from W's end to W's report being readable (read_committed) is the
   latency after a window's end. Reports are Kafka transactions committed at checkpoints: the
   figure includes the job's clock tick (``window.clock_tick_ms``) and the wait for the next
   checkpoint (up to one interval). Repeated ``--latency-repeats`` times (default 3). The job is
   then stopped with SIGINT.

Afterwards each job's Flink log (``<run dir>/log``) and stderr are scanned for ERROR lines, failed
tasks, restarts, checkpoint failures and Python tracebacks; a summary is printed.

Run::

    .venv/bin/python benchmarks/stream_throughput.py            # full size (about 10-20 min)
    .venv/bin/python benchmarks/stream_throughput.py --quick    # smoke run (about 2 min)

Progress goes to stderr, the results table to stdout. Targets: ≥ 1,000,000 addresses/s with
packed batches; one address per message ≥ 0.5 × the consume-only loop's messages/s; report
latency < 5 s after a window's end at 10^6 addresses per window. Other load on the machine (the
figures are CPU-bound on small machines) lowers every rate: the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

# Make the project importable when run as a script from anywhere.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dphhh.connectors.kafka_io import PackedProducer, client_kwargs, create_topics, pack_ipv4, wait_for_broker  # noqa: E402
from dphhh.connectors.synthetic import synthetic_addresses  # noqa: E402
from dphhh.stream.broker import LocalBroker  # noqa: E402
from dphhh.stream.config import DEFAULTS, load_config  # noqa: E402
from dphhh.stream.kafka_setup import LIVE_INPUT_TOPIC  # noqa: E402

WINDOW_MS = 10_000
BASE_MS = 1_700_000_000_000 // WINDOW_MS * WINDOW_MS  # a fixed past event time, window-aligned
TARGET_ADDRESSES_PER_S = 1_000_000
TARGET_RATIO = 0.5
TARGET_LATENCY_S = 5.0
SCENARIOS = {"packed", "user", "single", "latency", "flows", "flows-python"}


@dataclass(frozen=True)
class SingleFormat:
    """One job of the one-element-per-message scenario: the message format (``input.format``), the
    ``input.*`` keys it needs, the hierarchy it runs over (``None``: the configured one) and whether
    each element comes with a unit address (pairs: the pair's source)."""

    fmt: str
    inputs: dict | None = None
    hierarchy: str | None = None
    units: bool = False


PAIR_SPEC = "ipv4:8,16,24,32 x ipv4:8,16,24,32"
#: --single-format: one scenario per message format, one element per message
SINGLE_FORMATS = {
    "packed": SingleFormat("packed-ipv4"),
    "text": SingleFormat("text-ipv4"),
    "json": SingleFormat("json"),
    "json-time": SingleFormat("json", {"json_time_field": "t"}),
    "path": SingleFormat("path", hierarchy="path:4"),
    "pairs": SingleFormat("packed-ipv4-pairs", hierarchy=PAIR_SPEC, units=True),
    "flows": SingleFormat("flow-json"),
}
CLOCK_ADDRESS = 0xC0000201  # 192.0.2.1 (TEST-NET-1): the latency run's one-address clock message


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def dphhh_command() -> list[str]:
    """The ``dphhh`` command of this checkout's virtual environment."""
    for exe in (ROOT / ".venv" / "bin" / "dphhh", Path(sys.executable).with_name("dphhh")):
        if exe.exists():
            return [str(exe)]
    return [sys.executable, "-m", "dphhh.stream.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def toml_text(values: dict[str, dict[str, object]]) -> str:
    lines = []
    for section, items in values.items():
        lines.append(f"[{section}]")
        for key, value in items.items():
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, (int, float)):
                text = repr(value)
            else:
                text = json.dumps(str(value))
            lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"


def job_environment(code: Path | None = None) -> dict[str, str]:
    """This environment without ``DPHHH_<SECTION>_<KEY>`` overrides (the config file decides);
    with ``code`` (another checkout, ``--baseline``) its packages first on ``PYTHONPATH``, so that the
    job and its Python workers run that code with this virtual environment."""
    prefixes = tuple(f"DPHHH_{section.upper()}_" for section in DEFAULTS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONUNBUFFERED"] = "1"
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [env.get("PYTHONPATH")])])
    return env


def start_bench_broker(bootstrap: str) -> LocalBroker | None:
    """Start this checkout's broker if ``bootstrap`` is its loopback address and it is down, then wait
    until the broker answers. Returns the broker started here (the caller stops it), else None."""
    broker = LocalBroker.for_bootstrap(bootstrap)
    if broker is not None:
        broker.start()
        if broker.started:
            log(f"started the local Kafka broker on {broker.bootstrap} (stopped again at the end)")
    try:
        wait_for_broker({"bootstrap.servers": bootstrap})
    except BaseException:
        if broker is not None and broker.started:
            broker.stop()
        raise
    return broker if broker is not None and broker.started else None


def dotted(addresses: np.ndarray) -> list[bytes]:
    return [f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}".encode() for a in addresses.tolist()]


def paths_of(addresses: np.ndarray) -> list[bytes]:
    """Each address as a 4-level ``/``-path of its bytes (``c10/r1/t2/s3``): the same heavy prefixes."""
    return [f"c{a >> 24}/r{(a >> 16) & 255}/t{(a >> 8) & 255}/s{a & 255}".encode() for a in addresses.tolist()]


def flow_records(addresses: np.ndarray, first_window_ms: int, windows: int) -> list[bytes]:
    """pmacct JSON flow records (as nfacctd's kafka plugin writes them) with ``addresses`` as sources,
    heavy-tailed packets and bytes, and flow start times spread like the packed messages'."""
    import datetime as _dt

    rng = np.random.default_rng(17)
    n = len(addresses)
    packets = np.minimum(rng.zipf(1.6, n), 10_000)
    nbytes = packets * rng.integers(40, 1500, n)
    dotted_src = dotted(addresses)
    starts = first_window_ms + (np.arange(n) * (windows * WINDOW_MS - 2)) // max(n, 1)
    out = []
    for i in range(n):
        t = _dt.datetime.fromtimestamp(int(starts[i]) / 1000, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        out.append(
            (
                f'{{"event_type": "purge", "ip_src": "{dotted_src[i].decode()}", "ip_dst": "10.10.10.10", "port_src": 443, '
                f'"port_dst": {1024 + i % 50000:d}, "ip_proto": "tcp", "timestamp_start": "{t}", "timestamp_end": "{t}", '
                f'"packets": {packets[i]:d}, "bytes": {nbytes[i]:d}, "writer_id": "flows/1"}}'
            ).encode()
        )
    return out


def java_consumer_rate(bootstrap: str, topic: str, messages: int) -> tuple[float, float] | None:
    """(messages/s, MB/s) of Kafka's own Java consumer (``kafka.tools.ConsumerPerformance`` from the
    project's jars) reading ``messages`` records of ``topic``; None when it cannot run."""
    jars = Path(__file__).resolve().parents[1] / "deploy" / "jars" / "kafka"
    cp = ":".join(str(j) for j in sorted(jars.glob("*.jar")))
    java = shutil.which("java")
    if not cp or java is None:
        return None
    for main_class in ("org.apache.kafka.tools.ConsumerPerformance", "kafka.tools.ConsumerPerformance"):
        try:
            out = subprocess.run(
                [
                    java,
                    "-cp",
                    cp,
                    main_class,
                    "--bootstrap-server",
                    bootstrap,
                    "--topic",
                    topic,
                    "--messages",
                    str(messages),
                    "--timeout",
                    "60000",
                ],
                capture_output=True,
                text=True,
                timeout=180,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        lines = [line for line in out.stdout.splitlines() if line and line[0].isdigit()]
        if out.returncode == 0 and lines:
            fields = [f.strip() for f in lines[-1].split(",")]
            try:  # start, end, data MB, MB/s, records, records/s, ...
                return float(fields[5]), float(fields[3])
            except (IndexError, ValueError):
                return None
    return None


def stream_messages(
    addresses: np.ndarray,
    per_message: int,
    windows: int,
    first_window_ms: int,
    fmt: str,
    units: np.ndarray | None = None,
    time_field: bool = False,
) -> Iterator[tuple[int, bytes]]:
    """(timestamp ms, value): ``addresses`` split evenly over ``windows`` consecutive windows,
    ``per_message`` addresses per message, timestamps spread over each window (last ms excluded);
    ``packed-ipv4-pairs``: each address preceded by its unit address from ``units``; ``json`` with
    ``time_field``: each message carries its own time (``"t"``); ``path``: each address as a
    4-level path (:func:`paths_of`)."""
    n = len(addresses)
    if fmt == "json" and time_field:
        fmt = "json-time"
    width = 8 if fmt == "packed-ipv4-pairs" else 4
    packed = pack_ipv4(addresses) if fmt == "packed-ipv4" else None
    if fmt == "packed-ipv4-pairs":
        packed = np.stack([units, addresses], axis=1).astype(">u4").tobytes()
    texts = dotted(addresses) if fmt in ("text-ipv4", "json", "json-time") else None
    if fmt == "json":
        texts = [b'{"ip": "%s"}' % t for t in texts]
    if fmt == "flow-json":
        texts = flow_records(addresses, first_window_ms, windows)
    if fmt == "path":
        texts = paths_of(addresses)
    bounds = np.linspace(0, n, windows + 1).round().astype(np.int64)
    for w in range(windows):
        lo, hi = int(bounds[w]), int(bounds[w + 1])
        start = first_window_ms + w * WINDOW_MS
        count = -(-(hi - lo) // per_message)
        for i in range(count):
            a = lo + i * per_message
            b = min(hi, a + per_message)
            ts = start + (i * (WINDOW_MS - 2)) // count
            if fmt == "json-time":  # the element's own event time (input.json_time_field = "t")
                yield ts, b'{"ip": "%s", "t": %d}' % (texts[a], ts)
                continue
            yield ts, (packed[width * a : width * b] if packed is not None else texts[a])


# ------------------------------------------------------------------------------------------------
# Kafka side: topics, producing, the consume-only loop, reading reports, committed offsets


class Kafka:
    def __init__(self, bootstrap: str) -> None:
        self.options = {"bootstrap.servers": bootstrap}
        self.created: list[str] = []
        self._admin = None

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def topics(self, prefix: str, live: bool = False) -> dict[str, str]:
        """The job's topics; a live job's input (and a clock log's, ``--replay-log clock``) records the
        broker's arrival time."""
        names = {
            "input_topic": f"{prefix}-in",
            "reports_topic": f"{prefix}-reports",
            "dead_letter_topic": f"{prefix}-dead",
        }
        configs = {names["input_topic"]: LIVE_INPUT_TOPIC} if live else {}
        create_topics(self.options, names.values(), partitions=1, configs=configs)
        self.created += names.values()
        return names

    def produce(
        self, topic: str, messages: Iterator[tuple[int, bytes]], what: str, pace: int | None = None
    ) -> tuple[int, int, float]:
        """Publish and wait for acknowledgement; returns (messages, bytes, seconds). ``pace`` (a clock
        log, wall-clock window start ms): each message is sent once the wall clock has reached the
        window of its timestamp (``pace`` + its offset from BASE_MS), so that the broker's append
        times put it in that window."""
        producer = PackedProducer(self.options, topic)
        t0 = last = time.monotonic()
        try:
            for ts, value in messages:
                if pace is not None:
                    window = pace + (ts - BASE_MS) // WINDOW_MS * WINDOW_MS
                    if time.time() * 1000 < window:
                        producer.flush()
                        time.sleep(max(0.0, window / 1000 - time.time()) + 0.05)
                producer.send_value(value, ts)
                if producer.messages % 4096 == 0 and time.monotonic() - last > 3:
                    last = time.monotonic()
                    log(f"  producing {what}: {producer.messages:,} messages ...")
        finally:
            producer.close()
        secs = time.monotonic() - t0
        log(f"  published {producer.messages:,} messages ({producer.bytes / 1e6:.1f} MB) of {what} in {secs:.1f} s")
        return producer.messages, producer.bytes, secs

    def consume_only(self, topic: str, repeat: int) -> tuple[int, int, float]:
        """The ingest ceiling: read the whole topic, touching each value. (messages, bytes, best s)."""
        from kafka import KafkaConsumer, TopicPartition

        best = None
        for r in range(max(1, repeat)):
            consumer = KafkaConsumer(
                **client_kwargs(self.options), group_id=None, enable_auto_commit=False, auto_offset_reset="earliest"
            )
            try:
                parts = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
                consumer.assign(parts)
                consumer.seek_to_beginning(*parts)
                begin, end = consumer.beginning_offsets(parts), consumer.end_offsets(parts)
                expected = sum(end[tp] - begin[tp] for tp in parts)
                n = nbytes = 0
                t0 = idle_since = time.monotonic()
                while n < expected:
                    batch = consumer.poll(timeout_ms=500)
                    if not batch:
                        if time.monotonic() - idle_since > 30:
                            raise RuntimeError(f"consume-only: {topic}: stuck at {n:,} of {expected:,} messages")
                        continue
                    for records in batch.values():
                        for record in records:
                            nbytes += len(record.value)
                        n += len(records)
                    idle_since = time.monotonic()
                secs = time.monotonic() - t0
            finally:
                consumer.close()
            log(f"  consume-only pass {r + 1}: {n:,} messages in {secs:.2f} s ({n / secs:,.0f} messages/s)")
            best = (n, nbytes, secs) if best is None or secs < best[2] else best
        return best

    def committed(self, group: str, topic: str) -> int | None:
        """Sum of the group's committed offsets on ``topic`` (None: nothing committed yet)."""
        from kafka import KafkaAdminClient

        if self._admin is None:
            self._admin = KafkaAdminClient(**client_kwargs(self.options))
        offsets = self._admin.list_group_offsets({group: None}).get(group) or {}
        found = [
            om.offset for tp, om in offsets.items() if tp.topic == topic and om.offset is not None and om.offset >= 0
        ]
        return sum(found) if found else None

    def delete_created(self) -> None:
        if not self.created:
            return
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(**client_kwargs(self.options))
        try:
            admin.delete_topics(self.created, raise_errors=False)
            log(f"deleted the {len(self.created)} benchmark topics")
        except Exception as exc:  # cleanup only
            log(f"warning: could not delete the benchmark topics: {exc}")
        finally:
            admin.close()


class ReportWatcher(threading.Thread):
    """Reads the reports topic (read_committed) and notes when each report became readable."""

    def __init__(self, options: dict, topic: str) -> None:
        super().__init__(daemon=True)
        self.options, self.topic = options, topic
        self.t0 = time.monotonic()
        self.arrivals: list[tuple[float, int | None]] = []  # (monotonic time, window start_ms)
        self.ready = threading.Event()
        self.stop_event = threading.Event()
        self.error: Exception | None = None

    def run(self) -> None:
        from kafka import KafkaConsumer, TopicPartition

        try:
            consumer = KafkaConsumer(
                **client_kwargs(self.options),
                group_id=None,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
                isolation_level="read_committed",
                fetch_max_wait_ms=100,
            )
            try:
                parts = [
                    TopicPartition(self.topic, p) for p in sorted(consumer.partitions_for_topic(self.topic) or [0])
                ]
                consumer.assign(parts)
                consumer.seek_to_beginning(*parts)
                while not self.stop_event.is_set():
                    batch = consumer.poll(timeout_ms=100)
                    now = time.monotonic()
                    for records in batch.values():
                        for record in records:
                            try:
                                start = int(json.loads(record.value)["window"]["start_ms"])
                            except (ValueError, KeyError, TypeError):
                                start = None
                            self.arrivals.append((now, start))
                    self.ready.set()
            finally:
                consumer.close()
        except Exception as exc:  # reported by the caller
            self.error = exc
            self.ready.set()

    def arrival_of(self, start_ms: int) -> float | None:
        for t, start in list(self.arrivals):
            if start == start_ms:
                return t
        return None

    def wait_for(
        self, predicate: Callable[[], bool], timeout_s: float, alive: Callable[[], bool] = lambda: True
    ) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate():
                return True
            if not alive() or self.error is not None:
                return predicate()
            time.sleep(0.05)
        return predicate()


# ------------------------------------------------------------------------------------------------
# Job runs


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(stat.parent.name))
    return out


LOG_TIME = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


@dataclass
class Problems:
    counts: Counter = field(default_factory=Counter)
    samples: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return ", ".join(f"{k}: {v}" for k, v in sorted(self.counts.items())) or "none"


BENIGN = (
    "checkpoint skipped (tasks not running)",
    "checkpoint declined (task closing)",
    "cancel with a bundle in flight",
)


def scan_problems(files: list[Path]) -> Problems:
    """Counts of worrying lines in a job's Flink log and stderr, with a few samples."""
    found = Problems()
    rules = [
        # benign: a live job is never idle (its clock ticks), so a cancel (SIGINT) finds a bundle in flight
        ("cancel with a bundle in flight", re.compile(r"ERROR .*FnApiControlClient closed, clearing outstanding")),
        ("ERROR lines", re.compile(r"^\S+ \S+ ERROR (?!.*FnApiControlClient closed, clearing outstanding)|^ERROR[: ]")),
        ("FAILED transitions", re.compile(r"switched from \w+ to FAILED")),
        ("restarts", re.compile(r"to RESTARTING|Restarting job")),
        # benign: a checkpoint triggered before all tasks run, or while the bounded input's tasks finish
        ("checkpoint skipped (tasks not running)", re.compile(r"Not all required tasks are currently running")),
        ("checkpoint declined (task closing)", re.compile(r"Checkpoint was declined \(task is closing\)")),
        (
            "checkpoint failures",
            re.compile(
                r"Failed to trigger checkpoint(?!.*Not all required tasks)|"
                r"Checkpoint \d+ .*expired|"
                r"Checkpoint was declined(?! \(task is closing\))|"
                r"Failed to complete checkpoint"
            ),
        ),
        ("Python tracebacks", re.compile(r"Traceback \(most recent call last\)")),
    ]
    for path in files:
        if not path.is_file():
            continue
        for line in path.read_text(errors="replace").splitlines():
            for name, rule in rules:
                if rule.search(line):
                    found.counts[name] += 1
                    if name in BENIGN:
                        continue
                    if len(found.samples) < 4:
                        found.samples.append(f"{path.name}: {line.strip()[:220]}")
    return found


def tasks_running_at(files: list[Path]) -> float | None:
    """Wall time (epoch s) of the last task switching to RUNNING in the Flink log."""
    last = None
    for path in files:
        if not path.is_file() or path.suffix != ".log":
            continue
        for line in path.read_text(errors="replace").splitlines():
            if "switched from INITIALIZING to RUNNING" in line:
                m = LOG_TIME.match(line)
                if m:
                    t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
                    last = t if last is None else max(last, t)
    return last


@dataclass
class JobResult:
    name: str
    rc: int | None = None
    first_report: float | None = None
    last_report: float | None = None
    exited: float | None = None
    tasks_running: float | None = None
    reports: int = 0
    expected_reports: int = 0
    problems: Problems = field(default_factory=Problems)
    note: str = ""


class Job:
    """One ``dphhh run`` subprocess with its configuration and report watcher."""

    def __init__(
        self,
        bench: Bench,
        name: str,
        topics: dict[str, str],
        *,
        windows: int | None,
        origin: int = BASE_MS,
        fmt: str = "packed-ipv4",
        checkpoint_ms: int = 2000,
        privacy: dict | None = None,
        inputs: dict | None = None,
        flink: dict | None = None,
        code: Path | None = None,
        hierarchy: str | None = None,
    ) -> None:
        """``windows``: a replay of that many windows from ``origin`` (bounded); ``None``: a live job.
        ``code``: another checkout whose code the job runs (``--baseline``), else this one's."""
        self.code = code
        self.bench, self.name, self.topics = bench, name, topics
        self.dir = bench.work / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.group = f"{bench.prefix}-{name}"
        self.port = free_port()
        window: dict[str, object] = {"size_ms": WINDOW_MS}
        if windows is not None:
            window.update({"mode": "replay", "origin": origin, "until": origin + windows * WINDOW_MS})
        values = {
            "kafka": {"bootstrap": bench.bootstrap, **topics, "group_id": self.group},
            "input": {"format": fmt, **(inputs or {})},
            "window": window,
            "flink": {
                "checkpoint_interval_ms": checkpoint_ms,
                "checkpoint_dir": str(self.dir / "checkpoints"),
                "prometheus_port": str(self.port),
                **(flink or {}),
            },
            "output": {
                "ledger_dir": str(self.dir / "ledger"),
                "reports_file": str(self.dir / "reports.jsonl"),
                "run_dir": str(self.dir / "run"),
            },
        }
        if privacy:
            values["privacy"] = dict(privacy)
        if hierarchy:
            values["hierarchy"] = {"spec": hierarchy}
        self.config = self.dir / "job.toml"
        self.config.write_text(toml_text(values))
        load_config(self.config, overrides=bench.job_set, environ={})  # fail early on a bad --set
        self.result = JobResult(name)
        self.proc: subprocess.Popen | None = None
        self.watcher: ReportWatcher | None = None

    def start(self) -> None:
        self.watcher = ReportWatcher(self.bench.kafka.options, self.topics["reports_topic"])
        self.watcher.start()
        self.watcher.ready.wait(30)
        if self.watcher.error is not None:
            raise RuntimeError(f"{self.name}: cannot read {self.topics['reports_topic']}: {self.watcher.error}")
        sets = [a for s in self.bench.job_set for a in ("--set", s)]
        self.stdout = open(self.dir / "job.stdout", "wb")
        self.stderr = open(self.dir / "job.stderr", "wb")
        self.t0 = time.monotonic()
        self.wall0 = time.time()
        self.proc = subprocess.Popen(
            [*dphhh_command(), "run", "--feed", "no", "--config", str(self.config), *sets],
            cwd=self.dir,
            stdout=self.stdout,
            stderr=self.stderr,
            env=job_environment(self.code),
            start_new_session=True,
        )
        log(f"  {self.name}: job started (pid {self.proc.pid}, run folder {self.dir / 'run'})")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout_s: float) -> int | None:
        """Wait for a bounded job to end by itself; stop it after ``timeout_s``."""
        deadline = self.t0 + timeout_s
        last = time.monotonic()
        while self.proc.poll() is None:
            if time.monotonic() > deadline:
                log(f"  {self.name}: still running after {timeout_s:.0f} s: stopping it")
                self.result.note = f"timed out after {timeout_s:.0f} s"
                self.stop()
                return None
            if time.monotonic() - last > 15:
                last = time.monotonic()
                log(f"  {self.name}: running for {last - self.t0:.0f} s, {len(self.watcher.arrivals)} report(s) so far")
            time.sleep(0.05)
        self.result.exited = time.monotonic() - self.t0
        return self.proc.returncode

    def stop(self) -> None:
        """SIGINT (the job cancels itself and exits), then the process group if it lingers."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                log(f"  {self.name}: no exit 60 s after SIGINT: killing its process group {self.proc.pid}")
                self._signal_group(signal.SIGKILL)
                self.proc.wait(timeout=30)

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def finish(self) -> JobResult:
        """Stop the helpers, make sure no process of the job's group is left, scan the logs."""
        if self.proc is None:  # never started
            if self.watcher is not None:
                self.watcher.stop_event.set()
            self.result.note = self.result.note or "not started"
            return self.result
        self.stop()
        deadline = time.monotonic() + 10
        while _group_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if _group_members(self.proc.pid):
            log(f"  {self.name}: processes left in the job's group {self.proc.pid}: terminating them")
            self._signal_group(signal.SIGTERM)
            time.sleep(3)
            if _group_members(self.proc.pid):
                self._signal_group(signal.SIGKILL)
        self.watcher.stop_event.set()
        if self.watcher.ident is not None:  # started
            self.watcher.join(timeout=5)
        self.stdout.close()
        self.stderr.close()
        r = self.result
        r.rc = self.proc.returncode
        r.reports = len(self.watcher.arrivals)
        if self.watcher.arrivals:
            r.first_report = self.watcher.arrivals[0][0] - self.t0
        files = sorted((self.dir / "run" / "log").glob("*")) + [self.dir / "job.stderr"]
        running = tasks_running_at(files)
        if running is not None:
            r.tasks_running = running - self.wall0
        r.problems = scan_problems(files)
        log(f"  {self.name}: exit status {r.rc}; log check: {r.problems.summary()}")
        for sample in r.problems.samples:
            log(f"    {sample}")
        return r


# ------------------------------------------------------------------------------------------------
# Scenarios


@dataclass
class Row:
    scenario: str
    messages: int
    addresses: int
    seconds: float | None
    ratio: float | None = None
    target: str = ""


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.bootstrap = args.bootstrap
        self.kafka = Kafka(args.bootstrap)
        self.prefix = f"bench-stream-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        self.job_set = list(args.job_set)
        self.results: dict[str, JobResult] = {}
        self.rows: list[Row] = []
        self.notes: list[str] = []
        self.inputs: dict[str, tuple[str, int, int]] = {}  # job name -> (input topic, messages, origin ms)

    def bounded(
        self,
        name: str,
        addresses: np.ndarray,
        per_message: int,
        windows: int,
        fmt: str,
        consume: bool,
        units: np.ndarray | None = None,
        privacy: dict | None = None,
        inputs: dict | None = None,
        flink: dict | None = None,
        reuse: tuple[str, int, int] | None = None,
        code: Path | None = None,
        hierarchy: str | None = None,
    ) -> tuple[JobResult, int, tuple[int, int, float] | None]:
        """Publish (or, with ``reuse`` = (input topic, messages, origin), read an earlier job's input),
        optionally time the consume-only loop, run the bounded job (``code``: another checkout's).

        ``--replay-log clock`` (the default): the input topic stores the broker's append times and a
        clock ticker appends clock records to it while it is written, as a live deployment's input
        log has them; formats without a time of their own are written window by window on the wall
        clock (their windows are their append times'), flow records keep their own times (BASE_MS on).
        ``--replay-log explicit``: every record carries an explicit timestamp from BASE_MS on (no
        clock records: a replay then applies its epochs at the end of input)."""
        clock = self.args.replay_log == "clock" and fmt not in ("text-ipv4", "json", "path")
        topics = self.kafka.topics(f"{self.prefix}-{name}", live=clock)
        origin = BASE_MS
        if reuse is None:
            pace = None
            ticker = None
            if clock:
                from dphhh.stream.clock import ClockTicker

                ticker = ClockTicker(self.kafka.options, topics["input_topic"], 100)
                ticker.start()
                if fmt != "flow-json":  # arrival is event time: one wall-clock window per window
                    origin = pace = (int(time.time() * 1000) // WINDOW_MS + 1) * WINDOW_MS
            try:
                n_msgs, _, _ = self.kafka.produce(
                    topics["input_topic"],
                    stream_messages(
                        addresses,
                        per_message,
                        windows,
                        BASE_MS,
                        fmt,
                        units,
                        bool((inputs or {}).get("json_time_field")),
                    ),
                    name,
                    pace=pace,
                )
                if ticker is not None:
                    time.sleep(0.3)  # a clock record after the last message
            finally:
                if ticker is not None:
                    ticker.stop()
        else:
            topics["input_topic"], n_msgs, origin = reuse
        self.inputs[name] = (topics["input_topic"], n_msgs, origin)
        ceiling = None
        if consume:
            log(f"  consume-only loop on {topics['input_topic']} ...")
            ceiling = self.kafka.consume_only(topics["input_topic"], self.args.consume_repeat)
            if fmt == "flow-json":
                java = java_consumer_rate(self.bootstrap, topics["input_topic"], n_msgs)
                self.notes.append(
                    f"{name}: Kafka's Java consumer (ConsumerPerformance) on the same topic: "
                    + (f"{java[0]:,.0f} records/s ({java[1]:.1f} MB/s)" if java else "could not run")
                )
                log(f"  {self.notes[-1]}")
        job = Job(
            self,
            name,
            topics,
            windows=windows,
            origin=origin,
            fmt=fmt,
            checkpoint_ms=self.args.checkpoint_ms,
            privacy=privacy,
            inputs=inputs,
            flink=flink,
            code=code,
            hierarchy=hierarchy,
        )
        try:
            job.start()
            job.result.expected_reports = windows
            rc = job.wait_exit(self.args.job_timeout)
            last_start = origin + (windows - 1) * WINDOW_MS
            # The last report is committed by the end-of-input checkpoint, before the process exits.
            job.watcher.wait_for(lambda: job.watcher.arrival_of(last_start) is not None, 10 if rc == 0 else 2)
            t_last = job.watcher.arrival_of(last_start)
            if t_last is not None:
                job.result.last_report = t_last - job.t0
        finally:
            result = job.finish()
        if result.rc != 0 and (job.dir / "job.stderr").exists():
            tail = (job.dir / "job.stderr").read_text(errors="replace")[-2000:]
            log(f"  {name}: the job failed (exit status {result.rc}); end of its stderr:\n{tail}")
        log(
            f"  {name}: after the process start: tasks running {fmt_s(result.tasks_running)}, first report {fmt_s(result.first_report)}, "
            f"last report {fmt_s(result.last_report)}, exit {fmt_s(result.exited)}; "
            f"{result.reports}/{windows} reports"
        )
        if result.reports != windows:
            log(f"  {name}: WARNING: {result.reports} report(s) read, {windows} expected")
        self.results[name] = result
        return result, n_msgs, ceiling

    def startup(self) -> JobResult:
        log("start-up: a tiny bounded job (3 messages of 10 addresses, one window) ...")
        addresses = synthetic_addresses(30, seed=3)
        result, _, _ = self.bounded("startup", addresses, 10, 1, "packed-ipv4", consume=False)
        if result.first_report is not None:
            log(
                f"  start-up: report readable {result.first_report:.1f} s after the process start "
                f"(tasks running after {fmt_s(result.tasks_running)}, process exit after {fmt_s(result.exited)})"
            )
        return result

    def throughput(
        self,
        label: str,
        name: str,
        addresses: np.ndarray,
        per_message: int,
        windows: int,
        fmt: str,
        startup: JobResult | None,
        addresses_target: bool,
        units: np.ndarray | None = None,
        privacy: dict | None = None,
        inputs: dict | None = None,
        flink: dict | None = None,
        reuse: tuple[str, int, int] | None = None,
        code: Path | None = None,
        hierarchy: str | None = None,
    ) -> None:
        n_addr = len(addresses)
        result, n_msgs, ceiling = self.bounded(
            name,
            addresses,
            per_message,
            windows,
            fmt,
            consume=reuse is None,
            units=units,
            privacy=privacy,
            inputs=inputs,
            flink=flink,
            reuse=reuse,
            code=code,
            hierarchy=hierarchy,
        )
        ceiling_rate = None
        if ceiling is not None:
            c_msgs, c_bytes, c_secs = ceiling
            c_addr = {"packed-ipv4": c_bytes // 4, "packed-ipv4-pairs": c_bytes // 8}.get(fmt, c_msgs)
            ceiling_rate = c_msgs / c_secs
            self.rows.append(
                Row(
                    f"consume-only, {label}",
                    c_msgs,
                    c_addr,
                    c_secs,
                    None,
                    f"(ingest ceiling, best of {self.args.consume_repeat})",
                )
            )

        def row(kind: str, secs: float | None, verdict: bool) -> None:
            rate_m = n_msgs / secs if secs and secs > 0 else None
            ratio = rate_m / ceiling_rate if rate_m and ceiling_rate else None
            target = ""
            if verdict and secs and secs > 0:
                if addresses_target:
                    ok = n_addr / secs >= TARGET_ADDRESSES_PER_S
                    target = f">= {TARGET_ADDRESSES_PER_S:,} addr/s: {'met' if ok else 'NOT met'}"
                elif ratio is not None:
                    target = f">= {TARGET_RATIO:g}x consume-only: {'met' if ratio >= TARGET_RATIO else 'NOT met'}"
            self.rows.append(
                Row(f"e2e {label}, {kind}", n_msgs, n_addr, secs if secs and secs > 0 else None, ratio, target)
            )
            if secs and secs > 0:
                log(
                    f"  {label}, {kind}: {secs:.2f} s, {n_msgs / secs:,.0f} messages/s, {n_addr / secs:,.0f} addresses/s"
                    + (f", {ratio:.3f}x consume-only" if ratio is not None else "")
                )

        ok = result.rc == 0 and result.last_report is not None
        if not ok:
            self.rows.append(
                Row(
                    f"e2e {label}: FAILED ({result.note or f'exit {result.rc}'}, {result.reports}/{windows} reports)",
                    n_msgs,
                    n_addr,
                    None,
                )
            )
            return
        row("raw (process start → last report)", result.last_report, False)
        if startup is not None and startup.first_report is not None:
            adjusted = result.last_report - startup.first_report
            row(f"adjusted (− start-up {startup.first_report:.1f} s)", adjusted, True)
        if result.tasks_running is not None:
            row("tasks running (Flink log) → last report", result.last_report - result.tasks_running, True)
        self.notes.append(
            f"{label}: {windows} window(s), {result.reports}/{windows} reports; first report {fmt_s(result.first_report)}, "
            f"last report {fmt_s(result.last_report)}, process exit {fmt_s(result.exited)} after the process start; "
            f"tasks running after {fmt_s(result.tasks_running)}" + (f"; {result.note}" if result.note else "")
        )

    def note_ratio(self, name: str, baseline: str, n: int) -> None:
        """A note with job ``name``'s rate over job ``baseline``'s (tasks running -> last report)."""
        rates = {}
        for key in (name, baseline):
            r = self.results.get(key)
            if r is None or r.last_report is None or r.tasks_running is None or r.last_report <= r.tasks_running:
                return
            rates[key] = n / (r.last_report - r.tasks_running)
        self.notes.append(
            f"{name} / {baseline} (tasks running -> last report, same run): {rates[name]:,.0f} / "
            f"{rates[baseline]:,.0f} records/s = {rates[name] / rates[baseline]:.2f}x"
        )
        log(f"  {self.notes[-1]}")

    def latency(self) -> None:
        a = self.args
        log(
            f"latency: live job, {a.latency_addresses:,} addresses per window, {a.latency_repeats} window(s), "
            f"checkpoint interval {a.latency_checkpoint_ms} ms ..."
        )
        topics = self.kafka.topics(f"{self.prefix}-latency", live=True)
        job = Job(self, "latency", topics, windows=None, checkpoint_ms=a.latency_checkpoint_ms)
        producer = PackedProducer(self.kafka.options, topics["input_topic"])
        samples: list[float] = []
        rates: list[float] = []
        loaded: set[int] = set()
        failure = ""
        try:
            job.start()
            if not job.watcher.wait_for(lambda: bool(job.watcher.arrivals), a.job_timeout, job.alive):
                failure = "no report from the live job"
            running = time.time()  # from here on the job runs: later releases are timed
            for rep in range(a.latency_repeats if not failure else 0):
                # the next window that starts at least 1 s from now: its addresses arrive at its start
                now_ms = int(time.time() * 1000)
                window = (now_ms + 1000) // WINDOW_MS * WINDOW_MS + WINDOW_MS
                time.sleep(max(0.0, window / 1000 - time.time()))
                addresses = synthetic_addresses(a.latency_addresses, seed=100 + rep)
                t_produce = time.monotonic()
                for i in range(0, len(addresses), a.batch):
                    producer.send_value(pack_ipv4(addresses[i : i + a.batch]))
                producer.flush()
                rates.append(a.latency_addresses / (time.monotonic() - t_produce))
                if time.time() * 1000 >= window + WINDOW_MS:
                    failure = f"publishing window {rep}'s addresses took longer than the window"
                    break
                end = window + WINDOW_MS
                loaded.add(window)
                if not job.watcher.wait_for(lambda w=window: job.watcher.arrival_of(w) is not None, 120, job.alive):
                    failure = f"no report for window {rep} within 120 s"
                    break
                readable = job.watcher.arrival_of(window) - job.t0 + job.wall0  # wall-clock time it was readable
                samples.append(readable - end / 1000)
                log(f"  window {rep}: report readable {samples[-1]:.2f} s after the window's end")
        finally:
            producer.close()
            if job.proc is not None:
                log("  stopping the live job (SIGINT) ...")
                result = job.finish()
                if result.rc == 130:
                    result.note = "exit 130 = stopped with SIGINT, as intended"
                self.results["latency"] = result
        if samples:
            worst = max(samples)
            verdict = "met" if worst < TARGET_LATENCY_S else "NOT met"
            self.latency_line = (
                f"report latency after a window's end: max {worst:.2f} s, median {float(np.median(samples)):.2f} s "
                f"over {len(samples)} window(s) of {a.latency_addresses:,} addresses ({', '.join(f'{s:.2f}' for s in samples)} s); "
                f"target < {TARGET_LATENCY_S:g} s at 10^6 addresses/window: {verdict}"
                + ("" if a.latency_addresses >= 1_000_000 else f" (measured at {a.latency_addresses:,}, not 10^6)")
                + f". Includes the wait for the next checkpoint (interval {a.latency_checkpoint_ms} ms): reports are "
                "Kafka transactions committed at checkpoints."
            )
        else:
            self.latency_line = f"report latency: NOT measured ({failure or 'no sample'})"
        if failure and samples:
            self.latency_line += f" [stopped early: {failure}]"
        empty = [
            t - job.t0 + job.wall0 - (start + WINDOW_MS) / 1000
            for t, start in list(job.watcher.arrivals)
            if start is not None and start not in loaded and (start + WINDOW_MS) / 1000 > running + 1
        ]
        if empty and samples:  # the residual timing channel: how much later a loaded window's report comes
            self.latency_line += (
                f" Empty windows of the same run: median {float(np.median(empty)):.2f} s, max "
                f"{max(empty):.2f} s over {len(empty)} window(s); the difference is the residual "
                "timing that the volume of a window causes (docs/howto/troubleshoot.md, Known limits)."
            )
        if rates:
            self.notes.append(
                f"latency job (live): publish rate of each window's addresses: "
                f"{', '.join(f'{r:,.0f}' for r in rates)} addresses/s"
            )


def fmt_s(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f} s"


def fmt_rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def print_table(bench: Bench, args: argparse.Namespace, load_start: tuple[float, float, float]) -> None:
    cfg = load_config(None, overrides=bench.job_set, environ={})
    p = cfg.params
    load_end = os.getloadavg()
    print(
        f"# stream throughput: `dphhh run` (embedded MiniCluster, parallelism {cfg['flink.parallelism']}), "
        f"Kafka {args.bootstrap}, {WINDOW_MS // 1000}-s windows, {cfg.hierarchy.spec()}, κ={p.counters}, "
        f"P={p.partitions}, ε={p.epsilon:g}, δ={p.delta:g}, checkpoints every {args.checkpoint_ms} ms (bounded runs)"
    )
    print(
        f"# {platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}; load average "
        f"(1 min) {load_start[0]:.2f} at start, {load_end[0]:.2f} at end — other load lowers every rate"
        + ("; QUICK smoke run: sizes far below the targets' conditions, start-up dominates" if args.quick else "")
    )
    header = (
        f"{'scenario':<62} {'messages':>11} {'addresses':>12} {'seconds':>8} {'messages/s':>11} "
        f"{'addresses/s':>12} {'ratio':>6}  target"
    )
    print(header)
    for r in bench.rows:
        secs = r.seconds
        print(
            f"{r.scenario:<62} {r.messages:>11,} {r.addresses:>12,} {f'{secs:.2f}' if secs else 'n/a':>8} "
            f"{fmt_rate(r.messages / secs if secs else None):>11} {fmt_rate(r.addresses / secs if secs else None):>12} "
            f"{'' if r.ratio is None else f'{r.ratio:.2f}x':>6}  {r.target}"
        )
    if hasattr(bench, "latency_line"):
        print(bench.latency_line)
    s = bench.results.get("startup")
    if s is not None:
        print(
            f"start-up (tiny bounded job, 3 messages): report readable after {fmt_s(s.first_report)}, tasks running "
            f"after {fmt_s(s.tasks_running)}, process exit after {fmt_s(s.exited)}; the adjusted rows subtract "
            "the time to its report"
        )
    for note in bench.notes:
        print(f"note: {note}")
    print(
        "note: ratio = the job's messages/s over the consume-only loop's messages/s on the same topic. Start-up "
        "varies from job to job under load, so the 'adjusted' rows can be off by seconds; 'tasks running' rows start "
        "when the Flink log shows the last task RUNNING (operators opened, Python workers up)"
    )
    print("job logs (ERROR lines, failed tasks, restarts, checkpoint failures, tracebacks):")
    for name, r in bench.results.items():
        print(f"  {name:<9} exit {r.rc}: {r.problems.summary()}" + (f"  [{r.note}]" if r.note else ""))
        for sample in r.problems.samples[:2]:
            print(f"            {sample}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--addresses", type=int, default=10_000_000, help="packed scenario: addresses (default 10^7)")
    ap.add_argument("--batch", type=int, default=1000, help="addresses per packed message (default 1000)")
    ap.add_argument(
        "--window-addresses",
        type=int,
        default=1_000_000,
        help="packed scenario: about this many addresses per 10-s window (default 10^6)",
    )
    ap.add_argument(
        "--single-messages",
        type=int,
        default=1_000_000,
        help="one-address-per-message scenario: messages (default 10^6)",
    )
    ap.add_argument("--single-windows", type=int, default=4, help="windows of that scenario (default 4)")
    ap.add_argument(
        "--single-format",
        default="packed",
        help="one element per message, comma-separated formats, each its own job on the same addresses: packed "
        '(a 4-byte packed message, the default), text (a dotted quad), json ({"ip": quad}), json-time (with the '
        "element's own time, input.json_time_field), path (each address as a 4-level path, hierarchy path:4), "
        "pairs (packed-ipv4-pairs, 8 bytes, a pair hierarchy), flows (one pmacct flow record, flow-json); "
        "the notes give each format's messages/s over text's",
    )
    ap.add_argument(
        "--latency-addresses",
        type=int,
        default=1_000_000,
        help="latency scenario: addresses in the window (default 10^6)",
    )
    ap.add_argument("--latency-repeats", type=int, default=3, help="latency samples, consecutive windows (default 3)")
    ap.add_argument(
        "--latency-checkpoint-ms", type=int, default=1000, help="checkpoint interval of the latency job (default 1000)"
    )
    ap.add_argument(
        "--checkpoint-ms", type=int, default=2000, help="checkpoint interval of the bounded jobs (default 2000)"
    )
    ap.add_argument(
        "--user-units",
        type=int,
        default=100_000,
        help="user scenario: distinct unit (source) addresses, Zipf-distributed (default 10^5)",
    )
    ap.add_argument("--user-cap", type=int, default=16, help="user scenario: privacy.unit_cap (default 16)")
    ap.add_argument(
        "--flow-records",
        type=int,
        default=3_000_000,
        help="flows scenario: flow records, one per message (default 3·10^6: shorter runs mostly time the JVM's "
        "warm-up, its JIT compilers taking most of a core here)",
    )
    ap.add_argument(
        "--replay-log",
        choices=("clock", "explicit"),
        default="clock",
        help="the replays' input log: 'clock' (default) the broker's append times and clock records, as a "
        "live deployment's input topic holds them (a replay applies complete epochs while it reads); "
        "'explicit' producer-set timestamps in the past, no clock records (epochs applied at the end)",
    )
    ap.add_argument("--consume-repeat", type=int, default=2, help="consume-only passes, best kept (default 2)")
    ap.add_argument("--job-timeout", type=float, default=1800.0, help="seconds before a job is stopped (default 1800)")
    ap.add_argument(
        "--only",
        default="packed,single,latency",
        help="comma-separated scenarios to run: packed, user, flows, flows-python (with flows), single, latency "
        "(default: packed,single,latency)",
    )
    ap.add_argument(
        "--set",
        dest="job_set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="passed to every job as `dphhh run --set` (e.g. privacy.partitions=2)",
    )
    ap.add_argument("--bootstrap", default="127.0.0.1:9092", help="Kafka bootstrap (default the local broker)")
    ap.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another checkout (e.g. `git worktree add /tmp/before HEAD~1`): the packed and flows scenarios "
        "also run its code on the same input topics, and the notes give this checkout's rate over its "
        "(the before/after of a change, in one run; its deploy/jars may be a link to this one's)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, ledgers) and the topics")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke run (~2 min): 2·10^5 packed addresses over 4 windows, 2·10^4 single messages, "
        "one latency window of 2·10^5 addresses",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.addresses = min(args.addresses, 200_000)
        args.window_addresses = min(args.window_addresses, 50_000)
        args.single_messages = min(args.single_messages, 20_000)
        args.flow_records = min(args.flow_records, 50_000)
        args.latency_addresses = min(args.latency_addresses, 200_000)
        args.latency_repeats = 1
        args.consume_repeat = 1
        args.job_timeout = min(args.job_timeout, 300.0)
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    if only - SCENARIOS:
        ap.error(f"--only: unknown scenario(s) {', '.join(sorted(only - SCENARIOS))}")
    unknown = set(args.single_format.split(",")) - set(SINGLE_FORMATS)
    if unknown:
        ap.error(
            f"--single-format: unknown format(s) {', '.join(sorted(unknown))} (one of {', '.join(SINGLE_FORMATS)})"
        )
    for name in (
        "addresses",
        "batch",
        "window_addresses",
        "flow_records",
        "single_messages",
        "single_windows",
        "latency_addresses",
        "latency_repeats",
        "consume_repeat",
        "user_units",
        "user_cap",
    ):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    try:
        load_config(None, overrides=args.job_set, environ={})
    except ValueError as exc:
        ap.error(str(exc))

    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="dphhh-bench-stream-"))
    log(f"work folder: {work}")
    broker = start_bench_broker(args.bootstrap)
    bench = Bench(args, work)
    interrupted = failed = False
    try:
        startup = bench.startup() if only & {"packed", "user", "single", "flows"} else None
        if "packed" in only:
            windows = max(1, round(args.addresses / args.window_addresses))
            log(f"packed: {args.addresses:,} addresses, {args.batch} per message, {windows} window(s) ...")
            addresses = synthetic_addresses(args.addresses, seed=1)
            bench.throughput(
                f"packed ({args.batch}/msg)", "packed", addresses, args.batch, windows, "packed-ipv4", startup, True
            )
            if args.baseline is not None:  # the same topic, the other checkout's code
                bench.throughput(
                    f"packed ({args.batch}/msg), baseline {args.baseline.name}",
                    "packed-baseline",
                    addresses,
                    args.batch,
                    windows,
                    "packed-ipv4",
                    startup,
                    True,
                    reuse=bench.inputs.get("packed"),
                    code=args.baseline,
                )
                bench.note_ratio("packed", "packed-baseline", args.addresses)
            del addresses
        if "user" in only:
            windows = max(1, round(args.addresses / args.window_addresses))
            log(
                f"user: {args.addresses:,} (unit, address) pairs, {args.user_units:,} units, cap "
                f"{args.user_cap} per unit and window, {windows} window(s) ..."
            )
            addresses = synthetic_addresses(args.addresses, seed=1)  # the packed scenario's addresses
            pool = synthetic_addresses(args.user_units, seed=5)
            units = pool[np.random.default_rng(6).zipf(1.3, args.addresses) % args.user_units]
            bench.throughput(
                f"user level ({args.batch}/msg, cap {args.user_cap})",
                "user",
                addresses,
                args.batch,
                windows,
                "packed-ipv4-pairs",
                startup,
                True,
                units=units,
                privacy={
                    "unit_key": "source-ipv4",
                    "unit_cap": args.user_cap,
                    "budget_epsilon": 1e6,
                    "budget_period": "deployment",
                },
            )
            del addresses, units
        if "flows" in only:
            windows = max(1, round(args.flow_records / args.window_addresses))
            log(
                f"flows: {args.flow_records:,} pmacct flow records (one per message), weighted by bytes, "
                f"{windows} window(s) ..."
            )
            addresses = synthetic_addresses(args.flow_records, seed=1)
            variants = [("flows (pmacct JSON, bytes, W=1500)", "flows", {})]
            if "flows-python" in only:  # the baseline: the same topic, every record decoded in Python
                variants.append(
                    (
                        "flows, all decoded in Python (batch_parse_flows = false)",
                        "flows-python",
                        {"batch_parse_flows": False},
                    )
                )
            for label, name, flink in variants:
                log(f"{name}: {label} ...")
                bench.throughput(
                    label,
                    name,
                    addresses,
                    1,
                    windows,
                    "flow-json",
                    startup,
                    False,
                    inputs={"flow_weight": "bytes", "weight_cap": 1500},
                    flink=flink,
                    reuse=bench.inputs.get("flows"),  # None for the first
                )
            if "flows-python" in only:
                bench.note_ratio("flows", "flows-python", args.flow_records)
            if args.baseline is not None:
                bench.throughput(
                    f"flows, baseline {args.baseline.name}",
                    "flows-baseline",
                    addresses,
                    1,
                    windows,
                    "flow-json",
                    startup,
                    False,
                    inputs={"flow_weight": "bytes", "weight_cap": 1500},
                    reuse=bench.inputs.get("flows"),
                    code=args.baseline,
                )
                bench.note_ratio("flows", "flows-baseline", args.flow_records)
            del addresses
        if "single" in only:
            addresses = synthetic_addresses(args.single_messages, seed=2)
            forms = args.single_format.split(",")
            for form in sorted(forms, key=lambda f: f != "text"):  # text first: the others' ratios are over it
                single = SINGLE_FORMATS[form]
                log(
                    f"single: {args.single_messages:,} messages of one element ({form}), "
                    f"{args.single_windows} window(s) ..."
                )
                name = "single" if form == "packed" else f"single-{form}"
                bench.throughput(
                    f"1/msg ({form})",
                    name,
                    addresses,
                    1,
                    args.single_windows,
                    single.fmt,
                    startup,
                    False,
                    units=synthetic_addresses(len(addresses), seed=7) if single.units else None,
                    inputs=single.inputs,
                    hierarchy=single.hierarchy,
                )
                if form != "text" and "text" in forms:
                    bench.note_ratio(name, "single-text", args.single_messages)
        if "latency" in only:
            bench.latency()
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: printing what was measured")
    except Exception:
        failed = True
        log(traceback.format_exc())
        log("error: printing what was measured")
    finally:
        bench.kafka.close()
        if not args.keep:
            bench.kafka.delete_created()
        if broker is not None:
            broker.stop()
    print_table(bench, args, load_start)
    if args.keep:
        log(f"kept: {work} (job folders: job.toml, job.stderr, run/log) and the topics {bench.prefix}-*")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 130 if interrupted else 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
