"""The ``dphhh`` command line.

Subcommands:

* ``dphhh hhh``   — one private HHH report over a whole file (batch; one window = the input);
* ``dphhh exact`` — the exact, NON-PRIVATE HHH of a file, for evaluation on one's own data;
* ``dphhh demo``  — the batch command on the shared real capture, with a readable summary.

Errors in arguments or input print ``dphhh <command>: error: <message>`` and exit with status 2
(usage) or 1 (nothing readable in the input).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from connectors.files import INPUT_FORMATS
from privacy.params import MODES, VARIANTS, HHHParams
from sketches.hierarchy import parse_hierarchy

from .batch import NoReadableInput, batch_report, exact_report

__all__ = ["main", "build_parser", "format_report"]

DEMO_CAPTURE = "amp.TCP.reflection.SYNACK.pcap"


def shared_dir() -> Path:
    """The shared data folder: ``$DPHHH_SHARED`` or ``../shared`` beside the repository."""
    env = os.environ.get("DPHHH_SHARED")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared"


def _input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, help="input file: text (one record per line), pcap or pcapng")
    p.add_argument("--input-format", default="auto", choices=INPUT_FORMATS, help="default: detect from magic bytes")
    p.add_argument(
        "--hierarchy",
        default="ipv4:8,16,24,32",
        help="ipv4:LENGTHS, ipv6:LENGTHS or path:DEPTH (default ipv4:8,16,24,32)",
    )


def _privacy_options(p: argparse.ArgumentParser, *, demo: bool = False) -> None:
    p.add_argument("--epsilon", type=float, required=not demo, default=1.0 if demo else None,
                   help="window privacy budget ε > 0")
    p.add_argument("--delta", type=float, required=not demo, default=1e-6 if demo else None,
                   help="window privacy budget 0 < δ < 1 (far below 1/n)")
    p.add_argument("--beta", type=float, default=0.05, help="failure probability of the guarantees (default 0.05)")
    p.add_argument("--tau", type=float, required=not demo, default=1000.0 if demo else None,
                   help="HHH threshold (absolute count)")
    p.add_argument("--counters", type=int, default=1024, help="κ, counters per sketch (default 1024)")
    p.add_argument("--partitions", type=int, default=1, help="P, key partitions per level (default 1)")
    p.add_argument("--variant", default="fresh", choices=VARIANTS, help="release variant (default fresh)")
    p.add_argument("--mode", default="conservative", choices=MODES, help="HHH extraction mode (default conservative)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed the noise for reproducible experiments: the report is then NOT private")
    p.add_argument("--pretty", action="store_true", help="print a readable table instead of JSON")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``dphhh``."""
    parser = argparse.ArgumentParser(prog="dphhh", description="Hierarchical heavy hitters under differential privacy.")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("hhh", help="one private HHH report over a whole file")
    _input_options(p)
    _privacy_options(p)
    p = sub.add_parser("exact", help="exact NON-PRIVATE HHH of a file (evaluation only)")
    _input_options(p)
    p.add_argument("--tau", type=float, required=True, help="HHH threshold (absolute count)")
    p = sub.add_parser("demo", help="run the batch job on the shared real capture and print its report")
    _privacy_options(p, demo=True)
    p.add_argument("--input", default=None, help=f"default: ../shared/data/pcaps/{DEMO_CAPTURE}")
    p.add_argument("--input-format", default="auto", choices=INPUT_FORMATS)
    p.add_argument("--hierarchy", default="ipv4:8,16,24,32")
    return parser


def format_report(report: dict[str, Any]) -> str:
    """A readable rendering of a ``dphhh.report/1`` report."""
    p, g = report["params"], report["guarantees"]
    lines = [
        f"dphhh private HHH report  ({report['budget']['guarantee']})",
        f"  hierarchy {p['hierarchy']}  tau={p['tau']:g}  kappa={p['counters']}  P={p['partitions']}  "
        f"variant={p['variant']}  mode={p['mode']}",
        f"  noisy window size ~ {report['window']['n_noisy']}   alpha1={g['alpha1']:.1f}  alpha2={g['alpha2']:.1f}  "
        f"beta={g['beta']}   randomness: {g['randomness']}",
        "",
        f"  {'level':>5}  {'prefix':<24} {'residual':>10} {'count':>9}  {'count interval (±alpha1)':>24}",
    ]
    for item in sorted(report["hhh"], key=lambda x: (x["level"], -x["estimate"])):
        lines.append(
            f"  {item['level']:>5}  {item['prefix']:<24} {item['estimate']:>10.1f} {item['count']:>9.1f}  "
            f"[{item['lower']:>9.1f}, {item['upper']:>9.1f}]"
        )
    if not report["hhh"]:
        lines.append("  (no prefix reported)")
    skipped = report.get("diagnostics", {}).get("skipped") or {}
    if skipped:
        lines += ["", "  skipped records: " + ", ".join(f"{k}={v}" for k, v in skipped.items())]
    return "\n".join(lines)


def _params(args: argparse.Namespace) -> HHHParams:
    return HHHParams(
        epsilon=args.epsilon,
        delta=args.delta,
        tau=args.tau,
        beta=args.beta,
        counters=args.counters,
        partitions=args.partitions,
        variant=args.variant,
        mode=args.mode,
    )


def _run_hhh(args: argparse.Namespace, input_path: str) -> int:
    hierarchy = parse_hierarchy(args.hierarchy)
    params = _params(args)
    started = time.monotonic()
    report = batch_report(input_path, input_format=args.input_format, hierarchy=hierarchy, params=params, seed=args.seed)
    n_noisy = report["window"]["n_noisy"]
    if n_noisy > 0 and params.delta > 1.0 / n_noisy:
        print(f"dphhh {args.command}: warning: delta={params.delta:g} is not far below 1/n "
              f"(n is about {n_noisy}); the guarantee is weak", file=sys.stderr)
    if args.seed is not None:
        print(f"dphhh {args.command}: warning: --seed makes the noise reproducible: this report is NOT private",
              file=sys.stderr)
    print(format_report(report) if args.pretty else json.dumps(report, indent=2))
    print(f"dphhh {args.command}: released 1 window over {hierarchy.h} levels in "
          f"{time.monotonic() - started:.2f} s", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dphhh`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "hhh":
            return _run_hhh(args, args.input)
        if args.command == "demo":
            path = args.input or str(shared_dir() / "data" / "pcaps" / DEMO_CAPTURE)
            if not args.pretty:
                args.pretty = True
            print(f"dphhh demo: private HHH of {path} (one window = the whole capture)\n", file=sys.stderr)
            return _run_hhh(args, path)
        if args.command == "exact":
            report = exact_report(args.input, input_format=args.input_format,
                                  hierarchy=parse_hierarchy(args.hierarchy), tau=args.tau)
            print(json.dumps(report, indent=2))
            print("dphhh exact: NON-PRIVATE output: do not publish", file=sys.stderr)
            return 0
    except NoReadableInput as exc:
        print(f"dphhh {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"dphhh {args.command}: error: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
