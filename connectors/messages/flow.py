"""The ``flow-json`` format: one flow record per message as a collector publishes it.

pmacct's nfacctd/sfacctd kafka plugin or goflow2 (:mod:`dphhh.connectors.flow_json`): the IPv4
source or destination address (``flow_key``), the record's own time, and — weighted by ``packets``
or ``bytes`` (``flow_weight``) — its weight (``DecodedBatch.weights``; the caller clips it to the
public cap). With ``flow_key = "pair"`` both addresses: the source as the first address
(``units``) and the destination as the value, as ``packed-ipv4-pairs`` carries them (pair
hierarchies). With ``source_units`` (user level per source host, ``privacy.unit_key =
"source-ipv4"``) each record's IPv4 source address is also its privacy-unit key, whichever
address the hierarchy is over: with ``flow_key = "dst"`` a record is decoded as a (source,
destination) pair (:func:`~dphhh.connectors.flow_json.decode_pairs`), so one whose source is
missing or not IPv4 gets the pair decoder's reason.

A record of the other family is ``wrong_family``; bad counters ``bad_counter`` /
``counter_too_large``; a valid record of weight 0 in a run weighted by packets or bytes
``zero_weight`` (dead-lettered, never counted).
"""

from __future__ import annotations

import numpy as np

from ..flow_json import REASONS as FLOW_REASONS
from ..flow_json import FlowJsonDecoder, decode_pairs
from .base import DecodedBatch, DecoderOptions, MessageFormat

__all__ = ["FlowJsonMessages"]


class FlowJsonMessages(MessageFormat):
    """``flow-json``: a collector's JSON flow records (pmacct, goflow2), one per message."""

    name = "flow-json"
    summary = (
        "one flow record per message as pmacct or goflow2 publish it (input.flow_schema), over the source, "
        "the destination or both addresses (input.flow_key), weighted by input.flow_weight"
    )
    reasons = tuple(FLOW_REASONS)
    hierarchy_kinds = frozenset({"ipv4", "pair"})
    unit_keys = {"source-ipv4": "each record's source address"}
    reads = frozenset({"flow_schema", "flow_key", "flow_weight", "source_units"})
    noun = "flow records"

    def __init__(self, options: DecoderOptions) -> None:
        super().__init__(options)

        def flow_decoder(key: str) -> FlowJsonDecoder:
            return FlowJsonDecoder(
                options.flow_schema,
                key=key,
                weight=options.flow_weight,
                family="ipv4",
                max_record_bytes=max(16, options.max_message_bytes),
            )

        # with source units a destination hierarchy reads both addresses: the source is the unit
        as_pairs = options.flow_key == "pair" or (options.source_units and options.flow_key == "dst")
        #: the decoder of the source address (pairs), or of the configured one
        self.flow = flow_decoder("src" if as_pairs else options.flow_key)
        #: the destination decoder beside the source one when records are read as (src, dst) pairs
        self.flow_dst = flow_decoder("dst") if as_pairs else None
        self.has_units = as_pairs or options.source_units  # flow_key = "src": the value is its own unit key
        self.weighted = options.flow_weight != "records"

    def decode_many(self, values: list[bytes | None]) -> DecodedBatch:
        if self.flow_dst is not None:
            return self._pairs(values)
        batch = self.flow.decode_many(values)
        cols = batch.ipv4
        times = np.full(len(values), -1, dtype=np.int64)
        times[cols.index] = cols.event_ms
        weights = cols.weights if self.weighted else None
        keys = np.asarray(cols.keys, dtype=np.uint32)
        units = keys.astype(np.uint64) if self.has_units else None  # source units over source addresses
        return DecodedBatch(list(batch.reasons), batch.counts, keys, times, units, weights)

    def _pairs(self, values: list[bytes | None]) -> DecodedBatch:
        """Flow records as (src, dst) pairs (:func:`~dphhh.connectors.flow_json.decode_pairs`): the source
        as the first address (``units``: the pair's first side, or the privacy unit of a destination
        hierarchy), the destination as the value."""
        assert self.flow_dst is not None
        pairs = decode_pairs(self.flow, self.flow_dst, values)
        counts = np.zeros(len(values), dtype=np.int64)
        counts[pairs.index] = 1
        times = np.full(len(values), -1, dtype=np.int64)
        times[pairs.index] = pairs.event_ms
        weights = pairs.weights if self.weighted else None
        return DecodedBatch(pairs.reasons, counts, pairs.destinations, times, pairs.sources.astype(np.uint64), weights)

    def holds_element(self, value: bytes | None) -> bool:
        if not value:
            return False
        return self.flow.holds_element(value) or (self.flow_dst is not None and self.flow_dst.holds_element(value))

    def jvm_flow_parser(self) -> tuple[str, int, int, int, int, list[str]]:
        """The settings of the Java ``FlowRecordParser`` that reads these flow records as this
        format does (schema, addresses: 0 source / 1 destination / 2 both, weight: 0 packets /
        1 bytes / 2 records, max counter, max record bytes, time fields)."""
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
        units = merged(sources, rest.units, np.uint64) if self.has_units else None
        times = np.full(n, -1, dtype=np.int64)
        times[parsed] = event_ms
        times[at] = rest.event_times
        merged_weights = merged(weights, rest.weights, np.int64) if self.weighted else None
        return DecodedBatch(reasons, ok.astype(np.int64), values, times, units, merged_weights, ok)
