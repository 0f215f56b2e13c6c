"""Batched decoding: the Java batcher's record layout, decoding many messages at once, and the
compact decode → sketch payloads — each checked against the one-message-at-a-time reference."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from dphhh.connectors.decode import MessageDecoder
from dphhh.connectors.kafka_io import pack_ipv4
from dphhh.connectors.text import parse_ipv4_each
from dphhh.stream.clock import TICK
from dphhh.stream.config import load_config
from dphhh.stream.decode_batch import decode_batch
from dphhh.stream.message_batch import NO_TIMESTAMP, BatchFormatError, ParsedFlows, pack_batch, read_batch, unpack_batch
from dphhh.stream.schedule import ReleaseSchedule
from dphhh.stream.wire import expand_by_partition, ipv4_payloads, unpack_levels


def _random_message(rng: random.Random) -> bytes | None:
    """A message of any kind: good and bad IPv4 text, packed bytes, JSON, paths, junk, None."""
    kind = rng.randrange(11)
    if kind == 0:
        return None
    if kind == 1:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(14)))
    if kind == 2:
        return ".".join(str(rng.randrange(300)) for _ in range(4)).encode()
    if kind == 3:
        return rng.choice([b" 10.0.0.1 ", b"::1", b"1.2.3", b"01.2.3.4", b"\xff\xfe", b"1.2.3.4\n"])
    if kind == 4:
        return json.dumps({"ip": f"10.0.{rng.randrange(3)}.1", "ts": rng.randrange(-5, 50_000)}).encode()
    if kind == 5:
        return rng.choice(
            [
                b'{"ip": 5}',
                b"{bad",
                b'{"dst": "1.2.3.4"}',
                b'{"ip": "1.2.3.4", "ts": "x"}',
                b'{"ip": "1.2.3.4", "src": "u1"}',
                b'{"ip": "1.2.3.4", "src": 7}',
                b'{"ip": "1.2.3.4", "src": true}',
            ]
        )
    if kind == 6:
        return "/".join(rng.choice(["de", "fr", "", " a ", "b"]) for _ in range(rng.randrange(1, 6))).encode()
    if kind == 7:
        return b"x" * rng.randrange(60, 80)  # oversized at max_message_bytes=64
    return bytes(rng.randrange(256) for _ in range(4 * rng.randrange(1, 5)))


DECODERS = {
    "packed-ipv4": dict(),
    "text-ipv4": dict(),
    "json": dict(json_field="ip", json_time_field="ts"),
    "json-no-time": dict(json_field="ip"),
    "json-unit": dict(json_field="ip", unit_field="src"),
    "packed-ipv4-pairs": dict(),
    "path": dict(path_depth=3),
}


@pytest.mark.parametrize("name", sorted(DECODERS))
def test_decode_many_equals_decoding_one_message_at_a_time(name: str) -> None:
    """For every format, decode_many gives each message the reason, values and event time decode gives it."""
    fmt = "json" if name.startswith("json") else name
    decoder = MessageDecoder(fmt, max_message_bytes=64, **DECODERS[name])
    rng = random.Random(name)
    messages = [_random_message(rng) for _ in range(4000)]
    many = decoder.decode_many(messages)
    one = [decoder.decode(m) for m in messages]
    assert many.reasons == [d.reason for d in one]
    assert many.counts.tolist() == [len(d.values) if d.ok else 0 for d in one]
    assert [str(v) for v in list(many.values)] == [str(v) for d in one if d.ok for v in list(d.values)]
    if fmt == "json":
        assert many.event_times.tolist() == [-1 if d.event_time is None else d.event_time for d in one]
    if decoder.has_units:
        assert many.units.tolist() == [u for d in one if d.ok for u in d.units.tolist()]
        assert many.units.size == len(many.values)
    assert 0 < sum(r is None for r in many.reasons) < len(messages)  # the sample mixes good and bad


def test_parse_ipv4_each_keeps_one_entry_per_text() -> None:
    """Every text gets a value and a validity flag, in order, with parse_ipv4's grammar."""
    values, valid = parse_ipv4_each(["1.2.3.4", "256.1.1.1", " 10.0.0.1", "", "0.0.0.0"])
    assert valid.tolist() == [True, False, True, False, True]
    assert values[valid].tolist() == [0x01020304, 0x0A000001, 0]


