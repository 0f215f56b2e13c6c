"""``dphhh run``: the stream job (Kafka in, private reports out) until Ctrl-C."""

from __future__ import annotations

import argparse
from typing import Any

from .output import stream_report_text

__all__ = ["add_parser", "run", "embedded_run_overrides"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run the stream job (Kafka in, private reports out) until Ctrl-C",
        description="Run the stream job: read the input topic, keep one Misra-Gries sketch per hierarchy level "
        "and publish one private report per window of the public schedule to the reports topic (and "
        "output.reports_file), until Ctrl-C or window.until. Settings: a TOML file (--config, see "
        "deploy/dphhh.toml), DPHHH_<SECTION>_<KEY> variables, then --set; every key is in "
        "docs/reference/config.md. A local broker is started when the bootstrap is this machine's and "
        "does not answer.",
    )
    p.add_argument("--config", default=None, help="TOML configuration file (see deploy/dphhh.toml)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a setting")
    p.add_argument(
        "--feed",
        "--replay",
        dest="feed",
        choices=("auto", "yes", "no"),
        default="auto",
        help="feed the input topic with sample traffic (the bundled capture + synthetic addresses, "
        "timestamped now) while the job runs (auto: only without --config); not to be confused "
        "with window.mode = replay, a bounded job over past data",
    )
    p.add_argument("--rate", type=float, default=20_000.0, help="sample feed rate, addresses/s (default 20000)")


def embedded_run_overrides() -> list[str]:
    """``dphhh run`` without ``--config`` starts a new deployment each time (its own schedule origin,
    report store, reports file, checkpoints and group under var/runs/run-<time>/): a run an hour
    later must not owe a report for every window of the hour in between."""
    import time
    import uuid

    from ..paths import state_dir

    run_id = f"run-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    folder = state_dir() / "runs" / run_id
    return [
        f"output.ledger_dir={folder / 'ledger'}",
        f"output.reports_file={folder / 'reports.jsonl'}",
        f"output.run_dir={folder}",
        f"flink.checkpoint_dir={folder / 'checkpoints'}",
        f"kafka.group_id=dphhh-{run_id}",
    ]


def run(args: argparse.Namespace) -> int:
    from ..config import load_config
    from ..runner import run_job

    overrides = list(args.set)
    if args.config is None:  # the embedded default: a fresh deployment (schedule, report store) per run
        overrides = [*embedded_run_overrides(), *overrides]
    cfg = load_config(args.config, overrides=overrides)
    feed = args.feed == "yes" or (args.feed == "auto" and args.config is None)
    return run_job(cfg, stream_report_text, feed=feed, rate=args.rate)
