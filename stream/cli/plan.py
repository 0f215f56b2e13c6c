"""``dphhh plan``: what a setting can detect, before deploying (docs/calibration.md §7).

Public inputs only (the expected window size is the user's guess, not the data's count); the
numbers come from :func:`dphhh.privacy.plan.make_plan`, the code path the reports use.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from dataclasses import replace
from typing import Any

from dphhh.privacy.params import CALIBRATIONS, DEFAULT_CALIBRATION, MODES, VARIANTS
from dphhh.privacy.plan import PlanInputs, make_plan
from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import Hierarchy
from dphhh.sketches.specs import parse_hierarchy

from .options import NUMBER, PRIVACY_DEFAULTS, parse_tau, whole_count
from .output import add_format_option, output_format, render

__all__ = ["add_parser", "run", "parse_size", "format_plan", "format_table", "plan_command", "PLAN_DEFAULTS"]

_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}
TABLE_EPSILONS = (0.5, 1.0, 2.0, 4.0)
TABLE_SIZES = (10**5, 10**6, 10**7)
DEFAULT_MAX_MEMORY = "256MiB"
#: ``plan``'s defaults of the settings a suggested command line carries when they differ
#: (:func:`plan_command`)
PLAN_DEFAULTS: dict[str, Any] = {"hierarchy": "ipv4:8,16,24,32", **PRIVACY_DEFAULTS, "unit-cap": 1, "weight-cap": 1}


def plan_command(inputs: PlanInputs, hierarchy: Hierarchy) -> str:
    """The ``dphhh plan`` command line of ``inputs`` (``--epsilon E`` left for the reader to choose): every
    setting that is not ``plan``'s default, each number as it is (``--tau 0.5``, never ``0``), quoted
    for a shell; ``plan`` accepts it as written."""
    words = [
        "dphhh",
        "plan",
        "--n",
        str(int(inputs.n)),
        "--tau",
        f"{inputs.tau:.12g}",
        "--delta",
        f"{inputs.delta:.12g}",
    ]
    if hierarchy.spec() != PLAN_DEFAULTS["hierarchy"]:
        words += ["--hierarchy", hierarchy.spec()]
    for option, value in (
        ("beta", inputs.beta),
        ("counters", inputs.counters),
        ("partitions", inputs.partitions),
        ("variant", inputs.variant),
        ("mode", inputs.mode),
        ("calibration", inputs.calibration),
        ("unit-cap", inputs.unit_cap),
        ("weight-cap", inputs.weight_cap),
    ):
        if value != PLAN_DEFAULTS[option]:
            words += [f"--{option}", f"{value:.12g}" if isinstance(value, float) else str(value)]
    return " ".join(shlex.quote(w) for w in words) + " --epsilon E"


def _percent(part: float, whole: float) -> str:
    """``part`` as a percentage of ``whole`` with two significant digits."""
    return f"{100 * part / whole:.2g} %"


def parse_size(text: str, where: str) -> int:
    """``"2GiB"``, ``"500MB"``, ``"1e6"``, ``"100k"``, ``"50,000"`` → an integer (bytes or elements)."""
    m = re.fullmatch(rf"\s*({NUMBER})\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise UsageError(f"{where} must be a number with an optional unit (k, M, G, KiB, MiB, GiB), got {text!r}")
    value = float(m.group(1).replace(",", "")) * _UNITS[m.group(2).lower()]
    if value < 1 or value != value:
        raise UsageError(f"{where} must be >= 1, got {text!r}")
    return int(value)


def add_parser(sub: Any) -> None:
    """The ``plan`` sub-command's options."""
    p = sub.add_parser(
        "plan",
        help="what a setting can detect (alpha1, alpha2, T*, coverage, detectable counts, memory)",
        description="Compute, from public inputs only, the guarantees a window's report will carry and the "
        "smallest prefix count it reports with probability >= 0.9, before deploying. The same code "
        "computes the numbers in every report.",
    )
    p.add_argument("--n", required=True, help="expected elements per window (public guess, e.g. 1e6 or 250k)")
    p.add_argument("--epsilon", type=float, required=True, help="window privacy budget ε > 0")
    p.add_argument("--delta", type=float, default=1e-6, help="window privacy budget δ (default 1e-6)")
    p.add_argument(
        "--beta", type=float, default=PLAN_DEFAULTS["beta"], help="failure probability of the guarantees (default 0.05)"
    )
    p.add_argument(
        "--tau", type=parse_tau, default=None, help="HHH threshold: a count, or a share of --n such as 1%% (optional)"
    )
    p.add_argument(
        "--hierarchy", default=PLAN_DEFAULTS["hierarchy"], help="ipv4:LENGTHS, ipv6:LENGTHS, path:DEPTH or A x B"
    )
    p.add_argument(
        "--counters", type=whole_count, default=PLAN_DEFAULTS["counters"], help="κ, counters per sketch (default 1024)"
    )
    p.add_argument(
        "--partitions", type=int, default=PLAN_DEFAULTS["partitions"], help="P, key partitions per level (default 1)"
    )
    p.add_argument(
        "--variant", default=PLAN_DEFAULTS["variant"], choices=VARIANTS, help="release variant (default fresh)"
    )
    p.add_argument(
        "--mode", default=PLAN_DEFAULTS["mode"], choices=MODES, help="HHH extraction mode (default conservative)"
    )
    p.add_argument(
        "--calibration",
        default=PLAN_DEFAULTS["calibration"],
        choices=CALIBRATIONS,
        help=f"noise calibration (default {DEFAULT_CALIBRATION}; paper = the DP-HHH paper's scales)",
    )
    p.add_argument(
        "--unit-cap",
        type=whole_count,
        default=PLAN_DEFAULTS["unit-cap"],
        help="m elements per privacy unit (user level; default 1)",
    )
    p.add_argument(
        "--weight-cap",
        type=whole_count,
        default=PLAN_DEFAULTS["weight-cap"],
        help="W units per weighted record (default 1)",
    )
    p.add_argument(
        "--max-memory",
        default=DEFAULT_MAX_MEMORY,
        help=f"sketch memory budget per window for the recommended κ (default {DEFAULT_MAX_MEMORY})",
    )
    p.add_argument(
        "--window-s",
        type=float,
        default=10.0,
        help="window length in seconds (--n per window gives the public rate the suggested publication delay "
        "is sized for; default 10, as window.size_ms)",
    )
    p.add_argument(
        "--table",
        action="store_true",
        help=f"print what is detectable for ε in {TABLE_EPSILONS} and n in 1e5, 1e6, 1e7 instead",
    )
    add_format_option(p, "text")


