"""Tests for the capture readers (connectors.pcap) and input-file detection (connectors.files).

Synthetic captures are built byte by byte with ``struct`` in ``tmp_path``; the real StopDDoS
captures are the ones bundled in ``data/pcaps``.
"""

from __future__ import annotations

import ipaddress
import struct
import time
from pathlib import Path

import numpy as np
import pytest

from dphhh.connectors import pcap
from dphhh.connectors.files import INPUT_FORMATS, detect_format, open_input
from dphhh.connectors.pcap import (
    iter_capture_sources,
    read_capture_sources,
    read_pcap_sources,
    read_pcapng_sources,
)
from dphhh.connectors.skips import SkipCounter
from dphhh.stream.paths import data_dir

REPO_ROOT = Path(__file__).resolve().parents[2]
CAPTURE_DIR = data_dir() / "pcaps"

# --------------------------------------------------------------------------------------------
# packet builders


def ip(addr: str) -> int:
    return int(ipaddress.IPv4Address(addr))


def ipv4_packet(src: str, dst: str = "192.0.2.1", payload: bytes = b"\x00" * 8) -> bytes:
    """A minimal IPv4 header (IHL 5, UDP) followed by ``payload``."""
    total = min(20 + len(payload), 0xFFFF)  # a jumbo test payload just saturates the length field
    header = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        total,
        1,
        0,
        64,
        17,
        0,
        ipaddress.IPv4Address(src).packed,
        ipaddress.IPv4Address(dst).packed,
    )
    return header + payload


def ipv6_packet(src: str = "2001:db8::1", dst: str = "2001:db8::2") -> bytes:
    """A minimal IPv6 header with an 8-byte payload."""
    return (
        struct.pack("!IHBB", 6 << 28, 8, 17, 64)
        + ipaddress.IPv6Address(src).packed
        + ipaddress.IPv6Address(dst).packed
        + b"\x00" * 8
    )


def ethernet(payload: bytes, ethertype: int = 0x0800, vlans: tuple[int, ...] = ()) -> bytes:
    """An Ethernet II frame; ``vlans`` are the TPIDs of the VLAN tags, outermost first."""
    frame = b"\x02\x00\x00\x00\x00\x01" + b"\x02\x00\x00\x00\x00\x02"
    for i, tpid in enumerate(vlans):
        frame += struct.pack("!HH", tpid, 100 + i)
    return frame + struct.pack("!H", ethertype) + payload


def sll(payload: bytes, protocol: int = 0x0800) -> bytes:
    """A Linux cooked-capture (SLL, 16-byte) header plus ``payload``."""
    return struct.pack("!HHH8sH", 0, 1, 6, b"\x02\x00\x00\x00\x00\x01\x00\x00", protocol) + payload


def sll2(payload: bytes, protocol: int = 0x0800) -> bytes:
    """A Linux cooked-capture v2 (SLL2, 20-byte) header plus ``payload``."""
    return struct.pack("!HHIHBB8s", protocol, 0, 3, 1, 0, 6, b"\x02\x00\x00\x00\x00\x01\x00\x00") + payload


def null_loopback(payload: bytes, family: int = 2, endian: str = "<") -> bytes:
    """A BSD loopback header (address family in the capturing host's byte order) plus ``payload``."""
    return struct.pack(endian + "I", family) + payload


def write_pcap(
    path: Path, linktype: int, packets: list[bytes], endian: str = "<", nano: bool = False, tail: bytes = b""
) -> Path:
    """Write a classic pcap file; ``tail`` is appended raw after the last record."""
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = [struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, 65535, linktype)]
    for i, data in enumerate(packets):
        out.append(struct.pack(endian + "IIII", 1_700_000_000 + i, 0, len(data), len(data)) + data)
    path.write_bytes(b"".join(out) + tail)
    return path


def _pad4(data: bytes) -> bytes:
    return data + b"\x00" * (-len(data) % 4)


def block(endian: str, btype: int, body: bytes) -> bytes:
    """A pcapng block of type ``btype`` around ``body`` (padded to 32 bits)."""
    body = _pad4(body)
    length = 12 + len(body)
    return struct.pack(endian + "II", btype, length) + body + struct.pack(endian + "I", length)


def shb(endian: str) -> bytes:
    return block(endian, 0x0A0D0D0A, struct.pack(endian + "IHHq", 0x1A2B3C4D, 1, 0, -1))


def idb(endian: str, linktype: int, snaplen: int = 0) -> bytes:
    return block(endian, 1, struct.pack(endian + "HHI", linktype, 0, snaplen))


