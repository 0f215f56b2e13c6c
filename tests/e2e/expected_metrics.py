"""The metric names a deployment exposes, as the tests expect them — written here, not read from the
product's catalogue (``stream/metrics_catalog.py``), so that adding a metric to the product cannot
make a test that compares metrics pass by itself: a new metric must be added here too, where the
differential tests (``tests/e2e/test_side_channels.py``) then compare its values between X and X + e.
"""

from __future__ import annotations

#: `dphhh run`'s endpoint (output.metrics_port)
REPORT_ENDPOINT: frozenset[str] = frozenset(
    {
        "dphhh_epsilon_spent_created",
        "dphhh_epsilon_spent_total",
        "dphhh_kafka_broker_up",
        "dphhh_kafka_connect_retries_created",
        "dphhh_kafka_connect_retries_total",
        "dphhh_report_delta",
        "dphhh_report_epsilon",
        "dphhh_report_hhh",
        "dphhh_report_hhh_count",
        "dphhh_report_hhh_share",
        "dphhh_report_latency_seconds",
        "dphhh_report_noisy_rate",
        "dphhh_report_noisy_window_size",
        "dphhh_report_window_end_seconds",
        "dphhh_reports_created",
        "dphhh_reports_overdue_created",
        "dphhh_reports_overdue_total",
        "dphhh_reports_refused_created",
        "dphhh_reports_refused_total",
        "dphhh_reports_topic_stalled",
        "dphhh_reports_total",
        "dphhh_windows_empty_created",
        "dphhh_windows_empty_total",
    }
)

_OPERATOR = "flink_taskmanager_job_task_operator_dphhh_"

#: the job's endpoint (flink.prometheus_port) after the job's metric filter, whatever the input
JOB_ENDPOINT: frozenset[str] = frozenset(
    {
        "flink_jobmanager_job_numRestarts",
        _OPERATOR + "release_windows_released",
    }
)

#: job counters registered at their first increment: present only once it happened (a report
#: released after its publication time, under load or after a restart)
ON_FIRST_INCREMENT: frozenset[str] = frozenset({_OPERATOR + "release_reports_overdue"})


def dead_letter_metrics(*reasons: str) -> frozenset[str]:
    """The job's dead-letter counters for these reasons (one per reason that occurred)."""
    return frozenset(f"{_OPERATOR}decode_dead_letters_{r}" for r in reasons)
