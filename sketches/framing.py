"""Versioned, checksummed binary frames: the one layout of dphhh's serialised state.

A frame is a header — magic (4 bytes), format version (uint16), flags (uint16, always 0), then the
owner's own fields — followed by the owner's body and a CRC-32 of header and body. :func:`seal`
builds a frame; :func:`unseal` checks its length, checksum, magic, version and flags (in that
order, so a damaged version byte is reported as corruption) and names the owner in every error
("<owner>: Possible corruption: …"). Used by :class:`~dphhh.sketches.misra_gries.MisraGries` and
:class:`~dphhh.privacy.unit_cap.UnitCap`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

__all__ = ["CRC", "seal", "unseal"]

CRC = struct.Struct("<I")


def seal(header: struct.Struct, magic: bytes, version: int, fields: Sequence[int], body: bytes) -> bytes:
    """The frame of ``body`` under ``header`` (``<4sHH`` then the owner's ``fields``)."""
    framed = header.pack(magic, version, 0, *fields) + body
    return framed + CRC.pack(zlib.crc32(framed))


def unseal(
    data: bytes, header: struct.Struct, magic: bytes, version: int, *, owner: str, error: type[Exception]
) -> tuple:
    """The owner's header fields (those after magic, version and flags) of a frame made by
    :func:`seal`; raises ``error`` naming ``owner`` if the frame is damaged or of another version.
    The body starts at ``header.size`` and ends ``CRC.size`` bytes before the end."""
    if len(data) < header.size + CRC.size:
        raise error(f"{owner}: Possible corruption: {len(data)} bytes is shorter than a header")
    (crc,) = CRC.unpack_from(data, len(data) - CRC.size)
    if crc != zlib.crc32(data[: len(data) - CRC.size]):
        raise error(f"{owner}: Possible corruption: checksum mismatch")
    found, found_version, flags, *fields = header.unpack_from(data)
    if found != magic:
        raise error(f"{owner}: Possible corruption: bad magic {found!r} (expected {magic!r})")
    if found_version != version:
        raise error(f"{owner}: unsupported serialisation version {found_version} (this build reads {version})")
    if flags != 0:
        raise error(f"{owner}: Possible corruption: unknown flags {flags:#x}")
    return tuple(fields)
