"""Tests for text input (connectors.text), the skip counter (connectors.skips) and text input files."""

from __future__ import annotations

import ipaddress
import random
from pathlib import Path

import numpy as np
import pytest

from dphhh.connectors import text
from dphhh.connectors.files import open_input
from dphhh.connectors.skips import SkipCounter
from dphhh.connectors.text import is_normal_path, iter_text_lines, normalise_path, parse_ipv4, parse_ipv6, parse_paths

# --------------------------------------------------------------------------------------------
# SkipCounter


def test_skip_counter_counts_merges_and_sorts() -> None:
    """Counts add up per reason, merge adds another counter, and as_dict is sorted by reason."""
    a = SkipCounter()
    a.add("truncated")
    a.add("not_ipv4", 3)
    a.add("truncated", 2)
    a.add("bad_ipv4", 0)
    b = SkipCounter()
    b.add("bad_ipv4", 5)
    b.add("not_ipv4")
    a.merge(b)
    assert a.as_dict() == {"bad_ipv4": 5, "not_ipv4": 4, "truncated": 3}
    assert list(a.as_dict()) == ["bad_ipv4", "not_ipv4", "truncated"]
    assert a.total == 12
    assert a["truncated"] == 3 and a["never_seen"] == 0
    assert b.as_dict() == {"bad_ipv4": 5, "not_ipv4": 1}


def test_skip_counter_rejects_bad_input() -> None:
    """A negative count or an empty reason is an error, and a zero count leaves no entry."""
    c = SkipCounter()
    with pytest.raises(ValueError):
        c.add("x", -1)
    with pytest.raises(ValueError):
        c.add("")
    c.add("x", 0)
    assert c.as_dict() == {} and c.total == 0
    assert repr(c) == "SkipCounter({})"


# --------------------------------------------------------------------------------------------
# iter_text_lines


def _lines(path: Path, chunk_size: int = 65536) -> tuple[list[list[str]], SkipCounter]:
    skips = SkipCounter()
    return list(iter_text_lines(path, skips, chunk_size)), skips


def test_text_lines_strip_blank_and_comments(tmp_path: Path) -> None:
    """Lines are stripped, blank and '#' lines are dropped, CRLF and a missing final newline work."""
    path = tmp_path / "in.txt"
    path.write_bytes(b"# header\r\n1.2.3.4\r\n\r\n   \n  5.6.7.8  \n\t# indented comment\nde/by # not a comment\nlast")
    chunks, skips = _lines(path)
    assert chunks == [["1.2.3.4", "5.6.7.8", "de/by # not a comment", "last"]]
    assert skips.total == 0


def test_text_lines_invalid_utf8_is_skipped(tmp_path: Path) -> None:
    """A line that is not valid UTF-8 is counted as invalid_utf8 and the others are kept."""
    path = tmp_path / "in.txt"
    path.write_bytes(b"ok1\nbad\xff\xfe\n" + "münchen".encode() + b"\n\xc3\nok2\n")
    chunks, skips = _lines(path)
    assert chunks == [["ok1", "münchen", "ok2"]]
    assert skips.as_dict() == {"invalid_utf8": 2}


def test_text_lines_bom_and_empty_file(tmp_path: Path) -> None:
    """A leading UTF-8 BOM is ignored and an empty file yields no chunks."""
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf1.2.3.4\n")
    assert _lines(path)[0] == [["1.2.3.4"]]
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    assert _lines(empty) == ([], SkipCounter())


def test_text_lines_chunking(tmp_path: Path) -> None:
    """Chunks hold 1 .. chunk_size lines and concatenate to all kept lines in file order."""
    path = tmp_path / "n.txt"
    path.write_text("".join(f"line{i}\n" if i % 5 else "\n" for i in range(1000)))
    expected = [f"line{i}" for i in range(1000) if i % 5]
    for chunk_size in (1, 7, 800, 65536):
        chunks, _ = _lines(path, chunk_size)
        assert all(1 <= len(c) <= chunk_size for c in chunks)
        assert [x for c in chunks for x in c] == expected
    with pytest.raises(ValueError, match="chunk_size"):
        iter_text_lines(path, SkipCounter(), 0)


