"""The packed formats: many fixed-width big-endian elements per message (the fast path).

* ``packed-ipv4``: IPv4 addresses, 4 bytes each;
* ``packed-ipv4-pairs``: 8 bytes per element: a big-endian IPv4 *unit* address (e.g. the source,
  the privacy unit of user-level privacy) then the big-endian IPv4 address the hierarchy is over
  (e.g. the destination); a pair hierarchy reads the two as (source, destination).

A packed message is decoded element by element whatever its size (docs/ALGORITHMS.md §0.1 e);
its only reasons are ``empty`` and ``bad_length`` (not a whole number of elements).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from .base import Decoded, DecodedBatch, DecoderOptions, MessageFormat

__all__ = ["PackedIPv4", "PackedIPv4Pairs"]

_BE_U32 = np.dtype(">u4")


def _length(value: bytes | None) -> int:
    return -1 if value is None else len(value)


class _FixedWidth(MessageFormat):
    """Messages of ``width``-byte elements; a subclass says what an element's words are (:meth:`_columns`)."""

    width: ClassVar[int]
    packed = True
    reasons = ("empty", "bad_length")

    def _reason(self, value: bytes | None) -> str | None:
        """``empty``, or ``bad_length`` for a message that is not a whole number of elements."""
        reason = self.size_reason(value)
        if reason is None and len(value) % self.width:  # type: ignore[arg-type]
            return "bad_length"
        return reason

    def _columns(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(values, units or ``None``) of the big-endian uint32 ``words`` of whole elements."""
        raise NotImplementedError

    def decode(self, value: bytes | None) -> Decoded:
        reason = self._reason(value)
        if reason is not None:
            return Decoded(reason=reason)
        values, units = self._columns(np.frombuffer(value, dtype=_BE_U32))  # type: ignore[arg-type]
        return Decoded(values=values, units=units)

    def decode_many(self, values: list[bytes | None]) -> DecodedBatch:
        """The reasons of :meth:`_reason` for the whole batch at once (lengths as an array: no
        Python step per message where every message is whole), the good messages' elements joined."""
        n = len(values)
        lengths = np.fromiter(map(_length, values), dtype=np.int64, count=n)  # -1: a missing value
        bad = (lengths <= 0) | (lengths % self.width != 0)
        counts = np.where(bad, 0, lengths // self.width)
        reasons: list[str | None] = [None] * n
        for i in np.flatnonzero(bad).tolist():
            reasons[i] = "empty" if lengths[i] <= 0 else "bad_length"
        good = values if not bad.any() else [v for v, b in zip(values, bad.tolist()) if not b]
        decoded, units = self._columns(np.frombuffer(b"".join(good), dtype=_BE_U32))  # type: ignore[arg-type]
        return DecodedBatch(reasons, counts, decoded, None, units)

    def holds_element(self, value: bytes | None) -> bool:
        """A message of at least one element's bytes may hold one (a bad length cuts the last)."""
        return bool(value) and len(value) >= self.width  # type: ignore[arg-type]


class PackedIPv4(_FixedWidth):
    """``packed-ipv4``: big-endian IPv4 addresses, 4 bytes each, many per message."""

    name = "packed-ipv4"
    summary = "big-endian IPv4 addresses, 4 bytes each, many per message (the fast path)"
    hierarchy_kinds = frozenset({"ipv4"})
    width = 4

    def _columns(self, words: np.ndarray) -> tuple[np.ndarray, None]:
        return words.astype(np.uint32), None


class PackedIPv4Pairs(_FixedWidth):
    """``packed-ipv4-pairs``: (unit or source address, address) big-endian IPv4 pairs, 8 bytes each."""

    name = "packed-ipv4-pairs"
    summary = (
        "8 bytes per element, many per message: a big-endian IPv4 unit (or source) address, then the "
        "address the hierarchy is over (or the destination of a pair hierarchy)"
    )
    hierarchy_kinds = frozenset({"ipv4", "pair"})
    unit_keys = {"source-ipv4": "the unit address of each element"}
    reads = frozenset({"source_units"})
    width = 8

    def __init__(self, options: DecoderOptions) -> None:
        super().__init__(options)
        self.has_units = True  # the first address of every element

    def _columns(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pairs = words.reshape(-1, 2)
        return pairs[:, 1].astype(np.uint32), pairs[:, 0].astype(np.uint64)
