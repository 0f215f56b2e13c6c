"""Snapshot inputs of the offline modules (``dphhh snapshot …``): files read whole into arrays.

Formats (``input_format``):

* ``text``: one record per line (``#`` comments and blank lines ignored, :mod:`dphhh.connectors.text`);
* ``pcap`` / ``pcapng``: the IPv4 source address of every packet (kind ``ipv4`` only);
* ``csv``: comma-separated with a header row; ``columns`` names the column(s) to read;
* ``jsonl``: one JSON object per line; ``columns`` names the field(s) to read;
* ``auto`` (default): ``.csv`` → csv, ``.jsonl``/``.ndjson`` → jsonl, else by magic bytes
  (pcap, pcapng, or text).

Kinds of value (``kind``):

* ``ipv4``: dotted quads → uint32 array;
* ``ipv6``: IPv6 addresses (text, csv or jsonl; captures give IPv4 only) → a ``(hi, lo)`` pair of
  uint64 arrays (:func:`parse_ipv6_records`: a dotted quad is ``wrong_family``, excluded);
* ``int``: integer literals (ASCII digits, optional sign; e.g. ports, sizes) → int64 array, or an
  (n, d) int64 array with d columns. An integer too large for 64 bits is a valid value, kept as
  ±:data:`INT_SATURATED` (which lies outside every domain a snapshot command accepts), so that
  the command's out-of-domain rule applies to it like to any other value outside the domain;
* ``path``: ``/``-paths of exactly ``path_depth`` components → list of normalised strings.

Skipped rows are counted by reason in a :class:`~dphhh.connectors.skips.SkipCounter` (never their
content), classified as in :mod:`dphhh.connectors.skips`: *unparsable* rows (``bad_ipv4``, ``bad_int``,
``missing_column``, ``bad_json``, ``bad_csv_row``, ``bad_path_empty_component``, those of the
text and capture readers) and *excluded* valid records of another kind (``wrong_family``: an IPv6
address where IPv4 is read, ``bad_path_depth`` / ``bad_path_too_deep``, ``not_ipv4`` packets),
whose count is never shown. Values outside a module's public domain are not this reader's
business: the snapshot command clamps or drops them without counting them. ``progress`` (if
given) is called now and then with the fraction of the file read so far (by bytes: never a record
count).
"""

from __future__ import annotations

import csv
import ipaddress
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dphhh.sketches.errors import UsageError

from . import text
from .files import detect_format, open_input
from .skips import SkipCounter

__all__ = [
    "SNAPSHOT_FORMATS",
    "KINDS",
    "INT_SATURATED",
    "SnapshotValues",
    "read_snapshot",
    "snapshot_format",
    "parse_ipv4_records",
    "parse_ipv6_records",
]

SNAPSHOT_FORMATS = ("auto", "text", "pcap", "pcapng", "csv", "jsonl")
KINDS = ("ipv4", "ipv6", "int", "path")
#: The value of an integer literal too large for 64 bits (with its sign).
INT_SATURATED = (1 << 63) - 1
_INT = re.compile(r"^[+-]?[0-9]+$")
_INT_DIGITS = 18  # up to this many digits an integer literal fits in int64 as it is
_CHUNK = 65536


class SnapshotValues:
    """What a snapshot read produced: ``values`` (array or list), ``rows`` read, and ``skips``.

    ``rows``, :attr:`n` and ``skips.as_dict()`` are exact counts of the private input: for
    internal use only, never to be printed (show ``skips.operational_line(...)`` instead)."""

    def __init__(self, values: Any, rows: int, skips: SkipCounter, fmt: str) -> None:
        self.values = values
        self.rows = rows
        self.skips = skips
        self.format = fmt

    @property
    def n(self) -> int:
        """Number of values kept (IPv6 values are a ``(hi, lo)`` pair of arrays)."""
        if isinstance(self.values, tuple):
            return len(self.values[0])
        return len(self.values)


def snapshot_format(path: str | os.PathLike[str], input_format: str = "auto") -> str:
    """The concrete format of ``path`` (see the module docstring)."""
    if input_format not in SNAPSHOT_FORMATS:
        raise UsageError(f"input: unknown input format {input_format!r}; expected one of {', '.join(SNAPSHOT_FORMATS)}")
    if input_format != "auto":
        return input_format
    suffix = Path(path).suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    return detect_format(path)


class _Position:
    """Bytes consumed so far of the file being read (for progress by fraction of the file)."""

    def __init__(self) -> None:
        self.bytes = 0


def _counted_lines(fh, position: _Position) -> Iterator[str]:
    for line in fh:
        position.bytes += len(line)
        yield line


