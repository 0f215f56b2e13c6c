"""The Prometheus alert rules (deploy/prometheus/alerts.yml), checked with Debian's promtool.

* ``promtool check rules`` and ``promtool check config`` (prometheus.yml loads the rules) pass;
* ``promtool test rules tests/deploy/alerts_test.yml``: each alert fires on synthetic series, and not on
  a prefix below the threshold, the root, or another scrape job; the same tests fail on rules with a
  lower threshold or without the root's exclusion, so they can fail;
* the rules read only report metrics, ``up`` and their own public thresholds (docs/ALGORITHMS.md §0.1):
  never a raw count or a Flink job metric;
* every alert has a severity, a summary and a description, and is exercised by the unit tests.

promtool comes with Debian's prometheus package (``bash deploy/install-debian.sh prometheus``,
installed here when it is missing).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml  # PyYAML, a dependency of apache-flink (via apache-beam)

from dphhh.stream.metrics_catalog import JOB_METRICS, REPORT_METRICS

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "alerts.yml"
UNIT_TESTS = Path(__file__).resolve().with_name("alerts_test.yml")
#: PromQL keywords and functions the rules use (everything else with an underscore is a metric name).
PROMQL = {"on", "ignoring", "group_left", "group_right", "unless", "and", "or", "offset", "bool", "by", "without"}
PROMQL |= {"time", "vector", "increase", "rate", "max_over_time", "last_over_time", "absent", "max", "sum"}


def _promtool() -> str:
    if shutil.which("promtool") is None:
        subprocess.run(
            ["bash", str(ROOT / "deploy" / "install-debian.sh"), "prometheus"],
            check=True,
            capture_output=True,
            timeout=600,
        )
    path = shutil.which("promtool")
    assert path, "promtool is missing after deploy/install-debian.sh prometheus"
    return path


def _promtool_run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([_promtool(), *args], capture_output=True, text=True, timeout=120)


def _rules() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def _alerts() -> dict[str, dict]:
    return {rule["alert"]: rule for rule in _rules() if "alert" in rule}


def _metric_names(expr: str) -> set[str]:
    """The series names an expression reads."""
    stripped = re.sub(r"\{[^}]*\}|\[[^\]]*\]", "", expr)  # label matchers, range selectors
    stripped = re.sub(r"\b(on|ignoring|by|without|group_left|group_right)\s*\([^)]*\)", r"\1", stripped)
    stripped = re.sub(r"\boffset\s+\w+", "", stripped)
    return set(re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", stripped)) - PROMQL


def test_rules_pass_promtool_check() -> None:
    done = _promtool_run("check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in done.stdout


def test_prometheus_configuration_loads_the_rules() -> None:
    """prometheus.yml names alerts.yml (relative to itself) and promtool checks both together."""
    config = ROOT / "deploy" / "prometheus" / "prometheus.yml"
    assert yaml.safe_load(config.read_text())["rule_files"] == ["alerts.yml"]
    done = _promtool_run("check", "config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "alerts.yml" in done.stdout and f"SUCCESS: {len(_rules())} rules found" in done.stdout


def test_each_alert_fires_on_synthetic_series_and_not_below_its_threshold() -> None:
    done = _promtool_run("test", "rules", str(UNIT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


@pytest.mark.parametrize(
    ("change", "wrong"),
    [
        (("vector(10000)", "vector(2000)"), 'prefix="10.1.2.3/32"'),  # the lighter prefix is then heavy
        (('dphhh_report_hhh_count{level!="0"} >', "dphhh_report_hhh_count >"), 'prefix="0.0.0.0/0"'),  # the root
        (("[1h] offset 10m", "[1h] offset 1m"), "DphhhNewHeavyPrefix"),  # no longer new
    ],
)
def test_the_unit_tests_fail_on_wrong_rules(tmp_path: Path, change: tuple[str, str], wrong: str) -> None:
    """The same unit tests on a copy of the rules with one change: promtool reports the wrong alert."""
    old, new = change
    assert old in RULES.read_text()
    (tmp_path / "alerts.yml").write_text(RULES.read_text().replace(old, new))
    tests = UNIT_TESTS.read_text().replace("../../deploy/prometheus/alerts.yml", "alerts.yml")
    (tmp_path / "alerts_test.yml").write_text(tests)
    done = _promtool_run("test", "rules", str(tmp_path / "alerts_test.yml"))
    said = done.stdout + done.stderr  # promtool prints the failures on stderr
    assert done.returncode != 0 and "FAILED" in said, said
    assert wrong in said


def test_rules_read_report_metrics_and_public_thresholds_only() -> None:
    """Every series a rule reads is a report metric (a counter's creation time: when dphhh run started),
    Prometheus's ``up`` or one of the recorded thresholds, each a literal; no Flink job metric."""
    rules = _rules()
    recorded = {r["record"] for r in rules if "record" in r}
    assert recorded and all(r.startswith("dphhh:alert_") for r in recorded)
    for rule in rules:
        if "record" in rule:
            assert re.fullmatch(r"vector\(\d+(\.\d+)?\)", rule["expr"]), rule  # public configuration
    report = set(REPORT_METRICS) | {
        m.removesuffix("_total") + "_created" for m in REPORT_METRICS if m.endswith("_total")
    }
    used: set[str] = set()
    for rule in (r for r in rules if "alert" in r):
        names = _metric_names(rule["expr"])
        assert names, rule["expr"]
        assert names <= report | recorded | {"up"}, (rule.get("alert") or rule.get("record"), names)
        assert not names & set(JOB_METRICS)
        used |= names
    assert {"dphhh_report_hhh_count", "dphhh_report_hhh_share", "dphhh_reports_refused_total"} <= used


def test_the_name_extraction_can_fail() -> None:
    """A raw Flink counter or a misspelt metric is caught by the extraction the test above relies on."""
    names = _metric_names("increase(flink_taskmanager_job_task_operator_numRecordsIn[5m]) > on() group_left() x:y")
    assert names == {"flink_taskmanager_job_task_operator_numRecordsIn", "x:y"}
    assert _metric_names('dphhh_report_hhh_cnt{level!="0"} unless on(job) up offset 10m') == {
        "dphhh_report_hhh_cnt",
        "up",
    }


def test_every_alert_is_described_and_unit_tested() -> None:
    """A severity, a summary and a description; prefix alerts name the prefix and say the count is
    noisy; each alert has a unit test where it fires and one where it does not."""
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    cases = [case for test in tests for case in test["alert_rule_test"]]
    assert {"DphhhPrefixHeavy", "DphhhNewHeavyPrefix", "DphhhReportsStalled", "DphhhReportRefused"} <= set(_alerts())
    for name, rule in _alerts().items():
        assert rule["labels"]["severity"] in ("info", "warning", "critical"), name
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], name
        if "dphhh_report_hhh_" in rule["expr"]:
            assert "{{ $labels.prefix }}" in rule["annotations"]["summary"], name
            assert "noisy" in rule["annotations"]["description"], name
        mine = [case for case in cases if case["alertname"] == name]
        assert any(case.get("exp_alerts") for case in mine), f"{name}: no unit test where it fires"
        assert any(not case.get("exp_alerts") for case in mine), f"{name}: no unit test where it does not"
