"""Snapshot files of the offline modules: csv, JSON lines, text and captures, bad rows counted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dphhh.connectors.snapshot import read_snapshot, snapshot_format
from dphhh.stream.paths import DEMO_CAPTURE, capture

CAPTURE = capture(DEMO_CAPTURE)


def test_csv_column_of_addresses_keeps_good_rows_and_counts_bad_ones(tmp_path: Path) -> None:
    """A csv column of dotted quads gives their uint32 values; bad and short rows are counted by reason."""
    f = tmp_path / "flows.csv"
    f.write_text("src,port\n10.0.0.1,80\n10.0.0.300,1\n\n10.0.0.2,443\n")
    got = read_snapshot(f, kind="ipv4", columns=["src"])
    assert got.format == "csv" and got.values.tolist() == [0x0A000001, 0x0A000002]
    assert got.skips.as_dict() == {"bad_ipv4": 1}


def test_csv_several_integer_columns_give_a_matrix(tmp_path: Path) -> None:
    """Two integer columns give an (n, 2) array; a row with a bad or missing cell is dropped whole."""
    f = tmp_path / "t.csv"
    f.write_text("a,b,c\n1,2,x\n3,four,y\n5\n-6,7,z\n")
    got = read_snapshot(f, kind="int", columns=["a", "b"])
    assert got.values.tolist() == [[1, 2], [-6, 7]]
    assert got.skips.as_dict() == {"bad_int": 1, "missing_column": 1}


def test_jsonl_field_with_bad_lines(tmp_path: Path) -> None:
    """JSON lines: the named field is read; unparsable lines and objects without it are counted."""
    f = tmp_path / "e.jsonl"
    f.write_text('{"port": 22}\n{"port": "443"}\nnot json\n{"other": 1}\n{"port": true}\n{"port": 8080}\n')
    got = read_snapshot(f, kind="int", columns=["port"])
    assert got.format == "jsonl" and got.values.tolist() == [22, 443, 8080]
    assert got.skips.as_dict() == {"bad_int": 1, "bad_json": 1, "missing_column": 1}


def test_text_paths_of_the_wrong_depth_are_counted(tmp_path: Path) -> None:
    """Text paths are normalised; those not of the hierarchy's depth or malformed are counted."""
    f = tmp_path / "p.txt"
    f.write_text("de/bavaria/munich\n de / by /x\nde/bavaria\na//b/c\n")
    got = read_snapshot(f, kind="path", path_depth=3)
    assert got.values == ["de/bavaria/munich", "de/by/x"]
    assert got.skips.as_dict() == {"bad_path_depth": 1, "bad_path_empty_component": 1}


def test_capture_gives_source_addresses_and_refuses_other_kinds() -> None:
    """A pcap yields IPv4 sources; asking a capture for integers is a clear error."""
    got = read_snapshot(CAPTURE, kind="ipv4")
    assert got.format == "pcap" and got.values.dtype == np.uint32 and got.n > 1000
    with pytest.raises(ValueError, match="input: a pcap capture provides IPv4 addresses only"):
        read_snapshot(CAPTURE, kind="int")


def test_option_errors_are_clear(tmp_path: Path) -> None:
    """Missing --column for csv, --column on text, unknown formats and missing files name the problem."""
    f = tmp_path / "x.csv"
    f.write_text("a\n1\n")
    with pytest.raises(ValueError, match="needs --column"):
        read_snapshot(f, kind="int")
    with pytest.raises(ValueError, match="has no column 'b'"):
        read_snapshot(f, kind="int", columns=["b"])
    t = tmp_path / "x.txt"
    t.write_text("1\n")
    with pytest.raises(ValueError, match="--column applies to csv and jsonl"):
        read_snapshot(t, kind="int", columns=["a"])
    with pytest.raises(ValueError, match="unknown input format"):
        snapshot_format(t, "parquet")
    with pytest.raises(ValueError, match="input: "):
        read_snapshot(tmp_path / "missing.txt", kind="int")


