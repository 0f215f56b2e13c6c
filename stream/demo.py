"""``dphhh demo``: a self-contained replay of the sample stream on the embedded MiniCluster.

:func:`run_demo` starts (or uses) the local broker, publishes the sample stream
(:func:`dphhh.stream.sample_traffic.sample_stream`: six windows — the bundled capture, synthetic
traffic, an empty window — and three malformed messages), replays its six windows
(``window.mode = replay``), prints each report and tears everything down.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence

from dphhh.connectors.kafka_io import PackedProducer, iter_committed_values

from .config import load_config
from .console import say
from .kafka_setup import prepare_kafka
from .paths import DEMO_CAPTURE, state_dir
from .paths import capture as bundled_capture
from .runner import ReportPrinter, signals_deferred, wait_for_job
from .sample_traffic import sample_stream

__all__ = ["run_demo"]


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
        producer = PackedProducer(cfg.kafka_client_options(), cfg.kafka.input_topic)
        for ts, value in sample_stream(window, base, capture):
            producer.send_value(value, ts)
        producer.close()
        say(
            f"dphhh demo: published a sample stream over 6 windows of {window // 1000} s "
            f"({producer.messages} messages, incl. 3 malformed) to {cfg.kafka.input_topic}"
        )
        say(
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
            1 for _ in iter_committed_values(cfg.kafka_client_options(), cfg.kafka.reports_topic, idle_timeout_s=2)
        )
        deadline = time.monotonic() + 60
        while printer.count < committed and time.monotonic() < deadline:
            time.sleep(0.05)
        printer.stop()
        published, printer = printer.count, None
        dead = sum(
            1 for _ in iter_committed_values(cfg.kafka_client_options(), cfg.kafka.dead_letter_topic, idle_timeout_s=2)
        )
        say(
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
