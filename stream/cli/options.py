"""Option groups shared by several ``dphhh`` commands, and their conversion to library values.

One vocabulary across commands (docs/reference/cli.md "Vocabulary"): ``--counters`` (κ, counters per sketch),
``--partitions`` (key partitions per level; Kafka partitions are ``--topic-partitions``),
``--tau`` (an absolute count, or a share of the window such as ``1%``), ``--format
text|json|csv`` (:mod:`dphhh.stream.cli.output`).
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Any

from dphhh.connectors.files import INPUT_FORMATS
from dphhh.connectors.flow_json import KEYS as FLOW_KEYS
from dphhh.connectors.flow_json import SCHEMAS as FLOW_SCHEMAS
from dphhh.privacy.params import CALIBRATIONS, DEFAULT_CALIBRATION, MODES, VARIANTS, HHHParams, PrivacyBudget
from dphhh.privacy.unit import PrivacyUnit
from dphhh.sketches.errors import UsageError

from ..batch import WEIGHTS, Weighting

__all__ = [
    "PRIVACY_DEFAULTS",
    "DEMO_DEFAULTS",
    "Tau",
    "parse_tau",
    "input_options",
    "privacy_options",
    "kafka_client_options",
    "kafka_options",
    "weighting",
    "params",
]

HIERARCHY_HELP = "ipv4:LENGTHS, ipv6:LENGTHS or path:DEPTH (default ipv4:8,16,24,32)"
TAU_HELP = (
    "HHH threshold: an absolute count (e.g. 1000, 1,000 or 1k) or a share of the window's noisy size (e.g. 1%%, "
    "0.5%%); a share costs no budget: it is computed from the released size"
)


def input_options(p: argparse.ArgumentParser) -> None:
    """``--input`` and how its records are read (batch commands)."""
    p.add_argument(
        "--input",
        required=True,
        help="input file: text (one record per line), pcap, pcapng, or JSON lines of flow records; "
        "'-' reads standard input; gzip files (.gz) are decompressed",
    )
    p.add_argument(
        "--input-format",
        default="auto",
        choices=INPUT_FORMATS,
        help="default: detect from magic bytes (flow-json must be given)",
    )
    p.add_argument("--hierarchy", default="ipv4:8,16,24,32", help=HIERARCHY_HELP)
    p.add_argument(
        "--weight",
        default="records",
        choices=WEIGHTS,
        help="what a record counts: records (1 each, default), packets (a flow's packets), bytes (a "
        "flow's bytes, or a captured packet's IPv4 length)",
    )
    p.add_argument(
        "--weight-cap",
        type=whole_count,
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


def weighting(args: argparse.Namespace) -> Weighting:
    """The :class:`~dphhh.stream.batch.Weighting` of the input options (unweighted without them)."""
    if not hasattr(args, "weight"):
        return Weighting()
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
DEMO_DEFAULTS = {"epsilon": 1.0, "delta": 1e-6, "tau": "1000", **PRIVACY_DEFAULTS}


class Tau:
    """A ``--tau`` value: an absolute count (``share is None``) or a share 0 < φ < 1 of the window."""

    __slots__ = ("count", "share", "text")

    def __init__(self, count: float | None, share: float | None, text: str) -> None:
        self.count, self.share, self.text = count, share, text

    def absolute(self, n: float) -> float:
        """The count this threshold means in a window of (noisy or public) size ``n``."""
        return self.count if self.count is not None else (self.share or 0.0) * max(float(n), 1.0)

    def needs_absolute(self, where: str) -> float:
        """The absolute count, or a usage error for commands with no window size to take a share of."""
        if self.count is None:
            raise UsageError(f"--tau: {where} needs an absolute count (e.g. --tau 1000), not a share ({self.text})")
        return self.count

    def __repr__(self) -> str:
        return f"Tau({self.text!r})"


_PERCENT = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*%\s*")
#: a count as people write one: ``1000``, ``1,000`` (groups of three), ``2.5k``, ``1M``, ``1e6``
#: a number as people write one (the count before any unit): ``1000``, ``1,000``, ``2.5``, ``1e6``
NUMBER = r"(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]*\.?[0-9]+)(?:[eE][+-]?[0-9]+)?"
_COUNT = re.compile(rf"\s*({NUMBER})\s*([kKmMgG]?)\s*")
_COUNT_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}


def parse_count(text: str) -> float:
    """A count as people write one — ``1000``, ``1,000``, ``2.5k``, ``1M``, ``1e6`` (``k`` = 10³, ``M`` = 10⁶,
    ``G`` = 10⁹) — as a float; ``ValueError`` for anything else (``1,5`` is not a count: its comma
    would be a decimal point in half the world)."""
    m = _COUNT.fullmatch(str(text))
    if not m:
        raise ValueError(f"not a count: {text!r}")
    return float(m.group(1).replace(",", "")) * _COUNT_SUFFIXES[m.group(2).lower()]


def whole_count(text: str) -> int:
    """A whole count written as :func:`parse_count` reads one (``1024``, ``1k``, ``4,096``): the argparse
    type of ``--counters``, ``--weight-cap`` and ``--unit-cap``; a fractional count is refused."""
    try:
        value = parse_count(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole count (e.g. 1024, 1,500 or 2k), got {text!r}") from None
    if value != int(value):
        raise argparse.ArgumentTypeError(f"expected a whole count, got {text!r}")
    return int(value)


def positive_count(text: str) -> int:
    """A whole count >= 1 (:func:`whole_count`): the argparse type of ``--top``."""
    value = whole_count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole count >= 1, got {text!r}")
    return value


def parse_tau(text: str) -> Tau:
    """``"1000"`` (or ``"1,000"``, ``"1k"``: :func:`parse_count`) → an absolute count; ``"1%"`` → a share
    0.01 (argparse type of ``--tau``)."""
    m = _PERCENT.fullmatch(str(text))
    if m:
        share = float(m.group(1)) / 100
        if not 0 < share < 1:
            raise argparse.ArgumentTypeError(f"a share must lie strictly between 0% and 100%, got {text!r}")
        return Tau(None, share, str(text).strip())
    try:
        count = parse_count(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a count (e.g. 1000, 1,000 or 1k) or a share (e.g. 1%), got {text!r}"
        ) from None
    if not math.isfinite(count) or count <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
    return Tau(count, None, str(text).strip())


def privacy_options(p: argparse.ArgumentParser, *, demo: bool = False) -> None:
    """The window budget and release settings (``hhh``, ``demo``)."""

    def default(name: str) -> Any:
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
    p.add_argument("--tau", type=parse_tau, required=not demo, default=default("tau"), help=TAU_HELP)
    p.add_argument(
        "--counters", type=whole_count, default=default("counters"), help="κ, counters per sketch (default 1024)"
    )
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


def params(args: argparse.Namespace, unit: PrivacyUnit | None = None) -> HHHParams:
    """The event-level parameters; with a weighted ``unit``, its group-privacy calibration of
    (--epsilon, --delta). A share ``--tau`` is resolved later, against the noisy window size (the
    parameters carry a placeholder of 1 until then)."""
    budget = PrivacyBudget(args.epsilon, args.delta) if 0 < args.delta < 1 else None
    eps, delta = args.epsilon, args.delta
    if unit is not None and budget is not None:
        event = unit.event_budget(budget)
        eps, delta = event.epsilon, event.delta
    tau: Tau = args.tau
    return HHHParams(
        epsilon=eps,
        delta=delta,
        tau=tau.count if tau.count is not None else 1.0,
        beta=args.beta,
        counters=args.counters,
        partitions=args.partitions,
        variant=args.variant,
        mode=args.mode,
        calibration=args.calibration,
    )


def kafka_client_options(p: argparse.ArgumentParser) -> None:
    """``--bootstrap`` and ``--config`` of the Kafka client commands."""
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
    from ..config import load_config

    options = load_config(args.config).kafka_client_options() if args.config else {}
    options["bootstrap.servers"] = args.bootstrap or options.get("bootstrap.servers") or "127.0.0.1:9092"
    return options
