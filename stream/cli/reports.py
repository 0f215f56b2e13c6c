"""``dphhh reports``: read published reports (read-committed) and print them."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .options import kafka_client_options, kafka_options
from .output import add_format_option, output_format, render, stream_report_text

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "reports",
        help="print the reports of a reports topic (read-committed)",
        description="Print the private reports a stream job published, oldest first, reading only committed "
        "records (a report is visible once its transaction commits); --follow keeps waiting for new ones.",
    )
    p.add_argument("--topic", default="dphhh-reports", help="reports topic (default dphhh-reports)")
    kafka_client_options(p)
    p.add_argument("--follow", action="store_true", help="keep waiting for new reports")
    add_format_option(p, "text")


def run(args: argparse.Namespace) -> int:
    from dphhh.connectors.kafka_io import StableOffsetProbe, iter_committed_values, iter_to_end

    from ..reports_stall import ReportsStallWatch, stall_limit_s

    options = kafka_options(args)
    fmt = output_format(args)
    watch = None
    if args.follow:  # a reader stuck behind an open transaction says so (the job's interval is unknown here)
        watch = ReportsStallWatch(options, args.topic, stall_limit_s(0), who="dphhh reports")
        watch.start()
    shown = 0
    try:
        # without --follow: the reports committed so far (a live job keeps publishing: no idle end)
        records = (
            iter_committed_values(options, args.topic, follow=True)
            if args.follow
            else ((ts, value) for _, ts, value in iter_to_end(options, args.topic))
        )
        for _, value in records:
            report = json.loads(value)
            if fmt == "json":  # one report per line, as published
                print(json.dumps(report), flush=True)
            elif fmt == "csv":
                body = render(report, "csv").split("\n")
                print("\n".join(body if shown == 0 else body[1:]), flush=True)
            else:
                print(render(report, "text", text=stream_report_text) + "\n", flush=True)
            shown += 1
    except KeyboardInterrupt:
        pass
    finally:
        if watch is not None:
            watch.stop()
    print(f"dphhh reports: {shown} report(s) from {args.topic}", file=sys.stderr)
    if not args.follow:
        probe = StableOffsetProbe(options, args.topic)
        try:
            held = sorted(p for p, (stable, end) in probe.read().items() if stable < end)
        finally:
            probe.close()
        for p in held:
            print(
                f"dphhh reports: note: partition {p} of {args.topic} has an open transaction; records after it "
                "are not readable yet (it normally ends at the job's next checkpoint; if it stays, see "
                "`bash deploy/kafka-transactions.sh find-hanging`)",
                file=sys.stderr,
            )
    return 0
