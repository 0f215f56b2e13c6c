"""Message decoders of the stream job: good records decode, bad ones get a reason, nothing raises."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dphhh.connectors.decode import MessageDecoder
from dphhh.connectors.kafka_io import pack_ipv4


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
    """A pair hierarchy reads packed pairs or flow records (flow_key becomes "pair"), weighted or not,
    at event level or per source host; other formats, unit keys and IPv6 pairs are refused."""
    from dphhh.stream.config import ConfigError, load_config

    spec = "hierarchy.spec=ipv4:8,16 x ipv4:8,16"
    cfg = load_config(None, environ={}, overrides=[spec, "input.format=flow-json"])
    assert cfg.values["input"]["flow_key"] == "pair" and cfg.hierarchy.h == 8
    assert load_config(None, environ={}, overrides=[spec, "input.format=packed-ipv4-pairs"]).hierarchy.kind == "pair"
    for fmt in ("packed-ipv4-pairs", "flow-json"):
        user = load_config(
            None,
            environ={},
            overrides=[spec, f"input.format={fmt}", "privacy.unit_key=source-ipv4", "privacy.unit_cap=3"],
        )
        assert user.unit.kind == "user" and user.unit.cap == 3 and user.unit.key == "source address"
    weighted = load_config(
        None, environ={}, overrides=[spec, "input.format=flow-json", "input.flow_weight=bytes", "input.weight_cap=100"]
    )
    assert weighted.unit.kind == "event" and weighted.unit.group_size == 100
    assert weighted.values["input"]["flow_key"] == "pair"
    for bad, word in (
        (["input.format=packed-ipv4"], "packed-ipv4-pairs"),
        (["input.format=flow-json", "input.flow_key=dst"], "flow_key = 'pair'"),
        (["input.format=flow-json", "privacy.unit_key=json:user", "privacy.unit_cap=3"], "source host only"),
        (["input.format=packed-ipv4-pairs", "privacy.unit_key=json:user"], "source host only"),
        (["input.format=flow-json", "hierarchy.spec=ipv6:32,64 x ipv6:32,64"], "IPv4 x IPv4"),
    ):
        with pytest.raises(ConfigError, match=word):
            load_config(None, environ={}, overrides=[spec, *bad])


def _flow_row(schema: str, src: str | None, dst: str | None, nbytes: int, second: int) -> bytes:
    """One flow record of ``schema`` (an address of None is left out of the record)."""
    if schema == "pmacct":
        row = {"ip_src": src, "ip_dst": dst, "packets": 1, "bytes": nbytes}
        row["timestamp_start"] = f"2021-06-05 03:58:{second:02d}.000000"
    else:
        row = {"src_addr": src, "dst_addr": dst, "packets": 1, "bytes": nbytes, "etype": "IPv4"}
        row["time_flow_start_ns"] = (1622865480 + second) * 10**9
    return json.dumps({k: v for k, v in row.items() if v is not None}).encode()


_SOURCE_UNIT_ROWS = [  # (src, dst, bytes, reason)
    ("45.38.180.102", "10.10.10.10", 40, None),
    (None, "10.10.10.11", 41, "missing_field"),  # no source: the unit is unknown
    ("2001:db8::7", "10.10.10.12", 42, "wrong_family"),  # an IPv6 source of an IPv4 destination
    ("300.1.1.1", "10.10.10.13", 43, "bad_address"),
    ("192.0.2.7", "2001:db8::1", 44, "wrong_family"),  # an IPv6 destination
    ("192.0.2.7", None, 45, "missing_field"),
    ("192.0.2.7", "203.0.113.5", 4600, None),
]


@pytest.mark.parametrize("copies", [1, 4])  # 7 records: record by record; 28: the columnar path
@pytest.mark.parametrize("schema", ["pmacct", "goflow2"])
def test_flow_records_over_destinations_carry_their_sources_as_units(schema: str, copies: int) -> None:
    """source_units with flow_key = "dst" (user level per source host, 1-D): the values are the
    destinations, the units (uint64) the sources, aligned, with each record's weight and time; a
    record whose source is missing or not IPv4 is dead-lettered with the pair decoder's reason."""
    import ipaddress

    rows = _SOURCE_UNIT_ROWS * copies
    messages = [_flow_row(schema, s, d, b, i % 60) for i, (s, d, b, _) in enumerate(rows)]
    decoder = MessageDecoder("flow-json", flow_schema=schema, flow_key="dst", flow_weight="bytes", source_units=True)
    assert decoder.has_units and decoder.weighted
    batch = decoder.decode_many(messages)
    assert batch.reasons == [r for *_, r in rows]
    pairs = MessageDecoder("flow-json", flow_schema=schema, flow_key="pair").decode_many(messages)
    assert batch.reasons == pairs.reasons  # the same reasons as the pair decoder
    good = [(s, d, b, i % 60) for i, (s, d, b, r) in enumerate(rows) if r is None]
    assert batch.units.dtype == np.uint64 and batch.values.dtype == np.uint32
    assert [str(ipaddress.IPv4Address(int(u))) for u in batch.units] == [s for s, *_ in good]
    assert [str(ipaddress.IPv4Address(int(v))) for v in batch.values] == [d for _, d, *_ in good]
    assert batch.weights.tolist() == [b for *_, b, _ in good]
    assert batch.counts.tolist() == [int(r is None) for *_, r in rows]
    kept_times = batch.event_times[batch.counts == 1].tolist()
    assert [t - kept_times[0] for t in kept_times] == [(t - good[0][3]) * 1000 for *_, t in good]
    one = decoder.decode(messages[0])
    assert one.values.tolist() == [0x0A0A0A0A] and one.units.tolist() == [int(ipaddress.IPv4Address("45.38.180.102"))]
    assert decoder.decode(messages[1]).reason == "missing_field"