def test_text_lines_across_small_read_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines and multi-byte characters split across read blocks are reassembled exactly."""
    rng = random.Random(7)
    alphabet = ["a", "ü", "€", "𝄞", " ", "#", "\r", "1", "."]
    raw_lines = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(500)]
    path = tmp_path / "r.txt"
    path.write_bytes("\n".join(raw_lines).encode("utf-8"))
    expected = [s.strip() for s in raw_lines if s.strip() and not s.strip().startswith("#")]
    for size in (1, 2, 3, 5, 64):
        monkeypatch.setattr(text, "_READ_SIZE", size)
        chunks, skips = _lines(path, 50)
        assert [x for c in chunks for x in c] == expected
        assert skips.total == 0


def test_text_lines_overlong_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines longer than MAX_LINE_BYTES are skipped as line_too_long without losing their neighbours."""
    monkeypatch.setattr(text, "MAX_LINE_BYTES", 10)
    path = tmp_path / "long.txt"
    lines = [b"short", b"x" * 25, b"ok", b"y" * 11, b"z" * 10, b"end" + b"w" * 30]
    path.write_bytes(b"\n".join(lines))  # the last, overlong line has no newline
    for size in (1, 4, 7, 16, 1 << 20):
        monkeypatch.setattr(text, "_READ_SIZE", size)
        chunks, skips = _lines(path)
        assert [x for c in chunks for x in c] == ["short", "ok", "z" * 10]
        assert skips.as_dict() == {"line_too_long": 3}


def test_text_lines_missing_file(tmp_path: Path) -> None:
    """A missing file raises ValueError naming it when iter_text_lines is called."""
    with pytest.raises(ValueError, match="nope.txt"):
        iter_text_lines(tmp_path / "nope.txt", SkipCounter())


# --------------------------------------------------------------------------------------------
# parse_ipv4

VALID_IPV4 = [
    ("1.2.3.4", 0x01020304),
    ("0.0.0.0", 0),
    ("255.255.255.255", 0xFFFFFFFF),
    ("10.0.0.0", 0x0A000000),
    ("192.168.100.200", 0xC0A864C8),
    ("1.2.3.4 ", 0x01020304),
    ("\t 107.1.2.3\r", 0x6B010203),
    ("100.20.3.0", 0x64140300),
]

INVALID_IPV4 = [
    "",
    "   ",
    "256.1.1.1",
    "1.2.3.256",
    "999.1.1.1",
    "1.2.3",
    "1.2.3.4.5",
    "1..2.3",
    ".1.2.3",
    "1.2.3.",
    "01.2.3.4",  # leading zero: octal in some parsers, decimal in others -> rejected
    "1.2.3.04",
    "00.0.0.0",
    "0001.2.3.4",
    "1.2.3.1000",
    "+1.2.3.4",
    "1.2.3.-4",
    "١.2.3.4",  # Arabic-Indic digit one
    "１.2.3.4",  # full-width digit one
    "1.2.3.4/24",
    "1.2.3.4:80",
    "1 .2.3.4",
    "1.2.3.4\x00",
    "0x1.2.3.4",
    "1e1.2.3.4",
    "a.b.c.d",
    "1",  # inet_aton would accept this
    "16909060",
    "1.2.3.4 5",
    "::ffff:1.2.3.4",
    "1.2.3.4" + "0" * 20,
]


@pytest.mark.parametrize(("line", "value"), VALID_IPV4)
def test_parse_ipv4_valid(line: str, value: int) -> None:
    """A strict dotted quad, possibly with surrounding whitespace, becomes its host-order uint32."""
    skips = SkipCounter()
    out = parse_ipv4([line], skips)
    assert out.dtype == np.uint32
    assert out.tolist() == [value]
    assert skips.total == 0


@pytest.mark.parametrize("line", INVALID_IPV4)
def test_parse_ipv4_invalid(line: str) -> None:
    """Anything but four 1-3 digit ASCII octets 0..255 without leading zeros is bad_ipv4."""
    skips = SkipCounter()
    assert parse_ipv4([line], skips).size == 0
    assert skips.as_dict() == {"bad_ipv4": 1}


def test_parse_ipv4_mixed_keeps_order() -> None:
    """Valid addresses keep their input order among rejected ones, which are only counted."""
    lines = ["1.1.1.1", "bad", "2.2.2.2", "01.1.1.1", "3.3.3.3"]
    skips = SkipCounter()
    assert parse_ipv4(lines, skips).tolist() == [0x01010101, 0x02020202, 0x03030303]
    assert skips.as_dict() == {"bad_ipv4": 2}
    assert parse_ipv4([], skips).dtype == np.uint32


