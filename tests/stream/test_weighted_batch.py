"""`dphhh hhh` / `dphhh exact` on weighted records: flow-JSON files and captures weighted by bytes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dphhh.stream.cli import main

from .test_cli import SYNACK, _require, _run

FLOWS = Path(__file__).resolve().parents[1] / "connectors" / "data" / "pmacct-ipfix-synack-head.jsonl"


def _flows(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """A pmacct JSON-lines file: a planted heavy /24 by bytes (few, large flows), many light flows,
    two bad lines; returns it and the exact bytes per planted prefix."""
    rng = np.random.default_rng(3)
    lines = []
    for i in range(40):  # 40 flows x 1,400 bytes from 198.51.100.0/24: heavy by bytes, light by records
        lines.append(
            {
                "ip_src": f"198.51.100.{i % 7}",
                "ip_dst": "10.0.0.1",
                "packets": 1,
                "bytes": 1400,
                "timestamp_start": "2026-12-01 10:00:00.000000",
            }
        )
    for _ in range(2000):  # 2,000 one-packet, 40-byte flows spread over 203.0.0.0/8
        lines.append(
            {
                "ip_src": f"203.{rng.integers(0, 256)}.{rng.integers(0, 256)}.{rng.integers(0, 256)}",
                "ip_dst": "10.0.0.1",
                "packets": 1,
                "bytes": 40,
                "timestamp_start": "2026-12-01 10:00:01.000000",
            }
        )
    order = rng.permutation(len(lines))
    text = "\n".join(json.dumps(lines[i]) for i in order) + "\n{not json\n" + '{"ip_src": "1.2.3.4"}\n'
    # a valid record of 0 packets and 0 bytes: one record, but nothing to count by packets or bytes
    text += '{"ip_src": "198.51.100.9", "ip_dst": "10.0.0.1", "packets": 0, "bytes": 0}\n'
    f = tmp_path / "flows.jsonl"
    f.write_text(text)
    return f, {"198.51.100.0/24": 40 * 1400, "203.0.0.0/8": 2000 * 40}


def test_exact_weighted_by_bytes_sums_the_flows(capsys, tmp_path: Path) -> None:
    """`exact --weight bytes` counts each flow's bytes (clipped at W); records count 1 each."""
    f, planted = _flows(tmp_path)
    code, out, err = _run(
        capsys,
        "exact",
        "--input",
        str(f),
        "--input-format",
        "flow-json",
        "--weight",
        "bytes",
        "--weight-cap",
        "1500",
        "--tau",
        "20000",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["n"] == sum(planted.values()) and doc["params"]["weight_cap"] == 1500
    assert {x["prefix"]: x["count"] for x in doc["hhh"] if x["level"]} == {
        "198.51.100.0/24": 56000,
        "203.0.0.0/8": 80000,
    }
    # NON-PRIVATE; the record without its bytes field has an address: somebody's record, not "unparsable"
    assert doc["diagnostics"]["skipped"] == {"bad_json": 1, "unusable_record": 1, "zero_weight": 1}
    code, out, _ = _run(capsys, "exact", "--input", str(f), "--input-format", "flow-json", "--tau", "30")
    by_records = json.loads(out)
    assert by_records["n"] == 2041 and "198.51.100.0/24" in {x["prefix"] for x in by_records["hhh"]}
    clipped = json.loads(
        _run(
            capsys,
            "exact",
            "--input",
            str(f),
            "--input-format",
            "flow-json",
            "--weight",
            "bytes",
            "--weight-cap",
            "100",
            "--tau",
            "20000",
        )[1]
    )
    assert clipped["n"] == 40 * 100 + 2000 * 40


def test_private_report_by_bytes_finds_the_heavy_prefix_and_states_the_unit(capsys, tmp_path: Path) -> None:
    """At a generous ε the bytes-weighted report finds the planted /24 and the /8; its guarantee is
    per record, weighted by bytes, clipped at W, at the group-privacy calibration ε/W."""
    f, _ = _flows(tmp_path)
    code, out, err = _run(
        capsys,
        "hhh",
        "--input",
        str(f),
        "--input-format",
        "flow-json",
        "--weight",
        "bytes",
        "--weight-cap",
        "1500",
        "--epsilon",
        "300",
        "--delta",
        "1e-6",
        "--tau",
        "20000",
        "--mode",
        "point",
        "--seed",
        "4",
    )
    assert code == 0, err
    report = json.loads(out)
    assert {x["prefix"] for x in report["hhh"] if x["level"]} == {"198.51.100.0/24", "203.0.0.0/8"}
    budget = report["budget"]
    assert budget["epsilon"] == 300 and budget["weight_cap"] == 1500 and budget["weight"] == "bytes"
    assert budget["event_level"]["epsilon"] == pytest.approx(300 / 1500)  # ε/W
    assert "one record of this window, each record weighted by bytes clipped at 1500" in report["guarantees"]["privacy"]
    assert report["params"]["epsilon"] == pytest.approx(0.2)


def test_group_delta_underflow_is_a_clear_error(capsys, tmp_path: Path) -> None:
    """At an ε so large that δ/(W·e^ε) underflows, the error says so (exit 2)."""
    f, _ = _flows(tmp_path)
    code, _, err = _run(
        capsys,
        "hhh",
        "--input",
        str(f),
        "--input-format",
        "flow-json",
        "--weight",
        "bytes",
        "--weight-cap",
        "1500",
        "--epsilon",
        "3000",
        "--delta",
        "1e-6",
        "--tau",
        "20000",
    )
    assert code == 2 and "underflows to 0" in err, err


def test_capture_weighted_by_ip_length(capsys) -> None:
    """`--weight bytes` on a capture weighs each packet by its IPv4 total length."""
    code, out, err = _run(
        capsys, "exact", "--input", str(_require(SYNACK)), "--weight", "bytes", "--weight-cap", "65535", "--tau", "1e9"
    )
    assert code == 0, err
    assert json.loads(out)["n"] == 403_291  # the IPv4 bytes of the capture's 7,996 IPv4 packets


def test_real_pmacct_records(capsys) -> None:
    """The real nfacctd records of the SYN-ACK capture (first 100) read by packets."""
    code, out, err = _run(
        capsys,
        "exact",
        "--input",
        str(FLOWS),
        "--input-format",
        "flow-json",
        "--weight",
        "packets",
        "--weight-cap",
        "1000",
        "--tau",
        "1e9",
    )
    assert code == 0, err
    assert json.loads(out)["n"] == sum(json.loads(line)["packets"] for line in FLOWS.read_text().splitlines())


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--input-format", "flow-json", "--weight", "bytes"], "--weight bytes needs --weight-cap W"),
        (["--weight", "packets"], "--weight packets needs flow records"),
        (
            ["--input-format", "flow-json", "--weight", "bytes", "--weight-cap", "0"],
            "--weight-cap must be an integer >= 1",
        ),
    ],
)
def test_bad_weighting_is_a_usage_error(capsys, tmp_path: Path, argv: list[str], message: str) -> None:
    """Weighted input without a cap, or weights a text file cannot have, exit 2 naming the option."""
    f, _ = _flows(tmp_path)
    if "flow-json" not in argv:
        f = tmp_path / "ips.txt"
        f.write_text("10.0.0.1\n")
    code, _, err = _run(capsys, "hhh", "--input", str(f), *argv, "--epsilon", "1", "--delta", "1e-6", "--tau", "10")
    assert code == 2 and message in err, err
    assert main  # the same parser serves exact