def _rows_csv(
    path: Path, columns: Sequence[str], skips: SkipCounter, position: _Position
) -> Iterator[list[list[str] | None]]:
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        reader = csv.reader(_counted_lines(fh, position))
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            return
        missing = [c for c in columns if c not in header]
        if missing:
            raise UsageError(f"input: {path} has no column {missing[0]!r} (columns: {', '.join(header)})")
        where = [header.index(c) for c in columns]
        chunk: list[list[str] | None] = []
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error:
                skips.add("bad_csv_row")
                continue
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            chunk.append([row[i].strip() for i in where] if len(row) > max(where) else None)
            if len(chunk) >= _CHUNK:
                yield chunk
                chunk = []
        if chunk:
            yield chunk


def _rows_jsonl(
    path: Path, columns: Sequence[str], skips: SkipCounter, position: _Position
) -> Iterator[list[list[str] | None]]:
    with open(path, "rb") as fh:
        chunk: list[list[str] | None] = []
        for raw in _counted_lines(fh, position):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except (ValueError, RecursionError):
                skips.add("bad_json")
                continue
            if not isinstance(obj, dict) or any(c not in obj or obj[c] is None for c in columns):
                chunk.append(None)
            else:
                chunk.append([str(obj[c]).strip() if not isinstance(obj[c], bool) else "" for c in columns])
            if len(chunk) >= _CHUNK:
                yield chunk
                chunk = []
        if chunk:
            yield chunk


def _rows_text(path: Path, skips: SkipCounter, position: _Position) -> Iterator[list[list[str] | None]]:
    for lines in text.iter_text_lines(path, skips, _CHUNK):
        position.bytes += sum(len(line) + 1 for line in lines)  # approximate: comments are not seen
        yield [[line] for line in lines]


