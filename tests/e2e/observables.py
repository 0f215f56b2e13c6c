"""The differential harness: what a user of a deployment can observe, made comparable across runs
(docs/ALGORITHMS.md §0.1).

Two runs of the job on neighbouring inputs X and X + e must show the same observables apart from the
noisy report values. This module turns each surface into something two runs can be compared on:

* **report visibility** — :class:`Watch` polls a surface (a ``read_committed`` reader of the reports
  topic: :func:`topic_reader`) and records when each window's report is first seen;
* **metrics** — :class:`MetricSampler` scrapes Prometheus endpoints at fixed wall-clock instants
  *during* the run (both runs share one schedule, so their samples are taken at the same moments);
  :func:`metric_series` keys every series by its name and **all** its labels, only run-specific label
  values masked (two series that differ in any other label stay two series);
* **logs** — :func:`masked_log_lines` masks times, durations, ids, ports and run-specific names and
  nothing else (a count stays visible, glued to letters or not); :func:`log_differences` compares
  two runs' log records — every level of every logger, Flink's runtime and Beam's runners included,
  from start-up to the final savepoint — as multisets (a line repeated once more is a difference), and
  :func:`log_order_differences` as ordered lists, one per logger (per task for the loggers several
  task threads write at once: :data:`INTERLEAVED_LOGGERS`); both leave out only lines whose presence
  or number follows timing (:data:`TIMING_LINES`, each with its reason) and the runtime's INFO
  narration of the cluster's tear-down (:data:`SHUTDOWN_INFO_LOGGERS`); :func:`read_logs` refuses an
  empty glob (empty vs empty would pass).

The negative controls (a planted count in a runtime or a job line, a repeated warning, two records
swapped, a label-only difference, a gauge moving mid-run, an empty log folder) are plain tests in ``tests/stream/test_observables_harness.py``.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from tests.e2e.jobs import mask_times

__all__ = [
    "TIMING_LINES",
    "MetricSampler",
    "Watch",
    "SHUTDOWN_INFO_LOGGERS",
    "compared_records",
    "log_differences",
    "log_order_differences",
    "ordered_logs",
    "log_records",
    "phases",
    "masked_log_lines",
    "metric_series",
    "metric_total",
    "scrape",
    "read_logs",
    "topic_reader",
]


class Watch(threading.Thread):
    """Polls one surface until stopped; ``seen[window start] = wall time (s) first seen``."""

    def __init__(
        self,
        name: str,
        poll: Callable[[], Iterable[tuple[int, float]]],
        *,
        start_at: float | None = None,
        interval_s: float = 0.0,
    ) -> None:
        """``start_at``: wall time (s) of the first poll; ``interval_s``: pause between polls (a
        busy poller takes CPU from the jobs it watches on a 2-core machine)."""
        super().__init__(daemon=True, name=name)
        self.poll = poll
        self.seen: dict[int, float] = {}
        self.stop_event = threading.Event()
        self.errors = 0
        self.start_at = start_at
        self.interval_s = interval_s

    def run(self) -> None:
        if self.start_at is not None:
            self.stop_event.wait(max(0.0, self.start_at - time.time()))
        while not self.stop_event.is_set():
            if self.interval_s:
                self.stop_event.wait(self.interval_s)
            try:
                for window, at in self.poll():
                    self.seen.setdefault(window, at)
            except Exception:  # a surface not up yet (the dashboard, the metrics endpoint)
                self.errors += 1
                time.sleep(0.01)


def topic_reader(options: dict, topic: str, isolation: str) -> Callable[[], list[tuple[int, float]]]:
    """A poll function for :class:`Watch`: (window start, wall time seen) of each report on partition
    0 of ``topic``, read with ``isolation`` (``read_committed`` or ``read_uncommitted``)."""
    from kafka import KafkaConsumer, TopicPartition

    from dphhh.connectors.kafka_io import _open_client

    consumer = _open_client(KafkaConsumer, options, group_id=None, enable_auto_commit=False, isolation_level=isolation)
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)

    def poll() -> list[tuple[int, float]]:
        out = []
        for records in consumer.poll(timeout_ms=5).values():
            now = time.time()
            out += [(json.loads(r.value)["window"]["start_ms"], now) for r in records]
        return out

    return poll


# ------------------------------------------------------------------------------------------ metrics

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", re.M)
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
#: label values that name the run, not the data: Flink's ids of the job, task attempts and task
#: manager, the host, and the job's name (each run has its own)
RUN_LABELS = ("job_id", "task_attempt_id", "tm_id", "host", "job_name", "task_attempt_num")


def metric_series(text: str, run_labels: Iterable[str] = RUN_LABELS) -> dict[str, float]:
    """Every series of a Prometheus exposition: ``name{label=value,…}`` (all labels, sorted; the
    values of ``run_labels`` masked) → value. Two series differing in any other label stay apart."""
    masked = set(run_labels)
    out: dict[str, float] = {}
    for name, labels, value in _SAMPLE.findall(text):
        kv = sorted((k, "<run>" if k in masked else v) for k, v in _LABEL.findall(labels or ""))
        key = name + "{" + ",".join(f"{k}={v}" for k, v in kv) + "}"
        if key in out:
            raise AssertionError(f"metric_series: two series map to {key}: a label the mask merges")
        out[key] = float(value)
    return out


def metric_total(text: str, name: str) -> float:
    """The sum of every series of metric ``name`` in an exposition (all label values)."""
    return sum(v for k, v in metric_series(text).items() if k.split("{")[0] == name)


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode("utf-8", "replace")


class MetricSampler(threading.Thread):
    """Scrapes ``ports`` at each wall-clock instant of ``at`` (seconds since the epoch); ``samples[i]``
    is ``{port: exposition text}`` at ``at[i]`` (a port not answering yet gives ``""``)."""

    def __init__(self, ports: Iterable[int], at: Iterable[float]) -> None:
        super().__init__(daemon=True, name="metric-sampler")
        self.ports = list(ports)
        self.at = list(at)
        self.samples: list[dict[int, str]] = []

    def run(self) -> None:
        for instant in self.at:
            time.sleep(max(0.0, instant - time.time()))
            sample = {}
            for port in self.ports:
                try:
                    sample[port] = scrape(port)
                except OSError:
                    sample[port] = ""
            self.samples.append(sample)


# --------------------------------------------------------------------------------------------- logs

#: (pattern, replacement): times, durations, ids, ports and process-local handles — never a count
_MASKS = [
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"@[0-9a-f]{4,}\b"), "@<hash>"),
    (re.compile(r"\b[0-9a-f]{16,}(_[0-9a-f]+)*(_\d+)*\b"), "<id>"),
    (re.compile(r"minicluster_[0-9a-f]+"), "minicluster_<id>"),
    (re.compile(r"\b\d+(\.\d+)? ?(ms|s|seconds)\b"), "<duration>"),
    (re.compile(r"(127\.0\.0\.1|localhost|0\.0\.0\.0):\d+"), r"\1:<port>"),
    (re.compile(r"<-\d+\]"), "<-<port>]"),  # a client socket's local port
    (re.compile(r"(laddr|raddr)=\('([\d.]+)', \d+\)"), r"\1=('\2', <port>)"),
    (re.compile(r"\bfd=\d+"), "fd=<n>"),
    (re.compile(r"\bport \d+"), "port <port>"),
    (re.compile(r"--options_id=[\d.]+"), "--options_id=<n>"),
    (re.compile(r"\b(checkpoint|Checkpoint) \d+"), r"\1 <n>"),
    (re.compile(r"\) @ \d{13}\b"), ") @ <epoch-ms>"),  # a checkpoint's trigger time
    (re.compile(r"time in queue: \d+"), "time in queue: <duration>"),
    (re.compile(r"(pekko://flink/user/rpc/\w+?)_\d+"), r"\1_<n>"),  # endpoint numbers follow start order
    (re.compile(r"ProducerId set to \d+ with epoch \d+"), "ProducerId set to <id> with epoch <n>"),
    (re.compile(r"(kafka-python-(?:producer|consumer|admin))-\d+"), r"\1-<n>"),
    (re.compile(r"/tmp/tmp\w+(/tmp\w+)*"), "/tmp/<tmp>"),  # Python's temporary files
    (re.compile(r"object at 0x[0-9a-f]+"), "object at <addr>"),
]

#: Lines whose presence or number follows timing, not the data; each with its reason. A line left
#: out here must be such that no input could change it (it is about the run's clock, not its data).
TIMING_LINES: dict[str, str] = {
    "Triggering checkpoint <n>": "periodic checkpoints: how many fall in the run follows its duration",
    "Completed checkpoint <n>": "as above",
    "checkpoint request time in queue": "as above",
    "Failed to trigger or complete checkpoint <n>": "a periodic checkpoint the final savepoint overtakes",
    "Failed to trigger or complete checkpoint UNKNOWN_CHECKPOINT_ID": (
        "a periodic checkpoint due while the scheduler shuts down (WARN, seen once in the shutdown of a loaded run)"
    ),
    "Received resource requirements from job": "the slot manager logs each poll of requirements it sees",
    "Error cleaning up servers urn": "Beam's clean-up of a worker environment racing the worker's exit",
    "Failed to close release connections with type": "the Kafka client's close racing its network thread",
    "Name collision: Group already contains a Metric with the name": (
        "Flink's metric registration of the sinks' committers, once per (re)registration: follows start-up timing"
    ),
    "kafka/net/transport.py": "kafka-python's connections: opened and closed as its network thread is scheduled",
    "kafka/net/connection.py": "as above",
    "kafka/cluster.py": "kafka-python's metadata refreshes, on its own timer",
    "kafka/conn.py": "as above",
    "kafka/client_async.py": "as above",
    "Starting RPC endpoint for": "the order in which the MiniCluster's endpoints start (numbered by it)",
    "Received confirmation of leadership for leader": "as above",
    "Registering job manager": "the job manager's registration at the resource manager, retried under load",
    "Registered job manager": "as above",
    "Registering TaskManager with ResourceID": (
        "the task executor's registration at the resource manager, retried when no answer comes within "
        "cluster.registration.initial-timeout (100 ms) under load; the second replaces the first (seen "
        "once in a fresh-clone suite's parallel lane, in the X + e run only)"
    ),
    "Unregistering task executor": "as above: the replaced registration leaving the slot manager",
    "Failed to trigger checkpoint for job": "a periodic checkpoint due before every task is running (start-up)",
    "has been notified as aborted": "as above",
    "Checkpoint Coordinator is suspending": "a periodic checkpoint the stop-with-savepoint overtakes",
    "Decline checkpoint <n> by task": "a periodic checkpoint reaching a task that is starting or closing",
    "failed due to org.apache.flink.runtime.checkpoint.CheckpointException": "as above",
    "Ignoring checkpoint": (
        "a periodic checkpoint triggered before the one-element start source finished and completed after it "
        "(seen once in CI: COMPLETE and SUBSUME for 'Source: start'): follows when the checkpoint falls"
    ),
    "It is blocking the event loop": "kafka-python's own watchdog of its event loop's scheduling",
    "Still waiting for startup of environment": (
        "Beam's note each poll interval a Python worker has not yet started: start-up time under load"
    ),
}


def masked_log_lines(text: str, run: dict[str, str]) -> list[str]:
    """Log lines with ``run``'s names replaced by their aliases, then times, durations, ids, ports and
    handles masked (:data:`_MASKS`); blank lines dropped. Counts are never masked."""
    for real, alias in run.items():
        text = text.replace(real, alias)
    text = mask_times(text)
    for pattern, replacement in _MASKS:
        text = pattern.sub(replacement, text)
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def log_records(lines: list[str]) -> list[str]:
    """Lines grouped into log records: a line starting with a (masked) time begins a record; the
    lines after it that do not (stack traces, dumps) belong to it."""
    records: list[str] = []
    for line in lines:
        if line.startswith("<time>") or not records:
            records.append(line)
        else:
            records[-1] += "\n" + line
    return records


#: the job's steady phase in its log: after the last task reached RUNNING, before the final
#: stop-with-savepoint is triggered (Flink 2.2's JobMaster logs "Triggering stop-with-savepoint")
STEADY_FROM = "switched from INITIALIZING to RUNNING"
STEADY_UNTIL = ("Triggering stop-with-savepoint", "(type=SavepointType")


def phases(records: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(start-up, steady, shutdown) records of one run's log (:data:`STEADY_FROM`, :data:`STEADY_UNTIL`)."""
    heads = [r.split("\n", 1)[0] for r in records]
    start = max((i for i, h in enumerate(heads) if STEADY_FROM in h), default=-1) + 1
    stop = next((i for i, h in enumerate(heads) if i >= start and any(u in h for u in STEADY_UNTIL)), len(records))
    return records[:start], records[start:stop], records[stop:]