def epb(endian: str, iface: int, data: bytes) -> bytes:
    return block(endian, 6, struct.pack(endian + "IIIII", iface, 0, 0, len(data), len(data)) + data)


def spb(endian: str, data: bytes, orig_len: int | None = None) -> bytes:
    return block(endian, 3, struct.pack(endian + "I", len(data) if orig_len is None else orig_len) + data)


def opb(endian: str, iface: int, data: bytes) -> bytes:
    """An obsolete (type 2) Packet Block."""
    return block(endian, 2, struct.pack(endian + "HHIIII", iface, 0, 0, 0, len(data), len(data)) + data)


def read_all(path: Path, chunk_size: int = 65536) -> tuple[list[int], SkipCounter]:
    skips = SkipCounter()
    chunks = list(iter_capture_sources(path, skips, chunk_size))
    for chunk in chunks:
        assert chunk.dtype == np.uint32
        assert 1 <= chunk.size <= chunk_size
    return [int(v) for c in chunks for v in c], skips


# --------------------------------------------------------------------------------------------
# classic pcap


@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("nano", [False, True])
def test_pcap_both_byte_orders_and_resolutions(tmp_path: Path, endian: str, nano: bool) -> None:
    """Ethernet/IPv4 sources come back as host-order uint32 in capture order for every pcap magic."""
    srcs = ["1.2.3.4", "255.255.255.255", "0.0.0.0", "107.10.20.30", "1.2.3.4"]
    path = write_pcap(tmp_path / "a.pcap", 1, [ethernet(ipv4_packet(s)) for s in srcs], endian, nano)
    got, skips = read_all(path)
    assert got == [ip(s) for s in srcs]
    assert got[0] == 0x01020304
    assert skips.total == 0


