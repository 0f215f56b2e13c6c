"""Messages/s of each registered message format's batch decoder, against ``text-ipv4`` in the same run.

Decodes the same synthetic addresses (seeded) written in each format — one element per message,
and ``packed-ipv4`` at 500 per message — with :meth:`dphhh.connectors.decode.MessageDecoder.decode_many`
in batches of 4,096 messages (the job's default ``flink.batch_max_messages``), best of ``--repeat``
passes, and prints each format's messages/s and its ratio to ``text-ipv4``'s (the machine is noisy:
only ratios measured in one run are comparable). No Kafka, no Flink: the decode operator's own work.

    .venv/bin/python benchmarks/decode_throughput.py [--messages 200000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.stream_throughput import dotted, flow_records, paths_of  # noqa: E402
from dphhh.connectors.decode import MessageDecoder  # noqa: E402
from dphhh.connectors.synthetic import synthetic_addresses  # noqa: E402

BATCH = 4096


def corpora(n: int) -> dict[str, tuple[dict, list[bytes], int]]:
    """format label → (decoder options, messages, elements)."""
    addresses = synthetic_addresses(n, seed=2)
    units = synthetic_addresses(n, seed=7)
    quads = dotted(addresses)
    be = addresses.astype(">u4")
    pairs = np.stack([units, addresses], axis=1).astype(">u4")
    return {
        "text-ipv4": ({"fmt": "text-ipv4"}, quads, n),
        "packed-ipv4 (1/msg)": ({"fmt": "packed-ipv4"}, [be[i : i + 1].tobytes() for i in range(n)], n),
        "packed-ipv4 (500/msg)": ({"fmt": "packed-ipv4"}, [be[i : i + 500].tobytes() for i in range(0, n, 500)], n),
        "packed-ipv4-pairs (1/msg)": ({"fmt": "packed-ipv4-pairs"}, [pairs[i].tobytes() for i in range(n)], n),
        "json": ({"fmt": "json"}, [json.dumps({"ip": q.decode()}).encode() for q in quads], n),
        "json + time": (
            {"fmt": "json", "json_time_field": "t"},
            [json.dumps({"ip": q.decode(), "t": 1_700_000_000_000 + i}).encode() for i, q in enumerate(quads)],
            n,
        ),
        "path": ({"fmt": "path", "path_depth": 4}, paths_of(addresses), n),
        "flow-json": ({"fmt": "flow-json"}, flow_records(addresses, 1_700_000_000_000, 4), n),
    }


def rate(options: dict, messages: list[bytes], repeat: int) -> float:
    """Best messages/s of ``repeat`` passes over ``messages`` in batches of :data:`BATCH`."""
    opts = dict(options)
    decoder = MessageDecoder(opts.pop("fmt"), **opts)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for i in range(0, len(messages), BATCH):
            decoder.decode_many(messages[i : i + BATCH])
        best = min(best, time.perf_counter() - start)
    return len(messages) / best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000, help="elements per format (default 200,000)")
    ap.add_argument("--repeat", type=int, default=5, help="passes per format, the best counts (default 5)")
    args = ap.parse_args()
    rates = {}
    for label, (options, messages, elements) in corpora(args.messages).items():
        rates[label] = (rate(options, messages, args.repeat), len(messages), elements)
    base = rates["text-ipv4"][0]
    print(f"{'format':<28}{'messages':>10}{'messages/s':>14}{'elements/s':>14}{'vs text-ipv4':>14}")
    for label, (r, msgs, elements) in rates.items():
        print(f"{label:<28}{msgs:>10,}{r:>14,.0f}{r * elements / msgs:>14,.0f}{r / base:>13.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
