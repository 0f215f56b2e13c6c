"""The batch records made by the Java ``MessageBatcher`` operator (deploy/java/), read in Python.

Crossing from the JVM into the Python worker costs far more per record than decoding a message,
so the job packs consecutive Kafka messages into one record before ``decode``. The batcher keeps
order and flushes before every watermark, checkpoint barrier and at end of input, so decoding a
batch message by message is exactly equivalent to decoding the messages one record each.

Two layouts (little-endian), told apart by their magic:

``DPB1``  int32 ``n``, ``n`` int64 timestamps (``NO_TIMESTAMP`` when a record had none), ``n``
          int32 lengths (``-1`` for a null value), then the values back to back.
``DPB2``  (flow-json, ``flink.batch_parse_flows``: the batcher has read the usual flow records into
          columns, Java ``FlowRecordParser``) the same header, timestamps and lengths, then int32
          ``k``, ``k`` uint32 source addresses, ``k`` uint32 destination addresses (0 where not
          read), ``k`` int64 weights, ``k`` int64 event times (epoch ms, ``-1`` = none), ``n``
          uint8 flags (1 = read into the columns, in order; their sum is ``k``), then every value
          (the parsed ones too: a dead letter carries its record's bytes).

:func:`pack_batch` is the Python twin of the Java writer (for tests and tools); :func:`read_batch`
reads either layout and slices a value only when asked for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dphhh.sketches.errors import InputError, UsageError

__all__ = [
    "MAGIC",
    "MAGIC_FLOWS",
    "NO_TIMESTAMP",
    "BatchFormatError",
    "ParsedFlows",
    "MessageBatch",
    "pack_batch",
    "read_batch",
    "unpack_batch",
]

MAGIC = b"DPB1"
MAGIC_FLOWS = b"DPB2"
NO_TIMESTAMP = -(2**63)
_HEADER = 8


class BatchFormatError(InputError):
    """A batch record that does not follow the layout (a version mismatch between jar and worker)."""


@dataclass(frozen=True)
class ParsedFlows:
    """The flow records the Java batcher read (``DPB2``): ``parsed`` (bool per message) marks them;
    ``sources``, ``destinations`` (uint32), ``weights`` and ``event_ms`` (int64, ``-1`` = no own
    time) hold one entry per parsed message, in message order."""

    parsed: np.ndarray
    sources: np.ndarray
    destinations: np.ndarray
    weights: np.ndarray
    event_ms: np.ndarray


@dataclass(frozen=True)
class MessageBatch:
    """One batch record: ``timestamps`` (int64 per message), the values (sliced on demand) and,
    for a ``DPB2`` record, the columns of the flow records the batcher read (else ``None``)."""

    timestamps: np.ndarray
    data: bytes
    starts: np.ndarray
    lengths: np.ndarray
    flows: ParsedFlows | None = None

    def __len__(self) -> int:
        return int(self.timestamps.shape[0])

    def value(self, i: int) -> bytes | None:
        """Message ``i``'s value (``None`` for a null value)."""
        length = int(self.lengths[i])
        if length < 0:
            return None
        start = int(self.starts[i])
        return self.data[start : start + length]

    def values(self, at: Sequence[int] | np.ndarray | None = None) -> list[bytes | None]:
        """The values of messages ``at`` (default: all), in that order."""
        starts, lengths = self.starts, self.lengths
        if at is not None:
            at = np.asarray(at, dtype=np.int64)
            starts, lengths = starts[at], lengths[at]
        data = self.data
        return [None if n < 0 else data[s : s + n] for s, n in zip(starts.tolist(), lengths.tolist())]