def test_pcap_vlan_tags(tmp_path: Path) -> None:
    """One 802.1Q tag, an 802.1ad+802.1Q double tag and an old 0x9100 QinQ tag are all looked through."""
    frames = [
        ethernet(ipv4_packet("10.0.0.1"), vlans=(0x8100,)),
        ethernet(ipv4_packet("10.0.0.2"), vlans=(0x88A8, 0x8100)),
        ethernet(ipv4_packet("10.0.0.3"), vlans=(0x9100, 0x8100)),
        ethernet(ipv6_packet(), ethertype=0x86DD, vlans=(0x8100,)),
        ethernet(ipv4_packet("10.0.0.4"), vlans=(0x8100, 0x8100, 0x8100)),  # three tags: not followed
    ]
    got, skips = read_all(write_pcap(tmp_path / "v.pcap", 1, frames))
    assert got == [ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3")]
    assert skips.as_dict() == {"not_ipv4": 2}


def test_pcap_non_ipv4_packets_are_skipped(tmp_path: Path) -> None:
    """ARP, IPv6, 802.3 length frames and an IPv4 ethertype carrying version 6 count as not_ipv4."""
    frames = [
        ethernet(b"\x00\x01\x08\x00\x06\x04\x00\x01" + b"\x00" * 20, ethertype=0x0806),
        ethernet(ipv6_packet(), ethertype=0x86DD),
        ethernet(ipv4_packet("8.8.8.8")),
        ethernet(b"\xaa\xaa\x03" + b"\x00" * 40, ethertype=46),
        ethernet(ipv6_packet(), ethertype=0x0800),
    ]
    got, skips = read_all(write_pcap(tmp_path / "n.pcap", 1, frames))
    assert got == [ip("8.8.8.8")]
    assert skips.as_dict() == {"not_ipv4": 4}


def test_pcap_truncated_packets(tmp_path: Path) -> None:
    """Packets cut inside the Ethernet header, a VLAN tag or before the IPv4 source address count as
    truncated (no element); one cut inside the 20-byte IPv4 header after its source address is left
    out as ``truncated_header``, an excluded reason whose count is never shown (it may be somebody's)."""
    full = ethernet(ipv4_packet("9.9.9.9"))
    frames = [
        full[:10],
        ethernet(ipv4_packet("9.9.9.8"), vlans=(0x8100,))[:16],
        full[: 14 + 19],
        full[:14],
        full[: 14 + 20],  # exactly the fixed IPv4 header: enough
        b"",
    ]
    got, skips = read_all(write_pcap(tmp_path / "t.pcap", 1, frames))
    assert got == [ip("9.9.9.9")]
    assert skips.as_dict() == {"truncated": 4, "truncated_header": 1}
    assert "truncated_header" not in (skips.operational_line("dphhh hhh") or "")  # never shown


def test_pcap_raw_ip_linktypes(tmp_path: Path) -> None:
    """Raw IP (101) yields IPv4 sources and skips IPv6; LINKTYPE_IPV4 (228) reads the same way."""
    packets = [ipv4_packet("1.1.1.1"), ipv6_packet(), ipv4_packet("2.2.2.2"), ipv4_packet("3.3.3.3")[:12]]
    for linktype in (101, 228):
        got, skips = read_all(write_pcap(tmp_path / f"raw{linktype}.pcap", linktype, packets))
        assert got == [ip("1.1.1.1"), ip("2.2.2.2")]
        assert skips.as_dict() == {"not_ipv4": 1, "truncated": 1}


def test_pcap_linux_cooked_captures(tmp_path: Path) -> None:
    """SLL (113) and SLL2 (276) headers are decoded by their protocol field."""
    for linktype, wrap in ((113, sll), (276, sll2)):
        packets = [
            wrap(ipv4_packet("4.4.4.4")),
            wrap(ipv6_packet(), protocol=0x86DD),
            wrap(ipv4_packet("5.5.5.5")),
            wrap(b"")[:10],
        ]
        got, skips = read_all(write_pcap(tmp_path / f"sll{linktype}.pcap", linktype, packets, endian=">"))
        assert got == [ip("4.4.4.4"), ip("5.5.5.5")]
        assert skips.as_dict() == {"not_ipv4": 1, "truncated": 1}


def test_pcap_null_loopback(tmp_path: Path) -> None:
    """BSD loopback accepts AF_INET in either byte order and skips the IPv6 families."""
    packets = [
        null_loopback(ipv4_packet("6.6.6.6"), 2, "<"),
        null_loopback(ipv4_packet("7.7.7.7"), 2, ">"),
        null_loopback(ipv6_packet(), 24, "<"),
        null_loopback(ipv6_packet(), 30, ">"),
        b"\x02\x00",
    ]
    got, skips = read_all(write_pcap(tmp_path / "lo.pcap", 0, packets))
    assert got == [ip("6.6.6.6"), ip("7.7.7.7")]
    assert skips.as_dict() == {"not_ipv4": 2, "truncated": 1}


def test_pcap_unsupported_linktype(tmp_path: Path) -> None:
    """Every packet of a capture with an unsupported link type (802.11) is counted, none returned."""
    path = write_pcap(tmp_path / "wifi.pcap", 105, [ipv4_packet("1.2.3.4")] * 3)
    got, skips = read_all(path)
    assert got == []
    assert skips.as_dict() == {"unsupported_linktype": 3}


def test_pcap_linktype_fcs_bits_are_ignored(tmp_path: Path) -> None:
    """The FCS-length bits in the upper part of the pcap link-type field do not change the link type."""
    path = write_pcap(tmp_path / "fcs.pcap", 1 | (0x1 << 26) | (4 << 28), [ethernet(ipv4_packet("1.2.3.4"))])
    assert read_all(path)[0] == [ip("1.2.3.4")]


@pytest.mark.parametrize("cut", [1, 8, 15, 16, 17, 30])
def test_pcap_corrupt_tail_keeps_what_was_read(tmp_path: Path, cut: int) -> None:
    """A file ending inside the last record header or data stops with one corrupt_file_tail."""
    frames = [ethernet(ipv4_packet(f"10.0.0.{i}")) for i in range(1, 4)]
    path = write_pcap(tmp_path / "c.pcap", 1, frames)
    last = struct.pack("<IIII", 0, 0, len(frames[0]), len(frames[0])) + frames[0]
    path.write_bytes(path.read_bytes() + last[:cut])
    got, skips = read_all(path)
    assert got == [ip("10.0.0.1"), ip("10.0.0.2"), ip("10.0.0.3")]
    assert skips.as_dict() == {"corrupt_file_tail": 1}


def test_pcap_implausible_record_length_stops_reading(tmp_path: Path) -> None:
    """A record header claiming a gigantic length is corruption: reading stops, earlier packets kept."""
    frames = [ethernet(ipv4_packet("10.0.0.1"))]
    bogus = struct.pack("<IIII", 0, 0, 0xFFFFFFF0, 0xFFFFFFF0) + b"\x00" * 64
    got, skips = read_all(write_pcap(tmp_path / "b.pcap", 1, frames, tail=bogus))
    assert got == [ip("10.0.0.1")]
    assert skips.as_dict() == {"corrupt_file_tail": 1}


def test_pcap_chunking(tmp_path: Path) -> None:
    """Chunks hold at most chunk_size addresses, never zero, and concatenate to the whole capture."""
    srcs = [f"10.1.{i // 256}.{i % 256}" for i in range(1000)]
    v6 = ethernet(ipv6_packet(), 0x86DD)
    frames = [ethernet(ipv4_packet(s)) if i % 7 else v6 for i, s in enumerate(srcs)]
    path = write_pcap(tmp_path / "k.pcap", 1, frames)
    expected = [ip(s) for i, s in enumerate(srcs) if i % 7]
    for chunk_size in (1, 3, 64, 999, 1000, 65536):
        got, skips = read_all(path, chunk_size)
        assert got == expected
        assert skips.as_dict() == {"not_ipv4": 143}
    with pytest.raises(ValueError, match="chunk_size"):
        iter_capture_sources(path, SkipCounter(), 0)


def test_pcap_packet_larger_than_read_buffer(tmp_path: Path) -> None:
    """A multi-megabyte packet spanning several read blocks is read whole."""
    frames = [ethernet(ipv4_packet("1.0.0.1", payload=b"\x00" * (3 << 20))), ethernet(ipv4_packet("1.0.0.2"))]
    got, skips = read_all(write_pcap(tmp_path / "big.pcap", 1, frames))
    assert got == [ip("1.0.0.1"), ip("1.0.0.2")]
    assert skips.total == 0


def test_pcap_empty_capture(tmp_path: Path) -> None:
    """A capture with a header and no packets yields nothing and skips nothing."""
    got, skips = read_all(write_pcap(tmp_path / "e.pcap", 1, []))
    assert got == [] and skips.total == 0


# --------------------------------------------------------------------------------------------
# header errors


def test_unknown_magic_raises_with_file_name_but_not_content(tmp_path: Path) -> None:
    """A non-capture file raises ValueError naming the file and quoting none of its bytes."""
    path = tmp_path / "secret.bin"
    path.write_bytes(b"SECRETPAYLOAD-10.1.2.3" * 4)
    with pytest.raises(ValueError, match="unknown magic") as info:
        iter_capture_sources(path, SkipCounter())
    assert str(path) in str(info.value)
    assert "SECRET" not in str(info.value) and "10.1.2.3" not in str(info.value)


NG = b"\x0a\x0d\x0d\x0a"  # pcapng section header block type


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty file"),
        (struct.pack("<I", 0xA1B2C3D4) + b"\x00" * 6, "truncated pcap file header"),
        (struct.pack(">I", 0xA1B2C3D4) + b"\x00" * 6, "truncated pcap file header"),
        (NG + b"\x00" * 10, "truncated pcapng section header"),
        (NG + struct.pack("<I", 28) + b"\x11\x22\x33\x44" + b"\x00" * 16, "byte-order magic"),
        (NG + struct.pack("<II", 27, 0x1A2B3C4D) + b"\x01\x00" + b"\x00" * 14, "block length"),
        (NG + struct.pack("<IIH", 28, 0x1A2B3C4D, 2) + b"\x00" * 14, "major version"),
    ],
)
def test_bad_headers_raise(tmp_path: Path, content: bytes, message: str) -> None:
    """Empty, truncated or inconsistent capture headers raise ValueError at call time, naming the file."""
    path = tmp_path / "bad.cap"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as info:
        iter_capture_sources(path, SkipCounter())
    assert str(path) in str(info.value)


