"""Private state and small leaks (docs/ALGORITHMS.md §0.1 f, h, i).

* the ledger, the hash key, sketch dumps, job folders and the checkpoint a start resumed from are
  0700/0600 whatever the umask;
* ``testing.debug_sketch_dir`` (exact sketches) is refused unless the noise is seeded;
* only dead letters of records holding **no** element move the job's public counters: a valid
  address beside a bad time, a missing unit, bad counters, a bad length or an oversized message
  is dead-lettered but not counted;
* of two concurrent writers of a window's report (a zombie task), exactly one stores its bytes and
  both return them.
"""

from __future__ import annotations

import json
import os
import stat
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from dphhh.connectors.decode import MessageDecoder
from dphhh.connectors.kafka_io import pack_ipv4
from dphhh.stream.config import ConfigError, load_config
from dphhh.stream.decode_batch import decode_batch
from dphhh.stream.ledger import ReleaseLedger, job_key_secret, private_dir
from dphhh.stream.message_batch import pack_batch
from dphhh.stream.operators import write_private
from dphhh.stream.runner import RESUMED_FROM_FILE, note_resume
from dphhh.stream.schedule import ReleaseSchedule


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask():
    old = os.umask(0o022)  # a usual umask: files 0644, folders 0755 unless the code says otherwise
    yield
    os.umask(old)


def test_ledger_key_and_dumps_are_private_whatever_the_umask(tmp_path: Path, open_umask) -> None:
    ledger = ReleaseLedger(tmp_path / "var" / "ledger")
    ledger.put(0, b'{"window": {"start_ms": 0}}')
    ledger.mark_published(0)
    ledger.schedule_start(0)
    assert _mode(ledger.directory) == 0o700
    assert {p.name: _mode(p) for p in ledger.directory.iterdir()} == {
        "window-0.json": 0o600,
        "published": 0o600,
        "schedule-start": 0o600,
    }
    cfg = load_config(
        environ={}, overrides=[f"output.ledger_dir={ledger.directory}", "hierarchy.spec=path:3", "input.format=path"]
    )
    job_key_secret(cfg)
    assert _mode(ledger.directory / "key-secret") == 0o600
    write_private(tmp_path / "dumps" / "window-0-sketch-0.bin", b"raw")
    assert _mode(tmp_path / "dumps") == 0o700 and _mode(tmp_path / "dumps" / "window-0-sketch-0.bin") == 0o600
    existing = tmp_path / "run"
    existing.mkdir(mode=0o755)
    assert _mode(private_dir(existing)) == 0o700  # an existing folder is made private too
    # which checkpoint a start resumes from (its number follows the uptime and the state's size): one
    # line per start, appended, in the private run folder only
    for n in (3, 7):
        note_resume(tmp_path / "run2", tmp_path / "checkpoints" / f"chk-{n}")
    noted = (tmp_path / "run2" / RESUMED_FROM_FILE).read_text().splitlines()
    assert [line.rsplit("/", 1)[1] for line in noted] == ["chk-3", "chk-7"]
    assert _mode(tmp_path / "run2") == 0o700 and _mode(tmp_path / "run2" / RESUMED_FROM_FILE) == 0o600


def test_the_cli_runs_jobs_under_umask_077() -> None:
    """`dphhh run` and `dphhh demo` set umask 077 before anything is created (the JVM and its Python
    workers inherit it: checkpoints and logs are 0600), the other commands leave it alone."""
    from dphhh.stream.cli.app import PRIVATE_STATE

    assert set(PRIVATE_STATE) == {"run", "demo"}
    source = Path(__file__).resolve().parents[2] / "stream" / "cli" / "app.py"
    assert "os.umask(0o077)" in source.read_text()
    entry = Path(__file__).resolve().parents[2] / "stream" / "flink_entry.py"
    assert "os.umask(0o077)" in entry.read_text()


def test_the_exact_sketch_dump_is_refused_unless_the_noise_is_seeded(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="debug_sketch_dir.*refused unless privacy.seed"):
        load_config(environ={}, overrides=[f"testing.debug_sketch_dir={tmp_path}"])
    cfg = load_config(environ={}, overrides=[f"testing.debug_sketch_dir={tmp_path}", "privacy.seed=1"])
    assert cfg.seed == 1 and any("NOT private" in w for w in cfg.warnings())


LIVE = ReleaseSchedule(1000, 0, mode="live")


def _counted(decoder: MessageDecoder, messages: list[bytes]) -> list[tuple[str, bool]]:
    out = decode_batch(pack_batch([500] * len(messages), messages), decoder, LIVE)
    return [(reason, counted) for reason, _, _, counted in out.dead]


