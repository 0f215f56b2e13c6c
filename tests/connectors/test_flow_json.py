"""Flow-JSON decoder (connectors/flow_json.py) on the collectors' real records and on crafted bad ones.

The fixtures in tests/connectors/data/ were published by the real chain (softflowd -> IPFIX ->
nfacctd 1.7.7 / goflow2 v2.2.6 -> Kafka, deploy/flow-pipeline.sh) and read back from the broker:
see data/README.md and data/record-flow-fixtures.sh.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import random
from pathlib import Path

import numpy as np
import pytest

import dphhh.connectors.flow_json as fj
from dphhh.connectors.flow_json import MAX_COUNTER, REASONS, FlowJsonDecoder, iter_flow_file, split_json_lines
from dphhh.connectors.skips import EXCLUDED, UNPARSABLE, SkipCounter

from .flow_capture import BASE_US, FLOWS, expected_totals

DATA = Path(__file__).with_name("data")
PMACCT_MIXED = [
    "pmacct-ipfix-mixed",
    "pmacct-ipfix-mixed-rfc3339",
    "pmacct-ipfix-mixed-epoch",
    "pmacct-ipfix-mixed-history",
    "pmacct-ipfix-mixed-rfc3339-berlin",
]


def fixture(name: str) -> list[bytes]:
    return split_json_lines((DATA / f"{name}.jsonl").read_bytes())


def by_address(batch: fj.FlowBatch) -> dict[str, tuple[int, int]]:
    """{address text: (weight, event ms)} of a batch's decoded records, both families."""
    out = {}
    for key, w, t in zip(batch.ipv4.keys.tolist(), batch.ipv4.weights.tolist(), batch.ipv4.event_ms.tolist()):
        out[str(ipaddress.IPv4Address(key))] = (w, t)
    hi, lo = batch.ipv6.keys
    for high, low, w, t in zip(hi.tolist(), lo.tolist(), batch.ipv6.weights.tolist(), batch.ipv6.event_ms.tolist()):
        out[str(ipaddress.IPv6Address((high << 64) | low))] = (w, t)
    return out


