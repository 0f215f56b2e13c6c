"""The message-format registry (:mod:`dphhh.connectors.messages`): every format keeps its own contract,
and a new format is one class and its registration.

* every registered format, on a corpus of awkward messages: each reason it gives is one of its own
  ``reasons``; a batch decodes message for message as each message alone; a refused message that
  ``holds_element`` says holds none really decodes to nothing under a format that could read it;
* a format defined here (``hex-ipv4``: one address as 8 hex digits) is registered and then read by
  :class:`MessageDecoder`, accepted by the job's config, checked against the hierarchy kind, listed
  in the dead-letter reasons' source and in the formats reference page — with no other file edited;
* the registry refuses a second format of one name and a class that states no reasons.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest

from dphhh.connectors.decode import MessageDecoder
from dphhh.connectors.messages import (
    BUILT_IN,
    MESSAGE_FORMATS,
    DecodedBatch,
    DecoderOptions,
    MessageFormat,
    register_message_format,
)
from dphhh.stream.config import ConfigError, load_config
from dphhh.stream.reference import formats_reference

CORPUS: list[bytes | None] = [
    None,
    b"",
    b"\xff\xfe",
    b"1.2.3.4",
    b" 10.0.0.1 ",
    b"300.1.1.1",
    b"2001:db8::1",
    b"\x01\x02\x03\x04",
    b"\x01\x02\x03\x04\x05\x06\x07\x08",
    b"\x01\x02\x03",
    b"x" * 200,
    json.dumps({"ip": "1.2.3.4", "t": 5, "user": "u"}).encode(),
    json.dumps({"ip": "1.2.3.4"}).encode(),
    json.dumps({"ip": 7}).encode(),
    b"{not json",
    b"[1, 2]",
    b"de/bavaria/munich/leopoldstr",
    b"de//munich/x",
    b"de/bavaria",
    json.dumps(
        {"event_type": "purge", "ip_src": "192.0.2.10", "ip_dst": "198.51.100.7", "packets": 3, "bytes": 204}
    ).encode(),
    json.dumps({"ip_src": "192.0.2.10", "ip_dst": "198.51.100.7", "packets": -1, "bytes": 2}).encode(),
]


def decoders() -> Iterator[tuple[str, MessageDecoder]]:
    for name in MESSAGE_FORMATS:
        yield name, MessageDecoder(name, max_message_bytes=128)
    yield "json+unit", MessageDecoder("json", max_message_bytes=128, json_time_field="t", unit_field="user")
    yield "flow-json+pairs", MessageDecoder("flow-json", flow_key="pair", flow_weight="packets")
    yield "packed-pairs+units", MessageDecoder("packed-ipv4-pairs", source_units=True)


@pytest.mark.parametrize("label, decoder", list(decoders()), ids=lambda x: x if isinstance(x, str) else "")
def test_every_format_keeps_its_own_reasons_and_decodes_a_batch_as_each_message_alone(
    label: str, decoder: MessageDecoder
) -> None:
    own = set(type(decoder.messages).reasons)
    batch = decoder.decode_many(list(CORPUS))
    assert len(batch.reasons) == len(CORPUS) and batch.counts.shape == (len(CORPUS),)
    assert {r for r in batch.reasons if r is not None} <= own
    at = 0
    for value, reason, count in zip(CORPUS, batch.reasons, batch.counts.tolist()):
        alone = decoder.decode(value)
        assert alone.reason == reason, (label, value)
        assert count == (0 if reason else len(alone.values))
        if reason is None:
            got = batch.values[at : at + count]
            assert list(np.asarray(got).tolist() if not isinstance(got, list) else got) == list(
                np.asarray(alone.values).tolist() if not isinstance(alone.values, list) else alone.values
            )
        at += count
    assert sum(r is None for r in batch.reasons) > 0, f"{label}: the corpus holds none of its messages"
    assert sum(r is not None for r in batch.reasons) > 0, f"{label}: the corpus holds no bad message"


def test_the_built_in_formats_are_the_registry_in_order() -> None:
    assert tuple(MESSAGE_FORMATS.values())[: len(BUILT_IN)] == BUILT_IN
    assert [c.name for c in BUILT_IN] == ["packed-ipv4", "packed-ipv4-pairs", "text-ipv4", "json", "path", "flow-json"]


class HexIPv4(MessageFormat):
    """A format of the test's own: one IPv4 address as 8 hex digits per message."""

    name = "hex-ipv4"
    summary = "one IPv4 address as 8 hex digits"
    reasons = ("empty", "oversized", "bad_hex")
    hierarchy_kinds = frozenset({"ipv4"})

    def decode_many(self, values: list[bytes | None]) -> DecodedBatch:
        reasons: list[str | None] = []
        out = []
        for value in values:
            reason = self.size_reason(value)
            if reason is None:
                try:
                    assert value is not None and len(value) == 8
                    out.append(int(value, 16))
                except (AssertionError, ValueError):
                    reason = "bad_hex"
            reasons.append(reason)
        counts = np.array([r is None for r in reasons], dtype=np.int64)
        return DecodedBatch(reasons, counts, np.array(out, dtype=np.uint32))

    def holds_element(self, value: bytes | None) -> bool:
        return bool(value)


