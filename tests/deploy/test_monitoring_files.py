"""The monitoring files in deploy/: Grafana dashboard and provisioning, Prometheus configuration."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml  # PyYAML, a dependency of apache-flink (via apache-beam)

from dphhh.stream.metrics_catalog import JOB_METRICS, REPORT_METRICS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "dphhh.json"
EXPORTED = set(JOB_METRICS) | set(REPORT_METRICS)
PROMQL_WORDS = {
    "rate",
    "increase",
    "sum",
    "by",
    "or",
    "vector",
    "and",
    "on",
    "without",
    "avg",
    "max",
    "min",
    "irate",
    "topk",
    "bool",
    "offset",
    "le",
}


def _metric_names(expr: str) -> tuple[set[str], list[str]]:
    """Metric names an expression uses, and the regexes of its ``__name__=~`` matchers."""
    regexes = re.findall(r'__name__=~"([^"]+)"', expr)
    stripped = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    stripped = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", stripped)  # grouping labels
    stripped = re.sub(r"\[[^\]]*\]", "", stripped)  # range selectors
    words = set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", stripped))
    return {w for w in words - PROMQL_WORDS if "_" in w}, regexes


def test_dashboard_is_structurally_valid() -> None:
    """The dashboard has a uid, a title and panels with unique ids, a grid position, the provisioned
    datasource and at least one query each."""
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and dash["schemaVersion"] >= 30
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)) >= 6
    datasource = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "datasources" / "dphhh.yml").read_text())
    uid = datasource["datasources"][0]["uid"]
    for panel in dash["panels"]:
        assert panel["type"] in ("timeseries", "table", "stat", "gauge", "bargauge"), panel["title"]
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]) and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        assert panel["datasource"]["uid"] == uid and panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == uid and target["expr"].strip()
    cells = {
        (x, y)
        for p in dash["panels"]
        for x in range(p["gridPos"]["x"], p["gridPos"]["x"] + p["gridPos"]["w"])
        for y in range(p["gridPos"]["y"], p["gridPos"]["y"] + p["gridPos"]["h"])
    }
    assert len(cells) == sum(p["gridPos"]["w"] * p["gridPos"]["h"] for p in dash["panels"])  # no overlap


def test_every_dashboard_expression_names_an_exported_metric() -> None:
    """Each metric a query uses is one the job or `dphhh run` exports (the catalogue the e2e test checks
    against a real scrape); each __name__ regex matches at least one exported metric."""
    dash = json.loads(DASHBOARD.read_text())
    used: set[str] = set()
    for panel in dash["panels"]:
        for target in panel["targets"]:
            names, regexes = _metric_names(target["expr"])
            assert names or regexes, target["expr"]
            assert names <= EXPORTED, (panel["title"], names - EXPORTED)
            for rx in regexes:
                assert any(re.fullmatch(rx, m) for m in EXPORTED), rx
            used |= names
    assert {"dphhh_report_hhh_count", "dphhh_report_epsilon", "dphhh_report_noisy_rate"} <= used


def test_the_expression_checker_can_fail() -> None:
    """A misspelt metric is caught by the name extraction the dashboard test relies on."""
    names, _ = _metric_names("rate(dphhh_reports_totl[5m]) or vector(0)")
    assert names == {"dphhh_reports_totl"} and not names <= EXPORTED


def test_provisioning_and_prometheus_configuration_parse() -> None:
    """The dashboard provider and the Prometheus configuration are valid YAML with the expected jobs."""
    provider = yaml.safe_load((DEPLOY / "grafana" / "provisioning" / "dashboards" / "dphhh.yml").read_text())
    assert provider["apiVersion"] == 1 and provider["providers"][0]["type"] == "file"
    prom = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    jobs = {c["job_name"]: c for c in prom["scrape_configs"]}
    assert set(jobs) == {"dphhh-job", "dphhh-reports"}
    assert "127.0.0.1:9260" in jobs["dphhh-reports"]["static_configs"][0]["targets"]
