"""``dphhh exact``: the exact, NON-PRIVATE HHH of a file, for evaluation on one's own data.

The output holds the exact n, counts and skip counts by reason: it is labelled NON-PRIVATE in
every format and on stderr. Same input options, ``--tau`` (a count or a share of n) and
``--format`` as ``dphhh hhh``, and the same field names (``count``, ``residual``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from dphhh.connectors.skips import SkipCounter
from dphhh.connectors.spool import spooled_input
from dphhh.sketches.specs import parse_hierarchy

from ..batch import exact_report
from .options import input_options, parse_tau, weighting
from .output import add_format_option, add_top_option, output_format, render, top_rows

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "exact",
        help="exact NON-PRIVATE HHH of a file (evaluation only)",
        description="The exact, NON-PRIVATE HHH of a file, for evaluation on your own data: the output holds "
        "the exact n, counts and skip counts by reason. Do not publish it.",
    )
    input_options(p)
    p.add_argument(
        "--tau",
        type=parse_tau,
        required=True,
        help="HHH threshold: an absolute count (e.g. 1000, 1,000 or 1k) or a share of the input's exact n "
        "(e.g. 1%%, 0.5%%)",
    )
    add_format_option(p, "json")
    add_top_option(p)


def run(args: argparse.Namespace) -> int:
    skips = SkipCounter()
    with spooled_input(args.input) as path:
        try:
            report = exact_report(
                path,
                input_format=args.input_format,
                hierarchy=parse_hierarchy(args.hierarchy),
                tau=args.tau.count if args.tau.count is not None else 1.0,
                skips=skips,
                weighting=weighting(args),
                tau_share=args.tau.share,
                display_path=args.input,
            )
        finally:
            line = skips.operational_line("dphhh exact")
            if line:
                print(line, file=sys.stderr)
    print(render(top_rows(report, args.top), output_format(args)), flush=True)
    print("dphhh exact: NON-PRIVATE output: do not publish", file=sys.stderr)
    return 0