def _parse_ints(cells: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(int64 values, valid mask): integer literals, saturated at ±INT_SATURATED beyond 64 bits."""
    ok = np.fromiter((bool(_INT.match(c)) for c in cells), dtype=bool, count=len(cells))
    values = np.fromiter(
        (_int_value(c) if good else 0 for c, good in zip(cells, ok.tolist())), dtype=np.int64, count=len(cells)
    )
    return values, ok


def _int_value(cell: str) -> int:
    """The value of an integer literal (already matched by ``_INT``), saturated beyond 64 bits.

    Works on the digits, so a literal of any length is handled in time linear in its length."""
    negative = cell[0] == "-"
    digits = cell.lstrip("+-").lstrip("0")
    if len(digits) > _INT_DIGITS:
        return -INT_SATURATED if negative else INT_SATURATED
    value = int(digits) if digits else 0
    return -value if negative else value


def _is_ipv6(line: str) -> bool:
    """True iff ``line`` (stripped, zone id ignored) is a valid IPv6 address."""
    s = line.strip().split("%", 1)[0]
    if ":" not in s or not s.isascii():
        return False
    try:
        ipaddress.IPv6Address(s)
    except ValueError:
        return False
    return True


def parse_ipv4_records(lines: list[str], skips: SkipCounter) -> np.ndarray:
    """Dotted quads → uint32 array (input order), with the grammar of :func:`dphhh.connectors.text.parse_ipv4`.

    A rejected line that is a valid IPv6 address is counted as ``wrong_family`` (a valid record of
    another family: excluded, never shown); any other rejected line as ``bad_ipv4`` (unparsable).
    """
    values, valid = text.parse_ipv4_each(lines)
    rejected = np.flatnonzero(~valid).tolist()
    if rejected:
        family = sum(1 for i in rejected if _is_ipv6(lines[i]))
        skips.add("wrong_family", family)
        skips.add("bad_ipv4", len(rejected) - family)
    return values[valid]


_PAIR_SEPARATORS = ("->", "→", ",", "\t")


def parse_ipv4_pair_records(lines: list[str], skips: SkipCounter) -> tuple[np.ndarray, np.ndarray]:
    """Lines ``A B`` (also ``A,B``, ``A -> B``, ``A → B``, tab-separated) of two dotted quads →
    ``(first, second)`` uint32 arrays in input order (two-dimensional HHH, docs/ALGORITHMS.md §11).

    A line of two addresses of which one is an IPv6 address (each side an IP address) is a valid
    record of another family: ``wrong_family`` (excluded, never shown); any other line that is not
    two strict dotted quads is counted as ``bad_pair`` (unparsable)."""
    firsts: list[str] = []
    seconds: list[str] = []
    bad = 0
    for line in lines:
        for sep in _PAIR_SEPARATORS:
            line = line.replace(sep, " ")
        parts = line.split()
        if len(parts) != 2:
            bad += 1
            continue
        firsts.append(parts[0])
        seconds.append(parts[1])
    a, ok_a = text.parse_ipv4_each(firsts)
    b, ok_b = text.parse_ipv4_each(seconds)
    ok = ok_a & ok_b
    other = 0
    for i in np.flatnonzero(~ok).tolist():  # both sides IP addresses, one of them IPv6: another family
        if all(ok_side[i] or _is_ipv6(side[i]) for ok_side, side in ((ok_a, firsts), (ok_b, seconds))):
            other += 1
    skips.add("wrong_family", other)
    skips.add("bad_pair", bad + int((~ok).sum()) - other)
    return a[ok], b[ok]


def parse_ipv6_records(lines: list[str], skips: SkipCounter) -> tuple[np.ndarray, np.ndarray]:
    """IPv6 addresses → (hi, lo) uint64 arrays (input order), as :func:`dphhh.connectors.text.parse_ipv6`.

    A line that is a valid dotted quad is counted as ``wrong_family`` (excluded, never shown); any
    other rejected line as ``bad_ipv6`` (unparsable).
    """
    _, is_ipv4 = text.parse_ipv4_each(lines)
    skips.add("wrong_family", int(np.count_nonzero(is_ipv4)))
    rest = [line for line, v4 in zip(lines, is_ipv4.tolist()) if not v4]
    return text.parse_ipv6(rest, skips)


def read_snapshot(
    path: str | os.PathLike[str],
    *,
    kind: str,
    input_format: str = "auto",
    columns: Sequence[str] = (),
    path_depth: int = 64,
    progress: Callable[[float], None] | None = None,
) -> SnapshotValues:
    """Read a whole snapshot file into values of ``kind`` (see the module docstring).

    ``columns`` is required for csv and jsonl (one name, or several for ``kind="int"``), and not
    allowed for the other formats. Raises ``ValueError("input: …")`` for an unusable file or
    option; skipped rows are only counted (see the module docstring for which counts may be shown).
    """
    if kind not in KINDS:
        raise UsageError(f"input: kind must be one of {', '.join(KINDS)}, got {kind!r}")
    fmt = snapshot_format(path, input_format)
    p = Path(path)
    columns = [c.strip() for c in columns if c.strip()]
    if fmt in ("csv", "jsonl") and not columns:
        raise UsageError(f"input: {fmt} input needs --column NAME (the column holding the values)")
    if fmt not in ("csv", "jsonl") and columns:
        raise UsageError(f"input: --column applies to csv and jsonl inputs, not {fmt}")
    if len(columns) > 1 and kind != "int":
        raise UsageError(f"input: several columns are only supported for integer values, not {kind}")
    skips = SkipCounter()
    if fmt in ("pcap", "pcapng", "text"):
        handle = open_input(p, fmt)
        if handle.is_capture:
            if kind != "ipv4":
                raise UsageError(f"input: a {fmt} capture provides IPv4 addresses only, not {kind} values")
            chunks = list(handle.iter_ipv4(skips))
            values = np.concatenate(chunks) if chunks else np.empty(0, np.uint32)
            if progress is not None:
                progress(1.0)
            return SnapshotValues(values, len(values) + skips.total, skips, fmt)
    elif not p.is_file():
        raise UsageError(f"input: {p} is not a readable file")
    position = _Position()
    size = max(p.stat().st_size, 1)
    rows_of = {
        "csv": lambda: _rows_csv(p, columns, skips, position),
        "jsonl": lambda: _rows_jsonl(p, columns, skips, position),
        "text": lambda: _rows_text(p, skips, position),
    }[fmt]
    parts: list[Any] = []
    rows = 0
    for chunk in rows_of():
        rows += len(chunk)
        present = [c for c in chunk if c is not None]
        skips.add("missing_column", len(chunk) - len(present))
        if kind == "ipv4":
            parts.append(parse_ipv4_records([c[0] for c in present], skips))
        elif kind == "ipv6":
            parts.append(parse_ipv6_records([c[0] for c in present], skips))
        elif kind == "path":
            paths = text.parse_paths([c[0] for c in present], skips, max_depth=path_depth)
            exact = [x for x in paths if x.count("/") + 1 == path_depth]
            skips.add("bad_path_depth", len(paths) - len(exact))
            parts.append(exact)
        else:
            flat = [cell for c in present for cell in c]
            values, ok = _parse_ints(flat)
            width = len(columns) if columns else 1
            ok_rows = ok.reshape(-1, width).all(axis=1)
            skips.add("bad_int", int(np.count_nonzero(~ok_rows)))
            values = values.reshape(-1, width)[ok_rows]
            parts.append(values[:, 0] if width == 1 else values)
        if progress is not None:
            progress(min(position.bytes / size, 1.0))
    if kind == "path":
        values_out: Any = [v for part in parts for v in part]
    elif kind == "ipv6":
        values_out = (
            np.concatenate([hi for hi, _ in parts]) if parts else np.empty(0, np.uint64),
            np.concatenate([lo for _, lo in parts]) if parts else np.empty(0, np.uint64),
        )
    elif parts:
        values_out = np.concatenate(parts)
    else:
        width = max(len(columns), 1)
        values_out = (
            np.empty(0, np.uint32) if kind == "ipv4" else np.empty((0,) if width == 1 else (0, width), np.int64)
        )
    return SnapshotValues(values_out, rows + skips["bad_json"] + skips["bad_csv_row"], skips, fmt)
