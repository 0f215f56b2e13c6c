"""What the ``decode`` operator does with one batch of Kafka messages (plain logic, no Flink).

Message by message, exactly as if each had arrived alone (the batcher keeps order):

* a clock record (:data:`dphhh.stream.clock.TICK`) is skipped: it carries no element;
* a message that does not decode goes to the dead letters with its reason; it is *counted* (in
  the job's public dead-letter metrics) only if it is unparsable **and** holds no element — a
  valid address beside a bad time, a missing unit, bad counters or an oversized message is
  somebody's record, and one record must not move a public counter (docs/ALGORITHMS.md §0.1 f);
* a message without a timestamp is dead-lettered as ``no_timestamp`` (not counted);
* the others are judged by :meth:`dphhh.stream.schedule.ReleaseSchedule.accept` on their own times only
  (event time: the JSON time field if configured, else the record timestamp; arrival: the record
  timestamp): rejected ones are dead-lettered with an element reason
  (:data:`dphhh.stream.schedule.ELEMENT_REASONS`), and the values of the rest are grouped by window,
  input order kept, and within a window by **arrival epoch** (the public interval of
  ``schedule.epoch_ms`` holding the record timestamp: the group a sketch takes in canonical order,
  docs/ALGORITHMS.md §0 "Canonical order"). A packed message is decoded element by element whatever
  its size; all its elements share the message's timestamp and so its verdict and epoch.

Nothing here depends on a watermark or on any other message (docs/ALGORITHMS.md §0.1 e).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dphhh.connectors.decode import MessageDecoder
from dphhh.connectors.skips import is_unparsable

from .clock import TICK, is_tick
from .message_batch import NO_TIMESTAMP, read_batch
from .schedule import ELEMENT_REASONS, ReleaseSchedule

__all__ = ["BatchOutcome", "decode_batch"]


@dataclass
class BatchOutcome:
    """``dead``: (reason, message, record timestamp or None, counted) per rejected message, in order
    (``counted``: unparsable and holding no element — the only dead letters a public metric counts);
    ``windows``: (window start, epoch start, values, units, weights) per (window, arrival epoch)
    touched, values in input order,
    ``units`` the privacy-unit keys and ``weights`` the record weights (int64, unclipped) aligned
    with them (each ``None`` when the decoder reads none); ``ticks``: the clock records seen
    (skipped)."""

    dead: list[tuple[str, bytes | None, int | None, bool]] = field(default_factory=list)
    windows: list[tuple[int, int, Any, np.ndarray | None, np.ndarray | None]] = field(default_factory=list)
    ticks: int = 0


def decode_batch(data: bytes, decoder: MessageDecoder, schedule: ReleaseSchedule) -> BatchOutcome:
    """Decode one ``MessageBatcher`` record under ``schedule`` (see the module docstring); a ``DPB2``
    record's flow records read by the batcher come as columns (:meth:`MessageDecoder.decode_flows_parsed`)."""
    batch = read_batch(data)
    flows = batch.flows if decoder.flow is not None else None
    # the messages not read into columns (all of them in a DPB1 record): clock records are among these
    others_at = np.arange(len(batch)) if flows is None else np.flatnonzero(~flows.parsed)
    others = batch.values(others_at)
    out = BatchOutcome()
    # a clock record is the exact bytes TICK; ``in`` compares in C (most batches hold none)
    kept = np.arange(len(batch))
    if TICK in others:
        ticks = [i for i, m in zip(others_at.tolist(), others) if is_tick(m)]
        out.ticks = len(ticks)
        others = [m for m in others if not is_tick(m)]
        kept = np.setdiff1d(kept, np.array(ticks, dtype=np.int64), assume_unique=True)
    if not kept.size:
        return out
    timestamps = batch.timestamps[kept]
    if flows is None:
        decoded = decoder.decode_many(others)
    else:
        parsed = flows.parsed[kept]
        decoded = decoder.decode_flows_parsed(
            parsed, flows.sources, flows.destinations, flows.weights, flows.event_ms, others
        )
    good = decoded.ok if decoded.ok is not None else np.array([r is None for r in decoded.reasons], dtype=bool)
    stamped = timestamps >= 0  # NO_TIMESTAMP, and Kafka's -1 ("no timestamp"), are negative
    events = timestamps.copy()
    if decoded.event_times is not None:
        own = decoded.event_times >= 0
        events[own] = decoded.event_times[own]
    starts, verdict = schedule.accept(np.where(stamped, events, 0), np.where(stamped, timestamps, 0))
    keep = good & stamped & (verdict < 0)
    for i in np.flatnonzero(~keep).tolist():
        message = batch.value(int(kept[i]))
        stamp = int(timestamps[i])
        kafka_ts = None if stamp == NO_TIMESTAMP else stamp
        if not good[i]:
            reason = decoded.reasons[i]
            assert reason is not None
            counted = is_unparsable(reason) and not decoder.holds_element(message)
            out.dead.append((reason, message, kafka_ts, counted))
        elif not stamped[i]:
            out.dead.append(("no_timestamp", message, kafka_ts, False))
        elif verdict[i] >= 0:
            out.dead.append((ELEMENT_REASONS[int(verdict[i])], message, kafka_ts, False))
    if not keep.any():
        return out
    epochs = schedule.epoch_of(np.where(stamped, timestamps, 0))
    element_keep = np.repeat(keep, decoded.counts)
    values = decoded.values
    as_list = isinstance(values, list)
    if as_list:
        values = np.array(values + [None], dtype=object)[:-1]  # 1-d even when every path is alike
    # the (window, epoch) groups in ascending order, and each kept message's group
    kept_starts, kept_epochs = starts[keep], epochs[keep]
    if (kept_starts == kept_starts[0]).all() and (kept_epochs == kept_epochs[0]).all():  # the usual batch
        groups = [(int(kept_starts[0]), int(kept_epochs[0]))]
        masks: list[np.ndarray] = [element_keep]
    else:  # one stable sort splits the elements by group, each group's in batch order: O(n log n), not O(groups·n)
        order = np.lexsort((kept_epochs, kept_starts))
        sorted_starts, sorted_epochs = kept_starts[order], kept_epochs[order]
        first = np.ones(order.size, dtype=bool)
        first[1:] = (sorted_starts[1:] != sorted_starts[:-1]) | (sorted_epochs[1:] != sorted_epochs[:-1])
        groups = list(zip(sorted_starts[first].tolist(), sorted_epochs[first].tolist()))
        message_group = np.full(len(keep), -1, dtype=np.int64)
        kept_group = np.empty(order.size, dtype=np.int64)
        kept_group[order] = np.cumsum(first) - 1
        message_group[keep] = kept_group
        element_group = np.repeat(message_group, decoded.counts)
        element_order = np.argsort(element_group, kind="stable")
        bounds = np.searchsorted(element_group[element_order], np.arange(len(groups) + 1))
        masks = [element_order[bounds[g] : bounds[g + 1]] for g in range(len(groups))]
    for (start, epoch), mask in zip(groups, masks):
        chosen = values[mask]
        units = None if decoded.units is None else decoded.units[mask]
        weights = None if decoded.weights is None else decoded.weights[mask]
        out.windows.append((start, epoch, chosen.tolist() if as_list else chosen, units, weights))
    return out