#: loggers whose INFO records are compared in the shutdown phase too: the connectors (Flink's Kafka
#: source logs offsets at INFO), the Kafka clients and the job's own code. The INFO records of Flink's
#: runtime and Beam's runners there narrate the MiniCluster's tear-down after the final savepoint —
#: the dispatcher, job master, resource manager and task executor stopping concurrently — and which
#: of them says what follows which stops first (seen in five pairs of runs on a loaded machine, each
#: once in one run only: "Disconnect TaskExecutor … because:" with either side's reason, "Close
#: ResourceManager connection", "Disconnect job manager", "Clearing resource requirements of job",
#: "Resource manager service is not running", "JobManager for job … lost leadership", "Hanged up for
#: unknown endpoint", "Shutting down TaskExecutorFileMergingManager"). They are compared at WARN and
#: ERROR only; a count in any of them is found by the leak scans of ``tests/e2e/jobs.py``.
SHUTDOWN_INFO_LOGGERS = (
    " org.apache.flink.connector.",
    " org.apache.kafka.",
    "/stream/",
    "/connectors/",
    "/privacy/",
    "/sketches/",
    " dphhh",
)


#: Loggers that several threads write at once, each with its reason. Their records are compared in
#: order **per task** (a record naming a task belongs to that task's list); records naming no task are
#: compared as a multiset only (:func:`log_differences`). Every other logger's records are compared
#: as one ordered list.
INTERLEAVED_LOGGERS: dict[str, str] = {
    "org.apache.flink.runtime.taskmanager.Task": "each task's thread narrates its own lifecycle",
    "org.apache.flink.runtime.executiongraph.ExecutionGraph": "the job master records every task's transitions as they arrive",
    "org.apache.flink.runtime.taskexecutor.TaskExecutor": "the task executor's RPC endpoint, called by every task",
    "org.apache.flink.runtime.taskexecutor.slot.TaskSlotTableImpl": "as above",
    "org.apache.flink.runtime.taskexecutor.DefaultJobLeaderService": "as above",
    "org.apache.flink.runtime.jobmaster.JobMaster": "the job master's RPC endpoint, called by every task and the resource manager",
    "org.apache.flink.streaming.runtime.tasks.StreamTask": "each task's thread sets up its own operators",
    "org.apache.flink.streaming.api.operators.AbstractStreamOperator": "as above",
    "org.apache.flink.streaming.api.runners.python.beam.BeamPythonFunctionRunner": "as above",
    "org.apache.flink.python.env.AbstractPythonEnvironmentManager": "as above",
    "org.apache.flink.runtime.state.StateBackendLoader": "as above",
    "org.apache.flink.runtime.state.heap.HeapKeyedStateBackend": "as above",
    "org.apache.flink.runtime.state.heap.HeapKeyedStateBackendBuilder": "as above",
    "org.apache.flink.runtime.state.changelog.StateChangelogStorageLoader": "as above",
    "org.apache.flink.runtime.state.TaskExecutorLocalStateStoresManager": "as above",
    "org.apache.beam.runners.fnexecution.control.FnApiControlClientPoolService": "one client per Python operator",
    "org.apache.beam.runners.fnexecution.control.DefaultJobBundleFactory": "as above",
    "org.apache.beam.runners.fnexecution.logging.GrpcLoggingService": "as above",
    "org.apache.beam.sdk.fn.data.BeamFnDataGrpcMultiplexer": "as above",
    # the Python workers: one per Python operator, each writing the same modules' loggers
    "apache_beam/runners/worker/sdk_worker.py": "one Python worker per Python operator",
    "apache_beam/runners/worker/sdk_worker_main.py": "as above",
    "apache_beam/runners/worker/data_plane.py": "as above",
    "apache_beam/runners/worker/statecache.py": "as above",
    "apache_beam/options/pipeline_options.py": "as above",
}