def test_missing_capture_raises(tmp_path: Path) -> None:
    """A missing capture file raises ValueError naming it."""
    with pytest.raises(ValueError, match="file not found"):
        iter_capture_sources(tmp_path / "nope.pcap", SkipCounter())


def test_format_specific_readers(tmp_path: Path) -> None:
    """read_pcap_sources takes only classic pcap, read_pcapng_sources only pcapng; both fill skips."""
    p = write_pcap(tmp_path / "a.pcap", 1, [ethernet(ipv4_packet("1.2.3.4")), ethernet(b"", 0x0806)])
    ng = tmp_path / "a.pcapng"
    ng.write_bytes(shb("<") + idb("<", 101) + epb("<", 0, ipv4_packet("4.3.2.1")))
    skips = SkipCounter()
    assert [int(v) for c in read_pcap_sources(p, skips=skips) for v in c] == [ip("1.2.3.4")]
    assert skips.as_dict() == {"not_ipv4": 1}
    assert [int(v) for c in read_pcapng_sources(ng) for v in c] == [ip("4.3.2.1")]
    with pytest.raises(ValueError, match="pcapng file, not a classic pcap"):
        read_pcap_sources(ng)
    with pytest.raises(ValueError, match="classic pcap file, not a pcapng"):
        read_pcapng_sources(p)