def test_parse_ipv4_agrees_with_ipaddress_on_random_strings() -> None:
    """On random digit/dot strings the vectorised parser accepts exactly what ipaddress accepts."""
    rng = random.Random(12345)
    lines = ["".join(rng.choice("0123456789..") for _ in range(rng.randint(0, 17))) for _ in range(50000)]
    lines += [".".join(str(rng.randint(0, 300)) for _ in range(4)) for _ in range(50000)]
    expected = []
    for s in lines:
        try:
            expected.append(int(ipaddress.IPv4Address(s)))
        except ValueError:
            pass
    skips = SkipCounter()
    got = parse_ipv4(lines, skips)
    assert got.tolist() == expected
    assert skips.total == len(lines) - len(expected)


def test_parse_ipv4_large_batch_round_trip() -> None:
    """More lines than one internal batch round-trip exactly through their dotted form."""
    values = np.random.default_rng(3).integers(0, 2**32, 150_000, dtype=np.uint64).astype(np.uint32)
    lines = [str(ipaddress.IPv4Address(int(v))) for v in values]
    skips = SkipCounter()
    np.testing.assert_array_equal(parse_ipv4(lines, skips), values)
    assert skips.total == 0


# --------------------------------------------------------------------------------------------
# parse_ipv6


@pytest.mark.parametrize(
    "line",
    [
        "::",
        "::1",
        "2001:db8::1",
        "2001:DB8:0:0:0:0:0:1",
        "2001:0db8:0000:0000:0000:ff00:0042:8329",
        "fe80::1",
        "::ffff:1.2.3.4",
        "64:ff9b::192.0.2.33",
        "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "  2001:db8::  ",
    ],
)
def test_parse_ipv6_valid(line: str) -> None:
    """IPv6 addresses in any textual form split into (hi, lo) uint64 halves of their 128-bit value."""
    skips = SkipCounter()
    hi, lo = parse_ipv6([line], skips)
    assert hi.dtype == np.uint64 and lo.dtype == np.uint64
    value = int(ipaddress.IPv6Address(line.strip()))
    assert (int(hi[0]) << 64) | int(lo[0]) == value
    assert skips.total == 0


def test_parse_ipv6_ipv4_mapped_value() -> None:
    """An IPv4-mapped address keeps its IPv6 value ::ffff:a.b.c.d."""
    hi, lo = parse_ipv6(["::ffff:1.2.3.4"], SkipCounter())
    assert hi.tolist() == [0] and lo.tolist() == [0x0000FFFF01020304]


@pytest.mark.parametrize(
    "line",
    [
        "",
        "1.2.3.4",
        ":::",
        "2001:db8::1::1",
        "12345::",
        "g::1",
        "2001:db8::/32",
        "fe80::1%eth0",
        "1:2:3:4:5:6:7:8:9",
        "1:2:3:4:5:6:7",
        "::ffff:1.2.3.256",
        "::ffff:01.2.3.4",
        "２001:db8::1",
        "[2001:db8::1]",
    ],
)
def test_parse_ipv6_invalid(line: str) -> None:
    """Malformed text, plain IPv4, prefixes, zone ids and brackets are bad_ipv6."""
    skips = SkipCounter()
    hi, lo = parse_ipv6([line], skips)
    assert hi.size == 0 and lo.size == 0
    assert skips.as_dict() == {"bad_ipv6": 1}


def test_parse_ipv6_mixed_keeps_order() -> None:
    """Valid IPv6 addresses keep their order among bad ones."""
    skips = SkipCounter()
    hi, lo = parse_ipv6(["2001:db8::1", "nope", "::2"], skips)
    assert hi.tolist() == [0x20010DB800000000, 0] and lo.tolist() == [1, 2]
    assert skips.as_dict() == {"bad_ipv6": 1}
    empty_hi, empty_lo = parse_ipv6([], skips)
    assert empty_hi.dtype == np.uint64 and empty_lo.size == 0


# --------------------------------------------------------------------------------------------
# parse_paths


