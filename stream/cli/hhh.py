"""``dphhh hhh``: one private HHH report over a whole file (one window = the input).

The report holds no count of records (docs/ALGORITHMS.md §0.1 f); unparsable records are counted
on one stderr line labelled operational; valid records of another kind (IPv6 in an IPv4 run,
paths of another depth) are left out without a count. Before the result, warnings say when the
settings make the output mostly noise (α1 or τ above the noisy window size), with the planner's
suggestion; they use public parameters and the released noisy size only.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import Any

from dphhh.connectors.files import open_input
from dphhh.connectors.skips import SkipCounter
from dphhh.connectors.spool import spooled_input
from dphhh.privacy.checks import guarantee_warnings
from dphhh.privacy.params import HHHParams, PrivacyBudget
from dphhh.privacy.plan import SUGGESTED_EPSILONS, PlanInputs, suggest_epsilon
from dphhh.sketches.hierarchy import Hierarchy
from dphhh.sketches.sizing import sketch_memory_bytes
from dphhh.sketches.specs import parse_hierarchy

from ..batch import batch_report, no_readable_hint
from .memory import add_max_memory_option, check_memory, parse_max_memory
from .options import input_options, params, privacy_options, weighting
from .output import add_format_option, add_top_option, output_format, render, top_rows
from .plan import plan_command

__all__ = ["add_parser", "run", "run_report", "noise_warnings"]

DESCRIPTION = (
    "One private HHH report over a whole file (one window = the input). The report holds no count of "
    "records. Unparsable records (not UTF-8, not an address or path, truncated packets) are counted on "
    "one stderr line labelled 'operational, not private'; valid records of another kind (an IPv6 "
    "address or packet in an IPv4 run, a dotted quad in an IPv6 run, a path of another depth) are left "
    "out and counted nowhere. A file without a single element gets its (empty) report like any other: "
    "an error would tell it apart. Exit status 1 for an unreadable file, 2 for a usage error."
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("hhh", help="one private HHH report over a whole file", description=DESCRIPTION)
    input_options(p)
    privacy_options(p)
    add_max_memory_option(p)
    add_format_option(p, "json")
    add_top_option(p)


def check_sketch_memory(args: argparse.Namespace, hierarchy: Hierarchy) -> None:
    """Refuse, before reading the input, κ × levels × partitions sketches that do not fit
    ``--max-memory`` (public parameters only)."""
    counters, partitions = int(args.counters), int(args.partitions)
    if counters < 1 or partitions < 1:
        return  # HHHParams names the bad option
    need = hierarchy.h * partitions * sketch_memory_bytes(counters)
    check_memory(
        need,
        f"--counters: {hierarchy.h} levels x {partitions} partition(s) of {counters:,} counters",
        "lower --counters (dphhh plan --max-memory recommends one) or --partitions",
        parse_max_memory(getattr(args, "max_memory", None)),
    )


def noise_warnings(
    report: dict[str, Any],
    hierarchy: Hierarchy,
    params: HHHParams,
    *,
    budget: PrivacyBudget | None = None,
    weight_cap: int = 1,
) -> list[str]:
    """Warnings when a released report is mostly noise, from public values and its noisy size.

    ``budget`` is the (ε, δ) the user gave, per record (``params`` are the event-level parameters
    calibrated from it, over ``weight_cap`` units per weighted record); a suggested ``--epsilon`` is in
    the user's unit, and the suggested ``dphhh plan`` line carries every setting (:func:`plan_command`)."""
    if "refused" in report:
        return []
    n_noisy = max(int(report["window"]["n_noisy"]), 1)
    alpha1 = float(report["guarantees"]["alpha1"])
    tau = float(report["params"]["tau"])
    user = budget if budget is not None else PrivacyBudget(params.epsilon, params.delta)
    out: list[str] = []
    mostly_noise = alpha1 >= n_noisy
    if mostly_noise:
        out.append(
            f"alpha1 = {alpha1:,.0f} is not below the window's noisy size ~{n_noisy:,}: every count in this "
            f"report may be off by more than the whole input; the output is mostly noise"
        )
    if tau > n_noisy:
        out.append(
            f"tau = {tau:,.0f} is above the window's noisy size ~{n_noisy:,}: no prefix can be heavy; "
            f"give a share of the window instead, e.g. --tau 5%"
        )
    two_d = hierarchy.kind == "pair"
    if mostly_noise or (not two_d and not report["guarantees"].get("coverage_holds", True)):
        target = tau if tau <= n_noisy else 0.05 * n_noisy
        inputs = PlanInputs(
            n=n_noisy,
            epsilon=user.epsilon,
            delta=user.delta,
            h=hierarchy.h,
            tau=target,
            beta=params.beta,
            counters=params.counters,
            partitions=params.partitions,
            variant=params.variant,
            mode="point" if two_d else params.mode,  # 2-D claims no coverage
            calibration=params.calibration,
            weight_cap=weight_cap,
        )
        eps = suggest_epsilon(inputs, target)
        where = plan_command(inputs, hierarchy)
        if eps is not None and eps > user.epsilon:
            out.append(
                f"the planner suggests --epsilon {eps:g} for tau {target:,.6g} at this size "
                f"(coverage and detection with probability >= 0.9; check with `{where}`)"
            )
        elif eps is None:
            out.append(
                f"no epsilon up to {SUGGESTED_EPSILONS[-1]:g} detects a prefix of {target:,.6g} at this size: raise "
                f"--tau, or use more data per window (`{where}`)"
            )
    return out


