"""Source IPv4 addresses from packet capture files (classic pcap and pcapng), pure Python + numpy.

The readers walk the file's record/block headers in Python (one ``struct`` call or so per packet)
and decode the link-layer and IPv4 headers of a whole batch of packets at once with numpy. They
yield the IPv4 **source** address of every usable packet as ``numpy.uint32`` host-integer values
(``1.2.3.4`` -> ``0x01020304``), in capture order, in chunks of at most ``chunk_size`` addresses.

Formats
    * classic pcap: both byte orders, microsecond (``a1b2c3d4``) and nanosecond (``a1b23c4d``)
      magic; the link type is the header's (lower 16 bits of the) network field.
    * pcapng: any number of sections, each Section Header Block in either byte order; Interface
      Description Blocks give each interface's link type; Enhanced Packet Blocks, Simple Packet
      Blocks (interface 0) and the obsolete Packet Block carry packets; every other block type is
      skipped.

Link types
    Ethernet (1, with zero, one or two 802.1Q / 802.1ad / 0x9100 VLAN tags), raw IP (101) and raw
    IPv4 (228), Linux cooked capture SLL (113) and SLL2 (276), BSD loopback/null (0, address
    family 2 in either byte order).

Skipped packets are counted in a :class:`~dphhh.connectors.skips.SkipCounter`, never stored:

    ``not_ipv4``              other ethertype / protocol / address family, IP version != 4
    ``truncated``             captured bytes end before the link header or the 20-byte IPv4 header
    ``unsupported_linktype``  the packet's link type is none of the above
    ``unknown_interface``     (pcapng) a packet names an interface with no preceding IDB
    ``corrupt_file_tail``     the file ends inside a record or a record/block header is
                              implausible; reading stops there (counted once), what was read is kept

An unknown magic or an unreadable file header raises :class:`ValueError` naming the file (never
quoting file contents). IPv4 header fields other than the version (IHL, checksum, fragments) are
not validated: only the version nibble and the captured length are checked.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Any, BinaryIO

import numpy as np

from dphhh.connectors.skips import SkipCounter
from dphhh.sketches.errors import UsageError

__all__ = [
    "PCAP_MAGICS",
    "PCAPNG_MAGIC",
    "SUPPORTED_LINKTYPES",
    "capture_format",
    "iter_capture_sources",
    "iter_capture_sources_with_lengths",
    "iter_capture_pairs",
    "read_capture_sources",
    "read_pcap_sources",
    "read_pcapng_sources",
]

#: Classic pcap magic numbers (as big-endian 32-bit values of the first 4 bytes) -> (byte order, ns?).
PCAP_MAGICS: dict[bytes, tuple[str, bool]] = {
    b"\xa1\xb2\xc3\xd4": (">", False),
    b"\xd4\xc3\xb2\xa1": ("<", False),
    b"\xa1\xb2\x3c\x4d": (">", True),
    b"\x4d\x3c\xb2\xa1": ("<", True),
}
#: The pcapng Section Header Block type, identical in both byte orders.
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
_PCAPNG_BOM = {b"\x1a\x2b\x3c\x4d": ">", b"\x4d\x3c\x2b\x1a": "<"}

LINKTYPE_NULL = 0
LINKTYPE_ETHERNET = 1
LINKTYPE_RAW = 101
LINKTYPE_LINUX_SLL = 113
LINKTYPE_IPV4 = 228
LINKTYPE_LINUX_SLL2 = 276
SUPPORTED_LINKTYPES = frozenset(
    {
        LINKTYPE_NULL,
        LINKTYPE_ETHERNET,
        LINKTYPE_RAW,
        LINKTYPE_LINUX_SLL,
        LINKTYPE_IPV4,
        LINKTYPE_LINUX_SLL2,
    }
)

_ETHERTYPE_IPV4 = 0x0800
_VLAN_ETHERTYPES = (0x8100, 0x88A8, 0x9100)
_IPV4_MIN_HEADER = 20

# A single packet record / pcapng block larger than this is taken as corruption, not data.
_MAX_RECORD = 64 << 20
_READ_SIZE = 1 << 20

# Per-packet status codes used while decoding a batch.
_OK, _TRUNCATED, _NOT_IPV4, _UNSUPPORTED, _CUT_HEADER = 0, 1, 2, 3, 4
_STATUS_REASONS = {
    _TRUNCATED: "truncated",
    _NOT_IPV4: "not_ipv4",
    _UNSUPPORTED: "unsupported_linktype",
    _CUT_HEADER: "truncated_header",
}


# --------------------------------------------------------------------------------------------
# header probing


def _display(path: str | os.PathLike[str]) -> str:
    return os.fspath(path)


def _read_prefix(path: str | os.PathLike[str], n: int) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except FileNotFoundError:
        raise UsageError(f"{_display(path)}: file not found") from None
    except IsADirectoryError:
        raise UsageError(f"{_display(path)}: is a directory, not a capture file") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"{_display(path)}: cannot read file ({reason})") from None


def _pcap_header(path: str | os.PathLike[str], head: bytes) -> tuple[str, int]:
    """Validate a classic pcap global header; return (byte order, link type)."""
    endian, _ns = PCAP_MAGICS[head[:4]]
    if len(head) < 24:
        raise UsageError(f"{_display(path)}: truncated pcap file header ({len(head)} of 24 bytes)")
    network = struct.unpack_from(endian + "I", head, 20)[0]
    return endian, network & 0xFFFF


def _pcapng_shb(path: str | os.PathLike[str], head: bytes) -> None:
    """Validate the first pcapng Section Header Block's fixed part."""
    if len(head) < 28:
        raise UsageError(f"{_display(path)}: truncated pcapng section header ({len(head)} of 28 bytes)")
    endian = _PCAPNG_BOM.get(head[8:12])
    if endian is None:
        raise UsageError(f"{_display(path)}: pcapng section header has an invalid byte-order magic")
    blen, _bom, major = struct.unpack_from(endian + "IIH", head, 4)
    if blen < 28 or blen % 4 or blen > _MAX_RECORD:
        raise UsageError(f"{_display(path)}: pcapng section header has an invalid block length")
    if major != 1:
        raise UsageError(f"{_display(path)}: unsupported pcapng major version {major}")