# --------------------------------------------------------------------------------------------
# pcapng


@pytest.mark.parametrize("endian", ["<", ">"])
def test_pcapng_two_interfaces_epb_spb_and_other_blocks(tmp_path: Path, endian: str) -> None:
    """EPBs use their interface's link type, SPBs use interface 0, and non-packet blocks are skipped."""
    e = endian
    data = b"".join(
        [
            shb(e),
            idb(e, 1),  # interface 0: Ethernet
            block(e, 4, b"\x00\x00\x00\x00"),  # name resolution block
            idb(e, 101),  # interface 1: raw IP
            epb(e, 0, ethernet(ipv4_packet("10.0.0.1"))),
            epb(e, 1, ipv4_packet("10.0.0.2")),
            spb(e, ethernet(ipv4_packet("10.0.0.3"))),
            block(e, 5, b"\x00" * 12),  # interface statistics block
            block(e, 0x0BAD, b"custom"),  # a custom/unknown block
            epb(e, 1, ipv6_packet()),
            epb(e, 0, ethernet(ipv4_packet("10.0.0.4"), vlans=(0x8100,))),
            opb(e, 1, ipv4_packet("10.0.0.5")),
            epb(e, 0, ethernet(b"", 0x0806)),
            epb(e, 1, ipv4_packet("10.0.0.6")[:19]),
        ]
    )
    path = tmp_path / "two.pcapng"
    path.write_bytes(data)
    got, skips = read_all(path)
    assert got == [ip(f"10.0.0.{i}") for i in (1, 2, 3, 4, 5)]
    assert skips.as_dict() == {"not_ipv4": 2, "truncated_header": 1}


def test_pcapng_sections_with_different_byte_orders(tmp_path: Path) -> None:
    """A second section may switch byte order and restarts interface numbering."""
    data = b"".join(
        [
            shb("<"),
            idb("<", 101),
            epb("<", 0, ipv4_packet("1.0.0.1")),
            shb(">"),
            idb(">", 276),
            idb(">", 1),
            epb(">", 1, ethernet(ipv4_packet("1.0.0.2"))),
            epb(">", 0, sll2(ipv4_packet("1.0.0.3"))),
            epb(">", 2, ipv4_packet("1.0.0.4")),  # interface 2 does not exist in this section
        ]
    )
    path = tmp_path / "sections.pcapng"
    path.write_bytes(data)
    got, skips = read_all(path)
    assert got == [ip("1.0.0.1"), ip("1.0.0.2"), ip("1.0.0.3")]
    assert skips.as_dict() == {"unknown_interface": 1}


def test_pcapng_packets_before_any_interface(tmp_path: Path) -> None:
    """EPBs and SPBs with no interface description are counted as unknown_interface."""
    data = shb("<") + epb("<", 0, ipv4_packet("1.2.3.4")) + spb("<", ipv4_packet("1.2.3.5"))
    path = tmp_path / "noif.pcapng"
    path.write_bytes(data)
    got, skips = read_all(path)
    assert got == [] and skips.as_dict() == {"unknown_interface": 2}


def test_pcapng_spb_snaplen_and_original_length(tmp_path: Path) -> None:
    """An SPB's captured length is the smaller of its original length, its block and the interface snaplen."""
    packet = ethernet(ipv4_packet("2.0.0.1"))
    data = b"".join(
        [
            shb("<"),
            idb("<", 1, snaplen=30),
            spb("<", packet[:30], orig_len=len(packet)),  # snapped inside the IPv4 header, after its source
            shb("<"),
            idb("<", 1, snaplen=0),
            spb("<", packet, orig_len=len(packet) + 100),  # original longer than what is stored
        ]
    )
    path = tmp_path / "spb.pcapng"
    path.write_bytes(data)
    got, skips = read_all(path)
    assert got == [ip("2.0.0.1")]
    assert skips.as_dict() == {"truncated_header": 1}


def test_pcapng_unsupported_linktype_per_interface(tmp_path: Path) -> None:
    """Only packets of the interface with an unsupported link type are skipped."""
    data = b"".join(
        [
            shb("<"),
            idb("<", 105),
            idb("<", 228),
            epb("<", 0, ipv4_packet("3.0.0.1")),
            epb("<", 1, ipv4_packet("3.0.0.2")),
        ]
    )
    path = tmp_path / "mixed.pcapng"
    path.write_bytes(data)
    got, skips = read_all(path)
    assert got == [ip("3.0.0.2")]
    assert skips.as_dict() == {"unsupported_linktype": 1}


