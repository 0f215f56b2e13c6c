"""Report metrics: what `dphhh run` exports comes from the published reports only."""

from __future__ import annotations

from prometheus_client import generate_latest

from stream.report_metrics import METRIC_NAMES, ReportMetrics


def _report(end_ms: int, n_noisy: int, hhh: list[dict]) -> dict:
    return {
        "window": {"start_ms": end_ms - 10_000, "end_ms": end_ms, "n_noisy": n_noisy},
        "budget": {"epsilon": 2.0, "delta": 1e-6},
        "hhh": hhh,
    }


def test_metrics_follow_the_latest_report_and_replace_its_prefixes() -> None:
    """Gauges show the latest report, counters add up, and prefixes of an older report disappear."""
    metrics = ReportMetrics(clock=lambda: 1_000_012.5)
    metrics.observe(_report(1_000_000_000, 8123, [{"level": 1, "prefix": "10.0.0.0/8", "count": 512.0}]))
    metrics.observe(_report(1_000_010_000, 7001, [{"level": 2, "prefix": "10.1.0.0/16", "count": 300.0}]))
    metrics.observe(_report(1_000_010_000 + 10_000, 5, []))
    text = generate_latest(metrics.registry).decode()
    assert "dphhh_reports_total 3.0" in text and "dphhh_windows_empty_total 1.0" in text
    assert "dphhh_report_noisy_window_size 5.0" in text and "dphhh_report_noisy_rate 0.5" in text
    assert "dphhh_epsilon_spent_total 6.0" in text and "dphhh_report_delta 1e-06" in text
    assert "dphhh_report_latency_seconds 0.0" in text  # window end 1,000,020 s is after the clock's 1,000,012.5 s
    assert "10.0.0.0/8" not in text and "10.1.0.0/16" not in text  # the latest report has no prefix
    metrics.observe(_report(1_000_000_000, 9, [{"level": 2, "prefix": "10.1.0.0/16", "count": 300.0}]))
    text = generate_latest(metrics.registry).decode()
    assert 'dphhh_report_hhh_count{level="2",prefix="10.1.0.0/16"} 300.0' in text
    assert "dphhh_report_latency_seconds 12.5" in text
    for name in METRIC_NAMES:
        assert name in text, name
