"""Running the stream job from the CLI: broker, topics, producers, the job, report printing.

* :func:`run_job` — ``dphhh run``: the main job until Ctrl-C, the end of a replay's input, or the end
  of a live schedule (``window.until``).
* :func:`run_demo` — ``dphhh demo``: a self-contained replay (``window.mode = replay``) of a sample
  stream (the bundled real capture, synthetic windows, an empty window and a few bad records),
  printing each report.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from dphhh.connectors.kafka_io import PackedProducer, create_topics, iter_committed_values, pack_ipv4
from dphhh.connectors.synthetic import synthetic_addresses

from .broker import LocalBroker, reachable
from .config import JobConfig, load_config
from .errors import JobFailed
from .operators import FATAL_FILE
from .paths import DEMO_CAPTURE, state_dir
from .paths import capture as bundled_capture
from .reports_stall import ReportsStallWatch, stall_limit_s

if TYPE_CHECKING:
    from .report_metrics import ReportMetrics

__all__ = ["run_job", "run_demo", "wait_for_job", "sample_stream"]


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def wait_for_kafka(
    cfg: JobConfig,
    metrics: ReportMetrics | None = None,
    *,
    what: str = "dphhh run",
    sleep: Callable[[float], None] = time.sleep,
    probe: Callable[..., None] | None = None,
) -> None:
    """Wait until the configured broker answers, retrying with exponential backoff (1 s, 2 s, 4 s …
    30 s), each failed attempt logged and counted (``dphhh_kafka_connect_retries_total``,
    ``dphhh_kafka_broker_up``); ``kafka.wait_s`` > 0 bounds the wait (then ``TimeoutError``).
    ``probe(options, timeout_s=)`` raises ``TimeoutError`` while the broker does not answer."""
    from dphhh.connectors.kafka_io import wait_for_broker

    probe = probe or wait_for_broker

    bootstrap, limit = cfg["kafka.bootstrap"], cfg["kafka.wait_s"]
    started, delay, attempt = time.monotonic(), 1.0, 0
    while True:
        attempt += 1
        try:
            probe(cfg.kafka_client_options(), timeout_s=5.0)
        except TimeoutError:
            if metrics is not None:
                metrics.broker_up.set(0)
                metrics.connect_retries.inc()
            waited = time.monotonic() - started
            if limit and waited + delay > limit:
                raise TimeoutError(
                    f"kafka: broker {bootstrap} not reachable after {attempt} attempts in "
                    f"{waited:.0f} s (kafka.wait_s = {limit})"
                ) from None
            _say(
                f"{what}: broker {bootstrap} not reachable (attempt {attempt}); retrying in {delay:.0f} s "
                "(Ctrl-C stops)"
            )
            sleep(delay)
            delay = min(delay * 2, 30.0)
            continue
        if metrics is not None:
            metrics.broker_up.set(1)
        if attempt > 1:
            _say(f"{what}: broker {bootstrap} reachable after {attempt} attempts")
        return


def prepare_kafka(cfg: JobConfig, metrics: ReportMetrics | None = None) -> LocalBroker | None:
    """Start the local broker if the configured one is a loopback address that does not answer (and
    ``kafka.start_local_broker``), else wait for the broker (:func:`wait_for_kafka`); create the
    job's topics. Returns the broker this call started (to stop later), if any."""
    bootstrap = cfg["kafka.bootstrap"]
    broker = None
    if not reachable(bootstrap) and cfg["kafka.start_local_broker"]:
        broker = LocalBroker.for_bootstrap(bootstrap)
        if broker is not None:
            _say(f"dphhh: starting the local Kafka broker on {broker.bootstrap} ...")
            broker.start()
    wait_for_kafka(cfg, metrics)
    ensure_job_topics(cfg)
    return broker if broker is not None and broker.started else None


#: In the ledger: a live schedule's ``window.until`` once its last report is committed and the job stopped.
SCHEDULE_ENDED = "schedule-ended"
#: A live job's input topic: every record carries the broker's arrival time (docs/ALGORITHMS.md §0.1 e).
LIVE_INPUT_TOPIC = {"message.timestamp.type": "LogAppendTime"}
#: The job's output topics keep the timestamps the job writes (a report's: its scheduled time).
OUTPUT_TOPIC = {"message.timestamp.type": "CreateTime"}
#: The reports topic also keeps its records for good: a replay's reports carry timestamps in the past,
#: which time-based retention would delete right after they are written (reports are small).
REPORTS_TOPIC = {**OUTPUT_TOPIC, "retention.ms": "-1"}
_TIMESTAMP_TYPE = "message.timestamp.type"