def _inputs(args: argparse.Namespace) -> PlanInputs:
    n = parse_size(args.n, "--n")
    return PlanInputs(
        n=n,
        epsilon=args.epsilon,
        delta=args.delta,
        h=parse_hierarchy(args.hierarchy).h,
        tau=None if args.tau is None else args.tau.absolute(n),
        beta=args.beta,
        counters=args.counters,
        partitions=args.partitions,
        variant=args.variant,
        mode=args.mode,
        calibration=args.calibration,
        unit_cap=args.unit_cap,
        weight_cap=args.weight_cap,
        max_memory=None if args.max_memory is None else parse_size(args.max_memory, "--max-memory"),
    )


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def format_plan(plan: dict[str, Any], hierarchy: str) -> str:
    """A readable rendering of a ``dphhh.plan/1`` document."""
    i = plan["inputs"]
    n = i["n"]
    lines = [
        "dphhh plan  (public inputs only; every report with these settings carries the same alpha values)",
        f"  window of ~{n:,} elements   hierarchy {hierarchy} (h={i['h']})   epsilon={i['epsilon']:g}  "
        f"delta={i['delta']:g}  beta={i['beta']:g}",
        f"  counters={i['counters']}  partitions={i['partitions']}  variant={i['variant']}  mode={i['mode']}  "
        f"calibration={i['calibration']}"
        + (
            f"  group privacy over {i['unit_cap'] * i['weight_cap']} elements"
            if i["unit_cap"] * i["weight_cap"] > 1
            else ""
        ),
        "",
        f"  release threshold T*        {plan['threshold']:>10.1f}   a prefix's noisy count must exceed it",
        f"  noise bound B               {plan['noise_bound']:>10}   every released value within ±B (prob. 1 - beta)",
        f"  alpha2 = T* + B             {plan['alpha2']:>10.1f}",
        f"  sketch error n/(counters+1){plan['sketch_error']:>10.1f}",
        f"  alpha1                      {plan['alpha1']:>10.1f}   reported counts within ±alpha1",
        f"  coverage needs tau >=       {plan['coverage_min_tau']:>10.1f}   ({_percent(plan['coverage_min_tau'], n)} of n)",
        f"  detectable (p >= {plan['detect_probability']:g})       {plan['detectable']:>10,}   "
        f"({_percent(plan['detectable'], n)} of n; up to {plan['detectable_worst_case']:,} if the sketch undercounts it)"
        + ("" if i["tau"] is not None else "; released, before the tau rule"),
        f"  sketch memory per window    {_bytes(plan['memory_bytes']):>10}   state per window {_bytes(plan['state_bytes'])}",
    ]
    if "coverage_holds" in plan:
        lines.append(
            f"  with tau={i['tau']:g}: coverage "
            + ("holds" if plan["coverage_holds"] else "is void (tau < 2*alpha1, or point mode)")
        )
    if "publish_delay_ms" in plan:
        lines.append(
            f"  publication delay           {plan['publish_delay_ms']:>7,} ms   suggested window.publish_delay_ms at "
            f"~{n / 1:,.0f} elements per window (an estimate: reports_overdue counts misses)"
        )
    rec = plan["recommended"]
    if rec:
        limit = f" within {_bytes(i['max_memory'])}" if i["max_memory"] else ""
        lines.append(
            f"  recommended counters{limit}: {rec['counters']} (alpha1 {rec['alpha1']:.1f}, "
            f"{_bytes(rec['memory_bytes'])} per window)"
        )
    else:
        lines.append("  recommended counters: none fits --max-memory (raise it, or lower P or the hierarchy's levels)")
    return "\n".join(lines)