def first_packet_ms() -> dict[str, int]:
    """Each flow's first packet time in the capture the mixed fixtures come from (flow_capture.py)."""
    return {f[0]: (BASE_US + i * 10_000) // 1000 for i, f in enumerate(FLOWS)}


# ------------------------------------------------------------------------------------------------
# the real records


@pytest.mark.parametrize("name", PMACCT_MIXED + ["goflow2-ipfix-mixed"])
def test_real_mixed_records_give_the_captures_flows(name: str) -> None:
    """Every real record of the mixed capture (IPv4 and IPv6 in one topic) decodes, with the
    capture's packets and bytes per flow and the flow's first-packet time, whichever time format
    nfacctd was set to (default UTC, rfc3339 Z, epoch string, history bins, rfc3339 +01:00) or
    goflow2's nanoseconds."""
    schema = "goflow2" if name.startswith("goflow2") else "pmacct"
    records = fixture(name)
    assert len(records) == len(FLOWS)
    totals, starts = expected_totals(), first_packet_ms()
    for weight, pick in (("packets", 0), ("bytes", 1)):
        batch = FlowJsonDecoder(schema, family="both", weight=weight).decode_many(records)
        assert batch.reasons == [None] * len(records)
        assert len(batch.ipv4) == 3 and len(batch.ipv6) == 3
        assert by_address(batch) == {src: (totals[src][pick], starts[src]) for src in totals}
        assert sorted(batch.ipv4.index.tolist() + batch.ipv6.index.tolist()) == list(range(len(records)))


def test_real_destination_keys_and_record_weights() -> None:
    """key=dst reads ip_dst / dst_addr; weight=records weighs each record 1."""
    for schema, name in (("pmacct", "pmacct-ipfix-mixed"), ("goflow2", "goflow2-ipfix-mixed")):
        batch = FlowJsonDecoder(schema, key="dst", weight="records", family="both").decode_many(fixture(name))
        got = sorted((k, w) for k, (w, _) in by_address(batch).items())
        # 198.51.100.7 and 2001:db8:2::20 are the destination of two flows each
        assert [k for k, _ in got] == sorted({f[1] for f in FLOWS})
        assert batch.ipv4.weights.tolist() == [1, 1, 1] and batch.ipv6.weights.tolist() == [1, 1, 1]


def test_family_split_on_real_records() -> None:
    """family=ipv4 keeps the IPv4 records and dead-letters the IPv6 ones as wrong_family (and the
    other way round); the keys follow connectors.decode (uint32) and sketches.hierarchy ((hi, lo))."""
    records = fixture("pmacct-ipfix-mixed")
    v6_rows = [i for i, r in enumerate(records) if b'"ip_src": "2001:' in r]
    v4 = FlowJsonDecoder("pmacct", family="ipv4").decode_many(records)
    assert [i for i, r in enumerate(v4.reasons) if r is not None] == v6_rows
    assert {r for r in v4.reasons if r} == {"wrong_family"} and len(v4.ipv6) == 0
    assert v4.ipv4.keys.dtype == np.uint32 and v4.ipv4.weights.dtype == np.int64 and v4.ipv4.event_ms.dtype == np.int64
    assert v4.ipv4.keys.tolist() == [
        int(ipaddress.IPv4Address(json.loads(records[i])["ip_src"])) for i in v4.ipv4.index.tolist()
    ]
    v6 = FlowJsonDecoder("pmacct", family="ipv6").decode_many(records)
    assert v6.ipv6.index.tolist() == v6_rows and len(v6.ipv4) == 0
    hi, lo = v6.ipv6.keys
    assert hi.dtype == lo.dtype == np.uint64
    want = [int(ipaddress.IPv6Address(json.loads(records[i])["ip_src"])) for i in v6_rows]
    assert [(high << 64) | low for high, low in zip(hi.tolist(), lo.tolist())] == want
    assert v6.dead_letters() == [(i, "wrong_family") for i in range(len(records)) if i not in v6_rows]


def test_real_capture_samples() -> None:
    """The first published records of two bundled captures decode whole, with the capture's times
    (2021) to the millisecond."""
    syn = FlowJsonDecoder("pmacct", weight="bytes").decode_many(fixture("pmacct-ipfix-synack-head"))
    assert syn.reasons == [None] * 100 and len(syn.ipv4) == 100
    assert syn.ipv4.weights.min() >= 40  # TCP SYN-ACKs: at least the 40 header bytes
    day = dt.datetime(2021, 6, 5, tzinfo=dt.UTC).timestamp() * 1000
    assert (syn.ipv4.event_ms >= day).all() and (syn.ipv4.event_ms < day + 86_400_000).all()
    isakmp = FlowJsonDecoder("goflow2").decode_many(fixture("goflow2-ipfix-isakmp-head"))
    assert isakmp.reasons == [None] * 30
    assert isakmp.ipv4.event_ms.min() == 1623699901003  # 2021-06-14 19:45:01.003 UTC


def test_json_lines_file_counts_bad_lines(tmp_path: Path) -> None:
    """iter_flow_file decodes a JSON-lines file in chunks and counts the bad lines per reason — a
    refused record that holds an element (an IP address with a bad counter) as ``unusable_record``
    (excluded, never shown), as the stream's dead-letter counters leave it out."""
    path = tmp_path / "flows.jsonl"
    path.write_bytes(
        (DATA / "pmacct-ipfix-mixed.jsonl").read_bytes()
        + b"\n\nnot json\r\n"
        + b'{"ip_src": "10.0.0.1", "packets": -1, "bytes": 5}\n'
        + b'{"ip_src": "nope", "packets": -1, "bytes": 5}\n'
    )
    skips = SkipCounter()
    batches = list(iter_flow_file(path, FlowJsonDecoder("pmacct", family="both"), skips, chunk_size=4))
    assert [len(b.reasons) for b in batches] == [4, 4, 1]
    assert sum(len(b.ipv4) + len(b.ipv6) for b in batches) == 6
    # the address-less record is refused for its counter first: it holds no element, so it is counted
    assert skips.as_dict() == {"bad_counter": 1, "bad_json": 1, "unusable_record": 1}
    assert skips.unparsable() == {"bad_counter": 1, "bad_json": 1}


# ------------------------------------------------------------------------------------------------
# crafted bad records

GOOD = {
    "event_type": "purge",
    "ip_src": "192.0.2.10",
    "ip_dst": "198.51.100.7",
    "port_src": 5353,
    "port_dst": 53,
    "ip_proto": "udp",
    "timestamp_start": "2026-11-30 01:55:00.250000",
    "timestamp_end": "2026-11-30 01:55:00.370000",
    "packets": 3,
    "bytes": 204,
    "writer_id": "flows/3250",
}


def changed(base: dict, **change) -> bytes:
    """``base`` with the given fields set (``KeyError``: removed), as a JSON message value."""
    obj = dict(base)
    for k, v in change.items():
        if v is KeyError:
            obj.pop(k, None)
        else:
            obj[k] = v
    return json.dumps(obj).encode()


def rec(**change) -> bytes:
    return changed(GOOD, **change)


BAD = [
    (b"", "empty"),
    (None, "empty"),
    (b"{" + b" " * 70_000 + b"}", "oversized"),
    (b'{"ip_src": "10.0.0.1", "packets": 1, "bytes": 1, "x": "\xff"}', "invalid_utf8"),
    (b"not json", "bad_json"),
    (b'{"ip_src": "10.0.0.1",', "bad_json"),
    (b"[1, 2]", "bad_json"),
    (b'"192.0.2.1"', "bad_json"),
    (rec() + b"\n" + rec(), "bad_json"),  # kafka_multi_values: several objects in one message
    (rec(ip_src=KeyError), "missing_field"),
    (rec(ip_src=None), "missing_field"),
    (rec(packets=KeyError), "missing_field"),
    (rec(bytes=None), "missing_field"),
    (rec(packets=-1), "bad_counter"),
    (rec(bytes=-204), "bad_counter"),
    (rec(bytes=204.5), "bad_counter"),
    (rec(bytes=204.0), "bad_counter"),
    (rec(bytes="204"), "bad_counter"),
    (rec(packets=True), "bad_counter"),
    (rec(packets=[3]), "bad_counter"),
    (rec(packets=5, bytes=4), "bad_counter"),  # fewer bytes than packets
    (rec(bytes=float("nan")), "bad_counter"),  # NaN: stdlib JSON only (orjson refuses it)
    (rec(bytes=MAX_COUNTER + 1), "counter_too_large"),
    (rec(packets=MAX_COUNTER + 1, bytes=MAX_COUNTER + 1), "counter_too_large"),
    (rec(bytes=10**30), "counter_too_large"),  # beyond 64 bits: orjson refuses, json reads it
    (rec(ip_src="999.1.2.3"), "bad_address"),
    (rec(ip_src="10.0.0"), "bad_address"),
    (rec(ip_src=""), "bad_address"),
    (rec(ip_src="fe80::1%eth0"), "bad_address"),
    (rec(ip_src="2001:db8::1::2"), "bad_address"),
    (rec(ip_src=167772161), "bad_address"),
    (rec(ip_src=["10.0.0.1"]), "bad_address"),
    (rec(timestamp_start="2026-13-01 00:00:00.000000"), "bad_time"),
    (rec(timestamp_start="2026-02-29 00:00:00.000000"), "bad_time"),  # 2026 is no leap year
    (rec(timestamp_start="2026-11-30 24:00:00.000000"), "bad_time"),
    (rec(timestamp_start="2026-11-30 01:55:60"), "bad_time"),
    (rec(timestamp_start="2026-11-30 01:55:00."), "bad_time"),
    (rec(timestamp_start="2026-11-30 01:55:00.0000000000"), "bad_time"),  # ten fraction digits
    (rec(timestamp_start="2026-11-30 01:55:00+1:00"), "bad_time"),
    (rec(timestamp_start="2026-11-30 01:55:00 UTC"), "bad_time"),
    (rec(timestamp_start="1969-12-31 23:59:59.000000"), "bad_time"),  # before the epoch
    (rec(timestamp_start="yesterday"), "bad_time"),
    (rec(packets=0, bytes=0), "zero_weight"),  # the default decoder weights by packets
    (rec(timestamp_start="-5"), "bad_time"),
    (rec(timestamp_start="1796003700.25.1"), "bad_time"),
    (rec(timestamp_start=1796003700.25), "bad_time"),
    (rec(timestamp_start=-1796003700), "bad_time"),
    (rec(timestamp_start=[1]), "bad_time"),
    (rec(timestamp_start={"s": 1}), "bad_time"),
    (rec(timestamp_start=True), "bad_time"),
]


@pytest.mark.parametrize("value, reason", BAD)
def test_bad_pmacct_records(value, reason) -> None:
    """Each crafted bad record gets its reason, with orjson and with the standard library's json."""
    decoder = FlowJsonDecoder("pmacct")
    assert decoder.decode(value).reasons == [reason]
    assert decoder.decode(value).dead_letters() == [(0, reason)]


def test_parsers_agree(monkeypatch) -> None:
    """The reasons and values do not depend on which JSON parser runs."""
    values = [v for v, _ in BAD] + fixture("pmacct-ipfix-mixed") + fixture("pmacct-ipfix-mixed-epoch")
    decoder = FlowJsonDecoder("pmacct", family="both", weight="bytes")
    fast = decoder.decode_many(values)
    monkeypatch.setattr(fj, "_fast_loads", json.loads)
    slow = decoder.decode_many(values)
    assert fast.reasons == slow.reasons == [r for _, r in BAD] + [None] * 12
    assert by_address(fast) == by_address(slow)


def test_all_reasons_are_registered() -> None:
    """Every reason is classified in connectors.skips; only the valid records (of the other family,
    of weight 0) are excluded."""
    assert set(REASONS) <= UNPARSABLE | EXCLUDED
    assert {r for r in REASONS if r in EXCLUDED} == {"wrong_family", "zero_weight"}
    assert {r for _, r in BAD} == set(REASONS) - {"wrong_family"}


def test_checks_follow_the_documented_order() -> None:
    """A record with several faults gets the first reason in REASONS' order."""
    d = FlowJsonDecoder("pmacct")
    assert d.decode(rec(ip_src=KeyError, packets=-1)).reasons == ["missing_field"]
    assert d.decode(rec(packets=-1, bytes=MAX_COUNTER + 1)).reasons == ["bad_counter"]
    assert d.decode(rec(bytes=MAX_COUNTER + 1, ip_src="nope")).reasons == ["counter_too_large"]
    assert d.decode(rec(ip_src="nope", timestamp_start="nope")).reasons == ["bad_address"]
    assert d.decode(rec(ip_src="2001:db8::1", timestamp_start="nope")).reasons == ["wrong_family"]
    assert d.decode(rec(packets=0, bytes=0, timestamp_start="nope")).reasons == ["bad_time"]
    assert d.decode(rec(ip_src="2001:db8::1", timestamp_start=[1])).reasons == ["wrong_family"]


def test_counter_bound_is_inclusive_and_configurable() -> None:
    assert FlowJsonDecoder("pmacct").decode(rec(packets=MAX_COUNTER, bytes=MAX_COUNTER)).reasons == [None]
    small = FlowJsonDecoder("pmacct", max_counter=1000)
    assert small.decode(rec(bytes=1000)).reasons == [None]
    assert small.decode(rec(bytes=1001)).reasons == ["counter_too_large"]
    assert FlowJsonDecoder("pmacct", weight="records").decode(rec(packets=0, bytes=0)).reasons == [None]


def test_a_record_of_weight_zero_is_zero_weight_when_weighted_by_that_counter() -> None:
    """0 packets or 0 bytes is a valid record, but a run weighted by that counter has nothing to
    count (a sketch takes weights >= 1): ``zero_weight``, alike record by record and by columns."""
    assert FlowJsonDecoder("pmacct", weight="packets").decode(rec(packets=0, bytes=0)).reasons == ["zero_weight"]
    assert FlowJsonDecoder("pmacct", weight="bytes").decode(rec(packets=0, bytes=0)).reasons == ["zero_weight"]
    assert FlowJsonDecoder("pmacct", weight="records").decode(rec(packets=0, bytes=0)).reasons == [None]
    assert FlowJsonDecoder("pmacct", weight="bytes").decode(rec(packets=0, bytes=40)).reasons == [None]
    batch = [rec(packets=i % 3, bytes=(i % 3) * 60) for i in range(64)]  # a columnar batch
    for weight in ("packets", "bytes"):
        decoder = FlowJsonDecoder("pmacct", weight=weight)
        columns, each = decoder.decode_many(batch), decoder.decode_each(batch)
        assert columns.reasons == each.reasons == ["zero_weight" if i % 3 == 0 else None for i in range(64)]
        assert columns.ipv4.weights.min() >= 1 and columns.ipv4.weights.tolist() == each.ipv4.weights.tolist()


def test_zero_and_missing_times() -> None:
    """pmacct's zero time counts as absent: the next time field is used; with none, -1 (the Kafka
    timestamp then applies), or bad_time when the caller requires a time."""
    d = FlowJsonDecoder("pmacct")
    zero = "0000-00-00 00:00:00.000000"
    out = d.decode(rec(timestamp_start=zero))
    assert out.reasons == [None] and out.ipv4.event_ms.tolist() == [1796003700370]  # timestamp_end
    out = d.decode(rec(timestamp_start=KeyError, timestamp_end=zero, stamp_inserted="2026-11-30 01:54:00"))
    assert out.ipv4.event_ms.tolist() == [1796003640000]
    none = rec(timestamp_start=zero, timestamp_end=KeyError)
    assert d.decode(none).ipv4.event_ms.tolist() == [-1]
    assert d.decode(rec(timestamp_start="0", timestamp_end=0)).ipv4.event_ms.tolist() == [-1]
    assert FlowJsonDecoder("pmacct", require_time=True).decode(none).reasons == ["bad_time"]
    only_arrival = FlowJsonDecoder("pmacct", time_fields=("timestamp_arrival",))
    assert only_arrival.decode(rec()).ipv4.event_ms.tolist() == [-1]
    assert only_arrival.decode(rec(timestamp_arrival="2026-11-30T01:55:01Z")).ipv4.event_ms.tolist() == [1796003701000]


def test_epoch_times() -> None:
    d = FlowJsonDecoder("pmacct")
    cases = {
        "1796003700.250000": 1796003700250,
        "1796003700": 1796003700000,
        "1796003700.2": 1796003700200,
        "1796003700.999999999": 1796003700999,
        1796003700: 1796003700000,
    }
    for value, ms in cases.items():
        assert d.decode(rec(timestamp_start=value)).ipv4.event_ms.tolist() == [ms], value


def test_time_parser_matches_the_standard_library() -> None:
    """The vectorised ISO parser agrees with datetime.fromisoformat on random pmacct-style times
    (space or T, 0-9 fraction digits, no zone / Z / offsets), to the millisecond (truncated)."""
    rng = random.Random(12)
    strs, want = [], []
    for _ in range(3000):
        t = dt.datetime(1971, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=rng.randrange(10**17))
        text = t.strftime("%Y-%m-%d") + rng.choice(" T") + t.strftime("%H:%M:%S")
        digits = rng.randrange(10)
        frac = f"{t.microsecond:06d}{rng.randrange(1000):03d}"[:digits]
        if digits:
            text += "." + frac
        zone = rng.choice(["", "Z", "+01:00", "-05:30", "+14:00", "-00:00"])
        text += zone
        offset = (
            0 if zone in ("", "Z", "-00:00") else (1 if zone[0] == "+" else -1) * (int(zone[1:3]) * 60 + int(zone[4:]))
        )
        whole = t.replace(microsecond=0) - dt.timedelta(minutes=offset)
        strs.append(text)
        want.append(int(whole.timestamp()) * 1000 + int((frac + "000")[:3]))
    ms, ok = fj._parse_times_ms(strs)
    assert ok.all()
    assert ms.tolist() == want


def test_goflow2_records() -> None:
    """goflow2 v2 (snake_case) and v1 (CamelCase) names; nanosecond times, time_received_ns when the
    flow time is 0; bad values get the same reasons as pmacct's."""
    base = json.loads(fixture("goflow2-ipfix-mixed")[0])
    d = FlowJsonDecoder("goflow2")

    def g(**change) -> bytes:
        return changed(base, **change)

    assert d.decode(g()).ipv4.event_ms.tolist() == [1796003700250]
    assert d.decode(g(time_flow_start_ns=0)).ipv4.event_ms.tolist() == [base["time_received_ns"] // 1_000_000]
    assert d.decode(g(time_flow_start_ns=KeyError, time_received_ns=KeyError)).ipv4.event_ms.tolist() == [-1]
    v1 = json.dumps(
        {
            "Type": "IPFIX",
            "TimeReceivedNs": 1796003701000000000,
            "TimeFlowStartNs": 1796003700250000000,
            "Bytes": 204,
            "Packets": 3,
            "SrcAddr": "2001:db8::5",
            "DstAddr": "192.0.2.1",
        }
    ).encode()
    out = FlowJsonDecoder("goflow2", family="both").decode(v1)
    assert out.reasons == [None] and len(out.ipv6) == 1 and out.ipv6.event_ms.tolist() == [1796003700250]
    assert FlowJsonDecoder("goflow2", key="dst").decode(v1).ipv4.keys.tolist() == [0xC0000201]
    for change, reason in [
        ({"src_addr": KeyError}, "missing_field"),
        ({"bytes": 1.5}, "bad_counter"),
        ({"packets": -3}, "bad_counter"),
        ({"bytes": 2**63}, "counter_too_large"),
        ({"src_addr": "x"}, "bad_address"),
        ({"src_addr": "2001:db8::1"}, "wrong_family"),
        ({"time_flow_start_ns": "1796003700250000000"}, "bad_time"),
        ({"time_flow_start_ns": -1}, "bad_time"),
        ({"time_flow_start_ns": 999_999}, "bad_time"),
        ({"time_flow_start_ns": 2**64}, "bad_time"),
    ]:
        assert d.decode(g(**change)).reasons == [reason], change


def test_good_and_bad_records_interleaved_keep_their_positions() -> None:
    """Reasons stay aligned with the input and index points back into it."""
    real = fixture("pmacct-ipfix-mixed")
    values = [real[0], b"", real[1], rec(bytes=-1), real[3], rec(ip_src="2001:db8::1", bytes=2**60), real[2]]
    out = FlowJsonDecoder("pmacct", family="both").decode_many(values)
    assert out.reasons == [None, "empty", None, "bad_counter", None, "counter_too_large", None]
    assert out.counts.tolist() == [1, 0, 1, 0, 1, 0, 1]
    decoded = sorted(out.ipv4.index.tolist() + out.ipv6.index.tolist())
    assert decoded == [0, 2, 4, 6]
    src = {i: json.loads(values[i])["ip_src"] for i in decoded}
    for col in (out.ipv4, out.ipv6):
        for i, w in zip(col.index.tolist(), col.weights.tolist()):
            assert w == json.loads(values[i])["packets"] and src[i]
    empty = FlowJsonDecoder("pmacct").decode_many([])
    assert empty.reasons == [] and len(empty.ipv4) == 0 and empty.ipv4.keys.dtype == np.uint32


def test_str_records_and_crlf_lines() -> None:
    """Records may be str (lines of a text file) as well as bytes."""
    line = fixture("pmacct-ipfix-mixed")[0].decode()
    assert FlowJsonDecoder("pmacct").decode(line + "\r").reasons == [None]
    assert split_json_lines(b"a\r\n\n  \nb") == [b"a", b"b"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"schema": "nfdump"},
        {"key": "both"},
        {"weight": "flows"},
        {"family": "ipv5"},
        {"max_counter": 0},
        {"max_counter": True},
        {"max_counter": 1 << 62},
        {"max_record_bytes": 8},
        {"time_fields": ()},
        {"time_fields": "timestamp_start"},
        {"time_fields": ("",)},
    ],
)
def test_bad_options_are_refused(kwargs) -> None:
    with pytest.raises(ValueError, match="FlowJsonDecoder"):
        FlowJsonDecoder(**kwargs)


