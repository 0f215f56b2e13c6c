"""The one-address formats: one IPv4 address per message, as text or in a JSON object.

* ``text-ipv4``: one dotted-quad address per message (UTF-8);
* ``json``: a JSON object with the address (dotted quad) in a configurable field (``json_field``);
  optionally an event-time field (``json_time_field``, epoch milliseconds) and a privacy-unit
  field (``unit_field``, any string or integer), whose value becomes a 128-bit unit key keyed with
  the deployment's secret (:func:`dphhh.privacy.unit_cap.unit_keys_of`; ``unit_secret``). Without
  a secret — tests, fuzzing, tools that publish nothing — the unit values are hashed under the
  fixed public fallback key: as wide (aiming a value at a given key still takes a 128-bit second
  preimage) but a public function of the value, which no deployment relies on.

A batch is decoded as a batch: each message is read alone (size, UTF-8, JSON fields), then every
address is parsed at once (:func:`dphhh.connectors.text.parse_ipv4_each`) and every unit value
keyed in one call — message for message the outcome of :meth:`~MessageFormat.decode`, which reads
one message by the scalar parser (the reference the batch path is tested against).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from dphhh.privacy.unit_cap import UNIT_KEY_DTYPE, UnitKeyHasher

from ..skips import SkipCounter
from ..text import may_hold_address, parse_ipv4, parse_ipv4_each
from .base import Decoded, DecodedBatch, DecoderOptions, TextMessageFormat, json_object

__all__ = ["JsonAddress", "TextIPv4"]


def _address_reason(text: str) -> str:
    """The reason of an address text that does not parse: an IPv6 address is of the wrong family."""
    return "wrong_family" if ":" in text else "bad_ipv4"


@dataclass
class _Addresses:
    """A batch read: every message's reason, its count (0 or 1), the parsed addresses, and for the
    messages they came from their positions, event times (-1: none) and unit values."""

    reasons: list[str | None]
    counts: np.ndarray
    addresses: np.ndarray
    at: np.ndarray
    times: np.ndarray
    units: list[str | int]


class TextIPv4(TextMessageFormat):
    """``text-ipv4``: one dotted-quad IPv4 address per message (UTF-8)."""

    name = "text-ipv4"
    summary = "one dotted-quad IPv4 address per message (UTF-8)"
    reasons: ClassVar[tuple[str, ...]] = ("empty", "oversized", "invalid_utf8", "bad_ipv4", "wrong_family")
    hierarchy_kinds = frozenset({"ipv4"})

    def fields(self, text: str) -> tuple[str | None, str, int | None, str | int | None]:
        """(reason, address text, event time, unit value) of one message's text."""
        return None, text, None, None

    def decode(self, value: bytes | None) -> Decoded:
        reason, text = self.message_text(value)
        if reason is not None:
            return Decoded(reason=reason)
        reason, text, event_time, unit = self.fields(text)
        if reason is not None:
            return Decoded(reason=reason)
        values = parse_ipv4([text], SkipCounter())
        if values.size != 1:
            return Decoded(reason=_address_reason(text))
        units = None if unit is None else self.unit_keys_of([unit])
        return Decoded(values=values, event_time=event_time, units=units)

    def unit_keys_of(self, units: list[str | int]) -> np.ndarray:
        """The 128-bit keys of unit values (formats that read them)."""
        raise AssertionError(f"{self.name} reads no unit values")

    def read_addresses(self, values: list[bytes | None]) -> _Addresses:
        """Each message read alone, then every address parsed at once."""
        n = len(values)
        reasons: list[str | None] = [None] * n
        texts: list[str] = []
        where: list[int] = []
        times: list[int] = []
        unit_values: list[str | int | None] = []
        has_fields = type(self).fields is not TextIPv4.fields  # plain text: the message is the address
        for i, value in enumerate(values):
            reason, text = self.message_text(value)
            event_time, unit = None, None
            if reason is None and has_fields:
                reason, text, event_time, unit = self.fields(text)
            if reason is not None:
                reasons[i] = reason
                continue
            texts.append(text)
            where.append(i)
            if has_fields:
                times.append(-1 if event_time is None else event_time)
                unit_values.append(unit)
        parsed, valid = parse_ipv4_each(texts)
        for j in np.flatnonzero(~valid).tolist():
            reasons[where[j]] = _address_reason(texts[j])
        at = np.array(where, dtype=np.int64)[valid]
        counts = np.zeros(n, dtype=np.int64)
        counts[at] = 1
        kept = [u for u, ok in zip(unit_values, valid.tolist()) if ok and u is not None]
        kept_times = np.array(times, dtype=np.int64)[valid] if has_fields else np.empty(0, dtype=np.int64)
        return _Addresses(reasons, counts, parsed[valid], at, kept_times, kept)

    def decode_many(self, values: list[bytes | None]) -> DecodedBatch:
        read = self.read_addresses(values)
        return DecodedBatch(read.reasons, read.counts, read.addresses)

    def unreadable_may_hold(self, value: bytes) -> bool:
        return may_hold_address(value)

    def text_holds(self, value: bytes, text: str) -> bool:
        return bool(parse_ipv4_each([text])[1].all())


