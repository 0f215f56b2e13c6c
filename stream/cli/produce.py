"""``dphhh produce``: publish addresses to a Kafka topic (packed batches by default)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from dphhh.connectors.files import INPUT_FORMATS
from dphhh.sketches.errors import UsageError

from .options import kafka_client_options, kafka_options

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "produce",
        help="publish addresses to a Kafka topic",
        description="Publish the addresses of a file (text, pcap, pcapng, flow records) or a synthetic stream "
        "with planted heavy prefixes to a Kafka topic, in one of the stream job's message formats: "
        "the input side of a test or a demo deployment.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", help="file of addresses (text, pcap, pcapng; '-' for standard input, .gz decompressed)")
    src.add_argument("--synthetic", type=int, metavar="N", help="N synthetic addresses (planted heavy prefixes)")
    p.add_argument(
        "--input-format",
        default="auto",
        choices=INPUT_FORMATS,
        help="default: detect from magic bytes (flow-json must be given)",
    )
    p.add_argument("--topic", required=True, help="the topic to publish to (created when missing)")
    kafka_client_options(p)
    p.add_argument("--rate", type=float, default=0.0, help="addresses/s (0 = as fast as possible)")
    p.add_argument("--batch", type=int, default=1000, help="addresses per message (packed format)")
    p.add_argument(
        "--message-format",
        choices=("packed-ipv4", "text-ipv4"),
        default="packed-ipv4",
        help="how addresses are written to Kafka (default packed-ipv4: --batch addresses per message)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --synthetic")
    p.add_argument(
        "--topic-partitions",
        type=int,
        default=1,
        help="Kafka partitions of the topic if it does not exist yet (default 1; one per job subtask)",
    )


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from dphhh.connectors.kafka_io import PackedProducer, create_topics, pack_ipv4
    from dphhh.connectors.skips import SkipCounter
    from dphhh.connectors.spool import spooled_input
    from dphhh.connectors.synthetic import synthetic_addresses
    from dphhh.sketches.hierarchy import IPv4Hierarchy

    from ..batch import iter_values
    from ..kafka_setup import LIVE_INPUT_TOPIC

    if args.batch < 1:
        raise UsageError(f"--batch must be >= 1, got {args.batch}")
    if args.topic_partitions < 1:
        raise UsageError(f"--topic-partitions must be >= 1, got {args.topic_partitions}")
    options = kafka_options(args)
    # a topic created here is a live job's input: its records carry the broker's arrival time
    create_topics(options, [args.topic], partitions=args.topic_partitions, configs={args.topic: LIVE_INPUT_TOPIC})
    producer = PackedProducer(options, args.topic)
    skips = SkipCounter()
    with spooled_input(args.input or "") if args.input else _nothing() as path:
        if args.synthetic is not None:
            chunks = iter([synthetic_addresses(args.synthetic, seed=args.seed)])
        else:
            chunks = iter_values(path, args.input_format, IPv4Hierarchy(), skips)
        started = last = time.monotonic()
        sent = 0
        for chunk in chunks:
            for i in range(0, len(chunk), args.batch):
                part = np.asarray(chunk[i : i + args.batch], dtype=np.uint32)
                now_ms = int(time.time() * 1000)
                if args.message_format == "packed-ipv4":
                    producer.send_value(pack_ipv4(part), now_ms)
                else:
                    for a in part.tolist():
                        producer.send_value(f"{a >> 24}.{(a >> 16) & 255}.{(a >> 8) & 255}.{a & 255}".encode(), now_ms)
                sent += len(part)
                if args.rate > 0:
                    ahead = sent / args.rate - (time.monotonic() - started)
                    if ahead > 0:
                        time.sleep(ahead)
                if time.monotonic() - last >= 1.0:
                    last = time.monotonic()
                    print(
                        f"\rdphhh produce: {producer.messages:,} messages, {producer.bytes / 1e6:.1f} MB, "
                        f"{sent / (last - started):,.0f} addresses/s",
                        end="",
                        file=sys.stderr,
                        flush=True,
                    )
    producer.close()
    elapsed = time.monotonic() - started
    print(
        f"\rdphhh produce: done: {producer.messages:,} messages, {producer.bytes / 1e6:.1f} MB to {args.topic} "
        f"in {elapsed:.1f} s",
        file=sys.stderr,
    )
    line = skips.operational_line("dphhh produce")  # unparsable records only, labelled operational
    if line:
        print(line, file=sys.stderr)
    return 0


class _nothing:
    """A context standing in for a spooled input when --synthetic is used."""

    def __enter__(self) -> str:
        return ""

    def __exit__(self, *exc: object) -> None:
        return None