def _same_batch(a: fj.FlowBatch, b: fj.FlowBatch) -> None:
    assert a.reasons == b.reasons
    for ca, cb in ((a.ipv4, b.ipv4), (a.ipv6, b.ipv6)):
        assert ca.index.tolist() == cb.index.tolist()
        keys_a = [k.tolist() for k in ca.keys] if isinstance(ca.keys, tuple) else ca.keys.tolist()
        keys_b = [k.tolist() for k in cb.keys] if isinstance(cb.keys, tuple) else cb.keys.tolist()
        assert keys_a == keys_b
        assert ca.keys.dtype == cb.keys.dtype if not isinstance(ca.keys, tuple) else True
        assert ca.weights.tolist() == cb.weights.tolist()
        assert ca.event_ms.tolist() == cb.event_ms.tolist()


# Records a batch's columnar path must judge exactly as the record-by-record path: every BAD record
# that parses to an object, plus good variants (zero or absent first times, integer times, IPv6).
_OBJECT_LEVEL = [v for v, r in BAD if v and r not in ("empty", "oversized", "invalid_utf8", "bad_json")]
_GOOD_VARIANTS = [
    rec(),
    rec(ip_src="192.0.2.77", packets=1, bytes=1),
    rec(ip_src="2001:db8::9"),
    rec(timestamp_start="0000-00-00 00:00:00.000000"),
    rec(timestamp_start=KeyError),
    rec(timestamp_start=0, timestamp_end="2026-11-30 01:55:01.5"),
    rec(timestamp_start=1796003700),
    rec(timestamp_start="1796003700.250000"),
    rec(timestamp_start="2026-11-30T01:55:00Z"),
    rec(packets=MAX_COUNTER, bytes=MAX_COUNTER),
]


