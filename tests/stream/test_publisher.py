"""Publishing at the public time (stream/publisher.py, docs/ALGORITHMS.md §0.1 g), with a fake clock.

A live report waits until its publication time (release time + publication delay) and only then
reaches the ledger, the reports file and the topic, in that order; one not ready by then is published
at once and counted late; a stored report is republished without a second topic record when the
ledger's mark or the topic shows it there; a replay publishes at once.
"""

from __future__ import annotations

import json
from pathlib import Path

from dphhh.connectors.report_sink import JsonLinesReportFile
from dphhh.stream.ledger import ReleaseLedger
from dphhh.stream.publisher import ReportPublisher
from dphhh.stream.schedule import ReleaseSchedule

SIZE, DELAY = 10_000, 2_000


class Clock:
    """A wall clock that moves only when someone sleeps (and records when things happened)."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Topic:
    """The reports topic: records what was sent, and when (by the fake clock)."""

    def __init__(self, clock: Clock, ledger: ReleaseLedger) -> None:
        self.clock, self.ledger = clock, ledger
        self.sent: list[tuple[float, int, bytes, bool]] = []
        self.held: set[int] = set()

    def send(self, report: bytes, timestamp_ms: int) -> None:
        window = json.loads(report)["window"]["start_ms"]
        self.sent.append((self.clock(), timestamp_ms, report, self.ledger.get(window) is not None))
        self.held.add(window)

    def holds(self, window: int) -> bool:
        return window in self.held

    def close(self) -> None:
        pass


def _report(start: int, payload: str = "x") -> bytes:
    return json.dumps({"window": {"start_ms": start}, "hhh": payload}, sort_keys=True).encode()


def _publisher(tmp_path: Path, now: float, mode: str = "live"):
    schedule = ReleaseSchedule(
        SIZE, 0, mode=mode, grace_ms=500, publish_delay_ms=DELAY, until_ms=None if mode == "live" else 10 * SIZE
    )
    ledger = ReleaseLedger(tmp_path / "ledger")
    clock = Clock(now)
    topic = Topic(clock, ledger)
    pub = ReportPublisher(
        schedule, ledger, JsonLinesReportFile(tmp_path / "r.jsonl"), topic, clock=clock, sleep=clock.sleep
    )
    return pub, clock, topic, ledger


def test_a_report_ready_early_waits_for_its_publication_time(tmp_path: Path) -> None:
    """Ready 1.9 s after the window's release time, a report becomes visible exactly at release time +
    2 s: nothing is stored, written or sent before; then ledger, file and topic (ledger first)."""
    release = SIZE + 500  # window 0: end + grace (ms)
    pub, clock, topic, ledger = _publisher(tmp_path, (release + 100) / 1000)
    out = pub.publish(0, _report(0), stored=False)
    assert not out.late and abs(clock.now - (release + DELAY) / 1000) < 1e-9
    assert sum(clock.sleeps) > 1.8  # it waited
    ((at, ts, sent, in_ledger),) = topic.sent
    assert at == clock.now and ts == release and sent == _report(0) and in_ledger
    assert ledger.get(0) == _report(0) and ledger.published_through() == 0
    assert (tmp_path / "r.jsonl").read_bytes().splitlines() == [_report(0)]


def test_the_same_time_whatever_the_work(tmp_path: Path) -> None:
    """Two windows, one ready 0.1 s after its release time and one 1.9 s after: both become visible
    at their publication times exactly (the visible time follows the schedule, not the work)."""
    pub, clock, topic, _ = _publisher(tmp_path, (SIZE + 500 + 100) / 1000)
    pub.publish(0, _report(0, "a" * 10_000), stored=False)
    clock.now = (2 * SIZE + 500 + 1900) / 1000
    pub.publish(SIZE, _report(SIZE), stored=False)
    assert [round(at * 1000) for at, *_ in topic.sent] == [SIZE + 500 + DELAY, 2 * SIZE + 500 + DELAY]


def test_a_report_ready_late_is_published_at_once_and_counted(tmp_path: Path) -> None:
    """A report ready even 1 ms after its publication time is published at once and counted overdue
    (lateness is judged by when it was ready, not by when publishing ended); one ready 1 ms before
    waits and is on time."""
    release = SIZE + 500
    pub, clock, topic, _ = _publisher(tmp_path, (release + 100) / 1000)
    assert not pub.publish(0, _report(0), stored=False).late  # on time
    clock.now = (SIZE + release + DELAY + 1) / 1000
    out = pub.publish(SIZE, _report(SIZE), stored=False)
    assert out.late and len(topic.sent) == 2 and clock.now == (SIZE + release + DELAY + 1) / 1000  # no wait
    clock.now = (2 * SIZE + release + DELAY - 1) / 1000
    assert not pub.publish(2 * SIZE, _report(2 * SIZE), stored=False).late
    assert abs(clock.now - (2 * SIZE + release + DELAY) / 1000) < 1e-9  # it waited for its time


def test_a_start_ups_backlog_is_published_at_once_and_not_counted(tmp_path: Path) -> None:
    """Windows due before the worker was opened (a start or a restart, public events) are published at
    once and not counted overdue; a window due after the opening is counted if it is ready late —
    the catch-up after a restore included."""
    release = SIZE + 500
    opened = (2 * SIZE + release + DELAY) / 1000 + 0.7  # the worker opened after three windows were due
    pub, clock, topic, _ = _publisher(tmp_path, opened)
    assert [pub.publish(w * SIZE, _report(w * SIZE), stored=False).late for w in range(3)] == [False] * 3
    assert clock.sleeps == [] and len(topic.sent) == 3
    clock.now = (3 * SIZE + release + DELAY) / 1000 + 0.3  # due after the opening, ready late: counted
    assert pub.publish(3 * SIZE, _report(3 * SIZE), stored=False).late


def test_a_stored_report_is_republished_once_on_every_surface(tmp_path: Path) -> None:
    """After a failure the stored bytes are republished: the file keeps one line; the topic gets no
    second record when the ledger marked the window published, nor when the topic already holds it
    (a crash between the topic and the mark); else it is sent."""
    pub, clock, topic, ledger = _publisher(tmp_path, 100.0)
    pub.publish(0, _report(0), stored=False)
    again, clock2, topic2, _ = _publisher(tmp_path, 200.0)  # a restarted job: a new publisher
    assert again.publish(0, ledger.get(0), stored=True).report == _report(0)
    assert topic2.sent == []  # marked published
    ledger.put(SIZE, _report(SIZE))  # stored, then the crash: not marked
    topic2.held.add(SIZE)  # ... but the topic has it
    again.publish(SIZE, ledger.get(SIZE), stored=True)
    assert topic2.sent == [] and ledger.published_through() == SIZE
    ledger.put(2 * SIZE, _report(2 * SIZE))  # stored, the crash before the topic
    again.publish(2 * SIZE, ledger.get(2 * SIZE), stored=True)
    assert [json.loads(r)["window"]["start_ms"] for _, _, r, _ in topic2.sent] == [2 * SIZE]
    lines = (tmp_path / "r.jsonl").read_bytes().splitlines()
    assert [json.loads(x)["window"]["start_ms"] for x in lines] == [0, SIZE, 2 * SIZE]


def test_another_attempts_stored_bytes_win(tmp_path: Path) -> None:
    """A zombie attempt stored its report first: this attempt publishes the stored bytes, not its own."""
    pub, _, topic, ledger = _publisher(tmp_path, 100.0)
    ledger.put(0, _report(0, "first"))
    assert pub.publish(0, _report(0, "second"), stored=False).report == _report(0, "first")
    assert topic.sent[0][2] == _report(0, "first")


def test_a_replay_publishes_at_once(tmp_path: Path) -> None:
    pub, clock, topic, _ = _publisher(tmp_path, 1.0, mode="replay")
    assert not pub.publish(0, _report(0), stored=False).late and clock.sleeps == [] and len(topic.sent) == 1
