"""``dphhh demo``: the stream job on a sample stream (local broker, bounded Flink job, reports);
``dphhh demo --batch`` runs ``dphhh hhh`` on the bundled real capture instead."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dphhh.connectors.files import INPUT_FORMATS

from ..paths import DEMO_CAPTURE, capture
from .hhh import run_report
from .options import DEMO_DEFAULTS, HIERARCHY_HELP, parse_tau, privacy_options
from .output import add_format_option, stream_report_text

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "demo",
        help="run the stream job on a sample stream and print its reports",
        description="Start this checkout's Kafka broker, feed the bundled sample stream to the stream job on "
        "its embedded Flink MiniCluster and print each window's private report as it is published "
        "(about a minute; no configuration needed). --batch runs the file command on the bundled capture "
        "instead, without Kafka or Java.",
    )
    p.add_argument("--batch", action="store_true", help="run the batch command on the bundled capture instead")
    privacy_options(p, demo=True)
    p.add_argument(
        "--input", default=None, help=f"with --batch; default: the bundled capture data/pcaps/{DEMO_CAPTURE}"
    )
    p.add_argument(
        "--input-format",
        default="auto",
        choices=INPUT_FORMATS,
        help="with --batch; default: detect from magic bytes (flow-json must be given)",
    )
    p.add_argument("--hierarchy", default="ipv4:8,16,24,32", help=HIERARCHY_HELP)
    add_format_option(p, "text")


def run(args: argparse.Namespace) -> int:
    if args.batch:
        path = args.input or str(capture(DEMO_CAPTURE))
        for name, value in DEMO_DEFAULTS.items():
            if not hasattr(args, name):
                setattr(args, name, parse_tau(str(value)) if name == "tau" else value)
        print(f"dphhh demo: private HHH of {path} (one window = the whole capture)\n", file=sys.stderr)
        return run_report(args, path)
    from ..demo import run_demo

    given = []
    for key in DEMO_DEFAULTS:
        if hasattr(args, key):
            value = getattr(args, key)
            if key == "tau":
                value = f"{value.needs_absolute('the stream demo'):g}"
            given.append(f"privacy.{key}={value}")
    if getattr(args, "seed", None) is not None:
        given.append(f"privacy.seed={args.seed}")
    return run_demo(stream_report_text, given)
