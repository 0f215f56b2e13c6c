"""A small, deterministic Ethernet capture with IPv4 and IPv6 flows (classic pcap, microseconds).

The bundled captures are IPv4 only; this one feeds the real collector chain
(``deploy/flow-pipeline.sh``: softflowd -> nfacctd -> Kafka) so that the flow-JSON fixtures hold
real IPv6 records as the collectors publish them. Addresses are from the documentation prefixes
(192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24, 2001:db8::/32).

    python tests/connectors/flow_capture.py OUT.pcap
"""

from __future__ import annotations

import ipaddress
import struct
import sys
from pathlib import Path

__all__ = ["FLOWS", "BASE_US", "write_mixed_pcap", "expected_totals"]

#: 2026-11-30T01:55:00.250000Z, in microseconds since the epoch.
BASE_US = 1_796_003_700_250_000
_UDP, _TCP = 17, 6
#: (source, destination, protocol, source port, destination port, packets, payload bytes per packet)
FLOWS = (
    ("192.0.2.10", "198.51.100.7", _UDP, 5353, 53, 3, 40),
    ("203.0.113.5", "198.51.100.7", _TCP, 40000, 443, 5, 100),
    ("198.51.100.200", "192.0.2.1", _UDP, 123, 123, 1, 48),
    ("2001:db8:1::10", "2001:db8:2::20", _UDP, 5000, 6000, 4, 64),
    ("2001:db8:1::11", "2001:db8:ffff::1", _TCP, 40001, 80, 2, 0),
    ("2001:db8:abcd:12::1", "2001:db8:2::20", _UDP, 1234, 53, 6, 30),
)


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def _frame(src: str, dst: str, proto: int, sport: int, dport: int, payload: int) -> bytes:
    s, d = ipaddress.ip_address(src), ipaddress.ip_address(dst)
    body = b"x" * payload
    if proto == _UDP:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(body), 0) + body
    else:  # a bare ACK segment
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 1, 1, 5 << 4, 0x10, 65535, 0, 0) + body
    if s.version == 4:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 1, 0, 64, proto, 0, s.packed, d.packed)
        ip = ip[:10] + struct.pack("!H", _checksum(ip)) + ip[12:]
        ethertype = 0x0800
    else:
        ip = struct.pack("!IHBB16s16s", 6 << 28, len(l4), proto, 64, s.packed, d.packed)
        ethertype = 0x86DD
    eth = b"\x02\x00\x00\x00\x00\x02" + b"\x02\x00\x00\x00\x00\x01" + struct.pack("!H", ethertype)
    return eth + ip + l4


def write_mixed_pcap(path: str | Path) -> Path:
    """Write the capture: the flows' packets interleaved, 10 ms apart, from :data:`BASE_US`."""
    packets = []
    for f, (src, dst, proto, sport, dport, n, payload) in enumerate(FLOWS):
        for k in range(n):
            packets.append((BASE_US + (k * len(FLOWS) + f) * 10_000, _frame(src, dst, proto, sport, dport, payload)))
    packets.sort(key=lambda p: p[0])
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)]
    for ts, frame in packets:
        out.append(struct.pack("<IIII", ts // 1_000_000, ts % 1_000_000, len(frame), len(frame)) + frame)
    path = Path(path)
    path.write_bytes(b"".join(out))
    return path


def expected_totals() -> dict[str, tuple[int, int]]:
    """``{source address: (packets, IP bytes)}`` of each flow, as a flow exporter counts them."""
    totals = {}
    for src, dst, proto, sport, dport, n, payload in FLOWS:
        ip_len = len(_frame(src, dst, proto, sport, dport, payload)) - 14
        totals[src] = (n, n * ip_len)
    return totals


if __name__ == "__main__":
    write_mixed_pcap(sys.argv[1])
