"""The ``dphhh`` command line.

Subcommands:

* ``dphhh demo``    — the stream job on a sample stream (local broker, bounded Flink job, reports);
  ``dphhh demo --batch`` runs the batch command on the shared real capture instead;
* ``dphhh run``     — the stream job (Kafka → Flink → reports) until Ctrl-C;
* ``dphhh produce`` — publish addresses to a Kafka topic (packed batches by default);
* ``dphhh reports`` — read published reports (read-committed) and print them readably;
* ``dphhh hhh``     — one private HHH report over a whole file (batch; one window = the input);
* ``dphhh exact``   — the exact, NON-PRIVATE HHH of a file, for evaluation on one's own data;
* ``dphhh snapshot hhh|inftda|ahead|lue`` — the offline modules over one snapshot file;
* ``dphhh dashboard`` — a live web page of the published reports (topic or JSON-lines file).

Errors in arguments or input print ``dphhh <command>: error: <message>`` and exit with status 2
(usage) or 1 (nothing readable in the input).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka.errors import KafkaError

from connectors.files import INPUT_FORMATS, open_input
from connectors.flow_json import KEYS as FLOW_KEYS
from connectors.flow_json import SCHEMAS as FLOW_SCHEMAS
from connectors.skips import SkipCounter
from privacy.checks import guarantee_warnings
from privacy.params import CALIBRATIONS, DEFAULT_CALIBRATION, MODES, VARIANTS, HHHParams, PrivacyBudget
from privacy.unit import PrivacyUnit
from sketches.hierarchy import parse_hierarchy

from .batch import WEIGHTS, NoReadableInput, Weighting, batch_report, exact_report
from .errors import JobFailed
from .paths import DEMO_CAPTURE, capture
from .plan_cli import add_plan_parser, run_plan
from .snapshot_cli import add_snapshot_parser, run_snapshot

__all__ = ["main", "build_parser", "format_report"]


def _input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        required=True,
        help="input file: text (one record per line), pcap, pcapng, or JSON lines of flow records",
    )
    p.add_argument(
        "--input-format",
        default="auto",
        choices=INPUT_FORMATS,
        help="default: detect from magic bytes (flow-json must be given)",
    )
    p.add_argument(
        "--hierarchy",
        default="ipv4:8,16,24,32",
        help="ipv4:LENGTHS, ipv6:LENGTHS or path:DEPTH (default ipv4:8,16,24,32)",
    )
    p.add_argument(
        "--weight",
        default="records",
        choices=WEIGHTS,
        help="what a record counts: records (1 each, default), packets (a flow's packets), bytes (a "
        "flow's bytes, or a captured packet's IPv4 length)",
    )
    p.add_argument(
        "--weight-cap",
        type=int,
        default=None,
        metavar="W",
        help="public cap on one record's weight (required with --weight packets/bytes on flows, bytes "
        "on captures); the guarantee is per record, by group privacy over W",
    )
    p.add_argument(
        "--flow-schema",
        default="pmacct",
        choices=FLOW_SCHEMAS,
        help="flow-json: the collector's JSON (pmacct nfacctd/sfacctd, or goflow2)",
    )
    p.add_argument(
        "--flow-key",
        default="src",
        choices=FLOW_KEYS,
        help="flow-json: the address the hierarchy is over (default src)",
    )


def _weighting(args: argparse.Namespace) -> Weighting:
    return Weighting(weight=args.weight, cap=args.weight_cap, flow_schema=args.flow_schema, flow_key=args.flow_key)


#: Defaults of the privacy options (the demo only passes on what the user gave explicitly).
PRIVACY_DEFAULTS = {
    "beta": 0.05,
    "counters": 1024,
    "partitions": 1,
    "variant": "fresh",
    "mode": "conservative",
    "calibration": DEFAULT_CALIBRATION,
}
DEMO_DEFAULTS = {"epsilon": 1.0, "delta": 1e-6, "tau": 1000.0, **PRIVACY_DEFAULTS}


def _privacy_options(p: argparse.ArgumentParser, *, demo: bool = False) -> None:
    def default(name: str):
        return argparse.SUPPRESS if demo else PRIVACY_DEFAULTS.get(name)

    p.add_argument(
        "--epsilon", type=float, required=not demo, default=default("epsilon"), help="window privacy budget ε > 0"
    )
    p.add_argument(
        "--delta",
        type=float,
        required=not demo,
        default=default("delta"),
        help="window privacy budget 0 < δ < 1 (far below 1/n)",
    )
    p.add_argument(
        "--beta", type=float, default=default("beta"), help="failure probability of the guarantees (default 0.05)"
    )
    p.add_argument(
        "--tau", type=float, required=not demo, default=default("tau"), help="HHH threshold (absolute count)"
    )
    p.add_argument("--counters", type=int, default=default("counters"), help="κ, counters per sketch (default 1024)")
    p.add_argument(
        "--partitions", type=int, default=default("partitions"), help="P, key partitions per level (default 1)"
    )
    p.add_argument("--variant", default=default("variant"), choices=VARIANTS, help="release variant (default fresh)")
    p.add_argument("--mode", default=default("mode"), choices=MODES, help="HHH extraction mode (default conservative)")
    p.add_argument(
        "--calibration",
        default=default("calibration"),
        choices=CALIBRATIONS,
        help=f"noise calibration (default {DEFAULT_CALIBRATION}; paper = the DP-HHH paper's scales)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the noise for reproducible experiments: the report is then NOT private",
    )
    p.add_argument("--pretty", action="store_true", help="print a readable table instead of JSON")


def _kafka_client_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap",
        default=None,
        help="Kafka bootstrap servers (default 127.0.0.1:9092, or the --config file's kafka.bootstrap)",
    )
    p.add_argument(
        "--config",
        default=None,
        help="take the Kafka client settings (bootstrap, security_protocol, extra: SASL/SSL) from "
        "this dphhh TOML file; secrets as env:NAME or file:PATH",
    )


def kafka_options(args: argparse.Namespace) -> dict[str, Any]:
    """The Kafka client options of a client command: the --config file's (security included), with
    --bootstrap taking precedence."""
    from .config import load_config

    options = load_config(args.config).kafka_client_options() if args.config else {}
    options["bootstrap.servers"] = args.bootstrap or options.get("bootstrap.servers") or "127.0.0.1:9092"
    return options


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dphhh")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``dphhh``."""
    parser = argparse.ArgumentParser(prog="dphhh", description="Hierarchical heavy hitters under differential privacy.")
    parser.add_argument("--version", action="version", version=f"dphhh {_version()}")
    parser.add_argument(
        "--state-dir",
        default=None,
        metavar="DIR",
        help="run state (local broker, run folders, logs); default $DPHHH_STATE_DIR, else var/ of "
        "the checkout, else ./var. Downloaded jars go to $DPHHH_HOME (default ~/.cache/dphhh)",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "hhh",
        help="one private HHH report over a whole file",
        description="One private HHH report over a whole file (one window = the input). The report holds no "
        "count of records. Unparsable records (not UTF-8, not an address or path, truncated packets) "
        "are counted on one stderr line labelled 'operational, not private'; valid records of "
        "another kind (an IPv6 address or packet in an IPv4 run, a dotted quad in an IPv6 run, a "
        "path of another depth) are left out and counted nowhere. Exit status 1 when the file holds "
        "no element of the hierarchy, 2 for a usage error.",
    )
    _input_options(p)
    _privacy_options(p)
    p = sub.add_parser(
        "exact",
        help="exact NON-PRIVATE HHH of a file (evaluation only)",
        description="The exact, NON-PRIVATE HHH of a file, for evaluation on your own data: the output holds "
        "the exact n, counts and skip counts by reason. Do not publish it.",
    )
    _input_options(p)
    p.add_argument("--tau", type=float, required=True, help="HHH threshold (absolute count)")
    p = sub.add_parser("demo", help="run the stream job on a sample stream and print its reports")
    p.add_argument("--batch", action="store_true", help="run the batch command on the bundled capture instead")
    _privacy_options(p, demo=True)
    p.add_argument(
        "--input", default=None, help=f"with --batch; default: the bundled capture data/pcaps/{DEMO_CAPTURE}"
    )
    p.add_argument("--input-format", default="auto", choices=INPUT_FORMATS)
    p.add_argument("--hierarchy", default="ipv4:8,16,24,32")

    add_snapshot_parser(sub)
    add_plan_parser(sub)
    p = sub.add_parser("dashboard", help="serve a live web page of the published private reports")
    p.add_argument("--topic", default="dphhh-reports", help="reports topic (default dphhh-reports)")
    _kafka_client_options(p)
    p.add_argument("--file", default=None, help="follow a reports JSON-lines file instead of a topic")
    p.add_argument("--port", type=int, default=8080, help="HTTP port on 127.0.0.1 (default 8080)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p = sub.add_parser("run", help="run the stream job (Kafka in, private reports out) until Ctrl-C")
    p.add_argument("--config", default=None, help="TOML configuration file (see deploy/dphhh.toml)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="override a setting")
    p.add_argument(
        "--feed",
        "--replay",
        dest="feed",
        choices=("auto", "yes", "no"),
        default="auto",
        help="feed the input topic with sample traffic (the shared capture + synthetic addresses, "
        "timestamped now) while the job runs (auto: only without --config); not to be confused "
        "with window.mode = replay, a bounded job over past data",
    )
    p.add_argument("--rate", type=float, default=20_000.0, help="sample feed rate, addresses/s (default 20000)")

    p = sub.add_parser("produce", help="publish addresses to a Kafka topic")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", help="file of addresses (text, pcap, pcapng)")
    src.add_argument("--synthetic", type=int, metavar="N", help="N synthetic addresses (planted heavy prefixes)")
    p.add_argument("--input-format", default="auto", choices=INPUT_FORMATS)
    p.add_argument("--topic", required=True)
    _kafka_client_options(p)
    p.add_argument("--rate", type=float, default=0.0, help="addresses/s (0 = as fast as possible)")
    p.add_argument("--batch", type=int, default=1000, help="addresses per message (packed format)")
    p.add_argument("--format", choices=("packed-ipv4", "text-ipv4"), default="packed-ipv4")
    p.add_argument("--seed", type=int, default=0, help="seed of --synthetic")
    p.add_argument(
        "--partitions",
        type=int,
        default=1,
        help="partitions of the topic if it does not exist yet (default 1; one per job subtask)",
    )

    p = sub.add_parser("reports", help="print the reports of a reports topic (read-committed)")
    p.add_argument("--topic", default="dphhh-reports")
    _kafka_client_options(p)
    p.add_argument("--follow", action="store_true", help="keep waiting for new reports")
    p.add_argument("--json", action="store_true", help="print the raw JSON reports")
    return parser


def format_report(report: dict[str, Any]) -> str:
    """A readable rendering of a ``dphhh.report/1`` report."""
    p, g = report["params"], report["guarantees"]
    window = report.get("window", {})
    when = f"  window {window['start']} .. {window['end']}" if window.get("start") else "  window: the whole input"
    if "refused" in report:
        return "\n".join([f"dphhh HHH report REFUSED  ({report['refused']})", when, "  nothing released"])
    lines = [
        f"dphhh private HHH report  ({g.get('privacy', report['budget']['guarantee'])})",
        when,
        f"  hierarchy {p['hierarchy']}  tau={p['tau']:g}  kappa={p['counters']}  P={p['partitions']}  "
        f"variant={p['variant']}  mode={p['mode']}  calibration={p.get('calibration', 'paper')}",
        f"  noisy window size ~ {report['window']['n_noisy']}   alpha1={g['alpha1']:.1f}  alpha2={g['alpha2']:.1f}  "
        f"beta={g['beta']}   randomness: {g['randomness']}",
        "",
        f"  {'level':>5}  {'prefix':<24} {'residual':>10} {'count':>9}  {'true count in (1 - beta)':>24}",
    ]
    for item in sorted(report["hhh"], key=lambda x: (x["level"], -x["estimate"])):
        lines.append(
            f"  {item['level']:>5}  {item['prefix']:<24} {item['estimate']:>10.1f} {item['count']:>9.1f}  "
            f"[{item['lower']:>9.1f}, {item['upper']:>9.1f}]"
        )
    if not report["hhh"]:
        lines.append("  (no prefix reported)")
    # No "skipped records" line: a report carries no count of records (docs/ALGORITHMS.md §0.1 f); the batch
    # command prints the count of unparsable records on stderr as an operational line instead.
    return "\n".join(lines)


def _params(args: argparse.Namespace, unit: PrivacyUnit | None = None) -> HHHParams:
    """The event-level parameters; with a weighted ``unit``, its group-privacy calibration of
    (--epsilon, --delta)."""
    budget = PrivacyBudget(args.epsilon, args.delta) if 0 < args.delta < 1 else None
    eps, delta = args.epsilon, args.delta
    if unit is not None and budget is not None:
        event = unit.event_budget(budget)
        eps, delta = event.epsilon, event.delta
    return HHHParams(
        epsilon=eps,
        delta=delta,
        tau=args.tau,
        beta=args.beta,
        counters=args.counters,
        partitions=args.partitions,
        variant=args.variant,
        mode=args.mode,
        calibration=args.calibration,
    )


def _print_operational(command: str, skips: SkipCounter) -> None:
    """The count of unparsable records on stderr, labelled operational (never in the report)."""
    line = skips.operational_line(f"dphhh {command}")
    if line:
        print(line, file=sys.stderr)


def _run_hhh(args: argparse.Namespace, input_path: str) -> int:
    """``dphhh hhh`` (and ``demo --batch``): one private report of the whole file.

    The report holds no count of records; unparsable records are counted on one operational
    stderr line; valid records of another kind (IPv6 in an IPv4 run, paths of another depth) are
    left out without a count. A file without a single element exits 1 (``NoReadableInput``)."""
    hierarchy = parse_hierarchy(args.hierarchy)
    weighting = _weighting(args) if hasattr(args, "weight") else Weighting()
    source = open_input(input_path, args.input_format)
    weighting.check(source.format, source.is_capture)
    unit = weighting.unit(source.format)
    params = _params(args, unit)
    started = time.monotonic()
    skips = SkipCounter()
    try:
        report = batch_report(
            input_path,
            input_format=args.input_format,
            hierarchy=hierarchy,
            params=params,
            seed=args.seed,
            skips=skips,
            weighting=weighting,
            budget=PrivacyBudget(args.epsilon, args.delta),
        )
    finally:  # also before a "no readable record" error, which points at this line
        _print_operational(args.command, skips)
    n_noisy = report["window"]["n_noisy"]  # noisy: using it for the warning is post-processing
    for warning in guarantee_warnings(params, h=hierarchy.h, expected_n=max(int(n_noisy), 1)):
        print(f"dphhh {args.command}: warning: {warning}", file=sys.stderr)
    if args.seed is not None:
        print(
            f"dphhh {args.command}: warning: --seed makes the noise reproducible: this report is NOT private",
            file=sys.stderr,
        )
    print(format_report(report) if args.pretty else json.dumps(report, indent=2))
    print(
        f"dphhh {args.command}: released 1 window over {hierarchy.h} levels in {time.monotonic() - started:.2f} s",
        file=sys.stderr,
    )
    return 0


def _dashboard(args: argparse.Namespace) -> int:
    import threading

    from .dashboard import DashboardState, file_source, kafka_source, serve_dashboard

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
        raise ValueError(f"--port: cannot listen on {args.host}:{args.port}: {exc.strerror}") from None
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


def _produce(args: argparse.Namespace) -> int:
    import numpy as np

    from connectors.kafka_io import PackedProducer, create_topics, pack_ipv4
    from connectors.skips import SkipCounter
    from connectors.synthetic import synthetic_addresses
    from sketches.hierarchy import IPv4Hierarchy

    from .batch import iter_values
    from .runner import LIVE_INPUT_TOPIC

    if args.batch < 1:
        raise ValueError(f"produce: --batch must be >= 1, got {args.batch}")
    options = kafka_options(args)
    # a topic created here is a live job's input: its records carry the broker's arrival time
    create_topics(options, [args.topic], partitions=args.partitions, configs={args.topic: LIVE_INPUT_TOPIC})
    producer = PackedProducer(options, args.topic)
    skips = SkipCounter()
    if args.synthetic is not None:
        chunks = iter([synthetic_addresses(args.synthetic, seed=args.seed)])
    else:
        chunks = iter_values(args.input, args.input_format, IPv4Hierarchy(), skips)
    started = last = time.monotonic()
    sent = 0
    for chunk in chunks:
        for i in range(0, len(chunk), args.batch):
            part = np.asarray(chunk[i : i + args.batch], dtype=np.uint32)
            now_ms = int(time.time() * 1000)
            if args.format == "packed-ipv4":
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
    _print_operational("produce", skips)  # unparsable records only, labelled operational
    return 0


def _reports(args: argparse.Namespace) -> int:
    from connectors.kafka_io import StableOffsetProbe, iter_committed_values, iter_to_end

    from .reports_stall import ReportsStallWatch, stall_limit_s

    options = kafka_options(args)
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
            print(json.dumps(report) if args.json else format_report(report) + "\n", flush=True)
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


def _stop_on_sigterm() -> None:
    """SIGTERM (``kill``, service managers) stops a long-running command as Ctrl-C does: cleanly."""
    import signal
    import threading

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)


def embedded_run_overrides() -> list[str]:
    """``dphhh run`` without ``--config`` starts a new deployment each time (its own schedule origin,
    ledger, reports file, checkpoints and group under var/runs/run-<time>/): a run an hour later
    must not owe a report for every window of the hour in between."""
    import time
    import uuid

    from .paths import state_dir

    run = f"run-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    folder = state_dir() / "runs" / run
    return [
        f"output.ledger_dir={folder / 'ledger'}",
        f"output.reports_file={folder / 'reports.jsonl'}",
        f"output.run_dir={folder}",
        f"flink.checkpoint_dir={folder / 'checkpoints'}",
        f"kafka.group_id=dphhh-{run}",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dphhh`` command."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.state_dir:  # read by stream.paths.state_dir, here and in the deploy/ scripts
        os.environ["DPHHH_STATE_DIR"] = str(Path(args.state_dir).expanduser().resolve())
    if args.command in ("run", "demo", "reports", "produce", "dashboard"):
        _stop_on_sigterm()
    try:
        if args.command == "hhh":
            return _run_hhh(args, args.input)
        if args.command == "demo" and args.batch:
            path = args.input or str(capture(DEMO_CAPTURE))
            for name, value in DEMO_DEFAULTS.items():
                if not hasattr(args, name):
                    setattr(args, name, value)
            args.pretty = True
            print(f"dphhh demo: private HHH of {path} (one window = the whole capture)\n", file=sys.stderr)
            return _run_hhh(args, path)
        if args.command == "demo":
            from .runner import run_demo

            given = [f"privacy.{k}={getattr(args, k)}" for k in DEMO_DEFAULTS if hasattr(args, k)]
            if getattr(args, "seed", None) is not None:
                given.append(f"privacy.seed={args.seed}")
            return run_demo(format_report, given)
        if args.command == "run":
            from .config import load_config
            from .runner import run_job

            overrides = list(args.set)
            if args.config is None:  # the embedded default: a fresh deployment (schedule, ledger) per run
                overrides = [*embedded_run_overrides(), *overrides]
            cfg = load_config(args.config, overrides=overrides)
            feed = args.feed == "yes" or (args.feed == "auto" and args.config is None)
            return run_job(cfg, format_report, feed=feed, rate=args.rate)
        if args.command == "snapshot":
            return run_snapshot(args)
        if args.command == "plan":
            return run_plan(args)
        if args.command == "dashboard":
            return _dashboard(args)
        if args.command == "produce":
            return _produce(args)
        if args.command == "reports":
            return _reports(args)
        if args.command == "exact":
            skips = SkipCounter()
            try:
                report = exact_report(
                    args.input,
                    input_format=args.input_format,
                    hierarchy=parse_hierarchy(args.hierarchy),
                    tau=args.tau,
                    skips=skips,
                    weighting=_weighting(args),
                )
            finally:
                _print_operational(args.command, skips)
            print(json.dumps(report, indent=2))
            print("dphhh exact: NON-PRIVATE output: do not publish", file=sys.stderr)
            return 0
    except KeyboardInterrupt:  # a second Ctrl-C during a clean stop, or Ctrl-C outside a job
        print(f"\ndphhh {args.command}: interrupted", file=sys.stderr)
        return 130
    except NoReadableInput as exc:
        print(f"dphhh {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KafkaError as exc:  # broker unreachable, topic errors, …
        print(f"dphhh {args.command}: error: kafka: {exc}", file=sys.stderr)
        return 1
    except (TimeoutError, JobFailed) as exc:  # the broker did not answer within kafka.wait_s; a failed job
        print(f"dphhh {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"dphhh {args.command}: error: {exc}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":
    sys.exit(main())
