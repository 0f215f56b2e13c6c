"""Throughput of connectors.flow_json's decoder alone (not a test; run by hand):

    .venv/bin/python tests/connectors/bench_flow_json.py [N] [--stdlib]

Builds N records (default 200,000) from the real fixtures (pmacct: the SYN-ACK capture's records,
goflow2: the isakmp capture's), each with its own source address (IPv4, and 1 in 8 IPv6 for the
``mixed`` runs) so that no per-batch memo helps, and times ``decode_many`` on batches of 10,000
(best of 3). ``--stdlib`` measures with the standard library's json instead of orjson.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import dphhh.connectors.flow_json as fj

DATA = Path(__file__).with_name("data")


def records(fixture: str, n: int, v6_every: int, src: str, separators: tuple[str, str]) -> list[bytes]:
    base = [json.loads(line) for line in (DATA / fixture).read_bytes().splitlines() if line.strip()]
    out = []
    for i in range(n):
        rec = dict(base[i % len(base)])
        if v6_every and i % v6_every == 0:
            rec[src] = f"2001:db8:{i >> 16 & 0xFFFF:x}:{i & 0xFFFF:x}::1"
        else:
            rec[src] = f"{10 + (i >> 24) % 200}.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
        out.append(json.dumps(rec, separators=separators).encode())
    return out


def bench(name: str, decoder: fj.FlowJsonDecoder, values: list[bytes], batch: int = 10_000) -> None:
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        good = 0
        for i in range(0, len(values), batch):
            out = decoder.decode_many(values[i : i + batch])
            good += len(out.ipv4) + len(out.ipv6)
        best = min(best, time.perf_counter() - t)
    assert good == len(values), (good, len(values))
    size = sum(map(len, values)) / len(values)
    print(
        f"{name:34s} {len(values) / best:>10,.0f} records/s   ({best * 1e6 / len(values):.2f} us/record, {size:.0f} B/record)"
    )


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 200_000
    if "--stdlib" in sys.argv:
        fj._fast_loads = json.loads
    parser = "json (stdlib)" if fj._fast_loads is json.loads else "orjson"
    print(f"flow_json decoder, {n:,} records, parser {parser}")
    pm = records("pmacct-ipfix-synack-head.jsonl", n, 0, "ip_src", (", ", ": "))
    pm_mixed = records("pmacct-ipfix-synack-head.jsonl", n, 8, "ip_src", (", ", ": "))
    gf = records("goflow2-ipfix-isakmp-head.jsonl", n, 0, "src_addr", (",", ":"))
    bench("pmacct ipv4 packets", fj.FlowJsonDecoder("pmacct"), pm)
    bench("pmacct both bytes (1/8 IPv6)", fj.FlowJsonDecoder("pmacct", family="both", weight="bytes"), pm_mixed)
    bench("goflow2 ipv4 packets", fj.FlowJsonDecoder("goflow2"), gf)


if __name__ == "__main__":
    main()
