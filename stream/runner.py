"""Running the stream job from the CLI: broker, topics, producers, the job, report printing.

* :func:`run_job` — ``dphhh run``: the main job until Ctrl-C (or the end of a bounded input).
* :func:`run_demo` — ``dphhh demo``: a self-contained bounded run on a sample stream (the shared
  real capture, synthetic windows, an empty window and a few bad records), printing each report.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from connectors.kafka_io import PackedProducer, create_topics, iter_committed_values, pack_ipv4
from connectors.synthetic import synthetic_addresses

from .broker import LocalBroker, reachable
from .config import JobConfig, load_config
from .errors import JobFailed
from .operators import FATAL_FILE
from .reports_stall import ReportsStallWatch, stall_limit_s

if TYPE_CHECKING:
    from .report_metrics import ReportMetrics

__all__ = ["run_job", "run_demo", "wait_for_job", "sample_stream"]

ROOT = Path(__file__).resolve().parents[1]


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def wait_for_kafka(cfg: JobConfig, metrics: "ReportMetrics | None" = None, *, what: str = "dphhh run",
                   sleep: Callable[[float], None] = time.sleep,
                   probe: Callable[..., None] | None = None) -> None:
    """Wait until the configured broker answers, retrying with exponential backoff (1 s, 2 s, 4 s …
    30 s), each failed attempt logged and counted (``dphhh_kafka_connect_retries_total``,
    ``dphhh_kafka_broker_up``); ``kafka.wait_s`` > 0 bounds the wait (then ``TimeoutError``).
    ``probe(options, timeout_s=)`` raises ``TimeoutError`` while the broker does not answer."""
    from connectors.kafka_io import wait_for_broker

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
                raise TimeoutError(f"kafka: broker {bootstrap} not reachable after {attempt} attempts in "
                                   f"{waited:.0f} s (kafka.wait_s = {limit})") from None
            _say(f"{what}: broker {bootstrap} not reachable (attempt {attempt}); retrying in {delay:.0f} s "
                 "(Ctrl-C stops)")
            sleep(delay)
            delay = min(delay * 2, 30.0)
            continue
        if metrics is not None:
            metrics.broker_up.set(1)
        if attempt > 1:
            _say(f"{what}: broker {bootstrap} reachable after {attempt} attempts")
        return


def prepare_kafka(cfg: JobConfig, metrics: "ReportMetrics | None" = None) -> LocalBroker | None:
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
    topics = [cfg["kafka.input_topic"], cfg["kafka.reports_topic"], cfg["kafka.dead_letter_topic"]]
    create_topics(cfg.kafka_client_options(), topics, partitions=cfg["flink.parallelism"])
    return broker if broker is not None and broker.started else None


def root_cause(exc: BaseException) -> str:
    """The innermost error line of a (Java or Python) job failure, for one line of output."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    found = []
    for ln in lines:
        ln = ln.removeprefix("Caused by: ")
        name = ln.split(":", 1)[0]
        if ": " in ln and name.endswith(("Error", "Exception", "Failure")) and \
                name.replace(".", "").replace("_", "").replace("$", "").isalnum():
            found.append(ln)
    found = found[-1] if found else (lines[-1] if lines else type(exc).__name__)
    return found[:500]


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

    def __init__(self, cfg: JobConfig, render: Callable[[dict], str], *, from_beginning: bool = True,
                 metrics: "ReportMetrics | None" = None) -> None:
        super().__init__(daemon=True)
        self.cfg = cfg
        self.metrics = metrics
        self.from_beginning = from_beginning
        self.render = render
        self.stop_event = threading.Event()
        self.count = 0

    def stop(self, timeout_s: float = 10.0) -> None:
        """Ask the reader to stop and wait for it (at most ``timeout_s``)."""
        self.stop_event.set()
        if self.ident is not None:
            self.join(timeout=timeout_s)

    def run(self) -> None:
        for _, value in iter_committed_values(self.cfg.kafka_client_options(), self.cfg["kafka.reports_topic"],
                                              follow=True, from_beginning=self.from_beginning, stop=self.stop_event):
            self.count += 1
            report = json.loads(value)
            if self.metrics is not None:
                self.metrics.observe(report)
            print(self.render(report), flush=True)
            print(flush=True)