@pytest.mark.parametrize("family, weight", [("ipv4", "packets"), ("both", "bytes"), ("ipv6", "records")])
def test_columnar_batches_match_record_by_record(family: str, weight: str) -> None:
    """decode_many (columnar for batches of objects) == decode_each on 300 seeded random batches:
    all good, a few bad, mostly bad, with and without a parse-level bad record (which sends the
    whole batch record by record)."""
    rng = random.Random(20261201)
    decoder = FlowJsonDecoder("pmacct", family=family, weight=weight)
    real = fixture("pmacct-ipfix-mixed") + fixture("pmacct-ipfix-mixed-epoch")
    parse_bad = [v for v, r in BAD if r in ("empty", "oversized", "invalid_utf8", "bad_json")]
    for trial in range(300):
        n = rng.choice([16, 17, 40, 200])
        bad_share = rng.choice([0.0, 0.02, 0.5, 1.0])
        values = []
        for _ in range(n):
            pool = _OBJECT_LEVEL if rng.random() < bad_share else rng.choice([real, _GOOD_VARIANTS])
            values.append(rng.choice(pool))
        if trial % 7 == 0:
            values[rng.randrange(n)] = rng.choice(parse_bad)
        _same_batch(decoder.decode_many(values), decoder.decode_each(values))


