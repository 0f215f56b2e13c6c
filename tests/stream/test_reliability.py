"""Plain logic behind the job's failure behaviour and safe configuration: user-level and budget-guard
configuration, refused reports, the deployment fingerprint of ledger and checkpoints, parameter
warnings, waiting for the broker with backoff, job-failure summaries and torn report lines."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dphhh.privacy.budget import budget_statement
from dphhh.privacy.checks import guarantee_warnings
from dphhh.privacy.params import HHHParams, PrivacyBudget
from dphhh.privacy.unit import PrivacyUnit
from dphhh.privacy.unit_cap import UnitCap
from dphhh.stream.assembler import WindowAssembler
from dphhh.stream.config import ConfigError, load_config
from dphhh.stream.kafka_setup import wait_for_kafka
from dphhh.stream.ledger import LedgerError, ReleaseLedger
from dphhh.stream.report_metrics import ReportMetrics
from dphhh.stream.runner import JobFailed, root_cause
from dphhh.stream.schedule import ReleaseSchedule
from dphhh.stream.wire import sketch_payloads, unit_payloads, unit_shards, unpack_levels, unpack_unit_payload

DAY = 86_400_000


def _user(*extra: str):
    return load_config(
        None,
        environ={},
        overrides=["input.format=packed-ipv4-pairs", "privacy.unit_key=source-ipv4", "privacy.unit_cap=4", *extra],
    )


def test_user_level_config_calibrates_the_mechanism_by_group_privacy() -> None:
    """With a unit key and cap m the mechanism runs at (ε/m, δ/(m·e^ε)) and the stated budget stays (ε, δ)."""
    cfg = _user("privacy.epsilon=2", "privacy.delta=1e-7")
    assert cfg.unit == PrivacyUnit("user", "source address", 4)
    assert cfg.budget == PrivacyBudget(2.0, 1e-7)
    assert math.isclose(cfg.params.epsilon, 0.5) and math.isclose(cfg.params.delta, 1e-7 / (4 * math.e**2))
    event = load_config(None, environ={})
    assert event.unit.kind == "event" and event.params.epsilon == 1.0 and event.guard is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["privacy.unit_key=source-ipv4"], r"needs input.format 'packed-ipv4-pairs' .* or 'flow-json'"),
        (["input.format=text-ipv4", "privacy.unit_key=source-ipv4"], "got 'text-ipv4'"),
        (["input.format=json", "privacy.unit_key=source-ipv4"], "got 'json'"),
        (["input.format=flow-json", "privacy.unit_key=json:user"], "flow records support user level per source host"),
        (["privacy.unit_key=json:user"], "needs input.format 'json'"),
        (["privacy.unit_key=src"], "must be empty, 'source-ipv4' or 'json:FIELD'"),
        (["privacy.unit_cap=3"], "needs a privacy.unit_key"),
        (["input.format=packed-ipv4-pairs", "privacy.unit_key=source-ipv4", "privacy.unit_cap=0"], "unit_cap must be"),
        (["privacy.epsilon=0"], "privacy.epsilon must be"),
        (["privacy.epsilon=-1"], "privacy.epsilon must be"),
        (["privacy.delta=1"], "privacy.delta must be"),
        (["privacy.delta=0"], "privacy.delta must be"),
        (["privacy.counters=0"], "privacy.counters must be"),
        (["privacy.calibration=loose"], "privacy.calibration must be one of tight, paper"),
        (["privacy.budget_epsilon=0.5"], "below one window's epsilon"),
        (["privacy.budget_epsilon=5", "privacy.budget_delta=1e-9"], "below one window's delta"),
        (["privacy.budget_epsilon=5", "privacy.budget_period=week"], "budget_period must be"),
        (["input.format=packed-ipv4-pairs", "hierarchy.spec=path:3"], "needs"),
        (["flink.resume=sometimes"], "flink.resume must be"),
        (["kafka.wait_s=-1"], "kafka.wait_s must be"),
    ],
)
def test_parameters_that_void_the_guarantee_are_refused(overrides: list[str], message: str) -> None:
    """Each invalid or guarantee-voiding setting stops at load with a message naming the key."""
    with pytest.raises(ConfigError, match=message):
        load_config(None, environ={}, overrides=overrides)


def _flow_user(*extra: str):
    return load_config(
        None,
        environ={},
        overrides=[
            "input.format=flow-json",
            "privacy.unit_key=source-ipv4",
            "privacy.unit_cap=4",
            "privacy.epsilon=2",
            "privacy.delta=1e-7",
            *extra,
        ],
    )


@pytest.mark.parametrize("key", ["src", "dst"])
def test_flow_records_at_user_level_calibrate_over_the_cap(key: str) -> None:
    """Flow records per source host (1-D over src or dst): m = 4 records per unit, unweighted, so
    the mechanism runs at (ε/4, δ·e^(−ε)/4) and the stated budget is (ε, δ) per source host."""
    cfg = _flow_user(f"input.flow_key={key}")
    assert cfg.unit == PrivacyUnit("user", "source address", 4) and cfg.unit.group_size == 4
    assert cfg.budget == PrivacyBudget(2.0, 1e-7) and cfg.values["input"]["flow_key"] == key
    assert math.isclose(cfg.params.epsilon, 0.5) and math.isclose(cfg.params.delta, 1e-7 * math.exp(-2) / 4)


@pytest.mark.parametrize("spec", ["ipv4:8,16,24,32", "ipv4:8,16,24,32 x ipv4:8,16,24,32"])
def test_weighted_flow_records_at_user_level_calibrate_over_m_times_w(spec: str) -> None:
    """User level with records weighted by bytes clipped at W = 1500 (1-D and pairs): one source host
    is at most m·W = 6000 unit elements, so ε' = ε/6000, δ' = δ·e^(−ε)/6000, and the guarantee and
    the ledger's budget statement say "capped at 4 records ..., each record weighted by bytes clipped at 1500"."""
    cfg = _flow_user(f"hierarchy.spec={spec}", "input.flow_weight=bytes", "input.weight_cap=1500")
    assert cfg.unit == PrivacyUnit("user", "source address", 4, weight_cap=1500, weight="bytes")
    assert cfg.unit.group_size == 4 * 1500
    assert cfg.params.epsilon * 6000 <= 2.0 and math.isclose(cfg.params.epsilon, 2.0 / 6000)
    # (less the δ of hashed keys — the pair hierarchy's host-pair node — taken first: docs/calibration.md §8)
    assert math.isclose(cfg.params.delta, (1e-7 - cfg.key_delta) * math.exp(-2) / 6000)
    assert cfg.key_delta == (4 * 1024 * 2.0**-63 if cfg.hierarchy.hashed_levels else 0.0)
    assert cfg.unit.user_cost(PrivacyBudget(cfg.params.epsilon, cfg.params.delta)).epsilon <= 2.0
    entry = budget_statement(
        cfg.params, h=cfg.hierarchy.h, unit=cfg.unit, budget=cfg.budget, key_collision_delta=cfg.key_delta
    )
    assert entry["unit"] == "user" and entry["unit_cap"] == 4 and entry["weight_cap"] == 1500
    assert entry["guarantee"] == (
        "(2, 1e-07)-DP with respect to adding or removing all records of one privacy unit (source address), "
        "each unit capped at 4 records per window, each record weighted by bytes clipped at 1500"
    )
    assert entry["event_level"]["calibration"] == (
        "group privacy over 6000 unit elements (4 records per unit, weight <= 1500 bytes per record)"
    )