_HEAD = re.compile(r"^<time> +(TRACE|DEBUG|INFO|WARN|ERROR|FATAL) +(\S+)")
#: a task as Flink names it in a record: "sketch (1/1)#0 (<id>) switched from ..." (the name may hold
#: parentheses: "Source: kafka-source -> ... -> (Map -> ..., _stream_key_by_map_operator)")
_TASK = re.compile(r" - (.+?) \(\d+/\d+\)#\d+ \(<id>\) switched from ")


def _logger(record: str) -> str:
    """The record's logger (a Python worker's source file without its line number)."""
    m = _HEAD.match(record)
    return re.sub(r":\d+$", "", m.group(2)) if m else ""


def _compared(record: str, phase: str, timing: dict[str, str]) -> bool:
    head = record.split("\n", 1)[0]
    if any(t in head for t in timing):
        return False
    if phase != "shutdown" or " WARN " in head or " ERROR " in head:
        return True
    return " INFO " in head and any(p in head for p in SHUTDOWN_INFO_LOGGERS)


def compared_records(lines: list[str], timing: dict[str, str] = TIMING_LINES) -> list[tuple[str, str]]:
    """(phase, record) of every record of one run's masked log that is compared, in log order: every
    level of every logger in the start-up and steady phases (:func:`phases`); in the shutdown phase
    WARN and ERROR of every logger and INFO of :data:`SHUTDOWN_INFO_LOGGERS`; never the lines of
    ``timing``."""
    startup, steady, shutdown = phases(log_records(lines))
    named = [("startup", startup), ("steady", steady), ("shutdown", shutdown)]
    return [(phase, r) for phase, records in named for r in records if _compared(r, phase, timing)]