def test_only_records_without_an_element_are_counted() -> None:
    """Each refused record holding a valid address (or path) is dead-lettered but not counted; the
    same refusal without any element is counted. Shown to fail on the old rule (every unparsable
    reason counted): the first of each pair would be counted too."""
    json_dec = MessageDecoder("json", json_field="ip", json_time_field="t", unit_field="u")
    assert _counted(
        json_dec,
        [
            b'{"ip": "10.0.0.1", "t": "soon", "u": 1}',  # a valid address, a bad time
            b'{"ip": "no address", "t": "soon", "u": 1}',
            b'{"ip": "10.0.0.1", "t": 5}',  # a valid address, no unit
            b'{"t": 5}',  # no address at all
            b"{not json",
        ],
    ) == [("bad_time", False), ("bad_time", True), ("missing_unit", False), ("missing_field", True), ("bad_json", True)]
    # unreadable records that still carry an address (an independent review's cases): a Latin-1
    # byte in another field, a trailing comma, a 5,000-digit number — dead-lettered, not counted
    assert _counted(
        json_dec,
        [
            b'{"ip": "1.2.3.4", "u": "M\xfcller"}',
            b'{"ip": "1.2.3.4", "u": "a",}',
            b'{"ip": "1.2.3.4", "u": ' + b"9" * 5000 + b"}",
            b'{"ip": "2001:db8::7", "u": "a",}',
            b'{"ip": "no address", "u": "M\xfcller"}',
        ],
    ) == [
        ("invalid_utf8", False),
        ("bad_json", False),
        ("bad_json", False),
        ("bad_json", False),
        ("invalid_utf8", True),
    ]
    text = MessageDecoder("text-ipv4", max_message_bytes=16)
    assert _counted(text, [b"10.0.0.1" + b" " * 20, b"x" * 20, b"nonsense", b"\xff\xfe"]) == [
        ("oversized", False),  # not parsed: it may hold an address
        ("oversized", False),
        ("bad_ipv4", True),
        ("invalid_utf8", True),
    ]
    packed = MessageDecoder("packed-ipv4")
    assert _counted(packed, [pack_ipv4(np.array([1, 2], np.uint32)) + b"\x01", b"\x01\x02"]) == [
        ("bad_length", False),  # two whole addresses and a byte
        ("bad_length", True),
    ]
    flows = MessageDecoder("flow-json", flow_weight="bytes")
    rec = {"ip_src": "10.0.0.1", "ip_dst": "10.0.0.2", "packets": 1, "bytes": 2**60, "timestamp_start": 5}
    bad_address = dict(rec, ip_src="nowhere", bytes=10)
    latin1 = json.dumps(dict(rec, bytes=10, writer_id="caf\u00e9")).encode().replace(b"\\u00e9", b"\xe9")
    assert _counted(flows, [json.dumps(rec).encode(), json.dumps(bad_address).encode(), latin1]) == [
        ("counter_too_large", False),
        ("bad_address", True),
        ("invalid_utf8", False),  # valid addresses beside one Latin-1 byte elsewhere
    ]
    paths = MessageDecoder("path", path_depth=3)
    assert _counted(paths, [b"a//b", ("x/" * 3000 + "y").encode(), b"de/m\xfcnchen/x", b"\xff\xfe"]) == [
        ("bad_path_empty_component", True),
        ("bad_path_too_long", False),  # a well-formed path, only longer than the reader takes
        ("invalid_utf8", False),  # a path with a Latin-1 byte: it may be somebody's path
        ("invalid_utf8", True),
    ]


def _store(args: tuple[str, bytes]) -> bytes:
    directory, report = args
    ledger = ReleaseLedger(directory)
    return ledger.put(7000, report)


def test_two_concurrent_writers_store_one_report(tmp_path: Path) -> None:
    """Eight processes (two attempts of the release task, many times over) race to store different
    reports of one window: exactly one is stored, every writer gets it back, no temporary file is left."""
    for round_ in range(5):
        folder = tmp_path / f"ledger-{round_}"
        ReleaseLedger(folder)
        reports = [json.dumps({"attempt": i, "window": {"start_ms": 7000}}).encode() for i in range(8)]
        with ProcessPoolExecutor(4) as pool:
            got = list(pool.map(_store, [(str(folder), r) for r in reports]))
        stored = (folder / "window-7000.json").read_bytes()
        assert stored in reports and got == [stored] * 8
        assert sorted(p.name for p in folder.iterdir()) == ["window-7000.json"]


@pytest.mark.parametrize(
    "override",
    [
        "testing.debug_sketch_dir=/tmp/x",
        "testing.fail_after_window=2",
        "testing.checkpoint_delay_ms=10",
        "testing.slow_decode_ms=10",
        "testing.hold_s=1.5",
        "testing.noise_per_attempt=true",
    ],
)
def test_the_test_hooks_are_refused_outside_the_test_suite(override: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deployment cannot switch on a [testing] hook (a NON-PRIVATE dump, an injected failure, a
    delay): without DPHHH_TESTING=1 each is refused naming its key; in a test run it is read."""
    key = override.partition("=")[0]
    seeded = ["privacy.seed=1"]  # the dump also needs a seed; the others do not mind one
    assert load_config(environ={}, overrides=[override, *seeded])[key] is not None  # conftest's test run
    monkeypatch.delenv("DPHHH_TESTING")
    with pytest.raises(ConfigError, match=rf"config: {key} is a test hook, refused outside the test suite"):
        load_config(environ={}, overrides=[override, *seeded])
    load_config(environ={}, overrides=seeded)  # the defaults are fine anywhere


def test_the_old_test_keys_point_at_the_testing_section() -> None:
    with pytest.raises(ConfigError, match=r"output.test_hold_s in --set is no longer a key; use testing.hold_s"):
        load_config(environ={}, overrides=["output.test_hold_s=2"])
