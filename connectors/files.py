"""Input files for the batch command (``dphhh hhh --input FILE [--input-format ...]``).

:func:`detect_format` tells a capture from a text file by its first four bytes (magic number, not
file name: a ``.pcapng`` file holding a classic pcap is read as pcap). :func:`open_input` checks
the file and the requested format once, up front, and returns an :class:`InputFile` whose
iterators stream the records:

* ``iter_ipv4`` — source IPv4 addresses of a capture, or the strict dotted quads of a text file,
  as uint32 chunks;
* ``iter_lines`` — the raw records of a text file (for IPv6 or path hierarchies, parsed with
  :func:`dphhh.connectors.text.parse_ipv6` / :func:`dphhh.connectors.text.parse_paths`).

Every problem with the file or the format is a :class:`ValueError` whose message starts with
``"input: "`` and names the file, never its contents.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dphhh.connectors import pcap, text
from dphhh.connectors.skips import SkipCounter
from dphhh.sketches.errors import UsageError

__all__ = ["INPUT_FORMATS", "InputFile", "detect_format", "open_input"]

#: Values accepted by ``--input-format``.
INPUT_FORMATS = ("auto", "text", "pcap", "pcapng", "flow-json")
#: Input formats whose records are text lines (read by :meth:`InputFile.iter_lines`).
LINE_FORMATS = ("text", "flow-json")


def _check_file(path: Path) -> None:
    if not path.exists():
        raise UsageError(f"input: file not found: {path}")
    if not path.is_file():
        raise UsageError(f"input: not a regular file: {path}")
    if not os.access(path, os.R_OK):
        raise UsageError(f"input: file is not readable: {path}")


def detect_format(path: str | os.PathLike[str]) -> str:
    """``"pcap"``, ``"pcapng"`` or ``"text"`` for the file at ``path``, by its magic bytes.

    Classic pcap magics ``a1b2c3d4``, ``d4c3b2a1``, ``a1b23c4d``, ``4d3cb2a1`` give ``"pcap"``,
    ``0a0d0d0a`` gives ``"pcapng"``; anything else (including an empty file) is ``"text"``. Only
    the magic is looked at here; :func:`open_input` validates the full capture header. A missing
    or unreadable file raises ``ValueError("input: ...")``.
    """
    p = Path(path)
    _check_file(p)
    try:
        with open(p, "rb") as f:
            magic = f.read(4)
    except OSError as exc:
        raise UsageError(f"input: cannot read {p} ({exc.strerror or type(exc).__name__})") from None
    if magic in pcap.PCAP_MAGICS:
        return "pcap"
    if magic == pcap.PCAPNG_MAGIC:
        return "pcapng"
    return "text"


@dataclass(frozen=True)
class InputFile:
    """A checked input file and its format (``"text"``, ``"pcap"`` or ``"pcapng"``)."""

    path: Path
    format: str

    @property
    def is_capture(self) -> bool:
        """True for pcap and pcapng files."""
        return self.format in ("pcap", "pcapng")

    def iter_ipv4(self, skips: SkipCounter, chunk_size: int = 65536) -> Iterator[np.ndarray]:
        """IPv4 addresses as uint32 chunks: packet sources of a capture, dotted quads of a text file.

        Skipped packets/lines are counted into ``skips`` (reasons as in :mod:`dphhh.connectors.pcap` and
        :mod:`dphhh.connectors.text`). Empty chunks are never yielded.
        """
        if self.is_capture:
            yield from pcap.iter_capture_sources(self.path, skips, chunk_size)
            return
        for lines in text.iter_text_lines(self.path, skips, chunk_size):
            values = text.parse_ipv4(lines, skips)
            if values.size:
                yield values

    def iter_lines(self, skips: SkipCounter, chunk_size: int = 65536) -> Iterator[list[str]]:
        """The records of a text file as lists of stripped, non-comment lines (:mod:`dphhh.connectors.text`).

        A capture has no text records: ``ValueError("input: ...")``.
        """
        if self.is_capture:
            raise UsageError(
                f"input: {self.path} is a {self.format} capture; captures only provide IPv4 source addresses"
            )
        return text.iter_text_lines(self.path, skips, chunk_size)


def open_input(path: str | os.PathLike[str], input_format: str = "auto") -> InputFile:
    """Check ``path`` and ``input_format`` (one of :data:`INPUT_FORMATS`); return an :class:`InputFile`.

    ``"auto"`` uses :func:`detect_format`. An explicit ``"pcap"``/``"pcapng"`` must match the
    file's magic; an explicit ``"text"`` is honoured even for a binary file (its lines then fail
    to parse and are counted as skipped). A capture's header is validated here. Every problem —
    missing/unreadable file, unknown format name, format mismatch, bad capture header — raises
    ``ValueError`` starting with ``"input: "``.
    """
    if input_format not in INPUT_FORMATS:
        raise UsageError(f"input: unknown input format {input_format!r}; expected one of {', '.join(INPUT_FORMATS)}")
    p = Path(path)
    detected = detect_format(p)
    if input_format == "auto":
        fmt = detected
    elif input_format in LINE_FORMATS:
        if detected != "text":
            if input_format == "flow-json":
                raise UsageError(f"input: {p} is a {detected} capture, not flow-json (JSON lines of flow records)")
        fmt = input_format
    else:
        if detected != input_format:
            what = "a text file" if detected == "text" else f"a {detected} file"
            raise UsageError(f"input: {p} is {what}, not {input_format} (magic number mismatch)")
        fmt = input_format
    if fmt not in LINE_FORMATS:
        try:
            pcap.capture_format(p)
        except ValueError as exc:
            if input_format != "auto" or fmt != "pcapng":
                raise UsageError(f"input: {exc}") from None
            # pcapng's magic is "\n\r\r\n", blank lines a text file may begin with: without a
            # valid section header such a file is read as text, so whether it is refused never
            # depends on which of its lines comes first (docs/ALGORITHMS.md §0.1 h)
            fmt = "text"
    return InputFile(path=p, format=fmt)