@pytest.mark.parametrize(
    ("line", "path"),
    [
        ("de/bavaria/munich/leopoldstr", "de/bavaria/munich/leopoldstr"),
        ("de/bavaria/", "de/bavaria"),
        ("  de / bavaria /munich ", "de/bavaria/munich"),
        ("de", "de"),
        ("us/new york/ manhattan", "us/new york/manhattan"),
        ("fr/île-de-france/paris", "fr/île-de-france/paris"),
        ("de/bavaria / ", "de/bavaria"),
    ],
)
def test_parse_paths_normalises(line: str, path: str) -> None:
    """Whitespace around the line and each component and one trailing '/' are removed."""
    skips = SkipCounter()
    assert parse_paths([line], skips) == [path]
    assert skips.total == 0


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("", "bad_path_empty_component"),
        ("/", "bad_path_empty_component"),
        ("/de/bavaria", "bad_path_empty_component"),
        ("de//bavaria", "bad_path_empty_component"),
        ("de/ /bavaria", "bad_path_empty_component"),
        ("de/bavaria//", "bad_path_empty_component"),
        ("/".join(["a"] * 65), "bad_path_too_deep"),
        ("x" * 4097, "bad_path_too_long"),
        ("/".join(["abc"] * 1100), "bad_path_too_long"),  # too long is reported before too deep
    ],
)
def test_parse_paths_rejects(line: str, reason: str) -> None:
    """Empty components, over-deep and over-long paths are counted under their own reason."""
    skips = SkipCounter()
    assert parse_paths([line], skips) == []
    assert skips.as_dict() == {reason: 1}


def test_parse_paths_limits_are_inclusive() -> None:
    """Exactly max_depth components and exactly max_length characters are accepted, one more is not."""
    skips = SkipCounter()
    deep = "/".join(["a"] * 64)
    long_path = "x" * 4096
    assert parse_paths([deep, long_path], skips) == [deep, long_path]
    assert parse_paths(["a/b/c", "a/b/c/d"], skips, max_depth=3) == ["a/b/c"]
    assert parse_paths(["ab/cd", "ab/cde"], skips, max_length=5) == ["ab/cd"]
    assert parse_paths(["a / b"], skips, max_length=3) == ["a/b"]  # length of the normalised path
    assert skips.as_dict() == {"bad_path_too_deep": 1, "bad_path_too_long": 1}
    with pytest.raises(ValueError):
        parse_paths(["a"], skips, max_depth=0)


def test_parse_paths_mixed_keeps_order() -> None:
    """Valid paths keep their order and each rejection is counted once."""
    skips = SkipCounter()
    out = parse_paths(["a/b", "a//b", "c/d/", "/e", "f"], skips)
    assert out == ["a/b", "c/d", "f"]
    assert skips.as_dict() == {"bad_path_empty_component": 2}


# --------------------------------------------------------------------------------------------
# text input files end to end


def test_text_input_file_ipv4(tmp_path: Path) -> None:
    """A text input opened with auto detection yields the valid addresses and counts the rest."""
    path = tmp_path / "ips.txt"
    path.write_bytes(b"# sources\n1.2.3.4\n\n01.2.3.4\n5.6.7.8\r\nbad\xff\n300.1.1.1\n")
    inp = open_input(path)
    assert inp.format == "text"
    skips = SkipCounter()
    chunks = list(inp.iter_ipv4(skips, chunk_size=2))
    assert [v for c in chunks for v in c.tolist()] == [0x01020304, 0x05060708]
    assert all(c.size for c in chunks)
    assert skips.as_dict() == {"bad_ipv4": 2, "invalid_utf8": 1}
    lines = [x for c in inp.iter_lines(SkipCounter()) for x in c]
    assert lines == ["1.2.3.4", "01.2.3.4", "5.6.7.8", "300.1.1.1"]


def test_is_normal_path_is_exactly_normalise_path_returning_the_text_itself() -> None:
    """The fast test the path format uses before normalising (``is_normal_path``) holds exactly
    when :func:`normalise_path` returns the text unchanged (its length and depth checks aside):
    20,000 random strings over '/', letters, inner spaces and the whitespace str.strip() removes
    (tab, newline, no-break space, em space, the 0x1c-0x1f separators), and the edge cases."""
    rng = random.Random(11)
    alphabet = ["/", "a", "b", "é", " ", "\t", "\n", "\u00a0", "\u2003", "\x1c", "\x1f", "\u200b", "x y"]
    samples = ["", "/", "a", "a/", "/a", "a//b", "a/ /b", " a", "a ", "a b/c d", "\u00a0a", "a\u2003/b"]
    samples += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 9))) for _ in range(20_000)]
    agree = [is_normal_path(s) == (normalise_path(s, 10**6, 10**6) == (None, s)) for s in samples]
    assert all(agree), [s for s, ok in zip(samples, agree) if not ok][:5]
    assert 500 < sum(map(is_normal_path, samples)) < 19_000  # both answers are well represented