def capture_format(path: str | os.PathLike[str]) -> str:
    """``"pcap"`` or ``"pcapng"`` for a capture file with a valid header, else :class:`ValueError`.

    The error message names the file and says what is wrong; it never quotes the file's bytes.
    """
    head = _read_prefix(path, 28)
    if not head:
        raise UsageError(f"{_display(path)}: empty file, not a pcap/pcapng capture")
    if head[:4] in PCAP_MAGICS:
        _pcap_header(path, head)
        return "pcap"
    if head[:4] == PCAPNG_MAGIC:
        _pcapng_shb(path, head)
        return "pcapng"
    raise UsageError(f"{_display(path)}: not a pcap/pcapng capture (unknown magic number)")


# --------------------------------------------------------------------------------------------
# vectorised packet decoding


def _decode_batch(
    buf: bytes,
    offs: list[int],
    lens: list[int],
    linktypes: int | list[int],
    skips: SkipCounter,
    ip_lengths: bool | str = False,
) -> Any:
    """Source IPv4 of the packets ``buf[offs[i] : offs[i] + lens[i]]`` as uint32, skipping the rest;
    with ``ip_lengths`` also each packet's IPv4 total length (header field, bytes of the IP packet
    as flow exporters count them) as int64: ``(sources, lengths)``; with ``ip_lengths =
    "destinations"`` each packet's IPv4 destination instead: ``(sources, destinations)``."""
    data = np.frombuffer(buf, dtype=np.uint8)
    last = data.size - 1
    off = np.asarray(offs, dtype=np.int64)
    cap = np.asarray(lens, dtype=np.int64)
    n = off.size
    status = np.zeros(n, dtype=np.int8)
    l3 = off.copy()  # absolute offset of the IPv4 header

    def u8(pos: np.ndarray) -> np.ndarray:
        # Positions past a short packet may fall off the buffer: clamp (those rows are masked anyway).
        return data[np.minimum(pos, last)].astype(np.int64)

    def u16be(pos: np.ndarray) -> np.ndarray:
        return (u8(pos) << 8) | u8(pos + 1)

    groups: list[tuple[int, np.ndarray | None]]  # (link type, its rows; None: every row)
    if isinstance(linktypes, int):
        groups = [(linktypes, None)]
    else:
        lt = np.asarray(linktypes, dtype=np.int64)
        groups = [(int(v), np.flatnonzero(lt == v)) for v in np.unique(lt)]

    for linktype, idx in groups:
        o = off if idx is None else off[idx]
        c = cap if idx is None else cap[idx]
        st = np.zeros(o.size, dtype=np.int8)
        if linktype == LINKTYPE_ETHERNET:
            st[c < 14] = _TRUNCATED
            et = u16be(o + 12)
            hdr = np.full(o.size, 14, dtype=np.int64)
            for _ in range(2):  # up to two VLAN tags (802.1Q, 802.1ad / QinQ)
                tagged = (st == _OK) & np.isin(et, _VLAN_ETHERTYPES)
                if not tagged.any():
                    break
                st[tagged & (c < hdr + 4)] = _TRUNCATED
                tagged &= st == _OK
                et = np.where(tagged, u16be(o + hdr + 2), et)
                hdr = np.where(tagged, hdr + 4, hdr)
            st[(st == _OK) & (et != _ETHERTYPE_IPV4)] = _NOT_IPV4
            start = o + hdr
        elif linktype in (LINKTYPE_RAW, LINKTYPE_IPV4):
            start = o
        elif linktype == LINKTYPE_LINUX_SLL:
            st[c < 16] = _TRUNCATED
            st[(st == _OK) & (u16be(o + 14) != _ETHERTYPE_IPV4)] = _NOT_IPV4
            start = o + 16
        elif linktype == LINKTYPE_LINUX_SLL2:
            st[c < 20] = _TRUNCATED
            st[(st == _OK) & (u16be(o) != _ETHERTYPE_IPV4)] = _NOT_IPV4
            start = o + 20
        elif linktype == LINKTYPE_NULL:
            st[c < 4] = _TRUNCATED
            b0, b1, b2, b3 = u8(o), u8(o + 1), u8(o + 2), u8(o + 3)
            # The family is in the capturing host's byte order: AF_INET (2) either way round.
            middle_zero = (b1 == 0) & (b2 == 0)
            inet = middle_zero & (((b0 == 2) & (b3 == 0)) | ((b0 == 0) & (b3 == 2)))
            st[(st == _OK) & ~inet] = _NOT_IPV4
            start = o + 4
        else:
            st[:] = _UNSUPPORTED
            start = o
        if idx is None:
            status, l3 = st, start
        else:
            status[idx] = st
            l3[idx] = start

    # IPv4 header: version nibble first (an IPv6 packet is "not_ipv4" even when short), then length.
    remaining = cap - (l3 - off)
    pending = status == _OK
    status[pending & (remaining < 1)] = _TRUNCATED
    pending = status == _OK
    status[pending & ((u8(l3) >> 4) != 4)] = _NOT_IPV4
    pending = status == _OK
    # cut before the addresses it is read for (the source ends at byte 16, the destination at 20):
    # truncated, no element; cut after them but inside the 20-byte header: an IPv4 packet whose
    # addresses may be somebody's element — left out, its count never shown (connectors/skips.py)
    needed = _IPV4_MIN_HEADER if ip_lengths == "destinations" else 16
    status[pending & (remaining < needed)] = _TRUNCATED
    pending = status == _OK
    status[pending & (remaining < _IPV4_MIN_HEADER)] = _CUT_HEADER

    good = status == _OK
    if not good.all():
        counts = np.bincount(status, minlength=len(_STATUS_REASONS) + 1)
        for code, reason in _STATUS_REASONS.items():
            skips.add(reason, int(counts[code]))
    s = l3[good] + 12
    src = (u8(s) << 24) | (u8(s + 1) << 16) | (u8(s + 2) << 8) | u8(s + 3)
    if ip_lengths == "destinations":
        d = s + 4
        dst = (u8(d) << 24) | (u8(d + 1) << 16) | (u8(d + 2) << 8) | u8(d + 3)
        return src.astype(np.uint32), dst.astype(np.uint32)
    if ip_lengths:
        return src.astype(np.uint32), u16be(l3[good] + 2).astype(np.int64)
    return src.astype(np.uint32)


