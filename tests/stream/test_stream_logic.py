"""Plain-Python logic of the stream job: windows, ledger, report file, assembler, configuration."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from dphhh.connectors.report_sink import JsonLinesReportFile, ReportSinkError
from dphhh.privacy.params import HHHParams
from dphhh.privacy.window import release_sketch
from dphhh.sketches.hierarchy import IPv4Hierarchy
from dphhh.sketches.misra_gries import MisraGries
from dphhh.sketches.specs import parse_hierarchy
from dphhh.stream.assembler import WindowAssembler, encode_report, sketch_id, sketch_of_id
from dphhh.stream.config import ConfigError, load_config
from dphhh.stream.ledger import LedgerError, ReleaseLedger
from dphhh.stream.schedule import ReleaseSchedule


def test_ledger_stores_once_and_returns_the_first(tmp_path: Path) -> None:
    """The ledger keeps the first report of a window and returns it on every later put."""
    ledger = ReleaseLedger(tmp_path / "ledger")
    assert ledger.get(5) is None
    assert ledger.put(5, b"first") == b"first"
    assert ledger.put(5, b"second") == b"first"
    assert ledger.get(5) == b"first" and ledger.windows() == [5]
    assert not list((tmp_path / "ledger").glob("*.tmp"))


def test_ledger_unwritable_is_a_clear_error(tmp_path: Path) -> None:
    """An unwritable ledger directory raises LedgerError naming the window."""
    ledger = ReleaseLedger(tmp_path / "ro")
    os.chmod(tmp_path / "ro", 0o500)
    try:
        if os.access(tmp_path / "ro", os.W_OK):  # root ignores permission bits: use a file as the dir
            ledger = ReleaseLedger.__new__(ReleaseLedger)
            (tmp_path / "file").write_text("x")
            ledger.directory = tmp_path / "file"
        with pytest.raises(LedgerError, match="window 7"):
            ledger.put(7, b"r")
    finally:
        os.chmod(tmp_path / "ro", 0o700)


def _report(start: int) -> bytes:
    return encode_report({"window": {"start_ms": start}, "hhh": []})


def test_report_file_writes_each_window_once(tmp_path: Path) -> None:
    """A republished window is not appended again, also after reopening; a torn tail is cut."""
    path = tmp_path / "r.jsonl"
    sink = JsonLinesReportFile(path)
    assert sink.write(_report(1)) and not sink.write(_report(1))
    with open(path, "ab") as fh:
        fh.write(b'{"window": {"sta')  # a crash mid-line
    sink = JsonLinesReportFile(path)
    assert not sink.write(_report(1)) and sink.write(_report(2))
    lines = path.read_bytes().splitlines()
    assert [json.loads(x)["window"]["start_ms"] for x in lines] == [1, 2]


def test_report_file_unwritable(tmp_path: Path) -> None:
    """A report path that cannot be written raises ReportSinkError, not a corrupt file."""
    (tmp_path / "dir").mkdir()
    with pytest.raises(ReportSinkError, match="cannot"):
        JsonLinesReportFile(tmp_path / "dir").write(_report(1))


def test_sketch_ids_round_trip() -> None:
    """Sketch ids are dense and invertible."""
    ids = [sketch_id(level, p, 3) for level in (1, 2, 3, 4) for p in range(3)]
    assert ids == list(range(12))
    assert [sketch_of_id(i, 3) for i in ids] == [(level, p) for level in (1, 2, 3, 4) for p in range(3)]


def test_assembler_fills_empty_sketches_and_replays_from_the_ledger(tmp_path: Path) -> None:
    """An empty window still gets a report; the assembler stores nothing itself (the publisher stores
    at the publication time); once stored, a second call returns the ledger's bytes unchanged."""
    h = IPv4Hierarchy()
    params = HHHParams(epsilon=1, delta=1e-6, tau=100, counters=16, partitions=2)
    ledger = ReleaseLedger(tmp_path / "l")
    asm = WindowAssembler(h, params, ReleaseSchedule(1000, 0), ledger)
    first, stored = asm.report(3000, [])
    assert not stored and ledger.windows() == []
    report = json.loads(first)
    assert report["window"]["start_ms"] == 3000 and report["schema"] == "dphhh.report/2"
    assert "secure" == report["guarantees"]["randomness"]
    assert asm.report(3000, [])[0] != first  # not stored: a second computation draws fresh noise
    assert ledger.put(3000, first) == first
    again, stored = asm.report(3000, [])
    assert stored and again == first


