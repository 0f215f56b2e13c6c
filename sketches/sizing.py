"""Memory and serialised size of Misra-Gries sketches, from κ alone (public: no data involved).

Used by ``dphhh plan`` to say what a window's sketches cost before anything runs. The figures are
those of :class:`~dphhh.sketches.misra_gries.MisraGries`: in memory, the slot keys, counters, zero-slot
list and table positions (8 bytes per slot each) plus the key → slot hash table (two int64 per
bucket, a power of two >= 16κ buckets) and its secret hash key (three uint64); serialised (checkpoints, state), a 28-byte header, 16
bytes per slot and a 4-byte checksum. ``tests/sketches/test_sizing.py`` checks both against real
sketches.
"""

from __future__ import annotations

__all__ = ["sketch_memory_bytes", "sketch_state_bytes"]

_HEADER_BYTES = 28  # magic, version, flags, κ, total, decrements
_CRC_BYTES = 4
_META_BYTES = 8 * 4  # the kernel's metadata vector (sketches._mg_kernel.META_SIZE int64)
_HASH_KEY_BYTES = 8 * 3  # the index's secret hash key (sketches._mg_kernel.HASH_KEY_WORDS uint64)


def _table_buckets(kappa: int) -> int:
    size = 8
    while size < 16 * kappa:
        size <<= 1
    return size


def sketch_memory_bytes(kappa: int) -> int:
    """Bytes of numpy arrays one sketch of κ slots holds in memory."""
    return 8 * 4 * kappa + 2 * 8 * _table_buckets(kappa) + _META_BYTES + _HASH_KEY_BYTES


def sketch_state_bytes(kappa: int) -> int:
    """Bytes of one sketch of κ slots serialised (``MisraGries.to_bytes``)."""
    return _HEADER_BYTES + 16 * kappa + _CRC_BYTES
