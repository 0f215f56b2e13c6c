"""The reports-stall watch: readers held back by one open transaction are noticed, once, and the
warning clears when they move on (plain logic; the real broker case is in tests/e2e)."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import generate_latest

from dphhh.stream.report_metrics import ReportMetrics
from dphhh.stream.reports_stall import ReportsStallWatch, StallDetector, stall_limit_s


def test_the_limit_is_ten_checkpoint_intervals_and_at_least_two_minutes() -> None:
    """A 5 s interval gives 120 s (the floor); a 60 s interval gives 600 s."""
    assert stall_limit_s(5_000) == 120.0
    assert stall_limit_s(60_000) == 600.0


def test_a_stable_offset_held_for_the_limit_is_a_stall() -> None:
    """The same stable offset below the end is a stall once limit_s has passed since it was first seen."""
    d = StallDetector(10.0)
    assert not d.observe(5, 9, now=100.0)
    assert not d.observe(5, 12, now=109.9)  # more records behind the same open transaction
    assert d.observe(5, 12, now=110.0)


def test_a_moving_or_caught_up_offset_is_not_a_stall() -> None:
    """Each new stable offset restarts the clock; a stable offset at the end means nothing is open."""
    d = StallDetector(10.0)
    assert not d.observe(5, 9, now=0.0)
    assert not d.observe(9, 14, now=11.0)  # a later transaction: clock restarts
    assert not d.observe(9, 14, now=20.9)
    assert not d.observe(14, 14, now=50.0)  # all committed
    assert not d.observe(14, 20, now=51.0)
    assert d.observe(14, 20, now=61.0)


def test_a_non_positive_limit_is_refused() -> None:
    """limit_s <= 0 would call every open transaction a stall."""
    with pytest.raises(ValueError, match="StallDetector: limit_s must be > 0"):
        StallDetector(0)


class _Readings:
    """A probe that replays readings; the last one repeats. Sets ``done`` once all were read."""

    def __init__(self, readings: list[dict[int, tuple[int, int]] | Exception]) -> None:
        self.readings, self.done, self.closed = list(readings), threading.Event(), False

    def read(self) -> dict[int, tuple[int, int]]:
        reading = self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]
        if len(self.readings) == 1:
            self.done.set()
        if isinstance(reading, Exception):
            raise reading
        return reading

    def close(self) -> None:
        self.closed = True


def _run_watch(readings, limit_s: float = 2.0):
    probe = _Readings(readings)
    said: list[str] = []
    metrics = ReportMetrics()
    ticks = iter(range(10_000))  # one clock second per reading
    watch = ReportsStallWatch(
        {},
        "reports",
        limit_s,
        metrics=metrics,
        poll_s=0.001,
        say=said.append,
        probe=lambda options, topic: probe,
        clock=lambda: float(next(ticks)),
    )
    watch.start()
    assert probe.done.wait(10)
    watch.stop()
    assert probe.closed
    return said, generate_latest(metrics.registry).decode(), watch


def test_the_watch_warns_once_per_stall_and_says_when_it_clears() -> None:
    """Held at offset 3 for 2+ clock seconds: one warning naming the topic, partition and the way out
    (find-hanging), metric 1; a failed reading in between is skipped; moving on: one note, metric 0."""
    held = {0: (3, 8)}
    said, text, _ = _run_watch([held, held, OSError("broker away"), held, held, held, {0: (8, 8)}, {0: (8, 8)}])
    warnings = [s for s in said if "warning" in s]
    assert len(warnings) == 1
    assert "reports (partition 0)" in warnings[0] and "kafka-transactions.sh find-hanging" in warnings[0]
    assert said[-1] == "dphhh run: readers of reports (partition 0) move on again"
    assert "dphhh_reports_topic_stalled 0.0" in text


def test_the_metric_stays_1_while_the_stall_lasts() -> None:
    """While the stable offset does not move, dphhh_reports_topic_stalled is 1."""
    said, text, watch = _run_watch([{0: (3, 8)}, {0: (3, 8)}, {0: (3, 8)}, {0: (3, 9)}])
    assert watch.stalled == {0} and "dphhh_reports_topic_stalled 1.0" in text
    assert len(said) == 1


def test_a_probe_that_cannot_connect_is_reported_and_the_watch_ends() -> None:
    """If the offsets cannot be read at all, the watch says so once and stops (the job runs on)."""
    said: list[str] = []

    def refuse(options, topic):
        raise ConnectionError("cannot bootstrap from 127.0.0.1:1")

    watch = ReportsStallWatch({}, "reports", 1.0, poll_s=0.001, say=said.append, probe=refuse)
    watch.start()
    watch.join(5)
    assert not watch.is_alive()
    assert said == [
        "dphhh run: warning: cannot watch reports for stalled transactions: cannot bootstrap from 127.0.0.1:1"
    ]