def test_assembler_with_seed_is_deterministic(tmp_path: Path) -> None:
    """With a test seed, two assemblers produce the same report for the same releases."""
    h = IPv4Hierarchy([8, 16])
    params = HHHParams(epsilon=1, delta=1e-6, tau=50, counters=8)
    mg = MisraGries(8)
    mg.update(np.full(500, 0x0A000000, dtype=np.int64))
    outs = []
    for d in ("a", "b"):
        asm = WindowAssembler(h, params, ReleaseSchedule(1000, 0), ReleaseLedger(tmp_path / d), seed=4)
        rel = release_sketch(1, 0, mg.counters(), mg.total, params=params, h=2, rng=asm.noise_for(0, 1, 0))
        outs.append(asm.report(0, [rel])[0])
    assert outs[0] == outs[1] and "NOT private" in json.loads(outs[0])["guarantees"]["randomness"]


def test_config_layers_and_errors(tmp_path: Path) -> None:
    """File, environment and --set override the defaults in that order; bad values name their key."""
    path = tmp_path / "c.toml"
    path.write_text("[privacy]\nepsilon = 2.0\ncounters = 64\n[window]\nsize_ms = 500\n")
    cfg = load_config(path, environ={"DPHHH_PRIVACY_EPSILON": "3"}, overrides=["window.size_ms=700"])
    assert cfg["privacy.epsilon"] == 3.0 and cfg.params.counters == 64 and cfg["window.size_ms"] == 700
    for bad, word in [
        ("[privacy]\nepsilon = -1\n", "privacy.epsilon"),
        ("[privacy]\nepsilonn = 1\n", "privacy.epsilonn"),
        ('[window]\nsize_ms = "x"\n', "window.size_ms"),
        ('[input]\nformat = "csv"\n', "input.format"),
        ('[hierarchy]\nspec = "ipv4:16,8"\n', "hierarchy.spec"),
        ('[kafka]\nstart = "middle"\n', "kafka.start"),
        ("[flink]\nbatch_max_messages = 0\n", "flink.batch_max_messages"),
        ("[flink]\nbatch_max_delay_ms = -5\n", "flink.batch_max_delay_ms"),
        ("not toml", "not valid TOML"),
    ]:
        path.write_text(bad)
        with pytest.raises(ConfigError, match=word.replace(".", r"\.")):
            load_config(path, environ={})
    with pytest.raises(ConfigError, match="flink.parallelism"):
        load_config(None, environ={"DPHHH_FLINK_PARALLELISM": "two"})


def test_config_hides_pass_through_secrets() -> None:
    """Pass-through Kafka options reach the clients but are masked in the printable view."""
    cfg = load_config(None, environ={"DPHHH_KAFKA_EXTRA": "sasl.password=hunter2,sasl.mechanism=PLAIN"})
    assert cfg.kafka_client_options()["sasl.password"] == "hunter2"
    assert "hunter2" not in json.dumps(cfg.public_dict())


def test_schedule_start_is_written_once(tmp_path: Path) -> None:
    """The deployment's first window is stored on first use and returned unchanged afterwards."""
    ledger = ReleaseLedger(tmp_path / "l")
    assert ledger.schedule_start(20_000) == 20_000
    assert ledger.schedule_start(50_000) == 20_000
    assert ReleaseLedger(tmp_path / "l").schedule_start(0) == 20_000


def test_documented_configuration_matches_the_defaults() -> None:
    """deploy/dphhh.toml lists every key with its built-in default (the reference stays true)."""
    from dphhh.stream.config import DEFAULTS

    root = Path(__file__).resolve().parents[2]
    assert load_config(root / "deploy" / "dphhh.toml", environ={}).values == DEFAULTS


