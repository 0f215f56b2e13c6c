"""The job's life from the CLI (``dphhh run``): start it, watch it, print its reports, stop it.

* :func:`run_job` — ``dphhh run``: the main job until Ctrl-C, the end of a replay's input, or the end
  of a live schedule (``window.until``); :func:`wait_for_job`, :func:`cancel_job`,
  :func:`stop_with_savepoint` and :class:`ReportPrinter` are its parts.

Elsewhere: the broker and topics before a start (:mod:`dphhh.stream.kafka_setup`), ``dphhh demo``
(:mod:`dphhh.stream.demo`) and the embedded default's traffic (:mod:`dphhh.stream.sample_traffic`).
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dphhh.connectors.kafka_io import iter_committed_values

from .config import JobConfig
from .console import say
from .errors import JobFailed
from .kafka_setup import prepare_kafka
from .operators import FATAL_FILE
from .paths import state_dir
from .reports_stall import ReportsStallWatch, stall_limit_s
from .sample_traffic import feed_forever

if TYPE_CHECKING:
    from .report_metrics import ReportMetrics

__all__ = ["run_job", "wait_for_job", "cancel_job", "stop_with_savepoint", "ReportPrinter"]


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
        with interrupts_as_flag() as interrupted:
            while not result.done():
                if interrupted.is_set():
                    raise KeyboardInterrupt
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
            if interrupted.is_set():
                raise KeyboardInterrupt
        try:
            result.result()
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # the job failed for good (restart attempts exhausted)
            raise JobFailed(f"the job failed: {root_cause(exc)}") from None
    except KeyboardInterrupt:
        say("\ndphhh: stopping the job ...")
        with signals_deferred():
            cancel_job(client)
        say("dphhh: job stopped")
        raise


@contextlib.contextmanager
def interrupts_as_flag() -> Iterator[threading.Event]:
    """Inside the block, Ctrl-C and SIGTERM set the yielded flag instead of raising wherever the main
    thread is: a call into the JVM (py4j) interrupted mid-command logs a traceback and may leave its
    connection half read. The block checks the flag between calls; the handlers are restored after
    it. Outside the main thread the flag is never set (signals go to the main thread)."""
    flag = threading.Event()
    with _stop_signals_handled_by(lambda *_: flag.set()):
        yield flag


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM inside the block (a clean stop is not interrupted by a second Ctrl-C),
    then restore the handlers; a no-op outside the main thread."""
    with _stop_signals_handled_by(signal.SIG_IGN):
        yield


@contextlib.contextmanager
def _stop_signals_handled_by(handler: Any) -> Iterator[None]:
    """SIGINT and SIGTERM go to ``handler`` inside the block, and back to their handlers after it;
    a no-op outside the main thread (only the main thread may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, previous in saved.items():
            signal.signal(sig, previous)


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
            self.cfg.kafka.reports_topic,
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
#: In the ledger: a live schedule's ``window.until`` once its last report is committed and the job stopped.
SCHEDULE_ENDED = "schedule-ended"


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


def check_output_paths(cfg: JobConfig) -> None:
    """Fail at start, with the key named, if the release ledger's folder or the reports file's folder
    cannot be created and written (instead of the job failing at its first release)."""
    import tempfile

    from .config import ConfigError

    targets = [("output.ledger_dir", cfg.output.ledger_dir)]
    if cfg.output.reports_file:
        targets.append(("output.reports_file", str(Path(cfg.output.reports_file).parent)))
    for key, folder in targets:
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=".dphhh-write-check-"):
                pass
        except OSError as exc:
            raise ConfigError(f"config: {key}: cannot write to {folder} ({exc.strerror})") from None
    from .ledger import LedgerError, ReleaseLedger

    try:
        ReleaseLedger(cfg.output.ledger_dir).claim(cfg.deployment_fingerprint())
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
        for _, _, v in iter_to_end(cfg.kafka_client_options(), cfg.kafka.reports_topic)
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


def _serve_report_metrics(cfg: JobConfig) -> ReportMetrics | None:
    """``dphhh run``'s report metrics endpoint (``output.metrics_port``; 0: none), serving."""
    if not cfg.output.metrics_port:
        return None
    from .report_metrics import ReportMetrics
    from .schedule import LIVE

    # a live report readable after its publication time is an incident (docs/ALGORITHMS.md §0.1 g)
    metrics = ReportMetrics(publish_delay_ms=cfg.window.publish_delay_ms if cfg.mode == LIVE else None)
    metrics.serve(cfg.output.metrics_port)
    return metrics


