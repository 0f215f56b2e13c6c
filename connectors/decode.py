"""Decoders for Kafka message values (the stream job's input formats).

Each decoder turns one message value (``bytes``) into a batch of hierarchy values, or into a
**reason** why the message is bad. A decoder never raises on bad input and never puts record
content into the reason. Formats:

* ``packed-ipv4`` (the fast path): big-endian IPv4 addresses, 4 bytes each, many per message;
* ``packed-ipv4-pairs``: 8 bytes per element, many per message: a big-endian IPv4 *unit* address
  (e.g. the source, the privacy unit of user-level privacy) then the big-endian IPv4 address the
  hierarchy is over (e.g. the destination);
* ``text-ipv4``: one dotted-quad address per message (UTF-8);
* ``json``: a JSON object with the address (dotted quad) in a configurable field; optionally an
  event-time field (epoch milliseconds) and a privacy-unit field (any string or integer), whose
  value becomes a 128-bit unit key keyed with the deployment's secret
  (:func:`dphhh.privacy.unit_cap.unit_keys_of`; ``MessageDecoder(unit_secret=...)``);
* ``path``: one ``/``-path per message (UTF-8), e.g. ``de/bavaria/munich/leopoldstr``;
* ``flow-json`` (with ``flow_key = "pair"``: both addresses, the source as the first address
  and the destination as the value, as ``packed-ipv4-pairs`` carries them — pair hierarchies):
  one flow record per message as a collector publishes it (pmacct's
  nfacctd/sfacctd kafka plugin or goflow2, :mod:`dphhh.connectors.flow_json`): the IPv4 source or
  destination address, the record's own time, and — weighted by ``packets`` or ``bytes`` — its
  weight (``DecodedBatch.weights``; the caller clips it to the public cap). A record of the other
  family is ``wrong_family``; bad counters ``bad_counter`` / ``counter_too_large``. With
  ``source_units`` (user level per source host, ``privacy.unit_key = "source-ipv4"``) each
  record's IPv4 source address is also its privacy-unit key (``units``), whichever address the
  hierarchy is over: with ``flow_key = "dst"`` a record is decoded as a (source, destination)
  pair (:func:`~dphhh.connectors.flow_json.decode_pairs`), so one whose source is missing or not IPv4
  gets the pair decoder's reason.

Reasons (every one a property of the message alone): ``empty``, ``oversized`` (one-element formats
only: a packed message is decoded whatever its size), ``bad_length``, ``invalid_utf8``, ``bad_ipv4``,
``wrong_family`` (an IPv6 address on an IPv4 topic), ``bad_json``, ``missing_field``,
``bad_time``, ``missing_unit``, ``bad_path_empty_component``, ``bad_path_too_long``, ``bad_path_too_deep``,
``bad_path_depth``; flow records add ``bad_counter``, ``counter_too_large``, ``bad_address`` and
``zero_weight`` (a valid record of weight 0 in a run weighted by packets or bytes: dead-lettered,
never counted, like ``wrong_family``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from dphhh.privacy.unit_cap import UNIT_KEY_DTYPE, UnitKeyHasher
from dphhh.sketches.errors import UsageError
from dphhh.sketches.keyed import KeySecret

from .flow_json import REASONS as FLOW_REASONS
from .flow_json import FlowJsonDecoder, decode_pairs
from .skips import SkipCounter
from .text import may_hold_address, parse_ipv4, parse_ipv4_each, parse_paths

__all__ = ["FORMATS", "PACKED_FORMATS", "UNIT_FORMATS", "REASONS", "Decoded", "DecodedBatch", "MessageDecoder"]

FORMATS = ("packed-ipv4", "packed-ipv4-pairs", "text-ipv4", "json", "path", "flow-json")
#: Formats with many elements per message (decoded element by element, whatever the size).
PACKED_FORMATS = ("packed-ipv4", "packed-ipv4-pairs")
#: Formats whose messages carry a privacy-unit key per element (with ``unit_field`` for JSON,
#: ``source_units`` for flow records).
UNIT_FORMATS = ("packed-ipv4-pairs", "json", "flow-json")
#: Every reason a decoder gives for a bad message.
REASONS = (
    "empty",
    "oversized",
    "bad_length",
    "invalid_utf8",
    "bad_ipv4",
    "wrong_family",
    "bad_json",
    "missing_field",
    "bad_time",
    "missing_unit",
    "bad_path_empty_component",
    "bad_path_too_long",
    "bad_path_too_deep",
    "bad_path_depth",
) + tuple(
    r
    for r in FLOW_REASONS
    if r not in ("empty", "oversized", "invalid_utf8", "bad_json", "missing_field", "wrong_family", "bad_time")
)
_BE_U32 = np.dtype(">u4")


@dataclass(frozen=True)
class Decoded:
    """A decoded message: ``values`` (uint32 array or list of paths) or a ``reason``; ``event_time``
    (epoch ms) when the message carried its own time (JSON), else ``None``; ``units`` (one per
    value: uint64 IPv4 unit addresses, or 128-bit keys of :data:`~dphhh.privacy.unit_cap.UNIT_KEY_DTYPE`
    for a JSON unit field) when the decoder reads privacy-unit keys, else ``None``."""

    values: Any = None
    reason: str | None = None
    event_time: int | None = None
    units: np.ndarray | None = None

    @property
    def ok(self) -> bool:
        return self.reason is None


@dataclass(frozen=True)
class DecodedBatch:
    """Many decoded messages: ``reasons[i]`` is ``None`` for a good message; ``counts[i]`` values
    of message ``i`` (0 when bad) follow each other in ``values`` (uint32 array or list of paths),
    in message order; ``event_times[i]`` is the message's own time or -1 (JSON with a time field);
    ``units`` (aligned with ``values``: uint64 unit addresses, or 128-bit keys of
    :data:`~dphhh.privacy.unit_cap.UNIT_KEY_DTYPE` for a JSON unit field) when the decoder reads
    privacy-unit keys;
    ``weights`` (int64, aligned with ``values``, not yet clipped) for weighted flow records;
    ``ok`` (bool per message: ``reasons[i] is None``) when the decoder has it at hand."""

    reasons: list[str | None]
    counts: np.ndarray
    values: Any
    event_times: np.ndarray | None = None
    units: np.ndarray | None = None
    weights: np.ndarray | None = None
    ok: np.ndarray | None = None


class MessageDecoder:
    """Decodes message values of one format; validated at construction.

    ``source_units`` (``flow-json``): every decoded record also gives its IPv4 source address as
    its privacy-unit key (``units``, uint64, aligned with the values); ``packed-ipv4-pairs``
    carries its unit addresses anyway. Addresses are their own unit keys (exact).

    ``unit_field`` (``json``): the field's value is hashed to a 128-bit unit key under
    ``unit_secret``, the deployment's secret (:func:`dphhh.privacy.unit_cap.unit_keys_of`; the stream
    job's decode operator passes :func:`dphhh.stream.ledger.job_key_secret`). A decoder built without
    one — tests, fuzzing, tools that publish nothing — hashes under the fixed public fallback key:
    its keys are as wide (aiming a value at a given key still takes a 128-bit second preimage) but
    a public function of the value, which no deployment relies on."""

    def __init__(
        self,
        fmt: str,
        *,
        max_message_bytes: int = 1 << 20,
        json_field: str = "ip",
        json_time_field: str | None = None,
        unit_field: str | None = None,
        path_depth: int = 4,
        flow_schema: str = "pmacct",
        flow_key: str = "src",
        flow_weight: str = "records",
        source_units: bool = False,
        unit_secret: KeySecret | None = None,
    ) -> None:
        if fmt not in FORMATS:
            raise UsageError(f"MessageDecoder: format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        if not isinstance(max_message_bytes, int) or max_message_bytes < 4:
            raise UsageError(f"MessageDecoder: max_message_bytes must be an integer >= 4, got {max_message_bytes!r}")
        if not isinstance(path_depth, int) or path_depth < 1:
            raise UsageError(f"MessageDecoder: path_depth must be an integer >= 1, got {path_depth!r}")
        if unit_field is not None and fmt != "json":
            raise UsageError(f"MessageDecoder: unit_field applies to the json format only, not {fmt!r}")
        if source_units and fmt not in ("flow-json", "packed-ipv4-pairs"):
            raise UsageError(
                f"MessageDecoder: source_units applies to the flow-json and packed-ipv4-pairs formats only, not {fmt!r}"
            )
        self.format = fmt
        self.unit_field = unit_field
        self._unit_keys = UnitKeyHasher(unit_secret) if unit_field is not None else None
        #: whether decoded values come with privacy-unit keys
        self.has_units = fmt == "packed-ipv4-pairs" or unit_field is not None
        self.max_message_bytes = max_message_bytes
        self.json_field = json_field
        self.json_time_field = json_time_field
        self.path_depth = path_depth
        self.flow = None
        #: flow-json decoded as (src, dst) pairs — ``flow_key = "pair"``, or destinations with
        #: their sources as unit keys: the destination decoder beside the source one (``flow``)
        self.flow_dst = None
        if fmt == "flow-json":

            def flow_decoder(key: str) -> FlowJsonDecoder:
                return FlowJsonDecoder(
                    flow_schema, key=key, weight=flow_weight, family="ipv4", max_record_bytes=max(16, max_message_bytes)
                )

            # with source units a destination hierarchy reads both addresses: the source is the unit
            as_pairs = flow_key == "pair" or (source_units and flow_key == "dst")
            self.flow = flow_decoder("src" if as_pairs else flow_key)
            if as_pairs:  # src as the first address ("units"), dst as the values
                self.flow_dst = flow_decoder("dst")
                self.has_units = True
            elif source_units:  # flow_key = "src": the value is its own unit key
                self.has_units = True
        #: whether decoded values come with weights (flow records weighted by packets or bytes)
        self.weighted = self.flow is not None and flow_weight != "records"

    def decode(self, value: bytes | None) -> Decoded:
        """Decode one message value; never raises for bad content."""
        if self.flow is not None:
            one = self.decode_many([value])
            if one.reasons[0] is not None:
                return Decoded(reason=one.reasons[0])
            first = int(one.event_times[0]) if one.event_times is not None else -1
            return Decoded(values=one.values, event_time=None if first < 0 else first, units=one.units)
        reason = self._size_reason(value)
        if reason is not None:
            return Decoded(reason=reason)
        assert value is not None
        if self.format == "packed-ipv4":
            if len(value) % 4:
                return Decoded(reason="bad_length")
            return Decoded(values=np.frombuffer(value, dtype=_BE_U32).astype(np.uint32))
        if self.format == "packed-ipv4-pairs":
            if len(value) % 8:
                return Decoded(reason="bad_length")
            pairs = np.frombuffer(value, dtype=_BE_U32).reshape(-1, 2)
            return Decoded(values=pairs[:, 1].astype(np.uint32), units=pairs[:, 0].astype(np.uint64))
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return Decoded(reason="invalid_utf8")
        event_time = None
        units = None
        if self.format == "json":
            reason, address, event_time, unit = self._json_fields(text)
            if reason is not None:
                return Decoded(reason=reason)
            if self.unit_field is not None:
                assert self._unit_keys is not None and unit is not None
                units = self._unit_keys.keys([unit])
            text = address
        if self.format == "path":
            return self._path(text)
        out = self._ipv4(text, event_time)
        return out if units is None or not out.ok else Decoded(out.values, None, event_time, units)

    def _json_fields(self, text: str) -> tuple[str | None, str, int | None, str | int | None]:
        """(reason, address text, event time, unit value) of one JSON message: ``bad_json``,
        ``missing_field``, ``bad_time`` or ``missing_unit`` as the first failing check says."""
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            return "bad_json", "", None, None
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

    def decode_many(self, values: list[bytes | None]) -> DecodedBatch:
        """Decode many message values; message for message the same outcome as :meth:`decode`,
        vectorised for the IPv4 formats. Never raises for bad content."""
        if self.format == "packed-ipv4":
            return self._packed_many(values)
        if self.format == "packed-ipv4-pairs":
            return self._pairs_many(values)
        if self.format in ("text-ipv4", "json"):
            return self._one_address_many(values)
        if self.flow is not None:
            return self._flow_many(values)
        decoded = [self.decode(v) for v in values]
        counts = np.array([len(d.values) if d.ok else 0 for d in decoded], dtype=np.int64)
        times = None
        if self.format == "json":
            times = np.array([-1 if d.event_time is None else d.event_time for d in decoded], dtype=np.int64)
        flat: list = [x for d in decoded if d.ok for x in d.values]
        out_values: Any = flat if self.format == "path" else np.array(flat, dtype=np.uint32)
        units = None
        if self.has_units:
            empty = np.empty(0, UNIT_KEY_DTYPE if self.unit_field is not None else np.uint64)
            units = np.concatenate([empty] + [d.units for d in decoded if d.ok])
        return DecodedBatch([d.reason for d in decoded], counts, out_values, times, units)

    def _flow_many(self, values: list[bytes | None]) -> DecodedBatch:
        assert self.flow is not None
        if self.flow_dst is not None:
            return self._flow_pairs(values)
        batch = self.flow.decode_many(values)
        cols = batch.ipv4
        counts = batch.counts
        times = np.full(len(values), -1, dtype=np.int64)
        times[cols.index] = cols.event_ms
        weights = cols.weights if self.weighted else None
        keys = np.asarray(cols.keys, dtype=np.uint32)
        units = keys.astype(np.uint64) if self.has_units else None  # source units over source addresses
        return DecodedBatch(list(batch.reasons), counts, keys, times, units, weights)

    def _flow_pairs(self, values: list[bytes | None]) -> DecodedBatch:
        """Flow records as (src, dst) pairs (:func:`~dphhh.connectors.flow_json.decode_pairs`): the source
        as the first address (``units``: the pair's first side, or the privacy unit of a destination
        hierarchy), the destination as the value."""
        assert self.flow is not None and self.flow_dst is not None
        pairs = decode_pairs(self.flow, self.flow_dst, values)
        counts = np.zeros(len(values), dtype=np.int64)
        counts[pairs.index] = 1
        times = np.full(len(values), -1, dtype=np.int64)
        times[pairs.index] = pairs.event_ms
        weights = pairs.weights if self.weighted else None
        return DecodedBatch(pairs.reasons, counts, pairs.destinations, times, pairs.sources.astype(np.uint64), weights)

    def jvm_flow_parser(self) -> tuple[str, int, int, int, int, list[str]] | None:
        """The settings of the Java ``FlowRecordParser`` that reads this decoder's flow records as
        it does (schema, addresses: 0 source / 1 destination / 2 both, weight: 0 packets /
        1 bytes / 2 records, max counter, max record bytes, time fields), or ``None`` for a format
        other than ``flow-json``."""
        if self.flow is None:
            return None
        f = self.flow
        addresses = 2 if self.flow_dst is not None else ("src", "dst").index(f.key)
        weight = ("packets", "bytes", "records").index(f.weight)
        return f.schema, addresses, weight, f.max_counter, f.max_record_bytes, list(f.time_fields)

    def decode_flows_parsed(
        self,
        parsed: np.ndarray,
        sources: np.ndarray,
        destinations: np.ndarray,
        weights: np.ndarray,
        event_ms: np.ndarray,
        others: list[bytes | None],
    ) -> DecodedBatch:
        """The :meth:`decode_many` outcome of a batch of flow records of which the Java
        ``FlowRecordParser`` (set up with :meth:`jvm_flow_parser`) read those marked ``parsed``
        into the columns (one entry each, in order); ``others`` are the values of the rest, in
        order, decoded here. The parser reads a record only when it decodes here to those very
        columns (tests/stream/test_flow_record_parser.py), so this equals :meth:`decode_many` on
        every value."""
        assert self.flow is not None
        n = parsed.shape[0]
        rest = self.decode_many(others)
        at = np.flatnonzero(~parsed)
        rest_ok = rest.counts > 0  # one value per decoded flow record
        ok = parsed.copy()
        ok[at] = rest_ok
        reasons: list[str | None] = [None] * n
        for j in np.flatnonzero(~rest_ok).tolist():
            reasons[int(at[j])] = rest.reasons[j]
        chosen = destinations if self.flow_dst is not None or self.flow.key == "dst" else sources

        def merged(column: np.ndarray, other: np.ndarray | None, dtype) -> np.ndarray:
            out = np.zeros(n, dtype=dtype)
            out[parsed] = column
            if other is not None:
                out[at[rest_ok]] = other
            return out[ok]

        values = merged(chosen, rest.values, np.uint32)
        units = None
        if self.has_units:
            units = merged(sources, rest.units, np.uint64)
        times = np.full(n, -1, dtype=np.int64)
        times[parsed] = event_ms
        times[at] = rest.event_times
        merged_weights = merged(weights, rest.weights, np.int64) if self.weighted else None
        return DecodedBatch(reasons, ok.astype(np.int64), values, times, units, merged_weights, ok)

    def holds_element(self, value: bytes | None) -> bool:
        """Whether a message this decoder refused may still hold an element of the run's kind —
        also one it cannot read at all (invalid UTF-8, malformed JSON): it may if its bytes hold
        anything an address (or, for paths, a path) could be (:func:`may_hold_address`) —
        a valid address (or path) beside a bad time, a missing unit, bad counters, a bad length,
        or an oversized message (not parsed: it may). Only a refused message that holds **no**
        element is counted in the job's public dead-letter counters (docs/ALGORITHMS.md §0.1 f);
        when in doubt the answer is True."""
        if not value:
            return False
        if self.flow is not None:
            return self.flow.holds_element(value) or (self.flow_dst is not None and self.flow_dst.holds_element(value))
        if self.format in PACKED_FORMATS:
            return len(value) >= (4 if self.format == "packed-ipv4" else 8)
        if len(value) > self.max_message_bytes:
            return True
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError:  # unreadable: it may still be somebody's record with an element
            return b"/" in value if self.format == "path" else may_hold_address(value)
        if self.format == "json":
            try:
                obj = json.loads(text)
            except (ValueError, RecursionError):
                return may_hold_address(value)
            if not isinstance(obj, dict) or not isinstance(obj.get(self.json_field), str):
                return False
            text = obj[self.json_field]
        if self.format == "path":
            return bool(parse_paths([text], SkipCounter(), max_depth=len(text) + 1, max_length=len(text) + 1))
        return bool(parse_ipv4_each([text])[1].all())

    def _size_reason(self, value: bytes | None) -> str | None:
        """``empty``, or ``oversized`` for a one-element format's message over ``max_message_bytes``.
        A packed message is never refused for its size: one more element would otherwise drop
        every other element of the message (docs/ALGORITHMS.md §0.1 e)."""
        if not value:
            return "empty"
        if len(value) > self.max_message_bytes and self.format not in PACKED_FORMATS:
            return "oversized"
        return None

    def _fixed_width(self, values: list[bytes | None], width: int) -> tuple[list[str | None], np.ndarray, np.ndarray]:
        """Reasons, element counts and the big-endian uint32 words of messages of ``width``-byte elements."""
        reasons: list[str | None] = []
        good: list[bytes] = []
        counts = np.zeros(len(values), dtype=np.int64)
        for i, value in enumerate(values):
            reason = self._size_reason(value)
            if reason is None and len(value) % width:  # type: ignore[arg-type]
                reason = "bad_length"
            reasons.append(reason)
            if reason is None:
                good.append(value)  # type: ignore[arg-type]
                counts[i] = len(value) // width  # type: ignore[arg-type]
        return reasons, counts, np.frombuffer(b"".join(good), dtype=_BE_U32)

    def _packed_many(self, values: list[bytes | None]) -> DecodedBatch:
        reasons, counts, words = self._fixed_width(values, 4)
        return DecodedBatch(reasons, counts, words.astype(np.uint32))

    def _pairs_many(self, values: list[bytes | None]) -> DecodedBatch:
        reasons, counts, words = self._fixed_width(values, 8)
        pairs = words.reshape(-1, 2)
        return DecodedBatch(reasons, counts, pairs[:, 1].astype(np.uint32), None, pairs[:, 0].astype(np.uint64))

    def _one_address_many(self, values: list[bytes | None]) -> DecodedBatch:
        """``text-ipv4`` and ``json`` messages (one address each) as a batch: each message is read
        alone (size, UTF-8, and for JSON its fields: :meth:`_json_fields`), then every address is
        parsed at once (:func:`parse_ipv4_each`) and every JSON unit value keyed in one call —
        message for message the outcome of :meth:`decode`."""
        n = len(values)
        json_format = self.format == "json"
        reasons: list[str | None] = [None] * n
        texts: list[str] = []
        where: list[int] = []
        times: list[int] = []
        unit_values: list[str | int] = []
        for i, value in enumerate(values):
            reason = self._size_reason(value)
            if reason is None:
                try:
                    address = bytes(value).decode("utf-8")  # type: ignore[arg-type]
                except UnicodeDecodeError:
                    reason = "invalid_utf8"
            event_time, unit = None, None
            if reason is None and json_format:
                reason, address, event_time, unit = self._json_fields(address)
            if reason is not None:
                reasons[i] = reason
                continue
            texts.append(address)
            where.append(i)
            times.append(-1 if event_time is None else event_time)
            if unit is not None:
                unit_values.append(unit)
        parsed, valid = parse_ipv4_each(texts)
        for j in np.flatnonzero(~valid).tolist():
            reasons[where[j]] = "wrong_family" if ":" in texts[j] else "bad_ipv4"
        at = np.array(where, dtype=np.int64)
        counts = np.zeros(n, dtype=np.int64)
        counts[at[valid]] = 1
        if not json_format:
            return DecodedBatch(reasons, counts, parsed[valid])
        event_times = np.full(n, -1, dtype=np.int64)
        event_times[at[valid]] = np.array(times, dtype=np.int64)[valid]
        units = None
        if self.has_units:
            assert self._unit_keys is not None
            kept = [u for u, ok in zip(unit_values, valid.tolist()) if ok]
            units = self._unit_keys.keys(kept) if kept else np.empty(0, UNIT_KEY_DTYPE)
        return DecodedBatch(reasons, counts, parsed[valid], event_times, units)

    def _ipv4(self, text: str, event_time: int | None) -> Decoded:
        skips = SkipCounter()
        values = parse_ipv4([text], skips)
        if values.size == 1:
            return Decoded(values=values, event_time=event_time)
        return Decoded(reason="wrong_family" if ":" in text else "bad_ipv4")

    def _path(self, text: str) -> Decoded:
        skips = SkipCounter()
        paths = parse_paths([text], skips, max_depth=max(self.path_depth, 1))
        if not paths:
            reason = next(iter(skips.as_dict()), "bad_path_empty_component")
            return Decoded(reason=reason)
        if paths[0].count("/") + 1 != self.path_depth:
            return Decoded(reason="bad_path_depth")
        return Decoded(values=paths)
