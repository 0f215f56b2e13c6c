"""``dphhh snapshot hhh|inftda|ahead|lue``: the offline modules over one snapshot file.

Every subcommand reads the whole snapshot (:mod:`dphhh.connectors.snapshot`: text, pcap/pcapng, csv or
JSON lines with ``--column``), runs one mechanism of :mod:`dphhh.privacy.offline` and prints one JSON
document (schema ``dphhh.snapshot/1``):

``{"schema", "module", "input": {"path", "format", "out_of_domain"}, "params", "guarantees",
"budget": {"epsilon", "delta", "mechanism", "neighbours"}, "randomness", "result": <the mechanism's
own dict>, "answers": [...]}`` (``params`` and ``guarantees`` repeat the mechanism's own, so that
every document has the same envelope; ``input.out_of_domain`` states the module's rule in words).

**No count of records** is in the document or on stderr (docs/ALGORITHMS.md §0.1 f): not the number read, not
the number skipped, not the number outside the domain. The only count printed is that of
*unparsable* rows (not UTF-8, not an address, a bad csv/JSON row, not an integer, a missing
column), on one stderr line labelled "operational, not private". Valid records of another kind
(an IPv6 address where IPv4 is read, a path of another depth) are left out and counted nowhere
(classification: :mod:`dphhh.connectors.skips`). AHEAD's summary loses its user counts (``users``) and
the thresholds and variances computed from them.

**Out-of-domain values** (valid values outside the public ``--domain``), one rule per module:

* ``lue``: **dropped** silently — range counts are counts of the records inside the domain.
  Dropping depends on the record alone, so the add/remove guarantee holds for the whole input.
* ``ahead``: **clamped** to the nearest bound of each column, as an LDP client clamps its value
  before perturbing it: every record still sends exactly one report, and fractions are over all
  records (a range touching a bound includes the clamped mass).
* ``inftda``: a path hierarchy's paths not in the public ``--domain`` list are **dropped**
  silently (there is no boundary path to clamp to); every IPv4 address is in the domain. Under
  ``--neighbours substitution`` the released total is the exact number of in-domain paths (that
  relation treats it as public) and the guarantee covers substitutions within the domain.
* ``hhh``: the domain is every IPv4 or IPv6 address or every path of the hierarchy's depth:
  nothing is outside it (paths of another depth are records of another kind, see above).

A snapshot without a single readable value is released like any other (an error would tell it
from the same snapshot with one value), like ``dphhh hhh`` — except by ``ahead``, whose local model
makes the number of users public: it exits 1 without a user; usage errors exit 2. Range modules answer ``--query
a:b`` (repeatable) and ``--queries FILE`` (one ``a:b`` per line) with noisy estimates (``count``
for lue, ``fraction`` for ahead); at least one range is required, and every range is checked
against the domain, before the input is read (a release without a question would spend the
budget for nothing). Progress goes to stderr on long reads as a fraction of the file.

**Memory guards** (:mod:`dphhh.stream.cli.memory`, ``--max-memory``, default 80 % of the memory
available at start): what follows from public parameters is predicted and refused *before the
input is read* (and before standard input is spooled), with the estimate and the option that
reduces it — AHEAD's dense grids (every column padded to the smallest power ``b^L`` of
``--branching`` covering the largest ``--domain``, :func:`dphhh.privacy.offline.ahead.ahead_memory_bytes`),
LUE-DPTree's tree over ``--domain`` (:func:`dphhh.privacy.offline.lue_dptree.lue_memory_bytes`), and
InfTDA's first level. InfTDA's later levels noise every public child of each *kept* prefix, a
number known only once the previous level is released (it is public then: the progress line
prints it); each level is checked then, before its arrays are allocated
(:func:`dphhh.privacy.offline.inftda.inftda_level_memory_bytes`), and a refusal prints nothing else.
``snapshot hhh`` allocates in proportion to the distinct prefixes of the input only (not public).

**Error statements.** ``hhh``: every reported prefix has ``verdict`` (``heavy`` / ``possible``,
as ``dphhh hhh``), ``count`` and ``[lower, upper]``, an interval of its exact conditioned count
holding for all reported prefixes at once with probability >= 1 − ``--beta``
(:func:`dphhh.privacy.offline.hhh_offline.with_intervals`). ``inftda``: every level has
``error_bound``, a bound on ``|released − true|`` of each of its prefixes, jointly with probability
>= 1 − ``--beta`` (:meth:`dphhh.privacy.offline.inftda.InfTDAResult.error_bound`, docs/ALGORITHMS.md §7).
IPv6 hierarchies (``--hierarchy ipv6:LENGTHS``) are read by ``hhh`` from text, csv or jsonl.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dphhh.connectors.skips import NoReadableInput, no_readable_message
from dphhh.connectors.snapshot import SNAPSHOT_FORMATS, SnapshotValues, read_snapshot
from dphhh.connectors.spool import spooled_input
from dphhh.sketches.errors import UsageError

from .memory import add_max_memory_option, check_memory, parse_max_memory
from .output import add_format_option, output_format, render

__all__ = ["add_parser", "run", "parse_range", "read_ranges"]

SCHEMA = "dphhh.snapshot/1"

#: Each module's rule for valid values outside its public domain (also ``input.out_of_domain``).
OUT_OF_DOMAIN = {
    "lue": "dropped without being counted: range counts are over the records inside --domain",
    "ahead": "clamped to the nearest bound of each column's --domain (as an LDP client would before "
    "perturbing), without being counted: fractions are over all records",
    "inftda": "path hierarchies: paths not in the public --domain list are dropped without being counted; "
    "IPv4: every address is in the domain",
    "hhh": "none: the domain is every IPv4 or IPv6 address or every path of the hierarchy's depth",
}

#: Bounds a --domain may have: integers too large for 64 bits, read as ±(2^63 - 1)
#: (:data:`dphhh.connectors.snapshot.INT_SATURATED`), then always lie outside it.
DOMAIN_LIMIT = 1 << 62


class _Progress:
    """A progress line on stderr, shown only when reading takes more than a second."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.started = time.monotonic()
        self.last = 0.0
        self.shown = False

    def __call__(self, fraction: float) -> None:
        now = time.monotonic()
        if now - self.started > 1.0 and (now - self.last > 1.0 or fraction >= 1.0):
            self.last = now
            self.shown = True
            print(
                f"\rdphhh snapshot: reading {self.what}: {100 * fraction:5.1f} %", end="", file=sys.stderr, flush=True
            )

    def done(self) -> None:
        if self.shown:
            print(file=sys.stderr)


