"""Notice when readers of the reports topic are held back by an open Kafka transaction.

The job publishes each report in a Kafka transaction of its own, at the report's publication time
(:mod:`dphhh.stream.publisher`); readers that see committed records only (``dphhh reports``, the
dashboard, ``dphhh run``'s own printer) cannot pass a transaction that is still open. A transaction
normally ends within milliseconds (the dead-letter sink's at the next checkpoint). One that stays
open — most likely a commit cut off by a broker crash, whose commit marker Kafka then skipped
(docs/howto/troubleshoot.md, "Known limits") — silently stops every reader. ``dphhh run`` watches the reports topic's
last stable offset: when it stays at the same offset below the end for :func:`stall_limit_s`, it
warns on stderr (once, and again when readers move on) and sets ``dphhh_reports_topic_stalled``.

Offsets of the reports topic count reports, which are public; nothing data-derived is read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from dphhh.sketches.errors import UsageError

from .console import say as console_say

__all__ = ["stall_limit_s", "StallDetector", "ReportsStallWatch"]


def stall_limit_s(checkpoint_interval_ms: int) -> float:
    """How long one transaction may hold readers back before it counts as stalled: ten checkpoint
    intervals (it normally ends at the next checkpoint; failed checkpoints, up to 5 in a row, and a
    restart delay it), and at least 120 s."""
    return max(120.0, 10 * checkpoint_interval_ms / 1000)


class StallDetector:
    """Decides, from successive readings of one partition, whether readers have been held back at the
    same stable offset, below the end, for at least ``limit_s`` seconds."""

    def __init__(self, limit_s: float) -> None:
        if limit_s <= 0:
            raise UsageError(f"StallDetector: limit_s must be > 0, got {limit_s}")
        self.limit_s = limit_s
        self._held_at: int | None = None
        self._since = 0.0

    def observe(self, stable: int, end: int, now: float) -> bool:
        """True while the stable offset ``stable`` (< ``end``) has not moved for ``limit_s`` up to ``now``."""
        if stable >= end:  # nothing open
            self._held_at = None
            return False
        if stable != self._held_at:  # another transaction (or the first reading)
            self._held_at, self._since = stable, now
            return False
        return now - self._since >= self.limit_s


class _Probe(Protocol):
    def read(self) -> dict[int, tuple[int, int]]: ...

    def close(self) -> None: ...


def _default_probe(options: Mapping[str, Any], topic: str) -> _Probe:
    from dphhh.connectors.kafka_io import StableOffsetProbe

    return StableOffsetProbe(options, topic)


class ReportsStallWatch(threading.Thread):
    """Reads the reports topic's offsets every ``poll_s`` seconds (a daemon thread); warns once per stall
    and once when it clears, and keeps ``metrics.reports_topic_stalled`` at 1 while any partition stalls.

    A reading that fails (the broker away) is skipped: the job's own restarts handle the broker.
    """

    def __init__(
        self,
        options: Mapping[str, Any],
        topic: str,
        limit_s: float,
        *,
        metrics: Any = None,
        poll_s: float = 10.0,
        say: Callable[[str], None] = console_say,
        probe: Callable[[Mapping[str, Any], str], _Probe] = _default_probe,
        clock: Callable[[], float] = time.monotonic,
        who: str = "dphhh run",
    ) -> None:
        super().__init__(daemon=True, name="reports-stall-watch")
        self.options, self.topic, self.limit_s, self.who = options, topic, limit_s, who
        self.metrics, self.poll_s, self.say, self.probe, self.clock = metrics, poll_s, say, probe, clock
        self.stop_event = threading.Event()
        self.stalled: set[int] = set()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Ask the watch to stop and wait for it (at most ``timeout_s``)."""
        self.stop_event.set()
        if self.ident is not None:
            self.join(timeout=timeout_s)

    def run(self) -> None:
        try:
            probe = self.probe(self.options, self.topic)
        except Exception as exc:  # noqa: BLE001 - the watch is advisory; the job runs on without it
            self.say(f"{self.who}: warning: cannot watch {self.topic} for stalled transactions: {exc}")
            return
        detectors: dict[int, StallDetector] = {}
        try:
            while not self.stop_event.wait(self.poll_s):
                try:
                    offsets = probe.read()
                except Exception:  # noqa: BLE001 - broker away: try again at the next poll
                    continue
                now = self.clock()
                for partition, (stable, end) in offsets.items():
                    held = detectors.setdefault(partition, StallDetector(self.limit_s)).observe(stable, end, now)
                    if held and partition not in self.stalled:
                        self.stalled.add(partition)
                        self.say(
                            f"{self.who}: warning: readers of {self.topic} (partition {partition}) have been "
                            f"held back by an open Kafka transaction for over {self.limit_s:.0f} s; no later "
                            "report is readable. If the broker was killed while committing, the transaction "
                            "hangs for good: see `bash deploy/kafka-transactions.sh find-hanging` and "
                            '"Known limits" in docs/howto/troubleshoot.md (the reports are in the release ledger and reports file)'
                        )
                    elif not held and partition in self.stalled:
                        self.stalled.discard(partition)
                        self.say(f"{self.who}: readers of {self.topic} (partition {partition}) move on again")
                if self.metrics is not None:
                    self.metrics.reports_topic_stalled.set(1 if self.stalled else 0)
        finally:
            probe.close()