# --------------------------------------------------------------------------------------------
# file walkers


def _open_capture(path: str | os.PathLike[str]) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"{_display(path)}: cannot read file ({reason})") from None


def _walk_pcap(
    path: str | os.PathLike[str], skips: SkipCounter, chunk_size: int, ip_lengths: bool | str = False
) -> Iterator[Any]:
    with _open_capture(path) as f:
        head = f.read(24)
        endian, linktype = _pcap_header(path, head)
        incl_at = struct.Struct(endian + "I").unpack_from
        buf = b""
        pos = 0
        eof = False
        while True:
            n = len(buf)
            offs: list[int] = []
            lens: list[int] = []
            corrupt = False
            while len(offs) < chunk_size and n - pos >= 16:
                incl = incl_at(buf, pos + 8)[0]
                if incl > _MAX_RECORD:
                    corrupt = True
                    break
                end = pos + 16 + incl
                if end > n:
                    break
                offs.append(pos + 16)
                lens.append(incl)
                pos = end
            if offs:
                out = _decode_batch(buf, offs, lens, linktype, skips, ip_lengths)
                if (out[0] if ip_lengths else out).size:
                    yield out
            if corrupt:
                skips.add("corrupt_file_tail")
                return
            if len(offs) == chunk_size:
                continue
            if eof:
                if pos < n:
                    skips.add("corrupt_file_tail")
                return
            more = f.read(_READ_SIZE)
            eof = not more
            buf = buf[pos:] + more
            pos = 0