#: a goflow2 v1 record (CamelCase names)
GOFLOW2_V1 = {
    "Type": "IPFIX",
    "TimeReceivedNs": 1796003701000000000,
    "TimeFlowStartNs": 1796003700250000000,
    "Bytes": 204,
    "Packets": 3,
    "SrcAddr": "192.0.2.5",
    "DstAddr": "192.0.2.1",
}


def test_columnar_goflow2_batches_match_record_by_record() -> None:
    """The same for goflow2: v2 and v1 names mixed in one batch, zero flow times, bad counters."""
    rng = random.Random(7)
    base = json.loads(fixture("goflow2-ipfix-mixed")[0])
    v1 = GOFLOW2_V1
    pool = [
        changed(base),
        changed(base, time_flow_start_ns=0),
        changed(base, src_addr="2001:db8::1"),
        json.dumps(v1).encode(),
        changed(v1, TimeFlowStartNs=0),
        changed(base, bytes=1.5),
        changed(base, packets=-3),
        changed(base, bytes=2**63),
        changed(base, src_addr=KeyError),
        changed(base, time_flow_start_ns=2**64),
        changed(base, time_flow_start_ns="1"),
        changed(base, src_addr=None, SrcAddr="192.0.2.9"),
    ]
    for family in ("ipv4", "both"):
        decoder = FlowJsonDecoder("goflow2", family=family, weight="bytes")
        for _ in range(200):
            values = [rng.choice(pool) for _ in range(rng.choice([16, 50]))]
            _same_batch(decoder.decode_many(values), decoder.decode_each(values))


@pytest.mark.parametrize("digits", [20, 4301, 10_000])
def test_a_record_with_an_address_and_a_counter_of_any_length_may_hold_an_element(digits: int) -> None:
    """A refused record whose key field is an address is never counted as unparsable (docs/ALGORITHMS.md
    §0.1 f), however long its counter: the standard library refuses integers of more than 4300 digits,
    and ``holds_element`` must not read that as "no element"."""
    decoder = FlowJsonDecoder("pmacct")  # key field ip_src
    record = ('{"ip_src": "192.0.2.1", "packets": ' + "9" * digits + ', "bytes": 1}').encode()
    batch = decoder.decode(record)
    assert batch.reasons[0] is not None  # refused (the counter is not a sane integer)
    assert decoder.holds_element(record)  # but it holds an address: not counted in public
    bad = ('{"ip_src": "not an address", "packets": ' + "9" * digits + ', "bytes": 1}').encode()
    assert not decoder.holds_element(bad)  # a record without an address still is