@pytest.fixture
def hex_format() -> Iterator[type[MessageFormat]]:
    register_message_format(HexIPv4)
    try:
        yield HexIPv4
    finally:
        del MESSAGE_FORMATS[HexIPv4.name]


def test_a_new_format_is_one_class_and_its_registration(hex_format) -> None:
    decoder = MessageDecoder("hex-ipv4")
    batch = decoder.decode_many([b"0a000001", b"zz", b""])
    assert batch.reasons == [None, "bad_hex", "empty"] and batch.values.tolist() == [0x0A000001]
    assert decoder.decode(b"c0a80001").values.tolist() == [0xC0A80001]
    cfg = load_config(None, environ={}, overrides=["input.format=hex-ipv4"])
    assert cfg.values["input"]["format"] == "hex-ipv4"
    with pytest.raises(ConfigError, match=r"needs input.format 'path', got 'hex-ipv4'"):
        load_config(None, environ={}, overrides=["input.format=hex-ipv4", "hierarchy.spec=path:3"])
    with pytest.raises(ConfigError, match=r"privacy.unit_key 'source-ipv4' needs input.format"):
        load_config(None, environ={}, overrides=["input.format=hex-ipv4", "privacy.unit_key=source-ipv4"])
    assert "| `hex-ipv4` | one IPv4 address as 8 hex digits |" in formats_reference()


def test_without_its_registration_the_format_is_refused() -> None:
    with pytest.raises(ValueError, match="MessageDecoder: format must be one of"):
        MessageDecoder("hex-ipv4")
    with pytest.raises(ConfigError, match="input.format must be one of"):
        load_config(None, environ={}, overrides=["input.format=hex-ipv4"])


def test_the_registry_refuses_a_second_format_of_one_name_and_a_class_without_reasons() -> None:
    class Again(HexIPv4):
        name = "text-ipv4"

    with pytest.raises(ValueError, match="already registered"):
        register_message_format(Again)

    class NoReasons(MessageFormat):
        name = "no-reasons"
        summary = "nothing"
        hierarchy_kinds = frozenset({"ipv4"})

    with pytest.raises(TypeError, match="sets no reasons"):
        register_message_format(NoReasons)
    assert "no-reasons" not in MESSAGE_FORMATS


def test_options_a_format_does_not_read_are_refused() -> None:
    with pytest.raises(ValueError, match="unit_field applies to the json format only"):
        MessageDecoder("text-ipv4", unit_field="user")
    with pytest.raises(ValueError, match="source_units applies to the packed-ipv4-pairs and flow-json formats only"):
        MessageDecoder("path", source_units=True)
    assert MESSAGE_FORMATS["json"](DecoderOptions(unit_field="u")).has_units