def test_warnings_for_weak_but_valid_parameters() -> None:
    """δ not far below 1/n, τ below the release threshold and seeded noise are warned about; defaults are quiet."""
    assert load_config(None, environ={}).warnings() == []
    cfg = load_config(
        None,
        environ={},
        overrides=["privacy.delta=1e-4", "privacy.expected_window_size=1000", "privacy.tau=50", "privacy.seed=3"],
    )
    text = " ".join(cfg.warnings())
    assert "not far below 1/n" in text and "below the release threshold" in text and "NOT private" in text
    assert guarantee_warnings(HHHParams(epsilon=1, delta=1e-9, tau=10_000), h=4, expected_n=10**6) == []
    assert any("1/n" in w for w in guarantee_warnings(HHHParams(epsilon=1, delta=1e-5, tau=10_000), h=4))
    assert "budget guard" in " ".join(_user().warnings())


def test_ledger_never_claims_a_user_level_guarantee_without_its_calibration() -> None:
    """budget_statement states (ε, δ) per unit only when the mechanism's parameters are its group-privacy calibration."""
    unit, budget = PrivacyUnit("user", "source address", 4), PrivacyBudget(1.0, 1e-6)
    event = unit.event_budget(budget)
    calibrated = HHHParams(epsilon=event.epsilon, delta=event.delta, tau=1000)
    entry = budget_statement(calibrated, h=4, unit=unit, budget=budget)
    assert entry["unit"] == "user" and entry["epsilon"] == 1.0 and "one privacy unit" in entry["guarantee"]
    assert math.isclose(entry["event_level"]["epsilon"], 0.25)
    with pytest.raises(ValueError, match="not at the group-privacy calibration"):
        budget_statement(HHHParams(epsilon=1.0, delta=1e-6, tau=1000), h=4, unit=unit, budget=budget)