def pack_batch(
    timestamps: Sequence[int | None], values: Sequence[bytes | None], flows: ParsedFlows | None = None
) -> bytes:
    """One batch record of ``values`` with their record ``timestamps`` (``None``: no timestamp); with
    ``flows``, a ``DPB2`` record carrying those columns."""
    if len(timestamps) != len(values):
        raise UsageError("pack_batch: timestamps and values differ in length")
    ts = np.array([NO_TIMESTAMP if t is None else t for t in timestamps], dtype="<i8")
    lengths = np.array([-1 if v is None else len(v) for v in values], dtype="<i4")
    body = b"".join(v for v in values if v)
    head = np.int32(len(values)).astype("<i4").tobytes() + ts.tobytes() + lengths.tobytes()
    if flows is None:
        return MAGIC + head + body
    parsed = np.asarray(flows.parsed, dtype=bool)
    k = int(parsed.sum())
    if parsed.shape != (len(values),) or any(
        np.asarray(c).shape != (k,) for c in (flows.sources, flows.destinations, flows.weights, flows.event_ms)
    ):
        raise UsageError("pack_batch: flows need a flag per message and a column entry per parsed message")
    columns = (
        np.int32(k).astype("<i4").tobytes()
        + np.asarray(flows.sources, dtype="<u4").tobytes()
        + np.asarray(flows.destinations, dtype="<u4").tobytes()
        + np.asarray(flows.weights, dtype="<i8").tobytes()
        + np.asarray(flows.event_ms, dtype="<i8").tobytes()
        + parsed.astype(np.uint8).tobytes()
    )
    return MAGIC_FLOWS + head + columns + body


def _corrupt(what: str) -> BatchFormatError:
    return BatchFormatError(f"MessageBatch: Possible corruption: {what}")


def read_batch(data: bytes) -> MessageBatch:
    """One batch record, either layout; raises :class:`BatchFormatError` if malformed."""
    data = bytes(data)
    magic = data[:4]
    if len(data) < _HEADER or magic not in (MAGIC, MAGIC_FLOWS):
        raise _corrupt("not a DPB1 or DPB2 batch record")
    n = int(np.frombuffer(data, dtype="<i4", count=1, offset=4)[0])
    end_of_index = _HEADER + 12 * n
    if n < 0 or end_of_index > len(data):
        raise _corrupt("index longer than the record")
    timestamps = np.frombuffer(data, dtype="<i8", count=n, offset=_HEADER).astype(np.int64)
    lengths = np.frombuffer(data, dtype="<i4", count=n, offset=_HEADER + 8 * n).astype(np.int64)
    if np.any(lengths < -1):
        raise _corrupt("negative value length")
    flows = None
    body = end_of_index
    if magic == MAGIC_FLOWS:
        flows, body = _read_columns(data, n, end_of_index)
        if np.any(lengths[flows.parsed] < 0):
            raise _corrupt("a parsed flow record without a value")
    sizes = np.maximum(lengths, 0)
    ends = body + np.cumsum(sizes)
    if n and int(ends[-1]) != len(data):
        raise _corrupt("values do not fill the record")
    if not n and len(data) != body:
        raise _corrupt("trailing bytes after an empty batch")
    return MessageBatch(timestamps, data, ends - sizes, lengths, flows)


def _read_columns(data: bytes, n: int, at: int) -> tuple[ParsedFlows, int]:
    if at + 4 > len(data):
        raise _corrupt("flow columns missing")
    k = int(np.frombuffer(data, dtype="<i4", count=1, offset=at)[0])
    end = at + 4 + 24 * k + n
    if not 0 <= k <= n or end > len(data):
        raise _corrupt("flow columns longer than the record")
    at += 4
    sources = np.frombuffer(data, dtype="<u4", count=k, offset=at).astype(np.uint32)
    destinations = np.frombuffer(data, dtype="<u4", count=k, offset=at + 4 * k).astype(np.uint32)
    weights = np.frombuffer(data, dtype="<i8", count=k, offset=at + 8 * k).astype(np.int64)
    event_ms = np.frombuffer(data, dtype="<i8", count=k, offset=at + 16 * k).astype(np.int64)
    flags = np.frombuffer(data, dtype=np.uint8, count=n, offset=at + 24 * k)
    if np.any(flags > 1) or int(flags.sum()) != k:
        raise _corrupt("flow flags do not match the columns")
    return ParsedFlows(flags.astype(bool), sources, destinations, weights, event_ms), end


def unpack_batch(data: bytes) -> tuple[np.ndarray, list[bytes | None]]:
    """(int64 timestamps, values) of one batch record, either layout (a ``DPB2`` record's columns
    are not returned); raises :class:`BatchFormatError` if malformed."""
    batch = read_batch(data)
    return batch.timestamps, batch.values()