def log_differences(x: list[str], y: list[str], timing: dict[str, str] = TIMING_LINES) -> tuple[Counter, Counter]:
    """(records more often in x, records more often in y) of two runs' masked log lines, as
    multisets of log records (:func:`log_records`; a record repeated once more is a difference) of
    every level and every logger — Flink's runtime and Beam's runners included — over the whole
    log (a record that moves from the start-up into the steady phase is the same record), as
    :func:`compared_records` selects them. DEBUG is not logged."""
    cx = Counter(record for _, record in compared_records(x, timing))
    cy = Counter(record for _, record in compared_records(y, timing))
    return cx - cy, cy - cx


def ordered_logs(lines: list[str], timing: dict[str, str] = TIMING_LINES) -> dict[tuple[str, str], list[str]]:
    """One run's compared records of its start-up and steady phases as ordered lists: one per
    logger, and for the :data:`INTERLEAVED_LOGGERS` one per (logger, task) — records naming no task
    are left to :func:`log_differences`' multiset, as is the shutdown phase: after the final
    savepoint, the dispatcher, job master, resource manager and task executor stop concurrently and
    tell each other so in either order (measured: the resource manager's "Shut down cluster" before or
    after its "Disconnect job manager" under load)."""
    records = [(phase, r) for phase, r in compared_records(lines, timing) if phase != "shutdown"]
    tasks = sorted({m.group(1) for _, r in records if (m := _TASK.search(r.split("\n", 1)[0]))}, key=len, reverse=True)
    lists: dict[tuple[str, str], list[str]] = {}
    for _, record in records:
        logger = _logger(record)
        subject = ""
        if any(logger.endswith(shared) for shared in INTERLEAVED_LOGGERS):
            subject = next((t for t in tasks if t in record.split("\n", 1)[0]), None)
            if subject is None:
                continue
        lists.setdefault((logger, subject), []).append(record)
    return lists