def _assembler(tmp_path: Path, cfg, name: str = "ledger", origin: int = 0) -> WindowAssembler:
    return WindowAssembler(
        cfg.hierarchy,
        cfg.params,
        ReleaseSchedule(cfg["window.size_ms"], origin),
        ReleaseLedger(tmp_path / name),
        seed=5,
        unit=cfg.unit,
        budget=cfg.budget,
        guard=cfg.guard,
    )


def test_budget_guard_refuses_windows_past_the_daily_budget(tmp_path: Path) -> None:
    """With ε = 1 per window and 3 per day, a day's first three windows are released and the rest refused
    (nothing data-derived in them, stored and republished identically); the next day starts afresh."""
    cfg = _user("privacy.epsilon=1", "privacy.budget_epsilon=3", "window.size_ms=60000")
    asm = _assembler(tmp_path, cfg)
    day = 20_000 * DAY
    reports = []
    for i in range(5):  # computed and stored, as the publisher stores them
        reports.append(json.loads(asm.ledger.put(day + i * 60_000, asm.report(day + i * 60_000, [])[0])))
    assert ["refused" in r for r in reports] == [False, False, False, True, True]
    assert [r["budget"]["spending"]["spent"]["epsilon"] for r in reports[:3]] == [1.0, 2.0, 3.0]
    refused = reports[3]
    assert refused["hhh"] == [] and "n_noisy" not in refused["window"] and refused["budget"]["epsilon"] == 0.0
    assert "exhausted" in refused["refused"]
    again, replayed = asm.report(day + 3 * 60_000, [])
    assert replayed and json.loads(again) == refused
    assert "refused" not in json.loads(asm.report(day + DAY, [])[0])  # a new UTC day


def test_budget_guard_per_deployment_counts_from_the_schedule_start(tmp_path: Path) -> None:
    """Per deployment, windows are counted from the schedule's origin, across days."""
    cfg = _user(
        "privacy.epsilon=1", "privacy.budget_epsilon=2", "privacy.budget_period=deployment", "window.size_ms=60000"
    )
    start = 20_000 * DAY - 60_000  # the last minute of a day
    asm = _assembler(tmp_path, cfg, origin=start)
    flags = ["refused" in json.loads(asm.report(start + i * 60_000, [])[0]) for i in range(3)]
    assert flags == [False, False, True]


def test_seeded_reports_say_they_are_not_private(tmp_path: Path) -> None:
    """A report made with seeded noise states no privacy guarantee of its own."""
    cfg = load_config(None, environ={})
    report = json.loads(_assembler(tmp_path, cfg).report(0, [])[0])
    assert report["guarantees"]["privacy"].startswith("none: seeded noise (NOT private)")


