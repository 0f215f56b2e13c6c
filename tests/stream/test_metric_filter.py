"""The job's metric allow-list (docs/ALGORITHMS.md §0.1 f) under Flink's own filter, on Flink's real metric names.

``data/flink_metric_identifiers.txt`` lists every metric a live dphhh job registers (logical scope,
name, type; recorded by ``data/record_flink_metrics.py``). Flink's ``DefaultReporterFilters`` —
the class its Prometheus reporter uses — is applied to that list, in a JVM, with the job's
``filter.includes``. What passes must be exactly the catalogue (:mod:`dphhh.stream.metrics_catalog`);
each rule must matter (dropping one loses a catalogued metric); and the deny-list the job used
before lets data-tracking metrics through on the same names (so the list is a meaningful test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dphhh.stream.job import METRIC_INCLUDES
from dphhh.stream.metrics_catalog import FORBIDDEN_WORDS, JOB_METRICS

DATA = Path(__file__).resolve().parent / "data" / "flink_metric_identifiers.txt"
#: The filter the job had before issue 11 (a deny-list of record/byte/offset/lag/size words).
OLD_EXCLUDES = (
    "*:*Records*,*records*,*Record*,*record*,*Bytes*,*bytes*,*ffset*,*Lag*,*lag*,*ProcessedData*,"
    "*PersistedData*,*CheckpointSize*,*CheckpointFullSize*"
)


def _identifiers() -> list[tuple[str, str, str]]:
    rows = []
    for line in DATA.read_text().splitlines():
        if line and not line.startswith("#"):
            scope, name, kind = line.split("\t")
            rows.append((scope, name, kind))
    return rows


def prometheus_name(scope: str, name: str) -> str:
    """The name Flink's Prometheus reporter gives a metric (scope and name joined, separators as ``_``)."""
    return "flink_" + "_".join(part for part in f"{scope}.{name}".replace("-", "_").split("."))


@pytest.fixture(scope="module")
def flink_filter():
    """``passes(includes, excludes)`` → the identifiers Flink's reporter filter lets through."""
    from pyflink.common import Configuration
    from pyflink.java_gateway import get_gateway

    jvm = get_gateway().jvm
    metric_of = {
        "counter": jvm.org.apache.flink.metrics.SimpleCounter(),
        "gauge": jvm.org.apache.flink.runtime.metrics.TimerGauge(),
        "meter": jvm.org.apache.flink.metrics.MeterView(5),
        "histogram": jvm.org.apache.flink.runtime.metrics.DescriptiveStatisticsHistogram(10),
    }

    def passes(includes: tuple[str, ...] | None, excludes: str | None = None) -> set[tuple[str, str]]:
        conf = Configuration()
        if includes is not None:
            conf.set_string("metrics.reporter.prom.filter.includes", ";".join(includes))
        if excludes is not None:
            conf.set_string("metrics.reporter.prom.filter.excludes", excludes)
        scoped = jvm.org.apache.flink.configuration.DelegatingConfiguration(
            conf._j_configuration, "metrics.reporter.prom."
        )
        reporter_filter = jvm.org.apache.flink.runtime.metrics.filter.DefaultReporterFilters.metricsFromConfiguration(
            scoped
        )
        return {
            (scope, name)
            for scope, name, kind in _identifiers()
            if reporter_filter.filter(metric_of[kind], name, scope)
        }

    return passes


def _forbidden(names: set[tuple[str, str]]) -> set[str]:
    return {
        prometheus_name(s, n)
        for s, n in names
        if any(w.lower() in prometheus_name(s, n).lower() for w in FORBIDDEN_WORDS)
    }


def test_the_recorded_names_hold_the_metrics_that_track_the_data() -> None:
    """The list is Flink's real, full set: it has the data-tracking metrics a review found exported."""
    names = {prometheus_name(s, n) for s, n, _ in _identifiers()}
    for expected in (
        "flink_taskmanager_job_task_busyTimeMsPerSecond",
        "flink_taskmanager_job_task_backPressuredTimeMsPerSecond",
        "flink_taskmanager_job_task_operator_currentInputWatermark",
        "flink_taskmanager_job_task_operator_KafkaSourceReader_KafkaConsumer_incoming_byte_total",
        "flink_taskmanager_job_task_operator_KafkaSourceReader_KafkaConsumer_fetch_size_avg",
        "flink_taskmanager_Status_JVM_Memory_Heap_Used",
        "flink_taskmanager_job_task_operator_dphhh_release_windows_released",
    ):
        assert expected in names, expected
    assert len(names) > 300


def test_the_allow_list_passes_exactly_the_catalogue(flink_filter) -> None:
    """With the job's includes, Flink exports only catalogued metrics, none tracking the data, and
    every catalogued metric the recorded job registered."""
    exported = {prometheus_name(s, n) for s, n in flink_filter(METRIC_INCLUDES)}
    recorded = {prometheus_name(s, n) for s, n, _ in _identifiers()}
    assert exported <= set(JOB_METRICS), exported - set(JOB_METRICS)
    assert exported == set(JOB_METRICS) & recorded
    assert not _forbidden(flink_filter(METRIC_INCLUDES))


@pytest.mark.parametrize("dropped", range(len(METRIC_INCLUDES)))
def test_every_rule_of_the_allow_list_is_needed(flink_filter, dropped: int) -> None:
    """Dropping any one include rule loses a catalogued metric: the check above would then fail."""
    variant = METRIC_INCLUDES[:dropped] + METRIC_INCLUDES[dropped + 1 :]
    exported = {prometheus_name(s, n) for s, n in flink_filter(variant)}
    recorded = {prometheus_name(s, n) for s, n, _ in _identifiers()}
    assert exported != set(JOB_METRICS) & recorded


def test_the_old_deny_list_let_data_tracking_metrics_through(flink_filter) -> None:
    """The deny-list the job had before exports busy time, watermarks, bytes fetched and heap on the
    same names (what the review scraped): the allow-list is what closes it."""
    leaked = _forbidden(flink_filter(None, OLD_EXCLUDES))
    assert {
        "flink_taskmanager_job_task_busyTimeMsPerSecond",
        "flink_taskmanager_job_task_operator_currentInputWatermark",
        "flink_taskmanager_Status_JVM_Memory_Heap_Used",
    } <= leaked
    assert any("incoming_byte" in n for n in leaked)