def test_batch_layout_round_trips_and_rejects_corruption() -> None:
    """pack_batch/unpack_batch round-trip values, nulls and missing timestamps; damage is refused."""
    values = [b"abc", None, b"", b"\x00" * 9]
    timestamps = [5, None, -1, 2**40]
    data = pack_batch(timestamps, values)
    ts, back = unpack_batch(data)
    assert back == values
    assert ts.tolist() == [5, NO_TIMESTAMP, -1, 2**40]
    empty_ts, empty_values = unpack_batch(pack_batch([], []))
    assert empty_ts.size == 0 and empty_values == []
    for broken in (b"", b"DPB9" + data[4:], b"DPB2" + data[4:], data[:-1], data + b"x", data[:10]):
        with pytest.raises(BatchFormatError, match="Possible corruption"):
            unpack_batch(broken)


def test_flow_batch_layout_round_trips_its_columns_and_rejects_corruption() -> None:
    """A DPB2 record (the Java batcher with its flow parser) gives back its values, timestamps and
    the parsed records' columns; damaged columns, flags or values are refused."""
    values = [b'{"a": 1}', None, b"raw", b'{"b": 2}']
    flows = ParsedFlows(
        np.array([True, False, False, True]),
        np.array([1, 2**32 - 1], dtype=np.uint32),
        np.array([0, 7], dtype=np.uint32),
        np.array([3, 1500], dtype=np.int64),
        np.array([-1, 2**41], dtype=np.int64),
    )
    data = pack_batch([1, 2, None, 4], values, flows)
    batch = read_batch(data)
    assert batch.values() == values and batch.value(2) == b"raw" and batch.values([3, 0]) == [values[3], values[0]]
    assert batch.timestamps.tolist() == [1, 2, NO_TIMESTAMP, 4]
    assert batch.flows is not None and batch.flows.parsed.tolist() == [True, False, False, True]
    for got, want in zip(
        (batch.flows.sources, batch.flows.destinations, batch.flows.weights, batch.flows.event_ms),
        list(vars(flows).values())[1:],
    ):
        assert got.tolist() == want.tolist()
    flags_at = len(data) - sum(len(v) for v in values if v) - len(values)
    two_flags = data[:flags_at] + b"\x01\x01" + data[flags_at + 2 :]  # three flags set, two columns
    null_parsed = pack_batch([1, 2], [None, b"x"], ParsedFlows(np.array([True, False]), *([np.zeros(1)] * 4)))
    for broken in (
        data[:-1],
        data[:12],
        two_flags,
        null_parsed,
        data[: 8 + 12 * 4] + b"\xff\xff\xff\x7f" + data[8 + 12 * 4 + 4 :],
    ):
        with pytest.raises(BatchFormatError, match="Possible corruption"):
            read_batch(broken)


def _live(size: int = 1000, **kw) -> ReleaseSchedule:
    return ReleaseSchedule(size_ms=size, origin_ms=0, mode="live", **kw)


def test_decode_batch_matches_the_message_by_message_rules() -> None:
    """Clock records are skipped; bad messages are dead-lettered with their reason and Kafka time
    (counted only when unparsable and holding no element), messages without a time as no_timestamp
    (never counted), and the rest grouped by the window of their arrival and their arrival epoch
    (100 ms), in input order within a group."""
    decoder = MessageDecoder("text-ipv4")
    messages = [b"10.0.0.1", TICK, b"bad", b"10.0.0.2", b"10.0.0.3", b"10.0.0.4", b"10.0.0.5", TICK, b"10.0.0.6"]
    timestamps = [1500, 1550, 1600, None, 200, 2100, 1999, 3000, -1]
    out = decode_batch(pack_batch(timestamps, messages), decoder, _live())
    assert out.ticks == 2
    assert out.dead == [
        ("bad_ipv4", b"bad", 1600, True),
        ("no_timestamp", b"10.0.0.2", None, False),
        ("no_timestamp", b"10.0.0.6", -1, False),
    ]
    assert [(start, epoch, v.tolist()) for start, epoch, v, _, _ in out.windows] == [
        (0, 200, [0x0A000003]),
        (1000, 1500, [0x0A000001]),
        (1000, 1900, [0x0A000005]),
        (2000, 2100, [0x0A000004]),
    ]