@pytest.mark.parametrize("cut", [1, 4, 8, 11, 20, 40])
def test_pcapng_corrupt_tail(tmp_path: Path, cut: int) -> None:
    """A pcapng file ending inside a block stops with one corrupt_file_tail and keeps earlier packets."""
    good = shb("<") + idb("<", 101) + epb("<", 0, ipv4_packet("5.0.0.1"))
    last = epb("<", 0, ipv4_packet("5.0.0.2"))
    path = tmp_path / "cut.pcapng"
    path.write_bytes(good + last[:cut])
    got, skips = read_all(path)
    assert got == [ip("5.0.0.1")]
    assert skips.as_dict() == {"corrupt_file_tail": 1}


@pytest.mark.parametrize(
    "bad_block",
    [
        struct.pack("<II", 6, 30) + b"\x00" * 22,  # length not a multiple of 4
        struct.pack("<II", 6, 8),  # length below the 12-byte minimum
        struct.pack("<II", 6, 32) + b"\x00" * 20 + struct.pack("<I", 36),  # trailing length mismatch
        # captured length larger than the block
        struct.pack("<II", 6, 32) + struct.pack("<IIIII", 0, 0, 0, 99, 99) + struct.pack("<I", 32),
    ],
)
def test_pcapng_corrupt_block_stops_reading(tmp_path: Path, bad_block: bytes) -> None:
    """An inconsistent block stops reading with one corrupt_file_tail; blocks after it are not read."""
    good = shb("<") + idb("<", 101) + epb("<", 0, ipv4_packet("6.0.0.1"))
    data = good + bad_block + epb("<", 0, ipv4_packet("6.0.0.2"))
    path = tmp_path / "bad.pcapng"
    path.write_bytes(data)
    got, skips = read_all(path)
    assert got == [ip("6.0.0.1")]
    assert skips.as_dict() == {"corrupt_file_tail": 1}


def test_pcapng_chunking_across_read_blocks(tmp_path: Path) -> None:
    """Many blocks spanning several read buffers are all read, in order, for every chunk size."""
    srcs = [ip(f"11.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}") for i in range(40000)]
    parts = [shb(">"), idb(">", 1), idb(">", 101)]
    for i, s in enumerate(srcs):
        addr = str(ipaddress.IPv4Address(s))
        parts.append(epb(">", 1, ipv4_packet(addr)) if i % 2 else epb(">", 0, ethernet(ipv4_packet(addr))))
    path = tmp_path / "many.pcapng"
    path.write_bytes(b"".join(parts))
    assert path.stat().st_size > 2 * (1 << 20)
    for chunk_size in (61, 4096, 65536):
        got, skips = read_all(path, chunk_size)
        assert got == srcs and skips.total == 0


# --------------------------------------------------------------------------------------------
# input-file detection (connectors.files)


@pytest.mark.parametrize(
    ("magic", "fmt"),
    [
        (b"\xa1\xb2\xc3\xd4", "pcap"),
        (b"\xd4\xc3\xb2\xa1", "pcap"),
        (b"\xa1\xb2\x3c\x4d", "pcap"),
        (b"\x4d\x3c\xb2\xa1", "pcap"),
        (b"\x0a\x0d\x0d\x0a", "pcapng"),
        (b"10.0.0.1\n", "text"),
        (b"", "text"),
        (b"\xa1\xb2", "text"),
    ],
)
def test_detect_format_by_magic(tmp_path: Path, magic: bytes, fmt: str) -> None:
    """detect_format looks only at the first four bytes, never at the file name."""
    path = tmp_path / "input.txt"
    path.write_bytes(magic + b"\x00" * 4 if fmt != "text" else magic)
    assert detect_format(path) == fmt


