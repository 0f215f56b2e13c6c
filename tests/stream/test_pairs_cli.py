"""``dphhh hhh`` / ``dphhh exact`` with a pair hierarchy (docs/ALGORITHMS.md §11): captures (source
and destination of each packet), text lines of two addresses, and flow records (src, dst)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from dphhh.stream.cli import main
from dphhh.stream.paths import data_dir

PAIRS = "ipv4:8,16,24,32 x ipv4:8,16,24,32"
SYNACK = data_dir() / "pcaps" / "amp.TCP.reflection.SYNACK.pcap"


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_capture_as_source_destination_pairs_finds_the_exact_heavy_pairs(capsys) -> None:
    """The SYN-ACK capture's packets all go to one (anonymised) victim: at a generous ε the private
    report's pairs at τ = 10 % are the exact ones, written 'source prefix → destination prefix'."""
    code, out, err = _run(capsys, "exact", "--input", str(SYNACK), "--hierarchy", PAIRS, "--tau", "10%")
    assert code == 0, err
    exact = json.loads(out)
    want = {x["prefix"] for x in exact["hhh"] if x["level"] != 0}
    assert "104.0.0.0/8 → 10.10.10.10/32" in want and all(" → " in p for p in want)
    assert all(x["node"] == [int(v) for v in x["node"]] for x in exact["hhh"])
    tau = exact["params"]["tau"]
    code, out, err = _run(
        capsys, "hhh", "--input", str(SYNACK), "--hierarchy", PAIRS, "--epsilon", "64", "--delta", "1e-6",
        "--tau", f"{tau:.0f}", "--counters", "4096", "--seed", "2",
    )  # fmt: skip
    assert code == 0, err
    report = json.loads(out)
    assert report["params"]["h"] == 24 and report["guarantees"]["coverage_holds"] is False
    got = {x["prefix"] for x in report["hhh"] if x["level"] != 0}
    assert got == want


def test_text_pairs_in_every_separator_and_the_text_and_csv_outputs(capsys, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    lines = []
    for i in range(3000):
        if i % 3 == 0:
            lines.append(f"10.20.{rng.integers(256)}.{rng.integers(256)} -> 198.51.100.{rng.integers(256)}")
        elif i % 3 == 1:
            lines.append(f"{rng.integers(1, 224)}.{rng.integers(256)}.1.1,{rng.integers(1, 224)}.2.3.4")
        else:
            lines.append(f"{rng.integers(1, 224)}.9.9.9 → {rng.integers(1, 224)}.7.7.7")
    lines += ["not a pair", "1.2.3.4"]
    path = tmp_path / "pairs.txt"
    path.write_text("\n".join(lines) + "\n")
    code, out, err = _run(capsys, "exact", "--input", str(path), "--hierarchy", PAIRS, "--tau", "20%")
    assert code == 0, err
    assert "bad_pair" in err  # the operational line: unparsable pairs, counted on stderr
    assert "10.20.0.0/16 → 198.51.100.0/24" in {x["prefix"] for x in json.loads(out)["hhh"]}
    code, out, err = _run(
        capsys, "hhh", "--input", str(path), "--hierarchy", PAIRS, "--epsilon", "8", "--delta", "1e-6",
        "--tau", "20%", "--format", "text",
    )  # fmt: skip
    assert code == 0, err
    assert "coverage: not claimed in 2-D" in out and "10.20.0.0/16 → 198.51.100.0/24" in out
    assert " 2,3 " in out  # the lattice node of a /16 → /24 pair
    code, out, _ = _run(
        capsys, "hhh", "--input", str(path), "--hierarchy", PAIRS, "--epsilon", "8", "--delta", "1e-6",
        "--tau", "20%", "--format", "csv",
    )  # fmt: skip
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {"node", "prefix", "verdict"} <= set(rows[0])


def test_flow_records_as_pairs(capsys, tmp_path: Path) -> None:
    rows = []
    for i in range(2000):
        dst = "203.0.113.5" if i % 2 else f"198.51.{i % 7}.{i % 250}"
        rows.append({"ip_src": f"45.38.{i % 3}.{i % 200}", "ip_dst": dst, "packets": 1 + i % 4, "bytes": 60,
                     "timestamp_start": "2021-06-05 03:58:45.551000"})  # fmt: skip
    rows.append({"ip_src": "45.38.0.1", "ip_dst": "2001:db8::1", "packets": 1, "bytes": 60,
                 "timestamp_start": "2021-06-05 03:58:45.551000"})  # fmt: skip
    rows.append({"ip_src": "45.38.0.1", "packets": 1, "bytes": 60, "timestamp_start": "2021-06-05 03:58:45.551000"})
    path = tmp_path / "flows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    code, out, err = _run(
        capsys, "exact", "--input", str(path), "--input-format", "flow-json", "--hierarchy", PAIRS, "--tau", "40%"
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["n"] == 2000  # the records with an IPv6 destination and without one are left out
    assert "missing_field" in err  # a missing destination is unparsable (operational line), not excluded
    assert "45.38.0.0/16 → 203.0.113.5/32" in {x["prefix"] for x in doc["hhh"]}
    code, out, err = _run(
        capsys, "exact", "--input", str(path), "--input-format", "flow-json", "--hierarchy", PAIRS,
        "--weight", "packets", "--weight-cap", "4", "--tau", "40%",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["n"] == sum(1 + i % 4 for i in range(2000))


def test_pairs_of_other_families_and_unreadable_pair_files_are_explained(capsys, tmp_path: Path) -> None:
    path = tmp_path / "single.txt"
    path.write_text("10.0.0.1\n10.0.0.2\n")
    code, _, err = _run(capsys, "exact", "--input", str(path), "--hierarchy", PAIRS, "--tau", "1")
    assert code == 1 and "pairs" in err and "A B" in err
    code, _, err = _run(capsys, "exact", "--input", str(path), "--hierarchy", "ipv6 x ipv4", "--tau", "1")
    assert code == 2 and "--hierarchy" in err
    with pytest.raises(SystemExit):
        main(["hhh", "--input", str(path), "--hierarchy", PAIRS, "--epsilon", "1", "--delta", "1e-6"])