def test_decode_batch_takes_json_event_time_over_the_kafka_timestamp() -> None:
    """With a JSON time field, the message's own time chooses its window; the record timestamp is its
    arrival, against which the public band and the window's release time are checked, element by element."""
    decoder = MessageDecoder("json", json_field="ip", json_time_field="t")
    rows = [
        ("1.1.1.1", 5500, 5000),
        ("2.2.2.2", 4010, 4999),
        ("3.3.3.3", 4010, 5000),  # 5000: W=4000's release
        ("4.4.4.4", 9000, 1000),
        ("5.5.5.5", 10, 5000),
        ("6.6.6.6", 2**61, 5000),
    ]
    messages = [json.dumps({"ip": ip, "t": t}).encode() for ip, t, _ in rows]
    out = decode_batch(
        pack_batch([a for *_, a in rows], messages), decoder, _live(grace_ms=0, max_future_ms=5000, max_past_ms=3000)
    )
    # the window of the element's own time, the epoch of its arrival
    assert [(s, e, v.tolist()) for s, e, v, _, _ in out.windows] == [
        (4000, 4900, [0x02020202]),
        (5000, 5000, [0x01010101]),
    ]
    assert [(r, m) for r, m, _, _ in out.dead] == [
        ("late", messages[2]),
        ("too_far_ahead", messages[3]),
        ("too_far_behind", messages[4]),
        ("too_far_ahead", messages[5]),
    ]
    graced = decode_batch(pack_batch([5000], messages[2:3]), decoder, _live(grace_ms=1))
    assert [(s, v.tolist()) for s, _, v, _, _ in graced.windows] == [(4000, [0x03030303])]  # arrived before end + grace


def test_replay_counts_its_range_and_dead_letters_the_rest() -> None:
    """A replay counts every element of [origin, until) whenever it arrives, and rejects the others
    one by one as before_origin / after_until."""
    schedule = ReleaseSchedule(size_ms=1000, origin_ms=1000, mode="replay", until_ms=3000)
    a, b, c, d = (pack_ipv4(np.array([x], np.uint32)) for x in (1, 2, 3, 4))
    out = decode_batch(pack_batch([2999, 999, 3000, 1000], [a, b, c, d]), MessageDecoder("packed-ipv4"), schedule)
    assert [(s, e, v.tolist()) for s, e, v, _, _ in out.windows] == [(1000, 1000, [4]), (2000, 2900, [1])]
    assert [(r, m) for r, m, _, _ in out.dead] == [("before_origin", b), ("after_until", c)]


def test_decode_batch_of_paths_keeps_them_as_strings() -> None:
    """Path values stay a list of normalised strings per window."""
    out = decode_batch(pack_batch([7, 8], [b"a/b/c", b" d / e /f"]), MessageDecoder("path", path_depth=3), _live(10))
    assert out.windows == [(0, 0, ["a/b/c", "d/e/f"], None, None)]


@pytest.mark.parametrize("partitions", [1, 3])
def test_ipv4_payloads_carry_the_same_keys_as_the_level_arrays(partitions: int) -> None:
    """The compact IPv4 payload of each partition unpacks to exactly expand_by_partition's keys."""
    cfg = load_config(overrides=[f"privacy.partitions={partitions}", "hierarchy.spec=ipv4:8,16,24,32"], environ={})
    values = np.random.default_rng(partitions).integers(0, 2**32, 5000, dtype=np.uint64).astype(np.uint32)
    values[:2000] = values[:2000] & np.uint32(0xFFFF0000)  # shared prefixes
    expected = expand_by_partition(values, cfg)
    payloads = ipv4_payloads(values, cfg)
    assert sorted(payloads) == sorted(expected)
    for p, levels in expected.items():
        got = unpack_levels(payloads[p], cfg.hierarchy)
        assert [g.tolist() for g in got] == [e.tolist() for e in levels]
    assert ipv4_payloads(np.empty(0, np.uint32), cfg) == {}