def test_open_input_errors(tmp_path: Path) -> None:
    """Missing files, directories, unknown or mismatched formats and bad headers raise 'input: ...'."""
    text_file = tmp_path / "a.txt"
    text_file.write_text("1.2.3.4\n")
    cap = write_pcap(tmp_path / "a.pcap", 1, [])
    bad_cap = tmp_path / "bad.pcap"
    bad_cap.write_bytes(b"\xd4\xc3\xb2\xa1\x02\x00")
    with pytest.raises(ValueError, match=r"^input: file not found: .*missing\.pcap"):
        open_input(tmp_path / "missing.pcap")
    with pytest.raises(ValueError, match=r"^input: not a regular file"):
        open_input(tmp_path)
    with pytest.raises(ValueError, match=r"^input: unknown input format 'csv'"):
        open_input(text_file, "csv")
    with pytest.raises(ValueError, match=r"^input: .*a\.txt is a text file, not pcap"):
        open_input(text_file, "pcap")
    with pytest.raises(ValueError, match=r"^input: .*a\.pcap is a pcap file, not pcapng"):
        open_input(cap, "pcapng")
    with pytest.raises(ValueError, match=r"^input: .*bad\.pcap: truncated pcap file header"):
        open_input(bad_cap)
    assert set(INPUT_FORMATS) == {"auto", "text", "pcap", "pcapng", "flow-json"}
    pcap_file = next(tmp_path.glob("a.pcap"), None)
    if pcap_file is not None:  # a capture is not flow-json
        with pytest.raises(ValueError, match=r"^input: .*a\.pcap is a pcap capture, not flow-json"):
            open_input(pcap_file, "flow-json")


def test_a_text_file_that_begins_like_pcapng_is_read_as_text(tmp_path: Path) -> None:
    """pcapng's magic is the bytes of blank lines ("\\n\\r\\r\\n"): a text file beginning with them
    and no valid section header is text (auto), as the same file with an address first is — so a
    first line never decides whether a file is refused; asked for pcapng, it is still refused."""
    blank_first = tmp_path / "blank-first.txt"
    blank_first.write_bytes(b"\n\r\r\n10.0.0.1\n10.0.0.2\n")
    address_first = tmp_path / "address-first.txt"
    address_first.write_bytes(b"10.0.0.1\n\r\r\n10.0.0.2\n")
    assert detect_format(blank_first) == "pcapng"  # by its magic alone
    assert open_input(blank_first).format == open_input(address_first).format == "text"
    with pytest.raises(ValueError, match=r"^input: .*pcapng"):
        open_input(blank_first, "pcapng")


def test_open_input_capture(tmp_path: Path) -> None:
    """A capture opened with auto or its own format yields packet sources and refuses iter_lines."""
    frames = [ethernet(ipv4_packet("1.2.3.4")), ethernet(ipv6_packet(), 0x86DD)]
    cap = write_pcap(tmp_path / "a.pcap", 1, frames)
    for fmt in ("auto", "pcap"):
        inp = open_input(cap, fmt)
        assert inp.format == "pcap" and inp.is_capture
        skips = SkipCounter()
        assert [int(v) for c in inp.iter_ipv4(skips) for v in c] == [ip("1.2.3.4")]
        assert skips.as_dict() == {"not_ipv4": 1}
        with pytest.raises(ValueError, match="^input: .*captures only provide IPv4"):
            inp.iter_lines(SkipCounter())


def test_open_input_text_forced_on_binary(tmp_path: Path) -> None:
    """An explicit text format is honoured even for a capture, whose bytes then count as skipped lines."""
    cap = write_pcap(tmp_path / "a.pcap", 1, [ethernet(ipv4_packet("1.2.3.4"))])
    inp = open_input(cap, "text")
    assert inp.format == "text" and not inp.is_capture
    skips = SkipCounter()
    assert [c for c in inp.iter_ipv4(skips)] == []
    assert skips.total >= 1 and set(skips.as_dict()) <= {"bad_ipv4", "invalid_utf8"}


# --------------------------------------------------------------------------------------------
# the real shared captures

REAL_CAPTURES = {
    # file: (packets, distinct source IPv4, skip counts)
    "amp.TCP.reflection.SYNACK.pcap": (8000, 7055, {"not_ipv4": 4}),  # 4 ARP frames
    "amp.UDP.isakmp.pcap": (3984, 2767, {}),
    "amp.UDP.snmp.src161.pcapng": (4373, 4276, {}),
    "pkt.TCP.synflood.spoofed.pcap": (37841, 37623, {}),
}


@pytest.fixture(scope="module")
def captures() -> Path:
    """The bundled capture directory; a missing copy fails the test (these checks must not be skipped)."""
    missing = [name for name in REAL_CAPTURES if not (CAPTURE_DIR / name).is_file()]
    if missing:
        pytest.fail(
            f"bundled captures missing from {CAPTURE_DIR} (the repository ships them in "
            f"data/pcaps): {', '.join(missing)}",
            pytrace=False,
        )
    return CAPTURE_DIR