def ensure_job_topics(cfg: JobConfig) -> None:
    """Create the job's missing topics (a live input with ``LogAppendTime``, the outputs with
    ``CreateTime``; one partition per subtask) and check existing ones: a live job refuses an input
    topic whose timestamps producers set (they would decide windows and lateness), and any job refuses
    output topics that would overwrite the reports' scheduled timestamps with the broker's clock."""
    from dphhh.connectors.kafka_io import topic_settings

    from .config import ConfigError
    from .schedule import LIVE

    opts = cfg.kafka_client_options()
    inp, reports, dead = cfg["kafka.input_topic"], cfg["kafka.reports_topic"], cfg["kafka.dead_letter_topic"]
    configs = {reports: REPORTS_TOPIC, dead: OUTPUT_TOPIC}
    if cfg.mode == LIVE:
        configs[inp] = LIVE_INPUT_TOPIC
    create_topics(opts, [inp, dead], partitions=cfg["flink.parallelism"], configs=configs)
    create_topics(opts, [reports], partitions=1, configs=configs)  # one partition: readers see window order
    found = {topic: topic_settings(opts, topic, [_TIMESTAMP_TYPE]) for topic in configs}
    for topic, wanted in configs.items():
        stored = found[topic][_TIMESTAMP_TYPE]
        if stored == wanted[_TIMESTAMP_TYPE]:
            continue
        if topic == inp:
            raise ConfigError(
                f"kafka: input topic {topic} stores {stored} timestamps (set by its producers); a live "
                "job needs the broker's arrival time (LogAppendTime) to decide windows. Change it with "
                f"`kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config "
                f"{_TIMESTAMP_TYPE}=LogAppendTime`, or replay past data with window.mode = 'replay'"
            )
        raise ConfigError(
            f"kafka: topic {topic} stores {stored} timestamps; the job's output topics "
            f"need CreateTime (a report's timestamp is its scheduled release time); set "
            f"{_TIMESTAMP_TYPE}=CreateTime on it or use another topic"
        )
    parts = found[reports]["partitions"]
    if parts is not None and int(parts) > 1:
        _say(
            f"dphhh: warning: reports topic {reports} has {parts} partitions: the job writes its reports "
            "in window order, but readers of several partitions may see them out of order (give it one partition)"
        )
    parts = found[inp]["partitions"] if inp in found else None
    if parts is not None and int(parts) < cfg["flink.parallelism"]:
        _say(
            f"dphhh: warning: input topic {inp} has {parts} partitions for flink.parallelism = "
            f"{cfg['flink.parallelism']}: the job reads it with {parts} source subtask(s) (give it one partition per "
            "subtask to use them all)"
        )


def root_cause(exc: BaseException) -> str:
    """The innermost error line of a (Java or Python) job failure, for one line of output."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    causes = []
    for ln in lines:
        ln = ln.removeprefix("Caused by: ")
        name = ln.split(":", 1)[0]
        if (
            ": " in ln
            and name.endswith(("Error", "Exception", "Failure"))
            and name.replace(".", "").replace("_", "").replace("$", "").isalnum()
        ):
            causes.append(ln)
    return (causes[-1] if causes else (lines[-1] if lines else type(exc).__name__))[:500]


def wait_for_job(client, on_tick: Callable[[], None] | None = None, timeout_s: float | None = None) -> None:
    """Wait for the job to end; Ctrl-C cancels it and re-raises. A failed job raises
    :class:`JobFailed` with its root cause; ``on_tick`` raising :class:`JobFailed` cancels the job."""
    result = client.get_job_execution_result()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    try:
        while not result.done():
            if on_tick is not None:
                try:
                    on_tick()
                except JobFailed:
                    with signals_deferred():
                        cancel_job(client)
                    raise
            if deadline is not None and time.monotonic() > deadline:
                cancel_job(client)
                raise TimeoutError(f"job: still running after {timeout_s:.0f} s; cancelled")
            time.sleep(0.2)
        try:
            result.result()
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # the job failed for good (restart attempts exhausted)
            raise JobFailed(f"the job failed: {root_cause(exc)}") from None
    except KeyboardInterrupt:
        _say("\ndphhh: stopping the job ...")
        with signals_deferred():
            cancel_job(client)
        _say("dphhh: job stopped")
        raise


@contextlib.contextmanager
def signals_deferred():
    """Ignore SIGINT/SIGTERM inside the block (a clean stop is not interrupted by a second Ctrl-C),
    then restore the handlers; a no-op outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def cancel_job(client, timeout_s: float = 30.0) -> None:
    """Cancel the job and wait up to ``timeout_s`` for Flink to confirm (it may have ended already)."""
    try:
        from pyflink.java_gateway import get_gateway

        seconds = get_gateway().jvm.java.util.concurrent.TimeUnit.SECONDS
        client.cancel()._j_completable_future.get(int(timeout_s), seconds)
    except Exception:  # already finished, or no confirmation in time: the process exit ends the MiniCluster
        pass


