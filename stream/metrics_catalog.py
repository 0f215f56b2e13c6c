"""The catalogue of metrics dphhh exports, by endpoint (used by the dashboards and their tests).

* Flink's Prometheus reporter (``flink.prometheus_port``): dphhh's operator metrics, named
  ``flink_taskmanager_job_task_operator_dphhh_<step>_<name>`` (a counter's series appears with its
  first increment: dashboards use ``or vector(0)``), plus the Flink metrics the dashboards use.
* ``dphhh run``'s endpoint (``output.metrics_port``): :data:`stream.report_metrics.METRIC_NAMES`.

No metric counts stream elements: Flink's own record/byte/offset/lag counters are filtered out
(:data:`stream.job.RAW_METRIC_FILTER`), dead letters, late messages and elements over the privacy
unit's cap are counts of records *excluded* from the release (exact, operational, not covered by
the guarantee — see README "Guarantees and failure behaviour"), and everything about the data
itself comes from published (noisy) reports.
"""

from __future__ import annotations

from connectors.decode import REASONS

from .report_metrics import METRIC_NAMES as REPORT_METRICS

__all__ = ["OPERATOR_COUNTERS", "OPERATOR_GAUGES", "FLINK_METRICS", "JOB_METRICS", "REPORT_METRICS", "prometheus_name"]

#: step → the counters of that operator (dead letters: one per reason).
OPERATOR_COUNTERS: dict[str, tuple[str, ...]] = {
    "decode": ("late_messages_dropped", "dead_letters_no_timestamp", "dead_letters_bad_batch",
               *(f"dead_letters_{r}" for r in REASONS)),
    "cap": ("unit_cap_dropped", "late_batches_dropped"),
    "sketch": ("sketches_released", "late_batches_dropped"),
    "release": ("windows_released", "windows_republished", "windows_refused", "late_releases_dropped"),
}
#: step → gauges.
OPERATOR_GAUGES: dict[str, tuple[str, ...]] = {"decode": ("watermark_age_ms",)}
#: Flink's own metrics that the dashboards use (none counts elements).
FLINK_METRICS = (
    "flink_jobmanager_job_lastCheckpointDuration",
    "flink_jobmanager_job_numberOfCompletedCheckpoints",
    "flink_jobmanager_job_numberOfFailedCheckpoints",
    "flink_jobmanager_job_numRestarts",
    "flink_taskmanager_job_task_busyTimeMsPerSecond",
    "flink_taskmanager_job_task_backPressuredTimeMsPerSecond",
)


def prometheus_name(step: str, name: str) -> str:
    """The Prometheus name of dphhh operator metric ``name`` of ``step``."""
    return f"flink_taskmanager_job_task_operator_dphhh_{step}_{name}"


JOB_METRICS: tuple[str, ...] = (
    *(prometheus_name(step, n) for step, names in OPERATOR_COUNTERS.items() for n in names),
    *(prometheus_name(step, n) for step, names in OPERATOR_GAUGES.items() for n in names),
    *FLINK_METRICS,
)