def test_flow_records_over_sources_are_their_own_units_and_nothing_changes_without_source_units() -> None:
    """source_units with flow_key = "src": each record's unit is its value (a missing destination
    does not matter); without source_units no units are read and a record without a source over
    destinations is still decoded; source_units is refused for formats without source addresses."""
    rows = [("10.0.0.1", None, 5), ("10.0.0.2", "10.9.9.9", 6), (None, "10.9.9.8", 7)]
    messages = [_flow_row("pmacct", s, d, b, 1) for s, d, b in rows]
    by_src = MessageDecoder("flow-json", flow_key="src", source_units=True).decode_many(messages)
    assert by_src.reasons == [None, None, "missing_field"]
    assert by_src.units.tolist() == by_src.values.tolist() == [0x0A000001, 0x0A000002]
    assert by_src.weights is None
    plain = MessageDecoder("flow-json", flow_key="dst")
    assert not plain.has_units
    out = plain.decode_many(messages)
    assert out.units is None and out.reasons == ["missing_field", None, None]
    for fmt in ("packed-ipv4", "text-ipv4", "json", "path"):
        with pytest.raises(ValueError, match="source_units"):
            MessageDecoder(fmt, source_units=True)


def _json_corpus(n: int = 600) -> list[bytes | None]:
    """A seeded mix of JSON messages, most of them good: every reason of the format appears."""
    rng = np.random.default_rng(11)
    out: list[bytes | None] = []
    for i in range(n):
        ip = ".".join(str(int(x)) for x in rng.integers(0, 256, 4))
        good = {"ip": f" {ip} " if i % 17 == 0 else ip, "ts": 1_000 + i, "user": f"u{i % 37}" if i % 2 else i % 41}
        case = i % 20
        if case == 0:
            good["ip"] = "2001:db8::1"  # wrong_family
        elif case == 1:
            good["ip"] = "1.2.3.256"  # bad_ipv4
        elif case == 2:
            del good["ts"]  # bad_time
        elif case == 3:
            good["user"] = True  # missing_unit
        elif case == 4:
            del good["ip"]  # missing_field
        if case == 5:
            out.append(b"{not json")
        elif case == 6:
            out.append(None if i % 40 == 6 else b"")
        elif case == 7:
            out.append(b"\xff\xfe")
        else:
            out.append(json.dumps(good).encode())
    return out


@pytest.mark.parametrize("time_field", [None, "ts"])
@pytest.mark.parametrize("unit_field", [None, "user"])
def test_json_batches_decode_message_for_message_as_one_message_does(time_field, unit_field) -> None:
    """The batch path of the json format (fields checked per message, addresses parsed and unit values
    keyed once per batch) gives every message's reason, value, event time and unit key of decode()."""
    decoder = MessageDecoder("json", json_time_field=time_field, unit_field=unit_field, max_message_bytes=1 << 10)
    messages = _json_corpus()
    one = [decoder.decode(m) for m in messages]
    many = decoder.decode_many(messages)
    assert many.reasons == [d.reason for d in one]
    assert sum(d.ok for d in one) >= 300 and len({d.reason for d in one}) >= 6  # the corpus exercises both
    assert many.values.tolist() == [int(d.values[0]) for d in one if d.ok]
    assert many.event_times.tolist() == [-1 if not d.ok or d.event_time is None else d.event_time for d in one]
    if unit_field is None:
        assert many.units is None
    else:
        assert many.units.tolist() == [d.units.tolist()[0] for d in one if d.ok]
        assert len(set(many.units.tolist())) == 37 + 41  # distinct users, distinct keys
