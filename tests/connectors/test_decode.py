"""Message decoders of the stream job: good records decode, bad ones get a reason, nothing raises."""

from __future__ import annotations

import json

import numpy as np
import pytest

from connectors.decode import MessageDecoder
from connectors.kafka_io import pack_ipv4


def test_packed_batches_decode_big_endian() -> None:
    """A packed message decodes to its addresses in order."""
    addrs = np.array([0x01020304, 0xFFFFFFFF, 0], dtype=np.uint32)
    out = MessageDecoder("packed-ipv4").decode(pack_ipv4(addrs))
    assert out.ok and out.values.dtype == np.uint32 and out.values.tolist() == addrs.tolist()


@pytest.mark.parametrize("value, reason", [(b"", "empty"), (None, "empty"), (b"\x01\x02\x03", "bad_length")])
def test_packed_bad_records(value, reason) -> None:
    """Empty and truncated packed messages are classified."""
    assert MessageDecoder("packed-ipv4", max_message_bytes=4096).decode(value).reason == reason


def test_packed_messages_are_never_refused_for_their_size() -> None:
    """A packed message over max_message_bytes is decoded element by element (one more element must not
    drop the message's others, docs/ALGORITHMS.md §0.1 e); one-element formats still refuse oversized ones."""
    big = np.arange(1025, dtype=np.uint32).astype(">u4").tobytes()  # 4100 bytes
    for fmt in ("packed-ipv4", "packed-ipv4-pairs"):
        decoder = MessageDecoder(fmt, max_message_bytes=4096)
        if fmt == "packed-ipv4-pairs":
            big = big[:4096] + big[:8]
        one, many = decoder.decode(big), decoder.decode_many([big])
        assert (
            one.ok
            and many.reasons == [None]
            and many.counts.tolist() == [len(big) // (4 if fmt == "packed-ipv4" else 8)]
        )
    assert MessageDecoder("text-ipv4", max_message_bytes=8).decode(b"10.100.100.100").reason == "oversized"


@pytest.mark.parametrize(
    "value, reason",
    [
        (b"1.2.3.4", None),
        (b"300.1.1.1", "bad_ipv4"),
        (b"2001:db8::1", "wrong_family"),
        (b"\xff\xfe", "invalid_utf8"),
    ],
)
def test_text_ipv4(value, reason) -> None:
    """One address per message; IPv6 on an IPv4 topic is a wrong-family record."""
    out = MessageDecoder("text-ipv4").decode(value)
    assert out.reason == reason
    if reason is None:
        assert out.values.tolist() == [0x01020304]


def test_json_field_and_time() -> None:
    """JSON records take the address from the configured field and the event time if asked."""
    d = MessageDecoder("json", json_field="src", json_time_field="ts")
    ok = d.decode(json.dumps({"src": "10.0.0.1", "ts": 1234}).encode())
    assert ok.ok and ok.values.tolist() == [0x0A000001] and ok.event_time == 1234
    assert d.decode(b'{"dst": "10.0.0.1", "ts": 1}').reason == "missing_field"
    assert d.decode(b'{"src": "10.0.0.1", "ts": "x"}').reason == "bad_time"
    assert d.decode(b"{not json").reason == "bad_json"
    assert d.decode(b"[" * 100_000).reason == "bad_json"


def test_paths() -> None:
    """Paths must have the configured depth and no empty component."""
    d = MessageDecoder("path", path_depth=3)
    assert d.decode(b"de/bavaria/munich").values == ["de/bavaria/munich"]
    assert d.decode(b"de//munich").reason == "bad_path_empty_component"
    assert d.decode(b"de/bavaria").reason == "bad_path_depth"
    assert d.decode(b"/".join([b"a"] * 100)).reason == "bad_path_too_deep"


def test_random_bytes_never_raise() -> None:
    """Random byte strings of every length are decoded or classified, never raised on."""
    rng = np.random.default_rng(0)
    decoders = [MessageDecoder(f) for f in ("packed-ipv4", "text-ipv4", "json", "path")]
    for _ in range(3000):
        value = rng.bytes(int(rng.integers(0, 64)))
        for d in decoders:
            out = d.decode(value)
            assert out.ok or isinstance(out.reason, str)


def test_bad_decoder_settings() -> None:
    """Decoder settings are validated at construction."""
    with pytest.raises(ValueError, match="format"):
        MessageDecoder("csv")
    with pytest.raises(ValueError, match="max_message_bytes"):
        MessageDecoder("packed-ipv4", max_message_bytes=2)


def test_flow_records_as_source_destination_pairs() -> None:
    """flow_key = "pair" (pair hierarchies, docs/ALGORITHMS.md §11): the source comes as the first
    address (``units``), the destination as the value, the record's time as its event time; a
    record whose destination is IPv6 is wrong_family, one without a destination missing_field."""
    import ipaddress
    import json as _json

    rows = [
        {
            "ip_src": "45.38.180.102",
            "ip_dst": "10.10.10.10",
            "packets": 1,
            "bytes": 40,
            "timestamp_start": "2021-06-05 03:58:45.551000",
        },
        {
            "ip_src": "104.253.64.173",
            "ip_dst": "2001:db8::1",
            "packets": 1,
            "bytes": 40,
            "timestamp_start": "2021-06-05 03:58:45.551000",
        },
        {"ip_src": "172.16.0.1", "packets": 1, "bytes": 40, "timestamp_start": "2021-06-05 03:58:45.551000"},
        {
            "ip_src": "192.0.2.7",
            "ip_dst": "203.0.113.5",
            "packets": 3,
            "bytes": 99,
            "timestamp_start": "2021-06-05 03:58:46.000000",
        },
    ]
    batch = MessageDecoder("flow-json", flow_key="pair").decode_many([_json.dumps(r).encode() for r in rows])
    assert batch.reasons[0] is None and batch.reasons[3] is None
    assert batch.reasons[1] == "wrong_family" and batch.reasons[2] == "missing_field"
    assert batch.counts.tolist() == [1, 0, 0, 1]
    assert [str(ipaddress.IPv4Address(int(u))) for u in batch.units] == ["45.38.180.102", "192.0.2.7"]
    assert [str(ipaddress.IPv4Address(int(v))) for v in batch.values] == ["10.10.10.10", "203.0.113.5"]
    assert batch.event_times[0] > 0 and batch.event_times[3] - batch.event_times[0] == 449


def test_a_pair_hierarchy_configures_its_inputs() -> None:
    from stream.config import ConfigError, load_config

    spec = "hierarchy.spec=ipv4:8,16 x ipv4:8,16"
    cfg = load_config(None, environ={}, overrides=[spec, "input.format=flow-json"])
    assert cfg.values["input"]["flow_key"] == "pair" and cfg.hierarchy.h == 8
    assert load_config(None, environ={}, overrides=[spec, "input.format=packed-ipv4-pairs"]).hierarchy.kind == "pair"
    user = load_config(
        None,
        environ={},
        overrides=[spec, "input.format=packed-ipv4-pairs", "privacy.unit_key=source-ipv4", "privacy.unit_cap=3"],
    )
    assert user.unit.kind == "user" and user.unit.cap == 3
    for bad, word in (
        (["input.format=packed-ipv4"], "packed-ipv4-pairs"),
        (["input.format=flow-json", "input.flow_weight=bytes", "input.weight_cap=100"], "flow_weight"),
        (["input.format=flow-json", "privacy.unit_key=source-ipv4", "privacy.unit_cap=3"], "unit_key"),
    ):
        with pytest.raises(ConfigError, match=word):
            load_config(None, environ={}, overrides=[spec, *bad])
