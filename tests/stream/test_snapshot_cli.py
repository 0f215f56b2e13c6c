"""`dphhh snapshot …`: each offline module from a snapshot file to one JSON document."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from dphhh.stream.cli import main
from dphhh.stream.paths import DEMO_CAPTURE, capture


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    return _run_err(capsys, *argv)[0]


def _run_err(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[dict, str]:
    code = main(["snapshot", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out), err


@pytest.fixture
def ports_csv(tmp_path: Path) -> tuple[Path, np.ndarray]:
    rng = np.random.default_rng(3)
    ports = np.concatenate([np.full(30_000, 443), np.full(20_000, 22), rng.integers(1024, 65536, 10_000)])
    rng.shuffle(ports)
    f = tmp_path / "flows.csv"
    f.write_text("port,x\n" + "".join(f"{p},1\n" for p in ports) + "http,1\n70000,1\n")
    return f, ports


def test_lue_answers_ranges_close_to_the_truth(capsys, ports_csv) -> None:
    """LUE-DPTree over a csv port column answers ranges within a few noise scales; the bad row is counted
    on the operational line, the out-of-domain one (70000) nowhere."""
    f, ports = ports_csv
    doc, err = _run_err(
        capsys,
        "lue",
        "--input",
        str(f),
        "--column",
        "port",
        "--epsilon",
        "1",
        "--domain",
        "0:65535",
        "--query",
        "443:443",
        "--query",
        "0:1023",
        "--query",
        "1024:65535",
        "--seed",
        "5",
    )
    assert doc["schema"] == "dphhh.snapshot/1" and doc["module"] == "lue"
    assert set(doc["input"]) == {"path", "format", "out_of_domain"}
    assert doc["input"]["out_of_domain"].startswith("dropped")
    assert "dphhh snapshot lue: operational, not private: 1 unparsable record skipped (bad_int=1)" in err.splitlines()
    assert "out_of_domain" not in err
    assert doc["budget"]["epsilon"] == 1.0 and doc["budget"]["delta"] == 0.0
    assert "NOT private" in doc["randomness"]
    truth = [np.sum(ports == 443), np.sum(ports <= 1023), np.sum(ports >= 1024)]
    # error sd is at most sqrt(expected squared error) of a uniform query times a few: 200 is > 5 sd
    for answer, exact in zip(doc["answers"], truth):
        assert abs(answer["count"] - exact) < 200, answer


def test_lue_option_errors_name_the_option(capsys, ports_csv) -> None:
    """A query outside the domain or a malformed domain is a usage error (exit 2) naming the option."""
    f, _ = ports_csv
    assert (
        main(
            [
                "snapshot",
                "lue",
                "--input",
                str(f),
                "--column",
                "port",
                "--epsilon",
                "1",
                "--domain",
                "0:1023",
                "--query",
                "0:2000",
            ]
        )
        == 2
    )
    assert "--query: range 0:2000 is outside the domain 0:1023" in capsys.readouterr().err
    assert main(["snapshot", "lue", "--input", str(f), "--column", "port", "--epsilon", "1", "--domain", "9"]) == 2
    assert "--domain: expected a range a:b" in capsys.readouterr().err
    assert main(["snapshot", "lue", "--input", str(f), "--column", "port", "--epsilon", "0", "--domain", "0:9"]) == 2
    assert "--epsilon must be" in capsys.readouterr().err


def test_inftda_on_paths_is_consistent_and_needs_a_public_domain(capsys, tmp_path: Path) -> None:
    """InfTDA over a path file with a public domain: consistent integer counts; without a domain it refuses."""
    domain = tmp_path / "domain.txt"
    domain.write_text("de/by/muc\nde/by/nue\nde/be/ber\nfr/idf/par\n")
    data = tmp_path / "paths.txt"
    data.write_text("de/by/muc\n" * 3000 + "fr/idf/par\n" * 1000 + "xx/yy/zz\nde/by\n")
    doc, err = _run_err(
        capsys,
        "inftda",
        "--input",
        str(data),
        "--hierarchy",
        "path:3",
        "--domain",
        str(domain),
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--seed",
        "2",
    )
    # xx/yy/zz (outside the domain) and de/by (another depth) are valid records: counted nowhere
    assert "skipped" not in doc["input"] and "operational" not in err and "xx/yy/zz" not in json.dumps(doc)
    assert doc["budget"]["rho"] > 0 and doc["budget"]["delta"] == 1e-6
    levels = {lv["level"]: {c["prefix"]: c["count"] for c in lv["counts"]} for lv in doc["result"]["levels"]}
    for level in (1, 2, 3):
        assert sum(levels[level].values()) == levels[0]["*"]  # consistent at every level
        assert all(isinstance(c, int) and c >= 0 for c in levels[level].values())
    assert abs(levels[3]["de/by/muc"] - 3000) < 150
    assert (
        main(["snapshot", "inftda", "--input", str(data), "--hierarchy", "path:3", "--epsilon", "1", "--delta", "1e-6"])
        == 2
    )
    assert "needs the public list of possible paths" in capsys.readouterr().err


CAPTURE = capture(DEMO_CAPTURE)


def test_hhh_on_the_capture_finds_the_reflection_prefixes(capsys) -> None:
    """Offline HHH of the SYN-ACK capture at tau=1000: the planner falls back to the baseline (Algorithm 1's
    guard) and the three heavy /8 prefixes are reported."""
    doc = _run(
        capsys, "hhh", "--input", str(CAPTURE), "--epsilon", "1", "--delta", "1e-6", "--tau", "1000", "--seed", "4"
    )
    assert doc["budget"]["mechanism"] == "stability_histogram"
    assert {"104.0.0.0/8", "107.0.0.0/8", "172.0.0.0/8"} <= {x["prefix"] for x in doc["result"]["hhh"]}
    assert "skipped" not in doc["input"]  # the 4 non-IPv4 packets are counted nowhere


def test_hhh_algorithm1_guard_and_planner_need_their_inputs(capsys) -> None:
    """Algorithm 1 below its guard, and auto mode above it without a public n, are usage errors naming why."""
    assert (
        main(
            [
                "snapshot",
                "hhh",
                "--input",
                str(CAPTURE),
                "--epsilon",
                "1",
                "--delta",
                "1e-6",
                "--tau",
                "1000",
                "--algorithm",
                "algorithm1",
            ]
        )
        == 2
    )
    assert "smallest allowed tau" in capsys.readouterr().err
    assert main(["snapshot", "hhh", "--input", str(CAPTURE), "--epsilon", "1", "--delta", "1e-6", "--tau", "1e7"]) == 2
    assert "--expected-n" in capsys.readouterr().err
    doc = _run(
        capsys,
        "hhh",
        "--input",
        str(CAPTURE),
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--tau",
        "1e7",
        "--expected-n",
        "8000",
        "--seed",
        "1",
    )
    assert doc["result"]["plan"]["choice"] in ("algorithm1", "stability_histogram") and doc["result"]["hhh"] == []


def test_ahead_answers_one_and_two_dimensional_ranges(capsys, tmp_path: Path) -> None:
    """AHEAD over one column answers range fractions near the truth; over two columns it answers boxes."""
    rng = np.random.default_rng(8)
    a = np.where(rng.random(50_000) < 0.5, 3, rng.integers(0, 64, 50_000))
    b = rng.integers(0, 16, 50_000)
    f = tmp_path / "t.jsonl"
    f.write_text("".join(f'{{"a": {x}, "b": {y}}}\n' for x, y in zip(a, b)) + '{"a": 99, "b": 1}\n')
    doc = _run(
        capsys,
        "ahead",
        "--input",
        str(f),
        "--column",
        "a",
        "--domain",
        "0:63",
        "--epsilon",
        "2",
        "--query",
        "0:7",
        "--query",
        "3:3",
        "--seed",
        "3",
    )
    assert "skipped" not in doc["input"] and doc["budget"]["delta"] == 0.0  # 99 is clamped to 63, uncounted
    assert "users" not in json.dumps(doc["result"]["summary"])
    truth = [np.mean(a <= 7), np.mean(a == 3)]
    # LDP noise at N = 5e4, eps = 2: a range's sd is about 0.01; 0.06 is a wide margin (seeded run)
    for answer, exact in zip(doc["answers"], truth):
        assert abs(answer["fraction"] - exact) < 0.06, answer
    doc = _run(
        capsys,
        "ahead",
        "--input",
        str(f),
        "--column",
        "a",
        "--column",
        "b",
        "--domain",
        "0:63",
        "--domain",
        "0:15",
        "--epsilon",
        "2",
        "--query",
        "0:63,0:7",
        "--seed",
        "3",
    )
    assert abs(doc["answers"][0]["fraction"] - np.mean(b <= 7)) < 0.1
    assert main(["snapshot", "ahead", "--input", str(f), "--column", "a", "--epsilon", "1"]) == 2
    assert "--domain: give one LO:HI per column" in capsys.readouterr().err


def test_every_module_reads_well_as_text_and_csv(capsys, tmp_path: Path, ports_csv) -> None:
    """--format text gives a table a person can read (hhh: verdicts and intervals with their legend;
    inftda: each level's error bound and at most its 20 largest counts, saying how to get all; lue:
    counts and the expected error; ahead: fractions and percentages); --format csv gives one header
    and one row per item with the module's vocabulary."""
    import csv
    import io

    f, _ = ports_csv
    rng = np.random.default_rng(4)
    ips = tmp_path / "a.txt"
    lines = [f"10.1.{rng.integers(0, 4)}.{rng.integers(0, 256)}" for _ in range(3000)]
    lines += [f"{rng.integers(1, 223)}.{rng.integers(0, 256)}.1.1" for _ in range(1500)]
    ips.write_text("\n".join(lines) + "\n")
    runs = {
        "hhh": ["hhh", "--input", str(ips), "--epsilon", "1", "--delta", "1e-6", "--tau", "500"],
        "inftda": ["inftda", "--input", str(ips), "--hierarchy", "ipv4:8,16", "--epsilon", "1", "--delta", "1e-6"],
        "lue": ["lue", "--input", str(f), "--column", "port", "--epsilon", "1", "--domain", "0:65535"]
        + ["--query", "443:443", "--query", "0:1023"],
        "ahead": ["ahead", "--input", str(f), "--column", "port", "--epsilon", "1", "--domain", "0:65535"]
        + ["--query", "443:443", "--query", "0:1023"],
    }
    headers = {
        "hhh": ["prefix", "level", "verdict", "count", "lower", "upper"],
        "inftda": ["level", "prefix", "count", "error_bound"],
        "lue": ["range", "count"],
        "ahead": ["range", "fraction"],
    }
    for module, argv in runs.items():
        assert main(["snapshot", *argv, "--seed", "1", "--format", "csv"]) == 0
        table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
        assert table and list(table[0]) == headers[module], (module, table[:1])
        assert main(["snapshot", *argv, "--seed", "1", "--format", "text"]) == 0
        text = capsys.readouterr().out
        assert text.startswith(f"dphhh snapshot {module}") and "privacy: " in text, text
        assert all(len(line) <= 100 for line in text.splitlines() if str(tmp_path) not in line), module
        if module == "hhh":
            assert re.search(r"verdict\s+lvl\s+prefix\s+count\s+lower\s+upper", text)
            assert re.search(r"heavy\s+3\s+10\.1\.0\.0/24", text) and "1 - beta" in text and "tau 500" in text
        elif module == "inftda":
            blocks = re.split(r"\n  level \d+ ", text)[1:]
            assert len(blocks) == 3 and all("error bound +-" in b for b in blocks)
            for block in blocks:
                assert len(re.findall(r"^    \S+/\d+ +\d", block, flags=re.M)) <= 20
            assert "more: --format csv or --format json lists every count" in text
            assert sum(1 for row in table if row["level"] == "1") > 20  # csv lists them all
        elif module == "lue":
            assert re.search(r"range\s+count\n\s+443:443\s+[\d,]+", text) and "Expected squared error" in text
        else:
            assert re.search(r"range\s+fraction\s+percent\n\s+443:443\s+0\.\d{4}\s+\d+\.\d\d %", text)
            assert "epsilon = 1, local DP" in text