def log_order_differences(
    x: list[str], y: list[str], timing: dict[str, str] = TIMING_LINES
) -> dict[tuple[str, str], tuple[str | None, str | None]]:
    """{(logger, task): (x's record, y's record) at the first place their ordered lists differ} of two
    runs (:func:`ordered_logs`); empty when every list is equal, record by record."""
    ox, oy = ordered_logs(x, timing), ordered_logs(y, timing)
    out = {}
    for key in sorted(set(ox) | set(oy)):
        a, b = ox.get(key, []), oy.get(key, [])
        if a != b:
            i = next((i for i, (p, q) in enumerate(zip(a, b)) if p != q), min(len(a), len(b)))
            out[key] = (a[i] if i < len(a) else None, b[i] if i < len(b) else None)
    return out


def read_logs(folder: Path, pattern: str = "*") -> str:
    """The text of every file matching ``pattern`` in ``folder``; AssertionError if there is none or
    all are empty (a comparison of two empty logs proves nothing)."""
    files = sorted(p for p in folder.glob(pattern) if p.is_file())
    text = "".join(p.read_text(errors="replace") for p in files)
    if not text.strip():
        raise AssertionError(f"read_logs: no log text in {folder}/{pattern} ({len(files)} files)")
    return text


# -------------------------------------------------------------------------------------------- files