class ReportPrinter(threading.Thread):
    """Prints every committed report of the reports topic as it is published."""

    def __init__(
        self,
        cfg: JobConfig,
        render: Callable[[dict], str],
        *,
        from_beginning: bool = True,
        metrics: ReportMetrics | None = None,
    ) -> None:
        super().__init__(daemon=True)
        self.cfg = cfg
        self.metrics = metrics
        self.from_beginning = from_beginning
        self.render = render
        self.stop_event = threading.Event()
        self.count = 0
        self.latest_start: int | None = None  # the newest window printed (reports arrive in window order)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the reader to stop and wait for it (at most ``timeout_s``)."""
        self.stop_event.set()
        if self.ident is not None:
            self.join(timeout=timeout_s)

    def run(self) -> None:
        for _, value in iter_committed_values(
            self.cfg.kafka_client_options(),
            self.cfg["kafka.reports_topic"],
            follow=True,
            from_beginning=self.from_beginning,
            stop=self.stop_event,
        ):
            self.count += 1
            report = json.loads(value)
            self.latest_start = report.get("window", {}).get("start_ms", self.latest_start)
            if self.metrics is not None:
                self.metrics.observe(report)
            print(self.render(report), flush=True)
            print(flush=True)


RESUMED_FROM_FILE = "resumed-from.txt"