def _naive_ethernet_sources(path: Path) -> np.ndarray:
    """An independent, deliberately simple reader: Ethernet/IPv4 source at frame bytes 26..29."""
    data = path.read_bytes()
    endian = "<" if data[:4] == b"\xd4\xc3\xb2\xa1" else ">"
    assert struct.unpack_from(endian + "I", data, 20)[0] == 1
    pos, out = 24, []
    while pos + 16 <= len(data):
        incl = struct.unpack_from(endian + "I", data, pos + 8)[0]
        frame = data[pos + 16 : pos + 16 + incl]
        pos += 16 + incl
        if frame[12:14] == b"\x08\x00" and frame[14] >> 4 == 4:
            out.append(int.from_bytes(frame[26:30], "big"))
    return np.array(out, dtype=np.uint32)


@pytest.mark.parametrize("name", sorted(REAL_CAPTURES))
def test_real_capture_counts(captures: Path, name: str) -> None:
    """Each shared capture has its documented packet and distinct-source counts and matches a naive reader."""
    packets, distinct, skip_counts = REAL_CAPTURES[name]
    path = captures / name
    sources, skips = read_capture_sources(path)
    assert sources.dtype == np.uint32
    assert sources.size + skips.total == packets
    assert np.unique(sources).size == distinct
    assert skips.as_dict() == skip_counts
    np.testing.assert_array_equal(sources, _naive_ethernet_sources(path))


def test_real_snmp_pcapng_is_classic_pcap_inside(captures: Path) -> None:
    """The '.pcapng' shared file holds a classic little-endian pcap, and the magic decides, not the name."""
    assert detect_format(captures / "amp.UDP.snmp.src161.pcapng") == "pcap"
    assert open_input(captures / "amp.UDP.snmp.src161.pcapng", "auto").format == "pcap"


def test_real_synack_prefix_share(captures: Path) -> None:
    """107.0.0.0/8 sends 1,719 of the 8,000 packets of the SYN-ACK reflection capture (21.49 %)."""
    sources, skips = read_capture_sources(captures / "amp.TCP.reflection.SYNACK.pcap")
    in_107 = int(np.count_nonzero((sources >> np.uint32(24)) == 107))
    assert in_107 == 1719
    share = in_107 / (sources.size + skips.total)
    assert 0.2148 <= share <= 0.2150


def test_real_largest_capture_reads_fast(captures: Path) -> None:
    """The 37,841-packet capture is read in well under a second."""
    path = captures / "pkt.TCP.synflood.spoofed.pcap"
    start = time.perf_counter()
    total = sum(chunk.size for chunk in iter_capture_sources(path, SkipCounter()))
    elapsed = time.perf_counter() - start
    assert total == 37841
    assert elapsed < 0.5, f"read took {elapsed:.3f} s"


def test_module_exports() -> None:
    """The reader module exposes the documented public names."""
    names = ("iter_capture_sources", "read_pcap_sources", "read_pcapng_sources", "read_capture_sources")
    assert set(names) <= set(pcap.__all__)


def test_ip_lengths_beside_sources(tmp_path) -> None:
    """``iter_capture_sources_with_lengths`` gives the same sources and each packet's IPv4 total length."""
    import struct

    import numpy as np

    from dphhh.connectors.pcap import iter_capture_sources, iter_capture_sources_with_lengths
    from dphhh.connectors.skips import SkipCounter

    def ipv4(src: bytes, total: int) -> bytes:  # an IPv4 header (20 bytes) + payload up to `total`
        head = bytes([0x45, 0]) + struct.pack(">H", total) + bytes(8) + src + bytes([192, 0, 2, 1])
        return head + bytes(total - 20)

    packets = [ipv4(bytes([10, 0, 0, 1]), 60), ipv4(bytes([10, 0, 0, 2]), 1500), ipv4(bytes([10, 0, 0, 3]), 20)]
    body = b"".join(struct.pack("<IIII", 0, 0, len(p), len(p)) + p for p in packets)
    f = tmp_path / "raw.pcap"
    f.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 101) + body)  # LINKTYPE_RAW
    chunks = list(iter_capture_sources_with_lengths(f, SkipCounter()))
    src = np.concatenate([c[0] for c in chunks])
    lengths = np.concatenate([c[1] for c in chunks])
    assert src.tolist() == np.concatenate(list(iter_capture_sources(f, SkipCounter()))).tolist()
    assert lengths.tolist() == [60, 1500, 20] and lengths.dtype == np.int64