def parse_range(text: str, where: str = "--query") -> tuple[int, int]:
    """``"a:b"`` → (a, b) with integers a <= b."""
    lo, sep, hi = text.strip().partition(":")
    try:
        if not sep:
            raise ValueError
        a, b = int(lo), int(hi)
    except ValueError:
        raise UsageError(f"{where}: expected a range a:b of integers, got {text!r}") from None
    if a > b:
        raise UsageError(f"{where}: range {text!r} is empty (a > b)")
    return a, b


def read_ranges(path: str, where: str = "--queries") -> list[tuple[str, float]]:
    """Lines ``a:b`` or ``a:b,weight`` (``#`` comments) → (range text, weight) pairs."""
    out: list[tuple[str, float]] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise UsageError(f"{where}: cannot read {path}: {exc.strerror}") from None
    for number, line in enumerate(lines, start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        rng, _, weight = line.partition(",") if line.count(":") == 1 else (line, "", "")
        try:
            w = float(weight) if weight.strip() else 1.0
        except ValueError:
            raise UsageError(f"{where}: line {number}: bad weight {weight!r}") from None
        if not w > 0:
            raise UsageError(f"{where}: line {number}: weight must be > 0")
        out.append((rng.strip(), w))
    return out


def _input_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", required=True, help="snapshot file: text, pcap, pcapng, csv or jsonl")
    p.add_argument(
        "--input-format",
        default="auto",
        choices=SNAPSHOT_FORMATS,
        help="default: .csv/.jsonl by extension, else detected (pcap, pcapng, text)",
    )
    p.add_argument(
        "--column",
        action="append",
        default=[],
        metavar="NAME",
        help="csv/jsonl: the column (field) holding the values; repeat for 2-D",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed the noise (tests and experiments only: the output is then NOT private)",
    )
    add_format_option(p, "json")


def _common(p: argparse.ArgumentParser, *, delta: bool = True) -> None:
    _input_options(p)
    p.add_argument("--epsilon", type=float, required=True, help="privacy budget ε (> 0)")
    if delta:
        p.add_argument("--delta", type=float, required=True, help="privacy parameter δ (0 < δ < 1)")


_COUNTS_NOTE = (
    "The output holds no count of records; unparsable rows are counted on one stderr line "
    "labelled 'operational, not private'; valid records of another kind (e.g. an IPv6 address where "
    "IPv4 is read) are left out, uncounted. An input without a readable value still gets its "
    "released answer (exit status 0; ahead, whose user count is public in the local model, exits 1); "
    "exit status 2 for a usage error."
)


def add_parser(sub: Any) -> None:
    """The ``snapshot`` subcommand and its four modules."""
    snap = sub.add_parser(
        "snapshot",
        help="private answers over one snapshot file (offline modules)",
        description="Private answers over one snapshot file (offline modules). Out-of-domain "
        "values: lue drops them, ahead clamps them to the nearest bound, inftda "
        "drops paths outside its --domain list, hhh has none; none is counted. " + _COUNTS_NOTE,
    )
    mods = snap.add_subparsers(dest="module", required=True, metavar="MODULE")

    p = mods.add_parser(
        "lue",
        help="LUE-DPTree: private range counts over an integer attribute (ε-DP)",
        description="LUE-DPTree: private range counts over an integer attribute (ε-DP). "
        "Out-of-domain values: " + OUT_OF_DOMAIN["lue"] + ". " + _COUNTS_NOTE,
    )
    _common(p, delta=False)
    p.add_argument(
        "--domain",
        required=True,
        metavar="LO:HI",
        help="the public value domain, e.g. 0:65535 (values outside it are dropped, uncounted)",
    )
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--fanout", type=int, default=None, help="complete tree of this fan-out (default 16)")
    shape.add_argument("--fanouts", default=None, metavar="F1,F2,...", help="fan-out per level from the root")
    p.add_argument(
        "--budgets",
        choices=("optimal", "uniform"),
        default="optimal",
        help="per-node budgets (default optimal for the query workload)",
    )
    p.add_argument("--no-blue", action="store_true", help="skip BLUE consistency (answer from raw noisy nodes)")
    p.add_argument(
        "--workload",
        default=None,
        metavar="FILE",
        help="public query distribution for the budgets: lines a:b[,weight] (default: all ranges)",
    )
    _range_options(p)
    add_max_memory_option(p)
    _add_inftda(mods)
    _add_hhh(mods)
    _add_ahead(mods)


def _add_inftda(mods) -> None:
    p = mods.add_parser(
        "inftda",
        help="InfTDA: consistent integer counts of every prefix (zCDP → (ε, δ))",
        description="InfTDA: consistent integer counts of every prefix (zCDP → (ε, δ)). "
        "Out-of-domain values: " + OUT_OF_DOMAIN["inftda"] + ". Under "
        "--neighbours substitution the total of in-domain records is released "
        "exactly (that relation treats it as public). " + _COUNTS_NOTE,
    )
    _input_options(p)
    p.add_argument(
        "--hierarchy", default="ipv4:8,16,24,32", help="ipv4:LENGTHS or path:DEPTH (default ipv4:8,16,24,32)"
    )
    budget = p.add_mutually_exclusive_group(required=True)
    budget.add_argument("--epsilon", type=float, help="final ε (with --delta); converted to ρ")
    budget.add_argument("--rho", type=float, help="zCDP budget ρ (with --delta for the stated ε)")
    p.add_argument("--delta", type=float, required=True, help="δ of the (ε, δ) statement (0 < δ < 1)")
    p.add_argument(
        "--neighbours",
        choices=("add_remove", "substitution"),
        default="add_remove",
        help="neighbouring relation (default add_remove: the total is noised too)",
    )
    p.add_argument(
        "--contribution",
        type=int,
        default=1,
        help="m: the most distinct elements one user contributes (the caller guarantees it)",
    )
    p.add_argument(
        "--domain",
        default=None,
        metavar="FILE",
        help="path hierarchies: the PUBLIC list of every possible path, one per line "
        "(input paths not in it are dropped, uncounted)",
    )
    p.add_argument(
        "--beta",
        type=float,
        default=0.05,
        help="failure probability of the per-level error bounds (default 0.05)",
    )
    add_max_memory_option(p)


def _add_hhh(mods) -> None:
    p = mods.add_parser(
        "hhh",
        help="hierarchical heavy hitters of a snapshot: Algorithm 1 or the "
        "stability-histogram baseline, chosen by the planner",
        description="Hierarchical heavy hitters of a snapshot: Algorithm 1 or the "
        "stability-histogram baseline, chosen by the planner. Out-of-domain "
        "values: " + OUT_OF_DOMAIN["hhh"] + " (paths of another depth are left "
        "out, uncounted). " + _COUNTS_NOTE,
    )
    _common(p)
    p.add_argument(
        "--hierarchy",
        default="ipv4:8,16,24,32",
        help="ipv4:LENGTHS, ipv6:LENGTHS (text, csv or jsonl input) or path:DEPTH (default ipv4:8,16,24,32)",
    )
    p.add_argument("--tau", type=float, required=True, help="HHH threshold (absolute count)")
    p.add_argument(
        "--beta",
        type=float,
        default=0.05,
        help="failure probability of the guarantees and of the [lower, upper] intervals (default 0.05)",
    )
    p.add_argument(
        "--algorithm",
        choices=("auto", "algorithm1", "baseline"),
        default="auto",
        help="auto (default): the planner's choice; algorithm1 refuses a tau below its guard",
    )
    p.add_argument(
        "--expected-n",
        type=int,
        default=None,
        metavar="N",
        help="a PUBLIC estimate of the number of records, for the planner (auto mode)",
    )


def _add_ahead(mods) -> None:
    p = mods.add_parser(
        "ahead",
        help="AHEAD: range queries under LOCAL DP (each record perturbed as its user "
        "would), 1-D, 2-D, or more columns by LLE",
        description="AHEAD: range queries under LOCAL DP (each record perturbed as its user "
        "would). Out-of-domain values: " + OUT_OF_DOMAIN["ahead"] + ". The user "
        "counts of the mechanism's summary are left out. " + _COUNTS_NOTE,
    )
    _common(p, delta=False)
    p.add_argument(
        "--domain",
        action="append",
        default=[],
        metavar="LO:HI",
        help="the public domain of each column (repeat per column, in --column order); values "
        "outside it are clamped to the nearest bound, uncounted",
    )
    p.add_argument("--branching", type=int, default=2, help="fan-out per dimension (default 2: B=2 in 1-D, 4 in 2-D)")
    p.add_argument(
        "--oracle",
        choices=("auto", "oue", "grr"),
        default="auto",
        help="frequency oracle (default auto: GRR on small decompositions, else OUE)",
    )
    _range_options(p, "A:B[,C:D...]", "answer this range (a box: one a:b per column, comma-separated); repeatable")
    add_max_memory_option(p)


def _range_options(
    p: argparse.ArgumentParser, metavar: str = "A:B", help_text: str = "answer this range (repeatable)"
) -> None:
    p.add_argument("--query", action="append", default=[], metavar=metavar, help=help_text)
    p.add_argument("--queries", default=None, metavar="FILE", help="answer every range in FILE (one per line)")


def _queries(args: argparse.Namespace) -> list[str]:
    """The ranges of ``--query`` and ``--queries``; at least one (checked before any work: a
    release that answers nothing would spend the budget for nothing)."""
    out = list(args.query)
    if args.queries:
        out += [r for r, _ in read_ranges(args.queries)]
    if not out:
        raise UsageError(
            f"--query: snapshot {args.module} answers range queries and releases nothing else: give at least "
            "one --query A:B or a --queries FILE (one range per line)"
        )
    return out


_HINTS = {
    "ipv4": "this module reads IPv4 dotted quads (or the packets of a capture); check --column and the file",
    "ipv6": "--hierarchy ipv6 reads IPv6 addresses from text, csv or jsonl; for dotted quads or captures use "
    "--hierarchy ipv4:LENGTHS",
    "int": "this module reads integer literals; check --column and the file",
    "path": "this module reads /-paths of exactly the hierarchy's depth; check --hierarchy path:DEPTH",
}


def _depth_of(hierarchy: Any) -> dict[str, Any]:
    """The reader's ``path_depth`` for a path hierarchy (its values have exactly its depth), else nothing."""
    return {"path_depth": hierarchy.h} if hierarchy.kind == "path" else {}


def _read_file(path: Any, hierarchy: Any, **kw: Any) -> SnapshotValues:
    """A whole public file of ``hierarchy``'s values (e.g. InfTDA's domain of possible paths)."""
    return read_snapshot(path, kind=hierarchy.kind, **_depth_of(hierarchy), **kw)


def _read(args: argparse.Namespace, kind: str, *, users_public: bool = False, **kw: Any) -> SnapshotValues:
    """Read the snapshot (standard input and gzip files are spooled to a private temporary file
    first, :func:`~dphhh.connectors.spool.spooled_input`: here, after every check that needs no input);
    print the operational line of unparsable rows (stderr). An input without a readable value is
    released like any other (an error would tell it from the same input with one more value,
    docs/ALGORITHMS.md §0.1) — except where the number of users is public (``users_public``: AHEAD's
    local model, where the aggregator receives one report per user), which refuses an input without
    a user (:class:`NoReadableInput`, exit 1, no count in the message)."""
    progress = _Progress(args.input)
    try:
        with spooled_input(args.input) as path:
            snapshot = read_snapshot(
                path, kind=kind, input_format=args.input_format, columns=args.column, progress=progress, **kw
            )
    finally:
        progress.done()
    line = snapshot.skips.operational_line(f"dphhh snapshot {args.module}")
    if line:  # unparsable records hold no element: the line and its hint are public (§0.1 f)
        print(line, file=sys.stderr)
        print(f"dphhh snapshot {args.module}: hint: {_HINTS[kind]}", file=sys.stderr)
    if users_public and snapshot.n == 0:
        raise NoReadableInput(no_readable_message(args.input, snapshot.skips, _HINTS[kind]))
    return snapshot


def _domain(text: str) -> tuple[int, int]:
    """A ``--domain LO:HI`` of integers within ±2^62 (so that saturated huge values lie outside)."""
    lo, hi = parse_range(text, "--domain")
    if lo < -DOMAIN_LIMIT or hi > DOMAIN_LIMIT:
        raise UsageError(f"--domain: bounds must lie within -{DOMAIN_LIMIT}..{DOMAIN_LIMIT}, got {text!r}")
    return lo, hi


def _envelope(
    args: argparse.Namespace,
    snapshot: SnapshotValues,
    result: dict[str, Any],
    budget: dict[str, Any],
    answers: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    out = {
        "schema": SCHEMA,
        "module": args.module,
        "input": {"path": str(args.input), "format": snapshot.format, "out_of_domain": OUT_OF_DOMAIN[args.module]},
        "params": result.get("params"),
        "guarantees": result.get("guarantee"),
        "budget": budget,
        "randomness": "secure (os.urandom)"
        if args.seed is None
        else f"seeded ({args.seed}): reproducible and NOT private",
        "result": result,
    }
    if answers is not None:
        out["answers"] = answers
    return out


def _drop_outside(values: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """The values inside ``[lo, hi]``: the others are dropped, and not counted (lue's rule)."""
    return values[(values >= lo) & (values <= hi)]


def _clamp(values: np.ndarray, lows: Any, highs: Any) -> np.ndarray:
    """Every value clamped into its column's ``[lo, hi]``, and not counted (ahead's rule)."""
    return np.clip(values, lows, highs)


#: Keys of AHEAD's summary that are, or are computed from, exact user counts.
_USER_COUNT_KEYS = frozenset({"users", "root_theta", "theta", "variance"})


def _without_user_counts(value: Any) -> Any:
    """A copy of an AHEAD summary without :data:`_USER_COUNT_KEYS` (at any depth)."""
    if isinstance(value, dict):
        return {k: _without_user_counts(v) for k, v in value.items() if k not in _USER_COUNT_KEYS}
    if isinstance(value, list):
        return [_without_user_counts(v) for v in value]
    return value


def _fanouts(args: argparse.Namespace) -> int | list[int]:
    if args.fanouts:
        try:
            return [int(f) for f in args.fanouts.split(",")]
        except ValueError:
            raise UsageError(f"--fanouts: expected integers like 16,16,16, got {args.fanouts!r}") from None
    return args.fanout or 16


def _run_lue(args: argparse.Namespace) -> dict[str, Any]:
    from dphhh.privacy.offline.interval_tree import IntervalTree, node_count
    from dphhh.privacy.offline.lue_dptree import (
        EXACT_BLUE_ERROR_MAX_N,
        LueParams,
        Workload,
        lue_dptree,
        lue_memory_bytes,
    )

    lo, hi = _domain(args.domain)
    n = hi - lo + 1
    params = LueParams(epsilon=args.epsilon, budgets=args.budgets, blue=not args.no_blue)
    fanouts = _fanouts(args)
    queries = []
    for text in _queries(args):  # all checked before any work
        a, b = parse_range(text)
        if a < lo or b > hi:
            raise UsageError(f"--query: range {text} is outside the domain {lo}:{hi}")
        queries.append((a, b))
    ranges = []
    if args.workload:
        for text, weight in read_ranges(args.workload, "--workload"):
            a, b = parse_range(text, "--workload")
            if a < lo or b > hi:
                raise UsageError(f"--workload: range {text} is outside the domain {lo}:{hi}")
            ranges.append((a - lo + 1, b - lo + 1, weight))
    limit = parse_max_memory(args.max_memory)
    nodes = node_count(n, fanouts)
    blue_matrices = params.blue and n <= EXACT_BLUE_ERROR_MAX_N
    check_memory(
        lue_memory_bytes(n, fanouts, blue=params.blue, workload_ranges=len(ranges)),
        f"--domain: LUE-DPTree over {lo}:{hi} ({n:,} values, a tree of {nodes:,} nodes)",
        "use a narrower --domain or bucket the values (the tree has a leaf per value)"
        + ("; --no-blue skips BLUE's exact n x n error matrices" if blue_matrices else ""),
        limit,
    )
    tree = IntervalTree.from_fanouts(n, fanouts) if isinstance(fanouts, list) else IntervalTree.complete(n, fanouts)
    workload = Workload.from_ranges(tree, ranges) if ranges else None
    snapshot = _read(args, "int")
    values = _drop_outside(np.asarray(snapshot.values, dtype=np.int64), lo, hi)
    result = lue_dptree(values - lo + 1, tree, params, queries=workload, rng=args.seed)
    answers = [{"range": f"{a}:{b}", "count": float(result.answer(a - lo + 1, b - lo + 1))} for a, b in queries]
    budget = {
        "epsilon": params.epsilon,
        "delta": 0.0,
        "mechanism": "LUE-DPTree (Laplace per tree node)",
        "neighbours": "add or remove one element",
    }
    return _envelope(args, snapshot, result.to_dict(), budget, answers)


def _inftda_widest(hierarchy: Any, domain: Any, level: int) -> int:
    """The widest public child domain of a level-``level − 1`` prefix."""
    if domain is not None:
        return int(domain.max_children(level))
    lengths = (0, *hierarchy.prefix_lengths)
    return 2 ** (lengths[level] - lengths[level - 1])


_INFTDA_HINT = (
    "use a --hierarchy with smaller steps between prefix lengths (every kept prefix noises each of its "
    "2^step children; e.g. ipv4:8,16,24,32)"
)


def _run_inftda(args: argparse.Namespace) -> dict[str, Any]:
    from dphhh.privacy.offline.inftda import (
        InfTDAParams,
        PathDomain,
        inftda,
        inftda_level_memory_bytes,
        inftda_needs_domain,
    )
    from dphhh.privacy.params import check_open_unit
    from dphhh.sketches.specs import parse_hierarchy

    hierarchy = parse_hierarchy(args.hierarchy)
    params = InfTDAParams(
        epsilon=args.epsilon, delta=args.delta, rho=args.rho, neighbours=args.neighbours, contribution=args.contribution
    )
    beta = check_open_unit("InfTDA", "beta", args.beta)
    domain = None
    if inftda_needs_domain(hierarchy, bool(args.domain)):  # the mechanism's rule, before any data is read
        domain = PathDomain.from_paths(_read_file(args.domain, hierarchy, input_format="text").values)
    limit = parse_max_memory(args.max_memory)

    def check_level(level: int, draws: int) -> None:
        widest = _inftda_widest(hierarchy, domain, level)
        check_memory(
            inftda_level_memory_bytes(draws, widest),
            f"--hierarchy: InfTDA level {level}/{hierarchy.h} noises {draws:,} child counts ({widest:,} per prefix)",
            _INFTDA_HINT,
            limit,
        )

    check_level(1, _inftda_widest(hierarchy, domain, 1))  # the root's children: known before reading
    snapshot = _read(args, hierarchy.kind, **_depth_of(hierarchy))
    values = snapshot.values
    if domain is not None:  # out-of-domain paths are dropped, not counted
        values = [v for v in values if domain.contains(v)]

    def level_progress(level: int, h: int, draws: int) -> None:
        # draws follows from the released previous level and the public domain: public
        check_level(level, draws)
        print(
            f"dphhh snapshot inftda: level {level}/{h}: noising {draws:,} child counts ...", file=sys.stderr, flush=True
        )

    result = inftda(values, hierarchy, params, domain=domain, rng=args.seed, progress=level_progress)
    g = result.guarantee()
    budget = {
        "epsilon": g.get("epsilon"),
        "delta": g.get("delta"),
        "rho": g.get("rho"),
        "mechanism": "InfTDA (discrete Gaussian per level, TopDown with IntOPT)",
        "neighbours": g.get("neighbours"),
    }
    return _envelope(args, snapshot, result.to_dict(beta=beta), budget)


def _run_hhh(args: argparse.Namespace) -> dict[str, Any]:
    from dphhh.privacy.offline.hhh_algorithm1 import algorithm1_hhh, algorithm1_min_tau
    from dphhh.privacy.offline.hhh_baseline import stability_histogram_hhh
    from dphhh.privacy.offline.hhh_offline import OfflineHHHParams
    from dphhh.privacy.offline.hhh_planner import plan_offline_hhh
    from dphhh.sketches.specs import parse_hierarchy

    hierarchy = parse_hierarchy(args.hierarchy)
    if hierarchy.kind not in ("ipv4", "ipv6", "path"):
        raise UsageError(f"--hierarchy: snapshot hhh reads IPv4 or IPv6 addresses or paths, not {hierarchy.kind}")
    params = OfflineHHHParams(epsilon=args.epsilon, delta=args.delta, tau=args.tau, beta=args.beta)
    choice, plan = args.algorithm, None
    if choice == "auto":
        min_tau = algorithm1_min_tau(hierarchy.h, args.epsilon, args.delta, args.beta)
        if args.tau < min_tau:
            choice = "baseline"
            reason = (
                f"Algorithm 1 refuses tau below its guard ({min_tau:.0f} for h={hierarchy.h}, "
                f"epsilon={args.epsilon:g}, delta={args.delta:g}): the stability-histogram baseline runs"
            )
        elif args.expected_n is None:
            raise UsageError(
                "--expected-n: the planner needs a public estimate of the number of records when "
                "tau allows Algorithm 1; give --expected-n N or choose --algorithm"
            )
        else:
            plan = plan_offline_hhh(hierarchy.h, args.tau, args.epsilon, args.delta, args.expected_n, args.beta)
            choice, reason = plan.choice, plan.reason
        print(f"dphhh snapshot hhh: planner: {reason}", file=sys.stderr)
    snapshot = _read(args, hierarchy.kind, **_depth_of(hierarchy))
    run = algorithm1_hhh if choice == "algorithm1" else stability_histogram_hhh
    base, attempt = hierarchy, 0
    while True:  # hashed keys under a secret key; a chance collision: re-key and start over
        if base.hashed_keys:
            from dphhh.sketches.keyed import KeySecret

            hierarchy = base.keyed(
                KeySecret.generate() if args.seed is None else KeySecret.from_seed(args.seed + attempt)
            )
        result = run(snapshot.values, hierarchy, params, rng=args.seed)
        if not hierarchy.collisions or attempt + 1 == 8:  # (8 re-keyings: only a lowered test key width)
            break
        attempt += 1
    out = result.to_dict()
    if plan is not None:
        out["plan"] = plan.to_dict()
    budget = {
        "epsilon": params.epsilon,
        "delta": params.delta,
        "mechanism": out.get("algorithm", choice),
        "neighbours": "add or remove one element",
    }
    return _envelope(args, snapshot, out, budget)


def _run_ahead(args: argparse.Namespace) -> dict[str, Any]:
    from dphhh.privacy.offline.ahead import AheadParams, ahead_lle, ahead_memory_bytes, ahead_nd

    params = AheadParams(epsilon=args.epsilon, branching=args.branching, oracle=args.oracle)
    dims = max(len(args.column), 1)
    if len(args.domain) != dims:
        raise UsageError(f"--domain: give one LO:HI per column ({dims} expected, {len(args.domain)} given)")
    bounds = [_domain(d) for d in args.domain]
    for (lo, hi), text in zip(bounds, args.domain):
        if hi <= lo:
            raise UsageError(f"--domain: AHEAD needs at least two values per column, got {text!r}")
    boxes = []
    for text in _queries(args):  # all checked before any work
        parts = [parse_range(part) for part in text.split(",")]
        if len(parts) != dims:
            raise UsageError(f"--query: {text!r} needs one a:b per column ({dims})")
        for (a, b), (lo, hi) in zip(parts, bounds):
            if a < lo or b > hi:
                raise UsageError(f"--query: range {a}:{b} is outside the domain {lo}:{hi}")
        boxes.append((text, [(a - lo, b - lo) for (a, b), (lo, _) in zip(parts, bounds)]))
    sizes = [hi - lo + 1 for lo, hi in bounds]
    limit = parse_max_memory(args.max_memory)
    b = params.branching
    height = 0
    while b**height < max(sizes):
        height += 1
    side = b**height
    if dims > 2:
        what = (
            f"--domain: AHEAD-LLE over {dims * (dims - 1) // 2} pairs of columns, each pair padded to up to "
            f"{side:,} x {side:,}"
        )
    else:
        what = f"--domain: AHEAD over {' x '.join(f'{side:,}' for _ in sizes)}"
    check_memory(
        ahead_memory_bytes(sizes, b),
        what + f" (every column is padded to {b}^{height}, the largest --domain rounded up to a power of --branching)",
        "use a coarser --domain (bucket the values, e.g. port // 64) or fewer columns",
        limit,
    )
    lows, highs = np.array(bounds).T
    if dims == 1:
        lows, highs = lows[0], highs[0]
    snapshot = _read(args, "int", users_public=True)
    values = _clamp(np.asarray(snapshot.values, dtype=np.int64), lows, highs)
    shifted = values - lows
    estimator = (
        ahead_lle(shifted, sizes, params, rng=args.seed)
        if dims > 2
        else ahead_nd(shifted, sizes, params, rng=args.seed)
    )
    answers = []
    for text, local in boxes:
        fraction = estimator.answer(*local)  # 1-D too: answer((lo, hi)) is answer(lo, hi)
        answers.append({"range": text, "fraction": float(fraction)})
    budget = {
        "epsilon": params.epsilon,
        "delta": 0.0,
        "mechanism": "AHEAD (local DP frequency oracles)",
        "neighbours": "local DP: any two values of one user (each record is one user's single report)",
    }
    result = estimator.to_dict()
    if "summary" in result:
        result["summary"] = _without_user_counts(result["summary"])
    return _envelope(args, snapshot, result, budget, answers)


RUNNERS: dict[str, Callable[[argparse.Namespace], dict[str, Any]]] = {
    "lue": _run_lue,
    "inftda": _run_inftda,
    "hhh": _run_hhh,
    "ahead": _run_ahead,
}


def run(args: argparse.Namespace, out=None) -> int:
    """Run ``dphhh snapshot MODULE``; prints the document (``--format``); returns the exit status."""
    doc = RUNNERS[args.module](args)  # each runner checks what needs no input, then reads it (_read)
    if args.seed is not None:
        print(
            f"dphhh snapshot {args.module}: warning: --seed makes the noise reproducible: NOT private", file=sys.stderr
        )
    print(render(doc, output_format(args)), file=out or sys.stdout)
    print(f"dphhh snapshot {args.module}: done", file=sys.stderr)  # no running time: it follows the input's size
    return 0
