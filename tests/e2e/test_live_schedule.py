"""The live schedule on the real job (docs/ALGORITHMS.md §0.1 d, g): windows are released by the
broker's wall clock whether or not anything arrives, also with a lagging subtask at parallelism 2."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dphhh.connectors.kafka_io import open_client, pack_ipv4
from dphhh.stream.ledger import ReleaseLedger
from tests.e2e.jobs import (
    JOB,
    dumped,
    group_alive,
    input_log,
    interrupt,
    live_origin,
    publish,
    reports,
    wait_for,
    write_config,
)

# timing and live windows on the wall clock: ./dphhh test runs the serial tests after the others, one
# at a time, beside only the `own_broker` test (tests/e2e/test_faults.py)
pytestmark = pytest.mark.serial

CHECKPOINT_MS = 1000
#: a report is readable at most this long after its scheduled release once the job runs: a clock
#: tick (0.1 s), the pipeline, and the commit at the next checkpoint (1 s), with room for a busy machine
ON_TIME_S = 3.0 * CHECKPOINT_MS / 1000 + 1.0


class ReportWatch(threading.Thread):
    """Notes the wall-clock time at which each report becomes readable (read-committed, following)."""

    def __init__(self, cfg) -> None:
        super().__init__(daemon=True)
        self.cfg = cfg
        self.seen: dict[int, tuple[float, dict]] = {}
        self.stop_event = threading.Event()

    def run(self) -> None:
        from kafka import KafkaConsumer

        consumer = open_client(
            lambda **kw: KafkaConsumer(self.cfg["kafka.reports_topic"], **kw),
            self.cfg.kafka_client_options(),
            group_id=None,
            auto_offset_reset="earliest",
            isolation_level="read_committed",
            enable_auto_commit=False,
        )
        try:
            while not self.stop_event.is_set():
                for records in consumer.poll(timeout_ms=100).values():
                    for record in records:
                        report = json.loads(record.value)
                        self.seen.setdefault(report["window"]["start_ms"], (time.time(), report))
        finally:
            consumer.close()

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=10)


def _stop(job: subprocess.Popen) -> None:
    _, err = interrupt(job)
    assert job.returncode == 130 and "Traceback" not in (err or ""), (err or "")[-3000:]
    wait_for(lambda: not group_alive(job.pid), 30, "the job's processes to end")


def test_empty_windows_are_published_on_schedule_and_a_lone_element_on_time(broker, tmp_path: Path) -> None:
    """A live job whose first element arrives 30 s after start publishes every window before it on
    schedule (each within ON_TIME_S of its scheduled release once the job runs), and the window of
    that element on time too although nothing follows it."""
    size = 3000
    config = write_config(
        tmp_path,
        "live-empty",
        window={"size_ms": size},
        privacy={"epsilon": 1.0, "tau": 500.0, "counters": 64, "seed": 4},
        flink={"checkpoint_interval_ms": CHECKPOINT_MS},
    )
    cfg, producer = publish(config, [])
    job = subprocess.Popen(
        [*JOB, str(config)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    started = time.time()
    watch = ReportWatch(cfg)
    watch.start()
    try:
        wait_for(lambda: bool(watch.seen), 120, "the first report")
        running = time.time()  # the job runs from here on: every later release must be on time
        origin = ReleaseLedger(tmp_path / "ledger").stored_schedule_start()
        assert origin is not None
        # ~10 empty windows from the schedule's start (which follows the job's start-up: seconds later
        # on a loaded machine), then one element, then nothing
        wait_for(lambda: time.time() > origin / 1000 + 30, 90, "30 s after the schedule's start")
        producer.send_value(pack_ipv4(np.array([0xC0000237], np.uint32)))
        producer.flush()
        ((arrival, _),) = input_log(cfg)  # its arrival by the broker's clock decides its window
        lone = arrival // size * size
        wait_for(lambda: lone in watch.seen, 60, "the report of the lone element's window")
    finally:
        producer.close()
        watch.stop()
        _stop(job)
    # the deployment's first start (set by `dphhh run` after it started): public, not data
    assert int(started * 1000) // size * size <= origin <= int(running * 1000) // size * size
    windows = sorted(watch.seen)
    assert windows == list(range(origin, windows[-1] + size, size))  # every window, once, from the origin on
    assert windows[-1] >= lone and (lone - origin) // size >= 9  # ~10 empty windows before the element
    late = {}
    for start, (readable, report) in watch.seen.items():
        release = report["window"]["release_ms"] / 1000
        if release > running + 0.5 and start <= lone:
            late[start] = readable - release
    assert late and all(delay <= ON_TIME_S for delay in late.values()), late
    assert lone in late  # the element's window came on time, with nothing after it
    counted = {w: sk.total for (w, sid), sk in dumped(tmp_path).items() if sid == 0}
    assert counted == {lone: 1}  # the element, in its own window; every other window empty


def test_a_lagging_subtask_at_parallelism_2_holds_releases_back_and_loses_nothing(broker, tmp_path: Path) -> None:
    """Parallelism 2, two input partitions, one decode subtask slowed down (test hook): every window
    of the schedule is published exactly once, in order, and counts every element that arrived in it."""
    size = 2000
    origin = live_origin(size, 3)
    config = write_config(
        tmp_path,
        "live-lag",
        window={"size_ms": size, "origin": origin},
        privacy={"epsilon": 1.0, "tau": 500.0, "counters": 64, "partitions": 2, "seed": 9},
        flink={"checkpoint_interval_ms": CHECKPOINT_MS, "parallelism": 2},
        testing={"slow_decode_ms": 300},
    )
    cfg, producer = publish(config, [])
    job = subprocess.Popen(
        [*JOB, str(config)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    rng = np.random.default_rng(2)
    try:
        wait_for(lambda: time.time() * 1000 > origin, 60, "the schedule's origin")
        for _ in range(40):  # 8 s: a message to each partition every 200 ms
            for partition in (0, 1):
                values = rng.integers(0, 2**32, 100, dtype=np.uint64).astype(np.uint32)
                producer._producer.send(cfg["kafka.input_topic"], value=pack_ipv4(values), partition=partition)
            producer._producer.flush()
            time.sleep(0.2)  # the stream's own pace, not a wait for a condition
        last = max(ts for ts, _ in input_log(cfg)) // size * size
        wait_for(
            lambda: any(json.loads(r)["window"]["start_ms"] >= last for r in reports(cfg)),
            180,
            "the report of the last window with data",
        )
    finally:
        producer.close()
        _stop(job)
    found = reports(cfg)
    starts = [json.loads(r)["window"]["start_ms"] for r in found]
    assert starts == list(range(origin, starts[-1] + size, size)), starts  # once each, in order, no gap
    ledger = ReleaseLedger(tmp_path / "ledger")
    assert found == [ledger.get(s) for s in starts]
    arrived: dict[int, int] = {}
    for ts, value in input_log(cfg):
        arrived[ts // size * size] = arrived.get(ts // size * size, 0) + len(value) // 4
    counted: dict[int, int] = {}
    for (w, sid), sketch in dumped(tmp_path).items():
        if sid < cfg.params.partitions:  # level 1, both partitions: every element once
            counted[w] = counted.get(w, 0) + sketch.total
    assert {w: n for w, n in arrived.items() if w <= starts[-1]} == counted  # nothing dropped as late
    assert len(counted) >= 4
