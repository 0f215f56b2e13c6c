"""Report metrics: what `dphhh run` exports comes from the published reports only."""

from __future__ import annotations

from prometheus_client import generate_latest

from dphhh.stream.report_metrics import METRIC_NAMES, ReportMetrics


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


def test_share_is_the_noisy_count_over_the_noisy_window_size() -> None:
    """Each prefix's share is its noisy count over the report's noisy size (post-processing of the
    report); a noisy size below 1 counts as 1, so that every prefix series has its share series (the
    set of metric names must not depend on the noise, tests/e2e/test_side_channels.py), and shares
    follow the latest report."""
    metrics = ReportMetrics()
    metrics.observe(
        _report(
            1_000_000_000,
            8000,
            [
                {"level": 0, "prefix": "0.0.0.0/0", "count": 8000.0},
                {"level": 4, "prefix": "10.1.2.3/32", "count": 2000.0},
            ],
        )
    )
    text = generate_latest(metrics.registry).decode()
    assert 'dphhh_report_hhh_share{level="4",prefix="10.1.2.3/32"} 0.25' in text
    assert 'dphhh_report_hhh_share{level="0",prefix="0.0.0.0/0"} 1.0' in text
    metrics.observe(_report(1_000_010_000, -3, [{"level": 4, "prefix": "10.9.9.9/32", "count": 5.0}]))
    text = generate_latest(metrics.registry).decode()
    assert 'dphhh_report_hhh_count{level="4",prefix="10.9.9.9/32"} 5.0' in text
    assert 'dphhh_report_hhh_share{level="4",prefix="10.9.9.9/32"} 5.0' in text  # 5 / max(-3, 1)
    assert "10.1.2.3/32" not in text  # old shares gone


def test_a_report_readable_after_its_publication_time_counts_as_late() -> None:
    """Live (a publication delay known): a report read more than LATE_AFTER_S after release + delay
    is counted late, one read before that is not; reports due before the first one this reader saw
    (a start's backlog) are not; without a delay (a replay) nothing is late."""
    from dphhh.stream.report_metrics import LATE_AFTER_S

    def report(w: int) -> dict:
        return {
            "window": {"start_ms": w * 10_000, "end_ms": (w + 1) * 10_000, "release_ms": (w + 1) * 10_000},
            "hhh": [],
        }

    now = {"t": 0.0}
    metrics = ReportMetrics(clock=lambda: now["t"], publish_delay_ms=3000)
    now["t"] = 13.0 + LATE_AFTER_S / 2
    metrics.observe(report(0))
    assert metrics.late._value.get() == 0
    now["t"] = 23.0 + 2 * LATE_AFTER_S
    metrics.observe(report(1))
    assert metrics.late._value.get() == 1
    replay = ReportMetrics(clock=lambda: 10**9)
    replay.observe(report(0))
    assert replay.late._value.get() == 0
    started = ReportMetrics(clock=lambda: now["t"], publish_delay_ms=3000)  # reads from t = 43 s on
    now["t"] = 43.0 + 5 * LATE_AFTER_S
    for w in range(4):  # windows 0-3, due at 13, 23, 33, 43 s: the backlog (the last one due too)
        started.observe(report(w))
    assert started.late._value.get() == 0
    now["t"] = 53.0 + 2 * LATE_AFTER_S  # window 4, due at 53 s after this reader started, read late

    started.observe(report(4))
    assert started.late._value.get() == 1