def test_unit_payloads_keep_each_unit_in_one_shard_in_order() -> None:
    """Values travel with their unit keys to the unit's shard, in input order; shards cover every unit once."""
    rng = np.random.default_rng(1)
    units = rng.integers(0, 50, 2000).astype(np.uint64)
    values = rng.integers(0, 2**32, 2000, dtype=np.uint64).astype(np.uint32)
    shards = unit_shards(units, 3)
    got = {s: unpack_unit_payload(p) for s, p in unit_payloads(values, units, 3)}
    for s, (u, v, w) in got.items():
        assert w is None  # unweighted values carry no weights
        chosen = shards == s
        assert u.tolist() == units[chosen].tolist() and v.tolist() == values[chosen].tolist()
    assert sum(len(u) for u, _, _ in got.values()) == 2000
    assert all(len(set(shards[units == u].tolist())) == 1 for u in np.unique(units))


def test_capped_values_reach_the_sketch_partitions_intact() -> None:
    """After the cap, sketch_payloads give every level's keys of the kept values (any partition count)."""
    cfg = _user("privacy.partitions=3")
    rng = np.random.default_rng(2)
    units = rng.integers(0, 20, 500).astype(np.uint64)
    values = rng.integers(0, 2**32, 500, dtype=np.uint64).astype(np.uint32)
    cap = UnitCap(4)
    kept = values[cap.keep(units)]
    assert kept.size == sum(min(4, int((units == u).sum())) for u in np.unique(units))
    for level in range(1, cfg.hierarchy.h + 1):
        parts = [unpack_levels(payload, cfg.hierarchy)[level - 1] for _, payload, _ in sketch_payloads(kept, cfg)]
        assert sorted(np.concatenate(parts).tolist()) == sorted(cfg.hierarchy.keys(kept, level).tolist())


def test_ledger_belongs_to_one_deployment(tmp_path: Path) -> None:
    """A ledger written under one configuration is refused for another (it would republish its reports)."""
    a = load_config(None, environ={})
    b = load_config(None, environ={}, overrides=["privacy.tau=500"])
    assert a.deployment_fingerprint() != b.deployment_fingerprint()
    for same in ("flink.checkpoint_interval_ms=900", "privacy.expected_window_size=5000", "output.metrics_port=0"):
        assert a.deployment_fingerprint() == load_config(None, environ={}, overrides=[same]).deployment_fingerprint()
    ledger = ReleaseLedger(tmp_path / "ledger")
    ledger.claim(a.deployment_fingerprint())
    ledger.claim(a.deployment_fingerprint())
    with pytest.raises(LedgerError, match="belongs to another deployment"):
        ledger.claim(b.deployment_fingerprint())
    assert a.checkpoint_path().name == a.deployment_fingerprint()


def test_waiting_for_the_broker_backs_off_and_reports_its_state(capsys) -> None:
    """While the broker does not answer, dphhh retries after 1, 2, 4 … s (capped at 30), logs each attempt
    and exports broker_up = 0 and the retry count; then broker_up = 1."""
    cfg = load_config(None, environ={})
    metrics = ReportMetrics()
    answers = iter([False] * 7 + [True])
    sleeps: list[float] = []

    def probe(options, timeout_s):
        if not next(answers):
            assert metrics.registry.get_sample_value("dphhh_kafka_broker_up") in (None, 0.0)
            raise TimeoutError("kafka: broker not reachable")

    wait_for_kafka(cfg, metrics, sleep=sleeps.append, probe=probe)
    assert sleeps == [1, 2, 4, 8, 16, 30, 30]
    assert metrics.registry.get_sample_value("dphhh_kafka_connect_retries_total") == 7
    assert metrics.registry.get_sample_value("dphhh_kafka_broker_up") == 1
    err = capsys.readouterr().err
    assert "not reachable (attempt 7); retrying in 30 s" in err and "reachable after 8 attempts" in err


