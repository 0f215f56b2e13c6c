"""Publishing a window's report at its public time, on every surface at once (plain logic).

docs/ALGORITHMS.md §0.1 g: a live window's report becomes visible at ``release time + publication
delay`` (:meth:`dphhh.stream.schedule.ReleaseSchedule.publish_time`), whatever the window held and
however long its computation took. The release operator computes the report when the window's
release time has passed, then :meth:`ReportPublisher.publish` waits on the wall clock until the
publication time and only then touches anything a reader can see, in this order:

1. the release ledger (the stored bytes: atomic, at most one attempt wins, :mod:`dphhh.stream.ledger`);
2. the reports file (one line per window, :class:`dphhh.connectors.report_sink.JsonLinesReportFile`);
3. the reports topic (a Kafka transaction of its own, :class:`dphhh.connectors.report_sink.ReportsTopic`);
4. the ledger's published mark.

A report that is not ready by its publication time is an **incident** (the deployment is
under-provisioned for its publication delay): it is published at once and counted
(``reports_overdue``, a public metric with an alert rule); what it reveals is that the job was slow,
which a large enough ``window.publish_delay_ms`` prevents (``dphhh plan`` suggests one). A report
is overdue when it is *ready* after its publication time (no tolerance). Windows whose publication
time passed before this worker was opened — the backlog of a start or a restart, both public
events — are published at once too and are not counted; their timing follows the start and the
volume read since the checkpoint restored (docs/howto/troubleshoot.md "Known limits"). A replay
publishes every report at the end of its input (no publication time: its reports are all
published together).

After a failure a window whose report is stored is republished with the stored bytes: to the
file (which skips a window it holds) and to the topic unless the ledger's mark, or the topic
itself, shows it there already — so every window has exactly one report on the topic.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from dphhh.connectors.report_sink import JsonLinesReportFile, ReportsTopic

from .ledger import ReleaseLedger
from .schedule import LIVE, ReleaseSchedule

__all__ = ["ReportPublisher", "Published"]


@dataclass(frozen=True)
class Published:
    """What :meth:`ReportPublisher.publish` did: the stored bytes, and whether it was late."""

    report: bytes
    late: bool


class ReportPublisher:
    """Publishes reports at their publication time (see the module docstring)."""

    def __init__(
        self,
        schedule: ReleaseSchedule,
        ledger: ReleaseLedger,
        report_file: JsonLinesReportFile | None = None,
        topic: ReportsTopic | None = None,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.schedule = schedule
        self.ledger = ledger
        self.report_file = report_file
        self.topic = topic
        self.clock = clock
        self.sleep = sleep
        self.published_through = ledger.published_through()
        self.running_since = clock()  # when this worker was opened: earlier publication times are a backlog

    def publish(self, window: int, report: bytes, stored: bool) -> Published:
        """Publish ``window``'s ``report`` (``stored``: read from the ledger, a republication)."""
        at = self.schedule.publish_time(window) / 1000.0
        late = False
        if self.schedule.mode == LIVE:
            ready = self.clock()
            while (wait := at - self.clock()) > 0:  # the wall clock, not the work, says when
                self.sleep(wait)
            backlog = at <= self.running_since  # due before this worker was opened (see the module docstring)
            late = not stored and not backlog and ready > at
        report = self.ledger.put(window, report)  # another attempt's bytes if it stored first
        if self.report_file is not None:
            self.report_file.write(report)
        done = self.published_through is not None and window <= self.published_through
        if self.topic is not None and not done and not (stored and self.topic.holds(window)):
            self.topic.send(report, self.schedule.release_time(window))
        if not done:
            self.ledger.mark_published(window)
            self.published_through = window
        return Published(report, late)

    def close(self) -> None:
        if self.topic is not None:
            self.topic.close()