def test_progress_reports_fractions_of_the_file(tmp_path: Path) -> None:
    """Progress is reported as a growing fraction of the file that ends at 1."""
    f = tmp_path / "big.jsonl"
    f.write_text("".join(f'{{"v": {i}}}\n' for i in range(200_000)))
    seen: list[float] = []
    got = read_snapshot(f, kind="int", columns=["v"], progress=seen.append)
    assert got.n == 200_000 and len(seen) >= 3
    assert seen == sorted(seen) and seen[-1] == 1.0 and 0 < seen[0] < 1


def test_an_ipv6_address_where_ipv4_is_read_is_a_valid_record_of_another_family(tmp_path: Path) -> None:
    """IPv6 addresses (zone ids included) among dotted quads are ``wrong_family`` (excluded: never shown),
    garbage is ``bad_ipv4`` (unparsable: on the operational line only)."""
    f = tmp_path / "a.txt"
    f.write_text("10.0.0.1\n2001:db8::1\nfe80::1%eth0\n::ffff:1.2.3.4\nnot:an:address\n01.2.3.4\n")
    got = read_snapshot(f, kind="ipv4")
    assert got.values.tolist() == [0x0A000001]
    assert got.skips.as_dict() == {"bad_ipv4": 2, "wrong_family": 3}
    assert got.skips.operational_line("x") == "x: operational, not private: 2 unparsable records skipped (bad_ipv4=2)"


def test_parse_ipv6_records_counts_dotted_quads_as_another_family() -> None:
    """In an IPv6 run a dotted quad is ``wrong_family``; a bad line is ``bad_ipv6``."""
    from dphhh.connectors.skips import SkipCounter
    from dphhh.connectors.snapshot import parse_ipv6_records

    skips = SkipCounter()
    hi, lo = parse_ipv6_records(["2001:db8::1", "10.0.0.1", "zz::zz::1", "::1"], skips)
    assert hi.tolist() == [0x20010DB800000000, 0] and lo.tolist() == [1, 1]
    assert skips.as_dict() == {"bad_ipv6": 1, "wrong_family": 1}


def test_integers_too_large_for_64_bits_saturate_instead_of_being_bad_rows(tmp_path: Path) -> None:
    """A huge integer literal is a valid value (kept at ±(2^63 - 1), outside every domain), not a bad
    row; leading zeros and signs are read; other literals are ``bad_int``."""
    from dphhh.connectors.snapshot import INT_SATURATED

    f = tmp_path / "v.csv"
    f.write_text("v\n" + "9" * 5000 + "\n-" + "1" * 30 + "\n+0000000000000000000000042\n-7\n١٢\n4.5\n")
    got = read_snapshot(f, kind="int", columns=["v"])
    assert got.values.tolist() == [INT_SATURATED, -INT_SATURATED, 42, -7]
    assert got.skips.as_dict() == {"bad_int": 2}


def test_a_pair_line_with_an_ipv6_side_is_another_family_not_a_bad_pair() -> None:
    """'A B' lines where a side is an IPv6 address are valid records of another family — somebody's
    data: counted as wrong_family (excluded, never shown), not as the operational bad_pair; lines
    that are not two addresses stay bad_pair (an independent review's finding)."""
    from dphhh.connectors.skips import SkipCounter
    from dphhh.connectors.snapshot import parse_ipv4_pair_records

    skips = SkipCounter()
    first, second = parse_ipv4_pair_records(
        ["10.0.0.1 10.0.0.2", "10.0.0.1 2001:db8::1", "2001:db8::1 -> 2001:db8::2", "10.0.0.1 nowhere", "one"], skips
    )
    assert first.tolist() == [0x0A000001] and second.tolist() == [0x0A000002]
    assert skips.as_dict() == {"wrong_family": 2, "bad_pair": 2}
    assert "wrong_family" not in (skips.operational_line("dphhh snapshot") or "")
