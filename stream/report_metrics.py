"""Prometheus metrics of the published reports (``dphhh run``'s own endpoint, prometheus_client).

Everything here is computed from reports as they are published (read-committed from the reports
topic), so no metric carries anything beyond what the reports themselves publish: noisy window
sizes, the budget spent, the latest private HHH with their noisy counts, and timing. The job's
operational metrics (an allow-list: unparsable records by reason, windows released, republished
and refused, overdue reports, restarts; stream.metrics_catalog) come from Flink's own Prometheus
reporter (``flink.prometheus_port``).

Metric names (all prefixed ``dphhh_``):

* ``reports_total`` (counter): reports seen; ``windows_empty_total``: of which had no HHH;
* ``report_window_end_seconds``: end of the latest reported window (event time, Unix seconds);
* ``report_latency_seconds``: wall-clock time from that window's end to the report being readable;
* ``report_noisy_window_size``: the latest report's noisy number of elements (``n_noisy``);
* ``report_noisy_rate``: that number per second of the window (the private throughput);
* ``report_epsilon`` / ``report_delta``: the budget the latest report spent (its ledger);
* ``epsilon_spent_total``: the sum of ε over the reports seen by this process;
* ``report_hhh``: the number of prefixes in the latest report;
* ``report_hhh_count{level, prefix}``: the noisy count of each prefix of the latest report (the
  label set is replaced at every report, so old prefixes disappear);
* ``report_hhh_share{level, prefix}``: that noisy count over the report's noisy window size (a size
  below 1 counts as 1, so that it exists exactly when the count does): post-processing of the report,
  for alerts on a fraction of the traffic (deploy/prometheus/alerts.yml);
* ``reports_refused_total``: reports whose release the budget guard refused;
* ``reports_overdue_total``: reports readable more than ``LATE_AFTER_S`` after their window's public
  publication time (release time + ``window.publish_delay_ms``): an incident — the job could not
  compute them in time (docs/ALGORITHMS.md §0.1 g); alerted by ``DphhhReportOverdue``. Reports due
  before the first one this process observed (a start's backlog) are not counted;
* ``kafka_broker_up``: 1 once the broker answered at start, 0 while ``dphhh run`` waits for it;
  ``kafka_connect_retries_total``: failed attempts to reach it (retried with backoff);
* ``reports_topic_stalled``: 1 while readers of the reports topic have been held back by one open
  Kafka transaction for too long (:mod:`dphhh.stream.reports_stall`), else 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

__all__ = ["ReportMetrics", "METRIC_NAMES", "LATE_AFTER_S"]

#: A report readable this long after its publication time counts as late (the reader's own lag —
#: a poll, the reports topic's fetch — stays far below it).
LATE_AFTER_S = 1.0

METRIC_NAMES = (
    "dphhh_reports_total",
    "dphhh_windows_empty_total",
    "dphhh_report_window_end_seconds",
    "dphhh_report_latency_seconds",
    "dphhh_report_noisy_window_size",
    "dphhh_report_noisy_rate",
    "dphhh_report_epsilon",
    "dphhh_report_delta",
    "dphhh_epsilon_spent_total",
    "dphhh_report_hhh",
    "dphhh_report_hhh_count",
    "dphhh_report_hhh_share",
    "dphhh_reports_refused_total",
    "dphhh_reports_overdue_total",
    "dphhh_kafka_broker_up",
    "dphhh_kafka_connect_retries_total",
    "dphhh_reports_topic_stalled",
)


class ReportMetrics:
    """Gauges and counters of published reports in their own registry (see the module docstring)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
        publish_delay_ms: int | None = None,
    ) -> None:
        """``publish_delay_ms``: the deployment's ``window.publish_delay_ms`` (``None``: a replay,
        whose reports have no publication time, or unknown: nothing is counted late)."""
        self.registry = registry or CollectorRegistry()
        self.clock = clock
        self.publish_delay_ms = publish_delay_ms
        self.running_since: float | None = None  # when the first report was observed
        r = self.registry
        self.reports = Counter("dphhh_reports", "Reports published (read-committed)", registry=r)
        self.empty = Counter("dphhh_windows_empty", "Reports with no prefix reported", registry=r)
        self.window_end = Gauge("dphhh_report_window_end_seconds", "End of the latest reported window", registry=r)
        self.latency = Gauge(
            "dphhh_report_latency_seconds",
            "Wall time from the latest window's end to its report being readable",
            registry=r,
        )
        self.noisy_size = Gauge(
            "dphhh_report_noisy_window_size", "Noisy number of elements of the latest window", registry=r
        )
        self.noisy_rate = Gauge("dphhh_report_noisy_rate", "Noisy elements per second of the latest window", registry=r)
        self.epsilon = Gauge("dphhh_report_epsilon", "Epsilon spent by the latest report", registry=r)
        self.delta = Gauge("dphhh_report_delta", "Delta spent by the latest report", registry=r)
        self.epsilon_total = Counter("dphhh_epsilon_spent", "Sum of epsilon over the reports seen", registry=r)
        self.hhh = Gauge("dphhh_report_hhh", "Prefixes in the latest report", registry=r)
        self.hhh_count = Gauge(
            "dphhh_report_hhh_count", "Noisy count of each prefix of the latest report", ["level", "prefix"], registry=r
        )
        self.hhh_share = Gauge(
            "dphhh_report_hhh_share",
            "Noisy count of each prefix of the latest report over its noisy window size",
            ["level", "prefix"],
            registry=r,
        )
        self.refused = Counter("dphhh_reports_refused", "Reports refused by the budget guard", registry=r)
        self.late = Counter(
            "dphhh_reports_overdue", "Reports readable later than their public publication time", registry=r
        )
        self.broker_up = Gauge(
            "dphhh_kafka_broker_up", "1 when the Kafka broker answered, 0 while waiting for it", registry=r
        )
        self.reports_topic_stalled = Gauge(
            "dphhh_reports_topic_stalled",
            "1 while an open Kafka transaction has held readers of the reports topic back for too long",
            registry=r,
        )
        self.connect_retries = Counter(
            "dphhh_kafka_connect_retries", "Failed attempts to reach the Kafka broker at start", registry=r
        )

    def observe(self, report: dict[str, Any]) -> None:
        """Update every metric from one published report (``dphhh.report/2``, :data:`dphhh.privacy.report.SCHEMA`)."""
        window = report.get("window", {})
        budget = report.get("budget", {})
        hhh = report.get("hhh", [])
        self.reports.inc()
        if "refused" in report:
            self.refused.inc()
        if not hhh:
            self.empty.inc()
        end_ms = window.get("end_ms")
        release_ms = window.get("release_ms")
        if self.running_since is None:
            self.running_since = self.clock()
        if self.publish_delay_ms is not None and isinstance(release_ms, (int, float)):
            at = (release_ms + self.publish_delay_ms) / 1000.0
            # a report due before the first one this reader saw is the backlog of a start (not counted)
            if at > self.running_since and self.clock() > at + LATE_AFTER_S:
                self.late.inc()
        if isinstance(end_ms, (int, float)):
            self.window_end.set(end_ms / 1000.0)
            self.latency.set(max(0.0, self.clock() - end_ms / 1000.0))
        if isinstance(window.get("n_noisy"), (int, float)):
            self.noisy_size.set(window["n_noisy"])
            start_ms = window.get("start_ms")
            if isinstance(start_ms, (int, float)) and isinstance(end_ms, (int, float)) and end_ms > start_ms:
                self.noisy_rate.set(window["n_noisy"] / ((end_ms - start_ms) / 1000.0))
        eps, delta = budget.get("epsilon"), budget.get("delta")
        if isinstance(eps, (int, float)):
            self.epsilon.set(eps)
            self.epsilon_total.inc(eps)
        if isinstance(delta, (int, float)):
            self.delta.set(delta)
        self.hhh.set(len(hhh))
        self.hhh_count.clear()
        self.hhh_share.clear()
        n_noisy = window.get("n_noisy")
        for item in hhh:
            labels = {"level": str(item.get("level")), "prefix": str(item.get("prefix"))}
            count = item.get("count", 0)
            self.hhh_count.labels(**labels).set(count)
            if isinstance(count, (int, float)):
                # a series for every prefix series (the set of names must not depend on the noisy
                # size's sign): a noisy size below 1 counts as 1
                size = n_noisy if isinstance(n_noisy, (int, float)) else 0
                self.hhh_share.labels(**labels).set(count / max(size, 1))

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Expose the registry on ``http://addr:port/metrics`` (a daemon thread)."""
        start_http_server(port, addr=addr, registry=self.registry)