class JsonAddress(TextIPv4):
    """``json``: a JSON object holding a dotted-quad IPv4 address, optionally its time and its unit."""

    name = "json"
    summary = (
        "a JSON object with the address in input.json_field, optionally its own time "
        "(input.json_time_field, epoch ms) and a privacy-unit field (privacy.unit_key = 'json:FIELD')"
    )
    reasons = (
        "empty",
        "oversized",
        "invalid_utf8",
        "bad_json",
        "missing_field",
        "bad_time",
        "missing_unit",
        "bad_ipv4",
        "wrong_family",
    )
    unit_keys = {"json": "a field of each JSON message"}
    reads = frozenset({"json_field", "json_time_field", "unit_field"})

    def __init__(self, options: DecoderOptions) -> None:
        super().__init__(options)
        self.json_field = options.json_field
        self.json_time_field = options.json_time_field
        self.unit_field = options.unit_field
        self._unit_keys = UnitKeyHasher(options.unit_secret) if options.unit_field is not None else None
        self.has_units = options.unit_field is not None

    def fields(self, text: str) -> tuple[str | None, str, int | None, str | int | None]:
        """(reason, address text, event time, unit value): ``bad_json``, ``missing_field``,
        ``bad_time`` or ``missing_unit`` as the first failing check says."""
        reason, obj = json_object(text)
        if reason is not None:
            return reason, "", None, None
        if not isinstance(obj, dict) or not isinstance(obj.get(self.json_field), str):
            return "missing_field", "", None, None
        event_time = None
        if self.json_time_field is not None:
            t = obj.get(self.json_time_field)
            if not isinstance(t, int) or isinstance(t, bool) or not (0 <= t < 2**62):
                return "bad_time", "", None, None
            event_time = t
        unit = None
        if self.unit_field is not None:
            unit = obj.get(self.unit_field)
            if not isinstance(unit, (str, int)) or isinstance(unit, bool):
                return "missing_unit", "", None, None
        return None, obj[self.json_field], event_time, unit

    def unit_keys_of(self, units: list[str | int]) -> np.ndarray:
        assert self._unit_keys is not None
        return self._unit_keys.keys(units)

    def decode_many(self, values: list[bytes | None]) -> DecodedBatch:
        read = self.read_addresses(values)
        event_times = np.full(len(values), -1, dtype=np.int64)
        event_times[read.at] = read.times
        units = None
        if self.has_units:
            units = self.unit_keys_of(read.units) if read.units else np.empty(0, UNIT_KEY_DTYPE)
        return DecodedBatch(read.reasons, read.counts, read.addresses, event_times, units)

    def text_holds(self, value: bytes, text: str) -> bool:
        reason, obj = json_object(text)
        if reason is not None:
            return may_hold_address(value)
        if not isinstance(obj, dict) or not isinstance(obj.get(self.json_field), str):
            return False
        return super().text_holds(value, obj[self.json_field])