class _NgLayout:
    """Precompiled ``struct`` readers for one pcapng section's byte order."""

    __slots__ = ("head", "u32", "epb", "opb", "idb")

    def __init__(self, endian: str) -> None:
        self.head = struct.Struct(endian + "II").unpack_from  # block type, block length
        self.u32 = struct.Struct(endian + "I").unpack_from
        self.epb = struct.Struct(endian + "I8xI").unpack_from  # interface id, captured length
        self.opb = struct.Struct(endian + "H10xI").unpack_from  # interface id, captured length
        self.idb = struct.Struct(endian + "H2xI").unpack_from  # link type, snap length


_NG_LAYOUTS = {e: _NgLayout(e) for e in ("<", ">")}
_SHB_TYPE = 0x0A0D0D0A  # the same in both byte orders


def _walk_pcapng(
    path: str | os.PathLike[str], skips: SkipCounter, chunk_size: int, ip_lengths: bool | str = False
) -> Iterator[Any]:
    with _open_capture(path) as f:
        head = f.read(28)
        _pcapng_shb(path, head)
        buf = head
        pos = 0
        eof = False
        lay = _NG_LAYOUTS["<"]  # replaced by the first SHB's byte order before any other block
        ifaces: list[tuple[int, int]] = []  # (link type, snap length) per interface id of the section
        while True:
            n = len(buf)
            offs: list[int] = []
            lens: list[int] = []
            lts: list[int] = []
            corrupt = False
            while len(offs) < chunk_size and n - pos >= 12:
                btype, blen = lay.head(buf, pos)
                section = None
                if btype == _SHB_TYPE:
                    section_endian = _PCAPNG_BOM.get(buf[pos + 8 : pos + 12])
                    if section_endian is None:
                        corrupt = True
                        break
                    section = _NG_LAYOUTS[section_endian]
                    blen = section.u32(buf, pos + 4)[0]
                    if blen < 28:
                        corrupt = True
                        break
                if blen < 12 or blen % 4 or blen > _MAX_RECORD:
                    corrupt = True
                    break
                end = pos + blen
                if end > n:
                    break
                if (section or lay).u32(buf, end - 4)[0] != blen:
                    corrupt = True
                    break
                if btype == 6 or btype == 2:  # Enhanced Packet Block / obsolete Packet Block
                    if blen < 32:
                        corrupt = True
                        break
                    iface, caplen = (lay.epb if btype == 6 else lay.opb)(buf, pos + 8)
                    if caplen > blen - 32:
                        corrupt = True
                        break
                    if iface < len(ifaces):
                        offs.append(pos + 28)
                        lens.append(caplen)
                        lts.append(ifaces[iface][0])
                    else:
                        skips.add("unknown_interface")
                elif section is not None:  # a new section: its byte order, no interfaces yet
                    lay = section
                    ifaces = []
                elif btype == 3:  # Simple Packet Block: always interface 0
                    if blen < 16:
                        corrupt = True
                        break
                    if ifaces:
                        caplen = min(lay.u32(buf, pos + 8)[0], blen - 16)
                        snaplen = ifaces[0][1]
                        if snaplen:
                            caplen = min(caplen, snaplen)
                        offs.append(pos + 12)
                        lens.append(caplen)
                        lts.append(ifaces[0][0])
                    else:
                        skips.add("unknown_interface")
                elif btype == 1:  # Interface Description Block
                    if blen < 20:
                        corrupt = True
                        break
                    ifaces.append(lay.idb(buf, pos + 8))
                pos = end
            if offs:
                out = _decode_batch(buf, offs, lens, lts, skips, ip_lengths)
                if (out[0] if ip_lengths else out).size:
                    yield out
            if corrupt:
                skips.add("corrupt_file_tail")
                return
            if len(offs) == chunk_size:
                continue
            if eof:
                if pos < n:
                    skips.add("corrupt_file_tail")
                return
            more = f.read(_READ_SIZE)
            eof = not more
            buf = buf[pos:] + more
            pos = 0


