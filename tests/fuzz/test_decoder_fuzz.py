"""Property-based fuzzing of every stream decoder (hypothesis): random bytes, truncated packed batches,
lengths not a multiple of 4, IPv6 on an IPv4 topic, oversized messages, invalid UTF-8, JSON without
the field, paths with empty components or huge depth. No exception escapes a decoder; every message
is either good or classified with a known reason; batch decoding accounts for every message.

Hypothesis runs a fixed number of examples per test (derandomized), so a run is reproducible."""

from __future__ import annotations

import json

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dphhh.connectors.decode import FORMATS, REASONS, MessageDecoder
from dphhh.stream.clock import TICK, is_tick
from dphhh.stream.decode_batch import decode_batch
from dphhh.stream.message_batch import BatchFormatError, pack_batch, unpack_batch
from dphhh.stream.schedule import ELEMENT_REASONS, ReleaseSchedule

FUZZ = settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MAX_BYTES = 256
KNOWN = set(REASONS) | {None}


def _ipv4_text() -> st.SearchStrategy[bytes]:
    octet = st.integers(0, 300).map(str) | st.sampled_from(["01", "-1", "", "a", "1e2", "٣"])
    return st.lists(octet, min_size=1, max_size=6).map(lambda parts: ".".join(parts).encode("utf-8"))


def _json_message() -> st.SearchStrategy[bytes]:
    value = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.text(max_size=20), _ipv4_text().map(bytes.decode)
    )
    obj = st.dictionaries(st.sampled_from(["ip", "src", "ts", "t", "x"]), value, max_size=4)
    return st.one_of(
        obj.map(lambda d: json.dumps(d).encode()),
        st.text(max_size=40).map(str.encode),
        st.just(b"[" * 5000),
        st.just(b'{"ip": "1.2.3.4", "ts": 1e400}'),
    )


def _path_message() -> st.SearchStrategy[bytes]:
    component = st.sampled_from(["de", "by", "", " ", "a" * 300, "x/y", "é"])
    return st.lists(component, min_size=0, max_size=80).map(lambda parts: "/".join(parts).encode("utf-8"))


MESSAGES = st.one_of(
    st.none(),
    st.binary(max_size=40),  # random bytes
    st.binary(min_size=1, max_size=10).map(lambda b: b * 4),  # plausible packed batches
    st.binary(min_size=4, max_size=64).map(lambda b: b[: len(b) - len(b) % 4 + 1]),  # truncated
    st.binary(min_size=MAX_BYTES + 1, max_size=MAX_BYTES + 40),  # oversized
    st.sampled_from([b"\xff\xfe", b"\xc3\x28", b"10.0.0.1\x00", b"::1", b"2001:db8::1", b"fe80::1%eth0"]),
    _ipv4_text(),
    _json_message(),
    _path_message(),
    st.just(TICK),  # the live job's clock record
)


def _decoders() -> list[MessageDecoder]:
    out = []
    for fmt in FORMATS:
        out.append(
            MessageDecoder(fmt, max_message_bytes=MAX_BYTES, json_field="ip", json_time_field="ts", path_depth=3)
        )
    out.append(MessageDecoder("json", max_message_bytes=MAX_BYTES, json_field="src"))
    out.append(MessageDecoder("json", max_message_bytes=MAX_BYTES, json_field="ip", unit_field="src"))
    return out


@FUZZ
@given(st.lists(MESSAGES, max_size=30))
def test_no_decoder_raises_and_every_reason_is_known(messages: list[bytes | None]) -> None:
    """Every decoder classifies every message (good, or one of the documented reasons) without raising,
    and decoding the batch gives message for message the same outcome."""
    for decoder in _decoders():
        one = [decoder.decode(m) for m in messages]
        assert {d.reason for d in one} <= KNOWN
        many = decoder.decode_many(messages)
        assert many.reasons == [d.reason for d in one]
        assert many.counts.tolist() == [len(d.values) if d.ok else 0 for d in one]
        assert len(many.values) == int(many.counts.sum())
        # the same values, times and units as message-by-message decoding, in message order
        assert list(np.asarray(many.values).tolist()) == [x for d in one if d.ok for x in np.asarray(d.values).tolist()]
        if many.event_times is not None:
            assert many.event_times.tolist() == [-1 if not d.ok or d.event_time is None else d.event_time for d in one]
        if decoder.has_units:  # every kept value has its privacy unit
            assert many.units.size == len(many.values)
            assert many.units.tolist() == [u for d in one if d.ok for u in d.units.tolist()]


@FUZZ
@given(
    st.lists(st.tuples(st.one_of(st.none(), st.integers(-5, 50_000)), MESSAGES), max_size=30),
    st.sampled_from(["live", "replay"]),
)
def test_batch_decoding_accounts_for_every_message(items: list[tuple[int | None, bytes | None]], mode: str) -> None:
    """Each message of a batch is skipped (a clock record), dead-lettered or kept — exactly one of them,
    by its own content and times only — and the kept ones keep all their values (good records in a
    batch with bad ones are not lost)."""
    timestamps = [t for t, _ in items]
    messages = [m for _, m in items]
    schedule = ReleaseSchedule(
        size_ms=1000, origin_ms=2000, mode=mode, grace_ms=100, until_ms=40_000, max_future_ms=3000, max_past_ms=3000
    )
    for decoder in _decoders():
        out = decode_batch(pack_batch(timestamps, messages), decoder, schedule)
        ticks = [is_tick(m) for m in messages]
        decoded = [decoder.decode(m) for m, tick in zip(messages, ticks) if not tick]
        stamps = [t for t, tick in zip(timestamps, ticks) if not tick]
        timed = [(d, t) for d, t in zip(decoded, stamps) if d.ok and t is not None and t >= 0]
        verdicts = [schedule.accept(np.array([_time(d, t)]), np.array([t]))[1][0] for d, t in timed]
        kept = sum(len(v) for _, _, v, _, _ in out.windows)
        assert out.ticks == sum(ticks)
        assert kept == sum(len(d.values) for (d, _), v in zip(timed, verdicts) if v < 0)
        assert len(out.dead) == len(decoded) - sum(1 for v in verdicts if v < 0)
        assert {r for r, _, _, _ in out.dead} <= set(REASONS) | {"no_timestamp"} | set(ELEMENT_REASONS)


def _time(d, t: int) -> int:
    return d.event_time if d.event_time is not None else t


@FUZZ
@given(st.binary(max_size=200))
def test_random_batch_records_are_refused_cleanly(data: bytes) -> None:
    """A record that is not a well-formed batch raises BatchFormatError ("Possible corruption"), nothing else."""
    try:
        timestamps, values = unpack_batch(data)
    except BatchFormatError as exc:
        assert "Possible corruption" in str(exc)
    else:
        assert len(timestamps) == len(values)


def test_huge_path_depth_and_huge_message_are_classified() -> None:
    """A path 100,000 components deep and a 4 MiB message are classified, not crashed on."""
    deep = "/".join(["a"] * 100_000).encode()
    assert MessageDecoder("path", max_message_bytes=1 << 20, path_depth=3).decode(deep).reason in REASONS
    huge = np.zeros(1 << 20, dtype=np.uint32).tobytes()  # 4 MiB: a packed message is decoded whatever its size
    assert MessageDecoder("packed-ipv4", max_message_bytes=1 << 20).decode(huge).values.size == 1 << 20
    assert MessageDecoder("text-ipv4", max_message_bytes=1 << 20).decode(huge).reason == "oversized"
