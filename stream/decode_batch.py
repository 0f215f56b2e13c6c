"""What the ``decode`` operator does with one batch of Kafka messages (plain logic, no Flink).

Message by message, exactly as if each had arrived alone (the batcher keeps order and watermarks):
a message that does not decode goes to the dead letters with its reason; a message without a
usable event time (Kafka timestamp, or the JSON time field when configured) is dead-lettered as
``no_timestamp``; a message whose window is already released at the current watermark is dropped
and counted as late; the values of the others are grouped by window, input order kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from connectors.decode import MessageDecoder

from .message_batch import NO_TIMESTAMP, unpack_batch
from .windows import TumblingWindows

__all__ = ["BatchOutcome", "decode_batch"]


@dataclass
class BatchOutcome:
    """``dead``: (reason, message, timestamp or None) per bad message; ``late``: messages dropped as
    late; ``windows``: (window start, values, units) per window touched, values in input order,
    ``units`` the privacy-unit keys aligned with them (``None`` when the decoder reads none)."""

    dead: list[tuple[str, bytes | None, int | None]] = field(default_factory=list)
    late: int = 0
    windows: list[tuple[int, Any]] = field(default_factory=list)


def decode_batch(data: bytes, decoder: MessageDecoder, windows: TumblingWindows, watermark: int) -> BatchOutcome:
    """Decode one ``MessageBatcher`` record at ``watermark`` (see the module docstring)."""
    timestamps, messages = unpack_batch(data)
    decoded = decoder.decode_many(messages)
    out = BatchOutcome()
    kafka_ts = [None if t == NO_TIMESTAMP else t for t in timestamps.tolist()]
    times = timestamps.copy()
    if decoded.event_times is not None:
        own = decoded.event_times >= 0
        times[own] = decoded.event_times[own]
    good = np.array([r is None for r in decoded.reasons], dtype=bool)
    timed = times >= 0  # NO_TIMESTAMP is negative
    for i in np.flatnonzero(~good).tolist():
        out.dead.append((decoded.reasons[i], messages[i], kafka_ts[i]))
    for i in np.flatnonzero(good & ~timed).tolist():
        out.dead.append(("no_timestamp", messages[i], None if times[i] == NO_TIMESTAMP else int(times[i])))
    starts = times - times % windows.size_ms
    late = good & timed & (starts + (windows.size_ms - 1 + windows.allowed_lateness_ms) <= watermark)
    out.late = int(np.count_nonzero(late))
    keep = good & timed & ~late
    if not keep.any():
        return out
    element_keep = np.repeat(keep, decoded.counts)
    element_start = np.repeat(starts, decoded.counts)
    values = decoded.values
    as_list = isinstance(values, list)
    if as_list:
        values = np.array(values + [None], dtype=object)[:-1]  # 1-d even when every path is alike
    for start in sorted(set(starts[keep].tolist())):
        mask = element_keep & (element_start == start)
        chosen = values[mask]
        units = None if decoded.units is None else decoded.units[mask]
        out.windows.append((start, chosen.tolist() if as_list else chosen, units))
    return out
