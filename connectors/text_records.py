"""How a text line becomes a value of each hierarchy kind (the batch commands' text files).

One :class:`TextRecords` per hierarchy kind, registered by the kind's name
(:func:`register_text_records`): its line parser, whether the kind also reads the IPv4 sources of
packet captures, and the static hint shown when a file held no readable record. The batch reader
(:func:`dphhh.stream.batch.iter_values`) asks :func:`text_records` for the hierarchy's kind; a new
kind registers its own next to its hierarchy class.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dphhh.sketches.errors import UsageError
from dphhh.sketches.hierarchy import Hierarchy

from .skips import SkipCounter
from .snapshot import parse_ipv4_pair_records, parse_ipv4_records, parse_ipv6_records
from .text import parse_paths

__all__ = ["TEXT_RECORDS", "TextRecords", "register_text_records", "text_records"]


@dataclass(frozen=True)
class TextRecords:
    """The text records of one hierarchy kind: ``parse(hierarchy, lines, skips)`` → a batch of
    values (bad lines counted into ``skips`` by reason, never shown); ``captures``: the kind also
    reads a capture's IPv4 source addresses; ``hint(hierarchy)``: a static, data-independent hint
    for an input without a readable record."""

    kind: str
    parse: Callable[[Hierarchy, list[str], SkipCounter], Any]
    hint: Callable[[Hierarchy], str]
    captures: bool = False


#: The registered text records by hierarchy kind.
TEXT_RECORDS: dict[str, TextRecords] = {}


def register_text_records(records: TextRecords) -> TextRecords:
    """Register ``records`` for its kind (once)."""
    if TEXT_RECORDS.get(records.kind, records) is not records:
        raise ValueError(f"register_text_records: kind {records.kind!r} is already registered")
    TEXT_RECORDS[records.kind] = records
    return records


def text_records(hierarchy: Hierarchy) -> TextRecords:
    """The text records of ``hierarchy``'s kind (``UsageError`` when no text format reads it)."""
    try:
        return TEXT_RECORDS[hierarchy.kind]
    except KeyError:
        raise UsageError(f"input: no text format reads values of a {hierarchy.kind} hierarchy") from None


def _paths(hierarchy: Hierarchy, lines: list[str], skips: SkipCounter) -> list[str]:
    depth = hierarchy.h
    paths = parse_paths(lines, skips)
    good = [p for p in paths if p.count("/") + 1 == depth]
    skips.add("bad_path_depth", len(paths) - len(good))
    return good


for _records in (
    TextRecords(
        "ipv4",
        lambda h, lines, skips: parse_ipv4_records(lines, skips),
        lambda h: (
            "--hierarchy ipv4 reads dotted quads and IPv4 packets: for IPv6 addresses use "
            "--hierarchy ipv6:LENGTHS, for paths --hierarchy path:DEPTH"
        ),
        captures=True,
    ),
    TextRecords(
        "ipv6",
        lambda h, lines, skips: parse_ipv6_records(lines, skips),
        lambda h: (
            "--hierarchy ipv6 reads IPv6 addresses from a text file: for dotted quads or captures use "
            "--hierarchy ipv4:LENGTHS"
        ),
    ),
    TextRecords(
        "path",
        _paths,
        lambda h: f"--hierarchy {h.spec()} reads paths of exactly {h.h} components (a/b/...): check DEPTH",
    ),
    TextRecords(
        "pair",
        lambda h, lines, skips: parse_ipv4_pair_records(lines, skips),
        lambda h: (
            f"--hierarchy {h.spec()} reads IPv4 (source, destination) pairs: the packets of a capture, "
            "lines 'A B' (or A,B / A -> B) of two dotted quads, or flow records (--input-format flow-json)"
        ),  # a capture's (source, destination) pairs and flow records: dphhh.stream.batch.iter_pairs
    ),
):
    register_text_records(_records)