def test_waiting_for_the_broker_is_bounded_by_wait_s() -> None:
    """kafka.wait_s bounds the wait: a TimeoutError names the broker and the limit."""
    cfg = load_config(None, environ={}, overrides=["kafka.wait_s=5"])

    def probe(options, timeout_s):
        raise TimeoutError("down")

    with pytest.raises(TimeoutError, match=r"kafka.wait_s = 5"):
        wait_for_kafka(cfg, None, sleep=lambda s: None, probe=probe)


def test_root_cause_finds_the_innermost_error() -> None:
    """A job failure is summarised by its innermost error line (Python or Java), not a trace."""
    java = (
        "org.apache.flink.runtime.client.JobExecutionException: Job execution failed.\n"
        "\tat org.apache...\nCaused by: org.apache.flink.runtime.JobException: Recovery is suppressed\n"
        "Caused by: java.io.IOException: No space left on device\n\tat x.y"
    )
    assert root_cause(RuntimeError(java)) == "java.io.IOException: No space left on device"
    py = 'Traceback...\n  File "x", line 1\ndphhh.stream.ledger.LedgerError: ReleaseLedger: cannot write window 5: Disk quota\n'
    assert root_cause(RuntimeError(py)).startswith("dphhh.stream.ledger.LedgerError: ReleaseLedger: cannot write")
    assert issubclass(JobFailed, RuntimeError)


def test_report_file_cuts_a_partial_line_when_the_disk_fills(tmp_path: Path) -> None:
    """A write that fails part-way (file size limit, as on a full disk) leaves the earlier lines intact and
    no partial line behind, and raises a clear error naming the file."""
    path = tmp_path / "reports.jsonl"
    script = f"""
import resource, signal
from dphhh.connectors.report_sink import JsonLinesReportFile, ReportSinkError
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
f = JsonLinesReportFile({str(path)!r})
f.write(b'{{"window": {{"start_ms": 1}}, "pad": "' + b"a" * 100 + b'"}}')
resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))
try:
    f.write(b'{{"window": {{"start_ms": 2}}, "pad": "' + b"b" * 300 + b'"}}')
except ReportSinkError as exc:
    print("ERR", exc)
"""
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=Path(__file__).parents[2], timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert f"ERR report file {path}: cannot write" in out.stdout
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 2 and json.loads(lines[0])["window"]["start_ms"] == 1
    assert os.path.getsize(path) < 200


def test_a_release_for_levels_or_partitions_the_hierarchy_does_not_have_is_refused() -> None:
    """h must match the hierarchy: a sketch release for level 0, level > h or a partition >= P is refused,
    and a window's report needs exactly one release per (level, partition) of its hierarchy."""
    from dphhh.privacy.window import assemble_report, release_sketch
    from dphhh.sketches.specs import parse_hierarchy

    params = HHHParams(epsilon=1.0, delta=1e-6, tau=100, partitions=2)
    for level, h, part in ((0, 4, 0), (5, 4, 0), (1, 0, 0), (1, 4, 2)):
        with pytest.raises(ValueError, match="release_sketch"):
            release_sketch(level, part, {}, 0, params=params, h=h, rng=1)
    releases = [release_sketch(level, p, {}, 0, params=params, h=3, rng=1) for level in (1, 2, 3) for p in (0, 1)]
    with pytest.raises(ValueError, match="expected one release per"):
        assemble_report(releases, parse_hierarchy("ipv4:8,16,24,32"), params)


def test_an_epsilon_that_protects_almost_nothing_is_warned_about() -> None:
    """Above ε = 10 the guarantee bounds almost nothing and the counts are nearly exact (issue 27)."""
    quiet = guarantee_warnings(HHHParams(epsilon=10, delta=1e-9, tau=10_000), h=4, expected_n=10**6)
    loud = guarantee_warnings(HHHParams(epsilon=10.5, delta=1e-9, tau=10_000), h=4, expected_n=10**6)
    assert quiet == [] and len(loud) == 1 and "nearly exact" in loud[0]
