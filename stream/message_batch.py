"""The batch records made by the Java ``MessageBatcher`` operator (deploy/java/), read in Python.

Crossing from the JVM into the Python worker costs far more per record than decoding a message,
so the job packs consecutive Kafka messages into one record before ``decode``. The batcher keeps
order and flushes before every watermark, checkpoint barrier and at end of input, so decoding a
batch message by message is exactly equivalent to decoding the messages one record each.

Layout (little-endian): magic ``DPB1``, int32 ``n``, ``n`` int64 timestamps (``NO_TIMESTAMP``
when a record had none), ``n`` int32 lengths (``-1`` for a null value), then the values back to
back. :func:`pack_batch` is the Python twin of the Java writer (for tests and tools).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sketches.errors import InputError, UsageError

__all__ = ["MAGIC", "NO_TIMESTAMP", "BatchFormatError", "pack_batch", "unpack_batch"]

MAGIC = b"DPB1"
NO_TIMESTAMP = -(2**63)
_HEADER = 8


class BatchFormatError(InputError):
    """A batch record that does not follow the layout (a version mismatch between jar and worker)."""


def pack_batch(timestamps: Sequence[int | None], values: Sequence[bytes | None]) -> bytes:
    """One batch record of ``values`` with their record ``timestamps`` (``None``: no timestamp)."""
    if len(timestamps) != len(values):
        raise UsageError("pack_batch: timestamps and values differ in length")
    ts = np.array([NO_TIMESTAMP if t is None else t for t in timestamps], dtype="<i8")
    lengths = np.array([-1 if v is None else len(v) for v in values], dtype="<i4")
    body = b"".join(v for v in values if v)
    return MAGIC + np.int32(len(values)).astype("<i4").tobytes() + ts.tobytes() + lengths.tobytes() + body


def unpack_batch(data: bytes) -> tuple[np.ndarray, list[bytes | None]]:
    """(int64 timestamps, values) of one batch record; raises :class:`BatchFormatError` if malformed."""
    data = bytes(data)
    if len(data) < _HEADER or data[:4] != MAGIC:
        raise BatchFormatError("MessageBatch: Possible corruption: not a DPB1 batch record")
    n = int(np.frombuffer(data, dtype="<i4", count=1, offset=4)[0])
    end_of_index = _HEADER + 12 * n
    if n < 0 or end_of_index > len(data):
        raise BatchFormatError("MessageBatch: Possible corruption: index longer than the record")
    timestamps = np.frombuffer(data, dtype="<i8", count=n, offset=_HEADER).astype(np.int64)
    lengths = np.frombuffer(data, dtype="<i4", count=n, offset=_HEADER + 8 * n).astype(np.int64)
    if np.any(lengths < -1):
        raise BatchFormatError("MessageBatch: Possible corruption: negative value length")
    sizes = np.maximum(lengths, 0)
    ends = end_of_index + np.cumsum(sizes)
    if n and int(ends[-1]) != len(data):
        raise BatchFormatError("MessageBatch: Possible corruption: values do not fill the record")
    if not n and len(data) != end_of_index:
        raise BatchFormatError("MessageBatch: Possible corruption: trailing bytes after an empty batch")
    starts = (ends - sizes).tolist()
    values: list[bytes | None] = [
        None if length < 0 else data[s:e] for s, e, length in zip(starts, ends.tolist(), lengths.tolist())
    ]
    return timestamps, values