def _schedule_ended(cfg: JobConfig, schedule, released: Sequence[int], marker: Path) -> bool:
    """Whether this deployment's live schedule (``window.until``) has ended with every report
    committed: the ledger's :data:`SCHEDULE_ENDED` marker says so — written here first when an
    earlier run stopped after the last commit but before the marker."""
    from .schedule import LIVE

    if schedule.mode != LIVE or schedule.until_ms is None:
        return False
    if schedule.last_window in released and not marker.exists() and _committed(cfg, schedule.last_window):
        marker.write_text(f"{schedule.until_ms}\n")  # stopped after the last commit, before the marker
    return marker.exists() and int(marker.read_text().strip() or 0) >= schedule.until_ms


def run_job(cfg: JobConfig, render: Callable[[dict], str], *, feed: bool, rate: float = 20_000.0) -> int:
    """``dphhh run``: the main job; prints each window's report as it is published."""
    from .schedule import LIVE, iso_ms

    run_dir = Path(cfg.output.run_dir or state_dir() / "runs" / f"run-{time.strftime('%Y%m%d-%H%M%S')}")
    for warning in cfg.warnings():
        say(f"dphhh run: warning: {warning}")
    check_output_paths(cfg)
    (run_dir / FATAL_FILE).unlink(missing_ok=True)
    metrics = _serve_report_metrics(cfg)  # first: the broker wait is visible in it
    broker = prepare_kafka(cfg, metrics)
    stop = threading.Event()
    producer = printer = stall_watch = None
    try:
        from .job import latest_checkpoint, submit
        from .ledger import ReleaseLedger, resolve_origin

        schedule = cfg.schedule(resolve_origin(cfg, int(time.time() * 1000)))  # before any sample is fed
        ledger = ReleaseLedger(cfg.output.ledger_dir)
        released = ledger.windows()
        marker = ledger.directory / SCHEDULE_ENDED
        if _schedule_ended(cfg, schedule, released, marker):
            assert schedule.until_ms is not None  # an ended schedule has its end
            say(
                f"dphhh run: this deployment's schedule ended at {iso_ms(schedule.until_ms)} (window.until), every "
                "report committed: nothing left to do"
            )
            return 0
        backlog = windows_due(schedule, released, int(time.time() * 1000))
        if backlog > 1000:
            say(
                f"dphhh run: warning: {backlog} windows of this deployment's schedule are past due since its last "
                "report: each gets its report now, empty or not (a new output.ledger_dir, or window.origin, starts "
                "a new schedule)"
            )
        if feed:
            producer = threading.Thread(target=feed_forever, args=(cfg, stop, rate, 1000), daemon=True)
            producer.start()
            say(
                f"dphhh run: feeding the bundled capture and a synthetic stream into "
                f"{cfg.kafka.input_topic} at {rate:,.0f} addresses/s"
            )
        resume = latest_checkpoint(cfg) if cfg.flink.resume == "latest" else None
        if resume is not None:
            # which checkpoint (chk-N: N follows the uptime and, when checkpoints outlast their interval,
            # the state's size) goes to the private run folder only (docs/ALGORITHMS.md §0.1)
            note_resume(run_dir, resume)
            say(
                "dphhh run: resuming from the newest checkpoint of this deployment (flink.resume = latest; "
                f"which one: {RESUMED_FROM_FILE} in the run folder)"
            )
        client = submit(cfg, run_dir, resume)
        say(
            f"dphhh run: job submitted; {describe_schedule(schedule)} (Ctrl-C stops)"
            + (f"; report metrics on http://127.0.0.1:{cfg.output.metrics_port}/metrics" if metrics else "")
        )
        printer = ReportPrinter(cfg, render, from_beginning=False, metrics=metrics)
        printer.start()
        stall_watch = ReportsStallWatch(
            cfg.kafka_client_options(),
            cfg.kafka.reports_topic,
            stall_limit_s(cfg.flink.checkpoint_interval_ms),
            metrics=metrics,
        )
        stall_watch.start()
        fatal = run_dir / FATAL_FILE
        ending = schedule.mode == LIVE and schedule.until_ms is not None

        ended: list[float] = []  # when the last window's report was seen committed
        hold_s = cfg.testing.hold_s

        def on_tick() -> None:
            if fatal.exists():
                raise JobFailed(f"stopped: {fatal.read_text().strip()}")
            if not ending or printer.latest_start != schedule.last_window or len(ended) > 1:
                return
            if not ended:  # the last window's report is committed: nothing is due any more
                ended.append(time.monotonic())
                say("dphhh run: the schedule ended (window.until)")
            if time.monotonic() - ended[0] >= hold_s:
                ended.append(time.monotonic())
                say("dphhh run: stopping the job with a final savepoint ...")
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
            say(f"dphhh run: error: {exc}")
            say(
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
