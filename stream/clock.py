"""The live job's clock: records the job appends to its own input partitions (docs/ALGORITHMS.md §0.1 e).

A live job releases window W when its input has been consumed up to the broker's wall-clock time
``end(W) + grace``. The broker stamps every record with its log-append time, and a partition's log
is in append order, so once the job has read a record appended at time T it has read every record
appended before T. While the input is idle nothing would say so; hence :class:`ClockTicker`
appends a small clock record to every input partition every ``window.clock_tick_ms``, and the
job's watermark advances **only** on clock records (the Java ``ClockWatermarks`` strategy, one
generator per partition, the minimum over partitions): it is the broker's wall clock, never a
function of the data. Replaying the log after a restore meets the same clock records at the same
positions, so every decision is made exactly as in the first run.

The clock record's value (:data:`TICK`) is invalid in every input format (13 bytes: not a whole
number of packed addresses; not UTF-8), so no real message is ever taken for one; decode skips it
without dead-lettering it. Other consumers of the input topic see these records and should skip
them too. A forged clock record can do no harm: its timestamp is the broker's append time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from dphhh.sketches.errors import UsageError

__all__ = ["TICK", "is_tick", "ClockTicker", "shared_ticker", "stop_shared_ticker"]

#: The value of a clock record (also in deploy/java/src/main/java/io/dphhh/flink/ClockWatermarks.java).
TICK = b"\xffdphhh-clock\xff"
_LOG = logging.getLogger(__name__)


def is_tick(value: bytes | None) -> bool:
    """Whether a message value is a clock record."""
    return value is not None and len(value) == len(TICK) and bytes(value) == TICK


class ClockTicker(threading.Thread):
    """Appends a clock record to every partition of ``topic`` every ``interval_ms`` (a daemon thread).

    Partitions are looked up again every ``refresh_s`` (a topic may grow). Send failures (the broker
    away) are retried at the next tick; the records carry no data, so losing one only delays a
    release until the next."""

    def __init__(
        self,
        options: Mapping[str, Any],
        topic: str,
        interval_ms: int,
        *,
        refresh_s: float = 30.0,
        on_fatal: Callable[[str], None] | None = None,
    ) -> None:
        """``on_fatal(message)`` is called (once) when the broker refuses the job's clock records for
        good (not authorised to write to ``topic``): without them no window would ever be released."""
        if not isinstance(interval_ms, int) or interval_ms < 1:
            raise UsageError(f"ClockTicker: interval_ms must be an integer >= 1, got {interval_ms!r}")
        super().__init__(name=f"dphhh-clock-{topic}", daemon=True)
        self.options = dict(options)
        self.topic = topic
        self.interval_s = interval_ms / 1000
        self.refresh_s = refresh_s
        self.on_fatal = on_fatal
        self.stop_event = threading.Event()
        self.sent = 0  # clock records acknowledged (a test hook; it counts clock records, not data)

    def stop(self, timeout_s: float = 10.0) -> None:
        self.stop_event.set()
        if self.ident is not None and self is not threading.current_thread():
            self.join(timeout=timeout_s)

    def run(self) -> None:
        import time

        producer = None
        partitions: list[int] = []
        looked_up = -float("inf")
        failing = False  # warn once per outage, and once when it ends
        while not self.stop_event.is_set():
            started = time.monotonic()
            try:
                if producer is None:
                    producer = self._producer()
                if started - looked_up > self.refresh_s or not partitions:
                    partitions = sorted(producer.partitions_for(self.topic) or [])
                    looked_up = started
                futures = [producer.send(self.topic, value=TICK, partition=p) for p in partitions]
                producer.flush(timeout=max(1.0, 5 * self.interval_s))
                for future in futures:
                    future.get(timeout=1)  # raises the send's error (e.g. not authorised)
                self.sent += len(futures)
                if failing:
                    failing = False
                    _LOG.warning("dphhh clock: appending clock records to %s again", self.topic)
            except Exception as exc:  # the broker away: try again at the next tick (the message has no data)
                if "Authorization" in type(exc).__name__:
                    message = (
                        f"the job may not write its clock records to its input topic {self.topic} "
                        f"({type(exc).__name__}); a live job needs write access to it (docs/explanation/stream-job.md, "
                        "the release schedule)"
                    )
                    _LOG.error("dphhh clock: %s", message)
                    if self.on_fatal is not None:
                        self.on_fatal(message)
                    return
                if not failing:
                    failing = True
                    _LOG.warning(
                        "dphhh clock: cannot append clock records to %s (%s); retrying at every tick",
                        self.topic,
                        type(exc).__name__,
                    )
                if producer is not None:
                    try:
                        producer.close(timeout=1)
                    except Exception:
                        pass
                    producer = None
            self.stop_event.wait(max(0.0, self.interval_s - (time.monotonic() - started)))
        if producer is not None:
            try:
                producer.close(timeout=2)
            except Exception:
                pass

    def _producer(self):
        from kafka import KafkaProducer

        from dphhh.connectors.kafka_io import open_client

        return open_client(KafkaProducer, self.options, acks=1, linger_ms=0, retries=0)


_SHARED: dict[tuple[str, str], ClockTicker] = {}
_SHARED_LOCK = threading.Lock()


def shared_ticker(
    options: Mapping[str, Any], topic: str, interval_ms: int, on_fatal: Callable[[str], None] | None = None
) -> ClockTicker:
    """The one running ticker of this process for (bootstrap, topic), started on first use (an
    operator reopened after a failover in the same worker process reuses it)."""
    key = (str(options.get("bootstrap.servers")), topic)
    with _SHARED_LOCK:
        ticker = _SHARED.get(key)
        if ticker is None or not ticker.is_alive():
            ticker = _SHARED[key] = ClockTicker(options, topic, interval_ms, on_fatal=on_fatal)
            ticker.start()
        return ticker


def stop_shared_ticker(options: Mapping[str, Any], topic: str) -> None:
    """Stop this process's ticker for (bootstrap, topic), if any."""
    key = (str(options.get("bootstrap.servers")), topic)
    with _SHARED_LOCK:
        ticker = _SHARED.pop(key, None)
    if ticker is not None:
        ticker.stop()