def test_level_payloads_and_sketch_state_round_trip() -> None:
    """A partition's per-level keys and its h sketches survive packing and unpacking unchanged."""
    from dphhh.stream.wire import pack_levels, pack_sketches, unpack_levels, unpack_sketches

    arrays = [np.arange(3, dtype=np.int64), np.empty(0, np.int64), np.array([7, 7, 9], np.int64)]
    back = unpack_levels(pack_levels(arrays), parse_hierarchy("path:3"))
    assert [a.tolist() for a in back] == [a.tolist() for a in arrays]
    sketches = [MisraGries(4) for _ in range(3)]
    for sk, keys in zip(sketches, arrays):
        sk.update(keys)
    assert unpack_sketches(pack_sketches(sketches)) == sketches


def test_kafka_secrets_come_from_env_or_file_and_never_show(tmp_path: Path, monkeypatch) -> None:
    """Pass-through Kafka options may name an environment variable or a file; every client gets the
    resolved value, the public view masks them, and a missing secret is an error naming the key only."""
    from dphhh.stream.cli import build_parser
    from dphhh.stream.cli.options import kafka_options

    secret = tmp_path / "jaas"
    secret.write_text(
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="s3cr3t";\n'
    )
    monkeypatch.setenv("TEST_KAFKA_PASSWORD", "hunter2")
    path = tmp_path / "c.toml"
    path.write_text(
        '[kafka]\nbootstrap = "broker-a:9093"\nsecurity_protocol = "SASL_SSL"\n'
        f'[kafka.extra]\n"sasl.mechanism" = "PLAIN"\n"sasl.jaas.config" = "file:{secret}"\n'
        '"ssl.keystore.password" = "env:TEST_KAFKA_PASSWORD"\n'
    )
    cfg = load_config(path, environ={})
    opts = cfg.kafka_client_options()
    assert opts["sasl.jaas.config"].endswith('password="s3cr3t";') and opts["ssl.keystore.password"] == "hunter2"
    assert opts["security.protocol"] == "SASL_SSL" and opts["sasl.mechanism"] == "PLAIN"
    assert "s3cr3t" not in json.dumps(cfg.public_dict()) and "hunter2" not in json.dumps(cfg.public_dict())
    for command in (["reports"], ["produce", "--synthetic", "5", "--topic", "t"], ["dashboard"]):
        args = build_parser().parse_args([*command, "--config", str(path)])
        got = kafka_options(args)  # every client command gets the security settings
        assert got["bootstrap.servers"] == "broker-a:9093" and got["ssl.keystore.password"] == "hunter2"
    args = build_parser().parse_args(["reports", "--config", str(path), "--bootstrap", "other:9092"])
    assert kafka_options(args)["bootstrap.servers"] == "other:9092"
    monkeypatch.delenv("TEST_KAFKA_PASSWORD")
    with pytest.raises(ConfigError, match="kafka.extra.ssl.keystore.password refers to environment variable") as err:
        cfg.kafka_client_options()
    assert "hunter2" not in str(err.value)


def test_record_timestamps_travel_in_front_of_the_value() -> None:
    """stamp/unstamp: the 8-byte prefix the Java ScheduledTimestamps operator turns into the Kafka
    record timestamp (a report's scheduled release; none for a dead letter without one)."""
    from dphhh.stream.wire import stamp, unstamp

    for ts in (0, 1_796_083_200_500, 2**62, None):
        assert unstamp(stamp(b'{"x": 1}', ts)) == (ts, b'{"x": 1}')
    assert stamp(b"", 1) == (1).to_bytes(8, "big") and len(stamp(b"abc", None)) == 11


def test_the_metric_catalogue_names_exactly_the_counters_the_operators_create() -> None:
    """The decode operator counts the dead letters of unparsable records only (COUNTED_REASONS; and of
    those only records holding no element); the catalogue lists those and the release operator's
    schedule counters (and late reports: incidents), nothing per element."""
    from dphhh.stream.metrics_catalog import OPERATOR_COUNTERS
    from dphhh.stream.operators import COUNTED_REASONS
    from dphhh.stream.schedule import ELEMENT_REASONS

    assert set(OPERATOR_COUNTERS["decode"]) == {f"dead_letters_{r}" for r in COUNTED_REASONS}
    assert not COUNTED_REASONS & set(ELEMENT_REASONS)
    assert set(OPERATOR_COUNTERS) == {"decode", "release"}
