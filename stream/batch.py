"""The batch job: one window = the whole input file (``dphhh hhh`` and ``dphhh exact``).

Reads a file (text, pcap, pcapng), turns its records into values of the chosen hierarchy,
sketches them (:class:`~dphhh.sketches.level_sketches.LevelSketches`) and releases one private report
(:func:`~dphhh.privacy.window.release_window`).

Skipped records are counted by reason into a :class:`~dphhh.connectors.skips.SkipCounter` (never their
content) and classified as in :mod:`dphhh.connectors.skips`:

* *unparsable* records (``bad_ipv4``, ``invalid_utf8``, ``truncated`` packets, ...) hold no
  element; the caller may print their count on stderr as an operational line;
* *excluded* records are valid records of another kind — an IPv6 address or packet in an IPv4
  run (``wrong_family``, ``not_ipv4``), a dotted quad in an IPv6 run (``wrong_family``), a path of
  another depth (``bad_path_depth``, ``bad_path_too_deep``) — and their count is never shown.

The private report carries no count of records at all (docs/ALGORITHMS.md §0.1 f): its ``diagnostics`` is
empty. An input without a single element gets its private report like any other (an error would
tell it from the same input with one element); only the non-private :func:`exact_report` raises
:class:`NoReadableInput` (whose message names no count).

Weighted records (:class:`Weighting`, docs/ALGORITHMS.md §2 "Weighted elements"): flow-JSON files
(:mod:`dphhh.connectors.flow_json`) weighted by their ``packets`` or ``bytes``, or captures weighted by
each packet's IPv4 length (``bytes``). Each weight is clipped to the public cap W and inserted as
that many unit elements; the report's guarantee is then per record, by group privacy over W.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dphhh.connectors import pcap
from dphhh.connectors.files import open_input
from dphhh.connectors.flow_json import FlowJsonDecoder, decode_pairs, iter_flow_file
from dphhh.connectors.skips import NoReadableInput, SkipCounter, no_readable_message
from dphhh.connectors.text import iter_text_lines
from dphhh.connectors.text_records import text_records
from dphhh.privacy.params import HHHParams, PrivacyBudget
from dphhh.privacy.randomness import as_source
from dphhh.privacy.report import ranked
from dphhh.privacy.unit import PrivacyUnit
from dphhh.privacy.window import release_window
from dphhh.sketches.errors import OperationalError, UsageError
from dphhh.sketches.exact import exact_hhh
from dphhh.sketches.exact2d import exact_hhh_2d
from dphhh.sketches.hierarchy import Hierarchy
from dphhh.sketches.keyed import KeySecret
from dphhh.sketches.level_sketches import LevelSketches
from dphhh.sketches.misra_gries import clip_weights
from dphhh.sketches.pairs import PairHierarchy

__all__ = [
    "NoReadableInput",
    "Weighting",
    "WEIGHTS",
    "iter_values",
    "iter_records",
    "read_all_values",
    "batch_report",
    "exact_report",
    "no_readable_hint",
]

#: What one record counts: ``records`` (1 each), ``packets`` (a flow's packets; a captured packet
#: is one), ``bytes`` (a flow's bytes; a captured packet's IPv4 length).
WEIGHTS = ("records", "packets", "bytes")


@dataclass(frozen=True)
class Weighting:
    """How records are weighted (``--weight``, ``--weight-cap``, ``--flow-schema``, ``--flow-key``).

    ``cap`` is W, the public cap on one record's weight; required whenever a record can weigh
    more than 1. Validated against the input format by :meth:`check`."""

    weight: str = "records"
    cap: int | None = None
    flow_schema: str = "pmacct"
    flow_key: str = "src"

    def weighted(self, input_format: str) -> bool:
        """Whether records of ``input_format`` carry weights > 1 under this weighting."""
        if input_format == "flow-json":
            return self.weight in ("packets", "bytes")
        return self.weight == "bytes"

    def check(self, input_format: str, is_capture: bool) -> None:
        """Refuse combinations that cannot be read, naming the options."""
        if self.weight not in WEIGHTS:
            raise UsageError(f"--weight must be one of {', '.join(WEIGHTS)}, got {self.weight!r}")
        if input_format != "flow-json" and not is_capture and self.weight != "records":
            raise UsageError(
                f"--weight {self.weight} needs flow records (--input-format flow-json) or a capture; "
                "a text file has one element per line (--weight records)"
            )
        if self.cap is not None and (isinstance(self.cap, bool) or not isinstance(self.cap, int) or self.cap < 1):
            raise UsageError(f"--weight-cap must be an integer >= 1, got {self.cap!r}")
        if self.weighted(input_format) and self.cap is None:
            raise UsageError(
                f"--weight {self.weight} needs --weight-cap W: each record's weight is clipped to W, "
                "and the guarantee covers one record by group privacy over W unit elements "
                "(epsilon is divided by W; see dphhh plan --weight-cap)"
            )

    def unit(self, input_format: str) -> PrivacyUnit:
        """The privacy unit of a batch run: one record (of at most W unit elements when weighted)."""
        if not self.weighted(input_format) or self.cap == 1:
            return PrivacyUnit()
        return PrivacyUnit(weight_cap=int(self.cap or 1), weight=self.weight)


def no_readable_hint(hierarchy: Hierarchy) -> str:
    """A static (data-independent) hint for an input without a readable record of ``hierarchy``."""
    return text_records(hierarchy).hint(hierarchy)


def iter_values(path: str | Path, input_format: str, hierarchy: Hierarchy, skips: SkipCounter) -> Iterator[Any]:
    """Batches of hierarchy values read from ``path`` (a text file's lines as the kind's
    :class:`~dphhh.connectors.text_records.TextRecords` parse them; a capture's IPv4 sources for a
    kind that reads captures); skipped records are counted into ``skips``."""
    source = open_input(path, input_format)
    records = text_records(hierarchy)
    if records.captures and source.is_capture:
        yield from source.iter_ipv4(skips)
        return
    for lines in source.iter_lines(skips):
        values = records.parse(hierarchy, lines, skips)
        if hierarchy.count(values):
            yield values


def iter_pairs(
    path: str | Path, input_format: str, hierarchy: PairHierarchy, skips: SkipCounter, weighting: Weighting
) -> Iterator[tuple[Any, np.ndarray | None]]:
    """Batches ``((first, second), weights)`` of (source, destination) pairs for a pair hierarchy
    (docs/ALGORITHMS.md §11): a capture's packets (source and destination), text lines ``A B``, or
    flow records (``src`` and ``dst``, weighted as :class:`Weighting` says). IPv4 × IPv4 only."""
    if not (hierarchy.first.kind == hierarchy.second.kind == "ipv4"):
        raise UsageError(
            f"--hierarchy {hierarchy.spec()}: files are read as IPv4 (source, destination) pairs; "
            "use ipv4:LENGTHS x ipv4:LENGTHS"
        )
    source = open_input(path, input_format)
    weighting.check(source.format, source.is_capture)
    weighted = weighting.weighted(source.format)
    cap = int(weighting.cap) if weighting.cap is not None else 1
    if source.is_capture:
        if weighted:
            raise UsageError("--weight bytes on a capture reads one address per packet: pair hierarchies count packets")
        for src, dst in pcap.iter_capture_pairs(source.path, skips):
            yield (src, dst), None
        return
    if source.format == "flow-json":
        by_src, by_dst = (
            FlowJsonDecoder(
                weighting.flow_schema, key=key, weight=weighting.weight if weighted else "records", family="ipv4"
            )
            for key in ("src", "dst")
        )
        for lines in iter_text_lines(source.path, skips):
            pairs = decode_pairs(by_src, by_dst, lines)
            for reason in pairs.reasons:
                if reason is not None:
                    skips.add(reason)
            if pairs.index.size:
                yield (pairs.sources, pairs.destinations), (clip_weights(pairs.weights, cap) if weighted else None)
        return
    records = text_records(hierarchy)  # lines "A B" of two dotted quads
    for lines in source.iter_lines(skips):
        firsts, seconds = records.parse(hierarchy, lines, skips)
        if firsts.size:
            yield (firsts, seconds), None


def iter_records(
    path: str | Path, input_format: str, hierarchy: Hierarchy, skips: SkipCounter, weighting: Weighting | None = None
) -> Iterator[tuple[Any, np.ndarray | None]]:
    """Batches ``(values, weights)`` of ``path``: ``weights`` (int64, clipped to the cap) for
    weighted records, else ``None``. Skipped records are counted into ``skips``."""
    weighting = weighting or Weighting()
    if isinstance(hierarchy, PairHierarchy):
        yield from iter_pairs(path, input_format, hierarchy, skips, weighting)
        return
    source = open_input(path, input_format)
    weighting.check(source.format, source.is_capture)
    weighted = weighting.weighted(source.format)
    cap = int(weighting.cap) if weighting.cap is not None else 1  # W; check() refused weighted records without one
    family = hierarchy.address_family
    if source.format == "flow-json":
        if family is None:
            raise UsageError(f"--input-format flow-json needs an ipv4 or ipv6 hierarchy, got {hierarchy.spec()}")
        decoder = FlowJsonDecoder(
            weighting.flow_schema,
            key=weighting.flow_key,
            weight=weighting.weight if weighted else "records",
            family=family,
        )
        for batch in iter_flow_file(source.path, decoder, skips):
            cols = getattr(batch, family)  # the columns of the hierarchy's address family
            if len(cols):
                yield cols.keys, (clip_weights(cols.weights, cap) if weighted else None)
        return
    if weighted:  # a capture weighted by each packet's IPv4 length
        if family != "ipv4":
            raise UsageError("--weight bytes on a capture needs an ipv4 hierarchy (packets give IPv4 sources)")
        for src, lengths in pcap.iter_capture_sources_with_lengths(source.path, skips):
            yield src, clip_weights(np.maximum(lengths, 1), cap)
        return
    for values in iter_values(path, input_format, hierarchy, skips):
        yield values, None


def read_all_values(path: str | Path, input_format: str, hierarchy: Hierarchy, skips: SkipCounter) -> Any:
    """All values of the file at once (for the exact reference)."""
    return hierarchy.concat(list(iter_values(path, input_format, hierarchy, skips)))


def read_all_records(
    path: str | Path, input_format: str, hierarchy: Hierarchy, skips: SkipCounter, weighting: Weighting | None = None
) -> tuple[Any, np.ndarray | None]:
    """All ``(values, weights)`` of the file at once (``weights`` ``None`` when unweighted)."""
    batches = list(iter_records(path, input_format, hierarchy, skips, weighting))
    values = hierarchy.concat([b[0] for b in batches])
    if not batches or batches[0][1] is None:
        return values, None
    return values, np.concatenate([b[1] for b in batches])


#: Re-keyings of a whole-input release after chance key collisions (docs/ALGORITHMS.md §1 "Keys");
#: at 63 key bits a single re-keying is already ~n²/2⁶⁴ rare, eight never happen.
REKEY_ATTEMPTS = 8


def batch_report(
    path: str | Path,
    *,
    input_format: str,
    hierarchy: Hierarchy,
    params: HHHParams,
    seed: int | None = None,
    skips: SkipCounter | None = None,
    weighting: Weighting | None = None,
    budget: PrivacyBudget | None = None,
    tau_share: float | None = None,
    display_path: str | Path | None = None,
) -> dict[str, Any]:
    """Sketch the whole file and release one private report (``dphhh.report/2``).

    Skipped records are counted into ``skips`` when given (so that the caller can print the
    operational line of unparsable records); the report itself holds no count of records. A file
    without a single element of ``hierarchy`` gets its report too (nothing observable may tell it
    from one with an element, docs/ALGORITHMS.md §0.1). With a
    weighted ``weighting``, ``params`` must be the group-privacy calibration of ``budget`` over
    the weight cap (:meth:`Weighting.unit`), which the report's budget statement checks. ``tau_share``: τ
    is that share of the noisy window size (:func:`dphhh.privacy.window.assemble_report`).
    ``display_path``: the name errors give the input (``-`` or the ``.gz`` file a spooled copy
    was made of).
    """
    skips = SkipCounter() if skips is None else skips
    base, attempt = hierarchy, 0
    while True:
        if base.hashed_keys:  # a secret hash key for this release (docs/ALGORITHMS.md §1 "Keys")
            secret = KeySecret.generate() if seed is None else KeySecret.from_seed(seed + attempt)
            hierarchy = base.keyed(secret)
        sketches = LevelSketches(hierarchy, params.counters, params.partitions)
        skips_here = SkipCounter()
        for values, weights in iter_records(path, input_format, hierarchy, skips_here, weighting):
            sketches.update(values, weights)
        if not hierarchy.collisions:
            break
        # two prefixes share a key (chance: ~n²/2⁶⁴ for n prefixes): the whole input is at hand, so
        # re-key and start over — the release is then the collision-free one, whatever the data
        attempt += 1
        if attempt == REKEY_ATTEMPTS:  # (only a lowered test key width gets here)
            raise OperationalError(
                f"batch: no collision-free hash key after {REKEY_ATTEMPTS} attempts (sketches.keyed.KEY_BITS lowered?)"
            )
    skips.merge(skips_here)
    # an input without a single element is released like any other (empty sketches, the same
    # report): failing on it would tell X' from X' + e by the exit status (docs/ALGORITHMS.md §0.1)
    unit = (weighting or Weighting()).unit(open_input(path, input_format).format)
    return release_window(
        sketches,
        params,
        window={"kind": "batch", "start": None, "end": None},
        rng=as_source(seed),
        unit=unit if unit.group_size > 1 else None,
        budget=budget if unit.group_size > 1 else None,
        tau_share=tau_share,
    )


def exact_report(
    path: str | Path,
    *,
    input_format: str,
    hierarchy: Hierarchy,
    tau: float,
    skips: SkipCounter | None = None,
    weighting: Weighting | None = None,
    tau_share: float | None = None,
    display_path: str | Path | None = None,
) -> dict[str, Any]:
    """The exact, NON-PRIVATE hierarchical heavy hitters of the file (for evaluation).

    This output is exact by design (``n`` and every count are the input's own); it is labelled
    NON-PRIVATE and carries every skip count, excluded reasons included, under
    ``diagnostics.skipped``. Raises :class:`NoReadableInput` when the file holds no element.
    ``tau_share``: τ is that share of the exact n.
    """
    skips = SkipCounter() if skips is None else skips
    values, weights = read_all_records(path, input_format, hierarchy, skips, weighting)
    n = hierarchy.count(values) if weights is None else int(weights.sum())
    if hierarchy.count(values) == 0:
        raise NoReadableInput(no_readable_message(display_path or path, skips, no_readable_hint(hierarchy)))
    if tau_share is not None:
        tau = tau_share * n
    return {
        "schema": "dphhh.exact/1",
        "private": False,
        "warning": "NON-PRIVATE: exact counts of the input, for evaluation on your own data only; do not publish",
        "params": {
            "tau": tau,
            **({} if tau_share is None else {"tau_share": tau_share}),
            "hierarchy": hierarchy.spec(),
            "h": hierarchy.h,
            **(
                {}
                if weights is None
                else {"weight": (weighting or Weighting()).weight, "weight_cap": (weighting or Weighting()).cap}
            ),
        },
        "n": n,
        "hhh": ranked(
            {
                "prefix": x.prefix,
                "level": x.level,
                "residual": x.residual,
                "count": x.count,
                **({"node": list(x.node)} if hasattr(x, "node") else {}),
            }
            for x in (
                exact_hhh_2d(hierarchy, values, tau, weights)
                if isinstance(hierarchy, PairHierarchy)
                else exact_hhh(hierarchy, values, tau, weights)
            )
        ),
        "diagnostics": {"skipped": skips.as_dict()},
    }