def test_unknown_payload_kind_is_refused() -> None:
    """A payload of an unknown kind is a clear error, not a silent empty sketch update."""
    cfg = load_config(environ={})
    with pytest.raises(ValueError, match="Possible corruption"):
        unpack_levels(np.array([9, 0], dtype=np.int64).tobytes(), cfg.hierarchy)


def test_packed_messages_split_across_windows_keep_order() -> None:
    """Packed messages of several addresses land in their windows with every address, in order; a
    packed message far over max_message_bytes is decoded like any other (one more element must not
    drop the others, docs/ALGORITHMS.md §0.1 e)."""
    a, b, c = pack_ipv4(np.array([1, 2], np.uint32)), pack_ipv4(np.array([3], np.uint32)), b"\x00\x01"
    big = pack_ipv4(np.arange(5000, dtype=np.uint32))
    out = decode_batch(
        pack_batch([10, 1010, 20, 30], [a, b, c, big]), MessageDecoder("packed-ipv4", max_message_bytes=64), _live()
    )
    assert out.dead == [("bad_length", c, 20, True)]  # two bytes: not even one address, so counted
    assert [(s, v.tolist()) for s, _, v, _, _ in out.windows] == [(0, [1, 2, *range(5000)]), (1000, [3])]


def test_a_batch_of_interleaved_epochs_splits_into_groups_in_batch_order() -> None:
    """A batch whose messages interleave many (window, epoch) groups, with refused messages among
    them, gives each group its elements in batch order, groups ascending — compared with a literal
    reference that walks the messages one by one."""
    rng = np.random.default_rng(7)
    schedule = _live(1000)
    stamps, messages, expected = [], [], {}
    for i in range(400):
        stamp = int(rng.integers(0, 3000))
        if i % 37 == 5:  # not an address: dead-lettered, no group
            stamps.append(stamp)
            messages.append(b"\x00\x01")
            continue
        addresses = rng.integers(0, 2**32, int(rng.integers(1, 6)), dtype=np.uint64).astype(np.uint32)
        stamps.append(stamp)
        messages.append(pack_ipv4(addresses))
        group = (stamp // 1000 * 1000, stamp // schedule.epoch_ms * schedule.epoch_ms)
        expected.setdefault(group, []).extend(addresses.tolist())
    out = decode_batch(pack_batch(stamps, messages), MessageDecoder("packed-ipv4"), schedule)
    assert [((s, e), v.tolist()) for s, e, v, _, _ in out.windows] == sorted(expected.items())
    assert len(out.dead) == sum(1 for m in messages if m == b"\x00\x01")


def test_a_batch_of_normal_paths_decodes_at_once_as_one_at_a_time() -> None:
    """The path format's whole-batch route (every message already a normal path of the right depth:
    one pattern match over the joined batch) gives what ``decode`` gives message by message; a batch
    with one message that is not (a line feed inside, an empty message, a wrong depth, bad UTF-8,
    spaces to strip, an oversized one) takes the loop and still agrees."""
    decoder = MessageDecoder("path", max_message_bytes=64, path_depth=3)
    rng = random.Random(5)
    parts = ["de", "by", "é", "a b", "x\u00a0y", "0", "\u4e2d"]
    good = ["/".join(rng.choice(parts) for _ in range(3)).encode() for _ in range(2000)]
    for odd in (None, b"de/by/a\nb", b"", b"de/by", b"de/\xff/x", b" de/by/x", b"de/by/" + b"x" * 70, b"de/by/x"):
        batch = list(good) if odd is None else [*good[:700], odd, *good[700:]]
        many = decoder.decode_many(batch)
        one = [decoder.decode(m) for m in batch]
        assert many.reasons == [d.reason for d in one]
        assert many.counts.tolist() == [len(d.values) if d.ok else 0 for d in one]
        assert list(many.values) == [v for d in one if d.ok for v in d.values]
    assert decoder.messages._all_normal(good) is not None  # the whole-batch route was taken above
    for odd in (None, b"de/by/a\nb", b"", b"de/by", b"de/\xff/x", b" de/by/x", b"de/by/" + b"x" * 70):
        assert decoder.messages._all_normal([*good, odd]) is None  # and these take the loop