def run_report(args: argparse.Namespace, input_path: str) -> int:
    """One private report of the file at ``input_path`` (``hhh`` and ``demo --batch``)."""
    hierarchy = parse_hierarchy(args.hierarchy)
    weights = weighting(args)
    command = f"dphhh {args.command}"
    check_sketch_memory(args, hierarchy)
    with spooled_input(input_path) as path:
        source = open_input(path, args.input_format)
        weights.check(source.format, source.is_capture)
        unit = weights.unit(source.format)
        hhh_params = params(args, unit)
        skips = SkipCounter()
        try:
            report = batch_report(
                path,
                input_format=args.input_format,
                hierarchy=hierarchy,
                params=hhh_params,
                seed=args.seed,
                skips=skips,
                weighting=weights,
                budget=PrivacyBudget(args.epsilon, args.delta),
                tau_share=args.tau.share,
                display_path=input_path,
            )
        finally:  # also before an error
            line = skips.operational_line(command)
            if line:  # unparsable records hold no element: the line and its hint are public (§0.1 f)
                print(line, file=sys.stderr)
                print(f"{command}: hint: {no_readable_hint(hierarchy)}", file=sys.stderr)
    n_noisy = max(int(report["window"]["n_noisy"]), 1)  # noisy: using it for warnings is post-processing
    if args.tau.share is None and args.tau.count < 1:
        print(
            f"{command}: warning: --tau {args.tau.text} is an absolute count below 1 (every prefix qualifies); "
            f"for a share of the window write a percentage, e.g. --tau {100 * args.tau.count:g}%",
            file=sys.stderr,
        )
    if args.tau.share is not None:  # the threshold the release used (a share of the noisy size)
        hhh_params = replace(hhh_params, tau=float(report["params"]["tau"]))
    for warning in guarantee_warnings(hhh_params, h=hierarchy.h, expected_n=n_noisy):
        print(f"{command}: warning: {warning}", file=sys.stderr)
    for warning in noise_warnings(
        report, hierarchy, hhh_params, budget=PrivacyBudget(args.epsilon, args.delta), weight_cap=unit.weight_cap
    ):
        print(f"{command}: warning: {warning}", file=sys.stderr)
    if args.seed is not None:
        print(f"{command}: warning: --seed makes the noise reproducible: this report is NOT private", file=sys.stderr)
    print(render(top_rows(report, getattr(args, "top", None)), output_format(args)), flush=True)
    # no running time: it follows the input's size (docs/ALGORITHMS.md §0.1 h)
    print(f"{command}: released 1 window over {hierarchy.h} levels", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    return run_report(args, args.input)
