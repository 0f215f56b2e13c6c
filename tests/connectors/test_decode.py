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