def sample_stream(window_ms: int, base_ms: int, capture: Path | None) -> list[tuple[int, bytes]]:
    """The demo's sample: (timestamp ms, message value) over six windows.

    window 0: the shared SYN-ACK reflection capture; windows 1, 3, 4: synthetic traffic with
    planted heavy prefixes; window 2: nothing (an empty window still gets its report);
    window 5: background only; plus three malformed messages (dead-lettered).
    """
    from connectors.pcap import read_capture_sources

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
    """``dphhh demo``: broker, sample stream, bounded job, reports; everything torn down after."""
    run_id = time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:6]
    run_dir = ROOT / "var" / "runs" / f"demo-{run_id}"
    prefix = f"dphhh-demo-{run_id}"
    cfg = load_config(None, overrides=[
        f"kafka.input_topic={prefix}-in", f"kafka.reports_topic={prefix}-reports",
        f"kafka.dead_letter_topic={prefix}-dead-letter", f"kafka.group_id={prefix}", "kafka.bounded=true",
        "window.size_ms=10000", "privacy.epsilon=2", "privacy.tau=1000",
        f"output.ledger_dir={run_dir / 'ledger'}", f"output.reports_file={run_dir / 'reports.jsonl'}",
        f"flink.checkpoint_dir={run_dir / 'checkpoints'}", "flink.checkpoint_interval_ms=2000",
        *overrides,
    ])
    started = time.monotonic()
    broker = prepare_kafka(cfg)
    printer = None
    try:
        window = cfg["window.size_ms"]
        base = (int(time.time() * 1000) // window - 8) * window
        capture = ROOT.parent / "shared" / "data" / "pcaps" / "amp.TCP.reflection.SYNACK.pcap"
        producer = PackedProducer(cfg.kafka_client_options(), cfg["kafka.input_topic"])
        for ts, value in sample_stream(window, base, capture):
            producer.send_value(value, ts)
        producer.close()
        _say(f"dphhh demo: published a sample stream over 6 windows of {window // 1000} s "
             f"({producer.messages} messages, incl. 3 malformed) to {cfg['kafka.input_topic']}")
        _say("dphhh demo: starting the Flink job (embedded MiniCluster, ~10 s) ...")
        from .job import submit

        client = submit(cfg, run_dir)
        printer = ReportPrinter(cfg, render)
        printer.start()
        wait_for_job(client, timeout_s=600)
        time.sleep(1.0)
        printer.stop()
        published, printer = printer.count, None
        dead = sum(1 for _ in iter_committed_values(cfg.kafka_client_options(), cfg["kafka.dead_letter_topic"],
                                                    idle_timeout_s=2))
        _say(f"dphhh demo: {published} window reports published, {dead} records dead-lettered, "
             f"{time.monotonic() - started:.0f} s in all; files in {run_dir}")
        return 0
    finally:
        with signals_deferred():
            if printer is not None:
                printer.stop()
            if broker is not None:
                broker.stop()


def replay_forever(cfg: JobConfig, stop: threading.Event, rate: float, batch: int) -> None:
    """The embedded default's producer: the shared capture and synthetic traffic, timestamp = now."""
    capture = ROOT.parent / "shared" / "data" / "pcaps" / "amp.TCP.reflection.SYNACK.pcap"
    parts = []
    if capture.exists():
        from connectors.pcap import read_capture_sources

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


def run_job(cfg: JobConfig, render: Callable[[dict], str], *, replay: bool, rate: float = 20_000.0) -> int:
    """``dphhh run``: the main job; prints each window's report as it is published."""
    run_dir = Path(cfg["output.run_dir"] or ROOT / "var" / "runs" / f"run-{time.strftime('%Y%m%d-%H%M%S')}")
    for warning in cfg.warnings():
        _say(f"dphhh run: warning: {warning}")
    check_output_paths(cfg)
    (run_dir / FATAL_FILE).unlink(missing_ok=True)
    metrics = None
    if cfg["output.metrics_port"]:  # first: the broker wait is visible in it
        from .report_metrics import ReportMetrics

        metrics = ReportMetrics()
        metrics.serve(cfg["output.metrics_port"])
    broker = prepare_kafka(cfg, metrics)
    stop = threading.Event()
    producer = printer = stall_watch = None
    try:
        if replay:
            producer = threading.Thread(target=replay_forever, args=(cfg, stop, rate, 1000), daemon=True)
            producer.start()
            _say(f"dphhh run: replaying the shared capture and a synthetic stream into "
                 f"{cfg['kafka.input_topic']} at {rate:,.0f} addresses/s")
        from .job import latest_checkpoint, submit

        resume = latest_checkpoint(cfg) if cfg["flink.resume"] == "latest" else None
        if resume is not None:
            _say(f"dphhh run: resuming from {resume.parent.name}/{resume.name}, the newest checkpoint of this "
                 f"deployment (flink.resume = latest)")
        client = submit(cfg, run_dir, resume)
        _say(f"dphhh run: job submitted; a report every {cfg['window.size_ms'] / 1000:g} s "
             f"of event time (Ctrl-C stops)"
             + (f"; report metrics on http://127.0.0.1:{cfg['output.metrics_port']}/metrics" if metrics else ""))
        printer = ReportPrinter(cfg, render, from_beginning=False, metrics=metrics)
        printer.start()
        stall_watch = ReportsStallWatch(cfg.kafka_client_options(), cfg["kafka.reports_topic"],
                                        stall_limit_s(cfg["flink.checkpoint_interval_ms"]), metrics=metrics)
        stall_watch.start()
        fatal = run_dir / FATAL_FILE

        def stop_on_fatal() -> None:
            if fatal.exists():
                raise JobFailed(f"stopped: {fatal.read_text().strip()}")

        try:
            wait_for_job(client, on_tick=stop_on_fatal)
        except KeyboardInterrupt:
            return 130
        except JobFailed as exc:
            _say(f"dphhh run: error: {exc}")
            _say("dphhh run: reports published so far are intact; fix the cause and start again (it resumes "
                 "from the newest checkpoint)")
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
