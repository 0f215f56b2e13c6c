"""The catalogue of metrics dphhh exports, by endpoint (used by the dashboards and their tests).

Every exported metric is public or computed from published reports (docs/ALGORITHMS.md §0.1 f):

* Flink's Prometheus reporter (``flink.prometheus_port``) exports an **allow-list**
  (:data:`dphhh.stream.job.METRIC_INCLUDES`): dphhh's operator counters, named
  ``flink_taskmanager_job_task_operator_dphhh_<step>_<name>`` (a counter's series appears with its
  first increment: dashboards use ``or vector(0)``) — the public schedule's windows released,
  republished after a failure and refused by the budget guard, reports published late (an
  incident: the deployment could not compute a report by its publication time), and the dead
  letters of records that hold **no element** (unparsable: operational counts, documented as
  such) — and the job's restart count. Elements the schedule rejects (late, outside the band or the schedule) are
  dead-lettered but counted nowhere; Flink's record/byte/offset/lag counters, watermarks,
  busy/back-pressure times, heap and checkpoint sizes are not exported.
* ``dphhh run``'s endpoint (``output.metrics_port``): :data:`dphhh.stream.report_metrics.METRIC_NAMES`,
  computed from the published reports (and the broker's reachability at start).
"""

from __future__ import annotations

from dphhh.connectors.decode import REASONS
from dphhh.connectors.skips import is_unparsable

from .report_metrics import METRIC_NAMES as REPORT_METRICS

__all__ = [
    "OPERATOR_COUNTERS",
    "job_metric_help",
    "FLINK_METRICS",
    "JOB_METRICS",
    "REPORT_METRICS",
    "FORBIDDEN_WORDS",
    "prometheus_name",
]

#: step → the counters of that operator (dead letters of unparsable records: one per reason).
OPERATOR_COUNTERS: dict[str, tuple[str, ...]] = {
    "decode": tuple(f"dead_letters_{r}" for r in REASONS if is_unparsable(r)),
    # reports_overdue: incidents — a report not ready at its publication time (under-provisioning)
    "release": ("windows_released", "windows_republished", "windows_refused", "reports_overdue"),
}
#: Flink's own metrics the reporter exports (public: failures of the job, not of the data).
FLINK_METRICS = ("flink_jobmanager_job_numRestarts",)


def job_metric_help(name: str) -> str:
    """What the exported metric ``name`` (one of :data:`JOB_METRICS`) counts, for the generated metrics reference."""
    dead_letters = prometheus_name("decode", "dead_letters_")
    if name.startswith(dead_letters):
        reason = name.removeprefix(dead_letters)
        return f"records dead-lettered as `{reason}`: unreadable, they hold no element (an operational count)"
    return _JOB_METRIC_HELP[name]


#: Words of metric names that track the data and must never be exported (checked on live scrapes).
FORBIDDEN_WORDS = (
    "busyTime",
    "backPressured",
    "Watermark",
    "Heap",
    "incoming_byte",
    "fetch_size",
    "Records",
    "Bytes",
    "ffset",
    "_lag",
    "CheckpointSize",
    "CheckpointDuration",
    "_late_",
    "unit_cap",
    "sketches_released",
)


def prometheus_name(step: str, name: str) -> str:
    """The Prometheus name of dphhh operator metric ``name`` of ``step``."""
    return f"flink_taskmanager_job_task_operator_dphhh_{step}_{name}"


JOB_METRICS: tuple[str, ...] = (
    *(prometheus_name(step, n) for step, names in OPERATOR_COUNTERS.items() for n in names),
    *FLINK_METRICS,
)

_JOB_METRIC_HELP = {
    prometheus_name("release", "windows_released"): (
        "windows of the public schedule released (one report each, refused ones included)"
    ),
    prometheus_name("release", "windows_republished"): (
        "windows released again after a failure (the ledger's bytes, republished)"
    ),
    prometheus_name("release", "windows_refused"): "windows refused by the budget guard (their report says so)",
    prometheus_name("release", "reports_overdue"): (
        "reports not ready at their publication time: an incident of an under-provisioned deployment"
    ),
    "flink_jobmanager_job_numRestarts": "the job's restarts after failures",
}
