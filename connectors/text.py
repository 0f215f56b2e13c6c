"""Text input: one record per line, read in chunks, and vectorised record parsers.

Reading (:func:`iter_text_lines`)
    The file is read as bytes in blocks and split on ``\\n``; each line is decoded as strict UTF-8
    (a line that is not valid UTF-8 is skipped as ``invalid_utf8``), stripped of surrounding
    whitespace (so ``\\r\\n`` endings work), and dropped silently if blank or if it starts with
    ``#`` (a comment; there are no trailing comments). A UTF-8 byte-order mark at the start of the
    file is ignored. A line longer than :data:`MAX_LINE_BYTES` is skipped as ``line_too_long``
    without being held in memory.

Parsing — each parser takes a list of lines, returns the valid records in input order, and counts
every rejected line in the :class:`~dphhh.connectors.skips.SkipCounter` (never storing its content):

* :func:`parse_ipv4` — strict dotted quads ``a.b.c.d`` -> uint32 host integers. Each octet is 1-3
  ASCII decimal digits with value 0..255 and **no leading zero** (``01.2.3.4`` is rejected: some
  parsers read it as octal, others as decimal, so it is ambiguous). Signs, non-ASCII digits
  (``١.2.3.4``), fewer/more than four octets, prefixes (``/24``), ports and embedded spaces are
  rejected as ``bad_ipv4``. Surrounding whitespace is stripped first.
* :func:`parse_ipv6` — anything :class:`ipaddress.IPv6Address` accepts (all ``::`` compressions,
  embedded-IPv4 forms such as ``::ffff:1.2.3.4`` kept as their 128-bit IPv6 value), except zone
  ids (``fe80::1%eth0``); -> (hi, lo) uint64 halves. A plain dotted quad is *not* an IPv6
  address (``bad_ipv6``).
* :func:`parse_paths` — ``/``-separated hierarchical paths such as ``de/bavaria/munich/leopoldstr``.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterator

import numpy as np

from dphhh.connectors.skips import SkipCounter
from dphhh.sketches.errors import UsageError

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_PATH_LENGTH",
    "iter_text_lines",
    "parse_ipv4",
    "parse_ipv4_each",
    "may_hold_address",
    "parse_ipv6",
    "normalise_path",
    "parse_paths",
]

#: Lines longer than this (in bytes, before decoding) are skipped as ``line_too_long``.
MAX_LINE_BYTES = 1 << 20
#: The longest normalised path (characters): longer ones are ``bad_path_too_long``.
MAX_PATH_LENGTH = 4096
_READ_SIZE = 1 << 20
_BOM = "\ufeff"


def _clean(lines: list[str], out: list[str]) -> None:
    for s in lines:
        s = s.strip()
        if s and s[0] != "#":
            out.append(s)


def _decode_lines(raw: bytes, skips: SkipCounter, out: list[str]) -> None:
    """Decode ``\\n``-separated complete lines, appending the kept ones to ``out``."""
    try:
        _clean(raw.decode("utf-8").split("\n"), out)
    except UnicodeDecodeError:
        for line in raw.split(b"\n"):
            try:
                text = line.decode("utf-8")
            except UnicodeDecodeError:
                skips.add("invalid_utf8")
                continue
            _clean([text], out)


def iter_text_lines(path: str | os.PathLike[str], skips: SkipCounter, chunk_size: int = 65536) -> Iterator[list[str]]:
    """Yield the file's records as lists of 1 .. ``chunk_size`` stripped, non-comment lines.

    See the module docstring for the exact line rules. A missing or unreadable file raises
    :class:`ValueError` naming it at call time; the returned iterator reads the file lazily and
    counts skipped lines into ``skips`` as it goes.
    """
    chunk_size = int(chunk_size)
    if chunk_size < 1:
        raise UsageError(f"chunk_size must be >= 1, got {chunk_size}")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise UsageError(f"{os.fspath(path)}: cannot read file ({reason})") from None
    return _iter_lines(path, skips, chunk_size)


def _iter_lines(path: str | os.PathLike[str], skips: SkipCounter, chunk_size: int) -> Iterator[list[str]]:
    with open(path, "rb") as f:
        pending: list[str] = []
        carry = b""  # start of a line whose end has not been read yet
        overlong = False  # inside a line that already exceeded MAX_LINE_BYTES (being dropped)
        first = True
        while True:
            block = f.read(_READ_SIZE)
            if first:
                first = False
                if block.startswith(b"\xef\xbb\xbf"):
                    block = block[3:]
            if not block:  # end of file: a last line without a final newline
                if carry and not overlong:
                    _decode_lines(carry, skips, pending)
            else:
                cut = block.rfind(b"\n")
                if cut < 0:  # no line ends in this block
                    if not overlong:
                        carry += block
                        if len(carry) > MAX_LINE_BYTES:
                            skips.add("line_too_long")
                            overlong, carry = True, b""
                    continue
                complete, tail = block[:cut], block[cut + 1 :]
                if overlong:  # the first newline of the block ends the dropped line
                    nl = complete.find(b"\n")
                    complete = complete[nl + 1 :] if nl >= 0 else b""
                    overlong = False
                else:
                    complete = carry + complete
                if len(complete) > MAX_LINE_BYTES:
                    kept: list[bytes] = []
                    for line in complete.split(b"\n"):
                        if len(line) > MAX_LINE_BYTES:
                            skips.add("line_too_long")
                        else:
                            kept.append(line)
                    complete = b"\n".join(kept)
                if complete:
                    _decode_lines(complete, skips, pending)
                carry = tail
                if len(carry) > MAX_LINE_BYTES:
                    skips.add("line_too_long")
                    overlong, carry = True, b""
            i = 0
            while len(pending) - i >= chunk_size or (not block and i < len(pending)):
                yield pending[i : i + chunk_size]
                i += chunk_size
            pending = pending[i:]
            if not block:
                return


# --------------------------------------------------------------------------------------------
# IPv4

_IPV4_WIDTH = 15  # "255.255.255.255"
_IPV4_BATCH = 1 << 16


def _parse_ipv4_batch(lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(values as int64, valid mask) for already-stripped ``lines``.

    A column-wise state machine, vectorised over the lines: column ``j`` of every line is consumed
    at once, carrying the octet being read (value, digit count, leading '0') per line.
    """
    n = len(lines)
    lens = np.fromiter(map(len, lines), dtype=np.int64, count=n)
    # Fixed-width UCS4 array: longer strings are truncated, but they are invalid by length anyway;
    # the padding past a string's length is 0. Code points > 255 are clamped to 255 (no digit/dot).
    ucs4 = np.array(lines, dtype=f"U{_IPV4_WIDTH}").view(np.uint32).reshape(n, _IPV4_WIDTH)
    cols = np.minimum(ucs4, 255).astype(np.int16).T.copy()  # (width, n): contiguous columns
    valid = (lens >= 7) & (lens <= _IPV4_WIDTH)
    acc = np.zeros(n, dtype=np.int32)  # completed octets (at most three before the last)
    cur = np.zeros(n, dtype=np.int16)  # value of the octet being read (< 10000 while valid)
    ndig = np.zeros(n, dtype=np.int8)  # digits in the octet being read
    zero_first = np.zeros(n, dtype=bool)  # the octet being read started with '0'
    dots = np.zeros(n, dtype=np.int8)
    for j in range(_IPV4_WIDTH):
        inside = lens > j
        if not inside.any():
            break
        ch = cols[j]
        dv = ch - 48
        digit = inside & (dv >= 0) & (dv <= 9)
        dot = inside & (ch == 46)
        valid &= ~(inside ^ (digit | dot))  # any other character inside the string
        # a digit after a leading '0' of the same octet is a leading zero: rejected
        valid &= ~(digit & zero_first & (ndig >= 1))
        zero_first = np.where(digit & (ndig == 0), ch == 48, zero_first)
        cur = np.where(digit, cur * 10 + dv, cur)
        ndig += digit
        valid &= ndig <= 3
        # a dot closes an octet, which must be non-empty and <= 255
        valid &= ~(dot & ((ndig == 0) | (cur > 255)))
        acc = np.where(dot, (acc << 8) | (cur & 0xFF), acc)
        dots += dot
        cur[dot] = 0
        ndig[dot] = 0
    valid &= (dots == 3) & (ndig >= 1) & (cur <= 255)
    return (acc.astype(np.int64) << 8) | (cur & 0xFF), valid


