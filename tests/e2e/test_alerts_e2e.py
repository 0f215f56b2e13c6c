"""End-to-end: the shipped alert rules fire in a real Prometheus on a real job's report metrics.

A live ``dphhh run`` (2 s windows) reads a stream with a planted heavy address and a lighter one, both
reported in every window; Debian's Prometheus scrapes its report metrics with the shipped
``deploy/prometheus/prometheus.yml`` and ``alerts.yml``. The only changes of the test copies: 1 s scrape
and evaluation intervals, this test's ports, and the count threshold ``dphhh:alert_heavy_count``
lowered from 10,000 to 2,500 (a window here has about 7,200 elements; the share threshold, 20 %, is
the shipped one). Prometheus's alerts API must then show DphhhPrefixHeavy and DphhhPrefixHeavyShare
firing for the heavy address, no alert for the lighter one (reported, below both thresholds) or for
the root, and no other dphhh alert.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

from dphhh.connectors.kafka_io import pack_ipv4
from tests.e2e.jobs import JOB, interrupt, live_origin, publish, reports, sleep_until, wait_for, write_config
from tests.e2e.net import free_port
from tests.e2e.prom import (
    install_prometheus,
    prometheus_alerts,
    prometheus_query,
    prometheus_rules,
    start_prometheus,
)

# timing and live windows on the wall clock: ./dphhh test runs the serial tests after the others, one
# at a time, beside only the `own_broker` test (tests/e2e/test_faults.py)
pytestmark = pytest.mark.serial

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
SIZE = 2000
HEAVY, LIGHT = 0xC612074D, 0x0A010203  # 198.18.7.77 and 10.1.2.3
HEAVY_PREFIX, LIGHT_PREFIX = "198.18.7.77/32", "10.1.2.3/32"
THRESHOLD = 2500  # the test copy's dphhh:alert_heavy_count
BATCH = pack_ipv4(np.array([HEAVY] * 750 + [LIGHT] * 150, dtype=np.uint32))  # every 250 ms: 6,000 + 1,200 a window


def _prometheus_files(tmp_path: Path, report_port: int, job_port: int) -> Path:
    """The shipped configuration and rules, as the module docstring says; returns the configuration."""
    rules = (PROMETHEUS / "alerts.yml").read_text()
    shipped = "- record: dphhh:alert_heavy_count\n        expr: vector(10000)"
    assert shipped in rules
    (tmp_path / "alerts.yml").write_text(rules.replace(shipped, shipped.replace("10000", str(THRESHOLD))))
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    assert config["rule_files"] == ["alerts.yml"]  # relative to the configuration: the copy beside it
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    ports = {"dphhh-reports": report_port, "dphhh-job": job_port}
    for scrape in config["scrape_configs"]:
        scrape["static_configs"] = [{"targets": [f"127.0.0.1:{ports[scrape['job_name']]}"]}]
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


def _feed(producer, origin: int, stop: threading.Event) -> None:
    sleep_until(origin)
    while not stop.is_set():
        producer.send_value(BATCH)
        producer.flush()
        stop.wait(0.25)


def test_heavy_prefix_alert_fires_in_prometheus_for_the_planted_prefix_only(broker, tmp_path: Path) -> None:
    """DphhhPrefixHeavy and DphhhPrefixHeavyShare fire for the planted address, nothing for the lighter one,
    the root or the report stream; the rules evaluate without error; the reports agree."""
    install_prometheus()
    origin = live_origin(SIZE, 2)
    job_port, report_port, prom_port = free_port(), free_port(), free_port()
    config = write_config(
        tmp_path,
        "alerts",
        window={"size_ms": SIZE, "origin": origin},
        privacy={"epsilon": 4.0, "tau": 500.0, "counters": 64, "seed": 5},
        flink={"checkpoint_interval_ms": 1000, "prometheus_port": str(job_port)},
        output={"metrics_port": report_port},
    )
    cfg, producer = publish(config, [])
    prometheus = start_prometheus(_prometheus_files(tmp_path, report_port, job_port), tmp_path / "tsdb", prom_port)
    job = subprocess.Popen(
        [*JOB, str(config)],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    stop = threading.Event()
    feeder = threading.Thread(target=_feed, args=(producer, origin, stop), daemon=True)
    feeder.start()
    seen: dict[str, list] = {}
    try:

        def heavy_alerts_fire() -> bool:
            alerts = prometheus_alerts(prom_port) or []
            firing = {(a["labels"]["alertname"], a["labels"].get("prefix")) for a in alerts if a["state"] == "firing"}
            # the lighter prefix has been in the metrics for 4+ scrapes, so rules have seen it several times
            light = prometheus_query(
                prom_port, f'count_over_time(dphhh_report_hhh_count{{prefix="{LIGHT_PREFIX}"}}[5s])'
            )
            seen["alerts"] = alerts
            return (
                {("DphhhPrefixHeavy", HEAVY_PREFIX), ("DphhhPrefixHeavyShare", HEAVY_PREFIX)} <= firing
                and bool(light)
                and float(light[0]["value"][1]) >= 4
            )

        wait_for(heavy_alerts_fire, 90, "DphhhPrefixHeavy and DphhhPrefixHeavyShare firing for the planted prefix")
        alerts = seen["alerts"]
        heavy = [a for a in alerts if a["labels"]["alertname"] == "DphhhPrefixHeavy"]
        assert [(a["labels"]["prefix"], a["labels"]["level"]) for a in heavy] == [(HEAVY_PREFIX, "4")], heavy
        assert HEAVY_PREFIX in heavy[0]["annotations"]["summary"] and "noisy" in heavy[0]["annotations"]["description"]
        assert heavy[0]["labels"]["severity"] == "warning" and heavy[0]["labels"]["job"] == "dphhh-reports"
        assert float(heavy[0]["value"]) > THRESHOLD
        share = [a["labels"]["prefix"] for a in alerts if a["labels"]["alertname"] == "DphhhPrefixHeavyShare"]
        assert share == [HEAVY_PREFIX], share
        # nothing else: not the lighter prefix, not the root, no stall, refusal or "new" prefix (no history)
        others = [
            a["labels"] for a in alerts if a["labels"]["alertname"] not in ("DphhhPrefixHeavy", "DphhhPrefixHeavyShare")
        ]
        assert not others, others
        assert not [a for a in alerts if a["labels"].get("prefix") == LIGHT_PREFIX or a["labels"].get("level") == "0"]
        rules = prometheus_rules(prom_port) or []
        shipped = [r for g in yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())["groups"] for r in g["rules"]]
        assert len(rules) == len(shipped) and all(r["health"] == "ok" for r in rules), [
            (r["name"], r.get("lastError")) for r in rules
        ]
        # DphhhReportsStalled's age of the latest report (before a first one: since dphhh run started, the
        # reports counter's _created series): both series reach Prometheus, and the reports are recent
        stalled = next(r for r in rules if r["name"] == "DphhhReportsStalled")["query"]
        age = prometheus_query(prom_port, re.split(r" > on ?\(", stalled)[0])  # Prometheus writes "on ()"
        assert prometheus_query(prom_port, "dphhh_reports_created") and age, stalled
        assert 0 <= float(age[0]["value"][1]) < 30, age

        # what Prometheus saw is what the reports publish: the heavy /32 above the threshold, the lighter below
        published = [json.loads(r) for r in reports(cfg)]
        counts = {(i["prefix"], i["level"]): i["count"] for i in published[-1]["hhh"]}
        assert counts[(HEAVY_PREFIX, 4)] > THRESHOLD > counts[(LIGHT_PREFIX, 4)] > 0, counts
        assert counts[(LIGHT_PREFIX, 4)] / published[-1]["window"]["n_noisy"] < 0.2, counts
    finally:
        stop.set()
        feeder.join(timeout=10)
        producer.close()
        prometheus.terminate()
        prometheus.wait(timeout=30)
        interrupt(job)