def note_resume(run_dir: Path, checkpoint: Path) -> None:
    """Append the checkpoint a start resumes from to the run folder's ``resumed-from.txt`` (0600, in
    a 0700 folder, one line per start): its number is not public (see the caller)."""
    import os

    from .ledger import private_dir

    private_dir(run_dir)
    fd = os.open(run_dir / RESUMED_FROM_FILE, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a file left with another mode is made private too
        os.write(fd, f"{time.strftime('%Y-%m-%dT%H:%M:%S%z')} {checkpoint}\n".encode())
    finally:
        os.close(fd)


def sample_stream(window_ms: int, base_ms: int, capture: Path | None) -> list[tuple[int, bytes]]:
    """The demo's sample: (timestamp ms, message value) over six windows.

    window 0: the bundled SYN-ACK reflection capture; windows 1, 3, 4: synthetic traffic with
    planted heavy prefixes; window 2: nothing (an empty window still gets its report);
    window 5: background only; plus three malformed messages (dead-lettered).
    """
    from dphhh.connectors.pcap import read_capture_sources

    messages: list[tuple[int, bytes]] = []

    def add(window: int, addresses: np.ndarray, batch: int = 1000) -> None:
        start = base_ms + window * window_ms
        chunks = max(1, -(-len(addresses) // batch))
        for i in range(chunks):
            ts = start + (i * (window_ms - 1)) // chunks
            messages.append((ts, pack_ipv4(addresses[i * batch : (i + 1) * batch])))

    if capture is not None and capture.exists():
        values, _ = read_capture_sources(capture)
        add(0, values)
    for window, seed in ((1, 1), (3, 3), (4, 4)):
        add(window, synthetic_addresses(50_000, seed=seed))
    add(5, np.random.default_rng(5).integers(0, 2**32, 20_000, dtype=np.uint64).astype(np.uint32))
    bad_ts = base_ms + 4 * window_ms + 7
    messages += [(bad_ts, b"\x01\x02\x03"), (bad_ts, b""), (bad_ts, b"x" * 4097 * 4 + b"abc")]
    return messages


def run_demo(render: Callable[[dict], str], overrides: Sequence[str] = ()) -> int:
    """``dphhh demo``: broker, sample stream, a replay of its six windows, reports; everything torn
    down after."""
    run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    run_dir = state_dir() / "runs" / f"demo-{run_id}"
    prefix = f"dphhh-demo-{run_id}"
    window = 10_000
    base = (int(time.time() * 1000) // window - 8) * window  # six windows in the recent past
    cfg = load_config(
        None,
        overrides=[
            f"kafka.input_topic={prefix}-in",
            f"kafka.reports_topic={prefix}-reports",
            f"kafka.dead_letter_topic={prefix}-dead-letter",
            f"kafka.group_id={prefix}",
            "window.mode=replay",
            f"window.size_ms={window}",
            f"window.origin={base}",
            f"window.until={base + 6 * window}",
            "privacy.epsilon=2",
            "privacy.tau=1000",
            f"output.ledger_dir={run_dir / 'ledger'}",
            f"output.reports_file={run_dir / 'reports.jsonl'}",
            f"flink.checkpoint_dir={run_dir / 'checkpoints'}",
            "flink.checkpoint_interval_ms=2000",
            *overrides,
        ],
    )
    started = time.monotonic()
    broker = prepare_kafka(cfg)
    printer = None
    try:
        capture = bundled_capture(DEMO_CAPTURE)
        producer = PackedProducer(cfg.kafka_client_options(), cfg["kafka.input_topic"])
        for ts, value in sample_stream(window, base, capture):
            producer.send_value(value, ts)
        producer.close()
        _say(
            f"dphhh demo: published a sample stream over 6 windows of {window // 1000} s "
            f"({producer.messages} messages, incl. 3 malformed) to {cfg['kafka.input_topic']}"
        )
        _say(
            "dphhh demo: starting the Flink job (embedded MiniCluster, ~10 s): a replay of those 6 windows "
            "(window.mode = replay), every one released at the end of the input ..."
        )
        from .job import submit
        from .ledger import resolve_origin

        resolve_origin(cfg, int(time.time() * 1000))
        client = submit(cfg, run_dir)
        printer = ReportPrinter(cfg, render)
        printer.start()
        wait_for_job(client, timeout_s=600)
        # the job has committed every report: wait until the printer has shown them all (its
        # reader may still be fetching the last transaction), not a fixed pause
        committed = sum(
            1 for _ in iter_committed_values(cfg.kafka_client_options(), cfg["kafka.reports_topic"], idle_timeout_s=2)
        )
        deadline = time.monotonic() + 60
        while printer.count < committed and time.monotonic() < deadline:
            time.sleep(0.05)
        printer.stop()
        published, printer = printer.count, None
        dead = sum(
            1
            for _ in iter_committed_values(cfg.kafka_client_options(), cfg["kafka.dead_letter_topic"], idle_timeout_s=2)
        )
        _say(
            f"dphhh demo: {published} window reports published, {dead} records dead-lettered, "
            f"{time.monotonic() - started:.0f} s in all; files in {run_dir}"
        )
        return 0
    finally:
        with signals_deferred():
            if printer is not None:
                printer.stop()
            if broker is not None:
                broker.stop()


def feed_forever(cfg: JobConfig, stop: threading.Event, rate: float, batch: int) -> None:
    """The embedded default's producer: the bundled capture and synthetic traffic, timestamp = now
    (a live input topic records the broker's arrival time anyway)."""
    capture = bundled_capture(DEMO_CAPTURE)
    parts = []
    if capture.exists():
        from dphhh.connectors.pcap import read_capture_sources

        parts.append(read_capture_sources(capture)[0])
    parts.append(synthetic_addresses(200_000, seed=7))
    stream = np.concatenate(parts)
    producer = PackedProducer(cfg.kafka_client_options(), cfg["kafka.input_topic"])
    sent, t0, i = 0, time.monotonic(), 0
    try:
        while not stop.is_set():
            chunk = stream[i : i + batch]
            i = (i + batch) % len(stream)
            producer.send_value(pack_ipv4(chunk), int(time.time() * 1000))
            sent += len(chunk)
            ahead = sent / rate - (time.monotonic() - t0)
            if ahead > 0:
                stop.wait(ahead)
    finally:
        producer.close()


def check_output_paths(cfg: JobConfig) -> None:
    """Fail at start, with the key named, if the release ledger's folder or the reports file's folder
    cannot be created and written (instead of the job failing at its first release)."""
    import tempfile

    from .config import ConfigError

    targets = [("output.ledger_dir", cfg["output.ledger_dir"])]
    if cfg["output.reports_file"]:
        targets.append(("output.reports_file", str(Path(cfg["output.reports_file"]).parent)))
    for key, folder in targets:
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".dphhh-write-check-"):
                pass
        except OSError as exc:
            raise ConfigError(f"config: {key}: cannot write to {folder} ({exc.strerror})") from None
    from .ledger import LedgerError, ReleaseLedger

    try:
        ReleaseLedger(cfg["output.ledger_dir"]).claim(cfg.deployment_fingerprint())
    except LedgerError as exc:
        raise ConfigError(f"config: output.ledger_dir: {exc}") from None


def describe_schedule(schedule) -> str:
    """One line on when reports come (for ``dphhh run``'s start message)."""
    from .schedule import LIVE, iso_ms

    size = f"{schedule.size_ms / 1000:g} s"
    if schedule.mode == LIVE:
        end = f" until {iso_ms(schedule.until_ms)}" if schedule.until_ms is not None else ""
        return (
            f"live schedule from {iso_ms(schedule.origin_ms)}{end}: a report for every {size} window at its end "
            f"+ {schedule.grace_ms} ms (wall clock), empty windows included"
        )
    return (
        f"replay of [{iso_ms(schedule.origin_ms)}, {iso_ms(schedule.until_ms)}): {schedule.windows} windows of "
        f"{size}, every one reported at the end of the input"
    )


def windows_due(schedule, released: Sequence[int], now_ms: int) -> int:
    """How many windows of a live ``schedule`` are past their release time but not in ``released``
    (the ledger's windows, ascending) after the newest of them: what a (re)started job publishes at once."""
    from .schedule import LIVE

    if schedule.mode != LIVE:
        return 0
    return schedule.count_due(released[-1] + schedule.size_ms if released else schedule.origin_ms, now_ms)


def _committed(cfg: JobConfig, window_start: int) -> bool:
    """Whether the reports topic holds a committed report of the window starting at ``window_start``."""
    from dphhh.connectors.kafka_io import iter_to_end

    return any(
        json.loads(v).get("window", {}).get("start_ms") == window_start
        for _, _, v in iter_to_end(cfg.kafka_client_options(), cfg["kafka.reports_topic"])
    )


def stop_with_savepoint(client, cfg: JobConfig, timeout_s: float = 120.0) -> None:
    """Stop the job gracefully: a final savepoint commits both sinks' open transactions, then the
    job finishes (a live job whose schedule has ended)."""
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    target = "file://" + str(cfg.checkpoint_path() / "savepoints")
    future = client._j_job_client.stopWithSavepoint(
        False, target, jvm.org.apache.flink.core.execution.SavepointFormatType.CANONICAL
    )
    future.get(int(timeout_s), jvm.java.util.concurrent.TimeUnit.SECONDS)


def run_job(cfg: JobConfig, render: Callable[[dict], str], *, feed: bool, rate: float = 20_000.0) -> int:
    """``dphhh run``: the main job; prints each window's report as it is published."""
    from .schedule import LIVE, iso_ms

    run_dir = Path(cfg["output.run_dir"] or state_dir() / "runs" / f"run-{time.strftime('%Y%m%d-%H%M%S')}")
    for warning in cfg.warnings():
        _say(f"dphhh run: warning: {warning}")
    check_output_paths(cfg)
    (run_dir / FATAL_FILE).unlink(missing_ok=True)
    metrics = None
    if cfg["output.metrics_port"]:  # first: the broker wait is visible in it
        from .report_metrics import ReportMetrics
        from .schedule import LIVE as _LIVE

        # a live report readable after its publication time is an incident (docs/ALGORITHMS.md §0.1 g)
        metrics = ReportMetrics(publish_delay_ms=cfg["window.publish_delay_ms"] if cfg.mode == _LIVE else None)
        metrics.serve(cfg["output.metrics_port"])
    broker = prepare_kafka(cfg, metrics)
    stop = threading.Event()
    producer = printer = stall_watch = None
    try:
        from .job import latest_checkpoint, submit
        from .ledger import ReleaseLedger, resolve_origin

        schedule = cfg.schedule(resolve_origin(cfg, int(time.time() * 1000)))  # before any sample is fed
        ledger = ReleaseLedger(cfg["output.ledger_dir"])
        released = ledger.windows()
        marker = ledger.directory / SCHEDULE_ENDED
        if (
            schedule.mode == LIVE
            and schedule.until_ms is not None
            and schedule.last_window in released
            and not marker.exists()
            and _committed(cfg, schedule.last_window)
        ):
            marker.write_text(f"{schedule.until_ms}\n")  # stopped after the last commit, before the marker
        if (
            schedule.mode == LIVE
            and schedule.until_ms is not None
            and marker.exists()
            and int(marker.read_text().strip() or 0) >= schedule.until_ms
        ):
            _say(
                f"dphhh run: this deployment's schedule ended at {iso_ms(schedule.until_ms)} (window.until), every "
                "report committed: nothing left to do"
            )
            return 0
        backlog = windows_due(schedule, released, int(time.time() * 1000))
        if backlog > 1000:
            _say(
                f"dphhh run: warning: {backlog} windows of this deployment's schedule are past due since its last "
                "report: each gets its report now, empty or not (a new output.ledger_dir, or window.origin, starts "
                "a new schedule)"
            )
        if feed:
            producer = threading.Thread(target=feed_forever, args=(cfg, stop, rate, 1000), daemon=True)
            producer.start()
            _say(
                f"dphhh run: feeding the bundled capture and a synthetic stream into "
                f"{cfg['kafka.input_topic']} at {rate:,.0f} addresses/s"
            )
        resume = latest_checkpoint(cfg) if cfg["flink.resume"] == "latest" else None
        if resume is not None:
            # which checkpoint (chk-N: N follows the uptime and, when checkpoints outlast their interval,
            # the state's size) goes to the private run folder only (docs/ALGORITHMS.md §0.1)
            note_resume(run_dir, resume)
            _say(
                "dphhh run: resuming from the newest checkpoint of this deployment (flink.resume = latest; "
                f"which one: {RESUMED_FROM_FILE} in the run folder)"
            )
        client = submit(cfg, run_dir, resume)
        _say(
            f"dphhh run: job submitted; {describe_schedule(schedule)} (Ctrl-C stops)"
            + (f"; report metrics on http://127.0.0.1:{cfg['output.metrics_port']}/metrics" if metrics else "")
        )
        printer = ReportPrinter(cfg, render, from_beginning=False, metrics=metrics)
        printer.start()
        stall_watch = ReportsStallWatch(
            cfg.kafka_client_options(),
            cfg["kafka.reports_topic"],
            stall_limit_s(cfg["flink.checkpoint_interval_ms"]),
            metrics=metrics,
        )
        stall_watch.start()
        fatal = run_dir / FATAL_FILE
        ending = schedule.mode == LIVE and schedule.until_ms is not None

        ended: list[float] = []  # when the last window's report was seen committed
        hold_s = cfg["testing.hold_s"]

        def on_tick() -> None:
            if fatal.exists():
                raise JobFailed(f"stopped: {fatal.read_text().strip()}")
            if not ending or printer.latest_start != schedule.last_window or len(ended) > 1:
                return
            if not ended:  # the last window's report is committed: nothing is due any more
                ended.append(time.monotonic())
                _say("dphhh run: the schedule ended (window.until)")
            if time.monotonic() - ended[0] >= hold_s:
                ended.append(time.monotonic())
                _say("dphhh run: stopping the job with a final savepoint ...")
                try:
                    stop_with_savepoint(client, cfg)
                except Exception as exc:  # the job keeps its checkpoints: a new run resumes and stops again
                    raise JobFailed(
                        f"the final savepoint failed ({root_cause(exc)}); start the job again: it "
                        "resumes from its newest checkpoint"
                    ) from None
                marker.write_text(f"{schedule.until_ms}\n")

        try:
            wait_for_job(client, on_tick=on_tick)
        except KeyboardInterrupt:
            return 130
        except JobFailed as exc:
            _say(f"dphhh run: error: {exc}")
            _say(
                "dphhh run: reports published so far are intact; fix the cause and start again (it resumes "
                "from the newest checkpoint)"
            )
            return 1
        return 0
    finally:
        with signals_deferred():  # Kafka clients first, then the broker they talk to
            stop.set()
            if producer is not None:
                producer.join(timeout=10)
            if printer is not None:
                printer.stop()
            if stall_watch is not None:
                stall_watch.stop()
            if broker is not None:
                broker.stop()