def table_rows(base: PlanInputs) -> list[dict[str, Any]]:
    """Plans over ε × n (the table in docs/howto/plan.md), each with its own recommended κ."""
    rows = []
    for n in TABLE_SIZES:
        for eps in TABLE_EPSILONS:
            first = make_plan(replace(base, n=n, epsilon=eps))
            kappa = first["recommended"]["counters"] if first["recommended"] else base.counters
            plan = make_plan(replace(base, n=n, epsilon=eps, counters=kappa))
            rows.append(
                {
                    "n": n,
                    "epsilon": eps,
                    "counters": kappa,
                    "alpha1": plan["alpha1"],
                    "coverage_min_tau": plan["coverage_min_tau"],
                    "detectable": plan["detectable"],
                }
            )
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """The ε × n table as text (Markdown-compatible)."""
    out = [
        "| n | ε | κ (recommended) | α1 | coverage needs τ ≥ | released with p ≥ 0.9 from |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['n']:,} | {r['epsilon']:g} | {r['counters']:,} | {r['alpha1']:.0f} | "
            f"{r['coverage_min_tau']:,.0f} ({_percent(r['coverage_min_tau'], r['n'])}) | "
            f"{r['detectable']:,} ({_percent(r['detectable'], r['n'])}) |"
        )
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    """``dphhh plan``."""
    inputs = _inputs(args)
    fmt = output_format(args)
    if args.table:
        rows = table_rows(inputs)
        if fmt == "json":
            print(json.dumps(rows, indent=2))
        else:
            print(render({"rows": rows}, "csv") if fmt == "csv" else format_table(rows))
        return 0
    plan = make_plan(inputs)
    if not args.window_s > 0:
        raise UsageError(f"--window-s must be > 0, got {args.window_s!r}")
    from ..schedule import suggested_publish_delay_ms

    plan["publish_delay_ms"] = suggested_publish_delay_ms(
        inputs.n / args.window_s, sketches=inputs.h * inputs.partitions, counters=inputs.counters
    )
    print(render(plan, fmt, text=lambda doc: format_plan(doc, args.hierarchy)))
    return 0