# --------------------------------------------------------------------------------------------
# public API


def _check_chunk_size(chunk_size: int) -> int:
    chunk_size = int(chunk_size)
    if chunk_size < 1:
        raise UsageError(f"chunk_size must be >= 1, got {chunk_size}")
    return chunk_size


def iter_capture_sources(
    path: str | os.PathLike[str], skips: SkipCounter, chunk_size: int = 65536
) -> Iterator[np.ndarray]:
    """Source IPv4 addresses (uint32 chunks, capture order) of a pcap *or* pcapng file.

    The format is chosen by the file's magic number. The header is validated *now*: a missing,
    unreadable or non-capture file raises :class:`ValueError` naming the file at call time; the
    returned iterator then reads the file lazily. Each chunk holds 1 .. ``chunk_size`` addresses
    (no empty chunks); skipped packets are counted into ``skips`` as they are read, so its counts
    are complete once the iterator is exhausted.
    """
    chunk_size = _check_chunk_size(chunk_size)
    fmt = capture_format(path)
    walker = _walk_pcap if fmt == "pcap" else _walk_pcapng
    return walker(path, skips, chunk_size)


def iter_capture_sources_with_lengths(
    path: str | os.PathLike[str], skips: SkipCounter, chunk_size: int = 65536
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """As :func:`iter_capture_sources`, with each packet's IPv4 total length (int64, the IP-layer
    bytes flow exporters count) beside its source: ``(sources, lengths)`` chunks."""
    chunk_size = _check_chunk_size(chunk_size)
    fmt = capture_format(path)
    walker = _walk_pcap if fmt == "pcap" else _walk_pcapng
    return walker(path, skips, chunk_size, True)


def iter_capture_pairs(
    path: str | os.PathLike[str], skips: SkipCounter, chunk_size: int = 65536
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """As :func:`iter_capture_sources`, with each packet's IPv4 destination beside its source:
    ``(sources, destinations)`` uint32 chunks (two-dimensional HHH, docs/ALGORITHMS.md §11)."""
    chunk_size = _check_chunk_size(chunk_size)
    fmt = capture_format(path)
    walker = _walk_pcap if fmt == "pcap" else _walk_pcapng
    return walker(path, skips, chunk_size, "destinations")


def read_pcap_sources(
    path: str | os.PathLike[str], chunk_size: int = 65536, skips: SkipCounter | None = None
) -> Iterator[np.ndarray]:
    """Source IPv4 addresses (uint32 chunks) of a *classic pcap* file; see :func:`iter_capture_sources`.

    Skipped packets are counted into ``skips`` (pass a counter to see them). A pcapng or other
    file raises :class:`ValueError` at call time.
    """
    chunk_size = _check_chunk_size(chunk_size)
    if capture_format(path) != "pcap":
        raise UsageError(f"{_display(path)}: is a pcapng file, not a classic pcap file")
    return _walk_pcap(path, SkipCounter() if skips is None else skips, chunk_size)


def read_pcapng_sources(
    path: str | os.PathLike[str], chunk_size: int = 65536, skips: SkipCounter | None = None
) -> Iterator[np.ndarray]:
    """Source IPv4 addresses (uint32 chunks) of a *pcapng* file; see :func:`iter_capture_sources`.

    Skipped packets are counted into ``skips`` (pass a counter to see them). A classic pcap or
    other file raises :class:`ValueError` at call time.
    """
    chunk_size = _check_chunk_size(chunk_size)
    if capture_format(path) != "pcapng":
        raise UsageError(f"{_display(path)}: is a classic pcap file, not a pcapng file")
    return _walk_pcapng(path, SkipCounter() if skips is None else skips, chunk_size)


def read_capture_sources(path: str | os.PathLike[str]) -> tuple[np.ndarray, SkipCounter]:
    """All source IPv4 addresses of a pcap/pcapng file as one uint32 array, with the skip counts.

    Convenience for small files and tests; large files should be streamed with
    :func:`iter_capture_sources`.
    """
    skips = SkipCounter()
    chunks = list(iter_capture_sources(path, skips))
    sources = np.concatenate(chunks) if chunks else np.empty(0, dtype=np.uint32)
    return sources, skips