def parse_ipv4(lines: list[str], skips: SkipCounter) -> np.ndarray:
    """Strict dotted-quad IPv4 addresses -> uint32 array (input order); bad lines -> ``bad_ipv4``.

    Surrounding whitespace is stripped; an empty string is a bad line. See the module docstring
    for the exact grammar (no leading zeros, ASCII digits only, exactly four octets 0..255).
    """
    out: list[np.ndarray] = []
    bad = 0
    for start in range(0, len(lines), _IPV4_BATCH):
        batch = [s.strip() for s in lines[start : start + _IPV4_BATCH]]
        values, valid = _parse_ipv4_batch(batch)
        bad += int(valid.size - np.count_nonzero(valid))
        out.append(values[valid].astype(np.uint32))
    skips.add("bad_ipv4", bad)
    return np.concatenate(out) if out else np.empty(0, dtype=np.uint32)


def parse_ipv4_each(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(uint32 values, valid mask) with one entry per text, in order: the same grammar as
    :func:`parse_ipv4` (surrounding whitespace stripped), without dropping the invalid ones."""
    values = np.zeros(len(texts), dtype=np.uint32)
    valid = np.zeros(len(texts), dtype=bool)
    for start in range(0, len(texts), _IPV4_BATCH):
        batch = [s.strip() for s in texts[start : start + _IPV4_BATCH]]
        v, ok = _parse_ipv4_batch(batch)
        values[start : start + len(batch)] = np.where(ok, v, 0).astype(np.uint32)
        valid[start : start + len(batch)] = ok
    return values, valid


# --------------------------------------------------------------------------------------------
# IPv6

_LO_MASK = (1 << 64) - 1


def parse_ipv6(lines: list[str], skips: SkipCounter) -> tuple[np.ndarray, np.ndarray]:
    """IPv6 addresses -> (hi, lo) uint64 arrays (input order); bad lines -> ``bad_ipv6``.

    Accepts what :class:`ipaddress.IPv6Address` accepts (after stripping whitespace), including
    ``::ffff:1.2.3.4``-style embedded IPv4, but not zone ids (``%eth0``) nor plain IPv4.
    """
    hi: list[int] = []
    lo: list[int] = []
    bad = 0
    for line in lines:
        s = line.strip()
        if "%" in s or not s.isascii():
            bad += 1
            continue
        try:
            v = int(ipaddress.IPv6Address(s))
        except ValueError:
            bad += 1
            continue
        hi.append(v >> 64)
        lo.append(v & _LO_MASK)
    skips.add("bad_ipv6", bad)
    return np.array(hi, dtype=np.uint64), np.array(lo, dtype=np.uint64)


# --------------------------------------------------------------------------------------------
# paths


# A path normalise_path returns unchanged: components without "/", not empty, not starting or ending
# with whitespace (\s is str.isspace's set, which str.strip() removes), no trailing "/".
_COMPONENT = r"[^/\s](?:[^/]*[^/\s])?"
_NORMAL_PATH = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")


def normal_path_lines(depth: int) -> re.Pattern[str]:
    """A pattern whose ``fullmatch`` holds for lines joined by line feeds iff every line is a path
    :func:`is_normal_path` accepts with exactly ``depth`` components (for lines without a line feed
    of their own: a component's inner characters exclude it here so that it separates lines)."""
    component = _COMPONENT.replace("[^/]*", "[^/\n]*")
    line = rf"{component}(?:/{component}){{{depth - 1}}}"
    return re.compile(rf"{line}(?:\n{line})*")


def is_normal_path(line: str) -> bool:
    """Whether :func:`normalise_path` would return ``line`` itself, before its length and depth
    checks: a fast test for text that needs no normalising (one regular-expression match)."""
    return _NORMAL_PATH.fullmatch(line) is not None


def normalise_path(line: str, max_depth: int = 64, max_length: int = MAX_PATH_LENGTH) -> tuple[str | None, str]:
    """``(None, path)`` for a good line, else ``(reason, "")`` (:func:`parse_paths` states the rules)."""
    s = line.strip()
    if s.endswith("/"):
        s = s[:-1]
    parts = [p.strip() for p in s.split("/")]
    if not all(parts):
        return "bad_path_empty_component", ""
    path = "/".join(parts)
    if len(path) > max_length:
        return "bad_path_too_long", ""
    if len(parts) > max_depth:
        return "bad_path_too_deep", ""
    return None, path


def parse_paths(
    lines: list[str], skips: SkipCounter, max_depth: int = 64, max_length: int = MAX_PATH_LENGTH
) -> list[str]:
    """Normalised ``/``-separated paths (input order); bad lines are counted, not returned.

    Normalisation (:func:`normalise_path`): strip whitespace around the line and around every
    component, then drop one trailing ``/`` (``" de / bavaria/ "`` -> ``de/bavaria``). Rejections,
    checked in this order:

    * ``bad_path_empty_component`` — an empty line, a leading ``/``, ``a//b``, ``a/ /b``, or more
      than one trailing ``/``;
    * ``bad_path_too_long`` — the normalised path has more than ``max_length`` characters;
    * ``bad_path_too_deep`` — more than ``max_depth`` components.
    """
    if max_depth < 1 or max_length < 1:
        raise UsageError("max_depth and max_length must be >= 1")
    out: list[str] = []
    bad = {"bad_path_empty_component": 0, "bad_path_too_long": 0, "bad_path_too_deep": 0}
    for line in lines:
        reason, path = normalise_path(line, max_depth, max_length)
        if reason is None:
            out.append(path)
        else:
            bad[reason] += 1
    for reason, count in bad.items():
        skips.add(reason, count)
    return out


#: an IPv4 dotted quad not glued to other digits or dots, or a run of hex digits and colons with at
#: least two colons (an IPv6 address candidate)
_ADDRESS_LIKE = re.compile(
    rb"(?<![0-9.])(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![0-9.])|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*"
)


def may_hold_address(value: bytes) -> bool:
    """Whether unreadable bytes (invalid UTF-8, malformed JSON) may still hold an IP address: some
    token in them is a valid IPv4 dotted quad or IPv6 address. A refused record that may hold one is
    dead-lettered but never counted in public (docs/ALGORITHMS.md §0.1 f): when in doubt, it holds one."""
    for token in _ADDRESS_LIKE.findall(bytes(value)):
        try:
            ipaddress.ip_address(token.decode("ascii"))
            return True
        except ValueError:
            continue
    return False
