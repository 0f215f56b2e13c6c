"""``dphhh dashboard``: a live web page of the published private reports (topic or file)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from dphhh.sketches.errors import UsageError

from .options import kafka_client_options, kafka_options

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "dashboard",
        help="serve a live web page of the published private reports",
        description="Serve a web page that shows each published private report as it arrives (read from a "
        "reports topic, or from a reports JSON-lines file with --file): heavy prefixes, their intervals "
        "and the guarantee. It shows only what the reports publish.",
    )
    p.add_argument("--topic", default="dphhh-reports", help="reports topic (default dphhh-reports)")
    kafka_client_options(p)
    p.add_argument("--file", default=None, help="follow a reports JSON-lines file instead of a topic")
    p.add_argument("--port", type=int, default=8080, help="HTTP port on 127.0.0.1 (default 8080)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")


def run(args: argparse.Namespace) -> int:
    import threading

    from ..dashboard import DashboardState, file_source, kafka_source, serve_dashboard

    state, stop = DashboardState(), threading.Event()
    if args.file:
        source = file_source(state, Path(args.file), stop)
        what = args.file
    else:
        options = kafka_options(args)
        source = kafka_source(state, options, args.topic, stop)
        what = f"{args.topic} on {options['bootstrap.servers']}"
    try:
        server = serve_dashboard(state, args.port, args.host, [source])
    except OSError as exc:
        raise UsageError(f"--port: cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
    print(
        f"dphhh dashboard: http://{args.host}:{server.server_address[1]}/ (reports from {what}; Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        stop.set()
        server.shutdown()
        print("dphhh dashboard: stopped", file=sys.stderr)
        return 130
