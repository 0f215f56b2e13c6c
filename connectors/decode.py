"""Decoding Kafka message values, the stream job's input: :class:`MessageDecoder` over the format registry.

Each format is one class of :mod:`dphhh.connectors.messages` (its module docstring states what a
message holds and which reasons it gives): ``packed-ipv4`` and ``packed-ipv4-pairs`` (many
fixed-width elements per message), ``text-ipv4`` and ``json`` (one address per message), ``path``
and ``flow-json``. A decoder turns one message value (``bytes``) into a batch of hierarchy values,
or into a **reason** why the message is bad; it never raises on bad input and never puts record
content into the reason (every reason is a property of the message alone).

:data:`FORMATS` and :data:`REASONS` are read from the registry: the config's ``input.format``
values follow the registry as it is; the dead-letter metric names are made once, at import, from the
formats registered then (the built-ins): a reason of a format registered later is dead-lettered but
never counted in a public metric (fail closed).
"""

from __future__ import annotations

import numpy as np

from dphhh.sketches.errors import UsageError
from dphhh.sketches.keyed import KeySecret

from .messages import (
    MESSAGE_FORMATS,
    Decoded,
    DecodedBatch,
    DecoderOptions,
    FlowJsonMessages,
    MessageFormat,
    message_format,
)

__all__ = ["FORMATS", "PACKED_FORMATS", "UNIT_FORMATS", "REASONS", "Decoded", "DecodedBatch", "MessageDecoder"]

#: The registered formats' names (``input.format``), in registration order.
FORMATS = tuple(MESSAGE_FORMATS)
#: Formats with many elements per message (decoded element by element, whatever the size).
PACKED_FORMATS = tuple(name for name, cls in MESSAGE_FORMATS.items() if cls.packed)
#: Formats whose messages carry a privacy-unit key per element (with ``unit_field`` for JSON,
#: ``source_units`` for flow records).
UNIT_FORMATS = tuple(name for name, cls in MESSAGE_FORMATS.items() if cls.unit_keys)
#: Every reason a registered format gives for a bad message (each once, in registration order).
REASONS = tuple(dict.fromkeys(r for cls in MESSAGE_FORMATS.values() for r in cls.reasons))


class MessageDecoder:
    """Decodes message values of one registered format (:mod:`dphhh.connectors.messages`); validated
    at construction (``UsageError`` prefixed ``MessageDecoder:``).

    ``source_units`` (``flow-json``): every decoded record also gives its IPv4 source address as
    its privacy-unit key (``units``, uint64, aligned with the values); ``packed-ipv4-pairs``
    carries its unit addresses anyway. Addresses are their own unit keys (exact).

    ``unit_field`` (``json``): the field's value is hashed to a 128-bit unit key under
    ``unit_secret``, the deployment's secret (:func:`dphhh.privacy.unit_cap.unit_keys_of`; the stream
    job's decode operator passes :func:`dphhh.stream.ledger.job_key_secret`). A decoder built without
    one — tests, fuzzing, tools that publish nothing — hashes under the fixed public fallback key."""

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
        cls = message_format(fmt)
        if not isinstance(max_message_bytes, int) or max_message_bytes < 4:
            raise UsageError(f"MessageDecoder: max_message_bytes must be an integer >= 4, got {max_message_bytes!r}")
        if not isinstance(path_depth, int) or path_depth < 1:
            raise UsageError(f"MessageDecoder: path_depth must be an integer >= 1, got {path_depth!r}")
        options = DecoderOptions(
            max_message_bytes=max_message_bytes,
            json_field=json_field,
            json_time_field=json_time_field,
            unit_field=unit_field,
            path_depth=path_depth,
            flow_schema=flow_schema,
            flow_key=flow_key,
            flow_weight=flow_weight,
            source_units=source_units,
            unit_secret=unit_secret,
        )
        cls.check_options(options)
        self.format = fmt
        #: the format's decoder
        self.messages: MessageFormat = cls(options)
        self.max_message_bytes = max_message_bytes
        #: the flow-record decoder of ``flow-json`` (the stream reads its batches as Java columns), else ``None``
        self.flow = self.messages.flow if isinstance(self.messages, FlowJsonMessages) else None

    @property
    def has_units(self) -> bool:
        """Whether decoded values come with privacy-unit keys."""
        return self.messages.has_units

    @property
    def weighted(self) -> bool:
        """Whether decoded values come with weights (flow records weighted by packets or bytes)."""
        return self.messages.weighted

    def decode(self, value: bytes | None) -> Decoded:
        """Decode one message value; never raises for bad content."""
        return self.messages.decode(value)

    def decode_many(self, values: list[bytes | None]) -> DecodedBatch:
        """Decode many message values; message for message the same outcome as :meth:`decode`,
        as a batch. Never raises for bad content."""
        return self.messages.decode_many(values)

    def holds_element(self, value: bytes | None) -> bool:
        """Whether a message this decoder refused may still hold an element of the run's kind —
        also one it cannot read at all (invalid UTF-8, malformed JSON): a valid address (or path)
        beside a bad time, a missing unit, bad counters, a bad length, or an oversized message
        (not parsed: it may). Only a refused message that holds **no** element is counted in the
        job's public dead-letter counters (docs/ALGORITHMS.md §0.1 f); when in doubt the answer is True."""
        return self.messages.holds_element(value)

    def jvm_flow_parser(self) -> tuple[str, int, int, int, int, list[str]] | None:
        """The settings of the Java ``FlowRecordParser`` that reads this decoder's flow records
        (:meth:`FlowJsonMessages.jvm_flow_parser`), or ``None`` for a format other than ``flow-json``."""
        return self.messages.jvm_flow_parser() if isinstance(self.messages, FlowJsonMessages) else None

    def decode_flows_parsed(
        self,
        parsed: np.ndarray,
        sources: np.ndarray,
        destinations: np.ndarray,
        weights: np.ndarray,
        event_ms: np.ndarray,
        others: list[bytes | None],
    ) -> DecodedBatch:
        """:meth:`FlowJsonMessages.decode_flows_parsed` (``flow-json`` only)."""
        if not isinstance(self.messages, FlowJsonMessages):
            raise UsageError(f"MessageDecoder: {self.format!r} messages are not read as flow columns")
        return self.messages.decode_flows_parsed(parsed, sources, destinations, weights, event_ms, others)