def file_listing(root: Path, run: dict[str, str], sized: Iterable[str] = (), skip: Iterable[str] = ()) -> Counter:
    """Every folder and file under ``root`` as (path relative to it, masked like a log line, mode as
    octal text, size or ``None``): a multiset, so that one more file (a checkpoint, a dump, a dead
    letter spool) is a difference. A size is listed for the paths matching one of the ``sized``
    regular expressions only — the files whose content is public (the others hold noisy values,
    exact state or times, and their sizes follow them). Paths matching a ``skip`` expression
    (relative to ``root``, before masking) are left out; checkpoint folders are listed, not their
    content (how a state backend splits a checkpoint into files follows the state's size: private
    state, docs/explanation/guarantees.md "Who may read what")."""
    patterns = [re.compile(p) for p in sized]
    skipped = [re.compile(p) for p in skip]
    out: Counter = Counter()
    for path in sorted(root.rglob("*")):
        relative = str(path.relative_to(root))
        if any(p.search(relative) for p in skipped) or re.search(r"/chk-\d+/|/savepoint-[^/]+/", "/" + relative):
            continue
        try:
            info = path.lstat()
        except FileNotFoundError:  # removed while listed (a checkpoint being retired)
            continue
        relative = re.sub(r"savepoint-[0-9a-f]+-[0-9a-f]+", "savepoint-<id>", re.sub(r"chk-\d+", "chk-<n>", relative))
        rel = masked_log_lines(relative, run)
        name = rel[0] if rel else ""
        size = info.st_size if path.is_file() and any(p.search(name) for p in patterns) else None
        mode = "symlink" if path.is_symlink() else oct(info.st_mode & 0o7777)  # a link's own bits mean nothing
        out[(name, mode, size)] += 1
    return out
